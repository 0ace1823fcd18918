/* Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 * SPDX-License-Identifier: BSD-3-Clause */
/* threads: MPI_THREAD_MULTIPLE traffic (t-threads.sh). The process must be granted
 * MPI_THREAD_MULTIPLE; then T threads per rank (default 4) run at once, each with tags of its
 * own. For each round and size, every thread of every rank sends one message to every other
 * rank and receives one from each with MPI_ANY_SOURCE, in one of three ways, chosen per thread
 * and step so that the threads of a rank mix them at any moment:
 *   irecv   any-source receives posted before the sends, MPI_Waitall
 *   probe   after the sends: MPI_Probe(MPI_ANY_SOURCE), the count checked, then MPI_Recv from
 *           the source it named
 *   mprobe  after the sends: MPI_Improbe polled (MPI_ANY_SOURCE), then MPI_Mrecv
 * Every message is checked: content (a pattern of source, thread, size, round and
 * destination), length, that each source comes once per step, and a guard after the buffer.
 * The tag names round, size and thread, so a thread that is ahead cannot match the receives of
 * another thread or step.
 *
 * Usage: threads [-t THREADS] [-r ROUNDS] [-s SIZE,SIZE,...]
 *   default 4 threads, 2 rounds, sizes 0,1,722,723,4050,4051,16384,153544,153545,524288 (the
 *   protocol boundaries of p2p.c, and a rendezvous message that travels as emulated PUTs)
 */
#include "common.h"

#include <pthread.h>

enum { TAG0 = 1000, MAX_THREADS = 16, GUARD_FILL = 0xa5 };

static const size_t default_sizes[] = {0,     1,      722,    723,    4050,
                                       4051,  16384,  153544, 153545, 524288};

static size_t sizes[64];
static int nsizes, nthreads = 4, rounds = 2;
static size_t max_size;
/* the dp_* helpers keep process-wide counts */
static pthread_mutex_t dp_lock = PTHREAD_MUTEX_INITIALIZER;

static uint64_t msg_seed(int src, int t, size_t size, int round, int dst)
{
    return dp_seed((uint64_t) src * MAX_THREADS + (uint64_t) t, size, (uint64_t) round,
                   (uint64_t) dst);
}

static const char *const mode_name[] = {"irecv", "probe", "mprobe"};

/* A received message: its source once per step, its length, content and guard. */
static void check_msg(int t, int round, size_t size, int mode, const MPI_Status *st,
                      const uint8_t *buf, char *seen)
{
    int src = st->MPI_SOURCE, count = -1;
    char ctx[128];

    MPI_Get_count(st, MPI_BYTE, &count);
    snprintf(ctx, sizeof(ctx), "thread %d round %d size %zu %s from %d", t, round, size,
             mode_name[mode], src);
    pthread_mutex_lock(&dp_lock);
    if (src < 0 || src >= dp_size || src == dp_rank) {
        dp_fail("%s: impossible source", ctx);
    } else if (seen[src]) {
        dp_fail("%s: a second message from this source in one step", ctx);
    } else if ((size_t) count != size) {
        seen[src] = 1;
        dp_fail("%s: %d bytes, expected %zu", ctx, count, size);
    } else {
        seen[src] = 1;
        if (dp_check(buf, size, msg_seed(src, t, size, round, dp_rank), 0, ctx) &&
            dp_check_fill(buf + size, DP_GUARD, GUARD_FILL, ctx)) {
            dp_verified(size);
        }
        if (dp_host_of[src] != dp_my_host) {
            dp_count_in(size);
        }
    }
    pthread_mutex_unlock(&dp_lock);
}

static void *worker(void *arg)
{
    int t = (int)(intptr_t) arg, npeers = dp_size - 1;
    uint8_t **rbuf = dp_malloc(npeers * sizeof(*rbuf));
    uint8_t **sbuf = dp_malloc(npeers * sizeof(*sbuf));
    MPI_Request *rreq = dp_malloc(npeers * sizeof(*rreq));
    MPI_Request *sreq = dp_malloc(npeers * sizeof(*sreq));
    MPI_Status *rst = dp_malloc(npeers * sizeof(*rst));
    char *seen = dp_malloc(dp_size);

    for (int k = 0; k < npeers; ++k) {
        rbuf[k] = dp_malloc(max_size + DP_GUARD);
        sbuf[k] = dp_malloc(max_size);
    }
    for (int round = 0; round < rounds; ++round) {
        for (int i = 0; i < nsizes; ++i) {
            size_t size = sizes[i];
            int step = round * nsizes + i, mode = (step + t) % 3;
            int tag = TAG0 + step * nthreads + t;

            memset(seen, 0, dp_size);
            for (int k = 0; k < npeers; ++k) {
                memset(rbuf[k], GUARD_FILL, size + DP_GUARD);
            }
            if (0 == mode) {
                for (int k = 0; k < npeers; ++k) {
                    MPI_Irecv(rbuf[k], (int) size, MPI_BYTE, MPI_ANY_SOURCE, tag,
                              MPI_COMM_WORLD, &rreq[k]);
                }
            }
            /* destinations rotated by rank, so that not everyone sends to rank 0 first */
            for (int k = 0; k < npeers; ++k) {
                int dst = (dp_rank + 1 + k) % dp_size;
                dp_gen(sbuf[k], size, msg_seed(dp_rank, t, size, round, dst), 0);
                MPI_Isend(sbuf[k], (int) size, MPI_BYTE, dst, tag, MPI_COMM_WORLD, &sreq[k]);
            }
            for (int k = 0; k < npeers; ++k) {
                MPI_Status st;
                MPI_Message msg;
                int flag = 0;

                if (0 == mode) {
                    if (0 == k) {
                        MPI_Waitall(npeers, rreq, rst);
                    }
                    check_msg(t, round, size, mode, &rst[k], rbuf[k], seen);
                    continue;
                }
                if (1 == mode) {
                    int count = -1;
                    MPI_Probe(MPI_ANY_SOURCE, tag, MPI_COMM_WORLD, &st);
                    MPI_Get_count(&st, MPI_BYTE, &count);
                    if ((size_t) count != size) {
                        pthread_mutex_lock(&dp_lock);
                        dp_fail("thread %d round %d size %zu: probe from %d says %d bytes", t,
                                round, size, st.MPI_SOURCE, count);
                        pthread_mutex_unlock(&dp_lock);
                    }
                    MPI_Recv(rbuf[k], (int) size, MPI_BYTE, st.MPI_SOURCE, tag, MPI_COMM_WORLD,
                             &st);
                } else {
                    while (!flag) {
                        MPI_Improbe(MPI_ANY_SOURCE, tag, MPI_COMM_WORLD, &flag, &msg, &st);
                    }
                    MPI_Mrecv(rbuf[k], (int) size, MPI_BYTE, &msg, &st);
                }
                check_msg(t, round, size, mode, &st, rbuf[k], seen);
            }
            MPI_Waitall(npeers, sreq, MPI_STATUSES_IGNORE);
        }
    }
    for (int k = 0; k < npeers; ++k) {
        free(rbuf[k]);
        free(sbuf[k]);
    }
    free(rbuf);
    free(sbuf);
    free(rreq);
    free(sreq);
    free(rst);
    free(seen);
    return NULL;
}

int main(int argc, char **argv)
{
    pthread_t tid[MAX_THREADS];
    const char *size_list = NULL;
    double t0;

    dp_thread_required = MPI_THREAD_MULTIPLE;
    dp_init("threads", &argc, &argv);
    for (int i = 1; i + 1 < argc; i += 2) {
        if (0 == strcmp(argv[i], "-t")) {
            nthreads = atoi(argv[i + 1]);
        } else if (0 == strcmp(argv[i], "-r")) {
            rounds = atoi(argv[i + 1]);
        } else if (0 == strcmp(argv[i], "-s")) {
            size_list = argv[i + 1];
        }
    }
    if (nthreads < 1 || nthreads > MAX_THREADS) {
        nthreads = 4;
    }
    if (NULL == size_list) {
        nsizes = (int)(sizeof(default_sizes) / sizeof(default_sizes[0]));
        memcpy(sizes, default_sizes, sizeof(default_sizes));
    } else {
        char *copy = strdup(size_list);
        for (char *tok = strtok(copy, ","); NULL != tok && nsizes < 64;
             tok = strtok(NULL, ",")) {
            sizes[nsizes++] = strtoull(tok, NULL, 10);
        }
        free(copy);
    }
    for (int i = 0; i < nsizes; ++i) {
        max_size = sizes[i] > max_size ? sizes[i] : max_size;
    }
    if (MPI_THREAD_MULTIPLE != dp_thread_provided) {
        dp_fail("asked for MPI_THREAD_MULTIPLE (%d), provided %d", MPI_THREAD_MULTIPLE,
                dp_thread_provided);
        return dp_finish();
    }
    if (0 == dp_rank) {
        printf("threads: MPI_THREAD_MULTIPLE provided; %d threads per rank, %d rounds, %d sizes "
               "up to %zu\n", nthreads, rounds, nsizes, max_size);
        fflush(stdout);
    }
    t0 = dp_now();
    for (int t = 0; t < nthreads; ++t) {
        if (0 != pthread_create(&tid[t], NULL, worker, (void *)(intptr_t) t)) {
            fprintf(stderr, "threads: rank %d: pthread_create failed\n", dp_rank);
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
    }
    for (int t = 0; t < nthreads; ++t) {
        pthread_join(tid[t], NULL);
    }
    dp_phase_done("threaded exchange", t0);
    return dp_finish();
}
