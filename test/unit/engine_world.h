/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 * $COPYRIGHT$
 * SPDX-License-Identifier: BSD-3-Clause
 *
 * Two fake processes in one binary for the engine tests.
 *
 * A world holds two modules, A and B, each over a fake device of its own
 * (fake_device.h) and set up by the real opal_btl_usnic_module_init(), one
 * endpoint each toward the other, made with opal_btl_usnic_endpoint_setup(),
 * and a network between them that the test steers: it delivers the posted
 * datagrams a few per step, and may reorder, drop, duplicate, hold back or
 * alter them on the way.
 *
 * Everything of the component that runs is the real code: module set-up
 * and tear-down, the BTL functions of opal_btl_usnic_module_template
 * (alloc, prepare_src, send, sendi, put, register_mem, del_procs) and
 * opal_btl_usnic_module_progress, which polls the fake completion queues
 * and so runs the real completion handling, receive, send-completion, ACK,
 * signalling, repost and retransmit code.  Both "processes" share the
 * component object; the world sets my_hashed_name to the side that runs.
 *
 * The PML is played by a receive callback on WORLD_TAG that records every
 * delivered message, and by send and PUT completion callbacks.
 */

#ifndef USNIC_ENGINE_WORLD_H
#define USNIC_ENGINE_WORLD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "opal/datatype/opal_convertor.h"
#include "opal/util/proc.h"

#include "btl_usnic_endpoint.h"
#include "btl_usnic_module.h"
#include "btl_usnic_proc.h"

#include "fake_device.h"

enum { SIDE_A = 0, SIDE_B = 1 };

/* Active-message tag of the test PML. */
#define WORLD_TAG 0x31

/* What the network does with one datagram. */
typedef enum {
    NET_DELIVER,
    NET_DROP,
    NET_DUP,        /* deliver it twice */
    NET_HOLD,       /* put it back at the end of the wire */
} net_action_t;

struct world;
/* Called for every datagram the network is about to deliver; may change
 * its bytes or length. */
typedef net_action_t (*net_filter_fn)(struct world *w, fake_dgram_t *d, void *arg);

typedef enum {
    SEND_ALLOC,             /* btl_alloc + btl_send, callback always */
    SEND_PREPARE,           /* btl_prepare_src (contiguous convertor) + btl_send */
    SEND_SENDI,             /* btl_sendi without a descriptor, else prepare_src + send (ob1's isend) */
    SEND_NONCONTIG,         /* btl_prepare_src with a strided datatype + btl_send */
    SEND_COPY_ALLOC,        /* ob1's copy path without btl_sendi: btl_alloc, pack, btl_send */
    SEND_COPY_SENDI,        /* ob1's copy path: btl_sendi, else pack into the descriptor it returns */
} send_method_t;

/* One message the test PML sent. */
typedef struct {
    uint64_t id;
    int from;
    send_method_t how;
    size_t len;             /* bytes the receiver must get: PML header + data */
    uint8_t *expect;        /* those bytes */
    uint8_t *user_buf;      /* the user memory the convertor reads */
    size_t user_size;
    opal_convertor_t *conv;
    opal_datatype_t *dtype;
    int rc;                 /* of btl_send / btl_sendi */
    int callbacks;          /* des_cbfunc calls */
    int cb_status;
    struct world *w;
} sent_msg_t;

/* An emulated PUT and what became of it. */
typedef struct {
    int rc;                 /* of btl_put */
    int callbacks;
    int status;
    void *local;
    int from;
    struct world *w;
} put_rec_t;

/* One message the test PML received. */
typedef struct {
    int side;
    uint8_t tag;
    size_t len;
    uint8_t *data;
} rx_msg_t;

typedef struct world {
    opal_btl_usnic_module_t mods[2];
    opal_btl_usnic_endpoint_t *ep[2];       /* ep[s]: side s toward the other side */
    opal_btl_usnic_proc_t *uproc[2];        /* uproc[s]: side s's record of its peer */
    opal_proc_t oproc[2];                   /* oproc[s]: the peer as side s knows it */
    uint64_t name[2];                       /* hashed process names */

    /* the network */
    net_filter_fn filter;
    void *filter_arg;
    bool paused;                /* deliver nothing */
    unsigned reorder;           /* take each datagram among the first this many */
    unsigned per_step;          /* datagrams delivered per step */
    uint32_t rng;               /* xorshift32 state */
    uint64_t net_delivered, net_dropped, net_duplicated, net_held;
    /* datagrams that found no posted receive buffer and were dropped */
    uint64_t net_overflows;
    /* hold datagrams back while their receive queue is empty instead of
     * dropping them (kinder than hardware: a test that sets it says why) */
    bool hold_when_full;
    /* retransmit timers expire in real time in world_progress (default:
     * only through world_fire_timeouts) */
    bool real_timers;
    /* datagrams written into receive buffers, by receiving side */
    uint64_t delivered_data[2], delivered_acks[2];
    uint64_t steps, timeout_rounds;
    /* passes that began or ended with work on a list of the pass's work
     * step while the module's work_queued said there was none */
    uint64_t work_unflagged[2];

    /* the PML */
    sent_msg_t **sent;
    size_t nsent, sent_cap;
    rx_msg_t *rx;
    size_t nrx, rx_cap;
    uint64_t next_id;
    /* called after a message was recorded, from inside the receive path */
    void (*on_recv)(struct world *w, int side, const rx_msg_t *m);
    /* called by world_run after every step */
    void (*after_step)(struct world *w);
    /* called from a send's completion callback, or after an inline completion */
    void (*on_send_done)(struct world *w, sent_msg_t *m);
    /* called from a PUT's completion callback */
    void (*on_put_done)(struct world *w, put_rec_t *p);
    /* the PML keeps ownership of descriptors and frees them when done */
    bool pml_frees;
    /* SEND_COPY_ALLOC asks btl_alloc for this many bytes more than it then
     * writes and sets seg_len to (as ob1 does when the convertor packs less) */
    size_t alloc_slack;
    put_rec_t **puts;
    size_t nputs;
    struct {
        int side;
        mca_btl_base_registration_handle_t *h;
        uint64_t base, len;
    } regs[16];
    int nregs;
    /* each side's table of registrations (a process of its own) */
    opal_btl_usnic_regs_t regtab[2];
    bool live;
} world_t;

/* Build both sides (each sends its first datagram with its ISN) in the
 * one world of the binary; a world a failed test left behind is torn
 * down first.  NULL if building failed. */
world_t *world_new(uint16_t isn_a, uint16_t isn_b);
/* The same with the modules' GIDs not IPv4-mapped (RoCE v2 over IPv6,
 * RoCE v1): senders' addresses then arrive as GIDs in the GRH. */
world_t *world_new_ipv6(uint16_t isn_a, uint16_t isn_b);
/* Tear down through btl_del_procs and release everything. */
void world_fini(world_t *w);
/* btl_del_procs of side s's peer, as the PML does; ep[s] is NULL after. */
int world_del_procs(world_t *w, int side);

/* Make the component act as side s (the sender name in headers). */
void world_run_as(world_t *w, int side);
/* One progress pass of one side (opal_btl_usnic_module_progress). */
int world_progress(world_t *w, int side);
/* Move up to per_step datagrams across the network. */
unsigned world_net_step(world_t *w);
/* One tick: progress A, progress B, then the network; returns how much
 * happened (posts, deliveries, completions). */
unsigned world_step(world_t *w);
/* Nothing on the wire or in a CQ, nothing queued, unacknowledged or owed. */
bool world_quiescent(world_t *w);

typedef enum {
    WORLD_QUIET = 0,        /* quiescent */
    WORLD_STALLED,          /* nothing happens any more, and timeouts were not allowed */
    WORLD_STUCK,            /* nothing happens, and no segment waits for a timeout */
    WORLD_LIMIT,            /* max_steps reached */
} world_result_t;

/* Step until quiescent.  When nothing has happened for a few ticks and
 * with_timeouts is set, the retransmit timers of both sides fire (as
 * world_fire_timeouts) and stepping goes on. */
world_result_t world_run(world_t *w, unsigned max_steps, bool with_timeouts);

/* Expire side s's retransmit timer now, as progress does once its deadline
 * passed: the oldest unacknowledged segment is probed for, or queued for
 * resending.  Returns how many probes and resends (0 or 1). */
int world_fire_timeouts(world_t *w, int side);

/* Side s's network showed a loss just now (as a lossy one does): an expiry
 * within the next 10 s resends at once, with no probe first. */
void world_peer_lost_lately(world_t *w, int side);

/* Send a message of len bytes (at least 8) from side s; content is
 * derived from its id.  SEND_NONCONTIG rounds len down to a whole number
 * of strided elements.  Returns NULL if the BTL refused it. */
sent_msg_t *world_send(world_t *w, int from, size_t len, send_method_t how);

/* The bytes of a message: its id, then a hash of (id, offset). */
void world_fill(uint8_t *buf, uint64_t id, size_t len);

/* NULL if every message sent toward side `to` was delivered to it exactly
 * once with every byte right and nothing else was; in_order also wants
 * them in sending order.  Otherwise what is wrong. */
const char *world_verify(world_t *w, int to, bool in_order);
/* NULL if every send got exactly one completion: an inline one (rc 1) or
 * one callback with OPAL_SUCCESS. */
const char *world_verify_completions(world_t *w);
/* NULL if the counters of both sides agree with what the network
 * carried: every datagram delivered was counted as received, every data
 * segment sent was accepted exactly once, every other copy was counted
 * as a duplicate or outside the window, nothing was bad, unknown or forged. */
const char *world_verify_counters(world_t *w);
/* NULL if both sides are idle and every resource is back: free lists
 * full, send WQEs and credits restored, all receive buffers posted,
 * no retransmit timer running, no fatal error, no post beyond a queue or
 * an MTU. */
const char *world_check_idle(world_t *w);

/* btl_put of size bytes from local memory to remote_addr on the other side,
 * with the handle of the other side's registration that holds remote_addr
 * (as the PML knows it), if any. */
put_rec_t *world_put(world_t *w, int from, void *local, uint64_t remote_addr, size_t size);
/* The same with the handle given (NULL: none). */
put_rec_t *world_put_h(world_t *w, int from, void *local, uint64_t remote_addr, size_t size,
                       mca_btl_base_registration_handle_t *remote_handle);
/* The handle of side s's registration that holds addr (the latest made),
 * or NULL. */
mca_btl_base_registration_handle_t *world_handle_at(world_t *w, int side, uint64_t addr);
/* btl_register_mem / btl_deregister_mem of side s; what is still
 * registered at world_fini is deregistered then. */
mca_btl_base_registration_handle_t *world_register(world_t *w, int side, void *base, size_t len,
                                                   uint32_t flags);
void world_deregister(world_t *w, int side, mca_btl_base_registration_handle_t *h);

/* Deliver crafted bytes to side `to` on a channel, as from the wire: from
 * the other side's queue pair of that channel. */
fake_rx_result_t world_inject(world_t *w, int to, int channel, const void *bytes, uint32_t len);
/* The address side s sends from on a channel (its QP and GID). */
fake_src_t world_src(world_t *w, int side, int channel);
/* A header as side `from` would send it (sender name set, rest zero). */
void world_header(world_t *w, int from, usnic_btl_header_t *hdr, uint8_t type);

/* Free items in a free list (the rest are in use); SIZE_MAX if an item
 * is in it twice (the list is then corrupt). */
size_t world_free_count(opal_free_list_t *fl);

/* xorshift32 on the world's seed. */
uint32_t world_rand(world_t *w);

/* Classify a datagram of the wire. */
static inline const usnic_btl_header_t *dgram_hdr(const fake_dgram_t *d)
{
    return (const usnic_btl_header_t *) d->bytes;
}

#endif /* USNIC_ENGINE_WORLD_H */
