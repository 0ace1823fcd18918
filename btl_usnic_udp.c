/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 * $COPYRIGHT$
 * SPDX-License-Identifier: BSD-3-Clause
 *
 * UDP glue: the device operations (btl_usnic_device.h) over kernel UDP
 * sockets, usNIC's "UDP mode" without its hardware.  A device is an IPv4
 * interface; a channel is a non-blocking datagram socket bound to the
 * interface's address, whose port is the channel's queue pair number; a
 * route is the peer's address.  Every datagram starts with the receiver's
 * Q_Key, checked on arrival as a UD queue pair checks it.  A receive lands
 * where RoCE v2 would put it: the 40-byte gap before the datagram carries
 * the sender's IPv4 address where a GRH's IPv4 header has it.  Registration
 * pins nothing (the kernel copies); send completions are made here, since
 * a datagram is copied out when it is sent.  The only file that opens a
 * socket for the data path; it keeps none of the component's books.
 */

#include "opal_config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "opal/constants.h"
#include "opal/util/if.h"
#include "opal/util/proc.h"
#include "opal/util/show_help.h"

#include "btl_usnic.h"
#include "btl_usnic_device.h"
#include "btl_usnic_frag.h"
#include "btl_usnic_util.h"
#include "btl_usnic_wire.h"

/* The Q_Key leads the datagram and is received into the GRH gap's last
 * four bytes (an IPv4 header's destination address, which nobody reads). */
#define UDP_QKEY_LEN 4
#define UDP_QKEY_OFF (USNIC_GRH_LEN - UDP_QKEY_LEN)
/* IPv4 and UDP headers: what a datagram adds on the wire. */
#define UDP_IP_OVERHEAD 28
/* Datagrams of jumbo frames at most: the loopback's 64 KiB would make
 * every receive buffer as large. */
#define UDP_MAX_DATAGRAM (9000 - UDP_IP_OVERHEAD)
/* recvmmsg batch; progress asks for at most this many per poll anyway */
#define UDP_RECV_BATCH 32
#define UDP_RECV_MIN 4
/* A full socket send buffer or a netfilter refusal (EPERM) passes: the
 * send is tried again this many times, then left to the retransmit timer
 * as a datagram lost on the wire. */
#define UDP_SEND_TRIES 64

/* Why a receive completed in error (codes below 0; above: errno values). */
enum {
    UDP_DROP_QKEY = -1,
    UDP_DROP_TRUNCATED = -2,
};

struct opal_btl_usnic_dev {
    char name[IF_NAMESIZE];
    uint32_t ipv4;                  /* network order */
};

struct opal_btl_usnic_ah {
    struct sockaddr_in sin;         /* the port is set per send: it names the channel */
};

/* Completions of the channels sharing it: sends completed at post time
 * wait here; receives are read from the sockets when polled. */
typedef struct {
    opal_btl_usnic_cqe_t *ring;
    int size, head, count;
    struct opal_btl_usnic_hwchan *chans[2];     /* the owner first, then the sharer */
    int nchans;
} udp_cq_t;

struct opal_btl_usnic_hwchan {
    int fd;
    udp_cq_t *cq;
    bool own_cq;
    uint32_t qkey;
    const char *dev_name;           /* for messages */
    /* posted receive buffers, oldest first */
    opal_btl_usnic_recv_seg_t *rq_head, **rq_tail;
    int rq_count;
    /* Slots offered to recvmmsg: twice what the last call got, at least a
     * few, so an idle poll sets up only those. */
    int batch;
    /* recvmmsg's arguments, set up once; a call fills in the buffers */
    struct mmsghdr mm[UDP_RECV_BATCH];
    struct iovec iov[UDP_RECV_BATCH];
    struct sockaddr_in from[UDP_RECV_BATCH];
};

static char udp_mr;                 /* every registration: nothing to undo */

static void show_failed(const char *dev_name, const char *call, int err)
{
    opal_show_help("help-mpi-btl-usnic.txt", "udp API failed", true, opal_process_info.nodename,
                   dev_name, call, strerror(err));
}

static uint32_t link_speed_mbps(const char *ifname)
{
    char path[64 + IF_NAMESIZE];
    long speed = 0;
    FILE *f;

    snprintf(path, sizeof(path), "/sys/class/net/%s/speed", ifname);
    f = fopen(path, "r");
    if (NULL != f) {
        if (1 != fscanf(f, "%ld", &speed)) {
            speed = 0;
        }
        fclose(f);
    }
    /* Virtual links and some drivers report none (-1): rate them 10 Gb/s. */
    return speed > 0 ? (uint32_t) speed : 10000;
}

/* One port per IPv4 interface that is up (the loopback too, which the
 * component uses only when btl_usnic_if_include names it); the interface
 * filter is applied to them like to any device. */
static int udp_find_ports(opal_btl_usnic_port_t **ports_out, int *num_out)
{
    opal_btl_usnic_port_t *ports = NULL;
    int n = 0;

    for (int i = opal_ifbegin(); i >= 0; i = opal_ifnext(i)) {
        struct sockaddr_storage ss;
        struct opal_btl_usnic_dev *dev;
        opal_btl_usnic_port_t *grown, *p;
        int ifmtu = 0;

        if (0 != opal_ifindextoaddr(i, (struct sockaddr *) &ss, sizeof(ss)) ||
            AF_INET != ss.ss_family ||
            OPAL_SUCCESS != opal_ifindextomtu(i, &ifmtu) ||
            ifmtu <= UDP_IP_OVERHEAD + UDP_QKEY_LEN + USNIC_GRH_LEN + 768) {
            continue;
        }
        dev = calloc(1, sizeof(*dev));
        grown = realloc(ports, (n + 1) * sizeof(*ports));
        if (NULL == dev || NULL == grown) {
            free(dev);
            ports = NULL != grown ? grown : ports;
            break;
        }
        ports = grown;
        opal_ifindextoname(i, dev->name, sizeof(dev->name));
        dev->ipv4 = ((struct sockaddr_in *) &ss)->sin_addr.s_addr;
        p = &ports[n++];
        memset(p, 0, sizeof(*p));
        p->dev = dev;
        snprintf(p->dev_name, sizeof(p->dev_name), "%s", dev->name);
        p->port_num = 1;
        p->gid[10] = p->gid[11] = 0xff;         /* ::ffff:a.b.c.d, as RoCE v2 */
        memcpy(p->gid + 12, &dev->ipv4, sizeof(dev->ipv4));
        p->netdev_kindex = opal_ifindextokindex(i);
        p->grh_ipv4 = true;
        /* No IP fragmentation: a datagram fills at most one packet. */
        p->port_mtu = (uint32_t) ifmtu - UDP_IP_OVERHEAD - UDP_QKEY_LEN;
        if (p->port_mtu > UDP_MAX_DATAGRAM - UDP_QKEY_LEN) {
            p->port_mtu = UDP_MAX_DATAGRAM - UDP_QKEY_LEN;
        }
        p->link_speed_mbps = link_speed_mbps(dev->name);
        p->loopback = opal_ifisloopback(i);
    }
    *ports_out = ports;
    *num_out = n;
    return OPAL_SUCCESS;
}

static void udp_close(opal_btl_usnic_dev_t *dev)
{
    free(dev);
}

static int udp_query(opal_btl_usnic_dev_t *dev, const char *dev_name,
                     opal_btl_usnic_dev_limits_t *limits)
{
    (void) dev;
    (void) dev_name;
    /* Queues are lists in memory; the socket buffers bound what waits. */
    limits->max_qp_wr = 16384;
    limits->max_cqe = 4 * 16384;
    limits->pins_memory = false;
    return OPAL_SUCCESS;
}

/* The CPUs near the netdev's PCI device, when hwloc knows it. */
static int udp_cpuset(opal_btl_usnic_dev_t *dev, hwloc_topology_t topo, hwloc_bitmap_t set)
{
    hwloc_obj_t os = NULL, near;

    while (NULL != (os = hwloc_get_next_osdev(topo, os))) {
        if (HWLOC_OBJ_OSDEV_NETWORK == os->attr->osdev.type && NULL != os->name &&
            0 == strcmp(os->name, dev->name)) {
            near = hwloc_get_non_io_ancestor_obj(topo, os);
            if (NULL == near || NULL == near->cpuset) {
                return -1;
            }
            hwloc_bitmap_copy(set, near->cpuset);
            return 0;
        }
    }
    return -1;
}

static opal_btl_usnic_pd_t *udp_pd_alloc(opal_btl_usnic_dev_t *dev, const char *dev_name)
{
    (void) dev_name;
    return (opal_btl_usnic_pd_t *) dev;
}

static void udp_pd_free(opal_btl_usnic_pd_t *pd)
{
    (void) pd;
}

static int udp_reg_mem(opal_btl_usnic_pd_t *pd, void *base, size_t len, bool writable,
                       opal_btl_usnic_mr_t **mr, uint32_t *lkey)
{
    (void) pd;
    (void) base;
    (void) len;
    (void) writable;
    *mr = (opal_btl_usnic_mr_t *) &udp_mr;
    *lkey = 0;
    return 0;
}

static void udp_dereg_mem(opal_btl_usnic_mr_t *mr)
{
    (void) mr;
}

/* Ask for a socket buffer of want bytes (past the system's limit when
 * allowed to); the bytes granted. */
static int size_buffer(int fd, int force_opt, int opt, int want)
{
    int got = 0;
    socklen_t len = sizeof(got);

    if (0 != setsockopt(fd, SOL_SOCKET, force_opt, &want, sizeof(want))) {
        (void) setsockopt(fd, SOL_SOCKET, opt, &want, sizeof(want));
    }
    if (0 != getsockopt(fd, SOL_SOCKET, opt, &got, &len)) {
        return 0;
    }
    return got;
}

/* What one queued datagram of up to mtu bytes costs a socket buffer: the
 * kernel charges the power-of-two buffer it sits in plus its bookkeeping. */
static int queued_cost(uint32_t mtu)
{
    int cost = 1024;

    while ((uint32_t) cost < mtu + UDP_QKEY_LEN + UDP_IP_OVERHEAD + 64) {
        cost *= 2;
    }
    return cost + 1024;
}

static void udp_chan_destroy(opal_btl_usnic_hwchan_t *ch)
{
    if (ch->fd >= 0) {
        close(ch->fd);
    }
    if (ch->own_cq && NULL != ch->cq) {
        free(ch->cq->ring);
        free(ch->cq);
    } else if (NULL != ch->cq) {
        /* leave the owner's CQ without this channel */
        for (int i = 0; i < ch->cq->nchans; ++i) {
            if (ch->cq->chans[i] == ch) {
                ch->cq->chans[i] = ch->cq->chans[--ch->cq->nchans];
                break;
            }
        }
    }
    free(ch);
}

static int make_cq(opal_btl_usnic_hwchan_t *ch, opal_btl_usnic_hwchan_t *cq_of, int entries)
{
    if (NULL != cq_of) {
        if (cq_of->cq->nchans >= 2) {
            return OPAL_ERR_OUT_OF_RESOURCE;
        }
        ch->cq = cq_of->cq;
        ch->own_cq = false;
    } else {
        ch->cq = calloc(1, sizeof(*ch->cq));
        if (NULL == ch->cq) {
            return OPAL_ERR_OUT_OF_RESOURCE;
        }
        ch->own_cq = true;
        ch->cq->size = entries > 0 ? entries : 1;
        ch->cq->ring = calloc((size_t) ch->cq->size, sizeof(*ch->cq->ring));
        if (NULL == ch->cq->ring) {
            return OPAL_ERR_OUT_OF_RESOURCE;
        }
    }
    ch->cq->chans[ch->cq->nchans++] = ch;
    return OPAL_SUCCESS;
}

/* The socket of a channel, bound to the device's address; its port. */
static int open_socket(opal_btl_usnic_hwchan_t *ch, const struct opal_btl_usnic_dev *dev,
                       uint16_t *port)
{
    struct sockaddr_in sin;
    socklen_t len = sizeof(sin);
    int pmtu = IP_PMTUDISC_DO;

    ch->fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (ch->fd < 0) {
        show_failed(dev->name, "socket", errno);
        return OPAL_ERROR;
    }
    memset(&sin, 0, sizeof(sin));
    sin.sin_family = AF_INET;
    sin.sin_addr.s_addr = dev->ipv4;
    if (0 != bind(ch->fd, (struct sockaddr *) &sin, sizeof(sin)) ||
        0 != getsockname(ch->fd, (struct sockaddr *) &sin, &len)) {
        show_failed(dev->name, "bind", errno);
        return OPAL_ERROR;
    }
    /* Too long for the path: an error at send, never a fragmented datagram. */
    if (0 != setsockopt(ch->fd, IPPROTO_IP, IP_MTU_DISCOVER, &pmtu, sizeof(pmtu))) {
        show_failed(dev->name, "setsockopt(IP_MTU_DISCOVER)", errno);
        return OPAL_ERROR;
    }
    *port = ntohs(sin.sin_port);
    return OPAL_SUCCESS;
}

static int udp_chan_create(opal_btl_usnic_dev_t *dev, opal_btl_usnic_pd_t *pd,
                           const opal_btl_usnic_chan_req_t *req, opal_btl_usnic_hwchan_t *cq_of,
                           opal_btl_usnic_chan_info_t *info, opal_btl_usnic_hwchan_t **out)
{
    opal_btl_usnic_hwchan_t *ch = calloc(1, sizeof(*ch));
    int cost = queued_cost(req->mtu), want, got, rc;
    uint16_t port = 0;
    (void) pd;

    if (NULL == ch) {
        return OPAL_ERR_OUT_OF_RESOURCE;
    }
    ch->fd = -1;
    ch->dev_name = req->dev_name;
    ch->qkey = req->qkey;
    ch->rq_tail = &ch->rq_head;
    ch->batch = UDP_RECV_MIN;
    for (int i = 0; i < UDP_RECV_BATCH; ++i) {
        ch->mm[i].msg_hdr.msg_name = &ch->from[i];
        ch->mm[i].msg_hdr.msg_iov = &ch->iov[i];
        ch->mm[i].msg_hdr.msg_iovlen = 1;
    }
    *out = ch;
    rc = make_cq(ch, cq_of, req->cq_num);
    if (OPAL_SUCCESS == rc) {
        rc = open_socket(ch, dev, &port);
    }
    if (OPAL_SUCCESS != rc) {
        return rc;
    }
    /* Receive buffers the socket cannot hold would be promised to senders
     * in vain: post (and publish) only as many as it holds. */
    want = req->rd_num * cost;
    got = size_buffer(ch->fd, SO_RCVBUFFORCE, SO_RCVBUF, want);
    info->rd_num = got / cost < req->rd_num ? got / cost : req->rd_num;
    if (info->rd_num < req->rd_num) {
        opal_show_help("help-mpi-btl-usnic.txt", "udp socket buffer small", true,
                       opal_process_info.nodename, req->dev_name, got, want, info->rd_num,
                       req->rd_num);
        if (info->rd_num < 1) {
            return OPAL_ERR_OUT_OF_RESOURCE;
        }
    }
    (void) size_buffer(ch->fd, SO_SNDBUFFORCE, SO_SNDBUF, req->sd_num * cost);
    info->qp_num = port;
    info->sd_num = req->sd_num;
    /* Every send is copied at post time: most need no completion. */
    info->max_inline = req->mtu;
    info->max_send_sge = 2;
    return OPAL_SUCCESS;
}

static int udp_chan_start(opal_btl_usnic_hwchan_t *ch)
{
    (void) ch;
    return OPAL_SUCCESS;
}

static bool send_error_passes(int err)
{
    return EAGAIN == err || EWOULDBLOCK == err || ENOBUFS == err || EINTR == err ||
           EPERM == err;
}

/* The network refused this one datagram (the peer's host or route is gone
 * for now): lost on the wire, as far as the engine can tell. */
static bool send_error_is_loss(int err)
{
    return ENETUNREACH == err || EHOSTUNREACH == err || EHOSTDOWN == err ||
           ECONNREFUSED == err || ENETDOWN == err;
}

static int udp_post_send(opal_btl_usnic_hwchan_t *ch, const opal_btl_usnic_dest_t *dest,
                         const void *buf, uint32_t len, uint32_t lkey,
                         const opal_btl_usnic_sge_t *more, void *cookie)
{
    struct sockaddr_in to = dest->ah->sin;
    uint32_t qkey = dest->qkey;
    struct iovec iov[3] = {{.iov_base = &qkey, .iov_len = UDP_QKEY_LEN},
                           {.iov_base = (void *) buf, .iov_len = len}};
    struct msghdr mh = {.msg_name = &to, .msg_namelen = sizeof(to), .msg_iov = iov,
                        .msg_iovlen = 2};
    int tries = 0;
    (void) lkey;

    to.sin_port = htons((uint16_t) dest->qpn);
    if (NULL != more) {
        iov[2].iov_base = (void *) more->addr;
        iov[2].iov_len = more->len;
        mh.msg_iovlen = 3;
    }
    while (OPAL_UNLIKELY(sendmsg(ch->fd, &mh, 0) < 0)) {
        if (send_error_passes(errno) && ++tries < UDP_SEND_TRIES) {
            continue;
        }
        if (!send_error_passes(errno) && !send_error_is_loss(errno)) {
            show_failed(ch->dev_name, "sendmsg", errno);
            return OPAL_ERROR;
        }
        usnic_verbose(20, "%s: %s: datagram to %s:%u not sent (%s), left to the retransmit "
                      "timer", opal_process_info.nodename, ch->dev_name,
                      inet_ntoa(to.sin_addr), (unsigned) dest->qpn, strerror(errno));
        break;
    }
    if (NULL != cookie) {
        udp_cq_t *cq = ch->cq;
        opal_btl_usnic_cqe_t *c;

        if (OPAL_UNLIKELY(cq->count == cq->size)) {
            show_failed(ch->dev_name, "completion queue", EOVERFLOW);
            return OPAL_ERROR;
        }
        c = &cq->ring[(cq->head + cq->count++) % cq->size];
        c->cookie = cookie;
        c->status = USNIC_CQE_OK;
        c->code = 0;
    }
    return OPAL_SUCCESS;
}

static int udp_post_recv(opal_btl_usnic_hwchan_t *ch, opal_btl_usnic_recv_seg_t *first)
{
    while (NULL != first) {
        opal_btl_usnic_recv_seg_t *next = first->next;

        first->next = NULL;
        *ch->rq_tail = first;
        ch->rq_tail = &first->next;
        ++ch->rq_count;
        first = next;
    }
    return OPAL_SUCCESS;
}

/* Up to max datagrams of one socket, into its oldest posted buffers (which
 * stay posted until a datagram took them). */
static int recv_batch(opal_btl_usnic_hwchan_t *ch, opal_btl_usnic_cqe_t *cqe, int max)
{
    opal_btl_usnic_recv_seg_t *seg = ch->rq_head;
    int k = max < ch->batch ? max : ch->batch, got;

    if (k > ch->rq_count) {
        k = ch->rq_count;
    }
    for (int i = 0; i < k; ++i, seg = seg->next) {
        ch->iov[i].iov_base = seg->buf + UDP_QKEY_OFF;
        ch->iov[i].iov_len = seg->len - UDP_QKEY_OFF;
        ch->mm[i].msg_hdr.msg_namelen = sizeof(ch->from[i]);
    }
    got = 0 == k ? 0 : recvmmsg(ch->fd, ch->mm, (unsigned) k, MSG_DONTWAIT, NULL);
    if (OPAL_UNLIKELY(got < 0)) {
        int err = errno;
        if (EAGAIN == err || EWOULDBLOCK == err || EINTR == err) {
            ch->batch = UDP_RECV_MIN;
            return 0;
        }
        show_failed(ch->dev_name, "recvmmsg", err);
        return -1;
    }
    ch->batch = 2 * got < UDP_RECV_MIN ? UDP_RECV_MIN
                : 2 * got > UDP_RECV_BATCH ? UDP_RECV_BATCH : 2 * got;
    for (int i = 0; i < got; ++i) {
        const struct msghdr *mh = &ch->mm[i].msg_hdr;
        uint32_t bytes = ch->mm[i].msg_len, qkey;
        opal_btl_usnic_cqe_t *c = &cqe[i];

        seg = ch->rq_head;
        ch->rq_head = seg->next;
        c->cookie = &seg->base;
        c->status = USNIC_CQE_OK;
        c->code = 0;
        c->grh = true;
        c->src_qp = ntohs(ch->from[i].sin_port);
        c->len = UDP_QKEY_OFF + bytes;
        memcpy(&qkey, seg->buf + UDP_QKEY_OFF, sizeof(qkey));
        /* Dropped as a queue pair drops them, but counted (receive errors). */
        if (OPAL_UNLIKELY(bytes < UDP_QKEY_LEN || qkey != ch->qkey)) {
            c->status = USNIC_CQE_ERROR;
            c->code = UDP_DROP_QKEY;
        } else if (OPAL_UNLIKELY(0 != (mh->msg_flags & MSG_TRUNC))) {
            c->status = USNIC_CQE_ERROR;
            c->code = UDP_DROP_TRUNCATED;
        }
        memcpy(seg->buf + USNIC_GRH_IPV4_SRC_OFF, &ch->from[i].sin_addr.s_addr, 4);
    }
    ch->rq_count -= got;
    if (NULL == ch->rq_head) {
        ch->rq_tail = &ch->rq_head;
    }
    return got;
}

static int udp_poll(opal_btl_usnic_hwchan_t *ch, opal_btl_usnic_cqe_t *cqe, int max)
{
    udp_cq_t *cq = ch->cq;
    int n = 0;

    for (; n < max && cq->count > 0; ++n, --cq->count) {
        cqe[n] = cq->ring[cq->head];
        cq->head = (cq->head + 1) % cq->size;
    }
    for (int i = 0; i < cq->nchans && n < max; ++i) {
        int got = recv_batch(cq->chans[i], cqe + n, max - n);
        if (OPAL_UNLIKELY(got < 0)) {
            return -1;
        }
        n += got;
    }
    return n;
}

static const char *udp_status_str(int code)
{
    switch (code) {
    case UDP_DROP_QKEY: return "datagram without this process's Q_Key, dropped";
    case UDP_DROP_TRUNCATED: return "datagram longer than a receive buffer, dropped";
    default: return strerror(code);
    }
}

static int udp_ah_create(opal_btl_usnic_pd_t *pd, uint8_t port_num, int gid_index,
                         const uint8_t gid[16], opal_btl_usnic_ah_t **ah)
{
    static const uint8_t v4mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    (void) pd;
    (void) port_num;
    (void) gid_index;

    if (0 != memcmp(gid, v4mapped, sizeof(v4mapped))) {
        return EAFNOSUPPORT;
    }
    *ah = calloc(1, sizeof(**ah));
    if (NULL == *ah) {
        return ENOMEM;
    }
    (*ah)->sin.sin_family = AF_INET;
    memcpy(&(*ah)->sin.sin_addr.s_addr, gid + 12, 4);
    return 0;
}

static void udp_ah_destroy(opal_btl_usnic_ah_t *ah)
{
    free(ah);
}

/* Sockets have no asynchronous device events. */
static int udp_async_start(opal_btl_usnic_dev_t *dev, opal_event_t *ev)
{
    (void) dev;
    (void) ev;
    return OPAL_ERR_NOT_SUPPORTED;
}

static void udp_async_stop(opal_event_t *ev)
{
    (void) ev;
}

static void udp_async_drain(opal_btl_usnic_dev_t *dev)
{
    (void) dev;
}

const opal_btl_usnic_device_ops_t opal_btl_usnic_udp_ops = {
    .transport = USNIC_TRANSPORT_UDP,
    .find_ports = udp_find_ports,
    .close = udp_close,
    .query = udp_query,
    .cpuset = udp_cpuset,
    .pd_alloc = udp_pd_alloc,
    .pd_free = udp_pd_free,
    .reg_mem = udp_reg_mem,
    .dereg_mem = udp_dereg_mem,
    .chan_create = udp_chan_create,
    .chan_start = udp_chan_start,
    .chan_destroy = udp_chan_destroy,
    .post_send = udp_post_send,
    .post_recv = udp_post_recv,
    .poll = udp_poll,
    .status_str = udp_status_str,
    .ah_create = udp_ah_create,
    .ah_destroy = udp_ah_destroy,
    .async_start = udp_async_start,
    .async_stop = udp_async_stop,
    .async_drain = udp_async_drain,
};
