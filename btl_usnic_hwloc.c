/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 * $COPYRIGHT$
 * SPDX-License-Identifier: BSD-3-Clause
 *
 * NUMA distance between this process and a device (hwloc 2.x), so that a
 * device far from where the process is bound rates as slower.
 */

#include "opal_config.h"

#include <hwloc.h>

#include "opal/mca/hwloc/base/base.h"
#include "opal/util/proc.h"

#include "btl_usnic.h"
#include "btl_usnic_module.h"

int opal_btl_usnic_numa_distance(hwloc_topology_t topo, hwloc_const_cpuset_t my_cpus,
                                 hwloc_const_cpuset_t dev_cpus)
{
    hwloc_nodeset_t my_nodes = hwloc_bitmap_alloc(), dev_nodes = hwloc_bitmap_alloc();
    struct hwloc_distances_s *dist = NULL;
    unsigned nr = 1;
    int result = 0;

    hwloc_cpuset_to_nodeset(topo, my_cpus, my_nodes);
    hwloc_cpuset_to_nodeset(topo, dev_cpus, dev_nodes);
    if (hwloc_bitmap_iszero(my_nodes) || hwloc_bitmap_iszero(dev_nodes) ||
        hwloc_bitmap_intersects(my_nodes, dev_nodes)) {
        goto out;
    }
    /* Far: use the OS latency matrix when there is one, else just "far". */
    result = 1;
    if (0 == hwloc_distances_get_by_type(topo, HWLOC_OBJ_NUMANODE, &nr, &dist,
                                         HWLOC_DISTANCES_KIND_MEANS_LATENCY, 0) &&
        nr > 0) {
        int a = hwloc_bitmap_first(my_nodes), b = hwloc_bitmap_first(dev_nodes);
        for (unsigned i = 0; i < dist[0].nbobjs; ++i) {
            for (unsigned j = 0; j < dist[0].nbobjs; ++j) {
                if ((int) dist[0].objs[i]->os_index == a && (int) dist[0].objs[j]->os_index == b) {
                    result = (int) dist[0].values[i * dist[0].nbobjs + j];
                }
            }
        }
        hwloc_distances_release(topo, dist);
    }
out:
    hwloc_bitmap_free(my_nodes);
    hwloc_bitmap_free(dev_nodes);
    return result;
}

void opal_btl_usnic_hwloc_rate_module(opal_btl_usnic_module_t *module)
{
    hwloc_cpuset_t my_cpus, dev_cpus;

    module->numa_distance = 0;
    if (!usnic_component.want_numa_device_assignment || NULL == opal_process_info.cpuset ||
        OPAL_SUCCESS != opal_hwloc_base_get_topology() || NULL == opal_hwloc_topology) {
        usnic_verbose(5, "%s: %s: NUMA distance not computed (process not bound or no "
                      "topology)", opal_process_info.nodename, module->dev_name);
        return;
    }
    my_cpus = hwloc_bitmap_alloc();
    dev_cpus = hwloc_bitmap_alloc();
    if (0 == hwloc_get_cpubind(opal_hwloc_topology, my_cpus, HWLOC_CPUBIND_PROCESS) &&
        0 == module->ops->cpuset(module->dev, opal_hwloc_topology, dev_cpus)) {
        module->numa_distance = opal_btl_usnic_numa_distance(opal_hwloc_topology, my_cpus,
                                                             dev_cpus);
    }
    hwloc_bitmap_free(my_cpus);
    hwloc_bitmap_free(dev_cpus);
    if (module->numa_distance > 0) {
        ++module->super.btl_latency;
    }
    usnic_verbose(5, "%s: %s: NUMA distance %d: %s", opal_process_info.nodename,
                  module->dev_name, module->numa_distance,
                  module->numa_distance > 0 ? "far, latency rating raised" : "near");
}
