/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 * $COPYRIGHT$
 * SPDX-License-Identifier: BSD-3-Clause
 *
 * Per-module counters: what the transport did, and every packet it dropped.
 */

#ifndef BTL_USNIC_STATS_H
#define BTL_USNIC_STATS_H

#include <stdint.h>

#include "btl_usnic_window.h"

/* X-macro so the struct, the printer and the MPI_T export share one list. */
#define USNIC_STATS_COUNTERS(X)                                               \
    X(num_total_sends, "datagrams sent (data, chunks, ACKs, resends)")       \
    X(num_frag_sends, "small fragments sent")                                 \
    X(num_chunk_sends, "chunks of large fragments sent")                      \
    X(num_ack_sends, "standalone ACKs sent")                                  \
    X(num_fast_sends, "fragments sent on the priority channel fast path")    \
    X(num_resends, "segments retransmitted")                                  \
    X(num_timeout_retrans, "retransmits caused by the retransmit timer")     \
    X(num_timer_unsent, "retransmit timer expiries for a segment the device had not sent yet (timer restarted, nothing resent)") \
    X(num_timer_probes, "retransmit timer expiries that sent a probe, not a resend (no loss on the device's network for 10 s): the peer's answer shows whether the segment arrived") \
    X(num_probe_spurious, "probes answered with an ACK of the segment: the timeout was too quick, nothing resent") \
    X(num_probe_missing, "probes answered the first time without the segment on a device whose channels are queues of their own (verbs): probed again at the next expiry (a datagram sent before the probe on the other channel may arrive after it), resent at the second such answer") \
    X(num_probe_unanswered, "retransmit timer expiries with a probe unanswered (the next probe, or after the third, the resend)") \
    X(num_fast_retrans, "retransmits at once: a hole the receiver reported, or the segment a recovery's partial ACK shows missing") \
    X(num_spurious_fast, "fast retransmits the peer received twice: the path reorders (its reordering window grows)") \
    X(num_reorder_waits, "reported holes that waited out the reordering window before any resend") \
    X(num_cwnd_cuts, "congestion window reductions after a loss")            \
    X(num_spurious_timeouts, "retransmit timeouts undone: the peer reported the resent segment a duplicate") \
    X(num_total_recvs, "datagrams received")                                  \
    X(num_frag_recvs, "small fragments received")                             \
    X(num_chunk_recvs, "chunks received")                                     \
    X(num_ack_recvs, "standalone ACKs received")                              \
    X(num_unk_recvs, "datagrams from unknown senders dropped")               \
    X(num_dup_recvs, "duplicate datagrams dropped")                          \
    X(num_oow_low_recvs, "datagrams below the receive window dropped")       \
    X(num_oow_high_recvs, "datagrams above the receive window dropped")      \
    X(num_badfrag_recvs, "chunks dropped: reassembly slot busy or mismatched") \
    X(num_bad_recvs, "malformed datagrams dropped")                           \
    X(num_forged_recvs, "datagrams dropped: not from the queue pair or GID of the sender they name") \
    X(num_recv_errors, "receive completions with an error status (datagram lost)") \
    X(num_send_errors, "send completions with an error status (datagram not sent)") \
    X(num_old_dup_acks, "old ACKs ignored")                                   \
    X(num_dup_acks, "duplicate ACKs")                                         \
    X(num_bogus_acks, "ACKs for sequences never sent, ignored")              \
    X(num_recv_reposts, "receive buffers reposted")                           \
    X(pml_module_sends, "fragments the PML gave us")                          \
    X(pml_send_callbacks, "send completions reported to the PML")            \
    X(num_puts, "emulated PUTs started")                                     \
    X(num_gets, "emulated GETs started")                                     \
    X(num_atomics, "emulated atomic operations started")                     \
    X(num_rdma_served, "GET and atomic requests of peers carried out (or refused)") \
    X(num_rdma_refused, "GET and atomic requests refused: outside memory registered for them") \
    X(num_bad_handles, "PUTs, GETs and atomics of peers naming no registration of this process (slot out of range or empty, wrong or revoked key): refused, nothing written or read") \
    X(num_rdma_stray, "GET/atomic replies matching no outstanding request, dropped") \
    X(num_rdma_local, "PUTs, GETs and atomics on this process's own memory (NULL endpoint)") \
    X(num_chunk_stalls, "send passes ended early: no chunk buffer (registered memory) left") \
    X(num_zcopy_chunks, "GET data chunks sent from the registered memory itself, not copied") \
    X(num_zcopy_unregistered, "GETs whose data the device refused to register (the data is copied)") \
    X(num_conn_refused, "connectivity and liveness pings dropped unanswered: no valid authenticator (not from a process of this job) or malformed") \
    X(num_conn_stray, "connectivity and liveness answers dropped: no valid authenticator, or for no ping outstanding to that peer (forged, replayed or late)") \
    X(num_conn_budget, "wake-ups of the connectivity socket that used up their budget of datagrams (a flood; the rest waits for the next)") \
    X(num_window_full, "segments that filled their peer's send window (the sender waits for an ACK)") \
    X(num_window_grows, "send windows doubled: the window limited and the path delivered more for a larger one") \
    X(num_window_reverts, "send windows halved again: the path delivered no more for the doubled window") \
    X(num_table_grows, "send tables doubled for a growing window (what was in flight moved)")

typedef struct {
#define USNIC_STATS_FIELD(name, desc) uint64_t name;
    USNIC_STATS_COUNTERS(USNIC_STATS_FIELD)
#undef USNIC_STATS_FIELD
    uint64_t max_sent_window_size;
    uint64_t max_rcvd_window_size;
    uint64_t max_rto_us;                /* largest timeout computed from RTT samples */
    /* state, never reset by relative reports */
    uint64_t endpoints;                 /* endpoints now */
    uint64_t endpoint_bytes;            /* memory they hold now */
    uint64_t send_table_bytes;          /* pooled send tables: held for data in flight, or free */
    uint64_t reassembly_bytes;          /* pooled reassembly slots: held while reassembling, or free */
    uint64_t add_procs_usec;            /* time spent in add_procs, in total */
} opal_btl_usnic_stats_t;

struct opal_btl_usnic_module_t;

/* Export the counters as MPI_T performance variables btl_usnic_<counter>,
 * each an array with one value per module (device). */
void opal_btl_usnic_stats_register_pvars(void);

/* Print one report line per module ("final" at finalize). */
void opal_btl_usnic_stats_print(struct opal_btl_usnic_module_t *module, const char *prefix);

#endif /* BTL_USNIC_STATS_H */
