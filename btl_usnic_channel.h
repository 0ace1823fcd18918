/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 * $COPYRIGHT$
 * SPDX-License-Identifier: BSD-3-Clause
 *
 * The component's half of a channel, above the device operations: its
 * receive buffers and their batched return to the device, send-queue
 * slots, and which sends ask for a completion.
 */

#ifndef BTL_USNIC_CHANNEL_H
#define BTL_USNIC_CHANNEL_H

#include "btl_usnic_endpoint.h"
#include "btl_usnic_frag.h"
#include "btl_usnic_module.h"

BEGIN_C_DECLS

/* Bring a channel up: the device's channel, on a completion queue of cq_num
 * entries or, given cq_of, on that channel's; receive buffers of GRH + mtu,
 * all posted, then started. */
int opal_btl_usnic_channel_init(opal_btl_usnic_module_t *module, int index, int sd_num,
                                int rd_num, int cq_num, opal_btl_usnic_channel_t *cq_of,
                                uint32_t mtu);
/* The device's channel goes before the buffers it may still use. */
void opal_btl_usnic_channel_fini(opal_btl_usnic_module_t *module, int index);

/* Whether to ask for a completion of this send.  Inline data is copied when
 * the send is posted, so its buffer is free at once: only every
 * signal_every-th such send asks for a completion, which then returns the
 * send-queue slots of the silent ones before it (a queue completes in
 * order).  seg->wqes records how many slots that is. */
static inline bool opal_btl_usnic_channel_want_completion(opal_btl_usnic_channel_t *ch,
                                                          opal_btl_usnic_send_seg_t *seg)
{
    if (seg->len <= ch->max_inline && ch->unsignaled + 1 < ch->signal_every) {
        ++ch->unsignaled;
        return false;
    }
    seg->wqes = ch->unsignaled + 1;
    ch->unsignaled = 0;
    return true;
}

/* Post one send segment to the endpoint's peer: takes a send-queue slot
 * and, if the segment asks for a completion, makes it owned by the device
 * (seg->posted) until then.  (Inline: every send.) */
static inline int opal_btl_usnic_channel_post(opal_btl_usnic_module_t *module,
                                              struct mca_btl_base_endpoint_t *ep,
                                              opal_btl_usnic_send_seg_t *seg, int channel)
{
    opal_btl_usnic_channel_t *chan = &module->channels[channel];
    /* (loaded before the stores below, which might alias them for the
     * compiler) */
    usnic_btl_header_t *hdr = seg->hdr;
    uint32_t len = seg->len, lkey = seg->lkey;
    /* (data sent from where it lies is either read at post time, inline, or
     * asks for a completion: the device's reads of it end there) */
    bool signalled = opal_btl_usnic_channel_want_completion(chan, seg);
    const opal_btl_usnic_sge_t *more = NULL;
    int rc;

    /* (only chunks, on the data channel, do: a constant channel, as on the
     * fast path, leaves out the test) */
    if (USNIC_DATA_CHANNEL == channel && 0 != seg->zc.len) {
        more = &seg->zc;
        len -= seg->zc.len;
    }
    seg->base.channel = channel;
    rc = module->ops->post_send(chan->hw, &ep->dest[channel], hdr, len, lkey, more,
                                signalled ? &seg->base : NULL);
    if (OPAL_UNLIKELY(OPAL_SUCCESS != rc)) {
        return rc;
    }
    --chan->sd_wqe;
    ++module->stats.num_total_sends;
    /* (last: the caller's test of it needs no load) */
    seg->posted += signalled;
    return OPAL_SUCCESS;
}

/* Queue a receive buffer for the next batch handed back to the device. */
static inline void opal_btl_usnic_channel_queue_recv(opal_btl_usnic_channel_t *ch,
                                                     opal_btl_usnic_recv_seg_t *rseg)
{
    /* (rseg->next is set when the batch is handed back) */
    *ch->repost_tail = rseg;
    ch->repost_tail = &rseg->next;
    ++ch->repost_count;
}

/* Hand the queued receive buffers of a channel back to the device. */
int opal_btl_usnic_channel_repost(opal_btl_usnic_module_t *module, int channel);

END_C_DECLS
#endif /* BTL_USNIC_CHANNEL_H */
