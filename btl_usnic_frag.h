/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 * $COPYRIGHT$
 * SPDX-License-Identifier: BSD-3-Clause
 *
 * Send segments, send fragments and receive buffers.
 *
 * A fragment (frag) is the unit the PML hands us.  A segment is one
 * datagram.  A small frag carries its own segment; a large frag is cut
 * into chunk segments, taken from a free list as they are sent.  Every
 * byte we send is first copied into registered memory, so a retransmit
 * never touches user memory and the PML gets its buffer back early.
 */

#ifndef BTL_USNIC_FRAG_H
#define BTL_USNIC_FRAG_H

#include "opal/class/opal_free_list.h"
#include "opal/datatype/opal_convertor.h"
#include "opal/mca/rcache/rcache.h"

#include "btl_usnic.h"
#include "btl_usnic_device.h"
#include "btl_usnic_wire.h"

BEGIN_C_DECLS

struct opal_btl_usnic_module_t;
struct mca_btl_base_endpoint_t;
struct opal_btl_usnic_send_frag_t;

/* Registration record the rcache keeps for each registered slab. */
typedef struct {
    mca_rcache_base_registration_t base;
    struct opal_btl_usnic_mr *mr;
    uint32_t lkey;
    size_t len;
} opal_btl_usnic_reg_t;

typedef enum {
    USNIC_SEG_ACK,      /* standalone ACK, priority channel */
    USNIC_SEG_FRAG,     /* the one segment of a small frag */
    USNIC_SEG_CHUNK,    /* one chunk of a large frag */
    USNIC_SEG_INLINE,   /* a sendi's one datagram, without a frag */
    USNIC_SEG_RECV,     /* receive buffer */
} opal_btl_usnic_seg_type_t;

/* What every posted buffer's completion cookie points to. */
typedef struct {
    opal_btl_usnic_seg_type_t type;
    int channel;
} opal_btl_usnic_seg_base_t;

/* A datagram we send.  Lives inside a small frag, a chunk or an ACK item. */
typedef struct opal_btl_usnic_send_seg_t {
    opal_btl_usnic_seg_base_t base;
    usnic_btl_header_t *hdr;        /* start of the registered buffer */
    uint8_t *payload;               /* after the (chunk) header */
    uint32_t lkey;
    uint32_t len;                   /* bytes on the wire, headers included */
    /* the last zc.len of them, if not 0: sent from where the data lies,
     * not from this buffer (a GET reply's chunk, see btl_usnic_rdma.c) */
    opal_btl_usnic_sge_t zc;
    struct opal_btl_usnic_send_frag_t *frag;   /* NULL: an ACK or inline */
    struct mca_btl_base_endpoint_t *ep;        /* set by every first send */
    uint16_t seq;
    int posted;                     /* work requests not yet completed */
    int wqes;                       /* send-queue slots its completion returns */
    bool ack_pending;               /* sent, not yet ACKed */
    bool prio;                      /* first sent on the priority channel */
    bool on_resend_list;
    opal_list_item_t resend_li;     /* link on the module's resend list */
} opal_btl_usnic_send_seg_t;

/* Free-list items that carry a send segment: chunks, inline datagrams,
 * ACKs. */
typedef struct {
    opal_free_list_item_t super;
    opal_btl_usnic_send_seg_t seg;
} opal_btl_usnic_chunk_t;
OBJ_CLASS_DECLARATION(opal_btl_usnic_chunk_t);

typedef opal_btl_usnic_chunk_t opal_btl_usnic_ack_item_t;

typedef enum {
    USNIC_FRAG_SMALL,
    USNIC_FRAG_LARGE,
} opal_btl_usnic_frag_type_t;

/* Room in a large frag for the PML header (segment 0). */
#define USNIC_LARGE_HDR_ROOM 128

typedef struct opal_btl_usnic_send_frag_t {
    mca_btl_base_descriptor_t base;
    mca_btl_base_segment_t segs[2];
    opal_btl_usnic_frag_type_t type;
    struct mca_btl_base_endpoint_t *endpoint;
    opal_list_item_t queue_li;          /* link on the endpoint's send queue */
    bool queued;

    uint8_t tag;
    uint64_t put_addr;                  /* non-zero for an emulated PUT */
    size_t size;                        /* total payload bytes */
    uint32_t segs_unacked;              /* segments not yet ACKed (or not yet sent) */
    uint32_t segs_posted;               /* segments still owned by the device */
    bool local_done;                    /* data copied out of user memory; PML told */
    bool cb_deferred;                   /* PML-owned: its callback waits for the ACKs */
    bool sendi;                         /* sendi's: BTL-owned, no PUT, no PML callback */

    /* a chunked PUT: the target's registration, in every chunk */
    usnic_reg_ref_t put_ref;
    /* emulated PUT completion */
    mca_btl_base_rdma_completion_fn_t put_cb;
    void *put_local;
    void *put_context;
    void *put_cbdata;

    /* small frags: the segment, in this item's registered buffer */
    opal_btl_usnic_send_seg_t seg;

    /* large frags */
    uint8_t hdr_room[USNIC_LARGE_HDR_ROOM];
    uint32_t frag_id;
    size_t sent_offset;                 /* bytes already chunked */
    uint8_t *pack_buf;                  /* malloc'ed: packed data, or all of an alloc'ed frag */
    /* GET data read from registered memory as it is chunked: on the
     * module's get_sources list until returned (see btl_usnic_rdma.c) */
    opal_list_item_t src_li;
    bool src_listed;
    /* the device registration of just the memory this GET reads: chunks of
     * this frag send their data from it (zcopy), and it lives until the
     * frag's chunks are done (past a deregistration of the memory, and its
     * free: the registration keeps the pages the device may still read) */
    opal_btl_usnic_mr_t *zc_mr;
    uint32_t zc_lkey;
    bool zcopy;
    bool lazy;                          /* pack from conv while chunking */
    opal_convertor_t conv;
    /* The convertor packs whole basic elements only; the tail of one that
     * straddles a chunk boundary waits here for the next chunk. */
    uint8_t carry[64];
    uint8_t carry_off;
    uint8_t carry_len;
} opal_btl_usnic_send_frag_t;
OBJ_CLASS_DECLARATION(opal_btl_usnic_send_frag_t);

/* A receive buffer: the device writes the GRH, then our header. */
typedef struct opal_btl_usnic_recv_seg_t {
    opal_free_list_item_t super;
    opal_btl_usnic_seg_base_t base;
    uint8_t *buf;
    uint32_t lkey;
    uint32_t len;
    struct opal_btl_usnic_recv_seg_t *next;     /* in a batch handed to the device */
    struct opal_btl_usnic_channel_t *chan;      /* where it goes back to */
    /* what the PML's receive callback gets for a message ending here */
    mca_btl_base_segment_t pml_seg;
    usnic_rx_desc_t pml_desc;
} opal_btl_usnic_recv_seg_t;
OBJ_CLASS_DECLARATION(opal_btl_usnic_recv_seg_t);

/* Free-list item initialisers: point the segment at the registered buffer. */
int opal_btl_usnic_chunk_init(opal_free_list_item_t *item, void *ctx);
int opal_btl_usnic_small_frag_init(opal_free_list_item_t *item, void *ctx);
int opal_btl_usnic_recv_seg_init(opal_free_list_item_t *item, void *ctx);

/* What a new use of a frag changes.  A frag is back on its list only
 * unqueued, acknowledged, off the device and with its callback run
 * (frag_return_if_done): the other fields need no reset. */
static inline void opal_btl_usnic_frag_reset(opal_btl_usnic_send_frag_t *frag,
                                             struct mca_btl_base_endpoint_t *endpoint,
                                             size_t size, uint32_t des_flags, uint8_t order)
{
    frag->endpoint = endpoint;
    frag->put_addr = 0;
    frag->put_cb = NULL;
    frag->size = size;
    frag->local_done = false;
    frag->sendi = false;
    frag->base.des_flags = des_flags;
    frag->base.des_cbfunc = NULL;
    frag->base.des_cbdata = NULL;
    frag->base.des_context = NULL;
    frag->base.order = order;
}

/* What a sendi frag needs of frag_reset: the PML never sees its
 * descriptor, so it is done for the PML from the start (local_done: no
 * callback, which is all that reads des_cbfunc and its arguments; nor a
 * deferred one), and nothing reads its order, put_cb (only with a
 * put_addr) or segs[0].  Its ACK returns it at once if it is off the
 * device (opal_btl_usnic_seg_acked). */
static inline void opal_btl_usnic_frag_reset_sendi(opal_btl_usnic_send_frag_t *frag,
                                                   struct mca_btl_base_endpoint_t *endpoint,
                                                   size_t size, uint32_t des_flags, uint8_t tag)
{
    frag->endpoint = endpoint;
    frag->put_addr = 0;
    frag->size = size;
    frag->local_done = true;
    frag->sendi = true;
    frag->base.des_flags = des_flags;
    frag->tag = tag;
}

/* Take a send table for the peer when it holds none (nothing was in
 * flight); without one nothing can go to that peer, which is fatal. */
int opal_btl_usnic_frag_tx_setup(struct opal_btl_usnic_module_t *module,
                                 struct mca_btl_base_endpoint_t *endpoint);

opal_btl_usnic_send_frag_t *opal_btl_usnic_frag_alloc(struct opal_btl_usnic_module_t *module,
                                                      struct mca_btl_base_endpoint_t *endpoint,
                                                      size_t size);
/* Return the frag to its free list if the PML and the wire are both done. */
void opal_btl_usnic_frag_return_if_done(struct opal_btl_usnic_module_t *module,
                                        opal_btl_usnic_send_frag_t *frag);

END_C_DECLS
#endif /* BTL_USNIC_FRAG_H */
