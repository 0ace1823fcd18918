/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 * $COPYRIGHT$
 * SPDX-License-Identifier: BSD-3-Clause
 *
 * Threads.
 *
 * MPI_THREAD_MULTIPLE: one recursive lock for the whole component
 * (usnic_component.lock) serializes every BTL entry point, progress, the
 * statistics timer and device events.  Free lists, counters, endpoints,
 * PUT targets and the connectivity client's calls are only touched under
 * it.  One lock, not one per module: the PML's receive and completion
 * callbacks run while progress holds it, and ob1 may send from there on any
 * module (it stripes over devices), so with a lock per module two threads
 * progressing two modules could each wait for the other's lock.
 * Recursive: ob1 calls back into the BTL (send, alloc, free, put) from
 * those callbacks.  ob1's own locks (matching, pending lists, peer lookup)
 * cover only its own structures and it calls no BTL function while holding
 * one, so taking them under ours makes no cycle.  Progress only tries the
 * lock: a thread that finds another one progressing usnic (or inside it)
 * leaves the work to it instead of queueing behind it.
 *
 * The locked entry points are installed in the modules only when the
 * process uses threads (opal_using_threads() at component init, set by
 * MPI_THREAD_MULTIPLE or by the progress thread): a single-threaded job
 * calls the BTL directly and pays nothing.
 *
 * Progress thread (btl_usnic_progress_thread): wakes every
 * btl_usnic_progress_thread_interval microseconds and progresses usnic
 * until nothing happened for btl_usnic_ack_iteration_delay + 1 passes, so
 * that receives are acknowledged, delayed ACKs leave and retransmit timers
 * fire while the application computes outside MPI.  It sleeps in between
 * (it never spins), and runs the PML's callbacks like any progress call,
 * which is why it turns on OPAL's threading, as btl/tcp's does.
 */

#include "opal_config.h"

#include <time.h>

#include "opal/runtime/opal.h"
#include "opal/sys/atomic.h"
#include "opal/util/proc.h"
#include "opal/util/show_help.h"

#include "btl_usnic.h"
#include "btl_usnic_endpoint.h"
#include "btl_usnic_module.h"
#include "btl_usnic_thread.h"

/* The unlocked operations: every module starts as a copy of the template. */
#define USNIC_OPS (opal_btl_usnic_module_template.super)

static opal_thread_t progress_thread;
static bool progress_thread_running;
static volatile int32_t progress_thread_stop;

static int locked_add_procs(mca_btl_base_module_t *btl, size_t nprocs, opal_proc_t **procs,
                            mca_btl_base_endpoint_t **endpoints, opal_bitmap_t *reachable)
{
    int rc;

    opal_mutex_lock(&usnic_component.lock);
    rc = USNIC_OPS.btl_add_procs(btl, nprocs, procs, endpoints, reachable);
    opal_mutex_unlock(&usnic_component.lock);
    return rc;
}

static int locked_del_procs(mca_btl_base_module_t *btl, size_t nprocs, opal_proc_t **procs,
                            mca_btl_base_endpoint_t **peers)
{
    int rc;

    opal_mutex_lock(&usnic_component.lock);
    rc = USNIC_OPS.btl_del_procs(btl, nprocs, procs, peers);
    opal_mutex_unlock(&usnic_component.lock);
    return rc;
}

static int locked_finalize(mca_btl_base_module_t *btl)
{
    int rc;

    opal_mutex_lock(&usnic_component.lock);
    rc = USNIC_OPS.btl_finalize(btl);
    opal_mutex_unlock(&usnic_component.lock);
    return rc;
}

static mca_btl_base_descriptor_t *locked_alloc(mca_btl_base_module_t *btl,
                                               mca_btl_base_endpoint_t *endpoint, uint8_t order,
                                               size_t size, uint32_t flags)
{
    mca_btl_base_descriptor_t *des;

    opal_mutex_lock(&usnic_component.lock);
    des = USNIC_OPS.btl_alloc(btl, endpoint, order, size, flags);
    opal_mutex_unlock(&usnic_component.lock);
    return des;
}

static int locked_free(mca_btl_base_module_t *btl, mca_btl_base_descriptor_t *des)
{
    int rc;

    opal_mutex_lock(&usnic_component.lock);
    rc = USNIC_OPS.btl_free(btl, des);
    opal_mutex_unlock(&usnic_component.lock);
    return rc;
}

static mca_btl_base_descriptor_t *locked_prepare_src(mca_btl_base_module_t *btl,
                                                     mca_btl_base_endpoint_t *endpoint,
                                                     opal_convertor_t *conv, uint8_t order,
                                                     size_t reserve, size_t *size,
                                                     uint32_t flags)
{
    mca_btl_base_descriptor_t *des;

    opal_mutex_lock(&usnic_component.lock);
    des = USNIC_OPS.btl_prepare_src(btl, endpoint, conv, order, reserve, size, flags);
    opal_mutex_unlock(&usnic_component.lock);
    return des;
}

static int locked_send(mca_btl_base_module_t *btl, mca_btl_base_endpoint_t *endpoint,
                       mca_btl_base_descriptor_t *des, mca_btl_base_tag_t tag)
{
    int rc;

    opal_mutex_lock(&usnic_component.lock);
    rc = USNIC_OPS.btl_send(btl, endpoint, des, tag);
    opal_mutex_unlock(&usnic_component.lock);
    return rc;
}

static int locked_sendi(mca_btl_base_module_t *btl, mca_btl_base_endpoint_t *endpoint,
                        opal_convertor_t *conv, void *header, size_t header_size,
                        size_t payload_size, uint8_t order, uint32_t flags,
                        mca_btl_base_tag_t tag, mca_btl_base_descriptor_t **descriptor)
{
    int rc;

    opal_mutex_lock(&usnic_component.lock);
    rc = USNIC_OPS.btl_sendi(btl, endpoint, conv, header, header_size, payload_size, order,
                             flags, tag, descriptor);
    opal_mutex_unlock(&usnic_component.lock);
    return rc;
}

static int locked_put(mca_btl_base_module_t *btl, mca_btl_base_endpoint_t *endpoint,
                      void *local_address, uint64_t remote_address,
                      mca_btl_base_registration_handle_t *local_handle,
                      mca_btl_base_registration_handle_t *remote_handle, size_t size,
                      int flags, int order, mca_btl_base_rdma_completion_fn_t cbfunc,
                      void *cbcontext, void *cbdata)
{
    int rc;

    opal_mutex_lock(&usnic_component.lock);
    rc = USNIC_OPS.btl_put(btl, endpoint, local_address, remote_address, local_handle,
                           remote_handle, size, flags, order, cbfunc, cbcontext, cbdata);
    opal_mutex_unlock(&usnic_component.lock);
    return rc;
}

static int locked_get(mca_btl_base_module_t *btl, mca_btl_base_endpoint_t *endpoint,
                      void *local_address, uint64_t remote_address,
                      mca_btl_base_registration_handle_t *local_handle,
                      mca_btl_base_registration_handle_t *remote_handle, size_t size,
                      int flags, int order, mca_btl_base_rdma_completion_fn_t cbfunc,
                      void *cbcontext, void *cbdata)
{
    int rc;

    opal_mutex_lock(&usnic_component.lock);
    rc = USNIC_OPS.btl_get(btl, endpoint, local_address, remote_address, local_handle,
                           remote_handle, size, flags, order, cbfunc, cbcontext, cbdata);
    opal_mutex_unlock(&usnic_component.lock);
    return rc;
}

static int locked_atomic_op(mca_btl_base_module_t *btl, mca_btl_base_endpoint_t *endpoint,
                            uint64_t remote_address,
                            mca_btl_base_registration_handle_t *remote_handle,
                            mca_btl_base_atomic_op_t op, uint64_t operand, int flags, int order,
                            mca_btl_base_rdma_completion_fn_t cbfunc, void *cbcontext,
                            void *cbdata)
{
    int rc;

    opal_mutex_lock(&usnic_component.lock);
    rc = USNIC_OPS.btl_atomic_op(btl, endpoint, remote_address, remote_handle, op, operand,
                                 flags, order, cbfunc, cbcontext, cbdata);
    opal_mutex_unlock(&usnic_component.lock);
    return rc;
}

static int locked_atomic_fop(mca_btl_base_module_t *btl, mca_btl_base_endpoint_t *endpoint,
                             void *local_address, uint64_t remote_address,
                             mca_btl_base_registration_handle_t *local_handle,
                             mca_btl_base_registration_handle_t *remote_handle,
                             mca_btl_base_atomic_op_t op, uint64_t operand, int flags, int order,
                             mca_btl_base_rdma_completion_fn_t cbfunc, void *cbcontext,
                             void *cbdata)
{
    int rc;

    opal_mutex_lock(&usnic_component.lock);
    rc = USNIC_OPS.btl_atomic_fop(btl, endpoint, local_address, remote_address, local_handle,
                                  remote_handle, op, operand, flags, order, cbfunc, cbcontext,
                                  cbdata);
    opal_mutex_unlock(&usnic_component.lock);
    return rc;
}

static int locked_atomic_cswap(mca_btl_base_module_t *btl, mca_btl_base_endpoint_t *endpoint,
                               void *local_address, uint64_t remote_address,
                               mca_btl_base_registration_handle_t *local_handle,
                               mca_btl_base_registration_handle_t *remote_handle,
                               uint64_t compare, uint64_t value, int flags, int order,
                               mca_btl_base_rdma_completion_fn_t cbfunc, void *cbcontext,
                               void *cbdata)
{
    int rc;

    opal_mutex_lock(&usnic_component.lock);
    rc = USNIC_OPS.btl_atomic_cswap(btl, endpoint, local_address, remote_address, local_handle,
                                    remote_handle, compare, value, flags, order, cbfunc,
                                    cbcontext, cbdata);
    opal_mutex_unlock(&usnic_component.lock);
    return rc;
}

static mca_btl_base_registration_handle_t *
locked_register_mem(mca_btl_base_module_t *btl, mca_btl_base_endpoint_t *endpoint, void *base,
                    size_t size, uint32_t flags)
{
    mca_btl_base_registration_handle_t *h;

    opal_mutex_lock(&usnic_component.lock);
    h = USNIC_OPS.btl_register_mem(btl, endpoint, base, size, flags);
    opal_mutex_unlock(&usnic_component.lock);
    return h;
}

static int locked_deregister_mem(mca_btl_base_module_t *btl,
                                 mca_btl_base_registration_handle_t *handle)
{
    int rc;

    opal_mutex_lock(&usnic_component.lock);
    rc = USNIC_OPS.btl_deregister_mem(btl, handle);
    opal_mutex_unlock(&usnic_component.lock);
    return rc;
}

static int locked_progress(void)
{
    int n;

    if (0 != opal_mutex_trylock(&usnic_component.lock)) {
        return 0;
    }
    n = opal_btl_usnic_component_progress();
    opal_mutex_unlock(&usnic_component.lock);
    return n;
}

static void install_locked_ops(mca_btl_base_module_t *b)
{
    b->btl_add_procs = locked_add_procs;
    b->btl_del_procs = locked_del_procs;
    b->btl_finalize = locked_finalize;
    b->btl_alloc = locked_alloc;
    b->btl_free = locked_free;
    b->btl_prepare_src = locked_prepare_src;
    b->btl_send = locked_send;
    b->btl_sendi = locked_sendi;
    b->btl_put = locked_put;
    b->btl_get = locked_get;
    b->btl_atomic_op = locked_atomic_op;
    b->btl_atomic_fop = locked_atomic_fop;
    b->btl_atomic_cswap = locked_atomic_cswap;
    b->btl_register_mem = locked_register_mem;
    b->btl_deregister_mem = locked_deregister_mem;
}

static void *progress_thread_main(opal_object_t *obj)
{
    int us = usnic_component.progress_thread_interval;
    struct timespec nap = {.tv_sec = us / 1000000, .tv_nsec = (long)(us % 1000000) * 1000};
    (void) obj;

    while (!progress_thread_stop) {
        nanosleep(&nap, NULL);
        /* Until quiet for long enough that a delayed ACK came due and left;
         * bounded, so that a busy link still lets the thread sleep. */
        for (int i = 0, idle = 0; i < 256 && idle <= usnic_component.ack_iteration_delay; ++i) {
            idle = locked_progress() > 0 ? 0 : idle + 1;
        }
    }
    return NULL;
}

void opal_btl_usnic_thread_init(void)
{
    opal_btl_usnic_component_t *c = &usnic_component;

    if (c->progress_thread) {
        /* The thread runs the PML's callbacks next to the application's
         * own MPI calls: the PML and OPAL must lock. */
        opal_set_using_threads(true);
    }
    if (!opal_using_threads()) {
        return;
    }
    for (int i = 0; i < c->num_modules; ++i) {
        install_locked_ops(&c->modules[i].super);
    }
    c->super.btl_progress = locked_progress;
    if (!c->progress_thread) {
        return;
    }

    OBJ_CONSTRUCT(&progress_thread, opal_thread_t);
    progress_thread.t_run = progress_thread_main;
    progress_thread_stop = 0;
    if (OPAL_SUCCESS != opal_thread_start(&progress_thread)) {
        OBJ_DESTRUCT(&progress_thread);
        opal_show_help("help-mpi-btl-usnic.txt", "progress thread failed", true,
                       opal_process_info.nodename);
        return;
    }
    progress_thread_running = true;
    usnic_verbose(5, "%s: progress thread started, waking every %d us",
                  opal_process_info.nodename, c->progress_thread_interval);
}

void opal_btl_usnic_thread_fini(void)
{
    if (!progress_thread_running) {
        return;
    }
    /* The thread never blocks on the lock (it only tries it), so the
     * caller may hold it while waiting here. */
    progress_thread_stop = 1;
    opal_atomic_wmb();
    opal_thread_join(&progress_thread, NULL);
    OBJ_DESTRUCT(&progress_thread);
    progress_thread_running = false;
}
