/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 * $COPYRIGHT$
 * SPDX-License-Identifier: BSD-3-Clause
 *
 * Interface filter parsing and matching, address printing, random numbers.
 */

#include "opal_config.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "opal/util/argv.h"
#include "opal/util/proc.h"
#include "opal/util/show_help.h"

#include "btl_usnic_util.h"
#include "btl_usnic_wire.h"

uint32_t opal_btl_usnic_prefix_to_mask(uint32_t prefix)
{
    if (0 == prefix) {
        return 0;
    }
    if (prefix >= 32) {
        return 0xffffffffu;
    }
    return htonl(~((1u << (32 - prefix)) - 1));
}

/* "a.b.c.d/n" with 0 <= n <= 32, nothing else. */
static bool parse_cidr(const char *s, uint32_t *net, uint32_t *prefix)
{
    char addr[INET_ADDRSTRLEN];
    const char *slash = strchr(s, '/');
    char *end;
    struct in_addr in;
    long n;

    if (NULL == slash || (size_t)(slash - s) >= sizeof(addr) || '\0' == slash[1]) {
        return false;
    }
    memcpy(addr, s, slash - s);
    addr[slash - s] = '\0';
    if (1 != inet_pton(AF_INET, addr, &in)) {
        return false;
    }
    n = strtol(slash + 1, &end, 10);
    if ('\0' != *end || !isdigit((unsigned char) slash[1]) || n < 0 || n > 32) {
        return false;
    }
    *prefix = (uint32_t) n;
    *net = in.s_addr & opal_btl_usnic_prefix_to_mask(*prefix);
    return true;
}

opal_btl_usnic_if_filter_t *opal_btl_usnic_parse_ifex_str(const char *value,
                                                          const char *param_name)
{
    opal_btl_usnic_if_filter_t *filter;
    char **argv;
    int argc;

    if (NULL == value || '\0' == value[0]) {
        return NULL;
    }
    argv = opal_argv_split(value, ',');
    argc = opal_argv_count(argv);
    filter = calloc(1, sizeof(*filter));
    if (NULL == filter || (argc > 0 && NULL == (filter->entries = calloc(argc, sizeof(*filter->entries))))) {
        free(filter);
        opal_argv_free(argv);
        return NULL;
    }
    for (int i = 0; i < argc; ++i) {
        char *s = argv[i];
        opal_btl_usnic_if_filter_entry_t *e = &filter->entries[filter->n];

        /* trim blanks so "a, b" works */
        while (isspace((unsigned char) *s)) {
            ++s;
        }
        for (char *t = s + strlen(s); t > s && isspace((unsigned char) t[-1]); --t) {
            t[-1] = '\0';
        }
        if ('\0' == *s) {
            continue;
        }
        if (isalpha((unsigned char) s[0])) {
            e->name = strdup(s);
            ++filter->n;
        } else if (parse_cidr(s, &e->net, &e->prefix)) {
            ++filter->n;
        } else {
            opal_show_help("help-mpi-btl-usnic.txt", "invalid if_inexclude", true,
                           param_name, opal_process_info.nodename, s,
                           "expected a device name or an IPv4 network a.b.c.d/n");
        }
    }
    opal_argv_free(argv);
    /* Even with only bad entries the (empty) filter is kept: an include
     * list then includes nothing, as written. */
    return filter;
}

void opal_btl_usnic_free_filter(opal_btl_usnic_if_filter_t *filter)
{
    if (NULL == filter) {
        return;
    }
    for (int i = 0; i < filter->n; ++i) {
        free(filter->entries[i].name);
    }
    free(filter->entries);
    free(filter);
}

bool opal_btl_usnic_filter_match(const opal_btl_usnic_if_filter_t *filter, const char *dev_name,
                                 const char *if_name, uint32_t ipv4, uint32_t prefix)
{
    for (int i = 0; i < filter->n; ++i) {
        const opal_btl_usnic_if_filter_entry_t *e = &filter->entries[i];
        if (NULL != e->name) {
            if ((NULL != dev_name && 0 == strcmp(e->name, dev_name)) ||
                (NULL != if_name && 0 == strcmp(e->name, if_name))) {
                return true;
            }
        } else if (e->prefix == prefix &&
                   (ipv4 & opal_btl_usnic_prefix_to_mask(prefix)) == e->net) {
            return true;
        }
    }
    return false;
}

void opal_btl_usnic_snprintf_ipv4(char *out, size_t size, uint32_t ipv4, uint32_t prefix)
{
    const uint8_t *b = (const uint8_t *) &ipv4;
    snprintf(out, size, "%u.%u.%u.%u/%u", b[0], b[1], b[2], b[3], prefix);
}

void opal_btl_usnic_snprintf_mac(char *out, size_t size, const uint8_t mac[6])
{
    snprintf(out, size, "%02x:%02x:%02x:%02x:%02x:%02x", mac[0], mac[1], mac[2], mac[3], mac[4],
             mac[5]);
}

bool opal_btl_usnic_may_lock_unlimited(void)
{
    char line[256];
    bool yes = false;
    FILE *f = fopen("/proc/self/status", "r");

    if (NULL == f) {
        return false;
    }
    while (NULL != fgets(line, sizeof(line), f)) {
        unsigned long long caps;
        if (1 == sscanf(line, "CapEff: %llx", &caps)) {
            yes = 0 != (caps & (1ULL << 14)); /* CAP_IPC_LOCK */
            break;
        }
    }
    fclose(f);
    return yes;
}

int opal_btl_usnic_random(void *buf, size_t len)
{
    uint8_t *p = buf;

    while (len > 0) {
        ssize_t n = getrandom(p, len, 0);
        if (n < 0) {
            if (EINTR == errno) {
                continue;
            }
            return errno;
        }
        p += n;
        len -= (size_t) n;
    }
    return 0;
}

const char *opal_btl_usnic_transport_name(uint8_t transport)
{
    switch (transport) {
    case USNIC_TRANSPORT_VERBS: return "verbs (UD queue pairs)";
    case USNIC_TRANSPORT_UDP: return "udp (kernel UDP sockets)";
    default: return "unknown";
    }
}
