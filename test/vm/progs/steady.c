/* Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 * SPDX-License-Identifier: BSD-3-Clause */
/* steady: checksummed ping-pong between rank 0 and one rank on the other host for as long
 * as a test needs it, every byte checked; the traffic target of the rogue-sender test.
 *
 * Rank 0 and its partner (the lowest rank on the other host) ping-pong messages whose
 * sizes cycle through every usnic path: zero bytes, the priority fast path, one datagram,
 * several chunks, the eager limit and rendezvous (emulated PUT). The partner checks each
 * ping, XORs every byte with a second pattern and sends it back; rank 0 checks that.
 * Counts, sources and tags are checked too (progs/common.h reports mismatches).
 *
 * All other ranks are QUIET: they send nothing to rank 0 until the run ends (they sleep
 * and watch the stop file), so rank 0's usnic receive window for them does not move
 * during the run.
 *
 * Rank 0 also keeps a canary buffer that MPI never sees (so it is never registered):
 * the rogue sender aims emulated PUTs at it; it must never change.
 *
 * Rank 0 stops when the stop file exists (checked between iterations) or after MAXSECS;
 * it tells its partner, and every rank then meets in dp_finish().
 *
 * Usage: steady [-t MAXSECS] [-f STOPFILE] [-c CANARYBYTES] [-y USLEEP]
 *   -y  rank 0 sleeps this long between iterations (default 200 us): leaves CPU to others
 * Prints (rank 0): "steady: canary ADDR BYTES", "steady: rbuf ADDR BYTES",
 *   "steady: running" once the first iterations have been verified, "steady: t=S
 *   iterations=N" every 2 s, "steady: canary intact" or a MISMATCH line at the end, and
 *   dp_finish()'s "steady: OK N messages, B bytes verified".
 */
#include "common.h"

#include <unistd.h>

enum { TAG_PING = 31, TAG_PONG = 32, TAG_STOP = 33 };

static const size_t sizes[] = {
    0, 1, 8, 100, 700, 722, 723, 1500, 4050, 4051, 8082, 8083, 20000, 65536, 153544, 153545,
    307201,
};
#define NSIZES (sizeof(sizes) / sizeof(sizes[0]))
#define MAX_SIZE 307201

/* MPI_Test until done, napping now and then: the VM has two cores for every process */
static void gentle_wait(MPI_Request *req, MPI_Status *st)
{
    int done = 0;

    for (unsigned n = 1;; ++n) {
        MPI_Test(req, &done, st);
        if (done) {
            return;
        }
        if (0 == n % 256) {
            usleep(20);
        }
    }
}

static uint64_t ping_seed(long it, size_t size)
{
    return dp_seed(0x57ead1, it, size, 0);
}

static uint64_t pong_seed(long it, size_t size)
{
    return dp_seed(0x57ead2, it, size, 0);
}

static void check_status(const MPI_Status *st, int src, int tag, size_t size, const char *ctx)
{
    int count = -1;

    MPI_Get_count(st, MPI_BYTE, &count);
    if (st->MPI_SOURCE != src || st->MPI_TAG != tag || count < 0 || (size_t) count != size) {
        dp_fail("%s: status source %d tag %d count %d, expected source %d tag %d count %zu",
                ctx, st->MPI_SOURCE, st->MPI_TAG, count, src, tag, size);
    }
}

static bool stop_requested(const char *stopfile, double t0, double maxsecs)
{
    return (NULL != stopfile && 0 == access(stopfile, F_OK)) || dp_now() - t0 >= maxsecs;
}

static void run_rank0(int partner, const char *stopfile, double maxsecs, size_t canary_len,
                      long nap_us)
{
    uint8_t *sbuf = dp_malloc(MAX_SIZE), *rbuf = dp_malloc(MAX_SIZE + DP_GUARD);
    uint8_t *canary = dp_malloc(canary_len);
    uint64_t canary_seed = dp_seed(0xca9a, 1, 2, 3);
    double t0 = dp_now(), next_report = t0 + 2;
    char ctx[160];
    long it;

    dp_gen(canary, canary_len, canary_seed, 0);
    printf("steady: canary 0x%llx %zu\n", (unsigned long long)(uintptr_t) canary, canary_len);
    printf("steady: rbuf 0x%llx %d\n", (unsigned long long)(uintptr_t) rbuf, MAX_SIZE);
    fflush(stdout);
    for (it = 0; !stop_requested(stopfile, t0, maxsecs); ++it) {
        size_t size = sizes[it % NSIZES];
        uint8_t poison = (uint8_t)(0x3c ^ it);
        MPI_Request req[2];
        MPI_Status st[2];

        dp_gen(sbuf, size, ping_seed(it, size), 0);
        memset(rbuf, poison, size + DP_GUARD);
        MPI_Irecv(rbuf, MAX_SIZE + DP_GUARD, MPI_BYTE, partner, TAG_PONG, MPI_COMM_WORLD,
                  &req[0]);
        MPI_Isend(sbuf, (int) size, MPI_BYTE, partner, TAG_PING, MPI_COMM_WORLD, &req[1]);
        gentle_wait(&req[1], &st[1]);
        gentle_wait(&req[0], &st[0]);
        snprintf(ctx, sizeof(ctx), "pong of iteration %ld, %zu bytes", it, size);
        check_status(&st[0], partner, TAG_PONG, size, ctx);
        dp_check2(rbuf, size, ping_seed(it, size), pong_seed(it, size), 0, ctx);
        strncat(ctx, " (guard)", sizeof(ctx) - strlen(ctx) - 1);
        dp_check_fill(rbuf + size, DP_GUARD, poison, ctx);
        dp_count_in(size);
        dp_verified(size);
        if (0 == it % 64) {
            dp_check(canary, canary_len, canary_seed, 0, "canary (never given to MPI)");
        }
        if (NSIZES == it) {
            printf("steady: running\n");
            fflush(stdout);
        }
        if (dp_now() >= next_report) {
            printf("steady: t=%.0f iterations=%ld\n", dp_now() - t0, it + 1);
            fflush(stdout);
            next_report += 2;
        }
        if (nap_us > 0) {
            usleep((useconds_t) nap_us);
        }
    }
    MPI_Send(NULL, 0, MPI_BYTE, partner, TAG_STOP, MPI_COMM_WORLD);
    if (dp_check(canary, canary_len, canary_seed, 0, "canary (never given to MPI)")) {
        printf("steady: canary intact\n");
    }
    printf("steady: rank 0 stopped after %ld iterations, %.1f s\n", it, dp_now() - t0);
    fflush(stdout);
    free(sbuf);
    free(rbuf);
    free(canary);
}

static void run_partner(void)
{
    uint8_t *buf = dp_malloc(MAX_SIZE + DP_GUARD), *pat = dp_malloc(MAX_SIZE);
    char ctx[160];

    for (long it = 0;; ++it) {
        size_t size = sizes[it % NSIZES];
        uint8_t poison = (uint8_t)(0xc3 ^ it);
        MPI_Request req;
        MPI_Status st;

        memset(buf, poison, size + DP_GUARD);
        MPI_Irecv(buf, MAX_SIZE + DP_GUARD, MPI_BYTE, 0, MPI_ANY_TAG, MPI_COMM_WORLD, &req);
        gentle_wait(&req, &st);
        if (TAG_STOP == st.MPI_TAG) {
            break;
        }
        snprintf(ctx, sizeof(ctx), "ping of iteration %ld, %zu bytes", it, size);
        check_status(&st, 0, TAG_PING, size, ctx);
        dp_check(buf, size, ping_seed(it, size), 0, ctx);
        strncat(ctx, " (guard)", sizeof(ctx) - strlen(ctx) - 1);
        dp_check_fill(buf + size, DP_GUARD, poison, ctx);
        dp_count_in(size);
        dp_verified(size);
        dp_gen(pat, size, pong_seed(it, size), 0);
        for (size_t i = 0; i < size; ++i) {
            buf[i] ^= pat[i];
        }
        MPI_Send(buf, (int) size, MPI_BYTE, 0, TAG_PONG, MPI_COMM_WORLD);
    }
    free(buf);
    free(pat);
}

int main(int argc, char **argv)
{
    double maxsecs = 60;
    const char *stopfile = NULL;
    size_t canary_len = 65536;
    long nap_us = 200;
    int partner = -1;

    dp_init("steady", &argc, &argv);
    for (int i = 1; i + 1 < argc; i += 2) {
        if (0 == strcmp(argv[i], "-t")) {
            maxsecs = atof(argv[i + 1]);
        } else if (0 == strcmp(argv[i], "-f")) {
            stopfile = argv[i + 1];
        } else if (0 == strcmp(argv[i], "-c")) {
            canary_len = strtoull(argv[i + 1], NULL, 0);
        } else if (0 == strcmp(argv[i], "-y")) {
            nap_us = atol(argv[i + 1]);
        } else {
            if (0 == dp_rank) {
                printf("steady: unknown option %s\n", argv[i]);
            }
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
    }
    for (int r = 0; r < dp_size; ++r) {
        if (1 == dp_host_of[r]) {
            partner = r;
            break;
        }
    }
    if (0 == dp_rank) {
        printf("steady: rank 0 <-> rank %d, %d quiet rank(s), up to %.0f s\n", partner,
               dp_size - 2, maxsecs);
        fflush(stdout);
        run_rank0(partner, stopfile, maxsecs, canary_len, nap_us);
    } else if (dp_rank == partner) {
        run_partner();
    } else {
        /* quiet: no usnic traffic to rank 0 until dp_finish() */
        double t0 = dp_now();
        while (!stop_requested(stopfile, t0, maxsecs)) {
            usleep(100000);
        }
    }
    return dp_finish();
}
