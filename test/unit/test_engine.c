/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 * $COPYRIGHT$
 * SPDX-License-Identifier: BSD-3-Clause
 *
 * The reliability engine between two fake processes (engine_world.h):
 * messages through the real BTL functions and progress loop, over a
 * network that loses, duplicates, reorders and corrupts datagrams.  Every
 * test that moves messages checks every delivered byte and that each
 * message arrives exactly once.
 */

#include "opal_config.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <signal.h>
#include <unistd.h>


#include "btl_usnic_ack.h"
#include "btl_usnic_endpoint.h"
#include "btl_usnic_module.h"
#include "btl_usnic_retrans.h"

#include "engine_world.h"
#include "usnic_test.h"

#define check_ok(expr)                                                         \
    do {                                                                       \
        const char *e_ = (expr);                                               \
        if (NULL != e_) {                                                      \
            return usnic_test_fail(__FILE__, __LINE__, "%s: %s", #expr, e_);   \
        }                                                                      \
    } while (0)

/* Everything a test that moved messages wants at its end. */
#define check_all_delivered(w)                                                 \
    do {                                                                       \
        check_ok(world_verify((w), SIDE_B, false));                            \
        check_ok(world_verify((w), SIDE_A, false));                            \
        check_ok(world_verify_completions(w));                                 \
        check_ok(world_check_idle(w));                                         \
    } while (0)

#define STATS(w, s) (&(w)->mods[s].stats)

/* Items of a free list handed out and not yet returned. */
static size_t in_use(opal_free_list_t *fl)
{
    return fl->fl_num_allocated - world_free_count(fl);
}

/* Messages of every kind: fast path, one datagram, chunked; contiguous or
 * strided user memory. */
static size_t mixed_len(world_t *w)
{
    uint32_t r = world_rand(w);
    switch (r % 10) {
    case 0: case 1: case 2:
        return 8 + (r >> 8) % 729;                  /* priority channel */
    case 3: case 4: case 5:
        return 737 + (r >> 8) % 3328;               /* one data datagram */
    case 6: case 7: case 8:
        return 4065 + (r >> 8) % 40000;             /* a few chunks */
    default:
        return 100000 + (r >> 8) % (150 * 1024 - 100000 + 1);
    }
}

static send_method_t mixed_method(world_t *w, size_t len)
{
    send_method_t how = (send_method_t) (world_rand(w) % 6);
    if (SEND_NONCONTIG == how && len < 64) {
        return SEND_PREPARE;
    }
    return how;
}

/* A network that loses, duplicates and delays datagrams at random. */
typedef struct {
    unsigned loss;          /* per mille of data datagrams */
    unsigned dup;
    unsigned ack_loss;      /* per mille of standalone ACKs */
    unsigned ack_dup;
    unsigned delay;         /* per mille of any datagram, each time it comes up */
    uint64_t lost, duped, acks_lost, acks_duped, piggybacked, delayed;
} chaos_t;

static net_action_t chaos_filter(world_t *w, fake_dgram_t *d, void *arg)
{
    chaos_t *c = arg;
    const usnic_btl_header_t *h = dgram_hdr(d);
    unsigned r = world_rand(w) % 1000;

    /* to the end of the wire: it arrives after everything sent meanwhile */
    if (world_rand(w) % 1000 < c->delay) {
        ++c->delayed;
        return NET_HOLD;
    }
    if (USNIC_PAYLOAD_TYPE_ACK == h->payload_type) {
        if (r < c->ack_loss) {
            ++c->acks_lost;
            return NET_DROP;
        }
        if (r < c->ack_loss + c->ack_dup) {
            ++c->acks_duped;
            return NET_DUP;
        }
        return NET_DELIVER;
    }
    if (h->ack_present) {
        ++c->piggybacked;
    }
    if (r < c->loss) {
        ++c->lost;
        return NET_DROP;
    }
    if (r < c->loss + c->dup) {
        ++c->duped;
        return NET_DUP;
    }
    return NET_DELIVER;
}

/* Drops the first transmission of chosen sequence numbers of one side. */
typedef struct {
    int from;
    uint16_t seqs[8];
    int nseqs;
    int dropped;
    bool drop_acks_once;    /* also the first standalone ACK toward `from` */
    int acks_dropped;
} drop_first_t;

static net_action_t drop_first_filter(world_t *w, fake_dgram_t *d, void *arg)
{
    drop_first_t *f = arg;
    const usnic_btl_header_t *h = dgram_hdr(d);

    if (d->src != w->mods[f->from].dev) {
        if (USNIC_PAYLOAD_TYPE_ACK == h->payload_type && f->drop_acks_once &&
            0 == f->acks_dropped) {
            ++f->acks_dropped;
            return NET_DROP;
        }
        return NET_DELIVER;
    }
    if (USNIC_PAYLOAD_TYPE_ACK != h->payload_type) {
        for (int i = 0; i < f->nseqs; ++i) {
            if (h->pkt_seq == f->seqs[i]) {
                f->seqs[i] = f->seqs[--f->nseqs];
                ++f->dropped;
                return NET_DROP;
            }
        }
    }
    return NET_DELIVER;
}

/* ep's timer deadline passed while its module did not look: a started
 * deadline in the past, and the module's earliest deadline with it */
static void deadline_passed(opal_btl_usnic_endpoint_t *ep)
{
    ep->rto_restart = false;
    ep->rto_deadline_us = opal_btl_usnic_now_us() - 1;
    ep->module->timer_due_us = ep->rto_deadline_us;
}

/* ------------------------------------------------------------------ */
/* a perfect network                                                   */

/* Small messages, one datagram each: the fast path on the priority
 * channel and the queue on the data channel, built with btl_alloc,
 * btl_prepare_src and btl_sendi.  The receiver polls the priority channel
 * first, so order holds only within a channel. */
USNIC_TEST(engine_small_messages)
{
    world_t *w = world_new(100, 2000);

    check(NULL != w);
    for (int i = 0; i < 200; ++i) {
        size_t len = 8 + (size_t) (i * 37) % 4057;
        check(NULL != world_send(w, SIDE_A, len, (send_method_t) (i % 3)));
    }
    check_int_eq(world_run(w, 10000, false), WORLD_QUIET);
    check_all_delivered(w);
    check_ok(world_verify_counters(w));
    check_int_eq(STATS(w, SIDE_B)->num_frag_recvs, 200);
    check_int_eq(STATS(w, SIDE_A)->num_resends, 0);
    check_int_eq(STATS(w, SIDE_B)->num_dup_recvs, 0);
    check(STATS(w, SIDE_A)->num_fast_sends > 0);
    check(STATS(w, SIDE_A)->num_fast_sends < 200);
    world_fini(w);
    return 0;
}

/* Data-channel messages over a network that keeps order arrive in order. */
USNIC_TEST(engine_in_order)
{
    world_t *w = world_new(7, 9);

    check(NULL != w);
    for (int i = 0; i < 300; ++i) {
        check(NULL != world_send(w, SIDE_A, 737 + (size_t) (i * 101) % 3300,
                                 (send_method_t) (i % 3)));
    }
    check_int_eq(world_run(w, 10000, false), WORLD_QUIET);
    check_ok(world_verify(w, SIDE_B, true));
    check_all_delivered(w);
    check_ok(world_verify_counters(w));
    check_int_eq(STATS(w, SIDE_A)->num_fast_sends, 0);
    check_int_eq(STATS(w, SIDE_B)->num_frag_recvs, 300);
    world_fini(w);
    return 0;
}

/* Large messages cut into chunks and put together again: up to the
 * 150 KiB send limit, on chunk boundaries and one byte past them, from
 * contiguous and strided memory (packed at once, or chunk by chunk). */
USNIC_TEST(engine_large_chunked)
{
    static const size_t lens[] = {150 * 1024, 4065, 4064 + 4048, 16 + 4048 * 3, 16 + 4048 * 3 + 1,
                                  100000, 12345, 150 * 1024 - 1, 40000, 8192};
    world_t *w = world_new(1, 1);
    uint64_t chunks = 0;

    check(NULL != w);
    for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); ++i) {
        sent_msg_t *m = world_send(w, SIDE_A, lens[i], i % 2 ? SEND_PREPARE : SEND_SENDI);
        check(NULL != m);
        chunks += (m->len + 4047) / 4048;
        m = world_send(w, SIDE_A, lens[i], SEND_NONCONTIG);
        check(NULL != m);
        chunks += m->len > 4064 ? (m->len + 4047) / 4048 : 0;
        check(NULL != world_send(w, SIDE_B, lens[i], SEND_PREPARE));
    }
    check_int_eq(world_run(w, 20000, false), WORLD_QUIET);
    check_all_delivered(w);
    check_ok(world_verify_counters(w));
    check_int_eq(STATS(w, SIDE_A)->num_chunk_sends, chunks);
    check_int_eq(STATS(w, SIDE_B)->num_chunk_recvs, chunks);
    check_int_eq(STATS(w, SIDE_A)->num_resends, 0);
    world_fini(w);
    return 0;
}

/* ob1's send pipeline (mca_pml_ob1_send_request_schedule_once in
 * pml_ob1_sendreq.c) over a datatype of 4-byte elements, in pieces whose
 * lengths are not multiples of 4, as ob1 cuts a message striped over two
 * BTLs by their weights: before every prepare_src it sets the convertor to
 * its running offset and takes back the position the convertor reports
 * (a send convertor stays on element boundaries), then advances offset and
 * remaining length by the size prepare_src returned.  Each piece carries
 * its offset as an 8-byte PML header; the pieces put together at their
 * offsets must be the whole packed message, not a byte short. */
USNIC_TEST(engine_pipeline_partial_elements)
{
    static const size_t pieces[] = {10007, 4065, 16383, 999, 25601, 30, 17001, 4061, 20003};
    const size_t count = 9000, total = count * 12;
    world_t *w = world_new(7, 9);
    mca_btl_base_module_t *btl = &w->mods[SIDE_A].super;
    opal_datatype_t *blk = opal_datatype_create(3), *dt = opal_datatype_create(5);
    opal_convertor_t *conv = opal_convertor_create(opal_local_arch, 0);
    int32_t *user = malloc(count * 28);
    uint8_t *expect = malloc(total), *got = calloc(total, 1), *seen = calloc(total, 1);
    size_t offset = 0, remaining = total, nsent = 0;

    check(NULL != w && NULL != dt && NULL != conv && NULL != user && NULL != expect &&
          NULL != got && NULL != seen);
    /* MPI_Type_vector(count, 3, 7, MPI_INT), built as ompi_datatype_create_vector does */
    check(NULL != blk);
    opal_datatype_add(blk, &opal_datatype_int4, 3, 0, 4);
    opal_datatype_add(dt, blk, count, 0, 28);
    opal_datatype_commit(dt);
    for (size_t i = 0; i < count * 7; ++i) {
        user[i] = (int32_t)(i * 2654435761u);
    }
    for (size_t k = 0; k < count; ++k) {
        memcpy(expect + k * 12, &user[k * 7], 12);
    }
    check_int_eq(opal_convertor_prepare_for_send(conv, dt, 1, user), OPAL_SUCCESS);
    world_run_as(w, SIDE_A);
    while (remaining > 0) {
        size_t size = pieces[nsent % (sizeof(pieces) / sizeof(pieces[0]))], pos = offset;
        mca_btl_base_descriptor_t *des;

        size = size < remaining ? size : remaining;
        opal_convertor_set_position(conv, &pos);
        offset = pos;
        des = btl->btl_prepare_src(btl, w->ep[SIDE_A], conv, MCA_BTL_NO_ORDER, 8, &size,
                                   MCA_BTL_DES_FLAGS_BTL_OWNERSHIP);
        check(NULL != des && size > 0);
        memcpy(des->des_segments[0].seg_addr.pval, &offset, 8);
        check(btl->btl_send(btl, w->ep[SIDE_A], des, WORLD_TAG) >= 0);
        remaining -= size;
        offset += size;
        ++nsent;
        check(nsent < 1000);
        world_run_as(w, SIDE_A);
    }
    check_int_eq(world_run(w, 20000, false), WORLD_QUIET);
    check_int_eq(w->nrx, nsent);
    for (size_t i = 0; i < w->nrx; ++i) {
        uint64_t off;
        check(w->rx[i].len >= 8);
        memcpy(&off, w->rx[i].data, 8);
        check(off + w->rx[i].len - 8 <= total);
        memcpy(got + off, w->rx[i].data + 8, w->rx[i].len - 8);
        memset(seen + off, 1, w->rx[i].len - 8);
    }
    for (size_t i = 0; i < total; ++i) {
        if (!seen[i] || got[i] != expect[i]) {
            fprintf(stderr, "    byte %zu of %zu: %s\n", i, total, seen[i] ? "wrong" : "never sent");
            check(false);
        }
    }
    OBJ_RELEASE(conv);
    OBJ_RELEASE(dt);
    OBJ_RELEASE(blk);
    free(user);
    free(expect);
    free(got);
    free(seen);
    world_fini(w);
    return 0;
}

/* Both sides talk at once: ACKs ride on data going the other way. */
USNIC_TEST(engine_bidirectional_piggyback)
{
    world_t *w = world_new(300, 60000);
    chaos_t c = {0};

    check(NULL != w);
    w->filter = chaos_filter;
    w->filter_arg = &c;
    for (int i = 0; i < 400; ++i) {
        check(NULL != world_send(w, i % 2, 100 + (size_t) (i * 53) % 3000, SEND_PREPARE));
        if (i % 8 == 7) {
            world_step(w);
        }
    }
    check_int_eq(world_run(w, 20000, false), WORLD_QUIET);
    check_all_delivered(w);
    check_ok(world_verify_counters(w));
    check(c.piggybacked > 0);
    /* fewer standalone ACKs than segments received */
    check(STATS(w, SIDE_B)->num_ack_sends < STATS(w, SIDE_B)->num_frag_recvs);
    check(STATS(w, SIDE_A)->num_ack_sends < STATS(w, SIDE_A)->num_frag_recvs);
    world_fini(w);
    return 0;
}

/* ------------------------------------------------------------------ */
/* reordering, duplicates, loss                                        */

/* Every datagram overtakes or is overtaken by up to 63 others. */
USNIC_TEST(engine_reorder)
{
    world_t *w = world_new(4000, 12);

    check(NULL != w);
    w->reorder = 64;
    for (int i = 0; i < 600; ++i) {
        size_t len = mixed_len(w);
        check(NULL != world_send(w, i % 4 ? SIDE_A : SIDE_B, len, mixed_method(w, len)));
        if (i % 16 == 15) {
            world_step(w);
        }
    }
    check_int_eq(world_run(w, 100000, false), WORLD_QUIET);
    check_all_delivered(w);
    check_ok(world_verify_counters(w));
    /* out of order really happened */
    check(STATS(w, SIDE_B)->max_rcvd_window_size > 16);
    check_int_eq(STATS(w, SIDE_B)->num_oow_high_recvs, 0);
    world_fini(w);
    return 0;
}

/* A copy of a segment above a hole in the window is a duplicate; the
 * duplicate ACK it causes resends the hole at once. */
USNIC_TEST(engine_duplicate_in_window)
{
    world_t *w = world_new(500, 1);
    drop_first_t f = {.from = SIDE_A, .seqs = {500}, .nseqs = 1};
    sent_msg_t *m[3];

    check(NULL != w);
    w->filter = drop_first_filter;
    w->filter_arg = &f;
    for (int i = 0; i < 3; ++i) {
        m[i] = world_send(w, SIDE_A, 1000 + (size_t) i, SEND_PREPARE);
        check(NULL != m[i]);
    }
    world_progress(w, SIDE_A);
    /* the wire now holds seq 500, 501, 502; send 501 twice */
    check_int_eq(fake_wire_count(), 3);
    {
        fake_dgram_t d;
        check(fake_wire_take(1, &d));
        check_int_eq(dgram_hdr(&d)->pkt_seq, 501);
        fake_wire_push(&d);
        d.bytes = malloc(d.len);
        check(NULL != d.bytes);
        memcpy(d.bytes, fake_wire_peek(2)->bytes, d.len);
        fake_wire_push(&d);
    }
    check_int_eq(world_run(w, 1000, false), WORLD_QUIET);
    check_all_delivered(w);
    check_ok(world_verify_counters(w));
    check_int_eq(f.dropped, 1);
    check_int_eq(STATS(w, SIDE_B)->num_dup_recvs, 1);
    check_int_eq(STATS(w, SIDE_B)->num_frag_recvs, 3);
    check_int_eq(STATS(w, SIDE_A)->num_fast_retrans, 1);
    check_int_eq(STATS(w, SIDE_A)->num_timeout_retrans, 0);
    check_int_eq(w->timeout_rounds, 0);
    world_fini(w);
    return 0;
}

/* Every datagram may arrive twice, data and ACKs: nothing is delivered
 * twice, and each copy is counted. */
USNIC_TEST(engine_duplicates)
{
    world_t *w = world_new(65000, 3);
    chaos_t c = {.dup = 300, .ack_dup = 300};

    check(NULL != w);
    w->filter = chaos_filter;
    w->filter_arg = &c;
    w->reorder = 8;
    for (int i = 0; i < 500; ++i) {
        size_t len = mixed_len(w);
        check(NULL != world_send(w, i % 3 ? SIDE_A : SIDE_B, len, mixed_method(w, len)));
        if (i % 10 == 9) {
            world_step(w);
        }
    }
    check_int_eq(world_run(w, 100000, true), WORLD_QUIET);
    check_all_delivered(w);
    check_ok(world_verify_counters(w));
    check(c.duped > 100);
    check(c.acks_duped > 10);
    check(STATS(w, SIDE_B)->num_dup_recvs + STATS(w, SIDE_B)->num_oow_low_recvs >= 50);
    check(STATS(w, SIDE_A)->num_dup_acks + STATS(w, SIDE_A)->num_old_dup_acks > 0);
    world_fini(w);
    return 0;
}

/* After the last copy of a datagram is lost nothing happens until the
 * retransmit timer fires; the timeout backs off.  B lost nothing before:
 * the expiry probes, and B's answer shows the segment missing; the next
 * expiry probes again (the segment might have been behind the probe), and
 * at B's second such answer it is resent at once.  Within 10 s after, an
 * expiry resends without a probe. */
USNIC_TEST(engine_loss_needs_timeout)
{
    world_t *w = world_new(10, 20);
    drop_first_t f = {.from = SIDE_A, .seqs = {10, 11}, .nseqs = 2};

    check(NULL != w);
    w->filter = drop_first_filter;
    w->filter_arg = &f;
    check(NULL != world_send(w, SIDE_A, 2000, SEND_PREPARE));
    check_int_eq(world_run(w, 1000, false), WORLD_STALLED);
    check_int_eq(f.dropped, 1);
    check_int_eq(w->nrx, 0);
    check_int_eq(usnic_tx_window_inflight(&w->ep[SIDE_A]->tx), 1);
    check_int_eq(w->ep[SIDE_B]->rx.next_contig, 10);

    check_int_eq(world_fire_timeouts(w, SIDE_A), 1);
    check_int_eq(STATS(w, SIDE_A)->num_timer_probes, 1);
    check_int_eq(STATS(w, SIDE_A)->num_timeout_retrans, 0);
    check_int_eq(w->ep[SIDE_A]->rto.rto_us, 2 * 5000);
    check_int_eq(world_run(w, 1000, false), WORLD_STALLED);
    check_int_eq(STATS(w, SIDE_A)->num_probe_missing, 1);
    check_int_eq(STATS(w, SIDE_A)->num_timeout_retrans, 0);
    /* (no loss is known yet: B said it once) */
    check(w->mods[SIDE_A].loss_seen_us < 0);
    check_int_eq(world_fire_timeouts(w, SIDE_A), 1);
    check_int_eq(STATS(w, SIDE_A)->num_timer_probes, 2);
    check_int_eq(world_run(w, 1000, false), WORLD_QUIET);
    check_all_delivered(w);
    check_ok(world_verify_counters(w));
    check_int_eq(STATS(w, SIDE_A)->num_timeout_retrans, 1);
    check_int_eq(STATS(w, SIDE_A)->num_probe_missing, 1);
    check_int_eq(STATS(w, SIDE_A)->num_probe_spurious, 0);
    check_int_eq(STATS(w, SIDE_A)->num_resends, 1);
    check_int_eq(STATS(w, SIDE_A)->num_cwnd_cuts, 1);
    check_int_eq(STATS(w, SIDE_B)->num_frag_recvs, 1);
    /* the resend filled B's hole: B's network lost too */
    check(w->mods[SIDE_B].loss_seen_us > 0);

    /* the next loss, at once after: no probe */
    check(NULL != world_send(w, SIDE_A, 2000, SEND_PREPARE));
    check_int_eq(world_run(w, 1000, false), WORLD_STALLED);
    check_int_eq(f.dropped, 2);
    check_int_eq(world_fire_timeouts(w, SIDE_A), 1);
    check_int_eq(STATS(w, SIDE_A)->num_timer_probes, 2);
    check_int_eq(STATS(w, SIDE_A)->num_timeout_retrans, 2);
    check_int_eq(world_run(w, 1000, false), WORLD_QUIET);
    check_all_delivered(w);
    check_ok(world_verify_counters(w));
    world_fini(w);
    return 0;
}

/* The same with the timer checked by progress, in real time. */
USNIC_TEST(engine_retransmit_timer)
{
    world_t *w = world_new(77, 88);
    drop_first_t f = {.from = SIDE_A, .seqs = {77}, .nseqs = 1};
    double t0, fired_at = 0;

    check(NULL != w);
    w->filter = drop_first_filter;
    w->filter_arg = &f;
    w->real_timers = true;
    t0 = opal_btl_usnic_now_us();
    check(NULL != world_send(w, SIDE_A, 100, SEND_ALLOC));
    while (!world_quiescent(w) && opal_btl_usnic_now_us() - t0 < 5e6) {
        world_step(w);
        if (0 == fired_at && STATS(w, SIDE_A)->num_timeout_retrans > 0) {
            fired_at = opal_btl_usnic_now_us();
        }
        usleep(200);
    }
    check(world_quiescent(w));
    check_int_eq(STATS(w, SIDE_A)->num_timeout_retrans, 1);
    /* Not before the 5 ms minimum. */
    if (fired_at - t0 < 5000) {
        return usnic_test_fail(__FILE__, __LINE__, "timer fired after %.0f us", fired_at - t0);
    }
    check_int_eq(w->timeout_rounds, 0);
    check_all_delivered(w);
    check_ok(world_verify_counters(w));
    world_fini(w);
    return 0;
}

/* The ACK is lost: the sender probes and B's answer acknowledges it all.
 * On a path that lost lately the sender resends instead, B drops the copy
 * and acknowledges again, and the lost ACK keeps the path marked lossy. */
USNIC_TEST(engine_lost_ack)
{
    world_t *w = world_new(1000, 2000);
    drop_first_t f = {.from = SIDE_A, .drop_acks_once = true};
    double seen;

    check(NULL != w);
    w->filter = drop_first_filter;
    w->filter_arg = &f;
    check(NULL != world_send(w, SIDE_A, 3000, SEND_PREPARE));
    check_int_eq(world_run(w, 1000, false), WORLD_STALLED);
    check_int_eq(f.acks_dropped, 1);
    check_int_eq(w->nrx, 1);
    check_int_eq(usnic_tx_window_inflight(&w->ep[SIDE_A]->tx), 1);
    check_int_eq(world_fire_timeouts(w, SIDE_A), 1);
    check_int_eq(world_run(w, 1000, false), WORLD_QUIET);
    check_all_delivered(w);
    check_ok(world_verify_counters(w));
    /* B lost nothing before: A probed, and B's answer acknowledged it all */
    check_int_eq(STATS(w, SIDE_A)->num_timer_probes, 1);
    check_int_eq(STATS(w, SIDE_A)->num_probe_spurious, 1);
    check_int_eq(STATS(w, SIDE_A)->num_resends, 0);
    check_int_eq(STATS(w, SIDE_A)->num_cwnd_cuts, 0);
    check_int_eq(STATS(w, SIDE_B)->num_ack_sends, 2);
    check_int_eq(STATS(w, SIDE_A)->num_ack_recvs, 1);
    check(!w->ep[SIDE_A]->rto.backed_off);
    /* the segment was timed, but the answer times the probe, not the path
     * (Karn): no sample from it; and B had acknowledged the segment (its
     * ACK was lost), so B was not late: the timeout floor stays */
    check(!w->ep[SIDE_A]->rto.have_sample);
    check_int_eq(w->ep[SIDE_A]->rto.min_us, (uint32_t) usnic_component.retrans_timeout);

    /* the same on a path that lost lately: the resend was not needed, but B
     * was not late: its ACK was lost, and the timeout floor stays */
    f.acks_dropped = 0;
    check(NULL != world_send(w, SIDE_A, 3000, SEND_PREPARE));
    check_int_eq(world_run(w, 1000, false), WORLD_STALLED);
    check_int_eq(f.acks_dropped, 1);
    world_peer_lost_lately(w, SIDE_A);
    seen = w->mods[SIDE_A].loss_seen_us;
    check_int_eq(world_fire_timeouts(w, SIDE_A), 1);
    check_int_eq(world_run(w, 1000, false), WORLD_QUIET);
    check_all_delivered(w);
    check_ok(world_verify_counters(w));
    check_int_eq(STATS(w, SIDE_A)->num_resends, 1);
    check_int_eq(STATS(w, SIDE_B)->num_dup_recvs + STATS(w, SIDE_B)->num_oow_low_recvs, 1);
    check_int_eq(STATS(w, SIDE_A)->num_spurious_timeouts, 1);
    check_int_eq(w->ep[SIDE_A]->rto.min_us, (uint32_t) usnic_component.retrans_timeout);
    /* and the lost ACK is a loss of the path: probes stay off longer */
    check(w->mods[SIDE_A].loss_seen_us > seen);
    world_fini(w);
    return 0;
}

/* A lost segment cuts the congestion window once for the window of data it
 * belongs to; the sender lets what is in flight drain below the window and
 * from then on keeps it there, and everything still arrives.  With
 * btl_usnic_congestion_control off only the peer's buffers limit. */
typedef struct {
    uint32_t min_cwnd;
    uint32_t drained;       /* steps at or below the window after a cut */
    uint32_t violations;    /* steps above it after having drained */
} cwnd_seen_t;

static int cwnd_run(bool congestion_control, cwnd_seen_t *seen)
{
    world_t *w = world_new(300, 400);
    drop_first_t f = {.from = SIDE_A, .seqs = {330, 331, 345}, .nseqs = 3};
    opal_btl_usnic_endpoint_t *ep;
    uint32_t prev_cwnd = USNIC_CWND_OPEN;
    bool drained = false;

    check(NULL != w);
    usnic_component.congestion_control = congestion_control;
    w->filter = drop_first_filter;
    w->filter_arg = &f;
    for (int i = 0; i < 40; ++i) {
        check(NULL != world_send(w, SIDE_A, 140000, SEND_PREPARE));
    }
    ep = w->ep[SIDE_A];
    memset(seen, 0, sizeof(*seen));
    seen->min_cwnd = USNIC_CWND_OPEN;
    for (int i = 0; i < 100000 && !world_quiescent(w); ++i) {
        uint32_t inflight, cwnd;

        if (0 == world_step(w)) {
            world_fire_timeouts(w, SIDE_A);
        }
        inflight = usnic_tx_window_inflight(&ep->tx);
        cwnd = ep->tx.cwnd;
        if (cwnd < prev_cwnd) {
            drained = false;        /* a new cut: in flight may exceed it */
        }
        if (USNIC_CWND_OPEN != cwnd) {
            if (inflight <= cwnd) {
                drained = true;
                ++seen->drained;
            } else if (drained) {
                ++seen->violations;
            }
        }
        if (cwnd < seen->min_cwnd) {
            seen->min_cwnd = cwnd;
        }
        prev_cwnd = cwnd;
    }
    check(world_quiescent(w));
    check_int_eq(f.dropped, 3);
    check_all_delivered(w);
    check_ok(world_verify_counters(w));
    check_int_eq(STATS(w, SIDE_A)->num_cwnd_cuts, congestion_control ? 1 : 0);
    world_fini(w);
    return 0;
}

USNIC_TEST(engine_cwnd_cut_on_loss)
{
    cwnd_seen_t seen;

    check_int_eq(cwnd_run(true, &seen), 0);
    check(seen.min_cwnd < USNIC_TX_WINDOW_INIT);
    check(seen.min_cwnd >= USNIC_CWND_MIN);
    check(seen.drained > 10);
    check_int_eq(seen.violations, 0);
    check_int_eq(cwnd_run(false, &seen), 0);
    check_int_eq(seen.min_cwnd, USNIC_CWND_OPEN);
    return 0;
}

/* Losing copies of data and ACKs both ways, with reordering: everything
 * arrives once, and user memory handed back at local completion may be
 * overwritten at once (resends never read it). */
static void scribble_completed(world_t *w)
{
    for (size_t i = 0; i < w->nsent; ++i) {
        sent_msg_t *m = w->sent[i];
        if ((1 == m->callbacks || 1 == m->rc) && m->user_size > 0 && 0xcc != m->user_buf[0]) {
            memset(m->user_buf, 0xcc, m->user_size);
        }
    }
}

USNIC_TEST(engine_loss)
{
    world_t *w = world_new(65530, 30000);
    chaos_t c = {.loss = 100, .ack_loss = 200, .dup = 20, .delay = 20};

    check(NULL != w);
    w->filter = chaos_filter;
    w->filter_arg = &c;
    w->reorder = 16;
    w->after_step = scribble_completed;
    for (int i = 0; i < 600; ++i) {
        size_t len = mixed_len(w);
        check(NULL != world_send(w, i % 3 ? SIDE_A : SIDE_B, len, mixed_method(w, len)));
        if (i % 10 == 9) {
            world_step(w);
            scribble_completed(w);
        }
    }
    check_int_eq(world_run(w, 400000, true), WORLD_QUIET);
    check_all_delivered(w);
    check_ok(world_verify_counters(w));
    check(c.lost > 100);
    check(c.acks_lost > 10);
    check(c.delayed > 50);
    /* late copies of what was resent meanwhile */
    check(STATS(w, SIDE_B)->num_oow_low_recvs > 0);
    check(STATS(w, SIDE_A)->num_resends > 0);
    check(STATS(w, SIDE_A)->num_timeout_retrans > 0);
    check(STATS(w, SIDE_A)->num_fast_retrans > 0);
    check(w->timeout_rounds > 0);
    world_fini(w);
    return 0;
}

/* ------------------------------------------------------------------ */
/* ACKs                                                                */

static void inject_flagged_ack(world_t *w, int to, uint16_t ack, uint8_t flags)
{
    usnic_btl_header_t h;

    world_header(w, 1 - to, &h, USNIC_PAYLOAD_TYPE_ACK);
    h.ack_present = 1;
    h.ack_seq = ack;
    h.ack_flags = flags;
    world_inject(w, to, USNIC_PRIORITY_CHANNEL, &h, sizeof(h));
}

static void inject_ack(world_t *w, int to, uint16_t ack)
{
    inject_flagged_ack(w, to, ack, 0);
}

/* ACKs for sequence numbers never sent, and old ones, change nothing. */
USNIC_TEST(engine_bogus_and_old_acks)
{
    world_t *w = world_new(200, 300);
    opal_btl_usnic_endpoint_t *ep;

    check(NULL != w);
    ep = w->ep[SIDE_A];
    w->paused = true;
    for (int i = 0; i < 5; ++i) {
        check(NULL != world_send(w, SIDE_A, 1500, SEND_PREPARE));
    }
    check_int_eq(world_run(w, 100, false), WORLD_STALLED);
    check_int_eq(usnic_tx_window_inflight(&ep->tx), 5);
    check_int_eq(ep->tx.next_seq_to_send, 205);

    inject_ack(w, SIDE_A, 210);                 /* far beyond */
    inject_ack(w, SIDE_A, 205);                 /* the next one to send */
    inject_ack(w, SIDE_A, (uint16_t) (200 - 2 - 100)); /* long ago */
    world_progress(w, SIDE_A);
    check_int_eq(STATS(w, SIDE_A)->num_bogus_acks, 2);
    check_int_eq(STATS(w, SIDE_A)->num_old_dup_acks, 1);
    check_int_eq(STATS(w, SIDE_A)->num_ack_recvs, 3);
    check_int_eq(ep->tx.ack_seq_rcvd, 199);
    check_int_eq(usnic_tx_window_inflight(&ep->tx), 5);
    check_int_eq(STATS(w, SIDE_A)->num_resends + STATS(w, SIDE_A)->num_fast_retrans, 0);

    w->paused = false;
    check_int_eq(world_run(w, 1000, false), WORLD_QUIET);
    /* and once everything is acknowledged */
    inject_ack(w, SIDE_A, 205);
    inject_ack(w, SIDE_A, 4000);
    world_progress(w, SIDE_A);
    check_int_eq(STATS(w, SIDE_A)->num_bogus_acks, 4);
    check_int_eq(ep->tx.ack_seq_rcvd, 204);
    check_int_eq(world_run(w, 100, false), WORLD_QUIET);
    check_ok(world_verify(w, SIDE_B, false));
    check_ok(world_verify_completions(w));
    check_ok(world_check_idle(w));
    check_int_eq(w->nrx, 5);
    world_fini(w);
    return 0;
}

/* An ACK that says the receiver holds segments above it (USNIC_ACK_HOLE),
 * or a duplicate ACK, resends the segment after it at once, but only once
 * per hole: if that resend is lost too, only the timer helps. */
USNIC_TEST(engine_dup_ack_fast_retransmit)
{
    world_t *w = world_new(40000, 5);
    drop_first_t f = {.from = SIDE_A, .seqs = {40002}, .nseqs = 1};

    check(NULL != w);
    w->filter = drop_first_filter;
    w->filter_arg = &f;
    for (int i = 0; i < 10; ++i) {
        check(NULL != world_send(w, SIDE_A, 1000, SEND_PREPARE));
    }
    /* B's first ACK after the loss moves the window to 40001 and reports
     * the hole: 40002 goes again, no timer needed */
    check_int_eq(world_run(w, 1000, false), WORLD_QUIET);
    check_int_eq(f.dropped, 1);
    check_int_eq(STATS(w, SIDE_A)->num_fast_retrans, 1);
    check_int_eq(STATS(w, SIDE_A)->num_timeout_retrans, 0);
    check_int_eq(w->nrx, 10);

    /* again, but the fast resend is lost as well */
    f.seqs[0] = 40012;
    f.seqs[1] = 40012;
    f.nseqs = 2;
    for (int i = 0; i < 4; ++i) {
        check(NULL != world_send(w, SIDE_A, 1000, SEND_PREPARE));
    }
    check_int_eq(world_run(w, 1000, false), WORLD_STALLED);
    check_int_eq(f.dropped, 3);
    check_int_eq(STATS(w, SIDE_A)->num_fast_retrans, 2);
    /* more ACKs naming the same hole resend nothing */
    check(NULL != world_send(w, SIDE_A, 1000, SEND_PREPARE));
    check_int_eq(world_run(w, 1000, false), WORLD_STALLED);
    check(STATS(w, SIDE_A)->num_dup_acks >= 1);
    check_int_eq(STATS(w, SIDE_A)->num_fast_retrans, 2);
    check_int_eq(world_run(w, 1000, true), WORLD_QUIET);
    /* only 40012: B has the ones after it, and its ACK then covers them */
    check_int_eq(STATS(w, SIDE_A)->num_timeout_retrans, 1);
    check_all_delivered(w);
    check_ok(world_verify_counters(w));
    check_int_eq(w->nrx, 15);
    world_fini(w);
    return 0;
}

/* A sender whose congestion window is full asks for the ACK
 * (USNIC_HDR_ACK_REQ): a receiver holding its delayed ACKs (here: for
 * ever) answers at once, so a small window never waits for the hold. */
USNIC_TEST(engine_ack_req_small_cwnd)
{
    world_t *w = world_new(100, 200);
    opal_btl_usnic_endpoint_t *ep;
    world_result_t r;

    check(NULL != w);
    ep = w->ep[SIDE_A];
    ep->tx.cwnd = USNIC_CWND_MIN;
    ep->tx.ssthresh = USNIC_CWND_MIN;
    usnic_tx_window_limit(&ep->tx);
    usnic_component.ack_hold_us = 1e9;
    for (int i = 0; i < 24; ++i) {
        check(NULL != world_send(w, SIDE_A, 1000, SEND_PREPARE));
    }
    r = world_run(w, 10000, false);
    check(WORLD_QUIET == r || WORLD_STALLED == r);
    /* all of it went through the small window, without a timer */
    check_int_eq(w->nrx, 24);
    check(opal_list_is_empty(&ep->send_queue));
    check(STATS(w, SIDE_B)->num_ack_sends >= 24 / (USNIC_CWND_MIN + 8));
    check_int_eq(STATS(w, SIDE_A)->num_resends, 0);
    /* every round but the last filled the window (4, 5, 6, 7 of the 24) */
    check(STATS(w, SIDE_A)->num_window_full >= 3);
    usnic_component.ack_hold_us = 0;
    w->ep[SIDE_B]->ack_hold_until_us = 0;
    check_int_eq(world_run(w, 1000, false), WORLD_QUIET);
    check_all_delivered(w);
    world_fini(w);
    return 0;
}

/* A ping-pong of chunked messages, each answered as soon as it arrives
 * (outside progress, as an application does): the ACK of a whole frag
 * rides on the answer; no standalone ACK is sent for it. */
USNIC_TEST(engine_pingpong_chunked_acks_ride)
{
    world_t *w = world_new(500, 600);
    size_t len = 0;

    check(NULL != w);
    len = 2 * w->mods[SIDE_A].max_chunk_payload + 100;
    for (int i = 0; i < 20; ++i) {
        unsigned steps = 0;

        check(NULL != world_send(w, i % 2, len, SEND_PREPARE));
        while (w->nrx < (size_t) i + 1 && steps++ < 1000) {
            world_step(w);
        }
        check_int_eq(w->nrx, i + 1);
    }
    check_int_eq(STATS(w, SIDE_A)->num_chunk_sends, 30);
    check_int_eq(STATS(w, SIDE_A)->num_ack_sends, 0);
    check_int_eq(STATS(w, SIDE_B)->num_ack_sends, 0);
    /* the last one's ACK has no answer to ride on: it goes after the delay */
    check_int_eq(world_run(w, 1000, false), WORLD_QUIET);
    check_int_eq(STATS(w, SIDE_A)->num_ack_sends, 1);
    check_all_delivered(w);
    world_fini(w);
    return 0;
}

/* What a blocking ob1 ping-pong waits for, per half round trip, with the
 * production ACK hold (a wait on it would stall here): nothing.  sendi (8 B),
 * one frag (4000 B) and two chunks (4096 B + ob1's 14-byte header): every
 * datagram posted and the send complete (inline or des_cbfunc) before
 * btl_send returns, the message delivered by the receiver's first pass
 * after its datagrams arrived, its ACK riding on the answer. */
USNIC_TEST(engine_pingpong_nothing_waits)
{
    static const struct {
        size_t len;
        send_method_t how;
        uint64_t dgrams;
    } sizes[] = {{8 + 14, SEND_SENDI, 1}, {4000, SEND_PREPARE, 1}, {4096 + 14, SEND_PREPARE, 2}};
    world_t *w = world_new(700, 800);

    check(NULL != w);
    check(4096 + 14 > w->mods[SIDE_A].max_frag_payload);
    usnic_component.ack_hold_us = 1e9;
    for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); ++k) {
        uint64_t acks = STATS(w, SIDE_A)->num_ack_sends + STATS(w, SIDE_B)->num_ack_sends;

        for (int i = 0; i < 40; ++i) {
            int from = i % 2, to = 1 - from;
            uint64_t posts = fake_dev.posts;
            size_t nrx = w->nrx;
            sent_msg_t *m;

            ++usnic_component.progress_ticks;
            m = world_send(w, from, sizes[k].len, sizes[k].how);
            check(NULL != m);
            check_int_eq(fake_dev.posts - posts, sizes[k].dgrams);
            check(1 == m->rc || (0 == m->rc && 1 == m->callbacks));
            /* the sender's pass after its send, then the wire */
            world_progress(w, from);
            check_int_eq(world_net_step(w), sizes[k].dgrams);
            world_progress(w, to);
            check_int_eq(w->nrx, nrx + 1);
        }
        check_int_eq(STATS(w, SIDE_A)->num_ack_sends + STATS(w, SIDE_B)->num_ack_sends, acks);
    }
    check_int_eq(STATS(w, SIDE_A)->num_window_full + STATS(w, SIDE_B)->num_window_full, 0);
    usnic_component.ack_hold_us = 0;
    w->ep[SIDE_A]->ack_hold_until_us = 0;
    w->ep[SIDE_B]->ack_hold_until_us = 0;
    check_int_eq(world_run(w, 1000, false), WORLD_QUIET);
    check_all_delivered(w);
    check(NULL == world_verify_completions(w));
    world_fini(w);
    return 0;
}

/* A delivered chunked message leaves its reassembly buffer as the module's
 * spare, which the next one that fits takes (no malloc and free per
 * message); a larger one replaces it, one above btl_max_send_size is not
 * kept, and teardown frees it. */
USNIC_TEST(engine_reassembly_buffer_reused)
{
    world_t *w = world_new(900, 1000);
    opal_btl_usnic_module_t *b;
    uint8_t *spare;
    size_t max;

    check(NULL != w);
    b = &w->mods[SIDE_B];
    max = b->super.btl_max_send_size;
    check(NULL == b->rx_spare);
    check(NULL != world_send(w, SIDE_A, 4096 + 14, SEND_PREPARE));
    check_int_eq(world_run(w, 1000, false), WORLD_QUIET);
    check(NULL != b->rx_spare);
    check_int_eq(b->rx_spare_size, 4096 + 14);
    spare = b->rx_spare;
    /* a smaller one takes it and gives it back */
    check(NULL != world_send(w, SIDE_A, 4096, SEND_PREPARE));
    world_step(w);
    world_step(w);
    check_int_eq(w->nrx, 2);
    check(spare == b->rx_spare);
    check_int_eq(b->rx_spare_size, 4096 + 14);
    /* a larger one is kept instead */
    check(NULL != world_send(w, SIDE_A, 3 * b->max_chunk_payload, SEND_PREPARE));
    check_int_eq(world_run(w, 1000, false), WORLD_QUIET);
    check_int_eq(b->rx_spare_size, 3 * b->max_chunk_payload);
    /* beyond what the PML sends in one piece: freed */
    b->super.btl_max_send_size = 4 * b->max_chunk_payload;
    check(NULL != world_send(w, SIDE_A, 5 * b->max_chunk_payload, SEND_PREPARE));
    check_int_eq(world_run(w, 1000, false), WORLD_QUIET);
    check_int_eq(b->rx_spare_size, 3 * b->max_chunk_payload);
    b->super.btl_max_send_size = max;
    check_all_delivered(w);
    world_fini(w);
    return 0;
}

/* Karn: the ACK of a segment above a resent one waits for the resend, so
 * it times the recovery, not the path; the sample is dropped. */
USNIC_TEST(engine_rtt_sample_above_resend_dropped)
{
    world_t *w = world_new(300, 400);
    drop_first_t f = {.from = SIDE_A, .seqs = {300}, .nseqs = 1};
    opal_btl_usnic_endpoint_t *ep;

    check(NULL != w);
    ep = w->ep[SIDE_A];
    w->filter = drop_first_filter;
    w->filter_arg = &f;
    w->paused = true;
    for (int i = 0; i < 4; ++i) {
        check(NULL != world_send(w, SIDE_A, 1000, SEND_PREPARE));
    }
    world_progress(w, SIDE_A);
    check_int_eq(ep->tx.next_seq_to_send, 304);
    /* time 302 instead of 300, as if sent a second ago: a sample taken
     * from it would raise the timeout to its ceiling */
    ep->rtt_timing = true;
    ep->rtt_seq = 302;
    ep->rtt_start_us = opal_btl_usnic_now_us() - 1e6;
    w->paused = false;
    check_int_eq(world_run(w, 1000, false), WORLD_QUIET);
    check_int_eq(f.dropped, 1);
    check_int_eq(STATS(w, SIDE_A)->num_fast_retrans, 1);
    check(!ep->rto.have_sample);
    check_int_eq(ep->rto.rto_us, usnic_component.retrans_timeout);
    check_int_eq(STATS(w, SIDE_A)->max_rto_us, 0);
    check_all_delivered(w);
    world_fini(w);
    return 0;
}

/* A repeated ACK alone resends nothing: the receiver repeats its ACK while
 * a segment sent on the other channel is still on its way.  Only its
 * report of a hole (USNIC_ACK_HOLE) does, once per hole, whether the ACK
 * that carries it moves the window or repeats it. */
USNIC_TEST(engine_repeated_ack_alone_resends_nothing)
{
    world_t *w = world_new(300, 400);
    opal_btl_usnic_endpoint_t *ep;

    check(NULL != w);
    ep = w->ep[SIDE_A];
    w->paused = true;
    for (int i = 0; i < 6; ++i) {
        check(NULL != world_send(w, SIDE_A, 1000, SEND_PREPARE));
    }
    world_progress(w, SIDE_A);
    check_int_eq(ep->tx.next_seq_to_send, 306);
    inject_ack(w, SIDE_A, 301);                 /* moves the window */
    inject_ack(w, SIDE_A, 301);
    inject_ack(w, SIDE_A, 301);
    world_progress(w, SIDE_A);
    check_int_eq(ep->tx.ack_seq_rcvd, 301);
    check_int_eq(STATS(w, SIDE_A)->num_dup_acks, 2);
    check_int_eq(STATS(w, SIDE_A)->num_fast_retrans, 0);
    check_int_eq(STATS(w, SIDE_A)->num_resends, 0);
    /* the hole at 302 reported by a repeat: 302 goes again, once */
    inject_flagged_ack(w, SIDE_A, 301, USNIC_ACK_HOLE);
    inject_flagged_ack(w, SIDE_A, 301, USNIC_ACK_HOLE);
    world_progress(w, SIDE_A);
    check_int_eq(STATS(w, SIDE_A)->num_fast_retrans, 1);
    check_int_eq(STATS(w, SIDE_A)->num_resends, 1);
    /* the next hole, reported by an ACK that moves the window: 304 */
    inject_flagged_ack(w, SIDE_A, 303, USNIC_ACK_HOLE);
    world_progress(w, SIDE_A);
    check_int_eq(ep->tx.ack_seq_rcvd, 303);
    check_int_eq(STATS(w, SIDE_A)->num_fast_retrans, 2);
    check_int_eq(STATS(w, SIDE_A)->num_resends, 2);
    w->paused = false;
    check_int_eq(world_run(w, 1000, false), WORLD_QUIET);
    check_all_delivered(w);
    world_fini(w);
    return 0;
}

/* The timer resent the oldest segment; a hole report for it built before
 * that resend arrived resends nothing more. */
USNIC_TEST(engine_hole_report_after_timer_resend)
{
    world_t *w = world_new(300, 400);

    check(NULL != w);
    w->paused = true;
    for (int i = 0; i < 3; ++i) {
        check(NULL != world_send(w, SIDE_A, 1000, SEND_PREPARE));
    }
    world_progress(w, SIDE_A);
    world_peer_lost_lately(w, SIDE_A);    /* a lossy path: the expiry resends */
    check_int_eq(world_fire_timeouts(w, SIDE_A), 1);
    world_progress(w, SIDE_A);
    check_int_eq(STATS(w, SIDE_A)->num_resends, 1);
    inject_flagged_ack(w, SIDE_A, 299, USNIC_ACK_HOLE);
    world_progress(w, SIDE_A);
    check_int_eq(STATS(w, SIDE_A)->num_fast_retrans, 0);
    check_int_eq(STATS(w, SIDE_A)->num_resends, 1);
    w->paused = false;
    while (fake_wire_count() > 0) {
        fake_dgram_t d;
        fake_wire_take(0, &d);
        fake_dgram_free(&d);
    }
    check_int_eq(world_run(w, 1000, true), WORLD_QUIET);
    check_all_delivered(w);
    world_fini(w);
    return 0;
}

/* A segment sent after another on the other channel may arrive first:
 * the receiver reports no hole for that, however long it waits (the
 * channels are two queue pairs, ordered each but not with each other).
 * A loss shows when a segment sent after it on its own channel arrives:
 * that ACK reports it and the sender resends at once. */
USNIC_TEST(engine_late_on_other_channel_not_reported)
{
    world_t *w = world_new(700, 800);
    drop_first_t f = {.from = SIDE_A, .seqs = {703}, .nseqs = 1};
    uint32_t data_qpn;
    fake_dgram_t held;

    check(NULL != w);
    data_qpn = w->mods[SIDE_B].local_addr.qp_num[USNIC_DATA_CHANNEL];
    w->paused = true;
    check(NULL != world_send(w, SIDE_A, 2000, SEND_PREPARE));
    check(NULL != world_send(w, SIDE_A, 8, SEND_SENDI));
    world_progress(w, SIDE_A);
    check_int_eq(fake_wire_count(), 2);
    check_int_eq(fake_wire_peek(0)->dst_qpn, data_qpn);
    check_int_eq(dgram_hdr(fake_wire_peek(0))->pkt_seq, 700);
    check(fake_wire_peek(1)->dst_qpn != data_qpn);
    /* 700 is late: B gets 701 and ACKs 699 with a hole open (no ACK hold
     * in this world, so an age rule would call it lost at once) */
    check(fake_wire_take(0, &held));
    w->paused = false;
    check_int_eq(world_run(w, 1000, false), WORLD_STALLED);
    check(STATS(w, SIDE_B)->num_ack_sends >= 1);
    check(STATS(w, SIDE_A)->num_dup_acks >= 1);
    check_int_eq(STATS(w, SIDE_A)->num_fast_retrans, 0);
    fake_wire_push(&held);
    check_int_eq(world_run(w, 1000, false), WORLD_QUIET);
    check_int_eq(STATS(w, SIDE_A)->num_resends, 0);
    check_int_eq(STATS(w, SIDE_B)->num_oow_low_recvs + STATS(w, SIDE_B)->num_dup_recvs, 0);

    /* 702, 703, 704 on the data channel, 703 lost: 704 names it */
    w->filter = drop_first_filter;
    w->filter_arg = &f;
    for (int i = 0; i < 3; ++i) {
        check(NULL != world_send(w, SIDE_A, 2000, SEND_PREPARE));
    }
    check_int_eq(world_run(w, 1000, false), WORLD_QUIET);
    check_int_eq(f.dropped, 1);
    check_int_eq(STATS(w, SIDE_A)->num_fast_retrans, 1);
    check_int_eq(STATS(w, SIDE_A)->num_timeout_retrans, 0);
    /* a lone loss is no congestion: the window stays open */
    check_int_eq(STATS(w, SIDE_A)->num_cwnd_cuts, 0);
    check_all_delivered(w);
    world_fini(w);
    return 0;
}

/* The RTO follows measured round trips, and a backoff lasts only until the
 * peer acknowledges something again (the resent segment gives no sample). */
USNIC_TEST(engine_rto_recovers)
{
    world_t *w = world_new(1, 2);
    drop_first_t f = {.from = SIDE_A, .seqs = {1}, .nseqs = 1};
    opal_btl_usnic_endpoint_t *ep;

    check(NULL != w);
    ep = w->ep[SIDE_A];
    w->filter = drop_first_filter;
    w->filter_arg = &f;
    check(NULL != world_send(w, SIDE_A, 500, SEND_ALLOC));
    check_int_eq(world_run(w, 1000, false), WORLD_STALLED);
    check_int_eq(world_fire_timeouts(w, SIDE_A), 1);
    check_int_eq(ep->rto.rto_us, 10000);
    /* (the first probe's answer says it missing; the second resends) */
    check_int_eq(world_run(w, 1000, false), WORLD_STALLED);
    check_int_eq(world_fire_timeouts(w, SIDE_A), 1);
    check_int_eq(ep->rto.rto_us, 20000);
    check_int_eq(world_run(w, 1000, false), WORLD_QUIET);
    check_int_eq(ep->rto.rto_us, 5000);
    /* the resent segment gave no sample */
    check(!ep->rto.have_sample);
    check(NULL != world_send(w, SIDE_A, 500, SEND_ALLOC));
    check_int_eq(world_run(w, 1000, false), WORLD_QUIET);
    check(ep->rto.have_sample);
    check_int_eq(ep->rto.rto_us, 5000);
    check_all_delivered(w);
    world_fini(w);
    return 0;
}

/* One round trip in USNIC_RTT_SAMPLE_EVERY is timed (two clock reads), the
 * first one of an endpoint included. */
USNIC_TEST(engine_rtt_sampled)
{
    world_t *w = world_new(1, 2);
    opal_btl_usnic_endpoint_t *ep;
    int timed = 0;

    check(NULL != w);
    ep = w->ep[SIDE_A];
    for (int i = 0; i < 4 * USNIC_RTT_SAMPLE_EVERY; ++i) {
        check(NULL != world_send(w, SIDE_A, 100, SEND_ALLOC));
        timed += ep->rtt_timing;
        if (0 == i) {
            check(ep->rtt_timing);
        }
        check_int_eq(world_run(w, 1000, false), WORLD_QUIET);
        check(!ep->rtt_timing);
    }
    check_int_eq(timed, 4);
    check(ep->rto.have_sample);
    check_all_delivered(w);
    world_fini(w);
    return 0;
}

/* A timer started by a send outside progress gets its deadline, and the
 * dead-peer clock its start, from the next pass's clock read; a stopped
 * timer costs its endpoint no list removal. */
USNIC_TEST(engine_timer_deadline_at_next_pass)
{
    world_t *w = world_new(1, 2);
    opal_btl_usnic_endpoint_t *ep;
    double before, after;

    check(NULL != w);
    ep = w->ep[SIDE_A];
    w->paused = true;
    w->real_timers = true;
    ep->last_ack_time = 0;
    check(NULL != world_send(w, SIDE_A, 100, SEND_ALLOC));
    check(ep->timer_running);
    check(ep->rto_restart);
    check(0 == ep->last_ack_time);
    before = opal_btl_usnic_now_us();
    world_progress(w, SIDE_A);
    after = opal_btl_usnic_now_us();
    check(!ep->rto_restart);
    check(ep->rto_deadline_us >= before + ep->rto.rto_us);
    check(ep->rto_deadline_us <= after + ep->rto.rto_us);
    check(ep->last_ack_time >= before / 1e6 && ep->last_ack_time <= after / 1e6);
    /* the passes until then need not walk the timers */
    check(!w->mods[SIDE_A].timer_restarted);
    check(w->mods[SIDE_A].timer_due_us == ep->rto_deadline_us);
    /* not expired by the pass that set it, nor by the next one */
    world_progress(w, SIDE_A);
    check_int_eq(STATS(w, SIDE_A)->num_timeout_retrans, 0);
    w->paused = false;
    w->real_timers = false;
    check_int_eq(world_run(w, 1000, false), WORLD_QUIET);
    check(!ep->timer_running);
    check_int_eq(w->mods[SIDE_A].timers_running, 0);
    /* a stopped timer leaves its endpoint listed: the next start does not
     * list it again, and the next walk unlists it */
    check(ep->on_timer_list);
    check(NULL != world_send(w, SIDE_A, 100, SEND_ALLOC));
    check(ep->timer_running);
    check_int_eq(opal_list_get_size(&w->mods[SIDE_A].endpoints_with_timers), 1);
    check_int_eq(world_run(w, 1000, false), WORLD_QUIET);
    check(!ep->timer_running);
    check(ep->on_timer_list);
    check_int_eq(opal_btl_usnic_check_timers(&w->mods[SIDE_A], opal_btl_usnic_now_us(), false), 0);
    check(!ep->on_timer_list);
    check_all_delivered(w);
    world_fini(w);
    return 0;
}

/* A pass after the timer of the only endpoint listed was pushed back sets
 * its deadline without walking the timers: the module's earliest deadline
 * stays the old one, whose walk then finds the new deadline and expires
 * nothing. */
USNIC_TEST(engine_timer_pushed_back_without_walk)
{
    world_t *w = world_new(1, 2);
    opal_btl_usnic_module_t *m;
    opal_btl_usnic_endpoint_t *ep;
    double t0, rto, first;

    check(NULL != w);
    m = &w->mods[SIDE_A];
    ep = w->ep[SIDE_A];
    w->paused = true;
    check(NULL != world_send(w, SIDE_A, 100, SEND_ALLOC));
    check(ep->timer_running && ep->rto_restart);
    world_run_as(w, SIDE_A);
    t0 = opal_btl_usnic_now_us();
    rto = ep->rto.rto_us;
    /* the first check walks (no deadline yet) */
    check_int_eq(opal_btl_usnic_timers_pass(m, t0, false), 0);
    first = ep->rto_deadline_us;
    check(first == t0 + rto && m->timer_due_us == first);
    /* pushed back, as an ACK that moved the window does */
    opal_btl_usnic_timer_restart(ep);
    check_int_eq(opal_btl_usnic_timers_pass(m, t0 + rto / 4, false), 0);
    check(!m->timer_restarted && !ep->rto_restart);
    check(ep->rto_deadline_us == t0 + rto / 4 + rto);
    check(m->timer_due_us == first);
    check_int_eq(opal_btl_usnic_timers_pass(m, t0 + rto / 2, false), 0);
    check_int_eq(opal_btl_usnic_timers_pass(m, t0 + rto * 3 / 4, false), 0);
    check_int_eq(opal_btl_usnic_timers_pass(m, first + 1, false), 0);
    check(m->timer_due_us == ep->rto_deadline_us);
    check_int_eq(STATS(w, SIDE_A)->num_timeout_retrans, 0);
    w->paused = false;
    check_int_eq(world_run(w, 1000, false), WORLD_QUIET);
    check_all_delivered(w);
    world_fini(w);
    return 0;
}

/* ------------------------------------------------------------------ */
/* sequence numbers and the window                                     */

/* Both sides start just below 65535 and run across the wrap. */
USNIC_TEST(engine_sequence_wraparound)
{
    world_t *w = world_new(65500, 65534);
    chaos_t c = {.loss = 50, .ack_loss = 50, .dup = 20, .delay = 10};

    check(NULL != w);
    w->filter = chaos_filter;
    w->filter_arg = &c;
    w->reorder = 32;
    for (int i = 0; i < 400; ++i) {
        size_t len = mixed_len(w);
        check(NULL != world_send(w, i % 2, len, mixed_method(w, len)));
        if (i % 20 == 19) {
            world_step(w);
        }
    }
    check_int_eq(world_run(w, 400000, true), WORLD_QUIET);
    check_all_delivered(w);
    check_ok(world_verify_counters(w));
    /* both wrapped */
    check(w->ep[SIDE_A]->tx.next_seq_to_send < 65500);
    check(w->ep[SIDE_B]->tx.next_seq_to_send < 65534);
    check_int_eq(w->ep[SIDE_B]->rx.next_contig, w->ep[SIDE_A]->tx.next_seq_to_send);
    check_int_eq(w->ep[SIDE_A]->rx.next_contig, w->ep[SIDE_B]->tx.next_seq_to_send);
    world_fini(w);
    return 0;
}

/* btl_usnic_max_send_window below the peer's buffers: a window grown past
 * it (as the path's estimate would) stops at the parameter (600, not a
 * power of two: the send table doubles from 64 slots up to 1024 as the
 * window fills, moving what is in flight each time), and the stream still
 * delivers everything in order. */
USNIC_TEST(engine_max_send_window_param)
{
    world_t *w = world_new(61000, 0);
    opal_btl_usnic_endpoint_t *ep;

    check(NULL != w);
    ep = w->ep[SIDE_A];
    check((int) ep->remote.rcv_depth > 600);
    usnic_component.max_send_window = 600;
    opal_btl_usnic_endpoint_size_window(ep, 1);
    check_int_eq(ep->tx.size, 600);
    ep->tx.bdp = USNIC_WINDOW_SIZE;
    usnic_tx_window_limit(&ep->tx);
    w->paused = true;
    for (int i = 0; i < 2000; ++i) {
        check(NULL != world_send(w, SIDE_A, 64 + (size_t) i % 1000, (send_method_t) (i % 3)));
    }
    check_int_eq(world_run(w, 10000, false), WORLD_STALLED);
    check_int_eq(usnic_tx_window_inflight(&ep->tx), 600);
    check_int_eq(fake_wire_count(), 600);
    check_int_eq(ep->tx_mask + 1, 1024);
    check_int_eq(STATS(w, SIDE_A)->num_table_grows, 4);
    check_int_eq(STATS(w, SIDE_A)->num_window_full, 1);
    check_int_eq(STATS(w, SIDE_A)->max_sent_window_size, 600);
    /* more peers later: the peer's buffers bound it again */
    opal_btl_usnic_endpoint_size_window(ep, 4);
    check_int_eq(ep->tx.size, ep->remote.rcv_depth / 4);
    w->paused = false;
    check_int_eq(world_run(w, 100000, false), WORLD_QUIET);
    check_all_delivered(w);
    check_ok(world_verify_counters(w));
    check_int_eq(STATS(w, SIDE_B)->num_frag_recvs, 2000);
    check_int_eq(STATS(w, SIDE_A)->num_resends, 0);
    world_fini(w);
    return 0;
}

/* More than a window of segments: the sender stops at a full window
 * (USNIC_TX_WINDOW_INIT unacknowledged, where the window starts)
 * and goes on as ACKs come back. */
USNIC_TEST(engine_window_full)
{
    world_t *w = world_new(60000, 0);
    opal_btl_usnic_endpoint_t *ep;

    check(NULL != w);
    ep = w->ep[SIDE_A];
    w->paused = true;
    for (int i = 0; i < 5000; ++i) {
        check(NULL != world_send(w, SIDE_A, 64 + (size_t) i % 1000, (send_method_t) (i % 3)));
    }
    check_int_eq(world_run(w, 10000, false), WORLD_STALLED);
    check_int_eq(fake_wire_count(), USNIC_TX_WINDOW_INIT);
    check_int_eq(usnic_tx_window_inflight(&ep->tx), USNIC_TX_WINDOW_INIT);
    check(!usnic_tx_window_open(&ep->tx));
    check_int_eq(opal_list_get_size(&ep->send_queue), 5000 - USNIC_TX_WINDOW_INIT);
    check(!ep->on_sends_list);
    check_int_eq(STATS(w, SIDE_A)->max_sent_window_size, USNIC_TX_WINDOW_INIT);
    check_int_eq(STATS(w, SIDE_A)->num_window_full, 1);
    /* the send that filled the window started a round of the path's
     * estimate, which its ACK will end */
    check(ep->tx.round_active);
    check_int_eq(ep->tx.round_seq, (uint16_t) (ep->tx.next_seq_to_send - 1));

    w->paused = false;
    check_int_eq(world_run(w, 100000, false), WORLD_QUIET);
    check_all_delivered(w);
    check_ok(world_verify_counters(w));
    /* (the window may have grown since, never past the peer's buffers) */
    check(STATS(w, SIDE_A)->max_sent_window_size >= USNIC_TX_WINDOW_INIT);
    check(STATS(w, SIDE_A)->max_sent_window_size <= ep->tx.size);
    /* everything ACKed: no round left open to span the idle time */
    check(!ep->tx.round_active);
    check_int_eq(STATS(w, SIDE_B)->num_frag_recvs, 5000);
    check_int_eq(STATS(w, SIDE_A)->num_resends, 0);
    world_fini(w);
    return 0;
}

/* At most USNIC_RX_FRAG_SLOTS large frags are in flight per peer, so the
 * receiver's reassembly slots never collide. */
USNIC_TEST(engine_large_frag_limit)
{
    world_t *w = world_new(5, 5);

    check(NULL != w);
    w->paused = true;
    for (int i = 0; i < 40; ++i) {
        check(NULL != world_send(w, SIDE_A, 5000, SEND_PREPARE));
    }
    check_int_eq(world_run(w, 1000, false), WORLD_STALLED);
    check_int_eq(w->ep[SIDE_A]->active_large_frags, USNIC_RX_FRAG_SLOTS);
    check_int_eq(fake_wire_count(), 2 * USNIC_RX_FRAG_SLOTS);
    w->paused = false;
    w->reorder = 40;
    check_int_eq(world_run(w, 10000, false), WORLD_QUIET);
    check_all_delivered(w);
    check_ok(world_verify_counters(w));
    world_fini(w);
    return 0;
}

/* A whole window lost: the timeout resends the oldest segment, and each
 * ACK that follows points at the next one (no second timeout, no
 * segment resent twice). */
USNIC_TEST(engine_window_lost_recovers)
{
    world_t *w = world_new(9, 9);
    uint64_t posts;

    check(NULL != w);
    w->paused = true;
    for (int i = 0; i < 100; ++i) {
        check(NULL != world_send(w, SIDE_A, 1000, SEND_PREPARE));
    }
    check_int_eq(world_run(w, 1000, false), WORLD_STALLED);
    /* all 100 lost */
    while (fake_wire_count() > 0) {
        fake_dgram_t d;
        fake_wire_take(0, &d);
        fake_dgram_free(&d);
    }
    world_peer_lost_lately(w, SIDE_A);    /* a lossy path: the expiry resends */
    check_int_eq(world_fire_timeouts(w, SIDE_A), 1);
    check_int_eq(STATS(w, SIDE_A)->num_timeout_retrans, 1);
    check_int_eq(w->ep[SIDE_A]->rto.rto_us, 10000);
    posts = fake_dev.posts;
    world_progress(w, SIDE_A);
    check_int_eq(fake_dev.posts - posts, 1);
    w->paused = false;
    check_int_eq(world_run(w, 10000, false), WORLD_QUIET);
    check_int_eq(STATS(w, SIDE_A)->num_resends, 100);
    check_int_eq(STATS(w, SIDE_A)->num_timeout_retrans, 1);
    check_int_eq(STATS(w, SIDE_A)->num_fast_retrans, 99);
    check(!w->ep[SIDE_A]->in_recovery);
    check_all_delivered(w);
    world_fini(w);
    return 0;
}

/* ------------------------------------------------------------------ */
/* malformed datagrams                                                 */

/* Each of these is counted and dropped without touching any state; the
 * connection works normally afterwards. */
USNIC_TEST(engine_malformed)
{
    world_t *w = world_new(100, 100);
    opal_btl_usnic_stats_t *sb;
    opal_btl_usnic_endpoint_t *ep;
    union {
        usnic_btl_header_t hdr;
        usnic_btl_chunk_header_t ch;
        uint8_t bytes[5000];
    } p;
    uint32_t data_qpn, prio_qpn;
    fake_src_t src_data, src_prio;
    uint64_t bad = 0;

    check(NULL != w);
    sb = STATS(w, SIDE_B);
    ep = w->ep[SIDE_B];
    data_qpn = w->mods[SIDE_B].local_addr.qp_num[USNIC_DATA_CHANNEL];
    prio_qpn = w->mods[SIDE_B].local_addr.qp_num[USNIC_PRIORITY_CHANNEL];
    /* all from A, as the header says */
    src_data = world_src(w, SIDE_A, USNIC_DATA_CHANNEL);
    src_prio = world_src(w, SIDE_A, USNIC_PRIORITY_CHANNEL);
    usnic_component.max_short_packets = 0;

#define FRAG(len_field)                                                        \
    do {                                                                       \
        memset(&p, 0x5c, sizeof(p));                                           \
        world_header(w, SIDE_A, &p.hdr, USNIC_PAYLOAD_TYPE_FRAG);              \
        p.hdr.pkt_seq = 100;                                                   \
        p.hdr.payload_len = (len_field);                                       \
    } while (0)
#define CHUNK(id, size, off, len_field)                                        \
    do {                                                                       \
        memset(&p, 0x5c, sizeof(p));                                           \
        world_header(w, SIDE_A, &p.hdr, USNIC_PAYLOAD_TYPE_CHUNK);             \
        p.hdr.pkt_seq = 100;                                                   \
        p.hdr.payload_len = (len_field);                                       \
        p.ch.frag_id = (id);                                                   \
        p.ch.frag_size = (size);                                               \
        p.ch.frag_offset = (off);                                              \
    } while (0)
#define EXPECT_BAD(res)                                                        \
    do {                                                                       \
        check_int_eq((res), FAKE_RX_OK);                                       \
        world_progress(w, SIDE_B);                                             \
        check_int_eq(sb->num_bad_recvs, ++bad);                                \
    } while (0)

    /* shorter than a header, and less than a GRH */
    FRAG(0);
    EXPECT_BAD(fake_deliver(data_qpn, &src_data, &p, 20));
    EXPECT_BAD(fake_deliver_raw(data_qpn, &src_data, &p, 0, 10, USNIC_CQE_OK));
    /* lengths that disagree with the datagram */
    FRAG(100);
    EXPECT_BAD(fake_deliver(data_qpn, &src_data, &p, 32 + 50));
    FRAG(10);
    EXPECT_BAD(fake_deliver(data_qpn, &src_data, &p, 32 + 60));
    FRAG(4064);
    EXPECT_BAD(fake_deliver(prio_qpn, &src_prio, &p, 700));
    /* unknown type */
    FRAG(10);
    p.hdr.payload_type = 9;
    EXPECT_BAD(fake_deliver(data_qpn, &src_data, &p, 32 + 10));
    /* an ACK with a payload, an ACK without its ACK */
    world_header(w, SIDE_A, &p.hdr, USNIC_PAYLOAD_TYPE_ACK);
    p.hdr.ack_present = 1;
    p.hdr.payload_len = 4;
    EXPECT_BAD(fake_deliver(prio_qpn, &src_prio, &p, 36));
    p.hdr.payload_len = 0;
    p.hdr.ack_present = 0;
    EXPECT_BAD(fake_deliver(prio_qpn, &src_prio, &p, 32));
    /* chunks: short, id 0, empty, offset at or past the end, payload past
     * the end, larger than a send may be, huge offsets */
    CHUNK(3, 8000, 0, 0);
    EXPECT_BAD(fake_deliver(data_qpn, &src_data, &p, 40));
    CHUNK(0, 8000, 0, 100);
    EXPECT_BAD(fake_deliver(data_qpn, &src_data, &p, 48 + 100));
    CHUNK(3, 8000, 0, 0);
    EXPECT_BAD(fake_deliver(data_qpn, &src_data, &p, 48));
    CHUNK(3, 8000, 8000, 100);
    EXPECT_BAD(fake_deliver(data_qpn, &src_data, &p, 48 + 100));
    CHUNK(3, 8000, 9000, 100);
    EXPECT_BAD(fake_deliver(data_qpn, &src_data, &p, 48 + 100));
    CHUNK(3, 8000, 7950, 100);
    EXPECT_BAD(fake_deliver(data_qpn, &src_data, &p, 48 + 100));
    CHUNK(3, 0x7fffffff, 0, 100);
    EXPECT_BAD(fake_deliver(data_qpn, &src_data, &p, 48 + 100));
    CHUNK(3, 8000, 0xfffffff0u, 100);
    EXPECT_BAD(fake_deliver(data_qpn, &src_data, &p, 48 + 100));
    CHUNK(3, 0, 0, 100);
    EXPECT_BAD(fake_deliver(data_qpn, &src_data, &p, 48 + 100));

    /* unknown sender */
    FRAG(10);
    p.hdr.sender = 0xdeadbeef;
    check_int_eq(fake_deliver(data_qpn, &src_data, &p, 42), FAKE_RX_OK);
    world_progress(w, SIDE_B);
    check_int_eq(sb->num_unk_recvs, 1);
    /* too large for the receive buffer: an error completion */
    FRAG(4065);
    check_int_eq(fake_deliver(data_qpn, &src_data, &p, 32 + 4065), FAKE_RX_OK);
    world_progress(w, SIDE_B);
    check_int_eq(sb->num_recv_errors, 1);
    check_int_eq(fake_dev.rx_len_errors, 1);
    /* any other receive error */
    FRAG(10);
    check_int_eq(fake_deliver_raw(data_qpn, &src_data, &p, 42, 42, USNIC_CQE_ERROR), FAKE_RX_OK);
    world_progress(w, SIDE_B);
    check_int_eq(sb->num_recv_errors, 2);
    /* far outside the receive window, either side */
    FRAG(10);
    p.hdr.pkt_seq = 100 + USNIC_WINDOW_SIZE;
    check_int_eq(fake_deliver(data_qpn, &src_data, &p, 42), FAKE_RX_OK);
    p.hdr.pkt_seq = 99;
    check_int_eq(fake_deliver(data_qpn, &src_data, &p, 42), FAKE_RX_OK);
    world_progress(w, SIDE_B);
    check_int_eq(sb->num_oow_high_recvs, 1);
    check_int_eq(sb->num_oow_low_recvs, 1);

    /* nothing was delivered or recorded; every buffer went back */
    check_int_eq(w->nrx, 0);
    check_int_eq(ep->rx.next_contig, 100);
    check_int_eq(ep->rx.highest_rcvd, 99);
    check(NULL == ep->rx_frags || 0 == ep->rx_frags[3].frag_id);
    check_int_eq(sb->num_frag_recvs + sb->num_chunk_recvs, 0);
    /* receive errors never reach the receive path */
    check_int_eq(sb->num_total_recvs, bad + 3);
    check_int_eq(sb->num_recv_reposts +
                     (uint64_t) w->mods[SIDE_B].channels[USNIC_DATA_CHANNEL].repost_count +
                     (uint64_t) w->mods[SIDE_B].channels[USNIC_PRIORITY_CHANNEL].repost_count,
                 bad + 5);
    check_int_eq(fake_dev.fatal_calls, 0);

    /* the real traffic after it */
    for (int i = 0; i < 20; ++i) {
        check(NULL != world_send(w, SIDE_A, 100 + (size_t) i * 1000, SEND_PREPARE));
    }
    check_int_eq(world_run(w, 1000, false), WORLD_QUIET);
    check_ok(world_verify(w, SIDE_B, false));
    check_ok(world_verify_completions(w));
    check_ok(world_check_idle(w));
    check_int_eq(sb->num_bad_recvs, bad);
    world_fini(w);
    return 0;
#undef FRAG
#undef CHUNK
#undef EXPECT_BAD
}

/* Chunks that do not fit the fragment in their reassembly slot are
 * dropped without being recorded, so a real sender would send them again. */
USNIC_TEST(engine_bad_chunks)
{
    world_t *w = world_new(100, 100);
    opal_btl_usnic_endpoint_t *ep;
    uint32_t mcp;
    union {
        usnic_btl_chunk_header_t ch;
        uint8_t bytes[4096];
    } p;

    check(NULL != w);
    ep = w->ep[SIDE_B];
    mcp = w->mods[SIDE_B].max_chunk_payload;
    memset(&p, 0x42, sizeof(p));
    world_header(w, SIDE_A, &p.ch.hdr, USNIC_PAYLOAD_TYPE_CHUNK);
    p.ch.hdr.payload_len = (uint16_t) mcp;
    p.ch.hdr.tag = WORLD_TAG;
    p.ch.frag_id = 7;
    p.ch.frag_size = 3 * mcp;
    p.ch.frag_offset = 0;
    p.ch.hdr.pkt_seq = 150;
    check_int_eq(world_inject(w, SIDE_B, USNIC_DATA_CHANNEL, &p, 48 + mcp), FAKE_RX_OK);
    world_progress(w, SIDE_B);
    check_int_eq(STATS(w, SIDE_B)->num_chunk_recvs, 1);
    check(NULL != ep->rx_frags);
    check_int_eq(ep->rx_frags[7].frag_id, 7);
    check_int_eq(ep->rx_frags[7].bytes_left, 2 * mcp);

    /* same id, other size; other tag */
    p.ch.hdr.pkt_seq = 151;
    p.ch.frag_offset = mcp;
    p.ch.frag_size = 4 * mcp;
    check_int_eq(world_inject(w, SIDE_B, USNIC_DATA_CHANNEL, &p, 48 + mcp), FAKE_RX_OK);
    p.ch.frag_size = 3 * mcp;
    p.ch.hdr.tag = 3;
    check_int_eq(world_inject(w, SIDE_B, USNIC_DATA_CHANNEL, &p, 48 + mcp), FAKE_RX_OK);
    /* another frag for the same slot */
    p.ch.hdr.tag = WORLD_TAG;
    p.ch.frag_id = 7 + USNIC_RX_FRAG_SLOTS;
    check_int_eq(world_inject(w, SIDE_B, USNIC_DATA_CHANNEL, &p, 48 + mcp), FAKE_RX_OK);
    world_progress(w, SIDE_B);
    check_int_eq(STATS(w, SIDE_B)->num_badfrag_recvs, 3);
    check_int_eq(ep->rx_frags[7].frag_id, 7);
    check_int_eq(ep->rx_frags[7].bytes_left, 2 * mcp);
    /* none of them was recorded: seq 151 still arrives as new */
    check_int_eq(usnic_rx_classify(&ep->rx, 151), USNIC_RX_ACCEPT);

    /* the rest of frag 7 completes it */
    p.ch.frag_id = 7;
    for (uint32_t i = 1; i < 3; ++i) {
        p.ch.hdr.pkt_seq = (uint16_t) (150 + i);
        p.ch.frag_offset = i * mcp;
        memset(p.bytes + 48, (int) (0x42 + i), mcp);
        check_int_eq(world_inject(w, SIDE_B, USNIC_DATA_CHANNEL, &p, 48 + mcp), FAKE_RX_OK);
    }
    world_progress(w, SIDE_B);
    check_int_eq(w->nrx, 1);
    check_int_eq(w->rx[0].len, 3 * mcp);
    for (uint32_t i = 0; i < 3 * mcp; ++i) {
        check_int_eq(w->rx[0].data[i], 0x42 + i / mcp);
    }
    check(NULL == ep->rx_frags);                /* no fragment in progress: slots pooled */
    world_fini(w);
    return 0;
}

/* A chunk that covers bytes of its fragment another chunk already
 * covered must not let the fragment count as complete with a hole: chunks
 * of a fragment sit at multiples of the chunk size and take consecutive
 * sequence numbers, so only one segment may carry each part. */
USNIC_TEST(engine_overlapping_chunks)
{
    world_t *w = world_new(100, 100);
    opal_btl_usnic_endpoint_t *ep;
    uint32_t mcp;
    union {
        usnic_btl_chunk_header_t ch;
        uint8_t bytes[4096];
    } p;

    check(NULL != w);
    ep = w->ep[SIDE_B];
    mcp = w->mods[SIDE_B].max_chunk_payload;
    usnic_component.max_short_packets = 0;
    world_header(w, SIDE_A, &p.ch.hdr, USNIC_PAYLOAD_TYPE_CHUNK);
    p.ch.hdr.tag = WORLD_TAG;
    p.ch.hdr.payload_len = (uint16_t) mcp;
    p.ch.frag_id = 1;
    p.ch.frag_size = 2 * mcp;
    p.ch.pad = 0;
    /* the first chunk, seq 100 */
    p.ch.hdr.pkt_seq = 100;
    p.ch.frag_offset = 0;
    memset(p.bytes + 48, 0x11, mcp);
    check_int_eq(world_inject(w, SIDE_B, USNIC_DATA_CHANNEL, &p, 48 + mcp), FAKE_RX_OK);
    /* seq 101 claims offset 0 again */
    p.ch.hdr.pkt_seq = 101;
    memset(p.bytes + 48, 0x22, mcp);
    check_int_eq(world_inject(w, SIDE_B, USNIC_DATA_CHANNEL, &p, 48 + mcp), FAKE_RX_OK);
    /* seq 102 overlaps the end of the first chunk */
    p.ch.hdr.pkt_seq = 102;
    p.ch.frag_offset = mcp / 2;
    check_int_eq(world_inject(w, SIDE_B, USNIC_DATA_CHANNEL, &p, 48 + mcp), FAKE_RX_OK);
    world_progress(w, SIDE_B);
    check_int_eq(w->nrx, 0);
    check_int_eq(ep->rx_frags[1].bytes_left, mcp);

    /* the real second chunk completes the fragment */
    p.ch.hdr.pkt_seq = 101;
    p.ch.frag_offset = mcp;
    memset(p.bytes + 48, 0x33, mcp);
    check_int_eq(world_inject(w, SIDE_B, USNIC_DATA_CHANNEL, &p, 48 + mcp), FAKE_RX_OK);
    world_progress(w, SIDE_B);
    check_int_eq(w->nrx, 1);
    check_int_eq(w->rx[0].len, 2 * mcp);
    for (uint32_t i = 0; i < 2 * mcp; ++i) {
        check_int_eq(w->rx[0].data[i], i < mcp ? 0x11 : 0x33);
    }
    world_fini(w);
    return 0;
}

/* ------------------------------------------------------------------ */
/* emulated PUT                                                        */

#define REGION (1024 * 1024)

typedef struct {
    size_t off, len;
} put_spec_t;

static const put_spec_t put_specs[] = {
    {1000, 150 * 1024},         /* chunked */
    {200000, 500},              /* one datagram */
    {250000, 4064},             /* exactly one datagram */
    {260000, 4065},             /* two chunks */
    {400000, 600 * 1024},       /* larger than any send may be */
    {REGION - 1, 1},            /* the last byte */
};
#define NPUTS (sizeof(put_specs) / sizeof(put_specs[0]))

static int run_puts(bool lossy)
{
    world_t *w = world_new(30, 40);
    uint8_t *region = malloc(REGION), *src = malloc(REGION);
    put_rec_t *recs[NPUTS];
    chaos_t c = {.loss = 50, .ack_loss = 100, .dup = 50};

    check(NULL != w && NULL != region && NULL != src);
    memset(region, 0x77, REGION);
    world_fill(src, 4242, REGION);
    check(NULL != world_register(w, SIDE_B, region, REGION, MCA_BTL_REG_FLAG_REMOTE_WRITE));
    if (lossy) {
        w->filter = chaos_filter;
        w->filter_arg = &c;
        w->reorder = 32;
    }
    for (size_t i = 0; i < NPUTS; ++i) {
        recs[i] = world_put(w, SIDE_A, src + put_specs[i].off,
                            (uint64_t) (uintptr_t) (region + put_specs[i].off), put_specs[i].len);
        check_int_eq(recs[i]->rc, OPAL_SUCCESS);
    }
    world_progress(w, SIDE_A);
    for (size_t i = 0; i < NPUTS; ++i) {
        /* PUT completion is remote completion */
        check_int_eq(recs[i]->callbacks, 0);
    }
    check_int_eq(world_run(w, 100000, lossy), WORLD_QUIET);
    for (size_t i = 0; i < NPUTS; ++i) {
        check_int_eq(recs[i]->callbacks, 1);
        check_int_eq(recs[i]->status, OPAL_SUCCESS);
        check(recs[i]->local == src + put_specs[i].off);
    }
    for (size_t i = 0; i < REGION; ++i) {
        bool inside = false;
        for (size_t k = 0; k < NPUTS; ++k) {
            inside |= i >= put_specs[k].off && i < put_specs[k].off + put_specs[k].len;
        }
        if (region[i] != (inside ? src[i] : 0x77)) {
            return usnic_test_fail(__FILE__, __LINE__, "region byte %zu is 0x%02x, expected 0x%02x",
                                   i, region[i], inside ? src[i] : 0x77);
        }
    }
    check_int_eq(w->nrx, 0);
    check_int_eq(STATS(w, SIDE_A)->num_puts, NPUTS);
    check_ok(world_check_idle(w));
    check_ok(world_verify_counters(w));
    world_fini(w);
    free(region);
    free(src);
    return 0;
}

USNIC_TEST(engine_put)
{
    return run_puts(false);
}

USNIC_TEST(engine_put_lossy)
{
    return run_puts(true);
}

/* A PUT anywhere but into memory registered for remote writes is counted,
 * dropped and not written; it is never acknowledged. */
static int put_rejected(int how, size_t len)
{
    world_t *w = world_new(50, 60);
    uint8_t *region = malloc(3 * 8192), *src = malloc(len);
    mca_btl_base_registration_handle_t *h = NULL;
    uint8_t *target = region + 8192;
    put_rec_t *rec;

    check(NULL != w && NULL != region && NULL != src);
    usnic_component.max_short_packets = 0;
    memset(region, 0x77, 3 * 8192);
    memset(src, 0x11, len);
    switch (how) {
    case 0: /* not registered at all */
        break;
    case 1: /* registered, but not for remote writes */
        h = world_register(w, SIDE_B, target, 8192, MCA_BTL_REG_FLAG_LOCAL_WRITE);
        break;
    case 2: /* the PUT runs past the end of the region */
        h = world_register(w, SIDE_B, target, 8192, MCA_BTL_REG_FLAG_REMOTE_WRITE);
        target += 8192 - len / 2;
        break;
    case 3: /* registered and deregistered again */
        h = world_register(w, SIDE_B, target, 8192, MCA_BTL_REG_FLAG_REMOTE_WRITE);
        world_deregister(w, SIDE_B, h);
        break;
    case 4: /* starts before the region */
        h = world_register(w, SIDE_B, target, 8192, MCA_BTL_REG_FLAG_REMOTE_WRITE);
        target -= 1;
        break;
    }
    rec = world_put(w, SIDE_A, src, (uint64_t) (uintptr_t) target, len);
    check_int_eq(rec->rc, OPAL_SUCCESS);
    /* it is resent at every timeout and refused every time */
    check_int_eq(world_run(w, 200, true), WORLD_LIMIT);
    check(STATS(w, SIDE_B)->num_bad_recvs >= 2);
    check_int_eq(STATS(w, SIDE_B)->num_frag_recvs, 0);
    /* nothing recorded as received */
    check_int_eq(w->ep[SIDE_B]->rx.next_contig, 50);
    check_int_eq(w->ep[SIDE_B]->rx.highest_rcvd, 49);
    check_int_eq(rec->callbacks, 0);
    check_int_eq(w->nrx, 0);
    for (size_t i = 0; i < 3 * 8192; ++i) {
        check_int_eq(region[i], 0x77);
    }
    world_fini(w);
    free(region);
    free(src);
    return 0;
}

USNIC_TEST(engine_put_rejected)
{
    for (int how = 0; how < 5; ++how) {
        if (0 != put_rejected(how, 1000) || 0 != put_rejected(how, 6000)) {
            return 1;
        }
    }
    return 0;
}

/* ------------------------------------------------------------------ */
/* re-entry from PML callbacks                                         */

/* B answers every message from inside its receive callback, as a PML
 * does with ACKs and rendezvous replies. */
static void echo(world_t *w, int side, const rx_msg_t *m)
{
    if (SIDE_B == side) {
        size_t len = m->len > 2000 ? m->len / 3 : m->len + 10;
        world_send(w, SIDE_B, len,
                   m->len % 2 && len <= w->mods[SIDE_B].max_frag_payload ? SEND_ALLOC
                                                                          : SEND_PREPARE);
    }
}

USNIC_TEST(engine_send_from_receive_callback)
{
    world_t *w = world_new(20000, 50000);
    chaos_t c = {.loss = 30, .ack_loss = 30};

    check(NULL != w);
    w->on_recv = echo;
    w->filter = chaos_filter;
    w->filter_arg = &c;
    w->reorder = 8;
    for (int i = 0; i < 300; ++i) {
        size_t len = mixed_len(w);
        check(NULL != world_send(w, SIDE_A, len, mixed_method(w, len)));
    }
    check_int_eq(world_run(w, 200000, true), WORLD_QUIET);
    check_int_eq(w->nsent, 600);
    check_all_delivered(w);
    check_ok(world_verify_counters(w));
    world_fini(w);
    return 0;
}

/* The PML sends again from inside a send completion callback, which
 * runs in the middle of the send engine. */
static void send_more(world_t *w, sent_msg_t *m)
{
    if (w->nsent < 400) {
        size_t len = mixed_len(w);
        world_send(w, m->from, len, mixed_method(w, len));
    }
}

USNIC_TEST(engine_send_from_send_callback)
{
    world_t *w = world_new(100, 200);
    chaos_t c = {.loss = 30, .ack_loss = 30};

    check(NULL != w);
    w->on_send_done = send_more;
    w->filter = chaos_filter;
    w->filter_arg = &c;
    for (int i = 0; i < 20; ++i) {
        size_t len = mixed_len(w);
        check(NULL != world_send(w, i % 2, len, mixed_method(w, len)));
    }
    check_int_eq(world_run(w, 200000, true), WORLD_QUIET);
    check_int_eq(w->nsent, 400);
    check_all_delivered(w);
    check_ok(world_verify_counters(w));
    world_fini(w);
    return 0;
}

/* The next PUT starts from inside the completion callback of the last,
 * which runs while an ACK is being processed. */
static uint8_t *chain_src, *chain_dst;
#define CHAIN_PUTS 60
#define CHAIN_LEN 20000

static void put_next(world_t *w, put_rec_t *p)
{
    if (w->nputs < CHAIN_PUTS) {
        size_t off = w->nputs * CHAIN_LEN;
        world_put(w, p->from, chain_src + off, (uint64_t) (uintptr_t) (chain_dst + off),
                  CHAIN_LEN - w->nputs * 97);
    }
}

USNIC_TEST(engine_put_from_put_callback)
{
    world_t *w = world_new(65535, 0);
    chaos_t c = {.loss = 30, .ack_loss = 30};

    chain_src = malloc(CHAIN_PUTS * CHAIN_LEN);
    chain_dst = malloc(CHAIN_PUTS * CHAIN_LEN);
    check(NULL != w && NULL != chain_src && NULL != chain_dst);
    world_fill(chain_src, 99, CHAIN_PUTS * CHAIN_LEN);
    memset(chain_dst, 0, CHAIN_PUTS * CHAIN_LEN);
    check(NULL != world_register(w, SIDE_B, chain_dst, CHAIN_PUTS * CHAIN_LEN,
                                 MCA_BTL_REG_FLAG_REMOTE_WRITE));
    w->on_put_done = put_next;
    w->filter = chaos_filter;
    w->filter_arg = &c;
    check_int_eq(world_put(w, SIDE_A, chain_src, (uint64_t) (uintptr_t) chain_dst, CHAIN_LEN)->rc,
                 OPAL_SUCCESS);
    check_int_eq(world_run(w, 200000, true), WORLD_QUIET);
    check_int_eq(w->nputs, CHAIN_PUTS);
    for (size_t i = 0; i < CHAIN_PUTS; ++i) {
        size_t len = CHAIN_LEN - (i ? i * 97 : 0), off = i * CHAIN_LEN;
        check_int_eq(w->puts[i]->callbacks, 1);
        check(0 == memcmp(chain_dst + off, chain_src + off, len));
        for (size_t k = len; k < CHAIN_LEN; ++k) {
            check_int_eq(chain_dst[off + k], 0);
        }
    }
    check_ok(world_check_idle(w));
    world_fini(w);
    free(chain_src);
    free(chain_dst);
    return 0;
}

/* Descriptors the PML keeps and frees with btl_free when done (no
 * MCA_BTL_DES_FLAGS_BTL_OWNERSHIP): each goes back to its free list once. */
USNIC_TEST(engine_pml_frees_descriptors)
{
    world_t *w = world_new(10, 10);
    chaos_t c = {.loss = 50, .ack_loss = 50, .dup = 20};

    check(NULL != w);
    w->pml_frees = true;
    w->filter = chaos_filter;
    w->filter_arg = &c;
    w->reorder = 8;
    for (int i = 0; i < 300; ++i) {
        size_t len = mixed_len(w);
        check(NULL != world_send(w, i % 2, len, mixed_method(w, len)));
        if (i % 10 == 9) {
            world_step(w);
        }
    }
    check_int_eq(world_run(w, 200000, true), WORLD_QUIET);
    check_all_delivered(w);
    check_ok(world_verify_counters(w));
    world_fini(w);
    return 0;
}

/* The same when the ACK of a fast-path send is in before the sender's
 * progress reports the send complete to the PML. */
USNIC_TEST(engine_pml_frees_fast_path)
{
    world_t *w = world_new(10, 10);
    sent_msg_t *m;

    check(NULL != w);
    w->pml_frees = true;
    usnic_component.ack_iteration_delay = 0;
    m = world_send(w, SIDE_A, 100, SEND_ALLOC);
    check(NULL != m);
    check_int_eq(m->rc, OPAL_SUCCESS);
    check_int_eq(STATS(w, SIDE_A)->num_fast_sends, 1);
    /* the callback comes from progress, not from inside btl_send */
    check_int_eq(m->callbacks, 0);
    /* B gets it and acknowledges before A progresses */
    check_int_eq(world_net_step(w), 1);
    world_progress(w, SIDE_B);
    check_int_eq(STATS(w, SIDE_B)->num_ack_sends, 1);
    check_int_eq(world_net_step(w), 1);
    world_progress(w, SIDE_A);
    check_int_eq(m->callbacks, 1);
    check_int_eq(world_run(w, 100, false), WORLD_QUIET);
    check_all_delivered(w);
    world_fini(w);
    return 0;
}

/* Datagrams damaged on the way (truncated, wrong type, wrong length,
 * wrong sender) are counted and dropped; resends deliver everything. */
typedef struct {
    unsigned permille;
    uint64_t bad[2], unknown[2];
} damage_t;

static net_action_t damage_filter(world_t *w, fake_dgram_t *d, void *arg)
{
    damage_t *c = arg;
    usnic_btl_header_t *h = (usnic_btl_header_t *) d->bytes;
    int to = d->src == w->mods[SIDE_A].dev ? SIDE_B : SIDE_A;

    if (world_rand(w) % 1000 >= c->permille) {
        return NET_DELIVER;
    }
    switch (world_rand(w) % 4) {
    case 0:
        d->len = world_rand(w) % d->len;
        ++c->bad[to];
        break;
    case 1:
        h->payload_type = 4 + world_rand(w) % 250;
        ++c->bad[to];
        break;
    case 2:
        h->payload_len = (uint16_t) (h->payload_len + 1 + world_rand(w) % 100);
        ++c->bad[to];
        break;
    default:
        h->sender ^= (uint64_t) (1 + world_rand(w) % 255) << 40;
        ++c->unknown[to];
        break;
    }
    return NET_DELIVER;
}

USNIC_TEST(engine_damaged_datagrams)
{
    world_t *w = world_new(1234, 4321);
    damage_t c = {.permille = 80};

    check(NULL != w);
    usnic_component.max_short_packets = 0;
    w->filter = damage_filter;
    w->filter_arg = &c;
    for (int i = 0; i < 300; ++i) {
        size_t len = mixed_len(w);
        check(NULL != world_send(w, i % 2, len, mixed_method(w, len)));
        if (i % 10 == 9) {
            world_step(w);
        }
    }
    check_int_eq(world_run(w, 200000, true), WORLD_QUIET);
    check_all_delivered(w);
    for (int s = 0; s < 2; ++s) {
        check(c.bad[s] > 10);
        check_int_eq(STATS(w, s)->num_bad_recvs, c.bad[s]);
        check_int_eq(STATS(w, s)->num_unk_recvs, c.unknown[s]);
    }
    world_fini(w);
    return 0;
}

/* The checks themselves: a payload byte changed on the wire (no header
 * check can see it; the link's CRC would) is caught by world_verify. */
static net_action_t flip_one_byte(world_t *w, fake_dgram_t *d, void *arg)
{
    int *done = arg;
    (void) w;
    if (0 == *done && USNIC_PAYLOAD_TYPE_CHUNK == dgram_hdr(d)->payload_type) {
        d->bytes[d->len - 1] ^= 0x01;
        *done = 1;
    }
    return NET_DELIVER;
}

USNIC_TEST(engine_verify_catches_corruption)
{
    world_t *w = world_new(1, 1);
    int done = 0;
    const char *e;

    check(NULL != w);
    w->filter = flip_one_byte;
    w->filter_arg = &done;
    check(NULL != world_send(w, SIDE_A, 20000, SEND_PREPARE));
    check_int_eq(world_run(w, 1000, false), WORLD_QUIET);
    check_int_eq(done, 1);
    e = world_verify(w, SIDE_B, false);
    check(NULL != e && NULL != strstr(e, "message 1 (20000 bytes): byte"));
    world_fini(w);
    return 0;
}

/* ------------------------------------------------------------------ */
/* failures                                                            */

static double now_s(void)
{
    return opal_btl_usnic_now_us() / 1e6;
}

/* As if the endpoint's current stall had begun secs earlier: the dead-peer
 * check reads a real clock. */
static void age_stall(opal_btl_usnic_endpoint_t *ep, double secs)
{
    ep->last_ack_time -= secs;
    if (0 != ep->watch.watch_since) {
        ep->watch.watch_since -= secs;
    }
}

/* One progress pass of a side at which the dead-peer check runs. */
static void dead_check(world_t *w, int side)
{
    usnic_component.progress_ticks = (usnic_component.progress_ticks | 255) + 1;
    world_progress(w, side);
}

/* A peer that acknowledges nothing for peer_timeout seconds, and was
 * watched for half of that, is declared dead: fatal error naming it, and
 * no more sends to it. */
USNIC_TEST(engine_dead_peer)
{
    world_t *w = world_new(1, 1);
    opal_btl_usnic_endpoint_t *ep;
    sent_msg_t *m;

    check(NULL != w);
    ep = w->ep[SIDE_A];
    usnic_component.peer_timeout = 2;
    w->paused = true;
    check(NULL != world_send(w, SIDE_A, 100, SEND_PREPARE));
    world_step(w);
    check_int_eq(usnic_tx_window_inflight(&ep->tx), 1);

    dead_check(w, SIDE_A);
    check_int_eq(fake_dev.fatal_calls, 0);
    check(0 == ep->watch.watch_since);
    /* 2.5 s without an ACK: the check starts watching, but gives the peer
     * half the timeout of attention first */
    age_stall(ep, 2.5);
    dead_check(w, SIDE_A);
    check_int_eq(fake_dev.fatal_calls, 0);
    check(0 != ep->watch.watch_since);
    check(!ep->failed);
    /* checked only every 256 passes */
    age_stall(ep, 1.1);
    ++usnic_component.progress_ticks;
    world_progress(w, SIDE_A);
    check_int_eq(fake_dev.fatal_calls, 0);
    dead_check(w, SIDE_A);
    check_int_eq(fake_dev.fatal_calls, 1);
    check(fake_dev.fatal_module == &w->mods[SIDE_A]);
    check(fake_dev.fatal_peer == &w->oproc[SIDE_A]);
    check(ep->failed);
    check(w->mods[SIDE_A].dead);
    m = world_send(w, SIDE_A, 100, SEND_PREPARE);
    check(NULL != m);
    check_int_eq(m->rc, OPAL_ERR_UNREACH);
    /* B, which never got anything, is fine */
    check(!w->ep[SIDE_B]->failed);
    world_fini(w);
    return 0;
}

/* The dead-peer clock starts and restarts on a real clock, not on the
 * coarse one, which stands still while the process computes outside MPI;
 * an ACK restarts it even while something stays unacknowledged. */
USNIC_TEST(engine_dead_peer_clock)
{
    world_t *w = world_new(500, 1);
    drop_first_t f = {.from = SIDE_A, .seqs = {501}, .nseqs = 1};
    opal_btl_usnic_endpoint_t *ep;

    check(NULL != w);
    ep = w->ep[SIDE_A];
    usnic_component.peer_timeout = 2;
    usnic_component.progress_ticks = 1;
    /* back from 10 s of computing: nothing refreshed the coarse clock */
    usnic_component.coarse_time -= 10;
    w->filter = drop_first_filter;
    w->filter_arg = &f;
    w->paused = true;
    check(NULL != world_send(w, SIDE_A, 100, SEND_PREPARE));
    check(NULL != world_send(w, SIDE_A, 100, SEND_PREPARE));
    check(ep->last_ack_time > now_s() - 1);
    /* 501 is lost; the ACK of 500 comes back 2.5 s later */
    age_stall(ep, 2.5);
    w->paused = false;
    check_int_eq(world_run(w, 100, false), WORLD_STALLED);
    check_int_eq(ep->tx.ack_seq_rcvd, 500);
    check_int_eq(usnic_tx_window_inflight(&ep->tx), 1);
    check(ep->last_ack_time > now_s() - 1);
    /* just after that ACK: alive */
    dead_check(w, SIDE_A);
    check_int_eq(fake_dev.fatal_calls, 0);
    /* 2.5 s after it, watched for 1.1 s: dead */
    age_stall(ep, 2.5);
    dead_check(w, SIDE_A);
    check_int_eq(fake_dev.fatal_calls, 0);
    age_stall(ep, 1.1);
    dead_check(w, SIDE_A);
    check_int_eq(fake_dev.fatal_calls, 1);
    check(ep->failed);
    world_fini(w);
    return 0;
}

/* A process back from computing longer than peer_timeout (its coarse clock
 * stale) sends to a peer that takes a while to answer: the peer is not
 * declared dead at the next checks, and the message gets through. */
USNIC_TEST(engine_dead_peer_after_compute)
{
    world_t *w = world_new(1, 1);
    opal_btl_usnic_endpoint_t *ep;

    check(NULL != w);
    ep = w->ep[SIDE_A];
    usnic_component.peer_timeout = 2;
    usnic_component.progress_ticks = 1;
    usnic_component.coarse_time -= 10;
    w->paused = true;
    check(NULL != world_send(w, SIDE_A, 3000, SEND_PREPARE));
    /* the coarse clock is refreshed on the way: four checks */
    for (int i = 0; i < 1100; ++i) {
        world_step(w);
    }
    check_int_eq(usnic_tx_window_inflight(&ep->tx), 1);
    check_int_eq(fake_dev.fatal_calls, 0);
    check(!ep->failed);
    w->paused = false;
    check_int_eq(world_run(w, 1000, false), WORLD_QUIET);
    check_all_delivered(w);
    check_int_eq(fake_dev.fatal_calls, 0);
    world_fini(w);
    return 0;
}

/* Deliver (or drop) the datagrams on the wire that one side sent. */
static int wire_from(world_t *w, int side, bool deliver)
{
    int n = 0;

    for (size_t i = 0; i < fake_wire_count();) {
        fake_dgram_t d;
        if (fake_wire_peek(i)->src != w->mods[side].dev) {
            ++i;
            continue;
        }
        fake_wire_take(i, &d);
        if (deliver) {
            fake_deliver(d.dst_qpn, &d.from, d.bytes, d.len);
        }
        fake_dgram_free(&d);
        ++n;
    }
    return n;
}

/* An ACK that rides on data leaves its endpoint on the ACK list, owing
 * nothing: no standalone ACK for it, and the next one owed needs no second
 * insertion. */
USNIC_TEST(engine_ack_list_keeps_endpoint)
{
    world_t *w = world_new(10, 20);
    opal_btl_usnic_module_t *mb;
    opal_btl_usnic_endpoint_t *eb;

    check(NULL != w);
    mb = &w->mods[SIDE_B];
    eb = w->ep[SIDE_B];
    check(NULL != world_send(w, SIDE_A, 100, SEND_SENDI));
    check_int_eq(wire_from(w, SIDE_A, true), 1);
    world_progress(w, SIDE_B);
    check(eb->ack_owed && eb->on_acks_list);
    check_int_eq(mb->acks_owed, 1);
    /* the reply carries the ACK */
    check(NULL != world_send(w, SIDE_B, 100, SEND_SENDI));
    check(!eb->ack_owed && eb->on_acks_list);
    check_int_eq(mb->acks_owed, 0);
    check(UINT64_MAX == mb->acks_due_tick);
    check_int_eq(world_run(w, 1000, false), WORLD_QUIET);
    check_int_eq(STATS(w, SIDE_B)->num_ack_sends, 0);
    /* a message B does not answer: one standalone ACK, one list entry */
    check(NULL != world_send(w, SIDE_A, 100, SEND_SENDI));
    check_int_eq(wire_from(w, SIDE_A, true), 1);
    world_progress(w, SIDE_B);
    check(eb->ack_owed);
    check_int_eq(opal_list_get_size(&mb->endpoints_that_need_acks), 1);
    check_int_eq(world_run(w, 1000, false), WORLD_QUIET);
    check_int_eq(STATS(w, SIDE_B)->num_ack_sends, 1);
    check_int_eq(mb->acks_owed, 0);
    check_all_delivered(w);
    world_fini(w);
    return 0;
}

/* A resent segment carries no ACK: the one it carried the first time may
 * be stale by then, and would look like a duplicate ACK. */
USNIC_TEST(engine_resend_carries_no_stale_ack)
{
    world_t *w = world_new(700, 900);

    check(NULL != w);
    /* B gets 700 and owes an ACK; its own message carries it, and is lost */
    check(NULL != world_send(w, SIDE_A, 1000, SEND_PREPARE));
    check_int_eq(wire_from(w, SIDE_A, true), 1);
    world_progress(w, SIDE_B);
    check(w->ep[SIDE_B]->ack_owed);
    check(NULL != world_send(w, SIDE_B, 1000, SEND_PREPARE));
    check(!w->ep[SIDE_B]->ack_owed);
    check_int_eq(fake_wire_peek(0)->src == w->mods[SIDE_B].dev, 1);
    check_int_eq(dgram_hdr(fake_wire_peek(0))->ack_present, 1);
    check_int_eq(wire_from(w, SIDE_B, false), 1);
    /* A resends 700 (once its device has reported the first send done: a
     * segment not yet sent is not late); B acknowledges it again */
    world_progress(w, SIDE_A);
    world_peer_lost_lately(w, SIDE_A);    /* a lossy path: the expiry resends */
    check_int_eq(world_fire_timeouts(w, SIDE_A), 1);
    world_progress(w, SIDE_A);
    check_int_eq(wire_from(w, SIDE_A, true), 1);
    world_progress(w, SIDE_B);
    check_int_eq(wire_from(w, SIDE_B, true), 1);
    world_progress(w, SIDE_A);
    check_int_eq(w->ep[SIDE_A]->tx.ack_seq_rcvd, 700);
    /* 701 is in flight when B's resend arrives */
    check(NULL != world_send(w, SIDE_A, 1000, SEND_PREPARE));
    world_peer_lost_lately(w, SIDE_B);    /* a lossy path: the expiry resends */
    check_int_eq(world_fire_timeouts(w, SIDE_B), 1);
    world_progress(w, SIDE_B);
    check_int_eq(wire_from(w, SIDE_B, true), 1);
    world_progress(w, SIDE_A);
    check_int_eq(STATS(w, SIDE_A)->num_dup_acks, 0);
    check_int_eq(STATS(w, SIDE_A)->num_old_dup_acks, 0);
    check_int_eq(STATS(w, SIDE_A)->num_fast_retrans, 0);
    check_int_eq(world_run(w, 1000, true), WORLD_QUIET);
    check_all_delivered(w);
    world_fini(w);
    return 0;
}

/* Forgetting a peer (btl_del_procs) with PUTs still unacknowledged must
 * not report them complete: their data may never have arrived. */
USNIC_TEST(engine_del_procs_pending_puts)
{
    world_t *w = world_new(1, 2);
    uint8_t *dst = malloc(20000), *src = malloc(20000);
    put_rec_t *small, *large;

    check(NULL != w && NULL != dst && NULL != src);
    memset(dst, 0, 20000);
    memset(src, 0x5a, 20000);
    check(NULL != world_register(w, SIDE_B, dst, 20000, MCA_BTL_REG_FLAG_REMOTE_WRITE));
    w->paused = true;
    small = world_put(w, SIDE_A, src, (uint64_t) (uintptr_t) dst, 100);
    large = world_put(w, SIDE_A, src + 100, (uint64_t) (uintptr_t) (dst + 100), 19000);
    check_int_eq(world_run(w, 100, false), WORLD_STALLED);
    check_int_eq(small->callbacks + large->callbacks, 0);

    check_int_eq(world_del_procs(w, SIDE_A), OPAL_SUCCESS);
    check(0 == small->callbacks || OPAL_SUCCESS != small->status);
    check(0 == large->callbacks || OPAL_SUCCESS != large->status);
    world_fini(w);
    free(dst);
    free(src);
    return 0;
}

/* Forgetting a peer while the device still owns segments sent to it:
 * their completions must not lead to the released endpoint. */
USNIC_TEST(engine_del_procs_posted_sends)
{
    world_t *w = world_new(1, 2);

    check(NULL != w);
    for (int i = 0; i < 10; ++i) {
        check(NULL != world_send(w, SIDE_A, 100 + (size_t) i * 3000, SEND_PREPARE));
    }
    /* the sends are posted; their completions wait in A's queue */
    check(fake_cq_depth(&w->mods[SIDE_A], USNIC_DATA_CHANNEL) > 0);
    check_int_eq(world_del_procs(w, SIDE_A), OPAL_SUCCESS);
    world_progress(w, SIDE_A);
    check_int_eq(fake_dev.stale_completions, 0);
    check_int_eq(fake_dev.fatal_calls, 0);
    world_fini(w);
    return 0;
}

/* A send that completes in error is recovered by the retransmit timer. */
USNIC_TEST(engine_send_completion_error)
{
    world_t *w = world_new(3, 4);
    fake_dgram_t d;

    check(NULL != w);
    fake_dev.hold_send_completions = true;
    check(NULL != world_send(w, SIDE_A, 3000, SEND_PREPARE));
    check_int_eq(fake_held_count(), 1);
    /* the device did not send it */
    check(fake_wire_take(0, &d));
    fake_dgram_free(&d);
    fake_dev.hold_send_completions = false;
    fake_release_send_completions(USNIC_CQE_ERROR);
    check_int_eq(world_run(w, 1000, true), WORLD_QUIET);
    check_int_eq(STATS(w, SIDE_A)->num_send_errors, 1);
    check_int_eq(STATS(w, SIDE_A)->num_recv_errors, 0);
    check_int_eq(STATS(w, SIDE_A)->num_resends, 1);
    check_all_delivered(w);
    world_fini(w);
    return 0;
}

/* The retransmit timer expires while this side's device still has the
 * oldest segment's send (its completion not in): the segment was not late,
 * so the timer starts again, without a resend, a backoff or a congestion
 * cut (num_timer_unsent).  Once the device reports it sent, an expiry
 * resends it as usual (here it was lost). */
USNIC_TEST(engine_timer_waits_for_unsent_segment)
{
    world_t *w = world_new(3, 4);
    opal_btl_usnic_endpoint_t *ep;
    fake_dgram_t d;
    uint32_t cwnd;

    check(NULL != w);
    fake_dev.hold_send_completions = true;
    check(NULL != world_send(w, SIDE_A, 3000, SEND_PREPARE));
    check_int_eq(fake_held_count(), 1);
    ep = w->ep[SIDE_A];
    cwnd = ep->tx.cwnd;
    check_int_eq(world_fire_timeouts(w, SIDE_A), 0);
    check_int_eq(world_fire_timeouts(w, SIDE_A), 0);
    check_int_eq(STATS(w, SIDE_A)->num_timer_unsent, 2);
    check_int_eq(STATS(w, SIDE_A)->num_timeout_retrans, 0);
    check_int_eq(STATS(w, SIDE_A)->num_cwnd_cuts, 0);
    check_int_eq(ep->rto.rto_us, usnic_component.retrans_timeout);
    check_int_eq(ep->tx.cwnd, cwnd);
    check(ep->timer_running);
    /* the device sends it at last, and the network loses it */
    check(fake_wire_take(0, &d));
    fake_dgram_free(&d);
    fake_dev.hold_send_completions = false;
    fake_release_send_completions(USNIC_CQE_OK);
    check_int_eq(world_run(w, 1000, true), WORLD_QUIET);
    check_int_eq(STATS(w, SIDE_A)->num_timeout_retrans, 1);
    check_int_eq(STATS(w, SIDE_A)->num_resends, 1);
    check_all_delivered(w);
    check_ok(world_check_idle(w));
    world_fini(w);
    return 0;
}

/* ACKs that arrive before the device reports the send complete: the
 * buffers go back only when both happened. */
USNIC_TEST(engine_ack_before_send_completion)
{
    world_t *w = world_new(3, 4);

    check(NULL != w);
    fake_dev.hold_send_completions = true;
    for (int i = 0; i < 20; ++i) {
        size_t len = 100 + (size_t) i * 7000;
        check(NULL != world_send(w, SIDE_A, len, i % 2 ? SEND_NONCONTIG : SEND_PREPARE));
    }
    check_int_eq(world_run(w, 1000, false), WORLD_STALLED);
    check_int_eq(usnic_tx_window_inflight(&w->ep[SIDE_A]->tx), 0);
    check(world_free_count(&w->mods[SIDE_A].chunk_segs) <
          w->mods[SIDE_A].chunk_segs.fl_num_allocated);
    fake_dev.hold_send_completions = false;
    fake_release_send_completions(USNIC_CQE_OK);
    check_int_eq(world_run(w, 1000, false), WORLD_QUIET);
    check_all_delivered(w);
    check_ok(world_verify_counters(w));
    world_fini(w);
    return 0;
}

/* Device failures end in the fatal-error path. */
USNIC_TEST(engine_device_failures)
{
    world_t *w = world_new(3, 4);
    fake_src_t from_a;
    uint8_t junk[64];

    check(NULL != w);
    /* a post fails */
    fake_dev.fail_post = true;
    world_send(w, SIDE_A, 100, SEND_ALLOC);
    check_int_eq(fake_dev.fatal_calls, 1);
    check(fake_dev.fatal_module == &w->mods[SIDE_A]);
    check(w->mods[SIDE_A].dead);
    fake_dev.fail_post = false;

    /* a flushed receive: the queue pair is dead */
    memset(junk, 0, sizeof(junk));
    from_a = world_src(w, SIDE_A, USNIC_DATA_CHANNEL);
    check_int_eq(fake_deliver_raw(w->mods[SIDE_B].local_addr.qp_num[USNIC_DATA_CHANNEL], &from_a,
                                  junk, 0, 0, USNIC_CQE_FLUSHED),
                 FAKE_RX_OK);
    world_progress(w, SIDE_B);
    check_int_eq(fake_dev.fatal_calls, 2);
    check(fake_dev.fatal_module == &w->mods[SIDE_B]);
    world_fini(w);

    /* a flushed send */
    w = world_new(3, 4);
    check(NULL != w);
    fake_dev.hold_send_completions = true;
    check(NULL != world_send(w, SIDE_A, 100, SEND_ALLOC));
    fake_release_send_completions(USNIC_CQE_FLUSHED);
    fake_dev.hold_send_completions = false;
    world_progress(w, SIDE_A);
    check_int_eq(fake_dev.fatal_calls, 1);
    check(fake_dev.fatal_module == &w->mods[SIDE_A]);
    world_fini(w);

    /* receive buffers cannot be handed back (each is, at once) */
    w = world_new(3, 4);
    check(NULL != w);
    for (int c = 0; c < USNIC_NUM_CHANNELS; ++c) {
        w->mods[SIDE_B].channels[c].repost_batch = 1;
    }
    check(NULL != world_send(w, SIDE_A, 100, SEND_ALLOC));
    fake_dev.fail_repost = true;
    world_net_step(w);
    world_progress(w, SIDE_B);
    check_int_eq(fake_dev.fatal_calls, 1);
    check(fake_dev.fatal_module == &w->mods[SIDE_B]);
    fake_dev.fail_repost = false;
    world_fini(w);
    return 0;
}

/* ------------------------------------------------------------------ */
/* peers with different limits                                         */

/* A host with several devices lowers its send limit to 25 KiB; a peer
 * with one device still sends fragments up to 150 KiB to it. */
USNIC_TEST(engine_mixed_send_limits)
{
    world_t *w = world_new(1, 1);

    check(NULL != w);
    usnic_component.max_short_packets = 0;
    w->mods[SIDE_B].super.btl_eager_limit = 25 * 1024;
    w->mods[SIDE_B].super.btl_max_send_size = 25 * 1024;
    check(NULL != world_send(w, SIDE_A, 100000, SEND_PREPARE));
    check(NULL != world_send(w, SIDE_B, 25 * 1024, SEND_PREPARE));
    check_int_eq(world_run(w, 2000, true), WORLD_QUIET);
    check_all_delivered(w);
    world_fini(w);
    return 0;
}

/* Memory per connected peer (README, docs/engine-window.md): at most
 * this, whatever the window. */
#define PEER_BYTES_MAX 2048

/* The walk of the retransmit timers that a later progress pass makes: it
 * unlists drained endpoints and takes back their send tables. */
static void timer_walk(world_t *w, int s)
{
    world_run_as(w, s);
    opal_btl_usnic_check_timers(&w->mods[s], opal_btl_usnic_now_us(), false);
}

/* Bytes of the tables side s's pool holds free. */
static uint64_t pool_free_bytes(world_t *w, int s)
{
    uint64_t b = 0;

    for (int c = 0; c < USNIC_TX_TABLE_CLASSES; ++c) {
        b += (uint64_t) w->mods[s].tx_tables_cached[c] * (USNIC_TX_TABLE_MIN << c) *
             sizeof(void *);
    }
    return b;
}

/* Send tables come from the module's pool with the first send, grow with
 * the window and go back when nothing is in flight; a peer only ever
 * received from holds none.  Whatever the window, the endpoint itself
 * stays within PEER_BYTES_MAX.  An ACK (even a duplicate of "nothing")
 * before any send changes nothing. */
USNIC_TEST(engine_send_tables_pooled)
{
    world_t *w = world_new(700, 900);
    opal_btl_usnic_endpoint_t *a, *b;

    check(NULL != w);
    a = w->ep[SIDE_A];
    b = w->ep[SIDE_B];
    check(!a->tx_ready && NULL == a->sent_segs);
    check_int_eq(STATS(w, SIDE_A)->endpoints, 1);
    inject_ack(w, SIDE_A, 699);                 /* "duplicate" of the initial state */
    inject_ack(w, SIDE_A, 700);                 /* never sent */
    world_progress(w, SIDE_A);
    check_int_eq(STATS(w, SIDE_A)->num_dup_acks, 1);
    check_int_eq(STATS(w, SIDE_A)->num_bogus_acks, 1);
    check(NULL == a->sent_segs);
    check_int_eq(STATS(w, SIDE_A)->send_table_bytes, 0);

    /* a few sends: the smallest table, back to the pool once drained */
    for (int i = 0; i < 10; ++i) {
        check(NULL != world_send(w, SIDE_B, 100, SEND_PREPARE));
    }
    check(b->tx_ready && NULL != b->sent_segs);
    check_int_eq(b->tx_mask + 1, USNIC_TX_TABLE_MIN);
    check_int_eq(world_run(w, 1000, false), WORLD_QUIET);
    check_all_delivered(w);
    check(NULL == a->sent_segs);                /* A only received and ACKed */
    timer_walk(w, SIDE_B);
    check(!b->tx_ready && NULL == b->sent_segs);
    check_int_eq(STATS(w, SIDE_B)->send_table_bytes, USNIC_TX_TABLE_MIN * sizeof(void *));
    check_int_eq(pool_free_bytes(w, SIDE_B), STATS(w, SIDE_B)->send_table_bytes);

    /* the largest window: the table grows with what is in flight, the
     * endpoint does not */
    usnic_component.max_send_window = USNIC_WINDOW_SIZE;
    opal_btl_usnic_endpoint_size_window(a, 1);
    a->tx.bdp = USNIC_WINDOW_SIZE;
    usnic_tx_window_limit(&a->tx);
    w->paused = true;
    for (int i = 0; i < 700; ++i) {
        check(NULL != world_send(w, SIDE_A, 100, SEND_PREPARE));
    }
    check_int_eq(world_run(w, 10000, false), WORLD_STALLED);
    check(usnic_tx_window_inflight(&a->tx) > 512);
    check_int_eq(a->tx_mask + 1, 1024);
    check_int_eq(STATS(w, SIDE_A)->num_table_grows, 4);
    /* the tables it outgrew wait in the pool */
    check_int_eq(STATS(w, SIDE_A)->send_table_bytes, (64 + 128 + 256 + 512 + 1024) * sizeof(void *));
    w->paused = false;
    check_int_eq(world_run(w, 100000, false), WORLD_QUIET);
    check_all_delivered(w);
    timer_walk(w, SIDE_A);
    check(NULL == a->sent_segs);
    check_int_eq(pool_free_bytes(w, SIDE_A), STATS(w, SIDE_A)->send_table_bytes);
    /* the next burst starts small again, from the pool */
    check(NULL != world_send(w, SIDE_A, 100, SEND_PREPARE));
    check_int_eq(a->tx_mask + 1, USNIC_TX_TABLE_MIN);
    check_int_eq(world_run(w, 1000, false), WORLD_QUIET);

    printf("endpoint memory: %" PRIu64 " B (A, sent with a %u-segment window), %" PRIu64
           " B (B); pooled send tables %" PRIu64 " B (A)\n",
           STATS(w, SIDE_A)->endpoint_bytes, a->tx.size, STATS(w, SIDE_B)->endpoint_bytes,
           STATS(w, SIDE_A)->send_table_bytes);
    check(STATS(w, SIDE_A)->endpoint_bytes == a->mem_bytes);
    check(STATS(w, SIDE_A)->endpoint_bytes <= PEER_BYTES_MAX);
    check(STATS(w, SIDE_B)->endpoint_bytes <= PEER_BYTES_MAX);
    check_ok(world_check_idle(w));
    /* releasing the endpoints returns every byte counted */
    world_del_procs(w, SIDE_A);
    world_del_procs(w, SIDE_B);
    check_int_eq(STATS(w, SIDE_A)->endpoint_bytes, 0);
    check_int_eq(STATS(w, SIDE_B)->endpoints, 0);
    world_fini(w);
    return 0;
}

/* Reassembly slots are pooled like the send tables: held while a fragment
 * is put together, back to the pool when none is; a receiver released in
 * the middle of one frees them with the fragment's buffer. */
USNIC_TEST(engine_reassembly_slots_pooled)
{
    world_t *w = world_new(100, 200);
    opal_btl_usnic_endpoint_t *b;
    size_t slots = USNIC_RX_FRAG_SLOTS * sizeof(usnic_rx_frag_t);

    check(NULL != w);
    b = w->ep[SIDE_B];
    check(NULL == b->rx_frags);
    check(NULL != world_send(w, SIDE_A, 100000, SEND_PREPARE));
    check(NULL != world_send(w, SIDE_A, 40000, SEND_PREPARE));
    for (int i = 0; i < 1000 && 0 == b->rx_frags_busy; ++i) {
        world_step(w);
    }
    check(NULL != b->rx_frags && b->rx_frags_busy > 0);
    check_int_eq(STATS(w, SIDE_B)->reassembly_bytes, slots);
    check_int_eq(world_run(w, 10000, false), WORLD_QUIET);
    check_all_delivered(w);
    check(NULL == b->rx_frags);
    check_int_eq(b->rx_frags_busy, 0);
    /* (one array, free in the pool) */
    check_int_eq(STATS(w, SIDE_B)->reassembly_bytes, slots);
    check_int_eq(w->mods[SIDE_B].rx_frags_cached, 1);
    check(STATS(w, SIDE_B)->endpoint_bytes <= PEER_BYTES_MAX);

    /* the next one takes it again; released half way, B frees it */
    w->paused = true;
    check(NULL != world_send(w, SIDE_A, 100000, SEND_PREPARE));
    check_int_eq(world_run(w, 100, false), WORLD_STALLED);
    w->per_step = 2;
    w->paused = false;
    for (int i = 0; i < 1000 && 0 == b->rx_frags_busy; ++i) {
        world_net_step(w);
        world_progress(w, SIDE_B);
    }
    check(NULL != b->rx_frags && 1 == b->rx_frags_busy);
    check_int_eq(w->mods[SIDE_B].rx_frags_cached, 0);
    world_del_procs(w, SIDE_B);
    check_int_eq(STATS(w, SIDE_B)->reassembly_bytes, 0);
    world_fini(w);
    return 0;
}

/* Extra peers of side A, as usnic_add_procs makes them, whose QP numbers
 * no fake QP has: what is sent to them is lost, until the test injects
 * their ACKs. */
#define XPEERS 40
typedef struct {
    opal_proc_t oproc[XPEERS];
    opal_btl_usnic_endpoint_t *ep[XPEERS];
} xpeers_t;

static opal_btl_usnic_endpoint_t *xpeer_add(world_t *w, opal_proc_t *op, uint32_t vpid)
{
    opal_btl_usnic_module_t *m = &w->mods[SIDE_A];
    opal_btl_usnic_proc_t *up = OBJ_NEW(opal_btl_usnic_proc_t);
    opal_btl_usnic_endpoint_t *ep = OBJ_NEW(opal_btl_usnic_endpoint_t);
    opal_btl_usnic_ah_t *ah;

    if (NULL == up || NULL == ep) {
        return NULL;
    }
    OBJ_CONSTRUCT(op, opal_proc_t);
    op->proc_name.jobid = 0x4321;
    op->proc_name.vpid = vpid;
    up->proc_opal = op;
    up->hostname = strdup("xpeer");
    up->hashed_name = opal_btl_usnic_hash_name(&op->proc_name);
    up->modex = malloc(sizeof(*up->modex));
    up->match = malloc(2 * sizeof(*up->match));
    up->endpoints = calloc(2, sizeof(*up->endpoints));
    if (NULL == up->hostname || NULL == up->modex || NULL == up->match ||
        NULL == up->endpoints) {
        return NULL;
    }
    up->modex[0] = w->mods[SIDE_B].local_addr;
    up->modex[0].qp_num[USNIC_PRIORITY_CHANNEL] = 0x6f000000u + 2 * vpid;
    up->modex[0].qp_num[USNIC_DATA_CHANNEL] = 0x6f000001u + 2 * vpid;
    up->modex[0].ipv4_addr = htonl(0x0a020000u + vpid);
    up->modex_count = 1;
    up->match[SIDE_A] = 0;
    up->match[SIDE_B] = -1;
    opal_list_append(&usnic_component.procs, &up->super);
    ep->proc = up;
    ep->remote_index = 0;
    if (OPAL_SUCCESS != opal_btl_usnic_endpoint_setup(ep, m, &up->modex[0])) {
        return NULL;
    }
    m->ops->ah_create(m->pd, m->port_num, m->gid_index, ep->remote.gid, &ah);
    opal_btl_usnic_endpoint_set_ah(ep, ah);
    up->endpoints[SIDE_A] = ep;
    opal_hash_table_set_value_uint64(&m->senders, up->hashed_name, ep);
    opal_list_append(&m->all_endpoints, &ep->all_li);
    return ep;
}

/* n small messages from A to an extra peer, queued (btl_alloc, btl_send). */
static bool xpeer_send(world_t *w, opal_btl_usnic_endpoint_t *ep, int n)
{
    mca_btl_base_module_t *btl = &w->mods[SIDE_A].super;

    world_run_as(w, SIDE_A);
    for (int i = 0; i < n; ++i) {
        mca_btl_base_descriptor_t *des =
            btl->btl_alloc(btl, ep, MCA_BTL_NO_ORDER, 64, MCA_BTL_DES_FLAGS_BTL_OWNERSHIP);
        if (NULL == des) {
            return false;
        }
        memset(des->des_segments[0].seg_addr.pval, 0, 64);
        if (0 > btl->btl_send(btl, ep, des, WORLD_TAG + 1)) {
            return false;
        }
    }
    return true;
}

/* The extra peer's cumulative ACK, from its own priority QP. */
static void xpeer_ack(world_t *w, opal_btl_usnic_endpoint_t *ep, uint16_t ack)
{
    usnic_btl_header_t h;
    fake_src_t src;

    memset(&h, 0, sizeof(h));
    h.sender = ep->proc->hashed_name;
    h.payload_type = USNIC_PAYLOAD_TYPE_ACK;
    h.ack_present = 1;
    h.ack_seq = ack;
    src.qpn = ep->remote.qp_num[USNIC_PRIORITY_CHANNEL];
    memcpy(src.gid, ep->remote.gid, sizeof(src.gid));
    fake_deliver(w->mods[SIDE_A].local_addr.qp_num[USNIC_PRIORITY_CHANNEL], &src, &h,
                 sizeof(h));
}

static void xpeers_del(world_t *w, xpeers_t *x)
{
    opal_proc_t *procs[XPEERS];

    for (int i = 0; i < XPEERS; ++i) {
        procs[i] = &x->oproc[i];
    }
    world_run_as(w, SIDE_A);
    w->mods[SIDE_A].super.btl_del_procs(&w->mods[SIDE_A].super, XPEERS, procs,
                                        (mca_btl_base_endpoint_t **) x->ep);
    for (int i = 0; i < XPEERS; ++i) {
        OBJ_DESTRUCT(&x->oproc[i]);
    }
}

/* Many endpoints share one pool: each holds a table of its own while it has
 * data in flight, sized to what is in flight, and gives it back when its
 * peer has ACKed everything; the pool keeps at most USNIC_TX_TABLE_KEEP
 * tables of a size.  Per endpoint, the memory stays within PEER_BYTES_MAX
 * with the largest window.  Then some endpoints are released with data in
 * flight: their tables come back too (one copy of each held table, no
 * leak: send_table_bytes ends as what the pool holds). */
USNIC_TEST(engine_send_tables_many_peers)
{
    world_t *w = world_new(100, 200);
    static xpeers_t x;
    opal_btl_usnic_module_t *m;
    uint64_t held = 0;

    check(NULL != w);
    m = &w->mods[SIDE_A];
    fake_dev.endpoint_alive = NULL;
    usnic_component.max_send_window = USNIC_WINDOW_SIZE;
    for (int i = 0; i < XPEERS; ++i) {
        x.ep[i] = xpeer_add(w, &x.oproc[i], (uint32_t) (10 + i));
        check(NULL != x.ep[i]);
    }
    for (int i = 0; i < XPEERS; ++i) {
        check(xpeer_send(w, x.ep[i], 1 + (i % 4) * 60));
    }
    for (int i = 0; i < 200; ++i) {
        world_step(w);
    }
    for (int i = 0; i < XPEERS; ++i) {
        opal_btl_usnic_endpoint_t *ep = x.ep[i];
        uint32_t inflight = usnic_tx_window_inflight(&ep->tx);

        check_int_eq(inflight, 1 + (i % 4) * 60);
        check(NULL != ep->sent_segs && ep->tx_mask + 1 >= inflight);
        check(ep->tx_mask + 1 == USNIC_TX_TABLE_MIN || ep->tx_mask + 1 < 2 * inflight);
        for (int j = 0; j < i; ++j) {
            check(ep->sent_segs != x.ep[j]->sent_segs);
        }
        held += (ep->tx_mask + 1) * sizeof(void *);
    }
    check_int_eq(m->stats.send_table_bytes, held + pool_free_bytes(w, SIDE_A));
    check(m->stats.endpoint_bytes <= (XPEERS + 1) * PEER_BYTES_MAX);
    printf("%d peers: endpoint_bytes %" PRIu64 " B per peer, tables held %" PRIu64
           " B, pooled free %" PRIu64 " B\n", XPEERS + 1,
           m->stats.endpoint_bytes / (XPEERS + 1), held, pool_free_bytes(w, SIDE_A));

    /* the first half ACK everything: their tables go back at the walk */
    for (int i = 0; i < XPEERS / 2; ++i) {
        xpeer_ack(w, x.ep[i], (uint16_t) (x.ep[i]->tx.next_seq_to_send - 1));
    }
    world_progress(w, SIDE_A);
    timer_walk(w, SIDE_A);
    held = 0;
    for (int i = 0; i < XPEERS; ++i) {
        check((i < XPEERS / 2) == (NULL == x.ep[i]->sent_segs));
        held += NULL != x.ep[i]->sent_segs ? (x.ep[i]->tx_mask + 1) * sizeof(void *) : 0;
    }
    for (int c = 0; c < USNIC_TX_TABLE_CLASSES; ++c) {
        check(m->tx_tables_cached[c] <= 16);
    }
    check_int_eq(m->stats.send_table_bytes, held + pool_free_bytes(w, SIDE_A));
    /* the other half goes away with data in flight */
    xpeers_del(w, &x);
    check_int_eq(m->stats.send_table_bytes, pool_free_bytes(w, SIDE_A));
    check_int_eq(m->stats.endpoints, 1);
    check(m->stats.endpoint_bytes <= PEER_BYTES_MAX);
    world_fini(w);
    return 0;
}

/* A network that drops every datagram whose sequence number is in a set
 * (once each), or with hold, sends it to the end of the wire (late). */
typedef struct {
    uint16_t seqs[8];
    int n;
    int dropped;
    bool hold;
} drop_seqs_t;

static net_action_t drop_seqs(world_t *w, fake_dgram_t *d, void *arg)
{
    drop_seqs_t *f = arg;
    const usnic_btl_header_t *h = dgram_hdr(d);

    (void) w;
    if (USNIC_PAYLOAD_TYPE_ACK == h->payload_type || (h->flags & USNIC_HDR_RESEND)) {
        return NET_DELIVER;
    }
    for (int i = 0; i < f->n; ++i) {
        if (h->pkt_seq == f->seqs[i]) {
            f->seqs[i] = f->seqs[--f->n];
            ++f->dropped;
            return f->hold ? NET_HOLD : NET_DROP;
        }
    }
    return NET_DELIVER;
}

/* Sequence numbers wrap while the table grows, and lost segments are
 * resent from it after it grew (moved) and after the window shrank below
 * what is in flight: everything arrives once, in order. */
USNIC_TEST(engine_send_table_wrap_grow_shrink)
{
    world_t *w = world_new((uint16_t) (65536 - 300), 0);
    opal_btl_usnic_endpoint_t *ep;
    drop_seqs_t f = {{(uint16_t) (65536 - 290), 5, 70, 400, 700}, 5, 0, false};

    check(NULL != w);
    ep = w->ep[SIDE_A];
    usnic_component.max_send_window = USNIC_WINDOW_SIZE;
    opal_btl_usnic_endpoint_size_window(ep, 1);
    check((int) ep->tx.size >= 900);
    ep->tx.bdp = 1024;
    usnic_tx_window_limit(&ep->tx);
    w->filter = drop_seqs;
    w->filter_arg = &f;
    w->paused = true;
    for (int i = 0; i < 3000; ++i) {
        check(NULL != world_send(w, SIDE_A, 64 + (size_t) i % 500, (send_method_t) (i % 3)));
    }
    check_int_eq(world_run(w, 10000, false), WORLD_STALLED);
    check_int_eq(usnic_tx_window_inflight(&ep->tx), ep->tx.limit);
    check(ep->tx_mask + 1 >= ep->tx.limit);
    /* (the window reaches across the wrap) */
    check(USNIC_SEQ_DIFF16(ep->tx.next_seq_to_send, 0) > 0);
    /* the peer now shares its buffers with 8: the window shrinks below
     * what is in flight, which stays in the table until ACKed */
    opal_btl_usnic_endpoint_size_window(ep, 8);
    check(ep->tx.limit < usnic_tx_window_inflight(&ep->tx));
    w->paused = false;
    check_int_eq(world_run(w, 200000, true), WORLD_QUIET);
    check_int_eq(f.dropped, 5);
    check_all_delivered(w);
    check_ok(world_verify_counters(w));
    check(STATS(w, SIDE_A)->num_resends >= 5);
    check_int_eq(STATS(w, SIDE_B)->num_frag_recvs, 3000);
    timer_walk(w, SIDE_A);
    check(NULL == ep->sent_segs);
    check_ok(world_check_idle(w));
    world_fini(w);
    return 0;
}

/* A burst: seven segments of the data channel dropped together (as a full
 * queue drops them, or a run sent as one UDP_SEGMENT message).  The first
 * arrival after them names the last; the receiver reports the run, and the
 * sender resends all seven at once: no timer, each once. */
USNIC_TEST(engine_burst_loss_resent_without_timer)
{
    world_t *w = world_new(300, 400);
    drop_seqs_t f = {{303, 304, 305, 306, 307, 308, 309}, 7, 0, false};

    check(NULL != w);
    w->filter = drop_seqs;
    w->filter_arg = &f;
    for (int i = 0; i < 20; ++i) {
        check(NULL != world_send(w, SIDE_A, 1000, SEND_PREPARE));
    }
    check_int_eq(world_run(w, 10000, false), WORLD_QUIET);
    check_int_eq(f.dropped, 7);
    check_all_delivered(w);
    check_int_eq(w->timeout_rounds, 0);
    check_int_eq(STATS(w, SIDE_A)->num_timeout_retrans, 0);
    check_int_eq(STATS(w, SIDE_A)->num_fast_retrans, 7);
    check_int_eq(STATS(w, SIDE_A)->num_resends, 7);
    check_int_eq(STATS(w, SIDE_B)->num_dup_recvs, 0);
    check_ok(world_verify_counters(w));
    world_fini(w);
    return 0;
}

/* A path that reorders: a run of segments arrives late, after later ones
 * on its channel.  The first time, the receiver reports it lost and the
 * sender resends it at once; the peer then gets it twice, which proves
 * the path reorders.  From then on a reported run waits out the
 * reordering window (steps quarters of the smoothed round trip): a late
 * run is not resent, a lost one is, once the window is over, without the
 * timer. */
USNIC_TEST(engine_reordering_path_learns_to_wait)
{
    world_t *w = world_new(300, 400);
    drop_seqs_t late1 = {{303, 304, 305, 306}, 4, 0, true};
    drop_seqs_t late2 = {{333, 334, 335, 336}, 4, 0, true};
    drop_seqs_t lost = {{363, 364, 365, 366}, 4, 0, false};
    opal_btl_usnic_endpoint_t *ep;
    opal_btl_usnic_stats_t *st;
    uint64_t fast, dups;
    double t0;
    world_result_t r;

    check(NULL != w);
    ep = w->ep[SIDE_A];
    st = STATS(w, SIDE_A);
    /* (one datagram per step: the receiver's 16th, 319, finds the run
     * still missing and reports it) */
    w->per_step = 1;
    w->filter = drop_seqs;
    w->filter_arg = &late1;
    for (int i = 0; i < 30; ++i) {
        check(NULL != world_send(w, SIDE_A, 1000, SEND_PREPARE));
    }
    check_int_eq(world_run(w, 10000, false), WORLD_QUIET);
    check_int_eq(late1.dropped, 4);
    check(st->num_fast_retrans > 0);
    check(st->num_spurious_fast > 0);
    check(ep->reo.steps > 0);
    check_int_eq(st->num_reorder_waits, 0);

    /* a window far longer than the world takes to deliver the late run */
    ep->rto.srtt_us = 4e5;
    fast = st->num_fast_retrans;
    dups = STATS(w, SIDE_B)->num_dup_recvs;
    w->filter_arg = &late2;
    for (int i = 0; i < 30; ++i) {
        check(NULL != world_send(w, SIDE_A, 1000, SEND_PREPARE));
    }
    check_int_eq(world_run(w, 10000, false), WORLD_QUIET);
    check_int_eq(late2.dropped, 4);
    check_int_eq(st->num_fast_retrans, fast);
    check_int_eq(STATS(w, SIDE_B)->num_dup_recvs, dups);
    check_int_eq(st->num_reorder_waits, 1);

    /* a run really lost: resent when a 1 ms window is over */
    ep->reo.steps = 1;
    ep->rto.srtt_us = 4000;
    w->filter_arg = &lost;
    for (int i = 0; i < 30; ++i) {
        check(NULL != world_send(w, SIDE_A, 1000, SEND_PREPARE));
    }
    t0 = opal_btl_usnic_now_us();
    do {
        r = world_run(w, 1000, false);
    } while (WORLD_STALLED == r && opal_btl_usnic_now_us() - t0 < 5e6);
    check_int_eq(r, WORLD_QUIET);
    check_int_eq(lost.dropped, 4);
    check_all_delivered(w);
    check_int_eq(st->num_reorder_waits, 2);
    check_int_eq(st->num_fast_retrans, fast + 4);
    check_int_eq(w->timeout_rounds, 0);
    check_int_eq(st->num_timeout_retrans, 0);
    check_int_eq(STATS(w, SIDE_B)->num_dup_recvs, dups);
    check_int_eq(ep->reo.persist, USNIC_REO_PERSIST - 1);
    check_ok(world_verify_counters(w));
    world_fini(w);
    return 0;
}

/* Take the first datagram on the wire carrying data segment seq (a resend
 * or not, as asked) off it, into *out. */
static bool take_seg(uint16_t seq, bool resend, fake_dgram_t *out)
{
    for (size_t i = 0; i < fake_wire_count(); ++i) {
        const usnic_btl_header_t *h = dgram_hdr(fake_wire_peek(i));

        if (USNIC_PAYLOAD_TYPE_ACK != h->payload_type && h->pkt_seq == seq &&
            resend == !!(h->flags & USNIC_HDR_RESEND)) {
            return fake_wire_take(i, out);
        }
    }
    return false;
}

/* Step until side A has queued n fast resends in all, ending with the
 * pass that queued them: it posted them too, so they are on the wire. */
static void step_until_fast_resends(world_t *w, uint64_t n)
{
    for (int i = 0; i < 10000 && STATS(w, SIDE_A)->num_fast_retrans < n; ++i) {
        world_net_step(w);
        world_progress(w, SIDE_B);
        world_progress(w, SIDE_A);
    }
}

/* The end of a run with one segment received twice that proves no
 * reordering: all is delivered once, and A's window learnt nothing. */
static int finish_without_proof(world_t *w)
{
    check_int_eq(world_run(w, 10000, false), WORLD_QUIET);
    check_all_delivered(w);
    check_int_eq(STATS(w, SIDE_B)->num_dup_recvs + STATS(w, SIDE_B)->num_oow_low_recvs, 1);
    check_int_eq(STATS(w, SIDE_A)->num_spurious_fast, 0);
    check_int_eq(w->ep[SIDE_A]->reo.steps, 0);
    check_ok(world_verify_counters(w));
    return 0;
}

/* A segment the sender itself sent three times (first, for a reported
 * hole, then by the timer) and the receiver got twice proves nothing about
 * the path: no reordering window follows.  The hole's resends are held off
 * the wire until the timer's resend has filled the hole's edge. */
USNIC_TEST(engine_double_resend_proves_no_reordering)
{
    world_t *w = world_new(300, 400);
    drop_seqs_t lost = {{303, 304, 305, 306}, 4, 0, false};
    fake_dgram_t held[4];

    check(NULL != w);
    w->filter = drop_seqs;
    w->filter_arg = &lost;
    for (int i = 0; i < 30; ++i) {
        check(NULL != world_send(w, SIDE_A, 1000, SEND_PREPARE));
    }
    step_until_fast_resends(w, 4);
    check_int_eq(STATS(w, SIDE_A)->num_fast_retrans, 4);
    for (int i = 0; i < 4; ++i) {
        check(take_seg((uint16_t) (303 + i), true, &held[i]));
    }
    check_int_eq(world_run(w, 10000, false), WORLD_STALLED);
    check_int_eq(world_fire_timeouts(w, SIDE_A), 1);
    check_int_eq(world_run(w, 10000, false), WORLD_STALLED);
    /* the hole's resends arrive last, 303's after the others */
    for (int i = 1; i <= 4; ++i) {
        fake_wire_push(&held[i % 4]);
    }
    if (0 != finish_without_proof(w)) {
        return 1;
    }
    world_fini(w);
    return 0;
}

/* After a timeout, a partial ACK makes the sender guess the next segment
 * lost and resend it; when the original was only late and arrives first,
 * the receiver reports the guess a duplicate.  That proves a spurious
 * guess, not a path that reorders: no reordering window follows. */
USNIC_TEST(engine_recovery_guess_proves_no_reordering)
{
    world_t *w = world_new(300, 400);
    drop_seqs_t lost = {{328}, 1, 0, false};
    fake_dgram_t late, guess;

    check(NULL != w);
    w->filter = drop_seqs;
    w->filter_arg = &lost;
    w->paused = true;
    for (int i = 0; i < 30; ++i) {
        check(NULL != world_send(w, SIDE_A, 1000, SEND_PREPARE));
    }
    world_progress(w, SIDE_A);
    check(take_seg(329, false, &late));
    w->paused = false;
    check_int_eq(world_run(w, 10000, false), WORLD_STALLED);
    /* (a probe whose answer says 328 missing, then the one that resends) */
    check_int_eq(world_fire_timeouts(w, SIDE_A), 1);
    check_int_eq(world_run(w, 10000, false), WORLD_STALLED);
    check_int_eq(world_fire_timeouts(w, SIDE_A), 1);
    step_until_fast_resends(w, 1);
    check_int_eq(STATS(w, SIDE_A)->num_fast_retrans, 1);
    check(take_seg(329, true, &guess));
    fake_wire_push(&late);
    fake_wire_push(&guess);
    if (0 != finish_without_proof(w)) {
        return 1;
    }
    world_fini(w);
    return 0;
}

/* Datagrams small enough to be sent inline ask for a completion only every
 * signal_every sends; those completions give back all the send-queue slots,
 * and every frag still returns.  Larger ones always ask. */
USNIC_TEST(engine_silent_inline_sends)
{
    world_t *w = world_new(40, 50);
    opal_btl_usnic_channel_t *prio;
    uint64_t posts0, wcs0;

    check(NULL != w);
    prio = &w->mods[SIDE_A].channels[USNIC_PRIORITY_CHANNEL];
    check(prio->signal_every > 1);
    posts0 = fake_dev.posts;
    wcs0 = fake_dev.send_wcs;
    for (int i = 0; i < 200; ++i) {
        check(NULL != world_send(w, SIDE_A, 8, SEND_SENDI));
    }
    check_int_eq(world_run(w, 5000, true), WORLD_QUIET);
    check_all_delivered(w);
    check(fake_dev.send_wcs - wcs0 < (fake_dev.posts - posts0) / 4);
    check_ok(world_check_idle(w));

    wcs0 = fake_dev.send_wcs;
    posts0 = fake_dev.posts;
    check(NULL != world_send(w, SIDE_A, 2000, SEND_PREPARE));
    check_int_eq(world_run(w, 5000, true), WORLD_QUIET);
    check(fake_dev.send_wcs - wcs0 >= 1);
    check_all_delivered(w);
    world_fini(w);
    return 0;
}

/* A sendi's inline datagram goes back to its free list when its ACK comes,
 * unless the device still holds it (a send that asked for a completion):
 * then the completion returns it, once.  The ACKs come in while A's send
 * completions are held back: exactly the buffer of the signalled send stays
 * out until they are released. */
USNIC_TEST(engine_sendi_inline_waits_for_its_completion)
{
    world_t *w = world_new(60, 61);
    opal_btl_usnic_channel_t *prio;
    opal_free_list_t *fl;
    size_t free0;

    check(NULL != w);
    prio = &w->mods[SIDE_A].channels[USNIC_PRIORITY_CHANNEL];
    fl = &w->mods[SIDE_A].inline_segs;
    free0 = world_free_count(fl);
    fake_dev.hold_send_completions = true;
    for (int i = 0; i < prio->signal_every; ++i) {
        check(NULL != world_send(w, SIDE_A, 8, SEND_SENDI));
    }
    check_int_eq(fake_held_count(), 1);
    /* (not quiet: a send-queue slot is out with the held completion) */
    check_int_eq(world_run(w, 5000, false), WORLD_STALLED);
    check_ok(world_verify(w, SIDE_B, false));
    check_int_eq(usnic_tx_window_inflight(&w->ep[SIDE_A]->tx), 0);
    check_int_eq(world_free_count(fl), free0 - 1);
    fake_dev.hold_send_completions = false;
    fake_release_send_completions(USNIC_CQE_OK);
    check_int_eq(world_run(w, 1000, false), WORLD_QUIET);
    check_int_eq(world_free_count(fl), free0);
    check_all_delivered(w);
    world_fini(w);
    return 0;
}

/* A sendi on the open fast path takes no frag: one inline buffer carries
 * its datagram.  Past the peer's priority window (the peer delivers
 * nothing meanwhile), sendi queues a small frag behind them, and the
 * messages still arrive in sending order. */
USNIC_TEST(engine_sendi_without_frag)
{
    world_t *w = world_new(62, 63);
    opal_btl_usnic_module_t *m;
    const uint32_t window = 4;

    check(NULL != w);
    m = &w->mods[SIDE_A];
    /* (a small window: the send queue's slots do not run out first) */
    check(w->ep[SIDE_A]->prio_window > window);
    w->ep[SIDE_A]->prio_window = window;
    w->paused = true;
    check(NULL != world_send(w, SIDE_A, 8, SEND_SENDI));
    check_int_eq(in_use(&m->small_send_frags), 0);
    check_int_eq(in_use(&m->inline_segs), 1);
    for (uint32_t i = 1; i < window + 3; ++i) {
        check(NULL != world_send(w, SIDE_A, 8 + i % 40, SEND_SENDI));
    }
    check_int_eq(in_use(&m->inline_segs), window);
    check_int_eq(in_use(&m->small_send_frags), 3);
    w->paused = false;
    check_int_eq(world_run(w, 5000, true), WORLD_QUIET);
    check_ok(world_verify(w, SIDE_B, true));
    check_all_delivered(w);
    world_fini(w);
    return 0;
}

/* A send posted without asking for a completion gets none: a device whose
 * queue pairs complete every send (sq_sig_all, fixed in de9d68f) hands the
 * component completions without a segment, which it can only count as
 * send errors, and a completion for every datagram.  Small messages both
 * ways over both channels (sendi, ACKs, the copy path): the device
 * completed only the sends that asked, and nothing was counted as an
 * error; world_check_idle then finds every send-queue slot back. */
USNIC_TEST(engine_silent_sends_stay_silent)
{
    world_t *w = world_new(7, 9);
    uint64_t posts0, wcs0;

    check(NULL != w);
    posts0 = fake_dev.posts;
    wcs0 = fake_dev.send_wcs;
    for (int i = 0; i < 300; ++i) {
        check(NULL != world_send(w, i % 2 ? SIDE_A : SIDE_B, 8 + (size_t) (i % 80),
                                 i % 3 ? SEND_SENDI : SEND_COPY_SENDI));
    }
    check_int_eq(world_run(w, 10000, true), WORLD_QUIET);
    check_ok(world_verify(w, SIDE_A, false));
    check_ok(world_verify(w, SIDE_B, false));
    check_int_eq(STATS(w, SIDE_A)->num_send_errors, 0);
    check_int_eq(STATS(w, SIDE_B)->num_send_errors, 0);
    check(fake_dev.posts - posts0 >= 300);
    check(fake_dev.send_wcs - wcs0 <= (fake_dev.posts - posts0) / 8);
    check_ok(world_check_idle(w));
    world_fini(w);
    return 0;
}

/* The receive path remembers the last sender's endpoint: once that peer is
 * released, its datagrams are from an unknown sender again. */
USNIC_TEST(engine_sender_forgotten_after_del_procs)
{
    world_t *w = world_new(10, 20);

    check(NULL != w);
    check(NULL != world_send(w, SIDE_A, 8, SEND_SENDI));
    check_int_eq(world_run(w, 1000, false), WORLD_QUIET);
    check_all_delivered(w);
    check(w->mods[SIDE_B].last_sender == w->ep[SIDE_B]);
    check_int_eq(world_del_procs(w, SIDE_B), OPAL_SUCCESS);
    check(NULL == w->mods[SIDE_B].last_sender);
    check(NULL != world_send(w, SIDE_A, 8, SEND_SENDI));
    world_net_step(w);
    world_progress(w, SIDE_B);
    check_int_eq(STATS(w, SIDE_B)->num_unk_recvs, 1);
    world_fini(w);
    return 0;
}

/* A one-way stream is acknowledged every 16 datagrams or more (up to a poll
 * batch of 32 come in before ACKs go out), and the last ones after the pause. */
USNIC_TEST(engine_ack_every_16)
{
    world_t *w = world_new(5, 6);

    check(NULL != w);
    for (int i = 0; i < 320; ++i) {
        check(NULL != world_send(w, SIDE_A, 1000, SEND_PREPARE));
    }
    check_int_eq(world_run(w, 20000, false), WORLD_QUIET);
    check_all_delivered(w);
    printf("standalone ACKs for 320 datagrams: %" PRIu64 "\n", STATS(w, SIDE_B)->num_ack_sends);
    check(STATS(w, SIDE_B)->num_ack_sends >= 320 / 32);
    check(STATS(w, SIDE_B)->num_ack_sends <= 320 / 16 + 4);
    check_int_eq(STATS(w, SIDE_A)->num_resends, 0);
    check_ok(world_check_idle(w));
    world_fini(w);
    return 0;
}

/* On B's refill_after-th message of its pass, its reply (which carries an
 * ACK) goes out, A takes the ACK and sends on, and all of it arrives
 * before B's pass goes on (B off its CPU there). */
static int refill_after;
static void reply_and_refill(world_t *w, int side, const rx_msg_t *m)
{
    uint64_t recvs = STATS(w, SIDE_A)->num_total_recvs;

    (void) m;
    if (SIDE_B != side || 0 == refill_after || 0 != --refill_after) {
        return;
    }
    world_send(w, SIDE_B, 8, SEND_SENDI);
    while (fake_wire_count() > 0) {
        world_net_step(w);
    }
    /* (A's own send completions may come first in its CQ) */
    for (int i = 0; i < 100 && STATS(w, SIDE_A)->num_total_recvs == recvs; ++i) {
        world_progress(w, SIDE_A);
    }
    for (int i = 0; i < 10; ++i) {
        world_progress(w, SIDE_A);
        while (fake_wire_count() > 0) {
            world_net_step(w);
        }
    }
    world_run_as(w, SIDE_B);
}

/* A fills its window toward B, every prio_every-th message a small one on
 * the fast path (0: none), after B held back repost_batch - 1 buffers; B's
 * reply after `at` messages of its next pass lets A refill at once: no
 * datagram may find B's queue without a buffer. */
static int refill_run(uint16_t isn, int prio_every, int at)
{
    world_t *w = world_new(isn, isn + 1);
    opal_btl_usnic_channel_t *data;
    uint32_t window;

    check(NULL != w);
    data = &w->mods[SIDE_B].channels[USNIC_DATA_CHANNEL];
    check_int_eq(data->repost_batch, USNIC_POLL_BATCH);
    for (int i = 0; i < data->repost_batch - 1; ++i) {
        check(NULL != world_send(w, SIDE_A, 1000, SEND_PREPARE));
    }
    check_int_eq(world_run(w, 20000, false), WORLD_QUIET);
    check_int_eq(data->repost_count, data->repost_batch - 1);
    /* (all B's buffers allow: as a path that took it) */
    w->ep[SIDE_A]->tx.bdp = USNIC_WINDOW_SIZE;
    usnic_tx_window_limit(&w->ep[SIDE_A]->tx);
    window = w->ep[SIDE_A]->tx.size;
    for (uint32_t i = 0; i < window + 256; ++i) {
        bool fast = 0 != prio_every && 0 == i % (uint32_t) prio_every;
        check(NULL != world_send(w, SIDE_A, fast ? 8 : 1000, fast ? SEND_SENDI : SEND_PREPARE));
    }
    for (int i = 0; i < 1000; ++i) {
        world_progress(w, SIDE_A);
        while (fake_wire_count() > 0) {
            world_net_step(w);
        }
        if (usnic_tx_window_inflight(&w->ep[SIDE_A]->tx) >= window) {
            break;
        }
    }
    check_int_eq(usnic_tx_window_inflight(&w->ep[SIDE_A]->tx), window);
    check_int_eq(w->net_overflows, 0);
    w->on_recv = reply_and_refill;
    refill_after = at;
    world_progress(w, SIDE_B);
    check_int_eq(refill_after, 0);
    check_int_eq(w->net_overflows, 0);
    w->on_recv = NULL;
    check_int_eq(world_run(w, 50000, false), WORLD_QUIET);
    check_all_delivered(w);
    check_int_eq(STATS(w, SIDE_A)->num_resends, 0);
    check_ok(world_check_idle(w));
    world_fini(w);
    return 0;
}

/* A receiver's reply from the PML's callback acknowledges datagrams whose
 * buffers are not posted again yet: those of the poll batch being handled,
 * and fewer than a repost batch held back before it.  The window a sender
 * may fill leaves room for both, so the sender's refill finds a buffer for
 * every datagram (the fake device, like UD, drops what finds none). */
USNIC_TEST(engine_reply_ack_never_outruns_reposts)
{
    return refill_run(86, 0, USNIC_POLL_BATCH);
}

/* The same in a pass that drains batch after batch (each holds a priority
 * receive): every batch's buffers go back before the next batch's reply. */
USNIC_TEST(engine_drained_batches_reposted_each)
{
    return refill_run(88, 16, 4 * USNIC_POLL_BATCH);
}

/* 300 small sends to a peer that does not poll: as many as its priority
 * queue has buffers for take the fast path, the rest wait in the send
 * window for the data channel, and nothing arrives at an empty receive
 * queue (which the fake device, like hardware, drops). */
USNIC_TEST(engine_priority_queue_never_overflows)
{
    world_t *w = world_new(40, 41);
    opal_btl_usnic_endpoint_t *a;

    check(NULL != w);
    a = w->ep[SIDE_A];
    check(a->prio_window > 0 && a->prio_window < 300);
    for (int i = 0; i < 300; ++i) {
        check(NULL != world_send(w, SIDE_A, 64, SEND_SENDI));
        world_progress(w, SIDE_A);
        world_net_step(w);
    }
    for (int i = 0; i < 200; ++i) {                 /* B still does not poll */
        world_progress(w, SIDE_A);
        world_net_step(w);
    }
    check_int_eq(w->net_overflows, 0);
    check_int_eq(STATS(w, SIDE_A)->num_fast_sends, a->prio_window);
    check_int_eq(world_run(w, 20000, false), WORLD_QUIET);
    check_all_delivered(w);
    check_int_eq(w->net_overflows, 0);
    check_int_eq(STATS(w, SIDE_A)->num_resends, 0);
    check_ok(world_check_idle(w));
    world_fini(w);
    return 0;
}

/* A busy sender and a receiver that polls faster than datagrams arrive
 * (here: eight passes per datagram), as a receiver spinning in MPI_Wait
 * does.  The receiver's delayed ACK waits for the hold in time as well as
 * for its passes, so it acknowledges a stream at the cadence (every
 * USNIC_ACK_EVERY datagrams), not nearly every datagram; and the sender
 * posts at most USNIC_SENDS_PER_PASS segments per pass before it polls
 * again.  Without either, each of the 600 datagrams draws an ACK, all
 * toward the sender's priority receive buffers (511: where the fake
 * device, like hardware, drops what finds none, 127 were once overrun). */
USNIC_TEST(engine_busy_sender_acks_fit)
{
    world_t *w = world_new(70, 71);
    uint64_t most_posts = 0;

    check(NULL != w);
    check_int_eq(w->mods[SIDE_A].channels[USNIC_PRIORITY_CHANNEL].rd_num, 511);
    check(w->ep[SIDE_A]->tx.size > 600);
    /* 20 ms, not the default 625 us: a host busy for a moment must not
     * make this test fail (any hold that outlasts B's passes would do) */
    usnic_component.ack_hold_us = 20000;
    for (int i = 0; i < 600; ++i) {
        check(NULL != world_send(w, SIDE_A, 1000, SEND_PREPARE));
    }
    w->per_step = 1;
    for (int pass = 0; pass < 1000000 && !world_quiescent(w); ++pass) {
        uint64_t sent = STATS(w, SIDE_A)->num_total_sends;

        /* each pass a progress call, as opal_btl_usnic_component_progress */
        ++usnic_component.progress_ticks;
        world_progress(w, SIDE_A);
        if (STATS(w, SIDE_A)->num_total_sends - sent > most_posts) {
            most_posts = STATS(w, SIDE_A)->num_total_sends - sent;
        }
        /* everything on the wire arrives before A's next pass */
        do {
            world_net_step(w);
            for (int k = 0; k < 8; ++k) {
                ++usnic_component.progress_ticks;
                world_progress(w, SIDE_B);
            }
        } while (fake_wire_count() > 0);
    }
    printf("most posts in one sender pass: %" PRIu64 ", standalone ACKs for 600 datagrams: %"
           PRIu64 "\n", most_posts, STATS(w, SIDE_B)->num_ack_sends);
    check(world_quiescent(w));
    check_int_eq(w->net_overflows, 0);
    check(most_posts <= USNIC_SENDS_PER_PASS);
    check(STATS(w, SIDE_B)->num_ack_sends <= 600 / USNIC_ACK_EVERY + 4);
    check_int_eq(STATS(w, SIDE_B)->num_ack_sends, STATS(w, SIDE_A)->num_ack_recvs);
    check_int_eq(STATS(w, SIDE_A)->num_resends, 0);
    check_all_delivered(w);
    world_fini(w);
    return 0;
}

/* Sixty fast-path messages wait in the priority CQ: one pass takes them
 * all, not one poll's batch (ACKs among them would otherwise wait for later
 * passes while more arrive, until the small receive queue runs dry). */
USNIC_TEST(engine_priority_cq_drained_each_pass)
{
    world_t *w = world_new(72, 73);

    check(NULL != w);
    check(w->ep[SIDE_B]->prio_window >= 60);
    for (int i = 0; i < 60; ++i) {
        check(NULL != world_send(w, SIDE_B, 64, SEND_SENDI));
    }
    check_int_eq(STATS(w, SIDE_B)->num_fast_sends, 60);
    while (fake_wire_count() > 0) {
        world_net_step(w);
    }
    check_int_eq(w->nrx, 0);
    world_progress(w, SIDE_A);
    check_int_eq(w->nrx, 60);
    check_int_eq(world_run(w, 1000, false), WORLD_QUIET);
    check_all_delivered(w);
    world_fini(w);
    return 0;
}

/* Both channels complete on one CQ: a pass polls the device once, with a
 * fast-path (priority) and a data-channel datagram waiting, and idle. */
USNIC_TEST(engine_one_poll_per_pass)
{
    world_t *w = world_new(78, 79);
    uint64_t calls;

    check(NULL != w);
    check(NULL != world_send(w, SIDE_B, 8, SEND_SENDI));
    check(NULL != world_send(w, SIDE_B, 1000, SEND_PREPARE));
    world_progress(w, SIDE_B);
    check_int_eq(STATS(w, SIDE_B)->num_fast_sends, 1);
    check_int_eq(STATS(w, SIDE_B)->num_frag_sends, 2);
    while (fake_wire_count() > 0) {
        world_net_step(w);
    }
    calls = fake_dev.poll_calls;
    world_progress(w, SIDE_A);
    check_int_eq(fake_dev.poll_calls - calls, 1);
    check_int_eq(w->nrx, 2);
    calls = fake_dev.poll_calls;
    world_progress(w, SIDE_A);
    check_int_eq(fake_dev.poll_calls - calls, 1);
    check_int_eq(world_run(w, 1000, false), WORLD_QUIET);
    check_all_delivered(w);
    world_fini(w);
    return 0;
}

/* A receiver's own priority send completions do not make it take a whole
 * backlog of data in one pass: only priority receives (ACKs, which must
 * not find their small queue empty) do; the ACKs for the data leave after
 * each batch. */
USNIC_TEST(engine_data_backlog_one_batch_per_pass)
{
    world_t *w = world_new(80, 81);
    opal_btl_usnic_channel_t *prio;

    check(NULL != w);
    prio = &w->mods[SIDE_A].channels[USNIC_PRIORITY_CHANNEL];
    /* A's fast-path sends, one of them signalled: its completion first in A's CQ */
    fake_dev.hold_send_completions = true;
    for (int i = 0; i < prio->signal_every; ++i) {
        check(NULL != world_send(w, SIDE_A, 8, SEND_SENDI));
    }
    check(fake_held_count() >= 1);
    fake_dev.hold_send_completions = false;
    fake_release_send_completions(USNIC_CQE_OK);
    /* then more than a batch of B's data */
    for (int i = 0; i < USNIC_POLL_BATCH + 8; ++i) {
        check(NULL != world_send(w, SIDE_B, 1000, SEND_PREPARE));
    }
    world_progress(w, SIDE_B);
    while (fake_wire_count() > 0) {
        world_net_step(w);
    }
    check_int_eq(STATS(w, SIDE_A)->num_total_recvs, 0);
    world_progress(w, SIDE_A);
    check(STATS(w, SIDE_A)->num_total_recvs < USNIC_POLL_BATCH);
    check_int_eq(world_run(w, 1000, false), WORLD_QUIET);
    check_all_delivered(w);
    world_fini(w);
    return 0;
}

/* The ACK that stops A's retransmit timer is in A's CQ behind more
 * than a poll's batch of B's datagrams when the deadline passes (A was
 * away): A's pass reads one batch, and the timer, instead of expiring on
 * what A has not read yet, waits for the next pass, which finds the ACK. */
USNIC_TEST(engine_timer_waits_for_queued_ack)
{
    world_t *w = world_new(74, 75);
    opal_btl_usnic_endpoint_t *a;

    check(NULL != w);
    a = w->ep[SIDE_A];
    w->real_timers = true;
    /* B's 33 datagrams first, then A's one */
    for (int i = 0; i < USNIC_POLL_BATCH + 1; ++i) {
        check(NULL != world_send(w, SIDE_B, 1000, SEND_PREPARE));
    }
    world_progress(w, SIDE_B);
    check(NULL != world_send(w, SIDE_A, 1000, SEND_PREPARE));
    world_progress(w, SIDE_A);
    check(a->timer_running);
    while (fake_wire_count() > 0) {
        world_net_step(w);
    }
    /* B takes A's datagram and acknowledges it on one more of its own */
    world_progress(w, SIDE_B);
    check(NULL != world_send(w, SIDE_B, 1000, SEND_PREPARE));
    world_progress(w, SIDE_B);
    while (fake_wire_count() > 0) {
        world_net_step(w);
    }
    check_int_eq(STATS(w, SIDE_A)->num_total_recvs, 0);
    /* the deadline passed while A was away (the timer's start seen) */
    deadline_passed(a);
    world_progress(w, SIDE_A);
    check_int_eq(STATS(w, SIDE_A)->num_total_recvs, USNIC_POLL_BATCH);
    world_progress(w, SIDE_A);
    check(!a->timer_running);
    check_int_eq(world_run(w, 1000, false), WORLD_QUIET);
    check_int_eq(STATS(w, SIDE_A)->num_timeout_retrans, 0);
    check_int_eq(STATS(w, SIDE_A)->num_resends, 0);
    check_all_delivered(w);
    world_fini(w);
    return 0;
}

/* A comes back from an absence (descheduled, computing) to find its
 * timer's deadline passed: it saw nothing of the wait, so the timer gets
 * half a timeout of A's attention before it may expire; then it does. */
USNIC_TEST(engine_timer_after_absence)
{
    world_t *w = world_new(76, 77);
    opal_btl_usnic_endpoint_t *a;
    double now;

    check(NULL != w);
    a = w->ep[SIDE_A];
    w->real_timers = true;
    w->paused = true;                           /* nothing arrives: B cannot answer */
    check(NULL != world_send(w, SIDE_A, 1000, SEND_PREPARE));
    world_progress(w, SIDE_A);
    check(a->timer_running);
    now = opal_btl_usnic_now_us();
    w->mods[SIDE_A].last_timer_check_us = now - 100.0 * usnic_component.retrans_timeout;
    deadline_passed(a);
    world_progress(w, SIDE_A);
    check_int_eq(STATS(w, SIDE_A)->num_timer_probes, 0);
    check(a->rto_deadline_us >= now + a->rto.rto_us / 2.0);
    /* A is away again before the pushed-back deadline: that deadline got
     * its grace already, so the timer expires now (a process descheduled
     * more often than every half timeout must still expire) */
    deadline_passed(a);
    w->mods[SIDE_A].last_timer_check_us = opal_btl_usnic_now_us() - 100.0 * usnic_component.retrans_timeout;
    world_progress(w, SIDE_A);
    check_int_eq(STATS(w, SIDE_A)->num_timer_probes, 1);
    w->paused = false;
    check_int_eq(world_run(w, 1000, false), WORLD_QUIET);
    check_all_delivered(w);
    world_fini(w);
    return 0;
}

/* B is away (descheduled) while A's timer expires; B lost nothing before,
 * so A probes instead of resending.  B comes back, reads the three
 * segments and then the probe, and its answer acknowledges them all:
 * nothing is resent, the window is not cut, the timeout not backed off.
 * B had not acknowledged the probed segment yet, so its answer says it was
 * late, and A's timeout floor goes up for a while.  (With
 * btl_usnic_timer_probe 0, or before it, A resends the oldest: a copy of
 * what B holds.) */
USNIC_TEST(engine_late_receiver_probed_not_resent)
{
    world_t *w = world_new(40, 41);
    opal_btl_usnic_endpoint_t *a;

    check(NULL != w);
    a = w->ep[SIDE_A];
    w->paused = true;
    for (int i = 0; i < 3; ++i) {
        check(NULL != world_send(w, SIDE_A, 1000, SEND_PREPARE));
    }
    world_progress(w, SIDE_A);
    check_int_eq(world_fire_timeouts(w, SIDE_A), 1);
    world_progress(w, SIDE_A);
    check_int_eq(STATS(w, SIDE_A)->num_timer_probes, 1);
    check_int_eq(fake_wire_count(), 4);
    w->paused = false;
    check_int_eq(world_run(w, 1000, false), WORLD_QUIET);
    check_all_delivered(w);
    check_ok(world_verify_counters(w));
    check_int_eq(STATS(w, SIDE_A)->num_resends, 0);
    check_int_eq(STATS(w, SIDE_A)->num_timeout_retrans, 0);
    check_int_eq(STATS(w, SIDE_A)->num_probe_spurious, 1);
    check_int_eq(STATS(w, SIDE_A)->num_cwnd_cuts, 0);
    check_int_eq(STATS(w, SIDE_B)->num_dup_recvs + STATS(w, SIDE_B)->num_oow_low_recvs, 0);
    check(!a->in_recovery);
    check_int_eq(a->probes, 0);
    check(!a->rto.backed_off);
    check(a->rto.min_us > (uint32_t) usnic_component.retrans_timeout);
    world_fini(w);
    return 0;
}

/* A segment of the data channel reaches B after the probe that followed it
 * on the priority channel (Soft-RoCE does each queue pair's receive work
 * apart).  B's answer says it missing; A probes again at the next expiry
 * instead of resending, and the segment's own arrival settles it: nothing
 * is resent and no loss is known.  (Before, that first answer resent it: a
 * copy of what B got next, and for 10 s every expiry resent unprobed.) */
USNIC_TEST(engine_probe_overtakes_segment)
{
    world_t *w = world_new(70, 71);
    fake_dgram_t held;

    check(NULL != w);
    w->paused = true;
    check(NULL != world_send(w, SIDE_A, 1000, SEND_PREPARE));
    world_progress(w, SIDE_A);
    check(take_seg(70, false, &held));
    w->paused = false;
    check_int_eq(world_run(w, 1000, false), WORLD_STALLED);
    check_int_eq(world_fire_timeouts(w, SIDE_A), 1);
    check_int_eq(STATS(w, SIDE_A)->num_timer_probes, 1);
    check_int_eq(world_run(w, 1000, false), WORLD_STALLED);
    check_int_eq(STATS(w, SIDE_A)->num_resends, 0);
    fake_wire_push(&held);
    check_int_eq(world_run(w, 1000, false), WORLD_QUIET);
    check_all_delivered(w);
    check_ok(world_verify_counters(w));
    check_int_eq(STATS(w, SIDE_A)->num_resends, 0);
    check_int_eq(STATS(w, SIDE_B)->num_dup_recvs + STATS(w, SIDE_B)->num_oow_low_recvs, 0);
    check(w->mods[SIDE_A].loss_seen_us < 0);
    world_fini(w);
    return 0;
}

/* The same loss where one queue carries both channels in the order they
 * were sent (UDP mode's socket): B's first answer without the segment
 * resends it at once. */
USNIC_TEST(engine_probe_missing_ordered_channels)
{
    world_t *w = world_new(90, 91);
    drop_first_t f = {.from = SIDE_A, .seqs = {90}, .nseqs = 1};

    check(NULL != w);
    w->mods[SIDE_A].limits.channels_apart = false;
    w->filter = drop_first_filter;
    w->filter_arg = &f;
    check(NULL != world_send(w, SIDE_A, 2000, SEND_PREPARE));
    check_int_eq(world_run(w, 1000, false), WORLD_STALLED);
    check_int_eq(world_fire_timeouts(w, SIDE_A), 1);
    check_int_eq(STATS(w, SIDE_A)->num_timer_probes, 1);
    check_int_eq(world_run(w, 1000, false), WORLD_QUIET);
    check_all_delivered(w);
    check_ok(world_verify_counters(w));
    check_int_eq(STATS(w, SIDE_A)->num_probe_missing, 0);
    check_int_eq(STATS(w, SIDE_A)->num_timeout_retrans, 1);
    check(w->mods[SIDE_A].loss_seen_us > 0);
    world_fini(w);
    return 0;
}

/* B stays away through the probes' expiries too: each probes again, the
 * seventh resends (probes or their answers may be lost), after 635 ms of
 * silence, not the 75 ms a peer kept off the VM's vCPUs outlasted.  When B comes
 * back, the resend is a duplicate and proves the timeout spurious; B's
 * late answers to the probes change nothing. */
USNIC_TEST(engine_probe_unanswered_resends)
{
    world_t *w = world_new(50, 51);
    opal_btl_usnic_endpoint_t *a;

    check(NULL != w);
    a = w->ep[SIDE_A];
    w->paused = true;
    check(NULL != world_send(w, SIDE_A, 1000, SEND_PREPARE));
    world_progress(w, SIDE_A);
    for (int i = 1; i <= 6; ++i) {
        check_int_eq(world_fire_timeouts(w, SIDE_A), 1);
        check_int_eq(STATS(w, SIDE_A)->num_timer_probes, i);
        check_int_eq(STATS(w, SIDE_A)->num_timeout_retrans, 0);
        check_int_eq(a->rto.rto_us, (1u << i) * 5000);
    }
    check_int_eq(world_fire_timeouts(w, SIDE_A), 1);
    check_int_eq(STATS(w, SIDE_A)->num_timer_probes, 6);
    check_int_eq(STATS(w, SIDE_A)->num_probe_unanswered, 6);
    check_int_eq(STATS(w, SIDE_A)->num_timeout_retrans, 1);
    check_int_eq(a->rto.rto_us, 128 * 5000);
    check(a->in_recovery);
    w->paused = false;
    check_int_eq(world_run(w, 1000, false), WORLD_QUIET);
    check_all_delivered(w);
    check_ok(world_verify_counters(w));
    check_int_eq(STATS(w, SIDE_A)->num_resends, 1);
    check_int_eq(STATS(w, SIDE_A)->num_spurious_timeouts, 1);
    check_int_eq(STATS(w, SIDE_A)->num_probe_spurious, 0);
    check(!a->in_recovery);
    /* a copy of what B had proves no loss: B's timer still probes */
    check(w->mods[SIDE_B].loss_seen_us < 0);
    world_fini(w);
    return 0;
}

/* btl_usnic_timer_probe 0: every expiry resends, as before probes. */
USNIC_TEST(engine_timer_probe_off_resends)
{
    world_t *w = world_new(60, 61);
    drop_first_t f = {.from = SIDE_A, .seqs = {60}, .nseqs = 1};

    check(NULL != w);
    usnic_component.timer_probe = false;
    w->filter = drop_first_filter;
    w->filter_arg = &f;
    check(NULL != world_send(w, SIDE_A, 1000, SEND_PREPARE));
    check_int_eq(world_run(w, 1000, false), WORLD_STALLED);
    check_int_eq(world_fire_timeouts(w, SIDE_A), 1);
    check_int_eq(STATS(w, SIDE_A)->num_timer_probes, 0);
    check_int_eq(STATS(w, SIDE_A)->num_timeout_retrans, 1);
    check_int_eq(world_run(w, 1000, false), WORLD_QUIET);
    check_all_delivered(w);
    check_ok(world_verify_counters(w));
    world_fini(w);
    return 0;
}

/* A's timer expires while B, away from progress, holds A's three
 * datagrams unread: the resend of the oldest is spurious.  B's answer to it
 * (it had the segment: below its window) reports it as a duplicate, and A
 * undoes the timeout (congestion window back, no recovery, no backoff);
 * since B acknowledged the originals before that report, B was late, not
 * its ACK lost, and A raises its timeout floor above how late.  The
 * repeated ACK that carries the report is no hole: the segments A sent
 * meanwhile are not resent. */
USNIC_TEST(engine_spurious_timeout_undone)
{
    world_t *w = world_new(80, 81);
    opal_btl_usnic_endpoint_t *a;
    fake_dgram_t held;

    check(NULL != w);
    a = w->ep[SIDE_A];
    for (int i = 0; i < 3; ++i) {
        check(NULL != world_send(w, SIDE_A, 1000, SEND_PREPARE));
    }
    world_progress(w, SIDE_A);
    while (fake_wire_count() > 0) {
        world_net_step(w);
    }
    world_peer_lost_lately(w, SIDE_A);    /* a lossy path: the expiry resends */
    check_int_eq(world_fire_timeouts(w, SIDE_A), 1);
    world_progress(w, SIDE_A);
    check_int_eq(STATS(w, SIDE_A)->num_resends, 1);
    check_int_eq(a->tx.cwnd, USNIC_CWND_MIN);
    check_int_eq(fake_wire_count(), 1);
    check(fake_wire_take(0, &held));            /* the resend, late */
    /* B reads the originals and acknowledges them; A's window empties */
    for (int i = 0; i < usnic_component.ack_iteration_delay + 2; ++i) {
        ++usnic_component.progress_ticks;
        world_progress(w, SIDE_B);
    }
    check_int_eq(STATS(w, SIDE_B)->num_ack_sends, 1);
    while (fake_wire_count() > 0) {
        world_net_step(w);
    }
    world_progress(w, SIDE_A);
    check_int_eq(usnic_tx_window_inflight(&a->tx), 0);
    /* two more from A; then the late resend reaches B ahead of them */
    for (int i = 0; i < 2; ++i) {
        check(NULL != world_send(w, SIDE_A, 1000, SEND_PREPARE));
    }
    world_progress(w, SIDE_A);
    check_int_eq(fake_wire_count(), 2);
    {
        fake_dgram_t d[2];
        check(fake_wire_take(0, &d[0]));
        check(fake_wire_take(0, &d[1]));
        fake_wire_push(&held);
        fake_wire_push(&d[0]);
        fake_wire_push(&d[1]);
    }
    w->per_step = 1;
    world_net_step(w);
    world_progress(w, SIDE_B);                  /* the duplicate: ACK at once */
    check_int_eq(STATS(w, SIDE_B)->num_oow_low_recvs, 1);
    check_int_eq(STATS(w, SIDE_B)->num_ack_sends, 2);
    while (fake_wire_count() > 0) {
        world_net_step(w);
    }
    world_progress(w, SIDE_A);                  /* B's ACK repeats the last one */
    check_int_eq(STATS(w, SIDE_A)->num_dup_acks, 1);
    check_int_eq(STATS(w, SIDE_A)->num_fast_retrans, 0);
    check_int_eq(STATS(w, SIDE_A)->num_spurious_timeouts, 1);
    check_int_eq(a->tx.cwnd, USNIC_CWND_OPEN);
    check(!a->in_recovery);
    check(a->rto.min_us > (uint32_t) usnic_component.retrans_timeout);
    check(a->rto.min_us <= 16 * (uint32_t) usnic_component.retrans_timeout);
    check(a->rto.rto_us >= a->rto.min_us);
    check(!a->rto.backed_off);
    w->per_step = 64;
    check_int_eq(world_run(w, 1000, false), WORLD_QUIET);
    check_int_eq(STATS(w, SIDE_A)->num_resends, 1);
    check_int_eq(STATS(w, SIDE_A)->num_timeout_retrans, 1);
    check_all_delivered(w);
    world_fini(w);
    return 0;
}

/* The segment is lost, the timer's resend fills the hole and the network
 * duplicates that resend: the copy proves nothing spurious.  The timeout
 * stays a timeout (window cut, floor unchanged). */
USNIC_TEST(engine_duplicated_needed_resend_not_spurious)
{
    world_t *w = world_new(900, 901);
    drop_first_t f = {.from = SIDE_A, .seqs = {900}, .nseqs = 1};
    opal_btl_usnic_endpoint_t *a;
    fake_dgram_t d, copy;

    check(NULL != w);
    a = w->ep[SIDE_A];
    w->filter = drop_first_filter;
    w->filter_arg = &f;
    check(NULL != world_send(w, SIDE_A, 1000, SEND_PREPARE));
    check_int_eq(world_run(w, 1000, false), WORLD_STALLED);
    check_int_eq(f.dropped, 1);
    world_peer_lost_lately(w, SIDE_A);    /* a lossy path: the expiry resends */
    check_int_eq(world_fire_timeouts(w, SIDE_A), 1);
    world_progress(w, SIDE_A);
    check_int_eq(fake_wire_count(), 1);
    /* the resend, twice on the wire; B reads both in one pass */
    check(fake_wire_take(0, &d));
    copy = d;
    copy.bytes = malloc(d.len);
    check(NULL != copy.bytes);
    memcpy(copy.bytes, d.bytes, d.len);
    fake_wire_push(&d);
    fake_wire_push(&copy);
    check_int_eq(world_run(w, 1000, false), WORLD_QUIET);
    check_int_eq(STATS(w, SIDE_B)->num_oow_low_recvs, 1);
    check_int_eq(STATS(w, SIDE_A)->num_spurious_timeouts, 0);
    check_int_eq(a->rto.min_us, (uint32_t) usnic_component.retrans_timeout);
    check_all_delivered(w);
    world_fini(w);
    return 0;
}

/* B is away while A's timer expires: when B comes back it reads A's
 * datagrams in order and acknowledges them bit by bit, the resend last.
 * Those ACKs stop short of what A sent before the timeout, but predate the
 * resend (no USNIC_ACK_RESEND_SEEN): nothing else is resent.  B reads the
 * resend before it acknowledged the original (USNIC_ACK_DUP_LATE): A's
 * floor goes up, and wears off at an expiry a second later. */
USNIC_TEST(engine_late_receiver_catching_up)
{
    world_t *w = world_new(500, 600);
    opal_btl_usnic_endpoint_t *a;
    int n = 2 * USNIC_ACK_EVERY + 8;
    uint32_t raised;

    check(NULL != w);
    a = w->ep[SIDE_A];
    w->paused = true;
    for (int i = 0; i < n; ++i) {
        check(NULL != world_send(w, SIDE_A, 1000, SEND_PREPARE));
    }
    for (int i = 0; i < 4; ++i) {
        world_progress(w, SIDE_A);
    }
    check_int_eq(a->tx.next_seq_to_send, 500 + n);
    world_peer_lost_lately(w, SIDE_A);    /* a lossy path: the expiry resends */
    check_int_eq(world_fire_timeouts(w, SIDE_A), 1);
    world_progress(w, SIDE_A);
    check_int_eq(STATS(w, SIDE_A)->num_resends, 1);
    check(a->in_recovery);
    /* B reads a few at a time */
    w->paused = false;
    w->per_step = 4;
    check_int_eq(world_run(w, 10000, false), WORLD_QUIET);
    check(STATS(w, SIDE_B)->num_ack_sends >= 3);
    check_int_eq(STATS(w, SIDE_B)->num_oow_low_recvs, 1);
    check_int_eq(STATS(w, SIDE_A)->num_resends, 1);
    check_int_eq(STATS(w, SIDE_A)->num_fast_retrans, 0);
    check_int_eq(STATS(w, SIDE_A)->num_spurious_timeouts, 1);
    check(!a->in_recovery);
    raised = a->rto.min_us;
    check(raised > (uint32_t) usnic_component.retrans_timeout);
    check_all_delivered(w);

    /* an expiry within the second keeps the floor, one after it halves it */
    check(NULL != world_send(w, SIDE_A, 1000, SEND_PREPARE));
    w->paused = true;
    world_progress(w, SIDE_A);
    world_peer_lost_lately(w, SIDE_A);    /* a lossy path: the expiry resends */
    check_int_eq(world_fire_timeouts(w, SIDE_A), 1);
    check_int_eq(a->rto.min_us, raised);
    a->floor_raised_us -= 2e6;
    check_int_eq(world_fire_timeouts(w, SIDE_A), 0);   /* already queued */
    check(a->rto.min_us < raised);
    check(a->rto.min_us >= (uint32_t) usnic_component.retrans_timeout);
    w->paused = false;
    check_int_eq(world_run(w, 1000, false), WORLD_QUIET);
    check_all_delivered(w);
    world_fini(w);
    return 0;
}

/* ------------------------------------------------------------------ */
/* ob1's copy path: buffered sends, and sends that cannot go in place  */

/* Message lengths (PML header included) on every boundary of the send
 * path and one byte either side: the fast path, one datagram, two chunks,
 * the eager limit (the largest btl_alloc serves). */
static int copy_lens(const opal_btl_usnic_module_t *m, size_t *lens)
{
    const size_t edges[] = {m->max_tiny_payload, m->max_frag_payload,
                            2 * (size_t) m->max_chunk_payload, m->super.btl_eager_limit};
    int n = 0;

    lens[n++] = 8;
    lens[n++] = 16;
    lens[n++] = 17;
    for (size_t i = 0; i < sizeof(edges) / sizeof(edges[0]); ++i) {
        lens[n++] = edges[i] - 1;
        lens[n++] = edges[i];
        if (edges[i] < m->super.btl_eager_limit) {
            lens[n++] = edges[i] + 1;
        }
    }
    return n;
}

/* Datagrams a message of len bytes takes: one frag, or chunks. */
static void count_segments(const opal_btl_usnic_module_t *m, size_t len, uint64_t *frags,
                           uint64_t *chunks)
{
    if (len <= m->max_frag_payload) {
        ++*frags;
    } else {
        *chunks += (len + m->max_chunk_payload - 1) / m->max_chunk_payload;
    }
}

/* Each length both ways, one message at a time: what fits the fast path
 * goes inline, sendi hands back a descriptor for anything larger (sent
 * with btl_send, completed by a callback), btl_alloc serves up to the
 * eager limit and nothing beyond it. */
USNIC_TEST(engine_copy_path_boundaries)
{
    world_t *w = world_new(40, 41);
    size_t lens[16];
    uint64_t frags[2] = {0, 0}, chunks[2] = {0, 0}, fast[2] = {0, 0};
    int n;

    check(NULL != w);
    n = copy_lens(&w->mods[SIDE_A], lens);
    for (int i = 0; i < n; ++i) {
        for (int how = SEND_COPY_ALLOC; how <= SEND_COPY_SENDI; ++how) {
            for (int s = SIDE_A; s <= SIDE_B; ++s) {
                sent_msg_t *m = world_send(w, s, lens[i], (send_method_t) how);
                bool tiny = lens[i] <= w->mods[s].max_tiny_payload;

                if (NULL == m) {
                    return usnic_test_fail(__FILE__, __LINE__, "%s of %zu bytes refused",
                                           SEND_COPY_ALLOC == how ? "btl_alloc" : "btl_sendi",
                                           lens[i]);
                }
                /* inline: complete at once; else a callback follows */
                check_int_eq(m->rc, tiny ? 1 : 0);
                fast[s] += tiny;
                count_segments(&w->mods[s], lens[i], &frags[s], &chunks[s]);
                check_int_eq(world_run(w, 5000, false), WORLD_QUIET);
            }
        }
    }
    check_all_delivered(w);
    check_ok(world_verify_counters(w));
    for (int s = SIDE_A; s <= SIDE_B; ++s) {
        check_int_eq(STATS(w, s)->num_fast_sends, fast[s]);
        check_int_eq(STATS(w, s)->num_frag_sends, frags[s]);
        check_int_eq(STATS(w, s)->num_chunk_sends, chunks[s]);
        check_int_eq(STATS(w, s)->num_resends, 0);
    }
    check(NULL == w->mods[SIDE_A].super.btl_alloc(&w->mods[SIDE_A].super, w->ep[SIDE_A],
                                                   MCA_BTL_NO_ORDER,
                                                   w->mods[SIDE_A].super.btl_eager_limit + 1,
                                                   MCA_BTL_DES_FLAGS_BTL_OWNERSHIP));
    world_fini(w);
    return 0;
}

/* The same lengths, many in flight both ways over a network that loses,
 * duplicates and delays datagrams and ACKs. */
USNIC_TEST(engine_copy_path_lossy)
{
    world_t *w = world_new(65000, 3);
    chaos_t c = {.loss = 100, .ack_loss = 100, .dup = 30, .ack_dup = 30, .delay = 20};
    size_t lens[16];
    int n;

    check(NULL != w);
    n = copy_lens(&w->mods[SIDE_A], lens);
    w->filter = chaos_filter;
    w->filter_arg = &c;
    w->reorder = 8;
    for (int i = 0; i < 6 * n; ++i) {
        size_t len = lens[world_rand(w) % n];
        send_method_t how = world_rand(w) % 2 ? SEND_COPY_ALLOC : SEND_COPY_SENDI;
        check(NULL != world_send(w, i % 2, len, how));
        if (i % 4 == 3) {
            world_step(w);
        }
    }
    check_int_eq(world_run(w, 400000, true), WORLD_QUIET);
    check_all_delivered(w);
    check_ok(world_verify_counters(w));
    check(c.lost > 0 && c.acks_lost > 0);
    check(STATS(w, SIDE_A)->num_resends > 0 && STATS(w, SIDE_B)->num_resends > 0);
    world_fini(w);
    return 0;
}

/* The PML may set seg_len below what it asked btl_alloc for: descriptors
 * allocated one datagram larger than needed go as chunks of their real
 * size.  Here the PML also keeps the descriptors and frees them in the
 * callback, before the ACKs are in, and datagrams are lost.  A large
 * descriptor cut to nothing is refused, and goes back when freed. */
USNIC_TEST(engine_copy_path_shrunk_alloc)
{
    world_t *w = world_new(1000, 2000);
    chaos_t c = {.loss = 50, .ack_loss = 50};
    mca_btl_base_module_t *btl;
    mca_btl_base_descriptor_t *des;
    size_t lens[16];
    uint64_t chunks = 0;
    int n;

    check(NULL != w);
    n = copy_lens(&w->mods[SIDE_A], lens);
    w->filter = chaos_filter;
    w->filter_arg = &c;
    w->pml_frees = true;
    w->alloc_slack = w->mods[SIDE_A].max_frag_payload;
    for (int i = 0; i < n; ++i) {
        if (lens[i] + w->alloc_slack > w->mods[SIDE_A].super.btl_eager_limit) {
            continue;
        }
        check(NULL != world_send(w, SIDE_A, lens[i], SEND_COPY_ALLOC));
        chunks += (lens[i] + w->mods[SIDE_A].max_chunk_payload - 1) /
                  w->mods[SIDE_A].max_chunk_payload;
        check(NULL != world_send(w, SIDE_B, lens[i], SEND_COPY_ALLOC));
    }
    check_int_eq(world_run(w, 200000, true), WORLD_QUIET);
    check_all_delivered(w);
    check_ok(world_verify_counters(w));
    check_int_eq(STATS(w, SIDE_A)->num_frag_sends, 0);
    check_int_eq(STATS(w, SIDE_A)->num_chunk_sends, chunks);

    btl = &w->mods[SIDE_A].super;
    des = btl->btl_alloc(btl, w->ep[SIDE_A], MCA_BTL_NO_ORDER,
                         w->mods[SIDE_A].max_frag_payload + 1, MCA_BTL_DES_FLAGS_PRIORITY);
    check(NULL != des);
    des->des_segments[0].seg_len = 0;
    check_int_eq(btl->btl_send(btl, w->ep[SIDE_A], des, WORLD_TAG), OPAL_ERR_BAD_PARAM);
    check_int_eq(btl->btl_free(btl, des), OPAL_SUCCESS);
    check_ok(world_check_idle(w));
    world_fini(w);
    return 0;
}

/* What the callback of a PML-owned descriptor saw. */
typedef struct {
    int calls;
    int status;
    bool busy;      /* a segment of the frag was unacknowledged or on the device */
} resend_cb_t;

static void resend_cb(mca_btl_base_module_t *btl, mca_btl_base_endpoint_t *ep,
                      mca_btl_base_descriptor_t *des, int status)
{
    resend_cb_t *r = des->des_cbdata;
    const opal_btl_usnic_send_frag_t *frag = (const opal_btl_usnic_send_frag_t *) des;
    (void) btl;
    (void) ep;

    ++r->calls;
    r->status = status;
    r->busy |= 0 != frag->segs_unacked || 0 != frag->segs_posted;
}

/* Open MPI 5's active-message RDMA keeps the descriptor it allocated (no
 * BTL ownership) and, after each callback, fills it anew and sends it
 * again.  The callback must come only once nothing of the frag is on the
 * wire any more, and each sending must arrive whole, over a lossy network,
 * for a small (one datagram) and a chunked descriptor. */
USNIC_TEST(engine_pml_resends_descriptor)
{
    world_t *w = world_new(1000, 2000);
    chaos_t c = {.loss = 300, .ack_loss = 300};
    mca_btl_base_module_t *btl;
    size_t lens[2];
    size_t got = 0;

    check(NULL != w);
    btl = &w->mods[SIDE_A].super;
    lens[0] = 100;
    lens[1] = 3 * w->mods[SIDE_A].max_chunk_payload + 5;
    w->filter = chaos_filter;
    w->filter_arg = &c;
    for (int l = 0; l < 2; ++l) {
        resend_cb_t r = {0};
        mca_btl_base_descriptor_t *des = btl->btl_alloc(btl, w->ep[SIDE_A], MCA_BTL_NO_ORDER,
                                                        lens[l],
                                                        MCA_BTL_DES_SEND_ALWAYS_CALLBACK);
        check(NULL != des);
        des->des_cbfunc = resend_cb;
        des->des_cbdata = &r;
        for (int round = 0; round < 4; ++round) {
            size_t n = lens[l] - 3 * (size_t) round;
            uint8_t *p = des->des_segments[0].seg_addr.pval;

            for (size_t i = 0; i < n; ++i) {
                p[i] = (uint8_t) (i * 7 + round * 31 + l);
            }
            des->des_segments[0].seg_len = n;
            world_run_as(w, SIDE_A);
            check_int_eq(btl->btl_send(btl, w->ep[SIDE_A], des, WORLD_TAG), OPAL_SUCCESS);
            check_int_eq(world_run(w, 200000, true), WORLD_QUIET);
            check_int_eq(r.calls, round + 1);
            check_int_eq(r.status, OPAL_SUCCESS);
            check(!r.busy);
            check_int_eq(w->nrx, got + 1);
            check_int_eq(w->rx[got].side, SIDE_B);
            check_int_eq(w->rx[got].len, n);
            for (size_t i = 0; i < n; ++i) {
                if (w->rx[got].data[i] != (uint8_t) (i * 7 + round * 31 + l)) {
                    return usnic_test_fail(__FILE__, __LINE__, "length %zu, round %d: byte %zu wrong",
                                           lens[l], round, i);
                }
            }
            ++got;
        }
        check_int_eq(btl->btl_free(btl, des), OPAL_SUCCESS);

        /* A PML that lets its descriptor go while the callback waits for the
         * ACKs still gets the callback once, and the frag goes back. */
        r = (resend_cb_t){0};
        des = btl->btl_alloc(btl, w->ep[SIDE_A], MCA_BTL_NO_ORDER, lens[l],
                             MCA_BTL_DES_SEND_ALWAYS_CALLBACK);
        check(NULL != des);
        des->des_cbfunc = resend_cb;
        des->des_cbdata = &r;
        memset(des->des_segments[0].seg_addr.pval, 0x5a, lens[l]);
        world_run_as(w, SIDE_A);
        check_int_eq(btl->btl_send(btl, w->ep[SIDE_A], des, WORLD_TAG), OPAL_SUCCESS);
        for (int i = 0; i < 1000 && !((opal_btl_usnic_send_frag_t *) des)->cb_deferred; ++i) {
            world_progress(w, SIDE_A);
        }
        check(((opal_btl_usnic_send_frag_t *) des)->cb_deferred);
        check_int_eq(btl->btl_free(btl, des), OPAL_SUCCESS);
        check_int_eq(world_run(w, 200000, true), WORLD_QUIET);
        check_int_eq(r.calls, 1);
        ++got;
    }
    check_int_eq(w->nrx, got);
    check(c.lost > 0 && c.acks_lost > 0);
    check_ok(world_check_idle(w));
    world_fini(w);
    return 0;
}

static void spin_alarm(int sig)
{
    (void) sig;
    printf("FAIL engine_chunk_buffers_exhausted: still sending after 30 s (spinning)\n");
    _exit(1);
}

/* Registered memory runs out (the chunk list may not grow): the send engine
 * ends its pass instead of spinning, and the job goes on with the few
 * chunk buffers it has, each reused once the peer ACKs it. */
USNIC_TEST(engine_chunk_buffers_exhausted)
{
    world_t *w = world_new(3, 4);
    opal_free_list_t *fl;
    opal_free_list_item_t *held[1024];
    size_t nheld = 0;

    check(NULL != w);
    fl = &w->mods[SIDE_A].chunk_segs;
    fl->fl_max_to_alloc = fl->fl_num_allocated;
    while (world_free_count(fl) > 4 && nheld < sizeof(held) / sizeof(held[0])) {
        held[nheld++] = opal_free_list_get(fl);
    }
    signal(SIGALRM, spin_alarm);
    alarm(30);
    for (int i = 0; i < 3; ++i) {
        check(NULL != world_send(w, SIDE_A, 150 * 1024, SEND_PREPARE));
    }
    check_int_eq(world_run(w, 100000, false), WORLD_QUIET);
    alarm(0);
    while (nheld > 0) {
        opal_free_list_return(fl, held[--nheld]);
    }
    check_all_delivered(w);
    check(STATS(w, SIDE_A)->num_chunk_stalls > 0);
    check_int_eq(STATS(w, SIDE_A)->num_resends, 0);
    world_fini(w);
    return 0;
}

/* del_procs while frags wait in the send queue (the peer stopped
 * acknowledging): every send still gets exactly one completion callback,
 * the ones never sent with OPAL_ERR_UNREACH, and every PUT its completion. */
USNIC_TEST(engine_flush_reports_unsent)
{
    world_t *w = world_new(11, 12);
    uint8_t *src = calloc(1, 20000);
    put_rec_t *put;
    size_t unreach = 0;

    check(NULL != w && NULL != src);
    w->paused = true;                       /* nothing reaches B, no ACK comes */
    for (int i = 0; i < 400; ++i) {
        check(NULL != world_send(w, SIDE_A, 2000 + (size_t) i, SEND_PREPARE));
    }
    check(NULL != world_send(w, SIDE_A, 100000, SEND_PREPARE));
    put = world_put(w, SIDE_A, src, 0x1000, 20000);
    check_int_eq(put->rc, OPAL_SUCCESS);
    for (int i = 0; i < 20; ++i) {
        world_progress(w, SIDE_A);
    }
    check(!opal_list_is_empty(&w->ep[SIDE_A]->send_queue));
    world_del_procs(w, SIDE_A);
    for (size_t i = 0; i < w->nsent; ++i) {
        sent_msg_t *m = w->sent[i];
        check_int_eq(m->callbacks, 1);
        unreach += OPAL_ERR_UNREACH == m->cb_status;
    }
    check(unreach > 0);
    check_int_eq(put->callbacks, 1);
    check_int_eq(put->status, OPAL_ERR_UNREACH);
    w->paused = false;
    world_fini(w);
    free(src);
    return 0;
}

/* A PUT target deregistered while the PUT's chunks arrive: the rest is
 * accepted and counted, not written, and the sender's window moves on
 * (before, every remaining chunk was refused until the peer timeout). */
USNIC_TEST(engine_put_target_deregistered_midway)
{
    world_t *w = world_new(21, 22);
    size_t len = 400000;
    uint8_t *dst = malloc(len), *src = malloc(len);
    mca_btl_base_registration_handle_t *h;
    put_rec_t *put;
    size_t written = 0;

    check(NULL != w && NULL != dst && NULL != src);
    usnic_component.max_short_packets = 0;
    memset(dst, 0, len);
    memset(src, 0x42, len);
    h = world_register(w, SIDE_B, dst, len, MCA_BTL_REG_FLAG_REMOTE_WRITE);
    check(NULL != h);
    w->per_step = 1;
    put = world_put(w, SIDE_A, src, (uint64_t)(uintptr_t) dst, len);
    check_int_eq(put->rc, OPAL_SUCCESS);
    for (int i = 0; i < 400 && STATS(w, SIDE_B)->num_chunk_recvs < 2; ++i) {
        world_step(w);
    }
    check(STATS(w, SIDE_B)->num_chunk_recvs >= 2);
    world_deregister(w, SIDE_B, h);
    check_int_eq(world_run(w, 5000, false), WORLD_QUIET);
    check_int_eq(put->callbacks, 1);
    check_int_eq(put->status, OPAL_SUCCESS);
    check(STATS(w, SIDE_B)->num_bad_recvs > 0);
    /* (the chunks after it name a revoked registration) */
    check(STATS(w, SIDE_B)->num_bad_handles > 0);
    check_int_eq(STATS(w, SIDE_A)->num_resends, 0);
    for (size_t i = 0; i < len; ++i) {
        written += 0x42 == dst[i];
    }
    check(written > 0 && written < len);
    world_fini(w);
    free(dst);
    free(src);
    return 0;
}

/* The receive window counter reports in-order traffic too: segments from
 * the last ACK sent up to the highest received. */
USNIC_TEST(engine_rcvd_window_in_order)
{
    world_t *w = world_new(31, 32);

    check(NULL != w);
    for (int i = 0; i < 64; ++i) {
        check(NULL != world_send(w, SIDE_A, 3000, SEND_PREPARE));
    }
    check_int_eq(world_run(w, 5000, false), WORLD_QUIET);
    check_all_delivered(w);
    check(STATS(w, SIDE_B)->max_rcvd_window_size >= 16);
    check(STATS(w, SIDE_B)->max_rcvd_window_size <= 64);
    world_fini(w);
    return 0;
}

/* A peer left without an endpoint (its device's MTU differed, or no device
 * paired with it) does not keep the last del_procs from quiescing the
 * component (final statistics, timers, the connectivity thread). */
USNIC_TEST(engine_quiesce_with_unpaired_peer)
{
    world_t *w = world_new(5, 6);
    opal_btl_usnic_proc_t *unpaired = OBJ_NEW(opal_btl_usnic_proc_t);

    check(NULL != w && NULL != unpaired);
    unpaired->endpoints = calloc(2, sizeof(*unpaired->endpoints));
    check(NULL != unpaired->endpoints);
    opal_list_append(&usnic_component.procs, &unpaired->super);
    check(!usnic_component.quiesced);
    world_del_procs(w, SIDE_A);
    check(!usnic_component.quiesced);           /* B still has its endpoint */
    world_del_procs(w, SIDE_B);
    check(usnic_component.quiesced);
    world_fini(w);
    return 0;
}

/* A burst that takes many times the minimum RTO to drain through a slow
 * network, on real clocks: the ACKs that keep coming restart the timer, so
 * nothing is resent (a timer per segment, started when it was posted,
 * resent the tail of every such burst). */
USNIC_TEST(engine_slow_burst_no_spurious_timeouts)
{
    world_t *w = world_new(61, 62);
    double t0;

    check(NULL != w);
    w->real_timers = true;
    /* 20 ms: the host may be busy, and a pass that comes late is no proof */
    usnic_rto_init(&w->ep[SIDE_A]->rto, 20000, USNIC_MAX_RTO_US);
    t0 = opal_btl_usnic_now_us();
    for (int i = 0; i < 8; ++i) {
        check(NULL != world_send(w, SIDE_A, 150 * 1024, SEND_PREPARE));
    }
    /* Full duplex: the ACKs toward A are not queued behind the data. */
    for (int i = 0; i < 100000 && !world_quiescent(w); ++i) {
        unsigned to_b = 0;
        world_progress(w, SIDE_A);
        world_progress(w, SIDE_B);
        for (size_t k = 0; k < fake_wire_count();) {
            fake_dgram_t d;
            bool to_a = fake_wire_peek(k)->src == w->mods[SIDE_B].dev;
            if (!to_a && to_b == 2) {
                ++k;
                continue;
            }
            check(fake_wire_take(k, &d));
            to_b += !to_a;
            check_int_eq(fake_deliver(d.dst_qpn, &d.from, d.bytes, d.len), FAKE_RX_OK);
            fake_dgram_free(&d);
        }
        usleep(500);
    }
    check(world_quiescent(w));
    check(opal_btl_usnic_now_us() - t0 > 4 * 20000.0);
    check_all_delivered(w);
    check_int_eq(STATS(w, SIDE_A)->num_timeout_retrans, 0);
    check_int_eq(STATS(w, SIDE_A)->num_resends, 0);
    world_fini(w);
    return 0;
}

/* A peer that acknowledges nothing while the PML keeps sending: the module
 * stops handing out frags at USNIC_SMALL_FRAGS_MAX (the PML then keeps its
 * requests pending) instead of queueing registered buffers without end;
 * once the peer answers, everything accepted arrives. */
USNIC_TEST(engine_send_frags_bounded)
{
    world_t *w = world_new(71, 72);
    opal_free_list_t *fl;
    size_t accepted = 0, refused = 0;

    check(NULL != w);
    fl = &w->mods[SIDE_A].small_send_frags;
    /* as module_init sets it (the world builds its lists by hand) */
    fl->fl_max_to_alloc = USNIC_SMALL_FRAGS_MAX;
    w->paused = true;
    for (int i = 0; i < USNIC_SMALL_FRAGS_MAX + 500; ++i) {
        sent_msg_t *m = world_send(w, SIDE_A, 64, SEND_PREPARE);
        if (NULL != m) {
            ++accepted;
        } else {
            ++refused;
        }
        if (i % 64 == 0) {
            world_progress(w, SIDE_A);
        }
    }
    check(refused > 0);
    check(accepted <= USNIC_SMALL_FRAGS_MAX);
    check(fl->fl_num_allocated <= USNIC_SMALL_FRAGS_MAX);
    w->paused = false;
    check_int_eq(world_run(w, 1000000, true), WORLD_QUIET);
    check_int_eq(w->nrx, accepted);
    world_fini(w);
    return 0;
}

/* A standalone ACK's header comes from the ACK free list, whose buffers
 * nobody zeroes: every field the receiver reads must be set, the flags
 * above all (a stale USNIC_HDR_RESEND would make the peer report a resend
 * it never got, and open the F-RTO gate of a recovery). */
USNIC_TEST(engine_standalone_ack_flags_set)
{
    world_t *w = world_new(700, 900);
    opal_free_list_t *fl;
    opal_free_list_item_t *items[256];
    size_t n = 0;

    check(NULL != w);
    fl = &w->mods[SIDE_B].ack_segs;
    /* what reused or unzeroed memory may hold */
    while (n < 256 && NULL != (items[n] = opal_free_list_get(fl))) {
        usnic_btl_header_t *hdr = ((opal_btl_usnic_ack_item_t *) items[n])->seg.hdr;
        memset(hdr, 0xff, sizeof(*hdr));
        ++n;
    }
    check(n > 0);
    while (n > 0) {
        opal_free_list_return(fl, items[--n]);
    }
    check(NULL != world_send(w, SIDE_A, 1000, SEND_PREPARE));
    check_int_eq(world_run(w, 1000, false), WORLD_QUIET);
    check(STATS(w, SIDE_B)->num_ack_sends > 0);
    check_int_eq(w->ep[SIDE_A]->rx_report & USNIC_ACK_RESEND_SEEN, 0);
    check_all_delivered(w);
    world_fini(w);
    return 0;
}
