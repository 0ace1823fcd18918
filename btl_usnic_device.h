/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 * $COPYRIGHT$
 * SPDX-License-Identifier: BSD-3-Clause
 *
 * The device boundary: a table of operations over opaque handles.  The
 * verbs glue (btl_usnic_verbs.c) implements it over libibverbs, the UDP
 * glue (btl_usnic_udp.c) over kernel UDP sockets, the host tests' fake
 * device over memory.  Nothing above it sees a verbs type, and
 * nothing below it keeps the component's books: send-queue slots, the
 * signalling cadence, receive-buffer batches and counters live above, in
 * btl_usnic_channel.c.  Operations that fail show their own help message
 * (they know which device call failed) and return an OPAL error code,
 * unless said otherwise.
 */

#ifndef BTL_USNIC_DEVICE_H
#define BTL_USNIC_DEVICE_H

/* Open MPI's configuration before hwloc.h: both define HWLOC_VERSION. */
#include "btl_usnic.h"

#include <hwloc.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "btl_usnic_compat.h"

BEGIN_C_DECLS

typedef struct opal_btl_usnic_dev opal_btl_usnic_dev_t;        /* an open device */
typedef struct opal_btl_usnic_pd opal_btl_usnic_pd_t;          /* a protection domain */
typedef struct opal_btl_usnic_hwchan opal_btl_usnic_hwchan_t;  /* a CQ and its UD queue pair */
typedef struct opal_btl_usnic_ah opal_btl_usnic_ah_t;          /* the route to a peer */
typedef struct opal_btl_usnic_mr opal_btl_usnic_mr_t;          /* a registered region */
struct opal_btl_usnic_recv_seg_t;

#define USNIC_DEV_NAME_MAX 64

/* A device port we can use, as the device scan finds it. */
typedef struct {
    opal_btl_usnic_dev_t *dev;      /* shared by the ports of one device */
    char dev_name[USNIC_DEV_NAME_MAX];
    uint8_t port_num;
    int gid_index;
    uint8_t gid[16];
    int netdev_kindex;              /* kernel ifindex of the netdev behind the GID */
    bool grh_ipv4;                  /* RoCE v2 over IPv4: receives carry an IPv4 header */
    uint32_t port_mtu;              /* active MTU in bytes */
    uint32_t link_speed_mbps;
    bool loopback;                  /* reaches this host only: used if asked for by name */
} opal_btl_usnic_port_t;

typedef struct {
    int max_qp_wr;                  /* deepest send or receive queue */
    int max_cqe;                    /* deepest completion queue */
    bool pins_memory;               /* registration counts against RLIMIT_MEMLOCK */
    bool drops_unbuffered;          /* a datagram finding no receive buffer is lost (UD) */
    bool host_kernel_work;          /* the host's kernel does the device's work in threads of
                                     * its own, on the CPUs the processes poll (Soft-RoCE) */
    bool channels_apart;            /* the channels are queues of their own: a datagram of one
                                     * may reach the peer before one sent earlier on the other */
} opal_btl_usnic_dev_limits_t;

/* What a channel asks for, and what the device granted. */
typedef struct {
    const char *dev_name;           /* for messages */
    uint8_t port_num;
    uint32_t qkey;
    int sd_num, rd_num, cq_num;
    uint32_t mtu;
} opal_btl_usnic_chan_req_t;

typedef struct {
    uint32_t qp_num;
    int sd_num;                     /* may exceed what was asked */
    int rd_num;
    uint32_t max_inline;            /* sends up to this long are copied at post time */
    int max_send_sge;               /* buffers one send may gather */
} opal_btl_usnic_chan_info_t;

/* A part of a datagram in registered memory. */
typedef struct {
    const void *addr;
    uint32_t len;
    uint32_t lkey;
} opal_btl_usnic_sge_t;

/* Where a datagram goes. */
typedef struct {
    opal_btl_usnic_ah_t *ah;
    uint32_t qpn;
    uint32_t qkey;
} opal_btl_usnic_dest_t;

typedef enum {
    USNIC_CQE_OK,
    USNIC_CQE_FLUSHED,              /* the queue pair is in error: the device is gone */
    USNIC_CQE_ERROR,                /* this one work request failed */
} opal_btl_usnic_cqe_status_t;

/* One completion.  cookie is what the send or receive buffer was posted
 * with; NULL for a send posted unsignalled, which completes only when it
 * failed. */
typedef struct {
    void *cookie;
    opal_btl_usnic_cqe_status_t status;
    int code;                       /* the device's own status, for messages */
    uint32_t len;                   /* receives: bytes written, network header included */
    uint32_t src_qp;                /* receives: the sending queue pair */
    bool grh;                       /* receives: the network header is valid */
} opal_btl_usnic_cqe_t;

/* Asynchronous device events reach the component here (btl_usnic_component.c):
 * port is -1 for device-wide events; a non-fatal event is only logged. */
void opal_btl_usnic_device_event(opal_btl_usnic_dev_t *dev, int port, bool fatal,
                                 const char *what, int code);

typedef struct opal_btl_usnic_device_ops_t {
    /* USNIC_TRANSPORT_* (btl_usnic_wire.h): published, so that peers whose
     * datagrams travel differently are told apart. */
    uint8_t transport;
    /* Open every device with usable ports; ports of one device share its
     * handle, which close releases (once per device). */
    int (*find_ports)(opal_btl_usnic_port_t **ports, int *num_ports);
    void (*close)(opal_btl_usnic_dev_t *dev);
    int (*query)(opal_btl_usnic_dev_t *dev, const char *dev_name,
                 opal_btl_usnic_dev_limits_t *limits);
    /* The CPUs near the device; non-zero if unknown. */
    int (*cpuset)(opal_btl_usnic_dev_t *dev, hwloc_topology_t topo, hwloc_bitmap_t set);

    opal_btl_usnic_pd_t *(*pd_alloc)(opal_btl_usnic_dev_t *dev, const char *dev_name);
    void (*pd_free)(opal_btl_usnic_pd_t *pd);
    /* Register for local access (reads by the device; writes too if
     * writable); returns 0 or an errno (no message: the caller decides how
     * often to say so). */
    int (*reg_mem)(opal_btl_usnic_pd_t *pd, void *base, size_t len, bool writable,
                   opal_btl_usnic_mr_t **mr, uint32_t *lkey);
    void (*dereg_mem)(opal_btl_usnic_mr_t *mr);

    /* A UD queue pair that takes receive buffers, with a completion queue of
     * req->cq_num entries, or, given cq_of (a channel of the same device that
     * outlives this one), on cq_of's completion queue: one poll then serves
     * both.  start makes it send and receive, once its buffers are posted. */
    int (*chan_create)(opal_btl_usnic_dev_t *dev, opal_btl_usnic_pd_t *pd,
                       const opal_btl_usnic_chan_req_t *req, opal_btl_usnic_hwchan_t *cq_of,
                       opal_btl_usnic_chan_info_t *info, opal_btl_usnic_hwchan_t **chan);
    int (*chan_start)(opal_btl_usnic_hwchan_t *chan);
    void (*chan_destroy)(opal_btl_usnic_hwchan_t *chan);

    /* One datagram of len bytes from registered memory, followed by the
     * bytes of more if it is not NULL (at most max_send_sge buffers; the
     * device reads more until the send completes, so such a send asks for
     * a completion).  A cookie asks for a completion carrying it; NULL
     * for none. */
    int (*post_send)(opal_btl_usnic_hwchan_t *chan, const opal_btl_usnic_dest_t *dest,
                     const void *buf, uint32_t len, uint32_t lkey,
                     const opal_btl_usnic_sge_t *more, void *cookie);
    /* open: the channel's sends may wait, to go out together; !open: they
     * go out now (an error as post_send's).  Until then the engine leaves
     * their buffers as they are.  NULL: every send goes out at its post. */
    int (*send_batch)(opal_btl_usnic_hwchan_t *chan, bool open);
    /* Receive buffers, linked through their next field, NULL-terminated;
     * each completes with &seg->base as its cookie. */
    int (*post_recv)(opal_btl_usnic_hwchan_t *chan, struct opal_btl_usnic_recv_seg_t *first);
    /* Up to max completions of the channel's completion queue (those of every
     * channel on it), oldest first; the number, or -1 on a device failure. */
    int (*poll)(opal_btl_usnic_hwchan_t *chan, opal_btl_usnic_cqe_t *cqe, int max);
    const char *(*status_str)(int code);

    /* The route to gid; returns 0, EAGAIN while it is being resolved, or
     * another errno (no message). */
    int (*ah_create)(opal_btl_usnic_pd_t *pd, uint8_t port_num, int gid_index,
                     const uint8_t gid[16], opal_btl_usnic_ah_t **ah);
    void (*ah_destroy)(opal_btl_usnic_ah_t *ah);

    /* Watch the device's asynchronous events from OPAL's event loop (they
     * go to opal_btl_usnic_device_event); drain handles those already
     * queued, which explain a flush better than the flush itself. */
    int (*async_start)(opal_btl_usnic_dev_t *dev, opal_event_t *ev);
    void (*async_stop)(opal_event_t *ev);
    void (*async_drain)(opal_btl_usnic_dev_t *dev);
} opal_btl_usnic_device_ops_t;

/* The verbs implementation (btl_usnic_verbs.c), the one the component uses
 * unless btl_usnic_transport or usnic_component.dev_ops names another, and
 * the UDP one (btl_usnic_udp.c). */
extern const opal_btl_usnic_device_ops_t opal_btl_usnic_verbs_ops;
extern const opal_btl_usnic_device_ops_t opal_btl_usnic_udp_ops;

END_C_DECLS
#endif /* BTL_USNIC_DEVICE_H */
