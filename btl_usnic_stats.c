/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 * $COPYRIGHT$
 *
 * Statistics reports.
 */

#include "opal_config.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "opal/util/output.h"
#include "opal/util/proc.h"

#include "btl_usnic.h"
#include "btl_usnic_module.h"
#include "btl_usnic_stats.h"

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
                 " max_rcvd_window_size=%" PRIu64, s->max_sent_window_size,
                 s->max_rcvd_window_size);
    }
    opal_output(0, "%s", line);
    if (usnic_component.stats_relative) {
        memset(s, 0, sizeof(*s));
    }
}
