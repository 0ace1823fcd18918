/* Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 * SPDX-License-Identifier: BSD-3-Clause */
/* pingloop: checked ping-pong between the hosts for a given time, for the dead-peer tests
 * (t-deadpeer.sh): traffic is always in flight, so a network outage stalls it at once.
 *
 * Ranks pair up across the hosts (r < n/2 with r + n/2). The lower rank of each pair sends
 * pings of 64, 3000, 20000 and 200000 bytes in turn (fast path, one datagram, chunks,
 * rendezvous), each with a pattern that depends on (size, iteration, pair); the partner checks
 * it, XORs it with a second pattern and sends it back; the lower rank checks that. After
 * SECONDS (the lower rank's clock) it sends a stop message instead of a ping.
 * Rank 0 prints a line every 2 s and, at the end, its longest round trip: how long the traffic
 * stood still.
 *
 * Usage: pingloop [SECONDS [MAXSIZE]]   (default 20 s; only the ping sizes up to MAXSIZE)
 */
#include "common.h"

enum { TAG_PING = 1, TAG_PONG = 2, TAG_STOP = 3 };

static const size_t ping_sizes[] = {64, 3000, 20000, 200000};
#define NPING (sizeof(ping_sizes) / sizeof(ping_sizes[0]))
#define MAXPING 200000

int main(int argc, char **argv)
{
    double secs, t0, tlast, longest = 0, longest_at = 0;
    uint8_t *sbuf, *rbuf;
    int partner, pair;
    bool lower;
    long it = 0;
    size_t nsizes = NPING;
    char ctx[200];

    dp_init("pingloop", &argc, &argv);
    secs = argc > 1 ? atof(argv[1]) : 20.0;
    if (argc > 2) {
        for (nsizes = 0; nsizes < NPING && ping_sizes[nsizes] <= (size_t) atol(argv[2]);) {
            ++nsizes;
        }
        if (0 == nsizes) {
            dp_fail("no ping size up to %s bytes", argv[2]);
        }
    }
    partner = dp_cross_partner(&lower);
    pair = lower ? dp_rank : partner;
    sbuf = dp_malloc(MAXPING);
    rbuf = dp_malloc(MAXPING + DP_GUARD);
    t0 = tlast = dp_now();

    for (;; ++it) {
        size_t size = ping_sizes[it % nsizes];
        uint64_t s0 = dp_seed(80, size, it, pair), sT = dp_seed(81, size, it, pair);
        uint8_t poison = (uint8_t)(0x6b ^ it);
        MPI_Status st;
        int count = -1;

        memset(rbuf, poison, MAXPING + DP_GUARD);
        if (lower) {
            double ts = dp_now(), rt;
            if (ts - t0 >= secs) {
                MPI_Send(NULL, 0, MPI_BYTE, partner, TAG_STOP, MPI_COMM_WORLD);
                break;
            }
            dp_gen(sbuf, size, s0, 0);
            MPI_Send(sbuf, (int) size, MPI_BYTE, partner, TAG_PING, MPI_COMM_WORLD);
            MPI_Recv(rbuf, MAXPING + DP_GUARD, MPI_BYTE, partner, TAG_PONG, MPI_COMM_WORLD,
                     &st);
            rt = dp_now() - ts;
            if (rt > longest) {
                longest = rt;
                longest_at = ts - t0;
            }
            snprintf(ctx, sizeof(ctx), "pong %ld from rank %d, size %zu", it, partner, size);
            MPI_Get_count(&st, MPI_BYTE, &count);
            if (count < 0 || (size_t) count != size) {
                dp_fail("%s: %d bytes", ctx, count);
            } else {
                dp_check2(rbuf, size, s0, sT, 0, ctx);
            }
            if (0 == dp_rank && dp_now() - tlast >= 2.0) {
                tlast = dp_now();
                printf("pingloop: t=%.1f s: %ld round trips\n", tlast - t0, it + 1);
                fflush(stdout);
            }
        } else {
            MPI_Recv(rbuf, MAXPING + DP_GUARD, MPI_BYTE, partner, MPI_ANY_TAG, MPI_COMM_WORLD,
                     &st);
            if (TAG_STOP == st.MPI_TAG) {
                break;
            }
            snprintf(ctx, sizeof(ctx), "ping %ld from rank %d, size %zu", it, partner, size);
            MPI_Get_count(&st, MPI_BYTE, &count);
            if (TAG_PING != st.MPI_TAG || count < 0 || (size_t) count != size) {
                dp_fail("%s: tag %d, %d bytes", ctx, st.MPI_TAG, count);
            } else {
                dp_check(rbuf, size, s0, 0, ctx);
            }
            dp_gen(sbuf, size, sT, 0);
            for (size_t i = 0; i < size; ++i) {
                rbuf[i] ^= sbuf[i];
            }
            MPI_Send(rbuf, (int) size, MPI_BYTE, partner, TAG_PONG, MPI_COMM_WORLD);
        }
        snprintf(ctx, sizeof(ctx), "iteration %ld size %zu (guard after the data)", it, size);
        dp_check_fill(rbuf + size, DP_GUARD, poison, ctx);
        dp_count_in(size);
        dp_verified(size);
    }
    if (0 == dp_rank) {
        printf("pingloop: %ld round trips in %.1f s, longest %.2f s (started at t=%.1f s)\n",
               it, dp_now() - t0, longest, longest_at);
        fflush(stdout);
    }
    free(sbuf);
    free(rbuf);
    return dp_finish();
}
