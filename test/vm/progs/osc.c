/* Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 * SPDX-License-Identifier: BSD-3-Clause */
/* osc: MPI one-sided communication across the hosts, results checked.
 *
 * Every rank exposes a window (MPI_Win_create, displacement unit 1) with three areas: PUT
 * (written by the partner), GET (read by the partner) and ACC (accumulated into). Ranks pair
 * across the hosts (r < n/2 with r + n/2). For sizes 8, 700, 4100, 65536, 200000 and 1048584
 * bytes, in two synchronisation modes:
 *   fence  MPI_Win_fence; MPI_Put of SIZE bytes to the partner's PUT area at an odd offset,
 *          MPI_Get of SIZE bytes from the partner's GET area, MPI_Accumulate (MPI_SUM) of
 *          SIZE/8 int64 into the partner's ACC area; MPI_Win_fence
 *   lock   the same inside MPI_Win_lock(MPI_LOCK_EXCLUSIVE, partner) / MPI_Win_unlock
 * then each rank checks (its own window under a lock on itself): the PUT area holds the
 * partner's pattern at the offset and poison around it, the GET result holds the partner's
 * GET pattern, the ACC area holds initial value + partner's contribution for every element
 * and the initial value after them.
 *   shared-acc  every rank accumulates (MPI_SUM, under MPI_LOCK_SHARED) 1, 1000 and 20000 int64
 *               into rank 0's and then rank n-1's ACC area at once: the target checks
 *               initial value + the sum of all ranks' contributions (accumulate is atomic per
 *               element).
 */
#include "common.h"

#define MAX_SIZE 1048584
#define PUT_OFF 0
#define AREA (MAX_SIZE + 128)
#define GET_OFF AREA
#define ACC_OFF (2 * AREA)
#define WIN_SIZE (3 * AREA)
#define PUT_DISP 3                  /* the PUT lands at an odd offset in its area */

static uint8_t *base;
static MPI_Win win;
static int partner;

static int64_t acc_init(int r, size_t j)
{
    return (int64_t)(dp_mix64(dp_seed(50, r, j, 0)) >> 36);
}

static int64_t acc_val(int op_id, int r, size_t j)
{
    return (int64_t)(dp_mix64(dp_seed(51, op_id, r, j)) >> 36) - ((int64_t) 1 << 26);
}

static void lock_self(void)
{
    MPI_Win_lock(MPI_LOCK_EXCLUSIVE, dp_rank, 0, win);
}

static void unlock_self(void)
{
    MPI_Win_unlock(dp_rank, win);
}

/* the first n + 8 elements of the local ACC area get their initial values */
static void init_acc(size_t n)
{
    for (size_t j = 0; j < n + 8; ++j) {
        int64_t v = acc_init(dp_rank, j);
        memcpy(base + ACC_OFF + j * 8, &v, 8);
    }
}

/* the local window before an epoch: PUT area poisoned, GET area patterned, ACC initial */
static void init_window(size_t size, int op_id, uint8_t poison)
{
    memset(base + PUT_OFF, poison, size + PUT_DISP + 64);
    dp_gen(base + GET_OFF, size, dp_seed(52, op_id, dp_rank, size), 0);
    init_acc(size / 8 > 0 ? size / 8 : 1);
}

/* check the ACC area: init + the contributions of `origins` (n elements, 8 untouched after) */
static void check_acc(size_t n, int op_id, const int *origins, int norigins, const char *ctx)
{
    for (size_t j = 0; j < n + 8; ++j) {
        int64_t e = acc_init(dp_rank, j), g;
        if (j < n) {
            for (int i = 0; i < norigins; ++i) {
                e += acc_val(op_id, origins[i], j);
            }
        }
        memcpy(&g, base + ACC_OFF + j * 8, 8);
        if (g != e) {
            dp_fail("%s: ACC element %zu%s is %lld, expected %lld", ctx, j,
                    j < n ? "" : " (after the accumulated ones)", (long long) g, (long long) e);
            return;
        }
    }
}

static void put_get_acc(size_t size, bool use_lock)
{
    int op_id = (int)(size * 2 + use_lock);
    size_t n = size / 8 > 0 ? size / 8 : 1;
    uint8_t poison = (uint8_t)(0x81 ^ size ^ use_lock);
    uint8_t *put_src = dp_malloc(size), *get_dst = dp_malloc(size + DP_GUARD);
    int64_t *acc_src = dp_malloc(n * sizeof(int64_t));
    char ctx[200];

    snprintf(ctx, sizeof(ctx), "%s size %zu with rank %d", use_lock ? "lock" : "fence", size,
             partner);
    dp_gen(put_src, size, dp_seed(53, op_id, dp_rank, size), 0);
    memset(get_dst, poison, size + DP_GUARD);
    for (size_t j = 0; j < n; ++j) {
        acc_src[j] = acc_val(op_id, dp_rank, j);
    }

    lock_self();
    init_window(size, op_id, poison);
    unlock_self();
    MPI_Barrier(MPI_COMM_WORLD);

    /* fence epochs alternate with lock epochs: open and close them explicitly */
    if (use_lock) {
        MPI_Win_lock(MPI_LOCK_EXCLUSIVE, partner, 0, win);
    } else {
        MPI_Win_fence(MPI_MODE_NOPRECEDE, win);
    }
    MPI_Put(put_src, (int) size, MPI_BYTE, partner, PUT_OFF + PUT_DISP, (int) size, MPI_BYTE,
            win);
    MPI_Get(get_dst, (int) size, MPI_BYTE, partner, GET_OFF, (int) size, MPI_BYTE, win);
    MPI_Accumulate(acc_src, (int) n, MPI_INT64_T, partner, ACC_OFF, (int) n, MPI_INT64_T,
                   MPI_SUM, win);
    if (use_lock) {
        MPI_Win_unlock(partner, win);
    } else {
        MPI_Win_fence(MPI_MODE_NOSUCCEED, win);
    }
    /* every rank's epoch on its partner is complete */
    MPI_Barrier(MPI_COMM_WORLD);

    {
        char c[256];
        snprintf(c, sizeof(c), "%s: MPI_Get result", ctx);
        dp_check(get_dst, size, dp_seed(52, op_id, partner, size), 0, c);
        snprintf(c, sizeof(c), "%s: MPI_Get result (guard after the data)", ctx);
        dp_check_fill(get_dst + size, DP_GUARD, poison, c);
    }
    lock_self();
    {
        char c[256];
        snprintf(c, sizeof(c), "%s: PUT area before the data", ctx);
        dp_check_fill(base + PUT_OFF, PUT_DISP, poison, c);
        snprintf(c, sizeof(c), "%s: PUT area", ctx);
        dp_check(base + PUT_OFF + PUT_DISP, size, dp_seed(53, op_id, partner, size), 0, c);
        snprintf(c, sizeof(c), "%s: PUT area after the data", ctx);
        dp_check_fill(base + PUT_OFF + PUT_DISP + size, 64, poison, c);
        check_acc(n, op_id, &partner, 1, ctx);
    }
    unlock_self();
    dp_verified(size);             /* put */
    dp_verified(size);             /* get */
    dp_verified(n * 8);            /* accumulate */
    /* data that crossed into this rank: the partner's PUT and ACC, our GET result */
    dp_count_bytes_in(2 * size + n * 8);
    free(put_src);
    free(get_dst);
    free(acc_src);
}

static void shared_acc(int target, size_t n)
{
    int op_id = (int)(n * 4 + 3 + target);
    int64_t *src = dp_malloc(n * sizeof(int64_t));
    int *origins = dp_malloc(dp_size * sizeof(int));
    char ctx[200];

    for (size_t j = 0; j < n; ++j) {
        src[j] = acc_val(op_id, dp_rank, j);
    }
    lock_self();
    init_acc(n);
    unlock_self();
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Win_lock(MPI_LOCK_SHARED, target, 0, win);
    MPI_Accumulate(src, (int) n, MPI_INT64_T, target, ACC_OFF, (int) n, MPI_INT64_T, MPI_SUM,
                   win);
    MPI_Win_unlock(target, win);
    MPI_Barrier(MPI_COMM_WORLD);
    if (dp_rank == target) {
        int crossing = 0;
        for (int r = 0; r < dp_size; ++r) {
            origins[r] = r;
            crossing += dp_host_of[r] != dp_my_host;
        }
        snprintf(ctx, sizeof(ctx), "shared-lock accumulate of %zu int64 from all %d ranks to "
                 "rank %d", n, dp_size, target);
        lock_self();
        check_acc(n, op_id, origins, dp_size, ctx);
        unlock_self();
        dp_verified(n * 8 * dp_size);
        dp_count_bytes_in((size_t) crossing * n * 8);
    }
    free(src);
    free(origins);
}

int main(int argc, char **argv)
{
    static const size_t sizes[] = {8, 700, 4100, 65536, 200000, MAX_SIZE};
    double t;

    dp_init("osc", &argc, &argv);
    if (0 != dp_size % 2) {
        if (0 == dp_rank) {
            printf("osc: ERROR needs an even number of ranks\n");
        }
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    partner = dp_rank < dp_size / 2 ? dp_rank + dp_size / 2 : dp_rank - dp_size / 2;
    if (dp_host_of[partner] == dp_my_host) {
        dp_fail("partner rank %d runs on my host: the pairs do not cross the hosts", partner);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    base = dp_malloc(WIN_SIZE);
    memset(base, 0, WIN_SIZE);
    MPI_Win_create(base, WIN_SIZE, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &win);

    for (int mode = 0; mode < 2; ++mode) {
        t = dp_now();
        for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); ++i) {
            put_get_acc(sizes[i], 1 == mode);
        }
        dp_phase_done(mode ? "lock put/get/accumulate" : "fence put/get/accumulate", t);
    }
    t = dp_now();
    for (int ti = 0; ti < 2; ++ti) {
        static const size_t counts[] = {1, 1000, 20000};
        for (size_t i = 0; i < sizeof(counts) / sizeof(counts[0]); ++i) {
            shared_acc(ti ? dp_size - 1 : 0, counts[i]);
        }
    }
    dp_phase_done("shared-lock accumulate", t);

    MPI_Win_free(&win);
    free(base);
    return dp_finish();
}
