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
 * With a second argument R it also times R rounds (MPI_Wtime) and prints
 * each round's microseconds per message: the time that path takes where it
 * runs (bench/pml-cost.sh --vm: in the VM).  A round times the N messages,
 * then N times a kernel operation (open, read and close /proc/self/stat),
 * then N messages each after such an operation, as a message over Soft-RoCE
 * runs after the kernel's work for it: what the path costs when the kernel
 * ran in between.
 */

#include <fcntl.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static void messages(int me, int n)
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

/* Some of the kernel's work: a file of /proc read. */
static void kernel_op(void)
{
    char buf[4096];
    int fd = open("/proc/self/stat", O_RDONLY);

    if (fd < 0 || read(fd, buf, sizeof(buf)) <= 0) {
        fprintf(stderr, "pml_cost: /proc/self/stat unreadable\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    close(fd);
}

int main(int argc, char **argv)
{
    int me, n = argc > 1 ? atoi(argv[1]) : 0, rounds = argc > 2 ? atoi(argv[2]) : 0;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    if (0 == rounds) {
        messages(me, n);
    }
    for (int k = 0; k < rounds; k++) {
        double t0 = MPI_Wtime(), t1, t2;

        messages(me, n);
        t1 = MPI_Wtime();
        for (int i = 0; i < n; i++) {
            kernel_op();
        }
        t2 = MPI_Wtime();
        for (int i = 0; i < n; i++) {
            kernel_op();
            messages(me, 1);
        }
        printf("round %d: %.3f us per message, %.3f per kernel operation, %.3f per both\n", k + 1,
               (t1 - t0) * 1e6 / n, (t2 - t1) * 1e6 / n, (MPI_Wtime() - t2) * 1e6 / n);
    }
    MPI_Finalize();
    return 0;
}
