/* Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 * SPDX-License-Identifier: BSD-3-Clause */
/* stripe.c [-c COUNTS] [-s SIZES] [-r REPS]: MPI_Sendrecv across the hosts, both ways at once,
 * of (a) one element of MPI_Type_vector(count, 3, 7, MPI_INT) for every count in COUNTS and
 * (b) SIZES contiguous bytes, each REPS times. With two devices per host ob1 stripes every
 * rendezvous message over both usnic modules in pieces whose lengths are not multiples of an
 * int, so vector messages have elements split between fragments (and between modules).
 * Every byte is checked: the blocks of a vector receive hold the sender's ints, the gaps
 * between them (4 ints of every 7) and the guard after the buffer keep their fill value.
 * See progs/common.h for the checks and the datagram bound. */
#include "common.h"

#define FILL 0x5a

static size_t parse_list(const char *p, size_t **out)
{
    size_t n = 0, *v = dp_malloc((strlen(p) + 1) * sizeof(size_t));

    while (*p) {
        char *end;
        v[n++] = strtoull(p, &end, 0);
        if (end == p) {
            break;
        }
        p = ',' == *end ? end + 1 : end;
    }
    *out = v;
    return n;
}

/* One exchange of a vector of `count` blocks with the partner. */
static void vector_exchange(size_t count, int rep, int partner)
{
    size_t extent = count * 7 * sizeof(int), packed = count * 3 * sizeof(int);
    uint8_t *sbuf = dp_malloc(extent), *rbuf = dp_malloc(extent + DP_GUARD);
    uint64_t sseed = dp_seed(count, rep, dp_rank, 1), rseed = dp_seed(count, rep, partner, 1);
    MPI_Datatype vec;
    char ctx[96];
    bool ok = true;

    MPI_Type_vector((int) count, 3, 7, MPI_INT, &vec);
    MPI_Type_commit(&vec);
    dp_gen(sbuf, extent, sseed, 0);
    memset(rbuf, FILL, extent + DP_GUARD);
    MPI_Sendrecv(sbuf, 1, vec, partner, 7, rbuf, 1, vec, partner, 7, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);
    for (size_t b = 0; b < count && ok; ++b) {
        size_t blk = b * 7 * sizeof(int);
        snprintf(ctx, sizeof(ctx), "vector count %zu rep %d block %zu", count, rep, b);
        ok = dp_check(rbuf + blk, 3 * sizeof(int), rseed, blk, ctx);
        if (ok && b + 1 < count) {
            snprintf(ctx, sizeof(ctx), "vector count %zu rep %d gap after block %zu", count,
                     rep, b);
            ok = dp_check_fill(rbuf + blk + 3 * sizeof(int), 4 * sizeof(int), FILL, ctx);
        }
    }
    snprintf(ctx, sizeof(ctx), "vector count %zu rep %d: after the last block", count, rep);
    if (ok) {
        /* the last block ends 4 ints before the extent: that tail and the guard stay */
        dp_check_fill(rbuf + extent - 4 * sizeof(int), 4 * sizeof(int) + DP_GUARD, FILL, ctx);
    }
    dp_count_in(packed);
    dp_verified(packed);
    MPI_Type_free(&vec);
    free(sbuf);
    free(rbuf);
}

static void contig_exchange(size_t size, int rep, int partner)
{
    uint8_t *sbuf = dp_malloc(size), *rbuf = dp_malloc(size + DP_GUARD);
    char ctx[96];

    dp_gen(sbuf, size, dp_seed(size, rep, dp_rank, 2), 0);
    memset(rbuf, FILL, size + DP_GUARD);
    MPI_Sendrecv(sbuf, (int) size, MPI_BYTE, partner, 8, rbuf, (int) size, MPI_BYTE, partner, 8,
                 MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    snprintf(ctx, sizeof(ctx), "contiguous %zu B rep %d", size, rep);
    if (dp_check(rbuf, size, dp_seed(size, rep, partner, 2), 0, ctx)) {
        dp_check_fill(rbuf + size, DP_GUARD, FILL, ctx);
    }
    dp_count_in(size);
    dp_verified(size);
    free(sbuf);
    free(rbuf);
}

int main(int argc, char **argv)
{
    size_t *counts, *sizes, ncounts, nsizes;
    int reps = 2, partner;
    bool lower;
    double t;

    dp_init("stripe", &argc, &argv);
    ncounts = parse_list("1,60,339,2000,2134,8000,20000,160000", &counts);
    nsizes = parse_list("0,1,700,4064,4065,16384,25600,25601,153600,153601,1048576,4194307",
                        &sizes);
    for (int i = 1; i + 1 < argc; i += 2) {
        if (0 == strcmp(argv[i], "-c")) {
            ncounts = parse_list(argv[i + 1], &counts);
        } else if (0 == strcmp(argv[i], "-s")) {
            nsizes = parse_list(argv[i + 1], &sizes);
        } else if (0 == strcmp(argv[i], "-r")) {
            reps = atoi(argv[i + 1]);
        }
    }
    partner = dp_cross_partner(&lower);
    t = dp_now();
    for (size_t i = 0; i < ncounts; ++i) {
        for (int r = 0; r < reps; ++r) {
            vector_exchange(counts[i], r, partner);
        }
    }
    dp_phase_done("vector exchanges", t);
    t = dp_now();
    for (size_t i = 0; i < nsizes; ++i) {
        for (int r = 0; r < reps; ++r) {
            contig_exchange(sizes[i], r, partner);
        }
    }
    dp_phase_done("contiguous exchanges", t);
    return dp_finish();
}
