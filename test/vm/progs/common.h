/* Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 * SPDX-License-Identifier: BSD-3-Clause */
/* Shared helpers of the data-path test programs (p2p.c, dtypes.c, flood.c, coll.c, osc.c).
 *
 * - Every rank learns which of the emulated hosts each rank runs on (2 in the VM, up to
 *   DP_MAX_HOSTS in the native world; host 0 is rank 0's, then in the order of the ranks).
 * - Data is a position-dependent pseudo-random byte stream: byte p of stream `seed` is
 *   pat_byte(seed, p). Seeds mix in everything that identifies a message (size, iteration,
 *   direction, sender, ...), so a byte that lands in the wrong place, the wrong message or the
 *   wrong iteration is caught.
 * - check_*() compare a buffer with the stream it must hold and report the first mismatch as
 *   "PROG: MISMATCH rank R (host) <context>: offset O expected 0xEE got 0xGG (N bytes differ)".
 *   Mismatches are counted, not fatal: the program runs on so that its message pattern (and so
 *   the peers) stays in step, and dp_finish() makes every rank exit 1 if any rank saw one.
 * - Each program adds, per message it receives from ANOTHER host, a lower bound of the
 *   datagrams the usnic BTL must have delivered for it (dp_count_in), or the data bytes that
 *   must have crossed (dp_count_bytes_in) where it cannot know the messages. dp_finish() prints
 *   the sum per host, "PROG: host NAME min_usnic_dgrams_in N", which the test scripts compare
 *   with the BTL's own counters (num_frag_recvs + num_chunk_recvs of the "stats final" lines).
 */
#ifndef DP_COMMON_H
#define DP_COMMON_H

#include <mpi.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Hosts a job may span (tools/netns-world/netns-world makes at most 8). */
#define DP_MAX_HOSTS 8
/* Bytes after each receive buffer that must stay untouched. */
#define DP_GUARD 64
/* helpers not every program uses */
#define DP_FN static __attribute__((unused))

/* No usnic datagram carries more than this much PML data: the device's datagram size less
 * the 32-byte usnic header. The size is USNIC_DP_MTU from the environment (UDP mode: the
 * interface MTU less 32, see docs/udp-mode.md), else 4096 (the RoCE maximum, what rxe uses). */
DP_FN unsigned long long dp_max_dgram_payload(void)
{
    static unsigned long long v;

    if (0 == v) {
        const char *e = getenv("USNIC_DP_MTU");
        v = (NULL != e && atoll(e) > 64 ? (unsigned long long) atoll(e) : 4096) - 32;
    }
    return v;
}
#define DP_MAX_DGRAM_PAYLOAD dp_max_dgram_payload()
/* Mismatch reports printed per rank (all are counted). */
#define DP_MAX_REPORTS 8

static const char *dp_prog = "?";
static int dp_rank, dp_size;
static int dp_my_host;                      /* 0 = rank 0's host, 1 = the next one, ... */
static int dp_nhosts;                       /* hosts the ranks run on */
static int *dp_host_of;                     /* host index of every rank */
static char dp_host_name[DP_MAX_HOSTS][MPI_MAX_PROCESSOR_NAME];
static long long dp_errors;                 /* mismatches seen by this rank */
static long long dp_reports;
static unsigned long long dp_msgs, dp_bytes; /* messages/bytes this rank verified */
static unsigned long long dp_min_dgrams_in; /* lower bound: usnic datagrams delivered here */
static unsigned long long dp_bytes_in;      /* data bytes that crossed into this rank's host */
static double dp_t0;
/* MPI_Init_thread with this level if >= 0 (set before dp_init); the level granted */
static int dp_thread_required = -1, dp_thread_provided = -1;

static inline uint64_t dp_mix64(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    x ^= x >> 31;
    return x;
}

/* A seed from up to four identifying numbers. */
static inline uint64_t dp_seed(uint64_t a, uint64_t b, uint64_t c, uint64_t d)
{
    return dp_mix64(dp_mix64(dp_mix64(dp_mix64(a + 0x1234567ull) ^ b) ^ c) ^ d);
}

static inline uint8_t dp_pat_byte(uint64_t seed, uint64_t p)
{
    return (uint8_t)(dp_mix64(seed + (p >> 3) * 0x9e3779b97f4a7c15ull) >> (8 * (p & 7)));
}

/* dst[i] = byte start+i of stream s1, XOR byte start+i of stream s2 if s2 != 0 */
DP_FN void dp_gen2(uint8_t *dst, size_t n, uint64_t s1, uint64_t s2, uint64_t start)
{
    size_t i = 0;

    while (i < n) {
        uint64_t p = start + i;
        uint64_t w = dp_mix64(s1 + (p >> 3) * 0x9e3779b97f4a7c15ull);
        if (0 != s2) {
            w ^= dp_mix64(s2 + (p >> 3) * 0x9e3779b97f4a7c15ull);
        }
        for (unsigned b = p & 7; b < 8 && i < n; ++b, ++i) {
            dst[i] = (uint8_t)(w >> (8 * b));
        }
    }
}

DP_FN void dp_gen(uint8_t *dst, size_t n, uint64_t seed, uint64_t start)
{
    dp_gen2(dst, n, seed, 0, start);
}

DP_FN double dp_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Count (and report the first few) mismatches. */
DP_FN void dp_mismatch(const char *ctx, size_t off, unsigned expected, unsigned got,
                        size_t nbad)
{
    ++dp_errors;
    if (dp_reports++ < DP_MAX_REPORTS) {
        printf("%s: MISMATCH rank %d (%s) %s: offset %zu expected 0x%02x got 0x%02x "
               "(%zu bytes differ)\n",
               dp_prog, dp_rank, dp_host_name[dp_my_host], ctx, off, expected, got, nbad);
        fflush(stdout);
    }
}

/* A failed condition that is not about data bytes (count, source, tag, ...). */
DP_FN void dp_fail(const char *fmt, ...)
{
    va_list ap;

    ++dp_errors;
    if (dp_reports++ < DP_MAX_REPORTS) {
        printf("%s: ERROR rank %d (%s): ", dp_prog, dp_rank, dp_host_name[dp_my_host]);
        va_start(ap, fmt);
        vprintf(fmt, ap);
        va_end(ap);
        printf("\n");
        fflush(stdout);
    }
}

/* buf[0..n) must be bytes start.. of stream s1 (XOR s2); returns true if so.
 * ctx describes the message for the report. */
DP_FN bool dp_check2(const uint8_t *buf, size_t n, uint64_t s1, uint64_t s2, uint64_t start,
                      const char *ctx)
{
    uint8_t exp[4096];
    size_t first = (size_t) -1, nbad = 0;
    unsigned e0 = 0, g0 = 0;

    for (size_t off = 0; off < n; off += sizeof(exp)) {
        size_t len = n - off < sizeof(exp) ? n - off : sizeof(exp);
        dp_gen2(exp, len, s1, s2, start + off);
        if (0 == memcmp(exp, buf + off, len)) {
            continue;
        }
        for (size_t i = 0; i < len; ++i) {
            if (exp[i] != buf[off + i]) {
                if ((size_t) -1 == first) {
                    first = off + i;
                    e0 = exp[i];
                    g0 = buf[off + i];
                }
                ++nbad;
            }
        }
    }
    if (0 != nbad) {
        dp_mismatch(ctx, first, e0, g0, nbad);
        return false;
    }
    return true;
}

DP_FN bool dp_check(const uint8_t *buf, size_t n, uint64_t seed, uint64_t start,
                     const char *ctx)
{
    return dp_check2(buf, n, seed, 0, start, ctx);
}

/* buf[0..n) must all be `value` (poison that must not have been written). */
DP_FN bool dp_check_fill(const uint8_t *buf, size_t n, uint8_t value, const char *ctx)
{
    size_t first = (size_t) -1, nbad = 0;

    for (size_t i = 0; i < n; ++i) {
        if (buf[i] != value) {
            if ((size_t) -1 == first) {
                first = i;
            }
            ++nbad;
        }
    }
    if (0 != nbad) {
        dp_mismatch(ctx, first, value, buf[first], nbad);
        return false;
    }
    return true;
}

/* A message of `bytes` PML payload bytes came from another host: the usnic BTL delivered
 * at least this many datagrams for it (zero-byte messages still need one). */
DP_FN void dp_count_in(size_t bytes)
{
    dp_min_dgrams_in += bytes <= DP_MAX_DGRAM_PAYLOAD
                            ? 1 : (bytes + DP_MAX_DGRAM_PAYLOAD - 1) / DP_MAX_DGRAM_PAYLOAD;
}

/* Data that must have crossed into this rank's host, where the messages that carried it are
 * not known (collectives, one-sided: the library may split or combine them). No datagram
 * carries more than DP_MAX_DGRAM_PAYLOAD bytes, so at least ceil(total / that) datagrams. */
DP_FN void dp_count_bytes_in(size_t bytes)
{
    dp_bytes_in += bytes;
}

DP_FN void dp_verified(size_t bytes)
{
    ++dp_msgs;
    dp_bytes += bytes;
}

DP_FN void *dp_malloc(size_t n)
{
    void *p = malloc(n > 0 ? n : 1);
    if (NULL == p) {
        fprintf(stderr, "%s: rank %d: out of memory (%zu bytes)\n", dp_prog, dp_rank, n);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    return p;
}

/* MPI_Init, rank/size, and the host of every rank. Needs ranks on 2 to DP_MAX_HOSTS hosts. */
DP_FN void dp_init(const char *prog, int *argc, char ***argv)
{
    char name[MPI_MAX_PROCESSOR_NAME] = "";
    char *all;
    int len;

    dp_prog = prog;
    if (dp_thread_required >= 0) {
        MPI_Init_thread(argc, argv, dp_thread_required, &dp_thread_provided);
    } else {
        MPI_Init(argc, argv);
    }
    dp_t0 = dp_now();
    MPI_Comm_rank(MPI_COMM_WORLD, &dp_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &dp_size);
    MPI_Get_processor_name(name, &len);
    all = dp_malloc((size_t) dp_size * MPI_MAX_PROCESSOR_NAME);
    MPI_Allgather(name, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, all, MPI_MAX_PROCESSOR_NAME,
                  MPI_CHAR, MPI_COMM_WORLD);
    dp_host_of = dp_malloc(dp_size * sizeof(int));
    /* DP_SPLIT_HOSTS=1 (only for trying a program on one machine): the lower half of the
     * ranks count as one host, the upper half as the other */
    if (NULL != getenv("DP_SPLIT_HOSTS")) {
        for (int r = 0; r < dp_size; ++r) {
            snprintf(all + (size_t) r * MPI_MAX_PROCESSOR_NAME, MPI_MAX_PROCESSOR_NAME,
                     "%s-%s", name, r < dp_size / 2 ? "lo" : "hi");
        }
    }
    dp_nhosts = 0;
    for (int r = 0; r < dp_size; ++r) {
        const char *n = all + (size_t) r * MPI_MAX_PROCESSOR_NAME;
        int h = 0;
        while (h < dp_nhosts && 0 != strcmp(n, dp_host_name[h])) {
            ++h;
        }
        if (h == dp_nhosts) {
            if (DP_MAX_HOSTS == dp_nhosts) {
                if (0 == dp_rank) {
                    printf("%s: ERROR ranks run on more than %d hosts\n", prog, DP_MAX_HOSTS);
                }
                MPI_Abort(MPI_COMM_WORLD, 2);
            }
            strcpy(dp_host_name[dp_nhosts++], n);
        }
        dp_host_of[r] = h;
    }
    dp_my_host = dp_host_of[dp_rank];
    if (dp_nhosts < 2) {
        if (0 == dp_rank) {
            printf("%s: ERROR all ranks run on %s: no inter-host traffic to test\n", prog,
                   dp_host_name[0]);
        }
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    free(all);
    if (0 == dp_rank) {
        printf("%s: %d ranks on %s", prog, dp_size, dp_host_name[0]);
        for (int h = 1; h < dp_nhosts; ++h) {
            printf("%s%s", h + 1 < dp_nhosts ? ", " : " and ", dp_host_name[h]);
        }
        printf("\n");
        fflush(stdout);
    }
}

/* Progress line from rank 0 (after a barrier, so it covers every rank). */
/* Pairs across the hosts: rank r < size/2 with rank r + size/2.  Returns the
 * partner and sets *lower; aborts unless the size is even and every pair
 * crosses the hosts. */
DP_FN int dp_cross_partner(bool *lower)
{
    int partner;

    if (0 != dp_size % 2) {
        if (0 == dp_rank) {
            printf("%s: ERROR needs an even number of ranks\n", dp_prog);
        }
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    *lower = dp_rank < dp_size / 2;
    partner = *lower ? dp_rank + dp_size / 2 : dp_rank - dp_size / 2;
    if (dp_host_of[partner] == dp_my_host) {
        dp_fail("partner rank %d runs on my host: the pairs do not cross the hosts", partner);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    return partner;
}

DP_FN void dp_phase_done(const char *what, double t_start)
{
    MPI_Barrier(MPI_COMM_WORLD);
    if (0 == dp_rank) {
        printf("%s: %s done in %.1f s\n", dp_prog, what, dp_now() - t_start);
        fflush(stdout);
    }
}

/* Totals, the per-host datagram bounds, the verdict; returns main's exit code (the same on
 * every rank: 1 if any rank saw a mismatch). */
DP_FN int dp_finish(void)
{
    long long errors = 0;
    unsigned long long mine[2 + DP_MAX_HOSTS] = {dp_msgs, dp_bytes}, sum[2 + DP_MAX_HOSTS];

    mine[2 + dp_my_host] =
        dp_min_dgrams_in + (dp_bytes_in + DP_MAX_DGRAM_PAYLOAD - 1) / DP_MAX_DGRAM_PAYLOAD;
    MPI_Allreduce(&dp_errors, &errors, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
    MPI_Allreduce(mine, sum, 2 + DP_MAX_HOSTS, MPI_UNSIGNED_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
    if (0 == dp_rank) {
        for (int h = 0; h < dp_nhosts; ++h) {
            printf("%s: host %s min_usnic_dgrams_in %llu\n", dp_prog, dp_host_name[h],
                   sum[2 + h]);
        }
        if (0 == errors) {
            printf("%s: OK %llu messages, %llu bytes verified (%.3f s)\n", dp_prog, sum[0],
                   sum[1], dp_now() - dp_t0);
        } else {
            printf("%s: FAILED %lld mismatches (%llu messages, %llu bytes checked)\n", dp_prog,
                   errors, sum[0], sum[1]);
        }
        fflush(stdout);
    }
    free(dp_host_of);
    MPI_Finalize();
    return 0 == errors ? 0 : 1;
}

#endif /* DP_COMMON_H */
