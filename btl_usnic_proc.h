/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 * $COPYRIGHT$
 * SPDX-License-Identifier: BSD-3-Clause
 *
 * A proc caches one remote process's modex records and the endpoints that
 * every local module has toward it.
 */

#ifndef BTL_USNIC_PROC_H
#define BTL_USNIC_PROC_H

#include "opal/class/opal_list.h"
#include "opal/util/proc.h"

#include "btl_usnic.h"
#include "btl_usnic_endpoint.h"
#include "btl_usnic_wire.h"

BEGIN_C_DECLS

typedef struct opal_btl_usnic_proc_t {
    opal_list_item_t super;             /* on usnic_component.procs */
    opal_proc_t *proc_opal;
    char *hostname;                     /* the peer's host, for messages */
    uint64_t hashed_name;
    usnic_modex_addr_t *modex;          /* the peer's records */
    size_t modex_count;
    int *match;                         /* per local module: peer record index, or -1 */
    opal_btl_usnic_endpoint_t **endpoints;  /* per local module */
} opal_btl_usnic_proc_t;
OBJ_CLASS_DECLARATION(opal_btl_usnic_proc_t);

static inline uint64_t opal_btl_usnic_hash_name(const opal_process_name_t *name)
{
    return ((uint64_t) name->jobid << 32) | name->vpid;
}

/* Find or create the proc for an opal_proc_t, reading and checking its
 * modex.  Returns OPAL_ERR_UNREACH when the peer published nothing. */
int opal_btl_usnic_proc_get(opal_proc_t *opal_proc, opal_btl_usnic_proc_t **proc_out);

/* Pair this module with one of the proc's records (bipartite matching over
 * all modules); returns the record index or -1. */
int opal_btl_usnic_proc_match(opal_btl_usnic_proc_t *proc, int module_index);

END_C_DECLS
#endif /* BTL_USNIC_PROC_H */
