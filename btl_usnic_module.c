/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 * $COPYRIGHT$
 *
 * The BTL module: the functions the PML calls (add/del procs, alloc, free,
 * prepare_src, send, sendi, put, ...), module set-up and tear-down, and the
 * per-module progress loop.
 */

#include "opal_config.h"

#include <errno.h>
#include <sys/resource.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "opal/class/opal_bitmap.h"
#include "opal/datatype/opal_convertor.h"
#include "opal/mca/hwloc/base/base.h"
#include "opal/mca/rcache/base/base.h"
#include "opal/util/proc.h"
#include "opal/util/error.h"
#include "opal/util/show_help.h"
#include "opal/util/sys_limits.h"

#include "btl_usnic.h"
#include "btl_usnic_ack.h"
#include "btl_usnic_connectivity.h"
#include "btl_usnic_endpoint.h"
#include "btl_usnic_frag.h"
#include "btl_usnic_map.h"
#include "btl_usnic_module.h"
#include "btl_usnic_proc.h"
#include "btl_usnic_recv.h"
#include "btl_usnic_send.h"
#include "btl_usnic_stats.h"
#include "btl_usnic_util.h"
#include "btl_usnic_verbs.h"

static inline int module_index(const opal_btl_usnic_module_t *m)
{
    return (int)(m - usnic_component.modules);
}

void opal_btl_usnic_module_fatal(opal_btl_usnic_module_t *module, opal_proc_t *peer)
{
    char info[256];

    module->dead = true;
    /* The peer usually hits the same failure within a second.  Let both help
     * messages reach mpirun before the abort below tears the job down. */
    sleep(1);
    /* This line is a test contract (t-connectivity): Open MPI 4.1.4 may lose
     * a help message from a process on mpirun's host, but not this one. */
    snprintf(info, sizeof(info), "btl/usnic: %s: fatal error on %s (%s), the job is aborted",
             opal_process_info.nodename, module->dev_name,
             '\0' != module->fatal_cause[0] ? module->fatal_cause : "see the message above");
    if (NULL != module->pml_error_callback) {
        module->pml_error_callback(&module->super, MCA_BTL_ERROR_FLAGS_FATAL,
                                   NULL != peer ? peer : opal_proc_local_get(), info);
    }
    /* The PML normally aborts the job; if it did not, do not go on with a
     * transport that lost data. */
    abort();
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
            int err;
            char ip[32];

            if (NULL == ep || NULL != ep->ah) {
                continue;
            }
            err = opal_btl_usnic_verbs_create_ah(module, ep);
            if (0 == err) {
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
                    if (NULL != eps[i] && NULL == eps[i]->ah) {
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

static int usnic_add_procs(mca_btl_base_module_t *btl, size_t nprocs, opal_proc_t **procs,
                           mca_btl_base_endpoint_t **endpoints, opal_bitmap_t *reachable)
{
    opal_btl_usnic_module_t *module = (opal_btl_usnic_module_t *) btl;
    int mi = module_index(module);
    opal_btl_usnic_endpoint_t **fresh = calloc(nprocs ? nprocs : 1, sizeof(*fresh));
    double t0 = opal_btl_usnic_now_us();
    int rc = OPAL_SUCCESS;

    if (NULL == fresh) {
        return OPAL_ERR_OUT_OF_RESOURCE;
    }
    for (size_t i = 0; i < nprocs; ++i) {
        opal_proc_t *proc = procs[i];
        opal_btl_usnic_proc_t *up;
        opal_btl_usnic_endpoint_t *ep;
        int idx;

        /* Same-node peers belong to a shared-memory BTL. */
        if (proc == opal_proc_local_get() || OPAL_PROC_ON_LOCAL_NODE(proc->proc_flags)) {
            continue;
        }
        rc = opal_btl_usnic_proc_get(proc, &up);
        if (OPAL_ERR_UNREACH == rc) {
            rc = OPAL_SUCCESS;
            continue;
        }
        if (OPAL_SUCCESS != rc) {
            break;
        }
        if (NULL != up->endpoints[mi]) {
            endpoints[i] = up->endpoints[mi];
            if (NULL != reachable) {
                opal_bitmap_set_bit(reachable, (int) i);
            }
            continue;
        }
        idx = opal_btl_usnic_proc_match(up, mi);
        if (idx < 0) {
            usnic_verbose(5, "%s: %s: no device of %s pairs with this one",
                          opal_process_info.nodename, module->dev_name,
                          up->hostname);
            continue;
        }
        if (up->modex[idx].mtu != module->local_addr.mtu) {
            opal_show_help("help-mpi-btl-usnic.txt", "MTU mismatch", true,
                           opal_process_info.nodename, module->dev_name, module->if_name,
                           (int) module->local_addr.mtu, up->hostname,
                           (int) up->modex[idx].mtu);
            continue;
        }
        ep = OBJ_NEW(opal_btl_usnic_endpoint_t);
        if (NULL == ep) {
            rc = OPAL_ERR_OUT_OF_RESOURCE;
            break;
        }
        ep->proc = up;
        ep->remote_index = idx;
        rc = opal_btl_usnic_endpoint_setup(ep, module, &up->modex[idx]);
        if (OPAL_SUCCESS != rc) {
            OBJ_RELEASE(ep);
            break;
        }
        fresh[i] = ep;
    }

    if (OPAL_SUCCESS == rc) {
        rc = create_ahs(module, fresh, (int) nprocs);
    }
    for (size_t i = 0; i < nprocs; ++i) {
        opal_btl_usnic_endpoint_t *ep = fresh[i];
        if (NULL == ep) {
            continue;
        }
        if (OPAL_SUCCESS != rc) {
            OBJ_RELEASE(ep);
            continue;
        }
        ep->proc->endpoints[mi] = ep;
        opal_hash_table_set_value_uint64(&module->senders, ep->proc->hashed_name, ep);
        opal_list_append(&module->all_endpoints, &ep->all_li);
        endpoints[i] = ep;
        if (NULL != reachable) {
            opal_bitmap_set_bit(reachable, (int) i);
        }
        usnic_verbose(5, "%s: %s: endpoint to %s (%s record %d, data QP %u)",
                      opal_process_info.nodename, module->dev_name,
                      ep->proc->hostname,
                      ep->proc->hostname, ep->remote_index,
                      ep->remote.qp_num[USNIC_DATA_CHANNEL]);
    }
    free(fresh);
    {
        size_t npeers = opal_list_get_size(&module->all_endpoints);
        opal_list_item_t *li;
        for (li = opal_list_get_first(&module->all_endpoints);
             li != opal_list_get_end(&module->all_endpoints); li = opal_list_get_next(li)) {
            opal_btl_usnic_endpoint_size_window(
                usnic_container_of(li, opal_btl_usnic_endpoint_t, all_li), npeers);
        }
    }
    /* Rewritten after every call: the last one leaves the complete map. */
    if (OPAL_SUCCESS == rc) {
        opal_btl_usnic_write_connectivity_map();
    }
    module->stats.add_procs_usec += (uint64_t)(opal_btl_usnic_now_us() - t0);
    return rc;
}

static void release_endpoint(opal_btl_usnic_module_t *module, opal_btl_usnic_endpoint_t *ep)
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
            release_endpoint(module, ep);
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

    if (USNIC_FRAG_SMALL == frag->type && opal_btl_usnic_send_fast(module, endpoint, frag)) {
        /* A descriptor the PML owns is not free while the datagram may have
         * to go again: no inline completion for it. */
        if (frag->base.des_flags & MCA_BTL_DES_SEND_ALWAYS_CALLBACK ||
            !(frag->base.des_flags & MCA_BTL_DES_FLAGS_BTL_OWNERSHIP)) {
            /* The callback runs from progress, not inside the PML's send;
             * "queued" keeps an early ACK from returning the frag. */
            frag->queued = true;
            opal_list_append(&module->fastpath_done, &frag->queue_li);
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

static int usnic_sendi(mca_btl_base_module_t *btl, mca_btl_base_endpoint_t *endpoint,
                       opal_convertor_t *conv, void *header, size_t header_size,
                       size_t payload_size, uint8_t order, uint32_t flags,
                       mca_btl_base_tag_t tag, mca_btl_base_descriptor_t **descriptor)
{
    opal_btl_usnic_module_t *module = (opal_btl_usnic_module_t *) btl;
    opal_btl_usnic_send_frag_t *frag;
    mca_btl_base_descriptor_t *des;
    size_t size = payload_size;
    size_t total = header_size + payload_size;
    uint8_t *dst;

    if (NULL != descriptor) {
        *descriptor = NULL;
    }
    /* Too large for the fast path: the PML sends what we hand back, so
     * without a way to hand it back leave the message to the normal path. */
    if (endpoint->failed || module->dead ||
        (total > module->max_tiny_payload && NULL == descriptor)) {
        return OPAL_ERR_RESOURCE_BUSY;
    }
    des = usnic_alloc(btl, endpoint, order, total, flags);
    if (OPAL_UNLIKELY(NULL == des)) {
        return OPAL_ERR_OUT_OF_RESOURCE;
    }
    frag = (opal_btl_usnic_send_frag_t *) des;
    dst = frag->segs[0].seg_addr.pval;
    memcpy(dst, header, header_size);
    if (payload_size > 0) {
        struct iovec iov = {.iov_base = dst + header_size, .iov_len = size};
        uint32_t iov_count = 1;
        opal_convertor_pack(conv, &iov, &iov_count, &size);
    }
    frag->segs[0].seg_len = header_size + size;
    if (total > module->max_tiny_payload) {
        /* As btl_alloc would give it, header and data already in place. */
        *descriptor = des;
        return OPAL_ERR_RESOURCE_BUSY;
    }
    frag->base.des_flags = flags | MCA_BTL_DES_FLAGS_BTL_OWNERSHIP;
    frag->size = header_size + size;
    frag->tag = tag;
    ++module->stats.pml_module_sends;
    if (!opal_btl_usnic_send_fast(module, endpoint, frag)) {
        /* Data is already packed: queue it rather than make the PML redo it. */
        opal_btl_usnic_enqueue_frag(endpoint, frag);
        opal_btl_usnic_progress_sends(module);
    } else {
        frag->local_done = true;
        opal_btl_usnic_frag_return_if_done(module, frag);
    }
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
    (void) local_handle;
    (void) remote_handle;
    (void) flags;
    (void) order;

    if (OPAL_UNLIKELY(endpoint->failed || module->dead)) {
        return OPAL_ERR_UNREACH;
    }
    if (OPAL_UNLIKELY(0 == remote_address || size > UINT32_MAX)) {
        return OPAL_ERR_BAD_PARAM;
    }
    frag = opal_btl_usnic_frag_alloc(module, endpoint, size);
    if (OPAL_UNLIKELY(NULL == frag)) {
        return OPAL_ERR_OUT_OF_RESOURCE;
    }
    if (USNIC_FRAG_SMALL == frag->type) {
        memcpy(frag->seg.payload, local_address, size);
    } else {
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
    t->handle.base = (uint64_t)(uintptr_t) base;
    t->handle.len = size;
    opal_list_append(&usnic_component.put_targets, &t->super);
    return &t->handle;
}

static int usnic_deregister_mem(mca_btl_base_module_t *btl,
                                mca_btl_base_registration_handle_t *handle)
{
    opal_btl_usnic_put_target_t *t = usnic_container_of(handle, opal_btl_usnic_put_target_t,
                                                        handle);
    (void) btl;

    opal_list_remove_item(&usnic_component.put_targets, &t->super);
    OBJ_RELEASE(t);
    return OPAL_SUCCESS;
}

bool opal_btl_usnic_put_target_ok(uint64_t addr, uint64_t len)
{
    opal_btl_usnic_put_target_t *t;

    OPAL_LIST_FOREACH (t, &usnic_component.put_targets, opal_btl_usnic_put_target_t) {
        if ((t->flags & MCA_BTL_REG_FLAG_REMOTE_WRITE) && addr >= t->handle.base &&
            len <= t->handle.len && addr - t->handle.base <= t->handle.len - len) {
            return true;
        }
    }
    return false;
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

/* ------------------------------------------------------------------ */
/* progress                                                            */

static void handle_completion(opal_btl_usnic_module_t *module, int channel, struct ibv_wc *wc)
{
    opal_btl_usnic_seg_base_t *base = (opal_btl_usnic_seg_base_t *)(uintptr_t) wc->wr_id;

    /* A send that asked for no completion gets one only when it failed. */
    if (OPAL_UNLIKELY(NULL == base)) {
        if (IBV_WC_WR_FLUSH_ERR == wc->status) {
            goto dead_qp;
        }
        ++module->stats.num_send_errors;
        return;
    }
    if (USNIC_SEG_RECV == base->type) {
        opal_btl_usnic_recv_seg_t *rseg = usnic_container_of(base, opal_btl_usnic_recv_seg_t,
                                                             base);
        if (OPAL_LIKELY(IBV_WC_SUCCESS == wc->status)) {
            opal_btl_usnic_recv(module, rseg, wc);
            return;
        }
        if (IBV_WC_WR_FLUSH_ERR == wc->status) {
            goto dead_qp;
        }
        ++module->stats.num_recv_errors;
        rseg->wr.next = NULL;
        *module->channels[channel].repost_tail = &rseg->wr;
        module->channels[channel].repost_tail = &rseg->wr.next;
        ++module->channels[channel].repost_count;
        return;
    }

    if (OPAL_UNLIKELY(IBV_WC_SUCCESS != wc->status)) {
        if (IBV_WC_WR_FLUSH_ERR == wc->status) {
            goto dead_qp;
        }
        /* A lost send is recovered by the retransmit timer. */
        ++module->stats.num_send_errors;
    }
    {
        opal_btl_usnic_send_seg_t *seg = usnic_container_of(base, opal_btl_usnic_send_seg_t,
                                                            base);
        if (USNIC_SEG_ACK == base->type) {
            module->channels[channel].sd_wqe += seg->wqes;
            --seg->posted;
            opal_free_list_return(&module->ack_segs,
                                  &usnic_container_of(seg, opal_btl_usnic_ack_item_t, seg)->super);
        } else {
            opal_btl_usnic_send_complete(module, seg, channel);
        }
    }
    return;

dead_qp:
    opal_btl_usnic_verbs_async_drain(module->context);
    opal_show_help("help-mpi-btl-usnic.txt", "non-receive completion error", true,
                   opal_process_info.nodename, module->dev_name,
                   0 == channel ? "priority" : "data", ibv_wc_status_str(wc->status),
                   (int) wc->status);
    opal_btl_usnic_module_fatal(module, NULL);
}

/* Peers that leave data unacknowledged past the budget, without proving
 * alive otherwise, are declared dead (usnic_peer_judge). */
static void check_dead_peers(opal_btl_usnic_module_t *module)
{
    double timeout = usnic_component.peer_timeout;
    double now = opal_btl_usnic_now_us() / 1e6;
    /* Not checked for long: this process was away from progress (and sent
     * no retransmits); the stall it sat out is not the peer's fault. */
    bool away = now - module->last_dead_check >= timeout / USNIC_PEER_WATCH_FRACTION;
    opal_list_item_t *li;

    module->last_dead_check = now;
    /* Only endpoints with unacknowledged data can stall: those whose
     * retransmit timer runs (idle peers cost nothing here). */
    for (li = opal_list_get_first(&module->endpoints_with_timers);
         li != opal_list_get_end(&module->endpoints_with_timers); li = opal_list_get_next(li)) {
        opal_btl_usnic_endpoint_t *ep = usnic_container_of(li, opal_btl_usnic_endpoint_t,
                                                           timer_li);
        double seen, busy;
        char ip[32];

        if (ep->failed) {
            continue;
        }
        busy = opal_btl_usnic_liveness_busy(ep);
        seen = busy > ep->last_ack_time ? busy : ep->last_ack_time;
        switch (usnic_peer_judge(&ep->watch, now, seen, timeout, away)) {
        case USNIC_PEER_OK:
            continue;
        case USNIC_PEER_PING:
            opal_btl_usnic_liveness_ping(ep);
            continue;
        case USNIC_PEER_DEAD:
            break;
        }
        ep->failed = true;
        opal_btl_usnic_snprintf_ipv4(ip, sizeof(ip), ep->remote.ipv4_addr, ep->remote.prefix);
        opal_show_help("help-mpi-btl-usnic.txt", "peer unreachable", true,
                       opal_process_info.nodename, module->dev_name, module->if_name,
                       ep->proc->hostname, ip,
                       usnic_component.peer_timeout,
                       (int) usnic_tx_window_inflight(&ep->tx),
                       opal_btl_usnic_liveness_summary(ep, now, timeout));
        snprintf(module->fatal_cause, sizeof(module->fatal_cause), "peer %s unreachable", ip);
        opal_btl_usnic_module_fatal(module, ep->proc->proc_opal);
    }
}

int opal_btl_usnic_module_progress(opal_btl_usnic_module_t *module)
{
    struct ibv_wc wc[32];
    int count = 0;

    if (OPAL_UNLIKELY(module->dead)) {
        return 0;
    }
    if (OPAL_UNLIKELY(opal_btl_usnic_connectivity_failed)) {
        opal_btl_usnic_connectivity_report();
    }
    /* Priority first: ACKs free window space for the data that follows. */
    for (int c = 0; c < USNIC_NUM_CHANNELS; ++c) {
        int n = ibv_poll_cq(module->channels[c].cq, (int)(sizeof(wc) / sizeof(wc[0])), wc);
        if (OPAL_UNLIKELY(n < 0)) {
            opal_show_help("help-mpi-btl-usnic.txt", "ibv API failed", true,
                           opal_process_info.nodename, module->dev_name, "ibv_poll_cq",
                           strerror(-n));
            opal_btl_usnic_module_fatal(module, NULL);
            return count;
        }
        for (int i = 0; i < n; ++i) {
            handle_completion(module, c, &wc[i]);
        }
        count += n;
    }

    while (!opal_list_is_empty(&module->fastpath_done)) {
        opal_btl_usnic_send_frag_t *frag =
            usnic_container_of(opal_list_remove_first(&module->fastpath_done),
                               opal_btl_usnic_send_frag_t, queue_li);
        /* Still "queued" during the PML callback, so that a PML freeing the
         * descriptor there does not return it: that happens once, here. */
        opal_btl_usnic_frag_local_done(module, frag);
        frag->queued = false;
        opal_btl_usnic_frag_return_if_done(module, frag);
        ++count;
    }

    /* Buffers go back to the device before the ACKs that let peers refill them. */
    for (int c = 0; c < USNIC_NUM_CHANNELS; ++c) {
        if (module->channels[c].repost_count >= module->channels[c].repost_batch &&
            OPAL_UNLIKELY(OPAL_SUCCESS != opal_btl_usnic_verbs_repost(module, c))) {
            opal_btl_usnic_module_fatal(module, NULL);
        }
    }

    if (!opal_list_is_empty(&module->endpoints_with_timers)) {
        opal_btl_usnic_check_timers(module, opal_btl_usnic_now_us());
    }
    if (!opal_list_is_empty(&module->pending_resend_segs) ||
        !opal_list_is_empty(&module->endpoints_with_sends) ||
        !opal_list_is_empty(&module->endpoints_that_need_acks)) {
        opal_btl_usnic_progress_sends(module);
    }

    if (usnic_component.peer_timeout > 0 && 0 == (usnic_component.progress_ticks & 255)) {
        check_dead_peers(module);
    }
    return count;
}

/* ------------------------------------------------------------------ */
/* set-up and tear-down                                                */

/* Buffers every free list starts with. */
#define USNIC_SMALL_FRAGS_INIT 128
#define USNIC_CHUNKS_INIT 256
#define USNIC_ACKS_INIT 128
#define USNIC_ACK_BUF 64

/* Bytes a free list of n buffers of len bytes registers (each buffer
 * cache-line aligned, the slab rounded to pages). */
static size_t slab_bytes(size_t n, size_t len)
{
    size_t line = (size_t) opal_cache_line_size, page = (size_t) opal_getpagesize();

    return (n * ((len + line - 1) / line * line) + page - 1) / page * page + page;
}

/* Memory the module registers when it starts: the receive buffers of both
 * channels and the first buffers of the send free lists. */
static size_t startup_locked_bytes(uint32_t data_mtu, uint32_t prio_mtu, int rd, int prd)
{
    return slab_bytes((size_t) rd, USNIC_GRH_LEN + data_mtu) +
           slab_bytes((size_t) prd, USNIC_GRH_LEN + prio_mtu) +
           slab_bytes(USNIC_SMALL_FRAGS_INIT, data_mtu) + slab_bytes(USNIC_CHUNKS_INIT, data_mtu) +
           slab_bytes(USNIC_ACKS_INIT, USNIC_ACK_BUF);
}

/* Whether the locked-memory limit leaves room for this module's start-up
 * registrations on top of those of the modules set up before it. */
static bool memlock_allows(opal_btl_usnic_module_t *module, size_t need)
{
    struct rlimit rl;

    if (opal_btl_usnic_may_lock_unlimited() || 0 != getrlimit(RLIMIT_MEMLOCK, &rl) ||
        RLIM_INFINITY == rl.rlim_cur ||
        usnic_component.locked_planned + need <= (size_t) rl.rlim_cur) {
        usnic_component.locked_planned += need;
        return true;
    }
    opal_show_help("help-mpi-btl-usnic.txt", "locked memory too low", true,
                   opal_process_info.nodename, module->dev_name, (unsigned long) need,
                   (unsigned long) usnic_component.locked_planned, (unsigned long) rl.rlim_cur);
    return false;
}

static int clamp_depth(int requested, int dflt, int max)
{
    int v = requested > 0 ? requested : dflt;
    return v < max ? v : max;
}

static int init_free_list(opal_btl_usnic_module_t *module, opal_free_list_t *fl, size_t elem_size,
                          opal_class_t *cls, size_t payload, int n0, int max, int inc,
                          opal_free_list_item_init_fn_t init, void *ctx)
{
    OBJ_CONSTRUCT(fl, opal_free_list_t);
    return opal_free_list_init(fl, elem_size, opal_cache_line_size, cls, payload,
                               opal_cache_line_size, n0, max, inc, NULL, 0,
                               payload > 0 ? module->rcache : NULL, init, ctx);
}

int opal_btl_usnic_module_init(opal_btl_usnic_module_t *module)
{
    struct ibv_device_attr *da = &module->dev_attr;
    mca_rcache_base_resources_t res;
    char name[96], ip[32];
    uint32_t data_mtu = module->port_mtu, prio_mtu;
    int sd, rd, psd, prd, rc;

    rc = opal_btl_usnic_random(&module->isn, sizeof(module->isn));
    if (0 != rc) {
        opal_show_help("help-mpi-btl-usnic.txt", "no random numbers", true,
                       opal_process_info.nodename, module->dev_name, "initial sequence numbers",
                       strerror(rc));
        return OPAL_ERROR;
    }
    if (0 != ibv_query_device(module->context, da)) {
        opal_show_help("help-mpi-btl-usnic.txt", "ibv API failed", true,
                       opal_process_info.nodename, module->dev_name, "ibv_query_device",
                       strerror(errno));
        return OPAL_ERROR;
    }
    /* Payload sizes follow the port's active MTU. */
    prio_mtu = 768;
    if (usnic_component.priority_limit > 0) {
        prio_mtu = (uint32_t) usnic_component.priority_limit + sizeof(usnic_btl_header_t);
    }
    if (prio_mtu > data_mtu) {
        prio_mtu = data_mtu;
    }
    module->max_frag_payload = data_mtu - sizeof(usnic_btl_header_t);
    module->max_chunk_payload = data_mtu - sizeof(usnic_btl_chunk_header_t);
    module->max_tiny_payload = prio_mtu - sizeof(usnic_btl_header_t);

    sd = clamp_depth(usnic_component.sd_num, 1024, da->max_qp_wr);
    rd = clamp_depth(usnic_component.rd_num, 1024, da->max_qp_wr);
    psd = clamp_depth(usnic_component.prio_sd_num, 127, da->max_qp_wr);
    prd = clamp_depth(usnic_component.prio_rd_num, 127, da->max_qp_wr);

    if (!memlock_allows(module, startup_locked_bytes(data_mtu, prio_mtu, rd, prd))) {
        return OPAL_ERR_OUT_OF_RESOURCE;
    }
    module->reg_bytes = 0;
    module->reg_failure_shown = false;
    module->pd = ibv_alloc_pd(module->context);
    if (NULL == module->pd) {
        opal_show_help("help-mpi-btl-usnic.txt", "ibv API failed", true,
                       opal_process_info.nodename, module->dev_name, "ibv_alloc_pd",
                       strerror(errno));
        return OPAL_ERROR;
    }
    snprintf(name, sizeof(name), "usnic.%s", module->dev_name);
    memset(&res, 0, sizeof(res));
    res.cache_name = name;
    res.reg_data = module;
    res.sizeof_reg = sizeof(opal_btl_usnic_reg_t);
    res.register_mem = opal_btl_usnic_verbs_reg_mem;
    res.deregister_mem = opal_btl_usnic_verbs_dereg_mem;
    module->rcache = mca_rcache_base_module_create(usnic_component.rcache_name, module, &res);
    if (NULL == module->rcache) {
        opal_show_help("help-mpi-btl-usnic.txt", "internal error during init", true,
                       opal_process_info.nodename, module->dev_name,
                       "registration cache creation", usnic_component.rcache_name);
        goto fail_pd;
    }

    rc = opal_btl_usnic_verbs_channel_init(module, USNIC_PRIORITY_CHANNEL, psd, prd,
                                           clamp_depth(usnic_component.cq_num, psd + prd,
                                                       da->max_cqe),
                                           prio_mtu);
    if (OPAL_SUCCESS != rc) {
        goto fail_chan;
    }
    rc = opal_btl_usnic_verbs_channel_init(module, USNIC_DATA_CHANNEL, sd, rd,
                                           clamp_depth(usnic_component.cq_num, sd + rd,
                                                       da->max_cqe),
                                           data_mtu);
    if (OPAL_SUCCESS != rc) {
        goto fail_chan;
    }
    opal_btl_usnic_module_tune_channels(module);
    for (int c = 0; c < USNIC_NUM_CHANNELS; ++c) {
        opal_btl_usnic_channel_t *ch = &module->channels[c];
        usnic_verbose(5, "%s: %s: %s channel ready: CQ %d entries, QP %u, send depth %d, "
                      "receive depth %d, MTU %u, inline %u",
                      opal_process_info.nodename, module->dev_name,
                      USNIC_PRIORITY_CHANNEL == c ? "priority" : "data", ch->cq_num,
                      ch->qp->qp_num, ch->sd_num, ch->rd_num, ch->mtu, ch->max_inline);
    }

    rc = init_free_list(module, &module->small_send_frags, sizeof(opal_btl_usnic_send_frag_t),
                        OBJ_CLASS(opal_btl_usnic_send_frag_t), data_mtu, USNIC_SMALL_FRAGS_INIT,
                        USNIC_SMALL_FRAGS_MAX, USNIC_SMALL_FRAGS_INIT,
                        opal_btl_usnic_small_frag_init, NULL);
    rc = (OPAL_SUCCESS != rc) ? rc
         : init_free_list(module, &module->large_send_frags, sizeof(opal_btl_usnic_send_frag_t),
                          OBJ_CLASS(opal_btl_usnic_send_frag_t), 0, 16, USNIC_LARGE_FRAGS_MAX, 16,
                          NULL, NULL);
    rc = (OPAL_SUCCESS != rc) ? rc
         : init_free_list(module, &module->chunk_segs, sizeof(opal_btl_usnic_chunk_t),
                          OBJ_CLASS(opal_btl_usnic_chunk_t), data_mtu, USNIC_CHUNKS_INIT, -1,
                          USNIC_CHUNKS_INIT, opal_btl_usnic_chunk_init,
                          (void *)(uintptr_t) USNIC_SEG_CHUNK);
    rc = (OPAL_SUCCESS != rc) ? rc
         : init_free_list(module, &module->ack_segs, sizeof(opal_btl_usnic_ack_item_t),
                          OBJ_CLASS(opal_btl_usnic_chunk_t), USNIC_ACK_BUF, USNIC_ACKS_INIT, -1, 64,
                          opal_btl_usnic_chunk_init, (void *)(uintptr_t) USNIC_SEG_ACK);
    if (OPAL_SUCCESS != rc) {
        opal_show_help("help-mpi-btl-usnic.txt", "internal error during init", true,
                       opal_process_info.nodename, module->dev_name, "free list creation",
                       opal_strerror(rc));
        goto fail_lists;
    }

    OBJ_CONSTRUCT(&module->senders, opal_hash_table_t);
    opal_hash_table_init(&module->senders, 256);
    module->last_sender = NULL;
    OBJ_CONSTRUCT(&module->all_endpoints, opal_list_t);
    OBJ_CONSTRUCT(&module->endpoints_with_sends, opal_list_t);
    OBJ_CONSTRUCT(&module->endpoints_that_need_acks, opal_list_t);
    OBJ_CONSTRUCT(&module->endpoints_with_timers, opal_list_t);
    OBJ_CONSTRUCT(&module->pending_resend_segs, opal_list_t);
    OBJ_CONSTRUCT(&module->fastpath_done, opal_list_t);
    OBJ_CONSTRUCT(&module->zombie_endpoints, opal_list_t);

    memset(&module->local_addr, 0, sizeof(module->local_addr));
    memcpy(module->local_addr.gid, module->gid.raw, sizeof(module->local_addr.gid));
    module->local_addr.qp_num[USNIC_PRIORITY_CHANNEL] =
        module->channels[USNIC_PRIORITY_CHANNEL].qp->qp_num;
    module->local_addr.qp_num[USNIC_DATA_CHANNEL] = module->channels[USNIC_DATA_CHANNEL].qp->qp_num;
    module->local_addr.qkey = usnic_component.qkey;
    module->local_addr.ipv4_addr = module->if_ipv4;
    module->local_addr.prefix = module->if_prefix;
    module->local_addr.link_speed_mbps = module->link_speed_mbps;
    module->local_addr.mtu = (uint16_t) data_mtu;
    module->local_addr.isn = module->isn;
    module->local_addr.version = USNIC_MODEX_VERSION;
    memcpy(module->local_addr.mac, module->if_mac, sizeof(module->if_mac));
    module->local_addr.if_mtu = (uint32_t) module->if_mtu;
    opal_btl_usnic_module_publish_depths(module);
    memset(&module->stats, 0, sizeof(module->stats));
    module->fatal_cause[0] = '\0';
    /* Without its socket the module works, just unchecked (a warning was shown). */
    opal_btl_usnic_connectivity_listen(module);

    opal_btl_usnic_snprintf_ipv4(ip, sizeof(ip), module->if_ipv4, module->if_prefix);
    usnic_verbose(5, "%s: %s: module ready: %s %s, max payload %u per datagram, %u per chunk, "
                  "%u on the fast path", opal_process_info.nodename, module->dev_name,
                  module->if_name, ip, module->max_frag_payload, module->max_chunk_payload,
                  module->max_tiny_payload);
    return OPAL_SUCCESS;

fail_lists:
    OBJ_DESTRUCT(&module->ack_segs);
    OBJ_DESTRUCT(&module->chunk_segs);
    OBJ_DESTRUCT(&module->large_send_frags);
    OBJ_DESTRUCT(&module->small_send_frags);
fail_chan:
    opal_btl_usnic_verbs_channel_fini(module, USNIC_DATA_CHANNEL);
    opal_btl_usnic_verbs_channel_fini(module, USNIC_PRIORITY_CHANNEL);
    mca_rcache_base_module_destroy(module->rcache);
fail_pd:
    ibv_dealloc_pd(module->pd);
    module->pd = NULL;
    return OPAL_ERROR;
}

void opal_btl_usnic_module_teardown(opal_btl_usnic_module_t *module)
{
    opal_list_item_t *li;

    if (NULL == module->pd) {
        return;
    }
    /* progress may still be called until the BML unregisters it */
    module->dead = true;
    while (NULL != (li = opal_list_get_first(&module->all_endpoints)) &&
           li != opal_list_get_end(&module->all_endpoints)) {
        release_endpoint(module, usnic_container_of(li, opal_btl_usnic_endpoint_t, all_li));
    }
    /* Queue pairs before the buffers they use, the PD after everything in it. */
    opal_btl_usnic_verbs_channel_fini(module, USNIC_DATA_CHANNEL);
    opal_btl_usnic_verbs_channel_fini(module, USNIC_PRIORITY_CHANNEL);
    /* No completion can arrive any more. */
    while (NULL != (li = opal_list_remove_first(&module->zombie_endpoints))) {
        opal_btl_usnic_endpoint_t *ep = usnic_container_of(li, opal_btl_usnic_endpoint_t, all_li);
        OBJ_RELEASE(ep);
    }
    OBJ_DESTRUCT(&module->zombie_endpoints);
    OBJ_DESTRUCT(&module->fastpath_done);
    OBJ_DESTRUCT(&module->pending_resend_segs);
    OBJ_DESTRUCT(&module->endpoints_that_need_acks);
    OBJ_DESTRUCT(&module->endpoints_with_timers);
    OBJ_DESTRUCT(&module->endpoints_with_sends);
    OBJ_DESTRUCT(&module->all_endpoints);
    OBJ_DESTRUCT(&module->senders);
    OBJ_DESTRUCT(&module->ack_segs);
    OBJ_DESTRUCT(&module->chunk_segs);
    OBJ_DESTRUCT(&module->large_send_frags);
    OBJ_DESTRUCT(&module->small_send_frags);
    mca_rcache_base_module_destroy(module->rcache);
    ibv_dealloc_pd(module->pd);
    module->pd = NULL;
    /* The device context is closed by the component: ports may share it. */
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
        .btl_get = NULL,
        .btl_dump = usnic_dump,
        .btl_register_mem = usnic_register_mem,
        .btl_deregister_mem = usnic_deregister_mem,
        .btl_registration_handle_size = sizeof(mca_btl_base_registration_handle_t),
        .btl_register_error = usnic_register_error,
    },
};
