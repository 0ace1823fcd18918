/* Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 * SPDX-License-Identifier: BSD-3-Clause */
/*
 * load-check: prove that the usnic BTL built inside an Open MPI 4.1 or
 * 5.0 tree loads and runs its MCA hooks.
 *
 * Built by tools/intree-check.sh against the headers and the
 * libopen-pal of that build tree (not the installed Open MPI).  It
 *
 *   1. initialises OPAL with opal_init(), as an MPI process would
 *      before its BTLs are opened;
 *   2. opens the btl framework, which dlopen()s mca_btl_usnic.so from
 *      the component path given in the environment, runs its register
 *      function and then its open function;
 *   3. checks that "usnic" is among the framework's opened
 *      components, that it calls itself a btl of this tree's BTL API
 *      (3.1.0 on 4.1, 3.3.0 on 5.0) and of this OPAL version, and that
 *      its register function created MCA variables
 *      named btl_usnic_*;
 *   4. closes the framework (running the close function) and
 *      finalises OPAL.
 *
 * The script sets, before running it:
 *   OMPI_MCA_mca_base_component_path  the build tree's component dirs
 *   OMPI_MCA_btl                      usnic
 *   OMPI_MCA_btl_base_verbose         100
 *
 * Exit status: 0 when every check passed, 1 otherwise.  Every check
 * prints one "ok"/"FAIL" line, and the last line is
 * "load-check: N passed, M failed".
 */

#include "opal_config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "opal/constants.h"
#include "opal/class/opal_list.h"
#include "opal/runtime/opal.h"
#include "opal/mca/base/base.h"
#include "opal/mca/base/mca_base_var.h"
#include "opal/mca/btl/btl.h"
#include "opal/mca/btl/base/base.h"

/* 5.0's btl.h names its BTL API version (3.3.0); 4.1's is 3.1.0. */
#ifndef MCA_BTL_BASE_MAJOR_VERSION
#define MCA_BTL_BASE_MAJOR_VERSION 3
#define MCA_BTL_BASE_MINOR_VERSION 1
#define MCA_BTL_BASE_PATCH_VERSION 0
#endif

static int passed;
static int failed;

static void check(int cond, const char *what)
{
    if (cond) {
        passed++;
        printf("load-check: ok   %s\n", what);
    } else {
        failed++;
        printf("load-check: FAIL %s\n", what);
    }
    fflush(stdout);
}

static int finish(void)
{
    printf("load-check: %d passed, %d failed\n", passed, failed);
    return (0 == failed && passed > 0) ? 0 : 1;
}

/* The opened component called "usnic", or NULL. */
static const mca_base_component_t *find_usnic(void)
{
    mca_base_component_list_item_t *cli;

    OPAL_LIST_FOREACH(cli, &opal_btl_base_framework.framework_components,
                      mca_base_component_list_item_t) {
        const mca_base_component_t *c = cli->cli_component;
        printf("load-check: btl framework has component \"%s\"\n",
               c->mca_component_name);
        if (0 == strcmp(c->mca_component_name, "usnic")) {
            return c;
        }
    }
    return NULL;
}

/* How many MCA variables named btl_usnic_* exist, leaving out the three
 * that the MCA base registers by itself for every component
 * (btl_usnic_{major,minor,release}_version): the rest can only come
 * from the component's own register function. */
static int count_usnic_vars(void)
{
    int n = mca_base_var_get_count();
    int found = 0;

    for (int i = 0; i < n; ++i) {
        const mca_base_var_t *var = NULL;
        if (OPAL_SUCCESS != mca_base_var_get(i, &var) || NULL == var ||
            NULL == var->mbv_full_name) {
            continue;
        }
        if (0 == strncmp(var->mbv_full_name, "btl_usnic_", 10) &&
            0 != strcmp(var->mbv_full_name, "btl_usnic_major_version") &&
            0 != strcmp(var->mbv_full_name, "btl_usnic_minor_version") &&
            0 != strcmp(var->mbv_full_name, "btl_usnic_release_version")) {
            if (found < 5) {
                printf("load-check: variable %s\n", var->mbv_full_name);
            }
            found++;
        }
    }
    return found;
}

int main(int argc, char *argv[])
{
    const mca_base_component_t *usnic;
    const char *path = getenv("OMPI_MCA_mca_base_component_path");
    char what[256];
    int rc;

    if (NULL == path) {
        printf("load-check: component path: the default one\n");
    } else {
        int dirs = 1;
        for (const char *p = path; *p; ++p) {
            dirs += (':' == *p);
        }
        printf("load-check: component path: %d dirs, %s the usnic build dir\n", dirs,
               strstr(path, "/btl/usnic/") ? "including" : "NOT including");
    }

    rc = opal_init(&argc, &argv);
    check(OPAL_SUCCESS == rc, "opal_init()");
    if (OPAL_SUCCESS != rc) {
        return finish();
    }

    rc = mca_base_framework_open(&opal_btl_base_framework, 0);
    snprintf(what, sizeof(what), "mca_base_framework_open(btl) returned %d", rc);
    check(OPAL_SUCCESS == rc, what);

    usnic = (OPAL_SUCCESS == rc) ? find_usnic() : NULL;
    check(NULL != usnic, "component \"usnic\" was loaded and opened");

    if (NULL != usnic) {
        snprintf(what, sizeof(what), "its MCA type is btl %d.%d.%d (want btl %d.%d.%d)",
                 usnic->mca_type_major_version, usnic->mca_type_minor_version,
                 usnic->mca_type_release_version, MCA_BTL_BASE_MAJOR_VERSION,
                 MCA_BTL_BASE_MINOR_VERSION, MCA_BTL_BASE_PATCH_VERSION);
        check(0 == strcmp(usnic->mca_type_name, "btl") &&
              MCA_BTL_BASE_MAJOR_VERSION == usnic->mca_type_major_version &&
              MCA_BTL_BASE_MINOR_VERSION == usnic->mca_type_minor_version &&
              MCA_BTL_BASE_PATCH_VERSION == usnic->mca_type_release_version, what);

        snprintf(what, sizeof(what), "it was built for OPAL %d.%d.%d (this OPAL is %d.%d.%d)",
                 usnic->mca_component_major_version, usnic->mca_component_minor_version,
                 usnic->mca_component_release_version, OPAL_MAJOR_VERSION,
                 OPAL_MINOR_VERSION, OPAL_RELEASE_VERSION);
        check(OPAL_MAJOR_VERSION == usnic->mca_component_major_version &&
              OPAL_MINOR_VERSION == usnic->mca_component_minor_version, what);

        rc = count_usnic_vars();
        snprintf(what, sizeof(what), "its register function created %d btl_usnic_* MCA variables", rc);
        check(rc > 0, what);
    }

    rc = mca_base_framework_close(&opal_btl_base_framework);
    snprintf(what, sizeof(what), "mca_base_framework_close(btl) returned %d", rc);
    check(OPAL_SUCCESS == rc, what);

    rc = opal_finalize();
    snprintf(what, sizeof(what), "opal_finalize() returned %d", rc);
    check(OPAL_SUCCESS == rc, what);

    return finish();
}
