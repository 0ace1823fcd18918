/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 * $COPYRIGHT$
 * SPDX-License-Identifier: BSD-3-Clause
 *
 * The receive half of the reliability engine.
 */

#ifndef BTL_USNIC_RECV_H
#define BTL_USNIC_RECV_H

#include "btl_usnic_frag.h"
#include "btl_usnic_module.h"

BEGIN_C_DECLS

/* Handle one received datagram, given its successful receive completion
 * (its length includes the GRH).  The buffer is queued for reposting
 * before this returns. */
void opal_btl_usnic_recv(opal_btl_usnic_module_t *module, opal_btl_usnic_recv_seg_t *rseg,
                         const opal_btl_usnic_cqe_t *cqe);

/* Drop and count a malformed packet, warning once past max_short_packets. */
void opal_btl_usnic_count_bad(opal_btl_usnic_module_t *module, usnic_pkt_result_t why);

END_C_DECLS
#endif /* BTL_USNIC_RECV_H */
