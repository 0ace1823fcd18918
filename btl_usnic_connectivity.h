/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 * $COPYRIGHT$
 * SPDX-License-Identifier: BSD-3-Clause
 *
 * Connectivity checker.  Before the first datagram to a peer interface,
 * UDP pings of a small and an MTU-sized datagram (Don't Fragment; the
 * smaller of both interface MTUs) go from the local interface to the
 * peer's; if either size gets no answer after the configured retries, the
 * job aborts with a message naming both ends instead of hanging in
 * retransmits.  The same sockets answer the dead-peer check's liveness
 * pings.
 *
 * Design: every process has one UDP socket per module, published in the
 * modex, and answers and sends pings from OPAL's progress thread, so a
 * peer busy computing still answers.  (The original ran one agent per
 * host behind a Unix-socket IPC; per-process sockets need no IPC and
 * name the exact failing pair.)  Failures are reported on the main thread
 * from the progress function.
 *
 * Trust: a ping is answered only if authentic under this process's key,
 * which only the job has (usnic_conn_msg_t in btl_usnic_wire.h); an answer
 * counts only if authentic under the pinged peer's key, from its address,
 * for a ping of ours still outstanding.
 */

#ifndef BTL_USNIC_CONNECTIVITY_H
#define BTL_USNIC_CONNECTIVITY_H

#include "btl_usnic.h"

BEGIN_C_DECLS

struct opal_btl_usnic_module_t;
struct mca_btl_base_endpoint_t;

/* Open the module's UDP socket; sets local_addr.connectivity_udp_port. */
int opal_btl_usnic_connectivity_listen(struct opal_btl_usnic_module_t *module);

/* The checker socket at ip:port (network order) is a peer of this job on
 * the module: only peers' pings are answered.  Each add is undone by one
 * remove (endpoint set-up and destruction); no-ops while the checker is off. */
void opal_btl_usnic_connectivity_add_peer(struct opal_btl_usnic_module_t *module, uint32_t ip,
                                          uint16_t port);
void opal_btl_usnic_connectivity_remove_peer(struct opal_btl_usnic_module_t *module,
                                             uint32_t ip, uint16_t port);

/* Start checking the path to an endpoint's peer interface (once per pair). */
void opal_btl_usnic_connectivity_check(struct mca_btl_base_endpoint_t *ep);

/* Liveness pings.  While an endpoint's data stays unacknowledged, the
 * dead-peer check pings the peer's socket (from the main thread); the
 * peer's progress thread answers even while its application computes, with
 * how long ago its main thread last ran progress. */
typedef struct opal_btl_usnic_live_t opal_btl_usnic_live_t;

/* Send one liveness ping to the endpoint's peer (nothing if the checker is
 * off on either side). */
void opal_btl_usnic_liveness_ping(struct mca_btl_base_endpoint_t *ep);

/* When (monotonic seconds) the peer last answered; 0 if never. */
double opal_btl_usnic_liveness_answer(struct mca_btl_base_endpoint_t *ep);

/* When (monotonic seconds) the peer last answered while busy outside
 * progress; 0 if never. */
double opal_btl_usnic_liveness_busy(struct mca_btl_base_endpoint_t *ep);

/* What the pings found in the last timeout seconds, for the dead-peer
 * message. */
const char *opal_btl_usnic_liveness_summary(struct mca_btl_base_endpoint_t *ep, double now,
                                            double timeout);

/* Forget the endpoint's liveness record (endpoint destructor). */
void opal_btl_usnic_liveness_release(struct mca_btl_base_endpoint_t *ep);

/* Called from progress when a check failed: report and abort. */
void opal_btl_usnic_connectivity_report(void);

/* Stop the checker: every check, every socket, and the progress thread.
 * Idempotent. */
void opal_btl_usnic_connectivity_fini(void);

/* Set by the checker thread when a peer interface did not answer. */
extern volatile int32_t opal_btl_usnic_connectivity_failed;

END_C_DECLS
#endif /* BTL_USNIC_CONNECTIVITY_H */
