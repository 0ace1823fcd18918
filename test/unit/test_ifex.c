/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 * $COPYRIGHT$
 * SPDX-License-Identifier: BSD-3-Clause
 *
 * Interface filter (btl_usnic_if_include / _exclude) parsing and matching,
 * netmasks and address printing.
 */

#include "opal_config.h"

#include <arpa/inet.h>
#include <stdio.h>

#include "btl_usnic_util.h"
#include "usnic_test.h"

#define PARAM "btl_usnic_if_include"

/* Writes the filter's entries back as "name,a.b.c.d/n,..." so that one
 * string comparison checks the count, order and content, and a failure
 * shows what was parsed. */
static const char *describe(const opal_btl_usnic_if_filter_t *f, char *out, size_t size)
{
    size_t used = 0;

    out[0] = '\0';
    for (int i = 0; i < f->n && used < size; ++i) {
        const opal_btl_usnic_if_filter_entry_t *e = &f->entries[i];
        char net[32];

        if (NULL == e->name) {
            opal_btl_usnic_snprintf_ipv4(net, sizeof(net), e->net, e->prefix);
        }
        used += snprintf(out + used, size - used, "%s%s", i ? "," : "",
                         NULL != e->name ? e->name : net);
    }
    return out;
}

USNIC_TEST(ifex_null_or_empty)
{
    check(NULL == opal_btl_usnic_parse_ifex_str(NULL, PARAM));
    check(NULL == opal_btl_usnic_parse_ifex_str("", PARAM));
    return 0;
}

USNIC_TEST(ifex_names)
{
    opal_btl_usnic_if_filter_t *f = opal_btl_usnic_parse_ifex_str("rxe0,eth1", PARAM);
    char buf[128];

    check(NULL != f);
    check_int_eq(f->n, 2);
    check_str_eq(f->entries[0].name, "rxe0");
    check_str_eq(f->entries[1].name, "eth1");
    check_str_eq(describe(f, buf, sizeof(buf)), "rxe0,eth1");
    opal_btl_usnic_free_filter(f);
    return 0;
}

USNIC_TEST(ifex_cidr)
{
    opal_btl_usnic_if_filter_t *f = opal_btl_usnic_parse_ifex_str("10.88.0.0/24", PARAM);

    check(NULL != f);
    check_int_eq(f->n, 1);
    check(NULL == f->entries[0].name);
    check_int_eq(f->entries[0].net, inet_addr("10.88.0.0"));
    check_int_eq(f->entries[0].prefix, 24);
    opal_btl_usnic_free_filter(f);

    /* host bits are masked off */
    f = opal_btl_usnic_parse_ifex_str("10.88.0.5/24", PARAM);
    check(NULL != f);
    check_int_eq(f->n, 1);
    check_int_eq(f->entries[0].net, inet_addr("10.88.0.0"));
    check_int_eq(f->entries[0].prefix, 24);
    opal_btl_usnic_free_filter(f);
    return 0;
}

USNIC_TEST(ifex_mixed_and_blanks)
{
    opal_btl_usnic_if_filter_t *f =
        opal_btl_usnic_parse_ifex_str(" rxe0 ,10.88.1.9/16,\teth1\t, 192.168.7.7/32 ", PARAM);
    char buf[128];

    check(NULL != f);
    check_str_eq(describe(f, buf, sizeof(buf)), "rxe0,10.88.0.0/16,eth1,192.168.7.7/32");
    opal_btl_usnic_free_filter(f);
    return 0;
}

USNIC_TEST(ifex_bad_entries_skipped)
{
    static const char *const bad[] = {
        "10.88.0.0", "10.88.0.0/33", "300.1.1.1/8", "1.2.3.4/", "/24", "10.0.0.0/2x",
    };
    opal_btl_usnic_if_filter_t *f;
    char buf[128];

    /* each alone: reported and skipped, leaving an empty filter */
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); ++i) {
        f = opal_btl_usnic_parse_ifex_str(bad[i], PARAM);
        check(NULL != f);
        check_str_eq(describe(f, buf, sizeof(buf)), "");
        opal_btl_usnic_free_filter(f);
    }

    /* between good entries: only the bad one goes */
    f = opal_btl_usnic_parse_ifex_str("rxe0,10.0.0.0/2x,10.1.0.0/16", PARAM);
    check(NULL != f);
    check_str_eq(describe(f, buf, sizeof(buf)), "rxe0,10.1.0.0/16");
    opal_btl_usnic_free_filter(f);
    return 0;
}

USNIC_TEST(ifex_all_bad_is_empty_filter)
{
    /* not NULL: an include list of only bad entries includes nothing */
    opal_btl_usnic_if_filter_t *f = opal_btl_usnic_parse_ifex_str("10.88.0.0, 1.2.3.4/", PARAM);

    check(NULL != f);
    check_int_eq(f->n, 0);
    opal_btl_usnic_free_filter(f);
    return 0;
}

USNIC_TEST(filter_match)
{
    opal_btl_usnic_if_filter_t *f =
        opal_btl_usnic_parse_ifex_str("rxe0,eth1,10.88.0.0/24", PARAM);
    uint32_t other = inet_addr("192.168.1.1");

    check(NULL != f);
    /* by device name, by netdev name, either may be unknown */
    check(opal_btl_usnic_filter_match(f, "rxe0", "eth9", other, 24));
    check(opal_btl_usnic_filter_match(f, "rxe0", NULL, other, 24));
    check(opal_btl_usnic_filter_match(f, "mlx5_0", "eth1", other, 24));
    check(opal_btl_usnic_filter_match(f, NULL, "eth1", other, 24));
    /* by network: the interface's address and prefix */
    check(opal_btl_usnic_filter_match(f, "mlx5_0", "eth9", inet_addr("10.88.0.77"), 24));
    /* no match */
    check(!opal_btl_usnic_filter_match(f, "rxe1", "eth0", other, 24));
    check(!opal_btl_usnic_filter_match(f, NULL, NULL, inet_addr("10.88.1.77"), 24));
    check(!opal_btl_usnic_filter_match(f, "RXE0", "eth", other, 24));
    /* same addresses under another prefix are another network */
    check(!opal_btl_usnic_filter_match(f, "mlx5_0", "eth9", inet_addr("10.88.0.77"), 16));
    opal_btl_usnic_free_filter(f);

    /* a /16 entry does not match an interface inside it with a /24 */
    f = opal_btl_usnic_parse_ifex_str("10.88.0.0/16", PARAM);
    check(NULL != f);
    check(opal_btl_usnic_filter_match(f, NULL, NULL, inet_addr("10.88.3.4"), 16));
    check(!opal_btl_usnic_filter_match(f, NULL, NULL, inet_addr("10.88.3.4"), 24));
    check(!opal_btl_usnic_filter_match(f, NULL, NULL, inet_addr("10.89.3.4"), 16));
    opal_btl_usnic_free_filter(f);
    return 0;
}

USNIC_TEST(prefix_to_mask)
{
    check_int_eq(opal_btl_usnic_prefix_to_mask(0), 0);
    check_int_eq(opal_btl_usnic_prefix_to_mask(1), inet_addr("128.0.0.0"));
    check_int_eq(opal_btl_usnic_prefix_to_mask(24), inet_addr("255.255.255.0"));
    check_int_eq(opal_btl_usnic_prefix_to_mask(32), 0xffffffffu);
    return 0;
}

USNIC_TEST(snprintf_addresses)
{
    static const uint8_t mac[6] = {0x02, 0x00, 0x5e, 0x10, 0xab, 0xff};
    char buf[32];

    opal_btl_usnic_snprintf_ipv4(buf, sizeof(buf), inet_addr("10.88.0.5"), 24);
    check_str_eq(buf, "10.88.0.5/24");
    opal_btl_usnic_snprintf_ipv4(buf, sizeof(buf), inet_addr("255.0.1.254"), 0);
    check_str_eq(buf, "255.0.1.254/0");
    /* truncated to the buffer, still terminated */
    opal_btl_usnic_snprintf_ipv4(buf, 8, inet_addr("10.88.0.5"), 24);
    check_str_eq(buf, "10.88.0");
    opal_btl_usnic_snprintf_mac(buf, sizeof(buf), mac);
    check_str_eq(buf, "02:00:5e:10:ab:ff");
    return 0;
}
