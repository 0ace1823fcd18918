/* Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 * SPDX-License-Identifier: BSD-3-Clause */
/* p2p: point-to-point data path between two hosts, every byte checked.
 *
 * Ranks pair up across the hosts (rank r < n/2 with r + n/2; the pairs must span the hosts),
 * and all pairs run at once. For every size (0 B to 16 MiB, with each usnic/ob1 protocol
 * boundary +-1 byte):
 *   pingpong  the lower rank sends a pattern that depends on size, iteration, pair and byte
 *             position; the partner checks it, XORs it with a second pattern and sends it
 *             back from the same buffer; the lower rank checks that.
 *   stream    W messages in flight at once (MPI_Isend/MPI_Irecv, W = 16 for small sizes,
 *             fewer for large ones): lower to upper rank, upper to lower, then both at once.
 * Every receive buffer is poisoned first and has a 64-byte guard after it that must stay
 * poisoned; the received count, source and tag are checked too.
 *
 * Usage: p2p [-s SIZE,SIZE,...] [-m MAXSIZE] [-p pingpong|stream|both] [-W STREAMBYTES]
 *            [-B BIGPAIRS]
 *   -s  only these sizes (for reproducing a failure)
 *   -m  skip sizes above MAXSIZE
 *   -W  a stream carries about this many bytes (default 2 MiB, at least 1 message)
 *   -B  only the first BIGPAIRS pairs run sizes above 1 MiB + 1 (default: all pairs)
 *   -v 1  rank 0 prints the time each size took
 */
#include "common.h"

#include <limits.h>

enum { TAG_PING = 11, TAG_PONG = 12, TAG_STREAM = 20 };
#define MAX_W 16

/* The boundaries, in user bytes (PML match header: 14 bytes, ob1's eager limit check
 * subtracts its largest header, 56 bytes):
 *   priority channel fast path: 736 B incl. the PML header  -> 722 | 723
 *   one datagram:              4064 B incl. the PML header  -> 4050 | 4051 (first chunked)
 *   two chunks of 4048 B:      8096 B incl. the PML header  -> 8082 | 8083
 *   eager limit 153600:  eager up to 153544, rendezvous from 153545 (1st frag: 500 B,
 *                        btl_rndv_eager_limit) ; max_send_size = 153600 */
static const size_t fixed_sizes[] = {
    0, 1, 2, 3, 7, 8, 15, 16, 17, 63, 64, 65, 127, 128, 255, 256, 499, 500, 501, 512,
    /* 700..760 and 4000..4100 are added byte by byte */
    1023, 1024, 2048, 4096, 4097, 8082, 8083, 8192, 16383, 16384, 16385, 65536,
    153543, 153544, 153545, 153585, 153586, 153587, 153599, 153600, 153601,
    307199, 307200, 307201, 1048575, 1048576, 1048577, 4194307, 16777216,
};
#define BIG_SIZE (1048576 + 1)

static size_t *sizes;
static int nsizes;
static int partner, pair;
static bool lower;             /* the lower rank of the pair */
static int bigpairs = INT_MAX;
static int verbose;

static int cmp_size(const void *a, const void *b)
{
    size_t x = *(const size_t *) a, y = *(const size_t *) b;
    return x < y ? -1 : x > y;
}

static void add_size(size_t s, size_t max)
{
    if (s <= max) {
        sizes[nsizes++] = s;
    }
}

static void parse_sizes(const char *list, size_t max)
{
    const char *p = list;
    int n = 1;

    for (const char *q = list; *q; ++q) {
        n += ',' == *q;
    }
    sizes = dp_malloc(n * sizeof(size_t));
    while (*p) {
        char *end;
        unsigned long long v = strtoull(p, &end, 0);
        if (end == p) {
            break;
        }
        add_size(v, max);
        p = ',' == *end ? end + 1 : end;
    }
}

static void default_sizes(size_t max)
{
    int nfixed = sizeof(fixed_sizes) / sizeof(fixed_sizes[0]);

    sizes = dp_malloc((nfixed + 61 + 101) * sizeof(size_t));
    for (int i = 0; i < nfixed; ++i) {
        add_size(fixed_sizes[i], max);
    }
    for (size_t s = 700; s <= 760; ++s) {
        add_size(s, max);
    }
    for (size_t s = 4000; s <= 4100; ++s) {
        add_size(s, max);
    }
    qsort(sizes, nsizes, sizeof(size_t), cmp_size);
}

/* status of a receive from the partner: source, tag and byte count */
static void check_status(const MPI_Status *st, int tag, size_t size, const char *ctx)
{
    int count = -1;

    MPI_Get_count(st, MPI_BYTE, &count);
    if (st->MPI_SOURCE != partner || st->MPI_TAG != tag || count < 0 ||
        (size_t) count != size) {
        dp_fail("%s: status source %d tag %d count %d, expected source %d tag %d count %zu",
                ctx, st->MPI_SOURCE, st->MPI_TAG, count, partner, tag, size);
    }
}

static void pingpong(size_t size, int iters, uint8_t *sbuf, uint8_t *rbuf)
{
    char ctx[200];

    for (int it = 0; it < iters; ++it) {
        uint64_t s0 = dp_seed(1, size, it, pair), sT = dp_seed(2, size, it, pair);
        uint8_t poison = (uint8_t)(0xa5 ^ it ^ size);
        MPI_Status st;

        memset(rbuf, poison, size + DP_GUARD);
        if (lower) {
            dp_gen(sbuf, size, s0, 0);
            MPI_Send(sbuf, (int) size, MPI_BYTE, partner, TAG_PING, MPI_COMM_WORLD);
            MPI_Recv(rbuf, (int)(size + DP_GUARD), MPI_BYTE, partner, TAG_PONG,
                     MPI_COMM_WORLD, &st);
            snprintf(ctx, sizeof(ctx), "pong from rank %d: size %zu iter %d", partner, size,
                     it);
            check_status(&st, TAG_PONG, size, ctx);
            dp_check2(rbuf, size, s0, sT, 0, ctx);
        } else {
            MPI_Recv(rbuf, (int)(size + DP_GUARD), MPI_BYTE, partner, TAG_PING,
                     MPI_COMM_WORLD, &st);
            snprintf(ctx, sizeof(ctx), "ping from rank %d: size %zu iter %d", partner, size,
                     it);
            check_status(&st, TAG_PING, size, ctx);
            dp_check(rbuf, size, s0, 0, ctx);
            /* change every byte before answering, from the receive buffer itself */
            dp_gen(sbuf, size, sT, 0);
            for (size_t i = 0; i < size; ++i) {
                rbuf[i] ^= sbuf[i];
            }
            MPI_Send(rbuf, (int) size, MPI_BYTE, partner, TAG_PONG, MPI_COMM_WORLD);
            /* the guard must not have been touched by the receive */
        }
        strncat(ctx, " (guard after the data)", sizeof(ctx) - strlen(ctx) - 1);
        dp_check_fill(rbuf + size, DP_GUARD, poison, ctx);
        dp_count_in(size);
        dp_verified(size);
    }
}

static int stream_width(size_t size, size_t stream_bytes)
{
    size_t w = 0 == size ? MAX_W : stream_bytes / size;
    return w < 1 ? 1 : w > MAX_W ? MAX_W : (int) w;
}

/* mode 0: lower -> upper, 1: upper -> lower, 2: both at once */
static void stream(size_t size, int mode, int w, uint8_t *sbig, uint8_t *rbig)
{
    static const char *mode_name[] = {"lower->upper", "upper->lower", "both ways"};
    bool sending = 2 == mode || (0 == mode) == lower;
    bool receiving = 2 == mode || (0 == mode) != lower;
    int me_id = lower ? 0 : 1, peer_id = 1 - me_id, nreq = 0;
    MPI_Request req[2 * MAX_W];
    MPI_Status st[2 * MAX_W];
    uint8_t poison = (uint8_t)(0x5a ^ mode ^ size);
    char ctx[200];

    if (receiving) {
        for (int k = 0; k < w; ++k) {
            uint8_t *rb = rbig + k * (size + DP_GUARD);
            memset(rb, poison, size + DP_GUARD);
            MPI_Irecv(rb, (int)(size + DP_GUARD), MPI_BYTE, partner, TAG_STREAM + mode,
                      MPI_COMM_WORLD, &req[nreq++]);
        }
    }
    if (sending) {
        for (int k = 0; k < w; ++k) {
            uint8_t *sb = sbig + k * size;
            dp_gen(sb, size, dp_seed(3 + mode, size, k, 2 * pair + me_id), 0);
            MPI_Isend(sb, (int) size, MPI_BYTE, partner, TAG_STREAM + mode, MPI_COMM_WORLD,
                      &req[nreq++]);
        }
    }
    MPI_Waitall(nreq, req, st);
    if (!receiving) {
        return;
    }
    for (int k = 0; k < w; ++k) {
        uint8_t *rb = rbig + k * (size + DP_GUARD);
        snprintf(ctx, sizeof(ctx), "stream %s from rank %d: size %zu message %d of %d",
                 mode_name[mode], partner, size, k, w);
        check_status(&st[k], TAG_STREAM + mode, size, ctx);
        dp_check(rb, size, dp_seed(3 + mode, size, k, 2 * pair + peer_id), 0, ctx);
        strncat(ctx, " (guard after the data)", sizeof(ctx) - strlen(ctx) - 1);
        dp_check_fill(rb + size, DP_GUARD, poison, ctx);
        dp_count_in(size);
        dp_verified(size);
    }
}

int main(int argc, char **argv)
{
    size_t max = (size_t) 1 << 30, stream_bytes = 2u << 20, maxsize = 0, maxstream = 0;
    const char *list = NULL, *phases = "both";
    uint8_t *sbuf, *rbuf;
    double t;

    dp_init("p2p", &argc, &argv);
    for (int i = 1; i + 1 < argc; i += 2) {
        if (0 == strcmp(argv[i], "-s")) {
            list = argv[i + 1];
        } else if (0 == strcmp(argv[i], "-m")) {
            max = strtoull(argv[i + 1], NULL, 0);
        } else if (0 == strcmp(argv[i], "-p")) {
            phases = argv[i + 1];
        } else if (0 == strcmp(argv[i], "-W")) {
            stream_bytes = strtoull(argv[i + 1], NULL, 0);
        } else if (0 == strcmp(argv[i], "-v")) {
            verbose = atoi(argv[i + 1]);
        } else if (0 == strcmp(argv[i], "-B")) {
            bigpairs = atoi(argv[i + 1]);
        } else {
            if (0 == dp_rank) {
                printf("p2p: unknown option %s\n", argv[i]);
            }
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
    }
    if (NULL != list) {
        parse_sizes(list, max);
    } else {
        default_sizes(max);
    }
    partner = dp_cross_partner(&lower);
    pair = lower ? dp_rank : partner;
    for (int i = 0; i < nsizes; ++i) {
        size_t sb = (size_t) stream_width(sizes[i], stream_bytes) * sizes[i];
        if (sizes[i] > maxsize) {
            maxsize = sizes[i];
        }
        if (sb > maxstream) {
            maxstream = sb;
        }
    }
    if (0 == dp_rank) {
        printf("p2p: %d sizes from %zu to %zu bytes, %d pairs, %s\n", nsizes,
               nsizes ? sizes[0] : 0, maxsize, dp_size / 2, phases);
        fflush(stdout);
    }
    /* one allocation serves both phases: W * (size + guard) covers size + guard */
    maxstream += MAX_W * DP_GUARD;
    if (maxstream < maxsize + DP_GUARD) {
        maxstream = maxsize + DP_GUARD;
    }
    sbuf = dp_malloc(maxstream);
    rbuf = dp_malloc(maxstream);

    if (0 == strcmp(phases, "pingpong") || 0 == strcmp(phases, "both")) {
        t = dp_now();
        for (int i = 0; i < nsizes; ++i) {
            size_t s = sizes[i];
            if (s > BIG_SIZE && pair >= bigpairs) {
                continue;
            }
            double ts = dp_now();
            pingpong(s, s <= 65536 ? 3 : s <= BIG_SIZE ? 2 : 1, sbuf, rbuf);
            if (verbose && 0 == dp_rank) {
                printf("p2p: pingpong size %zu: %.1f ms\n", s, (dp_now() - ts) * 1e3);
            }
        }
        dp_phase_done("pingpong", t);
    }
    if (0 == strcmp(phases, "stream") || 0 == strcmp(phases, "both")) {
        t = dp_now();
        for (int i = 0; i < nsizes; ++i) {
            size_t s = sizes[i];
            if (s > BIG_SIZE && pair >= bigpairs) {
                continue;
            }
            double ts = dp_now();
            for (int mode = 0; mode < 3; ++mode) {
                stream(s, mode, stream_width(s, stream_bytes), sbuf, rbuf);
            }
            if (verbose && 0 == dp_rank) {
                printf("p2p: stream size %zu x %d: %.1f ms\n", s, stream_width(s, stream_bytes),
                       (dp_now() - ts) * 1e3);
            }
        }
        dp_phase_done("stream", t);
    }
    free(sbuf);
    free(rbuf);
    return dp_finish();
}
