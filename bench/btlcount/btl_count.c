/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 * $COPYRIGHT$
 * SPDX-License-Identifier: BSD-3-Clause
 *
 * A real 8-byte MPI ping-pong between two ranks over usnic, for
 * bench/btl-count.sh, which runs both ranks on one host under callgrind with
 * instrumentation off until this program turns it on.  Each phase ends with a
 * dump named after it, so every profile holds one phase of one rank:
 *   warm   round trips that fill caches and lists (not counted)
 *   ping   N round trips: MPI_Send, then MPI_Recv of the answer (rank 1 the reverse)
 *   wait   rank 0 only: K progress passes (MPI_Test) with an 8 B message out and not
 *          acknowledged, its answer not sent yet: the pass a ping-pong rank makes while
 *          it waits.  Rank 1 waits outside MPI for a file rank 0 makes after its passes.
 *   idle   K passes of each rank in turn with nothing outstanding and nothing to
 *          acknowledge, while the other rank waits in MPI_Recv for its turn (and has
 *          nothing to send)
 * Usage: btl_count N K HOLD DIR: HOLD is usnic's ACK hold time in microseconds (its
 * btl_usnic_retrans_timeout / 8), DIR a directory for the file.  Prints
 * "btl_count: ok" on rank 0 when every phase went as meant.
 */

#include <fcntl.h>
#include <limits.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <valgrind/callgrind.h>

#define TAG_PING 1
#define TAG_WAIT 2
#define TAG_TURN 3

static int me;
static char sbuf[8] = {1, 2, 3, 4, 5, 6, 7, 8}, rbuf[8];

static void fail(const char *what)
{
    fprintf(stderr, "btl_count: rank %d: %s\n", me, what);
    MPI_Abort(MPI_COMM_WORLD, 1);
}

static void pingpong(long n)
{
    int peer = 1 - me;

    for (long i = 0; i < n; ++i) {
        if (0 == me) {
            MPI_Send(sbuf, 8, MPI_CHAR, peer, TAG_PING, MPI_COMM_WORLD);
            MPI_Recv(rbuf, 8, MPI_CHAR, peer, TAG_PING, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else {
            MPI_Recv(rbuf, 8, MPI_CHAR, peer, TAG_PING, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Send(sbuf, 8, MPI_CHAR, peer, TAG_PING, MPI_COMM_WORLD);
        }
        if (8 != rbuf[7]) {
            fail("wrong data");
        }
    }
}

/* k progress passes; none of them may complete r */
static void passes(long k, MPI_Request *r)
{
    int flag;

    for (long i = 0; i < k; ++i) {
        if (r) {
            MPI_Test(r, &flag, MPI_STATUS_IGNORE);
            if (flag) {
                fail("the answer came during the waiting passes");
            }
        } else {
            MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE);
            if (flag) {
                fail("a message came during the idle passes");
            }
        }
    }
}

/* Send the owed delayed ACK: its hold time starts at the first pass that finds
 * it due and ends HOLD later, so pass, sleep past it, pass. */
static void flush_ack(long hold_us)
{
    passes(10, NULL);
    usleep(hold_us + 50000);
    passes(10, NULL);
}

static void idle_phase(long k, long hold_us)
{
    flush_ack(hold_us);
    CALLGRIND_DUMP_STATS_AT("idle-start");
    passes(k, NULL);
    CALLGRIND_DUMP_STATS_AT("idle");
}

int main(int argc, char **argv)
{
    long n = argc > 4 ? atol(argv[1]) : 0, k = argc > 4 ? atol(argv[2]) : 0;
    long hold_us = argc > 4 ? atol(argv[3]) : 0;
    char flag[PATH_MAX];
    int size, fd;
    MPI_Request r;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (2 != size || n <= 0 || k <= 0 || hold_us <= 0) {
        fail("usage: mpirun -np 2 btl_count ROUND_TRIPS PASSES ACK_HOLD_US DIR");
    }
    snprintf(flag, sizeof(flag), "%s/waited", argv[4]);
    CALLGRIND_START_INSTRUMENTATION;
    pingpong(200);
    CALLGRIND_DUMP_STATS_AT("warm");
    pingpong(n);
    CALLGRIND_DUMP_STATS_AT("ping");

    if (0 == me) {
        MPI_Irecv(rbuf, 8, MPI_CHAR, 1, TAG_WAIT, MPI_COMM_WORLD, &r);
        MPI_Send(sbuf, 8, MPI_CHAR, 1, TAG_WAIT, MPI_COMM_WORLD);
        CALLGRIND_DUMP_STATS_AT("wait-start");
        passes(k, &r);
        CALLGRIND_DUMP_STATS_AT("wait");
        fd = open(flag, O_CREAT | O_WRONLY, 0600);
        if (fd < 0) {
            fail("cannot create the flag file");
        }
        close(fd);
        MPI_Wait(&r, MPI_STATUS_IGNORE);
        /* rank 1 took the ACK of its answer (flush_ack) and waits for the turn */
        idle_phase(k, hold_us);
        MPI_Send(sbuf, 8, MPI_CHAR, 1, TAG_TURN, MPI_COMM_WORLD);
        MPI_Recv(rbuf, 8, MPI_CHAR, 1, TAG_TURN, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    } else {
        while (0 != access(flag, F_OK)) {
            usleep(1000);
        }
        MPI_Recv(rbuf, 8, MPI_CHAR, 0, TAG_WAIT, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Send(sbuf, 8, MPI_CHAR, 0, TAG_WAIT, MPI_COMM_WORLD);
        MPI_Recv(rbuf, 8, MPI_CHAR, 0, TAG_TURN, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        idle_phase(k, hold_us);
        MPI_Send(sbuf, 8, MPI_CHAR, 0, TAG_TURN, MPI_COMM_WORLD);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    CALLGRIND_STOP_INSTRUMENTATION;
    if (0 == me) {
        printf("btl_count: ok\n");
    }
    MPI_Finalize();
    return 0;
}
