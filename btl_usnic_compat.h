/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 * $COPYRIGHT$
 * SPDX-License-Identifier: BSD-3-Clause
 *
 * What differs between the Open MPI versions the component builds
 * against: 4.1 (BTL API 3.1) and 5.0 (BTL API 3.3).  Checked against
 * the 4.1.4 and 5.0.7 headers; everything else is the same in both.
 *
 * $HEADER$
 */

#ifndef BTL_USNIC_COMPAT_H
#define BTL_USNIC_COMPAT_H

#include "opal_config.h"

#include <string.h>

#include "opal/mca/btl/btl.h"
#include "opal/util/proc.h"

#if OPAL_MAJOR_VERSION >= 5

/* 5.0 moved the libevent wrapper out of the event framework and has
 * no PMIx framework: its modex macros call PMIx directly. */
#include "opal/util/event.h"
#include "opal/mca/threads/mutex.h"
#include "opal/mca/threads/threads.h"
#include "opal/mca/pmix/pmix-internal.h"

/* Global: same-host peers read it too (osc/rdma reaches them through us). */
#define USNIC_MODEX_SCOPE PMIX_GLOBAL

/* The modex macros return PMIx status codes in 5.0. */
static inline int usnic_modex_status(int rc)
{
    return opal_pmix_convert_status(rc);
}

/* 5.0 asks PMIx for a peer's host name and hands out a copy. */
static inline char *usnic_hostname_dup(const opal_proc_t *proc)
{
    char *h = opal_get_proc_hostname(proc);
    return NULL != h ? h : strdup("(unknown)");
}

/* 5.0 hands the PML a receive descriptor that names the sender.  Each
 * receive buffer keeps one, set up once around its segment. */
typedef mca_btl_base_receive_descriptor_t usnic_rx_desc_t;

static inline void usnic_rx_desc_init(usnic_rx_desc_t *desc, const mca_btl_base_segment_t *seg)
{
    memset(desc, 0, sizeof(*desc));
    desc->des_segments = seg;
    desc->des_segment_count = 1;
}

static inline void usnic_deliver_to_pml(mca_btl_base_module_t *btl,
                                        struct mca_btl_base_endpoint_t *ep,
                                        const mca_btl_active_message_callback_t *reg,
                                        mca_btl_base_tag_t tag, usnic_rx_desc_t *desc)
{
    desc->endpoint = ep;
    desc->tag = tag;
    desc->cbdata = reg->cbdata;
    reg->cbfunc(btl, desc);
}

#else /* Open MPI 4.1 */

#include "opal/mca/event/event.h"
#include "opal/mca/pmix/pmix.h"
#include "opal/threads/mutex.h"
#include "opal/threads/threads.h"

/* Global: same-host peers read it too (osc/rdma reaches them through us). */
#define USNIC_MODEX_SCOPE OPAL_PMIX_GLOBAL

static inline int usnic_modex_status(int rc)
{
    return rc;
}

/* 4.1 returns the string the proc itself holds. */
static inline char *usnic_hostname_dup(const opal_proc_t *proc)
{
    const char *h = opal_get_proc_hostname(proc);
    return strdup(NULL != h ? h : "(unknown)");
}

/* 4.1's receive callback takes a full descriptor and no sender.  Each
 * receive buffer keeps one, set up once around its segment. */
typedef mca_btl_base_descriptor_t usnic_rx_desc_t;

static inline void usnic_rx_desc_init(usnic_rx_desc_t *desc, mca_btl_base_segment_t *seg)
{
    memset(desc, 0, sizeof(*desc));
    desc->des_segments = seg;
    desc->des_segment_count = 1;
    desc->order = MCA_BTL_NO_ORDER;
}

static inline void usnic_deliver_to_pml(mca_btl_base_module_t *btl,
                                        struct mca_btl_base_endpoint_t *ep,
                                        const mca_btl_active_message_callback_t *reg,
                                        mca_btl_base_tag_t tag, usnic_rx_desc_t *desc)
{
    (void) ep;
    reg->cbfunc(btl, tag, desc, reg->cbdata);
}

#endif

#endif /* BTL_USNIC_COMPAT_H */
