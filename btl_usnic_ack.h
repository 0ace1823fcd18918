/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 * $COPYRIGHT$
 *
 * Sending our own ACKs (what a received one does, and when one is owed:
 * btl_usnic_retrans.h).
 */

#ifndef BTL_USNIC_ACK_H
#define BTL_USNIC_ACK_H

#include "btl_usnic_endpoint.h"
#include "btl_usnic_module.h"

BEGIN_C_DECLS

/* Fill in a header's piggy-backed ACK if one is owed (and clear the debt). */
void opal_btl_usnic_piggyback_ack(opal_btl_usnic_endpoint_t *ep, usnic_btl_header_t *hdr);

/* Send the standalone ACKs that are due, while the priority channel has room. */
void opal_btl_usnic_send_due_acks(opal_btl_usnic_module_t *module);

END_C_DECLS
#endif /* BTL_USNIC_ACK_H */
