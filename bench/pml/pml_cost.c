/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 * $COPYRIGHT$
 * SPDX-License-Identifier: BSD-3-Clause
 *
 * What an 8-byte message costs above the BTL: one process sends to itself
 * over btl/self (MPI_Isend, MPI_Recv, MPI_Wait), N times; bench/pml-cost.sh
 * counts the instructions of those calls with callgrind.  btl/self's own
 * share is small and counted apart, so the rest is ob1, the MPI layer,
 * opal's convertor and libc, as every MPI message over usnic pays them.
 * With a second argument R it also times R rounds of N messages, hot and
 * each after a kernel operation (after_kernel.h), and prints a line
 * "message HOT OPERATION AFTER" per round: the time that path takes where it
 * runs (bench/pml-cost.sh --vm: in the VM).
 */

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#include "after_kernel.h"

static int me;

static void messages(int n)
{
    char sbuf[8] = {1, 2, 3, 4, 5, 6, 7, 8}, rbuf[8];
    MPI_Request r;

    for (int i = 0; i < n; i++) {
        MPI_Isend(sbuf, 8, MPI_CHAR, me, 1, MPI_COMM_WORLD, &r);
        MPI_Recv(rbuf, 8, MPI_CHAR, me, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Wait(&r, MPI_STATUS_IGNORE);
        if (rbuf[7] != 8) {
            fprintf(stderr, "pml_cost: wrong data\n");
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
    }
}

static void one_message(void)
{
    messages(1);
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 0, rounds = argc > 2 ? atoi(argv[2]) : 0;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    if (0 == rounds) {
        messages(n);
    }
    for (int k = 0; k < rounds; k++) {
        after_kernel_time("message", one_message, n);
    }
    MPI_Finalize();
    return 0;
}
