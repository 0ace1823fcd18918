/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 * $COPYRIGHT$
 * SPDX-License-Identifier: BSD-3-Clause
 *
 * What a received ACK does to the sender: part of the retransmit policy of
 * btl_usnic_retrans.c (the knobs are described there), inline because
 * every ACK, most of them riding on data, takes this path.
 */

#ifndef BTL_USNIC_RETRANS_ACK_H
#define BTL_USNIC_RETRANS_ACK_H

#include "btl_usnic.h"
#include "btl_usnic_endpoint.h"
#include "btl_usnic_module.h"
#include "btl_usnic_retrans.h"
#include "btl_usnic_send.h"

BEGIN_C_DECLS

/* Queue a segment for retransmission (timer, reported hole, or partial ACK in a recovery). */
static inline void opal_btl_usnic_queue_resend(opal_btl_usnic_module_t *module,
                                               opal_btl_usnic_send_seg_t *seg)
{
    if (!seg->on_resend_list) {
        opal_list_append(&module->pending_resend_segs, &seg->resend_li);
        seg->on_resend_list = true;
        opal_btl_usnic_work_now(module);
    }
}

/* Nothing is unacknowledged: the timer stops, but the endpoint stays
 * listed until the next walk (a ping-pong would unlist and relist it for
 * every message). */
static inline void opal_btl_usnic_timer_idle(opal_btl_usnic_endpoint_t *ep)
{
    /* no stall for the dead-peer check to watch */
    ep->watch.watch_since = 0;
    if (ep->timer_running) {
        ep->timer_running = false;
        --ep->module->timers_running;
    }
}

/* The window moved up to ack: the peer is alive, the backoff goes; a
 * recovery ends when everything sent before it is acknowledged. */
static inline void opal_btl_usnic_new_ack(opal_btl_usnic_endpoint_t *ep, uint16_t ack,
                                          uint32_t acked)
{
    if (USNIC_SEQ_DIFF16(ep->hole_resent_to, ack) < 0) {
        ep->hole_resent_to = ack;
    }
    usnic_tx_cwnd_acked(&ep->tx, acked);
    if (OPAL_UNLIKELY(usnic_tx_bdp_round_done(&ep->tx, ack))) {
        opal_btl_usnic_bdp_round(ep);
    }
    usnic_rto_unback(&ep->rto);
    /* (short of it, the ACK may predate the resend: flagged_ack) */
    if (ep->in_recovery && USNIC_SEQ_DIFF16(ep->recover_seq, ack) <= 0) {
        ep->in_recovery = false;
    }
    /* (A timer that stops needs no time: the next first send restarts it.) */
    if (0 == usnic_tx_window_inflight(&ep->tx)) {
        opal_btl_usnic_timer_idle(ep);
    } else {
        opal_btl_usnic_timer_restart(ep);
    }
}

/* A cumulative ACK arrived from the peer of ep: release what it covers,
 * sample the round trip, and act on it as the policy says. */
static inline __opal_attribute_always_inline__ void
opal_btl_usnic_handle_ack(opal_btl_usnic_endpoint_t *ep, uint16_t ack)
{
    opal_btl_usnic_module_t *module = ep->module;
    uint32_t acked = (uint16_t)(ack - ep->tx.ack_seq_rcvd);

    switch (usnic_tx_classify_ack(&ep->tx, ack)) {
    case USNIC_ACK_OLD:
        ++module->stats.num_old_dup_acks;
        return;
    case USNIC_ACK_BOGUS:
        ++module->stats.num_bogus_acks;
        return;
    case USNIC_ACK_DUP:
        /* No sign of a loss by itself: the receiver repeats its ACK for a
         * segment that came early through the other channel, too.  A loss
         * is what it reports (USNIC_ACK_HOLE, flagged_ack). */
        ++module->stats.num_dup_acks;
        return;
    case USNIC_ACK_NEW:
        break;
    }

    /* (counted down: the last sequence need not stay live across the calls) */
    for (uint16_t s = ep->tx.ack_seq_rcvd, n = (uint16_t) acked; n > 0; --n) {
        opal_btl_usnic_send_seg_t **slot = &ep->sent_segs[++s & ep->tx_mask];
        opal_btl_usnic_send_seg_t *seg = *slot;

        *slot = NULL;
        /* Advance first: a PML callback below may send on this endpoint. */
        ep->tx.ack_seq_rcvd = s;
        if (ep->rtt_timing && s == ep->rtt_seq) {
            ep->rtt_timing = false;
            usnic_rto_sample(&ep->rto, opal_btl_usnic_now_us() - ep->rtt_start_us);
            if (ep->rto.rto_us > module->stats.max_rto_us) {
                module->stats.max_rto_us = ep->rto.rto_us;
            }
        }
        if (NULL != seg) {
            opal_btl_usnic_seg_acked(module, ep, seg);
        }
    }
    opal_btl_usnic_new_ack(ep, ack, acked);
    opal_btl_usnic_check_rts(ep);
}

END_C_DECLS
#endif /* BTL_USNIC_RETRANS_ACK_H */
