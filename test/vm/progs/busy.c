/* Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 * SPDX-License-Identifier: BSD-3-Clause */
/* Keeps all ranks inside MPI (broadcasts) for a few seconds, long enough
 * for background checks such as the connectivity checker to finish.
 * Rank 0's clock decides when to stop, so every rank stops together. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    double secs = argc > 1 ? atof(argv[1]) : 6.0, t0;
    long n = 0;
    int rank, go = 1;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    t0 = MPI_Wtime();
    while (go) {
        go = MPI_Wtime() - t0 < secs;
        MPI_Bcast(&go, 1, MPI_INT, 0, MPI_COMM_WORLD);
        ++n;
    }
    if (0 == rank) {
        printf("busy: %ld broadcasts\n", n);
    }
    MPI_Finalize();
    return 0;
}
