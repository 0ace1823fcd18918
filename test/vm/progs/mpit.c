/* Reads the usnic counters through MPI_T performance variables around a
 * known amount of traffic (200 ping-pong messages each way) and checks
 * that they moved by at least that much. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#define N 200

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

int main(int argc, char **argv)
{
    const char *names[] = {"btl_usnic_num_total_sends", "btl_usnic_num_frag_recvs"};
    MPI_T_pvar_session session;
    MPI_T_pvar_handle h[2];
    int provided, rank, count[2], buf = 0, rc = 0;
    unsigned long before[2], after[2];

    MPI_T_init_thread(MPI_THREAD_SINGLE, &provided);
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_T_pvar_session_create(&session);
    for (int i = 0; i < 2; ++i) {
        int idx;
        if (MPI_SUCCESS != MPI_T_pvar_get_index(names[i], MPI_T_PVAR_CLASS_COUNTER, &idx) ||
            MPI_SUCCESS != MPI_T_pvar_handle_alloc(session, idx, NULL, &h[i], &count[i])) {
            fprintf(stderr, "mpit: rank %d: no pvar %s\n", rank, names[i]);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        before[i] = read_sum(session, h[i], count[i]);
    }
    for (int i = 0; i < N; ++i) {
        if (0 == rank) {
            MPI_Send(&buf, 1, MPI_INT, 1, 0, MPI_COMM_WORLD);
            MPI_Recv(&buf, 1, MPI_INT, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else if (1 == rank) {
            MPI_Recv(&buf, 1, MPI_INT, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Send(&buf, 1, MPI_INT, 0, 0, MPI_COMM_WORLD);
        }
    }
    for (int i = 0; i < 2; ++i) {
        after[i] = read_sum(session, h[i], count[i]);
        printf("mpit: rank %d: %s %lu -> %lu (%d device(s))\n", rank, names[i], before[i],
               after[i], count[i]);
        if (rank < 2 && after[i] - before[i] < N) {
            fprintf(stderr, "mpit: rank %d: %s moved by %lu, expected at least %d\n", rank,
                    names[i], after[i] - before[i], N);
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
