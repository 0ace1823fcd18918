/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 * $COPYRIGHT$
 * SPDX-License-Identifier: BSD-3-Clause
 *
 * A fake device for the host tests of the reliability engine.
 *
 * fake_device_ops implements the device operations of btl_usnic_device.h
 * over memory: channels get fake completion queues and queue pairs, a
 * posted send becomes a copy of its bytes on a "wire" that the test owns,
 * and receive buffers handed to the device wait in their queue pair until
 * the test delivers a datagram into one.  Like a device it keeps only its
 * own state: which sends hold a send-queue slot, which asked for a
 * completion, which buffers are posted.  All of the component's books
 * (slots, signalling cadence, repost batches, counters) are the real code
 * above the table, and so are module set-up, completion handling and the
 * progress loop.
 *
 * The component object is set up to use it (fake_component_reset), with a
 * fatal-error hook that records instead of ending the process.
 */

#ifndef USNIC_FAKE_DEVICE_H
#define USNIC_FAKE_DEVICE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "btl_usnic_device.h"

struct opal_btl_usnic_module_t;
struct mca_btl_base_endpoint_t;
struct opal_proc_t;

/* Where a datagram comes from, as the receiving device reports it: the
 * sending queue pair (the completion's src_qp) and the GID of its port
 * (in the GRH). */
typedef struct {
    uint32_t qpn;
    uint8_t gid[16];
} fake_src_t;

/* One datagram on the wire: what the sender posted, and where to. */
typedef struct {
    uint8_t *bytes;                     /* malloc'ed copy; len bytes */
    uint32_t len;
    uint32_t dst_qpn;                   /* the remote QP the endpoint addressed */
    opal_btl_usnic_dev_t *src;          /* the sending device */
    fake_src_t from;                    /* the posting QP and its device's GID */
} fake_dgram_t;

typedef struct {
    /* ---- behaviour the test sets ---- */
    bool fail_post;                     /* post_send fails */
    bool fail_repost;                   /* post_recv fails */
    bool hold_send_completions;         /* keep send completions until released */
    bool fail_readonly_reg;             /* reg_mem fails for read-only registrations */
    bool one_sge;                       /* channels send from one buffer only */
    bool inline_mtu;                    /* every send copied at the post (max_inline = the
                                         * MTU), as the UDP device's kernel copy */

    /* ---- what happened ---- */
    uint64_t posts;                     /* successful posts */
    uint64_t overposts;                 /* posts on a send queue with no free slot */
    uint64_t oversize_posts;            /* datagrams larger than the channel MTU */
    /* sends whose buffer (past the inline size) or second buffer lies in
     * no live registration of its key: a device fails them */
    uint64_t bad_key_posts;
    uint64_t gather_posts;              /* sends from two buffers */
    uint64_t unsignalled_gathers;       /* of those, not asking for a completion */
    uint64_t regs;                      /* reg_mem calls that succeeded */
    int mrs_live;                       /* registrations not yet released */
    size_t readonly_bytes_live;         /* bytes of those that are read-only */
    size_t readonly_bytes_max;          /* the most of those ever live at once */
    /* releases of a registration a send not yet completed may still read
     * (hold_send_completions), and of one not live */
    uint64_t busy_deregs;
    uint64_t bad_deregs;
    uint64_t recv_wrs_posted;           /* receive buffers handed to the device */
    uint64_t rx_delivered;              /* datagrams written into receive buffers */
    uint64_t rx_len_errors;             /* datagrams larger than the receive buffer */
    uint64_t polled;                    /* completions returned by poll */
    uint64_t poll_calls;                /* calls of poll */
    uint64_t send_wcs;                  /* send completions generated */
    /* send completions handed to the component for a segment whose
     * endpoint endpoint_alive (if set) says was released */
    uint64_t stale_completions;
    bool (*endpoint_alive)(const struct mca_btl_base_endpoint_t *ep);
    int fatal_calls;                    /* opal_btl_usnic_module_fatal, through its hook */
    struct opal_btl_usnic_module_t *fatal_module;
    struct opal_proc_t *fatal_peer;
} fake_device_t;

extern fake_device_t fake_dev;
/* What fake_device_reset starts fake_dev from (then cleared): behaviour a
 * test wants from before world_new, which resets the device. */
typedef struct {
    bool one_sge;
    bool inline_mtu;
} fake_device_next_t;
extern fake_device_next_t fake_dev_next;

/* Forget all state, free the wire; every fake channel must be closed. */
void fake_device_reset(void);

/* ---- the wire ---- */
size_t fake_wire_count(void);
/* The i-th datagram from the front (0 = oldest), or NULL. */
fake_dgram_t *fake_wire_peek(size_t i);
/* Remove the i-th datagram from the front into *out (the caller frees
 * out->bytes with fake_dgram_free). */
bool fake_wire_take(size_t i, fake_dgram_t *out);
/* Put a datagram (back) at the end of the wire; takes over d->bytes. */
void fake_wire_push(const fake_dgram_t *d);
void fake_dgram_free(fake_dgram_t *d);

/* ---- receiving ---- */
typedef enum {
    FAKE_RX_OK,             /* written into a receive buffer, completion queued */
    FAKE_RX_NO_QP,          /* nobody has that QP number */
    FAKE_RX_NO_BUFFER,      /* the QP has no posted receive buffer */
} fake_rx_result_t;

/* Deliver len bytes from src to the QP numbered qpn as a RoCE device
 * would: a 40-byte GRH with the sender's address (for an IPv4-mapped GID,
 * 20 zero bytes and an IPv4 header, as RoCE v2 over IPv4; else an IPv6
 * header with the source GID), then the datagram, and a receive completion
 * with src_qp, the GRH flag and length 40 + len (an error if it does not
 * fit the buffer). */
fake_rx_result_t fake_deliver(uint32_t qpn, const fake_src_t *src, const void *bytes,
                              uint32_t len);
/* Same, but the completion reports byte_len as given (for lengths the
 * device itself would never report, such as less than the GRH). */
fake_rx_result_t fake_deliver_raw(uint32_t qpn, const fake_src_t *src, const void *bytes,
                                  uint32_t len, uint32_t byte_len,
                                  opal_btl_usnic_cqe_status_t status);
/* Receive buffers currently posted on a module's channel. */
size_t fake_rx_posted(struct opal_btl_usnic_module_t *module, int channel);
/* Receive buffers posted on the QP numbered qpn, or -1 if there is none. */
long fake_qp_rx_posted(uint32_t qpn);

/* ---- completions ---- */
/* Completions waiting in a module's channel CQ. */
size_t fake_cq_depth(struct opal_btl_usnic_module_t *module, int channel);
/* Send completions held back (hold_send_completions). */
size_t fake_held_count(void);
/* Queue the held send completions on their CQs.  If status is not
 * USNIC_CQE_OK, the first one completes with that status. */
void fake_release_send_completions(opal_btl_usnic_cqe_status_t first_status);

/* ---- devices ---- */
extern const opal_btl_usnic_device_ops_t fake_device_ops;
/* A device whose port has this GID; fake_device_ops.close releases it. */
opal_btl_usnic_dev_t *fake_device_open(const uint8_t gid[16]);

/* Reset the component object as loaded, register its MCA parameters at
 * their defaults (peer timeout and connectivity checker then turned off),
 * construct its lists and make it use the fake device. */
void fake_component_reset(void);
void fake_component_fini(void);

#endif /* USNIC_FAKE_DEVICE_H */
