/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 * $COPYRIGHT$
 * SPDX-License-Identifier: BSD-3-Clause
 *
 * Sending our own ACKs (when one is owed: btl_usnic_retrans.h; what a
 * received one does: btl_usnic_retrans_ack.h).
 */

#ifndef BTL_USNIC_ACK_H
#define BTL_USNIC_ACK_H

#include "btl_usnic_endpoint.h"
#include "btl_usnic_module.h"

BEGIN_C_DECLS

/* An ACK went out: nothing is owed any more.  (The endpoint stays
 * listed: send_due_acks unlists it.) */
static inline void opal_btl_usnic_ack_done(opal_btl_usnic_endpoint_t *ep)
{
    ep->rx_unacked = 0;
    ep->ack_urgent = false;
    ep->ack_hold_until_us = 0;
    if (ep->ack_owed) {
        /* (loaded once: the store to the count might alias ep->module) */
        opal_btl_usnic_module_t *module = ep->module;
        ep->ack_owed = false;
        if (0 == --module->acks_owed) {
            module->acks_due_tick = UINT64_MAX;
        }
    }
}

/* An ACK names the last duplicate that arrived since the one before, so
 * that the sender can tell a resend it did not need (and why), says
 * whether a resend arrived, and which run of segments after it is known
 * lost. */
static inline void opal_btl_usnic_add_ack_flags(opal_btl_usnic_endpoint_t *ep,
                                                usnic_btl_header_t *hdr)
{
    hdr->ack_flags = ep->rx_report;
    if (OPAL_UNLIKELY(0 != ep->rx_report)) {
        hdr->dup_seq = ep->rx_dup_seq;
        ep->rx_report = 0;
    }
    if (OPAL_UNLIKELY(ep->rx.highest_rcvd != hdr->ack_seq || 0 != ep->rx.nlost)) {
        uint32_t run = usnic_rx_edge_lost(&ep->rx);
        if (0 != run) {
            hdr->ack_flags |= USNIC_ACK_HOLE;
            hdr->hole_run = (uint8_t) run;
        }
    }
}

/* Fill in a header's piggy-backed ACK if one is owed (and clear the debt).
 * (Inline: every send.) */
static inline void opal_btl_usnic_piggyback_ack(opal_btl_usnic_endpoint_t *ep,
                                                usnic_btl_header_t *hdr)
{
    if (ep->ack_owed) {
        /* (first, while ack_owed is known true: the header's stores might
         * alias ep for the compiler) */
        opal_btl_usnic_ack_done(ep);
        hdr->ack_seq = ep->rx_acked = usnic_rx_ack_value(&ep->rx);
        hdr->ack_present = 1;
        opal_btl_usnic_add_ack_flags(ep, hdr);
    } else {
        hdr->ack_present = 0;
    }
}

/* A probe for a timer that expired: a standalone ACK that asks ep's peer to
 * answer at once about segment seq.  False if no send slot or ACK buffer
 * was free. */
bool opal_btl_usnic_send_probe(opal_btl_usnic_module_t *module, opal_btl_usnic_endpoint_t *ep,
                               uint16_t seq);

/* Send the standalone ACKs that are due, while the priority channel has room. */
void opal_btl_usnic_send_due_acks(opal_btl_usnic_module_t *module);

END_C_DECLS
#endif /* BTL_USNIC_ACK_H */
