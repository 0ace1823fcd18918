/* Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 * SPDX-License-Identifier: BSD-3-Clause */
/* livedead: a peer that answers liveness pings while busy, then dies silently (t-liveforge.sh).
 * Rank 0 (hostA) sends rank 1 (hostB) a 2 MiB message while rank 1 stays outside MPI for
 * BUSY seconds (argument, default 5): rank 0's data stays unacknowledged, so it pings rank 1,
 * whose progress thread answers that it is busy. Then a checked ping-pong of 3000 bytes runs
 * until the job ends; rank 1 prints "livedead: ping-pong" when it starts (the test then
 * freezes rank 1 with SIGSTOP: a dead peer, whose process mpirun still sees). */
#include "common.h"

#include <errno.h>

#define BIG (2u << 20)

int main(int argc, char **argv)
{
    double busy = argc > 1 ? atof(argv[1]) : 5.0;
    uint8_t *big = malloc(BIG), buf[3000];
    int rank;

    dp_init("livedead", &argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (NULL == big) {
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (0 == rank) {
        dp_gen(big, BIG, 1, 0);
        MPI_Send(big, BIG, MPI_BYTE, 1, 1, MPI_COMM_WORLD);
    } else {
        double end = dp_now() + busy;
        while (dp_now() < end) {        /* outside MPI */
            struct timespec ts = {.tv_sec = 0, .tv_nsec = 50000000};
            if (0 != nanosleep(&ts, NULL) && EINTR != errno) {
                break;
            }
        }
        MPI_Recv(big, BIG, MPI_BYTE, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        dp_check(big, BIG, 1, 0, "the 2 MiB message");
        printf("livedead: ping-pong\n");
        fflush(stdout);
    }
    for (uint64_t i = 0;; ++i) {
        uint64_t seed = dp_seed(96, (int) (i & 0xffff), 0, 0);
        if (0 == rank) {
            dp_gen(buf, sizeof(buf), seed, 0);
            MPI_Send(buf, sizeof(buf), MPI_BYTE, 1, 2, MPI_COMM_WORLD);
            MPI_Recv(buf, sizeof(buf), MPI_BYTE, 1, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else {
            MPI_Recv(buf, sizeof(buf), MPI_BYTE, 0, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            dp_check(buf, sizeof(buf), seed, 0, "ping-pong");
            MPI_Send(buf, sizeof(buf), MPI_BYTE, 0, 2, MPI_COMM_WORLD);
        }
    }
}
