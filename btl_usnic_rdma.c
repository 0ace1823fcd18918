/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 * $COPYRIGHT$
 * SPDX-License-Identifier: BSD-3-Clause
 *
 * Emulated GET and atomics.
 *
 * Initiator: every request gets an entry in the module's table of
 * outstanding operations; its id (table index, and a serial number against
 * stale ids) travels in the request and comes back in the reply, which
 * completes the entry once and is then forgotten.  Target: the request is
 * carried out where it is received, in progress, after the same kind of
 * check as a PUT (inside memory registered for that access), and answered
 * with the data or the old value, or with "refused".  Requests and replies
 * are fragments of the reliable channel, so retransmits and duplicates
 * never run a request twice nor complete one twice.
 *
 * A GET larger than a datagram is answered with its data alone, chunked
 * straight from the target's memory and reassembled straight into the
 * initiator's buffer (usnic_is_get_data).  Where the device can register
 * the span the GET reads (when the GET is served: never a whole region at
 * btl_register_mem, whose pages a device would have to pin, all of them,
 * however little of an osc window is ever read), a chunk is a header from
 * its own buffer and the data read by the device from where it lies (zero
 * copy); else the data is copied into the chunk.  ob1 and osc keep the
 * target memory registered until the GET is complete; if it is
 * deregistered earlier all the same, the part not yet chunked is copied
 * aside first, and so is the data of chunks not yet acknowledged (a resend
 * takes it from there), and the device registration lives on until the
 * frag's last send has completed (opal_btl_usnic_rdma_memory_gone,
 * opal_btl_usnic_rdma_zcopy_release).  Sends posted before it keep reading
 * the pages, which the registration keeps: after ob1's FIN those can only
 * be resends of data the initiator has.
 */

#include "opal_config.h"

#include <stdlib.h>
#include <string.h>

#include "opal/class/opal_free_list.h"
#include "opal/class/opal_pointer_array.h"
#include "opal/util/show_help.h"

#include "btl_usnic.h"
#include "btl_usnic_endpoint.h"
#include "btl_usnic_frag.h"
#include "btl_usnic_module.h"
#include "btl_usnic_proc.h"
#include "btl_usnic_rdma.h"
#include "btl_usnic_recv.h"
#include "btl_usnic_send.h"
#include "btl_usnic_util.h"

/* One outstanding request of this process. */
typedef struct {
    opal_free_list_item_t super;
    uint64_t id;
    opal_btl_usnic_endpoint_t *ep;
    uint8_t kind;
    uint8_t width;
    void *local;
    size_t len;
    mca_btl_base_registration_handle_t *local_handle;
    mca_btl_base_rdma_completion_fn_t cbfunc;
    void *cbcontext;
    void *cbdata;
    int status;                 /* of an operation on this process's own memory */
    bool receiving;             /* a GET whose data fragment is being reassembled */
} opal_btl_usnic_rdma_op_t;

/* Shorter GET data chunks are copied: a copy that short costs less than
 * the device's second buffer. */
#define USNIC_ZCOPY_MIN 1024

/* The id of operations that never enter the table (NULL endpoint). */
#define LOCAL_OP_ID UINT64_MAX
static OBJ_CLASS_INSTANCE(opal_btl_usnic_rdma_op_t, opal_free_list_item_t, NULL, NULL);

/* A peer's request whose reply found no send buffer yet. */
typedef struct {
    opal_list_item_t super;
    opal_btl_usnic_endpoint_t *ep;
    usnic_rdma_msg_t msg;
} opal_btl_usnic_rdma_deferred_t;
static OBJ_CLASS_INSTANCE(opal_btl_usnic_rdma_deferred_t, opal_list_item_t, NULL, NULL);

void opal_btl_usnic_rdma_init(opal_btl_usnic_module_t *module)
{
    OBJ_CONSTRUCT(&module->rdma_op_fl, opal_free_list_t);
    opal_free_list_init(&module->rdma_op_fl, sizeof(opal_btl_usnic_rdma_op_t),
                        opal_cache_line_size, OBJ_CLASS(opal_btl_usnic_rdma_op_t), 0,
                        opal_cache_line_size, 0, -1, 64, NULL, 0, NULL, NULL, NULL);
    OBJ_CONSTRUCT(&module->rdma_ops, opal_pointer_array_t);
    opal_pointer_array_init(&module->rdma_ops, 64, INT32_MAX, 64);
    OBJ_CONSTRUCT(&module->rdma_deferred, opal_list_t);
    OBJ_CONSTRUCT(&module->rdma_local_done, opal_list_t);
    OBJ_CONSTRUCT(&module->get_sources, opal_list_t);
    /* (a chunk sent inline is read from where it lies when it is posted: the
     * UDP device's kernel copy, every send; a longer one asks for a
     * completion, which tells when the device has read the memory) */
    module->zcopy_min = UINT32_MAX;
    if (usnic_component.zero_copy &&
        module->channels[USNIC_DATA_CHANNEL].max_send_sge >= 2) {
        module->zcopy_min = USNIC_ZCOPY_MIN;
    }
    module->rdma_serial = 0;
    module->rdma_refused_shown = false;
    module->bad_handle_shown = false;
    module->rdma_work = false;
    memset(module->excl_locks, 0, sizeof(module->excl_locks));
    module->excl_next = 0;
}

void opal_btl_usnic_rdma_fini(opal_btl_usnic_module_t *module)
{
    OPAL_LIST_DESTRUCT(&module->rdma_deferred);
    /* (items of the op free list: they go with it) */
    while (NULL != opal_list_remove_first(&module->rdma_local_done)) {
    }
    OBJ_DESTRUCT(&module->rdma_local_done);
    /* (links of frags: they go with the frag lists) */
    while (NULL != opal_list_remove_first(&module->get_sources)) {
    }
    OBJ_DESTRUCT(&module->get_sources);
    OBJ_DESTRUCT(&module->rdma_ops);
    OBJ_DESTRUCT(&module->rdma_op_fl);
}

/* A send frag for a message of size bytes with tag USNIC_TAG_RDMA; *buf is
 * where the message goes (in the datagram, or the whole message for a
 * chunked one). */
static opal_btl_usnic_send_frag_t *msg_frag(opal_btl_usnic_module_t *module,
                                            opal_btl_usnic_endpoint_t *ep, size_t size,
                                            uint8_t **buf)
{
    opal_btl_usnic_send_frag_t *frag = opal_btl_usnic_frag_alloc(module, ep, size);

    if (OPAL_UNLIKELY(NULL == frag)) {
        return NULL;
    }
    if (USNIC_FRAG_SMALL == frag->type) {
        *buf = frag->seg.payload;
    } else {
        frag->pack_buf = malloc(size);
        if (NULL == frag->pack_buf) {
            opal_free_list_return(&module->large_send_frags, &frag->base.super);
            return NULL;
        }
        frag->segs[0].seg_addr.pval = frag->pack_buf;
        frag->segs[0].seg_len = size;
        *buf = frag->pack_buf;
    }
    frag->base.des_flags = MCA_BTL_DES_FLAGS_BTL_OWNERSHIP;
    frag->tag = USNIC_TAG_RDMA;
    return frag;
}

static void msg_send(opal_btl_usnic_module_t *module, opal_btl_usnic_endpoint_t *ep,
                     opal_btl_usnic_send_frag_t *frag)
{
    opal_btl_usnic_enqueue_frag(ep, frag);
    opal_btl_usnic_progress_sends(module);
}

/* ------------------------------------------------------------------ */
/* a process waiting for a lock it holds itself                        */

/* osc/rdma's lock word: this bit set is "held exclusively". */
#define OSC_LOCK_EXCLUSIVE (1ULL << 63)
/* Shared-lock attempts by the holder of the exclusive lock before the job
 * is ended: a few backoffs of a healthy program never come from the
 * holder itself, so one would do; more keep it to a pattern that lasts. */
#define SELF_WAITS_FATAL 1000

/* Open MPI 4.1.0-4.1.4's osc/rdma looks up a peer's dynamic-window region
 * (MPI_Win_create_dynamic) holding the peer's region lock exclusively
 * (compare-and-swap 0 -> exclusive bit) and then, to refresh its copy of
 * the regions, asks for the same lock shared (fetch-and-add 1; on seeing
 * the exclusive bit, add -1 and try again): it waits for itself forever,
 * whenever a process of another host is in the window (fixed in 4.1.5).
 * Every atomic on this process's memory passes here (origin: the
 * endpoint, or the module for this process itself): an origin that asks
 * again and again for a lock it holds exclusively ends the job with a
 * message that names the cause, rather than hang. */
static void lock_watch(opal_btl_usnic_module_t *module, const void *origin,
                       const usnic_rdma_msg_t *m, uint64_t old, const char *who)
{
    unsigned i;

    if (8 != m->width) {
        return;
    }
    for (i = 0; i < USNIC_EXCL_LOCKS && module->excl_locks[i].addr != m->addr; ++i) {
    }
    if (USNIC_RDMA_CSWAP == m->kind) {
        if (0 == m->operand && OSC_LOCK_EXCLUSIVE == m->operand2 && 0 == old) {
            /* (a word taken again keeps its slot: one holder per word) */
            if (USNIC_EXCL_LOCKS == i) {
                i = module->excl_next++ % USNIC_EXCL_LOCKS;
            }
            module->excl_locks[i].addr = m->addr;
            module->excl_locks[i].holder = origin;
            module->excl_locks[i].self_waits = 0;
        }
        return;
    }
    if (USNIC_AOP_ADD != m->aop || USNIC_EXCL_LOCKS == i || 0 == m->addr) {
        return;
    }
    if (!((old + m->operand) & OSC_LOCK_EXCLUSIVE)) {
        module->excl_locks[i].addr = 0;         /* released */
    } else if (USNIC_RDMA_FOP == m->kind && (old & OSC_LOCK_EXCLUSIVE) &&
               0 < (int64_t) m->operand && module->excl_locks[i].holder == origin &&
               SELF_WAITS_FATAL == ++module->excl_locks[i].self_waits) {
        opal_btl_usnic_show_fatal("osc waits for itself", opal_process_info.nodename,
                                  module->dev_name, who, (unsigned long long) m->addr,
                                  SELF_WAITS_FATAL);
        snprintf(module->fatal_cause, sizeof(module->fatal_cause),
                 "a one-sided lock waits for its own holder");
        opal_btl_usnic_module_fatal(module, NULL);
    }
}

/* ------------------------------------------------------------------ */
/* initiator                                                           */

static void finish(opal_btl_usnic_module_t *module, opal_btl_usnic_rdma_op_t *op, int status);

void opal_btl_usnic_rdma_bad_handle(opal_btl_usnic_module_t *module,
                                    opal_btl_usnic_endpoint_t *ep, const char *what)
{
    ++module->stats.num_bad_handles;
    if (!module->bad_handle_shown) {
        module->bad_handle_shown = true;
        opal_show_help("help-mpi-btl-usnic.txt", "bad registration handle", true,
                       opal_process_info.nodename, module->dev_name,
                       NULL == ep ? "(this process)" : ep->proc->hostname, what);
    }
}

/* osc/rdma of Open MPI 4.1 addresses this process itself with a NULL
 * endpoint (it counts on GLOB for that and finds no endpoint of ours):
 * carry the operation out here, under the same registration check.  An
 * atomic returns 1 ("done", no callback), so that osc/rdma's lock words on
 * this process cost no progress pass (a poll of the network) each; a
 * fetching one only at 64 bits, because osc/rdma reads 64 bits into its
 * result then.  PUT, GET (1 is no success to osc/rdma there), 32-bit
 * fetches and refusals complete from progress, as any other operation. */
static int local_op(opal_btl_usnic_module_t *module, const usnic_rdma_msg_t *m, void *local,
                    size_t len, mca_btl_base_registration_handle_t *local_handle,
                    mca_btl_base_rdma_completion_fn_t cbfunc, void *cbcontext, void *cbdata)
{
    opal_btl_usnic_rdma_op_t *op = (opal_btl_usnic_rdma_op_t *) opal_free_list_get(
        &module->rdma_op_fl);
    uint32_t access = USNIC_RDMA_GET == m->kind   ? MCA_BTL_REG_FLAG_REMOTE_READ
                      : 0 == m->kind              ? MCA_BTL_REG_FLAG_REMOTE_WRITE
                                                  : MCA_BTL_REG_FLAG_REMOTE_ATOMIC;
    uint64_t n = (USNIC_RDMA_GET == m->kind || 0 == m->kind) ? len : m->width;
    void *target = (void *) (uintptr_t) m->addr;
    bool bad_handle;

    if (OPAL_UNLIKELY(NULL == op)) {
        return OPAL_ERR_OUT_OF_RESOURCE;
    }
    op->id = LOCAL_OP_ID;
    op->ep = NULL;
    op->kind = m->kind;
    op->width = m->width;
    op->local = local;
    op->len = len;
    op->local_handle = local_handle;
    op->cbfunc = cbfunc;
    op->cbcontext = cbcontext;
    op->cbdata = cbdata;
    op->status = OPAL_SUCCESS;
    if (NULL == opal_btl_usnic_reg_find(&m->reg, access, m->addr, n, &bad_handle)) {
        if (bad_handle) {
            opal_btl_usnic_rdma_bad_handle(module, NULL, USNIC_RDMA_GET == m->kind ? "GET"
                                                         : 0 == m->kind ? "PUT"
                                                                        : "atomic operation");
        }
        ++module->stats.num_rdma_refused;
        op->status = OPAL_ERR_BAD_PARAM;
    } else if (0 == m->kind) {
        memcpy(target, local, len);
    } else if (USNIC_RDMA_GET == m->kind) {
        memcpy(local, target, len);
    } else {
        uint64_t old = usnic_rdma_atomic(target, m);
        lock_watch(module, module, m, old, "this process itself");
        if (USNIC_RDMA_AOP == m->kind || NULL == local) {
            /* nothing to return */
        } else if (4 == m->width) {
            uint32_t v = (uint32_t) old;
            memcpy(local, &v, sizeof(v));
        } else {
            memcpy(local, &old, sizeof(old));
        }
        if (USNIC_RDMA_AOP == m->kind || 8 == m->width) {
            ++module->stats.num_rdma_local;
            opal_free_list_return(&module->rdma_op_fl, &op->super);
            return 1;
        }
    }
    ++module->stats.num_rdma_local;
    opal_list_append(&module->rdma_local_done, &op->super.super);
    module->rdma_work = true;
    opal_btl_usnic_work_now(module);
    return OPAL_SUCCESS;
}

static void local_done(opal_btl_usnic_module_t *module)
{
    opal_list_item_t *li;

    while (NULL != (li = opal_list_remove_first(&module->rdma_local_done))) {
        opal_btl_usnic_rdma_op_t *op = (opal_btl_usnic_rdma_op_t *) li;
        finish(module, op, op->status);
    }
}

int opal_btl_usnic_rdma_local_put(opal_btl_usnic_module_t *module, void *local,
                                  uint64_t remote_address, size_t size,
                                  mca_btl_base_registration_handle_t *local_handle,
                                  const usnic_reg_ref_t *ref,
                                  mca_btl_base_rdma_completion_fn_t cbfunc, void *cbcontext,
                                  void *cbdata)
{
    usnic_rdma_msg_t m;

    memset(&m, 0, sizeof(m));
    m.addr = remote_address;
    m.reg = *ref;
    return local_op(module, &m, local, size, local_handle, cbfunc, cbcontext, cbdata);
}

static int start(opal_btl_usnic_module_t *module, opal_btl_usnic_endpoint_t *ep,
                 usnic_rdma_msg_t *m, void *local, size_t len,
                 mca_btl_base_registration_handle_t *local_handle,
                 mca_btl_base_rdma_completion_fn_t cbfunc, void *cbcontext, void *cbdata)
{
    opal_btl_usnic_rdma_op_t *op;
    opal_btl_usnic_send_frag_t *frag;
    uint8_t *buf;
    int idx;

    if (OPAL_UNLIKELY(NULL == ep)) {
        return local_op(module, m, local, len, local_handle, cbfunc, cbcontext, cbdata);
    }
    if (OPAL_UNLIKELY(ep->failed || ep->exiting || module->dead)) {
        return OPAL_ERR_UNREACH;
    }
    op = (opal_btl_usnic_rdma_op_t *) opal_free_list_get(&module->rdma_op_fl);
    if (OPAL_UNLIKELY(NULL == op)) {
        return OPAL_ERR_OUT_OF_RESOURCE;
    }
    frag = msg_frag(module, ep, sizeof(*m), &buf);
    if (OPAL_UNLIKELY(NULL == frag)) {
        opal_free_list_return(&module->rdma_op_fl, &op->super);
        return OPAL_ERR_OUT_OF_RESOURCE;
    }
    idx = opal_pointer_array_add(&module->rdma_ops, op);
    if (OPAL_UNLIKELY(idx < 0)) {
        opal_btl_usnic_fl_return(&module->small_send_frags, &frag->base.super);
        opal_free_list_return(&module->rdma_op_fl, &op->super);
        return OPAL_ERR_OUT_OF_RESOURCE;
    }
    op->id = ((uint64_t) ++module->rdma_serial << 32) | (uint32_t) idx;
    op->ep = ep;
    op->kind = m->kind;
    op->width = m->width;
    op->local = local;
    op->len = len;
    op->local_handle = local_handle;
    op->cbfunc = cbfunc;
    op->cbcontext = cbcontext;
    op->cbdata = cbdata;
    op->receiving = false;
    m->id = op->id;
    memcpy(buf, m, sizeof(*m));
    msg_send(module, ep, frag);
    return OPAL_SUCCESS;
}

/* Forget op and tell its owner. */
static void finish(opal_btl_usnic_module_t *module, opal_btl_usnic_rdma_op_t *op, int status)
{
    opal_btl_usnic_rdma_op_t o = *op;

    if (LOCAL_OP_ID != op->id) {
        opal_pointer_array_set_item(&module->rdma_ops, (int) (uint32_t) op->id, NULL);
    }
    opal_free_list_return(&module->rdma_op_fl, &op->super);
    if (NULL != o.cbfunc) {
        o.cbfunc(&module->super, o.ep, o.local, o.local_handle, o.cbcontext, o.cbdata, status);
    }
}

static void complete(opal_btl_usnic_module_t *module, opal_btl_usnic_endpoint_t *ep,
                     const usnic_rdma_msg_t *m, const uint8_t *data)
{
    opal_btl_usnic_rdma_op_t *op =
        opal_pointer_array_get_item(&module->rdma_ops, (int) (uint32_t) m->id);
    size_t want;

    /* Exactly one reply per request: anything else (an id not outstanding,
     * from another peer, of the wrong size) is dropped and counted. */
    want = (NULL != op && USNIC_RDMA_GET == op->kind && USNIC_RDMA_OK == m->status) ? op->len : 0;
    if (NULL == op || op->id != m->id || op->ep != ep || m->len != want || op->receiving) {
        ++module->stats.num_rdma_stray;
        opal_btl_usnic_count_bad(module, USNIC_PKT_BAD_RDMA);
        return;
    }
    if (OPAL_UNLIKELY(USNIC_RDMA_OK != m->status)) {
        if (!module->rdma_refused_shown) {
            module->rdma_refused_shown = true;
            opal_show_help("help-mpi-btl-usnic.txt", "rdma refused", true,
                           opal_process_info.nodename, module->dev_name, ep->proc->hostname,
                           USNIC_RDMA_GET == op->kind ? "GET" : "atomic operation");
        }
        finish(module, op, OPAL_ERR_BAD_PARAM);
        return;
    }
    if (USNIC_RDMA_GET == op->kind) {
        memcpy(op->local, data, op->len);
    } else if (USNIC_RDMA_AOP != op->kind && NULL != op->local) {
        if (4 == op->width) {
            uint32_t v = (uint32_t) m->operand;
            memcpy(op->local, &v, sizeof(v));
        } else {
            memcpy(op->local, &m->operand, sizeof(m->operand));
        }
    }
    finish(module, op, OPAL_SUCCESS);
}

/* The outstanding GET of ep with this id, if it is one of size bytes. */
static opal_btl_usnic_rdma_op_t *get_op(opal_btl_usnic_module_t *module,
                                        opal_btl_usnic_endpoint_t *ep, uint64_t id, size_t size)
{
    opal_btl_usnic_rdma_op_t *op = opal_pointer_array_get_item(&module->rdma_ops,
                                                               (int) (uint32_t) id);

    if (NULL == op || op->id != id || op->ep != ep || USNIC_RDMA_GET != op->kind ||
        op->len != size) {
        return NULL;
    }
    return op;
}

void *opal_btl_usnic_rdma_get_dest(opal_btl_usnic_module_t *module, opal_btl_usnic_endpoint_t *ep,
                                   uint64_t id, size_t size)
{
    opal_btl_usnic_rdma_op_t *op = get_op(module, ep, id, size);

    /* one data fragment per GET: a second one is stray */
    if (NULL == op || op->receiving) {
        ++module->stats.num_rdma_stray;
        return NULL;
    }
    op->receiving = true;
    return op->local;
}

bool opal_btl_usnic_rdma_get_live(opal_btl_usnic_module_t *module, opal_btl_usnic_endpoint_t *ep,
                                  uint64_t id, size_t size)
{
    opal_btl_usnic_rdma_op_t *op = get_op(module, ep, id, size);

    return NULL != op && op->receiving;
}

void opal_btl_usnic_rdma_get_done(opal_btl_usnic_module_t *module, opal_btl_usnic_endpoint_t *ep,
                                  uint64_t id, size_t size)
{
    opal_btl_usnic_rdma_op_t *op = get_op(module, ep, id, size);

    if (NULL != op && op->receiving) {
        finish(module, op, OPAL_SUCCESS);
    }
}

void opal_btl_usnic_rdma_flush_endpoint(opal_btl_usnic_endpoint_t *ep)
{
    opal_btl_usnic_module_t *module = ep->module;
    opal_btl_usnic_rdma_deferred_t *d, *next;
    int n = opal_pointer_array_get_size(&module->rdma_ops);

    for (int i = 0; i < n; ++i) {
        opal_btl_usnic_rdma_op_t *op = opal_pointer_array_get_item(&module->rdma_ops, i);
        if (NULL != op && op->ep == ep) {
            finish(module, op, OPAL_ERR_UNREACH);
        }
    }
    OPAL_LIST_FOREACH_SAFE (d, next, &module->rdma_deferred, opal_btl_usnic_rdma_deferred_t) {
        if (d->ep == ep) {
            opal_list_remove_item(&module->rdma_deferred, &d->super);
            OBJ_RELEASE(d);
        }
    }
}

/* ------------------------------------------------------------------ */
/* target                                                              */

/* ---- GET data sent from where it lies ---- */

void opal_btl_usnic_rdma_zcopy_release(opal_btl_usnic_module_t *module,
                                       opal_btl_usnic_send_frag_t *frag)
{
    module->ops->dereg_mem(frag->zc_mr);
    frag->zc_mr = NULL;
    frag->zcopy = false;
}

/* The chunks of frag not yet acknowledged take their data into their own
 * buffers: a resend must not read memory that may be reused. */
static void zcopy_take_copies(opal_btl_usnic_send_frag_t *frag)
{
    opal_btl_usnic_endpoint_t *ep = frag->endpoint;

    for (uint16_t s = (uint16_t)(ep->tx.ack_seq_rcvd + 1); s != ep->tx.next_seq_to_send; ++s) {
        opal_btl_usnic_send_seg_t *seg = ep->sent_segs[s & ep->tx_mask];

        if (NULL != seg && seg->frag == frag && 0 != seg->zc.len) {
            memcpy(seg->payload, seg->zc.addr, seg->zc.len);
            seg->zc.len = 0;
        }
    }
    frag->zcopy = false;
}

/* The device registration of the n bytes at addr that a GET of region t
 * reads, for its data to be sent from where it lies; NULL if zero copy is
 * off, the GET too short, or the device refused (counted: copied).  Not
 * through the rcache: the frag may outlive the memory's deregistration and
 * free (a lost ACK after ob1's FIN), which the rcache's memory hooks would
 * take for a buffer freed while in use. */
static opal_btl_usnic_mr_t *zcopy_reg(opal_btl_usnic_module_t *module,
                                      const opal_btl_usnic_put_target_t *t, uint64_t addr,
                                      uint32_t n, uint32_t *lkey)
{
    opal_btl_usnic_mr_t *mr = NULL;

    if (UINT32_MAX == module->zcopy_min || n < module->zcopy_min ||
        !(t->flags & MCA_BTL_REG_FLAG_REMOTE_READ)) {
        return NULL;
    }
    /* (read-only: the data may be const) */
    if (0 != module->ops->reg_mem(module->pd, (void *) (uintptr_t) addr, n, false, &mr, lkey)) {
        ++module->stats.num_zcopy_unregistered;
        return NULL;
    }
    return mr;
}

/* The answer to a GET of more than a datagram from t: its data, read from
 * the target memory as it is chunked (from where it lies if the device
 * registers it); false if no frag is free now. */
static bool serve_get_data(opal_btl_usnic_module_t *module, opal_btl_usnic_endpoint_t *ep,
                           const usnic_rdma_msg_t *m, opal_btl_usnic_put_target_t *t)
{
    opal_btl_usnic_send_frag_t *frag = opal_btl_usnic_frag_alloc(module, ep, m->len);

    if (OPAL_UNLIKELY(NULL == frag)) {
        return false;
    }
    frag->zc_mr = zcopy_reg(module, t, m->addr, m->len, &frag->zc_lkey);
    frag->zcopy = NULL != frag->zc_mr;
    frag->segs[1].seg_addr.pval = (void *) (uintptr_t) m->addr;
    frag->segs[1].seg_len = m->len;
    frag->base.des_segment_count = 2;
    frag->base.des_flags = MCA_BTL_DES_FLAGS_BTL_OWNERSHIP;
    frag->tag = USNIC_TAG_RDMA;
    frag->put_addr = m->id;
    opal_list_append(&module->get_sources, &frag->src_li);
    frag->src_listed = true;
    ++module->stats.num_rdma_served;
    msg_send(module, ep, frag);
    return true;
}

void opal_btl_usnic_rdma_memory_gone(uint64_t base, uint64_t len)
{
    for (int i = 0; i < usnic_component.num_modules; ++i) {
        opal_btl_usnic_module_t *module = &usnic_component.modules[i];
        opal_list_item_t *li, *next;

        for (li = opal_list_get_first(&module->get_sources);
             li != opal_list_get_end(&module->get_sources); li = next) {
            opal_btl_usnic_send_frag_t *frag = usnic_container_of(li, opal_btl_usnic_send_frag_t,
                                                                  src_li);
            uint64_t src = (uint64_t) (uintptr_t) frag->segs[1].seg_addr.pval;
            uint8_t *copy;

            next = opal_list_get_next(li);
            if (src + frag->size <= base || src >= base + len) {
                continue;
            }
            opal_list_remove_item(&module->get_sources, &frag->src_li);
            frag->src_listed = false;
            if (frag->zcopy) {
                zcopy_take_copies(frag);
            }
            if (frag->sent_offset >= frag->size) {
                continue;   /* all chunked: the chunks hold their copies */
            }
            copy = malloc(frag->size);
            if (NULL == copy) {
                opal_btl_usnic_show_fatal("out of memory", opal_process_info.nodename,
                                          module->dev_name, frag->endpoint->proc->hostname,
                                          "a GET reply whose memory is deregistered");
                opal_btl_usnic_module_fatal(module, frag->endpoint->proc->proc_opal);
                return;
            }
            memcpy(copy + frag->sent_offset, (const uint8_t *) (uintptr_t) src + frag->sent_offset,
                   frag->size - frag->sent_offset);
            frag->pack_buf = copy;
            frag->segs[1].seg_addr.pval = copy;
        }
    }
}

/* Carry out a peer's request and queue the reply; false (nothing done)
 * if no send buffer is free now. */
static bool serve(opal_btl_usnic_module_t *module, opal_btl_usnic_endpoint_t *ep,
                  const usnic_rdma_msg_t *m)
{
    bool get = USNIC_RDMA_GET == m->kind, bad_handle;
    opal_btl_usnic_put_target_t *t =
        opal_btl_usnic_reg_find(&m->reg,
                                get ? MCA_BTL_REG_FLAG_REMOTE_READ : MCA_BTL_REG_FLAG_REMOTE_ATOMIC,
                                m->addr, get ? m->len : m->width, &bad_handle);
    bool ok = NULL != t;
    size_t n = (ok && get) ? m->len : 0;
    opal_btl_usnic_send_frag_t *frag;
    usnic_rdma_msg_t r;
    uint8_t *buf;

    if (n > module->max_frag_payload && 0 != m->id) {
        return serve_get_data(module, ep, m, t);
    }
    frag = msg_frag(module, ep, sizeof(r) + n, &buf);
    if (OPAL_UNLIKELY(NULL == frag)) {
        return false;
    }
    memset(&r, 0, sizeof(r));
    r.kind = USNIC_RDMA_REPLY;
    r.id = m->id;
    r.len = (uint32_t) n;
    r.status = ok ? USNIC_RDMA_OK : USNIC_RDMA_REFUSED;
    if (!ok) {
        if (bad_handle) {
            opal_btl_usnic_rdma_bad_handle(module, ep, get ? "GET" : "atomic operation");
        }
        ++module->stats.num_rdma_refused;
        opal_btl_usnic_count_bad(module, USNIC_PKT_BAD_RDMA_TARGET);
    } else if (get) {
        memcpy(buf + sizeof(r), (const void *) (uintptr_t) m->addr, n);
    } else {
        r.operand = usnic_rdma_atomic((void *) (uintptr_t) m->addr, m);
        lock_watch(module, ep, m, r.operand, ep->proc->hostname);
    }
    memcpy(buf, &r, sizeof(r));
    ++module->stats.num_rdma_served;
    msg_send(module, ep, frag);
    return true;
}

void opal_btl_usnic_rdma_recv(opal_btl_usnic_module_t *module, opal_btl_usnic_endpoint_t *ep,
                              const void *data, size_t len)
{
    usnic_pkt_result_t res = usnic_rdma_msg_check(data, len, USNIC_RDMA_MAX_GET);
    opal_btl_usnic_rdma_deferred_t *d;
    usnic_rdma_msg_t m;

    if (OPAL_UNLIKELY(USNIC_PKT_OK != res)) {
        opal_btl_usnic_count_bad(module, res);
        return;
    }
    memcpy(&m, data, sizeof(m));
    if (USNIC_RDMA_REPLY == m.kind) {
        complete(module, ep, &m, (const uint8_t *) data + sizeof(m));
        return;
    }
    /* The request is received (the sender will not repeat it): keep it
     * until a reply can be sent. */
    if (opal_list_is_empty(&module->rdma_deferred) && serve(module, ep, &m)) {
        return;
    }
    d = OBJ_NEW(opal_btl_usnic_rdma_deferred_t);
    if (NULL == d) {
        opal_btl_usnic_show_fatal("out of memory",
                       opal_process_info.nodename, module->dev_name, ep->proc->hostname,
                       "a GET/atomic request waiting for its reply");
        opal_btl_usnic_module_fatal(module, ep->proc->proc_opal);
        return;
    }
    d->ep = ep;
    d->msg = m;
    opal_list_append(&module->rdma_deferred, &d->super);
    module->rdma_work = true;
    opal_btl_usnic_work_now(module);
}

static void retry(opal_btl_usnic_module_t *module)
{
    opal_btl_usnic_rdma_deferred_t *d;

    /* In arrival order, so that replies to one peer keep their order. */
    while (NULL != (d = (opal_btl_usnic_rdma_deferred_t *) opal_list_get_first(
                        &module->rdma_deferred)) &&
           &d->super != opal_list_get_end(&module->rdma_deferred)) {
        if (!serve(module, d->ep, &d->msg)) {
            return;
        }
        opal_list_remove_item(&module->rdma_deferred, &d->super);
        OBJ_RELEASE(d);
    }
}

void opal_btl_usnic_rdma_progress(opal_btl_usnic_module_t *module)
{
    retry(module);
    local_done(module);
    module->rdma_work = !opal_list_is_empty(&module->rdma_deferred) ||
                        !opal_list_is_empty(&module->rdma_local_done);
}

/* ------------------------------------------------------------------ */
/* BTL entry points                                                    */

static int atomic_op_of(mca_btl_base_atomic_op_t op)
{
    switch (op) {
    case MCA_BTL_ATOMIC_ADD: return USNIC_AOP_ADD;
    case MCA_BTL_ATOMIC_AND: return USNIC_AOP_AND;
    case MCA_BTL_ATOMIC_OR: return USNIC_AOP_OR;
    case MCA_BTL_ATOMIC_XOR: return USNIC_AOP_XOR;
    case MCA_BTL_ATOMIC_LAND: return USNIC_AOP_LAND;
    case MCA_BTL_ATOMIC_LOR: return USNIC_AOP_LOR;
    case MCA_BTL_ATOMIC_LXOR: return USNIC_AOP_LXOR;
    case MCA_BTL_ATOMIC_SWAP: return USNIC_AOP_SWAP;
    default: return -1;
    }
}

static int atomic_request(usnic_rdma_msg_t *m, uint8_t kind, uint64_t remote_address, int flags)
{
    if (flags & MCA_BTL_ATOMIC_FLAG_FLOAT) {
        return OPAL_ERR_NOT_SUPPORTED;
    }
    memset(m, 0, sizeof(*m));
    m->kind = kind;
    m->width = (flags & MCA_BTL_ATOMIC_FLAG_32BIT) ? 4 : 8;
    m->addr = remote_address;
    if (0 == remote_address || 0 != (remote_address & (m->width - 1))) {
        return OPAL_ERR_BAD_PARAM;
    }
    return OPAL_SUCCESS;
}

int opal_btl_usnic_get(mca_btl_base_module_t *btl, opal_btl_usnic_endpoint_t *endpoint,
                       void *local_address, uint64_t remote_address,
                       mca_btl_base_registration_handle_t *local_handle,
                       mca_btl_base_registration_handle_t *remote_handle, size_t size, int flags,
                       int order, mca_btl_base_rdma_completion_fn_t cbfunc, void *cbcontext,
                       void *cbdata)
{
    opal_btl_usnic_module_t *module = (opal_btl_usnic_module_t *) btl;
    usnic_rdma_msg_t m;
    int rc;
    (void) flags;
    (void) order;

    if (OPAL_UNLIKELY(0 == size || size > USNIC_RDMA_MAX_GET || 0 == remote_address)) {
        return OPAL_ERR_BAD_PARAM;
    }
    memset(&m, 0, sizeof(m));
    m.kind = USNIC_RDMA_GET;
    m.len = (uint32_t) size;
    m.addr = remote_address;
    opal_btl_usnic_reg_ref(&m.reg, remote_handle);
    rc = start(module, endpoint, &m, local_address, size, local_handle, cbfunc, cbcontext,
               cbdata);
    if (OPAL_SUCCESS == rc) {
        ++module->stats.num_gets;
    }
    return rc;
}

/* A fetching or non-fetching atomic: the request carries op and operand;
 * a fetching one names where the old value goes. */
static int atomic_start(opal_btl_usnic_module_t *module, opal_btl_usnic_endpoint_t *endpoint,
                        uint8_t kind, void *local_address,
                        mca_btl_base_registration_handle_t *local_handle,
                        uint64_t remote_address,
                        mca_btl_base_registration_handle_t *remote_handle,
                        mca_btl_base_atomic_op_t op, uint64_t operand,
                        int flags, mca_btl_base_rdma_completion_fn_t cbfunc, void *cbcontext,
                        void *cbdata)
{
    int aop = atomic_op_of(op), rc;
    usnic_rdma_msg_t m;

    if (aop < 0) {
        return OPAL_ERR_NOT_SUPPORTED;
    }
    rc = atomic_request(&m, kind, remote_address, flags);
    if (OPAL_SUCCESS != rc) {
        return rc;
    }
    m.aop = (uint8_t) aop;
    m.operand = operand;
    opal_btl_usnic_reg_ref(&m.reg, remote_handle);
    rc = start(module, endpoint, &m, local_address, NULL == local_address ? 0 : m.width,
               local_handle, cbfunc, cbcontext, cbdata);
    if (rc >= OPAL_SUCCESS) {      /* 1: done at once */
        ++module->stats.num_atomics;
    }
    return rc;
}

int opal_btl_usnic_atomic_op(mca_btl_base_module_t *btl, opal_btl_usnic_endpoint_t *endpoint,
                             uint64_t remote_address,
                             mca_btl_base_registration_handle_t *remote_handle,
                             mca_btl_base_atomic_op_t op, uint64_t operand, int flags, int order,
                             mca_btl_base_rdma_completion_fn_t cbfunc, void *cbcontext,
                             void *cbdata)
{
    (void) order;
    return atomic_start((opal_btl_usnic_module_t *) btl, endpoint, USNIC_RDMA_AOP, NULL, NULL,
                        remote_address, remote_handle, op, operand, flags, cbfunc, cbcontext,
                        cbdata);
}

int opal_btl_usnic_atomic_fop(mca_btl_base_module_t *btl, opal_btl_usnic_endpoint_t *endpoint,
                              void *local_address, uint64_t remote_address,
                              mca_btl_base_registration_handle_t *local_handle,
                              mca_btl_base_registration_handle_t *remote_handle,
                              mca_btl_base_atomic_op_t op, uint64_t operand, int flags, int order,
                              mca_btl_base_rdma_completion_fn_t cbfunc, void *cbcontext,
                              void *cbdata)
{
    (void) order;
    return atomic_start((opal_btl_usnic_module_t *) btl, endpoint, USNIC_RDMA_FOP,
                        local_address, local_handle, remote_address, remote_handle, op, operand,
                        flags, cbfunc, cbcontext, cbdata);
}

int opal_btl_usnic_atomic_cswap(mca_btl_base_module_t *btl, opal_btl_usnic_endpoint_t *endpoint,
                                void *local_address, uint64_t remote_address,
                                mca_btl_base_registration_handle_t *local_handle,
                                mca_btl_base_registration_handle_t *remote_handle,
                                uint64_t compare, uint64_t value, int flags, int order,
                                mca_btl_base_rdma_completion_fn_t cbfunc, void *cbcontext,
                                void *cbdata)
{
    opal_btl_usnic_module_t *module = (opal_btl_usnic_module_t *) btl;
    usnic_rdma_msg_t m;
    int rc;
    (void) order;

    rc = atomic_request(&m, USNIC_RDMA_CSWAP, remote_address, flags);
    if (OPAL_SUCCESS != rc) {
        return rc;
    }
    m.operand = compare;
    m.operand2 = value;
    opal_btl_usnic_reg_ref(&m.reg, remote_handle);
    rc = start(module, endpoint, &m, local_address, m.width, local_handle, cbfunc, cbcontext,
               cbdata);
    if (rc >= OPAL_SUCCESS) {      /* 1: done at once */
        ++module->stats.num_atomics;
    }
    return rc;
}
