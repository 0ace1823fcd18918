/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 * $COPYRIGHT$
 *
 * ACK processing and emission, and the retransmit timer.
 *
 * Each endpoint has one retransmit timer, a deadline checked from progress.
 * It runs while segments are unacknowledged and restarts (now + RTO)
 * whenever an ACK moves the window: a long burst that drains slowly
 * through the device and the peer keeps ACKs coming and never times out,
 * which a timer per segment (started when the segment was posted) did.
 * When it expires, only the oldest unacknowledged segment is resent (a
 * slow receiver, the usual cause on a lossless link, then costs one
 * duplicate, not a window of them) and the RTO backs off; until the ACKs
 * cover everything sent before the timeout, each ACK that moves the window
 * but stops short of that points at the next lost segment, which is resent
 * at once (NewReno's partial ACKs).  A lost segment with traffic behind it
 * is resent sooner, on the first duplicate ACK.
 */

#include "opal_config.h"

#include "btl_usnic.h"
#include "btl_usnic_ack.h"
#include "btl_usnic_connectivity.h"
#include "btl_usnic_endpoint.h"
#include "btl_usnic_module.h"
#include "btl_usnic_send.h"
#include "btl_usnic_verbs.h"

/* Queue a segment for retransmission (timer or duplicate ACK). */
static void queue_resend(opal_btl_usnic_module_t *module, opal_btl_usnic_send_seg_t *seg)
{
    if (!seg->on_resend_list) {
        opal_list_append(&module->pending_resend_segs, &seg->resend_li);
        seg->on_resend_list = true;
    }
}

void opal_btl_usnic_handle_ack(opal_btl_usnic_endpoint_t *ep, uint16_t ack)
{
    opal_btl_usnic_module_t *module = ep->module;
    double now;

    switch (usnic_tx_classify_ack(&ep->tx, ack)) {
    case USNIC_ACK_OLD:
        ++module->stats.num_old_dup_acks;
        return;
    case USNIC_ACK_BOGUS:
        ++module->stats.num_bogus_acks;
        return;
    case USNIC_ACK_DUP: {
        /* The peer still misses ack+1: resend it now rather than at the
         * timeout, but only once per hole. */
        uint16_t lost = (uint16_t)(ack + 1);
        /* (nothing in flight: maybe nothing ever sent, and no table yet) */
        opal_btl_usnic_send_seg_t *seg =
            0 != usnic_tx_window_inflight(&ep->tx) ? ep->sent_segs[lost & ep->tx_mask] : NULL;

        ++module->stats.num_dup_acks;
        if (NULL != seg && !seg->on_resend_list && ep->dup_ack_count++ == 0) {
            queue_resend(module, seg);
            ++module->stats.num_fast_retrans;
        }
        return;
    }
    case USNIC_ACK_NEW:
        break;
    }

    now = opal_btl_usnic_now_us();
    for (uint16_t s = (uint16_t)(ep->tx.ack_seq_rcvd + 1);; ++s) {
        opal_btl_usnic_send_seg_t **slot = &ep->sent_segs[s & ep->tx_mask];
        opal_btl_usnic_send_seg_t *seg = *slot;

        *slot = NULL;
        /* Advance first: a PML callback below may send on this endpoint. */
        ep->tx.ack_seq_rcvd = s;
        if (ep->rtt_timing && s == ep->rtt_seq) {
            ep->rtt_timing = false;
            usnic_rto_sample(&ep->rto, now - ep->rtt_start_us);
        }
        if (NULL != seg) {
            opal_btl_usnic_seg_acked(module, seg);
        }
        if (s == ack) {
            break;
        }
    }
    ep->dup_ack_count = 0;
    usnic_rto_unback(&ep->rto);
    if (ep->in_recovery) {
        if (USNIC_SEQ_DIFF16(ep->recover_seq, ack) > 0 && 0 != usnic_tx_window_inflight(&ep->tx)) {
            opal_btl_usnic_send_seg_t *next = ep->sent_segs[(uint16_t)(ack + 1) & ep->tx_mask];
            if (NULL != next && !next->on_resend_list) {
                queue_resend(module, next);
                ++module->stats.num_fast_retrans;
            }
        } else {
            ep->in_recovery = false;
        }
    }
    if (0 == usnic_tx_window_inflight(&ep->tx)) {
        opal_btl_usnic_timer_stop(ep);
    } else {
        ep->rto_deadline_us = now + ep->rto.rto_us;
    }
    ep->last_ack_time = now / 1e6;
    opal_btl_usnic_check_rts(ep);
}

/* While datagrams keep arriving, a standalone ACK goes out for every
 * USNIC_ACK_EVERY of them; once they pause for ack_iteration_delay progress
 * passes, one goes out for the rest.  Each ACK costs the peer's device a
 * receive, so fewer is better as long as the sender's window stays open. */
#define USNIC_ACK_EVERY 16

void opal_btl_usnic_schedule_ack(opal_btl_usnic_endpoint_t *ep, bool now)
{
    uint64_t ticks = usnic_component.progress_ticks;
    bool immediate = now || ++ep->rx_unacked >= USNIC_ACK_EVERY;
    uint64_t due = ticks + (immediate ? 0 : (uint64_t) usnic_component.ack_iteration_delay);

    if (!ep->on_acks_list) {
        opal_list_append(&ep->module->endpoints_that_need_acks, &ep->acks_li);
        ep->on_acks_list = true;
        ep->ack_due_tick = due;
    } else if (immediate || ep->ack_due_tick > ticks) {
        /* a delayed ACK waits for the pause; an immediate one stays so */
        ep->ack_due_tick = due;
    }
}

static void ack_done(opal_btl_usnic_endpoint_t *ep)
{
    ep->rx_unacked = 0;
    if (ep->on_acks_list) {
        opal_list_remove_item(&ep->module->endpoints_that_need_acks, &ep->acks_li);
        ep->on_acks_list = false;
    }
}

void opal_btl_usnic_piggyback_ack(opal_btl_usnic_endpoint_t *ep, usnic_btl_header_t *hdr)
{
    if (ep->on_acks_list) {
        hdr->ack_seq = ep->rx_acked = usnic_rx_ack_value(&ep->rx);
        hdr->ack_present = 1;
        ack_done(ep);
    } else {
        hdr->ack_present = 0;
    }
}

void opal_btl_usnic_send_due_acks(opal_btl_usnic_module_t *module)
{
    opal_btl_usnic_channel_t *prio = &module->channels[USNIC_PRIORITY_CHANNEL];
    opal_list_item_t *li, *next;

    for (li = opal_list_get_first(&module->endpoints_that_need_acks);
         li != opal_list_get_end(&module->endpoints_that_need_acks) && prio->sd_wqe > 0;
         li = next) {
        opal_btl_usnic_endpoint_t *ep = usnic_container_of(li, opal_btl_usnic_endpoint_t,
                                                           acks_li);
        opal_btl_usnic_ack_item_t *item;
        usnic_btl_header_t *hdr;

        next = opal_list_get_next(li);
        if (ep->ack_due_tick > usnic_component.progress_ticks) {
            continue;
        }
        /* A peer we only ever ACK is checked too. */
        if (OPAL_UNLIKELY(!ep->connectivity_checked)) {
            opal_btl_usnic_connectivity_check(ep);
        }
        item = (opal_btl_usnic_ack_item_t *) opal_btl_usnic_fl_get(module, &module->ack_segs);
        if (NULL == item) {
            /* No ACK buffer: skip it, retransmits will prompt another. */
            break;
        }
        hdr = item->seg.hdr;
        hdr->sender = usnic_component.my_hashed_name;
        hdr->payload_type = USNIC_PAYLOAD_TYPE_ACK;
        hdr->payload_len = 0;
        hdr->put_addr = 0;
        hdr->ack_present = 1;
        hdr->ack_seq = ep->rx_acked = usnic_rx_ack_value(&ep->rx);
        item->seg.len = sizeof(*hdr);
        if (OPAL_SUCCESS != opal_btl_usnic_verbs_post(module, ep, &item->seg,
                                                      USNIC_PRIORITY_CHANNEL)) {
            opal_free_list_return(&module->ack_segs, &item->super);
            opal_btl_usnic_module_fatal(module, NULL);
            return;
        }
        ++module->stats.num_ack_sends;
        if (0 == item->seg.posted) {
            opal_free_list_return(&module->ack_segs, &item->super);
        }
        ack_done(ep);
    }
}

void opal_btl_usnic_timer_start(opal_btl_usnic_endpoint_t *ep, double now)
{
    if (!ep->on_timer_list) {
        ep->rto_deadline_us = now + ep->rto.rto_us;
        opal_list_append(&ep->module->endpoints_with_timers, &ep->timer_li);
        ep->on_timer_list = true;
    }
}

void opal_btl_usnic_timer_stop(opal_btl_usnic_endpoint_t *ep)
{
    /* nothing unacknowledged: no stall for the dead-peer check to watch */
    ep->watch.watch_since = 0;
    if (ep->on_timer_list) {
        opal_list_remove_item(&ep->module->endpoints_with_timers, &ep->timer_li);
        ep->on_timer_list = false;
    }
}

/* Resend the oldest unacknowledged segment, back off, and recover the
 * rest from the ACKs that follow. */
static int timer_expired(opal_btl_usnic_module_t *module, opal_btl_usnic_endpoint_t *ep,
                         double now)
{
    opal_btl_usnic_send_seg_t *seg = ep->sent_segs[(uint16_t)(ep->tx.ack_seq_rcvd + 1) &
                                                   ep->tx_mask];
    int n = 0;

    usnic_rto_backoff(&ep->rto);
    ep->in_recovery = true;
    ep->recover_seq = (uint16_t)(ep->tx.next_seq_to_send - 1);
    if (NULL != seg && !seg->on_resend_list) {
        queue_resend(module, seg);
        ++module->stats.num_timeout_retrans;
        n = 1;
    }
    ep->rto_deadline_us = now + ep->rto.rto_us;
    return n;
}

int opal_btl_usnic_check_timers(opal_btl_usnic_module_t *module, double now)
{
    opal_list_item_t *li;
    int n = 0;

    for (li = opal_list_get_first(&module->endpoints_with_timers);
         li != opal_list_get_end(&module->endpoints_with_timers); li = opal_list_get_next(li)) {
        opal_btl_usnic_endpoint_t *ep = usnic_container_of(li, opal_btl_usnic_endpoint_t,
                                                           timer_li);
        if (now >= ep->rto_deadline_us) {
            n += timer_expired(module, ep, now);
        }
    }
    return n;
}
