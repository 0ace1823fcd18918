/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 * $COPYRIGHT$
 * SPDX-License-Identifier: BSD-3-Clause
 *
 * Timing of code as it runs on a message's path over Soft-RoCE, right after
 * the kernel's work for it (bench/pml-cost.sh --vm): a piece of code timed n
 * times in a row (hot), a kernel operation alone (open, read and close
 * /proc/self/stat), and n times the operation then the code; the last less
 * the operation is the code's time after the kernel ran.
 */

#ifndef AFTER_KERNEL_H
#define AFTER_KERNEL_H

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static double after_kernel_now_us(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec * 1e-3;
}

static void after_kernel_op(void)
{
    char buf[4096];
    int fd = open("/proc/self/stat", O_RDONLY);

    if (fd < 0 || read(fd, buf, sizeof(buf)) <= 0) {
        fprintf(stderr, "/proc/self/stat unreadable\n");
        exit(1);
    }
    close(fd);
}

/* Prints "NAME HOT OPERATION AFTER", µs per run of code(). */
static void after_kernel_time(const char *name, void (*code)(void), int n)
{
    double t0 = after_kernel_now_us(), t1, t2;

    for (int i = 0; i < n; ++i) {
        code();
    }
    t1 = after_kernel_now_us();
    for (int i = 0; i < n; ++i) {
        after_kernel_op();
    }
    t2 = after_kernel_now_us();
    for (int i = 0; i < n; ++i) {
        after_kernel_op();
        code();
    }
    printf("%s %.3f %.3f %.3f\n", name, (t1 - t0) / n, (t2 - t1) / n,
           ((after_kernel_now_us() - t2) - (t2 - t1)) / n);
}

#endif
