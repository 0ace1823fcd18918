/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 * $COPYRIGHT$
 * SPDX-License-Identifier: BSD-3-Clause
 *
 * Emulated GET and atomics between the two sides of the engine world:
 * data and old values right, every operation completed exactly once and
 * carried out exactly once at the target, also on a network that loses,
 * duplicates and reorders; requests outside registered memory refused with
 * an error completion; message validation (usnic_rdma_msg_check) and the
 * atomic arithmetic (usnic_rdma_atomic).
 */

#include "opal_config.h"

#include <stdlib.h>
#include <string.h>

#include "btl_usnic_endpoint.h"
#include "btl_usnic_module.h"
#include "btl_usnic_rdma.h"
#include "btl_usnic_window.h"

#include "engine_world.h"
#include "usnic_test.h"

#define check_ok(expr)                                                         \
    do {                                                                       \
        const char *e_ = (expr);                                               \
        if (NULL != e_) {                                                      \
            return usnic_test_fail(__FILE__, __LINE__, "%s: %s", #expr, e_);   \
        }                                                                      \
    } while (0)

#define STATS(w, s) (&(w)->mods[s].stats)

/* What became of one operation. */
typedef struct {
    int rc;
    int callbacks;
    int status;
    void *local;
    uint64_t result;        /* fetched value (fop, cswap) */
} op_rec_t;

static void op_cb(mca_btl_base_module_t *btl, struct mca_btl_base_endpoint_t *ep, void *local,
                  mca_btl_base_registration_handle_t *lh, void *ctx, void *data, int status)
{
    op_rec_t *r = data;
    (void) btl;
    (void) ep;
    (void) lh;
    (void) ctx;

    ++r->callbacks;
    r->status = status;
    r->local = local;
}

/* The handle of side's registration holding p, as the PML would pass it. */
#define HANDLE_AT(w, side, p) world_handle_at((w), (side), (uint64_t) (uintptr_t) (p))

/* A GET by A from B's memory with the handle given. */
static int do_get_h(world_t *w, op_rec_t *r, void *local, void *remote, size_t len,
                    mca_btl_base_registration_handle_t *h)
{
    mca_btl_base_module_t *btl = &w->mods[SIDE_A].super;

    world_run_as(w, SIDE_A);
    r->rc = btl->btl_get(btl, w->ep[SIDE_A], local, (uint64_t) (uintptr_t) remote, NULL, h, len,
                         0, MCA_BTL_NO_ORDER, op_cb, NULL, r);
    return r->rc;
}

static int do_get(world_t *w, op_rec_t *r, void *local, void *remote, size_t len)
{
    return do_get_h(w, r, local, remote, len, HANDLE_AT(w, SIDE_B, remote));
}

static int do_fop_h(world_t *w, op_rec_t *r, void *remote, mca_btl_base_atomic_op_t op,
                    uint64_t operand, bool is32, bool fetch, mca_btl_base_registration_handle_t *h)
{
    mca_btl_base_module_t *btl = &w->mods[SIDE_A].super;
    int flags = is32 ? MCA_BTL_ATOMIC_FLAG_32BIT : 0;

    world_run_as(w, SIDE_A);
    r->result = 0xdeaddeaddeaddeadULL;
    if (fetch) {
        r->rc = btl->btl_atomic_fop(btl, w->ep[SIDE_A], &r->result, (uint64_t) (uintptr_t) remote,
                                    NULL, h, op, operand, flags, MCA_BTL_NO_ORDER, op_cb, NULL,
                                    r);
    } else {
        r->rc = btl->btl_atomic_op(btl, w->ep[SIDE_A], (uint64_t) (uintptr_t) remote, h, op,
                                   operand, flags, MCA_BTL_NO_ORDER, op_cb, NULL, r);
    }
    return r->rc;
}

static int do_fop(world_t *w, op_rec_t *r, void *remote, mca_btl_base_atomic_op_t op,
                  uint64_t operand, bool is32, bool fetch)
{
    return do_fop_h(w, r, remote, op, operand, is32, fetch, HANDLE_AT(w, SIDE_B, remote));
}

static int do_cswap(world_t *w, op_rec_t *r, void *remote, uint64_t cmp, uint64_t val,
                    bool is32)
{
    mca_btl_base_module_t *btl = &w->mods[SIDE_A].super;

    world_run_as(w, SIDE_A);
    r->result = 0xdeaddeaddeaddeadULL;
    r->rc = btl->btl_atomic_cswap(btl, w->ep[SIDE_A], &r->result, (uint64_t) (uintptr_t) remote,
                                  NULL, HANDLE_AT(w, SIDE_B, remote), cmp, val,
                                  is32 ? MCA_BTL_ATOMIC_FLAG_32BIT : 0, MCA_BTL_NO_ORDER, op_cb,
                                  NULL, r);
    return r->rc;
}

/* Nothing outstanding or waiting in either module. */
static const char *rdma_idle(world_t *w)
{
    for (int s = 0; s < 2; ++s) {
        int n = opal_pointer_array_get_size(&w->mods[s].rdma_ops);
        for (int i = 0; i < n; ++i) {
            if (NULL != opal_pointer_array_get_item(&w->mods[s].rdma_ops, i)) {
                return "an operation is still outstanding";
            }
        }
        if (!opal_list_is_empty(&w->mods[s].rdma_deferred)) {
            return "a request still waits for its reply";
        }
    }
    return NULL;
}

static net_action_t lossy_filter(world_t *w, fake_dgram_t *d, void *arg)
{
    unsigned r = world_rand(w) % 1000;
    (void) d;
    (void) arg;

    if (r < 60) {
        return NET_DROP;
    }
    if (r < 120) {
        return NET_DUP;
    }
    if (r < 150) {
        return NET_HOLD;
    }
    return NET_DELIVER;
}

/* ------------------------------------------------------------------ */

#define GREGION (1024 * 1024)

static const struct {
    size_t off, len;
} get_specs[] = {
    {0, 1},
    {8, 8},
    {1000, 500},
    {5000, 4064 - sizeof(usnic_rdma_msg_t)},    /* reply fills one datagram */
    {20000, 4065 - sizeof(usnic_rdma_msg_t)},   /* reply of two chunks */
    {40000, 150 * 1024},
    {GREGION - USNIC_RDMA_MAX_GET, USNIC_RDMA_MAX_GET}, /* the largest */
    {GREGION - 3, 3},
};
#define NGETS (sizeof(get_specs) / sizeof(get_specs[0]))

static int run_gets(bool lossy)
{
    world_t *w = world_new(100, 7);
    uint8_t *region = malloc(GREGION), *dst = malloc(GREGION + 64);
    op_rec_t recs[NGETS];

    check(NULL != w && NULL != region && NULL != dst);
    memset(recs, 0, sizeof(recs));
    world_fill(region, 77, GREGION);
    check(NULL != world_register(w, SIDE_B, region, GREGION, MCA_BTL_REG_FLAG_REMOTE_READ));
    if (lossy) {
        w->filter = lossy_filter;
        w->reorder = 16;
    }
    for (size_t i = 0; i < NGETS; ++i) {
        memset(dst, 0x5a, GREGION + 64);
        check_int_eq(do_get(w, &recs[i], dst + 32, region + get_specs[i].off, get_specs[i].len),
                     OPAL_SUCCESS);
        check_int_eq(world_run(w, 200000, lossy), WORLD_QUIET);
        check_int_eq(recs[i].callbacks, 1);
        check_int_eq(recs[i].status, OPAL_SUCCESS);
        check(recs[i].local == dst + 32);
        check(0 == memcmp(dst + 32, region + get_specs[i].off, get_specs[i].len));
        /* not a byte more */
        for (size_t k = 0; k < 32; ++k) {
            check_int_eq(dst[k], 0x5a);
            check_int_eq(dst[32 + get_specs[i].len + k], 0x5a);
        }
    }
    check_int_eq(STATS(w, SIDE_A)->num_gets, NGETS);
    check_int_eq(STATS(w, SIDE_B)->num_rdma_served, NGETS);
    /* the large GETs' data went out from the registered region itself */
    check(STATS(w, SIDE_B)->num_zcopy_chunks >= (150 * 1024 + USNIC_RDMA_MAX_GET) / 4096);
    check(fake_dev.gather_posts >= STATS(w, SIDE_B)->num_zcopy_chunks);
    check_int_eq(STATS(w, SIDE_B)->num_rdma_refused, 0);
    check_int_eq(STATS(w, SIDE_A)->num_rdma_stray, 0);
    check_int_eq(w->nrx, 0);
    check_ok(rdma_idle(w));
    check_ok(world_check_idle(w));
    if (!lossy) {
        check_ok(world_verify_counters(w));
    }
    world_fini(w);
    free(region);
    free(dst);
    return 0;
}

USNIC_TEST(rdma_get)
{
    return run_gets(false);
}

USNIC_TEST(rdma_get_lossy)
{
    return run_gets(true);
}

/* A request that finds the target out of send frags waits there, and is
 * answered by the target's progress once frags are free again, with no
 * other traffic to wake it. */
USNIC_TEST(rdma_request_waits_for_a_send_frag)
{
    world_t *w = world_new(40, 50);
    static uint8_t region[256], dst[64];
    opal_free_list_item_t *held[4096];
    opal_free_list_t *fl;
    size_t nheld = 0;
    op_rec_t rec;

    check(NULL != w);
    memset(&rec, 0, sizeof(rec));
    world_fill(region, 5, sizeof(region));
    check(NULL != world_register(w, SIDE_B, region, sizeof(region), MCA_BTL_REG_FLAG_REMOTE_READ));
    fl = &w->mods[SIDE_B].small_send_frags;
    fl->fl_max_to_alloc = fl->fl_num_allocated;
    while (nheld < sizeof(held) / sizeof(held[0]) &&
           NULL != (held[nheld] = opal_free_list_get(fl))) {
        ++nheld;
    }
    check(nheld < sizeof(held) / sizeof(held[0]));
    check_int_eq(do_get(w, &rec, dst, region + 8, 40), OPAL_SUCCESS);
    check_int_eq(world_run(w, 1000, false), WORLD_QUIET);
    check_int_eq(rec.callbacks, 0);
    check(!opal_list_is_empty(&w->mods[SIDE_B].rdma_deferred));
    while (nheld > 0) {
        opal_free_list_return(fl, held[--nheld]);
    }
    /* (world_run stops at once on an empty network: step first) */
    world_step(w);
    check_int_eq(world_run(w, 1000, false), WORLD_QUIET);
    check_int_eq(rec.callbacks, 1);
    check_int_eq(rec.status, OPAL_SUCCESS);
    check(0 == memcmp(dst, region + 8, 40));
    check_int_eq(STATS(w, SIDE_B)->num_rdma_served, 1);
    check_ok(rdma_idle(w));
    check_ok(world_check_idle(w));
    world_fini(w);
    return 0;
}

/* A GET of more than a datagram is answered with its data alone, chunked
 * from the target memory as it goes: bytes changed there after the request
 * was served but before their chunk left arrive changed (nothing was copied
 * at the target first); and reassembled in the initiator's buffer (the
 * module's spare reassembly buffer is not taken). */
USNIC_TEST(rdma_get_data_in_place)
{
    enum { LEN = 300000 };
    world_t *w = world_new(61, 62);
    uint8_t *region = malloc(LEN), *dst = malloc(LEN);
    uint8_t *spare;
    op_rec_t r = {0};

    check(NULL != w && NULL != region && NULL != dst);
    world_fill(region, 17, LEN);
    memset(dst, 0, LEN);
    check(NULL != world_register(w, SIDE_B, region, LEN, MCA_BTL_REG_FLAG_REMOTE_READ));
    spare = w->mods[SIDE_A].rx_spare;
    w->per_step = 1;
    check_int_eq(do_get(w, &r, dst, region, LEN), OPAL_SUCCESS);
    for (int i = 0; i < 400 && 0 == STATS(w, SIDE_B)->num_rdma_served; ++i) {
        world_step(w);
    }
    check_int_eq(STATS(w, SIDE_B)->num_rdma_served, 1);
    check(STATS(w, SIDE_B)->num_chunk_sends < LEN / 4096);
    memset(region + LEN - 100, 0xab, 100);
    check_int_eq(world_run(w, 100000, false), WORLD_QUIET);
    check_int_eq(r.callbacks, 1);
    check_int_eq(r.status, OPAL_SUCCESS);
    check(0 == memcmp(dst, region, LEN));
    check(w->mods[SIDE_A].rx_spare == spare);
    check_int_eq(STATS(w, SIDE_A)->num_rdma_stray, 0);
    check_ok(rdma_idle(w));
    check_ok(world_check_idle(w));
    check_ok(world_verify_counters(w));
    world_fini(w);
    free(region);
    free(dst);
    return 0;
}

/* The target memory of a GET being answered is deregistered (and then
 * reused): the data not yet chunked was copied aside at the deregistration,
 * so the initiator gets what the memory held while the GET was allowed to
 * read it. */
USNIC_TEST(rdma_get_target_deregistered_midway)
{
    enum { LEN = 300000 };
    world_t *w = world_new(63, 64);
    uint8_t *region = malloc(LEN), *orig = malloc(LEN), *dst = malloc(LEN);
    mca_btl_base_registration_handle_t *h;
    op_rec_t r = {0};

    check(NULL != w && NULL != region && NULL != orig && NULL != dst);
    world_fill(region, 23, LEN);
    memcpy(orig, region, LEN);
    h = world_register(w, SIDE_B, region, LEN, MCA_BTL_REG_FLAG_REMOTE_READ);
    check(NULL != h);
    w->per_step = 1;
    check_int_eq(do_get(w, &r, dst, region, LEN), OPAL_SUCCESS);
    for (int i = 0; i < 400 && STATS(w, SIDE_B)->num_chunk_sends < 3; ++i) {
        world_step(w);
    }
    check(STATS(w, SIDE_B)->num_chunk_sends >= 3);
    check(STATS(w, SIDE_B)->num_chunk_sends < LEN / 4096);
    check(!opal_list_is_empty(&w->mods[SIDE_B].get_sources));
    world_deregister(w, SIDE_B, h);
    check(opal_list_is_empty(&w->mods[SIDE_B].get_sources));
    memset(region, 0xee, LEN);
    check_int_eq(world_run(w, 100000, false), WORLD_QUIET);
    check_int_eq(r.callbacks, 1);
    check_int_eq(r.status, OPAL_SUCCESS);
    check(0 == memcmp(dst, orig, LEN));
    check_ok(rdma_idle(w));
    check_ok(world_check_idle(w));
    world_fini(w);
    free(region);
    free(orig);
    free(dst);
    return 0;
}

/* How GET data leaves the target, by what the device and the component
 * allow: from the registered memory itself (zero copy), or copied into the
 * chunks (a device that sends from one buffer only, zero copy turned off,
 * a registration the device refused).  A device that copies every send at
 * the post (the UDP device: the kernel's copy) sends the chunks' data from
 * the memory too, inline.  The data arrives right either way.
 * Registering the region registers nothing with the device (a device pins
 * what it registers); serving the GET registers what it reads. */
typedef enum { ZC_ON, ZC_INLINE, ZC_ONE_SGE, ZC_MCA_OFF, ZC_REG_FAILS } zc_case_t;

static int get_by_zcopy_case(zc_case_t how)
{
    enum { LEN = 200000 };
    world_t *w;
    uint8_t *region = malloc(LEN), *dst = malloc(LEN);
    mca_btl_base_registration_handle_t *h;
    op_rec_t r = {0};
    int mrs;
    uint64_t chunks;
    int mrs0 = fake_dev.mrs_live;

    if (ZC_MCA_OFF == how) {
        setenv("OMPI_MCA_btl_usnic_zero_copy", "0", 1);
    }
    fake_dev_next.one_sge = ZC_ONE_SGE == how;
    fake_dev_next.inline_mtu = ZC_INLINE == how;
    w = world_new(11, 12);
    unsetenv("OMPI_MCA_btl_usnic_zero_copy");
    check(NULL != w && NULL != region && NULL != dst);
    fake_dev.fail_readonly_reg = ZC_REG_FAILS == how;
    world_fill(region, 5, LEN);
    memset(dst, 0, LEN);
    mrs = fake_dev.mrs_live;
    h = world_register(w, SIDE_B, region, LEN, MCA_BTL_REG_FLAG_REMOTE_READ);
    check(NULL != h);
    check_int_eq(fake_dev.mrs_live, mrs);
    check_int_eq(do_get(w, &r, dst, region, LEN), OPAL_SUCCESS);
    check_int_eq(world_run(w, 100000, false), WORLD_QUIET);
    check_int_eq(STATS(w, SIDE_B)->num_zcopy_unregistered, ZC_REG_FAILS == how);
    check_int_eq(r.callbacks, 1);
    check_int_eq(r.status, OPAL_SUCCESS);
    check(0 == memcmp(dst, region, LEN));
    chunks = STATS(w, SIDE_B)->num_chunk_sends;
    check(chunks >= LEN / 4096);
    if (ZC_ON == how || ZC_INLINE == how) {
        /* all but a short last chunk */
        check(STATS(w, SIDE_B)->num_zcopy_chunks + 1 >= chunks);
        check_int_eq(fake_dev.gather_posts, STATS(w, SIDE_B)->num_zcopy_chunks);
    } else {
        check_int_eq(STATS(w, SIDE_B)->num_zcopy_chunks, 0);
        check_int_eq(fake_dev.gather_posts, 0);
    }
    world_deregister(w, SIDE_B, h);
    check_int_eq(fake_dev.mrs_live, mrs);
    check_ok(rdma_idle(w));
    check_ok(world_check_idle(w));
    check_ok(world_verify_counters(w));
    world_fini(w);
    check_int_eq(fake_dev.mrs_live, mrs0);
    check_int_eq(fake_dev.readonly_bytes_live, 0);
    free(region);
    free(dst);
    return 0;
}

USNIC_TEST(rdma_get_zero_copy)
{
    return get_by_zcopy_case(ZC_ON);
}

USNIC_TEST(rdma_get_zero_copy_device_copies_at_post)
{
    return get_by_zcopy_case(ZC_INLINE);
}

USNIC_TEST(rdma_get_zero_copy_one_sge_device)
{
    return get_by_zcopy_case(ZC_ONE_SGE);
}

USNIC_TEST(rdma_get_zero_copy_turned_off)
{
    return get_by_zcopy_case(ZC_MCA_OFF);
}

USNIC_TEST(rdma_get_zero_copy_registration_refused)
{
    return get_by_zcopy_case(ZC_REG_FAILS);
}

/* An osc window of 1 GiB (MPI_Win_create over memory the program never
 * touches, as MPICH's putfence1 and getfence1 make it) of which GETs read
 * 64 KiB: the device registers those 64 KiB, never the window (on Soft-RoCE,
 * registering it pinned every page: the rank grew to the OOM killer). */
USNIC_TEST(rdma_get_zero_copy_registers_only_what_is_read)
{
    enum { WIN = 1 << 30, OFF = 300 * 1024 * 1024 + 100, LEN = 64 * 1024 };
    int mrs0 = fake_dev.mrs_live;
    world_t *w = world_new(13, 14);
    uint8_t *region = malloc(WIN), *dst = malloc(LEN);
    mca_btl_base_registration_handle_t *h;
    op_rec_t r = {0};

    check(NULL != w && NULL != region && NULL != dst);
    world_fill(region + OFF, 3, LEN);
    h = world_register(w, SIDE_B, region, WIN,
                       MCA_BTL_REG_FLAG_REMOTE_READ | MCA_BTL_REG_FLAG_REMOTE_WRITE);
    check(NULL != h);
    check_int_eq(fake_dev.readonly_bytes_live, 0);
    fake_dev.readonly_bytes_max = 0;
    for (int i = 0; i < 3; ++i) {
        memset(dst, 0, LEN);
        memset(&r, 0, sizeof(r));
        check_int_eq(do_get(w, &r, dst, region + OFF, LEN), OPAL_SUCCESS);
        check_int_eq(world_run(w, 100000, false), WORLD_QUIET);
        check_int_eq(r.callbacks, 1);
        check_int_eq(r.status, OPAL_SUCCESS);
        check(0 == memcmp(dst, region + OFF, LEN));
        /* the span read, while its data went out, and not a byte after */
        check(fake_dev.readonly_bytes_max > 0 && fake_dev.readonly_bytes_max <= LEN);
        check_int_eq(fake_dev.readonly_bytes_live, 0);
    }
    check(STATS(w, SIDE_B)->num_zcopy_chunks >= 3 * (LEN / 4096 - 1));
    world_deregister(w, SIDE_B, h);
    check_ok(rdma_idle(w));
    check_ok(world_check_idle(w));
    world_fini(w);
    check_int_eq(fake_dev.mrs_live, mrs0);
    check_int_eq(fake_dev.readonly_bytes_live, 0);
    free(region);
    free(dst);
    return 0;
}

/* The target memory of a zero-copy GET is deregistered while chunks sent
 * from it are unacknowledged and the device has not completed their sends
 * (completions held), then overwritten.  The device registration outlives
 * the deregistration until those sends are complete (releasing it earlier
 * would fail them on a device: the fake counts it), and the lost chunks
 * are resent from copies taken at the deregistration, so the initiator
 * gets what the memory held while the GET could read it; the rest of the
 * data, not yet chunked, is copied aside as without zero copy. */
USNIC_TEST(rdma_get_zero_copy_deregistered_in_flight)
{
    enum { LEN = 300000 };
    int mrs0 = fake_dev.mrs_live;
    world_t *w = world_new(65, 66);
    uint8_t *region = malloc(LEN), *orig = malloc(LEN), *dst = malloc(LEN);
    mca_btl_base_registration_handle_t *h;
    op_rec_t r = {0};
    fake_dgram_t d;
    size_t dropped = 0;
    int mrs;

    check(NULL != w && NULL != region && NULL != orig && NULL != dst);
    world_fill(region, 29, LEN);
    memcpy(orig, region, LEN);
    mrs = fake_dev.mrs_live;
    h = world_register(w, SIDE_B, region, LEN, MCA_BTL_REG_FLAG_REMOTE_READ);
    check(NULL != h);
    w->per_step = 1;
    /* the first chunks' sends stay with the device, and are lost */
    fake_dev.hold_send_completions = true;
    check_int_eq(do_get(w, &r, dst, region, LEN), OPAL_SUCCESS);
    for (int i = 0; i < 400 && STATS(w, SIDE_B)->num_zcopy_chunks < 4; ++i) {
        world_step(w);
    }
    check(STATS(w, SIDE_B)->num_zcopy_chunks >= 4);
    check(STATS(w, SIDE_B)->num_chunk_sends < LEN / 4096);
    for (size_t i = 0; i < fake_wire_count();) {
        const usnic_btl_header_t *hd = dgram_hdr(fake_wire_peek(i));
        if (USNIC_PAYLOAD_TYPE_CHUNK == hd->payload_type) {
            check(fake_wire_take(i, &d));
            fake_dgram_free(&d);
            ++dropped;
        } else {
            ++i;
        }
    }
    check(dropped >= 1);
    check(fake_held_count() >= 1);
    world_deregister(w, SIDE_B, h);
    check(opal_list_is_empty(&w->mods[SIDE_B].get_sources));
    check_int_eq(fake_dev.busy_deregs, 0);
    check_int_eq(fake_dev.mrs_live, mrs + 1);     /* still registered with the device */
    memset(region, 0xee, LEN);
    fake_dev.hold_send_completions = false;
    fake_release_send_completions(USNIC_CQE_OK);
    check_int_eq(world_run(w, 100000, true), WORLD_QUIET);
    check_int_eq(r.callbacks, 1);
    check_int_eq(r.status, OPAL_SUCCESS);
    check(0 == memcmp(dst, orig, LEN));
    check(STATS(w, SIDE_B)->num_resends >= dropped);
    /* the frag is done: the registration went with it (busy_deregs: not
     * before the device's last read) */
    check_int_eq(fake_dev.mrs_live, mrs);
    check_ok(rdma_idle(w));
    check_ok(world_check_idle(w));
    world_fini(w);
    check_int_eq(fake_dev.mrs_live, mrs0);
    free(region);
    free(orig);
    free(dst);
    return 0;
}

/* GET data that names no outstanding GET of its size, or a GET whose data
 * is already coming, is dropped and counted, never written: of two GETs
 * answered one after the other, the first data chunk arrives with a stale
 * id, the second GET's first chunk claims the first GET; both GETs still
 * complete right (the target resends the dropped chunks). */
static int rewrites;
static uint64_t first_id;
static net_action_t forge_get_ids(world_t *w, fake_dgram_t *d, void *arg)
{
    usnic_btl_chunk_header_t *ch = (usnic_btl_chunk_header_t *) d->bytes;
    (void) w;
    (void) arg;

    if (USNIC_PAYLOAD_TYPE_CHUNK != ch->hdr.payload_type ||
        !usnic_is_get_data(ch->hdr.tag, ch->hdr.put_addr) || 0 != ch->frag_offset) {
        return NET_DELIVER;
    }
    if (0 == rewrites) {
        first_id = ch->hdr.put_addr;
        ch->hdr.put_addr ^= 1ULL << 40;     /* the serial part: a stale id */
        ++rewrites;
    } else if (1 == rewrites && ch->hdr.put_addr != first_id) {
        ch->hdr.put_addr = first_id;        /* the first GET, already receiving */
        ++rewrites;
    }
    return NET_DELIVER;
}

USNIC_TEST(rdma_get_data_forged_id)
{
    enum { LEN = 50000 };
    world_t *w = world_new(65, 66);
    uint8_t *region = malloc(2 * LEN), *dst = malloc(2 * LEN + 64);
    op_rec_t r[2];

    check(NULL != w && NULL != region && NULL != dst);
    memset(r, 0, sizeof(r));
    usnic_component.max_short_packets = 0;
    world_fill(region, 29, 2 * LEN);
    memset(dst, 0x5a, 2 * LEN + 64);
    check(NULL != world_register(w, SIDE_B, region, 2 * LEN, MCA_BTL_REG_FLAG_REMOTE_READ));
    rewrites = 0;
    w->filter = forge_get_ids;
    check_int_eq(do_get(w, &r[0], dst, region, LEN), OPAL_SUCCESS);
    check_int_eq(do_get(w, &r[1], dst + LEN + 64, region + LEN, LEN), OPAL_SUCCESS);
    check_int_eq(world_run(w, 200000, true), WORLD_QUIET);
    check_int_eq(rewrites, 2);
    check_int_eq(STATS(w, SIDE_A)->num_rdma_stray, 2);
    for (int i = 0; i < 2; ++i) {
        check_int_eq(r[i].callbacks, 1);
        check_int_eq(r[i].status, OPAL_SUCCESS);
    }
    check(0 == memcmp(dst, region, LEN));
    check(0 == memcmp(dst + LEN + 64, region + LEN, LEN));
    for (int k = 0; k < 64; ++k) {
        check_int_eq(dst[LEN + k], 0x5a);
    }
    check_ok(rdma_idle(w));
    check_ok(world_check_idle(w));
    world_fini(w);
    free(region);
    free(dst);
    return 0;
}

/* Many GETs in flight at once, completed in any order. */
USNIC_TEST(rdma_get_many_in_flight)
{
    enum { N = 300, LEN = 3000 };
    world_t *w = world_new(65500, 3);
    uint8_t *region = malloc(N * LEN), *dst = calloc(N, LEN);
    op_rec_t *recs = calloc(N, sizeof(*recs));

    check(NULL != w && NULL != region && NULL != dst && NULL != recs);
    world_fill(region, 5, N * LEN);
    check(NULL != world_register(w, SIDE_B, region, N * LEN, MCA_BTL_REG_FLAG_ACCESS_ANY));
    w->filter = lossy_filter;
    w->reorder = 8;
    for (int i = 0; i < N; ++i) {
        check_int_eq(do_get(w, &recs[i], dst + i * LEN, region + i * LEN, LEN), OPAL_SUCCESS);
    }
    check_int_eq(world_run(w, 400000, true), WORLD_QUIET);
    for (int i = 0; i < N; ++i) {
        check_int_eq(recs[i].callbacks, 1);
        check_int_eq(recs[i].status, OPAL_SUCCESS);
    }
    check(0 == memcmp(dst, region, N * LEN));
    check_int_eq(STATS(w, SIDE_B)->num_rdma_served, N);
    check_ok(rdma_idle(w));
    check_ok(world_check_idle(w));
    world_fini(w);
    free(region);
    free(dst);
    free(recs);
    return 0;
}

/* ------------------------------------------------------------------ */

/* The expected result of op on old (width bits). */
static uint64_t model(mca_btl_base_atomic_op_t op, uint64_t old, uint64_t a, bool is32)
{
    uint64_t r;

    switch (op) {
    case MCA_BTL_ATOMIC_ADD: r = old + a; break;
    case MCA_BTL_ATOMIC_AND: r = old & a; break;
    case MCA_BTL_ATOMIC_OR: r = old | a; break;
    case MCA_BTL_ATOMIC_XOR: r = old ^ a; break;
    case MCA_BTL_ATOMIC_LAND: r = (is32 ? (uint32_t) old : old) && (is32 ? (uint32_t) a : a); break;
    case MCA_BTL_ATOMIC_LOR: r = (is32 ? (uint32_t) old : old) || (is32 ? (uint32_t) a : a); break;
    case MCA_BTL_ATOMIC_LXOR:
        r = !(is32 ? (uint32_t) old : old) != !(is32 ? (uint32_t) a : a);
        break;
    default: r = a; break; /* SWAP */
    }
    return is32 ? (uint32_t) r : r;
}

static const mca_btl_base_atomic_op_t all_ops[] = {
    MCA_BTL_ATOMIC_ADD,  MCA_BTL_ATOMIC_AND, MCA_BTL_ATOMIC_OR,   MCA_BTL_ATOMIC_XOR,
    MCA_BTL_ATOMIC_LAND, MCA_BTL_ATOMIC_LOR, MCA_BTL_ATOMIC_LXOR, MCA_BTL_ATOMIC_SWAP,
};

/* Every operation, fetching and not, 32 and 64 bit, on a word between two
 * guard words; then compare-and-swap that matches and one that does not. */
static int run_atomics(bool lossy)
{
    world_t *w = world_new(1, 2);
    uint64_t *mem = calloc(64, sizeof(uint64_t));
    const uint64_t starts[] = {0, 1, 0xf0f0f0f0f0f0f0f0ULL, 0xffffffffULL, 0x123456789ULL};
    const uint64_t operands[] = {0, 1, 0x0ff00ff00ff00ff0ULL, 0xffffffff00000001ULL};
    uint64_t nops = 0;

    check(NULL != w && NULL != mem);
    check(NULL != world_register(w, SIDE_B, mem, 64 * sizeof(uint64_t),
                                 MCA_BTL_REG_FLAG_REMOTE_ATOMIC));
    if (lossy) {
        w->filter = lossy_filter;
        w->reorder = 4;
    }
    for (size_t o = 0; o < sizeof(all_ops) / sizeof(all_ops[0]); ++o) {
        for (int width = 0; width < 2; ++width) {
            for (int fetch = 0; fetch < 2; ++fetch) {
                for (size_t s = 0; s < sizeof(starts) / sizeof(starts[0]); ++s) {
                    for (size_t a = 0; a < sizeof(operands) / sizeof(operands[0]); ++a) {
                        bool is32 = 0 == width;
                        op_rec_t r = {0};
                        uint64_t want, got;

                        mem[7] = mem[9] = 0x1111111111111111ULL;
                        mem[8] = starts[s];
                        want = model(all_ops[o], starts[s], operands[a], is32);
                        if (is32) {
                            /* the upper half of the word stays as it was */
                            want |= starts[s] & 0xffffffff00000000ULL;
                        }
                        check_int_eq(do_fop(w, &r, &mem[8], all_ops[o], operands[a], is32,
                                            fetch),
                                     OPAL_SUCCESS);
                        check_int_eq(world_run(w, 20000, lossy), WORLD_QUIET);
                        ++nops;
                        check_int_eq(r.callbacks, 1);
                        check_int_eq(r.status, OPAL_SUCCESS);
                        got = mem[8];
                        if (got != want) {
                            return usnic_test_fail(__FILE__, __LINE__,
                                                   "op %d %s %s: 0x%llx op 0x%llx = 0x%llx, "
                                                   "expected 0x%llx", (int) all_ops[o],
                                                   is32 ? "32" : "64", fetch ? "fop" : "op",
                                                   (unsigned long long) starts[s],
                                                   (unsigned long long) operands[a],
                                                   (unsigned long long) got,
                                                   (unsigned long long) want);
                        }
                        if (fetch) {
                            /* 32 bit: 4 bytes written, the rest untouched */
                            check(r.result == (is32 ? (0xdeaddeadULL << 32) |
                                                          (uint32_t) starts[s]
                                                    : starts[s]));
                        } else {
                            check(r.result == 0xdeaddeaddeaddeadULL);
                        }
                        check(mem[7] == 0x1111111111111111ULL && mem[9] == mem[7]);
                    }
                }
            }
        }
    }
    for (int width = 0; width < 2; ++width) {
        bool is32 = 0 == width;
        op_rec_t r = {0};

        mem[8] = 0x4444444455555555ULL;
        /* matches */
        check_int_eq(do_cswap(w, &r, &mem[8], is32 ? 0x55555555ULL : mem[8], 0x9999999988888888ULL,
                              is32),
                     OPAL_SUCCESS);
        check_int_eq(world_run(w, 20000, lossy), WORLD_QUIET);
        check_int_eq(r.callbacks, 1);
        check_int_eq(r.status, OPAL_SUCCESS);
        check(mem[8] == (is32 ? 0x4444444488888888ULL : 0x9999999988888888ULL));
        check(is32 ? (uint32_t) r.result == 0x55555555U : r.result == 0x4444444455555555ULL);
        /* does not match: nothing written, the current value back */
        memset(&r, 0, sizeof(r));
        mem[8] = 0x4444444455555555ULL;
        check_int_eq(do_cswap(w, &r, &mem[8], 0x55555556ULL, 1, is32), OPAL_SUCCESS);
        check_int_eq(world_run(w, 20000, lossy), WORLD_QUIET);
        check_int_eq(r.callbacks, 1);
        check(mem[8] == 0x4444444455555555ULL);
        check(is32 ? (uint32_t) r.result == 0x55555555U : r.result == 0x4444444455555555ULL);
        nops += 2;
    }
    check_int_eq(STATS(w, SIDE_A)->num_atomics, nops);
    check_int_eq(STATS(w, SIDE_B)->num_rdma_served, nops);
    check_ok(rdma_idle(w));
    check_ok(world_check_idle(w));
    if (!lossy) {
        check_ok(world_verify_counters(w));
    }
    world_fini(w);
    free(mem);
    return 0;
}

USNIC_TEST(rdma_atomics)
{
    return run_atomics(false);
}

USNIC_TEST(rdma_atomics_lossy)
{
    return run_atomics(true);
}

/* Fetch-and-add of 1, many at once, on a network that loses, duplicates
 * and reorders: executed exactly once each (the counter ends at N and the
 * values fetched are 0..N-1, each once). */
USNIC_TEST(rdma_fetch_add_exactly_once)
{
    enum { N = 500 };
    world_t *w = world_new(65000, 40000);
    uint64_t *ctr = calloc(1, sizeof(uint64_t));
    op_rec_t *recs = calloc(N, sizeof(*recs));
    bool *seen = calloc(N, sizeof(bool));

    check(NULL != w && NULL != ctr && NULL != recs && NULL != seen);
    check(NULL != world_register(w, SIDE_B, ctr, sizeof(*ctr), MCA_BTL_REG_FLAG_ACCESS_ANY));
    w->filter = lossy_filter;
    w->reorder = 16;
    for (int i = 0; i < N; ++i) {
        check_int_eq(do_fop(w, &recs[i], ctr, MCA_BTL_ATOMIC_ADD, 1, false, true), OPAL_SUCCESS);
        if (0 == i % 50) {
            world_step(w);
        }
    }
    check_int_eq(world_run(w, 400000, true), WORLD_QUIET);
    check(*ctr == N);
    for (int i = 0; i < N; ++i) {
        check_int_eq(recs[i].callbacks, 1);
        check_int_eq(recs[i].status, OPAL_SUCCESS);
        check(recs[i].result < N && !seen[recs[i].result]);
        seen[recs[i].result] = true;
    }
    check_int_eq(STATS(w, SIDE_B)->num_rdma_served, N);
    check(STATS(w, SIDE_B)->num_dup_recvs + STATS(w, SIDE_A)->num_dup_recvs > 0);
    check_ok(rdma_idle(w));
    check_ok(world_check_idle(w));
    world_fini(w);
    free(ctr);
    free(recs);
    free(seen);
    return 0;
}

/* The first reply is lost on the way: the target's retransmit brings it,
 * the request ran once, and the initiator completes once. */
static int replies_lost;

static net_action_t lose_first_reply(world_t *w, fake_dgram_t *d, void *arg)
{
    const usnic_btl_header_t *h = dgram_hdr(d);
    const usnic_rdma_msg_t *m = (const usnic_rdma_msg_t *) (h + 1);
    (void) arg;

    if (d->src == w->mods[SIDE_B].dev && USNIC_PAYLOAD_TYPE_FRAG == h->payload_type &&
        USNIC_TAG_RDMA == h->tag && USNIC_RDMA_REPLY == m->kind && 0 == replies_lost) {
        ++replies_lost;
        return NET_DROP;
    }
    return NET_DELIVER;
}

USNIC_TEST(rdma_reply_lost)
{
    world_t *w = world_new(9, 10);
    uint64_t *ctr = calloc(2, sizeof(uint64_t));
    op_rec_t r = {0};

    check(NULL != w && NULL != ctr);
    ctr[0] = 41;
    check(NULL != world_register(w, SIDE_B, ctr, 2 * sizeof(uint64_t),
                                 MCA_BTL_REG_FLAG_ACCESS_ANY));
    replies_lost = 0;
    w->filter = lose_first_reply;
    check_int_eq(do_fop(w, &r, ctr, MCA_BTL_ATOMIC_ADD, 1, false, true), OPAL_SUCCESS);
    check_int_eq(world_run(w, 20000, true), WORLD_QUIET);
    check_int_eq(replies_lost, 1);
    check(STATS(w, SIDE_B)->num_resends >= 1);
    check_int_eq(r.callbacks, 1);
    check_int_eq(r.status, OPAL_SUCCESS);
    check(r.result == 41 && ctr[0] == 42);
    check_int_eq(STATS(w, SIDE_B)->num_rdma_served, 1);
    check_ok(rdma_idle(w));
    check_ok(world_check_idle(w));
    world_fini(w);
    free(ctr);
    return 0;
}

/* A GET or atomic anywhere but inside memory registered for that access:
 * refused (counted at the target, memory untouched), and the initiator gets
 * one error completion, no hang. */
static int refused(int how, bool get)
{
    world_t *w = world_new(20, 30);
    uint8_t *region = malloc(3 * 8192), *dst = malloc(8192);
    uint8_t *target = region + 8192;
    mca_btl_base_registration_handle_t *h;
    size_t len = get ? 1000 : 8;
    op_rec_t r = {0};

    check(NULL != w && NULL != region && NULL != dst);
    usnic_component.max_short_packets = 0;
    memset(region, 0x77, 3 * 8192);
    memset(dst, 0x22, 8192);
    switch (how) {
    case 0: /* not registered */
        break;
    case 1: /* registered, not for this access (remote writes only) */
        world_register(w, SIDE_B, target, 8192, MCA_BTL_REG_FLAG_REMOTE_WRITE);
        break;
    case 2: /* runs past the end */
        world_register(w, SIDE_B, target, 8192, MCA_BTL_REG_FLAG_ACCESS_ANY);
        target += 8192 - (get ? len / 2 : 0);
        break;
    case 3: /* registered and deregistered again */
        h = world_register(w, SIDE_B, target, 8192, MCA_BTL_REG_FLAG_ACCESS_ANY);
        world_deregister(w, SIDE_B, h);
        break;
    case 4: /* starts before the region */
        world_register(w, SIDE_B, target, 8192, MCA_BTL_REG_FLAG_ACCESS_ANY);
        target -= 8;
        break;
    }
    if (get) {
        check_int_eq(do_get(w, &r, dst, target, len), OPAL_SUCCESS);
    } else {
        check_int_eq(do_fop(w, &r, target, MCA_BTL_ATOMIC_ADD, 5, false, true), OPAL_SUCCESS);
    }
    check_int_eq(world_run(w, 20000, true), WORLD_QUIET);
    check_int_eq(r.callbacks, 1);
    check(OPAL_SUCCESS != r.status);
    check_int_eq(STATS(w, SIDE_B)->num_rdma_refused, 1);
    for (size_t i = 0; i < 3 * 8192; ++i) {
        check_int_eq(region[i], 0x77);
    }
    for (size_t i = 0; i < 8192; ++i) {
        check_int_eq(dst[i], 0x22);
    }
    check(r.result == (get ? 0 : 0xdeaddeaddeaddeadULL));
    check_ok(rdma_idle(w));
    check_ok(world_check_idle(w));
    world_fini(w);
    free(region);
    free(dst);
    return 0;
}

USNIC_TEST(rdma_refused_outside_registration)
{
    for (int how = 0; how < 5; ++how) {
        if (0 != refused(how, true) || 0 != refused(how, false)) {
            return usnic_test_fail(__FILE__, __LINE__, "case %d", how);
        }
    }
    return 0;
}

/* ------------------------------------------------------------------ */
/* handles: a PUT, GET or atomic reaches only the registration its      */
/* handle names, while that registration lives                          */

typedef enum {
    BAD_KEY,            /* the slot of a live registration, another key */
    BAD_REVOKED,        /* a deregistered handle; its slot holds a new registration */
    BAD_INDEX,          /* a slot never handed out */
    BAD_INDEX_MAX,      /* the last slot number there is */
    BAD_OTHER_PROCESS,  /* a handle A's own registration got from A's table */
    BAD_NUM
} bad_handle_how_t;

typedef enum { OP_PUT, OP_PUT_CHUNKED, OP_GET, OP_FOP, OP_NUM } bad_handle_op_t;

#define BH_REGION 65536

/* A handle for B's region that B's table does not hold, made as `how` says
 * (from B's live handle h, which BAD_REVOKED replaces); false if the world
 * would not make it. */
static bool make_bad_handle(world_t *w, bad_handle_how_t how, uint8_t *target,
                            mca_btl_base_registration_handle_t **h,
                            mca_btl_base_registration_handle_t *bad)
{
    static uint64_t a_mem[8];
    mca_btl_base_registration_handle_t *own;

    *bad = **h;
    switch (how) {
    case BAD_KEY:
        bad->key ^= 1;
        return true;
    case BAD_REVOKED:
        world_deregister(w, SIDE_B, *h);
        *h = world_register(w, SIDE_B, target, BH_REGION, MCA_BTL_REG_FLAG_ACCESS_ANY);
        /* the same slot again, with another key */
        return NULL != *h && (*h)->index == bad->index && (*h)->key != bad->key;
    case BAD_INDEX:
        bad->index += 1000;
        return true;
    case BAD_INDEX_MAX:
        bad->index = UINT32_MAX;
        return true;
    case BAD_OTHER_PROCESS:
        own = world_register(w, SIDE_A, a_mem, sizeof(a_mem), MCA_BTL_REG_FLAG_ACCESS_ANY);
        if (NULL == own) {
            return false;
        }
        *bad = *own;
        /* (each process's first registration: the slot of B's region) */
        return bad->index == (*h)->index;
    default:
        return false;
    }
}

/* One operation of A on B's registered region with a bad handle: nothing
 * written or read, counted at B; a GET or atomic fails at A, a PUT is
 * refused at every resend and never completes (as one outside the region);
 * the live handle works after it. */
static int bad_handle_case(bad_handle_how_t how, bad_handle_op_t op)
{
    world_t *w = world_new(20, 30);
    uint8_t *region = malloc(3 * BH_REGION), *src = malloc(BH_REGION), *dst = malloc(BH_REGION);
    uint8_t *target = region + BH_REGION;
    mca_btl_base_registration_handle_t *h, bad;
    size_t len = OP_PUT_CHUNKED == op ? 20000 : OP_FOP == op ? 8 : 1000;
    put_rec_t *put = NULL;
    op_rec_t r = {0};

    check(NULL != w && NULL != region && NULL != src && NULL != dst);
    usnic_component.max_short_packets = 0;
    memset(region, 0x77, 3 * BH_REGION);
    memset(src, 0x11, BH_REGION);
    memset(dst, 0x22, BH_REGION);
    h = world_register(w, SIDE_B, target, BH_REGION, MCA_BTL_REG_FLAG_ACCESS_ANY);
    check(NULL != h);
    check(make_bad_handle(w, how, target, &h, &bad));
    switch (op) {
    case OP_PUT:
    case OP_PUT_CHUNKED:
        check(OP_PUT == op ? len <= w->mods[SIDE_A].max_frag_payload
                           : len > 2 * w->mods[SIDE_A].max_chunk_payload);
        put = world_put_h(w, SIDE_A, src, (uint64_t) (uintptr_t) target, len, &bad);
        check_int_eq(put->rc, OPAL_SUCCESS);
        check_int_eq(world_run(w, 200, true), WORLD_LIMIT);
        check_int_eq(put->callbacks, 0);
        check(STATS(w, SIDE_B)->num_bad_handles >= 2);
        check_int_eq(STATS(w, SIDE_B)->num_frag_recvs + STATS(w, SIDE_B)->num_chunk_recvs, 0);
        break;
    case OP_GET:
        check_int_eq(do_get_h(w, &r, dst, target, len, &bad), OPAL_SUCCESS);
        break;
    case OP_FOP:
        check_int_eq(do_fop_h(w, &r, target, MCA_BTL_ATOMIC_ADD, 5, false, true, &bad),
                     OPAL_SUCCESS);
        break;
    default:
        check(false);
    }
    if (NULL == put) {
        check_int_eq(world_run(w, 20000, true), WORLD_QUIET);
        check_int_eq(r.callbacks, 1);
        check_int_eq(r.status, OPAL_ERR_BAD_PARAM);
        check_int_eq(STATS(w, SIDE_B)->num_bad_handles, 1);
        check_int_eq(STATS(w, SIDE_B)->num_rdma_refused, 1);
        check(r.result == (OP_GET == op ? 0 : 0xdeaddeaddeaddeadULL));
        for (size_t i = 0; i < BH_REGION; ++i) {
            check_int_eq(dst[i], 0x22);
        }
        check_ok(rdma_idle(w));
    }
    for (size_t i = 0; i < 3 * BH_REGION; ++i) {
        check_int_eq(region[i], 0x77);
    }
    if (NULL != put) {
        /* the peer would end the job at its timeout; here it goes away */
        world_del_procs(w, SIDE_A);
        check_int_eq(put->callbacks, 1);
        world_fini(w);
        w = world_new(20, 30);
        check(NULL != w);
        h = world_register(w, SIDE_B, target, BH_REGION, MCA_BTL_REG_FLAG_ACCESS_ANY);
        check(NULL != h);
    }
    /* the live handle: written */
    put = world_put_h(w, SIDE_A, src, (uint64_t) (uintptr_t) target, len, h);
    check_int_eq(put->rc, OPAL_SUCCESS);
    check_int_eq(world_run(w, 20000, true), WORLD_QUIET);
    check_int_eq(put->callbacks, 1);
    check_int_eq(put->status, OPAL_SUCCESS);
    check(0 == memcmp(target, src, len));
    check_ok(world_check_idle(w));
    world_fini(w);
    free(region);
    free(src);
    free(dst);
    return 0;
}

USNIC_TEST(rdma_bad_handles_refused)
{
    static const char *hows[] = {"wrong key", "revoked key", "index out of range",
                                 "index UINT32_MAX", "key of another process"};
    static const char *ops[] = {"PUT", "chunked PUT", "GET", "fetch-and-add"};

    int rc = 0;

    /* (every case, each failure reported) */
    for (int how = 0; how < BAD_NUM; ++how) {
        for (int op = 0; op < OP_NUM; ++op) {
            if (0 != bad_handle_case((bad_handle_how_t) how, (bad_handle_op_t) op)) {
                rc = usnic_test_fail(__FILE__, __LINE__, "%s, %s", hows[how], ops[op]);
            }
        }
    }
    return rc;
}

/* Slots are used again and get a new key each time. */
USNIC_TEST(rdma_handle_slots_reused_with_new_keys)
{
    world_t *w = world_new(20, 30);
    static uint8_t mem[4][64];
    mca_btl_base_registration_handle_t *h[4], old;

    check(NULL != w);
    for (int i = 0; i < 4; ++i) {
        h[i] = world_register(w, SIDE_B, mem[i], sizeof(mem[i]), MCA_BTL_REG_FLAG_ACCESS_ANY);
        check(NULL != h[i]);
        check_int_eq(h[i]->index, i);
        check(0 != h[i]->key);
        for (int j = 0; j < i; ++j) {
            check(h[i]->key != h[j]->key);
        }
    }
    for (int round = 0; round < 100; ++round) {
        old = *h[2];
        world_deregister(w, SIDE_B, h[2]);
        h[2] = world_register(w, SIDE_B, mem[2], sizeof(mem[2]), MCA_BTL_REG_FLAG_ACCESS_ANY);
        check(NULL != h[2]);
        check_int_eq(h[2]->index, 2);
        check(h[2]->key != old.key && 0 != h[2]->key);
    }
    check_int_eq(w->regtab[SIDE_B].used, 4);
    world_fini(w);
    return 0;
}

/* Requests the BTL cannot send are refused at once. */
USNIC_TEST(rdma_bad_calls)
{
    world_t *w = world_new(20, 30);
    mca_btl_base_module_t *btl;
    uint64_t v[2];
    op_rec_t r = {0};

    check(NULL != w);
    btl = &w->mods[SIDE_A].super;
    world_run_as(w, SIDE_A);
    check_int_eq(btl->btl_get(btl, w->ep[SIDE_A], v, 0, NULL, NULL, 8, 0, 0, op_cb, NULL, &r),
                 OPAL_ERR_BAD_PARAM);
    check_int_eq(btl->btl_get(btl, w->ep[SIDE_A], v, (uint64_t) (uintptr_t) v, NULL, NULL,
                              (size_t) USNIC_RDMA_MAX_GET + 1, 0, 0, op_cb, NULL, &r),
                 OPAL_ERR_BAD_PARAM);
    /* misaligned */
    check_int_eq(btl->btl_atomic_fop(btl, w->ep[SIDE_A], v, (uint64_t) (uintptr_t) v + 4, NULL,
                                     NULL, MCA_BTL_ATOMIC_ADD, 1, 0, 0, op_cb, NULL, &r),
                 OPAL_ERR_BAD_PARAM);
    check_int_eq(btl->btl_atomic_op(btl, w->ep[SIDE_A], (uint64_t) (uintptr_t) v, NULL,
                                    MCA_BTL_ATOMIC_MIN, 1, 0, 0, op_cb, NULL, &r),
                 OPAL_ERR_NOT_SUPPORTED);
    check_int_eq(btl->btl_atomic_op(btl, w->ep[SIDE_A], (uint64_t) (uintptr_t) v, NULL,
                                    MCA_BTL_ATOMIC_ADD, 1, MCA_BTL_ATOMIC_FLAG_FLOAT, 0, op_cb,
                                    NULL, &r),
                 OPAL_ERR_NOT_SUPPORTED);
    check_int_eq(r.callbacks, 0);
    check_int_eq(world_run(w, 1000, false), WORLD_QUIET);
    check_ok(rdma_idle(w));
    check_ok(world_check_idle(w));
    world_fini(w);
    return 0;
}

/* A NULL endpoint is this process itself (osc/rdma 4.1 addresses itself
 * so): PUT, GET and atomics on its own registered memory.  Atomics are done
 * when the call returns 1 (no callback, no progress pass: osc/rdma's lock
 * words on its own window), fetching ones at 64 bits; PUT, GET and 32-bit
 * fetches complete from progress; outside registered memory refused with
 * an error completion. */
USNIC_TEST(rdma_null_endpoint_is_self)
{
    world_t *w = world_new(20, 30);
    mca_btl_base_module_t *btl;
    static uint64_t mem[16], other[4];
    uint64_t src[2] = {0x1122334455667788ULL, 0x99aabbccddeeff00ULL}, dst[2] = {0, 0};
    uint32_t r32[2] = {0, 0}, *m32 = (uint32_t *) &mem[12];
    mca_btl_base_registration_handle_t *hm;
    op_rec_t r[9];

    check(NULL != w);
    memset(r, 0, sizeof(r));
    for (int i = 0; i < 16; ++i) {
        mem[i] = 100 + i;
    }
    hm = world_register(w, SIDE_A, mem, sizeof(mem), MCA_BTL_REG_FLAG_ACCESS_ANY);
    check(NULL != hm);
    btl = &w->mods[SIDE_A].super;
    world_run_as(w, SIDE_A);
    check_int_eq(btl->btl_put(btl, NULL, src, (uint64_t) (uintptr_t) &mem[2], NULL, hm, 16, 0,
                              0, op_cb, NULL, &r[0]),
                 OPAL_SUCCESS);
    check_int_eq(btl->btl_get(btl, NULL, dst, (uint64_t) (uintptr_t) &mem[6], NULL, hm, 16, 0,
                              0, op_cb, NULL, &r[1]),
                 OPAL_SUCCESS);
    /* 64-bit fetch-and-op, compare-and-swap, non-fetching ops of both widths:
     * done in the call */
    check_int_eq(btl->btl_atomic_fop(btl, NULL, &r[2].result, (uint64_t) (uintptr_t) &mem[9],
                                     NULL, hm, MCA_BTL_ATOMIC_ADD, 5, 0, 0, op_cb, NULL, &r[2]),
                 1);
    check(r[2].result == 109 && mem[9] == 114);
    check_int_eq(btl->btl_atomic_cswap(btl, NULL, &r[3].result, (uint64_t) (uintptr_t) &mem[10],
                                       NULL, hm, 110, 7, 0, 0, op_cb, NULL, &r[3]),
                 1);
    check(r[3].result == 110 && mem[10] == 7);
    check_int_eq(btl->btl_atomic_op(btl, NULL, (uint64_t) (uintptr_t) &mem[11], hm,
                                    MCA_BTL_ATOMIC_XOR, 3, 0, 0, op_cb, NULL, &r[4]),
                 1);
    check(mem[11] == (111 ^ 3));
    check_int_eq(btl->btl_atomic_op(btl, NULL, (uint64_t) (uintptr_t) &m32[0], hm,
                                    MCA_BTL_ATOMIC_ADD, 2, MCA_BTL_ATOMIC_FLAG_32BIT, 0, op_cb,
                                    NULL, &r[5]),
                 1);
    check(m32[0] == (uint32_t) (112 + 2) && m32[1] == 0);
    /* 32-bit fetches: osc/rdma's inline path would store 64 bits into a
     * 32-bit result, so these complete from progress */
    check_int_eq(btl->btl_atomic_fop(btl, NULL, &r32[0], (uint64_t) (uintptr_t) &m32[0], NULL,
                                     hm, MCA_BTL_ATOMIC_ADD, 1, MCA_BTL_ATOMIC_FLAG_32BIT, 0,
                                     op_cb, NULL, &r[6]),
                 OPAL_SUCCESS);
    check_int_eq(btl->btl_atomic_cswap(btl, NULL, &r32[1], (uint64_t) (uintptr_t) &m32[1], NULL,
                                       hm, 0, 9, MCA_BTL_ATOMIC_FLAG_32BIT, 0, op_cb, NULL,
                                       &r[7]),
                 OPAL_SUCCESS);
    check_int_eq(btl->btl_get(btl, NULL, dst, (uint64_t) (uintptr_t) other, NULL, NULL, 8, 0, 0,
                              op_cb, NULL, &r[8]),
                 OPAL_SUCCESS);
    /* the rest completes from progress, not from inside the calls */
    for (int i = 0; i < 9; ++i) {
        check_int_eq(r[i].callbacks, 0);
    }
    world_progress(w, SIDE_A);
    for (int i = 0; i < 9; ++i) {
        bool inline_done = 2 <= i && i <= 5;
        check_int_eq(r[i].callbacks, inline_done ? 0 : 1);
        check_int_eq(r[i].status, 8 == i ? OPAL_ERR_BAD_PARAM : OPAL_SUCCESS);
    }
    check(mem[2] == src[0] && mem[3] == src[1]);
    check(dst[0] == 106 && dst[1] == 107);
    check(r32[0] == 114 && m32[0] == 115);
    check(r32[1] == 0 && m32[1] == 9);
    check_int_eq(STATS(w, SIDE_A)->num_rdma_local, 9);
    check_int_eq(STATS(w, SIDE_A)->num_rdma_refused, 1);
    check_int_eq(STATS(w, SIDE_A)->num_atomics, 6);
    check_ok(rdma_idle(w));
    check_ok(world_check_idle(w));
    world_fini(w);
    return 0;
}

/* Open MPI 4.1.4's osc/rdma on a dynamic window: an origin holds a lock
 * word exclusively (compare-and-swap 0 -> bit 63) and then asks for it
 * shared (fetch-and-add 1, seeing bit 63: add -1, again) forever.  The
 * target ends the job with a message after SELF_WAITS_FATAL such attempts
 * (1000), remote or on its own memory; a process that waits for a lock
 * another one holds waits on, and a lock released and taken again counts
 * afresh. */
#define EXCL_BIT (1ULL << 63)

static int self_wait_rounds(world_t *w, uint64_t *lock, int n, bool remote)
{
    mca_btl_base_module_t *btl = &w->mods[SIDE_A].super;
    mca_btl_base_registration_handle_t *h = remote ? NULL : HANDLE_AT(w, SIDE_A, lock);

    for (int i = 0; i < n; ++i) {
        op_rec_t r = {0}, back = {0};
        if (remote) {
            check_int_eq(do_fop(w, &r, lock, MCA_BTL_ATOMIC_ADD, 1, false, true), OPAL_SUCCESS);
            check_int_eq(world_run(w, 1000, true), WORLD_QUIET);
            check(r.result & EXCL_BIT);
            check_int_eq(do_fop(w, &back, lock, MCA_BTL_ATOMIC_ADD, (uint64_t) -1, false, false),
                         OPAL_SUCCESS);
            check_int_eq(world_run(w, 1000, true), WORLD_QUIET);
        } else {
            world_run_as(w, SIDE_A);
            check_int_eq(btl->btl_atomic_fop(btl, NULL, &r.result, (uint64_t) (uintptr_t) lock,
                                             NULL, h, MCA_BTL_ATOMIC_ADD, 1, 0, 0, op_cb,
                                             NULL, &r),
                         1);
            check_int_eq(btl->btl_atomic_op(btl, NULL, (uint64_t) (uintptr_t) lock, h,
                                            MCA_BTL_ATOMIC_ADD, (uint64_t) -1, 0, 0, op_cb, NULL,
                                            &back),
                         1);
            world_progress(w, SIDE_A);
            check(r.result & EXCL_BIT);
        }
    }
    return 0;
}

USNIC_TEST(rdma_lock_self_wait_ends_job)
{
    world_t *w = world_new(20, 30);
    static uint64_t lock[2], mine[1];
    mca_btl_base_registration_handle_t *hb1;
    mca_btl_base_module_t *btl;
    op_rec_t r = {0};

    check(NULL != w);
    check(NULL != world_register(w, SIDE_B, lock, sizeof(lock), MCA_BTL_REG_FLAG_ACCESS_ANY));
    check(NULL != world_register(w, SIDE_A, mine, sizeof(mine), MCA_BTL_REG_FLAG_ACCESS_ANY));
    hb1 = HANDLE_AT(w, SIDE_B, &lock[1]);

    /* B holds lock[1] itself; A waits for it: no verdict however long */
    btl = &w->mods[SIDE_B].super;
    world_run_as(w, SIDE_B);
    check_int_eq(btl->btl_atomic_cswap(btl, NULL, &r.result, (uint64_t) (uintptr_t) &lock[1],
                                       NULL, hb1, 0, EXCL_BIT, 0, 0, op_cb, NULL, &r),
                 1);
    world_progress(w, SIDE_B);
    check(0 == r.result && EXCL_BIT == lock[1]);
    if (0 != self_wait_rounds(w, &lock[1], 1100, true)) {
        return 1;
    }
    check_int_eq(fake_dev.fatal_calls, 0);
    /* B releases lock[1] without an add (a swap to 0) and A takes it: A's
     * waits on it count as A's, not B's nor a stale entry's */
    {
        op_rec_t sw = {0};
        btl = &w->mods[SIDE_B].super;
        world_run_as(w, SIDE_B);
        check_int_eq(btl->btl_atomic_fop(btl, NULL, &sw.result, (uint64_t) (uintptr_t) &lock[1],
                                         NULL, hb1, MCA_BTL_ATOMIC_SWAP, 0, 0, 0, op_cb, NULL,
                                         &sw),
                     1);
        world_progress(w, SIDE_B);
        check(0 == lock[1]);
        check_int_eq(do_cswap(w, &r, &lock[1], 0, EXCL_BIT, false), OPAL_SUCCESS);
        check_int_eq(world_run(w, 1000, true), WORLD_QUIET);
        check(0 == r.result);
        world_run_as(w, SIDE_B);
        check_int_eq(btl->btl_atomic_cswap(btl, NULL, &sw.result, (uint64_t) (uintptr_t) &lock[1],
                                           NULL, hb1, 0, EXCL_BIT, 0, 0, op_cb, NULL, &sw),
                     1);
        world_progress(w, SIDE_B);
        check(EXCL_BIT == sw.result);
        /* B waits (shared attempts) on A's lock: never a verdict */
        for (int i = 0; i < 1100; ++i) {
            op_rec_t a = {0}, b = {0};
            check_int_eq(btl->btl_atomic_fop(btl, NULL, &a.result, (uint64_t) (uintptr_t) &lock[1],
                                             NULL, hb1, MCA_BTL_ATOMIC_ADD, 1, 0, 0, op_cb, NULL,
                                             &a),
                         1);
            check_int_eq(btl->btl_atomic_op(btl, NULL, (uint64_t) (uintptr_t) &lock[1], hb1,
                                            MCA_BTL_ATOMIC_ADD, (uint64_t) -1, 0, 0, op_cb, NULL,
                                            &b),
                         1);
            world_progress(w, SIDE_B);
        }
        check_int_eq(fake_dev.fatal_calls, 0);
        check_int_eq(do_fop(w, &r, &lock[1], MCA_BTL_ATOMIC_ADD, EXCL_BIT, false, false),
                     OPAL_SUCCESS);
        check_int_eq(world_run(w, 1000, true), WORLD_QUIET);
        check(0 == lock[1]);
    }

    /* A takes lock[0], releases it, takes it again: the count starts anew */
    check_int_eq(do_cswap(w, &r, &lock[0], 0, EXCL_BIT, false), OPAL_SUCCESS);
    check_int_eq(world_run(w, 1000, true), WORLD_QUIET);
    check(0 == r.result);
    if (0 != self_wait_rounds(w, &lock[0], 999, true)) {
        return 1;
    }
    check_int_eq(do_fop(w, &r, &lock[0], MCA_BTL_ATOMIC_ADD, EXCL_BIT, false, false),
                 OPAL_SUCCESS);
    check_int_eq(world_run(w, 1000, true), WORLD_QUIET);
    check(0 == lock[0]);
    check_int_eq(do_cswap(w, &r, &lock[0], 0, EXCL_BIT, false), OPAL_SUCCESS);
    check_int_eq(world_run(w, 1000, true), WORLD_QUIET);
    if (0 != self_wait_rounds(w, &lock[0], 999, true)) {
        return 1;
    }
    check_int_eq(fake_dev.fatal_calls, 0);
    /* the 1000th attempt of the holder: the target ends the job (and is
     * dead for the rest of the test) */
    check_int_eq(do_fop(w, &r, &lock[0], MCA_BTL_ATOMIC_ADD, 1, false, true), OPAL_SUCCESS);
    (void) world_run(w, 1000, true);
    check_int_eq(fake_dev.fatal_calls, 1);
    check(fake_dev.fatal_module == &w->mods[SIDE_B]);

    /* the same on a process's own memory (NULL endpoint) */
    btl = &w->mods[SIDE_A].super;
    world_run_as(w, SIDE_A);
    check_int_eq(btl->btl_atomic_cswap(btl, NULL, &r.result, (uint64_t) (uintptr_t) mine, NULL,
                                       HANDLE_AT(w, SIDE_A, mine), 0, EXCL_BIT, 0, 0, op_cb,
                                       NULL, &r),
                 1);
    world_progress(w, SIDE_A);
    if (0 != self_wait_rounds(w, mine, 1000, false)) {
        return 1;
    }
    check_int_eq(fake_dev.fatal_calls, 2);
    check(fake_dev.fatal_module == &w->mods[SIDE_A]);
    world_fini(w);
    return 0;
}

/* No PUT or GET of any size needs a registered local buffer, and the
 * module says so: osc/rdma (Open MPI 4.1, 5.0) otherwise copies every PUT
 * and GET above the thresholds through a bounce buffer of its own, which it
 * registers with the BTL and never gives back when the window is freed. A
 * PUT and a GET larger than a datagram, without local handles, complete. */
USNIC_TEST(rdma_no_local_registration_needed)
{
    world_t *w = world_new(20, 30);
    mca_btl_base_module_t *btl;
    enum { N = 20000 };
    uint8_t *src = malloc(N), *dst = calloc(1, N), *mem = calloc(1, N);
    op_rec_t put = {0}, get = {0};

    check(NULL != w && NULL != src && NULL != dst && NULL != mem);
    for (int s = 0; s < 2; ++s) {
        check(SIZE_MAX == w->mods[s].super.btl_put_local_registration_threshold);
        check(SIZE_MAX == w->mods[s].super.btl_get_local_registration_threshold);
    }
    for (int i = 0; i < N; ++i) {
        src[i] = (uint8_t) (i * 7 + 3);
    }
    check(NULL != world_register(w, SIDE_B, mem, N, MCA_BTL_REG_FLAG_ACCESS_ANY));
    btl = &w->mods[SIDE_A].super;
    world_run_as(w, SIDE_A);
    check_int_eq(btl->btl_put(btl, w->ep[SIDE_A], src, (uint64_t) (uintptr_t) mem, NULL,
                              HANDLE_AT(w, SIDE_B, mem), N,
                              0, MCA_BTL_NO_ORDER, op_cb, NULL, &put),
                 OPAL_SUCCESS);
    check_int_eq(world_run(w, 20000, true), WORLD_QUIET);
    check_int_eq(put.callbacks, 1);
    check(0 == memcmp(mem, src, N));
    check_int_eq(do_get(w, &get, dst, mem, N), OPAL_SUCCESS);
    check_int_eq(world_run(w, 20000, true), WORLD_QUIET);
    check_int_eq(get.callbacks, 1);
    check_int_eq(get.status, OPAL_SUCCESS);
    check(0 == memcmp(dst, src, N));
    check_ok(rdma_idle(w));
    world_fini(w);
    free(src);
    free(dst);
    free(mem);
    return 0;
}

/* Outstanding operations fail, once, when the peer is deleted. */
USNIC_TEST(rdma_fail_on_del_procs)
{
    world_t *w = world_new(20, 30);
    uint64_t *mem = calloc(1, sizeof(uint64_t));
    op_rec_t r = {0};

    check(NULL != w && NULL != mem);
    check(NULL != world_register(w, SIDE_B, mem, sizeof(*mem), MCA_BTL_REG_FLAG_ACCESS_ANY));
    w->paused = true;
    check_int_eq(do_fop(w, &r, mem, MCA_BTL_ATOMIC_ADD, 1, false, true), OPAL_SUCCESS);
    world_step(w);
    check_int_eq(r.callbacks, 0);
    check_int_eq(world_del_procs(w, SIDE_A), OPAL_SUCCESS);
    check_int_eq(r.callbacks, 1);
    check_int_eq(r.status, OPAL_ERR_UNREACH);
    check_ok(rdma_idle(w));
    world_fini(w);
    free(mem);
    return 0;
}

/* ------------------------------------------------------------------ */
/* the pure layer                                                      */

USNIC_TEST(rdma_msg_check)
{
    uint8_t buf[sizeof(usnic_rdma_msg_t) + 16];
    usnic_rdma_msg_t *m = (usnic_rdma_msg_t *) buf;
    const size_t L = sizeof(usnic_rdma_msg_t);

    memset(buf, 0, sizeof(buf));
    check_int_eq(usnic_rdma_msg_check(buf, L - 1, 100), USNIC_PKT_SHORT);
    check_int_eq(usnic_rdma_msg_check(buf, L, 100), USNIC_PKT_BAD_RDMA); /* kind 0 */
    m->kind = 6;
    check_int_eq(usnic_rdma_msg_check(buf, L, 100), USNIC_PKT_BAD_RDMA);

    m->kind = USNIC_RDMA_GET;
    m->addr = 0x1000;
    m->len = 100;
    check_int_eq(usnic_rdma_msg_check(buf, L, 100), USNIC_PKT_OK);
    check_int_eq(usnic_rdma_msg_check(buf, L + 1, 100), USNIC_PKT_BAD_RDMA);
    m->len = 101;
    check_int_eq(usnic_rdma_msg_check(buf, L, 100), USNIC_PKT_BAD_RDMA);
    m->len = 0;
    check_int_eq(usnic_rdma_msg_check(buf, L, 100), USNIC_PKT_BAD_RDMA);
    m->len = 1;
    m->addr = 0;
    check_int_eq(usnic_rdma_msg_check(buf, L, 100), USNIC_PKT_BAD_RDMA);

    for (uint8_t kind = USNIC_RDMA_AOP; kind <= USNIC_RDMA_CSWAP; ++kind) {
        memset(buf, 0, sizeof(buf));
        m->kind = kind;
        m->aop = USNIC_AOP_ADD;
        m->width = 8;
        m->addr = 0x1008;
        check_int_eq(usnic_rdma_msg_check(buf, L, 100), USNIC_PKT_OK);
        check_int_eq(usnic_rdma_msg_check(buf, L + 8, 100), USNIC_PKT_BAD_RDMA);
        m->addr = 0x1004;
        check_int_eq(usnic_rdma_msg_check(buf, L, 100), USNIC_PKT_BAD_RDMA);
        m->width = 4;
        check_int_eq(usnic_rdma_msg_check(buf, L, 100), USNIC_PKT_OK);
        m->addr = 0x1002;
        check_int_eq(usnic_rdma_msg_check(buf, L, 100), USNIC_PKT_BAD_RDMA);
        m->addr = 0x1000;
        m->width = 2;
        check_int_eq(usnic_rdma_msg_check(buf, L, 100), USNIC_PKT_BAD_RDMA);
        m->width = 8;
        m->aop = USNIC_AOP_LAST;
        check_int_eq(usnic_rdma_msg_check(buf, L, 100),
                     USNIC_RDMA_CSWAP == kind ? USNIC_PKT_OK : USNIC_PKT_BAD_RDMA);
        m->aop = 0;
        check_int_eq(usnic_rdma_msg_check(buf, L, 100),
                     USNIC_RDMA_CSWAP == kind ? USNIC_PKT_OK : USNIC_PKT_BAD_RDMA);
    }

    memset(buf, 0, sizeof(buf));
    m->kind = USNIC_RDMA_REPLY;
    check_int_eq(usnic_rdma_msg_check(buf, L, 100), USNIC_PKT_OK);
    m->len = 16;
    check_int_eq(usnic_rdma_msg_check(buf, L + 16, 100), USNIC_PKT_OK);
    check_int_eq(usnic_rdma_msg_check(buf, L + 15, 100), USNIC_PKT_BAD_RDMA);
    check_int_eq(usnic_rdma_msg_check(buf, L, 100), USNIC_PKT_BAD_RDMA);
    m->len = 0;
    m->status = 2;
    check_int_eq(usnic_rdma_msg_check(buf, L, 100), USNIC_PKT_BAD_RDMA);
    return 0;
}

USNIC_TEST(rdma_atomic_arith)
{
    usnic_rdma_msg_t m;
    uint64_t v;
    uint32_t v32[2];

    memset(&m, 0, sizeof(m));
    m.kind = USNIC_RDMA_FOP;
    m.width = 8;
    m.aop = USNIC_AOP_ADD;
    m.operand = (uint64_t) -3;
    v = 2;
    check(usnic_rdma_atomic(&v, &m) == 2 && v == (uint64_t) -1);
    m.aop = USNIC_AOP_LXOR;
    m.operand = 5;
    check(usnic_rdma_atomic(&v, &m) == (uint64_t) -1 && v == 0);
    m.operand = 0;
    v = 7;
    check(usnic_rdma_atomic(&v, &m) == 7 && v == 1);
    m.aop = USNIC_AOP_LAND;
    m.operand = 0x100000000ULL; /* true only as 64 bit */
    v = 3;
    check(usnic_rdma_atomic(&v, &m) == 3 && v == 1);
    m.width = 4;
    v32[0] = 3;
    v32[1] = 0xabcd;
    check(usnic_rdma_atomic(&v32[0], &m) == 3 && v32[0] == 0 && v32[1] == 0xabcd);
    m.kind = USNIC_RDMA_CSWAP;
    m.operand = 0;
    m.operand2 = 0x1234567890ULL;
    check(usnic_rdma_atomic(&v32[0], &m) == 0 && v32[0] == 0x34567890U && v32[1] == 0xabcd);
    return 0;
}
