/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 * $COPYRIGHT$
 * SPDX-License-Identifier: BSD-3-Clause
 *
 * UDP glue: the device operations (btl_usnic_device.h) over kernel UDP
 * sockets, usNIC's "UDP mode" without its hardware.  A device is an IPv4
 * interface; the channels that share a completion queue share one
 * non-blocking datagram socket bound to the interface's address (one
 * recvmmsg per poll serves them all), told apart by a channel byte; a
 * channel's queue pair number is the socket's port and its channel byte; a
 * route is the peer's address.  Every datagram starts with the receiver's
 * Q_Key, checked on arrival as a UD queue pair checks it, and the channel
 * byte.  A receive lands where RoCE v2 would put it: the 40-byte gap before
 * the datagram carries the sender's IPv4 address where a GRH's IPv4 header
 * has it.  Registration pins nothing (the kernel copies); send completions
 * are made here, since a datagram is copied out when it is sent.  The only
 * file that opens a socket for the data path; it keeps none of the
 * component's books.
 */

#include "opal_config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/udp.h>
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

/* The Q_Key and the channel byte lead the datagram and are received into
 * the GRH gap's last five bytes (an IPv4 header's destination address, which
 * nobody reads, and the source's last byte, written once they are read). */
#define UDP_QKEY_LEN 4
#define UDP_PREFIX_LEN (UDP_QKEY_LEN + 1)
#define UDP_PREFIX_OFF (USNIC_GRH_LEN - UDP_PREFIX_LEN)
/* channels per socket; the channel byte is the index, above the port in
 * the queue pair number */
#define UDP_MAX_CHANS 2
#define UDP_CHAN_SHIFT 16
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
/* Sends a batch (send_batch) holds for one sendmmsg at most; the engine
 * posts up to USNIC_SENDS_PER_PASS first sends and some resends per pass. */
#define UDP_SEND_BATCH 32
/* One UDP_SEGMENT send carries at most this many datagrams (the kernel's
 * oldest limit) and bytes (one IPv4 datagram's payload). */
#define UDP_GSO_MAX_SEGS 64
#define UDP_GSO_MAX_BYTES (65535 - UDP_IP_OVERHEAD)
#ifndef UDP_SEGMENT
#define UDP_SEGMENT 103
#endif

/* Why a receive completed in error (codes below 0; above: errno values). */
enum {
    UDP_DROP_QKEY = -1,
    UDP_DROP_TRUNCATED = -2,
    UDP_DROP_CHANNEL = -3,
};

struct opal_btl_usnic_dev {
    char name[IF_NAMESIZE];
    uint32_t ipv4;                  /* network order */
};

struct opal_btl_usnic_ah {
    struct sockaddr_in sin;         /* the port is set per send, from the queue pair number */
};

/* What the channels of one socket share: the socket, their completion
 * queue (sends completed at post time wait in it; receives are read from
 * the socket when polled) and recvmmsg's arguments. */
typedef struct {
    int fd;
    uint16_t port;
    uint32_t qkey;
    opal_btl_usnic_cqe_t *ring;
    int size, head, count;
    struct opal_btl_usnic_hwchan *chans[UDP_MAX_CHANS];     /* by channel byte; NULL: gone */
    int nchans;                     /* channel bytes given out */
    /* Datagrams land in this channel's buffers (the largest); another
     * channel's are copied into its own buffer, or, while it has none
     * posted, held in the buffer they came in, oldest first. */
    struct opal_btl_usnic_hwchan *land;
    opal_btl_usnic_recv_seg_t *held_head, **held_tail;
    int rcv_bytes, snd_bytes;       /* socket buffer promised to the channels */
    /* Slots offered to recvmmsg: twice what the last call got, at least a
     * few.  The first `prepared` of them point at the landing channel's
     * oldest posted buffers (slot_seg), which stay so until a datagram
     * takes one: a poll that finds nothing leaves them ready for the next. */
    int batch;
    int prepared;
    opal_btl_usnic_recv_seg_t *slot_seg[UDP_RECV_BATCH];
    struct mmsghdr mm[UDP_RECV_BATCH];
    struct iovec iov[UDP_RECV_BATCH];
    struct sockaddr_in from[UDP_RECV_BATCH];
    /* The sends, set up once: a send fills in the address, the prefix and
     * its data in slot nsend, and goes out at once, or, on the channel
     * whose batch is open (batching), waits there until the batch ends or
     * fills (one sendmmsg for all; a full batch goes at once, so nsend is
     * always a free slot). */
    struct opal_btl_usnic_hwchan *batching;
    int nsend;
    struct mmsghdr send_mm[UDP_SEND_BATCH];
    struct iovec send_iov[UDP_SEND_BATCH][3];
    struct sockaddr_in send_to[UDP_SEND_BATCH];
    uint8_t send_prefix[UDP_SEND_BATCH][UDP_PREFIX_LEN];
    /* A held batch as sendmmsg gets it when the kernel segments (gso):
     * runs of slots to one peer, as long as their first but the last, each
     * one message with UDP_SEGMENT; gso_first[g]: group g's first slot. */
    bool gso;
    struct mmsghdr gso_mm[UDP_SEND_BATCH];
    struct iovec gso_iov[UDP_SEND_BATCH * 3];
    int gso_first[UDP_SEND_BATCH + 1];
    union {
        char buf[CMSG_SPACE(sizeof(uint16_t))];
        struct cmsghdr align;
    } gso_cmsg[UDP_SEND_BATCH];
} udp_sock_t;

struct opal_btl_usnic_hwchan {
    udp_sock_t *sock;
    uint8_t id;                     /* channel byte */
    uint32_t mtu;                   /* what the channel asked its buffers to hold */
    const char *dev_name;           /* for messages */
    /* posted receive buffers, oldest first */
    opal_btl_usnic_recv_seg_t *rq_head, **rq_tail;
    int rq_count;
};

/* What a held datagram's buffer keeps in the front of its GRH gap, which
 * nothing else uses until it is copied out. */
typedef struct {
    uint32_t bytes;                 /* payload */
    uint16_t port;
    uint8_t id;
} udp_held_t;

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
            ifmtu <= UDP_IP_OVERHEAD + UDP_PREFIX_LEN + USNIC_GRH_LEN + 768) {
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
        p->port_mtu = (uint32_t) ifmtu - UDP_IP_OVERHEAD - UDP_PREFIX_LEN;
        if (p->port_mtu > UDP_MAX_DATAGRAM - UDP_PREFIX_LEN) {
            p->port_mtu = UDP_MAX_DATAGRAM - UDP_PREFIX_LEN;
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
    limits->drops_unbuffered = false;
    /* (the kernel's work runs in the processes' own send and receive calls) */
    limits->host_kernel_work = false;
    /* (one socket carries both channels, in the order they were sent) */
    limits->channels_apart = false;
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

    while ((uint32_t) cost < mtu + UDP_PREFIX_LEN + UDP_IP_OVERHEAD + 64) {
        cost *= 2;
    }
    return cost + 1024;
}

/* The channel of the socket with the largest buffers: datagrams land in
 * its buffers (the first one on a tie). */
static void choose_landing(udp_sock_t *s)
{
    s->land = NULL;
    s->prepared = 0;
    for (int i = 0; i < s->nchans; ++i) {
        if (NULL != s->chans[i] && (NULL == s->land || s->chans[i]->mtu > s->land->mtu)) {
            s->land = s->chans[i];
        }
    }
}

static void udp_chan_destroy(opal_btl_usnic_hwchan_t *ch)
{
    udp_sock_t *s = ch->sock;

    if (NULL != s) {
        if (s->batching == ch) {
            s->batching = NULL;
            s->nsend = 0;
        }
        s->chans[ch->id] = NULL;
        if (s->land == ch) {
            /* held datagrams sit in this channel's buffers */
            s->held_head = NULL;
            s->held_tail = &s->held_head;
            choose_landing(s);
        }
        if (NULL == s->land) {
            if (s->fd >= 0) {
                close(s->fd);
            }
            free(s->ring);
            free(s);
        }
    }
    free(ch);
}

/* The channel's socket: a new one with a completion queue of entries, or
 * cq_of's, which it then shares. */
static int join_sock(opal_btl_usnic_hwchan_t *ch, opal_btl_usnic_hwchan_t *cq_of, int entries,
                     uint32_t qkey)
{
    udp_sock_t *s;

    if (NULL != cq_of) {
        s = cq_of->sock;
        if (s->nchans >= UDP_MAX_CHANS || qkey != s->qkey) {
            return OPAL_ERR_NOT_SUPPORTED;
        }
    } else {
        s = calloc(1, sizeof(*s));
        if (NULL == s) {
            return OPAL_ERR_OUT_OF_RESOURCE;
        }
        s->fd = -1;
        s->qkey = qkey;
        s->held_tail = &s->held_head;
        s->batch = UDP_RECV_MIN;
        for (int i = 0; i < UDP_RECV_BATCH; ++i) {
            s->mm[i].msg_hdr.msg_name = &s->from[i];
            s->mm[i].msg_hdr.msg_iov = &s->iov[i];
            s->mm[i].msg_hdr.msg_iovlen = 1;
        }
        for (int i = 0; i < UDP_SEND_BATCH; ++i) {
            s->send_mm[i].msg_hdr.msg_name = &s->send_to[i];
            s->send_mm[i].msg_hdr.msg_namelen = sizeof(s->send_to[i]);
            s->send_mm[i].msg_hdr.msg_iov = s->send_iov[i];
            s->send_iov[i][0].iov_base = s->send_prefix[i];
            s->send_iov[i][0].iov_len = UDP_PREFIX_LEN;
        }
        s->size = entries > 0 ? entries : 1;
        s->ring = calloc((size_t) s->size, sizeof(*s->ring));
        if (NULL == s->ring) {
            free(s);
            return OPAL_ERR_OUT_OF_RESOURCE;
        }
    }
    ch->sock = s;
    ch->id = (uint8_t) s->nchans;
    s->chans[s->nchans++] = ch;
    choose_landing(s);
    return OPAL_SUCCESS;
}

/* A socket bound to the device's address. */
static int open_socket(udp_sock_t *s, const struct opal_btl_usnic_dev *dev)
{
    struct sockaddr_in sin;
    socklen_t len = sizeof(sin);
    int pmtu = IP_PMTUDISC_DO;

    s->fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (s->fd < 0) {
        show_failed(dev->name, "socket", errno);
        return OPAL_ERROR;
    }
    memset(&sin, 0, sizeof(sin));
    sin.sin_family = AF_INET;
    sin.sin_addr.s_addr = dev->ipv4;
    if (0 != bind(s->fd, (struct sockaddr *) &sin, sizeof(sin)) ||
        0 != getsockname(s->fd, (struct sockaddr *) &sin, &len)) {
        show_failed(dev->name, "bind", errno);
        return OPAL_ERROR;
    }
    /* Too long for the path: an error at send, never a fragmented datagram. */
    if (0 != setsockopt(s->fd, IPPROTO_IP, IP_MTU_DISCOVER, &pmtu, sizeof(pmtu))) {
        show_failed(dev->name, "setsockopt(IP_MTU_DISCOVER)", errno);
        return OPAL_ERROR;
    }
    s->port = ntohs(sin.sin_port);
    /* (a kernel before 4.18 has no UDP_SEGMENT: one datagram per message) */
    s->gso = 0 == setsockopt(s->fd, SOL_UDP, UDP_SEGMENT, &(int){0}, sizeof(int));
    return OPAL_SUCCESS;
}

static int udp_chan_create(opal_btl_usnic_dev_t *dev, opal_btl_usnic_pd_t *pd,
                           const opal_btl_usnic_chan_req_t *req, opal_btl_usnic_hwchan_t *cq_of,
                           opal_btl_usnic_chan_info_t *info, opal_btl_usnic_hwchan_t **out)
{
    opal_btl_usnic_hwchan_t *ch = calloc(1, sizeof(*ch));
    int cost = queued_cost(req->mtu), want, got, rc;
    udp_sock_t *s;
    (void) pd;

    if (NULL == ch) {
        return OPAL_ERR_OUT_OF_RESOURCE;
    }
    ch->dev_name = req->dev_name;
    ch->mtu = req->mtu;
    ch->rq_tail = &ch->rq_head;
    *out = ch;
    rc = join_sock(ch, cq_of, req->cq_num, req->qkey);
    if (OPAL_SUCCESS != rc) {
        return rc;
    }
    s = ch->sock;
    if (s->fd < 0 && OPAL_SUCCESS != (rc = open_socket(s, dev))) {
        return rc;
    }
    /* Receive buffers the socket cannot hold would be promised to senders
     * in vain: post (and publish) only as many as it holds, beside those of
     * the channels already on it. */
    want = s->rcv_bytes + req->rd_num * cost;
    got = size_buffer(s->fd, SO_RCVBUFFORCE, SO_RCVBUF, want);
    info->rd_num = got < want ? (got - s->rcv_bytes) / cost : req->rd_num;
    if (info->rd_num < req->rd_num) {
        opal_show_help("help-mpi-btl-usnic.txt", "udp socket buffer small", true,
                       opal_process_info.nodename, req->dev_name, got, want,
                       info->rd_num > 0 ? info->rd_num : 0, req->rd_num);
        if (info->rd_num < 1) {
            return OPAL_ERR_OUT_OF_RESOURCE;
        }
    }
    s->rcv_bytes += info->rd_num * cost;
    s->snd_bytes += req->sd_num * cost;
    (void) size_buffer(s->fd, SO_SNDBUFFORCE, SO_SNDBUF, s->snd_bytes);
    info->qp_num = (uint32_t) s->port | (uint32_t) ch->id << UDP_CHAN_SHIFT;
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

/* Why the datagram of slot i did not go out (errno err): OPAL_SUCCESS if it
 * counts as lost on the wire, for the retransmit timer; OPAL_ERROR, said,
 * if the socket failed. */
static int send_failed(udp_sock_t *s, int i, const char *dev_name, const char *call, int err)
{
    const struct sockaddr_in *to = &s->send_to[i];

    if (!send_error_passes(err) && !send_error_is_loss(err)) {
        show_failed(dev_name, call, err);
        return OPAL_ERROR;
    }
    usnic_verbose(20, "%s: %s: datagram to %s:%u/%u not sent (%s), left to the retransmit "
                  "timer", opal_process_info.nodename, dev_name, inet_ntoa(to->sin_addr),
                  (unsigned) ntohs(to->sin_port), (unsigned) s->send_prefix[i][UDP_QKEY_LEN],
                  strerror(err));
    return OPAL_SUCCESS;
}

/* Slots [from, to) of the held sends, with one sendmmsg (more if the socket
 * takes them in parts); a datagram that fails passes as sendmsg's would. */
static int send_slots(udp_sock_t *s, int from, int to, const char *dev_name)
{
    int done = from, tries = 0;

    while (done < to) {
        int k = sendmmsg(s->fd, &s->send_mm[done], (unsigned) (to - done), 0);

        if (k > 0) {
            done += k;
            tries = 0;
            continue;
        }
        if (send_error_passes(errno) && ++tries < UDP_SEND_TRIES) {
            continue;
        }
        if (OPAL_SUCCESS != send_failed(s, done, dev_name, "sendmmsg", errno)) {
            return OPAL_ERROR;
        }
        ++done;
        tries = 0;
    }
    return OPAL_SUCCESS;
}

static size_t slot_bytes(const udp_sock_t *s, int i)
{
    const struct msghdr *mh = &s->send_mm[i].msg_hdr;
    size_t len = 0;

    for (size_t v = 0; v < mh->msg_iovlen; ++v) {
        len += mh->msg_iov[v].iov_len;
    }
    return len;
}

/* Group g of gso_mm is cut by the kernel into datagrams of seg bytes. */
static void segment_group(udp_sock_t *s, int g, size_t seg)
{
    struct cmsghdr *cm = &s->gso_cmsg[g].align;

    cm->cmsg_level = SOL_UDP;
    cm->cmsg_type = UDP_SEGMENT;
    cm->cmsg_len = CMSG_LEN(sizeof(uint16_t));
    memcpy(CMSG_DATA(cm), &(uint16_t){(uint16_t) seg}, sizeof(uint16_t));
    s->gso_mm[g].msg_hdr.msg_control = s->gso_cmsg[g].buf;
    s->gso_mm[g].msg_hdr.msg_controllen = sizeof(s->gso_cmsg[g].buf);
}

/* The n held sends as gso_mm's groups (see udp_sock_t); returns how many. */
static int group_slots(udp_sock_t *s, int n)
{
    int g = -1, segs = 0, niov = 0;
    size_t seg = 0, total = 0;
    bool open = false;

    for (int i = 0; i < n; ++i) {
        struct msghdr *mh = &s->send_mm[i].msg_hdr;
        size_t len = slot_bytes(s, i);

        if (open && len <= seg && segs < UDP_GSO_MAX_SEGS && total + len <= UDP_GSO_MAX_BYTES &&
            s->send_to[i].sin_addr.s_addr == s->send_to[i - 1].sin_addr.s_addr &&
            s->send_to[i].sin_port == s->send_to[i - 1].sin_port &&
            0 == memcmp(s->send_prefix[i], s->send_prefix[i - 1], UDP_PREFIX_LEN)) {
            ++segs;
            total += len;
            /* (only the last may be shorter) */
            open = len == seg;
        } else {
            if (g >= 0 && segs > 1) {
                segment_group(s, g, seg);
            }
            ++g;
            s->gso_first[g] = i;
            s->gso_mm[g].msg_hdr = (struct msghdr){.msg_name = mh->msg_name,
                                                   .msg_namelen = mh->msg_namelen,
                                                   .msg_iov = &s->gso_iov[niov]};
            seg = total = len;
            segs = 1;
            open = true;
        }
        memcpy(&s->gso_iov[niov], mh->msg_iov, mh->msg_iovlen * sizeof(struct iovec));
        niov += (int) mh->msg_iovlen;
        s->gso_mm[g].msg_hdr.msg_iovlen += mh->msg_iovlen;
    }
    if (segs > 1) {
        segment_group(s, g, seg);
    }
    s->gso_first[g + 1] = n;
    return g + 1;
}

/* The held sends.  Where the kernel segments, the datagrams of a run to one
 * peer leave as one message, which its stack (route, IP, device) handles
 * once; a group the device refuses (no checksum offload, say) turns
 * segmentation off and goes again one datagram at a time. */
static int flush_sends(udp_sock_t *s, const char *dev_name)
{
    int n = s->nsend, ng, done = 0, tries = 0;

    s->nsend = 0;
    if (!s->gso || n < 2 || (ng = group_slots(s, n)) == n) {
        return send_slots(s, 0, n, dev_name);
    }
    while (done < ng) {
        int k = sendmmsg(s->fd, &s->gso_mm[done], (unsigned) (ng - done), 0), err = errno;
        int first = s->gso_first[done], end = s->gso_first[done + 1];

        if (k > 0) {
            done += k;
            tries = 0;
            continue;
        }
        if (end - first > 1 && (EINVAL == err || EIO == err || EOPNOTSUPP == err)) {
            s->gso = false;
            usnic_verbose(5, "%s: %s: sends of several datagrams refused (%s): one per message "
                          "from now on", opal_process_info.nodename, dev_name, strerror(err));
            return send_slots(s, first, n, dev_name);
        }
        if (send_error_passes(err) && ++tries < UDP_SEND_TRIES) {
            continue;
        }
        for (int i = first; i < end; ++i) {
            if (OPAL_SUCCESS != send_failed(s, i, dev_name, "sendmmsg", err)) {
                return OPAL_ERROR;
            }
        }
        ++done;
        tries = 0;
    }
    return OPAL_SUCCESS;
}

static int udp_post_send(opal_btl_usnic_hwchan_t *ch, const opal_btl_usnic_dest_t *dest,
                         const void *buf, uint32_t len, uint32_t lkey,
                         const opal_btl_usnic_sge_t *more, void *cookie)
{
    udp_sock_t *s = ch->sock;
    int i = s->nsend, tries = 0;
    struct msghdr *mh = &s->send_mm[i].msg_hdr;
    struct iovec *iov = s->send_iov[i];
    (void) lkey;

    s->send_to[i] = dest->ah->sin;
    s->send_to[i].sin_port = htons((uint16_t) dest->qpn);
    memcpy(s->send_prefix[i], &dest->qkey, UDP_QKEY_LEN);
    s->send_prefix[i][UDP_QKEY_LEN] = (uint8_t) (dest->qpn >> UDP_CHAN_SHIFT);
    iov[1].iov_base = (void *) buf;
    iov[1].iov_len = len;
    mh->msg_iovlen = 2;
    if (NULL != more) {
        iov[2].iov_base = (void *) more->addr;
        iov[2].iov_len = more->len;
        mh->msg_iovlen = 3;
    }
    if (s->batching == ch) {
        /* (the engine's buffers stay as they are until the batch ends) */
        if (++s->nsend == UDP_SEND_BATCH && OPAL_SUCCESS != flush_sends(s, ch->dev_name)) {
            return OPAL_ERROR;
        }
    } else {
        while (OPAL_UNLIKELY(sendmsg(s->fd, mh, 0) < 0)) {
            if (send_error_passes(errno) && ++tries < UDP_SEND_TRIES) {
                continue;
            }
            if (OPAL_SUCCESS != send_failed(s, i, ch->dev_name, "sendmsg", errno)) {
                return OPAL_ERROR;
            }
            break;
        }
    }
    if (NULL != cookie) {
        opal_btl_usnic_cqe_t *c;

        if (OPAL_UNLIKELY(s->count == s->size)) {
            show_failed(ch->dev_name, "completion queue", EOVERFLOW);
            return OPAL_ERROR;
        }
        c = &s->ring[(s->head + s->count++) % s->size];
        c->cookie = cookie;
        c->status = USNIC_CQE_OK;
        c->code = 0;
    }
    return OPAL_SUCCESS;
}

/* A batch of the channel's sends opens (open) or ends: those posted in
 * between go out together when it ends (or fills).  A batch opened and
 * ended inside another (the send loop run again from a PML callback) ends
 * both: the rest of the outer one's sends go out at once. */
static int udp_send_batch(opal_btl_usnic_hwchan_t *ch, bool open)
{
    udp_sock_t *s = ch->sock;

    if (open) {
        s->batching = ch;
        return OPAL_SUCCESS;
    }
    s->batching = NULL;
    return 0 == s->nsend ? OPAL_SUCCESS : flush_sends(s, ch->dev_name);
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

static opal_btl_usnic_recv_seg_t *rq_pop(opal_btl_usnic_hwchan_t *ch)
{
    opal_btl_usnic_recv_seg_t *seg = ch->rq_head;

    ch->rq_head = seg->next;
    if (NULL == ch->rq_head) {
        ch->rq_tail = &ch->rq_head;
    }
    --ch->rq_count;
    return seg;
}

static void complete_recv(opal_btl_usnic_cqe_t *c, opal_btl_usnic_recv_seg_t *seg,
                          uint32_t payload, uint16_t port, uint8_t id, int drop)
{
    c->cookie = &seg->base;
    c->status = 0 == drop ? USNIC_CQE_OK : USNIC_CQE_ERROR;
    c->code = drop;
    c->grh = true;
    c->src_qp = (uint32_t) port | (uint32_t) id << UDP_CHAN_SHIFT;
    c->len = USNIC_GRH_LEN + payload;
}

/* A datagram for channel t (which has a buffer posted) that came in a
 * landing buffer: copied into t's oldest buffer, which completes (inline:
 * every priority datagram).  One of at most UDP_SMALL_COPY bytes, as an
 * 8 B message's, is copied as that many without a call when t's buffer
 * holds them (the landing buffer, the largest, does too). */
#define UDP_SMALL_COPY 64
static inline __opal_attribute_always_inline__ void
copy_out(opal_btl_usnic_hwchan_t *t, const opal_btl_usnic_recv_seg_t *from, uint32_t payload,
         uint16_t port, opal_btl_usnic_cqe_t *c)
{
    opal_btl_usnic_recv_seg_t *seg = rq_pop(t);
    uint32_t room = seg->len - USNIC_GRH_LEN;

    memcpy(seg->buf + USNIC_GRH_IPV4_SRC_OFF, from->buf + USNIC_GRH_IPV4_SRC_OFF, 4);
    if (OPAL_UNLIKELY(payload > room)) {
        complete_recv(c, seg, payload, port, t->id, UDP_DROP_TRUNCATED);
        return;
    }
    if (OPAL_LIKELY(payload <= UDP_SMALL_COPY && room >= UDP_SMALL_COPY)) {
        memcpy(seg->buf + USNIC_GRH_LEN, from->buf + USNIC_GRH_LEN, UDP_SMALL_COPY);
    } else {
        memcpy(seg->buf + USNIC_GRH_LEN, from->buf + USNIC_GRH_LEN, payload);
    }
    complete_recv(c, seg, payload, port, t->id, 0);
}

/* Held datagrams whose channel has buffers again, oldest first; the
 * landing buffers they were held in go back to the landing channel. */
static int release_held(udp_sock_t *s, opal_btl_usnic_cqe_t *cqe, int max)
{
    int n = 0;

    while (NULL != s->held_head && n < max) {
        opal_btl_usnic_recv_seg_t *seg = s->held_head;
        opal_btl_usnic_hwchan_t *t;
        udp_held_t h;

        memcpy(&h, seg->buf, sizeof(h));
        t = s->chans[h.id];
        if (NULL != t && NULL == t->rq_head) {
            break;
        }
        s->held_head = seg->next;
        if (NULL == s->held_head) {
            s->held_tail = &s->held_head;
        }
        if (NULL == t) {
            /* its channel is gone */
            complete_recv(&cqe[n++], seg, h.bytes, h.port, h.id, UDP_DROP_CHANNEL);
            continue;
        }
        copy_out(t, seg, h.bytes, h.port, &cqe[n++]);
        seg->next = NULL;
        (void) udp_post_recv(s->land, seg);
    }
    return n;
}

/* Point slots prepared..k-1 at the landing buffers after those already
 * prepared (out of line: a poll that finds nothing seldom needs it). */
static __opal_attribute_noinline__ void prepare_slots(udp_sock_t *s, int k)
{
    opal_btl_usnic_recv_seg_t *seg = 0 == s->prepared ? s->land->rq_head
                                                      : s->slot_seg[s->prepared - 1]->next;

    for (int i = s->prepared; i < k; ++i, seg = seg->next) {
        s->slot_seg[i] = seg;
        s->iov[i].iov_base = seg->buf + UDP_PREFIX_OFF;
        s->iov[i].iov_len = seg->len - UDP_PREFIX_OFF;
        s->mm[i].msg_hdr.msg_namelen = sizeof(s->from[i]);
    }
    s->prepared = k;
}

/* The got datagrams recvmmsg put in the prepared slots, into completions
 * (out of line: a poll that finds nothing needs no room for it). */
static __opal_attribute_noinline__ int take_batch(udp_sock_t *s, opal_btl_usnic_cqe_t *cqe,
                                                  int got)
{
    opal_btl_usnic_hwchan_t *land = s->land;
    opal_btl_usnic_recv_seg_t **segs = s->slot_seg, *seg, *rest;
    opal_btl_usnic_recv_seg_t *kept = NULL, **kept_tail = &kept;
    int n = 0, taken = 0;

    s->batch = 2 * got < UDP_RECV_MIN ? UDP_RECV_MIN
               : 2 * got > UDP_RECV_BATCH ? UDP_RECV_BATCH : 2 * got;
    rest = segs[got - 1]->next;
    for (int i = 0; i < got; ++i) {
        uint32_t bytes = s->mm[i].msg_len, qkey, payload = 0;
        uint16_t port = ntohs(s->from[i].sin_port);
        opal_btl_usnic_hwchan_t *t = NULL;
        uint8_t id = 0;
        int drop = 0;

        seg = segs[i];
        s->mm[i].msg_hdr.msg_namelen = sizeof(s->from[i]);
        memcpy(&qkey, seg->buf + UDP_PREFIX_OFF, sizeof(qkey));
        /* Dropped as a queue pair drops them, but counted (receive errors). */
        if (OPAL_UNLIKELY(bytes < UDP_PREFIX_LEN || qkey != s->qkey)) {
            drop = UDP_DROP_QKEY;
        } else {
            id = seg->buf[UDP_PREFIX_OFF + UDP_QKEY_LEN];
            payload = bytes - UDP_PREFIX_LEN;
            t = id < s->nchans ? s->chans[id] : NULL;
            if (OPAL_UNLIKELY(NULL == t)) {
                drop = UDP_DROP_CHANNEL;
            } else if (OPAL_UNLIKELY(0 != (s->mm[i].msg_hdr.msg_flags & MSG_TRUNC))) {
                drop = UDP_DROP_TRUNCATED;
            }
        }
        /* (after the prefix was read: they share a byte) */
        memcpy(seg->buf + USNIC_GRH_IPV4_SRC_OFF, &s->from[i].sin_addr.s_addr, 4);
        ++taken;
        if (OPAL_LIKELY(t == land) || 0 != drop) {
            complete_recv(&cqe[n++], seg, payload, port, id, drop);
        } else if (NULL == t->rq_head || NULL != s->held_head) {
            /* no buffer of its own yet: held, in order, not lost */
            udp_held_t h = {.bytes = payload, .port = port, .id = id};
            memcpy(seg->buf, &h, sizeof(h));
            seg->next = NULL;
            *s->held_tail = seg;
            s->held_tail = &seg->next;
        } else {
            copy_out(t, seg, payload, port, &cqe[n++]);
            /* the landing buffer stays posted */
            --taken;
            *kept_tail = seg;
            kept_tail = &seg->next;
        }
    }
    /* the buffers after this batch, behind those that stayed posted */
    *kept_tail = rest;
    if (NULL == rest) {
        land->rq_tail = NULL != kept ? kept_tail : &land->rq_head;
    }
    land->rq_head = kept;
    land->rq_count -= taken;
    /* Buffers taken: the slots are set up again.  (None taken, all copied
     * out: the queue is as it was.) */
    if (0 != taken) {
        s->prepared = 0;
    }
    return n;
}

/* Up to max datagrams of the socket, into the landing channel's oldest
 * posted buffers (which stay posted until a datagram of that channel took
 * them); the completions made, or -1. */
static inline __opal_attribute_always_inline__ int recv_batch(udp_sock_t *s,
                                                              opal_btl_usnic_cqe_t *cqe, int max)
{
    int k = max < s->batch ? max : s->batch, got;

    if (k > s->land->rq_count) {
        k = s->land->rq_count;
    }
    if (OPAL_UNLIKELY(k > s->prepared)) {
        prepare_slots(s, k);
    }
    got = 0 == k ? 0 : recvmmsg(s->fd, s->mm, (unsigned) k, MSG_DONTWAIT, NULL);
    if (OPAL_LIKELY(got > 0)) {
        return take_batch(s, cqe, got);
    }
    /* (nothing came, or no buffer to receive into) */
    s->batch = UDP_RECV_MIN;
    if (0 == got || EAGAIN == errno || EWOULDBLOCK == errno || EINTR == errno) {
        return 0;
    }
    show_failed(s->land->dev_name, "recvmmsg", errno);
    return -1;
}

/* A poll with completions made before it: sends, then held datagrams whose
 * channel has buffers again, then what the socket has (out of line: most
 * polls have none). */
static __opal_attribute_noinline__ int poll_queued(udp_sock_t *s, opal_btl_usnic_cqe_t *cqe,
                                                   int max)
{
    int n = 0, got;

    for (; n < max && s->count > 0; ++n, --s->count) {
        cqe[n] = s->ring[s->head];
        s->head = (s->head + 1) % s->size;
    }
    if (NULL != s->held_head) {
        n += release_held(s, cqe + n, max - n);
    }
    if (n >= max) {
        return n;
    }
    got = recv_batch(s, cqe + n, max - n);
    return got < 0 ? -1 : n + got;
}

static int udp_poll(opal_btl_usnic_hwchan_t *ch, opal_btl_usnic_cqe_t *cqe, int max)
{
    udp_sock_t *s = ch->sock;

    if (OPAL_UNLIKELY(s->count > 0 || NULL != s->held_head)) {
        return poll_queued(s, cqe, max);
    }
    return recv_batch(s, cqe, max);
}

static const char *udp_status_str(int code)
{
    switch (code) {
    case UDP_DROP_QKEY: return "datagram without this process's Q_Key, dropped";
    case UDP_DROP_TRUNCATED: return "datagram longer than a receive buffer, dropped";
    case UDP_DROP_CHANNEL: return "datagram for no channel of this socket, dropped";
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
    .send_batch = udp_send_batch,
    .post_recv = udp_post_recv,
    .poll = udp_poll,
    .status_str = udp_status_str,
    .ah_create = udp_ah_create,
    .ah_destroy = udp_ah_destroy,
    .async_start = udp_async_start,
    .async_stop = udp_async_stop,
    .async_drain = udp_async_drain,
};
