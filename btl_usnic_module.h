/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 * $COPYRIGHT$
 * SPDX-License-Identifier: BSD-3-Clause
 *
 * A module is one usable device port: a protection domain, two UD channels
 * (priority and data), the free lists that feed them, and the endpoints
 * that talk through it.
 */

#ifndef BTL_USNIC_MODULE_H
#define BTL_USNIC_MODULE_H

/* Open MPI's configuration before hwloc.h: both define HWLOC_VERSION. */
#include "btl_usnic.h"

#include <hwloc.h>
#include <net/if.h>

#include "opal/class/opal_free_list.h"
#include "opal/class/opal_hash_table.h"
#include "opal/class/opal_list.h"
#include "opal/class/opal_pointer_array.h"
#include "opal/mca/rcache/rcache.h"

#include "btl_usnic.h"
#include "btl_usnic_device.h"
#include "btl_usnic_frag.h"
#include "btl_usnic_stats.h"
#include "btl_usnic_wire.h"

BEGIN_C_DECLS

enum {
    USNIC_PRIORITY_CHANNEL = 0,
    USNIC_DATA_CHANNEL = 1,
    USNIC_NUM_CHANNELS = 2
};

/* A channel's books: the device's half is hw (btl_usnic_device.h), the
 * rest is kept by btl_usnic_channel.c. */
typedef struct opal_btl_usnic_channel_t {
    int index;                      /* USNIC_*_CHANNEL */
    opal_btl_usnic_hwchan_t *hw;
    uint32_t qp_num;
    int sd_num;                     /* send queue depth granted */
    int rd_num;                     /* receive queue depth granted */
    int sd_wqe;                     /* free send work requests */
    uint32_t max_inline;
    int max_send_sge;
    uint32_t mtu;                   /* largest datagram payload (after the GRH) */
    opal_free_list_t recv_segs;
    struct opal_btl_usnic_recv_seg_t *repost_head; /* receive buffers to hand back */
    struct opal_btl_usnic_recv_seg_t **repost_tail;
    int repost_count;
    int repost_batch;               /* hand them back this many at a time */
    int unsignaled;                 /* sends posted since the last one asking for a completion */
    int signal_every;               /* at most this many sends per completion */
} opal_btl_usnic_channel_t;

typedef struct opal_btl_usnic_module_t {
    mca_btl_base_module_t super;

    /* the device */
    const opal_btl_usnic_device_ops_t *ops;
    opal_btl_usnic_dev_t *dev;
    opal_btl_usnic_dev_limits_t limits;
    char dev_name[USNIC_DEV_NAME_MAX];
    uint8_t port_num;
    int gid_index;
    uint8_t gid[16];
    bool grh_ipv4;                  /* senders' addresses arrive as IPv4 headers (RoCE v2) */
    uint32_t port_mtu;              /* active MTU of the port in bytes */

    /* the netdev behind the port */
    char if_name[IF_NAMESIZE];
    int if_kindex;                  /* kernel interface index */
    uint32_t if_ipv4;               /* network order */
    uint32_t if_prefix;
    int if_mtu;
    uint8_t if_mac[6];
    uint32_t link_speed_mbps;
    int numa_distance;

    opal_btl_usnic_pd_t *pd;
    mca_rcache_base_module_t *rcache;
    size_t reg_bytes;               /* registered through the rcache now */
    bool reg_failure_shown;         /* the help message for a failed registration */
    /* Both channels complete on one completion queue, the priority channel's:
     * a progress pass polls once. */
    opal_btl_usnic_channel_t channels[USNIC_NUM_CHANNELS];

    /* payload sizes */
    uint32_t max_frag_payload;      /* PML bytes in one unchunked datagram */
    uint32_t max_chunk_payload;     /* PML bytes in one chunk */
    uint32_t max_tiny_payload;      /* PML bytes allowed on the priority fast path */
    int fastsend_wqe_thresh;

    opal_free_list_t small_send_frags;
    opal_free_list_t large_send_frags;
    opal_free_list_t chunk_segs;
    opal_free_list_t inline_segs;   /* sendi's datagrams (max_tiny_payload) */
    opal_free_list_t ack_segs;

    /* sender name -> endpoint, for every endpoint of this module, and the
     * last one found (most datagrams come from the peer of the one before) */
    opal_hash_table_t senders;
    uint64_t last_sender_id;
    struct mca_btl_base_endpoint_t *last_sender;

    opal_list_t all_endpoints;
    opal_list_t endpoints_with_sends;
    /* endpoints that owe an ACK, and some that owed one: an ACK that goes
     * out leaves its endpoint listed until the next walk, so that a busy
     * peer does not cost a list insertion and removal per datagram */
    opal_list_t endpoints_that_need_acks;
    int acks_owed;                  /* listed endpoints that do owe one */
    uint64_t acks_due_tick;         /* no owed ACK is due before this tick */
    /* One of the lists of the pass's work step (queued sends, resends,
     * fast-path callbacks, GET/atomic work) may hold something: whatever
     * adds to them sets it, and only the step clears it, from what it
     * leaves.  A pass tests this word instead of the lists. */
    bool work_queued;
    /* endpoints whose retransmit timer runs, and some whose timer stopped
     * since the last walk (unlisted then) */
    opal_list_t endpoints_with_timers;
    int timers_running;
    /* Until timer_due_us, with no timer restarted, a check finds nothing
     * to do: an idle pass while a peer's answer is awaited skips the walk. */
    double timer_due_us;
    bool timer_restarted;
    opal_list_t pending_resend_segs;
    opal_list_t fastpath_done;      /* fast-path frags whose PML callback is due */
    opal_list_t zombie_endpoints;   /* released, but with sends still posted */
    /* Send tables not held by an endpoint, by class (USNIC_TX_TABLE_MIN <<
     * class slots), linked through their first slot (btl_usnic_endpoint.c). */
    struct opal_btl_usnic_send_seg_t **tx_tables_free[USNIC_TX_TABLE_CLASSES];
    uint32_t tx_tables_cached[USNIC_TX_TABLE_CLASSES];
    /* Reassembly slot arrays not held by an endpoint, the same way. */
    usnic_rx_frag_t *rx_frags_free;
    uint32_t rx_frags_cached;
    /* a delivered message's reassembly buffer, kept for the next one (a
     * malloc and free per chunked message cost more than its second chunk) */
    uint8_t *rx_spare;
    uint32_t rx_spare_size;

    /* emulated GET and atomics (btl_usnic_rdma.c) */
#define USNIC_EXCL_LOCKS 16
    opal_free_list_t rdma_op_fl;
    opal_pointer_array_t rdma_ops;  /* outstanding requests, by id */
    uint32_t rdma_serial;
    opal_list_t rdma_deferred;      /* peers' requests waiting for a send buffer */
    opal_list_t rdma_local_done;    /* operations on our own memory, to complete */
    opal_list_t get_sources;        /* GET data frags reading registered memory */
    /* GET data of at least this many bytes per chunk is sent from where
     * it lies, if the device registered it (UINT32_MAX: never) */
    uint32_t zcopy_min;
    bool rdma_work;                 /* one of the two lists is not empty */
    bool rdma_refused_shown;
    bool bad_handle_shown;          /* the "bad registration handle" help message */
    /* exclusive locks taken by compare-and-swap on this process's memory,
     * and who holds them (btl_usnic_rdma.c: lock_watch) */
    struct {
        uint64_t addr;
        const void *holder;
        uint32_t self_waits;
    } excl_locks[USNIC_EXCL_LOCKS];
    unsigned excl_next;

    uint16_t isn;
    usnic_modex_addr_t local_addr;

    /* connectivity checker: UDP socket and buffers (progress thread only) */
    int conn_fd;
    opal_event_t conn_ev;
    uint8_t *conn_recv_buf;
    uint8_t *conn_send_buf;
    /* the checker sockets of this module's peers, (ip << 16 | port) -> count
     * (under the checker's lock) */
    opal_hash_table_t *conn_peers;

    mca_btl_base_module_error_cb_fn_t pml_error_callback;
    bool dead;                      /* fatal error seen; stop touching the device */
    char fatal_cause[96];           /* named in the PML's abort message, if set */
    double last_dead_check;         /* when the dead-peer check last ran (monotonic s) */
    double last_timer_check_us;     /* when the retransmit timers were last checked */
    /* when this device's network last showed a loss (any peer, either
     * direction): a timer expiry probes only 10 s after (btl_usnic_retrans.c) */
    double loss_seen_us;

    opal_btl_usnic_stats_t stats;
    int stats_report_num;
    opal_event_t stats_timer;
    bool stats_timer_armed;
} opal_btl_usnic_module_t;

/* Batching of receive reposts and send completions, set once the channels
 * exist.  A few buffers held back from a deep receive queue cost nothing; a
 * post per datagram costs a system call on some providers. */
static inline void opal_btl_usnic_module_tune_channels(opal_btl_usnic_module_t *m)
{
    for (int c = 0; c < USNIC_NUM_CHANNELS; ++c) {
        opal_btl_usnic_channel_t *ch = &m->channels[c];
        ch->repost_batch = ch->rd_num >= 64 ? ch->rd_num / 32 : 1;
        ch->signal_every = ch->sd_num >= 16 ? (ch->sd_num / 8 < 32 ? ch->sd_num / 8 : 32) : 1;
        ch->unsignaled = 0;
    }
    /* Leave some priority send slots for ACKs. */
    m->fastsend_wqe_thresh = m->channels[USNIC_PRIORITY_CHANNEL].sd_num > 20 ? 10 : 1;
}

/* Buffers of a channel a peer may find not yet posted again although they
 * are acknowledged: fewer than a repost batch held back, and a poll batch
 * being handled (a send from the PML's callback carries the ACK), at most
 * half the queue.  (A smaller queue leaves the rest to retransmission.) */
static inline uint32_t opal_btl_usnic_channel_rcv_depth(const opal_btl_usnic_channel_t *ch)
{
    int held = ch->repost_batch - 1 + USNIC_POLL_BATCH;

    return (uint32_t)(ch->rd_num - (held < ch->rd_num / 2 ? held : ch->rd_num / 2));
}

/* Publish the receive buffers peers may count on. */
static inline void opal_btl_usnic_module_publish_depths(opal_btl_usnic_module_t *m)
{
    m->local_addr.rcv_depth = opal_btl_usnic_channel_rcv_depth(&m->channels[USNIC_DATA_CHANNEL]);
    m->local_addr.prio_rcv_depth =
        opal_btl_usnic_channel_rcv_depth(&m->channels[USNIC_PRIORITY_CHANNEL]);
}

/* The endpoint a datagram's sender id names, or NULL. */
static inline struct mca_btl_base_endpoint_t *
opal_btl_usnic_lookup_sender(opal_btl_usnic_module_t *m, uint64_t id)
{
    void *ep;

    if (OPAL_LIKELY(NULL != m->last_sender && id == m->last_sender_id)) {
        return m->last_sender;
    }
    if (OPAL_SUCCESS != opal_hash_table_get_value_uint64(&m->senders, id, &ep)) {
        return NULL;
    }
    m->last_sender_id = id;
    m->last_sender = ep;
    return ep;
}

/* Something was added to a list of the pass's work step. */
static inline void opal_btl_usnic_work_now(opal_btl_usnic_module_t *m)
{
    m->work_queued = true;
}

/* opal_free_list_get for the module's registered free lists (small
 * frags, chunks, ACK items).  Single-threaded versions: with threads, the
 * component lock already serializes every use of these lists
 * (btl_usnic_thread.c), so the list's own atomics and the check for
 * threads on every get and return would buy nothing.  Once a registration
 * failed, a list that comes up empty stops trying to grow: every try costs
 * an allocation and system calls, and frees come back anyway as the peers
 * ACK. */
static inline opal_free_list_item_t *opal_btl_usnic_fl_get(opal_btl_usnic_module_t *m,
                                                           opal_free_list_t *fl)
{
    opal_free_list_item_t *item = opal_free_list_get_st(fl);

    if (OPAL_UNLIKELY(NULL == item) && m->reg_failure_shown) {
        fl->fl_max_to_alloc = fl->fl_num_allocated;
    }
    return item;
}

/* The return to one of those lists. */
static inline void opal_btl_usnic_fl_return(opal_free_list_t *fl, opal_free_list_item_t *item)
{
    opal_free_list_return_st(fl, item);
}

/* The most send frags a module hands out: beyond that the PML keeps its
 * requests pending (a peer that stops acknowledging must not make an
 * endless stream of sends queue up registered memory until the process is
 * killed). */
#define USNIC_SMALL_FRAGS_MAX 8192
#define USNIC_LARGE_FRAGS_MAX 1024

extern opal_btl_usnic_module_t opal_btl_usnic_module_template;

/* What btl_register_mem hands out and peers name in every PUT, GET and
 * atomic (usnic_reg_ref_t on the wire): a slot of this process's table of
 * registrations and the random key of the registration in it (never
 * printed).  Peers never touch the memory themselves: this process carries
 * out their PUTs and GETs, after checking the slot, the key, the access and
 * the range. */
struct mca_btl_base_registration_handle_t {
    uint64_t key;
    uint32_t index;
    uint32_t pad;
};

typedef struct opal_btl_usnic_put_target_t {
    opal_list_item_t super;
    uint32_t flags;
    uint64_t base;
    uint64_t len;
    mca_btl_base_registration_handle_t handle;
} opal_btl_usnic_put_target_t;
OBJ_CLASS_DECLARATION(opal_btl_usnic_put_target_t);

/* True if [addr, addr + len) lies inside t's region. */
static inline bool opal_btl_usnic_target_covers(const opal_btl_usnic_put_target_t *t,
                                                uint64_t addr, uint64_t len)
{
    return addr >= t->base && len <= t->len && addr - t->base <= t->len - len;
}

/* The live registration ref names, if it allows access (a
 * MCA_BTL_REG_FLAG_REMOTE_* flag) to [addr, addr + len); else NULL, and
 * *bad_handle tells whether the handle itself was wrong (slot out of
 * range, empty, or another key: revoked, forged or another process's) or
 * only the access or range.  (Inline: every PUT datagram.) */
static inline opal_btl_usnic_put_target_t *
opal_btl_usnic_reg_find(const usnic_reg_ref_t *ref, uint32_t access, uint64_t addr, uint64_t len,
                        bool *bad_handle)
{
    const opal_btl_usnic_regs_t *regs = usnic_component.regs;
    opal_btl_usnic_put_target_t *t;

    if (OPAL_UNLIKELY(ref->index >= regs->used || NULL == regs->slot[ref->index].t ||
                      regs->slot[ref->index].key != ref->key)) {
        *bad_handle = true;
        return NULL;
    }
    *bad_handle = false;
    t = regs->slot[ref->index].t;
    if (OPAL_UNLIKELY(!(t->flags & access) || !opal_btl_usnic_target_covers(t, addr, len))) {
        return NULL;
    }
    return t;
}

/* The reference a handle gives on the wire (a NULL handle: slot 0 with
 * key 0, which no registration has). */
static inline void opal_btl_usnic_reg_ref(usnic_reg_ref_t *ref,
                                          const mca_btl_base_registration_handle_t *h)
{
    ref->key = NULL == h ? 0 : h->key;
    ref->index = NULL == h ? 0 : h->index;
    ref->pad = 0;
}

/* Empty the table of registrations (component open and close). */
void opal_btl_usnic_regs_init(opal_btl_usnic_regs_t *regs);
void opal_btl_usnic_regs_fini(opal_btl_usnic_regs_t *regs);

/* Create a module's verbs resources and lists; on failure everything it
 * built is released again. */
int opal_btl_usnic_module_init(opal_btl_usnic_module_t *module);

/* Release everything a module holds (endpoints, channels, lists, PD).
 * Idempotent. */
void opal_btl_usnic_module_teardown(opal_btl_usnic_module_t *module);

/* Forget an endpoint (del_procs, teardown); it lives on as a zombie while
 * the device still owns segments that point at it (btl_usnic_btl.c). */
void opal_btl_usnic_module_release_endpoint(opal_btl_usnic_module_t *module,
                                            struct mca_btl_base_endpoint_t *ep);

/* Progress one module: poll its completion queue, then run the send engine
 * (btl_usnic_progress.c). */
int opal_btl_usnic_module_progress(opal_btl_usnic_module_t *module);

/* At teardown: take the send completions the device still holds, so that
 * the frags they finish are returned (receives are dropped). */
void opal_btl_usnic_module_drain_sends(opal_btl_usnic_module_t *module);

/* Rate the module by its NUMA distance from this process (btl_usnic_hwloc.c). */
void opal_btl_usnic_hwloc_rate_module(opal_btl_usnic_module_t *module);
/* 0 if the device's NUMA nodes overlap the process's, else their distance
 * (at least 1); separate so that tests can use a synthetic topology. */
int opal_btl_usnic_numa_distance(hwloc_topology_t topo, hwloc_const_cpuset_t my_cpus,
                                 hwloc_const_cpuset_t dev_cpus);

/* Fatal error: tell the PML, which aborts the job. */
void opal_btl_usnic_module_fatal(opal_btl_usnic_module_t *module, struct opal_proc_t *peer);

/* The help message of an error that aborts the job (opal_btl_usnic_module_fatal follows). */
void opal_btl_usnic_show_fatal(const char *topic, ...);

END_C_DECLS
#endif /* BTL_USNIC_MODULE_H */
