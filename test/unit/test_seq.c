/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 * $COPYRIGHT$
 * SPDX-License-Identifier: BSD-3-Clause
 *
 * 16-bit sequence number comparison across wraparound (btl_usnic.h).
 */

#include "opal_config.h"

#include "btl_usnic.h"
#include "btl_usnic_window.h"
#include "usnic_test.h"

USNIC_TEST(seq_wraparound)
{
    /* 65535 is just before 0 */
    check_int_eq(USNIC_SEQ_DIFF(0, 65535), 1);
    check_int_eq(USNIC_SEQ_DIFF(65535, 0), -1);
    check(USNIC_SEQ_LT(65535, 0));
    check(USNIC_SEQ_LE(65535, 0));
    check(USNIC_SEQ_GT(0, 65535));
    check(USNIC_SEQ_GE(0, 65535));
    check(!USNIC_SEQ_GT(65535, 0));

    /* 65000 ... wrap ... 100 */
    check(USNIC_SEQ_LT(65000, 100));
    check(!USNIC_SEQ_GE(65000, 100));
    check(USNIC_SEQ_GT(100, 65000));
    check(!USNIC_SEQ_LE(100, 65000));
    check_int_eq(USNIC_SEQ_DIFF(100, 65000), 636);

    /* no wrap */
    check(USNIC_SEQ_LT(100, 200));
    check(USNIC_SEQ_GT(200, 100));
    return 0;
}

USNIC_TEST(seq_equal)
{
    static const opal_btl_usnic_seq_t vals[] = {0, 1, 32767, 32768, 65535};

    for (size_t i = 0; i < sizeof(vals) / sizeof(vals[0]); ++i) {
        opal_btl_usnic_seq_t s = vals[i];
        check_int_eq(USNIC_SEQ_DIFF(s, s), 0);
        check(USNIC_SEQ_LE(s, s));
        check(USNIC_SEQ_GE(s, s));
        check(!USNIC_SEQ_LT(s, s));
        check(!USNIC_SEQ_GT(s, s));
    }
    return 0;
}

/* The window code has its own copy of the difference (it must not need
 * Open MPI headers); both must agree. */
USNIC_TEST(seq_diff_matches_window_h)
{
    for (uint32_t a = 0; a < 65536; a += 251) {
        for (uint32_t b = 0; b < 65536; b += 257) {
            check_int_eq(USNIC_SEQ_DIFF16((uint16_t) a, (uint16_t) b),
                         USNIC_SEQ_DIFF((uint16_t) a, (uint16_t) b));
        }
    }
    return 0;
}
