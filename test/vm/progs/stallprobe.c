/* Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 * SPDX-License-Identifier: BSD-3-Clause */
/* stallprobe CPU THRESHOLD_US: how often, and how long, vCPU CPU could not run anything.
 *
 * Pinned to CPU at the highest SCHED_FIFO priority, it wakes every millisecond (absolute
 * deadlines, CLOCK_MONOTONIC) and notes each wake-up later than THRESHOLD_US.  A real-time
 * task preempts every ordinary one at once, so such a late wake-up is time the vCPU itself
 * did not run (the host descheduled its thread) or spent with interrupts or softirqs
 * masked: a stall that a process on that vCPU could not have escaped either.  Runs until
 * SIGTERM or SIGINT, then prints one line:
 *   stallprobe cpu C: wakeups W stalls N weighted K max_us M total_us T
 * where K weighs a stall of S us as 1 + floor(log2(S / THRESHOLD_US)): a retransmit timeout
 * doubles at each expiry, so with THRESHOLD_US at least the timeout, the timeouts a stall
 * that long can cause (t-lossless).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define PERIOD_NS 1000000L

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
    (void) sig;
    stop = 1;
}

static double ts_us(const struct timespec *t)
{
    return t->tv_sec * 1e6 + t->tv_nsec / 1e3;
}

int main(int argc, char **argv)
{
    struct sched_param sp = {.sched_priority = sched_get_priority_max(SCHED_FIFO)};
    struct sigaction sa;
    struct timespec next, now;
    unsigned long wakeups = 0, stalls = 0, weighted = 0;
    double thresh, max_us = 0, total_us = 0;
    cpu_set_t set;
    int cpu;

    if (argc != 3 || (cpu = atoi(argv[1])) < 0 || (thresh = atof(argv[2])) <= 0) {
        fprintf(stderr, "usage: stallprobe CPU THRESHOLD_US\n");
        return 2;
    }
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    if (0 != sched_setaffinity(0, sizeof(set), &set) ||
        0 != sched_setscheduler(0, SCHED_FIFO, &sp)) {
        fprintf(stderr, "stallprobe: cpu %d, SCHED_FIFO: %s\n", cpu, strerror(errno));
        return 1;
    }
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);

    clock_gettime(CLOCK_MONOTONIC, &next);
    while (!stop) {
        next.tv_nsec += PERIOD_NS;
        if (next.tv_nsec >= 1000000000L) {
            next.tv_nsec -= 1000000000L;
            ++next.tv_sec;
        }
        if (0 != clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, NULL)) {
            continue; /* a signal: the loop test decides */
        }
        clock_gettime(CLOCK_MONOTONIC, &now);
        ++wakeups;
        double late = ts_us(&now) - ts_us(&next);
        if (late > thresh) {
            unsigned long w = 1;
            for (double s = late / thresh; s >= 2; s /= 2) {
                ++w;
            }
            ++stalls;
            weighted += w;
            total_us += late;
            if (late > max_us) {
                max_us = late;
            }
            /* a stall covers the deadlines it overran: start afresh from now */
            next = now;
        }
    }
    printf("stallprobe cpu %d: wakeups %lu stalls %lu weighted %lu max_us %.0f total_us %.0f\n",
           cpu, wakeups, stalls, weighted, max_us, total_us);
    return 0;
}
