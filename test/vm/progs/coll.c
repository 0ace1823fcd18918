/* Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 * SPDX-License-Identifier: BSD-3-Clause */
/* coll: the common collectives on MPI_COMM_WORLD spanning both hosts, results checked.
 *
 *   Barrier    12 barriers; before barrier i rank i % n sleeps 30 ms. Every rank's exit time
 *              must be after every rank's entry time (both hosts share one kernel clock).
 *   Bcast      1, 700, 4050, 65536 and 1048579 bytes from rank 0 and from rank n-1
 *   Reduce     MPI_SUM of 1, 97, 20000 and 131077 int64 (and MPI_MAX of 1000 doubles) to
 *              rank 0 and to rank n-1
 *   Allreduce  the same counts, result checked on every rank
 *   Allgather  blocks of 8, 1000 and 50000 bytes
 *   Alltoall   blocks of 4, 1000 and 40000 bytes
 *   Alltoallv  block i->j of ((7i + 3j + it) % 5) units (zero-length blocks included) with
 *              units of 1, 333 and 9000 bytes, receive blocks 16 bytes apart (gaps must stay
 *              untouched)
 * Every data byte depends on (operation, size, source rank, destination rank); reductions use
 * values that make the exact result computable. Receive buffers are poisoned first and have a
 * guard after them.
 */
#include "common.h"

#include <unistd.h>

static int leader[DP_MAX_HOSTS]; /* lowest rank of each host */
static int nhost[DP_MAX_HOSTS];  /* ranks per host */

/* `bytes` of data had to cross into host h (counted once per host, by its leader) */
static void host_gets(int h, size_t bytes)
{
    if (dp_rank == leader[h]) {
        dp_count_bytes_in(bytes);
    }
}

static void check_guard(const uint8_t *p, uint8_t poison, const char *ctx)
{
    char c[256];

    snprintf(c, sizeof(c), "%s (guard after the data)", ctx);
    dp_check_fill(p, DP_GUARD, poison, c);
}

static void barriers(void)
{
    double t[2], *all = dp_malloc(2 * dp_size * sizeof(double));

    for (int i = 0; i < 12; ++i) {
        if (dp_rank == i % dp_size) {
            usleep(30000);
        }
        t[0] = dp_now();
        MPI_Barrier(MPI_COMM_WORLD);
        t[1] = dp_now();
        MPI_Allgather(t, 2, MPI_DOUBLE, all, 2, MPI_DOUBLE, MPI_COMM_WORLD);
        double last_in = 0, first_out = 1e300;
        int who_in = 0, who_out = 0;
        for (int r = 0; r < dp_size; ++r) {
            if (all[2 * r] > last_in) {
                last_in = all[2 * r];
                who_in = r;
            }
            if (all[2 * r + 1] < first_out) {
                first_out = all[2 * r + 1];
                who_out = r;
            }
        }
        /* 1 ms of slack for clock reads; the late rank is 30 ms late */
        if (first_out + 1e-3 < last_in) {
            dp_fail("barrier %d: rank %d left at %.6f, before rank %d entered at %.6f", i,
                    who_out, first_out, who_in, last_in);
        }
        /* each host had to hear from another one */
        for (int h = 0; h < dp_nhosts; ++h) {
            if (dp_rank == leader[h]) {
                dp_min_dgrams_in += 1;
            }
        }
        dp_verified(0);
    }
    free(all);
}

static void bcasts(void)
{
    static const size_t sizes[] = {1, 700, 4050, 65536, 1048579};
    uint8_t *buf = dp_malloc(1048579 + DP_GUARD);
    char ctx[200];

    for (int ri = 0; ri < 2; ++ri) {
        int root = ri ? dp_size - 1 : 0;
        for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); ++i) {
            size_t n = sizes[i];
            uint64_t seed = dp_seed(10, root, n, 0);
            uint8_t poison = (uint8_t)(0x77 ^ n);
            memset(buf, poison, n + DP_GUARD);
            if (dp_rank == root) {
                dp_gen(buf, n, seed, 0);
            }
            MPI_Bcast(buf, (int) n, MPI_BYTE, root, MPI_COMM_WORLD);
            snprintf(ctx, sizeof(ctx), "bcast root %d size %zu", root, n);
            dp_check(buf, n, seed, 0, ctx);
            check_guard(buf + n, poison, ctx);
            for (int h = 0; h < dp_nhosts; ++h) {
                if (h != dp_host_of[root]) {
                    host_gets(h, n);
                }
            }
            if (dp_rank != root) {
                dp_verified(n);
            }
        }
    }
    free(buf);
}

/* contribution of rank r to element j of reduction `op_id`: small enough that sums of all
 * ranks are exact */
static int64_t ival(int op_id, int r, size_t j)
{
    return (int64_t)(dp_mix64(dp_seed(op_id, r, j, 0)) >> 34) - ((int64_t) 1 << 29);
}

static double dval(int op_id, int r, size_t j)
{
    return (double) ival(op_id, r, j) / 1024.0;
}

/* reduction: root >= 0: MPI_Reduce to root, root < 0: MPI_Allreduce */
static void reduction(int root, size_t count, bool use_max)
{
    int op_id = (int)(count * 4 + (root + 2) * 2 + use_max);
    size_t esz = use_max ? sizeof(double) : sizeof(int64_t), bytes = count * esz;
    uint8_t *in = dp_malloc(bytes), *out = dp_malloc(bytes + DP_GUARD);
    uint8_t poison = (uint8_t)(0x99 ^ count);
    bool have_result = root < 0 || dp_rank == root;
    char ctx[200];

    for (size_t j = 0; j < count; ++j) {
        if (use_max) {
            ((double *) in)[j] = dval(op_id, dp_rank, j);
        } else {
            ((int64_t *) in)[j] = ival(op_id, dp_rank, j);
        }
    }
    memset(out, poison, bytes + DP_GUARD);
    if (root < 0) {
        MPI_Allreduce(in, out, (int) count, use_max ? MPI_DOUBLE : MPI_INT64_T,
                      use_max ? MPI_MAX : MPI_SUM, MPI_COMM_WORLD);
    } else {
        MPI_Reduce(in, out, (int) count, use_max ? MPI_DOUBLE : MPI_INT64_T,
                   use_max ? MPI_MAX : MPI_SUM, root, MPI_COMM_WORLD);
    }
    snprintf(ctx, sizeof(ctx), "%s %s of %zu %s", root < 0 ? "allreduce" : "reduce",
             use_max ? "MPI_MAX" : "MPI_SUM", count, use_max ? "doubles" : "int64");
    if (root >= 0) {
        snprintf(ctx + strlen(ctx), sizeof(ctx) - strlen(ctx), " to root %d", root);
    }
    if (have_result) {
        for (size_t j = 0; j < count; ++j) {
            if (use_max) {
                double e = dval(op_id, 0, j), g;
                for (int r = 1; r < dp_size; ++r) {
                    double v = dval(op_id, r, j);
                    e = v > e ? v : e;
                }
                memcpy(&g, out + j * esz, esz);
                if (g != e) {
                    dp_fail("%s: element %zu is %.17g, expected %.17g", ctx, j, g, e);
                    break;
                }
            } else {
                int64_t e = 0, g;
                for (int r = 0; r < dp_size; ++r) {
                    e += ival(op_id, r, j);
                }
                memcpy(&g, out + j * esz, esz);
                if (g != e) {
                    dp_fail("%s: element %zu is %lld, expected %lld", ctx, j, (long long) g,
                            (long long) e);
                    break;
                }
            }
        }
        dp_verified(bytes);
        check_guard(out + bytes, poison, ctx);
    } else {
        /* a non-root's receive buffer is not significant: it must not be written */
        dp_check_fill(out, bytes + DP_GUARD, poison, ctx);
    }
    if (root < 0) {
        for (int h = 0; h < dp_nhosts; ++h) {
            host_gets(h, bytes);
        }
    } else {
        host_gets(dp_host_of[root], bytes);
    }
    free(in);
    free(out);
}

static void reductions(void)
{
    static const size_t counts[] = {1, 97, 20000, 131077};

    for (int ri = 0; ri < 3; ++ri) {
        int root = 0 == ri ? 0 : 1 == ri ? dp_size - 1 : -1;
        for (size_t i = 0; i < sizeof(counts) / sizeof(counts[0]); ++i) {
            reduction(root, counts[i], false);
        }
        reduction(root, 1000, true);
    }
}

static void allgathers(void)
{
    static const size_t blks[] = {8, 1000, 50000};
    char ctx[200];

    for (size_t i = 0; i < sizeof(blks) / sizeof(blks[0]); ++i) {
        size_t b = blks[i], total = b * dp_size;
        uint8_t *in = dp_malloc(b), *out = dp_malloc(total + DP_GUARD);
        uint8_t poison = (uint8_t)(0x44 ^ b);
        dp_gen(in, b, dp_seed(20, b, dp_rank, 0), 0);
        memset(out, poison, total + DP_GUARD);
        MPI_Allgather(in, (int) b, MPI_BYTE, out, (int) b, MPI_BYTE, MPI_COMM_WORLD);
        for (int r = 0; r < dp_size; ++r) {
            snprintf(ctx, sizeof(ctx), "allgather block %zu: block of rank %d", b, r);
            dp_check(out + r * b, b, dp_seed(20, b, r, 0), 0, ctx);
        }
        snprintf(ctx, sizeof(ctx), "allgather block %zu", b);
        check_guard(out + total, poison, ctx);
        dp_verified(total);
        for (int h = 0; h < dp_nhosts; ++h) {
            host_gets(h, b * (dp_size - nhost[h]));
        }
        free(in);
        free(out);
    }
}

static void alltoalls(void)
{
    static const size_t blks[] = {4, 1000, 40000};
    char ctx[200];

    for (size_t i = 0; i < sizeof(blks) / sizeof(blks[0]); ++i) {
        size_t b = blks[i], total = b * dp_size;
        uint8_t *in = dp_malloc(total), *out = dp_malloc(total + DP_GUARD);
        uint8_t poison = (uint8_t)(0x55 ^ b);
        for (int r = 0; r < dp_size; ++r) {
            dp_gen(in + r * b, b, dp_seed(30, b, dp_rank, r), 0);
        }
        memset(out, poison, total + DP_GUARD);
        MPI_Alltoall(in, (int) b, MPI_BYTE, out, (int) b, MPI_BYTE, MPI_COMM_WORLD);
        for (int r = 0; r < dp_size; ++r) {
            snprintf(ctx, sizeof(ctx), "alltoall block %zu: block from rank %d", b, r);
            dp_check(out + r * b, b, dp_seed(30, b, r, dp_rank), 0, ctx);
        }
        snprintf(ctx, sizeof(ctx), "alltoall block %zu", b);
        check_guard(out + total, poison, ctx);
        dp_verified(total);
        for (int h = 0; h < dp_nhosts; ++h) {
            host_gets(h, b * nhost[h] * (dp_size - nhost[h]));
        }
        free(in);
        free(out);
    }
}

static int v_count(int from, int to, int it, int unit)
{
    return ((7 * from + 3 * to + it) % 5) * unit;
}

static void alltoallvs(void)
{
    static const int units[] = {1, 333, 9000};
    int *sc = dp_malloc(dp_size * sizeof(int)), *sd = dp_malloc(dp_size * sizeof(int));
    int *rc = dp_malloc(dp_size * sizeof(int)), *rd = dp_malloc(dp_size * sizeof(int));
    char ctx[200];

    for (int it = 0; it < 3; ++it) {
        int unit = units[it];
        size_t stot = 0, rtot = 0;
        for (int r = 0; r < dp_size; ++r) {
            sc[r] = v_count(dp_rank, r, it, unit);
            sd[r] = (int) stot;
            stot += sc[r] + 8;        /* send blocks 8 bytes apart */
            rc[r] = v_count(r, dp_rank, it, unit);
            rd[r] = (int) rtot;
            rtot += rc[r] + 16;       /* receive blocks 16 bytes apart */
        }
        uint8_t *in = dp_malloc(stot), *out = dp_malloc(rtot + DP_GUARD);
        uint8_t poison = (uint8_t)(0x66 ^ it);
        memset(in, 0xee, stot);
        for (int r = 0; r < dp_size; ++r) {
            dp_gen(in + sd[r], sc[r], dp_seed(40, it, dp_rank, r), 0);
        }
        memset(out, poison, rtot + DP_GUARD);
        MPI_Alltoallv(in, sc, sd, MPI_BYTE, out, rc, rd, MPI_BYTE, MPI_COMM_WORLD);
        for (int r = 0; r < dp_size; ++r) {
            snprintf(ctx, sizeof(ctx), "alltoallv unit %d: block of %d bytes from rank %d",
                     unit, rc[r], r);
            dp_check(out + rd[r], rc[r], dp_seed(40, it, r, dp_rank), 0, ctx);
            snprintf(ctx, sizeof(ctx), "alltoallv unit %d: gap after the block from rank %d",
                     unit, r);
            dp_check_fill(out + rd[r] + rc[r], r + 1 < dp_size ? 16 : 16 + DP_GUARD, poison,
                          ctx);
            dp_verified(rc[r]);
        }
        /* what crossed into each host */
        for (int h = 0; h < dp_nhosts; ++h) {
            size_t crossing = 0;
            for (int from = 0; from < dp_size; ++from) {
                for (int to = 0; to < dp_size; ++to) {
                    if (dp_host_of[from] != h && dp_host_of[to] == h) {
                        crossing += v_count(from, to, it, unit);
                    }
                }
            }
            host_gets(h, crossing);
        }
        free(in);
        free(out);
    }
    free(sc);
    free(sd);
    free(rc);
    free(rd);
}

int main(int argc, char **argv)
{
    double t;

    dp_init("coll", &argc, &argv);
    for (int h = 0; h < DP_MAX_HOSTS; ++h) {
        leader[h] = -1;
    }
    for (int r = dp_size - 1; r >= 0; --r) {
        leader[dp_host_of[r]] = r;
        nhost[dp_host_of[r]]++;
    }
    t = dp_now();
    barriers();
    dp_phase_done("barrier", t);
    t = dp_now();
    bcasts();
    dp_phase_done("bcast", t);
    t = dp_now();
    reductions();
    dp_phase_done("reduce+allreduce", t);
    t = dp_now();
    allgathers();
    dp_phase_done("allgather", t);
    t = dp_now();
    alltoalls();
    dp_phase_done("alltoall", t);
    t = dp_now();
    alltoallvs();
    dp_phase_done("alltoallv", t);
    return dp_finish();
}
