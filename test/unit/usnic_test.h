/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 * $COPYRIGHT$
 * SPDX-License-Identifier: BSD-3-Clause
 *
 * A tiny unit-test framework for the host tests of the usnic BTL.
 *
 *   USNIC_TEST(name) { check(...); return 0; }
 *
 * registers a test at load time (one list for all files, run in link
 * order).  A test returns 0 to pass; the first failing check prints
 * "FAIL name: reason (file:line)" and returns from the test.
 */

#ifndef USNIC_TEST_H
#define USNIC_TEST_H

#include <string.h>

typedef struct usnic_test {
    const char *name;
    int (*fn)(void);
    struct usnic_test *next;
} usnic_test_t;

void usnic_test_register(usnic_test_t *t);

/* Prints the FAIL line for the running test; returns 1 for the test to
 * return. */
int usnic_test_fail(const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#define USNIC_TEST(fn)                                                     \
    static int fn(void);                                                   \
    static usnic_test_t usnic_test_##fn = {#fn, fn, NULL};                 \
    __attribute__((constructor)) static void usnic_test_register_##fn(void) \
    {                                                                      \
        usnic_test_register(&usnic_test_##fn);                             \
    }                                                                      \
    static int fn(void)

#define check(cond)                                                        \
    do {                                                                   \
        if (!(cond)) {                                                     \
            return usnic_test_fail(__FILE__, __LINE__, "%s is false", #cond); \
        }                                                                  \
    } while (0)

/* Both sides are evaluated once and compared as long long, which holds
 * every value these tests compare (up to uint32_t). */
#define check_int_eq(got, want)                                            \
    do {                                                                   \
        long long got_ = (long long) (got), want_ = (long long) (want);    \
        if (got_ != want_) {                                               \
            return usnic_test_fail(__FILE__, __LINE__, "%s is %lld, expected %lld", \
                                   #got, got_, want_);                     \
        }                                                                  \
    } while (0)

#define check_str_eq(got, want)                                            \
    do {                                                                   \
        const char *got_ = (got), *want_ = (want);                         \
        if (NULL == got_ || NULL == want_ || 0 != strcmp(got_, want_)) {   \
            return usnic_test_fail(__FILE__, __LINE__, "%s is \"%s\", expected \"%s\"", \
                                   #got, got_ ? got_ : "(null)",           \
                                   want_ ? want_ : "(null)");              \
        }                                                                  \
    } while (0)

#endif /* USNIC_TEST_H */
