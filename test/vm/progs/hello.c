/* Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 * SPDX-License-Identifier: BSD-3-Clause */
/* Smallest useful MPI job: every rank gets through MPI_Init, a barrier and MPI_Finalize,
 * and says where it ran. */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char **argv)
{
    int rank, size, len;
    char host[MPI_MAX_PROCESSOR_NAME];

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Get_processor_name(host, &len);
    MPI_Barrier(MPI_COMM_WORLD);
    printf("hello: rank %d of %d on %s\n", rank, size, host);
    MPI_Finalize();
    return 0;
}
