/* Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 * SPDX-License-Identifier: BSD-3-Clause */
/* bench/scaling.c: what joining a job costs over usnic, at the job's size.
 * Every rank times its MPI_Init, exchanges one message with every other rank
 * (so that every usnic endpoint has sent, and holds its send tables), then
 * reads usnic's MPI_T variables: endpoints, the bytes they hold and the time
 * spent in add_procs.  Rank 0 prints one line:
 *   scaling ranks N init_ms_max X add_procs_ms_max Y endpoints_min A endpoints_max B
 *           bytes_per_endpoint_max C rss_kib_max D
 * Exit code 1 if a variable is missing or a rank has no usnic endpoint (the
 * job did not run over usnic). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* Sum over the devices of one usnic pvar; -1 if it cannot be read. */
static double pvar_sum(MPI_T_pvar_session s, const char *name, int var_class)
{
    unsigned long v[16] = {0};
    double sum = 0;
    MPI_T_pvar_handle h;
    int idx, count;

    if (MPI_SUCCESS != MPI_T_pvar_get_index(name, var_class, &idx) ||
        MPI_SUCCESS != MPI_T_pvar_handle_alloc(s, idx, NULL, &h, &count)) {
        return -1;
    }
    if (count > 16 || MPI_SUCCESS != MPI_T_pvar_read(s, h, v)) {
        sum = -1;
    }
    for (int i = 0; sum >= 0 && i < count; ++i) {
        sum += (double) v[i];
    }
    MPI_T_pvar_handle_free(s, &h);
    return sum;
}

static long rss_kib(void)
{
    char line[256];
    long kib = -1;
    FILE *f = fopen("/proc/self/status", "r");

    while (NULL != f && NULL != fgets(line, sizeof(line), f)) {
        if (0 == strncmp(line, "VmRSS:", 6)) {
            kib = strtol(line + 6, NULL, 10);
        }
    }
    if (NULL != f) {
        fclose(f);
    }
    return kib;
}

int main(int argc, char **argv)
{
    double t0 = now_ms(), init_ms, mine[5], maxv[5], minv[5];
    int rank, size, provided, rc = 0;
    MPI_T_pvar_session session;
    MPI_Request *req;
    int *out, *in;

    MPI_Init(&argc, &argv);
    init_ms = now_ms() - t0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);

    req = malloc(2 * (size_t) size * sizeof(*req));
    out = malloc((size_t) size * sizeof(*out));
    in = malloc((size_t) size * sizeof(*in));
    if (NULL == req || NULL == out || NULL == in) {
        fprintf(stderr, "scaling: out of memory\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    for (int p = 0; p < size; ++p) {
        out[p] = rank * size + p;
        MPI_Irecv(&in[p], 1, MPI_INT, p, 7, MPI_COMM_WORLD, &req[p]);
        MPI_Isend(&out[p], 1, MPI_INT, p, 7, MPI_COMM_WORLD, &req[size + p]);
    }
    MPI_Waitall(2 * size, req, MPI_STATUSES_IGNORE);
    for (int p = 0; p < size; ++p) {
        if (in[p] != p * size + rank) {
            fprintf(stderr, "scaling: rank %d: got %d from %d\n", rank, in[p], p);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
    }

    MPI_T_init_thread(MPI_THREAD_SINGLE, &provided);
    MPI_T_pvar_session_create(&session);
    mine[0] = init_ms;
    mine[1] = pvar_sum(session, "btl_usnic_add_procs_usec", MPI_T_PVAR_CLASS_GENERIC) / 1e3;
    mine[2] = pvar_sum(session, "btl_usnic_endpoints", MPI_T_PVAR_CLASS_LEVEL);
    mine[3] = pvar_sum(session, "btl_usnic_endpoint_bytes", MPI_T_PVAR_CLASS_SIZE);
    mine[4] = (double) rss_kib();
    MPI_T_pvar_session_free(&session);
    /* MPI_T first: Open MPI 4.1.4 crashes in an MPI_T_finalize after MPI_Finalize. */
    MPI_T_finalize();
    if (mine[1] < 0 || mine[2] <= 0 || mine[3] < 0) {
        fprintf(stderr, "scaling: rank %d: no usnic MPI_T variables or no usnic endpoint "
                "(add_procs %.0f, endpoints %.0f, bytes %.0f)\n", rank, mine[1], mine[2],
                mine[3]);
        rc = 1;
    }
    mine[3] = mine[2] > 0 ? mine[3] / mine[2] : 0;
    MPI_Reduce(mine, maxv, 5, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    MPI_Reduce(mine, minv, 5, MPI_DOUBLE, MPI_MIN, 0, MPI_COMM_WORLD);
    MPI_Allreduce(MPI_IN_PLACE, &rc, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (0 == rank) {
        printf("scaling ranks %d init_ms_max %.1f add_procs_ms_max %.2f endpoints_min %.0f "
               "endpoints_max %.0f bytes_per_endpoint_max %.0f rss_kib_max %.0f\n",
               size, maxv[0], maxv[1], minv[2], maxv[2], maxv[3], maxv[4]);
    }
    free(req);
    free(out);
    free(in);
    MPI_Finalize();
    return rc;
}
