/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 * $COPYRIGHT$
 * SPDX-License-Identifier: BSD-3-Clause
 *
 * Host microbenchmark of the reliability engine, for callgrind
 * (bench/engine.sh runs it).
 *
 * The engine world of the unit tests (test/unit/engine_world.h) runs the
 * real component between two modules over the fake device; an ob1-like
 * caller drives it here:
 *   ping     8-byte messages, A and B in turn, through btl_sendi with a
 *            14-byte header (ob1's match header), each received by one
 *            progress pass of the other side
 *   idle     progress passes of a module with nothing to do
 *   wait     progress passes of a module waiting for an answer: an 8-byte
 *            message out and unacknowledged, its retransmit timer running
 *            (what a ping-pong rank does between its send and the reply)
 *   chunk    a stream of 64 KiB messages, prepare_src + send, 4 KiB chunks
 *   get      256 KiB GETs from the other side's registered memory, as ob1's
 *            RGET protocol issues them (btl_get), 4 KiB chunks of data back
 *   put      64-byte PUTs (btl_put, one datagram each, as osc's small puts)
 *            into the other side's registered memory, PUT_INFLIGHT at a
 *            time; the target holds PUT_REGIONS registrations besides the
 *            GET's (windows and RGET buffers of a busy process), the one
 *            written to made last
 *   scale-N  the ping-pong again, each module with N peers (N - 1 extra
 *            endpoints made as add_procs makes them, a few of them used
 *            once, the rest idle); scale-N-idle: idle passes of that world
 *
 * Each phase runs with callgrind's instrumentation on and ends in a dump
 * named after it; setup and checking run uninstrumented.  bench/engine.sh
 * has callgrind count only inside the BTL entry points and progress, minus
 * the fake device and the PML callbacks in them.  Natively the client
 * requests do nothing.
 *
 * Prints one "phase NAME key=value ..." line per phase (the counts the
 * script divides by) and exits non-zero if any phase went wrong.
 */

#include "opal_config.h"

#include <arpa/inet.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <valgrind/callgrind.h>

#include "opal/datatype/opal_convertor.h"
#include "opal/mca/btl/base/base.h"
#include "opal/runtime/opal.h"

#include "btl_usnic.h"
#include "btl_usnic_endpoint.h"
#include "btl_usnic_module.h"
#include "btl_usnic_proc.h"

#include "engine_world.h"

#define BENCH_TAG 0x32
/* OMPI_PML_OB1_MATCH_HDR_LEN (pml_ob1_hdr.h) without heterogeneous support */
#define OB1_MATCH_HDR_LEN 14
#define SMALL_LEN 8
#define LARGE_LEN (64 * 1024)
/* large messages in flight at once in the stream */
#define LARGE_INFLIGHT 4

#define WARM_ROUNDS 256
#define PING_ROUNDS 1024
#define IDLE_PASSES 8192
#define WARM_LARGE 8
#define LARGE_MSGS 64
#define SCALE_ROUNDS 1024
#define GET_LEN (256 * 1024)
/* GETs in flight at once */
#define GET_INFLIGHT 2
#define WARM_GETS 2
#define GET_OPS 16
#define PUT_LEN 64
#define PUT_INFLIGHT 8
#define WARM_PUTS 64
#define PUT_OPS 2048
#define PUT_REGIONS 14
#define PUT_REGION_LEN (PUT_INFLIGHT * PUT_LEN)
/* extra peers of each module that exchange a message before measuring */
#define ACTIVE_PEERS 4
/* btl_usnic_peer_timeout's default (btl_usnic_mca.c); the fake device turns
 * it off, but its periodic walk over all endpoints is part of progress. */
#define PEER_TIMEOUT_DEFAULT 30

/* The test PML. */
static struct {
    uint64_t recvs[2];                  /* messages delivered to each side */
    uint64_t bad;                       /* of the wrong length */
    uint64_t large_done;                /* completion callbacks of large sends */
    uint8_t hdr[OB1_MATCH_HDR_LEN];
    uint8_t small[SMALL_LEN];
    uint8_t *large;
    opal_convertor_t small_conv;
    opal_convertor_t large_conv[LARGE_INFLIGHT];
    bool large_busy[LARGE_INFLIGHT];
    uint8_t *get_src, *get_dst;         /* B's registered memory, A's buffer */
    mca_btl_base_registration_handle_t *get_handle;
    uint64_t gets_done;
    uint8_t *put_regions;               /* B's PUT_REGIONS registered regions */
    uint8_t *put_dst;                   /* the last of them */
    uint8_t put_src[PUT_INFLIGHT][PUT_LEN];
    mca_btl_base_registration_handle_t *put_handle;
    uint64_t puts_done;
} pml;

static int failures;

#define FAIL(...)                                          \
    do {                                                   \
        fprintf(stderr, "engine_bench: " __VA_ARGS__);     \
        fputc('\n', stderr);                               \
        ++failures;                                        \
    } while (0)

/* ------------------------------------------------------------------ */
/* the PML                                                             */

/* The callbacks the BTL calls are left out of the counts by name
 * (bench/engine.sh): they must stay functions of their own. */

/* ob1's match callback: here only a count. */
__attribute__((noinline)) static void pml_recv(mca_btl_base_module_t *btl,
                                               mca_btl_base_tag_t tag,
                                               mca_btl_base_descriptor_t *des, void *cbdata)
{
    world_t *w = cbdata;
    size_t len = 0;
    (void) tag;

    for (size_t i = 0; i < des->des_segment_count; ++i) {
        len += des->des_segments[i].seg_len;
    }
    if (len != OB1_MATCH_HDR_LEN + SMALL_LEN && len != OB1_MATCH_HDR_LEN + LARGE_LEN) {
        ++pml.bad;
    }
    ++pml.recvs[btl == &w->mods[SIDE_A].super ? SIDE_A : SIDE_B];
}

/* The convertor ob1 sets up before it calls the BTL. */
static void pml_prepare(opal_convertor_t *conv, void *buf, size_t len)
{
    opal_convertor_cleanup(conv);
    opal_convertor_prepare_for_send(conv, &opal_datatype_uint1, len, buf);
}

/* ob1 writes its match header into the descriptor prepare_src gave it. */
static void pml_write_hdr(mca_btl_base_descriptor_t *des)
{
    memcpy(des->des_segments[0].seg_addr.pval, pml.hdr, OB1_MATCH_HDR_LEN);
}

__attribute__((noinline)) static void pml_send_done(mca_btl_base_module_t *btl,
                                                    mca_btl_base_endpoint_t *ep,
                                                    mca_btl_base_descriptor_t *des, int status)
{
    (void) btl;
    (void) ep;
    if (OPAL_SUCCESS != status) {
        FAIL("a large send completed with status %d", status);
    }
    pml.large_busy[(uintptr_t) des->des_cbdata] = false;
    ++pml.large_done;
}

__attribute__((noinline)) static void pml_get_done(mca_btl_base_module_t *btl,
                                                   mca_btl_base_endpoint_t *ep, void *local,
                                                   mca_btl_base_registration_handle_t *lh,
                                                   void *ctx, void *data, int status)
{
    (void) btl;
    (void) ep;
    (void) local;
    (void) lh;
    (void) ctx;
    (void) data;
    if (OPAL_SUCCESS != status) {
        FAIL("a GET completed with status %d", status);
    }
    ++pml.gets_done;
}

__attribute__((noinline)) static void pml_put_done(mca_btl_base_module_t *btl,
                                                   mca_btl_base_endpoint_t *ep, void *local,
                                                   mca_btl_base_registration_handle_t *lh,
                                                   void *ctx, void *data, int status)
{
    (void) btl;
    (void) ep;
    (void) local;
    (void) lh;
    (void) ctx;
    (void) data;
    if (OPAL_SUCCESS != status) {
        FAIL("a PUT completed with status %d", status);
    }
    ++pml.puts_done;
}

/* ------------------------------------------------------------------ */
/* the caller                                                          */

/* One pass of side s's progress, as opal_btl_usnic_component_progress
 * makes it, but with the coarse clock fixed; the world keeps the
 * retransmit timer from expiring (its default), so no real time decides
 * what runs. */
static void pass(world_t *w, int side)
{
    ++usnic_component.progress_ticks;
    world_progress(w, side);
}

/* mca_pml_ob1_send_inline: btl_sendi of header and data, no descriptor. */
static int send_small(world_t *w, int from, opal_btl_usnic_endpoint_t *ep)
{
    mca_btl_base_module_t *btl = &w->mods[from].super;

    pml_prepare(&pml.small_conv, pml.small, SMALL_LEN);
    world_run_as(w, from);
    return btl->btl_sendi(btl, ep, &pml.small_conv, pml.hdr, OB1_MATCH_HDR_LEN, SMALL_LEN,
                          MCA_BTL_NO_ORDER,
                          MCA_BTL_DES_FLAGS_PRIORITY | MCA_BTL_DES_FLAGS_BTL_OWNERSHIP, BENCH_TAG,
                          NULL);
}

/* mca_pml_ob1_send_request_start_prepare: prepare_src with room for the
 * header, the header, btl_send.  Returns false if no convertor is free or
 * the BTL refused. */
static bool send_large(world_t *w)
{
    mca_btl_base_module_t *btl = &w->mods[SIDE_A].super;
    mca_btl_base_descriptor_t *des;
    size_t size = LARGE_LEN;
    int slot = -1, rc;

    for (int i = 0; i < LARGE_INFLIGHT && slot < 0; ++i) {
        slot = pml.large_busy[i] ? -1 : i;
    }
    if (slot < 0) {
        return false;
    }
    pml_prepare(&pml.large_conv[slot], pml.large, LARGE_LEN);
    world_run_as(w, SIDE_A);
    des = btl->btl_prepare_src(btl, w->ep[SIDE_A], &pml.large_conv[slot], MCA_BTL_NO_ORDER,
                               OB1_MATCH_HDR_LEN, &size,
                               MCA_BTL_DES_FLAGS_PRIORITY | MCA_BTL_DES_FLAGS_BTL_OWNERSHIP);
    if (NULL == des || LARGE_LEN != size) {
        FAIL("prepare_src of %d bytes failed", LARGE_LEN);
        return false;
    }
    pml_write_hdr(des);
    des->des_cbfunc = pml_send_done;
    des->des_cbdata = (void *)(uintptr_t) slot;
    pml.large_busy[slot] = true;
    rc = btl->btl_send(btl, w->ep[SIDE_A], des, BENCH_TAG);
    if (1 == rc) {
        pml.large_busy[slot] = false;
        ++pml.large_done;
    } else if (OPAL_SUCCESS != rc) {
        FAIL("btl_send of a large message returned %d", rc);
        return false;
    }
    return true;
}

/* Round trips of 8-byte messages: A sends, B receives in one pass and
 * answers, A receives in one pass. */
static void pingpong(world_t *w, int rounds)
{
    for (int i = 0; i < rounds; ++i) {
        if (OPAL_SUCCESS != send_small(w, SIDE_A, w->ep[SIDE_A])) {
            FAIL("btl_sendi A to B failed");
            return;
        }
        world_net_step(w);
        pass(w, SIDE_B);
        if (OPAL_SUCCESS != send_small(w, SIDE_B, w->ep[SIDE_B])) {
            FAIL("btl_sendi B to A failed");
            return;
        }
        world_net_step(w);
        pass(w, SIDE_A);
    }
}

/* n large messages from A to B, LARGE_INFLIGHT at a time, until all are
 * delivered and acknowledged. */
static void stream(world_t *w, int n)
{
    uint64_t want = pml.recvs[SIDE_B] + (uint64_t) n, done = pml.large_done + (uint64_t) n;
    unsigned guard = 0;

    while ((n > 0 || pml.recvs[SIDE_B] < want || !world_quiescent(w)) && ++guard < 1000000) {
        if (n > 0 && send_large(w)) {
            --n;
        }
        pass(w, SIDE_A);
        world_net_step(w);
        pass(w, SIDE_B);
        world_net_step(w);
    }
    if (pml.recvs[SIDE_B] != want || pml.large_done != done) {
        FAIL("large stream: %llu of the messages missing, %llu not completed",
             (unsigned long long) (want - pml.recvs[SIDE_B]),
             (unsigned long long) (done - pml.large_done));
    }
}

/* n GETs of GET_LEN bytes by A from B's memory, GET_INFLIGHT at a time
 * (ob1 issues a large message's GETs together), until all are complete
 * and acknowledged. */
static void gets(world_t *w, int n)
{
    mca_btl_base_module_t *btl = &w->mods[SIDE_A].super;
    uint64_t issued = pml.gets_done, done = pml.gets_done + (uint64_t) n;
    unsigned guard = 0;

    while ((pml.gets_done < done || !world_quiescent(w)) && ++guard < 1000000) {
        while (issued < done && issued - pml.gets_done < GET_INFLIGHT) {
            int slot = (int) (issued % GET_INFLIGHT);
            world_run_as(w, SIDE_A);
            if (OPAL_SUCCESS != btl->btl_get(btl, w->ep[SIDE_A], pml.get_dst + slot * GET_LEN,
                                             (uint64_t) (uintptr_t) (pml.get_src + slot * GET_LEN),
                                             NULL, pml.get_handle, GET_LEN, 0, MCA_BTL_NO_ORDER,
                                             pml_get_done, NULL, NULL)) {
                FAIL("btl_get failed");
                return;
            }
            ++issued;
        }
        pass(w, SIDE_A);
        world_net_step(w);
        pass(w, SIDE_B);
        world_net_step(w);
    }
    if (pml.gets_done != done || 0 != memcmp(pml.get_dst, pml.get_src, GET_INFLIGHT * GET_LEN)) {
        FAIL("GETs: %llu not completed, or wrong data", (unsigned long long) (done - pml.gets_done));
    }
}

/* n PUTs of PUT_LEN bytes by A into B's memory, PUT_INFLIGHT at a time,
 * until all are complete (acknowledged). */
static void put_stream(world_t *w, int n)
{
    mca_btl_base_module_t *btl = &w->mods[SIDE_A].super;
    uint64_t issued = pml.puts_done, done = pml.puts_done + (uint64_t) n;
    unsigned guard = 0;

    while ((pml.puts_done < done || !world_quiescent(w)) && ++guard < 1000000) {
        while (issued < done && issued - pml.puts_done < PUT_INFLIGHT) {
            int slot = (int) (issued % PUT_INFLIGHT);
            world_run_as(w, SIDE_A);
            if (OPAL_SUCCESS != btl->btl_put(btl, w->ep[SIDE_A], pml.put_src[slot],
                                             (uint64_t) (uintptr_t) (pml.put_dst + slot * PUT_LEN),
                                             NULL, pml.put_handle, PUT_LEN, 0, MCA_BTL_NO_ORDER,
                                             pml_put_done, NULL, NULL)) {
                FAIL("btl_put failed");
                return;
            }
            ++issued;
        }
        pass(w, SIDE_A);
        world_net_step(w);
        pass(w, SIDE_B);
        world_net_step(w);
    }
    if (pml.puts_done != done || 0 != memcmp(pml.put_dst, pml.put_src, sizeof(pml.put_src))) {
        FAIL("PUTs: %llu not completed, or wrong data", (unsigned long long) (done - pml.puts_done));
    }
}

static void idle(world_t *w, int passes)
{
    for (int i = 0; i < passes; ++i) {
        pass(w, SIDE_A);
    }
}

/* ------------------------------------------------------------------ */
/* measuring                                                           */

static uint64_t ack_sends(world_t *w)
{
    return w->mods[SIDE_A].stats.num_ack_sends + w->mods[SIDE_B].stats.num_ack_sends;
}

/* standalone ACKs sent during the last phase */
static uint64_t phase_acks;

/* Instrumentation is off outside the phases (--instr-atstart=no), so the
 * --toggle-collect functions toggle nothing during setup and warm-up. */
static void measure_begin(world_t *w)
{
    phase_acks = ack_sends(w);
    CALLGRIND_ZERO_STATS;
    CALLGRIND_START_INSTRUMENTATION;
}

static void measure_end(world_t *w, const char *phase)
{
    CALLGRIND_STOP_INSTRUMENTATION;
    CALLGRIND_DUMP_STATS_AT(phase);
    phase_acks = ack_sends(w) - phase_acks;
}

static long rss_bytes(void)
{
    long pages = -1, resident = -1;
    FILE *f = fopen("/proc/self/statm", "r");

    if (NULL != f) {
        if (2 != fscanf(f, "%ld %ld", &pages, &resident)) {
            resident = -1;
        }
        fclose(f);
    }
    return resident < 0 ? -1 : resident * sysconf(_SC_PAGESIZE);
}

/* Everything went as a clean network makes it go. */
static void check_world(world_t *w, const char *phase)
{
    const char *e;

    if (WORLD_QUIET != world_run(w, 10000, false)) {
        FAIL("%s: the world did not settle", phase);
    }
    if (NULL != (e = world_check_idle(w))) {
        FAIL("%s: %s", phase, e);
    }
    for (int s = 0; s < 2; ++s) {
        if (0 != w->mods[s].stats.num_resends || 0 != fake_dev.fatal_calls) {
            FAIL("%s: side %c resent %llu segments, %d fatal errors", phase, 'A' + s,
                 (unsigned long long) w->mods[s].stats.num_resends, fake_dev.fatal_calls);
        }
    }
    if (0 != w->net_overflows || 0 != pml.bad) {
        FAIL("%s: %llu datagrams found no receive buffer, %llu messages of a wrong size", phase,
             (unsigned long long) w->net_overflows, (unsigned long long) pml.bad);
    }
}

static world_t *bench_world(void)
{
    world_t *w = world_new(1, 40000);

    if (NULL == w) {
        FAIL("world_new failed");
        return NULL;
    }
    usnic_component.peer_timeout = PEER_TIMEOUT_DEFAULT;
    mca_btl_base_active_message_trigger[BENCH_TAG].cbfunc = pml_recv;
    mca_btl_base_active_message_trigger[BENCH_TAG].cbdata = w;
    memset(pml.recvs, 0, sizeof(pml.recvs));
    return w;
}

static void phase_line(const char *phase, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* The counts of the phase just measured. */
static void phase_line(const char *phase, const char *fmt, ...)
{
    va_list ap;

    printf("phase %s ", phase);
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf(" ack_sends=%llu\n", (unsigned long long) phase_acks);
}

/* ------------------------------------------------------------------ */
/* many peers                                                          */

typedef struct {
    int n;                              /* extra peers per side */
    opal_proc_t *oproc[2];
    opal_btl_usnic_endpoint_t **ep[2];
} extra_peers_t;

/* The endpoint of side s toward extra peer i, as usnic_add_procs makes it,
 * from a modex record like the other side's with its own QP numbers
 * (which no fake QP has: what is sent to it is dropped). */
static opal_btl_usnic_endpoint_t *add_peer(world_t *w, int s, opal_proc_t *op, uint32_t vpid)
{
    opal_btl_usnic_module_t *m = &w->mods[s];
    opal_btl_usnic_proc_t *up = OBJ_NEW(opal_btl_usnic_proc_t);
    opal_btl_usnic_endpoint_t *ep;
    opal_btl_usnic_ah_t *ah;

    if (NULL == up) {
        return NULL;
    }
    OBJ_CONSTRUCT(op, opal_proc_t);
    op->proc_name.jobid = 0x1234;
    op->proc_name.vpid = vpid;
    up->proc_opal = op;
    up->hostname = strdup("peer");
    up->hashed_name = opal_btl_usnic_hash_name(&op->proc_name);
    up->modex = malloc(sizeof(*up->modex));
    up->match = malloc(2 * sizeof(*up->match));
    up->endpoints = calloc(2, sizeof(*up->endpoints));
    ep = OBJ_NEW(opal_btl_usnic_endpoint_t);
    if (NULL == up->hostname || NULL == up->modex || NULL == up->match || NULL == up->endpoints ||
        NULL == ep) {
        OBJ_RELEASE(up);
        return NULL;
    }
    up->modex[0] = w->mods[1 - s].local_addr;
    up->modex[0].qp_num[USNIC_PRIORITY_CHANNEL] = 0x7f000000u + 2 * vpid;
    up->modex[0].qp_num[USNIC_DATA_CHANNEL] = 0x7f000001u + 2 * vpid;
    up->modex[0].ipv4_addr = htonl(0x0a010000u + vpid);
    up->modex[0].isn = (uint16_t) (vpid * 7);
    up->modex_count = 1;
    up->match[s] = 0;
    up->match[1 - s] = -1;
    opal_list_append(&usnic_component.procs, &up->super);

    ep->proc = up;
    ep->remote_index = 0;
    if (OPAL_SUCCESS != opal_btl_usnic_endpoint_setup(ep, m, &up->modex[0])) {
        OBJ_RELEASE(ep);
        return NULL;
    }
    m->ops->ah_create(m->pd, m->port_num, m->gid_index, ep->remote.gid, &ah);
    opal_btl_usnic_endpoint_set_ah(ep, ah);
    up->endpoints[s] = ep;
    opal_hash_table_set_value_uint64(&m->senders, up->hashed_name, ep);
    opal_list_append(&m->all_endpoints, &ep->all_li);
    return ep;
}

/* One 8-byte message from side s to the extra peer and one back that also
 * acknowledges it, so the endpoint has sent, has received, has ACKed (into
 * the void) and is idle again (its send table back in the pool, or soon). */
static void activate(world_t *w, int s, opal_btl_usnic_endpoint_t *ep)
{
    uint8_t d[sizeof(usnic_btl_header_t) + OB1_MATCH_HDR_LEN + SMALL_LEN];
    usnic_btl_header_t *hdr = (usnic_btl_header_t *) d;
    fake_src_t src;

    if (OPAL_SUCCESS != send_small(w, s, ep)) {
        FAIL("btl_sendi to an extra peer failed");
        return;
    }
    while (world_net_step(w) > 0) {
        continue;
    }
    memset(d, 0, sizeof(d));
    hdr->sender = ep->proc->hashed_name;
    hdr->pkt_seq = ep->remote.isn;
    hdr->ack_seq = (uint16_t) (ep->tx.next_seq_to_send - 1);
    hdr->ack_present = 1;
    hdr->payload_len = OB1_MATCH_HDR_LEN + SMALL_LEN;
    hdr->payload_type = USNIC_PAYLOAD_TYPE_FRAG;
    hdr->tag = BENCH_TAG;
    /* from the extra peer's own priority QP and GID, which the receive path checks */
    src.qpn = ep->remote.qp_num[USNIC_PRIORITY_CHANNEL];
    memcpy(src.gid, ep->remote.gid, sizeof(src.gid));
    if (FAKE_RX_OK != fake_deliver(w->mods[s].local_addr.qp_num[USNIC_PRIORITY_CHANNEL], &src,
                                   d, sizeof(d))) {
        FAIL("could not deliver to side %c", 'A' + s);
    }
    for (int i = 0; i < 2 * usnic_component.ack_iteration_delay + 4; ++i) {
        pass(w, s);
        while (world_net_step(w) > 0) {
            continue;
        }
    }
    if (ep->timer_running || ep->ack_owed || 0 != usnic_tx_window_inflight(&ep->tx) ||
        ep->tx.next_seq_to_send == w->mods[s].isn) {
        FAIL("extra peer of side %c not idle after one exchange", 'A' + s);
    }
}

static bool add_peers(world_t *w, extra_peers_t *x, int n)
{
    memset(x, 0, sizeof(*x));
    x->n = n;
    for (int s = 0; s < 2; ++s) {
        size_t npeers;

        x->oproc[s] = calloc((size_t) n + 1, sizeof(opal_proc_t));
        x->ep[s] = calloc((size_t) n + 1, sizeof(*x->ep[s]));
        if (NULL == x->oproc[s] || NULL == x->ep[s]) {
            return false;
        }
        for (int i = 0; i < n; ++i) {
            x->ep[s][i] = add_peer(w, s, &x->oproc[s][i], (uint32_t) (2 + s * n + i));
            if (NULL == x->ep[s][i]) {
                FAIL("adding peer %d of side %c failed", i, 'A' + s);
                return false;
            }
        }
        /* as usnic_add_procs once the new endpoints are in */
        npeers = opal_list_get_size(&w->mods[s].all_endpoints);
        for (opal_list_item_t *li = opal_list_get_first(&w->mods[s].all_endpoints);
             li != opal_list_get_end(&w->mods[s].all_endpoints); li = opal_list_get_next(li)) {
            opal_btl_usnic_endpoint_size_window(
                usnic_container_of(li, opal_btl_usnic_endpoint_t, all_li), npeers);
        }
    }
    for (int s = 0; s < 2; ++s) {
        for (int i = 0; i < n && i < ACTIVE_PEERS; ++i) {
            activate(w, s, x->ep[s][i]);
        }
    }
    return true;
}

/* btl_del_procs of the extra peers, as the PML does at the end. */
static void del_peers(world_t *w, extra_peers_t *x)
{
    for (int s = 0; s < 2 && x->n > 0; ++s) {
        opal_proc_t **procs = calloc((size_t) x->n, sizeof(*procs));
        if (NULL != procs && NULL != x->ep[s]) {
            for (int i = 0; i < x->n; ++i) {
                procs[i] = &x->oproc[s][i];
            }
            world_run_as(w, s);
            w->mods[s].super.btl_del_procs(&w->mods[s].super, (size_t) x->n, procs,
                                           (mca_btl_base_endpoint_t **) x->ep[s]);
        }
        free(procs);
    }
    for (int s = 0; s < 2; ++s) {
        for (int i = 0; NULL != x->oproc[s] && i < x->n; ++i) {
            OBJ_DESTRUCT(&x->oproc[s][i]);
        }
        free(x->oproc[s]);
        free(x->ep[s]);
    }
}

static void scale(int peers)
{
    char phase[32];
    extra_peers_t x;
    world_t *w = bench_world();
    long rss0, rss1;
    uint64_t endpoint_bytes;

    if (NULL == w) {
        return;
    }
    snprintf(phase, sizeof(phase), "scale-%d", peers);
    /* Sends to the extra peers complete too; the world only knows its two
     * endpoints, so its check of completions against live endpoints is off. */
    fake_dev.endpoint_alive = NULL;
    rss0 = rss_bytes();
    if (!add_peers(w, &x, peers - 1)) {
        del_peers(w, &x);
        return;
    }
    rss1 = rss_bytes();
    pingpong(w, WARM_ROUNDS);
    world_run(w, 1000, false);
    memset(pml.recvs, 0, sizeof(pml.recvs));
    measure_begin(w);
    pingpong(w, SCALE_ROUNDS);
    measure_end(w, phase);
    if (pml.recvs[SIDE_A] != SCALE_ROUNDS || pml.recvs[SIDE_B] != SCALE_ROUNDS) {
        FAIL("%s: %llu and %llu messages received, %d sent each way", phase,
             (unsigned long long) pml.recvs[SIDE_A], (unsigned long long) pml.recvs[SIDE_B],
             SCALE_ROUNDS);
    }
    check_world(w, phase);
    endpoint_bytes = w->mods[SIDE_A].stats.endpoint_bytes;
    phase_line(phase,
               "messages=%d peers=%d active=%d endpoint_bytes=%llu send_table_bytes=%llu "
               "rss_delta=%ld window=%u prio_window=%u",
               2 * SCALE_ROUNDS, peers, peers - 1 < ACTIVE_PEERS ? peers - 1 : ACTIVE_PEERS,
               (unsigned long long) endpoint_bytes,
               (unsigned long long) w->mods[SIDE_A].stats.send_table_bytes,
               rss0 >= 0 && rss1 >= 0 ? rss1 - rss0 : -1,
               w->ep[SIDE_A]->tx.size, w->ep[SIDE_A]->prio_window);

    /* progress walks every endpoint now and then: idle passes show it best */
    snprintf(phase, sizeof(phase), "scale-%d-idle", peers);
    measure_begin(w);
    idle(w, IDLE_PASSES);
    measure_end(w, phase);
    check_world(w, phase);
    phase_line(phase, "passes=%d", IDLE_PASSES);
    del_peers(w, &x);
    world_fini(w);
}

int main(int argc, char **argv)
{
    world_t *w;
    uint64_t chunks0;

    setvbuf(stdout, NULL, _IOLBF, 0);
    if (OPAL_SUCCESS != opal_init_util(&argc, &argv)) {
        fprintf(stderr, "engine_bench: opal_init_util failed\n");
        return 2;
    }
    OBJ_CONSTRUCT(&pml.small_conv, opal_convertor_t);
    for (int i = 0; i < LARGE_INFLIGHT; ++i) {
        OBJ_CONSTRUCT(&pml.large_conv[i], opal_convertor_t);
    }
    pml.large = malloc(LARGE_LEN);
    pml.get_src = malloc(GET_INFLIGHT * GET_LEN);
    pml.get_dst = malloc(GET_INFLIGHT * GET_LEN);
    pml.put_regions = calloc(PUT_REGIONS, PUT_REGION_LEN);
    if (NULL == pml.large || NULL == pml.get_src || NULL == pml.get_dst ||
        NULL == pml.put_regions) {
        return 2;
    }
    memset(pml.get_src, 0x33, GET_INFLIGHT * GET_LEN);
    memset(pml.hdr, 0x5a, sizeof(pml.hdr));
    memset(pml.small, 0x11, sizeof(pml.small));
    memset(pml.large, 0x22, LARGE_LEN);

    if (NULL != (w = bench_world())) {
        pingpong(w, WARM_ROUNDS);
        world_run(w, 1000, false);
        memset(pml.recvs, 0, sizeof(pml.recvs));
        measure_begin(w);
        pingpong(w, PING_ROUNDS);
        measure_end(w, "ping");
        if (pml.recvs[SIDE_A] != PING_ROUNDS || pml.recvs[SIDE_B] != PING_ROUNDS) {
            FAIL("ping: %llu and %llu messages received, %d sent each way",
                 (unsigned long long) pml.recvs[SIDE_A], (unsigned long long) pml.recvs[SIDE_B],
                 PING_ROUNDS);
        }
        check_world(w, "ping");
        phase_line("ping", "messages=%d", 2 * PING_ROUNDS);

        measure_begin(w);
        idle(w, IDLE_PASSES);
        measure_end(w, "idle");
        check_world(w, "idle");
        phase_line("idle", "passes=%d", IDLE_PASSES);

        /* the message stays on the wire until the phase is over */
        w->paused = true;
        if (OPAL_SUCCESS != send_small(w, SIDE_A, w->ep[SIDE_A])) {
            FAIL("wait: btl_sendi A to B failed");
        }
        measure_begin(w);
        idle(w, IDLE_PASSES);
        measure_end(w, "wait");
        if (!w->ep[SIDE_A]->timer_running || PING_ROUNDS != pml.recvs[SIDE_B]) {
            FAIL("wait: the message was not waiting for its answer");
        }
        w->paused = false;
        check_world(w, "wait");
        phase_line("wait", "passes=%d", IDLE_PASSES);

        stream(w, WARM_LARGE);
        chunks0 = w->mods[SIDE_A].stats.num_chunk_sends;
        measure_begin(w);
        stream(w, LARGE_MSGS);
        measure_end(w, "chunk");
        check_world(w, "chunk");
        phase_line("chunk", "messages=%d chunks=%llu", LARGE_MSGS,
                   (unsigned long long) (w->mods[SIDE_A].stats.num_chunk_sends - chunks0));

        pml.get_handle = world_register(w, SIDE_B, pml.get_src, GET_INFLIGHT * GET_LEN,
                                        MCA_BTL_REG_FLAG_REMOTE_READ);
        if (NULL == pml.get_handle) {
            FAIL("get: registration failed");
        }
        gets(w, WARM_GETS);
        chunks0 = w->mods[SIDE_B].stats.num_chunk_sends;
        measure_begin(w);
        gets(w, GET_OPS);
        measure_end(w, "get");
        check_world(w, "get");
        phase_line("get", "gets=%d chunks=%llu", GET_OPS,
                   (unsigned long long) (w->mods[SIDE_B].stats.num_chunk_sends - chunks0));

        for (int i = 0; i < PUT_REGIONS; ++i) {
            pml.put_handle = world_register(w, SIDE_B, pml.put_regions + i * PUT_REGION_LEN,
                                            PUT_REGION_LEN, MCA_BTL_REG_FLAG_REMOTE_WRITE);
            if (NULL == pml.put_handle) {
                FAIL("put: registration %d failed", i);
            }
        }
        pml.put_dst = pml.put_regions + (PUT_REGIONS - 1) * PUT_REGION_LEN;
        for (int i = 0; i < PUT_INFLIGHT; ++i) {
            memset(pml.put_src[i], 0x40 + i, PUT_LEN);
        }
        put_stream(w, WARM_PUTS);
        measure_begin(w);
        put_stream(w, PUT_OPS);
        measure_end(w, "put");
        check_world(w, "put");
        phase_line("put", "puts=%d registrations=%d", PUT_OPS, PUT_REGIONS);
        world_fini(w);
    }

    scale(1);
    scale(100);
    scale(1000);
    scale(10000);

    OBJ_DESTRUCT(&pml.small_conv);
    for (int i = 0; i < LARGE_INFLIGHT; ++i) {
        OBJ_DESTRUCT(&pml.large_conv[i]);
    }
    free(pml.large);
    free(pml.get_src);
    free(pml.get_dst);
    free(pml.put_regions);
    opal_finalize_util();
    if (0 != failures) {
        fprintf(stderr, "engine_bench: %d failures\n", failures);
        return 1;
    }
    return 0;
}
