/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 * $COPYRIGHT$
 * SPDX-License-Identifier: BSD-3-Clause
 *
 * Writes the seed corpus of fuzz_recv (format in fuzz_recv.h) into the
 * directory given, and checks every seed by running it through the
 * harness itself, each in a fresh world: what B must have counted,
 * delivered or written for it.  Exits non-zero if a seed does not do what
 * it is meant to, so seeds cannot silently go stale when the world or
 * the protocol changes.
 *
 *   make_seeds DIR
 */

#include "opal_config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "btl_usnic.h"
#include "btl_usnic_endpoint.h"
#include "btl_usnic_module.h"
#include "btl_usnic_wire.h"

#include "engine_world.h"
#include "fuzz_recv.h"

#define MAX_SEED 10240

typedef struct {
    uint8_t b[MAX_SEED];
    size_t n;
} seed_t;

static world_t *w;
static uint32_t mcp;                    /* B's max_chunk_payload */
static uint32_t pmcp;                   /* of a PUT's chunks (the registration before) */
static const char *outdir;
static int failures;

/* ------------------------------------------------------------------ */
/* building inputs                                                     */

static void seed_begin(seed_t *s, uint8_t opt)
{
    s->n = 0;
    s->b[s->n++] = opt;
}

static void seed_add(seed_t *s, const void *dgram, size_t len, uint16_t flags)
{
    uint16_t word = (uint16_t)(len | flags);

    if (len > FUZZ_REC_LEN_MASK || s->n + 2 + len > sizeof(s->b)) {
        fprintf(stderr, "make_seeds: seed too large\n");
        exit(2);
    }
    s->b[s->n++] = (uint8_t) word;
    s->b[s->n++] = (uint8_t)(word >> 8);
    memcpy(s->b + s->n, dgram, len);
    s->n += len;
}

/* A datagram of len bytes given as its headers (a PUT's registration
 * included) and first few payload bytes, the rest zeros (FUZZ_REC_PAD):
 * what the fuzzer mutates is then mostly headers. */
#define PAD_GIVEN (sizeof(usnic_btl_chunk_header_t) + 8)
static void seed_add_pad(seed_t *s, const void *dgram, size_t len, uint16_t flags)
{
    const usnic_btl_header_t *h = dgram;
    size_t pad_given = PAD_GIVEN + usnic_put_ref_len(h->tag, h->put_addr);
    size_t given = len < pad_given ? len : pad_given;

    if (len > FUZZ_REC_PAD_MASK || s->n + 4 + given > sizeof(s->b)) {
        fprintf(stderr, "make_seeds: seed too large\n");
        exit(2);
    }
    flags |= FUZZ_REC_PAD | (uint16_t) given;
    s->b[s->n++] = (uint8_t) flags;
    s->b[s->n++] = (uint8_t)(flags >> 8);
    s->b[s->n++] = (uint8_t) len;
    s->b[s->n++] = (uint8_t)(len >> 8);
    memcpy(s->b + s->n, dgram, given);
    s->n += given;
}

/* A datagram buffer: header, chunk header or both, then payload. */
typedef union {
    usnic_btl_header_t h;
    usnic_btl_chunk_header_t ch;
    uint8_t bytes[8192];
} dgram_t;

/* The registration of the writable region, as PUTs and requests name it
 * (key 0: the harness puts in the live key, fuzz_recv.h). */
static const usnic_reg_ref_t rw_ref = {.key = 0, .index = FUZZ_SLOT_RW};

/* A fragment of plen bytes; a PUT's (put_off not 0) are preceded by ref. */
static size_t mk_put_frag(dgram_t *d, uint16_t seq, uint64_t put_off, uint16_t plen,
                          uint8_t fill, const usnic_reg_ref_t *ref)
{
    size_t r = 0 != put_off ? sizeof(*ref) : 0;

    memset(d, 0, sizeof(*d));
    world_header(w, SIDE_A, &d->h, USNIC_PAYLOAD_TYPE_FRAG);
    d->h.pkt_seq = seq;
    d->h.payload_len = (uint16_t) (r + plen);
    d->h.tag = WORLD_TAG;
    d->h.put_addr = put_off;
    memcpy(d->bytes + sizeof(d->h), ref, r);
    memset(d->bytes + sizeof(d->h) + r, fill, plen);
    return sizeof(d->h) + r + plen;
}

static size_t mk_frag(dgram_t *d, uint16_t seq, uint64_t put_off, uint16_t plen, uint8_t fill)
{
    return mk_put_frag(d, seq, put_off, plen, fill, &rw_ref);
}

static size_t mk_chunk(dgram_t *d, uint16_t seq, uint32_t id, uint32_t size, uint32_t off,
                       uint16_t plen, uint64_t put_off, uint8_t fill)
{
    memset(d, 0, sizeof(*d));
    world_header(w, SIDE_A, &d->ch.hdr, USNIC_PAYLOAD_TYPE_CHUNK);
    d->ch.hdr.pkt_seq = seq;
    d->ch.hdr.payload_len = plen;
    d->ch.hdr.tag = WORLD_TAG;
    d->ch.hdr.put_addr = put_off;
    d->ch.frag_id = id;
    d->ch.frag_size = size;
    d->ch.frag_offset = off;
    if (0 != put_off) {
        /* a PUT's chunks: the registration, then the data */
        memcpy(d->bytes + sizeof(d->ch), &rw_ref, sizeof(rw_ref));
        memset(d->bytes + sizeof(d->ch) + sizeof(rw_ref), fill, plen);
        return sizeof(d->ch) + sizeof(rw_ref) + plen;
    }
    memset(d->bytes + sizeof(d->ch), fill, plen);
    return sizeof(d->ch) + plen;
}

/* A GET/atomic message in a small fragment. */
static size_t mk_rdma(dgram_t *d, uint16_t seq, uint8_t kind, uint8_t aop, uint64_t addr,
                      uint32_t len, uint64_t operand, uint64_t operand2)
{
    usnic_rdma_msg_t m;

    memset(d, 0, sizeof(*d));
    world_header(w, SIDE_A, &d->h, USNIC_PAYLOAD_TYPE_FRAG);
    d->h.pkt_seq = seq;
    d->h.payload_len = sizeof(m);
    d->h.tag = USNIC_TAG_RDMA;
    memset(&m, 0, sizeof(m));
    m.kind = kind;
    m.aop = aop;
    m.width = 8;
    m.addr = addr;
    m.len = len;
    m.id = 0x100000001ULL;
    m.operand = operand;
    m.operand2 = operand2;
    m.reg = rw_ref;
    memcpy(d->bytes + sizeof(d->h), &m, sizeof(m));
    return sizeof(d->h) + sizeof(m);
}

static size_t mk_ack(dgram_t *d, uint16_t ack)
{
    memset(d, 0, sizeof(*d));
    world_header(w, SIDE_A, &d->h, USNIC_PAYLOAD_TYPE_ACK);
    d->h.ack_present = 1;
    d->h.ack_seq = ack;
    return sizeof(d->h);
}

/* ------------------------------------------------------------------ */
/* checking                                                            */

typedef const char *(*check_fn)(world_t *w);
static check_fn current_check;
static const char *check_result;
static char msg[256];

static void after_input(world_t *world)
{
    check_result = NULL != current_check ? current_check(world) : NULL;
}

#define STATS(side) (&w->mods[side].stats)
#define EP_B (w->ep[SIDE_B])
#define EXPECT(cond, ...)                              \
    do {                                               \
        if (!(cond)) {                                 \
            snprintf(msg, sizeof(msg), __VA_ARGS__);   \
            return msg;                                \
        }                                              \
    } while (0)

/* Counters of B that only the named check may see nonzero. */
static const char *quiet_except(world_t *w, const char *allowed)
{
    const opal_btl_usnic_stats_t *s = STATS(SIDE_B);
    struct {
        const char *name;
        uint64_t v;
    } c[] = {
        {"bad", s->num_bad_recvs},         {"unk", s->num_unk_recvs},
        {"badfrag", s->num_badfrag_recvs}, {"dup", s->num_dup_recvs},
        {"oow_low", s->num_oow_low_recvs}, {"oow_high", s->num_oow_high_recvs},
        {"recv_err", s->num_recv_errors},        {"bogus_acks", s->num_bogus_acks},
    };

    for (size_t i = 0; i < sizeof(c) / sizeof(c[0]); ++i) {
        if (0 != c[i].v && NULL == strstr(allowed, c[i].name)) {
            snprintf(msg, sizeof(msg), "B counted %llu %s datagrams",
                     (unsigned long long) c[i].v, c[i].name);
            return msg;
        }
    }
    return NULL;
}

static void run_seed(const char *name, const seed_t *s, check_fn check)
{
    char path[1024];
    FILE *f;

    current_check = check;
    check_result = "the harness never reached the end of the input";
    LLVMFuzzerTestOneInput(s->b, s->n);
    current_check = NULL;
    if (NULL != check_result) {
        fprintf(stderr, "make_seeds: seed %s: %s\n", name, check_result);
        ++failures;
        return;
    }
    snprintf(path, sizeof(path), "%s/%s", outdir, name);
    f = fopen(path, "wb");
    if (NULL == f || s->n != fwrite(s->b, 1, s->n, f) || 0 != fclose(f)) {
        fprintf(stderr, "make_seeds: cannot write %s\n", path);
        exit(2);
    }
    printf("seed %-22s %5zu bytes\n", name, s->n);
}

/* ------------------------------------------------------------------ */
/* the seeds                                                           */

static const char *chk_frag_prio(world_t *w)
{
    EXPECT(1 == STATS(SIDE_B)->num_frag_recvs, "%llu frags accepted",
           (unsigned long long) STATS(SIDE_B)->num_frag_recvs);
    EXPECT(1 == w->nrx && 40 == w->rx[0].len && WORLD_TAG == w->rx[0].tag,
           "%zu messages delivered", w->nrx);
    return quiet_except(w, "");
}

/* 18 frags across the sequence wrap, the last first and twice, and one
 * again once the window has moved past it. */
static const char *chk_frag_wrap(world_t *w)
{
    EXPECT(18 == STATS(SIDE_B)->num_frag_recvs, "%llu frags accepted",
           (unsigned long long) STATS(SIDE_B)->num_frag_recvs);
    EXPECT(1 == STATS(SIDE_B)->num_dup_recvs && 1 == STATS(SIDE_B)->num_oow_low_recvs,
           "%llu duplicates, %llu below the window",
           (unsigned long long) STATS(SIDE_B)->num_dup_recvs,
           (unsigned long long) STATS(SIDE_B)->num_oow_low_recvs);
    EXPECT(18 == w->nrx, "%zu messages delivered", w->nrx);
    EXPECT((uint16_t)(FUZZ_ISN_A + 18) == EP_B->rx.next_contig, "window edge at %u",
           EP_B->rx.next_contig);
    return quiet_except(w, "dup oow_low");
}

static const char *chk_chunks(world_t *w)
{
    EXPECT(2 == STATS(SIDE_B)->num_chunk_recvs, "%llu chunks accepted",
           (unsigned long long) STATS(SIDE_B)->num_chunk_recvs);
    EXPECT(1 == w->nrx && mcp + 100 == w->rx[0].len, "%zu messages delivered", w->nrx);
    EXPECT(0x11 == w->rx[0].data[0] && 0x22 == w->rx[0].data[mcp], "wrong bytes");
    return quiet_except(w, "");
}

static const char *chk_chunk_first(world_t *w)
{
    EXPECT(1 == STATS(SIDE_B)->num_chunk_recvs, "chunk not accepted");
    EXPECT(0 == w->nrx, "a message was delivered");
    EXPECT(NULL != EP_B->rx_frags && 9 == EP_B->rx_frags[9].frag_id, "no reassembly under way");
    return quiet_except(w, "");
}

static const char *chk_chunk_last(world_t *w)
{
    EXPECT(1 == STATS(SIDE_B)->num_chunk_recvs, "chunk not accepted");
    EXPECT(0 == w->nrx, "a message was delivered");
    EXPECT(mcp * 2 == EP_B->rx_frags[10].bytes_left, "%u bytes left",
           EP_B->rx_frags[10].bytes_left);
    return quiet_except(w, "");
}

static const char *chk_chunk_bad(world_t *w)
{
    EXPECT(3 == STATS(SIDE_B)->num_badfrag_recvs, "%llu bad chunks",
           (unsigned long long) STATS(SIDE_B)->num_badfrag_recvs);
    EXPECT(1 == STATS(SIDE_B)->num_chunk_recvs, "%llu chunks accepted",
           (unsigned long long) STATS(SIDE_B)->num_chunk_recvs);
    return quiet_except(w, "badfrag");
}

static const char *chk_ack_new_dup(world_t *w)
{
    EXPECT(3 == STATS(SIDE_B)->num_ack_recvs, "%llu ACKs",
           (unsigned long long) STATS(SIDE_B)->num_ack_recvs);
    EXPECT(1 == STATS(SIDE_B)->num_dup_acks && 1 == STATS(SIDE_B)->num_fast_retrans,
           "%llu duplicate ACKs, %llu fast retransmits",
           (unsigned long long) STATS(SIDE_B)->num_dup_acks,
           (unsigned long long) STATS(SIDE_B)->num_fast_retrans);
    EXPECT((uint16_t)(FUZZ_ISN_B + 3) == EP_B->tx.ack_seq_rcvd, "acked up to %u",
           EP_B->tx.ack_seq_rcvd);
    return quiet_except(w, "");
}

static const char *chk_ack_piggyback(world_t *w)
{
    EXPECT(1 == STATS(SIDE_B)->num_frag_recvs, "frag not accepted");
    EXPECT((uint16_t)(FUZZ_ISN_B + 2) == EP_B->tx.ack_seq_rcvd, "acked up to %u",
           EP_B->tx.ack_seq_rcvd);
    return quiet_except(w, "");
}

static const char *chk_ack_old_bogus(world_t *w)
{
    EXPECT(1 == STATS(SIDE_B)->num_old_dup_acks && 1 == STATS(SIDE_B)->num_bogus_acks,
           "%llu old, %llu bogus ACKs", (unsigned long long) STATS(SIDE_B)->num_old_dup_acks,
           (unsigned long long) STATS(SIDE_B)->num_bogus_acks);
    EXPECT(1 == usnic_tx_window_inflight(&EP_B->tx), "B's segment no longer in flight");
    return quiet_except(w, "bogus_acks");
}

/* Whether region bytes [off, off + len) all hold v. */
static bool region_holds(size_t off, size_t len, uint8_t v)
{
    const uint8_t *r = fuzz_put_region();

    for (size_t i = off; i < off + len; ++i) {
        if (r[i] != v) {
            return false;
        }
    }
    return true;
}

static const char *chk_put_frag(world_t *w)
{
    EXPECT(1 == STATS(SIDE_B)->num_frag_recvs, "PUT frag not accepted");
    EXPECT(0 == w->nrx, "a PUT was delivered as a message");
    EXPECT(region_holds(100, 64, 0x77), "PUT data not in the region");
    return quiet_except(w, "");
}

static const char *chk_put_chunks(world_t *w)
{
    EXPECT(2 == STATS(SIDE_B)->num_chunk_recvs, "%llu PUT chunks accepted",
           (unsigned long long) STATS(SIDE_B)->num_chunk_recvs);
    EXPECT(0 == w->nrx, "a PUT was delivered as a message");
    EXPECT(NULL != EP_B->rx_frags && 0 == EP_B->rx_frags[3].frag_id, "PUT not complete");
    /* 8 bytes given and zeros in each chunk */
    EXPECT(region_holds(FUZZ_PUT_RW_LEN - (pmcp + 10), 8, 0x88) &&
               region_holds(FUZZ_PUT_RW_LEN - (pmcp + 2), pmcp - 8, 0) &&
               region_holds(FUZZ_PUT_RW_LEN - 10, 8, 0x99) && region_holds(FUZZ_PUT_RW_LEN - 2, 2, 0),
           "PUT data not in the region");
    return quiet_except(w, "");
}

static const char *chk_put_bad(world_t *w)
{
    EXPECT(5 == STATS(SIDE_B)->num_bad_recvs, "%llu bad datagrams",
           (unsigned long long) STATS(SIDE_B)->num_bad_recvs);
    EXPECT(0 == STATS(SIDE_B)->num_frag_recvs + STATS(SIDE_B)->num_chunk_recvs,
           "a bad PUT was accepted");
    return quiet_except(w, "bad");
}

static const char *chk_put_bad_handle(world_t *w)
{
    EXPECT(4 == STATS(SIDE_B)->num_bad_handles, "%llu bad handles",
           (unsigned long long) STATS(SIDE_B)->num_bad_handles);
    EXPECT(0 == STATS(SIDE_B)->num_frag_recvs + STATS(SIDE_B)->num_chunk_recvs,
           "a PUT naming no registration was accepted");
    EXPECT(region_holds(4096, 200, 0), "a PUT naming no registration wrote");
    return quiet_except(w, "bad");
}

static const char *chk_put_after_dereg(world_t *w)
{
    EXPECT(1 == STATS(SIDE_B)->num_frag_recvs && 1 == STATS(SIDE_B)->num_bad_recvs,
           "%llu frags accepted, %llu bad", (unsigned long long) STATS(SIDE_B)->num_frag_recvs,
           (unsigned long long) STATS(SIDE_B)->num_bad_recvs);
    return quiet_except(w, "bad");
}

static const char *chk_rdma_ok(world_t *w)
{
    EXPECT(3 == STATS(SIDE_B)->num_rdma_served && 0 == STATS(SIDE_B)->num_rdma_refused,
           "%llu GET/atomic requests carried out, %llu refused",
           (unsigned long long) STATS(SIDE_B)->num_rdma_served,
           (unsigned long long) STATS(SIDE_B)->num_rdma_refused);
    EXPECT(0 == w->nrx, "a GET/atomic request was delivered as a message");
    EXPECT(region_holds(200, 8, 0x55), "GET changed the region");
    {
        uint64_t v, c;
        memcpy(&v, fuzz_put_region() + 1024, 8);
        memcpy(&c, fuzz_put_region() + 2048, 8);
        EXPECT(0x5555555555555555ULL + 7 == v, "fetch-and-add left 0x%llx",
               (unsigned long long) v);
        EXPECT(99 == c, "compare-and-swap left %llu", (unsigned long long) c);
    }
    return quiet_except(w, "");
}

static const char *chk_rdma_bad(world_t *w)
{
    EXPECT(2 == STATS(SIDE_B)->num_rdma_refused, "%llu requests refused",
           (unsigned long long) STATS(SIDE_B)->num_rdma_refused);
    /* 2 refused, 1 malformed, 1 reply to nothing */
    EXPECT(4 == STATS(SIDE_B)->num_bad_recvs, "%llu bad datagrams",
           (unsigned long long) STATS(SIDE_B)->num_bad_recvs);
    EXPECT(1 == STATS(SIDE_B)->num_rdma_stray, "stray reply not counted");
    /* (a write into the refused memory would have been an AddressSanitizer report) */
    return quiet_except(w, "bad");
}

static const char *chk_malformed(world_t *w)
{
    EXPECT(8 == STATS(SIDE_B)->num_bad_recvs, "%llu bad datagrams",
           (unsigned long long) STATS(SIDE_B)->num_bad_recvs);
    EXPECT(1 == STATS(SIDE_B)->num_unk_recvs, "unknown sender not counted");
    EXPECT(1 == STATS(SIDE_B)->num_recv_errors, "oversized datagram not counted");
    EXPECT(0 == STATS(SIDE_B)->num_frag_recvs + STATS(SIDE_B)->num_chunk_recvs +
                    STATS(SIDE_B)->num_ack_recvs,
           "a malformed datagram was accepted");
    return quiet_except(w, "bad unk recv_err");
}

static const char *chk_window_edges(world_t *w)
{
    EXPECT(1 == STATS(SIDE_B)->num_oow_low_recvs && 1 == STATS(SIDE_B)->num_oow_high_recvs,
           "%llu below, %llu above the window",
           (unsigned long long) STATS(SIDE_B)->num_oow_low_recvs,
           (unsigned long long) STATS(SIDE_B)->num_oow_high_recvs);
    EXPECT(1 == STATS(SIDE_B)->num_frag_recvs, "the last frag of the window not accepted");
    return quiet_except(w, "oow_low oow_high");
}

static const char *chk_net(world_t *w)
{
    EXPECT(1 == STATS(SIDE_B)->num_frag_recvs, "frag not accepted");
    EXPECT(3 == STATS(SIDE_A)->num_chunk_recvs && 1 == STATS(SIDE_A)->num_frag_recvs,
           "A accepted %llu chunks, %llu frags",
           (unsigned long long) STATS(SIDE_A)->num_chunk_recvs,
           (unsigned long long) STATS(SIDE_A)->num_frag_recvs);
    EXPECT(3 == w->nrx, "%zu messages delivered (A 2, B 1)", w->nrx);
    EXPECT(0 == usnic_tx_window_inflight(&EP_B->tx), "B still has %u segments in flight",
           usnic_tx_window_inflight(&EP_B->tx));
    return quiet_except(w, "");
}

static const char *chk_owed_piggyback(world_t *w)
{
    EXPECT(1 == STATS(SIDE_B)->num_frag_recvs, "frag not accepted");
    EXPECT(1 == STATS(SIDE_B)->num_frag_sends && 0 == STATS(SIDE_B)->num_ack_sends,
           "B sent %llu frags and %llu standalone ACKs",
           (unsigned long long) STATS(SIDE_B)->num_frag_sends,
           (unsigned long long) STATS(SIDE_B)->num_ack_sends);
    return quiet_except(w, "");
}

static const char *chk_timeouts(world_t *w)
{
    EXPECT(2 == STATS(SIDE_B)->num_timeout_retrans, "%llu timeout retransmits",
           (unsigned long long) STATS(SIDE_B)->num_timeout_retrans);
    EXPECT(1 == STATS(SIDE_B)->num_ack_recvs, "ACK not counted");
    return quiet_except(w, "");
}

int main(int argc, char **argv)
{
    seed_t s;
    dgram_t d;
    size_t n;
    int fc = 1;
    char *fv[] = {argv[0], NULL};
    char **fvp = fv;

    if (2 != argc) {
        fprintf(stderr, "usage: make_seeds DIR\n");
        return 2;
    }
    outdir = argv[1];
    /* every seed in a fresh world: the check sees only what it did */
    setenv("FUZZ_REBUILD_EVERY", "1", 1);
    unsetenv("FUZZ_NO_DEREG");
    LLVMFuzzerInitialize(&fc, &fvp);
    w = fuzz_world();
    mcp = w->mods[SIDE_B].max_chunk_payload;
    pmcp = mcp - (uint32_t) sizeof(usnic_reg_ref_t);
    fuzz_after_input = after_input;

    /* one frag on the priority channel */
    seed_begin(&s, 0);
    n = mk_frag(&d, FUZZ_ISN_A, 0, 40, 0x5a);
    seed_add(&s, &d, n, 0);
    run_seed("frag-prio", &s, chk_frag_prio);

    /* frags on the data channel across the wrap: the last first (twice),
     * the rest in order, batched two at a time, then an old one again */
    seed_begin(&s, FUZZ_OPT_DATA_CHANNEL);
    n = mk_frag(&d, (uint16_t)(FUZZ_ISN_A + 17), 0, 24, 17);
    seed_add(&s, &d, n, 0);
    seed_add(&s, &d, n, FUZZ_REC_BATCH);
    for (int i = 0; i < 17; ++i) {
        n = mk_frag(&d, (uint16_t)(FUZZ_ISN_A + i), 0, 24, (uint8_t) i);
        seed_add(&s, &d, n, (i & 1) ? FUZZ_REC_BATCH : 0);
    }
    n = mk_frag(&d, (uint16_t)(FUZZ_ISN_A + 3), 0, 24, 3);
    seed_add(&s, &d, n, 0);
    run_seed("frag-data-wrap", &s, chk_frag_wrap);

    /* a fragment of two chunks: first, last */
    seed_begin(&s, FUZZ_OPT_DATA_CHANNEL);
    n = mk_chunk(&d, FUZZ_ISN_A, 5, mcp + 100, 0, (uint16_t) mcp, 0, 0x11);
    seed_add(&s, &d, n, 0);
    n = mk_chunk(&d, (uint16_t)(FUZZ_ISN_A + 1), 5, mcp + 100, mcp, 100, 0, 0x22);
    seed_add(&s, &d, n, 0);
    run_seed("chunks-first-last", &s, chk_chunks);

    /* the same, last first, batched, sent from the priority-channel
     * default with the other-channel flag, payloads mostly zero padding */
    seed_begin(&s, 0);
    n = mk_chunk(&d, (uint16_t)(FUZZ_ISN_A + 1), 5, mcp + 100, mcp, 100, 0, 0x22);
    seed_add_pad(&s, &d, n, FUZZ_REC_OTHER_CHANNEL | FUZZ_REC_BATCH);
    n = mk_chunk(&d, FUZZ_ISN_A, 5, mcp + 100, 0, (uint16_t) mcp, 0, 0x11);
    seed_add_pad(&s, &d, n, FUZZ_REC_OTHER_CHANNEL);
    run_seed("chunks-last-first", &s, chk_chunks);

    /* only the first chunk of three: left under reassembly */
    seed_begin(&s, FUZZ_OPT_DATA_CHANNEL);
    n = mk_chunk(&d, FUZZ_ISN_A, 9, 3 * mcp, 0, (uint16_t) mcp, 0, 0x33);
    seed_add_pad(&s, &d, n, 0);
    run_seed("chunk-first-only", &s, chk_chunk_first);

    /* only the last chunk of three */
    seed_begin(&s, FUZZ_OPT_DATA_CHANNEL);
    n = mk_chunk(&d, (uint16_t)(FUZZ_ISN_A + 2), 10, 2 * mcp + 7, 2 * mcp, 7, 0, 0x44);
    seed_add(&s, &d, n, 0);
    run_seed("chunk-last-only", &s, chk_chunk_last);

    /* a first chunk, then chunks that do not fit it: at half a chunk's
     * offset, of another fragment size, with a sequence number off by one */
    seed_begin(&s, FUZZ_OPT_DATA_CHANNEL);
    n = mk_chunk(&d, FUZZ_ISN_A, 1, mcp + 64, 0, (uint16_t) mcp, 0, 0x55);
    seed_add_pad(&s, &d, n, 0);
    n = mk_chunk(&d, (uint16_t)(FUZZ_ISN_A + 1), 1, mcp + 64, mcp / 2, 64, 0, 0x56);
    seed_add_pad(&s, &d, n, 0);
    n = mk_chunk(&d, (uint16_t)(FUZZ_ISN_A + 1), 1, mcp + 100, mcp, 100, 0, 0x57);
    seed_add_pad(&s, &d, n, 0);
    n = mk_chunk(&d, (uint16_t)(FUZZ_ISN_A + 2), 1, mcp + 64, mcp, 64, 0, 0x58);
    seed_add_pad(&s, &d, n, 0);
    run_seed("chunks-bad-tiling", &s, chk_chunk_bad);

    /* B has four segments out: a new ACK, its duplicate, a new one across
     * the wrap */
    seed_begin(&s, FUZZ_TRAFFIC_FOUR << FUZZ_OPT_TRAFFIC_SHIFT);
    n = mk_ack(&d, (uint16_t)(FUZZ_ISN_B + 1));
    seed_add(&s, &d, n, 0);
    seed_add(&s, &d, n, 0);
    n = mk_ack(&d, (uint16_t)(FUZZ_ISN_B + 3));
    seed_add(&s, &d, n, 0);
    run_seed("ack-new-dup", &s, chk_ack_new_dup);

    /* B has a chunked message and a small one out; a frag from A carries
     * an ACK for the chunks */
    seed_begin(&s, (FUZZ_TRAFFIC_LARGE << FUZZ_OPT_TRAFFIC_SHIFT));
    n = mk_frag(&d, FUZZ_ISN_A, 0, 16, 0x66);
    d.h.ack_present = 1;
    d.h.ack_seq = (uint16_t)(FUZZ_ISN_B + 2);
    seed_add(&s, &d, n, 0);
    run_seed("ack-piggyback", &s, chk_ack_piggyback);

    /* an old and a bogus ACK change nothing */
    seed_begin(&s, FUZZ_TRAFFIC_ONE << FUZZ_OPT_TRAFFIC_SHIFT);
    n = mk_ack(&d, (uint16_t)(FUZZ_ISN_B - 5));
    seed_add(&s, &d, n, 0);
    n = mk_ack(&d, (uint16_t)(FUZZ_ISN_B + 100));
    seed_add(&s, &d, n, 0);
    run_seed("ack-old-bogus", &s, chk_ack_old_bogus);

    /* PUT frag into the registered region */
    seed_begin(&s, 0);
    n = mk_frag(&d, FUZZ_ISN_A, FUZZ_PUT_BASE + 100, 64, 0x77);
    seed_add(&s, &d, n, 0);
    run_seed("put-frag", &s, chk_put_frag);

    /* PUT of two chunks, ending at the region's last byte */
    seed_begin(&s, FUZZ_OPT_DATA_CHANNEL);
    n = mk_chunk(&d, FUZZ_ISN_A, 3, pmcp + 10, 0, (uint16_t) pmcp,
                 FUZZ_PUT_BASE + FUZZ_PUT_RW_LEN - (pmcp + 10), 0x88);
    seed_add_pad(&s, &d, n, 0);
    n = mk_chunk(&d, (uint16_t)(FUZZ_ISN_A + 1), 3, pmcp + 10, pmcp, 10,
                 FUZZ_PUT_BASE + FUZZ_PUT_RW_LEN - (pmcp + 10), 0x99);
    seed_add_pad(&s, &d, n, 0);
    run_seed("put-chunks", &s, chk_put_chunks);

    /* PUTs outside the writable region: into the gap, into memory
     * registered for local writes only, across its end, before it, and a
     * chunked one across its end */
    seed_begin(&s, 0);
    n = mk_frag(&d, FUZZ_ISN_A, FUZZ_PUT_BASE + FUZZ_PUT_RW_LEN, 16, 1);
    seed_add(&s, &d, n, 0);
    n = mk_frag(&d, FUZZ_ISN_A, FUZZ_PUT_BASE + FUZZ_PUT_RO_OFF, 16, 2);
    seed_add(&s, &d, n, 0);
    n = mk_frag(&d, FUZZ_ISN_A, FUZZ_PUT_BASE + FUZZ_PUT_RW_LEN - 8, 16, 3);
    seed_add(&s, &d, n, 0);
    n = mk_frag(&d, FUZZ_ISN_A, FUZZ_PUT_BASE - 8, 16, 4);
    seed_add(&s, &d, n, 0);
    n = mk_chunk(&d, FUZZ_ISN_A, 2, 200, 0, 200, FUZZ_PUT_BASE + FUZZ_PUT_RW_LEN - 100, 5);
    seed_add(&s, &d, n, FUZZ_REC_OTHER_CHANNEL);
    run_seed("put-outside", &s, chk_put_bad);

    /* PUTs into the writable region naming no registration: a wrong key,
     * a slot never used, the last slot there is, and a chunked one */
    {
        usnic_reg_ref_t wrong = {.key = 0x5eed, .index = FUZZ_SLOT_RW};
        usnic_reg_ref_t unused = {.key = 0, .index = 7};
        usnic_reg_ref_t last = {.key = 0, .index = UINT32_MAX};

        seed_begin(&s, 0);
        n = mk_put_frag(&d, FUZZ_ISN_A, FUZZ_PUT_BASE + 4096, 16, 1, &wrong);
        seed_add(&s, &d, n, 0);
        n = mk_put_frag(&d, FUZZ_ISN_A, FUZZ_PUT_BASE + 4096, 16, 2, &unused);
        seed_add(&s, &d, n, 0);
        n = mk_put_frag(&d, FUZZ_ISN_A, FUZZ_PUT_BASE + 4096, 16, 3, &last);
        seed_add(&s, &d, n, 0);
        n = mk_chunk(&d, FUZZ_ISN_A, 2, 200, 0, 200, FUZZ_PUT_BASE + 4096, 5);
        memcpy(d.bytes + sizeof(d.ch), &wrong, sizeof(wrong));
        seed_add(&s, &d, n, FUZZ_REC_OTHER_CHANNEL);
        run_seed("put-bad-handle", &s, chk_put_bad_handle);
    }

    /* after a first frag the PML deregisters the writable region: a PUT
     * into it is refused from then on */
    seed_begin(&s, FUZZ_OPT_DEREG);
    n = mk_frag(&d, FUZZ_ISN_A, 0, 16, 0x31);
    seed_add(&s, &d, n, 0);
    n = mk_frag(&d, (uint16_t)(FUZZ_ISN_A + 1), FUZZ_PUT_BASE + 200, 16, 0x32);
    seed_add(&s, &d, n, 0);
    run_seed("put-after-dereg", &s, chk_put_after_dereg);

    /* malformed datagrams, with the warning after the first */
    seed_begin(&s, FUZZ_OPT_WARN);
    n = mk_frag(&d, FUZZ_ISN_A, 0, 16, 0);
    seed_add(&s, &d, 10, 0);                            /* shorter than a header */
    seed_add(&s, &d, 0, 0);                             /* empty */
    d.h.payload_type = 9;                               /* unknown type */
    seed_add(&s, &d, n, 0);
    n = mk_frag(&d, FUZZ_ISN_A, 0, 16, 0);
    d.h.payload_len = 100;                              /* longer than sent */
    seed_add(&s, &d, n, 0);
    n = mk_ack(&d, FUZZ_ISN_B);
    d.h.ack_present = 0;                                /* ACK without one */
    seed_add(&s, &d, n, 0);
    n = mk_ack(&d, FUZZ_ISN_B);
    d.h.payload_len = 4;                                /* ACK with payload */
    seed_add(&s, &d, n + 4, 0);
    n = mk_chunk(&d, FUZZ_ISN_A, 4, 100, 100, 10, 0, 0); /* offset at the end */
    seed_add(&s, &d, n, FUZZ_REC_OTHER_CHANNEL);
    n = mk_chunk(&d, FUZZ_ISN_A, 0, 100, 0, 10, 0, 0);  /* frag id 0 */
    seed_add(&s, &d, n, FUZZ_REC_OTHER_CHANNEL);
    n = mk_frag(&d, FUZZ_ISN_A, 0, 16, 0);
    d.h.sender ^= 0x100000000ULL;                       /* from nobody we know */
    seed_add(&s, &d, n, 0);
    n = mk_frag(&d, FUZZ_ISN_A, 0, 800, 0);              /* too large for the buffer */
    seed_add_pad(&s, &d, n, 0);
    run_seed("malformed", &s, chk_malformed);

    /* just below, at the top of and just above the receive window */
    seed_begin(&s, 0);
    n = mk_frag(&d, (uint16_t)(FUZZ_ISN_A - 1), 0, 8, 0);
    seed_add(&s, &d, n, 0);
    n = mk_frag(&d, (uint16_t)(FUZZ_ISN_A + USNIC_WINDOW_SIZE), 0, 8, 0);
    seed_add(&s, &d, n, 0);
    n = mk_frag(&d, (uint16_t)(FUZZ_ISN_A + USNIC_WINDOW_SIZE - 1), 0, 8, 0);
    seed_add(&s, &d, n, 0);
    run_seed("window-edges", &s, chk_window_edges);

    /* with the network: B's chunked message reaches A, A's ACKs come back */
    seed_begin(&s, FUZZ_OPT_NET | (FUZZ_TRAFFIC_LARGE << FUZZ_OPT_TRAFFIC_SHIFT));
    n = mk_frag(&d, FUZZ_ISN_A, 0, 32, 0x12);
    seed_add(&s, &d, n, 0);
    run_seed("net-traffic", &s, chk_net);

    /* B owes A an ACK for a frag and sends it on its own message */
    seed_begin(&s, FUZZ_OPT_SEND_AFTER);
    n = mk_frag(&d, FUZZ_ISN_A, 0, 16, 0x21);
    seed_add(&s, &d, n, 0);
    run_seed("ack-owed-piggyback", &s, chk_owed_piggyback);

    /* B's four segments time out and go again; one ACK for two of them */
    seed_begin(&s, FUZZ_OPT_TIMEOUTS | (FUZZ_TRAFFIC_FOUR << FUZZ_OPT_TRAFFIC_SHIFT));
    n = mk_ack(&d, (uint16_t)(FUZZ_ISN_B + 1));
    seed_add(&s, &d, n, 0);
    run_seed("timeouts", &s, chk_timeouts);

    /* GET, fetch-and-add and compare-and-swap inside the region: carried
     * out, replies sent */
    memset(fuzz_put_region(), 0x55, FUZZ_PUT_RW_LEN);
    memset(fuzz_put_region() + 2048, 0, 8);
    fuzz_put_region()[2048] = 42;
    seed_begin(&s, FUZZ_OPT_NET);
    n = mk_rdma(&d, FUZZ_ISN_A, USNIC_RDMA_GET, 0, FUZZ_PUT_BASE + 200, 100, 0, 0);
    seed_add(&s, &d, n, 0);
    n = mk_rdma(&d, (uint16_t)(FUZZ_ISN_A + 1), USNIC_RDMA_FOP, USNIC_AOP_ADD,
                FUZZ_PUT_BASE + 1024, 0, 7, 0);
    seed_add(&s, &d, n, 0);
    n = mk_rdma(&d, (uint16_t)(FUZZ_ISN_A + 2), USNIC_RDMA_CSWAP, 0, FUZZ_PUT_BASE + 2048, 0,
                42, 99);
    seed_add(&s, &d, n, 0);
    run_seed("rdma-get-atomics", &s, chk_rdma_ok);

    /* refused (memory registered for local writes only; past the end),
     * malformed (misaligned atomic) and a reply to no request */
    seed_begin(&s, 0);
    n = mk_rdma(&d, FUZZ_ISN_A, USNIC_RDMA_FOP, USNIC_AOP_ADD, FUZZ_PUT_BASE + FUZZ_PUT_RO_OFF,
                0, 1, 0);
    seed_add(&s, &d, n, 0);
    n = mk_rdma(&d, (uint16_t)(FUZZ_ISN_A + 1), USNIC_RDMA_GET, 0,
                FUZZ_PUT_BASE + FUZZ_PUT_RW_LEN - 10, 20, 0, 0);
    seed_add(&s, &d, n, 0);
    n = mk_rdma(&d, (uint16_t)(FUZZ_ISN_A + 2), USNIC_RDMA_AOP, USNIC_AOP_OR,
                FUZZ_PUT_BASE + 1028, 0, 1, 0);
    seed_add(&s, &d, n, 0);
    n = mk_rdma(&d, (uint16_t)(FUZZ_ISN_A + 3), USNIC_RDMA_REPLY, 0, 0, 0, 0, 0);
    seed_add(&s, &d, n, 0);
    run_seed("rdma-bad", &s, chk_rdma_bad);

    if (0 != failures) {
        fprintf(stderr, "make_seeds: %d seeds do not do what they should\n", failures);
        return 1;
    }
    return 0;
}
