/* Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 * SPDX-License-Identifier: BSD-3-Clause */
/* busypeer: ranks that stay outside MPI (sleeping: no MPI calls at all) while their partner
 * has data for them, for the liveness tests (t-busypeer.sh).
 *
 * Ranks pair up across the hosts (r < n/2 with r + n/2). Two phases; in phase 0 the lower
 * rank of each pair sends, in phase 1 the upper one. Each phase starts with a checked
 * 3000-byte ping-pong (both directions have had traffic), then:
 *   busy     the receiver sleeps SECONDS while the sender sends it messages of 64, 3000,
 *            20000, 200000 and 2097152 bytes (fast path, one datagram, chunks, rendezvous)
 *            and waits for them to complete: its data stays unacknowledged all that time;
 *   compute  the sender sleeps SECONDS (a computation longer than the peer timeout), then
 *            sends the same messages to the receiver, which sleeps 2 s longer, so that the
 *            first data sent after the computation stays unacknowledged for about 2 s.
 * The receiver then checks every message and sends it back transformed; the sender checks
 * that. The sender prints "busypeer: phase P: rank R's sends completed after X s".
 *
 * Usage: busypeer busy|compute SECONDS
 */
#include "common.h"

#include <errno.h>

static const size_t msg_sizes[] = {64, 3000, 20000, 200000, 2097152};
#define NMSG (sizeof(msg_sizes) / sizeof(msg_sizes[0]))

/* Sleep without calling MPI: the process computes, as far as MPI can tell. */
static void away(double secs)
{
    double end = dp_now() + secs;

    while (dp_now() < end) {
        double left = end - dp_now();
        struct timespec ts = {.tv_sec = (time_t) left,
                              .tv_nsec = (long) ((left - (time_t) left) * 1e9)};
        if (0 != nanosleep(&ts, NULL) && EINTR != errno) {
            break;
        }
    }
}

/* A checked ping-pong of 3000 bytes, started by the lower rank. */
static void exchange(int partner, bool lower, int phase, int pair)
{
    uint8_t sbuf[3000], rbuf[3000 + DP_GUARD];
    uint64_t seed = dp_seed(95, phase, pair, 0);
    char ctx[100];
    MPI_Status st;
    int count;

    snprintf(ctx, sizeof(ctx), "phase %d ping-pong from rank %d", phase, partner);
    dp_gen(sbuf, sizeof(sbuf), seed, 0);
    if (lower) {
        MPI_Send(sbuf, sizeof(sbuf), MPI_BYTE, partner, 1, MPI_COMM_WORLD);
    }
    MPI_Recv(rbuf, sizeof(rbuf), MPI_BYTE, partner, 1, MPI_COMM_WORLD, &st);
    MPI_Get_count(&st, MPI_BYTE, &count);
    if (sizeof(sbuf) != (size_t) count) {
        dp_fail("%s: %d bytes", ctx, count);
    } else if (dp_check(rbuf, sizeof(sbuf), seed, 0, ctx)) {
        dp_count_in(sizeof(sbuf));
        dp_verified(sizeof(sbuf));
    }
    if (!lower) {
        MPI_Send(sbuf, sizeof(sbuf), MPI_BYTE, partner, 1, MPI_COMM_WORLD);
    }
}

int main(int argc, char **argv)
{
    uint8_t *sbuf[NMSG], *rbuf[NMSG];
    bool lower, compute;
    double secs;
    int partner, pair;

    dp_init("busypeer", &argc, &argv);
    if (argc != 3 || (0 != strcmp(argv[1], "busy") && 0 != strcmp(argv[1], "compute"))) {
        if (0 == dp_rank) {
            printf("busypeer: ERROR usage: busypeer busy|compute SECONDS\n");
        }
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    compute = 0 == strcmp(argv[1], "compute");
    secs = atof(argv[2]);
    partner = dp_cross_partner(&lower);
    pair = lower ? dp_rank : partner;
    for (size_t i = 0; i < NMSG; ++i) {
        sbuf[i] = dp_malloc(msg_sizes[i]);
        rbuf[i] = dp_malloc(msg_sizes[i] + DP_GUARD);
    }

    for (int phase = 0; phase < 2; ++phase) {
        bool sender = (0 == phase) == lower;
        MPI_Request req[NMSG];
        char ctx[200];

        exchange(partner, lower, phase, pair);
        for (size_t i = 0; i < NMSG; ++i) {
            memset(rbuf[i], 0x5a, msg_sizes[i] + DP_GUARD);
        }
        if (sender) {
            double t0;
            if (compute) {
                away(secs);
            }
            t0 = dp_now();
            for (size_t i = 0; i < NMSG; ++i) {
                dp_gen(sbuf[i], msg_sizes[i], dp_seed(90, phase, i, pair), 0);
                MPI_Isend(sbuf[i], (int) msg_sizes[i], MPI_BYTE, partner, 10 + (int) i,
                          MPI_COMM_WORLD, &req[i]);
            }
            MPI_Waitall(NMSG, req, MPI_STATUSES_IGNORE);
            printf("busypeer: phase %d: rank %d's sends completed after %.1f s\n", phase,
                   dp_rank, dp_now() - t0);
            fflush(stdout);
        } else {
            away(compute ? secs + 2 : secs);
        }
        /* the receiver checks everything, then answers with a second pattern on top */
        for (size_t i = 0; i < NMSG; ++i) {
            size_t n = msg_sizes[i];
            uint64_t s0 = dp_seed(90, phase, i, pair), sT = dp_seed(91, phase, i, pair);
            MPI_Status st;
            int count;

            if (sender) {
                MPI_Recv(rbuf[i], (int) (n + DP_GUARD), MPI_BYTE, partner, 20 + (int) i,
                         MPI_COMM_WORLD, &st);
                snprintf(ctx, sizeof(ctx), "phase %d answer %zu from rank %d", phase, n,
                         partner);
            } else {
                MPI_Recv(rbuf[i], (int) (n + DP_GUARD), MPI_BYTE, partner, 10 + (int) i,
                         MPI_COMM_WORLD, &st);
                snprintf(ctx, sizeof(ctx), "phase %d message %zu from rank %d", phase, n,
                         partner);
            }
            MPI_Get_count(&st, MPI_BYTE, &count);
            if (count < 0 || (size_t) count != n) {
                dp_fail("%s: %d bytes", ctx, count);
            } else if (dp_check2(rbuf[i], n, s0, sender ? sT : 0, 0, ctx)) {
                dp_count_in(n);
                dp_verified(n);
            }
            snprintf(ctx, sizeof(ctx), "phase %d size %zu (guard after the data)", phase, n);
            dp_check_fill(rbuf[i] + n, DP_GUARD, 0x5a, ctx);
        }
        /* answers only once everything arrived: the sender posts its receives after its
         * sends completed, and a rendezvous answer would wait for that */
        for (size_t i = 0; i < NMSG && !sender; ++i) {
            size_t n = msg_sizes[i];
            dp_gen(sbuf[i], n, dp_seed(91, phase, i, pair), 0);
            for (size_t k = 0; k < n; ++k) {
                sbuf[i][k] ^= rbuf[i][k];
            }
            MPI_Send(sbuf[i], (int) n, MPI_BYTE, partner, 20 + (int) i, MPI_COMM_WORLD);
        }
    }
    for (size_t i = 0; i < NMSG; ++i) {
        free(sbuf[i]);
        free(rbuf[i]);
    }
    return dp_finish();
}
