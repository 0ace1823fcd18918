/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 * $COPYRIGHT$
 *
 * A fake device for the host tests of the reliability engine.
 *
 * fake_verbs.c implements every function of btl_usnic_verbs.h without
 * libibverbs doing any work: channels get fake completion queues and queue
 * pairs, a posted send becomes a copy of its bytes on a "wire" that the test
 * owns, and receive buffers handed back with opal_btl_usnic_verbs_repost
 * wait in their queue pair until the test delivers a datagram into one.
 * Completions reach the component through the real ibv_poll_cq (an inline
 * of verbs.h that calls the context's poll_cq), so the real
 * opal_btl_usnic_module_progress() drives everything.
 *
 * Everything else of the component is linked as it is.  The fake also
 * replaces opal_btl_usnic_module_fatal, which aborts, by a recorder.
 */

#ifndef USNIC_FAKE_VERBS_H
#define USNIC_FAKE_VERBS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <infiniband/verbs.h>

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
    int channel;                        /* the sender's channel */
    struct opal_btl_usnic_module_t *src;
    fake_src_t from;                    /* the posting QP and its module's GID */
} fake_dgram_t;

typedef struct {
    /* ---- behaviour the test sets ---- */
    bool fail_post;                     /* opal_btl_usnic_verbs_post fails */
    bool fail_repost;                   /* opal_btl_usnic_verbs_repost fails */
    bool hold_send_completions;         /* keep send completions until released */

    /* ---- what happened ---- */
    uint64_t posts;                     /* successful posts */
    uint64_t overposts;                 /* posts on a channel with no free send WQE */
    uint64_t oversize_posts;            /* datagrams larger than the channel MTU */
    uint64_t recv_wrs_posted;           /* receive buffers handed to the device */
    uint64_t rx_delivered;              /* datagrams written into receive buffers */
    uint64_t rx_len_errors;             /* datagrams larger than the receive buffer */
    uint64_t polled;                    /* completions returned by poll_cq */
    uint64_t send_wcs;                  /* send completions generated */
    /* send completions handed to the component for a segment whose
     * endpoint endpoint_alive (if set) says was released */
    uint64_t stale_completions;
    bool (*endpoint_alive)(const struct mca_btl_base_endpoint_t *ep);
    int fatal_calls;                    /* opal_btl_usnic_module_fatal */
    struct opal_btl_usnic_module_t *fatal_module;
    struct opal_proc_t *fatal_peer;
} fake_device_t;

extern fake_device_t fake_dev;

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
 * with src_qp, IBV_WC_GRH and byte_len = 40 + len (status
 * IBV_WC_LOC_LEN_ERR if it does not fit the buffer). */
fake_rx_result_t fake_deliver(uint32_t qpn, const fake_src_t *src, const void *bytes,
                              uint32_t len);
/* Same, but the completion reports byte_len as given (for lengths the
 * device itself would never report, such as less than the GRH). */
fake_rx_result_t fake_deliver_raw(uint32_t qpn, const fake_src_t *src, const void *bytes,
                                  uint32_t len, uint32_t byte_len, enum ibv_wc_status status);
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
 * IBV_WC_SUCCESS, the first one completes with that status. */
void fake_release_send_completions(enum ibv_wc_status first_status);

/* The device context the fake modules point at. */
struct ibv_context *fake_context(void);

/* Reset the component object as loaded, register its MCA parameters at
 * their defaults (peer timeout then turned off) and construct its lists. */
void fake_component_reset(void);
void fake_component_fini(void);

#endif /* USNIC_FAKE_VERBS_H */
