/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 * $COPYRIGHT$
 * SPDX-License-Identifier: BSD-3-Clause
 *
 * Remote processes: modex records, validation, and the pairing of local
 * modules with the peer's devices.
 */

#include "opal_config.h"

#include <stdlib.h>
#include <string.h>

#include <netinet/in.h>

#include "opal/mca/if/if.h"
#include "opal/mca/reachable/reachable.h"
#include "opal/util/bipartite_graph.h"
#include "opal/util/error.h"
#include "opal/util/show_help.h"

#include "btl_usnic.h"
#include "btl_usnic_module.h"
#include "btl_usnic_proc.h"
#include "btl_usnic_util.h"

static void proc_construct(opal_btl_usnic_proc_t *p)
{
    p->proc_opal = NULL;
    p->hostname = NULL;
    p->modex = NULL;
    p->modex_count = 0;
    p->match = NULL;
    p->endpoints = NULL;
}

static void proc_destruct(opal_btl_usnic_proc_t *p)
{
    free(p->hostname);
    free(p->modex);
    free(p->match);
    free(p->endpoints);
}
OBJ_CLASS_INSTANCE(opal_btl_usnic_proc_t, opal_list_item_t, proc_construct, proc_destruct);

static opal_btl_usnic_proc_t *proc_lookup(opal_proc_t *opal_proc)
{
    opal_btl_usnic_proc_t *p;
    OPAL_LIST_FOREACH (p, &usnic_component.procs, opal_btl_usnic_proc_t) {
        if (p->proc_opal == opal_proc) {
            return p;
        }
    }
    return NULL;
}

int opal_btl_usnic_proc_get(opal_proc_t *opal_proc, opal_btl_usnic_proc_t **proc_out)
{
    opal_btl_usnic_proc_t *p = proc_lookup(opal_proc);
    usnic_modex_addr_t *modex = NULL;
    uint8_t *raw = NULL;
    size_t size = 0;
    int rc;

    if (NULL != p) {
        *proc_out = p;
        return OPAL_SUCCESS;
    }
    OPAL_MODEX_RECV(rc, &usnic_component.super.btl_version, &opal_proc->proc_name,
                    &raw, &size);
    rc = usnic_modex_status(rc);
    modex = (usnic_modex_addr_t *) raw;
    if (OPAL_ERR_NOT_FOUND == rc || OPAL_ERR_DATA_VALUE_NOT_FOUND == rc ||
        (OPAL_SUCCESS == rc && 0 == size)) {
        free(modex);
        return OPAL_ERR_UNREACH;
    }
    if (OPAL_SUCCESS != rc) {
        opal_show_help("help-mpi-btl-usnic.txt", "internal error during init", true,
                       opal_process_info.nodename, "(all devices)", "modex receive",
                       opal_strerror(rc));
        return rc;
    }
    if (0 != size % sizeof(*modex) || USNIC_MODEX_VERSION != modex[0].version) {
        char *host = usnic_hostname_dup(opal_proc);
        opal_show_help("help-mpi-btl-usnic.txt", "bad modex", true, opal_process_info.nodename,
                       host, size, sizeof(*modex), USNIC_MODEX_VERSION);
        free(host);
        free(modex);
        return OPAL_ERR_UNREACH;
    }

    if (modex[0].transport != usnic_component.dev_ops->transport) {
        char *host = usnic_hostname_dup(opal_proc);
        opal_show_help("help-mpi-btl-usnic.txt", "transport mismatch", true,
                       opal_process_info.nodename,
                       opal_btl_usnic_transport_name(usnic_component.dev_ops->transport), host,
                       opal_btl_usnic_transport_name(modex[0].transport));
        free(host);
        free(modex);
        return OPAL_ERR_UNREACH;
    }

    p = OBJ_NEW(opal_btl_usnic_proc_t);
    if (NULL != p) {
        p->match = malloc(usnic_component.num_modules * sizeof(*p->match));
        p->endpoints = calloc(usnic_component.num_modules, sizeof(*p->endpoints));
        p->hostname = usnic_hostname_dup(opal_proc);
    }
    if (NULL == p || NULL == p->match || NULL == p->endpoints || NULL == p->hostname) {
        if (NULL != p) {
            OBJ_RELEASE(p);
        }
        free(modex);
        return OPAL_ERR_OUT_OF_RESOURCE;
    }
    p->proc_opal = opal_proc;
    p->hashed_name = opal_btl_usnic_hash_name(&opal_proc->proc_name);
    p->modex = modex;
    p->modex_count = size / sizeof(*modex);
    for (int i = 0; i < usnic_component.num_modules; ++i) {
        p->match[i] = -2; /* not computed yet */
    }
    opal_list_append(&usnic_component.procs, &p->super);
    *proc_out = p;
    return OPAL_SUCCESS;
}

/* Without route lookups: same subnet first, then the slower link of the two. */
static int64_t subnet_weight(const opal_btl_usnic_module_t *m, const usnic_modex_addr_t *r)
{
    uint32_t mask = opal_btl_usnic_prefix_to_mask(m->if_prefix);
    bool same_subnet = m->if_prefix == r->prefix &&
                       (m->if_ipv4 & mask) == (r->ipv4_addr & mask);
    uint32_t speed = m->link_speed_mbps < r->link_speed_mbps ? m->link_speed_mbps
                                                             : r->link_speed_mbps;
    uint64_t gbps = speed / 1000 > 255 ? 255 : speed / 1000;

    return (int64_t)(((uint64_t) same_subnet << 48) | (gbps << 40) | (1ULL << 32));
}

static opal_if_t *make_if(uint32_t ipv4, uint32_t prefix, int kindex, uint32_t mbps)
{
    opal_if_t *i = OBJ_NEW(opal_if_t);
    struct sockaddr_in *sin = (struct sockaddr_in *) &i->if_addr;

    if (NULL != i) {
        i->af_family = AF_INET;
        sin->sin_family = AF_INET;
        sin->sin_addr.s_addr = ipv4;
        i->if_mask = prefix;
        i->if_kernel_index = (uint16_t) kindex;
        i->if_bandwidth = mbps;
    }
    return i;
}

/* Weights of every (local module, peer record) pair: OPAL's reachable
 * framework looks up the route from each local interface (same network,
 * routed, or none, scaled by bandwidth); 0 means no route.  Returns NULL
 * when route lookups are unavailable. */
static opal_reachable_t *route_weights(opal_btl_usnic_proc_t *p)
{
    opal_list_t local, remote;
    opal_reachable_t *r = NULL;
    bool ok = true;

    if (!usnic_component.reachable_ready) {
        return NULL;
    }
    OBJ_CONSTRUCT(&local, opal_list_t);
    OBJ_CONSTRUCT(&remote, opal_list_t);
    for (int i = 0; i < usnic_component.num_modules && ok; ++i) {
        opal_btl_usnic_module_t *m = &usnic_component.modules[i];
        opal_if_t *e = make_if(m->if_ipv4, m->if_prefix, m->if_kindex, m->link_speed_mbps);
        ok = (NULL != e);
        if (ok) {
            opal_list_append(&local, &e->super);
        }
    }
    for (size_t j = 0; j < p->modex_count && ok; ++j) {
        opal_if_t *e = make_if(p->modex[j].ipv4_addr, p->modex[j].prefix, 0,
                               p->modex[j].link_speed_mbps);
        ok = (NULL != e);
        if (ok) {
            opal_list_append(&remote, &e->super);
        }
    }
    if (ok) {
        r = opal_reachable.reachable(&local, &remote);
    }
    OPAL_LIST_DESTRUCT(&local);
    OPAL_LIST_DESTRUCT(&remote);
    return r;
}

/* Pair every local module with at most one peer record, most pairs first,
 * best total weight second.  Both sides build the same graph (the process
 * with the lower name on the left), so they reach the same pairing. */
static int compute_matching(opal_btl_usnic_proc_t *p)
{
    int nm = usnic_component.num_modules, nr = (int) p->modex_count;
    bool local_left = usnic_component.my_hashed_name < p->hashed_name;
    opal_bp_graph_t *g = NULL;
    int num_match = 0, *match = NULL, rc, idx, edges = 0;
    opal_reachable_t *routes = route_weights(p);

    for (int i = 0; i < nm; ++i) {
        p->match[i] = -1;
    }
    rc = opal_bp_graph_create(NULL, NULL, &g);
    if (OPAL_SUCCESS != rc) {
        return rc;
    }
    for (int v = 0; v < nm + nr; ++v) {
        opal_bp_graph_add_vertex(g, NULL, &idx);
    }
    for (int i = 0; i < nm; ++i) {
        for (int j = 0; j < nr; ++j) {
            int lv = local_left ? i : nr + i;
            int rv = local_left ? nm + j : j;
            int64_t w = NULL != routes ? routes->weights[i][j]
                                       : subnet_weight(&usnic_component.modules[i], &p->modex[j]);
            /* A same-host peer on this very device: the route lookup finds
             * only the host's local route, but the device loops it back. */
            if (0 == w && 0 == memcmp(p->modex[j].gid, usnic_component.modules[i].gid,
                                      sizeof(p->modex[j].gid))) {
                w = subnet_weight(&usnic_component.modules[i], &p->modex[j]);
            }
            if (0 == w) {
                usnic_verbose(10, "%s: %s: no route to peer record %d",
                              opal_process_info.nodename, usnic_component.modules[i].dev_name, j);
                continue;
            }
            /* edges always run left to right */
            rc = opal_bp_graph_add_edge(g, local_left ? lv : rv, local_left ? rv : lv, -w, 1,
                                        NULL);
            if (OPAL_SUCCESS != rc) {
                opal_bp_graph_free(g);
                if (NULL != routes) {
                    OBJ_RELEASE(routes);
                }
                return rc;
            }
            ++edges;
        }
    }
    /* no edges: nothing to pair (the solver reports an empty graph as an error) */
    rc = 0 == edges ? OPAL_SUCCESS
                    : opal_bp_graph_solve_bipartite_assignment(g, &num_match, &match);
    if (OPAL_SUCCESS == rc) {
        for (int k = 0; k < num_match; ++k) {
            int a = match[2 * k], b = match[2 * k + 1];
            int mod = local_left ? a : b - nr;
            int rec = local_left ? b - nm : a;
            if (mod >= 0 && mod < nm && rec >= 0 && rec < nr) {
                p->match[mod] = rec;
            }
        }
    }
    free(match);
    opal_bp_graph_free(g);
    if (NULL != routes) {
        OBJ_RELEASE(routes);
    }
    return rc;
}

int opal_btl_usnic_proc_match(opal_btl_usnic_proc_t *p, int module_index)
{
    if (-2 == p->match[module_index] && OPAL_SUCCESS != compute_matching(p)) {
        return -1;
    }
    return p->match[module_index];
}
