/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 * $COPYRIGHT$
 * SPDX-License-Identifier: BSD-3-Clause
 *
 * Runs every registered test: one PASS/FAIL line each, then
 * "unit: N passed, N failed"; exits non-zero if any test failed.
 */

#include "opal_config.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "opal/constants.h"
#include "opal/runtime/opal.h"
#if OPAL_MAJOR_VERSION >= 5
#include "opal/mca/accelerator/base/base.h"
#endif

#include "btl_usnic_compat.h"
#include "usnic_test.h"

static usnic_test_t *first, **last = &first;
static const char *current;

void usnic_test_register(usnic_test_t *t)
{
    *last = t;
    last = &t->next;
}

int usnic_test_fail(const char *file, int line, const char *fmt, ...)
{
    va_list ap;

    printf("FAIL %s: ", current);
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf(" (%s:%d)\n", file, line);
    return 1;
}

int main(int argc, char **argv)
{
    int npass = 0, nfail = 0;

    /* opal_show_help (reached from the interface filter parser) writes to
     * stderr; line buffering keeps our lines in order with it in a pipe. */
    setvbuf(stdout, NULL, _IOLBF, 0);
#if OPAL_MAJOR_VERSION >= 5
    /* 5.0 searches Open MPI's data dir for help files first and cannot be
     * told otherwise later: make this tree that dir (see fake_verbs.c). */
    setenv("OPAL_PKGDATADIR", USNIC_SRCDIR, 1);
#endif
    if (OPAL_SUCCESS != opal_init_util(&argc, &argv)) {
        fprintf(stderr, "unit: opal_init_util failed\n");
        return 2;
    }
    /* As opal_init does: the checker's progress thread (test_conn.c) can
     * then be stopped from the main thread. */
    opal_event_use_threads();
#if OPAL_MAJOR_VERSION >= 5
    /* 5.0's convertor asks the accelerator framework about every buffer;
     * opal_init opens it, opal_init_util does not. */
    if (OPAL_SUCCESS != mca_base_framework_open(&opal_accelerator_base_framework, 0) ||
        OPAL_SUCCESS != opal_accelerator_base_select()) {
        fprintf(stderr, "unit: no accelerator component\n");
        return 2;
    }
#endif
    for (usnic_test_t *t = first; NULL != t; t = t->next) {
        current = t->name;
        if (0 == t->fn()) {
            printf("PASS %s\n", t->name);
            ++npass;
        } else {
            ++nfail;
        }
    }
    printf("unit: %d passed, %d failed\n", npass, nfail);
    opal_finalize_util();
    return 0 == nfail ? 0 : 1;
}
