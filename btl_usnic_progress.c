/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 * $COPYRIGHT$
 * SPDX-License-Identifier: BSD-3-Clause
 *
 * Progress: the component's callback, and in it each module's pass: poll
 * the channels' shared CQ, dispatch each completion (receive, send done,
 * ACK done, error), return receive buffers, run the retransmit timers and
 * the send engine, and judge silent peers.
 */

#include "opal_config.h"

#include <sched.h>
#include <string.h>

#include "opal/util/proc.h"

#include "btl_usnic.h"
#include "btl_usnic_ack.h"
#include "btl_usnic_channel.h"
#include "btl_usnic_connectivity.h"
#include "btl_usnic_endpoint.h"
#include "btl_usnic_frag.h"
#include "btl_usnic_module.h"
#include "btl_usnic_proc.h"
#include "btl_usnic_rdma.h"
#include "btl_usnic_recv.h"
#include "btl_usnic_retrans.h"
#include "btl_usnic_send.h"
#include "btl_usnic_util.h"

/* A send work request finished (a standalone ACK or a data segment; out
 * of line: the receive loop keeps fewer values live). */
static __opal_attribute_noinline__ void send_seg_done(opal_btl_usnic_module_t *module,
                                                      opal_btl_usnic_seg_base_t *base)
{
    opal_btl_usnic_send_seg_t *seg = usnic_container_of(base, opal_btl_usnic_send_seg_t, base);

    if (USNIC_SEG_ACK == base->type) {
        module->channels[base->channel].sd_wqe += seg->wqes;
        --seg->posted;
        opal_btl_usnic_fl_return(&module->ack_segs,
                                 &usnic_container_of(seg, opal_btl_usnic_ack_item_t, seg)->super);
    } else {
        opal_btl_usnic_send_complete(module, seg, base->channel);
    }
}

/* A completion with an error, or one of a send that asked for none (it
 * gets one only when it failed); out of line. */
static __opal_attribute_noinline__ void handle_error(opal_btl_usnic_module_t *module,
                                                     const opal_btl_usnic_cqe_t *cqe)
{
    opal_btl_usnic_seg_base_t *base = cqe->cookie;

    if (USNIC_CQE_FLUSHED == cqe->status) {
        module->ops->async_drain(module->dev);
        opal_btl_usnic_show_fatal("non-receive completion error",
                       opal_process_info.nodename, module->dev_name,
                       NULL == base ? "unknown (a send that asked for no completion)"
                       : USNIC_PRIORITY_CHANNEL == base->channel ? "priority" : "data",
                       module->ops->status_str(cqe->code), cqe->code);
        opal_btl_usnic_module_fatal(module, NULL);
        return;
    }
    if (NULL == base) {
        ++module->stats.num_send_errors;
        return;
    }
    if (USNIC_SEG_RECV == base->type) {
        opal_btl_usnic_recv_seg_t *rseg = usnic_container_of(base, opal_btl_usnic_recv_seg_t,
                                                             base);
        ++module->stats.num_recv_errors;
        opal_btl_usnic_channel_queue_recv(rseg->chan, rseg);
        return;
    }
    /* A lost send is recovered by the retransmit timer. */
    ++module->stats.num_send_errors;
    send_seg_done(module, base);
}

static inline __attribute__((always_inline)) void
handle_completion(opal_btl_usnic_module_t *module, const opal_btl_usnic_cqe_t *cqe)
{
    opal_btl_usnic_seg_base_t *base = cqe->cookie;

    if (OPAL_UNLIKELY(USNIC_CQE_OK != cqe->status || NULL == base)) {
        handle_error(module, cqe);
    } else if (USNIC_SEG_RECV == base->type) {
        opal_btl_usnic_recv(module, usnic_container_of(base, opal_btl_usnic_recv_seg_t, base),
                            cqe);
    } else {
        send_seg_done(module, base);
    }
}

/* Whether a batch holds receives of the priority channel (read before
 * they are dispatched, which returns their buffers). */
static bool has_priority_recv(const opal_btl_usnic_cqe_t *cqe, int n)
{
    for (int i = 0; i < n; ++i) {
        const opal_btl_usnic_seg_base_t *base = cqe[i].cookie;
        if (NULL != base && USNIC_SEG_RECV == base->type &&
            USNIC_PRIORITY_CHANNEL == base->channel) {
            return true;
        }
    }
    return false;
}

/* One batch of completions from the CQ both channels share, dispatched:
 * its size, or -1 when the poll failed (fatal).  *more: the batch was full
 * and held priority receives, so more of them may wait. */
static inline __attribute__((always_inline)) int
poll_batch(opal_btl_usnic_module_t *module, opal_btl_usnic_cqe_t *cqe, bool *more)
{
    int n = module->ops->poll(module->channels[USNIC_PRIORITY_CHANNEL].hw, cqe,
                              USNIC_POLL_BATCH);

    if (OPAL_UNLIKELY(n < 0)) {
        opal_btl_usnic_module_fatal(module, NULL);
        return -1;
    }
    *more = OPAL_UNLIKELY(USNIC_POLL_BATCH == n) && has_priority_recv(cqe, n);
    for (int i = 0; i < n; ++i) {
        handle_completion(module, &cqe[i]);
    }
    /* Buffers go back to the device after each batch, before the ACKs that
     * let peers refill them (a batch's own sends may carry one: the
     * published depths leave room for it). */
    if (0 != n) {
        for (int c = 0; c < USNIC_NUM_CHANNELS; ++c) {
            if (module->channels[c].repost_count >= module->channels[c].repost_batch &&
                OPAL_UNLIKELY(OPAL_SUCCESS != opal_btl_usnic_channel_repost(module, c))) {
                opal_btl_usnic_module_fatal(module, NULL);
            }
        }
    }
    return n;
}

/* After a full batch with priority receives: poll on while that holds, up
 * to as many completions as the priority channel can have (its send plus
 * receive depth).  Returns the size of the last batch (USNIC_POLL_BATCH:
 * maybe more left). */
static int drain_priority(opal_btl_usnic_module_t *module, opal_btl_usnic_cqe_t *cqe, int *count)
{
    const opal_btl_usnic_channel_t *prio = &module->channels[USNIC_PRIORITY_CHANNEL];
    bool more = true;
    int n = USNIC_POLL_BATCH;

    for (int polled = n; more && polled < prio->sd_num + prio->rd_num && !module->dead;
         polled += n) {
        n = poll_batch(module, cqe, &more);
        if (OPAL_UNLIKELY(n < 0)) {
            return 0;
        }
        *count += n;
    }
    return n;
}

void opal_btl_usnic_module_drain_sends(opal_btl_usnic_module_t *module)
{
    opal_btl_usnic_cqe_t cqe[USNIC_POLL_BATCH];
    opal_btl_usnic_hwchan_t *cq = module->channels[USNIC_PRIORITY_CHANNEL].hw;
    int n;

    if (NULL == cq) {
        return;
    }
    while ((n = module->ops->poll(cq, cqe, USNIC_POLL_BATCH)) > 0) {
        for (int i = 0; i < n; ++i) {
            opal_btl_usnic_seg_base_t *base = cqe[i].cookie;
            if (NULL != base && USNIC_SEG_RECV != base->type) {
                send_seg_done(module, base);
            }
        }
    }
}

/* The pass's work besides its poll and timers: queued work
 * (module->work_queued) or owed ACKs that are due (out of line: a waiting
 * pass has none). */
static __opal_attribute_noinline__ int module_work(opal_btl_usnic_module_t *module)
{
    int count = 0;

    while (!usnic_list_empty(&module->fastpath_done)) {
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
    if (OPAL_UNLIKELY(module->rdma_work)) {
        opal_btl_usnic_rdma_progress(module);
    }
    /* A delayed ACK costs no pass until it is due. */
    if (!usnic_list_empty(&module->pending_resend_segs) ||
        !usnic_list_empty(&module->endpoints_with_sends) ||
        module->acks_due_tick <= usnic_component.progress_ticks) {
        opal_btl_usnic_progress_sends(module);
    }
    module->work_queued = !usnic_list_empty(&module->fastpath_done) || module->rdma_work ||
                          !usnic_list_empty(&module->pending_resend_segs) ||
                          !usnic_list_empty(&module->endpoints_with_sends);
    return count;
}

/* One pass of a module (inline: each progress call makes one per module). */
static inline __attribute__((always_inline)) int module_progress(opal_btl_usnic_module_t *module)
{
    opal_btl_usnic_cqe_t cqe[USNIC_POLL_BATCH];
    /* a poll came back full: completions (ACKs among them) may still wait */
    bool backlog, more;
    int count = 0, n;

    if (OPAL_UNLIKELY(module->dead)) {
        return 0;
    }
    /* One CQ for both channels, one poll per pass.  A full batch that held
     * priority receives is followed by more (drain_priority): the priority
     * receive queue is small, and ACKs left waiting while a busy sender's peers
     * keep acknowledging would at last find it empty and be dropped.  Other
     * completions give one batch per pass, so that a receiver's ACKs for a
     * backlog of data leave at the cadence, not after all of it. */
    n = poll_batch(module, cqe, &more);
    if (OPAL_UNLIKELY(n < 0)) {
        return count;
    }
    count += n;
    if (OPAL_UNLIKELY(more)) {
        n = drain_priority(module, cqe, &count);
    }
    backlog = USNIC_POLL_BATCH == n;
    if (OPAL_UNLIKELY(module->dead)) {
        return count;
    }

    if (0 != module->timers_running) {
        opal_btl_usnic_timers_pass(module, opal_btl_usnic_now_us(), backlog);
    }
    if (module->work_queued || module->acks_due_tick <= usnic_component.progress_ticks) {
        count += module_work(module);
    }

    if (0 == (usnic_component.progress_ticks & (USNIC_PEER_CHECK_TICKS - 1)) &&
        usnic_component.peer_timeout > 0) {
        opal_btl_usnic_check_dead_peers(module);
    }
    return count;
}

int opal_btl_usnic_module_progress(opal_btl_usnic_module_t *module)
{
    return module_progress(module);
}

/* The component's pass over its modules (inline: the two callbacks). */
static inline __attribute__((always_inline)) int component_pass(opal_btl_usnic_component_t *c)
{
    int count = 0;

    if (0 == (++c->progress_ticks & 255)) {
        double now = opal_btl_usnic_now_us();
        c->coarse_time = now / 1e6;
        c->progress_stamp_us = (int64_t) now;
        /* (the checker gives up after seconds: a report 256 passes late
         * is in time, and the other passes need not look) */
        if (OPAL_UNLIKELY(opal_btl_usnic_connectivity_failed)) {
            opal_btl_usnic_connectivity_report();
        }
    }
    for (int i = 0; i < c->num_modules; ++i) {
        count += module_progress(&c->modules[i]);
    }
    return count;
}

int opal_btl_usnic_component_progress(void)
{
    return component_pass(&usnic_component);
}

int opal_btl_usnic_component_progress_yielding(void)
{
    int count = component_pass(&usnic_component);

    if (0 == count) {
        sched_yield();
    }
    return count;
}
