/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 * $COPYRIGHT$
 * SPDX-License-Identifier: BSD-3-Clause
 *
 * Send window: outstanding segments and ACK classification
 * (btl_usnic_window.h), started just below the 16-bit wrap.
 */

#include "btl_usnic_window.h"
#include "usnic_test.h"

#define ISN 65530

USNIC_TEST(tx_window_init)
{
    usnic_tx_window_t w;

    usnic_tx_window_init(&w, ISN, 8);
    check_int_eq(w.next_seq_to_send, ISN);
    check_int_eq(w.ack_seq_rcvd, ISN - 1);
    check_int_eq(usnic_tx_window_inflight(&w), 0);
    check(usnic_tx_window_open(&w));
    return 0;
}

USNIC_TEST(tx_window_inflight)
{
    usnic_tx_window_t w;

    usnic_tx_window_init(&w, ISN, 10);
    for (int i = 1; i <= 10; ++i) {
        check(usnic_tx_window_open(&w));
        ++w.next_seq_to_send;
        check_int_eq(usnic_tx_window_inflight(&w), i);
    }
    /* 65530..3 sent: closed at exactly size outstanding */
    check_int_eq(w.next_seq_to_send, 4);
    check(!usnic_tx_window_open(&w));
    usnic_tx_window_resize(&w, 11);
    check(usnic_tx_window_open(&w));
    usnic_tx_window_resize(&w, 10);

    /* an ACK of 65535 leaves 0..3 outstanding */
    w.ack_seq_rcvd = 65535;
    check_int_eq(usnic_tx_window_inflight(&w), 4);
    check(usnic_tx_window_open(&w));
    w.ack_seq_rcvd = 3;
    check_int_eq(usnic_tx_window_inflight(&w), 0);
    return 0;
}

USNIC_TEST(tx_classify_ack)
{
    usnic_tx_window_t w;

    /* 65530..3 sent, 65530 and 65531 acknowledged */
    usnic_tx_window_init(&w, ISN, 64);
    w.next_seq_to_send = 4;
    w.ack_seq_rcvd = 65531;

    check_int_eq(usnic_tx_classify_ack(&w, 65532), USNIC_ACK_NEW);
    check_int_eq(usnic_tx_classify_ack(&w, 65535), USNIC_ACK_NEW);
    check_int_eq(usnic_tx_classify_ack(&w, 0), USNIC_ACK_NEW);
    check_int_eq(usnic_tx_classify_ack(&w, 3), USNIC_ACK_NEW);

    check_int_eq(usnic_tx_classify_ack(&w, 65531), USNIC_ACK_DUP);

    check_int_eq(usnic_tx_classify_ack(&w, 65530), USNIC_ACK_OLD);
    check_int_eq(usnic_tx_classify_ack(&w, ISN - 1), USNIC_ACK_OLD);
    check_int_eq(usnic_tx_classify_ack(&w, 65000), USNIC_ACK_OLD);

    /* never sent: next_seq_to_send itself and beyond, across the wrap */
    check_int_eq(usnic_tx_classify_ack(&w, 4), USNIC_ACK_BOGUS);
    check_int_eq(usnic_tx_classify_ack(&w, 5), USNIC_ACK_BOGUS);
    check_int_eq(usnic_tx_classify_ack(&w, 1000), USNIC_ACK_BOGUS);
    return 0;
}

USNIC_TEST(tx_classify_ack_nothing_sent)
{
    usnic_tx_window_t w;

    usnic_tx_window_init(&w, ISN, 64);
    check_int_eq(usnic_tx_classify_ack(&w, ISN - 1), USNIC_ACK_DUP);
    check_int_eq(usnic_tx_classify_ack(&w, ISN), USNIC_ACK_BOGUS);
    check_int_eq(usnic_tx_classify_ack(&w, 0), USNIC_ACK_BOGUS);
    check_int_eq(usnic_tx_classify_ack(&w, ISN - 2), USNIC_ACK_OLD);
    return 0;
}

USNIC_TEST(rto_adapts_and_backs_off)
{
    usnic_rto_t r;

    usnic_rto_init(&r, 5000, 1000000);
    check_int_eq(r.rto_us, 5000);
    /* fast samples never go below the minimum */
    usnic_rto_sample(&r, 100);
    check_int_eq(r.rto_us, 5000);
    /* a slow path raises it: first sample gives srtt + 4 * srtt/2 */
    usnic_rto_init(&r, 5000, 1000000);
    usnic_rto_sample(&r, 4000);
    check_int_eq(r.rto_us, 12000);
    /* steady samples shrink the deviation, and with it the timeout */
    for (int i = 0; i < 50; ++i) {
        usnic_rto_sample(&r, 4000);
    }
    check(r.rto_us == 5000);
    usnic_rto_backoff(&r);
    check_int_eq(r.rto_us, 10000);
    for (int i = 0; i < 30; ++i) {
        usnic_rto_backoff(&r);
    }
    check_int_eq(r.rto_us, 1000000);
    /* a sample after back-off brings it down again */
    usnic_rto_sample(&r, 4000);
    check(r.rto_us < 1000000);
    /* so does new progress without a sample: back to what samples say */
    usnic_rto_backoff(&r);
    usnic_rto_backoff(&r);
    usnic_rto_unback(&r);
    check_int_eq(r.rto_us, 5000);
    usnic_rto_init(&r, 5000, 1000000);
    usnic_rto_backoff(&r);
    usnic_rto_unback(&r);
    check_int_eq(r.rto_us, 5000);
    return 0;
}

/* Dead-peer verdicts (timeout 8 s): watch and ping from a quarter of it,
 * dead after the timeout without a sign of life and half of it watched. */
USNIC_TEST(peer_judge)
{
    usnic_peer_watch_t w = {0, 0};
    const double T = 8;

    check(usnic_peer_ping_interval(T) == 1.0);
    check(usnic_peer_ping_interval(2) == 0.25);
    check(usnic_peer_busy_idle(T) == 1.0);
    check(usnic_peer_busy_idle(2) == 0.5);
    check_int_eq(usnic_peer_judge(&w, 101.9, 100, T, false), USNIC_PEER_OK);
    check(0 == w.watch_since);
    /* a quarter of the timeout: watched, pinged once per interval */
    check_int_eq(usnic_peer_judge(&w, 102, 100, T, false), USNIC_PEER_PING);
    check(102 == w.watch_since);
    check_int_eq(usnic_peer_judge(&w, 102.5, 100, T, false), USNIC_PEER_OK);
    check_int_eq(usnic_peer_judge(&w, 103, 100, T, false), USNIC_PEER_PING);
    /* a sign of life (an ACK, a busy answer) ends the stall */
    check_int_eq(usnic_peer_judge(&w, 105, 104.5, T, false), USNIC_PEER_OK);
    check(0 == w.watch_since);
    /* none for the timeout, watched for more than half of it: dead */
    check_int_eq(usnic_peer_judge(&w, 106.5, 104.5, T, false), USNIC_PEER_PING);
    check_int_eq(usnic_peer_judge(&w, 112.4, 104.5, T, false), USNIC_PEER_PING);
    check_int_eq(usnic_peer_judge(&w, 112.5, 104.5, T, false), USNIC_PEER_DEAD);

    /* a stall first noticed late is watched for half the timeout first */
    memset(&w, 0, sizeof(w));
    check_int_eq(usnic_peer_judge(&w, 110, 100, T, false), USNIC_PEER_PING);
    check(usnic_peer_judge(&w, 113.9, 100, T, false) != USNIC_PEER_DEAD);
    check_int_eq(usnic_peer_judge(&w, 114, 100, T, false), USNIC_PEER_DEAD);

    /* back from being away: the watch starts over */
    w.watch_since = 102;
    w.last_ping = 103;
    check_int_eq(usnic_peer_judge(&w, 130, 100, T, true), USNIC_PEER_PING);
    check(130 == w.watch_since);
    check(usnic_peer_judge(&w, 133.9, 100, T, false) != USNIC_PEER_DEAD);
    check_int_eq(usnic_peer_judge(&w, 134, 100, T, false), USNIC_PEER_DEAD);
    return 0;
}

/* No loss, no congestion window: only the peer's buffers limit. */
USNIC_TEST(tx_cwnd_open_until_loss)
{
    usnic_tx_window_t w;

    usnic_tx_window_init(&w, ISN, 200);
    check_int_eq(w.cwnd, USNIC_CWND_OPEN);
    w.next_seq_to_send = (uint16_t)(ISN + 199);
    usnic_tx_cwnd_acked(&w, 50);
    check_int_eq(w.cwnd, USNIC_CWND_OPEN);
    check(usnic_tx_window_open(&w));
    return 0;
}

/* A duplicate ACK halves the window in flight, once per window of data;
 * a timeout restarts from USNIC_CWND_MIN. */
USNIC_TEST(tx_cwnd_cut_once_per_window)
{
    usnic_tx_window_t w;

    usnic_tx_window_init(&w, ISN, 256);
    w.next_seq_to_send = (uint16_t)(ISN + 100);     /* 100 in flight */
    check(usnic_tx_cwnd_loss(&w, false));
    check_int_eq(w.cwnd, 50);
    check_int_eq(w.ssthresh, 50);
    check(!usnic_tx_window_open(&w));
    /* more holes among the same 100: the same congestion event */
    w.ack_seq_rcvd = (uint16_t)(ISN + 40);
    check(!usnic_tx_cwnd_loss(&w, false));
    check(!usnic_tx_cwnd_loss(&w, true));
    check_int_eq(w.cwnd, 50);
    /* all 100 acknowledged: a new loss is a new event */
    w.ack_seq_rcvd = (uint16_t)(ISN + 99);
    usnic_tx_cwnd_acked(&w, 59);
    w.next_seq_to_send = (uint16_t)(ISN + 130);     /* 30 in flight */
    check(usnic_tx_cwnd_loss(&w, true));
    check_int_eq(w.ssthresh, 15);
    check_int_eq(w.cwnd, USNIC_CWND_MIN);
    /* never below the minimum */
    w.ack_seq_rcvd = (uint16_t)(ISN + 129);
    usnic_tx_cwnd_acked(&w, 30);
    w.next_seq_to_send = (uint16_t)(ISN + 132);
    check(usnic_tx_cwnd_loss(&w, false));
    check_int_eq(w.ssthresh, USNIC_CWND_MIN);
    check_int_eq(w.cwnd, USNIC_CWND_MIN);
    return 0;
}

/* Growth: per ACKed segment up to ssthresh, then one per window; open
 * again at the peer's buffers. */
USNIC_TEST(tx_cwnd_grows_back)
{
    usnic_tx_window_t w;
    uint32_t acked = 0;

    usnic_tx_window_init(&w, ISN, 64);
    w.next_seq_to_send = (uint16_t)(ISN + 40);
    check(usnic_tx_cwnd_loss(&w, true));
    check_int_eq(w.cwnd, USNIC_CWND_MIN);
    check_int_eq(w.ssthresh, 20);
    w.ack_seq_rcvd = (uint16_t)(ISN + 39);
    usnic_tx_cwnd_acked(&w, 10);
    check_int_eq(w.cwnd, 14);
    usnic_tx_cwnd_acked(&w, 10);
    check_int_eq(w.cwnd, 20);                       /* capped at ssthresh */
    usnic_tx_cwnd_acked(&w, 19);
    check_int_eq(w.cwnd, 20);
    usnic_tx_cwnd_acked(&w, 1);
    check_int_eq(w.cwnd, 21);                       /* a window's worth: +1 */
    while (USNIC_CWND_OPEN != w.cwnd && acked < 10000) {
        usnic_tx_cwnd_acked(&w, 1);
        ++acked;
    }
    check_int_eq(w.cwnd, USNIC_CWND_OPEN);
    /* 21 + 22 + ... + 63 segments to climb from 21 to 64 */
    check_int_eq(acked, (21 + 63) * 43 / 2);
    return 0;
}

/* cwnd bounds what is in flight, below the peer's buffers. */
USNIC_TEST(tx_cwnd_bounds_inflight)
{
    usnic_tx_window_t w;

    usnic_tx_window_init(&w, ISN, 64);
    w.next_seq_to_send = (uint16_t)(ISN + 20);
    check(usnic_tx_cwnd_loss(&w, false));           /* cwnd 10 */
    w.ack_seq_rcvd = (uint16_t)(ISN + 10);          /* 9 in flight */
    check(usnic_tx_window_open(&w));
    w.next_seq_to_send = (uint16_t)(ISN + 21);      /* 10 in flight */
    check(!usnic_tx_window_open(&w));
    return 0;
}

/* A late peer's floor: above how late, capped, never lowered by a raise;
 * lowered by halves back to the configured floor. */
USNIC_TEST(rto_late_floor)
{
    usnic_rto_t r;

    usnic_rto_init(&r, 5000, 1000000);
    usnic_rto_raise_floor(&r, 8000, 80000);
    check_int_eq(r.min_us, 10000);
    check_int_eq(r.rto_us, 10000);
    usnic_rto_raise_floor(&r, 1000, 80000);         /* no lower */
    check_int_eq(r.min_us, 10000);
    usnic_rto_raise_floor(&r, 1e7, 80000);          /* capped */
    check_int_eq(r.min_us, 80000);
    usnic_rto_sample(&r, 100);
    check_int_eq(r.rto_us, 80000);
    check(usnic_rto_lower_floor(&r));
    check_int_eq(r.min_us, 40000);
    check_int_eq(r.rto_us, 40000);
    check(usnic_rto_lower_floor(&r));
    check(usnic_rto_lower_floor(&r));
    check(usnic_rto_lower_floor(&r));
    check_int_eq(r.min_us, 5000);
    check(!usnic_rto_lower_floor(&r));
    check_int_eq(r.base_us, 5000);
    /* the ceiling bounds it too */
    usnic_rto_init(&r, 5000, 20000);
    usnic_rto_raise_floor(&r, 1e6, 80000);
    check_int_eq(r.min_us, 20000);
    return 0;
}

/* The reordering window: none until a proof, a quarter of the smoothed
 * round trip per proof up to the whole; USNIC_REO_PERSIST losses with no
 * proof between take it away, a proof between starts the count again. */
USNIC_TEST(reo_window_grows_and_lapses)
{
    usnic_reo_t r = {0, 0};
    usnic_rto_t rto;

    usnic_rto_init(&rto, 5000, 1000000);
    usnic_rto_sample(&rto, 800);
    check(rto.srtt_us > 0);
    check(0 == usnic_reo_wait_us(&r, &rto));
    usnic_reo_loss(&r);                             /* no window to lose */
    check_int_eq(r.steps, 0);
    usnic_reo_proven(&r);
    check(usnic_reo_wait_us(&r, &rto) == rto.srtt_us / 4);
    for (int i = 0; i < 10; ++i) {
        usnic_reo_proven(&r);
    }
    check(usnic_reo_wait_us(&r, &rto) == rto.srtt_us);
    for (int i = 0; i < USNIC_REO_PERSIST - 1; ++i) {
        usnic_reo_loss(&r);
    }
    check_int_eq(r.steps, USNIC_REO_STEPS_MAX);
    usnic_reo_proven(&r);
    for (int i = 0; i < USNIC_REO_PERSIST - 1; ++i) {
        usnic_reo_loss(&r);
    }
    check_int_eq(r.steps, USNIC_REO_STEPS_MAX);
    usnic_reo_loss(&r);
    check_int_eq(r.steps, 0);
    check(0 == usnic_reo_wait_us(&r, &rto));
    return 0;
}

/* Losses a run apart are congestion; a lone one is noise (no cut for it). */
USNIC_TEST(tx_loss_clustered)
{
    usnic_tx_window_t w;

    usnic_tx_window_init(&w, ISN, 256);
    check(!usnic_tx_loss_clustered(&w, (uint16_t)(ISN + 10)));       /* the first */
    check(usnic_tx_loss_clustered(&w, (uint16_t)(ISN + 11)));        /* the next one */
    check(usnic_tx_loss_clustered(&w, (uint16_t)(ISN + 11 + USNIC_CWND_LOSS_SPAN)));
    check(!usnic_tx_loss_clustered(&w, (uint16_t)(ISN + 28 + USNIC_CWND_LOSS_SPAN)));
    /* across the wrap of the sequence numbers */
    check(!usnic_tx_loss_clustered(&w, 65530));
    check(usnic_tx_loss_clustered(&w, 3));
    return 0;
}

/* One round of the path's window: the window fills at t_us (a round starts
 * unless one runs), `acked` segments are ACKed over dur_us, the window
 * fills again during it if `blocked`, and the ACK of the round's last send
 * ends it.  Returns the window after. */
static uint32_t bdp_round(usnic_tx_window_t *w, double *t_us, uint32_t acked, double dur_us,
                          bool blocked, bool loss)
{
    usnic_tx_bdp_blocked(w, *t_us);
    w->next_seq_to_send = (uint16_t)(w->next_seq_to_send + acked);
    if (blocked) {
        usnic_tx_bdp_blocked(w, *t_us + dur_us / 2);
    }
    w->round_loss |= loss;
    w->ack_seq_rcvd = (uint16_t)(w->ack_seq_rcvd + acked);
    check(usnic_tx_bdp_round_done(w, w->ack_seq_rcvd));
    *t_us += dur_us;
    usnic_tx_bdp_round_end(w, *t_us);
    /* (each call starts from a window that just filled) */
    w->round_active = false;
    return w->limit;
}

/* The window follows the path: it doubles while a doubled window delivers
 * at least 1/8 more per unit of time (the path held more), goes back when
 * it does not (the extra only queued) and waits USNIC_BDP_HOLD rounds
 * before trying again; rounds with a loss or with an unfilled window
 * change nothing; the peer's buffers (size) bound it, and so does a cut
 * congestion window.  Across the 16-bit wrap. */
USNIC_TEST(tx_bdp_follows_path)
{
    usnic_tx_window_t w;
    double t = 1000;

    usnic_tx_window_init(&w, ISN, 2000);
    check_int_eq(w.limit, USNIC_TX_WINDOW_INIT);
    /* an ACK that does not reach a round's last send does not end it */
    usnic_tx_bdp_blocked(&w, t);
    check(w.round_active);
    check(!usnic_tx_bdp_round_done(&w, (uint16_t)(w.next_seq_to_send - 2)));
    w.round_active = false;

    /* 256 per 100 us, then a probe at 512 delivers twice as much: grows */
    check_int_eq(bdp_round(&w, &t, 256, 100, true, false), 512);
    check(w.probing);
    check_int_eq(bdp_round(&w, &t, 512, 100, true, false), 1024);
    /* 1024 delivers no more than 512 did (the RTT doubled): back to 512 */
    check_int_eq(bdp_round(&w, &t, 1024, 200, true, false), 512);
    check(!w.probing);
    check_int_eq(w.hold, USNIC_BDP_HOLD);
    /* no probe while the hold lasts */
    for (int i = 0; i < USNIC_BDP_HOLD; ++i) {
        check_int_eq(bdp_round(&w, &t, 512, 100, true, false), 512);
    }
    check_int_eq(w.hold, 0);
    /* then it tries again; the path changed and holds more now */
    check_int_eq(bdp_round(&w, &t, 512, 100, true, false), 1024);
    check_int_eq(bdp_round(&w, &t, 1024, 110, true, false), 2000);
    /* up to the peer's buffers, not beyond */
    check_int_eq(bdp_round(&w, &t, 2000, 150, true, false), 2000);
    check(!w.probing);

    /* a round with a loss, or whose window did not fill, says nothing */
    usnic_tx_window_init(&w, ISN, 4096);
    check_int_eq(bdp_round(&w, &t, 256, 100, true, true), 256);
    check_int_eq(bdp_round(&w, &t, 100, 100, false, false), 256);
    check_int_eq(bdp_round(&w, &t, 256, 100, true, false), 512);
    /* a probe whose next round has a loss stays, unconfirmed */
    check_int_eq(bdp_round(&w, &t, 300, 100, true, true), 512);
    check(!w.probing);
    /* the congestion window still bounds it after a cut */
    w.next_seq_to_send = (uint16_t)(w.ack_seq_rcvd + 1 + 400);
    check(usnic_tx_cwnd_loss(&w, false));
    check_int_eq(w.limit, 200);
    check_int_eq(w.bdp, 512);
    /* and rounds it limits teach nothing: bdp does not grow past it
     * unmeasured (a sender held to 4 segments after a timeout would
     * otherwise double bdp every round) */
    w.cut_active = false;
    usnic_tx_bdp_blocked(&w, t);
    check(!w.round_active);
    w.round_active = true;
    w.round_blocked = true;
    w.round_seq = w.ack_seq_rcvd;
    w.round_start_us = t;
    check(!usnic_tx_bdp_round_end(&w, t + 100));
    check_int_eq(w.bdp, 512);
    /* and a smaller peer share bounds it too */
    usnic_tx_window_init(&w, ISN, 64);
    check_int_eq(w.limit, 64);
    check_int_eq(bdp_round(&w, &t, 64, 100, true, false), 64);
    check(!w.probing);
    return 0;
}

/* A round that ends with everything ACKed starts no next one: it would end
 * at the first ACK after the sender's pause and count the pause. */
USNIC_TEST(tx_bdp_no_round_when_drained)
{
    usnic_tx_window_t w;

    usnic_tx_window_init(&w, ISN, 2000);
    usnic_tx_bdp_blocked(&w, 0);
    w.next_seq_to_send = (uint16_t)(w.next_seq_to_send + 10);
    usnic_tx_bdp_blocked(&w, 5);
    check(w.round_blocked);
    w.ack_seq_rcvd = (uint16_t)(w.next_seq_to_send - 1);
    usnic_tx_bdp_round_end(&w, 10);
    check(!w.round_active);
    /* with data still in flight the next round starts at once */
    usnic_tx_bdp_blocked(&w, 20);
    w.next_seq_to_send = (uint16_t)(w.next_seq_to_send + 10);
    usnic_tx_bdp_blocked(&w, 25);
    w.ack_seq_rcvd = (uint16_t)(w.ack_seq_rcvd + 5);
    check(usnic_tx_bdp_round_done(&w, w.ack_seq_rcvd));
    usnic_tx_bdp_round_end(&w, 30);
    check(w.round_active);
    check_int_eq(w.round_seq, (uint16_t)(w.next_seq_to_send - 1));
    return 0;
}
