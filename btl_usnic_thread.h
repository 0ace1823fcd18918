/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 * $COPYRIGHT$
 *
 * Threads: the component lock that makes the BTL safe under
 * MPI_THREAD_MULTIPLE (btl_usnic_thread.c).
 */

#ifndef BTL_USNIC_THREAD_H
#define BTL_USNIC_THREAD_H

#include "opal/threads/mutex.h"

#include "btl_usnic.h"

BEGIN_C_DECLS

/* For code that OPAL's event loops run outside the BTL entry points
 * (timers, device events): free when the process uses no threads. */
#define USNIC_LOCK() OPAL_THREAD_LOCK(&usnic_component.lock)
#define USNIC_UNLOCK() OPAL_THREAD_UNLOCK(&usnic_component.lock)

/* After the modules exist: if the process uses threads, route every BTL
 * entry point and progress through the lock. */
void opal_btl_usnic_thread_init(void);

END_C_DECLS
#endif /* BTL_USNIC_THREAD_H */
