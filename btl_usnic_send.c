/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 * $COPYRIGHT$
 * SPDX-License-Identifier: BSD-3-Clause
 *
 * Send half of the reliability engine.  Every sequenced segment is
 * recorded in the endpoint's window until an ACK (btl_usnic_ack.c)
 * releases it; the endpoint's retransmit timer runs meanwhile
 * (btl_usnic_retrans.c).
 */

#include "opal_config.h"

#include <string.h>

#include "opal/util/show_help.h"

#include "btl_usnic.h"
#include "btl_usnic_ack.h"
#include "btl_usnic_channel.h"
#include "btl_usnic_connectivity.h"
#include "btl_usnic_endpoint.h"
#include "btl_usnic_module.h"
#include "btl_usnic_proc.h"
#include "btl_usnic_retrans.h"
#include "btl_usnic_send.h"

void opal_btl_usnic_enqueue_frag(opal_btl_usnic_endpoint_t *ep, opal_btl_usnic_send_frag_t *frag)
{
    frag->queued = true;
    opal_list_append(&ep->send_queue, &frag->queue_li);
    opal_btl_usnic_check_rts(ep);
}

/* Tell the PML, once, that its send buffer is free (status OPAL_SUCCESS) or
 * that the send failed.  PUT completion is remote completion: put_done.
 * A descriptor the PML owns is its own again after the callback, and may
 * be sent again (Open MPI 5's active-message RDMA does): while segments of
 * it are unacknowledged or on the device, the callback waits
 * (opal_btl_usnic_frag_return_if_done gives it). */
static void send_done(opal_btl_usnic_module_t *module, opal_btl_usnic_send_frag_t *frag,
                      int status)
{
    if (frag->local_done) {
        return;
    }
    if (OPAL_SUCCESS == status && !(frag->base.des_flags & MCA_BTL_DES_FLAGS_BTL_OWNERSHIP) &&
        (0 != frag->segs_unacked || 0 != frag->segs_posted)) {
        frag->cb_deferred = true;
        return;
    }
    frag->cb_deferred = false;
    frag->local_done = true;
    /* A send that returned 0 to the PML always gets its callback. */
    if (0 == frag->put_addr && NULL != frag->base.des_cbfunc) {
        ++module->stats.pml_send_callbacks;
        frag->base.des_cbfunc(&module->super, frag->endpoint, &frag->base, status);
    }
}

/* Report an emulated PUT's completion, once. */
static void put_done(opal_btl_usnic_module_t *module, opal_btl_usnic_send_frag_t *frag,
                     int status)
{
    mca_btl_base_rdma_completion_fn_t cb = frag->put_cb;

    if (0 != frag->put_addr && NULL != cb) {
        frag->put_cb = NULL;
        cb(&module->super, frag->endpoint, frag->put_local, NULL, frag->put_context,
           frag->put_cbdata, status);
    }
}

void opal_btl_usnic_frag_local_done(opal_btl_usnic_module_t *module,
                                    opal_btl_usnic_send_frag_t *frag)
{
    send_done(module, frag, OPAL_SUCCESS);
}

void opal_btl_usnic_frag_abort(opal_btl_usnic_module_t *module, opal_btl_usnic_send_frag_t *frag)
{
    send_done(module, frag, OPAL_ERR_UNREACH);
    /* A PUT with segments in flight completes when they are released. */
    if (0 == frag->segs_unacked) {
        put_done(module, frag, OPAL_ERR_UNREACH);
    }
}

/* Pack exactly n bytes from the frag's convertor: every chunk but the last
 * is full, which is what lets the receiver check chunk offsets. */
static void lazy_pack(opal_btl_usnic_send_frag_t *frag, uint8_t *dst, size_t n)
{
    size_t got = 0;

    while (got < n) {
        struct iovec iov;
        uint32_t iov_count = 1;
        size_t max_data;

        if (frag->carry_len > 0) {
            size_t m = n - got < frag->carry_len ? n - got : frag->carry_len;
            memcpy(dst + got, frag->carry + frag->carry_off, m);
            frag->carry_off += (uint8_t) m;
            frag->carry_len -= (uint8_t) m;
            got += m;
            continue;
        }
        iov.iov_base = dst + got;
        iov.iov_len = max_data = n - got;
        opal_convertor_pack(&frag->conv, &iov, &iov_count, &max_data);
        got += max_data;
        if (got < n) {
            /* room for less than one element: pack it aside and split it */
            iov.iov_base = frag->carry;
            iov.iov_len = max_data = sizeof(frag->carry);
            iov_count = 1;
            opal_convertor_pack(&frag->conv, &iov, &iov_count, &max_data);
            frag->carry_off = 0;
            frag->carry_len = (uint8_t) max_data;
            if (0 == max_data) {
                break; /* the convertor has no more data: cannot happen for a sane size */
            }
        }
    }
}

typedef enum { CHUNK_SENT, CHUNK_LAST, CHUNK_NO_BUFFER } chunk_result_t;

/* Copy the next chunk of a large frag into a chunk segment (or, for a GET
 * reply from memory the device registered, point the segment at it) and
 * send it.  CHUNK_NO_BUFFER when no chunk buffer can be had (registered memory
 * exhausted): chunks come back as the peer ACKs the ones in flight. */
static chunk_result_t send_next_chunk(opal_btl_usnic_module_t *module,
                                      opal_btl_usnic_endpoint_t *ep,
                                      opal_btl_usnic_send_frag_t *frag)
{
    opal_btl_usnic_chunk_t *chunk;
    usnic_btl_chunk_header_t *ch;
    size_t hdr_len = frag->segs[0].seg_len;
    size_t len = frag->size - frag->sent_offset;
    size_t off = frag->sent_offset;
    uint32_t mcp = module->max_chunk_payload, ref_len = 0;
    uint8_t *dst;
    size_t copied = 0;

    chunk = (opal_btl_usnic_chunk_t *) opal_btl_usnic_fl_get(module, &module->chunk_segs);
    if (OPAL_UNLIKELY(NULL == chunk)) {
        ++module->stats.num_chunk_stalls;
        return CHUNK_NO_BUFFER;
    }
    if (0 == frag->frag_id) {
        frag->frag_id = ep->next_frag_id++;
        if (0 == ep->next_frag_id) {
            ep->next_frag_id = 1;
        }
        ++ep->active_large_frags;
    }
    dst = chunk->seg.payload;
    if (OPAL_UNLIKELY(usnic_is_put(frag->tag, frag->put_addr))) {
        /* every chunk of a PUT names the target's registration */
        memcpy(dst, &frag->put_ref, sizeof(frag->put_ref));
        ref_len = (uint32_t) sizeof(frag->put_ref);
        dst += ref_len;
        mcp -= ref_len;
    }
    if (len > mcp) {
        len = mcp;
    }
    chunk->seg.zc.len = 0;

    if (frag->zcopy && off >= hdr_len && len >= module->zcopy_min) {
        /* GET data, sent from the registered memory itself */
        chunk->seg.zc.addr = (const uint8_t *) frag->segs[1].seg_addr.pval + (off - hdr_len);
        chunk->seg.zc.len = (uint32_t) len;
        chunk->seg.zc.lkey = frag->zc_lkey;
        ++module->stats.num_zcopy_chunks;
    } else if (off < hdr_len) {
        /* Segment 0 (the PML header, or all of an allocated frag) comes
         * first, then the data. */
        size_t n = hdr_len - off < len ? hdr_len - off : len;
        memcpy(dst, (const uint8_t *) frag->segs[0].seg_addr.pval + off, n);
        copied = n;
    }
    if (0 == chunk->seg.zc.len && copied < len) {
        size_t data_off = off + copied - hdr_len;
        size_t n = len - copied;
        if (frag->lazy) {
            lazy_pack(frag, dst + copied, n);
        } else {
            memcpy(dst + copied, (const uint8_t *) frag->segs[1].seg_addr.pval + data_off, n);
        }
    }

    chunk->seg.frag = frag;
    chunk->seg.len = sizeof(*ch) + ref_len + len;
    ch = (usnic_btl_chunk_header_t *) chunk->seg.hdr;
    ch->hdr.payload_len = (uint16_t) len;
    ch->hdr.tag = frag->tag;
    ch->hdr.put_addr = frag->put_addr;
    ch->frag_id = frag->frag_id;
    ch->frag_size = (uint32_t) frag->size;
    ch->frag_offset = (uint32_t) off;
    frag->sent_offset += len;
    ++frag->segs_unacked;
    opal_btl_usnic_send_segment(module, ep, &chunk->seg, &ch->hdr, USNIC_DATA_CHANNEL);
    ++module->stats.num_chunk_sends;
    return frag->sent_offset >= frag->size ? CHUNK_LAST : CHUNK_SENT;
}

/* Send one segment of the endpoint's head frag; false if nothing could be
 * sent for lack of a chunk buffer. */
static bool send_from_queue(opal_btl_usnic_module_t *module, opal_btl_usnic_endpoint_t *ep)
{
    opal_btl_usnic_send_frag_t *frag =
        usnic_container_of(opal_list_get_first(&ep->send_queue), opal_btl_usnic_send_frag_t,
                           queue_li);
    chunk_result_t res;

    if (USNIC_FRAG_SMALL == frag->type) {
        opal_btl_usnic_send_small_frag(module, ep, frag, USNIC_DATA_CHANNEL);
        res = CHUNK_LAST;
    } else {
        /* Keep reassembly slots unique at the receiver (see USNIC_RX_FRAG_SLOTS). */
        if (0 == frag->frag_id && ep->active_large_frags >= USNIC_RX_FRAG_SLOTS) {
            opal_list_remove_item(&module->endpoints_with_sends, &ep->sends_li);
            ep->on_sends_list = false;
            return true;
        }
        res = send_next_chunk(module, ep, frag);
        if (CHUNK_NO_BUFFER == res) {
            return false;
        }
    }
    if (CHUNK_LAST == res) {
        opal_list_remove_item(&ep->send_queue, &frag->queue_li);
        frag->queued = false;
        opal_btl_usnic_frag_local_done(module, frag);
        opal_btl_usnic_frag_return_if_done(module, frag);
    }
    return true;
}

uint8_t opal_btl_usnic_window_full(opal_btl_usnic_module_t *module,
                                   opal_btl_usnic_endpoint_t *ep, uint16_t seq,
                                   uint32_t inflight)
{
    if (opal_btl_usnic_endpoint_tx_grow(ep, seq) && usnic_tx_window_room(&ep->tx, inflight)) {
        return 0;
    }
    ++module->stats.num_window_full;
    /* (a clock read only when a round starts) */
    if (ep->tx.round_active) {
        ep->tx.round_blocked = true;
    } else if (usnic_tx_bdp_limits(&ep->tx)) {
        usnic_tx_bdp_blocked(&ep->tx, opal_btl_usnic_now_us());
    }
    return USNIC_HDR_ACK_REQ;
}

void opal_btl_usnic_progress_sends(opal_btl_usnic_module_t *module)
{
    opal_btl_usnic_channel_t *data = &module->channels[USNIC_DATA_CHANNEL];
    int budget = USNIC_SENDS_PER_PASS;
    /* The pass's data sends go out together where the device can: chunk
     * buffers and GET data stay as they are until their ACK, which cannot
     * come before. */
    bool batch = NULL != module->ops->send_batch &&
                 (!usnic_list_empty(&module->pending_resend_segs) ||
                  !usnic_list_empty(&module->endpoints_with_sends));

    if (batch) {
        (void) module->ops->send_batch(data->hw, true);
    }
    if (!usnic_list_empty(&module->pending_resend_segs)) {
        opal_btl_usnic_retrans_resend(module);
    }

    while (budget > 0 && data->sd_wqe > 0 &&
           !usnic_list_empty(&module->endpoints_with_sends)) {
        opal_btl_usnic_endpoint_t *ep =
            usnic_container_of(opal_list_get_first(&module->endpoints_with_sends),
                               opal_btl_usnic_endpoint_t, sends_li);

        /* A PML callback run from this loop may have sent on the endpoint
         * since it was listed: its window or queue may be used up. */
        if (OPAL_UNLIKELY(!usnic_tx_window_open(&ep->tx) || ep->send_credits <= 0 ||
                          usnic_list_empty(&ep->send_queue))) {
            opal_list_remove_item(&module->endpoints_with_sends, &ep->sends_li);
            ep->on_sends_list = false;
            continue;
        }
        if (OPAL_UNLIKELY(!send_from_queue(module, ep))) {
            /* Out of chunk buffers: try again on a later pass, when ACKs
             * have returned some, rather than spin here. */
            break;
        }
        --budget;
        if (!ep->on_sends_list) {
            continue;
        }
        /* Round robin between endpoints, one segment at a time. */
        opal_list_remove_item(&module->endpoints_with_sends, &ep->sends_li);
        ep->on_sends_list = false;
        opal_btl_usnic_check_rts(ep);
    }
    if (batch && OPAL_SUCCESS != module->ops->send_batch(data->hw, false)) {
        opal_btl_usnic_module_fatal(module, NULL);
        return;
    }

    opal_btl_usnic_send_due_acks(module);
}

void opal_btl_usnic_put_acked(opal_btl_usnic_module_t *module, opal_btl_usnic_send_frag_t *frag)
{
    /* A flush at del_procs "acknowledges" what may never have arrived. */
    put_done(module, frag, frag->endpoint->exiting ? OPAL_ERR_UNREACH : OPAL_SUCCESS);
}

void opal_btl_usnic_send_complete(opal_btl_usnic_module_t *module, opal_btl_usnic_send_seg_t *seg,
                                  int channel)
{
    opal_btl_usnic_send_frag_t *frag = seg->frag;
    opal_btl_usnic_endpoint_t *ep = seg->ep;
    bool done;

    module->channels[channel].sd_wqe += seg->wqes;
    --seg->posted;
    ++ep->send_credits;
    done = !seg->ack_pending && 0 == seg->posted;
    if (USNIC_SEG_INLINE == seg->base.type) {
        if (done) {
            opal_btl_usnic_fl_return(&module->inline_segs,
                                     &usnic_container_of(seg, opal_btl_usnic_chunk_t, seg)->super);
        }
    } else {
        --frag->segs_posted;
        if (USNIC_SEG_CHUNK == seg->base.type && done) {
            opal_btl_usnic_fl_return(&module->chunk_segs,
                                     &usnic_container_of(seg, opal_btl_usnic_chunk_t, seg)->super);
        }
        opal_btl_usnic_frag_return_if_done(module, frag);
    }
    if (OPAL_UNLIKELY(ep->zombie)) {
        if (ep->send_credits >= module->channels[USNIC_DATA_CHANNEL].sd_num) {
            opal_list_remove_item(&module->zombie_endpoints, &ep->all_li);
            OBJ_RELEASE(ep);
        }
        return;
    }
    opal_btl_usnic_check_rts(ep);
}
