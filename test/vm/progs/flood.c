/* Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 * SPDX-License-Identifier: BSD-3-Clause */
/* flood: thousands of small messages in flight at once, deeper than the usnic send window
 * (at most 256 segments per peer) and the send queue (1024 work requests), every byte checked.
 *
 * Message k from rank s has size (k * 97 + s) % 1201 bytes (0 to 1200: both sides of the
 * priority fast-path limit), a tag that cycles through 7 values and a pattern seeded by
 * (phase, s, k). MPI keeps messages from one source in order, so receive k of a source must
 * hold exactly message k: a lost, duplicated or reordered message shows up as a wrong size,
 * tag or pattern.
 *
 *   pairs-preposted   ranks pair across the hosts (r < n/2 with r + n/2); each pair posts N
 *                     receives, barrier, then both send N messages at once: both directions
 *                     simultaneously.
 *   pairs-unexpected  the same, but both send first and post their receives only after a
 *                     barrier, so most messages arrive before their receive (unexpected queue).
 *   anysource-to-R    every other rank sends N messages to rank R, which receives all of them
 *                     with MPI_ANY_SOURCE / MPI_ANY_TAG and checks every source's sequence.
 *                     R = 0 with the receives pre-posted, then R = n-1 (the other host) with
 *                     the receives posted after the senders started.
 *
 * Usage: flood [-n N]   (default 5000)
 */
#include "common.h"

#define MAX_MSG 1200
#define SLOT (MAX_MSG + DP_GUARD)
#define NTAGS 7

static int n_msgs = 5000;

static size_t msg_size(int src, int k)
{
    return ((size_t) k * 97 + src) % (MAX_MSG + 1);
}

static int msg_tag(int k)
{
    return 100 + k % NTAGS;
}

static uint64_t msg_seed(int phase, int src, int k)
{
    return dp_seed(phase, src, k, 0xf100d);
}

static uint8_t slot_poison(int k)
{
    return (uint8_t)(0xc3 ^ k);
}

/* post receives into slots [0, n) of rbuf */
static void post_recvs(uint8_t *rbuf, int n, int src, int tag, MPI_Request *req)
{
    for (int k = 0; k < n; ++k) {
        memset(rbuf + (size_t) k * SLOT, slot_poison(k), SLOT);
        MPI_Irecv(rbuf + (size_t) k * SLOT, SLOT, MPI_BYTE, src, tag, MPI_COMM_WORLD, &req[k]);
    }
}

static void post_sends(uint8_t *sbuf, int n, int dst, int phase, MPI_Request *req)
{
    for (int k = 0; k < n; ++k) {
        size_t size = msg_size(dp_rank, k);
        dp_gen(sbuf + (size_t) k * MAX_MSG, size, msg_seed(phase, dp_rank, k), 0);
        MPI_Isend(sbuf + (size_t) k * MAX_MSG, (int) size, MPI_BYTE, dst, msg_tag(k),
                  MPI_COMM_WORLD, &req[k]);
    }
}

/* receive slot `slot` must hold message k of src */
static void check_msg(const char *phase_name, int phase, const uint8_t *rbuf, int slot,
                      const MPI_Status *st, int src, int k)
{
    size_t size = msg_size(src, k);
    const uint8_t *b = rbuf + (size_t) slot * SLOT;
    char ctx[200];
    int count = -1;

    MPI_Get_count(st, MPI_BYTE, &count);
    snprintf(ctx, sizeof(ctx), "%s: receive %d = message %d from rank %d, size %zu", phase_name,
             slot, k, src, size);
    if (st->MPI_SOURCE != src || st->MPI_TAG != msg_tag(k) || count < 0 ||
        (size_t) count != size) {
        dp_fail("%s: status source %d tag %d count %d, expected tag %d", ctx, st->MPI_SOURCE,
                st->MPI_TAG, count, msg_tag(k));
        return;
    }
    dp_check(b, size, msg_seed(phase, src, k), 0, ctx);
    strncat(ctx, " (guard after the data)", sizeof(ctx) - strlen(ctx) - 1);
    dp_check_fill(b + size, SLOT - size, slot_poison(slot), ctx);
    if (dp_host_of[src] != dp_my_host) {
        dp_count_in(size);
    }
    dp_verified(size);
}

/* both ranks of each cross-host pair send n messages to each other at once */
static void pairs(int phase, bool preposted)
{
    const char *name = preposted ? "pairs-preposted" : "pairs-unexpected";
    int partner = dp_rank < dp_size / 2 ? dp_rank + dp_size / 2 : dp_rank - dp_size / 2;
    uint8_t *sbuf = dp_malloc((size_t) n_msgs * MAX_MSG);
    uint8_t *rbuf = dp_malloc((size_t) n_msgs * SLOT);
    MPI_Request *req = dp_malloc(2 * (size_t) n_msgs * sizeof(MPI_Request));
    MPI_Status *st = dp_malloc(2 * (size_t) n_msgs * sizeof(MPI_Status));
    double t = dp_now();

    if (dp_host_of[partner] == dp_my_host) {
        dp_fail("partner rank %d runs on my host: the pairs do not cross the hosts", partner);
    }
    if (preposted) {
        post_recvs(rbuf, n_msgs, partner, MPI_ANY_TAG, req);
        MPI_Barrier(MPI_COMM_WORLD);
        post_sends(sbuf, n_msgs, partner, phase, req + n_msgs);
    } else {
        post_sends(sbuf, n_msgs, partner, phase, req + n_msgs);
        MPI_Barrier(MPI_COMM_WORLD);
        post_recvs(rbuf, n_msgs, partner, MPI_ANY_TAG, req);
    }
    MPI_Waitall(2 * n_msgs, req, st);
    for (int k = 0; k < n_msgs; ++k) {
        check_msg(name, phase, rbuf, k, &st[k], partner, k);
    }
    free(sbuf);
    free(rbuf);
    free(req);
    free(st);
    dp_phase_done(name, t);
}

/* every rank but root sends n messages to root, which receives them with wildcards */
static void anysource(int phase, int root, bool preposted)
{
    char name[64];
    int total = (dp_size - 1) * n_msgs;
    double t = dp_now();

    snprintf(name, sizeof(name), "anysource-to-%d%s", root, preposted ? "" : "-unexpected");
    if (dp_rank == root) {
        uint8_t *rbuf = dp_malloc((size_t) total * SLOT);
        MPI_Request *req = dp_malloc((size_t) total * sizeof(MPI_Request));
        MPI_Status *st = dp_malloc((size_t) total * sizeof(MPI_Status));
        int *next = calloc(dp_size, sizeof(int));

        if (preposted) {
            post_recvs(rbuf, total, MPI_ANY_SOURCE, MPI_ANY_TAG, req);
            MPI_Barrier(MPI_COMM_WORLD);
        } else {
            MPI_Barrier(MPI_COMM_WORLD);
            post_recvs(rbuf, total, MPI_ANY_SOURCE, MPI_ANY_TAG, req);
        }
        MPI_Waitall(total, req, st);
        /* receives match in the order they were posted: per source, in send order */
        for (int i = 0; i < total; ++i) {
            int src = st[i].MPI_SOURCE;
            if (src < 0 || src >= dp_size || src == root || next[src] >= n_msgs) {
                dp_fail("%s: receive %d: unexpected source %d", name, i, src);
                continue;
            }
            check_msg(name, phase, rbuf, i, &st[i], src, next[src]++);
        }
        for (int s = 0; s < dp_size; ++s) {
            if (s != root && next[s] != n_msgs) {
                dp_fail("%s: got %d messages from rank %d, expected %d", name, next[s], s,
                        n_msgs);
            }
        }
        free(next);
        free(rbuf);
        free(req);
        free(st);
    } else {
        uint8_t *sbuf = dp_malloc((size_t) n_msgs * MAX_MSG);
        MPI_Request *req = dp_malloc((size_t) n_msgs * sizeof(MPI_Request));

        if (preposted) {
            MPI_Barrier(MPI_COMM_WORLD);
            post_sends(sbuf, n_msgs, root, phase, req);
        } else {
            post_sends(sbuf, n_msgs, root, phase, req);
            MPI_Barrier(MPI_COMM_WORLD);
        }
        MPI_Waitall(n_msgs, req, MPI_STATUSES_IGNORE);
        free(sbuf);
        free(req);
    }
    dp_phase_done(name, t);
}

int main(int argc, char **argv)
{
    dp_init("flood", &argc, &argv);
    for (int i = 1; i + 1 < argc; i += 2) {
        if (0 == strcmp(argv[i], "-n")) {
            n_msgs = atoi(argv[i + 1]);
        }
    }
    if (0 != dp_size % 2 || n_msgs < 1) {
        if (0 == dp_rank) {
            printf("flood: ERROR needs an even number of ranks and -n >= 1\n");
        }
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    if (0 == dp_rank) {
        printf("flood: %d messages of 0-%d bytes per sender and phase\n", n_msgs, MAX_MSG);
        fflush(stdout);
    }
    pairs(1, true);
    pairs(2, false);
    anysource(3, 0, true);
    anysource(4, dp_size - 1, false);
    return dp_finish();
}
