/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 * $COPYRIGHT$
 * SPDX-License-Identifier: BSD-3-Clause
 *
 * OSU-style MPI micro-benchmarks in one program, one output line per size:
 *
 *   lat   ping-pong between ranks 0 and 1: half the round-trip time
 *   bw    streaming bandwidth 0 -> 1: a window of Isends, the receiver answers
 *         each window with a 4-byte ack
 *   bibw  bidirectional bandwidth: both ranks Irecv and Isend a window
 *   mr    multi-pair message rate: rank i (i < P) streams windows to rank i + P
 *         as in bw, all P = nprocs / 2 pairs at once; aggregate figures
 *   a2a   MPI_Alltoall of SIZE bytes to every rank, all ranks; MEAN_US etc. are
 *         the time of one all-to-all, MSG/S all-to-alls per second
 *
 * lat, bw and bibw use ranks 0 and 1 only (run them with -np 2, one rank per
 * host); mr uses every rank (run it with P ranks per host).
 *
 * Iteration counts adapt to the speed of the transport, so that a suite also
 * finishes on a slow emulated network: per size, one warm-up iteration is
 * timed, more warm-up iterations follow within the warm-up budget (-W), and
 * the measured iterations fill the measurement budget (-T), clamped to
 * [-n, -N].  Rank 0 decides and broadcasts the counts.  The window shrinks
 * for large messages so that a window holds at most -B bytes (at least one
 * message).
 *
 * Output (rank 0), after '#' comment lines:
 *   TEST SIZE ITERS WINDOW MEAN_US MEDIAN_US MIN_US MB/S MSG/S
 * counting every message the job moved (lat: both directions, so MEAN_US is
 * half a round trip; bibw: both directions; mr: all pairs).  MEAN_US is the
 * measured time per message (1e6 / MSG/S), MEDIAN_US and MIN_US the median
 * and the shortest iteration time per message; MB/S (10^6 B/s) and MSG/S are
 * totals over the measured time.
 *
 * With the usnic BTL loaded, each size is followed by a line of usnic's counters over
 * that size (warm-up included; the barrier that starts it, the start-up and the end of
 * the job are outside every size), summed over all ranks:
 *   usnic TEST SIZE data=N timer=N fast=N resends=N dups=N spurious=N wfull=N proofs=N
 *         waits=N passes=N msgs=N
 * data datagrams sent, timer and fast retransmits, segments resent, duplicates received
 * (num_oow_low_recvs + num_dup_recvs), timeouts found spurious, segments that filled
 * their send window, the reordering window's proofs and waits (num_spurious_fast,
 * num_reorder_waits); then, over the measured iterations only, usnic's progress passes
 * (btl_usnic_progress_passes, 0 from a component without it) and the messages they
 * carried: passes / msgs - 1 is the passes per message that found nothing.
 *
 * For instruction counts (bench/in-vm-bench.sh): the measured iterations run
 * in measured_iteration() and -P N makes rank 0 finally run N idle progress
 * passes in idle_progress(), so that callgrind can count either alone.
 */

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { T_LAT, T_BW, T_BIBW, T_MR, T_A2A, T_COUNT };
static const char *test_names[T_COUNT] = {"lat", "bw", "bibw", "mr", "a2a"};

#define TAG_DATA 10
#define TAG_ACK 11
#define TAG_IDLE 12
#define MAX_SIZES 64

static int rank, nprocs, pairs;
static char *sbuf, *rbuf;
static MPI_Request *reqs;
static double budget = 0.5, warm_budget = 0.1;
static long min_iters = 2, max_iters = 10000, max_warmup = 20;
static size_t window_bytes = 4u << 20;
static int max_window = 64;

/* Window for a message size: at most max_window messages, at most window_bytes
 * bytes, at least one message. */
static int window_for(int test, size_t size)
{
    size_t w;

    if (T_LAT == test || T_A2A == test) {
        return 1;
    }
    w = size > 0 ? window_bytes / size : (size_t) max_window;
    if (w > (size_t) max_window) {
        w = max_window;
    }
    return w < 1 ? 1 : (int) w;
}

/* One iteration of TEST at SIZE with WINDOW messages.  Returns the number of
 * messages the iteration moved (for the whole job), 0 if this rank sat out. */
static long one_iteration(int test, size_t size, int window)
{
    int cnt = (int) size;
    int peer;

    switch (test) {
    case T_LAT:
        if (0 == rank) {
            MPI_Send(sbuf, cnt, MPI_BYTE, 1, TAG_DATA, MPI_COMM_WORLD);
            MPI_Recv(rbuf, cnt, MPI_BYTE, 1, TAG_DATA, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else if (1 == rank) {
            MPI_Recv(rbuf, cnt, MPI_BYTE, 0, TAG_DATA, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Send(sbuf, cnt, MPI_BYTE, 0, TAG_DATA, MPI_COMM_WORLD);
        } else {
            return 0;
        }
        return 2;
    case T_BW:
    case T_MR:
        if (T_BW == test && rank > 1) {
            return 0;
        }
        if (T_BW == test ? 0 == rank : rank < pairs) {
            peer = T_BW == test ? 1 : rank + pairs;
            for (int i = 0; i < window; ++i) {
                MPI_Isend(sbuf + (size_t) i * size, cnt, MPI_BYTE, peer, TAG_DATA,
                          MPI_COMM_WORLD, &reqs[i]);
            }
            MPI_Waitall(window, reqs, MPI_STATUSES_IGNORE);
            MPI_Recv(rbuf, 4, MPI_BYTE, peer, TAG_ACK, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else {
            peer = T_BW == test ? 0 : rank - pairs;
            for (int i = 0; i < window; ++i) {
                MPI_Irecv(rbuf + (size_t) i * size, cnt, MPI_BYTE, peer, TAG_DATA,
                          MPI_COMM_WORLD, &reqs[i]);
            }
            MPI_Waitall(window, reqs, MPI_STATUSES_IGNORE);
            MPI_Send(sbuf, 4, MPI_BYTE, peer, TAG_ACK, MPI_COMM_WORLD);
        }
        return (long) window * (T_BW == test ? 1 : pairs);
    case T_BIBW:
        if (rank > 1) {
            return 0;
        }
        peer = 1 - rank;
        for (int i = 0; i < window; ++i) {
            MPI_Irecv(rbuf + (size_t) i * size, cnt, MPI_BYTE, peer, TAG_DATA, MPI_COMM_WORLD,
                      &reqs[i]);
        }
        for (int i = 0; i < window; ++i) {
            MPI_Isend(sbuf + (size_t) i * size, cnt, MPI_BYTE, peer, TAG_DATA, MPI_COMM_WORLD,
                      &reqs[window + i]);
        }
        MPI_Waitall(2 * window, reqs, MPI_STATUSES_IGNORE);
        return 2L * window;
    case T_A2A:
        MPI_Alltoall(sbuf, cnt, MPI_BYTE, rbuf, cnt, MPI_BYTE, MPI_COMM_WORLD);
        return 1;
    }
    return 0;
}

/* A measured (not warm-up) iteration.  Not inlined, so that
 * valgrind --tool=callgrind --collect-atstart=no --toggle-collect=measured_iteration
 * counts exactly the measured iterations (bench/in-vm-bench.sh). */
__attribute__((noinline)) long measured_iteration(int test, size_t size, int window)
{
    return one_iteration(test, size, window);
}

/* N progress passes with nothing to receive (MPI_Iprobe runs the progress engine once
 * when nothing matches): what a transport costs when it only polls. */
__attribute__((noinline)) void idle_progress(long n)
{
    int flag;

    for (long i = 0; i < n; ++i) {
        MPI_Iprobe(MPI_ANY_SOURCE, TAG_IDLE, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE);
    }
}

/* usnic's retransmit counters (MPI_T), read around each size when the usnic BTL is loaded:
 * data datagrams sent, timer and fast retransmits, segments resent, duplicates received
 * (below the window and inside it), timeouts found spurious, send windows filled, resends
 * proven needless by a late original and reported holes that waited for one.  A name
 * the component lacks reads as 0. */
#define NCTR 11
static const char *ctr_names[NCTR] = {
    "btl_usnic_num_frag_sends", "btl_usnic_num_chunk_sends", "btl_usnic_num_timeout_retrans",
    "btl_usnic_num_fast_retrans", "btl_usnic_num_resends", "btl_usnic_num_oow_low_recvs",
    "btl_usnic_num_dup_recvs", "btl_usnic_num_spurious_timeouts", "btl_usnic_num_window_full",
    "btl_usnic_num_spurious_fast", "btl_usnic_num_reorder_waits",
};
static MPI_T_pvar_session ctr_session;
static MPI_T_pvar_handle ctr_h[NCTR];
static int ctr_n[NCTR], ctr_have[NCTR], ctr_on, ctr_session_ok;
/* usnic's progress passes, read around the measured iterations only: less the messages
 * received, how often a rank polled in vain while it waited */
static MPI_T_pvar_handle pass_h;
static int pass_have;

static void ctr_init(void)
{
    int provided;

    if (MPI_SUCCESS != MPI_T_init_thread(MPI_THREAD_SINGLE, &provided) ||
        MPI_SUCCESS != MPI_T_pvar_session_create(&ctr_session)) {
        return;
    }
    ctr_session_ok = 1;
    for (int i = 0; i < NCTR; ++i) {
        int idx;

        ctr_have[i] = MPI_SUCCESS == MPI_T_pvar_get_index(ctr_names[i], MPI_T_PVAR_CLASS_COUNTER,
                                                          &idx) &&
                      MPI_SUCCESS == MPI_T_pvar_handle_alloc(ctr_session, idx, NULL, &ctr_h[i],
                                                             &ctr_n[i]) &&
                      ctr_n[i] <= 16;
    }
    /* every rank loads the same BTLs: all or none have the counters */
    ctr_on = ctr_have[0];
    {
        int idx, n;

        pass_have = MPI_SUCCESS == MPI_T_pvar_get_index("btl_usnic_progress_passes",
                                                        MPI_T_PVAR_CLASS_COUNTER, &idx) &&
                    MPI_SUCCESS == MPI_T_pvar_handle_alloc(ctr_session, idx, NULL, &pass_h, &n) &&
                    1 == n;
    }
}

static unsigned long long pass_read(void)
{
    unsigned long long v = 0;

    if (pass_have) {
        MPI_T_pvar_read(ctr_session, pass_h, &v);
    }
    return v;
}

static void ctr_read(unsigned long long *v)
{
    for (int i = 0; i < NCTR; ++i) {
        unsigned long long buf[16] = {0};

        v[i] = 0;
        if (ctr_have[i] && MPI_SUCCESS == MPI_T_pvar_read(ctr_session, ctr_h[i], buf)) {
            for (int k = 0; k < ctr_n[i]; ++k) {
                v[i] += buf[k];
            }
        }
    }
}

static void ctr_fini(void)
{
    if (!ctr_session_ok) {
        return;
    }
    for (int i = 0; i < NCTR; ++i) {
        if (ctr_have[i]) {
            MPI_T_pvar_handle_free(ctr_session, &ctr_h[i]);
        }
    }
    if (pass_have) {
        MPI_T_pvar_handle_free(ctr_session, &pass_h);
    }
    MPI_T_pvar_session_free(&ctr_session);
    /* before MPI_Finalize: Open MPI 4.1.4 crashes in an MPI_T_finalize after it */
    MPI_T_finalize();
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *) a, y = *(const double *) b;

    return x < y ? -1 : x > y;
}

static long clamp_long(double v, long lo, long hi)
{
    if (v < lo) {
        return lo;
    }
    return v > hi ? hi : (long) v;
}

static void run_size(int test, size_t size, double *times)
{
    int window = window_for(test, size);
    long counts[2], msgs = 0;
    double t, first, elapsed, med;
    unsigned long long c0[NCTR], c1[NCTR], sum[NCTR], passes, all_passes = 0;

    /* warm-up: one timed iteration decides how many more fit the warm-up budget */
    MPI_Barrier(MPI_COMM_WORLD);
    /* The size starts here.  A rank may come to the barrier late (the first
     * size: from its set-up, touching its buffers, half a second in the
     * emulated VM; later: rank 0 printing), and a rank outside MPI
     * acknowledges nothing, so its peer's first message may be resent when
     * the timer expires: that is the barrier's, not the size's.  (Each rank
     * reads before it sends anything of the size.) */
    if (ctr_on) {
        ctr_read(c0);
    }
    t = MPI_Wtime();
    one_iteration(test, size, window);
    first = MPI_Wtime() - t;
    counts[0] = clamp_long(first > 0 ? warm_budget / first : max_warmup, 0, max_warmup - 1);
    MPI_Bcast(counts, 1, MPI_LONG, 0, MPI_COMM_WORLD);
    t = MPI_Wtime();
    for (long i = 0; i < counts[0]; ++i) {
        one_iteration(test, size, window);
    }
    t = counts[0] > 0 ? (MPI_Wtime() - t) / counts[0] : first;
    counts[1] = clamp_long(t > 0 ? budget / t : max_iters, min_iters, max_iters);
    MPI_Bcast(&counts[1], 1, MPI_LONG, 0, MPI_COMM_WORLD);

    MPI_Barrier(MPI_COMM_WORLD);
    passes = pass_read();
    elapsed = MPI_Wtime();
    for (long i = 0; i < counts[1]; ++i) {
        t = MPI_Wtime();
        msgs += measured_iteration(test, size, window);
        times[i] = MPI_Wtime() - t;
    }
    elapsed = MPI_Wtime() - elapsed;
    passes = pass_read() - passes;
    if (pass_have) {
        MPI_Reduce(&passes, &all_passes, 1, MPI_UNSIGNED_LONG_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    }
    if (ctr_on) {
        /* the last ACKs of the size are in before anyone reads */
        MPI_Barrier(MPI_COMM_WORLD);
        ctr_read(c1);
        for (int i = 0; i < NCTR; ++i) {
            c1[i] -= c0[i];
        }
        MPI_Reduce(c1, sum, NCTR, MPI_UNSIGNED_LONG_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    }
    /* mr: every pair must be done, the slowest sender sets the time */
    if (T_MR == test) {
        double mine = elapsed;

        MPI_Reduce(&mine, &elapsed, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    }
    if (0 == rank) {
        /* rank 0 takes part in every test: msgs counts the messages the whole job moved */
        double per_iter = (double) msgs / counts[1];

        qsort(times, counts[1], sizeof(double), cmp_double);
        med = counts[1] % 2 ? times[counts[1] / 2]
                            : (times[counts[1] / 2 - 1] + times[counts[1] / 2]) / 2;
        printf("%-5s %8zu %7ld %5d %12.2f %12.2f %12.2f %12.3f %12.1f\n", test_names[test],
               size, counts[1], window, elapsed / msgs * 1e6, med / per_iter * 1e6,
               times[0] / per_iter * 1e6,
               elapsed > 0 ? (double) size * msgs / elapsed / 1e6 : 0.0,
               elapsed > 0 ? msgs / elapsed : 0.0);
        if (ctr_on) {
            printf("usnic %-5s %8zu data=%llu timer=%llu fast=%llu resends=%llu dups=%llu "
                   "spurious=%llu wfull=%llu proofs=%llu waits=%llu passes=%llu msgs=%ld\n",
                   test_names[test], size, sum[0] + sum[1], sum[2], sum[3], sum[4],
                   sum[5] + sum[6], sum[7], sum[8], sum[9], sum[10], all_passes, msgs);
        }
        fflush(stdout);
    }
}

static void usage(const char *prog)
{
    if (0 == rank) {
        fprintf(stderr,
                "usage: %s [-t lat,bw,bibw,mr,a2a] [-s MIN] [-m MAX] [-S SIZE,SIZE,...]\n"
                "       [-T BUDGET_MS] [-W WARMUP_MS] [-n MIN_ITERS] [-N MAX_ITERS]\n"
                "       [-w MAX_WARMUP] [-x WINDOW] [-B WINDOW_BYTES] [-P IDLE_PASSES]\n"
                "  sizes: powers of two from MIN (default 1) to MAX (default 4 MiB),\n"
                "  or the -S list; -P: rank 0 finally calls MPI_Iprobe that many times\n",
                prog);
    }
    MPI_Abort(MPI_COMM_WORLD, 2);
}

int main(int argc, char **argv)
{
    size_t sizes[MAX_SIZES], min_size = 1, max_size = 4u << 20, bufsize = 4096;
    int nsizes = 0, tests[T_COUNT] = {0}, ntests = 0, opt;
    char *list = NULL, *tok, *save;
    long idle_passes = 0;
    double *times;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
    pairs = nprocs / 2;
    while ((opt = getopt(argc, argv, "t:s:m:S:T:W:n:N:w:x:B:P:")) != -1) {
        switch (opt) {
        case 't':
            for (tok = strtok_r(optarg, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
                int k;

                for (k = 0; k < T_COUNT && strcmp(tok, test_names[k]); ++k) {
                }
                if (k == T_COUNT || ntests == T_COUNT) {
                    usage(argv[0]);
                }
                tests[ntests++] = k;
            }
            break;
        case 's': min_size = strtoull(optarg, NULL, 0); break;
        case 'm': max_size = strtoull(optarg, NULL, 0); break;
        case 'S': list = optarg; break;
        case 'T': budget = atof(optarg) / 1e3; break;
        case 'W': warm_budget = atof(optarg) / 1e3; break;
        case 'n': min_iters = atol(optarg); break;
        case 'N': max_iters = atol(optarg); break;
        case 'w': max_warmup = atol(optarg); break;
        case 'x': max_window = atoi(optarg); break;
        case 'B': window_bytes = strtoull(optarg, NULL, 0); break;
        case 'P': idle_passes = atol(optarg); break;
        default: usage(argv[0]);
        }
    }
    if (min_iters < 1 || max_iters < min_iters || max_warmup < 1 ||
        max_window < 1 || optind != argc) {
        usage(argv[0]);
    }
    if (0 == ntests) {
        tests[0] = T_LAT, tests[1] = T_BW, tests[2] = T_BIBW, ntests = 3;
    }
    if (list) {
        for (tok = strtok_r(list, ",", &save); tok && nsizes < MAX_SIZES;
             tok = strtok_r(NULL, ",", &save)) {
            sizes[nsizes++] = strtoull(tok, NULL, 0);
        }
    } else {
        for (size_t s = min_size; s <= max_size && nsizes < MAX_SIZES; s = s ? 2 * s : 1) {
            sizes[nsizes++] = s;
        }
    }
    if (nprocs < 2 || nprocs % 2 || 0 == nsizes) {
        if (0 == rank) {
            fprintf(stderr, "mpibench needs an even number of ranks (>= 2) and sizes\n");
        }
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    for (int k = 0; k < ntests; ++k) {
        for (int j = 0; j < nsizes; ++j) {
            size_t need = sizes[j] * (size_t) (T_A2A == tests[k] ? nprocs
                                                                 : window_for(tests[k], sizes[j]));

            bufsize = need > bufsize ? need : bufsize;
        }
    }
    if (posix_memalign((void **) &sbuf, 4096, bufsize) ||
        posix_memalign((void **) &rbuf, 4096, bufsize) ||
        !(reqs = malloc(2 * (size_t) max_window * sizeof(*reqs))) ||
        !(times = malloc((size_t) max_iters * sizeof(*times)))) {
        fprintf(stderr, "mpibench: out of memory (%zu bytes per buffer)\n", bufsize);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    memset(sbuf, 'a' + rank % 26, bufsize);
    memset(rbuf, 0, bufsize);
    ctr_init();

    if (0 == rank) {
        printf("# mpibench: %d ranks, %d pair(s) for mr; budget %.0f ms/size, warm-up %.0f ms, "
               "iterations %ld..%ld, window <= %d messages and <= %zu bytes\n",
               nprocs, pairs, budget * 1e3, warm_budget * 1e3, min_iters, max_iters,
               max_window, window_bytes);
        printf("# %-3s %8s %7s %5s %12s %12s %12s %12s %12s\n", "test", "size", "iters", "win",
               "mean_us", "median_us", "min_us", "MB/s", "msg/s");
        fflush(stdout);
    }
    for (int k = 0; k < ntests; ++k) {
        for (int j = 0; j < nsizes; ++j) {
            run_size(tests[k], sizes[j], times);
        }
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (idle_passes > 0) {
        if (0 == rank) {
            idle_progress(idle_passes);
        }
        MPI_Barrier(MPI_COMM_WORLD);
    }
    if (0 == rank) {
        printf("# mpibench: done\n");
    }
    free(times);
    free(reqs);
    free(sbuf);
    free(rbuf);
    ctr_fini();
    MPI_Finalize();
    return 0;
}
