/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 * $COPYRIGHT$
 * SPDX-License-Identifier: BSD-3-Clause
 *
 * What a function call costs where this runs (bench/pml-cost.sh --vm: on the
 * host and in the VM): 64 calls of distinct empty functions, direct and
 * through pointers, against a loop of 256 iterations without calls; each
 * timed hot and each after a kernel operation (after_kernel.h).  Prints per
 * kind and round a line "KIND HOT OPERATION AFTER", microseconds per run of
 * the 64 calls (or of the loop).
 */

#include <stdio.h>
#include <stdlib.h>

#include "after_kernel.h"

static volatile int sink;

#define F(i) static __attribute__((noinline)) void f##i(void) { sink += i; }
#define F8(i) F(i##0) F(i##1) F(i##2) F(i##3) F(i##4) F(i##5) F(i##6) F(i##7)
F8(1) F8(2) F8(3) F8(4) F8(5) F8(6) F8(7) F8(8)
#define C8(i) f##i##0(); f##i##1(); f##i##2(); f##i##3(); f##i##4(); f##i##5(); f##i##6(); f##i##7();
#define P8(i) f##i##0, f##i##1, f##i##2, f##i##3, f##i##4, f##i##5, f##i##6, f##i##7,

static void (*const table[64])(void) = {P8(1) P8(2) P8(3) P8(4) P8(5) P8(6) P8(7) P8(8)};

static void direct(void)
{
    C8(1) C8(2) C8(3) C8(4) C8(5) C8(6) C8(7) C8(8)
    sink += 0; /* (the last call is a call, not a jump) */
}

static void indirect(void)
{
    for (int i = 0; i < 64; ++i) {
        table[i]();
    }
}

static void loop(void)
{
    for (int i = 0; i < 256; ++i) {
        sink += i;
    }
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 0, rounds = argc > 2 ? atoi(argv[2]) : 0;

    if (n < 1 || rounds < 1) {
        fprintf(stderr, "usage: vm_calls N ROUNDS\n");
        return 2;
    }
    for (int r = 0; r < rounds; ++r) {
        after_kernel_time("direct", direct, n);
        after_kernel_time("indirect", indirect, n);
        after_kernel_time("loop", loop, n);
    }
    return 0;
}
