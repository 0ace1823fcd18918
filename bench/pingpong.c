/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 * $COPYRIGHT$
 * SPDX-License-Identifier: BSD-3-Clause
 *
 * OSU-style ping-pong between ranks 0 and 1: for each size, warm-up
 * round trips, then timed ones; prints half the round-trip time and the
 * bandwidth it implies.  Options: -m MAXSIZE (bytes, default 4 MiB),
 * -i ITERS (default 200; large sizes use fewer), -w WARMUP (default 20).
 */

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    size_t max_size = 4u << 20;
    int iters = 200, warmup = 20, rank, nprocs, opt;
    char *buf;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
    while ((opt = getopt(argc, argv, "m:i:w:")) != -1) {
        switch (opt) {
        case 'm': max_size = strtoull(optarg, NULL, 0); break;
        case 'i': iters = atoi(optarg); break;
        case 'w': warmup = atoi(optarg); break;
        default:
            if (0 == rank) {
                fprintf(stderr, "usage: %s [-m maxsize] [-i iters] [-w warmup]\n", argv[0]);
            }
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
    }
    if (nprocs < 2) {
        if (0 == rank) {
            fprintf(stderr, "pingpong needs 2 ranks\n");
        }
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    buf = malloc(max_size > 0 ? max_size : 1);
    memset(buf, rank, max_size);
    if (0 == rank) {
        printf("# usnic BTL ping-pong, ranks 0 and 1\n# %-10s %14s %14s\n", "size", "latency(us)",
               "bandwidth(MB/s)");
    }
    for (size_t size = 0; size <= max_size; size = size ? size * 2 : 1) {
        /* fewer round trips for large messages: the emulated network is slow */
        int n = size >= (1u << 20) ? iters / 20 + 1 : size >= (64u << 10) ? iters / 4 + 1 : iters;
        int w = size >= (1u << 20) ? 1 : warmup;
        double t0 = 0;

        if (rank < 2) {
            for (int i = 0; i < w + n; ++i) {
                if (i == w) {
                    t0 = MPI_Wtime();
                }
                if (0 == rank) {
                    MPI_Send(buf, (int) size, MPI_BYTE, 1, 1, MPI_COMM_WORLD);
                    MPI_Recv(buf, (int) size, MPI_BYTE, 1, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                } else {
                    MPI_Recv(buf, (int) size, MPI_BYTE, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                    MPI_Send(buf, (int) size, MPI_BYTE, 0, 1, MPI_COMM_WORLD);
                }
            }
        }
        if (0 == rank) {
            double lat = (MPI_Wtime() - t0) / (2.0 * n) * 1e6;
            printf("  %-10zu %14.2f %14.2f\n", size, lat, lat > 0 ? size / lat : 0.0);
            fflush(stdout);
        }
    }
    free(buf);
    MPI_Finalize();
    return 0;
}
