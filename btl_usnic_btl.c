/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 * $COPYRIGHT$
 * SPDX-License-Identifier: BSD-3-Clause
 *
 * The BTL operations the PML calls: add/del procs, alloc, free,
 * prepare_src, send, sendi, put, memory registration, dump, finalize, and
 * the module template that names them.
 */

#include "opal_config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "opal/class/opal_bitmap.h"
#include "opal/datatype/opal_convertor.h"
#include "opal/util/proc.h"
#include "opal/util/show_help.h"

#include "btl_usnic.h"
#include "btl_usnic_endpoint.h"
#include "btl_usnic_frag.h"
#include "btl_usnic_map.h"
#include "btl_usnic_module.h"
#include "btl_usnic_proc.h"
#include "btl_usnic_rdma.h"
#include "btl_usnic_send.h"
#include "btl_usnic_stats.h"
#include "btl_usnic_util.h"

static inline int module_index(const opal_btl_usnic_module_t *m)
{
    return (int)(m - usnic_component.modules);
}

/* ------------------------------------------------------------------ */
/* add_procs / del_procs                                               */

/* Create address handles for new endpoints, all at once so that address
 * resolutions overlap.  Endpoints that cannot get one are released. */
static int create_ahs(opal_btl_usnic_module_t *module, opal_btl_usnic_endpoint_t **eps, int n)
{
    double last_progress = opal_btl_usnic_now_us() / 1e6;
    int pending = 0;

    for (int i = 0; i < n; ++i) {
        pending += (NULL != eps[i]);
    }
    while (pending > 0) {
        for (int i = 0; i < n; ++i) {
            opal_btl_usnic_endpoint_t *ep = eps[i];
            opal_btl_usnic_ah_t *ah;
            int err;
            char ip[32];

            if (NULL == ep || NULL != ep->dest[0].ah) {
                continue;
            }
            err = module->ops->ah_create(module->pd, module->port_num, module->gid_index,
                                         ep->remote.gid, &ah);
            if (0 == err) {
                opal_btl_usnic_endpoint_set_ah(ep, ah);
                --pending;
                last_progress = opal_btl_usnic_now_us() / 1e6;
                continue;
            }
            if (EAGAIN == err) {
                continue;
            }
            opal_btl_usnic_snprintf_ipv4(ip, sizeof(ip), ep->remote.ipv4_addr, ep->remote.prefix);
            if (EADDRNOTAVAIL == err || EHOSTUNREACH == err || ENETUNREACH == err ||
                ENODATA == err) {
                if (usnic_component.show_route_failures) {
                    opal_show_help("help-mpi-btl-usnic.txt", "create_ah failed", true,
                                   opal_process_info.nodename, module->dev_name, module->if_name,
                                   ep->proc->hostname, ip,
                                   strerror(err));
                }
                OBJ_RELEASE(ep);
                eps[i] = NULL;
                --pending;
                continue;
            }
            /* Anything else is a broken device: stop at once. */
            opal_show_help("help-mpi-btl-usnic.txt", "ibv API failed", true,
                           opal_process_info.nodename, module->dev_name, "ibv_create_ah",
                           strerror(err));
            return OPAL_ERROR;
        }
        if (pending > 0) {
            if (opal_btl_usnic_now_us() / 1e6 - last_progress > usnic_component.arp_timeout) {
                opal_show_help("help-mpi-btl-usnic.txt", "ibv_create_ah timeout", true,
                               opal_process_info.nodename, module->dev_name, module->if_name,
                               pending, usnic_component.arp_timeout);
                for (int i = 0; i < n; ++i) {
                    if (NULL != eps[i] && NULL == eps[i]->dest[0].ah) {
                        OBJ_RELEASE(eps[i]);
                        eps[i] = NULL;
                    }
                }
                break;
            }
            usleep(1000);
        }
    }
    return OPAL_SUCCESS;
}

/* A new endpoint of this module toward proc, or NULL: proc is this
 * process, not reachable through this module, already has one (*existing),
 * or something failed (*rc). */
static opal_btl_usnic_endpoint_t *new_endpoint(opal_btl_usnic_module_t *module, int mi,
                                               opal_proc_t *proc,
                                               opal_btl_usnic_endpoint_t **existing, int *rc)
{
    opal_btl_usnic_proc_t *up;
    opal_btl_usnic_endpoint_t *ep;
    int idx;

    /* Same-node peers are reached too (through the device's loopback):
     * osc/rdma wants one BTL with RDMA and atomics toward every peer of a
     * window.  A shared-memory BTL, more exclusive, still carries their
     * sends.  Not this process itself: btl_atomic_flags has GLOB. */
    if (proc == opal_proc_local_get()) {
        return NULL;
    }
    *rc = opal_btl_usnic_proc_get(proc, &up);
    if (OPAL_ERR_UNREACH == *rc) {
        *rc = OPAL_SUCCESS;
        return NULL;
    }
    if (OPAL_SUCCESS != *rc || NULL != (*existing = up->endpoints[mi])) {
        return NULL;
    }
    idx = opal_btl_usnic_proc_match(up, mi);
    if (idx < 0) {
        usnic_verbose(5, "%s: %s: no device of %s pairs with this one",
                      opal_process_info.nodename, module->dev_name,
                      up->hostname);
        return NULL;
    }
    if (up->modex[idx].mtu != module->local_addr.mtu) {
        opal_show_help("help-mpi-btl-usnic.txt", "MTU mismatch", true,
                       opal_process_info.nodename, module->dev_name, module->if_name,
                       (int) module->local_addr.mtu, up->hostname,
                       (int) up->modex[idx].mtu);
        return NULL;
    }
    ep = OBJ_NEW(opal_btl_usnic_endpoint_t);
    if (NULL == ep) {
        *rc = OPAL_ERR_OUT_OF_RESOURCE;
        return NULL;
    }
    ep->proc = up;
    ep->remote_index = idx;
    *rc = opal_btl_usnic_endpoint_setup(ep, module, &up->modex[idx]);
    if (OPAL_SUCCESS != *rc) {
        OBJ_RELEASE(ep);
        return NULL;
    }
    return ep;
}

/* A new endpoint with its address handle becomes the module's. */
static void adopt_endpoint(opal_btl_usnic_module_t *module, int mi, opal_btl_usnic_endpoint_t *ep)
{
    ep->proc->endpoints[mi] = ep;
    opal_hash_table_set_value_uint64(&module->senders, ep->proc->hashed_name, ep);
    opal_list_append(&module->all_endpoints, &ep->all_li);
    usnic_verbose(5, "%s: %s: endpoint to %s (%s record %d, data QP %u)",
                  opal_process_info.nodename, module->dev_name,
                  ep->proc->hostname,
                  ep->proc->hostname, ep->remote_index,
                  ep->remote.qp_num[USNIC_DATA_CHANNEL]);
}

static int usnic_add_procs(mca_btl_base_module_t *btl, size_t nprocs, opal_proc_t **procs,
                           mca_btl_base_endpoint_t **endpoints, opal_bitmap_t *reachable)
{
    opal_btl_usnic_module_t *module = (opal_btl_usnic_module_t *) btl;
    int mi = module_index(module);
    opal_btl_usnic_endpoint_t **fresh = calloc(nprocs ? nprocs : 1, sizeof(*fresh));
    double t0 = opal_btl_usnic_now_us();
    opal_list_item_t *li;
    int rc = OPAL_SUCCESS;

    if (NULL == fresh) {
        return OPAL_ERR_OUT_OF_RESOURCE;
    }
    for (size_t i = 0; i < nprocs && OPAL_SUCCESS == rc; ++i) {
        opal_btl_usnic_endpoint_t *existing = NULL;

        fresh[i] = new_endpoint(module, mi, procs[i], &existing, &rc);
        if (NULL != existing) {
            endpoints[i] = existing;
            if (NULL != reachable) {
                opal_bitmap_set_bit(reachable, (int) i);
            }
        }
    }
    if (OPAL_SUCCESS == rc) {
        rc = create_ahs(module, fresh, (int) nprocs);
    }
    for (size_t i = 0; i < nprocs; ++i) {
        if (NULL == fresh[i]) {
            continue;
        }
        if (OPAL_SUCCESS != rc) {
            OBJ_RELEASE(fresh[i]);
            continue;
        }
        adopt_endpoint(module, mi, fresh[i]);
        endpoints[i] = fresh[i];
        if (NULL != reachable) {
            opal_bitmap_set_bit(reachable, (int) i);
        }
    }
    free(fresh);
    for (li = opal_list_get_first(&module->all_endpoints);
         li != opal_list_get_end(&module->all_endpoints); li = opal_list_get_next(li)) {
        opal_btl_usnic_endpoint_size_window(
            usnic_container_of(li, opal_btl_usnic_endpoint_t, all_li),
            opal_list_get_size(&module->all_endpoints));
    }
    /* Rewritten after every call: the last one leaves the complete map. */
    if (OPAL_SUCCESS == rc) {
        opal_btl_usnic_write_connectivity_map();
    }
    module->stats.add_procs_usec += (uint64_t)(opal_btl_usnic_now_us() - t0);
    return rc;
}

void opal_btl_usnic_module_release_endpoint(opal_btl_usnic_module_t *module,
                                            opal_btl_usnic_endpoint_t *ep)
{
    opal_btl_usnic_proc_t *up = ep->proc;
    int mi = module_index(module);
    bool proc_unused = true;

    opal_btl_usnic_endpoint_flush(ep);
    opal_hash_table_remove_value_uint64(&module->senders, up->hashed_name);
    module->last_sender = NULL;
    opal_list_remove_item(&module->all_endpoints, &ep->all_li);
    up->endpoints[mi] = NULL;
    /* Segments the device still owns point at the endpoint: it lives on
     * until their completions are in (or the queue pairs are gone). */
    if (ep->send_credits < module->channels[USNIC_DATA_CHANNEL].sd_num) {
        opal_list_append(&module->zombie_endpoints, &ep->all_li);
        ep->zombie = true;
    } else {
        OBJ_RELEASE(ep);
    }
    for (int i = 0; i < usnic_component.num_modules; ++i) {
        proc_unused &= (NULL == up->endpoints[i]);
    }
    if (proc_unused) {
        opal_list_remove_item(&usnic_component.procs, &up->super);
        OBJ_RELEASE(up);
    }
}

/* Whether any module still has an endpoint (procs left without one, after
 * an MTU mismatch or with no pairing, do not count). */
static bool endpoints_left(void)
{
    opal_btl_usnic_proc_t *up;

    OPAL_LIST_FOREACH (up, &usnic_component.procs, opal_btl_usnic_proc_t) {
        for (int i = 0; i < usnic_component.num_modules; ++i) {
            if (NULL != up->endpoints[i]) {
                return true;
            }
        }
    }
    return false;
}

static int usnic_del_procs(mca_btl_base_module_t *btl, size_t nprocs, opal_proc_t **procs,
                           mca_btl_base_endpoint_t **peers)
{
    opal_btl_usnic_module_t *module = (opal_btl_usnic_module_t *) btl;
    (void) procs;

    for (size_t i = 0; i < nprocs; ++i) {
        opal_btl_usnic_endpoint_t *ep = peers[i];
        if (NULL != ep && ep->module == module) {
            opal_btl_usnic_module_release_endpoint(module, ep);
        }
    }
    /* Deleting every peer is part of MPI_Finalize (ob1 deletes procs only
     * there): stop timers and the checker thread while the job is still
     * whole, and print the final statistics. */
    if (!endpoints_left()) {
        opal_btl_usnic_component_quiesce();
    }
    return OPAL_SUCCESS;
}

/* ------------------------------------------------------------------ */
/* descriptors                                                         */

static mca_btl_base_descriptor_t *usnic_alloc(mca_btl_base_module_t *btl,
                                              mca_btl_base_endpoint_t *endpoint, uint8_t order,
                                              size_t size, uint32_t flags)
{
    opal_btl_usnic_module_t *module = (opal_btl_usnic_module_t *) btl;
    opal_btl_usnic_send_frag_t *frag;

    /* ob1 allocates whole eager messages here (buffered sends, the copy path) */
    if (OPAL_UNLIKELY(size > btl->btl_eager_limit && size > module->max_frag_payload)) {
        return NULL;
    }
    frag = opal_btl_usnic_frag_alloc(module, endpoint, size);
    if (OPAL_UNLIKELY(NULL == frag)) {
        return NULL;
    }
    if (USNIC_FRAG_LARGE == frag->type) {
        /* The PML writes the whole message into segment 0; chunks copy from
         * it as they go out, and it is freed with the frag. */
        frag->pack_buf = malloc(size);
        if (OPAL_UNLIKELY(NULL == frag->pack_buf)) {
            opal_free_list_return(&module->large_send_frags, &frag->base.super);
            return NULL;
        }
        frag->segs[0].seg_addr.pval = frag->pack_buf;
        frag->segs[0].seg_len = size;
    }
    frag->base.des_flags = flags;
    frag->base.order = order;
    return &frag->base;
}

static int usnic_free(mca_btl_base_module_t *btl, mca_btl_base_descriptor_t *des)
{
    opal_btl_usnic_send_frag_t *frag = (opal_btl_usnic_send_frag_t *) des;

    /* The wire may still need it: it goes back once everything is ACKed. */
    frag->base.des_flags |= MCA_BTL_DES_FLAGS_BTL_OWNERSHIP;
    opal_btl_usnic_frag_return_if_done((opal_btl_usnic_module_t *) btl, frag);
    return OPAL_SUCCESS;
}

/* Move the PML's convertor past the n bytes a frag will pack later and
 * return how many that really are: a send convertor stops only on element
 * boundaries, so the frag must end where the convertor does, or the PML
 * (which continues from the convertor's position) never sends the rest of
 * a split element. */
static size_t skip_data(opal_convertor_t *conv, size_t n)
{
    size_t start = conv->bConverted, pos = start + n;

    opal_convertor_set_position(conv, &pos);
    return pos - start;
}

static mca_btl_base_descriptor_t *usnic_prepare_src(mca_btl_base_module_t *btl,
                                                    mca_btl_base_endpoint_t *endpoint,
                                                    opal_convertor_t *conv, uint8_t order,
                                                    size_t reserve, size_t *size,
                                                    uint32_t flags)
{
    opal_btl_usnic_module_t *module = (opal_btl_usnic_module_t *) btl;
    opal_btl_usnic_send_frag_t *frag;
    size_t total = reserve + *size;
    (void) order;

    frag = opal_btl_usnic_frag_alloc(module, endpoint, total);
    if (OPAL_UNLIKELY(NULL == frag)) {
        return NULL;
    }
    frag->base.des_flags = flags;

    if (USNIC_FRAG_SMALL == frag->type) {
        /* Pack straight into the registered datagram after the PML header. */
        if (*size > 0) {
            struct iovec iov = {.iov_base = frag->seg.payload + reserve, .iov_len = *size};
            uint32_t iov_count = 1;
            size_t max_data = *size;
            opal_convertor_pack(conv, &iov, &iov_count, &max_data);
            *size = max_data;
        }
        frag->segs[0].seg_len = reserve + *size;
        frag->size = reserve + *size;
        return &frag->base;
    }

    if (OPAL_UNLIKELY(reserve > USNIC_LARGE_HDR_ROOM)) {
        opal_free_list_return(&module->large_send_frags, &frag->base.super);
        return NULL;
    }
    frag->segs[0].seg_addr.pval = frag->hdr_room;
    frag->segs[0].seg_len = reserve;
    frag->base.des_segment_count = 2;
    if (!opal_convertor_need_buffers(conv)) {
        /* Contiguous: reference user memory; chunks copy from it. */
        void *ptr = NULL;
        opal_convertor_get_current_pointer(conv, &ptr);
        frag->segs[1].seg_addr.pval = ptr;
        *size = skip_data(conv, *size);
        frag->segs[1].seg_len = *size;
    } else if (usnic_component.pack_lazy_threshold >= 0 &&
               *size >= (size_t) usnic_component.pack_lazy_threshold) {
        /* Pack chunk by chunk from a clone positioned here. */
        size_t pos = conv->bConverted;
        opal_convertor_clone(conv, &frag->conv, 1);
        opal_convertor_set_position(&frag->conv, &pos);
        frag->lazy = true;
        frag->segs[1].seg_addr.pval = NULL;
        *size = skip_data(conv, *size);
        frag->segs[1].seg_len = *size;
    } else {
        struct iovec iov;
        uint32_t iov_count = 1;
        size_t max_data = *size;

        frag->pack_buf = malloc(*size);
        if (NULL == frag->pack_buf) {
            opal_free_list_return(&module->large_send_frags, &frag->base.super);
            return NULL;
        }
        iov.iov_base = frag->pack_buf;
        iov.iov_len = *size;
        opal_convertor_pack(conv, &iov, &iov_count, &max_data);
        *size = max_data;
        frag->segs[1].seg_addr.pval = frag->pack_buf;
        frag->segs[1].seg_len = *size;
    }
    frag->size = reserve + *size;
    return &frag->base;
}

/* Fix the frag's size from its segments (the PML may have written seg 0). */
static void frag_finalize_size(opal_btl_usnic_send_frag_t *frag)
{
    frag->size = frag->segs[0].seg_len +
                 (frag->base.des_segment_count > 1 ? frag->segs[1].seg_len : 0);
}

static int usnic_send(mca_btl_base_module_t *btl, mca_btl_base_endpoint_t *endpoint,
                      mca_btl_base_descriptor_t *des, mca_btl_base_tag_t tag)
{
    opal_btl_usnic_module_t *module = (opal_btl_usnic_module_t *) btl;
    opal_btl_usnic_send_frag_t *frag = (opal_btl_usnic_send_frag_t *) des;

    if (OPAL_UNLIKELY(endpoint->failed || module->dead)) {
        return OPAL_ERR_UNREACH;
    }
    frag->tag = tag;
    frag->put_addr = 0;
    /* Its owner may send a descriptor again after its callback. */
    frag->local_done = false;
    if (USNIC_FRAG_LARGE == frag->type) {
        frag->frag_id = 0;
        frag->sent_offset = 0;
    }
    frag_finalize_size(frag);
    /* A chunked frag needs at least one byte (the PML shrank seg_len to 0). */
    if (OPAL_UNLIKELY(USNIC_FRAG_LARGE == frag->type && 0 == frag->size)) {
        return OPAL_ERR_BAD_PARAM;
    }
    ++module->stats.pml_module_sends;

    if (USNIC_FRAG_SMALL == frag->type && frag->size <= module->max_tiny_payload &&
        opal_btl_usnic_send_fast(module, endpoint, frag)) {
        /* A descriptor the PML owns is not free while the datagram may have
         * to go again: no inline completion for it. */
        if (frag->base.des_flags & MCA_BTL_DES_SEND_ALWAYS_CALLBACK ||
            !(frag->base.des_flags & MCA_BTL_DES_FLAGS_BTL_OWNERSHIP)) {
            /* The callback runs from progress, not inside the PML's send;
             * "queued" keeps an early ACK from returning the frag. */
            frag->queued = true;
            opal_list_append(&module->fastpath_done, &frag->queue_li);
            opal_btl_usnic_work_now(module);
            return OPAL_SUCCESS;
        }
        frag->local_done = true;
        opal_btl_usnic_frag_return_if_done(module, frag);
        return 1;
    }
    opal_btl_usnic_enqueue_frag(endpoint, frag);
    opal_btl_usnic_progress_sends(module);
    return OPAL_SUCCESS;
}

/* A PML header or a tiny payload: 8 to 32 bytes are moved in 8-byte words
 * (the first and last of them overlapping), without a call into libc. */
static inline __opal_attribute_always_inline__ void copy_short(uint8_t *dst, const void *src,
                                                               size_t n)
{
    const uint8_t *s = src;
    uint64_t w[4];

    if (n < 8 || n > 32) {
        memcpy(dst, src, n);
        return;
    }
    memcpy(&w[0], s, 8);
    memcpy(&w[1], s + n - 8, 8);
    if (n > 16) {
        memcpy(&w[2], s + 8, 8);
        memcpy(&w[3], s + n - 16, 8);
        memcpy(dst + 8, &w[2], 8);
        memcpy(dst + n - 16, &w[3], 8);
    }
    memcpy(dst, &w[0], 8);
    memcpy(dst + n - 8, &w[1], 8);
}

/* Pack n bytes of the message into dst; returns how many it packed. */
static __opal_attribute_noinline__ size_t pack_payload(opal_convertor_t *conv, uint8_t *dst,
                                                       size_t n)
{
    struct iovec iov = {.iov_base = dst, .iov_len = n};
    uint32_t iov_count = 1;

    opal_convertor_pack(conv, &iov, &iov_count, &n);
    return n;
}

/* Copy n bytes of the message at the convertor's position to dst: contiguous
 * data with one copy, moving the convertor on as packing it would
 * (inlined: every sendi). */
static inline __opal_attribute_always_inline__ size_t
copy_payload(opal_convertor_t *conv, uint8_t *dst, size_t n)
{
    size_t pos = conv->bConverted, end = conv->local_size;
    void *src;

    if (opal_convertor_need_buffers(conv) || pos + n > end) {
        return pack_payload(conv, dst, n);
    }
    /* (position and size kept: the copy might alias them for the compiler) */
    opal_convertor_get_current_pointer(conv, &src);
    copy_short(dst, src, n);
    pos += n;
    conv->bConverted = pos;
    if (pos == end) {
        conv->flags |= CONVERTOR_COMPLETED;
    }
    return n;
}

/* sendi's message at dst: the PML's header, then payload_size bytes from
 * the convertor; returns the bytes placed (inlined: every sendi). */
static inline __opal_attribute_always_inline__ size_t
fill_sendi(uint8_t *dst, const void *header, size_t header_size, opal_convertor_t *conv,
           size_t payload_size)
{
    copy_short(dst, header, header_size);
    if (payload_size > 0) {
        payload_size = copy_payload(conv, dst + header_size, payload_size);
    }
    return header_size + payload_size;
}

/* sendi of a message too large for the fast path: the PML sends what we
 * hand back (as btl_alloc would give it, header and data in place), so
 * without a way to hand it back leave the message to the normal path (out
 * of line, as the next: the fast path saves fewer registers). */
static __opal_attribute_noinline__ int
sendi_hand_back(mca_btl_base_module_t *btl, mca_btl_base_endpoint_t *endpoint,
                opal_convertor_t *conv, void *header, size_t header_size, size_t payload_size,
                uint8_t order, uint32_t flags, mca_btl_base_descriptor_t **descriptor)
{
    mca_btl_base_descriptor_t *des;

    if (NULL == descriptor) {
        return OPAL_ERR_RESOURCE_BUSY;
    }
    des = usnic_alloc(btl, endpoint, order, header_size + payload_size, flags);
    if (OPAL_UNLIKELY(NULL == des)) {
        return OPAL_ERR_OUT_OF_RESOURCE;
    }
    des->des_segments[0].seg_len = fill_sendi(des->des_segments[0].seg_addr.pval, header,
                                              header_size, conv, payload_size);
    *descriptor = des;
    return OPAL_ERR_RESOURCE_BUSY;
}

/* sendi behind queued sends, or with the fast path full: a small frag,
 * queued (taken without a call, as frag_alloc makes it). */
static __opal_attribute_noinline__ int
sendi_queued(opal_btl_usnic_module_t *module, mca_btl_base_endpoint_t *endpoint,
             opal_convertor_t *conv, void *header, size_t header_size, size_t payload_size,
             uint32_t flags, mca_btl_base_tag_t tag)
{
    opal_btl_usnic_send_frag_t *frag;
    size_t total;

    frag = (opal_btl_usnic_send_frag_t *) opal_btl_usnic_fl_get(module, &module->small_send_frags);
    if (OPAL_UNLIKELY(NULL == frag)) {
        return OPAL_ERR_OUT_OF_RESOURCE;
    }
    ++module->stats.pml_module_sends;
    total = fill_sendi(frag->seg.payload, header, header_size, conv, payload_size);
    opal_btl_usnic_frag_reset_sendi(frag, endpoint, total,
                                    flags | MCA_BTL_DES_FLAGS_BTL_OWNERSHIP, tag);
    opal_btl_usnic_enqueue_frag(endpoint, frag);
    opal_btl_usnic_progress_sends(module);
    return OPAL_SUCCESS;
}

static int usnic_sendi(mca_btl_base_module_t *btl, mca_btl_base_endpoint_t *endpoint,
                       opal_convertor_t *conv, void *header, size_t header_size,
                       size_t payload_size, uint8_t order, uint32_t flags,
                       mca_btl_base_tag_t tag, mca_btl_base_descriptor_t **descriptor)
{
    opal_btl_usnic_module_t *module = (opal_btl_usnic_module_t *) btl;
    opal_btl_usnic_send_seg_t *seg;
    opal_free_list_item_t *item;
    size_t total;

    if (NULL != descriptor) {
        *descriptor = NULL;
    }
    if (OPAL_UNLIKELY(endpoint->failed || module->dead)) {
        return OPAL_ERR_RESOURCE_BUSY;
    }
    if (header_size + payload_size > module->max_tiny_payload) {
        return sendi_hand_back(btl, endpoint, conv, header, header_size, payload_size, order,
                               flags, descriptor);
    }
    if (OPAL_UNLIKELY(!opal_btl_usnic_fast_open(module, endpoint))) {
        return sendi_queued(module, endpoint, conv, header, header_size, payload_size, flags,
                            tag);
    }
    /* One datagram straight from a registered buffer: no frag. */
    item = opal_btl_usnic_fl_get(module, &module->inline_segs);
    if (OPAL_UNLIKELY(NULL == item)) {
        return OPAL_ERR_OUT_OF_RESOURCE;
    }
    ++module->stats.pml_module_sends;
    seg = &((opal_btl_usnic_chunk_t *) item)->seg;
    total = fill_sendi(seg->payload, header, header_size, conv, payload_size);
    opal_btl_usnic_send_inline(module, endpoint, seg, total, tag);
    return OPAL_SUCCESS;
}

static int usnic_put(mca_btl_base_module_t *btl, mca_btl_base_endpoint_t *endpoint,
                     void *local_address, uint64_t remote_address,
                     mca_btl_base_registration_handle_t *local_handle,
                     mca_btl_base_registration_handle_t *remote_handle, size_t size, int flags,
                     int order, mca_btl_base_rdma_completion_fn_t cbfunc, void *cbcontext,
                     void *cbdata)
{
    opal_btl_usnic_module_t *module = (opal_btl_usnic_module_t *) btl;
    opal_btl_usnic_send_frag_t *frag;
    usnic_reg_ref_t ref;
    (void) flags;
    (void) order;

    if (OPAL_UNLIKELY(0 == remote_address || size > UINT32_MAX)) {
        return OPAL_ERR_BAD_PARAM;
    }
    opal_btl_usnic_reg_ref(&ref, remote_handle);
    if (OPAL_UNLIKELY(NULL == endpoint)) {
        /* osc/rdma 4.1 addresses this process itself so (btl_usnic_rdma.c) */
        return opal_btl_usnic_rdma_local_put(module, local_address, remote_address, size,
                                             local_handle, &ref, cbfunc, cbcontext, cbdata);
    }
    if (OPAL_UNLIKELY(endpoint->failed || module->dead)) {
        return OPAL_ERR_UNREACH;
    }
    /* (a PUT in one datagram carries the reference in front of its data) */
    frag = opal_btl_usnic_frag_alloc(module, endpoint, sizeof(ref) + size);
    if (OPAL_UNLIKELY(NULL == frag)) {
        return OPAL_ERR_OUT_OF_RESOURCE;
    }
    if (USNIC_FRAG_SMALL == frag->type) {
        memcpy(frag->seg.payload, &ref, sizeof(ref));
        memcpy(frag->seg.payload + sizeof(ref), local_address, size);
    } else {
        /* (every chunk carries it: send_next_chunk) */
        frag->size = size;
        frag->put_ref = ref;
        frag->segs[0].seg_len = 0;
        frag->segs[1].seg_addr.pval = local_address;
        frag->segs[1].seg_len = size;
        frag->base.des_segment_count = 2;
    }
    frag->base.des_flags = MCA_BTL_DES_FLAGS_BTL_OWNERSHIP;
    frag->put_addr = remote_address;
    frag->put_cb = cbfunc;
    frag->put_local = local_address;
    frag->put_context = cbcontext;
    frag->put_cbdata = cbdata;
    frag->tag = MCA_BTL_TAG_MAX - 1;
    ++module->stats.num_puts;
    opal_btl_usnic_enqueue_frag(endpoint, frag);
    opal_btl_usnic_progress_sends(module);
    return OPAL_SUCCESS;
}

OBJ_CLASS_INSTANCE(opal_btl_usnic_put_target_t, opal_list_item_t, NULL, NULL);

void opal_btl_usnic_regs_init(opal_btl_usnic_regs_t *regs)
{
    memset(regs, 0, sizeof(*regs));
}

void opal_btl_usnic_regs_fini(opal_btl_usnic_regs_t *regs)
{
    /* (registrations nobody released: as the modules are gone, only memory) */
    for (uint32_t i = 0; i < regs->used; ++i) {
        if (NULL != regs->slot[i].t) {
            OBJ_RELEASE(regs->slot[i].t);
        }
    }
    free(regs->slot);
    free(regs->free_slots);
    /* (unused keys must not outlive the table in memory) */
    opal_btl_usnic_regs_init(regs);
}

/* A key never handed out at that slot before, never 0; false if the
 * operating system gives no random numbers. */
static bool new_key(opal_btl_usnic_regs_t *regs, uint64_t old, uint64_t *key)
{
    do {
        if (0 == regs->nkeys) {
            int err = opal_btl_usnic_random(regs->keys, sizeof(regs->keys));
            if (0 != err) {
                opal_show_help("help-mpi-btl-usnic.txt", "no random numbers", true,
                               opal_process_info.nodename, "(all devices)",
                               "the key of a memory registration", strerror(err));
                return false;
            }
            regs->nkeys = sizeof(regs->keys) / sizeof(regs->keys[0]);
        }
        *key = regs->keys[--regs->nkeys];
        regs->keys[regs->nkeys] = 0;
    } while (0 == *key || old == *key);
    return true;
}

/* Put t into a free slot of the table with a new key: its handle. */
static bool reg_insert(opal_btl_usnic_regs_t *regs, opal_btl_usnic_put_target_t *t)
{
    uint32_t i;

    if (regs->nfree > 0) {
        i = regs->free_slots[regs->nfree - 1];
    } else {
        if (regs->used == regs->size) {
            uint32_t n = 0 == regs->size ? 64 : 2 * regs->size;
            void *slot = realloc(regs->slot, n * sizeof(*regs->slot));
            if (NULL == slot) {
                return false;
            }
            regs->slot = slot;
            slot = realloc(regs->free_slots, n * sizeof(*regs->free_slots));
            if (NULL == slot) {
                return false;
            }
            regs->free_slots = slot;
            regs->size = n;
        }
        i = regs->used;
        regs->slot[i].key = 0;
        regs->slot[i].t = NULL;
    }
    if (!new_key(regs, regs->slot[i].key, &t->handle.key)) {
        return false;
    }
    if (regs->nfree > 0) {
        --regs->nfree;
    } else {
        ++regs->used;
    }
    t->handle.index = i;
    t->handle.pad = 0;
    regs->slot[i].key = t->handle.key;
    regs->slot[i].t = t;
    return true;
}

static mca_btl_base_registration_handle_t *usnic_register_mem(mca_btl_base_module_t *btl,
                                                              mca_btl_base_endpoint_t *endpoint,
                                                              void *base, size_t size,
                                                              uint32_t flags)
{
    opal_btl_usnic_put_target_t *t = OBJ_NEW(opal_btl_usnic_put_target_t);
    (void) btl;
    (void) endpoint;

    if (NULL == t) {
        return NULL;
    }
    t->flags = flags;
    t->base = (uint64_t)(uintptr_t) base;
    t->len = size;
    if (!reg_insert(usnic_component.regs, t)) {
        OBJ_RELEASE(t);
        return NULL;
    }
    return &t->handle;
}

static int usnic_deregister_mem(mca_btl_base_module_t *btl,
                                mca_btl_base_registration_handle_t *handle)
{
    opal_btl_usnic_put_target_t *t = usnic_container_of(handle, opal_btl_usnic_put_target_t,
                                                        handle);
    opal_btl_usnic_regs_t *regs = usnic_component.regs;
    (void) btl;

    /* Revoked: the slot is empty, and its next registration gets another key. */
    regs->slot[handle->index].t = NULL;
    regs->free_slots[regs->nfree++] = handle->index;
    opal_btl_usnic_rdma_memory_gone(t->base, t->len);
    OBJ_RELEASE(t);
    return OPAL_SUCCESS;
}

static int usnic_register_error(mca_btl_base_module_t *btl, mca_btl_base_module_error_cb_fn_t cb)
{
    ((opal_btl_usnic_module_t *) btl)->pml_error_callback = cb;
    return OPAL_SUCCESS;
}

static void usnic_dump(mca_btl_base_module_t *btl, mca_btl_base_endpoint_t *endpoint,
                       int verbose)
{
    opal_btl_usnic_module_t *module = (opal_btl_usnic_module_t *) btl;
    (void) verbose;

    opal_btl_usnic_stats_print(module, "dump");
    if (NULL != endpoint) {
        opal_output(0, "btl:usnic: %s: %s: endpoint to %s: next seq %u, acked %u, recv left "
                    "edge %u, queued %d, credits %d",
                    opal_process_info.nodename, module->dev_name,
                    endpoint->proc->hostname,
                    endpoint->tx.next_seq_to_send, endpoint->tx.ack_seq_rcvd,
                    endpoint->rx.next_contig, (int) opal_list_get_size(&endpoint->send_queue),
                    endpoint->send_credits);
    }
}

static int usnic_finalize(mca_btl_base_module_t *btl)
{
    opal_btl_usnic_component_quiesce();
    opal_btl_usnic_module_teardown((opal_btl_usnic_module_t *) btl);
    return OPAL_SUCCESS;
}

opal_btl_usnic_module_t opal_btl_usnic_module_template = {
    .super = {
        .btl_component = &mca_btl_usnic_component.super,
        .btl_add_procs = usnic_add_procs,
        .btl_del_procs = usnic_del_procs,
        .btl_register = NULL,
        .btl_finalize = usnic_finalize,
        .btl_alloc = usnic_alloc,
        .btl_free = usnic_free,
        .btl_prepare_src = usnic_prepare_src,
        .btl_send = usnic_send,
        .btl_sendi = usnic_sendi,
        .btl_put = usnic_put,
        .btl_get = opal_btl_usnic_get,
        .btl_atomic_op = opal_btl_usnic_atomic_op,
        .btl_atomic_fop = opal_btl_usnic_atomic_fop,
        .btl_atomic_cswap = opal_btl_usnic_atomic_cswap,
        .btl_dump = usnic_dump,
        .btl_register_mem = usnic_register_mem,
        .btl_deregister_mem = usnic_deregister_mem,
        .btl_registration_handle_size = sizeof(mca_btl_base_registration_handle_t),
        .btl_register_error = usnic_register_error,
    },
};
