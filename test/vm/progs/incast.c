/* Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 * SPDX-License-Identifier: BSD-3-Clause */
/* incast: every rank but one sends to one receiver at once (with 4 hosts x 2 ranks: 7 senders,
 * 6 of them on other hosts), every byte checked.
 *
 * For each size and each receiver R (the first rank of each host in turn, so that every host
 * receives), every other rank sends K messages of that size to R at once. R receives them with MPI_ANY_SOURCE into
 * separate poisoned buffers with guards, posted before the senders start ("preposted") or
 * after they started ("late": most messages then wait as unexpected ones, or as rendezvous
 * requests). Receives with MPI_ANY_SOURCE match in the order they were posted, and one
 * source's messages in the order it sent them, so the j-th receive that got source s must
 * hold message j of s: its size, tag and pattern depend on (size, R, s, j), and a lost,
 * duplicated, reordered or misdelivered message shows up as a wrong one or a wrong count.
 *
 * Usage: incast [-s SIZE,SIZE,...] [-k K]
 *   default sizes 0,1,722,723,4050,4051,16384,153544,153545,1048576 (the usnic/ob1 protocol
 *   boundaries, see p2p.c), K = 4
 */
#include "common.h"

#include <unistd.h>

enum { TAG_IN = 300 };

static const size_t default_sizes[] = {0, 1, 722, 723, 4050, 4051, 16384, 153544, 153545,
                                       1048576};

static size_t *sizes;
static int nsizes, burst = 4;

static void parse_sizes(const char *list)
{
    int n = 1;

    for (const char *q = list; *q; ++q) {
        n += ',' == *q;
    }
    sizes = dp_malloc(n * sizeof(*sizes));
    nsizes = 0;
    for (const char *q = list; *q;) {
        char *end;
        sizes[nsizes++] = strtoull(q, &end, 10);
        q = ',' == *end ? end + 1 : end;
        if (end == q && '\0' != *q) {
            break;
        }
    }
}

static uint64_t msg_seed(size_t size, int recv, int src, int j)
{
    return dp_seed(90 + recv, size, src, j);
}

/* one incast of `size` bytes to rank recv; late: the receives are posted after the senders
 * started */
static void incast(size_t size, int recv, bool late)
{
    char ctx[200];

    if (dp_rank != recv) {
        MPI_Request *req = dp_malloc(burst * sizeof(*req));
        uint8_t *buf = dp_malloc((size_t) burst * (size ? size : 1));
        if (!late) {
            MPI_Barrier(MPI_COMM_WORLD);
        }
        for (int j = 0; j < burst; ++j) {
            uint8_t *b = buf + (size_t) j * (size ? size : 1);
            dp_gen(b, size, msg_seed(size, recv, dp_rank, j), 0);
            MPI_Isend(b, (int) size, MPI_BYTE, recv, TAG_IN + j % 3, MPI_COMM_WORLD, &req[j]);
        }
        if (late) {
            MPI_Barrier(MPI_COMM_WORLD);
        }
        MPI_Waitall(burst, req, MPI_STATUSES_IGNORE);
        /* the next size's sends would match this size's receives still open at recv (they
         * take any source and tag) */
        MPI_Barrier(MPI_COMM_WORLD);
        free(req);
        free(buf);
        return;
    }

    int nrecv = (dp_size - 1) * burst, *seen = dp_malloc(dp_size * sizeof(int));
    size_t slot = size + DP_GUARD;
    uint8_t *buf = dp_malloc((size_t) nrecv * slot), poison = (uint8_t)(0x5a ^ size);
    MPI_Request *req = dp_malloc(nrecv * sizeof(*req));
    MPI_Status *st = dp_malloc(nrecv * sizeof(*st));

    memset(buf, poison, (size_t) nrecv * slot);
    memset(seen, 0, dp_size * sizeof(int));
    if (late) {
        MPI_Barrier(MPI_COMM_WORLD);
        usleep(100000);         /* the senders' messages arrive before their receives */
    }
    for (int i = 0; i < nrecv; ++i) {
        MPI_Irecv(buf + (size_t) i * slot, (int) size, MPI_BYTE, MPI_ANY_SOURCE, MPI_ANY_TAG,
                  MPI_COMM_WORLD, &req[i]);
    }
    if (!late) {
        MPI_Barrier(MPI_COMM_WORLD);
    }
    MPI_Waitall(nrecv, req, st);
    for (int i = 0; i < nrecv; ++i) {
        int src = st[i].MPI_SOURCE, count = -1, j;
        uint8_t *b = buf + (size_t) i * slot;

        MPI_Get_count(&st[i], MPI_BYTE, &count);
        if (src < 0 || src >= dp_size || src == recv) {
            dp_fail("incast %zu B to %d (%s): receive %d from impossible source %d", size, recv,
                    late ? "late" : "preposted", i, src);
            continue;
        }
        j = seen[src]++;
        snprintf(ctx, sizeof(ctx), "incast %zu B to %d (%s): message %d of rank %d", size, recv,
                 late ? "late" : "preposted", j, src);
        if (j >= burst) {
            dp_fail("%s: more than %d messages from rank %d", ctx, burst, src);
            continue;
        }
        if ((size_t) count != size || st[i].MPI_TAG != TAG_IN + j % 3) {
            dp_fail("%s: %d bytes with tag %d, expected %zu bytes with tag %d", ctx, count,
                    st[i].MPI_TAG, size, TAG_IN + j % 3);
            continue;
        }
        if (dp_check(b, size, msg_seed(size, recv, src, j), 0, ctx)) {
            dp_verified(size);
        }
        snprintf(ctx, sizeof(ctx), "incast %zu B to %d: guard after message %d of rank %d",
                 size, recv, j, src);
        dp_check_fill(b + size, DP_GUARD, poison, ctx);
        if (dp_host_of[src] != dp_my_host) {
            dp_count_in(size);
        }
    }
    for (int s = 0; s < dp_size; ++s) {
        if (s != recv && seen[s] != burst) {
            dp_fail("incast %zu B to %d (%s): %d messages from rank %d, expected %d", size, recv,
                    late ? "late" : "preposted", seen[s], s, burst);
        }
    }
    MPI_Barrier(MPI_COMM_WORLD);
    free(seen);
    free(buf);
    free(req);
    free(st);
}

int main(int argc, char **argv)
{
    int opt;
    double t;

    dp_init("incast", &argc, &argv);
    sizes = dp_malloc(sizeof(default_sizes));
    memcpy(sizes, default_sizes, sizeof(default_sizes));
    nsizes = sizeof(default_sizes) / sizeof(default_sizes[0]);
    while (-1 != (opt = getopt(argc, argv, "s:k:"))) {
        if ('s' == opt) {
            free(sizes);
            parse_sizes(optarg);
        } else if ('k' == opt) {
            burst = atoi(optarg);
        } else {
            if (0 == dp_rank) {
                printf("incast: usage: incast [-s SIZE,...] [-k K]\n");
            }
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
    }
    if (burst < 1 || nsizes < 1) {
        if (0 == dp_rank) {
            printf("incast: ERROR -k must be at least 1 and -s name a size\n");
        }
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    if (0 == dp_rank) {
        printf("incast: %d senders to one receiver, %d sizes, %d messages each\n", dp_size - 1,
               nsizes, burst);
        fflush(stdout);
    }
    for (int late = 0; late < 2; ++late) {
        for (int recv = 0; recv < dp_size; ++recv) {
            if (recv > 0 && dp_host_of[recv] == dp_host_of[recv - 1]) {
                continue;
            }
            t = dp_now();
            for (int i = 0; i < nsizes; ++i) {
                incast(sizes[i], recv, late);
            }
            char what[80];
            snprintf(what, sizeof(what), "incast to rank %d (%s)", recv,
                     late ? "late receives" : "preposted");
            dp_phase_done(what, t);
        }
    }
    free(sizes);
    return dp_finish();
}
