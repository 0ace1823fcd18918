/* Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 * SPDX-License-Identifier: BSD-3-Clause */
/* onesided: what the OSU one-sided benchmarks do, every result checked, across the hosts.
 *
 * Ranks pair across the hosts (r < n/2 with r + n/2). For each window flavour
 * (MPI_Win_allocate, then MPI_Win_create) every rank runs against its partner:
 *   put_lat   osu_put_latency: per size, ITER x (MPI_Put; MPI_Win_flush) under MPI_Win_lock,
 *             then the same with MPI_Win_fence around each MPI_Put; the partner checks the
 *             last iteration's data and the poison after it
 *   get_lat   osu_get_latency: the same with MPI_Get; every result checked at once
 *   put_bw    osu_put_bw: WINDOW puts to WINDOW slots, one flush (and the same with fence);
 *             the partner checks every slot
 *   get_bw    osu_get_bw: WINDOW gets of WINDOW slots, one flush; every result checked
 *   acc_lat   osu_acc_latency: ITER x (MPI_Accumulate MPI_SUM of int64; flush); the partner
 *             checks the sums
 *   fop_lat   osu_fop_latency: ITER x MPI_Fetch_and_op(MPI_SUM, int64 and int32): every
 *             fetched value is the one before, the final value the sum
 *   cas_lat   osu_cas_latency: ITER x MPI_Compare_and_swap(int64 and int32) that succeed
 *             (each swaps in the next value) and one that does not
 *   gacc_lat  osu_get_acc_latency: ITER x MPI_Get_accumulate(MPI_SUM, int64): the fetched
 *             values are the previous sums
 * then all ranks at once on rank 0 and on rank n-1 under MPI_LOCK_SHARED: MPI_Fetch_and_op
 * MPI_SUM of 1 (every fetched value distinct, the counter ends at the number of operations:
 * the atomics are atomic) and MPI_Compare_and_swap increments (each success counted once).
 * No osc component is chosen here: the job uses Open MPI's configured default.
 */
#include "common.h"

#define MAX_SIZE (1 << 20)
#define WINDOW 16
#define BW_MAX (64 * 1024)
#define SLOT (BW_MAX + 64)
#define PUT_OFF 0
#define GET_OFF (WINDOW * SLOT)
#define CTR_OFF (2 * WINDOW * SLOT)        /* counters: 64 int64 */
#define ACC_OFF (CTR_OFF + 64 * 8)          /* accumulate area */
#define ACC_MAX 1024                        /* int64 elements */
#define WIN_SIZE (ACC_OFF + ACC_MAX * 8 + 64)

static uint8_t *base;
static MPI_Win win;
static int partner, flavor;

static int iters(size_t size)
{
    return size <= 4096 ? 20 : (size <= 65536 ? 6 : 2);
}

static void lock_self(void)
{
    MPI_Win_lock(MPI_LOCK_EXCLUSIVE, dp_rank, 0, win);
}

static void unlock_self(void)
{
    MPI_Win_unlock(dp_rank, win);
}

static void ctx_of(char *c, size_t n, const char *what, size_t size, const char *sync)
{
    snprintf(c, n, "%s %s size %zu %s with rank %d", flavor ? "create" : "allocate", what, size,
             sync, partner);
}

/* put latency: the partner's window holds the last put, poison behind it */
static void put_lat(size_t size, bool fence)
{
    int it = iters(size);
    uint64_t last = dp_seed(60, flavor * 2 + fence, size, it - 1);
    uint8_t *src = dp_malloc(size);
    char c[256];

    lock_self();
    memset(base + PUT_OFF, 0xa5, size + 64);
    unlock_self();
    MPI_Barrier(MPI_COMM_WORLD);
    if (!fence) {
        MPI_Win_lock(MPI_LOCK_SHARED, partner, 0, win);
    }
    for (int i = 0; i < it; ++i) {
        dp_gen(src, size, dp_seed(60, flavor * 2 + fence, size, i) ^ (uint64_t) dp_rank, 0);
        if (fence) {
            MPI_Win_fence(0, win);
        }
        MPI_Put(src, (int) size, MPI_BYTE, partner, PUT_OFF, (int) size, MPI_BYTE, win);
        if (fence) {
            MPI_Win_fence(0, win);
        } else {
            MPI_Win_flush(partner, win);
        }
    }
    if (!fence) {
        MPI_Win_unlock(partner, win);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    lock_self();
    ctx_of(c, sizeof(c), "put_lat", size, fence ? "fence" : "lock/flush");
    dp_check(base + PUT_OFF, size, last ^ (uint64_t) partner, 0, c);
    dp_check_fill(base + PUT_OFF + size, 64, 0xa5, c);
    unlock_self();
    dp_verified(size);
    dp_count_bytes_in(size * it);
    free(src);
}

/* get latency: every result checked */
static void get_lat(size_t size, bool fence)
{
    int it = iters(size);
    uint64_t seed = dp_seed(61, flavor * 2 + fence, size, 0);
    uint8_t *dst = dp_malloc(size + DP_GUARD);
    char c[256];

    lock_self();
    dp_gen(base + GET_OFF, size, seed ^ (uint64_t) dp_rank, 0);
    unlock_self();
    MPI_Barrier(MPI_COMM_WORLD);
    ctx_of(c, sizeof(c), "get_lat", size, fence ? "fence" : "lock/flush");
    if (!fence) {
        MPI_Win_lock(MPI_LOCK_SHARED, partner, 0, win);
    }
    for (int i = 0; i < it; ++i) {
        memset(dst, 0x3c, size + DP_GUARD);
        if (fence) {
            MPI_Win_fence(0, win);
        }
        MPI_Get(dst, (int) size, MPI_BYTE, partner, GET_OFF, (int) size, MPI_BYTE, win);
        if (fence) {
            MPI_Win_fence(0, win);
        } else {
            MPI_Win_flush(partner, win);
        }
        dp_check(dst, size, seed ^ (uint64_t) partner, 0, c);
        dp_check_fill(dst + size, DP_GUARD, 0x3c, c);
        dp_verified(size);
    }
    if (!fence) {
        MPI_Win_unlock(partner, win);
    }
    dp_count_bytes_in(size * it);
    MPI_Barrier(MPI_COMM_WORLD);
    free(dst);
}

/* bandwidth: WINDOW operations to WINDOW slots, one completion */
static void bw(size_t size, bool get, bool fence)
{
    uint64_t seed = dp_seed(62, flavor * 4 + get * 2 + fence, size, 0);
    uint8_t *buf = dp_malloc(WINDOW * SLOT);
    char c[256];

    lock_self();
    for (int k = 0; k < WINDOW; ++k) {
        memset(base + PUT_OFF + k * SLOT, 0x5a, SLOT);
        dp_gen(base + GET_OFF + k * SLOT, size, seed ^ (uint64_t) (dp_rank * 100 + k), 0);
    }
    unlock_self();
    memset(buf, 0x96, WINDOW * SLOT);
    if (!get) {
        for (int k = 0; k < WINDOW; ++k) {
            dp_gen(buf + k * SLOT, size, seed ^ (uint64_t) (dp_rank * 100 + k), 0);
        }
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (fence) {
        MPI_Win_fence(0, win);
    } else {
        MPI_Win_lock(MPI_LOCK_SHARED, partner, 0, win);
    }
    for (int k = 0; k < WINDOW; ++k) {
        if (get) {
            MPI_Get(buf + k * SLOT, (int) size, MPI_BYTE, partner, GET_OFF + k * SLOT,
                    (int) size, MPI_BYTE, win);
        } else {
            MPI_Put(buf + k * SLOT, (int) size, MPI_BYTE, partner, PUT_OFF + k * SLOT,
                    (int) size, MPI_BYTE, win);
        }
    }
    if (fence) {
        MPI_Win_fence(0, win);
    } else {
        MPI_Win_flush(partner, win);
        MPI_Win_unlock(partner, win);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    ctx_of(c, sizeof(c), get ? "get_bw" : "put_bw", size, fence ? "fence" : "lock/flush");
    if (get) {
        for (int k = 0; k < WINDOW; ++k) {
            dp_check(buf + k * SLOT, size, seed ^ (uint64_t) (partner * 100 + k), 0, c);
            dp_check_fill(buf + k * SLOT + size, SLOT - size, 0x96, c);
        }
    } else {
        lock_self();
        for (int k = 0; k < WINDOW; ++k) {
            dp_check(base + PUT_OFF + k * SLOT, size, seed ^ (uint64_t) (partner * 100 + k), 0,
                     c);
            dp_check_fill(base + PUT_OFF + k * SLOT + size, SLOT - size, 0x5a, c);
        }
        unlock_self();
    }
    dp_verified(WINDOW * size);
    dp_count_bytes_in(WINDOW * size);
    free(buf);
}

static int64_t accv(int r, int i, size_t j)
{
    return (int64_t) (dp_mix64(dp_seed(63, r, i, j)) >> 40) - ((int64_t) 1 << 22);
}

/* accumulate latency; get_acc also checks the fetched previous values */
static void acc_lat(size_t n, bool get_acc)
{
    int it = iters(n * 8);
    int64_t *src = dp_malloc(n * 8), *old = dp_malloc(n * 8), *sum = dp_malloc(n * 8);
    int64_t *pre = dp_malloc(n * 8);
    char c[256];

    ctx_of(c, sizeof(c), get_acc ? "get_acc_lat" : "acc_lat", n * 8, "lock/flush");
    lock_self();
    memset(base + ACC_OFF, 0, ACC_MAX * 8 + 64);
    unlock_self();
    memset(sum, 0, n * 8);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Win_lock(MPI_LOCK_SHARED, partner, 0, win);
    for (int i = 0; i < it; ++i) {
        for (size_t j = 0; j < n; ++j) {
            src[j] = accv(dp_rank, i, j);
        }
        memcpy(pre, sum, n * 8);
        if (get_acc) {
            MPI_Get_accumulate(src, (int) n, MPI_INT64_T, old, (int) n, MPI_INT64_T, partner,
                               ACC_OFF, (int) n, MPI_INT64_T, MPI_SUM, win);
        } else {
            MPI_Accumulate(src, (int) n, MPI_INT64_T, partner, ACC_OFF, (int) n, MPI_INT64_T,
                           MPI_SUM, win);
        }
        MPI_Win_flush(partner, win);
        for (size_t j = 0; j < n; ++j) {
            sum[j] += src[j];
        }
        if (get_acc) {
            for (size_t j = 0; j < n; ++j) {
                if (old[j] != pre[j]) {
                    dp_fail("%s: iteration %d element %zu fetched %lld, expected %lld", c, i, j,
                            (long long) old[j], (long long) pre[j]);
                    break;
                }
            }
            dp_verified(n * 8);
        }
    }
    MPI_Win_unlock(partner, win);
    MPI_Barrier(MPI_COMM_WORLD);
    /* my window holds the partner's sums */
    lock_self();
    for (size_t j = 0; j < n + 8; ++j) {
        int64_t e = 0, g;
        for (int i = 0; j < n && i < it; ++i) {
            e += accv(partner, i, j);
        }
        memcpy(&g, base + ACC_OFF + j * 8, 8);
        if (g != e) {
            dp_fail("%s: element %zu is %lld, expected %lld", c, j, (long long) g, (long long) e);
            break;
        }
    }
    unlock_self();
    dp_verified(n * 8);
    dp_count_bytes_in(n * 8 * it);
    free(src);
    free(old);
    free(sum);
    free(pre);
}

/* fetch-and-op and compare-and-swap on the partner's counters, 64 and 32 bit */
static void fop_cas_lat(void)
{
    const int it = 50;
    char c[256];

    lock_self();
    memset(base + CTR_OFF, 0, 64 * 8);
    unlock_self();
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Win_lock(MPI_LOCK_SHARED, partner, 0, win);
    ctx_of(c, sizeof(c), "fop_lat", 8, "lock/flush");
    for (int i = 0; i < it; ++i) {
        int64_t one = 3 + i, got = -1;
        int32_t one32 = 5 + i, got32 = -1;
        int64_t want = 0;
        int32_t want32 = 0;
        for (int k = 0; k < i; ++k) {
            want += 3 + k;
            want32 += 5 + k;
        }
        MPI_Fetch_and_op(&one, &got, MPI_INT64_T, partner, CTR_OFF, MPI_SUM, win);
        MPI_Fetch_and_op(&one32, &got32, MPI_INT32_T, partner, CTR_OFF + 8, MPI_SUM, win);
        MPI_Win_flush(partner, win);
        if (got != want || got32 != want32) {
            dp_fail("%s: iteration %d fetched %lld and %d, expected %lld and %d", c, i,
                    (long long) got, (int) got32, (long long) want, (int) want32);
        }
        dp_verified(12);
    }
    ctx_of(c, sizeof(c), "cas_lat", 8, "lock/flush");
    for (int i = 0; i < it; ++i) {
        int64_t cmp = i, val = i + 1, got = -1;
        int32_t cmp32 = 7 * i, val32 = 7 * (i + 1), got32 = -1;
        MPI_Compare_and_swap(&val, &cmp, &got, MPI_INT64_T, partner, CTR_OFF + 16, win);
        MPI_Compare_and_swap(&val32, &cmp32, &got32, MPI_INT32_T, partner, CTR_OFF + 24, win);
        MPI_Win_flush(partner, win);
        if (got != cmp || got32 != cmp32) {
            dp_fail("%s: iteration %d fetched %lld and %d, expected %lld and %d", c, i,
                    (long long) got, (int) got32, (long long) cmp, (int) cmp32);
        }
        dp_verified(12);
    }
    {
        /* a compare that fails: the value stays */
        int64_t cmp = 12345, val = -1, got = -7;
        MPI_Compare_and_swap(&val, &cmp, &got, MPI_INT64_T, partner, CTR_OFF + 16, win);
        MPI_Win_flush(partner, win);
        if (got != it) {
            dp_fail("%s: failing compare fetched %lld, expected %d", c, (long long) got, it);
        }
    }
    MPI_Win_unlock(partner, win);
    MPI_Barrier(MPI_COMM_WORLD);
    lock_self();
    {
        int64_t v64[4];
        int32_t v32;
        int64_t sum = 0;
        int32_t sum32 = 0;
        for (int k = 0; k < it; ++k) {
            sum += 3 + k;
            sum32 += 5 + k;
        }
        memcpy(v64, base + CTR_OFF, sizeof(v64));
        memcpy(&v32, base + CTR_OFF + 8, 4);
        if (v64[0] != sum || v32 != sum32 || v64[2] != it) {
            dp_fail("fop/cas counters of rank %d: %lld %d %lld, expected %lld %d %d", dp_rank,
                    (long long) v64[0], (int) v32, (long long) v64[2], (long long) sum,
                    (int) sum32, it);
        }
        memcpy(&v32, base + CTR_OFF + 24, 4);
        if (v32 != 7 * it) {
            dp_fail("cas counter (32 bit) of rank %d: %d, expected %d", dp_rank, (int) v32,
                    7 * it);
        }
    }
    unlock_self();
    dp_count_bytes_in(0);
}

/* every rank at once on one target: atomicity */
static void contended(int target)
{
    const int it = 40;
    int64_t *got = dp_malloc(it * 8);
    int64_t *all = dp_malloc((size_t) dp_size * it * 8);
    int64_t one = 1;
    long long wins = 0, total_wins = 0;

    if (dp_rank == target) {
        lock_self();
        memset(base + CTR_OFF + 256, 0, 16);
        unlock_self();
    }
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Win_lock(MPI_LOCK_SHARED, target, 0, win);
    for (int i = 0; i < it; ++i) {
        int64_t cur = -1, next, old = -2;
        MPI_Fetch_and_op(&one, &got[i], MPI_INT64_T, target, CTR_OFF + 256, MPI_SUM, win);
        MPI_Win_flush(target, win);
        /* CAS increment: read, try, count a success */
        MPI_Fetch_and_op(NULL, &cur, MPI_INT64_T, target, CTR_OFF + 264, MPI_NO_OP, win);
        MPI_Win_flush(target, win);
        next = cur + 1;
        MPI_Compare_and_swap(&next, &cur, &old, MPI_INT64_T, target, CTR_OFF + 264, win);
        MPI_Win_flush(target, win);
        wins += old == cur;
    }
    MPI_Win_unlock(target, win);
    MPI_Allgather(got, it, MPI_INT64_T, all, it, MPI_INT64_T, MPI_COMM_WORLD);
    MPI_Allreduce(&wins, &total_wins, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
    if (dp_rank == target) {
        int n = dp_size * it;
        char *seen = calloc((size_t) n, 1);
        int64_t v[2];
        for (int k = 0; k < n; ++k) {
            if (all[k] < 0 || all[k] >= n || seen[all[k]]) {
                dp_fail("contended fetch-and-add on rank %d: value %lld fetched twice or out "
                        "of range", target, (long long) all[k]);
                break;
            }
            seen[all[k]] = 1;
        }
        free(seen);
        lock_self();
        memcpy(v, base + CTR_OFF + 256, 16);
        unlock_self();
        if (v[0] != n || v[1] != total_wins) {
            dp_fail("contended counters on rank %d: fetch-and-add %lld (expected %d), CAS "
                    "counter %lld (expected %lld successes)", target, (long long) v[0], n,
                    (long long) v[1], total_wins);
        }
        dp_verified((size_t) n * 8);
    }
    free(got);
    free(all);
}

int main(int argc, char **argv)
{
    static const size_t lat_sizes[] = {1, 8, 64, 1024, 4096, 16384, 65536, 262144, MAX_SIZE};
    static const size_t bw_sizes[] = {8, 1024, 4096, BW_MAX};
    static const size_t acc_counts[] = {1, 16, 512, ACC_MAX};
    bool lower;
    double t;

    dp_init("onesided", &argc, &argv);
    partner = dp_cross_partner(&lower);
    (void) lower;

    for (flavor = 0; flavor < 2; ++flavor) {
        size_t win_size = WIN_SIZE > MAX_SIZE + 64 ? WIN_SIZE : MAX_SIZE + 64;
        const char *fl = flavor ? "MPI_Win_create" : "MPI_Win_allocate";
        int rc;

        MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
        if (0 == flavor) {
            rc = MPI_Win_allocate((MPI_Aint) win_size, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &base,
                                  &win);
        } else {
            base = dp_malloc(win_size);
            rc = MPI_Win_create(base, (MPI_Aint) win_size, 1, MPI_INFO_NULL, MPI_COMM_WORLD,
                                &win);
        }
        if (MPI_SUCCESS != rc) {
            char s[MPI_MAX_ERROR_STRING];
            int len;
            MPI_Error_string(rc, s, &len);
            printf("onesided: ERROR rank %d: %s failed: %s\n", dp_rank, fl, s);
            fflush(stdout);
            MPI_Abort(MPI_COMM_WORLD, 3);
        }
        MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
        t = dp_now();
        for (int fence = 0; fence < 2; ++fence) {
            for (size_t i = 0; i < sizeof(lat_sizes) / sizeof(lat_sizes[0]); ++i) {
                put_lat(lat_sizes[i], fence);
                get_lat(lat_sizes[i], fence);
            }
        }
        dp_phase_done(flavor ? "create: put/get latency" : "allocate: put/get latency", t);
        t = dp_now();
        for (int fence = 0; fence < 2; ++fence) {
            for (size_t i = 0; i < sizeof(bw_sizes) / sizeof(bw_sizes[0]); ++i) {
                bw(bw_sizes[i], false, fence);
                bw(bw_sizes[i], true, fence);
            }
        }
        dp_phase_done(flavor ? "create: put/get bandwidth" : "allocate: put/get bandwidth", t);
        t = dp_now();
        for (size_t i = 0; i < sizeof(acc_counts) / sizeof(acc_counts[0]); ++i) {
            acc_lat(acc_counts[i], false);
            acc_lat(acc_counts[i], true);
        }
        fop_cas_lat();
        contended(0);
        contended(dp_size - 1);
        dp_phase_done(flavor ? "create: accumulate, fetch-and-op, compare-and-swap"
                             : "allocate: accumulate, fetch-and-op, compare-and-swap", t);
        MPI_Win_free(&win);
        if (flavor) {
            free(base);
        }
    }
    return dp_finish();
}
