/* Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 * SPDX-License-Identifier: BSD-3-Clause */
/* LD_PRELOAD shim for t-secrets: getrandom() fails with ENOSYS when the usnic component
 * (mca_btl_usnic.so) calls it, after the first NOGETRANDOM_AFTER such calls (default 0);
 * everybody else gets the real one. Build: gcc -shared -fPIC -o nogetrandom.so nogetrandom.c -ldl
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/types.h>

ssize_t getrandom(void *buf, size_t len, unsigned int flags)
{
    static ssize_t (*real)(void *, size_t, unsigned int);
    static long calls;
    const char *after = getenv("NOGETRANDOM_AFTER");
    Dl_info info;

    if (NULL == real) {
        real = (ssize_t(*)(void *, size_t, unsigned int)) dlsym(RTLD_NEXT, "getrandom");
    }
    if (0 != dladdr(__builtin_return_address(0), &info) && NULL != info.dli_fname &&
        NULL != strstr(info.dli_fname, "mca_btl_usnic") &&
        calls++ >= (NULL != after ? atol(after) : 0)) {
        errno = ENOSYS;
        return -1;
    }
    return real(buf, len, flags);
}
