/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 * $COPYRIGHT$
 * SPDX-License-Identifier: BSD-3-Clause
 *
 * NUMA distance between a process binding and a device
 * (opal_btl_usnic_numa_distance) on synthetic hwloc topologies.
 */

/* Open MPI's configuration first, as in the component (it defines hwloc's
 * version macro in a way hwloc.h then accepts). */
#include "btl_usnic_module.h"
#include "usnic_test.h"

#include <hwloc.h>

/* Two packages, one NUMA node and two cores each: PUs 0-1 on node 0,
 * PUs 2-3 on node 1. */
static hwloc_topology_t two_nodes(void)
{
    hwloc_topology_t topo;

    if (0 != hwloc_topology_init(&topo)) {
        return NULL;
    }
    if (0 != hwloc_topology_set_synthetic(topo, "pack:2 numa:1 core:2 pu:1") ||
        0 != hwloc_topology_load(topo)) {
        hwloc_topology_destroy(topo);
        return NULL;
    }
    return topo;
}

static int distance(hwloc_topology_t topo, const char *mine, const char *dev)
{
    hwloc_bitmap_t a = hwloc_bitmap_alloc(), b = hwloc_bitmap_alloc();
    int d;

    hwloc_bitmap_list_sscanf(a, mine);
    hwloc_bitmap_list_sscanf(b, dev);
    d = opal_btl_usnic_numa_distance(topo, a, b);
    hwloc_bitmap_free(a);
    hwloc_bitmap_free(b);
    return d;
}

USNIC_TEST(numa_near_and_far)
{
    hwloc_topology_t topo = two_nodes();

    check(NULL != topo);
    /* bound on node 0, device on node 0 (or overlapping it): near */
    check_int_eq(distance(topo, "0", "0-1"), 0);
    check_int_eq(distance(topo, "0-1", "1"), 0);
    check_int_eq(distance(topo, "1-2", "2-3"), 0);
    /* bound on node 0, device on node 1: far, without a latency matrix */
    check_int_eq(distance(topo, "0-1", "2-3"), 1);
    check_int_eq(distance(topo, "3", "0"), 1);
    /* nothing known about the device: treated as near */
    check_int_eq(distance(topo, "0", ""), 0);
    hwloc_topology_destroy(topo);
    return 0;
}

USNIC_TEST(numa_latency_matrix)
{
    hwloc_topology_t topo = two_nodes();
    hwloc_obj_t nodes[2];
    hwloc_uint64_t values[4] = {10, 21, 21, 10};
    hwloc_distances_add_handle_t h;

    check(NULL != topo);
    nodes[0] = hwloc_get_obj_by_type(topo, HWLOC_OBJ_NUMANODE, 0);
    nodes[1] = hwloc_get_obj_by_type(topo, HWLOC_OBJ_NUMANODE, 1);
    check(NULL != nodes[0] && NULL != nodes[1]);
    h = hwloc_distances_add_create(topo, "test", HWLOC_DISTANCES_KIND_FROM_USER |
                                   HWLOC_DISTANCES_KIND_MEANS_LATENCY, 0);
    check(NULL != h);
    check_int_eq(hwloc_distances_add_values(topo, h, 2, nodes, values, 0), 0);
    check_int_eq(hwloc_distances_add_commit(topo, h, 0), 0);
    /* far devices take the node-to-node latency */
    check_int_eq(distance(topo, "0-1", "2-3"), 21);
    check_int_eq(distance(topo, "0", "1"), 0);
    hwloc_topology_destroy(topo);
    return 0;
}
