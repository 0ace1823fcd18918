/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 * $COPYRIGHT$
 * SPDX-License-Identifier: BSD-3-Clause
 *
 * Forged datagrams: a valid header with the sender id of the real peer
 * and sequence numbers inside its window, but sent from another queue
 * pair or another GID than the peer's.  Anyone who knows the Q_Key can
 * send such datagrams; the receiver must drop and count them
 * (num_forged_recvs) before they touch any state, and the real traffic
 * must go on as if they had never come.
 */

#include "opal_config.h"

#include <string.h>

#include "btl_usnic_endpoint.h"
#include "btl_usnic_module.h"
#include "btl_usnic_rdma.h"

#include "engine_world.h"
#include "usnic_test.h"

#define check_ok(expr)                                                         \
    do {                                                                       \
        const char *e_ = (expr);                                               \
        if (NULL != e_) {                                                      \
            return usnic_test_fail(__FILE__, __LINE__, "%s: %s", #expr, e_);   \
        }                                                                      \
    } while (0)

#define STATS(w, s) (&(w)->mods[s].stats)

#define MAX_FORGED 4

/* Addresses that are not side s's on a channel: another QP of its host,
 * its QP of the other channel, and its QP number from another host (for
 * IPv6 GIDs also one differing only in the first byte, which a check of
 * the last four bytes would miss).  Returns how many. */
static int forged_sources(world_t *w, int s, int channel, fake_src_t *out)
{
    fake_src_t real = world_src(w, s, channel);
    int n = 0;

    out[n] = real;
    out[n++].qpn = real.qpn + 100;
    out[n] = real;
    out[n++].qpn = world_src(w, s, USNIC_DATA_CHANNEL + USNIC_PRIORITY_CHANNEL - channel).qpn;
    out[n] = real;
    out[n++].gid[15] ^= 0x40;
    if (!w->mods[s].grh_ipv4) {
        out[n] = real;
        out[n++].gid[0] ^= 0x01;
    }
    return n;
}

static fake_rx_result_t inject_from(world_t *w, int to, int channel, const fake_src_t *src,
                                    const void *bytes, uint32_t len)
{
    return fake_deliver(w->mods[to].local_addr.qp_num[channel], src, bytes, len);
}

/* Take side s's datagrams off the wire, as if the network lost them. */
static int lose_from(world_t *w, int s)
{
    int n = 0;

    for (size_t i = 0; i < fake_wire_count();) {
        fake_dgram_t d;
        if (fake_wire_peek(i)->src != w->mods[s].dev) {
            ++i;
            continue;
        }
        fake_wire_take(i, &d);
        fake_dgram_free(&d);
        ++n;
    }
    return n;
}

/* Forged ACKs (standalone, and piggy-backed on a forged fragment) for
 * data the peer never received do not make the sender release it: it is
 * retransmitted and arrives. */
USNIC_TEST(source_forged_acks_release_nothing)
{
    world_t *w = world_new(500, 600);
    opal_btl_usnic_endpoint_t *ep;
    fake_src_t bad[MAX_FORGED];
    uint64_t forged = 0;
    union {
        usnic_btl_header_t hdr;
        uint8_t bytes[64];
    } p;

    check(NULL != w);
    ep = w->ep[SIDE_A];
    w->paused = true;
    for (int i = 0; i < 5; ++i) {
        check(NULL != world_send(w, SIDE_A, 1500, SEND_PREPARE));
    }
    check_int_eq(world_run(w, 100, false), WORLD_STALLED);
    check_int_eq(lose_from(w, SIDE_A), 5);
    check_int_eq(usnic_tx_window_inflight(&ep->tx), 5);

    for (int c = 0; c < USNIC_NUM_CHANNELS; ++c) {
        int n = forged_sources(w, SIDE_B, c, bad);
        for (int k = 0; k < n; ++k) {
            world_header(w, SIDE_B, &p.hdr, USNIC_PAYLOAD_TYPE_ACK);
            p.hdr.ack_present = 1;
            p.hdr.ack_seq = 504;                /* all five */
            check_int_eq(inject_from(w, SIDE_A, c, &bad[k], &p, sizeof(p.hdr)), FAKE_RX_OK);
            /* a fragment in A's receive window that acknowledges them too */
            world_header(w, SIDE_B, &p.hdr, USNIC_PAYLOAD_TYPE_FRAG);
            p.hdr.pkt_seq = 600;
            p.hdr.payload_len = 16;
            p.hdr.tag = WORLD_TAG;
            p.hdr.ack_present = 1;
            p.hdr.ack_seq = 504;
            memset(&p.hdr + 1, 0x77, 16);
            check_int_eq(inject_from(w, SIDE_A, c, &bad[k], &p, sizeof(p.hdr) + 16),
                         FAKE_RX_OK);
            forged += 2;
        }
    }
    world_progress(w, SIDE_A);
    check_int_eq(usnic_tx_window_inflight(&ep->tx), 5);
    check_int_eq(ep->tx.ack_seq_rcvd, 499);
    check_int_eq(ep->rx.next_contig, 600);
    check_int_eq(w->nrx, 0);
    check_int_eq(STATS(w, SIDE_A)->num_ack_recvs + STATS(w, SIDE_A)->num_frag_recvs, 0);
    check_int_eq(STATS(w, SIDE_A)->num_forged_recvs, forged);

    /* the real ACK path still works: the retransmits get through */
    w->paused = false;
    check_int_eq(world_run(w, 10000, true), WORLD_QUIET);
    check(STATS(w, SIDE_A)->num_resends >= 5);
    check_ok(world_verify(w, SIDE_B, true));
    check_ok(world_verify_completions(w));
    check_ok(world_check_idle(w));
    check_int_eq(STATS(w, SIDE_A)->num_forged_recvs, forged);
    world_fini(w);
    return 0;
}

/* Forged fragments, chunks and PUT chunks in the receive window are not
 * delivered, not recorded (the real ones with the same sequence numbers
 * are accepted after them) and write nothing. */
static int forged_data(world_t *w)
{
    opal_btl_usnic_endpoint_t *ep = w->ep[SIDE_B];
    uint32_t mcp = w->mods[SIDE_B].max_chunk_payload;
    uint16_t edge = ep->rx.next_contig, highest = ep->rx.highest_rcvd;
    size_t nrx = w->nrx;
    opal_btl_usnic_stats_t *sb = STATS(w, SIDE_B);
    uint64_t taken = sb->num_frag_recvs + sb->num_chunk_recvs + sb->num_bad_recvs +
                     sb->num_badfrag_recvs;
    fake_src_t bad[MAX_FORGED];
    static uint8_t target[3 * 4096], pristine[sizeof(target)];
    uint64_t forged = 0;
    union {
        usnic_btl_header_t hdr;
        usnic_btl_chunk_header_t ch;
        uint8_t bytes[4096];
    } p;

    memset(target, 0x3c, sizeof(target));
    memcpy(pristine, target, sizeof(target));
    check(NULL != world_register(w, SIDE_B, target, sizeof(target),
                                 MCA_BTL_REG_FLAG_REMOTE_WRITE | MCA_BTL_REG_FLAG_LOCAL_WRITE));

    for (int c = 0; c < USNIC_NUM_CHANNELS; ++c) {
        int n = forged_sources(w, SIDE_A, c, bad);
        for (int k = 0; k < n; ++k) {
            for (int kind = 0; kind < 4; ++kind) {
                uint32_t len;

                if (kind < 2) {             /* a fragment, a PUT fragment */
                    world_header(w, SIDE_A, &p.hdr, USNIC_PAYLOAD_TYPE_FRAG);
                    p.hdr.payload_len = 100;
                    len = sizeof(p.hdr) + 100;
                } else {                    /* the first chunk of a fragment, of a PUT */
                    if (USNIC_PRIORITY_CHANNEL == c) {
                        continue;           /* chunks do not fit there */
                    }
                    /* (a PUT's chunks carry the registration before the data) */
                    uint32_t ref = (kind & 1) ? (uint32_t) sizeof(usnic_reg_ref_t) : 0;
                    world_header(w, SIDE_A, &p.ch.hdr, USNIC_PAYLOAD_TYPE_CHUNK);
                    p.ch.hdr.payload_len = (uint16_t) (mcp - ref);
                    p.ch.frag_id = 7;
                    p.ch.frag_size = 2 * (mcp - ref);
                    p.ch.frag_offset = 0;
                    len = sizeof(p.ch) + mcp;
                }
                p.hdr.pkt_seq = (uint16_t)(edge + (kind & 1));
                p.hdr.tag = WORLD_TAG;
                p.hdr.put_addr = (kind & 1) ? (uint64_t)(uintptr_t) target : 0;
                memset(p.bytes + (len - p.hdr.payload_len), 0xe1, p.hdr.payload_len);
                check_int_eq(inject_from(w, SIDE_B, c, &bad[k], &p, len), FAKE_RX_OK);
                ++forged;
            }
        }
    }
    world_progress(w, SIDE_B);
    check_int_eq(w->nrx, nrx);
    check(0 == memcmp(target, pristine, sizeof(target)));
    check_int_eq(ep->rx.next_contig, edge);
    check_int_eq(ep->rx.highest_rcvd, highest);
    check(NULL == ep->rx_frags || 0 == ep->rx_frags[7].frag_id);
    check_int_eq(sb->num_frag_recvs + sb->num_chunk_recvs + sb->num_bad_recvs +
                 sb->num_badfrag_recvs, taken);
    check_int_eq(sb->num_forged_recvs, forged);

    /* A's real messages take those sequence numbers and arrive intact */
    for (int i = 0; i < 6; ++i) {
        static const size_t lens[] = {100, 3000, 9000, 700, 20000, 64};
        check(NULL != world_send(w, SIDE_A, lens[i], SEND_PREPARE));
    }
    check_int_eq(world_run(w, 10000, false), WORLD_QUIET);
    check_ok(world_verify(w, SIDE_B, false));
    check_ok(world_verify_completions(w));
    check_ok(world_check_idle(w));
    check_int_eq(sb->num_forged_recvs, forged);
    check(0 == memcmp(target, pristine, sizeof(target)));
    return 0;
}

USNIC_TEST(source_forged_data_ipv4_gids)
{
    world_t *w = world_new(7, 0xfffe);
    int rc;

    if (NULL == w) {
        return usnic_test_fail(__FILE__, __LINE__, "world_new failed");
    }
    rc = forged_data(w);
    world_fini(w);
    return rc;
}

/* RoCE v2 over IPv6 (or RoCE v1): the whole source GID is compared, and
 * real traffic passes with every counter clean. */
USNIC_TEST(source_forged_data_ipv6_gids)
{
    world_t *w = world_new_ipv6(0xfff0, 33);
    int rc;

    if (NULL == w) {
        return usnic_test_fail(__FILE__, __LINE__, "world_new_ipv6 failed");
    }
    for (int i = 0; i < 20; ++i) {
        if (NULL == world_send(w, i & 1 ? SIDE_B : SIDE_A, 50 + 997 * (size_t) i, SEND_PREPARE)) {
            world_fini(w);
            return usnic_test_fail(__FILE__, __LINE__, "world_send failed");
        }
    }
    if (WORLD_QUIET != world_run(w, 10000, false) || NULL != world_verify_counters(w) ||
        NULL != world_verify(w, SIDE_A, false) || NULL != world_verify(w, SIDE_B, false)) {
        const char *e = world_verify_counters(w);
        e = NULL != e ? e : world_verify(w, SIDE_A, false);
        e = NULL != e ? e : world_verify(w, SIDE_B, false);
        world_fini(w);
        return usnic_test_fail(__FILE__, __LINE__, "traffic over IPv6 GIDs: %s",
                               NULL != e ? e : "did not finish");
    }
    rc = forged_data(w);
    world_fini(w);
    return rc;
}

/* A fragment from the real peer for an active-message tag nobody
 * registered, or for 255 (beyond Open MPI's table of 255 callbacks), is
 * dropped as bad.  (A rogue sender can no longer get such a fragment past
 * the source check: this is where it is tested now.) */
USNIC_TEST(source_peer_fragment_for_unknown_tag)
{
    world_t *w = world_new(10, 20);
    union {
        usnic_btl_header_t hdr;
        uint8_t bytes[64];
    } p;

    check(NULL != w);
    for (int i = 0; i < 2; ++i) {
        world_header(w, SIDE_A, &p.hdr, USNIC_PAYLOAD_TYPE_FRAG);
        p.hdr.pkt_seq = (uint16_t)(10 + i);
        p.hdr.payload_len = 16;
        p.hdr.tag = (uint8_t)(254 + i);
        memset(&p.hdr + 1, 0x5a, 16);
        check_int_eq(world_inject(w, SIDE_B, USNIC_PRIORITY_CHANNEL, &p, sizeof(p.hdr) + 16),
                     FAKE_RX_OK);
        world_progress(w, SIDE_B);
        check_int_eq(STATS(w, SIDE_B)->num_bad_recvs, i + 1);
    }
    check_int_eq(w->nrx, 0);
    check_int_eq(STATS(w, SIDE_B)->num_forged_recvs, 0);
    world_fini(w);
    return 0;
}

/* Forged GET/atomic requests (in the peer's name, from another queue pair
 * or GID) are dropped and counted before they run: no memory read or
 * changed, no reply; a forged reply does not complete the initiator's
 * outstanding request, which the real reply then completes once. */
static int forged_rdma_cb_calls, forged_rdma_status;
static void forged_rdma_cb(mca_btl_base_module_t *btl, struct mca_btl_base_endpoint_t *ep,
                           void *local, mca_btl_base_registration_handle_t *lh, void *ctx,
                           void *data, int status)
{
    (void) btl;
    (void) ep;
    (void) local;
    (void) lh;
    (void) ctx;
    (void) data;
    ++forged_rdma_cb_calls;
    forged_rdma_status = status;
}

USNIC_TEST(source_forged_rdma)
{
    world_t *w = world_new(700, 800);
    static uint64_t mem[64];
    uint64_t forged = 0, got = 0;
    fake_src_t bad[MAX_FORGED];
    opal_btl_usnic_endpoint_t *ep;
    mca_btl_base_module_t *btl;
    union {
        usnic_btl_header_t hdr;
        uint8_t bytes[256];
    } p;

    check(NULL != w);
    ep = w->ep[SIDE_B];
    for (int i = 0; i < 64; ++i) {
        mem[i] = 1000 + i;
    }
    check(NULL != world_register(w, SIDE_B, mem, sizeof(mem), MCA_BTL_REG_FLAG_ACCESS_ANY));
    for (int c = 0; c < USNIC_NUM_CHANNELS; ++c) {
        int n = forged_sources(w, SIDE_A, c, bad);
        for (int k = 0; k < n; ++k) {
            for (uint8_t kind = USNIC_RDMA_GET; kind <= USNIC_RDMA_CSWAP; ++kind) {
                usnic_rdma_msg_t m;

                memset(&m, 0, sizeof(m));
                m.kind = kind;
                m.aop = USNIC_AOP_SWAP;
                m.width = 8;
                m.len = USNIC_RDMA_GET == kind ? 64 : 0;
                m.addr = (uint64_t) (uintptr_t) &mem[8];
                m.id = 1;
                m.operand = 1000 + 8;
                m.operand2 = 0xbad;
                world_header(w, SIDE_A, &p.hdr, USNIC_PAYLOAD_TYPE_FRAG);
                p.hdr.pkt_seq = ep->rx.next_contig;
                p.hdr.payload_len = sizeof(m);
                p.hdr.tag = USNIC_TAG_RDMA;
                memcpy(&p.hdr + 1, &m, sizeof(m));
                check_int_eq(inject_from(w, SIDE_B, c, &bad[k], &p, sizeof(p.hdr) + sizeof(m)),
                             FAKE_RX_OK);
                ++forged;
            }
        }
    }
    world_progress(w, SIDE_B);
    check_int_eq(STATS(w, SIDE_B)->num_forged_recvs, forged);
    check_int_eq(STATS(w, SIDE_B)->num_rdma_served, 0);
    check_int_eq(STATS(w, SIDE_B)->num_frag_sends, 0);
    for (int i = 0; i < 64; ++i) {
        check(mem[i] == (uint64_t) (1000 + i));
    }

    /* A's real fetch-and-add; while it is outstanding, forged replies for it */
    btl = &w->mods[SIDE_A].super;
    world_run_as(w, SIDE_A);
    w->paused = true;
    forged_rdma_cb_calls = 0;
    check_int_eq(btl->btl_atomic_fop(btl, w->ep[SIDE_A], &got, (uint64_t) (uintptr_t) &mem[3],
                                     NULL, world_handle_at(w, SIDE_B, (uint64_t) (uintptr_t) &mem[3]),
                                     MCA_BTL_ATOMIC_ADD, 5, 0, 0, forged_rdma_cb,
                                     NULL, NULL),
                 OPAL_SUCCESS);
    {
        opal_btl_usnic_module_t *ma = &w->mods[SIDE_A];
        int n = opal_pointer_array_get_size(&ma->rdma_ops);
        uint64_t id = 0;
        for (int i = 0; i < n; ++i) {
            uint64_t *op = opal_pointer_array_get_item(&ma->rdma_ops, i);
            if (NULL != op) {
                /* the op's id follows its free-list item header */
                id = *(uint64_t *) ((uint8_t *) op + sizeof(opal_free_list_item_t));
            }
        }
        check(0 != id);
        for (int c = 0; c < USNIC_NUM_CHANNELS; ++c) {
            int nb = forged_sources(w, SIDE_B, c, bad);
            for (int k = 0; k < nb; ++k) {
                usnic_rdma_msg_t m;
                memset(&m, 0, sizeof(m));
                m.kind = USNIC_RDMA_REPLY;
                m.id = id;
                m.operand = 0xbad;
                world_header(w, SIDE_B, &p.hdr, USNIC_PAYLOAD_TYPE_FRAG);
                p.hdr.pkt_seq = w->ep[SIDE_A]->rx.next_contig;
                p.hdr.payload_len = sizeof(m);
                p.hdr.tag = USNIC_TAG_RDMA;
                memcpy(&p.hdr + 1, &m, sizeof(m));
                check_int_eq(inject_from(w, SIDE_A, c, &bad[k], &p, sizeof(p.hdr) + sizeof(m)),
                             FAKE_RX_OK);
            }
        }
    }
    world_progress(w, SIDE_A);
    check_int_eq(forged_rdma_cb_calls, 0);
    w->paused = false;
    check_int_eq(world_run(w, 10000, true), WORLD_QUIET);
    check_int_eq(forged_rdma_cb_calls, 1);
    check_int_eq(forged_rdma_status, OPAL_SUCCESS);
    check(got == 1003 && mem[3] == 1008);
    check_int_eq(STATS(w, SIDE_B)->num_rdma_served, 1);
    check_int_eq(STATS(w, SIDE_A)->num_rdma_stray, 0);
    check_ok(world_check_idle(w));
    world_fini(w);
    return 0;
}
