/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 * $COPYRIGHT$
 * SPDX-License-Identifier: BSD-3-Clause
 *
 * Retransmit and liveness policy.  Every knob, and where it acts (what a
 * received ACK does, handle_ack and new_ack, is inline in
 * btl_usnic_retrans_ack.h):
 *
 * minimum timeout  btl_usnic_retrans_timeout (5000 us) is the floor of the
 *                  retransmit timeout (RTO), USNIC_MAX_RTO_US (1 s) its
 *                  ceiling.  In between, the RTO is the smoothed round trip
 *                  plus four deviations (RFC 6298, usnic_rto_* in the pure
 *                  btl_usnic_window.c), sampled every
 *                  USNIC_RTT_SAMPLE_EVERY (8) round trips from a segment
 *                  sent only once: retrans_init, retrans_first_send
 *                  (inline, btl_usnic_retrans.h), handle_ack; a resend of
 *                  the timed segment or of one below it cancels the sample
 *                  and the next round trip is timed (retrans_resend); so
 *                  does a probe (timer_expired).
 * timer            one deadline per endpoint, running while anything is
 *                  unacknowledged and pushed back by every ACK that moves
 *                  the window (new_ack), so a long burst that drains
 *                  slowly never expires; progress checks it (check_timers),
 *                  and a timer started or pushed back since the last check
 *                  gets its deadline there, from the one clock read of
 *                  that pass.  Other passes skip the walk until the
 *                  earliest deadline of the module, and a pass that
 *                  finds only one endpoint listed sets its deadline alone
 *                  (timers_pass).
 *                  On expiry only the oldest unacknowledged segment is
 *                  resent: a slow receiver, the usual cause on a lossless
 *                  link, then costs one duplicate, not a window of them;
 *                  and not even that when the device's network showed
 *                  no loss for USNIC_LOSS_MEMORY_US (btl_usnic_timer_probe;
 *                  module->loss_seen_us, any peer, either direction): the
 *                  expiry sends a probe (an ACK with USNIC_HDR_ACK_REQ
 *                  naming the segment, opal_btl_usnic_send_probe), the
 *                  peer's answer (USNIC_ACK_PROBED) covers the segment, or
 *                  says it missing: it is resent at once (probe_answered),
 *                  but where the channels are queues of their own
 *                  (limits.channels_apart: verbs) only at the second such
 *                  answer, the first one's expiry probing again (a
 *                  datagram of the other channel may reach the peer after
 *                  the probe); each expiry
 *                  without an answer probes again, the USNIC_PROBES_MAX
 *                  (6) + 1st resends.  An answer that says the peer had the
 *                  segment unacknowledged (USNIC_ACK_PROBE_LATE) raises
 *                  the floor as a late peer's duplicate does (below).
 *                  If the device has not completed that segment's send
 *                  yet, it was not late: the timer starts again instead.
 *                  A poll of the pass that came back full may hide the
 *                  ACK: the timer then waits up to one more RTO; and after
 *                  a gap of more than half btl_usnic_retrans_timeout since
 *                  the last check (this process was descheduled or
 *                  computing, its peer maybe too), what is due waits half
 *                  an RTO more (check_timers).
 * backoff          the RTO doubles, up to the ceiling, at every expiry
 *                  (timer_expired); the first ACK that moves the window
 *                  undoes it (new_ack).
 * spurious timeout a receiver that gets a segment below its window again
 *                  names it in its next ACK (USNIC_ACK_DUP_SEEN, dup_seq).
 *                  Naming the last timer resend, it proves the timeout
 *                  spurious: recovery ends, the congestion cut and the
 *                  backoff are undone (flagged_ack).  If the receiver was
 *                  late (USNIC_ACK_DUP_LATE: it had not acknowledged the
 *                  original yet; or an ACK before the report covered it),
 *                  the endpoint's floor goes to 1.25 times how late, up to
 *                  USNIC_LATE_FLOOR_MAX (16) times the configured one, and
 *                  halves at an expiry USNIC_LATE_FLOOR_HOLD_US (1 s) after
 *                  (Eifel's response; timer_expired).  A lost ACK, whose
 *                  first replacement is the report, leaves it alone.  An
 *                  ACK that covers the resend and says the receiver got a
 *                  resend settles it: a copy of it later proves nothing
 *                  (nor does the receiver report one of a resend that
 *                  filled a hole).
 * recovery         after an expiry, until everything sent before it is
 *                  acknowledged, an ACK that stops short of it and says the
 *                  receiver got a resend (USNIC_ACK_RESEND_SEEN; resends
 *                  carry USNIC_HDR_RESEND) points at the next lost segment,
 *                  which is resent at once (NewReno's partial ACKs;
 *                  flagged_ack).  One from before may only show a receiver
 *                  catching up after a timeout that was too quick (F-RTO).
 * fast retransmit  an ACK that reports a run of segments after it missing,
 *                  the last of them lost (USNIC_ACK_HOLE, hole_run), resends
 *                  those of the run sent on the last one's channel, at once
 *                  unless the path reorders (below), once per hole
 *                  (flagged_ack, resend_lost).  The receiver
 *                  knows a loss, not a late segment, when one sent after it
 *                  on the same channel has arrived: each names its
 *                  channel's previous one (chan_prev), and each channel is
 *                  one queue pair, which keeps its order, while a segment on
 *                  one may overtake a backlog on the other; so the same
 *                  channel's segments before a lost one, missing too, are
 *                  lost (a burst, as a full queue drops, or a run of
 *                  datagrams sent as one message and dropped whole).  A
 *                  duplicate ACK alone resends nothing: the receiver repeats
 *                  its ACK while such a late segment is on its way.
 * reordering       a path that reorders within a channel (netem does; a
 *                  queue pair and a UDP flow on one path do not) makes late
 *                  segments look lost.  A fast resend the receiver then
 *                  gets twice (USNIC_ACK_DUP_SEEN naming one of the last
 *                  run it reported, none of them resent by the timer too,
 *                  nor a recovery's guess) proves it: from then on a
 *                  reported run waits, before it is resent, a quarter of
 *                  the smoothed round trip per proof, up to the whole, and
 *                  is not resent if acknowledged meanwhile (RACK's adaptive
 *                  window; hole_reported, hole_wait_over, usnic_reo_* of
 *                  btl_usnic_window.c).  After USNIC_REO_PERSIST (16) runs
 *                  that waited and were still missing, with no proof
 *                  between, runs go at once again.
 * congestion       btl_usnic_congestion_control (on): a fast retransmit of a
 *                  segment lost within USNIC_CWND_LOSS_SPAN (16) of the one
 *                  lost before it (a run of losses, as a full queue drops;
 *                  a lone loss is the path's noise: usnic_tx_loss_clustered)
 *                  halves the endpoint's congestion window, an expiry
 *                  restarts it from USNIC_CWND_MIN segments, once per window
 *                  of data (cut); ACKs grow it back, per segment up to half
 *                  the window at the loss, then one per window (AIMD), until
 *                  it reaches the peer's buffers and stops limiting (new_ack;
 *                  arithmetic in usnic_tx_cwnd_* of btl_usnic_window.c).  A
 *                  lossless link never meets it.
 * resend budget    btl_usnic_max_resends_per_iteration (16) retransmits per
 *                  progress pass, so that receives and their ACKs keep being
 *                  processed during a storm; a segment the device still owns
 *                  is not posted again (retrans_resend).
 * send budget      USNIC_SENDS_PER_PASS (32) first sends per progress pass
 *                  (opal_btl_usnic_progress_sends), so that a busy sender
 *                  polls its CQ, and takes its peers' ACKs, every 32 posts;
 *                  the priority receives, the ACKs, are drained each
 *                  pass (opal_btl_usnic_module_progress).  Its peers' ACKs
 *                  then fit its small priority receive queue.
 * ACK cadence      a standalone ACK for every USNIC_ACK_EVERY (16) accepted
 *                  datagrams, else after btl_usnic_ack_iteration_delay
 *                  progress passes without more and, counted from then,
 *                  at least ack_hold_us (btl_usnic_retrans_timeout / 8) in
 *                  time: a receiver polling faster than datagrams arrive
 *                  would otherwise acknowledge nearly each one, and the
 *                  bound keeps any hold far below a sender's timer.  At once
 *                  for an emulated PUT (complete at its origin when
 *                  acknowledged), a duplicate, a segment outside the
 *                  window, and one whose sender asks
 *                  (USNIC_HDR_ACK_REQ: its window is full, or a resend),
 *                  so that a small congestion window never waits for the
 *                  hold (the receive path asks, schedule_ack, inline in
 *                  btl_usnic_retrans.h).  Not for a completed fragment:
 *                  its ACK rides on the answer of a ping-pong.  Data
 *                  carries an owed ACK along (opal_btl_usnic_piggyback_ack,
 *                  btl_usnic_ack.h).
 * peer timeout     btl_usnic_peer_timeout (30 s), checked every
 *                  USNIC_PEER_CHECK_TICKS (256) progress calls for the
 *                  endpoints whose timer runs (check_dead_peers): from a
 *                  quarter of it (USNIC_PEER_WATCH_FRACTION) without an ACK
 *                  the peer's connectivity checker is pinged, every
 *                  min(timeout/8, 1 s); the peer is dead when for the whole
 *                  timeout it neither acknowledged nor answered busy, and
 *                  had at least half of it of our attention
 *                  (usnic_peer_judge in btl_usnic_window.c).
 */

#include "opal_config.h"

#include <math.h>

#include "opal/util/proc.h"

#include "btl_usnic.h"
#include "btl_usnic_connectivity.h"
#include "btl_usnic_endpoint.h"
#include "btl_usnic_module.h"
#include "btl_usnic_proc.h"
#include "btl_usnic_retrans.h"
#include "btl_usnic_retrans_ack.h"
#include "btl_usnic_send.h"
#include "btl_usnic_util.h"

/* A late peer's raise of the RTO floor: at most this many times the
 * configured floor, halved at an expiry a second after the last raise. */
#define USNIC_LATE_FLOOR_MAX 16
#define USNIC_LATE_FLOOR_HOLD_US 1e6
/* An expiry probes before it resends when the device's network showed no
 * loss for this long (a lossy one keeps resending at once). */
#define USNIC_LOSS_MEMORY_US 1e7
/* Unanswered probes for one segment before the timer resends it.  A probe
 * reaches the peer whenever a resend would, and its answer resends at once
 * what is missing: more probes cost only a run of lost probes, while a
 * peer kept off its CPU (3 ranks per host on the VM's 2 vCPUs stayed
 * silent through 3 backed-off probes, 75 ms and more) gets no copy. */
#define USNIC_PROBES_MAX 6

void opal_btl_usnic_retrans_init(opal_btl_usnic_endpoint_t *ep)
{
    usnic_rto_init(&ep->rto, (uint32_t) usnic_component.retrans_timeout, USNIC_MAX_RTO_US);
    ep->rtt_timing = false;
    ep->rtt_skip = 0;
    ep->reo.steps = ep->reo.persist = 0;
    ep->hole_waiting = false;
    ep->fast_open = false;
    ep->last_ack_time = opal_btl_usnic_now_us() / 1e6;
}

/* A loss seen: send less into the path that lost it (a segment reported
 * lost: only when it is one of a run; a timeout: always). */
static void cut(opal_btl_usnic_endpoint_t *ep, bool timeout, uint16_t lost_seq)
{
    /* (the path's window learns nothing from a round with a loss) */
    ep->tx.round_loss = true;
    if (!usnic_component.congestion_control) {
        return;
    }
    if (!timeout && !usnic_tx_loss_clustered(&ep->tx, lost_seq)) {
        return;
    }
    if (usnic_tx_cwnd_loss(&ep->tx, timeout)) {
        ++ep->module->stats.num_cwnd_cuts;
    }
}

/* ---- the retransmit timer ---- */

void opal_btl_usnic_retrans_timer_stop(opal_btl_usnic_endpoint_t *ep)
{
    opal_btl_usnic_timer_idle(ep);
    if (ep->on_timer_list) {
        opal_list_remove_item(&ep->module->endpoints_with_timers, &ep->timer_li);
        ep->on_timer_list = false;
    }
}

/* Resend seg, the oldest unacknowledged segment, first sent about sent_us,
 * for the timer (after a timeout that was backed off), and recover the rest
 * from the ACKs that follow. */
static int timer_resend(opal_btl_usnic_module_t *module, opal_btl_usnic_endpoint_t *ep,
                        opal_btl_usnic_send_seg_t *seg, double sent_us)
{
    if (NULL != seg && (!ep->tmo_pending || ep->tmo_seq != seg->seq)) {
        /* the first expiry for this segment: remember what to undo */
        ep->tmo_pending = true;
        ep->tmo_seq = seg->seq;
        ep->tmo_sent_us = sent_us;
        usnic_tx_cwnd_save(&ep->tx, &ep->tmo_cwnd);
    }
    cut(ep, true, 0);
    ep->in_recovery = true;
    ep->recover_seq = (uint16_t)(ep->tx.next_seq_to_send - 1);
    if (NULL == seg || seg->on_resend_list) {
        return 0;
    }
    opal_btl_usnic_queue_resend(module, seg);
    ++module->stats.num_timeout_retrans;
    /* (a hole report from before this resend arrived names it too) */
    if (USNIC_SEQ_DIFF16(seg->seq, ep->hole_resent_to) > 0) {
        ep->hole_resent_to = seg->seq;
    }
    /* (sent twice by us now: a copy of it proves no reordering) */
    if (ep->fast_open && USNIC_SEQ_DIFF16(seg->seq, ep->fast_lo) >= 0 &&
        USNIC_SEQ_DIFF16(seg->seq, ep->fast_hi) <= 0) {
        ep->fast_open = false;
    }
    return 1;
}

/* Probe or resend the oldest unacknowledged segment, and back off. */
static int timer_expired(opal_btl_usnic_module_t *module, opal_btl_usnic_endpoint_t *ep,
                         double now)
{
    opal_btl_usnic_send_seg_t *seg = ep->sent_segs[(uint16_t)(ep->tx.ack_seq_rcvd + 1) &
                                                   ep->tx_mask];
    /* (sent at least one timeout ago) */
    double sent_us = now - ep->rto.rto_us;
    int n = 0;

    if (NULL != seg && 0 != seg->posted) {
        /* This process's own device has not sent it yet (a deep send queue,
         * or a device that waits for a CPU, as Soft-RoCE does): nothing
         * says the path lost anything.  No backoff, no cut: a timeout
         * from now. */
        ++module->stats.num_timer_unsent;
        ep->rto_deadline_us = now + ep->rto.rto_us;
        ep->rto_graced = false;
        return 0;
    }
    /* (a late peer's raise wears off) */
    if (now - ep->floor_raised_us >= USNIC_LATE_FLOOR_HOLD_US &&
        usnic_rto_lower_floor(&ep->rto)) {
        ep->floor_raised_us = now;
    }
    usnic_rto_backoff(&ep->rto);
    /* On a network that lost nothing lately the peer is most likely late
     * (descheduled, computing), and a resend would be a copy of what it
     * holds: ask it first, again at each expiry while it does not answer
     * (an absent receiver could not take a resend either), up to
     * USNIC_PROBES_MAX times (the probes or the answers may be lost).  Its
     * answer resends at once what it lacks (probe_answered). */
    if (NULL != seg && 0 != ep->probes && ep->probe_seq == seg->seq) {
        ++module->stats.num_probe_unanswered;
    } else {
        ep->probes = 0;
    }
    if (NULL == seg || ep->probe_seq != seg->seq) {
        ep->probe_missing = false;
    }
    if (usnic_component.timer_probe && NULL != seg && !ep->in_recovery &&
        ep->probes < USNIC_PROBES_MAX && now - module->loss_seen_us >= USNIC_LOSS_MEMORY_US &&
        opal_btl_usnic_send_probe(module, ep, seg->seq)) {
        if (0 == ep->probes) {
            if (!ep->probe_missing) {
                ep->probe_sent_us = sent_us;
            }
            /* (Karn: the ACK of a timed segment may now be the probe's
             * answer, which times the wait for it, not the path; after a
             * lost ACK that sample would hold the RTO up for long) */
            ep->rtt_timing = false;
            ep->rtt_skip = 0;
        }
        ep->probe_seq = seg->seq;
        ++ep->probes;
    } else {
        ep->probes = 0;
        n = timer_resend(module, ep, seg, sent_us);
    }
    ep->rto_deadline_us = now + ep->rto.rto_us;
    ep->rto_graced = false;
    return n;
}

static int hole_wait_over(opal_btl_usnic_endpoint_t *ep, double now);

int opal_btl_usnic_check_timers(opal_btl_usnic_module_t *module, double now, bool backlog)
{
    opal_list_item_t *li, *next;
    /* This process was away (descheduled, computing): nothing it saw says
     * the peers are late, their answers may be on the way.  What is due
     * gets half a timeout of our attention first. */
    bool away = now - module->last_timer_check_us > usnic_component.away_us;
    double due = HUGE_VAL;
    int n = 0;

    module->last_timer_check_us = now;
    module->timer_restarted = false;
    for (li = opal_list_get_first(&module->endpoints_with_timers);
         li != opal_list_get_end(&module->endpoints_with_timers); li = next) {
        opal_btl_usnic_endpoint_t *ep = usnic_container_of(li, opal_btl_usnic_endpoint_t,
                                                           timer_li);
        next = opal_list_get_next(li);
        if (!ep->timer_running) {
            opal_list_remove_item(&module->endpoints_with_timers, li);
            ep->on_timer_list = false;
            ep->hole_waiting = false;
            /* nothing in flight: its send table goes back to the pool */
            opal_btl_usnic_endpoint_tx_release(ep);
        } else if (ep->rto_restart) {
            opal_btl_usnic_timer_set_deadline(ep, now);
        } else if (OPAL_UNLIKELY(away) && !ep->rto_graced) {
            /* Once per deadline: a process descheduled more often than
             * every half timeout (a busy host, a backed-off timeout) would
             * otherwise push it back for ever and never resend. */
            if (ep->rto_deadline_us < now + ep->rto.rto_us / 2.0) {
                ep->rto_deadline_us = now + ep->rto.rto_us / 2.0;
                ep->rto_graced = true;
            }
        } else if (now >= ep->rto_deadline_us + (backlog ? ep->rto.rto_us : 0)) {
            n += timer_expired(module, ep, now);
        }
        if (OPAL_UNLIKELY(ep->hole_waiting)) {
            if (now >= ep->hole_due_us) {
                n += hole_wait_over(ep, now);
            }
            if (ep->hole_waiting && ep->hole_due_us < due) {
                due = ep->hole_due_us;
            }
        }
        if (ep->timer_running && ep->rto_deadline_us < due) {
            due = ep->rto_deadline_us;
        }
    }
    module->timer_due_us = due;
    return n;
}

/* ---- what ACKs tell the sender ---- */

void opal_btl_usnic_bdp_round(opal_btl_usnic_endpoint_t *ep)
{
    uint32_t before = ep->tx.bdp;

    if (usnic_tx_bdp_round_end(&ep->tx, opal_btl_usnic_now_us())) {
        if (ep->tx.bdp > before) {
            ++ep->module->stats.num_window_grows;
        } else {
            ++ep->module->stats.num_window_reverts;
        }
    }
}

/* ack + 1 .. ack + run are missing at the receiver and the last is lost:
 * resend those of them sent on the last one's channel (which keeps its
 * order; the other channel's may be late), once per hole.  reported: the
 * receiver named the run, so a copy of one of them arriving there proves
 * that the path reorders (a recovery's guess proves nothing). */
static int resend_lost(opal_btl_usnic_endpoint_t *ep, uint16_t ack, uint32_t run, bool reported)
{
    opal_btl_usnic_module_t *module = ep->module;
    uint16_t last = (uint16_t)(ack + run);
    opal_btl_usnic_send_seg_t *seg;
    int n = 0;

    /* (Nothing in flight: maybe nothing ever sent, and no table yet; a run
     * beyond what was sent is no report of ours.) */
    if (0 == usnic_tx_window_inflight(&ep->tx) ||
        USNIC_SEQ_DIFF16(last, ep->tx.next_seq_to_send) >= 0 ||
        USNIC_SEQ_DIFF16(last, ep->hole_resent_to) <= 0 ||
        NULL == (seg = ep->sent_segs[last & ep->tx_mask])) {
        return 0;
    }
    for (uint16_t s = (uint16_t)(ep->hole_resent_to + 1); USNIC_SEQ_DIFF16(s, last) <= 0; ++s) {
        opal_btl_usnic_send_seg_t *lost = ep->sent_segs[s & ep->tx_mask];

        if (NULL != lost && lost->base.channel == seg->base.channel && !lost->on_resend_list) {
            opal_btl_usnic_queue_resend(module, lost);
            ++module->stats.num_fast_retrans;
            if (0 == n++) {
                ep->fast_lo = s;
            }
            ep->fast_hi = s;
        }
    }
    ep->hole_resent_to = last;
    if (0 != n && reported) {
        ep->module->loss_seen_us = opal_btl_usnic_now_us();
    }
    if (0 != n) {
        ep->fast_open = reported;
        /* (a recovery has cut already) */
        if (!ep->in_recovery) {
            cut(ep, false, last);
        }
    }
    return n;
}

/* The receiver reports ack + 1 .. ack + run missing, the last lost: on a
 * path known to reorder, the run waits out the reordering window first
 * (the segments may be late, not lost); a longer run reported meanwhile
 * waits after it. */
static void hole_reported(opal_btl_usnic_endpoint_t *ep, uint16_t ack, uint32_t run)
{
    opal_btl_usnic_module_t *module = ep->module;
    double wait = usnic_reo_wait_us(&ep->reo, &ep->rto);
    uint16_t last = (uint16_t)(ack + run);

    if (0 == wait) {
        resend_lost(ep, ack, run, true);
        return;
    }
    /* (what resend_lost would ignore needs no wait) */
    if (USNIC_SEQ_DIFF16(last, ep->tx.next_seq_to_send) >= 0 ||
        USNIC_SEQ_DIFF16(last, ep->hole_resent_to) <= 0) {
        return;
    }
    /* (a wait whose runs were all acknowledged since is over) */
    if (ep->hole_waiting && USNIC_SEQ_DIFF16(ep->hole_next_to, ack) > 0) {
        if (USNIC_SEQ_DIFF16(last, ep->hole_next_to) > 0) {
            ep->hole_next_to = last;
        }
        return;
    }
    ep->hole_waiting = true;
    ep->hole_wait_to = ep->hole_next_to = last;
    ep->hole_due_us = opal_btl_usnic_now_us() + wait;
    if (ep->hole_due_us < module->timer_due_us) {
        module->timer_due_us = ep->hole_due_us;
    }
    ++module->stats.num_reorder_waits;
}

/* The window is over: resend what is still missing of the run (a loss
 * after all), and start the wait of a longer run reported meanwhile. */
static int hole_wait_over(opal_btl_usnic_endpoint_t *ep, double now)
{
    uint16_t ack = ep->tx.ack_seq_rcvd;
    int n = 0;

    ep->hole_waiting = false;
    if (USNIC_SEQ_DIFF16(ep->hole_wait_to, ack) > 0) {
        n = resend_lost(ep, ack, (uint16_t)(ep->hole_wait_to - ack), true);
        if (0 != n) {
            usnic_reo_loss(&ep->reo);
        }
    }
    if (USNIC_SEQ_DIFF16(ep->hole_next_to, ep->hole_resent_to) > 0 &&
        USNIC_SEQ_DIFF16(ep->hole_next_to, ack) > 0) {
        ep->hole_waiting = true;
        ep->hole_wait_to = ep->hole_next_to;
        ep->hole_due_us = now + usnic_reo_wait_us(&ep->reo, &ep->rto);
    }
    return n;
}

/* The peer was late by late_us (away from progress): the timeout's floor
 * goes up for a while (Eifel's response; lowered again in timer_expired). */
static void late_peer(opal_btl_usnic_endpoint_t *ep, double now, double late_us)
{
    usnic_rto_raise_floor(&ep->rto, late_us, ep->rto.base_us * USNIC_LATE_FLOOR_MAX);
    ep->floor_raised_us = now;
    if (ep->rto.min_us > ep->module->stats.max_rto_us) {
        ep->module->stats.max_rto_us = ep->rto.min_us;
    }
}

/* The peer answered a probe (and the ACK is handled): the probed segment
 * arrived, and the timeout was too quick (the peer late, or an ACK lost);
 * or, still the oldest unacknowledged, it was lost: resent now if the peer
 * said so before. */
static void probe_answered(opal_btl_usnic_endpoint_t *ep, uint8_t flags)
{
    opal_btl_usnic_module_t *module = ep->module;
    uint16_t oldest = (uint16_t)(ep->tx.ack_seq_rcvd + 1);

    ep->probes = 0;
    if (0 == usnic_tx_window_inflight(&ep->tx) || oldest != ep->probe_seq) {
        ++module->stats.num_probe_spurious;
        if (flags & USNIC_ACK_PROBE_LATE) {
            double now = opal_btl_usnic_now_us();
            late_peer(ep, now, now - ep->probe_sent_us);
        }
        return;
    }
    /* On a device whose channels are queues of their own, a datagram sent
     * before the probe on the other one may reach the peer after it
     * (Soft-RoCE does each queue pair's receive work apart): the first such
     * answer probes again at the next expiry. */
    if (!ep->probe_missing && module->limits.channels_apart) {
        ep->probe_missing = true;
        ++module->stats.num_probe_missing;
        return;
    }
    module->loss_seen_us = opal_btl_usnic_now_us();
    timer_resend(module, ep, ep->sent_segs[oldest & ep->tx_mask], ep->probe_sent_us);
}

void opal_btl_usnic_flagged_ack(opal_btl_usnic_endpoint_t *ep, uint16_t ack, uint8_t flags,
                                uint16_t dup_seq, uint8_t hole_run)
{
    opal_btl_usnic_module_t *module = ep->module;
    int16_t since = USNIC_SEQ_DIFF16(ep->tx.ack_seq_rcvd, dup_seq);
    usnic_ack_class_t class;

    /* (near the window: not a sequence number from a lap ago) */
    if ((flags & USNIC_ACK_DUP_SEEN) && ep->tmo_pending && dup_seq == ep->tmo_seq &&
        since > -4096 && since < 4096) {
        /* The original had arrived: the timer was too quick for this
         * path.  No recovery, no cut, no backoff. */
        ep->tmo_pending = false;
        ep->in_recovery = false;
        if (usnic_component.congestion_control) {
            usnic_tx_cwnd_restore(&ep->tx, &ep->tmo_cwnd);
        }
        usnic_rto_reset(&ep->rto);
        ++module->stats.num_spurious_timeouts;
        /* A late peer (away from progress) raises the floor for a while: it
         * had not acknowledged the original when the resend came, or did
         * before this report.  A lost ACK, which a lossy path makes look
         * the same, does not: the report is the first ACK of it. */
        if ((flags & USNIC_ACK_DUP_LATE) || since >= 0) {
            double now = opal_btl_usnic_now_us();
            late_peer(ep, now, now - ep->tmo_sent_us);
        } else {
            /* (a lost ACK: the path loses) */
            ep->module->loss_seen_us = opal_btl_usnic_now_us();
        }
    }
    /* A fast resend the receiver got twice: the original was late, not
     * lost (near the window: not a report from a lap ago).  Holes wait
     * longer from now on. */
    if ((flags & USNIC_ACK_DUP_SEEN) && ep->fast_open &&
        USNIC_SEQ_DIFF16(dup_seq, ep->fast_lo) >= 0 && USNIC_SEQ_DIFF16(dup_seq, ep->fast_hi) <= 0 &&
        since > -4096 && since < 4096) {
        ep->fast_open = false;
        usnic_reo_proven(&ep->reo);
        ++module->stats.num_spurious_fast;
    }
    /* The resend reached the receiver and this ACK covers it: whether it was
     * needed or not, no later report proves it spurious (a duplicate of
     * it, the network's or a lap later, would otherwise pass for one). */
    if ((flags & USNIC_ACK_RESEND_SEEN) && ep->tmo_pending &&
        USNIC_SEQ_DIFF16(ack, ep->tmo_seq) >= 0) {
        ep->tmo_pending = false;
        /* (not reported a duplicate: it filled a hole) */
        ep->module->loss_seen_us = opal_btl_usnic_now_us();
    }
    class = usnic_tx_classify_ack(&ep->tx, ack);
    opal_btl_usnic_handle_ack(ep, ack);
    if ((flags & USNIC_ACK_PROBED) && 0 != ep->probes) {
        probe_answered(ep, flags);
    }
    if (USNIC_ACK_NEW != class && USNIC_ACK_DUP != class) {
        return;
    }
    /* Reported lost; or, in a recovery, still missing after the receiver
     * got a resend (an ACK from before it may only show a receiver
     * catching up, after the timeout was too quick: F-RTO's point). */
    if (flags & USNIC_ACK_HOLE) {
        hole_reported(ep, ack, 0 == hole_run ? 1 : hole_run);
    } else if (ep->in_recovery && USNIC_ACK_NEW == class && (flags & USNIC_ACK_RESEND_SEEN)) {
        resend_lost(ep, ack, 1, false);
    }
}

/* ---- resending ---- */

void opal_btl_usnic_retrans_resend(opal_btl_usnic_module_t *module)
{
    opal_btl_usnic_channel_t *data = &module->channels[USNIC_DATA_CHANNEL];
    int n = 0;

    while (data->sd_wqe > 0 && n < usnic_component.max_resends_per_iteration &&
           !opal_list_is_empty(&module->pending_resend_segs)) {
        opal_list_item_t *li = opal_list_remove_first(&module->pending_resend_segs);
        opal_btl_usnic_send_seg_t *seg = usnic_container_of(li, opal_btl_usnic_send_seg_t,
                                                            resend_li);
        opal_btl_usnic_endpoint_t *ep = seg->ep;

        seg->on_resend_list = false;
        if (ep->failed) {
            continue;
        }
        /* The ACK of a resent segment, or of one above it (a cumulative
         * ACK waits for the hole), says nothing about the round trip but
         * the recovery's length (Karn): time the next first send instead. */
        if (ep->rtt_timing && USNIC_SEQ_DIFF16(ep->rtt_seq, seg->seq) >= 0) {
            ep->rtt_timing = false;
            ep->rtt_skip = 0;
        }
        /* Still owned by the device from the previous post: it goes out
         * anyway, and the timer still runs. */
        if (0 == seg->posted) {
            seg->hdr->ack_present = 0;
            /* it fills a hole: the ACK it draws moves the window */
            seg->hdr->flags = USNIC_HDR_ACK_REQ | USNIC_HDR_RESEND;
            /* (a resend proves no other lost: its loss is the timer's) */
            seg->hdr->chan_prev = seg->seq;
            opal_btl_usnic_send_post(module, ep, seg, USNIC_DATA_CHANNEL);
            ++module->stats.num_resends;
            ++n;
        }
    }
}

/* ---- dead peers ---- */

void opal_btl_usnic_check_dead_peers(opal_btl_usnic_module_t *module)
{
    double timeout = usnic_component.peer_timeout;
    double now = opal_btl_usnic_now_us() / 1e6;
    /* Not checked for long: this process was away from progress (and sent
     * no retransmits); the stall it sat out is not the peer's fault. */
    bool away = now - module->last_dead_check >= timeout / USNIC_PEER_WATCH_FRACTION;
    opal_list_item_t *li;

    module->last_dead_check = now;
    /* Only endpoints with unacknowledged data can stall: those whose
     * retransmit timer runs (idle peers cost nothing here). */
    for (li = opal_list_get_first(&module->endpoints_with_timers);
         li != opal_list_get_end(&module->endpoints_with_timers); li = opal_list_get_next(li)) {
        opal_btl_usnic_endpoint_t *ep = usnic_container_of(li, opal_btl_usnic_endpoint_t,
                                                           timer_li);
        double seen, busy;
        char ip[32];

        if (ep->failed || !ep->timer_running) {
            continue;
        }
        busy = opal_btl_usnic_liveness_busy(ep);
        seen = busy > ep->last_ack_time ? busy : ep->last_ack_time;
        switch (usnic_peer_judge(&ep->watch, now, seen, timeout, away)) {
        case USNIC_PEER_OK:
            continue;
        case USNIC_PEER_PING:
            opal_btl_usnic_liveness_ping(ep);
            continue;
        case USNIC_PEER_DEAD:
            break;
        }
        ep->failed = true;
        opal_btl_usnic_snprintf_ipv4(ip, sizeof(ip), ep->remote.ipv4_addr, ep->remote.prefix);
        opal_btl_usnic_show_fatal("peer unreachable",
                       opal_process_info.nodename, module->dev_name, module->if_name,
                       ep->proc->hostname, ip,
                       usnic_component.peer_timeout,
                       (int) usnic_tx_window_inflight(&ep->tx),
                       opal_btl_usnic_liveness_summary(ep, now, timeout));
        snprintf(module->fatal_cause, sizeof(module->fatal_cause), "peer %s unreachable", ip);
        opal_btl_usnic_module_fatal(module, ep->proc->proc_opal);
    }
}
