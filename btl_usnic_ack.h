/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 * $COPYRIGHT$
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

/* A hole is open at rx.next_contig: note when it opened, unless noted. */
static inline void opal_btl_usnic_hole_seen(opal_btl_usnic_endpoint_t *ep)
{
    if (ep->rx_hole_seq != ep->rx.next_contig || 0 == ep->rx_hole_since_us) {
        ep->rx_hole_seq = ep->rx.next_contig;
        ep->rx_hole_since_us = opal_btl_usnic_now_us();
    }
}

/* A hole is open above the ACK in hdr.  The channels are two queue pairs,
 * so a segment sent on one may arrive after a later one sent on the other:
 * only a hole open for at least ack_hold_us is a loss, and gets
 * USNIC_ACK_HOLE.  True if it is too young to tell: another ACK must
 * follow, when it can. */
bool opal_btl_usnic_ack_hole(opal_btl_usnic_endpoint_t *ep, usnic_btl_header_t *hdr);

/* Owe the peer another (delayed) ACK. */
void opal_btl_usnic_ack_again(opal_btl_usnic_endpoint_t *ep);

/* An ACK names the last duplicate that arrived since the one before, so
 * that the sender can tell a resend it did not need, and says whether the
 * segment after it is lost.  True if another ACK must follow
 * (opal_btl_usnic_ack_hole). */
static inline bool opal_btl_usnic_add_ack_flags(opal_btl_usnic_endpoint_t *ep,
                                                usnic_btl_header_t *hdr)
{
    bool again = false;

    hdr->ack_flags = 0;
    if (OPAL_UNLIKELY(ep->rx.highest_rcvd != hdr->ack_seq)) {
        again = opal_btl_usnic_ack_hole(ep, hdr);
    }
    if (OPAL_UNLIKELY(ep->rx_dup_pending)) {
        hdr->ack_flags |= USNIC_ACK_DUP_SEEN;
        hdr->dup_seq = ep->rx_dup_seq;
        ep->rx_dup_pending = false;
    }
    return again;
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
        if (OPAL_UNLIKELY(opal_btl_usnic_add_ack_flags(ep, hdr))) {
            opal_btl_usnic_ack_again(ep);
        }
    } else {
        hdr->ack_present = 0;
    }
}

/* Send the standalone ACKs that are due, while the priority channel has room. */
void opal_btl_usnic_send_due_acks(opal_btl_usnic_module_t *module);

END_C_DECLS
#endif /* BTL_USNIC_ACK_H */
