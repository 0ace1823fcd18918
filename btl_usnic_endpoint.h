/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 * $COPYRIGHT$
 * SPDX-License-Identifier: BSD-3-Clause
 *
 * An endpoint is one (module, remote device) pair: the address handle, the
 * send queue, and both halves of the sliding window.
 */

#ifndef BTL_USNIC_ENDPOINT_H
#define BTL_USNIC_ENDPOINT_H

#include "opal/class/opal_list.h"

#include "btl_usnic.h"
#include "btl_usnic_device.h"
#include "btl_usnic_frag.h"
#include "btl_usnic_window.h"
#include "btl_usnic_wire.h"

BEGIN_C_DECLS

struct opal_btl_usnic_module_t;
struct opal_btl_usnic_proc_t;

/* Reassembly slots per endpoint; a sender keeps at most this many large
 * frags unacknowledged, so ids never collide in a slot. */
#define USNIC_RX_FRAG_SLOTS 32

/* Recover the outer struct from an embedded list item. */
#define usnic_container_of(ptr, type, member) \
    ((type *) ((char *) (ptr) - offsetof(type, member)))

typedef struct mca_btl_base_endpoint_t {
    opal_object_t super;

    struct opal_btl_usnic_module_t *module;
    struct opal_btl_usnic_proc_t *proc;
    usnic_modex_addr_t remote;          /* the peer device's modex record */
    int remote_index;                   /* its index in the peer's modex */
    /* per channel, as remote.qp_num: built once, passed to every post; both
     * hold the same address handle, NULL until it is made */
    opal_btl_usnic_dest_t dest[2];

    /* list memberships, each with an explicit flag so removal has one owner */
    opal_list_item_t all_li;            /* module->all_endpoints */
    opal_list_item_t sends_li;          /* module->endpoints_with_sends */
    opal_list_item_t acks_li;           /* module->endpoints_that_need_acks */
    opal_list_item_t timer_li;          /* module->endpoints_with_timers */
    bool on_sends_list;
    bool on_acks_list;                  /* may stay on after its ACK went out ... */
    bool on_timer_list;                 /* may stay on after its timer stopped ... */
    bool timer_running;                 /* ... this says whether it runs */

    /* sending; sent_segs exists while segments are in flight (a table
     * from the module's pool, btl_usnic_endpoint.c) */
    opal_list_t send_queue;             /* frags waiting for the wire */
    int send_credits;
    usnic_tx_window_t tx;
    /* Fast-path segments go to the peer's small priority receive queue:
     * at most prio_window of them may be unacknowledged at a time. */
    uint32_t prio_inflight;
    uint32_t prio_window;
    opal_btl_usnic_send_seg_t **sent_segs;  /* by sequence & tx_mask; NULL: none held */
    uint32_t tx_mask;                   /* slots in sent_segs, minus 1 */
    bool tx_ready;                      /* a table is held and connectivity checked */
    /* The retransmit timer (btl_usnic_retrans.c): armed while segments are
     * unacknowledged, pushed back whenever an ACK moves the window. */
    double rto_deadline_us;
    bool rto_restart;                   /* the next check_timers sets the deadline */
    bool rto_graced;                    /* this deadline was pushed back once after an absence */
    bool in_recovery;                   /* since a timeout, until recover_seq is ACKed */
    uint16_t recover_seq;               /* the last sequence sent when the timer expired */
    size_t mem_bytes;                   /* this endpoint's share of stats.endpoint_bytes */
    uint32_t next_frag_id;
    int active_large_frags;
    double last_ack_time;               /* when the window last moved (monotonic s; set
                                         * with the deadline) */
    usnic_peer_watch_t watch;           /* dead-peer check of the current stall */
    struct opal_btl_usnic_live_t *live; /* liveness ping answers, from the checker thread */
    usnic_rto_t rto;                    /* retransmit timeout, adapted to measured RTT */
    bool rtt_timing;                    /* a segment is being timed */
    uint32_t rtt_skip;                  /* timer starts counted toward the next sample */
    uint16_t rtt_seq;
    double rtt_start_us;
    /* Resent for a hole (reported, or the timer's) up to here, at or above
     * the ACK: a report of the same hole resends only what lies beyond. */
    uint16_t hole_resent_to;
    /* A reported hole waiting out the path's reordering window (reo):
     * until hole_due_us, then its run up to hole_wait_to is resent; a
     * longer run reported meanwhile (hole_next_to) waits after it. */
    usnic_reo_t reo;
    bool hole_waiting;
    uint16_t hole_wait_to;
    uint16_t hole_next_to;
    double hole_due_us;
    /* The last run of fast resends, fast_lo .. fast_hi, open until the
     * peer reports one of them twice or a new run replaces it. */
    bool fast_open;
    uint16_t fast_lo;
    uint16_t fast_hi;
    uint16_t chan_last_seq[2];          /* last first send on each channel (chan_prev) */
    double floor_raised_us;             /* when a late peer last raised the RTO floor */
    double tmo_sent_us;                 /* about when the last timer resend was first sent */
    /* The last timer resend, until the peer shows whether it was needed:
     * its sequence number and the congestion window before its cut. */
    bool tmo_pending;
    uint16_t tmo_seq;
    /* Probes sent for probe_seq, the oldest unacknowledged segment, at
     * expiries, until the peer answers (USNIC_ACK_PROBED) or the timer
     * resends it (0: no probe waits). */
    uint8_t probes;
    /* the peer answered once that probe_seq has not arrived: the next such
     * answer resends it */
    bool probe_missing;
    uint16_t probe_seq;
    double probe_sent_us;               /* about when probe_seq was first sent */
    usnic_tx_cwnd_state_t tmo_cwnd;

    /* receiving */
    usnic_rx_window_t rx;
    uint64_t *rx_bits;
    bool ack_owed;                      /* ... this says whether one is owed */
    uint64_t ack_due_tick;              /* progress tick at which to send a standalone ACK */
    uint32_t rx_unacked;                /* segments accepted since the last ACK went out */
    bool ack_urgent;                    /* the owed ACK may not wait (schedule_ack) */
    double ack_hold_until_us;           /* a delayed ACK leaves then at the earliest; 0: unset */
    uint16_t rx_acked;                  /* the cumulative ACK last sent to the peer */
    uint8_t rx_report;                  /* USNIC_ACK_* to report in the next ACK */
    uint16_t rx_dup_seq;                /* with USNIC_ACK_DUP_SEEN: the duplicate */
    bool rx_filled;                     /* rx_filled_seq: the last resend that filled a hole */
    uint16_t rx_filled_seq;
    usnic_rx_frag_t *rx_frags;          /* USNIC_RX_FRAG_SLOTS, from the module's pool while
                                         * a fragment is being put together */
    uint32_t rx_frags_busy;             /* slots with a fragment in progress */

    bool exiting;
    bool failed;
    bool connectivity_checked;
    bool conn_peer;                 /* its checker socket is in the module's conn_peers */
    bool zombie;                        /* on module->zombie_endpoints */
} opal_btl_usnic_endpoint_t;
typedef opal_btl_usnic_endpoint_t mca_btl_base_endpoint_t;
OBJ_CLASS_DECLARATION(opal_btl_usnic_endpoint_t);

/* The endpoint's address handle was made: every channel sends with it. */
static inline void opal_btl_usnic_endpoint_set_ah(opal_btl_usnic_endpoint_t *ep,
                                                  opal_btl_usnic_ah_t *ah)
{
    ep->dest[0].ah = ep->dest[1].ah = ah;
}

/* Set up windows and lists once the remote record is known. */
int opal_btl_usnic_endpoint_setup(opal_btl_usnic_endpoint_t *ep,
                                  struct opal_btl_usnic_module_t *module,
                                  const usnic_modex_addr_t *remote);

/* Take a send table from the module's pool for a first send after none
 * was in flight (and check connectivity at the very first).
 * OPAL_ERR_OUT_OF_RESOURCE if memory is short. */
int opal_btl_usnic_endpoint_tx_alloc(opal_btl_usnic_endpoint_t *ep);
/* The window wants more slots than the table has: double it, moving what
 * is in flight below seq.  False if it is not what limits, or memory is
 * short (the window then stays the table's size). */
bool opal_btl_usnic_endpoint_tx_grow(opal_btl_usnic_endpoint_t *ep, uint16_t seq);
/* Nothing in flight: the table goes back to the pool. */
void opal_btl_usnic_endpoint_tx_release(opal_btl_usnic_endpoint_t *ep);
/* Free the module's pooled tables and reassembly slots (teardown). */
void opal_btl_usnic_tx_tables_fini(struct opal_btl_usnic_module_t *module);

/* Reassembly slots for ep's first chunk in progress (NULL if memory is
 * short), and back to the pool when no fragment is in progress: like the
 * send tables, held only while in use. */
usnic_rx_frag_t *opal_btl_usnic_rx_frags_get(opal_btl_usnic_endpoint_t *ep);
void opal_btl_usnic_rx_frags_put(opal_btl_usnic_endpoint_t *ep);

static inline int opal_btl_usnic_endpoint_tx_ready(opal_btl_usnic_endpoint_t *ep)
{
    return OPAL_LIKELY(ep->tx_ready) ? OPAL_SUCCESS : opal_btl_usnic_endpoint_tx_alloc(ep);
}

/* Fit the send window to the peer's receive buffers, shared by about as
 * many senders as we have peers (datagrams beyond them are dropped by the
 * peer's device and cost a retransmit). */
void opal_btl_usnic_endpoint_size_window(opal_btl_usnic_endpoint_t *ep, size_t npeers);

/* Unlink from every module list and release everything still queued. */
void opal_btl_usnic_endpoint_flush(opal_btl_usnic_endpoint_t *ep);

/* True when nothing is queued or unacknowledged. */
static inline bool opal_btl_usnic_endpoint_drained(opal_btl_usnic_endpoint_t *ep)
{
    return opal_list_is_empty(&ep->send_queue) && 0 == usnic_tx_window_inflight(&ep->tx);
}

END_C_DECLS
#endif /* BTL_USNIC_ENDPOINT_H */
