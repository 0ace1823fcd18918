/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 * $COPYRIGHT$
 * SPDX-License-Identifier: BSD-3-Clause
 *
 * Fragment and segment objects, and their free-list plumbing.
 */

#include "opal_config.h"

#include <stdlib.h>
#include <string.h>

#include "opal/util/proc.h"

#include "btl_usnic_endpoint.h"
#include "btl_usnic_frag.h"
#include "btl_usnic_module.h"
#include "btl_usnic_proc.h"
#include "btl_usnic_rdma.h"
#include "btl_usnic_send.h"

/* Local key of an item's registered payload (0 for a list without a
 * registration cache). */
static uint32_t usnic_item_lkey(const opal_free_list_item_t *item)
{
    const opal_btl_usnic_reg_t *reg = (const opal_btl_usnic_reg_t *) item->registration;
    return NULL != reg && NULL != reg->mr ? reg->lkey : 0;
}

static void send_seg_construct(opal_btl_usnic_send_seg_t *seg, opal_btl_usnic_seg_type_t type,
                               opal_free_list_item_t *item, size_t hdr_len)
{
    seg->base.type = type;
    seg->base.channel = USNIC_DATA_CHANNEL;
    seg->hdr = (usnic_btl_header_t *) item->ptr;
    /* What a data buffer's header says the same in every datagram it sends
     * is written once, here: the sender and the kind of datagram.  (An ACK
     * item's header is written in full for each ACK: btl_usnic_ack.c.) */
    if (USNIC_SEG_ACK != type) {
        seg->hdr->sender = usnic_component.my_hashed_name;
        seg->hdr->payload_type = USNIC_SEG_CHUNK == type ? USNIC_PAYLOAD_TYPE_CHUNK
                                                         : USNIC_PAYLOAD_TYPE_FRAG;
    }
    /* (an inline datagram is never a PUT) */
    if (USNIC_SEG_INLINE == type) {
        seg->hdr->put_addr = 0;
    }
    seg->payload = (uint8_t *) item->ptr + hdr_len;
    seg->lkey = usnic_item_lkey(item);
    seg->zc.addr = NULL;
    seg->zc.len = 0;
    seg->zc.lkey = 0;
    seg->posted = 0;
    seg->ack_pending = false;
    seg->prio = false;
    seg->on_resend_list = false;
    seg->frag = NULL;
    seg->ep = NULL;
    OBJ_CONSTRUCT(&seg->resend_li, opal_list_item_t);
}

static void chunk_destruct(opal_btl_usnic_chunk_t *chunk)
{
    if (NULL != chunk->seg.hdr) {
        OBJ_DESTRUCT(&chunk->seg.resend_li);
    }
}
OBJ_CLASS_INSTANCE(opal_btl_usnic_chunk_t, opal_free_list_item_t, NULL, chunk_destruct);

int opal_btl_usnic_chunk_init(opal_free_list_item_t *item, void *ctx)
{
    opal_btl_usnic_chunk_t *chunk = (opal_btl_usnic_chunk_t *) item;
    opal_btl_usnic_seg_type_t type = (opal_btl_usnic_seg_type_t)(uintptr_t) ctx;

    send_seg_construct(&chunk->seg, type, item,
                       USNIC_SEG_CHUNK == type ? sizeof(usnic_btl_chunk_header_t)
                                               : sizeof(usnic_btl_header_t));
    return OPAL_SUCCESS;
}

static void send_frag_construct(opal_btl_usnic_send_frag_t *frag)
{
    frag->base.des_segments = frag->segs;
    frag->base.des_segment_count = 1;
    /* what every frag on a free list has (opal_btl_usnic_frag_return_if_done) */
    frag->queued = false;
    frag->segs_unacked = 0;
    frag->segs_posted = 0;
    frag->cb_deferred = false;
    frag->sendi = false;
    frag->src_listed = false;
    frag->zc_mr = NULL;
    frag->zcopy = false;
    OBJ_CONSTRUCT(&frag->queue_li, opal_list_item_t);
    OBJ_CONSTRUCT(&frag->src_li, opal_list_item_t);
    OBJ_CONSTRUCT(&frag->conv, opal_convertor_t);
    frag->seg.hdr = NULL;
}

static void send_frag_destruct(opal_btl_usnic_send_frag_t *frag)
{
    if (NULL != frag->seg.hdr) {
        OBJ_DESTRUCT(&frag->seg.resend_li);
    }
    OBJ_DESTRUCT(&frag->conv);
    OBJ_DESTRUCT(&frag->queue_li);
    OBJ_DESTRUCT(&frag->src_li);
}
OBJ_CLASS_INSTANCE(opal_btl_usnic_send_frag_t, mca_btl_base_descriptor_t, send_frag_construct,
                   send_frag_destruct);

int opal_btl_usnic_small_frag_init(opal_free_list_item_t *item, void *ctx)
{
    opal_btl_usnic_send_frag_t *frag = (opal_btl_usnic_send_frag_t *) item;
    (void) ctx;

    send_seg_construct(&frag->seg, USNIC_SEG_FRAG, item, sizeof(usnic_btl_header_t));
    frag->seg.frag = frag;
    frag->type = USNIC_FRAG_SMALL;
    /* a small frag's one segment stays in place */
    frag->segs[0].seg_addr.pval = frag->seg.payload;
    return OPAL_SUCCESS;
}

OBJ_CLASS_INSTANCE(opal_btl_usnic_recv_seg_t, opal_free_list_item_t, NULL, NULL);

int opal_btl_usnic_recv_seg_init(opal_free_list_item_t *item, void *ctx)
{
    opal_btl_usnic_recv_seg_t *rseg = (opal_btl_usnic_recv_seg_t *) item;
    opal_btl_usnic_channel_t *chan = ctx;

    rseg->base.type = USNIC_SEG_RECV;
    rseg->base.channel = chan->index;
    rseg->chan = chan;
    rseg->buf = item->ptr;
    rseg->len = USNIC_GRH_LEN + chan->mtu;
    rseg->lkey = usnic_item_lkey(item);
    rseg->next = NULL;
    usnic_rx_desc_init(&rseg->pml_desc, &rseg->pml_seg);
    return OPAL_SUCCESS;
}

int opal_btl_usnic_frag_tx_setup(opal_btl_usnic_module_t *module,
                                 opal_btl_usnic_endpoint_t *endpoint)
{
    /* Fail the job, do not stall. */
    if (OPAL_UNLIKELY(OPAL_SUCCESS != opal_btl_usnic_endpoint_tx_ready(endpoint))) {
        opal_btl_usnic_show_fatal("out of memory",
                       opal_process_info.nodename, module->dev_name,
                       endpoint->proc->hostname,
                       "send window and retransmit tables");
        opal_btl_usnic_module_fatal(module, endpoint->proc->proc_opal);
        return OPAL_ERR_OUT_OF_RESOURCE;
    }
    return OPAL_SUCCESS;
}

opal_btl_usnic_send_frag_t *opal_btl_usnic_frag_alloc(opal_btl_usnic_module_t *module,
                                                      opal_btl_usnic_endpoint_t *endpoint,
                                                      size_t size)
{
    opal_btl_usnic_send_frag_t *frag;
    bool small = size <= module->max_frag_payload;

    frag = small ? (opal_btl_usnic_send_frag_t *) opal_btl_usnic_fl_get(module,
                                                                        &module->small_send_frags)
                 : (opal_btl_usnic_send_frag_t *) opal_free_list_get(&module->large_send_frags);
    if (OPAL_UNLIKELY(NULL == frag)) {
        return NULL;
    }
    opal_btl_usnic_frag_reset(frag, endpoint, size, 0, MCA_BTL_NO_ORDER);
    if (small) {
        frag->segs[0].seg_len = size;
    } else {
        frag->type = USNIC_FRAG_LARGE;
        frag->base.des_segment_count = 1;
        frag->segs[0].seg_addr.pval = frag->hdr_room;
        frag->segs[0].seg_len = 0;
        frag->segs[1].seg_addr.pval = NULL;
        frag->segs[1].seg_len = 0;
        frag->frag_id = 0;
        frag->sent_offset = 0;
        frag->pack_buf = NULL;
        frag->src_listed = false;
        frag->zc_mr = NULL;
        frag->zcopy = false;
        frag->lazy = false;
        frag->carry_len = 0;
    }
    return frag;
}

void opal_btl_usnic_frag_return_if_done(opal_btl_usnic_module_t *module,
                                        opal_btl_usnic_send_frag_t *frag)
{
    if (frag->cb_deferred && !frag->queued && 0 == frag->segs_unacked && 0 == frag->segs_posted) {
        /* A PML that still owns the descriptor may free it or send it again
         * in its callback: nothing of this frag may be touched after it. */
        bool freed = frag->base.des_flags & MCA_BTL_DES_FLAGS_BTL_OWNERSHIP;
        frag->cb_deferred = false;
        opal_btl_usnic_frag_local_done(module, frag);
        if (!freed) {
            return;
        }
    }
    if (!(frag->base.des_flags & MCA_BTL_DES_FLAGS_BTL_OWNERSHIP) || frag->queued ||
        0 != frag->segs_unacked || 0 != frag->segs_posted) {
        return;
    }
    if (USNIC_FRAG_LARGE == frag->type) {
        if (frag->src_listed) {
            opal_list_remove_item(&module->get_sources, &frag->src_li);
            frag->src_listed = false;
        }
        if (NULL != frag->zc_mr) {
            opal_btl_usnic_rdma_zcopy_release(module, frag);
        }
        free(frag->pack_buf);
        frag->pack_buf = NULL;
        if (frag->lazy) {
            opal_convertor_cleanup(&frag->conv);
            frag->lazy = false;
        }
        opal_free_list_return(&module->large_send_frags, &frag->base.super);
    } else {
        opal_btl_usnic_fl_return(&module->small_send_frags, &frag->base.super);
    }
}
