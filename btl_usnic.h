/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 * $COPYRIGHT$
 * SPDX-License-Identifier: BSD-3-Clause
 *
 * The usnic BTL: reliable messaging for Open MPI over unreliable-datagram
 * verbs queue pairs (usNIC, RoCE, Soft-RoCE).  This header holds what every
 * part of the component shares: the component object, its parameters,
 * sequence-number arithmetic and logging helpers.
 *
 * Where things live:
 *   Open MPI glue      btl_usnic_component.c, btl_usnic_mca.c, btl_usnic_btl.c (BTL
 *                      operations), btl_usnic_progress.c (progress, completion
 *                      dispatch), btl_usnic_module.c (module set-up, tear-down),
 *                      btl_usnic_proc.c
 *   reliability engine btl_usnic_window.[ch] (pure), btl_usnic_send.c,
 *                      btl_usnic_recv.c, btl_usnic_ack.c, btl_usnic_retrans.c
 *                      (retransmit and liveness policy)
 *   verbs glue         btl_usnic_verbs.[ch]
 */

#ifndef BTL_USNIC_H
#define BTL_USNIC_H

#include "opal_config.h"

#include <stdint.h>
#include <stdbool.h>
#include <time.h>

#include "opal/class/opal_list.h"
#include "opal/mca/btl/btl.h"
#include "opal/mca/btl/base/base.h"
#include "opal/util/alfg.h"
#include "opal/util/output.h"

#include "btl_usnic_compat.h"

BEGIN_C_DECLS

/* Sequence numbers are 16 bits and wrap; compare through the signed
 * difference, valid while the window stays far below 32768. */
typedef uint16_t opal_btl_usnic_seq_t;
#define USNIC_SEQ_DIFF(a, b) ((int16_t)(uint16_t)((a) - (b)))
#define USNIC_SEQ_LT(a, b) (USNIC_SEQ_DIFF(a, b) < 0)
#define USNIC_SEQ_LE(a, b) (USNIC_SEQ_DIFF(a, b) <= 0)
#define USNIC_SEQ_GT(a, b) (USNIC_SEQ_DIFF(a, b) > 0)
#define USNIC_SEQ_GE(a, b) (USNIC_SEQ_DIFF(a, b) >= 0)

/* Whether an opal list is empty, from the length it keeps in every build:
 * one compare with memory where opal_list_is_empty needs the sentinel's
 * address too (lists the hot paths test on every pass or send). */
static inline bool usnic_list_empty(opal_list_t *list)
{
    return 0 == list->opal_list_length;
}

struct opal_btl_usnic_module_t;
struct opal_btl_usnic_dev;
struct opal_btl_usnic_device_ops_t;
struct opal_proc_t;

/* An open device, and the event that watches its asynchronous events. */
typedef struct {
    struct opal_btl_usnic_dev *dev;
    opal_event_t async_ev;
    bool async_armed;
} opal_btl_usnic_context_t;

/* Interface filter entry: a device name, or an IPv4 network (a.b.c.d/n). */
typedef struct {
    char *name;           /* device name, or NULL for a network entry */
    uint32_t net;         /* network order, already masked */
    uint32_t prefix;
} opal_btl_usnic_if_filter_entry_t;

typedef struct {
    int n;
    opal_btl_usnic_if_filter_entry_t *entries;
} opal_btl_usnic_if_filter_t;

/* Registrations by slot.  A handle names a slot and the random key of its
 * registration; deregistration empties the slot, and its next
 * registration gets a new key, so a stale handle matches nothing. */
typedef struct opal_btl_usnic_regs_t {
    struct {
        uint64_t key;
        struct opal_btl_usnic_put_target_t *t;      /* NULL: free */
    } *slot;
    uint32_t size;              /* slots allocated */
    uint32_t used;              /* slots handed out so far: [0, used) */
    uint32_t *free_slots;       /* emptied slots, to be used again (size long) */
    uint32_t nfree;
    uint64_t keys[32];          /* from getrandom, not yet handed out */
    uint32_t nkeys;
} opal_btl_usnic_regs_t;

typedef struct opal_btl_usnic_component_t {
    mca_btl_base_component_t super;

    /* modules */
    int num_modules;
    struct opal_btl_usnic_module_t *modules;      /* array, num_modules long */

    /* all remote procs known to any module */
    opal_list_t procs;

    /* memory registered with btl_register_mem, by slot: PUTs, GETs and
     * atomics of peers reach only what their handle names (regs points at
     * reg_table; the unit tests' two processes in one binary swap it) */
    struct opal_btl_usnic_regs_t *regs;
    struct opal_btl_usnic_regs_t reg_table;

    /* serializes the BTL when the process uses threads (btl_usnic_thread.c) */
    opal_recursive_mutex_t lock;

    /* own name as carried in every packet header */
    uint64_t my_hashed_name;

    /* per-process queue key from getrandom(), published in the modex and
     * never printed: whoever knows it can send to our queue pairs */
    uint32_t qkey;
    /* per-process key of the connectivity messages to this process, the
     * same way from getrandom to the modex and nowhere else */
    uint32_t conn_key[4];

    /* progress passes so far; ACK delays count in these */
    uint64_t progress_ticks;
    /* seconds, refreshed every few hundred progress passes */
    double coarse_time;
    /* the same in microseconds, for the checker thread's liveness answers */
    volatile int64_t progress_stamp_us;

    /* memory the modules set up so far register at start (bytes) */
    size_t locked_planned;

    /* devices opened by the scan, closed at component close */
    opal_btl_usnic_context_t *contexts;
    int num_contexts;
    /* the device operations (btl_usnic_device.h): the verbs glue, or the
     * host tests' fake device */
    const struct opal_btl_usnic_device_ops_t *dev_ops;
    /* Set by the host tests, which play two processes in one: a fatal
     * error calls it instead of ending the process. */
    void (*fatal_hook)(struct opal_btl_usnic_module_t *module, struct opal_proc_t *peer);

    /* output stream (the btl framework's, so btl_base_verbose works) */
    int output;

    /* parsed interface filter, and whether it is an include list */
    opal_btl_usnic_if_filter_t *filter;
    bool filter_is_include;

    /* ---- MCA parameters ---- */
    int max_btls;
    char *if_include;
    char *if_exclude;
    int stats_frequency;
    bool stats_relative;
    int want_numa_device_assignment;
    int gid_index;
    int transport;                  /* USNIC_TRANSPORT_*: what carries the datagrams */
    int sd_num;
    int rd_num;
    int max_send_window;
    int prio_sd_num;
    int prio_rd_num;
    int cq_num;
    int retrans_timeout;            /* microseconds */
    double ack_hold_us;             /* a delayed ACK waits this long at least (retrans_timeout / 8) */
    double away_us;                 /* timer checks further apart: this process was away (retrans_timeout / 2) */
    int max_resends_per_iteration;
    bool congestion_control;
    bool timer_probe;               /* an expiry probes before it resends (btl_usnic_retrans.c) */
    bool zero_copy;                 /* GET data sent from registered memory */
    int ack_iteration_delay;        /* progress passes */
    int priority_limit;             /* bytes; 0 = as large as the channel allows */
    int pack_lazy_threshold;
    int arp_timeout;                /* seconds */
    bool show_route_failures;
    int max_short_packets;
    char *rcache_name;
    char *mpool_hints;
    bool connectivity_enabled;
    int connectivity_ack_timeout;
    int connectivity_num_retries;
    char *connectivity_map_prefix;
    int peer_timeout;               /* seconds without ACK progress before a peer is declared dead */
    bool progress_thread;           /* progress from a thread of our own while the application computes */
    int progress_thread_interval;   /* microseconds between its passes */
    int yield_when_idle;            /* -1: an idle pass yields on a device the kernel drives, 0 never, 1 always */

    /* OPAL's reachable framework (route lookups) is open and selected */
    bool reachable_ready;

    /* set once opal_btl_usnic_component_quiesce() ran */
    bool quiesced;

    /* whether the user set the eager limit (else it follows the module count) */
    bool eager_limit_set_by_user;
} opal_btl_usnic_component_t;

OPAL_DECLSPEC extern opal_btl_usnic_component_t mca_btl_usnic_component;

/* Shorthand used throughout the component. */
#define usnic_component mca_btl_usnic_component

/* All verbose output goes to the btl framework stream, prefixed so that
 * logs and tests can find it. */
#define usnic_verbose(level, ...) \
    opal_output_verbose((level), usnic_component.output, "btl:usnic: " __VA_ARGS__)

/* Monotonic clock in microseconds. */
static inline double opal_btl_usnic_now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    /* (a multiply: a divide would cost every waiting pass tens of cycles) */
    return ts.tv_sec * 1e6 + ts.tv_nsec * 1e-3;
}

/* Upper bound of the adaptive retransmit timeout. */
#define USNIC_MAX_RTO_US 1000000

/* Receive window: how far ahead of the next expected sequence a segment
 * is accepted (one bit each).  Bounds any peer's send window. */
#define USNIC_WINDOW_SIZE 4096
/* Default of btl_usnic_max_send_window, the largest send window: as far
 * as the receive window reaches.  The window starts at
 * USNIC_TX_WINDOW_INIT and follows the path's bandwidth-delay product
 * below this and the peer's buffers; its send table is pooled, held only
 * while segments are in flight, so a large window costs no memory per
 * peer. */
#define USNIC_TX_WINDOW_MAX USNIC_WINDOW_SIZE
/* Smallest send window, however many peers share a receiver. */
#define USNIC_MIN_WINDOW_SIZE 64

/* Completions taken from the CQ per poll call. */
#define USNIC_POLL_BATCH 32

/* Send tables: USNIC_TX_TABLE_MIN << class slots, for classes up to the
 * receive window's size. */
#define USNIC_TX_TABLE_MIN 64
#define USNIC_TX_TABLE_CLASSES 7

/* Register all MCA parameters; defined in btl_usnic_mca.c. */
int opal_btl_usnic_component_register(void);

/* Stop everything that runs from OPAL's event loops and threads (stats
 * timers, async events, the connectivity checker), printing the final
 * statistics.  Idempotent. */
void opal_btl_usnic_component_quiesce(void);

/* Progress entry point; defined in btl_usnic_progress.c. */
int opal_btl_usnic_component_progress(void);
/* The same, and a pass that found nothing yields the CPU
 * (btl_usnic_yield_when_idle): one frame, no wrapper's call per pass. */
int opal_btl_usnic_component_progress_yielding(void);

END_C_DECLS
#endif /* BTL_USNIC_H */
