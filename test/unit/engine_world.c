/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 * $COPYRIGHT$
 * SPDX-License-Identifier: BSD-3-Clause
 *
 * Two fake processes and a steerable network; see engine_world.h.
 */

#include "opal_config.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "opal/class/opal_free_list.h"
#include "opal/datatype/opal_convertor.h"
#include "opal/datatype/opal_datatype.h"
#include "opal/mca/btl/base/base.h"

#include "btl_usnic.h"
#include "btl_usnic_ack.h"
#include "btl_usnic_endpoint.h"
#include "btl_usnic_module.h"
#include "btl_usnic_proc.h"
#include "btl_usnic_retrans.h"

#include "engine_world.h"

/* The strided datatype of SEND_NONCONTIG: 48 bytes of every 64. */
#define STRIDE_DATA 48
#define STRIDE_EXTENT 64

/* The size of the PML header a message carries in segment 0. */
#define PML_HDR 16

static world_t the_world;

uint32_t world_rand(world_t *w)
{
    uint32_t x = w->rng;
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    return w->rng = x;
}

/* ------------------------------------------------------------------ */
/* message contents                                                    */

static uint8_t byte_at(uint64_t id, size_t i)
{
    uint64_t x = id * 0x9E3779B97F4A7C15ULL + i + 1;
    x ^= x >> 31;
    x *= 0xBF58476D1CE4E5B9ULL;
    x ^= x >> 29;
    return (uint8_t) x;
}

void world_fill(uint8_t *buf, uint64_t id, size_t len)
{
    for (size_t i = 0; i < len; ++i) {
        buf[i] = i < sizeof(id) ? (uint8_t)(id >> (8 * i)) : byte_at(id, i);
    }
}

/* ------------------------------------------------------------------ */
/* building and tearing down                                           */

/* Side s's module over a fake device with a 4096-byte-MTU port, given the
 * facts the component's device scan and netdev lookup would find, then set
 * up by the real opal_btl_usnic_module_init; its ISN is then replaced by
 * the test's. */
static int module_build(world_t *w, int s, uint16_t isn, bool ipv6)
{
    opal_btl_usnic_module_t *m = &w->mods[s];
    int rc;

    *m = opal_btl_usnic_module_template;
    snprintf(m->dev_name, sizeof(m->dev_name), "fake%c", 'A' + s);
    m->port_num = 1;
    m->gid_index = 1;
    m->port_mtu = 4096;
    snprintf(m->if_name, sizeof(m->if_name), "eth%d", s);
    m->if_ipv4 = htonl(0x0a000001u + (uint32_t) s);
    memset(m->gid, 0, sizeof(m->gid));
    if (ipv6) {
        m->gid[0] = 0xfd;
        m->gid[15] = (uint8_t)(1 + s);
    } else {
        m->gid[10] = m->gid[11] = 0xff;
        memcpy(&m->gid[12], &m->if_ipv4, 4);
    }
    m->grh_ipv4 = !ipv6;
    m->if_prefix = 24;
    m->if_mtu = 4200;
    for (int i = 0; i < 6; ++i) {
        m->if_mac[i] = (uint8_t)(0x10 * s + i);
    }
    m->link_speed_mbps = 10000;
    m->super.btl_bandwidth = m->link_speed_mbps;
    m->dev = fake_device_open(m->gid);
    if (NULL == m->dev) {
        return OPAL_ERR_OUT_OF_RESOURCE;
    }
    /* Each side is a process of its own, with its own locked memory and
     * name (written into its send buffers as they are made). */
    world_run_as(w, s);
    usnic_component.locked_planned = 0;
    rc = opal_btl_usnic_module_init(m);
    if (OPAL_SUCCESS != rc) {
        fake_device_ops.close(m->dev);
        m->dev = NULL;
        return rc;
    }
    m->isn = isn;
    m->local_addr.isn = isn;
    return OPAL_SUCCESS;
}

/* The peer record and endpoint of side s, as usnic_add_procs makes them. */
static int endpoint_build(world_t *w, int s)
{
    opal_btl_usnic_module_t *m = &w->mods[s];
    int peer = 1 - s;
    opal_btl_usnic_proc_t *up;
    opal_btl_usnic_endpoint_t *ep;
    opal_btl_usnic_ah_t *ah;
    int rc;

    OBJ_CONSTRUCT(&w->oproc[s], opal_proc_t);
    w->oproc[s].proc_name.jobid = 0x1234;
    w->oproc[s].proc_name.vpid = (opal_vpid_t) peer;

    up = OBJ_NEW(opal_btl_usnic_proc_t);
    if (NULL == up) {
        return OPAL_ERR_OUT_OF_RESOURCE;
    }
    up->proc_opal = &w->oproc[s];
    up->hostname = strdup(SIDE_A == peer ? "hostA" : "hostB");
    up->hashed_name = w->name[peer];
    up->modex = malloc(sizeof(*up->modex));
    up->match = malloc(2 * sizeof(*up->match));
    up->endpoints = calloc(2, sizeof(*up->endpoints));
    if (NULL == up->hostname || NULL == up->modex || NULL == up->match || NULL == up->endpoints) {
        OBJ_RELEASE(up);
        return OPAL_ERR_OUT_OF_RESOURCE;
    }
    up->modex[0] = w->mods[peer].local_addr;
    up->modex_count = 1;
    up->match[s] = 0;
    up->match[peer] = -1;
    opal_list_append(&usnic_component.procs, &up->super);
    w->uproc[s] = up;

    ep = OBJ_NEW(opal_btl_usnic_endpoint_t);
    if (NULL == ep) {
        return OPAL_ERR_OUT_OF_RESOURCE;
    }
    ep->proc = up;
    ep->remote_index = 0;
    rc = opal_btl_usnic_endpoint_setup(ep, m, &up->modex[0]);
    if (OPAL_SUCCESS != rc) {
        OBJ_RELEASE(ep);
        return rc;
    }
    m->ops->ah_create(m->pd, m->port_num, m->gid_index, ep->remote.gid, &ah);
    opal_btl_usnic_endpoint_set_ah(ep, ah);
    up->endpoints[s] = ep;
    opal_hash_table_set_value_uint64(&m->senders, up->hashed_name, ep);
    opal_list_append(&m->all_endpoints, &ep->all_li);
    w->ep[s] = ep;
    return OPAL_SUCCESS;
}

/* The real teardown, after emptying lists a failed test left corrupt. */
static void module_teardown(opal_btl_usnic_module_t *m)
{
    opal_free_list_t *lists[] = {&m->small_send_frags, &m->large_send_frags, &m->chunk_segs,
                                 &m->inline_segs, &m->ack_segs};

    if (NULL == m->dev) {
        return;
    }
    /* A list a failed test left corrupt (an item returned twice) would
     * make its destructor loop or crash: empty it, its memory goes anyway. */
    for (size_t i = 0; i < sizeof(lists) / sizeof(lists[0]); ++i) {
        if (SIZE_MAX == world_free_count(lists[i])) {
#if OPAL_MAJOR_VERSION >= 5 /* the head became an integer */
            lists[i]->super.opal_lifo_head.data.item = (intptr_t) &lists[i]->super.opal_lifo_ghost;
#else
            lists[i]->super.opal_lifo_head.data.item = &lists[i]->super.opal_lifo_ghost;
#endif
        }
    }
    opal_btl_usnic_module_teardown(m);
    fake_device_ops.close(m->dev);
    m->dev = NULL;
}

#if OPAL_MAJOR_VERSION >= 5
static void world_recv_cb(mca_btl_base_module_t *btl, const mca_btl_base_receive_descriptor_t *des)
{
    const mca_btl_base_tag_t tag = des->tag;
    world_t *w = des->cbdata;
#else
static void world_recv_cb(mca_btl_base_module_t *btl, mca_btl_base_tag_t tag,
                          mca_btl_base_descriptor_t *des, void *cbdata)
{
    world_t *w = cbdata;
#endif
    rx_msg_t *r;
    size_t len = 0, off = 0;

    if (w->nrx == w->rx_cap) {
        w->rx_cap = w->rx_cap ? 2 * w->rx_cap : 256;
        w->rx = realloc(w->rx, w->rx_cap * sizeof(*w->rx));
        if (NULL == w->rx) {
            abort();
        }
    }
    for (size_t i = 0; i < des->des_segment_count; ++i) {
        len += des->des_segments[i].seg_len;
    }
    r = &w->rx[w->nrx++];
    r->side = btl == &w->mods[SIDE_A].super ? SIDE_A : SIDE_B;
    r->tag = tag;
    r->len = len;
    r->data = malloc(len > 0 ? len : 1);
    if (NULL == r->data) {
        abort();
    }
    for (size_t i = 0; i < des->des_segment_count; ++i) {
        memcpy(r->data + off, des->des_segments[i].seg_addr.pval, des->des_segments[i].seg_len);
        off += des->des_segments[i].seg_len;
    }
    if (NULL != w->on_recv) {
        w->on_recv(w, r->side, r);
    }
}

/* Live endpoints: the world's, and released ones the module keeps until
 * the device is done with them. */
static bool endpoint_alive(const mca_btl_base_endpoint_t *ep)
{
    if (NULL == ep) {
        return false;
    }
    if (ep == the_world.ep[SIDE_A] || ep == the_world.ep[SIDE_B]) {
        return true;
    }
    for (int s = 0; s < 2; ++s) {
        opal_list_t *z = &the_world.mods[s].zombie_endpoints;
        for (opal_list_item_t *li = opal_list_get_first(z); li != opal_list_get_end(z);
             li = opal_list_get_next(li)) {
            if (ep == usnic_container_of(li, opal_btl_usnic_endpoint_t, all_li)) {
                return true;
            }
        }
    }
    return false;
}

static world_t *world_build(uint16_t isn_a, uint16_t isn_b, bool ipv6)
{
    world_t *w = &the_world;

    if (w->live) {
        world_fini(w);
    }
    memset(w, 0, sizeof(*w));
    fake_device_reset();
    fake_component_reset();
    if (NULL == opal_sync_event_base) {
        /* opal_init_util does not open the event framework. */
        opal_sync_event_base = opal_event_base_create();
        if (NULL == opal_sync_event_base) {
            return NULL;
        }
    }
    w->live = true;
    w->per_step = 64;
    /* The world's time is its steps, and world_run calls a world in which
     * nothing happens for a few steps stalled: a delayed ACK leaves after
     * btl_usnic_ack_iteration_delay passes, without the production hold in
     * real time (ack_hold_us), which would make tests depend on the host's
     * speed.  A test of the hold sets it. */
    usnic_component.ack_hold_us = 0;
    w->rng = 0x2545F491u;
    for (int s = 0; s < 2; ++s) {
        opal_process_name_t n = {.jobid = 0x1234, .vpid = (opal_vpid_t) s};
        w->name[s] = opal_btl_usnic_hash_name(&n);
    }
    usnic_component.modules = w->mods;
    usnic_component.num_modules = 2;
    opal_btl_usnic_regs_init(&w->regtab[SIDE_A]);
    opal_btl_usnic_regs_init(&w->regtab[SIDE_B]);
    if (OPAL_SUCCESS != module_build(w, SIDE_A, isn_a, ipv6) ||
        OPAL_SUCCESS != module_build(w, SIDE_B, isn_b, ipv6) ||
        OPAL_SUCCESS != endpoint_build(w, SIDE_A) || OPAL_SUCCESS != endpoint_build(w, SIDE_B)) {
        return NULL;
    }
    mca_btl_base_active_message_trigger[WORLD_TAG].cbfunc = world_recv_cb;
    mca_btl_base_active_message_trigger[WORLD_TAG].cbdata = w;
    fake_dev.endpoint_alive = endpoint_alive;
    world_run_as(w, SIDE_A);
    return w;
}

world_t *world_new(uint16_t isn_a, uint16_t isn_b)
{
    return world_build(isn_a, isn_b, false);
}

world_t *world_new_ipv6(uint16_t isn_a, uint16_t isn_b)
{
    return world_build(isn_a, isn_b, true);
}

void world_fini(world_t *w)
{
    if (!w->live) {
        return;
    }
    mca_btl_base_active_message_trigger[WORLD_TAG].cbfunc = NULL;
    mca_btl_base_active_message_trigger[WORLD_TAG].cbdata = NULL;
    w->on_recv = NULL;
    w->after_step = NULL;
    w->on_send_done = NULL;
    w->on_put_done = NULL;
    for (int s = 0; s < 2; ++s) {
        if (NULL != w->ep[s]) {
            world_del_procs(w, s);
        }
    }
    while (w->nregs > 0) {
        --w->nregs;
        world_run_as(w, w->regs[w->nregs].side);
        w->mods[w->regs[w->nregs].side].super.btl_deregister_mem(
            &w->mods[w->regs[w->nregs].side].super, w->regs[w->nregs].h);
    }
    for (int s = 0; s < 2; ++s) {
        world_run_as(w, s);
        module_teardown(&w->mods[s]);
        OBJ_DESTRUCT(&w->oproc[s]);
        opal_btl_usnic_regs_fini(&w->regtab[s]);
    }
    usnic_component.regs = &usnic_component.reg_table;
    for (size_t i = 0; i < w->nsent; ++i) {
        sent_msg_t *m = w->sent[i];
        if (NULL != m->conv) {
            OBJ_RELEASE(m->conv);
        }
        if (NULL != m->dtype) {
            OBJ_RELEASE(m->dtype);
        }
        free(m->expect);
        free(m->user_buf);
        free(m);
    }
    free(w->sent);
    for (size_t i = 0; i < w->nrx; ++i) {
        free(w->rx[i].data);
    }
    free(w->rx);
    for (size_t i = 0; i < w->nputs; ++i) {
        free(w->puts[i]);
    }
    free(w->puts);
    fake_device_reset();
    fake_component_fini();
    w->live = false;
}

int world_del_procs(world_t *w, int side)
{
    opal_proc_t *p = &w->oproc[side];
    mca_btl_base_endpoint_t *e = w->ep[side];
    int rc;

    world_run_as(w, side);
    rc = w->mods[side].super.btl_del_procs(&w->mods[side].super, 1, &p, &e);
    w->ep[side] = NULL;
    return rc;
}

/* ------------------------------------------------------------------ */
/* running                                                             */

void world_run_as(world_t *w, int side)
{
    usnic_component.my_hashed_name = w->name[side];
    usnic_component.regs = &w->regtab[side];
}

/* Work on a list of the pass's work step that its word does not flag
 * (a waiting pass would never look at it). */
static bool work_unflagged(opal_btl_usnic_module_t *m)
{
    return !m->work_queued &&
           (!opal_list_is_empty(&m->fastpath_done) || m->rdma_work ||
            !opal_list_is_empty(&m->pending_resend_segs) ||
            !opal_list_is_empty(&m->endpoints_with_sends));
}

int world_progress(world_t *w, int side)
{
    opal_btl_usnic_endpoint_t *ep = w->ep[side];
    int n;

    world_run_as(w, side);
    /* Timers fire when the test says (world_fire_timeouts), not when the
     * host happens to be slow, unless the test wants real time. */
    if (!w->real_timers && NULL != ep && ep->timer_running) {
        ep->rto_deadline_us = HUGE_VAL;
    }
    w->work_unflagged[side] += work_unflagged(&w->mods[side]);
    n = opal_btl_usnic_module_progress(&w->mods[side]);
    w->work_unflagged[side] += work_unflagged(&w->mods[side]);
    return n;
}

static void deliver(world_t *w, fake_dgram_t *d)
{
    int to = -1;

    for (int s = 0; s < 2; ++s) {
        for (int c = 0; c < USNIC_NUM_CHANNELS; ++c) {
            if (w->mods[s].local_addr.qp_num[c] == d->dst_qpn) {
                to = s;
            }
        }
    }
    if (FAKE_RX_OK == fake_deliver(d->dst_qpn, &d->from, d->bytes, d->len) && to >= 0) {
        ++w->net_delivered;
        if (d->len >= sizeof(usnic_btl_header_t) &&
            USNIC_PAYLOAD_TYPE_ACK == dgram_hdr(d)->payload_type) {
            ++w->delivered_acks[to];
        } else {
            ++w->delivered_data[to];
        }
    } else {
        ++w->net_dropped;
    }
}

unsigned world_net_step(world_t *w)
{
    unsigned n = 0;

    while (!w->paused && n < w->per_step && fake_wire_count() > 0) {
        size_t avail = fake_wire_count(), pick = 0;
        fake_dgram_t d;
        long room;

        if (w->reorder > 1) {
            pick = world_rand(w) % (avail < w->reorder ? avail : w->reorder);
        }
        /* As hardware does, a receive queue without a posted buffer drops
         * what arrives (unless the test asked for a kinder network). */
        room = fake_qp_rx_posted(fake_wire_peek(pick)->dst_qpn);
        if (0 == room && w->hold_when_full) {
            break;
        }
        fake_wire_take(pick, &d);
        ++n;
        if (0 == room) {
            ++w->net_overflows;
            fake_dgram_free(&d);
            continue;
        }
        switch (NULL != w->filter ? w->filter(w, &d, w->filter_arg) : NET_DELIVER) {
        case NET_DELIVER:
            deliver(w, &d);
            break;
        case NET_DROP:
            ++w->net_dropped;
            break;
        case NET_DUP:
            ++w->net_duplicated;
            deliver(w, &d);
            if (fake_qp_rx_posted(d.dst_qpn) > 0) {
                deliver(w, &d);
            } else {
                fake_wire_push(&d);
                continue;
            }
            break;
        case NET_HOLD:
            ++w->net_held;
            fake_wire_push(&d);
            continue;
        }
        fake_dgram_free(&d);
    }
    return n;
}

unsigned world_step(world_t *w)
{
    uint64_t before = fake_dev.posts + fake_dev.rx_delivered + fake_dev.polled;

    /* As opal_btl_usnic_component_progress. */
    if (0 == (++usnic_component.progress_ticks & 255)) {
        usnic_component.coarse_time = opal_btl_usnic_now_us() / 1e6;
    }
    world_progress(w, SIDE_A);
    world_progress(w, SIDE_B);
    world_net_step(w);
    ++w->steps;
    return (unsigned)(fake_dev.posts + fake_dev.rx_delivered + fake_dev.polled - before);
}

bool world_quiescent(world_t *w)
{
    if (fake_wire_count() > 0 || fake_held_count() > 0) {
        return false;
    }
    for (int s = 0; s < 2; ++s) {
        opal_btl_usnic_module_t *m = &w->mods[s];
        opal_btl_usnic_endpoint_t *ep = w->ep[s];
        if (fake_cq_depth(m, USNIC_PRIORITY_CHANNEL) > 0 ||
            fake_cq_depth(m, USNIC_DATA_CHANNEL) > 0 ||
            !opal_list_is_empty(&m->pending_resend_segs) ||
            !opal_list_is_empty(&m->fastpath_done) ||
            (NULL != ep && (!opal_btl_usnic_endpoint_drained(ep) || ep->ack_owed))) {
            return false;
        }
    }
    return true;
}

world_result_t world_run(world_t *w, unsigned max_steps, bool with_timeouts)
{
    unsigned idle = 0;

    for (unsigned i = 0; i < max_steps; ++i) {
        if (world_quiescent(w)) {
            return WORLD_QUIET;
        }
        idle = world_step(w) > 0 ? 0 : idle + 1;
        if (NULL != w->after_step) {
            w->after_step(w);
        }
        /* Owed ACKs go out within ack_iteration_delay ticks. */
        if (idle > (unsigned) usnic_component.ack_iteration_delay + 2) {
            if (!with_timeouts) {
                return WORLD_STALLED;
            }
            if (0 == world_fire_timeouts(w, SIDE_A) + world_fire_timeouts(w, SIDE_B)) {
                return WORLD_STUCK;
            }
            ++w->timeout_rounds;
            idle = 0;
        }
    }
    return world_quiescent(w) ? WORLD_QUIET : WORLD_LIMIT;
}

int world_fire_timeouts(world_t *w, int side)
{
    opal_btl_usnic_endpoint_t *ep = w->ep[side];
    uint64_t probes;
    double now;
    int n;

    if (NULL == ep || !ep->timer_running) {
        return 0;
    }
    world_run_as(w, side);
    /* as if the deadline had passed now, while this side was checking all
     * along (not back from an absence) */
    ep->rto_restart = false;
    ep->rto_deadline_us = 0;
    w->mods[side].timer_due_us = 0;
    now = opal_btl_usnic_now_us();
    w->mods[side].last_timer_check_us = now;
    probes = w->mods[side].stats.num_timer_probes;
    n = opal_btl_usnic_check_timers(&w->mods[side], now, false);
    return n + (int)(w->mods[side].stats.num_timer_probes - probes);
}

void world_peer_lost_lately(world_t *w, int side)
{
    w->mods[side].loss_seen_us = opal_btl_usnic_now_us();
}

/* ------------------------------------------------------------------ */
/* the test PML                                                        */

static void world_send_cb(mca_btl_base_module_t *btl, mca_btl_base_endpoint_t *ep,
                          mca_btl_base_descriptor_t *des, int status)
{
    sent_msg_t *msg = des->des_cbdata;
    (void) ep;

    ++msg->callbacks;
    msg->cb_status = status;
    if (msg->w->pml_frees) {
        btl->btl_free(btl, des);
    }
    if (NULL != msg->w->on_send_done) {
        msg->w->on_send_done(msg->w, msg);
    }
}

static opal_datatype_t *strided_type(void)
{
    opal_datatype_t *dt = opal_datatype_create(4);

    if (NULL == dt) {
        return NULL;
    }
    opal_datatype_add(dt, &opal_datatype_uint1, STRIDE_DATA, 0, 1);
    opal_datatype_resize(dt, 0, STRIDE_EXTENT);
    opal_datatype_commit(dt);
    return dt;
}

/* User memory and a convertor over the data part (after the PML header). */
static int make_convertor(sent_msg_t *msg, size_t reserve)
{
    size_t data = msg->len - reserve;
    size_t count = data;

    msg->conv = opal_convertor_create(opal_local_arch, 0);
    if (NULL == msg->conv) {
        return OPAL_ERR_OUT_OF_RESOURCE;
    }
    if (SEND_NONCONTIG == msg->how) {
        count = data / STRIDE_DATA;
        msg->user_size = count * STRIDE_EXTENT;
        msg->user_buf = malloc(msg->user_size > 0 ? msg->user_size : 1);
        msg->dtype = strided_type();
        if (NULL == msg->user_buf || NULL == msg->dtype) {
            return OPAL_ERR_OUT_OF_RESOURCE;
        }
        memset(msg->user_buf, 0xee, msg->user_size);
        for (size_t k = 0; k < count; ++k) {
            memcpy(msg->user_buf + k * STRIDE_EXTENT, msg->expect + reserve + k * STRIDE_DATA,
                   STRIDE_DATA);
        }
        return opal_convertor_prepare_for_send(msg->conv, msg->dtype, count, msg->user_buf);
    }
    msg->user_size = data;
    msg->user_buf = malloc(data > 0 ? data : 1);
    if (NULL == msg->user_buf) {
        return OPAL_ERR_OUT_OF_RESOURCE;
    }
    memcpy(msg->user_buf, msg->expect + reserve, data);
    return opal_convertor_prepare_for_send(msg->conv, &opal_datatype_uint1, count, msg->user_buf);
}

/* ob1's copy path, step by step as mca_pml_ob1_send_request_start_copy
 * (ompi/mca/pml/ob1/pml_ob1_sendreq.c) takes it for buffered sends up to
 * the eager limit and for standard sends that cannot go in place:
 *  - SEND_COPY_SENDI: mca_bml_base_sendi of the header and the data; on
 *    success the send is complete.  Otherwise ob1 carries on with the
 *    descriptor sendi handed back (none: it retries the whole request
 *    later, which is the hang this stand-in catches), after rewinding its
 *    convertor (MCA_PML_OB1_SEND_REQUEST_RESET).
 *  - SEND_COPY_ALLOC: as with a BTL without sendi, mca_bml_base_alloc of
 *    header + data (mca_pml_ob1_send_request_start_buffered does the same
 *    with its rendezvous header).
 * Then it packs the data behind the header into des_segments[0], writes the
 * header in front, sets seg_len to header + what was packed, and sends with
 * mca_bml_base_send_status: 1 is complete without a callback, < 0 makes it
 * free the descriptor.  Flags: MCA_BTL_DES_FLAGS_PRIORITY |
 * MCA_BTL_DES_FLAGS_BTL_OWNERSHIP (the latter not with pml_frees). */
static int send_copy(world_t *w, sent_msg_t *msg, size_t reserve, uint32_t own)
{
    mca_btl_base_module_t *btl = &w->mods[msg->from].super;
    opal_btl_usnic_endpoint_t *ep = w->ep[msg->from];
    mca_btl_base_descriptor_t *des = NULL;
    mca_btl_base_segment_t *seg;
    uint32_t flags = MCA_BTL_DES_FLAGS_PRIORITY | own;
    size_t data = msg->len - reserve, packed = data;

    if (OPAL_SUCCESS != make_convertor(msg, reserve)) {
        return OPAL_ERR_OUT_OF_RESOURCE;
    }
    if (SEND_COPY_SENDI == msg->how) {
        msg->rc = btl->btl_sendi(btl, ep, msg->conv, msg->expect, reserve, data,
                                 MCA_BTL_NO_ORDER, flags, WORLD_TAG, &des);
        if (OPAL_SUCCESS == msg->rc) {
            msg->rc = 1;
            if (NULL != w->on_send_done) {
                w->on_send_done(w, msg);
            }
            return OPAL_SUCCESS;
        }
        if (NULL == des) {
            return OPAL_ERR_OUT_OF_RESOURCE;
        }
        if (data > 0) {
            size_t zero = 0;
            opal_convertor_set_position(msg->conv, &zero);
        }
    } else {
        des = btl->btl_alloc(btl, ep, MCA_BTL_NO_ORDER, msg->len + w->alloc_slack, flags);
        if (NULL == des) {
            return OPAL_ERR_OUT_OF_RESOURCE;
        }
    }
    seg = des->des_segments;
    if (data > 0) {
        struct iovec iov = {.iov_base = (uint8_t *) seg->seg_addr.pval + reserve,
                            .iov_len = data};
        uint32_t iov_count = 1;
        opal_convertor_pack(msg->conv, &iov, &iov_count, &packed);
    }
    memcpy(seg->seg_addr.pval, msg->expect, reserve);
    seg->seg_len = reserve + packed;
    des->des_cbfunc = world_send_cb;
    des->des_cbdata = msg;
    msg->rc = btl->btl_send(btl, ep, des, WORLD_TAG);
    if (msg->rc < 0) {
        btl->btl_free(btl, des);
        return msg->rc;
    }
    if (1 == msg->rc) {
        if (w->pml_frees) {
            btl->btl_free(btl, des);
        }
        if (NULL != w->on_send_done) {
            w->on_send_done(w, msg);
        }
    }
    return OPAL_SUCCESS;
}

/* The record of a message the test PML sends, with the bytes it carries. */
static sent_msg_t *new_msg(world_t *w, int from, size_t len, send_method_t how)
{
    sent_msg_t *msg = calloc(1, sizeof(*msg));

    if (NULL == msg) {
        return NULL;
    }
    if (w->nsent == w->sent_cap) {
        w->sent_cap = w->sent_cap ? 2 * w->sent_cap : 256;
        w->sent = realloc(w->sent, w->sent_cap * sizeof(*w->sent));
        if (NULL == w->sent) {
            abort();
        }
    }
    w->sent[w->nsent++] = msg;
    msg->id = ++w->next_id;
    msg->w = w;
    msg->from = from;
    msg->how = how;
    msg->len = len;
    msg->rc = OPAL_ERROR;
    msg->expect = malloc(len);
    if (NULL == msg->expect) {
        return NULL;
    }
    world_fill(msg->expect, msg->id, len);
    return msg;
}

sent_msg_t *world_send(world_t *w, int from, size_t len, send_method_t how)
{
    opal_btl_usnic_module_t *m = &w->mods[from];
    mca_btl_base_module_t *btl = &m->super;
    opal_btl_usnic_endpoint_t *ep = w->ep[from];
    mca_btl_base_descriptor_t *des = NULL;
    sent_msg_t *msg;
    size_t reserve = len < PML_HDR ? len : PML_HDR, size;
    uint32_t own = w->pml_frees ? 0 : MCA_BTL_DES_FLAGS_BTL_OWNERSHIP;

    if (len < 8 || (SEND_NONCONTIG == how && len < reserve + STRIDE_DATA)) {
        return NULL;
    }
    if (SEND_NONCONTIG == how) {
        len = reserve + (len - reserve) / STRIDE_DATA * STRIDE_DATA;
    }
    msg = new_msg(w, from, len, how);
    if (NULL == msg) {
        return NULL;
    }
    world_run_as(w, from);

    switch (how) {
    case SEND_COPY_ALLOC:
    case SEND_COPY_SENDI:
        return OPAL_SUCCESS == send_copy(w, msg, reserve, own) ? msg : NULL;
    case SEND_ALLOC:
        des = btl->btl_alloc(btl, ep, MCA_BTL_NO_ORDER, len,
                             own | MCA_BTL_DES_SEND_ALWAYS_CALLBACK);
        if (NULL == des) {
            return NULL;
        }
        memcpy(des->des_segments[0].seg_addr.pval, msg->expect, len);
        break;
    case SEND_SENDI:
        if (OPAL_SUCCESS != make_convertor(msg, reserve)) {
            return NULL;
        }
        /* As mca_pml_ob1_send_inline (pml_ob1_isend.c): no descriptor wanted */
        msg->rc = btl->btl_sendi(btl, ep, msg->conv, msg->expect, reserve, len - reserve,
                                 MCA_BTL_NO_ORDER, own, WORLD_TAG, NULL);
        if (OPAL_SUCCESS == msg->rc) {
            msg->rc = 1; /* sendi copies everything: complete, no callback */
            if (NULL != w->on_send_done) {
                w->on_send_done(w, msg);
            }
            return msg;
        }
        /* As the PML: the normal path with the same convertor. */
        /* fall through */
    case SEND_PREPARE:
    case SEND_NONCONTIG:
        if (NULL == msg->conv && OPAL_SUCCESS != make_convertor(msg, reserve)) {
            return NULL;
        }
        size = len - reserve;
        des = btl->btl_prepare_src(btl, ep, msg->conv, MCA_BTL_NO_ORDER, reserve, &size, own);
        if (NULL == des || size != len - reserve) {
            return NULL;
        }
        memcpy(des->des_segments[0].seg_addr.pval, msg->expect, reserve);
        break;
    }
    des->des_cbfunc = world_send_cb;
    des->des_cbdata = msg;
    msg->rc = btl->btl_send(btl, ep, des, WORLD_TAG);
    if (1 == msg->rc) {
        /* completed inline: no callback comes */
        if (w->pml_frees) {
            btl->btl_free(btl, des);
        }
        if (NULL != w->on_send_done) {
            w->on_send_done(w, msg);
        }
    }
    return msg;
}

static void world_put_cb(mca_btl_base_module_t *btl, mca_btl_base_endpoint_t *ep,
                         void *local_address, mca_btl_base_registration_handle_t *local_handle,
                         void *context, void *cbdata, int status)
{
    put_rec_t *p = cbdata;
    (void) btl;
    (void) ep;
    (void) local_handle;
    (void) context;

    ++p->callbacks;
    p->status = status;
    p->local = local_address;
    if (NULL != p->w->on_put_done) {
        p->w->on_put_done(p->w, p);
    }
}

mca_btl_base_registration_handle_t *world_handle_at(world_t *w, int side, uint64_t addr)
{
    for (int i = w->nregs - 1; i >= 0; --i) {
        if (w->regs[i].side == side && addr >= w->regs[i].base &&
            addr - w->regs[i].base < w->regs[i].len) {
            return w->regs[i].h;
        }
    }
    return NULL;
}

put_rec_t *world_put(world_t *w, int from, void *local, uint64_t remote_addr, size_t size)
{
    return world_put_h(w, from, local, remote_addr, size,
                       world_handle_at(w, 1 - from, remote_addr));
}

put_rec_t *world_put_h(world_t *w, int from, void *local, uint64_t remote_addr, size_t size,
                       mca_btl_base_registration_handle_t *remote_handle)
{
    mca_btl_base_module_t *btl = &w->mods[from].super;
    put_rec_t *p = calloc(1, sizeof(*p));
    put_rec_t **grown = realloc(w->puts, (w->nputs + 1) * sizeof(*w->puts));

    if (NULL == p || NULL == grown) {
        abort();
    }
    w->puts = grown;
    w->puts[w->nputs++] = p;
    p->from = from;
    p->w = w;
    world_run_as(w, from);
    p->rc = btl->btl_put(btl, w->ep[from], local, remote_addr, NULL, remote_handle, size, 0,
                         MCA_BTL_NO_ORDER, world_put_cb, NULL, p);
    return p;
}

mca_btl_base_registration_handle_t *world_register(world_t *w, int side, void *base, size_t len,
                                                   uint32_t flags)
{
    mca_btl_base_module_t *btl = &w->mods[side].super;
    mca_btl_base_registration_handle_t *h;

    if (w->nregs == (int) (sizeof(w->regs) / sizeof(w->regs[0]))) {
        return NULL;
    }
    world_run_as(w, side);
    h = btl->btl_register_mem(btl, NULL, base, len, flags);
    if (NULL != h) {
        w->regs[w->nregs].side = side;
        w->regs[w->nregs].h = h;
        w->regs[w->nregs].base = (uint64_t) (uintptr_t) base;
        w->regs[w->nregs].len = len;
        ++w->nregs;
    }
    return h;
}

void world_deregister(world_t *w, int side, mca_btl_base_registration_handle_t *h)
{
    world_run_as(w, side);
    for (int i = 0; i < w->nregs; ++i) {
        if (w->regs[i].h == h) {
            w->regs[i] = w->regs[--w->nregs];
            break;
        }
    }
    w->mods[side].super.btl_deregister_mem(&w->mods[side].super, h);
}

fake_src_t world_src(world_t *w, int side, int channel)
{
    fake_src_t src;

    src.qpn = w->mods[side].local_addr.qp_num[channel];
    memcpy(src.gid, w->mods[side].gid, sizeof(src.gid));
    return src;
}

fake_rx_result_t world_inject(world_t *w, int to, int channel, const void *bytes, uint32_t len)
{
    fake_src_t src = world_src(w, 1 - to, channel);
    return fake_deliver(w->mods[to].local_addr.qp_num[channel], &src, bytes, len);
}

void world_header(world_t *w, int from, usnic_btl_header_t *hdr, uint8_t type)
{
    memset(hdr, 0, sizeof(*hdr));
    hdr->sender = w->name[from];
    hdr->payload_type = type;
}

/* ------------------------------------------------------------------ */
/* checking                                                            */

static char err[512];

#define FAIL(...)                                    \
    do {                                             \
        snprintf(err, sizeof(err), __VA_ARGS__);     \
        return err;                                  \
    } while (0)

static sent_msg_t *find_sent(world_t *w, uint64_t id)
{
    /* ids are handed out in order, one per entry */
    return (id >= 1 && id <= w->nsent && w->sent[id - 1]->id == id) ? w->sent[id - 1] : NULL;
}

const char *world_verify(world_t *w, int to, bool in_order)
{
    int from = 1 - to;
    size_t next_in_order = 0;
    uint8_t *seen = calloc(w->nsent + 1, 1);

    if (NULL == seen) {
        abort();
    }
    for (size_t k = 0; k < w->nrx; ++k) {
        rx_msg_t *r = &w->rx[k];
        sent_msg_t *s;
        uint64_t id = 0;

        if (r->side != to) {
            continue;
        }
        if (r->tag != WORLD_TAG || r->len < 8) {
            free(seen);
            FAIL("side %c got a message with tag %u and %zu bytes", 'A' + to, r->tag, r->len);
        }
        for (int i = 0; i < 8; ++i) {
            id |= (uint64_t) r->data[i] << (8 * i);
        }
        s = find_sent(w, id);
        if (NULL == s || s->from != from || s->rc < 0) {
            free(seen);
            FAIL("side %c got message id %llu that was never sent to it", 'A' + to,
                 (unsigned long long) id);
        }
        if (seen[id]) {
            free(seen);
            FAIL("message %llu delivered twice", (unsigned long long) id);
        }
        seen[id] = 1;
        if (r->len != s->len) {
            free(seen);
            FAIL("message %llu: %zu bytes delivered, %zu sent", (unsigned long long) id, r->len,
                 s->len);
        }
        for (size_t i = 0; i < r->len; ++i) {
            if (r->data[i] != s->expect[i]) {
                free(seen);
                FAIL("message %llu (%zu bytes): byte %zu is 0x%02x, sent 0x%02x",
                     (unsigned long long) id, s->len, i, r->data[i], s->expect[i]);
            }
        }
        if (in_order) {
            while (next_in_order < w->nsent &&
                   (w->sent[next_in_order]->from != from || w->sent[next_in_order]->rc < 0)) {
                ++next_in_order;
            }
            if (next_in_order >= w->nsent || w->sent[next_in_order]->id != id) {
                free(seen);
                FAIL("message %llu delivered out of order", (unsigned long long) id);
            }
            ++next_in_order;
        }
    }
    for (size_t i = 0; i < w->nsent; ++i) {
        sent_msg_t *s = w->sent[i];
        if (s->from == from && s->rc >= 0 && !seen[s->id]) {
            free(seen);
            FAIL("message %llu (%zu bytes, %c to %c) never delivered", (unsigned long long) s->id,
                 s->len, 'A' + from, 'A' + to);
        }
    }
    free(seen);
    return NULL;
}

const char *world_verify_completions(world_t *w)
{
    for (size_t i = 0; i < w->nsent; ++i) {
        sent_msg_t *s = w->sent[i];
        if (s->rc < 0) {
            FAIL("message %llu: send failed with %d", (unsigned long long) s->id, s->rc);
        }
        if (1 == s->rc && 0 != s->callbacks) {
            FAIL("message %llu completed inline and got %d callbacks", (unsigned long long) s->id,
                 s->callbacks);
        }
        if (0 == s->rc && (1 != s->callbacks || OPAL_SUCCESS != s->cb_status)) {
            FAIL("message %llu: %d completion callbacks (status %d), expected one",
                 (unsigned long long) s->id, s->callbacks, s->cb_status);
        }
    }
    return NULL;
}

const char *world_verify_counters(world_t *w)
{
    for (int s = 0; s < 2; ++s) {
        const opal_btl_usnic_stats_t *rx = &w->mods[s].stats, *tx = &w->mods[1 - s].stats;
        uint64_t accepted = rx->num_frag_recvs + rx->num_chunk_recvs;
        uint64_t rejected = rx->num_dup_recvs + rx->num_oow_low_recvs + rx->num_oow_high_recvs;

        if (rx->num_total_recvs != w->delivered_data[s] + w->delivered_acks[s]) {
            FAIL("side %c counted %llu datagrams received, the network delivered %llu",
                 'A' + s, (unsigned long long) rx->num_total_recvs,
                 (unsigned long long) (w->delivered_data[s] + w->delivered_acks[s]));
        }
        if (rx->num_ack_recvs != w->delivered_acks[s]) {
            FAIL("side %c counted %llu ACKs received, the network delivered %llu", 'A' + s,
                 (unsigned long long) rx->num_ack_recvs,
                 (unsigned long long) w->delivered_acks[s]);
        }
        if (accepted + rejected != w->delivered_data[s]) {
            FAIL("side %c: %llu data datagrams delivered, but %llu accepted + %llu duplicate or "
                 "outside the window", 'A' + s, (unsigned long long) w->delivered_data[s],
                 (unsigned long long) accepted, (unsigned long long) rejected);
        }
        if (accepted != tx->num_frag_sends + tx->num_chunk_sends) {
            FAIL("side %c accepted %llu segments, side %c sent %llu", 'A' + s,
                 (unsigned long long) accepted, 'B' - s,
                 (unsigned long long) (tx->num_frag_sends + tx->num_chunk_sends));
        }
        if (0 != rx->num_bad_recvs || 0 != rx->num_unk_recvs || 0 != rx->num_badfrag_recvs ||
            0 != rx->num_recv_errors || 0 != rx->num_forged_recvs || 0 != tx->num_bogus_acks) {
            FAIL("side %c: %llu bad, %llu unknown, %llu forged, %llu bad chunks, %llu receive "
                 "errors, side %c: %llu bogus ACKs", 'A' + s,
                 (unsigned long long) rx->num_bad_recvs, (unsigned long long) rx->num_unk_recvs,
                 (unsigned long long) rx->num_forged_recvs,
                 (unsigned long long) rx->num_badfrag_recvs,
                 (unsigned long long) rx->num_recv_errors, 'B' - s,
                 (unsigned long long) tx->num_bogus_acks);
        }
        if (tx->num_total_sends != tx->num_frag_sends + tx->num_chunk_sends + tx->num_ack_sends +
                                   tx->num_resends) {
            FAIL("side %c: %llu datagrams sent, but %llu frags + %llu chunks + %llu ACKs + "
                 "%llu resends", 'B' - s, (unsigned long long) tx->num_total_sends,
                 (unsigned long long) tx->num_frag_sends,
                 (unsigned long long) tx->num_chunk_sends,
                 (unsigned long long) tx->num_ack_sends, (unsigned long long) tx->num_resends);
        }
    }
    return NULL;
}

static int by_address(const void *a, const void *b)
{
    uintptr_t x = (uintptr_t) *(void *const *) a, y = (uintptr_t) *(void *const *) b;
    return x < y ? -1 : x > y;
}

size_t world_free_count(opal_free_list_t *fl)
{
    size_t max = fl->fl_num_allocated + 1, n = 0;
    opal_list_item_t **items = malloc(max * sizeof(*items));
    opal_list_item_t *ghost = &fl->super.opal_lifo_ghost;
    opal_list_item_t *item = (opal_list_item_t *) fl->super.opal_lifo_head.data.item;
    bool broken = false;

    if (NULL == items) {
        abort();
    }
    /* Walk the LIFO without changing it.  An item returned twice makes it
     * loop through that item (or end in NULL once popped): take no more
     * items than exist, and look for repeats. */
    while (item != ghost && NULL != item && n < max) {
        items[n++] = item;
        item = (opal_list_item_t *) item->opal_list_next;
    }
    broken = item != ghost;
    qsort(items, n, sizeof(*items), by_address);
    for (size_t i = 1; i < n; ++i) {
        broken |= items[i] == items[i - 1];
    }
    free(items);
    return broken ? SIZE_MAX : n;
}

static const char *check_list_full(opal_free_list_t *fl, const char *what, int side)
{
    size_t n = world_free_count(fl);
    if (SIZE_MAX == n) {
        FAIL("side %c: an item is in the free list of %s twice", 'A' + side, what);
    }
    if (n > fl->fl_num_allocated) {
        FAIL("side %c: the free list of %s holds more items than exist", 'A' + side, what);
    }
    if (n != fl->fl_num_allocated) {
        FAIL("side %c: %zu of %zu %s are not back in their free list", 'A' + side,
             fl->fl_num_allocated - n, fl->fl_num_allocated, what);
    }
    return NULL;
}

const char *world_check_idle(world_t *w)
{
    const char *e;

    if (!world_quiescent(w)) {
        FAIL("not quiescent: %zu datagrams on the wire, %zu held completions", fake_wire_count(),
             fake_held_count());
    }
    if (0 != fake_dev.fatal_calls) {
        FAIL("%d fatal errors (module %s)", fake_dev.fatal_calls,
             fake_dev.fatal_module ? fake_dev.fatal_module->dev_name : "?");
    }
    if (0 != fake_dev.stale_completions) {
        FAIL("%llu send completions for a released endpoint",
             (unsigned long long) fake_dev.stale_completions);
    }
    if (0 != fake_dev.overposts || 0 != fake_dev.oversize_posts) {
        FAIL("%llu posts beyond a send queue, %llu beyond a channel MTU",
             (unsigned long long) fake_dev.overposts, (unsigned long long) fake_dev.oversize_posts);
    }
    if (0 != fake_dev.bad_key_posts || 0 != fake_dev.unsignalled_gathers) {
        FAIL("%llu sends from memory outside their key's registration, %llu unsignalled sends "
             "from two buffers", (unsigned long long) fake_dev.bad_key_posts,
             (unsigned long long) fake_dev.unsignalled_gathers);
    }
    if (0 != fake_dev.busy_deregs || 0 != fake_dev.bad_deregs) {
        FAIL("%llu registrations released while a send could read them, %llu released twice "
             "or never made", (unsigned long long) fake_dev.busy_deregs,
             (unsigned long long) fake_dev.bad_deregs);
    }
    for (int s = 0; s < 2; ++s) {
        opal_btl_usnic_module_t *m = &w->mods[s];
        opal_btl_usnic_endpoint_t *ep = w->ep[s];

        if (0 != w->work_unflagged[s]) {
            FAIL("side %c: %llu passes found queued work not flagged in work_queued", 'A' + s,
                 (unsigned long long) w->work_unflagged[s]);
        }
        if (NULL != (e = check_list_full(&m->small_send_frags, "small frags", s)) ||
            NULL != (e = check_list_full(&m->large_send_frags, "large frags", s)) ||
            NULL != (e = check_list_full(&m->chunk_segs, "chunks", s)) ||
            NULL != (e = check_list_full(&m->inline_segs, "inline datagrams", s)) ||
            NULL != (e = check_list_full(&m->ack_segs, "ACK buffers", s))) {
            return e;
        }
        for (int c = 0; c < USNIC_NUM_CHANNELS; ++c) {
            opal_btl_usnic_channel_t *ch = &m->channels[c];
            /* silent sends hold their slots until the next completion */
            if (ch->sd_wqe + ch->unsignaled != ch->sd_num || ch->unsignaled >= ch->signal_every) {
                FAIL("side %c channel %d: %d of %d send WQEs free, %d silent sends", 'A' + s, c,
                     ch->sd_wqe, ch->sd_num, ch->unsignaled);
            }
            /* and fewer than a batch of buffers may wait to be reposted */
            if (fake_rx_posted(m, c) + (size_t) ch->repost_count != (size_t) ch->rd_num ||
                ch->repost_count >= ch->repost_batch) {
                FAIL("side %c channel %d: %zu of %d receive buffers posted, %d waiting",
                     'A' + s, c, fake_rx_posted(m, c), ch->rd_num, ch->repost_count);
            }
        }
        if (NULL == ep) {
            continue;
        }
        if (ep->send_credits != m->channels[USNIC_DATA_CHANNEL].sd_num) {
            FAIL("side %c: %d send credits, expected %d", 'A' + s, ep->send_credits,
                 m->channels[USNIC_DATA_CHANNEL].sd_num);
        }
        if (ep->timer_running || 0 != m->timers_running) {
            FAIL("side %c: retransmit timer still running", 'A' + s);
        }
        if (0 != ep->active_large_frags || ep->on_sends_list || ep->ack_owed ||
            !opal_list_is_empty(&m->endpoints_with_sends) || 0 != m->acks_owed) {
            FAIL("side %c: %d large frags active, on sends list %d, owes an ACK %d", 'A' + s,
                 ep->active_large_frags, ep->on_sends_list, ep->ack_owed);
        }
        for (int i = 0; i < USNIC_RX_FRAG_SLOTS && NULL != ep->rx_frags; ++i) {
            if (0 != ep->rx_frags[i].frag_id) {
                FAIL("side %c: reassembly slot %d still holds frag %u", 'A' + s, i,
                     ep->rx_frags[i].frag_id);
            }
        }
        for (uint32_t i = 0; NULL != ep->sent_segs && i <= ep->tx_mask; ++i) {
            if (NULL != ep->sent_segs[i]) {
                FAIL("side %c: window slot %u still holds a segment", 'A' + s, i);
            }
        }
    }
    return NULL;
}
