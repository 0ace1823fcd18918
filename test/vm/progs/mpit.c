/* Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 * SPDX-License-Identifier: BSD-3-Clause */
/* Reads usnic's MPI_T performance variables around a known amount of
 * traffic (N ping-pong messages each way between ranks 0 and 1) and checks
 * each against what that traffic implies, so that a variable reading another
 * one's value is caught:
 *   num_frag_sends, num_frag_recvs   moved by at least N (8-byte messages)
 *   num_chunk_sends, num_bad_recvs,  did not move (nothing chunked, nothing bad,
 *   num_forged_recvs                 nothing forged)
 *   endpoints                        1 (one peer, on the other host)
 *   endpoint_bytes                   more than 1 KiB, at most 2 KiB for that peer (send
 *                                    tables are pooled per device, not counted here)
 *   send_table_bytes                 at most 1 KiB: a ping-pong has one segment in
 *                                    flight, the pool holds a 64-slot table or two
 *   progress_passes                  moved by at least N + IDLE: a pass per message received,
 *                                    and IDLE MPI_Iprobe calls after the ping-pongs, each a
 *                                    pass that finds nothing (no other counter moves so)
 * Prints "mpit: rank R: NAME BEFORE -> AFTER (D device(s))" per variable. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#define N 200
#define IDLE 1000
#define NVARS 9

static const struct {
    const char *name;
    int var_class;
} vars[NVARS] = {
    {"btl_usnic_num_frag_sends", MPI_T_PVAR_CLASS_COUNTER},
    {"btl_usnic_num_frag_recvs", MPI_T_PVAR_CLASS_COUNTER},
    {"btl_usnic_num_chunk_sends", MPI_T_PVAR_CLASS_COUNTER},
    {"btl_usnic_num_bad_recvs", MPI_T_PVAR_CLASS_COUNTER},
    {"btl_usnic_num_forged_recvs", MPI_T_PVAR_CLASS_COUNTER},
    {"btl_usnic_endpoints", MPI_T_PVAR_CLASS_LEVEL},
    {"btl_usnic_endpoint_bytes", MPI_T_PVAR_CLASS_SIZE},
    {"btl_usnic_send_table_bytes", MPI_T_PVAR_CLASS_SIZE},
    {"btl_usnic_progress_passes", MPI_T_PVAR_CLASS_COUNTER},
};

static unsigned long read_sum(MPI_T_pvar_session s, MPI_T_pvar_handle h, int count)
{
    unsigned long v[16] = {0}, sum = 0;
    if (count > 16 || MPI_SUCCESS != MPI_T_pvar_read(s, h, v)) {
        fprintf(stderr, "mpit: pvar read failed\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    for (int i = 0; i < count; ++i) {
        sum += v[i];
    }
    return sum;
}

/* Whether variable i moved as N ping-pongs (ranks 0 and 1) imply. */
static int expected(int i, int rank, unsigned long before, unsigned long after)
{
    unsigned long d = after - before;

    switch (i) {
    case 0:
    case 1:
        return rank > 1 || d >= N;
    case 2:
    case 3:
    case 4:
        return 0 == d;
    case 5:
        return 1 == after;
    case 6:
        return after > 1024 && after <= 2048;
    case 7:
        return after <= 1024;
    default:
        return d >= (rank > 1 ? 0 : N) + IDLE;
    }
}

int main(int argc, char **argv)
{
    MPI_T_pvar_session session;
    MPI_T_pvar_handle h[NVARS];
    int provided, rank, count[NVARS], buf = 0, rc = 0;
    unsigned long before[NVARS], after[NVARS];

    MPI_T_init_thread(MPI_THREAD_SINGLE, &provided);
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    /* one exchange first, so that the endpoint has sent (its tables exist) */
    MPI_Sendrecv_replace(&buf, 1, MPI_INT, rank ^ 1, 1, rank ^ 1, 1, MPI_COMM_WORLD,
                         MPI_STATUS_IGNORE);
    MPI_T_pvar_session_create(&session);
    for (int i = 0; i < NVARS; ++i) {
        int idx;
        if (MPI_SUCCESS != MPI_T_pvar_get_index(vars[i].name, vars[i].var_class, &idx) ||
            MPI_SUCCESS != MPI_T_pvar_handle_alloc(session, idx, NULL, &h[i], &count[i])) {
            fprintf(stderr, "mpit: rank %d: no pvar %s\n", rank, vars[i].name);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        before[i] = read_sum(session, h[i], count[i]);
    }
    /* Nobody sends a ping before the other has taken its readings (a ping
     * processed before the handles exist would not be counted). */
    MPI_Barrier(MPI_COMM_WORLD);
    for (int i = 0; i < N; ++i) {
        if (0 == rank) {
            MPI_Send(&buf, 1, MPI_INT, 1, 0, MPI_COMM_WORLD);
            MPI_Recv(&buf, 1, MPI_INT, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else if (1 == rank) {
            MPI_Recv(&buf, 1, MPI_INT, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Send(&buf, 1, MPI_INT, 0, 0, MPI_COMM_WORLD);
        }
    }
    for (int i = 0; i < IDLE; ++i) {
        int flag;
        MPI_Iprobe(MPI_ANY_SOURCE, 99, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE);
    }
    for (int i = 0; i < NVARS; ++i) {
        after[i] = read_sum(session, h[i], count[i]);
        printf("mpit: rank %d: %s %lu -> %lu (%d device(s))\n", rank, vars[i].name, before[i],
               after[i], count[i]);
        if (!expected(i, rank, before[i], after[i])) {
            fprintf(stderr, "mpit: rank %d: %s went from %lu to %lu, not what %d ping-pongs "
                    "imply\n", rank, vars[i].name, before[i], after[i], N);
            rc = 1;
        }
        MPI_T_pvar_handle_free(session, &h[i]);
    }
    MPI_T_pvar_session_free(&session);
    /* MPI_T first: Open MPI 4.1.4 crashes in an MPI_T_finalize that comes
     * after MPI_Finalize, whatever the BTLs. */
    MPI_T_finalize();
    MPI_Finalize();
    return rc;
}
