/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 * $COPYRIGHT$
 * SPDX-License-Identifier: BSD-3-Clause
 *
 * Statistics reports.
 */

#include "opal_config.h"

#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "opal/mca/base/mca_base_pvar.h"
#include "opal/util/output.h"
#include "opal/util/proc.h"

#include "btl_usnic.h"
#include "btl_usnic_module.h"
#include "btl_usnic_stats.h"
#include "btl_usnic_thread.h"

/* Test contract (docs/tests.md, "Test contracts"):
 * "btl:usnic: stats PREFIX HOST DEV: name=value ..."; the VM tests read the counters from it
 * by name. */
void opal_btl_usnic_stats_print(opal_btl_usnic_module_t *module, const char *prefix)
{
    opal_btl_usnic_stats_t *s = &module->stats;
    char line[2048];
    int n;

    n = snprintf(line, sizeof(line), "btl:usnic: stats %s %s %s:", prefix,
                 opal_process_info.nodename, module->dev_name);
#define USNIC_STATS_PRINT(name, desc)                                                  \
    if (n > 0 && (size_t) n < sizeof(line)) {                                          \
        n += snprintf(line + n, sizeof(line) - n, " %s=%" PRIu64, #name, s->name);     \
    }
    USNIC_STATS_COUNTERS(USNIC_STATS_PRINT)
#undef USNIC_STATS_PRINT
    if (n > 0 && (size_t) n < sizeof(line)) {
        snprintf(line + n, sizeof(line) - n, " max_sent_window_size=%" PRIu64
                 " max_rcvd_window_size=%" PRIu64 " max_rto_us=%" PRIu64
                 " endpoints=%" PRIu64
                 " endpoint_bytes=%" PRIu64 " send_table_bytes=%" PRIu64
                 " reassembly_bytes=%" PRIu64 " add_procs_usec=%" PRIu64,
                 s->max_sent_window_size, s->max_rcvd_window_size, s->max_rto_us, s->endpoints,
                 s->endpoint_bytes, s->send_table_bytes, s->reassembly_bytes, s->add_procs_usec);
    }
    opal_output(0, "%s", line);
    if (usnic_component.stats_relative) {
        memset(s, 0, offsetof(opal_btl_usnic_stats_t, endpoints));
    }
}

/* Every value is per module: the count is fixed at bind time. */
static int pvar_notify(struct mca_base_pvar_t *pvar, mca_base_pvar_event_t event, void *obj,
                       int *count)
{
    (void) pvar;
    (void) obj;
    if (MCA_BASE_PVAR_HANDLE_BIND == event) {
        *count = usnic_component.num_modules;
    }
    return OPAL_SUCCESS;
}

/* The registration context is the counter's offset in opal_btl_usnic_stats_t
 * (the last argument is the bound object: none here). */
static int pvar_read(const struct mca_base_pvar_t *pvar, void *value, void *obj)
{
    size_t offset = (size_t)(uintptr_t) pvar->ctx;
    unsigned long *out = value;
    (void) obj;

    /* one consistent snapshot under MPI_THREAD_MULTIPLE */
    USNIC_LOCK();
    for (int i = 0; i < usnic_component.num_modules; ++i) {
        const char *stats = (const char *) &usnic_component.modules[i].stats;
        out[i] = (unsigned long) *(const uint64_t *)(stats + offset);
    }
    USNIC_UNLOCK();
    return OPAL_SUCCESS;
}

/* The component's pass count: one value, whatever the number of modules. */
static int passes_notify(struct mca_base_pvar_t *pvar, mca_base_pvar_event_t event, void *obj,
                         int *count)
{
    (void) pvar;
    (void) obj;
    if (MCA_BASE_PVAR_HANDLE_BIND == event) {
        *count = 1;
    }
    return OPAL_SUCCESS;
}

static int passes_read(const struct mca_base_pvar_t *pvar, void *value, void *obj)
{
    (void) pvar;
    (void) obj;
    *(unsigned long *) value = (unsigned long) usnic_component.progress_ticks;
    return OPAL_SUCCESS;
}

static void register_pvar(const char *name, const char *desc, int var_class, size_t offset)
{
    (void) mca_base_component_pvar_register(&usnic_component.super.btl_version, name, desc,
                                            OPAL_INFO_LVL_5, var_class,
                                            MCA_BASE_VAR_TYPE_UNSIGNED_LONG, NULL,
                                            MCA_BASE_VAR_BIND_NO_OBJECT,
                                            MCA_BASE_PVAR_FLAG_READONLY |
                                                MCA_BASE_PVAR_FLAG_CONTINUOUS,
                                            pvar_read, NULL, pvar_notify,
                                            (void *)(uintptr_t) offset);
}

void opal_btl_usnic_stats_register_pvars(void)
{
    /* Relative reports reset the counters, which would make them lie as
     * MPI_T counters; only the high-water marks are exported then. */
    if (!usnic_component.stats_relative) {
#define USNIC_STATS_PVAR(name, desc) \
        register_pvar(#name, desc, MCA_BASE_PVAR_CLASS_COUNTER, \
                      offsetof(opal_btl_usnic_stats_t, name));
        USNIC_STATS_COUNTERS(USNIC_STATS_PVAR)
#undef USNIC_STATS_PVAR
    }
    /* never reset: a counter even with relative reports */
    (void) mca_base_component_pvar_register(&usnic_component.super.btl_version, "progress_passes",
                                            "Passes of Open MPI's progress through usnic (all "
                                            "devices at once); less the messages received, the "
                                            "polls that found nothing",
                                            OPAL_INFO_LVL_5, MCA_BASE_PVAR_CLASS_COUNTER,
                                            MCA_BASE_VAR_TYPE_UNSIGNED_LONG, NULL,
                                            MCA_BASE_VAR_BIND_NO_OBJECT,
                                            MCA_BASE_PVAR_FLAG_READONLY |
                                                MCA_BASE_PVAR_FLAG_CONTINUOUS,
                                            passes_read, NULL, passes_notify, NULL);
    register_pvar("max_sent_window_size", "Most segments unacknowledged toward one peer",
                  MCA_BASE_PVAR_CLASS_HIGHWATERMARK,
                  offsetof(opal_btl_usnic_stats_t, max_sent_window_size));
    register_pvar("max_rcvd_window_size", "Deepest receive window seen: segments from one peer "
                  "up to the highest received that were not yet acknowledged to it",
                  MCA_BASE_PVAR_CLASS_HIGHWATERMARK,
                  offsetof(opal_btl_usnic_stats_t, max_rcvd_window_size));
    register_pvar("max_rto_us", "Largest retransmit timeout computed from round-trip samples "
                  "toward one peer (microseconds; backoff not included)",
                  MCA_BASE_PVAR_CLASS_HIGHWATERMARK,
                  offsetof(opal_btl_usnic_stats_t, max_rto_us));
    register_pvar("endpoints", "Peers this device has an endpoint for",
                  MCA_BASE_PVAR_CLASS_LEVEL, offsetof(opal_btl_usnic_stats_t, endpoints));
    register_pvar("endpoint_bytes", "Memory held by this device's endpoints (bytes)",
                  MCA_BASE_PVAR_CLASS_SIZE, offsetof(opal_btl_usnic_stats_t, endpoint_bytes));
    register_pvar("send_table_bytes", "Memory of this device's send tables, shared by its "
                  "endpoints: held while segments are in flight, or free for reuse (bytes)",
                  MCA_BASE_PVAR_CLASS_SIZE, offsetof(opal_btl_usnic_stats_t, send_table_bytes));
    register_pvar("reassembly_bytes", "Memory of this device's reassembly slots, shared by its "
                  "endpoints: held while a peer's fragment is being put together, or free for "
                  "reuse (bytes)",
                  MCA_BASE_PVAR_CLASS_SIZE, offsetof(opal_btl_usnic_stats_t, reassembly_bytes));
    /* generic: MPI_T reports sums relative to when a handle started */
    register_pvar("add_procs_usec", "Time spent adding peers (add_procs), microseconds",
                  MCA_BASE_PVAR_CLASS_GENERIC,
                  offsetof(opal_btl_usnic_stats_t, add_procs_usec));
}
