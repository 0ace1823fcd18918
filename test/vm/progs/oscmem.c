/* Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 * SPDX-License-Identifier: BSD-3-Clause */
/* Memory of a long one-sided loop: every rank's peak RSS after many small operations.
 *
 * oscmem MODE ROUNDS [WIN_MB]: every rank runs ROUNDS rounds (default 1000) against its partner on
 * the other host (dp_cross_partner). A round is one operation of MODE on small buffers, its
 * synchronisation, and a check of what arrived:
 *   fence    MPI_Put then MPI_Get of contiguous, vector, indexed and struct int datatypes
 *            (counts 1..300, cycling), each in its own MPI_Win_fence epoch
 *   acc      MPI_Accumulate (MPI_SUM) and MPI_Get_accumulate of the same datatypes, fence
 *   atomics  MPI_Fetch_and_op and MPI_Compare_and_swap under MPI_Win_lock/unlock (exclusive)
 *   flush    MPI_Put and MPI_Get under MPI_Win_lock_all, completed with MPI_Win_flush
 *   pscw     MPI_Put in MPI_Win_post/start/complete/wait epochs
 *   winfence as fence, but each round on a window of its own (MPI_Win_create over fresh
 *            memory, then MPI_Win_free), as test suites that loop over datatypes do
 *   winalloc the same with MPI_Win_allocate
 * With WIN_MB, the one window of the modes other than win* is WIN_MB MiB of malloc'ed memory
 * (MPI_Win_create) of which the rounds touch the first few KiB, as MPICH's putfence1 and
 * getfence1 make it: the pages never touched must stay out of the RSS.
 * Each rank prints "oscmem: rank R mode M rounds N in S s peak_rss_kb P rss_kb_after_warmup W
 * rss_kb_end E": its peak RSS (VmHWM) and its RSS after the first quarter of the rounds and at
 * the end, so that a test can bound the growth per round of the last three quarters. Then
 * "oscmem: OK ..." (common.h).
 */
#include "common.h"

#define MAXCOUNT 300
#define WIN_INTS (4 * MAXCOUNT + 64)

static long status_kb(const char *key)
{
    char line[256];
    long kb = -1;
    FILE *f = fopen("/proc/self/status", "r");

    if (NULL == f) {
        return -1;
    }
    while (NULL != fgets(line, sizeof(line), f)) {
        if (0 == strncmp(line, key, strlen(key))) {
            kb = atol(line + strlen(key));
            break;
        }
    }
    fclose(f);
    return kb;
}

/* The datatypes of a round: kind 0..3 (contiguous, vector, indexed, struct), count elements;
 * *span is the ints the type covers. */
static MPI_Datatype make_type(int kind, int count, int *span)
{
    MPI_Datatype t, r;

    switch (kind) {
    case 0:
        MPI_Type_contiguous(count, MPI_INT, &t);
        *span = count;
        break;
    case 1:
        MPI_Type_vector(count, 1, 2, MPI_INT, &t);
        *span = 2 * count - 1;
        break;
    case 2: {
        int bl[3] = {1, count > 2 ? count - 2 : 1, 1}, disp[3] = {0, 2, count + 2};
        MPI_Type_indexed(3, bl, disp, MPI_INT, &t);
        *span = count + 3;
        break;
    }
    default: {
        int bl[2] = {count, 1};
        MPI_Aint disp[2] = {0, (MPI_Aint) (count + 1) * sizeof(int)};
        MPI_Datatype types[2] = {MPI_INT, MPI_INT};
        MPI_Type_create_struct(2, bl, disp, types, &r);
        MPI_Type_create_resized(r, 0, (MPI_Aint) (count + 2) * sizeof(int), &t);
        MPI_Type_free(&r);
        *span = count + 2;
        break;
    }
    }
    MPI_Type_commit(&t);
    return t;
}

int main(int argc, char **argv)
{
    const char *mode;
    double t0;
    long rounds = 0, nrounds, warm_kb = -1, win_mb;
    int *base, *src, *dst, partner;
    bool lower;
    MPI_Win win;
    MPI_Group world_group, peer_group;

    dp_init("oscmem", &argc, &argv);
    mode = argc > 1 ? argv[1] : "fence";
    nrounds = argc > 2 ? atol(argv[2]) : 1000;
    win_mb = argc > 3 ? atol(argv[3]) : 0;
    partner = dp_cross_partner(&lower);
    if (win_mb > 0) {
        base = dp_malloc((size_t) win_mb << 20);
    } else {
        MPI_Alloc_mem(WIN_INTS * sizeof(int), MPI_INFO_NULL, &base);
    }
    memset(base, 0, WIN_INTS * sizeof(int));
    MPI_Win_create(base, win_mb > 0 ? (MPI_Aint) win_mb << 20 : WIN_INTS * (MPI_Aint) sizeof(int),
                   sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &win);
    src = dp_malloc(WIN_INTS * sizeof(int));
    dst = dp_malloc(WIN_INTS * sizeof(int));
    MPI_Comm_group(MPI_COMM_WORLD, &world_group);
    MPI_Group_incl(world_group, 1, &partner, &peer_group);
    if (0 == strcmp(mode, "flush")) {
        MPI_Win_lock_all(0, win);
    }

    t0 = dp_now();
    while (rounds < nrounds) {
        int kind = (int) (rounds % 4), count = 1 + (int) ((rounds / 4) * 37 % MAXCOUNT), span;
        MPI_Datatype t = make_type(kind, count, &span);
        int v = (int) (rounds & 0xffff);

        for (int i = 0; i < span; ++i) {
            src[i] = v * 1000 + i;
        }
        if (0 == strncmp(mode, "win", 3)) {
            MPI_Win w2;
            int *mem;
            if (0 == strcmp(mode, "winalloc")) {
                MPI_Win_allocate(WIN_INTS * sizeof(int), sizeof(int), MPI_INFO_NULL,
                                 MPI_COMM_WORLD, &mem, &w2);
            } else {
                mem = dp_malloc(WIN_INTS * sizeof(int));
                MPI_Win_create(mem, WIN_INTS * sizeof(int), sizeof(int), MPI_INFO_NULL,
                               MPI_COMM_WORLD, &w2);
            }
            MPI_Win_fence(0, w2);
            MPI_Put(src, 1, t, partner, 0, 1, t, w2);
            MPI_Win_fence(0, w2);
            MPI_Get(dst, 1, t, partner, 0, 1, t, w2);
            MPI_Win_fence(0, w2);
            if (dst[0] != src[0]) {
                dp_fail("round %ld: got %d, expected %d", rounds, dst[0], src[0]);
            }
            MPI_Win_free(&w2);
            if (0 != strcmp(mode, "winalloc")) {
                free(mem);
            }
            dp_verified(sizeof(int));
        } else if (0 == strcmp(mode, "fence") || 0 == strcmp(mode, "acc")) {
            bool acc = 0 == strcmp(mode, "acc");
            MPI_Win_fence(0, win);
            if (acc) {
                MPI_Accumulate(src, 1, t, partner, 0, 1, t, MPI_SUM, win);
            } else {
                MPI_Put(src, 1, t, partner, 0, 1, t, win);
            }
            MPI_Win_fence(0, win);
            if (acc) {
                MPI_Get_accumulate(src, 1, t, dst, 1, t, partner, 0, 1, t, MPI_NO_OP, win);
            } else {
                MPI_Get(dst, 1, t, partner, 0, 1, t, win);
            }
            MPI_Win_fence(0, win);
            /* the partner wrote the same pattern into mine; the first int must be there */
            if (!acc && dst[0] != src[0]) {
                dp_fail("round %ld: got %d, expected %d", rounds, dst[0], src[0]);
            }
            dp_verified(sizeof(int));
            if (acc) {
                /* reset for the next round's sums */
                MPI_Win_fence(0, win);
                MPI_Put(base + 2 * MAXCOUNT, span, MPI_INT, partner, 0, span, MPI_INT, win);
                MPI_Win_fence(0, win);
            }
        } else if (0 == strcmp(mode, "atomics")) {
            int one = 1, old = 0, cmp = 0, val = 0;
            MPI_Win_lock(MPI_LOCK_EXCLUSIVE, partner, 0, win);
            MPI_Fetch_and_op(&one, &old, MPI_INT, partner, WIN_INTS - 1, MPI_SUM, win);
            MPI_Win_unlock(partner, win);
            MPI_Win_lock(MPI_LOCK_EXCLUSIVE, dp_rank, 0, win);
            MPI_Compare_and_swap(&v, &cmp, &val, MPI_INT, dp_rank, WIN_INTS - 2, win);
            cmp = v;
            MPI_Compare_and_swap(&cmp, &v, &val, MPI_INT, dp_rank, WIN_INTS - 2, win);
            MPI_Win_unlock(dp_rank, win);
            dp_verified(sizeof(int));
        } else if (0 == strcmp(mode, "flush")) {
            MPI_Put(src, 1, t, partner, 0, 1, t, win);
            MPI_Win_flush(partner, win);
            MPI_Get(dst, 1, t, partner, 0, 1, t, win);
            MPI_Win_flush(partner, win);
            dp_verified(sizeof(int));
        } else if (0 == strcmp(mode, "pscw")) {
            MPI_Win_post(peer_group, 0, win);
            MPI_Win_start(peer_group, 0, win);
            MPI_Put(src, 1, t, partner, 0, 1, t, win);
            MPI_Win_complete(win);
            MPI_Win_wait(win);
            dp_verified(sizeof(int));
        } else {
            if (0 == dp_rank) {
                printf("oscmem: ERROR unknown mode %s\n", mode);
            }
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
        MPI_Type_free(&t);
        dp_count_bytes_in(sizeof(int));
        ++rounds;
        if (rounds == nrounds / 4) {
            warm_kb = status_kb("VmRSS:");
        }
    }
    if (0 == strcmp(mode, "flush")) {
        MPI_Win_unlock_all(win);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    printf("oscmem: rank %d mode %s rounds %ld in %.1f s peak_rss_kb %ld rss_kb_after_warmup %ld "
           "rss_kb_end %ld\n",
           dp_rank, mode, rounds, dp_now() - t0, status_kb("VmHWM:"), warm_kb,
           status_kb("VmRSS:"));
    fflush(stdout);
    MPI_Group_free(&peer_group);
    MPI_Group_free(&world_group);
    MPI_Win_free(&win);
    if (win_mb > 0) {
        free(base);
    } else {
        MPI_Free_mem(base);
    }
    free(src);
    free(dst);
    return dp_finish();
}
