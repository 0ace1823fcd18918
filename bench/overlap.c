/* Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 * SPDX-License-Identifier: BSD-3-Clause */
/* overlap: what usnic's progress thread (btl_usnic_progress_thread) buys and costs, between
 * two ranks on two hosts.
 *
 *   latency   8-byte ping-pong, B batches of L round trips: the median one-way latency (us)
 *   overlap   N trials: rank 1 posts MPI_Irecv of S bytes and waits in MPI_Wait; rank 0 calls
 *             MPI_Isend, computes for C ms without calling MPI, then MPI_Wait. Per trial:
 *               wait_ms     how long rank 0's MPI_Wait took after the computation
 *               recv_ms     when rank 1's MPI_Wait returned, from rank 0's Isend (real-time
 *                           clocks of the two hosts: they must agree, as the two hosts of
 *                           the test VM, one kernel, do)
 *               during      1 if rank 1 had the whole message before rank 0 stopped computing
 *             Without a progress thread only the first (eager) part of a rendezvous message
 *             moves before rank 0 enters MPI_Wait; with it, the transfer goes on meanwhile.
 *             Every byte is checked.
 *   idle CPU  each rank sleeps D ms outside MPI: the CPU time the process used meanwhile, as
 *             a percentage of one core (the progress thread's cost when nothing happens)
 *
 * Usage: overlap [-s BYTES] [-c COMPUTE_MS] [-n TRIALS] [-l ROUND_TRIPS] [-b BATCHES]
 *                [-d IDLE_MS]
 *   defaults: 1 MiB, 1000 ms, 3 trials, 1000 round trips, 5 batches, 2000 ms
 * Output lines start with "overlap:"; exit code 1 if a byte was wrong.
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

static double now_s(clockid_t clk)
{
    struct timespec ts;
    clock_gettime(clk, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static double cpu_s(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_utime.tv_sec + ru.ru_utime.tv_usec * 1e-6 + ru.ru_stime.tv_sec +
           ru.ru_stime.tv_usec * 1e-6;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *) a, y = *(const double *) b;
    return x < y ? -1 : x > y;
}

static uint8_t pattern(size_t i, int trial)
{
    return (uint8_t)((i * 131 + (i >> 12) + (size_t) trial * 17) & 0xff);
}

/* Busy for ms milliseconds, as an application computing. */
static volatile uint64_t sink;
static void compute(double ms)
{
    double end = now_s(CLOCK_MONOTONIC) + ms / 1e3;
    uint64_t x = 1;

    while (now_s(CLOCK_MONOTONIC) < end) {
        for (int i = 0; i < 1000; ++i) {
            x = x * 6364136223846793005ull + 1442695040888963407ull;
        }
    }
    sink = x;
}

int main(int argc, char **argv)
{
    size_t size = 1 << 20;
    double compute_ms = 1000, idle_ms = 2000;
    int trials = 3, rts = 1000, batches = 5, rank, nprocs, bad = 0, during = 0;
    uint8_t *buf;
    double *lat, *wait_ms;
    char small[8] = {0};

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
    for (int i = 1; i + 1 < argc; i += 2) {
        if (0 == strcmp(argv[i], "-s")) {
            size = strtoull(argv[i + 1], NULL, 10);
        } else if (0 == strcmp(argv[i], "-c")) {
            compute_ms = atof(argv[i + 1]);
        } else if (0 == strcmp(argv[i], "-n")) {
            trials = atoi(argv[i + 1]);
        } else if (0 == strcmp(argv[i], "-l")) {
            rts = atoi(argv[i + 1]);
        } else if (0 == strcmp(argv[i], "-b")) {
            batches = atoi(argv[i + 1]);
        } else if (0 == strcmp(argv[i], "-d")) {
            idle_ms = atof(argv[i + 1]);
        }
    }
    if (2 != nprocs || trials < 1 || rts < 1 || batches < 1) {
        if (0 == rank) {
            fprintf(stderr, "overlap: needs 2 ranks and positive counts\n");
        }
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    buf = malloc(size > 0 ? size : 1);
    lat = malloc(batches * sizeof(*lat));
    wait_ms = malloc(trials * sizeof(*wait_ms));
    if (NULL == buf || NULL == lat || NULL == wait_ms) {
        MPI_Abort(MPI_COMM_WORLD, 2);
    }

    /* latency */
    for (int b = -1; b < batches; ++b) {     /* batch -1 warms up */
        double t0;
        MPI_Barrier(MPI_COMM_WORLD);
        t0 = now_s(CLOCK_MONOTONIC);
        for (int i = 0; i < rts; ++i) {
            if (0 == rank) {
                MPI_Send(small, 8, MPI_BYTE, 1, 1, MPI_COMM_WORLD);
                MPI_Recv(small, 8, MPI_BYTE, 1, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            } else {
                MPI_Recv(small, 8, MPI_BYTE, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                MPI_Send(small, 8, MPI_BYTE, 0, 1, MPI_COMM_WORLD);
            }
        }
        if (b >= 0) {
            lat[b] = (now_s(CLOCK_MONOTONIC) - t0) / rts / 2 * 1e6;
        }
    }
    qsort(lat, batches, sizeof(*lat), cmp_double);
    if (0 == rank) {
        printf("overlap: latency_8B_us %.2f (median of %d batches of %d round trips)\n",
               lat[batches / 2], batches, rts);
    }

    /* overlap */
    for (int t = 0; t < trials; ++t) {
        MPI_Request req;
        double t_start = 0, t_cend = 0, t_wend, t_recv = 0;

        if (0 == rank) {
            for (size_t i = 0; i < size; ++i) {
                buf[i] = pattern(i, t);
            }
            MPI_Barrier(MPI_COMM_WORLD);
            t_start = now_s(CLOCK_REALTIME);
            MPI_Isend(buf, (int) size, MPI_BYTE, 1, 2, MPI_COMM_WORLD, &req);
            compute(compute_ms);
            t_cend = now_s(CLOCK_REALTIME);
            MPI_Wait(&req, MPI_STATUS_IGNORE);
            t_wend = now_s(CLOCK_REALTIME);
            MPI_Recv(&t_recv, 1, MPI_DOUBLE, 1, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            wait_ms[t] = (t_wend - t_cend) * 1e3;
            during += t_recv < t_cend;
            printf("overlap: trial %d size %zu compute_ms %.0f wait_ms %.1f recv_ms %.1f "
                   "during %d\n", t, size, compute_ms, wait_ms[t], (t_recv - t_start) * 1e3,
                   t_recv < t_cend);
        } else {
            memset(buf, 0, size);
            MPI_Irecv(buf, (int) size, MPI_BYTE, 0, 2, MPI_COMM_WORLD, &req);
            MPI_Barrier(MPI_COMM_WORLD);
            MPI_Wait(&req, MPI_STATUS_IGNORE);
            t_recv = now_s(CLOCK_REALTIME);
            for (size_t i = 0; i < size; ++i) {
                if (buf[i] != pattern(i, t)) {
                    if (0 == bad++) {
                        printf("overlap: MISMATCH trial %d offset %zu\n", t, i);
                    }
                }
            }
            MPI_Send(&t_recv, 1, MPI_DOUBLE, 0, 3, MPI_COMM_WORLD);
        }
    }
    if (0 == rank) {
        qsort(wait_ms, trials, sizeof(*wait_ms), cmp_double);
        printf("overlap: summary size %zu compute_ms %.0f median_wait_ms %.1f during %d/%d\n",
               size, compute_ms, wait_ms[trials / 2], during, trials);
    }

    /* idle CPU */
    {
        double c0, w0, pct, all[2];
        struct timespec nap = {.tv_sec = (time_t)(idle_ms / 1e3),
                               .tv_nsec = (long)((idle_ms - 1e3 * (long)(idle_ms / 1e3)) * 1e6)};
        MPI_Barrier(MPI_COMM_WORLD);
        c0 = cpu_s();
        w0 = now_s(CLOCK_MONOTONIC);
        nanosleep(&nap, NULL);
        pct = 100 * (cpu_s() - c0) / (now_s(CLOCK_MONOTONIC) - w0);
        MPI_Gather(&pct, 1, MPI_DOUBLE, all, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
        if (0 == rank) {
            printf("overlap: idle_cpu_pct %.2f %.2f (ranks 0 and 1, %.0f ms asleep outside MPI)\n",
                   all[0], all[1], idle_ms);
        }
    }

    MPI_Allreduce(MPI_IN_PLACE, &bad, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (0 == rank) {
        printf("overlap: %s\n", 0 == bad ? "OK every byte checked" : "FAILED wrong bytes");
    }
    free(buf);
    free(lat);
    free(wait_ms);
    MPI_Finalize();
    return 0 == bad ? 0 : 1;
}
