/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 * $COPYRIGHT$
 * SPDX-License-Identifier: BSD-3-Clause
 *
 * Sending our own standalone ACKs (riding on data: btl_usnic_ack.h).  When
 * one is owed is in btl_usnic_retrans.c, what a received one does in
 * btl_usnic_retrans_ack.h.
 */

#include "opal_config.h"

#include "btl_usnic.h"
#include "btl_usnic_ack.h"
#include "btl_usnic_connectivity.h"
#include "btl_usnic_endpoint.h"
#include "btl_usnic_module.h"
#include "btl_usnic_send.h"
#include "btl_usnic_channel.h"

/* Post one standalone ACK to ep, paying what it owes: OPAL_SUCCESS,
 * OPAL_ERR_TEMP_OUT_OF_RESOURCE without an ACK buffer, or an error after
 * which the module is dead.  seq: the segment a probe asks about. */
static int post_ack(opal_btl_usnic_module_t *module, opal_btl_usnic_endpoint_t *ep,
                    uint8_t flags, uint16_t seq)
{
    opal_btl_usnic_ack_item_t *item;
    usnic_btl_header_t *hdr;

    item = (opal_btl_usnic_ack_item_t *) opal_btl_usnic_fl_get(module, &module->ack_segs);
    if (NULL == item) {
        return OPAL_ERR_TEMP_OUT_OF_RESOURCE;
    }
    hdr = item->seg.hdr;
    hdr->sender = usnic_component.my_hashed_name;
    hdr->payload_type = USNIC_PAYLOAD_TYPE_ACK;
    hdr->payload_len = 0;
    hdr->put_addr = 0;
    /* (the ACK buffers are never zeroed: a stale USNIC_HDR_RESEND
     * would report a resend the peer never sent) */
    hdr->flags = flags;
    hdr->pkt_seq = seq;
    hdr->ack_present = 1;
    hdr->ack_seq = ep->rx_acked = usnic_rx_ack_value(&ep->rx);
    opal_btl_usnic_add_ack_flags(ep, hdr);
    item->seg.len = sizeof(*hdr);
    if (OPAL_SUCCESS != opal_btl_usnic_channel_post(module, ep, &item->seg,
                                                  USNIC_PRIORITY_CHANNEL)) {
        opal_btl_usnic_fl_return(&module->ack_segs, &item->super);
        opal_btl_usnic_module_fatal(module, NULL);
        return OPAL_ERROR;
    }
    ++module->stats.num_ack_sends;
    if (0 == item->seg.posted) {
        opal_btl_usnic_fl_return(&module->ack_segs, &item->super);
    }
    opal_btl_usnic_ack_done(ep);
    return OPAL_SUCCESS;
}

bool opal_btl_usnic_send_probe(opal_btl_usnic_module_t *module, opal_btl_usnic_endpoint_t *ep,
                               uint16_t seq)
{
    if (0 == module->channels[USNIC_PRIORITY_CHANNEL].sd_wqe ||
        OPAL_SUCCESS != post_ack(module, ep, USNIC_HDR_ACK_REQ, seq)) {
        return false;
    }
    ++module->stats.num_timer_probes;
    return true;
}

void opal_btl_usnic_send_due_acks(opal_btl_usnic_module_t *module)
{
    opal_btl_usnic_channel_t *prio = &module->channels[USNIC_PRIORITY_CHANNEL];
    uint64_t ticks = usnic_component.progress_ticks, next_due = UINT64_MAX;
    double now = 0;
    opal_list_item_t *li, *next;
    int rc;

    for (li = opal_list_get_first(&module->endpoints_that_need_acks);
         li != opal_list_get_end(&module->endpoints_that_need_acks) && prio->sd_wqe > 0;
         li = next) {
        opal_btl_usnic_endpoint_t *ep = usnic_container_of(li, opal_btl_usnic_endpoint_t,
                                                           acks_li);

        next = opal_list_get_next(li);
        if (!ep->ack_owed) {
            opal_list_remove_item(&module->endpoints_that_need_acks, &ep->acks_li);
            ep->on_acks_list = false;
            continue;
        }
        if (ep->ack_due_tick > ticks) {
            next_due = ep->ack_due_tick < next_due ? ep->ack_due_tick : next_due;
            continue;
        }
        /* A delayed ACK also waits a while in time (ack_hold_us):
         * a receiver polling faster than datagrams arrive would otherwise
         * acknowledge nearly each one, and a window's worth of ACKs can
         * overflow the sender's small priority receive queue while it is
         * busy. */
        if (!ep->ack_urgent) {
            if (0 == now) {
                now = opal_btl_usnic_now_us();
            }
            if (0 == ep->ack_hold_until_us) {
                ep->ack_hold_until_us = now + usnic_component.ack_hold_us;
            }
            if (now < ep->ack_hold_until_us) {
                next_due = ticks + 1 < next_due ? ticks + 1 : next_due;
                continue;
            }
        }
        /* A peer we only ever ACK is checked too. */
        if (OPAL_UNLIKELY(!ep->connectivity_checked)) {
            opal_btl_usnic_connectivity_check(ep);
        }
        rc = post_ack(module, ep, 0, 0);
        if (OPAL_ERR_TEMP_OUT_OF_RESOURCE == rc) {
            /* No ACK buffer: try again on the next pass. */
            break;
        }
        if (OPAL_SUCCESS != rc) {
            return;
        }
    }
    /* Stopped early (no send slot or buffer): the rest are due now. */
    module->acks_due_tick = li != opal_list_get_end(&module->endpoints_that_need_acks)
                                ? ticks : next_due;
}
