/* Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 * SPDX-License-Identifier: BSD-3-Clause */
/* faultmix: all-to-all traffic among every rank, for the fault-injection tests (t-faults*.sh):
 * every message checked for content, count, source and per-source order, and nothing may
 * arrive twice or be left over.
 *
 *   exchange  for each size and round, every rank posts (n-1)*K receives with MPI_ANY_SOURCE,
 *             then sends K messages to every other rank (destinations rotated by rank). The
 *             j-th message a rank gets from source s must be message j of s (MPI keeps one
 *             source's messages in order): its pattern depends on (size, round, j, s, me), so
 *             a lost, duplicated, reordered or misdelivered message shows up as a wrong pattern
 *             or a wrong number of messages per source.
 *   alltoall  MPI_Alltoall with blocks of 1, 1000 and 40000 bytes, every block checked.
 *   leftover  after a barrier, MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG) for a while: a message
 *             nobody sent (a duplicate delivered twice) would still be waiting.
 * Receive buffers are poisoned and have a guard that must stay untouched.
 *
 * Usage: faultmix [-s SIZE,SIZE,...] [-r ROUNDS] [-k K]
 *   default sizes 0,1,722,723,4050,4051,16384,153544,153545 (the usnic/ob1 protocol
 *   boundaries, see p2p.c), 2 rounds, K = 2
 */
#include "common.h"

#include <unistd.h>

/* exchange i (size index * rounds + round) uses tag TAG_X + i: a fast rank's next exchange
 * cannot match the receives of the one its peers are still in */
enum { TAG_X = 100 };

static const size_t default_sizes[] = {0, 1, 722, 723, 4050, 4051, 16384, 153544, 153545};

static size_t *sizes;
static int nsizes, rounds = 2, burst = 2;
static int leader[DP_MAX_HOSTS], nhost[DP_MAX_HOSTS];

static void parse_sizes(const char *list)
{
    int n = 1;

    for (const char *q = list; *q; ++q) {
        n += ',' == *q;
    }
    sizes = dp_malloc(n * sizeof(size_t));
    nsizes = 0;
    while (*list) {
        char *end;
        unsigned long long v = strtoull(list, &end, 0);
        if (end == list) {
            break;
        }
        sizes[nsizes++] = (size_t) v;
        list = ',' == *end ? end + 1 : end;
    }
}

static uint64_t x_seed(size_t size, int round, int j, int src, int dst)
{
    return dp_seed(60 + (uint64_t) round * 1000 + j, size, src, dst);
}

static void exchange(size_t size, int round, int tag, uint8_t *sbuf, uint8_t *rbuf,
                     MPI_Request *req, MPI_Status *st, int *seen)
{
    int npeers = dp_size - 1, nrecv = npeers * burst, nreq = 0;
    size_t slot = size + DP_GUARD;
    uint8_t poison = (uint8_t)(0x3c ^ size ^ round);
    char ctx[200];

    for (int i = 0; i < nrecv; ++i) {
        memset(rbuf + (size_t) i * slot, poison, slot);
        MPI_Irecv(rbuf + (size_t) i * slot, (int) slot, MPI_BYTE, MPI_ANY_SOURCE, tag,
                  MPI_COMM_WORLD, &req[nreq++]);
    }
    for (int d = 1; d <= npeers; ++d) {
        int dst = (dp_rank + d) % dp_size;
        for (int j = 0; j < burst; ++j) {
            uint8_t *sb = sbuf + ((size_t)(d - 1) * burst + j) * size;
            dp_gen(sb, size, x_seed(size, round, j, dp_rank, dst), 0);
            MPI_Isend(sb, (int) size, MPI_BYTE, dst, tag, MPI_COMM_WORLD, &req[nreq++]);
        }
    }
    MPI_Waitall(nreq, req, st);
    memset(seen, 0, dp_size * sizeof(int));
    for (int i = 0; i < nrecv; ++i) {
        uint8_t *rb = rbuf + (size_t) i * slot;
        int src = st[i].MPI_SOURCE, count = -1, j;
        MPI_Get_count(&st[i], MPI_BYTE, &count);
        if (src < 0 || src >= dp_size || src == dp_rank || st[i].MPI_TAG != tag) {
            dp_fail("exchange size %zu round %d: receive %d has source %d tag %d", size, round,
                    i, src, st[i].MPI_TAG);
            continue;
        }
        j = seen[src]++;
        snprintf(ctx, sizeof(ctx), "exchange size %zu round %d: message %d from rank %d", size,
                 round, j, src);
        if (j >= burst) {
            dp_fail("%s: rank %d sent only %d messages (duplicate?)", ctx, src, burst);
            continue;
        }
        if (count < 0 || (size_t) count != size) {
            dp_fail("%s: %d bytes, expected %zu", ctx, count, size);
            continue;
        }
        dp_check(rb, size, x_seed(size, round, j, src, dp_rank), 0, ctx);
        strncat(ctx, " (guard after the data)", sizeof(ctx) - strlen(ctx) - 1);
        dp_check_fill(rb + size, DP_GUARD, poison, ctx);
        if (dp_host_of[src] != dp_my_host) {
            dp_count_in(size);
        }
        dp_verified(size);
    }
    for (int s = 0; s < dp_size; ++s) {
        if (s != dp_rank && seen[s] != burst) {
            dp_fail("exchange size %zu round %d: %d messages from rank %d, expected %d", size,
                    round, seen[s], s, burst);
        }
    }
}

static void alltoalls(int round)
{
    static const size_t blks[] = {1, 1000, 40000};
    char ctx[200];

    for (size_t i = 0; i < sizeof(blks) / sizeof(blks[0]); ++i) {
        size_t b = blks[i], total = b * dp_size;
        uint8_t *in = dp_malloc(total), *out = dp_malloc(total + DP_GUARD);
        uint8_t poison = (uint8_t)(0x55 ^ b ^ round);
        for (int r = 0; r < dp_size; ++r) {
            dp_gen(in + r * b, b, dp_seed(70 + round, b, dp_rank, r), 0);
        }
        memset(out, poison, total + DP_GUARD);
        MPI_Alltoall(in, (int) b, MPI_BYTE, out, (int) b, MPI_BYTE, MPI_COMM_WORLD);
        for (int r = 0; r < dp_size; ++r) {
            snprintf(ctx, sizeof(ctx), "alltoall round %d block %zu: block from rank %d", round,
                     b, r);
            dp_check(out + r * b, b, dp_seed(70 + round, b, r, dp_rank), 0, ctx);
        }
        snprintf(ctx, sizeof(ctx), "alltoall round %d block %zu (guard after the data)", round,
                 b);
        dp_check_fill(out + total, DP_GUARD, poison, ctx);
        dp_verified(total);
        for (int h = 0; h < dp_nhosts; ++h) {
            if (dp_rank == leader[h]) {
                dp_count_bytes_in(b * nhost[h] * (dp_size - nhost[h]));
            }
        }
        free(in);
        free(out);
    }
}

/* nothing may be left to receive once everything sent has been received */
static void leftovers(void)
{
    double t0;

    MPI_Barrier(MPI_COMM_WORLD);
    t0 = dp_now();
    while (dp_now() - t0 < 0.3) {
        int flag = 0, count = -1;
        MPI_Status st;
        MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &st);
        if (flag) {
            MPI_Get_count(&st, MPI_BYTE, &count);
            dp_fail("leftover: a message nobody sent is waiting: source %d tag %d, %d bytes",
                    st.MPI_SOURCE, st.MPI_TAG, count);
            break;
        }
        usleep(1000);
    }
    MPI_Barrier(MPI_COMM_WORLD);
}

int main(int argc, char **argv)
{
    size_t maxsize = 0;
    uint8_t *sbuf, *rbuf;
    MPI_Request *req;
    MPI_Status *st;
    int *seen;
    double t;

    dp_init("faultmix", &argc, &argv);
    sizes = (size_t *) default_sizes;
    nsizes = sizeof(default_sizes) / sizeof(default_sizes[0]);
    for (int i = 1; i + 1 < argc; i += 2) {
        if (0 == strcmp(argv[i], "-s")) {
            parse_sizes(argv[i + 1]);
        } else if (0 == strcmp(argv[i], "-r")) {
            rounds = atoi(argv[i + 1]);
        } else if (0 == strcmp(argv[i], "-k")) {
            burst = atoi(argv[i + 1]);
        } else {
            if (0 == dp_rank) {
                printf("faultmix: unknown option %s\n", argv[i]);
            }
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
    }
    if (rounds < 1 || burst < 1) {
        if (0 == dp_rank) {
            printf("faultmix: ERROR -r and -k must be at least 1\n");
        }
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    for (int h = 0; h < DP_MAX_HOSTS; ++h) {
        leader[h] = -1;
    }
    for (int r = dp_size - 1; r >= 0; --r) {
        leader[dp_host_of[r]] = r;
        nhost[dp_host_of[r]]++;
    }
    for (int i = 0; i < nsizes; ++i) {
        maxsize = sizes[i] > maxsize ? sizes[i] : maxsize;
    }
    if (0 == dp_rank) {
        printf("faultmix: %d sizes up to %zu bytes, %d rounds, %d messages per pair\n", nsizes,
               maxsize, rounds, burst);
        fflush(stdout);
    }
    sbuf = dp_malloc((size_t)(dp_size - 1) * burst * maxsize);
    rbuf = dp_malloc((size_t)(dp_size - 1) * burst * (maxsize + DP_GUARD));
    req = dp_malloc(2 * (size_t)(dp_size - 1) * burst * sizeof(MPI_Request));
    st = dp_malloc(2 * (size_t)(dp_size - 1) * burst * sizeof(MPI_Status));
    seen = dp_malloc(dp_size * sizeof(int));

    t = dp_now();
    for (int i = 0; i < nsizes; ++i) {
        for (int r = 0; r < rounds; ++r) {
            exchange(sizes[i], r, TAG_X + i * rounds + r, sbuf, rbuf, req, st, seen);
        }
    }
    dp_phase_done("exchange", t);
    t = dp_now();
    for (int r = 0; r < rounds; ++r) {
        alltoalls(r);
    }
    dp_phase_done("alltoall", t);
    leftovers();
    free(sbuf);
    free(rbuf);
    free(req);
    free(st);
    free(seen);
    return dp_finish();
}
