/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 * $COPYRIGHT$
 * SPDX-License-Identifier: BSD-3-Clause
 *
 * Small helpers: the interface filter, address printing, fatal exits.
 */

#ifndef BTL_USNIC_UTIL_H
#define BTL_USNIC_UTIL_H

#include <stdbool.h>
#include <stdint.h>

#include "btl_usnic.h"

BEGIN_C_DECLS

/* Parse a comma-separated if_include/if_exclude value: device or netdev
 * names, and IPv4 networks as a.b.c.d/n.  Bad entries are reported (naming
 * param_name) and skipped.  Returns NULL for a NULL or empty value. */
opal_btl_usnic_if_filter_t *opal_btl_usnic_parse_ifex_str(const char *value,
                                                          const char *param_name);
void opal_btl_usnic_free_filter(opal_btl_usnic_if_filter_t *filter);

/* True if any entry names the device or netdev, or is the network of the
 * interface (same prefix length and same masked address). */
bool opal_btl_usnic_filter_match(const opal_btl_usnic_if_filter_t *filter, const char *dev_name,
                                 const char *if_name, uint32_t ipv4, uint32_t prefix);

/* Network-order netmask of a prefix length. */
uint32_t opal_btl_usnic_prefix_to_mask(uint32_t prefix);

/* "a.b.c.d/n" and "aa:bb:cc:dd:ee:ff" into caller buffers. */
void opal_btl_usnic_snprintf_ipv4(char *out, size_t size, uint32_t ipv4, uint32_t prefix);

/* USNIC_TRANSPORT_* (btl_usnic_wire.h) as messages name it. */
const char *opal_btl_usnic_transport_name(uint8_t transport);
void opal_btl_usnic_snprintf_mac(char *out, size_t size, const uint8_t mac[6]);

/* True if this process may lock memory beyond RLIMIT_MEMLOCK (it has
 * CAP_IPC_LOCK, as root usually does). */
bool opal_btl_usnic_may_lock_unlimited(void);

/* Fill buf with bytes from the kernel's random source (getrandom), which
 * nobody can predict from the pid, the time or the process name.  Returns
 * 0, or the errno of the failure. */
int opal_btl_usnic_random(void *buf, size_t len);

END_C_DECLS
#endif /* BTL_USNIC_UTIL_H */
