/* Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 * SPDX-License-Identifier: BSD-3-Clause */
/* osc-lat: one-sided latency as a ratio to the same run's round trip.
 *
 * Two ranks (one per host). ROUNDS rounds (default 5); each round measures, with ITERS
 * iterations each (default 200, median taken), in slices of SLICE iterations (20) taken in
 * turn, so that every op's samples and the round trip's are spread over the same stretch of
 * time (a slow phase of the world, e.g. an emulated host's vCPU descheduled, then weighs on
 * all of them alike instead of on whichever op ran during it):
 *   rtt      8 B MPI_Send/MPI_Recv ping-pong round trip (the unit)
 *   put      MPI_Put of 8 B + MPI_Win_flush          (lock_all epoch)
 *   get      MPI_Get of 8 B + MPI_Win_flush
 *   fop      MPI_Fetch_and_op (MPI_SUM, int64) + MPI_Win_flush
 *   cas      MPI_Compare_and_swap (int64) + MPI_Win_flush
 *   acc      MPI_Accumulate of 8 B (MPI_SUM, int64) + MPI_Win_flush
 *   fence    MPI_Win_fence epoch with one 8 B MPI_Put from each rank (own window)
 *   lock     MPI_Win_lock(MPI_LOCK_EXCLUSIVE) of the target and MPI_Win_unlock, empty epoch
 *   xfop     fetch-and-op + flush inside an exclusive lock of the target held meanwhile
 *            (osc/rdma then takes no accumulate lock: the atomic alone)
 *   sfop     fetch-and-op + flush aimed at the origin's own window
 *   slock    exclusive lock and unlock of the origin's own window
 * Rank 0 is the origin; rank 1, the target, only progresses meanwhile (it waits in the
 * barrier that ends each op's iterations; the ping-pong and the fence involve both).
 * Prints per round "osc-lat: round R rtt_us X put Y get Y ..." where every op is the
 * ratio of its median to that round's rtt median, and at the end the median over the rounds
 * of each ratio: "osc-lat: median put Y get Y ...".
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NOPS 11
#define SLICE 20
static const char *names[NOPS] = {"rtt", "put", "get", "fop", "cas", "acc", "fence",
                                  "lock", "xfop", "sfop", "slock"};

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *) a, y = *(const double *) b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    qsort(v, (size_t) n, sizeof(double), cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

int main(int argc, char **argv)
{
    int rounds = argc > 1 ? atoi(argv[1]) : 5, iters = argc > 2 ? atoi(argv[2]) : 200;
    int rank, size, peer;
    int64_t *base, *fbase, *xbase, one = 1, res = 0, cmp = 0, buf = 0;
    double *t[NOPS], *ratio[NOPS];
    MPI_Win win, fwin, xwin;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (2 != size) {
        if (0 == rank) {
            printf("osc-lat: ERROR needs 2 ranks\n");
        }
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    peer = 1 - rank;
    iters = (iters + SLICE - 1) / SLICE * SLICE;
    for (int k = 0; k < NOPS; ++k) {
        t[k] = malloc((size_t) iters * sizeof(double));
        ratio[k] = malloc((size_t) rounds * sizeof(double));
    }
    MPI_Win_allocate(64, sizeof(int64_t), MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win);
    memset(base, 0, 64);
    MPI_Win_allocate(64, sizeof(int64_t), MPI_INFO_NULL, MPI_COMM_WORLD, &fbase, &fwin);
    memset(fbase, 0, 64);
    /* exclusive locks: a window without the lock_all epoch of win */
    MPI_Win_allocate(64, sizeof(int64_t), MPI_INFO_NULL, MPI_COMM_WORLD, &xbase, &xwin);
    memset(xbase, 0, 64);
    MPI_Win_lock_all(0, win);

    for (int r = 0; r < rounds; ++r) {
        double med[NOPS];

        for (int s = 0; s < iters; s += SLICE) {
            for (int k = 0; k < NOPS; ++k) {
                MPI_Barrier(MPI_COMM_WORLD);
                if (8 == k && 0 == rank) {
                    MPI_Win_lock(MPI_LOCK_EXCLUSIVE, peer, 0, xwin);
                }
                /* (two unrecorded iterations first: the way out of the barrier) */
                for (int i = -2; i < SLICE; ++i) {
                    double t0 = MPI_Wtime();
                    if (0 == k) {
                        if (0 == rank) {
                            MPI_Send(&buf, 1, MPI_INT64_T, peer, 1, MPI_COMM_WORLD);
                            MPI_Recv(&buf, 1, MPI_INT64_T, peer, 1, MPI_COMM_WORLD,
                                     MPI_STATUS_IGNORE);
                        } else {
                            MPI_Recv(&buf, 1, MPI_INT64_T, peer, 1, MPI_COMM_WORLD,
                                     MPI_STATUS_IGNORE);
                            MPI_Send(&buf, 1, MPI_INT64_T, peer, 1, MPI_COMM_WORLD);
                        }
                    } else if (6 == k) {
                        MPI_Win_fence(0, fwin);
                        MPI_Put(&buf, 1, MPI_INT64_T, peer, 0, 1, MPI_INT64_T, fwin);
                        MPI_Win_fence(0, fwin);
                    } else if (0 == rank) {
                        switch (k) {
                        case 1:
                            MPI_Put(&buf, 1, MPI_INT64_T, peer, 0, 1, MPI_INT64_T, win);
                            break;
                        case 2:
                            MPI_Get(&res, 1, MPI_INT64_T, peer, 1, 1, MPI_INT64_T, win);
                            break;
                        case 3:
                            MPI_Fetch_and_op(&one, &res, MPI_INT64_T, peer, 2, MPI_SUM, win);
                            break;
                        case 4:
                            MPI_Compare_and_swap(&one, &cmp, &res, MPI_INT64_T, peer, 3, win);
                            break;
                        case 5:
                            MPI_Accumulate(&one, 1, MPI_INT64_T, peer, 4, 1, MPI_INT64_T,
                                           MPI_SUM, win);
                            break;
                        case 7:
                        case 10:
                            MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 7 == k ? peer : rank, 0, xwin);
                            MPI_Win_unlock(7 == k ? peer : rank, xwin);
                            break;
                        case 8:
                            MPI_Fetch_and_op(&one, &res, MPI_INT64_T, peer, 2, MPI_SUM, xwin);
                            MPI_Win_flush(peer, xwin);
                            break;
                        default:
                            MPI_Fetch_and_op(&one, &res, MPI_INT64_T, rank, 2, MPI_SUM, win);
                            MPI_Win_flush(rank, win);
                            break;
                        }
                        if (k <= 5) {
                            MPI_Win_flush(peer, win);
                        }
                    }
                    if (i >= 0) {
                        t[k][s + i] = MPI_Wtime() - t0;
                    }
                }
                if (8 == k && 0 == rank) {
                    MPI_Win_unlock(peer, xwin);
                }
                /* the target only progresses: it waits in this barrier */
                MPI_Barrier(MPI_COMM_WORLD);
            }
        }
        for (int k = 0; k < NOPS; ++k) {
            med[k] = median(t[k], iters);
        }
        if (0 == rank) {
            printf("osc-lat: round %d rtt_us %.1f", r, med[0] * 1e6);
            for (int k = 1; k < NOPS; ++k) {
                ratio[k][r] = med[k] / med[0];
                printf(" %s %.2f", names[k], ratio[k][r]);
            }
            ratio[0][r] = med[0] * 1e6;
            printf("\n");
            fflush(stdout);
        }
    }
    if (0 == rank) {
        printf("osc-lat: median rtt_us %.1f", median(ratio[0], rounds));
        for (int k = 1; k < NOPS; ++k) {
            printf(" %s %.2f", names[k], median(ratio[k], rounds));
        }
        printf("\n");
    }
    MPI_Win_unlock_all(win);
    MPI_Win_free(&xwin);
    MPI_Win_free(&fwin);
    MPI_Win_free(&win);
    for (int k = 0; k < NOPS; ++k) {
        free(ratio[k]);
        free(t[k]);
    }
    MPI_Finalize();
    return 0;
}
