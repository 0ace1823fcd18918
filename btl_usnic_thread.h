/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 * $COPYRIGHT$
 * SPDX-License-Identifier: BSD-3-Clause
 *
 * Threads: the component lock that makes the BTL safe under
 * MPI_THREAD_MULTIPLE, and the optional progress thread
 * (btl_usnic_thread.c).
 */

#ifndef BTL_USNIC_THREAD_H
#define BTL_USNIC_THREAD_H

#include "btl_usnic.h"

BEGIN_C_DECLS

/* For code that OPAL's event loops run outside the BTL entry points
 * (timers, device events): free when the process uses no threads. */
#define USNIC_LOCK() OPAL_THREAD_LOCK(&usnic_component.lock)
#define USNIC_UNLOCK() OPAL_THREAD_UNLOCK(&usnic_component.lock)

/* After the modules exist: turn on OPAL's threading if the progress thread
 * is asked for, route every BTL entry point and progress through the lock
 * if threads are in use, and start the progress thread (if it cannot
 * start, a help message says so and usnic runs without it). */
void opal_btl_usnic_thread_init(void);

/* Stop and join the progress thread, if it runs.  Idempotent. */
void opal_btl_usnic_thread_fini(void);

END_C_DECLS
#endif /* BTL_USNIC_THREAD_H */
