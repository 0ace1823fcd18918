/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 * $COPYRIGHT$
 * SPDX-License-Identifier: BSD-3-Clause
 *
 * Endpoint life cycle.
 */

#include "opal_config.h"

#include <stdlib.h>
#include <string.h>

#include "btl_usnic.h"
#include "btl_usnic_ack.h"
#include "btl_usnic_connectivity.h"
#include "btl_usnic_endpoint.h"
#include "btl_usnic_module.h"
#include "btl_usnic_rdma.h"
#include "btl_usnic_retrans.h"
#include "btl_usnic_retrans_ack.h"
#include "btl_usnic_send.h"

static void endpoint_construct(opal_btl_usnic_endpoint_t *ep)
{
    ep->module = NULL;
    ep->proc = NULL;
    ep->dest[0].ah = ep->dest[1].ah = NULL;
    OBJ_CONSTRUCT(&ep->all_li, opal_list_item_t);
    OBJ_CONSTRUCT(&ep->sends_li, opal_list_item_t);
    OBJ_CONSTRUCT(&ep->acks_li, opal_list_item_t);
    OBJ_CONSTRUCT(&ep->timer_li, opal_list_item_t);
    ep->on_sends_list = false;
    ep->on_acks_list = false;
    ep->ack_owed = false;
    ep->on_timer_list = false;
    ep->timer_running = false;
    OBJ_CONSTRUCT(&ep->send_queue, opal_list_t);
    ep->tx_ready = false;
    ep->rto_deadline_us = 0;
    ep->rto_restart = false;
    ep->rto_graced = false;
    ep->in_recovery = false;
    ep->recover_seq = 0;
    ep->sent_segs = NULL;
    ep->tx_mask = 0;
    ep->mem_bytes = 0;
    ep->rx_bits = NULL;
    ep->rx_frags = NULL;
    ep->rx_unacked = 0;
    ep->ack_urgent = false;
    ep->ack_hold_until_us = 0;
    ep->next_frag_id = 1;
    ep->active_large_frags = 0;
    ep->hole_resent = false;
    ep->tmo_pending = false;
    ep->tmo_seq = 0;
    ep->rx_report = 0;
    ep->rx_filled = false;
    ep->rx_filled_seq = 0;
    ep->floor_raised_us = 0;
    ep->tmo_sent_us = 0;
    ep->rx_dup_seq = 0;
    ep->exiting = false;
    ep->connectivity_checked = false;
    ep->live = NULL;
    memset(&ep->watch, 0, sizeof(ep->watch));
    ep->zombie = false;
    ep->failed = false;
}

/* Count memory held by endpoints in the module's statistics. */
static void account(opal_btl_usnic_endpoint_t *ep, size_t bytes)
{
    ep->mem_bytes += bytes;
    ep->module->stats.endpoint_bytes += bytes;
}

static void endpoint_destruct(opal_btl_usnic_endpoint_t *ep)
{
    if (NULL != ep->module) {
        ep->module->stats.endpoint_bytes -= ep->mem_bytes;
        if (NULL != ep->rx_bits) {
            --ep->module->stats.endpoints;
        }
    }
    if (NULL != ep->rx_frags) {
        for (int i = 0; i < USNIC_RX_FRAG_SLOTS; ++i) {
            if (0 != ep->rx_frags[i].frag_id && 0 == ep->rx_frags[i].put_addr) {
                free(ep->rx_frags[i].buf);
            }
        }
        free(ep->rx_frags);
    }
    opal_btl_usnic_liveness_release(ep);
    free(ep->sent_segs);
    free(ep->rx_bits);
    if (NULL != ep->dest[0].ah) {
        ep->module->ops->ah_destroy(ep->dest[0].ah);
    }
    OBJ_DESTRUCT(&ep->send_queue);
    OBJ_DESTRUCT(&ep->timer_li);
    OBJ_DESTRUCT(&ep->acks_li);
    OBJ_DESTRUCT(&ep->sends_li);
    OBJ_DESTRUCT(&ep->all_li);
}
OBJ_CLASS_INSTANCE(opal_btl_usnic_endpoint_t, opal_object_t, endpoint_construct,
                   endpoint_destruct);

int opal_btl_usnic_endpoint_setup(opal_btl_usnic_endpoint_t *ep, opal_btl_usnic_module_t *module,
                                  const usnic_modex_addr_t *remote)
{
    ep->module = module;
    ep->remote = *remote;
    for (int c = 0; c < 2; ++c) {
        ep->dest[c].qpn = remote->qp_num[c];
        ep->dest[c].qkey = remote->qkey;
    }
    ep->send_credits = module->channels[USNIC_DATA_CHANNEL].sd_num;
    ep->rx_bits = calloc(USNIC_WINDOW_SIZE / 64, sizeof(uint64_t));
    if (NULL == ep->rx_bits) {
        return OPAL_ERR_OUT_OF_RESOURCE;
    }
    ++module->stats.endpoints;
    account(ep, sizeof(*ep) + USNIC_WINDOW_SIZE / 8);
    usnic_tx_window_init(&ep->tx, module->isn, (uint32_t) usnic_component.max_send_window);
    ep->chan_last_seq[0] = ep->chan_last_seq[1] = ep->tx.ack_seq_rcvd;
    usnic_rx_window_init(&ep->rx, remote->isn, USNIC_WINDOW_SIZE, ep->rx_bits);
    ep->rx_acked = (uint16_t)(remote->isn - 1);
    opal_btl_usnic_retrans_init(ep);
    ep->prio_inflight = 0;
    opal_btl_usnic_endpoint_size_window(ep, 1);
    return OPAL_SUCCESS;
}

int opal_btl_usnic_endpoint_tx_alloc(opal_btl_usnic_endpoint_t *ep)
{
    uint32_t slots = USNIC_MIN_WINDOW_SIZE;

    /* Room for the window as sized now; later resizing only shrinks it. */
    while (slots < ep->tx.size) {
        slots *= 2;
    }
    ep->sent_segs = calloc(slots, sizeof(*ep->sent_segs));
    if (NULL == ep->sent_segs) {
        return OPAL_ERR_OUT_OF_RESOURCE;
    }
    ep->tx_mask = slots - 1;
    ep->tx_ready = true;
    account(ep, slots * sizeof(*ep->sent_segs));
    return OPAL_SUCCESS;
}

void opal_btl_usnic_endpoint_size_window(opal_btl_usnic_endpoint_t *ep, size_t npeers)
{
    uint32_t max = (uint32_t) usnic_component.max_send_window, size = max;

    /* The peer's priority queue also takes every peer's ACKs: fast-path
     * sends may fill half of this endpoint's share, at least one buffer. */
    ep->prio_window = npeers > 0 ? (uint32_t)(ep->remote.prio_rcv_depth / npeers / 2) : 0;
    if (0 == ep->prio_window && ep->remote.prio_rcv_depth > 0) {
        ep->prio_window = 1;
    }

    if (ep->remote.rcv_depth > 0 && npeers > 0) {
        size = (uint32_t)(ep->remote.rcv_depth / npeers);
        if (size < USNIC_MIN_WINDOW_SIZE) {
            size = USNIC_MIN_WINDOW_SIZE;
        } else if (size > max) {
            size = max;
        }
    }
    /* Tables already allocated bound the window. */
    if (ep->tx_ready && size > ep->tx_mask + 1) {
        size = ep->tx_mask + 1;
    }
    usnic_tx_window_resize(&ep->tx, size);
}

void opal_btl_usnic_endpoint_flush(opal_btl_usnic_endpoint_t *ep)
{
    opal_btl_usnic_module_t *module = ep->module;
    opal_list_item_t *li;

    ep->exiting = true;
    opal_btl_usnic_rdma_flush_endpoint(ep);
    if (ep->on_sends_list) {
        opal_list_remove_item(&module->endpoints_with_sends, &ep->sends_li);
        ep->on_sends_list = false;
    }
    if (ep->on_acks_list) {
        opal_list_remove_item(&module->endpoints_that_need_acks, &ep->acks_li);
        ep->on_acks_list = false;
    }
    if (ep->ack_owed) {
        ep->ack_owed = false;
        if (0 == --module->acks_owed) {
            module->acks_due_tick = UINT64_MAX;
        }
    }
    /* Frags never (fully) sent: forget their unsent segments, and tell the
     * PML they failed (it may wait for their callbacks). */
    while (NULL != (li = opal_list_remove_first(&ep->send_queue))) {
        opal_btl_usnic_send_frag_t *frag = usnic_container_of(li, opal_btl_usnic_send_frag_t,
                                                              queue_li);
        /* Only what was sent is counted in segs_unacked. */
        frag->queued = false;
        opal_btl_usnic_frag_abort(module, frag);
        if (0 == frag->segs_unacked && USNIC_FRAG_LARGE == frag->type && 0 != frag->frag_id) {
            --ep->active_large_frags;
        }
        if (0 == frag->segs_unacked) {
            opal_btl_usnic_frag_return_if_done(module, frag);
        }
    }
    /* Everything in flight is released as if the peer had ACKed it. */
    if (0 != usnic_tx_window_inflight(&ep->tx)) {
        opal_btl_usnic_handle_ack(ep, (uint16_t)(ep->tx.next_seq_to_send - 1));
    }
    opal_btl_usnic_retrans_timer_stop(ep);
}
