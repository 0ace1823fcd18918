/* Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 * SPDX-License-Identifier: BSD-3-Clause */
/* sendmodes: every MPI send mode between two hosts, at every protocol boundary, every byte
 * checked.
 *
 * Ranks pair up across the hosts (rank r < n/2 with r + n/2) and all pairs run at once. For
 * each mode, each size and both directions, the sender sends twice:
 *   1st  the receiver posts its receive, then tells the sender (a zero-byte token) to go;
 *   2nd  the sender goes at once (the message may arrive before the receive is posted),
 *        except for the ready modes, which always wait for the token (MPI_Rsend needs the
 *        receive posted first).
 * Modes: MPI_Send, MPI_Bsend, MPI_Ibsend, MPI_Rsend, MPI_Irsend, MPI_Ssend, MPI_Issend, and
 * persistent requests from MPI_Send_init, MPI_Bsend_init, MPI_Ssend_init and MPI_Rsend_init
 * (made once per size and direction, started for both messages). Buffered sends go through
 * a buffer attached with MPI_Buffer_attach. Once a send has completed, the sender overwrites
 * its buffer, so data the library still read from user memory would arrive wrong.
 * The receiver poisons its buffer first, checks every byte, the 64-byte guard after the data,
 * and the status (source, tag, count).
 *
 * Usage: sendmodes -T FAST -D DGRAM -C CHUNK -E EAGER -R RNDV [-m MODE]
 *   FAST   largest usnic fast-path payload (PML header included), DGRAM one datagram's
 *          payload, CHUNK one chunk's payload, EAGER btl_usnic_eager_limit, RNDV
 *          btl_usnic_rndv_eager_limit. The sizes tested are, in user bytes, each boundary
 *          b - 1, b, b + 1 for b in: 0, 1, FAST - 14, DGRAM - 14, 2 CHUNK - 14, RNDV,
 *          EAGER - 56 (ob1's eager/rendezvous switch: it subtracts its largest header),
 *          EAGER - 14, EAGER, 2 EAGER, 4 EAGER + 3 (14: ob1's match header).
 *   -m     only this mode (its name as printed), for reproducing a failure
 */
#include "common.h"

enum { TAG_TOKEN = 90, TAG_DATA = 100 };
#define MATCH_HDR 14
#define OB1_MAX_HDR 56

typedef enum {
    M_SEND, M_BSEND, M_IBSEND, M_RSEND, M_IRSEND, M_SSEND, M_ISSEND,
    M_SEND_INIT, M_BSEND_INIT, M_SSEND_INIT, M_RSEND_INIT, M_COUNT
} smode_t;

static const char *mode_name[M_COUNT] = {
    "send", "bsend", "ibsend", "rsend", "irsend", "ssend", "issend",
    "send_init", "bsend_init", "ssend_init", "rsend_init",
};

static size_t sizes[64];
static int nsizes;
static int partner, pair;
static bool lower;

static bool ready_mode(smode_t m)
{
    return M_RSEND == m || M_IRSEND == m || M_RSEND_INIT == m;
}

static void add_size(long long s)
{
    if (s < 0) {
        return;
    }
    for (int i = 0; i < nsizes; ++i) {
        if (sizes[i] == (size_t) s) {
            return;
        }
    }
    sizes[nsizes++] = (size_t) s;
}

static int cmp_size(const void *a, const void *b)
{
    size_t x = *(const size_t *) a, y = *(const size_t *) b;
    return x < y ? -1 : x > y;
}

static void make_sizes(long long fast, long long dgram, long long chunk, long long eager,
                       long long rndv)
{
    const long long edges[] = {0, 1, fast - MATCH_HDR, dgram - MATCH_HDR,
                               2 * chunk - MATCH_HDR, rndv, eager - OB1_MAX_HDR,
                               eager - MATCH_HDR, eager, 2 * eager, 4 * eager + 3};

    for (size_t i = 0; i < sizeof(edges) / sizeof(edges[0]); ++i) {
        add_size(edges[i] - 1);
        add_size(edges[i]);
        add_size(edges[i] + 1);
    }
    qsort(sizes, nsizes, sizeof(size_t), cmp_size);
}

/* One message from the sender's side, complete on return; preq: the request of the
 * persistent modes. */
static void send_one(smode_t m, uint8_t *buf, size_t size, int tag, MPI_Request *preq)
{
    MPI_Request req = MPI_REQUEST_NULL;
    int n = (int) size;

    switch (m) {
    case M_SEND: MPI_Send(buf, n, MPI_BYTE, partner, tag, MPI_COMM_WORLD); break;
    case M_BSEND: MPI_Bsend(buf, n, MPI_BYTE, partner, tag, MPI_COMM_WORLD); break;
    case M_RSEND: MPI_Rsend(buf, n, MPI_BYTE, partner, tag, MPI_COMM_WORLD); break;
    case M_SSEND: MPI_Ssend(buf, n, MPI_BYTE, partner, tag, MPI_COMM_WORLD); break;
    case M_IBSEND: MPI_Ibsend(buf, n, MPI_BYTE, partner, tag, MPI_COMM_WORLD, &req); break;
    case M_IRSEND: MPI_Irsend(buf, n, MPI_BYTE, partner, tag, MPI_COMM_WORLD, &req); break;
    case M_ISSEND: MPI_Issend(buf, n, MPI_BYTE, partner, tag, MPI_COMM_WORLD, &req); break;
    default:
        MPI_Start(preq);
        MPI_Wait(preq, MPI_STATUS_IGNORE);
        return;
    }
    if (MPI_REQUEST_NULL != req) {
        MPI_Wait(&req, MPI_STATUS_IGNORE);
    }
}

static void make_persistent(smode_t m, uint8_t *buf, size_t size, int tag, MPI_Request *req)
{
    int n = (int) size;

    switch (m) {
    case M_SEND_INIT: MPI_Send_init(buf, n, MPI_BYTE, partner, tag, MPI_COMM_WORLD, req); break;
    case M_BSEND_INIT: MPI_Bsend_init(buf, n, MPI_BYTE, partner, tag, MPI_COMM_WORLD, req); break;
    case M_SSEND_INIT: MPI_Ssend_init(buf, n, MPI_BYTE, partner, tag, MPI_COMM_WORLD, req); break;
    case M_RSEND_INIT: MPI_Rsend_init(buf, n, MPI_BYTE, partner, tag, MPI_COMM_WORLD, req); break;
    default: *req = MPI_REQUEST_NULL; break;
    }
}

/* Both messages of one mode, size and direction (dir 0: lower -> upper). */
static void exchange(smode_t m, size_t size, int dir, uint8_t *sbuf, uint8_t *rbuf)
{
    bool sending = (0 == dir) == lower;
    int tag = TAG_DATA + (int) m, me = lower ? 0 : 1;
    MPI_Request preq = MPI_REQUEST_NULL;
    char ctx[200];

    if (sending) {
        make_persistent(m, sbuf, size, tag, &preq);
    }
    for (int it = 0; it < 2; ++it) {
        bool handshake = 0 == it || ready_mode(m);
        uint64_t seed = dp_seed(10 + m, size, 2 * it + dir, pair);

        if (sending) {
            dp_gen(sbuf, size, seed, 0);
            if (handshake) {
                MPI_Recv(NULL, 0, MPI_BYTE, partner, TAG_TOKEN, MPI_COMM_WORLD,
                         MPI_STATUS_IGNORE);
            }
            send_one(m, sbuf, size, tag, &preq);
            /* complete: the library must not read user memory any more */
            memset(sbuf, 0xee ^ me, size);
        } else {
            uint8_t poison = (uint8_t)(0x3c ^ it ^ m ^ size);
            MPI_Request req;
            MPI_Status st;
            int count = -1;

            memset(rbuf, poison, size + DP_GUARD);
            MPI_Irecv(rbuf, (int)(size + DP_GUARD), MPI_BYTE, partner, tag, MPI_COMM_WORLD,
                      &req);
            if (handshake) {
                MPI_Send(NULL, 0, MPI_BYTE, partner, TAG_TOKEN, MPI_COMM_WORLD);
            }
            MPI_Wait(&req, &st);
            snprintf(ctx, sizeof(ctx), "%s from rank %d: size %zu message %d", mode_name[m],
                     partner, size, it);
            MPI_Get_count(&st, MPI_BYTE, &count);
            if (st.MPI_SOURCE != partner || st.MPI_TAG != tag || count < 0 ||
                (size_t) count != size) {
                dp_fail("%s: status source %d tag %d count %d, expected source %d tag %d "
                        "count %zu", ctx, st.MPI_SOURCE, st.MPI_TAG, count, partner, tag, size);
            }
            dp_check(rbuf, size, seed, 0, ctx);
            strncat(ctx, " (guard after the data)", sizeof(ctx) - strlen(ctx) - 1);
            dp_check_fill(rbuf + size, DP_GUARD, poison, ctx);
            dp_count_in(size);
            dp_verified(size);
        }
    }
    if (MPI_REQUEST_NULL != preq) {
        MPI_Request_free(&preq);
    }
}

int main(int argc, char **argv)
{
    long long fast = 0, dgram = 0, chunk = 0, eager = 0, rndv = 0;
    const char *only = NULL;
    size_t maxsize, bsize;
    uint8_t *sbuf, *rbuf, *battach;
    void *detached;
    int dsize;

    dp_init("sendmodes", &argc, &argv);
    for (int i = 1; i + 1 < argc; i += 2) {
        long long v = strtoll(argv[i + 1], NULL, 0);
        if (0 == strcmp(argv[i], "-T")) {
            fast = v;
        } else if (0 == strcmp(argv[i], "-D")) {
            dgram = v;
        } else if (0 == strcmp(argv[i], "-C")) {
            chunk = v;
        } else if (0 == strcmp(argv[i], "-E")) {
            eager = v;
        } else if (0 == strcmp(argv[i], "-R")) {
            rndv = v;
        } else if (0 == strcmp(argv[i], "-m")) {
            only = argv[i + 1];
        } else {
            fast = 0;
            break;
        }
    }
    if (fast <= MATCH_HDR || dgram <= fast || chunk <= 0 || eager <= dgram || rndv <= 0) {
        if (0 == dp_rank) {
            printf("sendmodes: usage: sendmodes -T FAST -D DGRAM -C CHUNK -E EAGER -R RNDV "
                   "[-m MODE]\n");
        }
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    make_sizes(fast, dgram, chunk, eager, rndv);
    maxsize = sizes[nsizes - 1];
    partner = dp_cross_partner(&lower);
    pair = lower ? dp_rank : partner;
    if (0 == dp_rank) {
        printf("sendmodes: %d sizes:", nsizes);
        for (int i = 0; i < nsizes; ++i) {
            printf(" %zu", sizes[i]);
        }
        printf("\nsendmodes: %d pairs\n", dp_size / 2);
        fflush(stdout);
    }
    /* room for a few of the largest messages buffered at once */
    bsize = 4 * (maxsize + MPI_BSEND_OVERHEAD) + 4096;
    battach = dp_malloc(bsize);
    MPI_Buffer_attach(battach, (int) bsize);
    sbuf = dp_malloc(maxsize);
    rbuf = dp_malloc(maxsize + DP_GUARD);

    for (int m = 0; m < M_COUNT; ++m) {
        double t = dp_now();
        if (NULL != only && 0 != strcmp(only, mode_name[m])) {
            continue;
        }
        for (int i = 0; i < nsizes; ++i) {
            for (int dir = 0; dir < 2; ++dir) {
                exchange((smode_t) m, sizes[i], dir, sbuf, rbuf);
            }
        }
        dp_phase_done(mode_name[m], t);
    }
    MPI_Buffer_detach(&detached, &dsize);
    free(battach);
    free(sbuf);
    free(rbuf);
    return dp_finish();
}
