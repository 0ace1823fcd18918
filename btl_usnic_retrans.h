/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 * $COPYRIGHT$
 * SPDX-License-Identifier: BSD-3-Clause
 *
 * Retransmit and liveness policy: when a segment goes out again, when an
 * ACK goes out, when a silent peer is declared dead.  The knobs and where
 * each acts are described at the top of btl_usnic_retrans.c.
 */

#ifndef BTL_USNIC_RETRANS_H
#define BTL_USNIC_RETRANS_H

#include "btl_usnic_endpoint.h"
#include "btl_usnic_module.h"

BEGIN_C_DECLS

/* Progress calls between two dead-peer checks (a power of two). */
#define USNIC_PEER_CHECK_TICKS 256

/* A fresh endpoint: timeout at its minimum, no timer, its peer alive now. */
void opal_btl_usnic_retrans_init(opal_btl_usnic_endpoint_t *ep);

/* Round trips between two RTT samples (a power of two): a smoothed
 * estimate needs no sample per message, and each costs two clock reads. */
#define USNIC_RTT_SAMPLE_EVERY 8

/* The next check sets ep's deadline (timers_pass). */
static inline void opal_btl_usnic_timer_restart(opal_btl_usnic_endpoint_t *ep)
{
    ep->rto_restart = true;
    ep->module->timer_restarted = true;
}

/* A timer started or pushed back since the last check gets its deadline
 * from this one: ACKs arrive in progress passes, so this is the pass that
 * saw it. */
static inline void opal_btl_usnic_timer_set_deadline(opal_btl_usnic_endpoint_t *ep, double now)
{
    ep->rto_restart = false;
    ep->rto_deadline_us = now + ep->rto.rto_us;
    ep->rto_graced = false;
    ep->last_ack_time = now / 1e6;
}

/* A segment went out for the first time (inline: every first send).  If
 * the round-trip clock is idle, every USNIC_RTT_SAMPLE_EVERY-th time the
 * segment is timed; an idle timer is armed without a clock read: the next
 * check_timers, which reads the clock once for all timers of its pass, sets
 * its deadline. */
static inline void opal_btl_usnic_retrans_first_send(opal_btl_usnic_endpoint_t *ep,
                                                    uint16_t seq)
{
    if (!ep->rtt_timing && 0 == (ep->rtt_skip++ & (USNIC_RTT_SAMPLE_EVERY - 1))) {
        ep->rtt_timing = true;
        ep->rtt_seq = seq;
        ep->rtt_start_us = opal_btl_usnic_now_us();
    }
    if (!ep->timer_running) {
        ep->timer_running = true;
        ++ep->module->timers_running;
        opal_btl_usnic_timer_restart(ep);
        if (!ep->on_timer_list) {
            opal_list_append(&ep->module->endpoints_with_timers, &ep->timer_li);
            ep->on_timer_list = true;
        }
    }
}

/* What a cumulative ACK does (opal_btl_usnic_handle_ack): inline in
 * btl_usnic_retrans_ack.h. */

/* An ACK with USNIC_ACK_* flags.  DUP_SEEN: dup_seq was received again, so
 * a timer resend of it was spurious (undone), and the ACK itself, if it
 * repeats the last one, is no sign of a loss.  HOLE: ack + 1 .. ack +
 * hole_run are missing and the last is lost: those of them sent on its
 * channel are resent (once per hole), even if the ACK moved the window; at
 * once, or on a path that reorders after its reordering window if still
 * missing.  A DUP_SEEN naming a fast resend proves that the path reorders. */
void opal_btl_usnic_flagged_ack(opal_btl_usnic_endpoint_t *ep, uint16_t ack, uint8_t flags,
                                uint16_t dup_seq, uint8_t hole_run);

/* The ACK ended a round of the path's window (usnic_tx_bdp_round_end). */
void opal_btl_usnic_bdp_round(opal_btl_usnic_endpoint_t *ep);

/* The endpoint goes away: its timer stops and it leaves the timer list. */
void opal_btl_usnic_retrans_timer_stop(opal_btl_usnic_endpoint_t *ep);

/* A standalone ACK goes out at the latest after this many accepted datagrams. */
#define USNIC_ACK_EVERY 16

/* Segments the send engine posts per progress pass at most, so that a busy
 * sender polls its CQ (and the ACKs its peers send back) at least every
 * this many sends: its peers' ACKs per pass stay well inside its priority
 * receive queue, and their messages are not left unanswered for a whole
 * window's worth of posts. */
#define USNIC_SENDS_PER_PASS 32

/* Expire the module's retransmit timers that are due at `now` (monotonic
 * microseconds): the oldest unacknowledged segment of such an endpoint is
 * queued for resending.  A timer (re)started since the last check starts at
 * `now`.  backlog: a poll of this pass came back full, so the ACK may be
 * waiting in the CQ; a timer then waits up to one more timeout for the next
 * passes to read it.  Returns the number of segments queued. */
int opal_btl_usnic_check_timers(opal_btl_usnic_module_t *module, double now, bool backlog);

/* check_timers for a progress pass: the walk only when the earliest
 * deadline has come, the process was away (check_timers then grants its
 * grace), or a timer was (re)started while several endpoints are listed;
 * the timer of the only one listed gets its deadline here.  (A deadline
 * pushed back leaves the module's earliest one early: the walk it brings
 * finds it later.) */
static inline int opal_btl_usnic_timers_pass(opal_btl_usnic_module_t *module, double now,
                                             bool backlog)
{
    if (OPAL_LIKELY(now < module->timer_due_us &&
                    now - module->last_timer_check_us <= usnic_component.away_us)) {
        opal_list_t *list = &module->endpoints_with_timers;
        opal_list_item_t *li;
        opal_btl_usnic_endpoint_t *ep;

        if (OPAL_LIKELY(!module->timer_restarted)) {
            module->last_timer_check_us = now;
            return 0;
        }
        li = opal_list_get_first(list);
        ep = li != opal_list_get_end(list) && opal_list_get_next(li) == opal_list_get_end(list)
                 ? usnic_container_of(li, opal_btl_usnic_endpoint_t, timer_li)
                 : NULL;
        if (NULL != ep && ep->rto_restart && ep->timer_running) {
            opal_btl_usnic_timer_set_deadline(ep, now);
            if (ep->rto_deadline_us < module->timer_due_us) {
                module->timer_due_us = ep->rto_deadline_us;
            }
            module->timer_restarted = false;
            module->last_timer_check_us = now;
            return 0;
        }
    }
    return opal_btl_usnic_check_timers(module, now, backlog);
}

/* Post the queued retransmits, within the per-pass budget. */
void opal_btl_usnic_retrans_resend(opal_btl_usnic_module_t *module);

/* We owe the peer an ACK: now, or at the ACK cadence.  Each ACK costs the
 * peer's device a receive, so fewer is better as long as the sender's
 * window stays open.  (Inline: every datagram received.) */
static inline void opal_btl_usnic_schedule_ack(opal_btl_usnic_endpoint_t *ep, bool now)
{
    opal_btl_usnic_module_t *module = ep->module;
    uint64_t ticks = usnic_component.progress_ticks;
    bool immediate = now || ++ep->rx_unacked >= USNIC_ACK_EVERY;
    uint64_t due = ticks + (immediate ? 0 : (uint64_t) usnic_component.ack_iteration_delay);

    ep->ack_urgent |= immediate;
    if (!ep->ack_owed) {
        ep->ack_owed = true;
        ++module->acks_owed;
        ep->ack_due_tick = due;
        if (!ep->on_acks_list) {
            opal_list_append(&module->endpoints_that_need_acks, &ep->acks_li);
            ep->on_acks_list = true;
        }
    } else if (immediate || ep->ack_due_tick > ticks) {
        /* a delayed ACK waits for the pause; an immediate one stays so */
        ep->ack_due_tick = due;
    }
    if (ep->ack_due_tick < module->acks_due_tick) {
        module->acks_due_tick = ep->ack_due_tick;
    }
}

/* Judge the peers that hold our data unacknowledged; a dead one is fatal. */
void opal_btl_usnic_check_dead_peers(opal_btl_usnic_module_t *module);

END_C_DECLS
#endif /* BTL_USNIC_RETRANS_H */
