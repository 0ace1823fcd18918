/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 * $COPYRIGHT$
 * SPDX-License-Identifier: BSD-3-Clause
 *
 * Endpoint life cycle.
 */

#include "opal_config.h"

#include <arpa/inet.h>
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
    ep->rx_frags_busy = 0;
    ep->rx_unacked = 0;
    ep->ack_urgent = false;
    ep->ack_hold_until_us = 0;
    ep->next_frag_id = 1;
    ep->active_large_frags = 0;
    ep->tmo_pending = false;
    ep->tmo_seq = 0;
    ep->probes = 0;
    ep->probe_missing = false;
    ep->probe_sent_us = 0;
    ep->probe_seq = 0;
    ep->rx_report = 0;
    ep->rx_filled = false;
    ep->rx_filled_seq = 0;
    ep->floor_raised_us = 0;
    ep->tmo_sent_us = 0;
    ep->rx_dup_seq = 0;
    ep->exiting = false;
    ep->connectivity_checked = false;
    ep->conn_peer = false;
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

/* ---- send tables ----
 *
 * Why a pool of tables and not one table per peer (docs/engine-window.md):
 * a slot per segment the window allows costs 8 bytes, and a window that
 * follows the path may reach 4096 segments; per peer, that is 32 KiB times
 * every peer ever sent to.  Only an endpoint with segments in flight needs
 * slots, and only as many as it has in flight.  So an endpoint takes a
 * table from its module's pool at its first send, a power of two of slots
 * from USNIC_TX_TABLE_MIN up, doubles it (copying what is in flight) when
 * its window outgrows it, and gives it back when nothing is in flight (at
 * the timer walk that unlists it).  Lookup stays one index, seq & tx_mask,
 * on every send, ACK and resend; an idle peer holds no slot. */

/* Free tables of one size a module keeps for reuse; more are freed. */
#define USNIC_TX_TABLE_KEEP 16

static int table_class(uint32_t slots)
{
    int c = 0;

    while (c < USNIC_TX_TABLE_CLASSES - 1 && ((uint32_t) USNIC_TX_TABLE_MIN << c) < slots) {
        ++c;
    }
    return c;
}

static size_t table_bytes(int c)
{
    return ((size_t) USNIC_TX_TABLE_MIN << c) * sizeof(opal_btl_usnic_send_seg_t *);
}

/* A table of class c, all slots NULL, or NULL if memory is short. */
static opal_btl_usnic_send_seg_t **table_get(opal_btl_usnic_module_t *m, int c)
{
    opal_btl_usnic_send_seg_t **t = m->tx_tables_free[c];

    if (NULL != t) {
        /* (a free table links to the next through its first slot) */
        m->tx_tables_free[c] = (opal_btl_usnic_send_seg_t **) t[0];
        t[0] = NULL;
        --m->tx_tables_cached[c];
        return t;
    }
    t = calloc(1, table_bytes(c));
    if (NULL != t) {
        m->stats.send_table_bytes += table_bytes(c);
    }
    return t;
}

/* Give back a table whose slots are all NULL. */
static void table_put(opal_btl_usnic_module_t *m, opal_btl_usnic_send_seg_t **t, int c)
{
    if (m->tx_tables_cached[c] >= USNIC_TX_TABLE_KEEP) {
        m->stats.send_table_bytes -= table_bytes(c);
        free(t);
        return;
    }
    t[0] = (opal_btl_usnic_send_seg_t *) m->tx_tables_free[c];
    m->tx_tables_free[c] = t;
    ++m->tx_tables_cached[c];
}

void opal_btl_usnic_tx_tables_fini(opal_btl_usnic_module_t *m)
{
    for (int c = 0; c < USNIC_TX_TABLE_CLASSES; ++c) {
        while (NULL != m->tx_tables_free[c]) {
            opal_btl_usnic_send_seg_t **t = m->tx_tables_free[c];
            m->tx_tables_free[c] = (opal_btl_usnic_send_seg_t **) t[0];
            m->stats.send_table_bytes -= table_bytes(c);
            free(t);
        }
        m->tx_tables_cached[c] = 0;
    }
    while (NULL != m->rx_frags_free) {
        usnic_rx_frag_t *f = m->rx_frags_free;
        m->rx_frags_free = (usnic_rx_frag_t *) f[0].buf;
        m->stats.reassembly_bytes -= USNIC_RX_FRAG_SLOTS * sizeof(*f);
        free(f);
    }
    m->rx_frags_cached = 0;
}

usnic_rx_frag_t *opal_btl_usnic_rx_frags_get(opal_btl_usnic_endpoint_t *ep)
{
    opal_btl_usnic_module_t *m = ep->module;
    usnic_rx_frag_t *f = m->rx_frags_free;

    if (NULL != f) {
        /* (a free array links to the next through its first slot's buf) */
        m->rx_frags_free = (usnic_rx_frag_t *) f[0].buf;
        f[0].buf = NULL;
        --m->rx_frags_cached;
    } else if (NULL != (f = calloc(USNIC_RX_FRAG_SLOTS, sizeof(*f)))) {
        m->stats.reassembly_bytes += USNIC_RX_FRAG_SLOTS * sizeof(*f);
    }
    ep->rx_frags = f;
    return f;
}

void opal_btl_usnic_rx_frags_put(opal_btl_usnic_endpoint_t *ep)
{
    opal_btl_usnic_module_t *m = ep->module;
    usnic_rx_frag_t *f = ep->rx_frags;

    ep->rx_frags = NULL;
    if (m->rx_frags_cached >= USNIC_TX_TABLE_KEEP) {
        m->stats.reassembly_bytes -= USNIC_RX_FRAG_SLOTS * sizeof(*f);
        free(f);
        return;
    }
    f[0].buf = (uint8_t *) m->rx_frags_free;
    m->rx_frags_free = f;
    ++m->rx_frags_cached;
}

static void set_slots(opal_btl_usnic_endpoint_t *ep, uint32_t slots)
{
    ep->tx.slots = slots;
    usnic_tx_window_limit(&ep->tx);
}

int opal_btl_usnic_endpoint_tx_alloc(opal_btl_usnic_endpoint_t *ep)
{
    if (OPAL_UNLIKELY(!ep->connectivity_checked)) {
        opal_btl_usnic_connectivity_check(ep);
    }
    if (NULL == ep->sent_segs) {
        int c = table_class(ep->tx.slots);

        ep->sent_segs = table_get(ep->module, c);
        if (NULL == ep->sent_segs) {
            return OPAL_ERR_OUT_OF_RESOURCE;
        }
        ep->tx_mask = (USNIC_TX_TABLE_MIN << c) - 1;
        set_slots(ep, ep->tx_mask + 1);
    }
    ep->tx_ready = true;
    return OPAL_SUCCESS;
}

bool opal_btl_usnic_endpoint_tx_grow(opal_btl_usnic_endpoint_t *ep, uint16_t seq)
{
    opal_btl_usnic_send_seg_t **old = ep->sent_segs, **t;
    uint32_t slots = ep->tx_mask + 1;
    int c;

    if (slots >= usnic_tx_window_want(&ep->tx) || slots >= USNIC_WINDOW_SIZE) {
        return false;
    }
    c = table_class(2 * slots);
    t = table_get(ep->module, c);
    if (NULL == t) {
        /* the window stays the table's size */
        return false;
    }
    /* what is in flight before seq, which is not stored yet */
    for (uint16_t s = (uint16_t)(ep->tx.ack_seq_rcvd + 1); s != seq; ++s) {
        t[s & (2 * slots - 1)] = old[s & ep->tx_mask];
        old[s & ep->tx_mask] = NULL;
    }
    table_put(ep->module, old, table_class(slots));
    ep->sent_segs = t;
    ep->tx_mask = 2 * slots - 1;
    set_slots(ep, 2 * slots);
    ++ep->module->stats.num_table_grows;
    return true;
}

void opal_btl_usnic_endpoint_tx_release(opal_btl_usnic_endpoint_t *ep)
{
    if (NULL == ep->sent_segs || 0 != usnic_tx_window_inflight(&ep->tx)) {
        return;
    }
    table_put(ep->module, ep->sent_segs, table_class(ep->tx_mask + 1));
    ep->sent_segs = NULL;
    ep->tx_mask = 0;
    ep->tx_ready = false;
    set_slots(ep, USNIC_TX_TABLE_MIN);
}

static void endpoint_destruct(opal_btl_usnic_endpoint_t *ep)
{
    if (NULL != ep->sent_segs) {
        /* (a failed endpoint's table may hold segments: never pooled) */
        ep->module->stats.send_table_bytes -= table_bytes(table_class(ep->tx_mask + 1));
        free(ep->sent_segs);
    }
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
        ep->module->stats.reassembly_bytes -= USNIC_RX_FRAG_SLOTS * sizeof(*ep->rx_frags);
        free(ep->rx_frags);
    }
    opal_btl_usnic_liveness_release(ep);
    if (NULL != ep->module && ep->conn_peer) {
        opal_btl_usnic_connectivity_remove_peer(ep->module, ep->remote.ipv4_addr,
                                                htons((uint16_t) ep->remote.connectivity_udp_port));
    }
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
    /* (its checker socket may ping this process's) */
    if (0 != remote->connectivity_udp_port) {
        opal_btl_usnic_connectivity_add_peer(module, remote->ipv4_addr,
                                             htons((uint16_t) remote->connectivity_udp_port));
        ep->conn_peer = true;
    }
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
    ep->hole_resent_to = ep->tx.ack_seq_rcvd;
    set_slots(ep, USNIC_TX_TABLE_MIN);
    ep->chan_last_seq[0] = ep->chan_last_seq[1] = ep->tx.ack_seq_rcvd;
    usnic_rx_window_init(&ep->rx, remote->isn, USNIC_WINDOW_SIZE, ep->rx_bits);
    ep->rx_acked = (uint16_t)(remote->isn - 1);
    opal_btl_usnic_retrans_init(ep);
    ep->prio_inflight = 0;
    opal_btl_usnic_endpoint_size_window(ep, 1);
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
    opal_btl_usnic_endpoint_tx_release(ep);
}
