/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 * $COPYRIGHT$
 *
 * ACKs: processing received ones, scheduling and sending our own, and the
 * per-endpoint retransmit timer.
 */

#ifndef BTL_USNIC_ACK_H
#define BTL_USNIC_ACK_H

#include "btl_usnic_endpoint.h"
#include "btl_usnic_module.h"

BEGIN_C_DECLS

/* A cumulative ACK arrived from the peer of ep. */
void opal_btl_usnic_handle_ack(opal_btl_usnic_endpoint_t *ep, uint16_t ack);

/* We owe the peer an ACK: now, or after ack_iteration_delay passes. */
void opal_btl_usnic_schedule_ack(opal_btl_usnic_endpoint_t *ep, bool now);

/* Fill in a header's piggy-backed ACK if one is owed (and clear the debt). */
void opal_btl_usnic_piggyback_ack(opal_btl_usnic_endpoint_t *ep, usnic_btl_header_t *hdr);

/* Send the standalone ACKs that are due, while the priority channel has room. */
void opal_btl_usnic_send_due_acks(opal_btl_usnic_module_t *module);

/* Start the endpoint's retransmit timer if it is not running (a segment
 * went in flight), or stop it (nothing is unacknowledged any more). */
void opal_btl_usnic_timer_start(opal_btl_usnic_endpoint_t *ep, double now);
void opal_btl_usnic_timer_stop(opal_btl_usnic_endpoint_t *ep);

/* Expire the module's retransmit timers that are due at `now` (monotonic
 * microseconds): the oldest unacknowledged segment of such an endpoint is
 * queued for resending.  Returns the number of segments queued. */
int opal_btl_usnic_check_timers(opal_btl_usnic_module_t *module, double now);

END_C_DECLS
#endif /* BTL_USNIC_ACK_H */
