/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 * $COPYRIGHT$
 * SPDX-License-Identifier: BSD-3-Clause
 *
 * Receive half of the reliability engine.  Nothing in a datagram is used
 * before usnic_pkt_validate() accepted its lengths, the sender is known and
 * its sequence number lies in the receive window.
 */

#include "opal_config.h"

#include <stdlib.h>
#include <string.h>

#include "opal/util/show_help.h"

#include "btl_usnic.h"
#include "btl_usnic_ack.h"
#include "btl_usnic_channel.h"
#include "btl_usnic_endpoint.h"
#include "btl_usnic_module.h"
#include "btl_usnic_rdma.h"
#include "btl_usnic_recv.h"
#include "btl_usnic_retrans.h"
#include "btl_usnic_retrans_ack.h"

void opal_btl_usnic_count_bad(opal_btl_usnic_module_t *module, usnic_pkt_result_t why)
{
    ++module->stats.num_bad_recvs;
    if (usnic_component.max_short_packets > 0 &&
        module->stats.num_bad_recvs == (uint64_t) usnic_component.max_short_packets) {
        opal_show_help("help-mpi-btl-usnic.txt", "received too many bad packets", true,
                       opal_process_info.nodename, module->dev_name,
                       usnic_component.max_short_packets, usnic_pkt_result_str(why));
    }
}

/* Hand a complete message to the PML, with the descriptor of the receive
 * buffer that completed it (inline: every message). */
static inline __opal_attribute_always_inline__ void
deliver(opal_btl_usnic_module_t *module, opal_btl_usnic_endpoint_t *ep,
        opal_btl_usnic_recv_seg_t *rseg, uint8_t tag, void *data, size_t len)
{
    /* The trigger table has MCA_BTL_TAG_MAX entries: tag 255 is not one,
     * it is ours (emulated GET and atomics). */
    if (OPAL_UNLIKELY(tag >= MCA_BTL_TAG_MAX ||
                      NULL == mca_btl_base_active_message_trigger[tag].cbfunc)) {
        if (USNIC_TAG_RDMA == tag) {
            opal_btl_usnic_rdma_recv(module, ep, data, len);
        } else {
            opal_btl_usnic_count_bad(module, USNIC_PKT_BAD_TYPE);
        }
        return;
    }
    rseg->pml_seg.seg_addr.pval = data;
    rseg->pml_seg.seg_len = len;
    usnic_deliver_to_pml(&module->super, ep, &mca_btl_base_active_message_trigger[tag], tag,
                         &rseg->pml_desc);
}

/* A reassembly buffer after its delivery: kept as the spare if it is the
 * larger, up to the largest message the PML sends in one piece. */
static void recv_buf_done(opal_btl_usnic_module_t *module, uint8_t *buf, uint32_t size)
{
    if (size > module->super.btl_max_send_size ||
        (NULL != module->rx_spare && module->rx_spare_size >= size)) {
        free(buf);
        return;
    }
    free(module->rx_spare);
    module->rx_spare = buf;
    module->rx_spare_size = size;
}

/* Whether the registration a PUT names lets it write len bytes at addr;
 * a wrong handle is counted here, the caller counts the drop. */
static inline bool put_allowed(opal_btl_usnic_module_t *module, opal_btl_usnic_endpoint_t *ep,
                               const usnic_reg_ref_t *ref, uint64_t addr, uint64_t len)
{
    bool bad_handle;

    if (OPAL_LIKELY(NULL != opal_btl_usnic_reg_find(ref, MCA_BTL_REG_FLAG_REMOTE_WRITE, addr, len,
                                                    &bad_handle))) {
        return true;
    }
    if (bad_handle) {
        opal_btl_usnic_rdma_bad_handle(module, ep, "PUT");
    }
    return false;
}

/* A first chunk of a message: where its bytes go (the initiator's GET
 * buffer, the PUT target, the spare reassembly buffer or a new one) and the
 * slot's record of it.  False: dropped, and counted where bad. */
static bool chunk_start(opal_btl_usnic_module_t *module, opal_btl_usnic_endpoint_t *ep,
                        usnic_rx_frag_t *slot, const usnic_btl_chunk_header_t *ch,
                        const usnic_reg_ref_t *ref, uint16_t first_seq, bool get_data)
{
    if (get_data) {
        slot->buf = opal_btl_usnic_rdma_get_dest(module, ep, ch->hdr.put_addr, ch->frag_size);
        if (NULL == slot->buf) {
            opal_btl_usnic_count_bad(module, USNIC_PKT_BAD_RDMA);
            return false;
        }
    } else if (0 != ch->hdr.put_addr &&
               !put_allowed(module, ep, ref, ch->hdr.put_addr, ch->frag_size)) {
        opal_btl_usnic_count_bad(module, USNIC_PKT_BAD_PUT);
        return false;
    } else if (0 != ch->hdr.put_addr) {
        slot->buf = (uint8_t *)(uintptr_t) ch->hdr.put_addr;
    } else if (NULL != module->rx_spare && module->rx_spare_size >= ch->frag_size) {
        slot->buf = module->rx_spare;
        slot->buf_size = module->rx_spare_size;
        module->rx_spare = NULL;
    } else {
        slot->buf = malloc(ch->frag_size);
        slot->buf_size = ch->frag_size;
    }
    if (NULL == slot->buf) {
        return false;
    }
    ++ep->rx_frags_busy;
    slot->frag_id = ch->frag_id;
    slot->frag_size = ch->frag_size;
    slot->bytes_left = ch->frag_size;
    slot->put_addr = ch->hdr.put_addr;
    slot->tag = ch->hdr.tag;
    slot->discard = false;
    slot->first_seq = first_seq;
    return true;
}

/* A later chunk of the message in its slot: false if it belongs to
 * another tiling.  The target may have been deregistered since the first
 * chunk (or the GET ended with its endpoint): the rest is accepted (so that
 * the sender's window moves on) but not written, and counted. */
static bool chunk_continue(opal_btl_usnic_module_t *module, opal_btl_usnic_endpoint_t *ep,
                           usnic_rx_frag_t *slot, const usnic_btl_chunk_header_t *ch,
                           const usnic_reg_ref_t *ref, uint16_t first_seq, bool get_data)
{
    if (first_seq != slot->first_seq) {
        ++module->stats.num_badfrag_recvs;
        return false;
    }
    if (0 != slot->put_addr && !slot->discard &&
        !(get_data ? opal_btl_usnic_rdma_get_live(module, ep, slot->put_addr, slot->frag_size)
                   : put_allowed(module, ep, ref, slot->put_addr + ch->frag_offset,
                                 ch->hdr.payload_len))) {
        slot->discard = true;
    }
    return true;
}

/* The last chunk is in: the message goes to the PML (a send), the GET
 * completes, or the PUT is done; the slot is free again (and the slots go
 * back to the pool when none is busy). */
static void chunk_complete(opal_btl_usnic_module_t *module, opal_btl_usnic_endpoint_t *ep,
                           opal_btl_usnic_recv_seg_t *rseg, usnic_rx_frag_t *slot,
                           const usnic_btl_chunk_header_t *ch, bool get_data)
{
    bool put = 0 != slot->put_addr;

    if (!put) {
        deliver(module, ep, rseg, slot->tag, slot->buf, slot->frag_size);
        recv_buf_done(module, slot->buf, slot->buf_size);
    } else if (get_data && !slot->discard) {
        opal_btl_usnic_rdma_get_done(module, ep, slot->put_addr, slot->frag_size);
    }
    slot->buf = NULL;
    slot->frag_id = 0;
    if (0 == --ep->rx_frags_busy) {
        opal_btl_usnic_rx_frags_put(ep);
    }
    /* A PUT completes at its origin when acknowledged; a send's ACK can
     * wait to ride on the answer, unless the sender asks. */
    opal_btl_usnic_schedule_ack(ep, put || (ch->hdr.flags & USNIC_HDR_ACK_REQ));
}

/* Reassembly of a chunk; returns false if the chunk was dropped without
 * being recorded (so that the sender will send it again). */
static bool recv_chunk(opal_btl_usnic_module_t *module, opal_btl_usnic_endpoint_t *ep,
                       opal_btl_usnic_recv_seg_t *rseg, const usnic_btl_chunk_header_t *ch,
                       const uint8_t *payload)
{
    usnic_rx_frag_t *slot;
    uint32_t len = ch->hdr.payload_len;
    uint16_t first_seq;
    bool get_data = usnic_is_get_data(ch->hdr.tag, ch->hdr.put_addr);
    bool ok = false;
    uint32_t mcp = module->max_chunk_payload;
    const usnic_reg_ref_t *ref = NULL;

    if (OPAL_UNLIKELY(usnic_is_put(ch->hdr.tag, ch->hdr.put_addr))) {
        /* the target's registration, then the data */
        ref = (const usnic_reg_ref_t *) payload;
        payload += sizeof(*ref);
        mcp -= (uint32_t) sizeof(*ref);
    }
    if (!usnic_chunk_tiles(ch, mcp)) {
        ++module->stats.num_badfrag_recvs;
        return false;
    }
    first_seq = usnic_chunk_first_seq(ch, mcp);

    if (NULL == ep->rx_frags && NULL == opal_btl_usnic_rx_frags_get(ep)) {
        return false;
    }
    slot = &ep->rx_frags[ch->frag_id % USNIC_RX_FRAG_SLOTS];
    switch (usnic_rx_classify_chunk(slot, ch)) {
    case USNIC_CHUNK_BUSY:
    case USNIC_CHUNK_MISMATCH:
        ++module->stats.num_badfrag_recvs;
        break;
    case USNIC_CHUNK_NEW:
        ok = chunk_start(module, ep, slot, ch, ref, first_seq, get_data);
        break;
    case USNIC_CHUNK_FITS:
        ok = chunk_continue(module, ep, slot, ch, ref, first_seq, get_data);
        break;
    }
    if (!ok) {
        return false;
    }
    if (len > slot->bytes_left) {
        ++module->stats.num_badfrag_recvs;
        return false;
    }
    if (OPAL_UNLIKELY(slot->discard)) {
        opal_btl_usnic_count_bad(module, get_data ? USNIC_PKT_BAD_RDMA : USNIC_PKT_BAD_PUT);
    } else {
        memcpy(slot->buf + ch->frag_offset, payload, len);
    }
    slot->bytes_left -= len;
    usnic_rx_mark(&ep->rx, ch->hdr.pkt_seq);
    if (0 == slot->bytes_left) {
        chunk_complete(module, ep, rseg, slot, ch, get_data);
    } else {
        opal_btl_usnic_schedule_ack(ep, ch->hdr.flags & USNIC_HDR_ACK_REQ);
    }
    return true;
}

/* Whether the device saw the datagram come from the endpoint's queue pair
 * for this channel (peers send on each channel to the same one) and from
 * its GID.  The sender id in the header is only a claim. */
static inline bool sent_by(const opal_btl_usnic_module_t *module,
                          const opal_btl_usnic_endpoint_t *ep, int channel, const uint8_t *grh,
                          const opal_btl_usnic_cqe_t *cqe)
{
    if (OPAL_UNLIKELY(!cqe->grh || cqe->src_qp != ep->remote.qp_num[channel])) {
        return false;
    }
    if (module->grh_ipv4) {
        return 0 == memcmp(grh + USNIC_GRH_IPV4_SRC_OFF, ep->remote.gid + 12, 4);
    }
    return 0 == memcmp(grh + USNIC_GRH_SGID_OFF, ep->remote.gid, sizeof(ep->remote.gid));
}

/* Whether seq (sent after chan_prev on its channel) is new and inside the
 * receive window; anything else is counted and answered with an ACK at
 * once (the sender may be missing one). */
static inline bool in_window(opal_btl_usnic_module_t *module, opal_btl_usnic_endpoint_t *ep,
                             uint16_t seq, uint16_t chan_prev)
{
    /* The usual case, in order: the next expected one is never marked yet. */
    if (OPAL_LIKELY(seq == ep->rx.next_contig)) {
        return true;
    }
    switch (usnic_rx_classify(&ep->rx, seq)) {
    case USNIC_RX_ACCEPT:
        /* Above a hole, which may be a segment still on its way through
         * the other channel; the one sent before this on its own channel,
         * if missing, is lost. */
        if (usnic_rx_note_lost(&ep->rx, chan_prev, seq)) {
            opal_btl_usnic_schedule_ack(ep, true);
        }
        return true;
    case USNIC_RX_DUP:
        /* above a hole: the ACK it draws points at the hole */
        ++module->stats.num_dup_recvs;
        break;
    case USNIC_RX_OOW_LOW:
        /* had it, and all before it: the sender's resend was not needed
         * (a resend of the oldest unacknowledged segment always lands
         * here when the original had arrived) */
        ++module->stats.num_oow_low_recvs;
        if (ep->rx_filled && seq == ep->rx_filled_seq) {
            /* a copy of a resend that was needed (the network's duplicate;
             * a lap later, at worst a spurious timeout not undone) */
            break;
        }
        /* before its ACK left: this receiver was late, no ACK was lost */
        ep->rx_report = (uint8_t)((ep->rx_report & ~USNIC_ACK_DUP_LATE) | USNIC_ACK_DUP_SEEN |
                                  (USNIC_SEQ_DIFF16(seq, ep->rx_acked) > 0 ? USNIC_ACK_DUP_LATE
                                                                           : 0));
        ep->rx_dup_seq = seq;
        break;
    case USNIC_RX_OOW_HIGH:
        ++module->stats.num_oow_high_recvs;
        break;
    }
    opal_btl_usnic_schedule_ack(ep, true);
    return false;
}

/* The checks every datagram passes before anything in it is used: its
 * length and header, a known sender that is not leaving, and the queue
 * pair and GID the device saw it come from.  Returns that sender, or NULL
 * with the drop counted. */
static inline __opal_attribute_always_inline__ opal_btl_usnic_endpoint_t *
recv_sender(opal_btl_usnic_module_t *module, const opal_btl_usnic_recv_seg_t *rseg,
            const opal_btl_usnic_cqe_t *cqe, const usnic_btl_header_t *hdr)
{
    opal_btl_usnic_endpoint_t *ep;
    uint32_t byte_len = cqe->len;
    usnic_pkt_result_t res;

    if (OPAL_UNLIKELY(byte_len < USNIC_GRH_LEN || byte_len > rseg->len)) {
        opal_btl_usnic_count_bad(module, USNIC_PKT_SHORT);
        return NULL;
    }
    res = usnic_pkt_validate(hdr, byte_len - USNIC_GRH_LEN, USNIC_MAX_FRAG_SIZE);
    if (OPAL_UNLIKELY(USNIC_PKT_OK != res)) {
        opal_btl_usnic_count_bad(module, res);
        return NULL;
    }
    ep = opal_btl_usnic_lookup_sender(module, hdr->sender);
    if (OPAL_UNLIKELY(NULL == ep || ep->exiting)) {
        ++module->stats.num_unk_recvs;
        return NULL;
    }
    if (OPAL_UNLIKELY(!sent_by(module, ep, rseg->base.channel, rseg->buf, cqe))) {
        ++module->stats.num_forged_recvs;
        return NULL;
    }
    return ep;
}

/* What the header tells the sending side of this endpoint: the ACK it
 * carries, and whether it is a resend (reported back in our next ACK). */
static inline __opal_attribute_always_inline__ void
recv_header_news(opal_btl_usnic_endpoint_t *ep, const usnic_btl_header_t *hdr)
{
    if (hdr->ack_present) {
        if (OPAL_UNLIKELY(0 != hdr->ack_flags)) {
            opal_btl_usnic_flagged_ack(ep, hdr->ack_seq, hdr->ack_flags, hdr->dup_seq,
                                       hdr->hole_run);
        } else {
            opal_btl_usnic_handle_ack(ep, hdr->ack_seq);
        }
    }
    if (OPAL_UNLIKELY(hdr->flags & USNIC_HDR_RESEND)) {
        ep->rx_report |= USNIC_ACK_RESEND_SEEN;
        /* it fills a hole: a copy of it later proves nothing spurious; and
         * the network lost the original (our timer resends without a probe
         * for a while; a copy of what we had proves no loss) */
        if (USNIC_RX_ACCEPT == usnic_rx_classify(&ep->rx, hdr->pkt_seq)) {
            ep->rx_filled_seq = hdr->pkt_seq;
            ep->rx_filled = true;
            ep->module->loss_seen_us = opal_btl_usnic_now_us();
        }
    }
}

/* A one-datagram fragment inside the window, off the fast path: a send
 * out of order or a PUT.  False: dropped unrecorded, counted. */
static bool recv_frag(opal_btl_usnic_module_t *module, opal_btl_usnic_endpoint_t *ep,
                      opal_btl_usnic_recv_seg_t *rseg, usnic_btl_header_t *hdr)
{
    /* Not recorded as received: a legitimate sender would resend, and
     * a broken one ends at the peer timeout, never in silent loss.  (GET
     * data is always chunked.) */
    if (OPAL_UNLIKELY(usnic_is_get_data(hdr->tag, hdr->put_addr))) {
        opal_btl_usnic_count_bad(module, USNIC_PKT_BAD_RDMA);
        return false;
    }
    /* (a PUT's payload: the target's registration, then the data) */
    const usnic_reg_ref_t *ref = (const usnic_reg_ref_t *)(hdr + 1);
    uint32_t n = hdr->payload_len - (uint32_t) sizeof(*ref);

    if (0 != hdr->put_addr && !put_allowed(module, ep, ref, hdr->put_addr, n)) {
        opal_btl_usnic_count_bad(module, USNIC_PKT_BAD_PUT);
        return false;
    }
    ++module->stats.num_frag_recvs;
    usnic_rx_mark(&ep->rx, hdr->pkt_seq);
    /* A PUT is complete at its origin only when acknowledged. */
    opal_btl_usnic_schedule_ack(ep, 0 != hdr->put_addr || (hdr->flags & USNIC_HDR_ACK_REQ));
    if (0 != hdr->put_addr) {
        memcpy((void *)(uintptr_t) hdr->put_addr, ref + 1, n);
    } else {
        deliver(module, ep, rseg, hdr->tag, hdr + 1, hdr->payload_len);
    }
    return true;
}

void opal_btl_usnic_recv(opal_btl_usnic_module_t *module, opal_btl_usnic_recv_seg_t *rseg,
                         const opal_btl_usnic_cqe_t *cqe)
{
    usnic_btl_header_t *hdr = (usnic_btl_header_t *)(rseg->buf + USNIC_GRH_LEN);
    opal_btl_usnic_endpoint_t *ep;
    uint64_t depth;

    ++module->stats.num_total_recvs;
    ep = recv_sender(module, rseg, cqe, hdr);
    if (OPAL_UNLIKELY(NULL == ep)) {
        goto repost;
    }
    recv_header_news(ep, hdr);
    /* The usual datagram: a small frag, the next one in order; the general
     * path below would come to the same after checking each again. */
    if (OPAL_LIKELY(USNIC_PAYLOAD_TYPE_FRAG == hdr->payload_type && 0 == hdr->put_addr &&
                    hdr->pkt_seq == ep->rx.next_contig)) {
        usnic_rx_mark(&ep->rx, hdr->pkt_seq);
        ++module->stats.num_frag_recvs;
        opal_btl_usnic_schedule_ack(ep, hdr->flags & USNIC_HDR_ACK_REQ);
        deliver(module, ep, rseg, hdr->tag, hdr + 1, hdr->payload_len);
        goto done;
    }
    if (USNIC_PAYLOAD_TYPE_ACK == hdr->payload_type) {
        ++module->stats.num_ack_recvs;
        /* A probe: any ACK from now on covers what arrived before it (one
         * completion queue for both channels, in arrival order). */
        if (OPAL_UNLIKELY(hdr->flags & USNIC_HDR_ACK_REQ)) {
            ep->rx_report |= USNIC_ACK_PROBED;
            if (USNIC_SEQ_DIFF16(hdr->pkt_seq, ep->rx_acked) > 0 &&
                USNIC_SEQ_DIFF16(hdr->pkt_seq, ep->rx.next_contig) < 0) {
                ep->rx_report |= USNIC_ACK_PROBE_LATE;
            }
            opal_btl_usnic_schedule_ack(ep, true);
        }
        goto repost;
    }
    if (OPAL_UNLIKELY(!in_window(module, ep, hdr->pkt_seq, hdr->chan_prev))) {
        goto repost;
    }
    if (USNIC_PAYLOAD_TYPE_FRAG == hdr->payload_type) {
        if (!recv_frag(module, ep, rseg, hdr)) {
            goto repost;
        }
    } else {
        const usnic_btl_chunk_header_t *ch = (const usnic_btl_chunk_header_t *) hdr;
        if (recv_chunk(module, ep, rseg, ch, (const uint8_t *)(ch + 1))) {
            ++module->stats.num_chunk_recvs;
        }
    }
done:
    /* from the last ACK sent to the highest sequence received */
    depth = (uint16_t)(ep->rx.highest_rcvd - ep->rx_acked);
    if (depth > module->stats.max_rcvd_window_size) {
        module->stats.max_rcvd_window_size = depth;
    }

repost:
    opal_btl_usnic_channel_queue_recv(rseg->chan, rseg);
}
