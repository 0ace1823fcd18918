/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 * $COPYRIGHT$
 * SPDX-License-Identifier: BSD-3-Clause
 *
 * The send half of the reliability engine: sequencing, posting, chunking
 * and send completions.
 */

#ifndef BTL_USNIC_SEND_H
#define BTL_USNIC_SEND_H

#include "btl_usnic_ack.h"
#include "btl_usnic_channel.h"
#include "btl_usnic_connectivity.h"
#include "btl_usnic_endpoint.h"
#include "btl_usnic_frag.h"
#include "btl_usnic_module.h"
#include "btl_usnic_retrans.h"

BEGIN_C_DECLS

/* Put the endpoint on the module's ready list if it can send now (inline:
 * every ACK asks). */
static inline void opal_btl_usnic_check_rts(opal_btl_usnic_endpoint_t *ep)
{
    if (!ep->on_sends_list && !usnic_list_empty(&ep->send_queue) && !ep->failed &&
        !ep->exiting && ep->send_credits > 0 && usnic_tx_window_open(&ep->tx)) {
        opal_list_append(&ep->module->endpoints_with_sends, &ep->sends_li);
        ep->on_sends_list = true;
        opal_btl_usnic_work_now(ep->module);
    }
}

/* Queue a frag whose segments are filled in; sending happens in progress. */
void opal_btl_usnic_enqueue_frag(opal_btl_usnic_endpoint_t *ep, opal_btl_usnic_send_frag_t *frag);

/* Post a segment (first send or resend); a failure means the device is
 * gone and is fatal.  (Inline: every send.) */
static inline __opal_attribute_always_inline__ void
opal_btl_usnic_send_post(opal_btl_usnic_module_t *module, opal_btl_usnic_endpoint_t *ep,
                         opal_btl_usnic_send_seg_t *seg, int channel)
{
    if (OPAL_UNLIKELY(OPAL_SUCCESS != opal_btl_usnic_channel_post(module, ep, seg, channel))) {
        opal_btl_usnic_module_fatal(module, NULL);
        return;
    }
    /* Only a send that asked for a completion still holds its buffer. */
    if (0 != seg->posted) {
        if (NULL != seg->frag) {
            ++seg->frag->segs_posted;
        }
        --ep->send_credits;
    }
}

/* The window is full with segment seq (inflight with it): a send table
 * smaller than the window grows instead; else the sender waits for an ACK
 * and the path's window measures the round.  Returns the header's flags. */
uint8_t opal_btl_usnic_window_full(opal_btl_usnic_module_t *module,
                                   opal_btl_usnic_endpoint_t *ep, uint16_t seq,
                                   uint32_t inflight);

/* First transmission of a segment whose caller filled in what it carries
 * (length, tag, PUT address; sender and type are the buffer's) in hdr (seg->hdr, which the caller's
 * stores through it would make the compiler load again): give it the next
 * sequence number, record it in the window, piggy-back an owed ACK, post,
 * arm the timer (inlined: every send). */
static inline __opal_attribute_always_inline__ void
opal_btl_usnic_send_segment(opal_btl_usnic_module_t *module, opal_btl_usnic_endpoint_t *ep,
                            opal_btl_usnic_send_seg_t *seg, usnic_btl_header_t *hdr,
                            int channel)
{
    uint16_t seq;
    uint64_t inflight;

    /* no send table held (nothing was in flight), or the very first send */
    if (OPAL_UNLIKELY(!ep->tx_ready) &&
        OPAL_SUCCESS != opal_btl_usnic_frag_tx_setup(module, ep)) {
        return;
    }
    seq = ep->tx.next_seq_to_send++;
    /* (with this one; once, for the ACK request and the statistic) */
    inflight = usnic_tx_window_inflight(&ep->tx);

    seg->seq = seq;
    hdr->pkt_seq = seq;
    /* what the receiver tells a loss from a segment late through the
     * other channel by */
    hdr->chan_prev = ep->chan_last_seq[channel];
    ep->chan_last_seq[channel] = seq;
    /* The window is full with this one: without an ACK at once the
     * sender would stall for the receiver's delayed ACK. */
    if (OPAL_LIKELY(usnic_tx_window_room(&ep->tx, inflight))) {
        hdr->flags = 0;
    } else {
        hdr->flags = opal_btl_usnic_window_full(module, ep, seq, (uint32_t) inflight);
    }
    opal_btl_usnic_piggyback_ack(ep, hdr);
    ep->sent_segs[seq & ep->tx_mask] = seg;
    seg->ep = ep;
    seg->ack_pending = true;
    opal_btl_usnic_send_post(module, ep, seg, channel);

    opal_btl_usnic_retrans_first_send(ep, seq);

    if (inflight > module->stats.max_sent_window_size) {
        module->stats.max_sent_window_size = inflight;
    }
}

/* A small frag is one datagram: header and payload already in place
 * (inlined: every small send). */
static inline __opal_attribute_always_inline__ void
opal_btl_usnic_send_small_frag(opal_btl_usnic_module_t *module, opal_btl_usnic_endpoint_t *ep,
                               opal_btl_usnic_send_frag_t *frag, int channel)
{
    /* (loaded first: the stores through hdr might alias the frag) */
    usnic_btl_header_t *hdr = frag->seg.hdr;
    size_t size = frag->size;
    uint8_t tag = frag->tag;
    uint64_t put_addr = frag->put_addr;

    frag->seg.len = sizeof(*hdr) + size;
    frag->segs_unacked = 1;
    hdr->payload_len = (uint16_t) size;
    hdr->tag = tag;
    hdr->put_addr = put_addr;
    opal_btl_usnic_send_segment(module, ep, &frag->seg, hdr, channel);
    ++module->stats.num_frag_sends;
}

/* Whether a datagram of at most max_tiny_payload may go to ep on the
 * priority-channel fast path now (inline: every sendi).  The caller has
 * checked that the endpoint has not failed. */
static inline __opal_attribute_always_inline__ bool
opal_btl_usnic_fast_open(opal_btl_usnic_module_t *module, opal_btl_usnic_endpoint_t *ep)
{
    opal_btl_usnic_channel_t *prio = &module->channels[USNIC_PRIORITY_CHANNEL];

    /* Never overtake queued frags, leave send slots for ACKs, and never send
     * more than the peer's priority queue has buffers for. */
    return usnic_list_empty(&ep->send_queue) && usnic_tx_window_open(&ep->tx) &&
           prio->sd_wqe >= module->fastsend_wqe_thresh && ep->prio_inflight < ep->prio_window;
}

/* Send a sendi's inline datagram (header and payload, size bytes of it, in
 * place) on the fast path, which the caller found open.  No frag: the PML
 * never sees a descriptor for it, and its ACK (or its completion, if the
 * device still holds it then) returns it (inline: every sendi). */
static inline __opal_attribute_always_inline__ void
opal_btl_usnic_send_inline(opal_btl_usnic_module_t *module, opal_btl_usnic_endpoint_t *ep,
                           opal_btl_usnic_send_seg_t *seg, size_t size, uint8_t tag)
{
    usnic_btl_header_t *hdr = seg->hdr;

    seg->len = (uint32_t)(sizeof(*hdr) + size);
    hdr->payload_len = (uint16_t) size;
    hdr->tag = tag;
    opal_btl_usnic_send_segment(module, ep, seg, hdr, USNIC_PRIORITY_CHANNEL);
    seg->prio = true;
    ++ep->prio_inflight;
    ++module->stats.num_frag_sends;
    ++module->stats.num_fast_sends;
}

/* Try the priority-channel fast path for a small frag: true if it went out
 * (btl_send of a descriptor).  The caller has checked that the endpoint has
 * not failed and that the frag fits max_tiny_payload. */
static inline bool opal_btl_usnic_send_fast(opal_btl_usnic_module_t *module,
                                            opal_btl_usnic_endpoint_t *ep,
                                            opal_btl_usnic_send_frag_t *frag)
{
    if (!opal_btl_usnic_fast_open(module, ep)) {
        return false;
    }
    opal_btl_usnic_send_small_frag(module, ep, frag, USNIC_PRIORITY_CHANNEL);
    /* (after the send, which then finds the frag's fields as they were
     * stored: these stores might alias them for the compiler) */
    frag->seg.prio = true;
    ++ep->prio_inflight;
    ++module->stats.num_fast_sends;
    return true;
}

/* Resends, then new sends, then due standalone ACKs. */
void opal_btl_usnic_progress_sends(opal_btl_usnic_module_t *module);

/* A send work request finished (successfully or not). */
void opal_btl_usnic_send_complete(opal_btl_usnic_module_t *module, opal_btl_usnic_send_seg_t *seg,
                                  int channel);

/* Tell the PML its send buffer is free again (once per frag). */
void opal_btl_usnic_frag_local_done(opal_btl_usnic_module_t *module,
                                    opal_btl_usnic_send_frag_t *frag);

/* A queued frag will never be (fully) sent (its endpoint goes away): its
 * PML callback, if not yet run, reports OPAL_ERR_UNREACH. */
void opal_btl_usnic_frag_abort(opal_btl_usnic_module_t *module, opal_btl_usnic_send_frag_t *frag);

/* All of an emulated PUT is acknowledged: its completion callback. */
void opal_btl_usnic_put_acked(opal_btl_usnic_module_t *module, opal_btl_usnic_send_frag_t *frag);

/* A segment sent to ep is acknowledged (called by the ACK code; inline:
 * every acknowledged segment). */
static inline void opal_btl_usnic_seg_acked(opal_btl_usnic_module_t *module,
                                            opal_btl_usnic_endpoint_t *ep,
                                            opal_btl_usnic_send_seg_t *seg)
{
    opal_btl_usnic_send_frag_t *frag;

    if (seg->on_resend_list) {
        opal_list_remove_item(&module->pending_resend_segs, &seg->resend_li);
        seg->on_resend_list = false;
    }
    seg->ack_pending = false;
    if (seg->prio) {
        seg->prio = false;
        --ep->prio_inflight;
    }
    if (USNIC_SEG_INLINE == seg->base.type) {
        if (0 == seg->posted) {
            opal_btl_usnic_fl_return(&module->inline_segs,
                                     &usnic_container_of(seg, opal_btl_usnic_chunk_t, seg)->super);
        }
        return;
    }
    frag = seg->frag;
    if (USNIC_SEG_CHUNK == seg->base.type && 0 == seg->posted) {
        opal_btl_usnic_fl_return(&module->chunk_segs,
                                 &usnic_container_of(seg, opal_btl_usnic_chunk_t, seg)->super);
    }
    /* A large frag still being chunked is not done even if all of its
     * chunks so far are acknowledged. */
    if (0 != --frag->segs_unacked || frag->queued) {
        return;
    }
    if (frag->sendi) {
        /* The usual end of a small send (frag_reset_sendi), as
         * frag_return_if_done would do it. */
        if (0 == frag->segs_posted) {
            opal_btl_usnic_fl_return(&module->small_send_frags, &frag->base.super);
        }
        return;
    }
    if (USNIC_FRAG_LARGE == frag->type) {
        --ep->active_large_frags;
    } else if (0 == frag->put_addr && !frag->cb_deferred && 0 == frag->segs_posted &&
               (frag->base.des_flags & MCA_BTL_DES_FLAGS_BTL_OWNERSHIP)) {
        /* The usual end of a small send, as frag_return_if_done would do it. */
        opal_btl_usnic_fl_return(&module->small_send_frags, &frag->base.super);
        return;
    }
    if (0 != frag->put_addr) {
        opal_btl_usnic_put_acked(module, frag);
    }
    opal_btl_usnic_frag_return_if_done(module, frag);
}

END_C_DECLS
#endif /* BTL_USNIC_SEND_H */
