/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 * $COPYRIGHT$
 * SPDX-License-Identifier: BSD-3-Clause
 *
 * The UDP glue (btl_usnic_udp.c) over the loopback: what the engine relies
 * on from a device (receive layout, source, Q_Key, completions, buffers),
 * and the two channels of a CQ on one socket, told apart by the channel
 * byte.
 */

#include "opal_config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/udp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "opal/mca/if/base/base.h"

#include "btl_usnic.h"
#include "btl_usnic_device.h"
#include "btl_usnic_endpoint.h"
#include "btl_usnic_frag.h"
#include "btl_usnic_wire.h"
#include "usnic_test.h"

/* OPAL lists the loopback only when asked to (before opal_init_util). */
__attribute__((constructor)) static void keep_loopback(void)
{
    setenv("OMPI_MCA_if_base_retain_loopback", "1", 0);
}

#define PRIO_MTU 768
/* receive buffers of a "process": 4 priority, then 6 data */
#define NSEGS 10

/* One "process": both channels on one CQ, and receive buffers. */
typedef struct {
    opal_btl_usnic_hwchan_t *prio, *data;
    opal_btl_usnic_chan_info_t pinfo, dinfo;
    opal_btl_usnic_recv_seg_t segs[NSEGS];
} proc_t;

static const opal_btl_usnic_device_ops_t *ops = &opal_btl_usnic_udp_ops;

static int open_proc(opal_btl_usnic_port_t *port, opal_btl_usnic_pd_t *pd, uint32_t qkey,
                     proc_t *p)
{
    opal_btl_usnic_chan_req_t req = {.dev_name = port->dev_name, .port_num = port->port_num,
                                     .qkey = qkey, .sd_num = 16, .rd_num = 4, .cq_num = 64,
                                     .mtu = PRIO_MTU};

    memset(p, 0, sizeof(*p));
    if (OPAL_SUCCESS != ops->chan_create(port->dev, pd, &req, NULL, &p->pinfo, &p->prio)) {
        return -1;
    }
    req.mtu = port->port_mtu;
    req.cq_num = 0;
    req.rd_num = NSEGS - 4;
    if (OPAL_SUCCESS != ops->chan_create(port->dev, pd, &req, p->prio, &p->dinfo, &p->data)) {
        return -1;
    }
    for (int i = 0; i < NSEGS; ++i) {
        opal_btl_usnic_recv_seg_t *s = &p->segs[i];
        s->len = USNIC_GRH_LEN + (i < 4 ? PRIO_MTU : port->port_mtu);
        s->buf = calloc(1, s->len);
        s->base.type = USNIC_SEG_RECV;
        if (NULL == s->buf) {
            return -1;
        }
    }
    return 0;
}

static void close_proc(proc_t *p)
{
    if (NULL != p->data) {
        ops->chan_destroy(p->data);
    }
    if (NULL != p->prio) {
        ops->chan_destroy(p->prio);
    }
    for (int i = 0; i < NSEGS; ++i) {
        free(p->segs[i].buf);
    }
}

/* sendmmsg as the glue calls it (this definition is linked before libc's):
 * each call's messages and their UDP_SEGMENT sizes are recorded, and a
 * call with a segmented message can be refused as a device without
 * segmentation refuses it. */
static struct {
    int calls, msgs;
    uint16_t seg[8];                /* per message of the last call; 0: none */
    bool refuse;
} mm_seen;

int sendmmsg(int fd, struct mmsghdr *v, unsigned int n, int flags)
{
    ++mm_seen.calls;
    mm_seen.msgs = (int) n;
    for (unsigned int i = 0; i < n; ++i) {
        struct cmsghdr *cm = v[i].msg_hdr.msg_controllen > 0 ? CMSG_FIRSTHDR(&v[i].msg_hdr) : NULL;
        uint16_t seg = 0;

        if (NULL != cm && SOL_UDP == cm->cmsg_level && UDP_SEGMENT == cm->cmsg_type) {
            memcpy(&seg, CMSG_DATA(cm), sizeof(seg));
            if (mm_seen.refuse) {
                errno = EIO;
                return -1;
            }
        }
        if (i < 8) {
            mm_seen.seg[i] = seg;
        }
    }
    return (int) syscall(SYS_sendmmsg, fd, v, n, flags);
}

/* Poll until n completions came or a second passed; how many came. */
static int poll_for(opal_btl_usnic_hwchan_t *ch, opal_btl_usnic_cqe_t *cqe, int n)
{
    struct timespec t0, t;
    int got = 0;

    clock_gettime(CLOCK_MONOTONIC, &t0);
    do {
        int r = ops->poll(ch, cqe + got, n - got);
        if (r < 0) {
            return r;
        }
        got += r;
        clock_gettime(CLOCK_MONOTONIC, &t);
    } while (got < n && (t.tv_sec - t0.tv_sec) * 1000000000L + (t.tv_nsec - t0.tv_nsec) < 1000000000L);
    return got;
}

/* The loopback's port, a protection domain on it, two "processes" (Q_Keys
 * 0x1234 and 0x5678) and an address handle for the loopback. */
typedef struct {
    opal_btl_usnic_port_t *ports, *lo;
    int n;
    opal_btl_usnic_pd_t *pd;
    opal_btl_usnic_ah_t *ah;
} lo_world_t;

static int lo_open(lo_world_t *w, proc_t *a, proc_t *b)
{
    uint32_t localhost = htonl(INADDR_LOOPBACK);

    memset(w, 0, sizeof(*w));
    memset(a, 0, sizeof(*a));
    memset(b, 0, sizeof(*b));
    /* (5.0's opal_init_util leaves the interface list to opal_init) */
    if (OPAL_SUCCESS != mca_base_framework_open(&opal_if_base_framework, 0) ||
        OPAL_SUCCESS != ops->find_ports(&w->ports, &w->n)) {
        return -1;
    }
    for (int i = 0; i < w->n; ++i) {
        if (w->ports[i].loopback && 0 == memcmp(w->ports[i].gid + 12, &localhost, 4)) {
            w->lo = &w->ports[i];
        }
    }
    if (NULL == w->lo || NULL == (w->pd = ops->pd_alloc(w->lo->dev, w->lo->dev_name))) {
        return -1;
    }
    return 0 == open_proc(w->lo, w->pd, 0x1234, a) && 0 == open_proc(w->lo, w->pd, 0x5678, b) &&
           0 == ops->ah_create(w->pd, 1, 0, w->lo->gid, &w->ah) ? 0 : -1;
}

static void lo_close(lo_world_t *w, proc_t *a, proc_t *b)
{
    if (NULL != w->ah) {
        ops->ah_destroy(w->ah);
    }
    close_proc(a);
    close_proc(b);
    if (NULL != w->pd) {
        ops->pd_free(w->pd);
    }
    for (int i = 0; i < w->n; ++i) {
        ops->close(w->ports[i].dev);
    }
    free(w->ports);
    (void) mca_base_framework_close(&opal_if_base_framework);
}

USNIC_TEST(udp_device_over_loopback)
{
    opal_btl_usnic_cqe_t cqe[8];
    opal_btl_usnic_seg_base_t sent = {.type = USNIC_SEG_FRAG};
    opal_btl_usnic_sge_t more;
    opal_btl_usnic_dest_t dest;
    lo_world_t w;
    proc_t a, b;
    uint32_t localhost = htonl(INADDR_LOOPBACK);
    char big[PRIO_MTU + 8], got[64];
    int rc = 1;

    if (0 != lo_open(&w, &a, &b)) {
        goto out;
    }
    check(w.lo->grh_ipv4);
    check_int_eq(w.lo->gid[10], 0xff);
    /* the loopback's 64 KiB MTU: capped at a jumbo frame's datagram */
    check_int_eq(w.lo->port_mtu, 9000 - 28 - 5);
    check(a.prio != NULL && a.pinfo.qp_num != a.dinfo.qp_num && b.dinfo.qp_num != 0);
    /* one socket: one port under both channels */
    check_int_eq(a.pinfo.qp_num & 0xffff, a.dinfo.qp_num & 0xffff);
    check_int_eq(b.dinfo.rd_num, NSEGS - 4);
    /* all data buffers of b, linked */
    for (int i = 4; i < NSEGS - 1; ++i) {
        b.segs[i].next = &b.segs[i + 1];
    }
    check_int_eq(ops->post_recv(b.data, &b.segs[4]), OPAL_SUCCESS);
    b.segs[0].next = NULL;
    check_int_eq(ops->post_recv(b.prio, &b.segs[0]), OPAL_SUCCESS);

    /* a gathered, signalled send to b's data channel */
    dest = (opal_btl_usnic_dest_t){.ah = w.ah, .qpn = b.dinfo.qp_num, .qkey = 0x5678};
    more = (opal_btl_usnic_sge_t){.addr = " world", .len = 6};
    check_int_eq(ops->post_send(a.data, &dest, "hello", 5, 0, &more, &sent), OPAL_SUCCESS);
    check_int_eq(poll_for(a.prio, cqe, 1), 1);       /* the CQ both channels share */
    check(cqe[0].cookie == &sent && USNIC_CQE_OK == cqe[0].status);
    check_int_eq(poll_for(b.data, cqe, 1), 1);
    check(USNIC_CQE_OK == cqe[0].status && cqe[0].grh);
    check(cqe[0].cookie == &b.segs[4].base);
    check_int_eq(cqe[0].len, USNIC_GRH_LEN + 11);
    check_int_eq(cqe[0].src_qp, a.dinfo.qp_num);
    check_int_eq(memcmp(b.segs[4].buf + USNIC_GRH_IPV4_SRC_OFF, &localhost, 4), 0);
    memcpy(got, b.segs[4].buf + USNIC_GRH_LEN, 11);
    got[11] = '\0';
    check_str_eq(got, "hello world");

    /* an unsignalled send completes nothing at the sender */
    check_int_eq(ops->post_send(a.data, &dest, "x", 1, 0, NULL, NULL), OPAL_SUCCESS);
    check_int_eq(poll_for(b.data, cqe, 1), 1);
    check(cqe[0].cookie == &b.segs[5].base);
    check_int_eq(ops->poll(a.data, cqe, 8), 0);

    /* a wrong Q_Key, and a datagram longer than the buffer: counted
     * receive errors on the buffer, which goes back to the engine; every
     * datagram lands in a data buffer first */
    dest = (opal_btl_usnic_dest_t){.ah = w.ah, .qpn = b.pinfo.qp_num, .qkey = 0x9999};
    check_int_eq(ops->post_send(a.prio, &dest, "x", 1, 0, NULL, NULL), OPAL_SUCCESS);
    check_int_eq(poll_for(b.prio, cqe, 1), 1);
    check(USNIC_CQE_ERROR == cqe[0].status && cqe[0].cookie == &b.segs[6].base);
    check(NULL != strstr(ops->status_str(cqe[0].code), "Q_Key"));
    b.segs[6].next = NULL;
    check_int_eq(ops->post_recv(b.data, &b.segs[6]), OPAL_SUCCESS);
    dest.qkey = 0x5678;
    memset(big, 'b', sizeof(big));
    check_int_eq(ops->post_send(a.prio, &dest, big, sizeof(big), 0, NULL, NULL), OPAL_SUCCESS);
    check_int_eq(poll_for(b.prio, cqe, 1), 1);
    check(USNIC_CQE_ERROR == cqe[0].status && cqe[0].cookie == &b.segs[0].base);
    check(NULL != strstr(ops->status_str(cqe[0].code), "longer"));

    /* a channel byte that names no channel of b's socket: a counted
     * receive error on the buffer it landed in (b's data channel's) */
    dest = (opal_btl_usnic_dest_t){.ah = w.ah, .qkey = 0x5678,
                                   .qpn = (b.dinfo.qp_num & 0xffff) | 5u << 16};
    check_int_eq(ops->post_send(a.data, &dest, "x", 1, 0, NULL, NULL), OPAL_SUCCESS);
    check_int_eq(poll_for(b.prio, cqe, 1), 1);
    check(USNIC_CQE_ERROR == cqe[0].status && cqe[0].cookie == &b.segs[7].base);
    check(NULL != strstr(ops->status_str(cqe[0].code), "channel"));

    /* with no buffer of its own posted a priority datagram waits, not lost,
     * in order, and the data channel's go on meanwhile */
    dest = (opal_btl_usnic_dest_t){.ah = w.ah, .qpn = b.pinfo.qp_num, .qkey = 0x5678};
    check_int_eq(ops->post_send(a.prio, &dest, "late", 4, 0, NULL, NULL), OPAL_SUCCESS);
    check_int_eq(ops->post_send(a.prio, &dest, "later", 5, 0, NULL, NULL), OPAL_SUCCESS);
    dest = (opal_btl_usnic_dest_t){.ah = w.ah, .qpn = b.dinfo.qp_num, .qkey = 0x5678};
    check_int_eq(ops->post_send(a.data, &dest, "data", 4, 0, NULL, NULL), OPAL_SUCCESS);
    check_int_eq(poll_for(b.prio, cqe, 2), 1);
    check(USNIC_CQE_OK == cqe[0].status && cqe[0].cookie == &b.segs[6].base);
    check_int_eq(memcmp(b.segs[6].buf + USNIC_GRH_LEN, "data", 4), 0);
    check_int_eq(cqe[0].src_qp, a.dinfo.qp_num);
    for (int i = 1; i < 3; ++i) {
        b.segs[i].next = &b.segs[i + 1];
    }
    b.segs[3].next = NULL;
    check_int_eq(ops->post_recv(b.prio, &b.segs[1]), OPAL_SUCCESS);
    check_int_eq(poll_for(b.prio, cqe, 2), 2);
    check(USNIC_CQE_OK == cqe[0].status && cqe[0].cookie == &b.segs[1].base);
    check_int_eq(cqe[0].len, USNIC_GRH_LEN + 4);
    check_int_eq(memcmp(b.segs[1].buf + USNIC_GRH_LEN, "late", 4), 0);
    check_int_eq(memcmp(b.segs[1].buf + USNIC_GRH_IPV4_SRC_OFF, &localhost, 4), 0);
    check_int_eq(cqe[0].src_qp, a.pinfo.qp_num);
    check(USNIC_CQE_OK == cqe[1].status && cqe[1].cookie == &b.segs[2].base);
    check_int_eq(memcmp(b.segs[2].buf + USNIC_GRH_LEN, "later", 5), 0);

    /* copied at once while it has one; the landing buffer stays posted */
    dest = (opal_btl_usnic_dest_t){.ah = w.ah, .qpn = b.pinfo.qp_num, .qkey = 0x5678};
    check_int_eq(ops->post_send(a.prio, &dest, "now", 3, 0, NULL, NULL), OPAL_SUCCESS);
    check_int_eq(poll_for(b.prio, cqe, 1), 1);
    check(USNIC_CQE_OK == cqe[0].status && cqe[0].cookie == &b.segs[3].base);
    check_int_eq(memcmp(b.segs[3].buf + USNIC_GRH_LEN, "now", 3), 0);
    dest.qpn = b.dinfo.qp_num;
    check_int_eq(ops->post_send(a.data, &dest, "more", 4, 0, NULL, NULL), OPAL_SUCCESS);
    check_int_eq(poll_for(b.data, cqe, 1), 1);
    check(USNIC_CQE_OK == cqe[0].status && cqe[0].cookie == &b.segs[8].base);

    /* a batch of data sends goes out when it ends, together and in order;
     * the priority channel's sends go out meanwhile */
    b.segs[4].next = &b.segs[5];
    b.segs[5].next = &b.segs[7];
    b.segs[7].next = NULL;
    check_int_eq(ops->post_recv(b.data, &b.segs[4]), OPAL_SUCCESS);
    b.segs[0].next = NULL;
    check_int_eq(ops->post_recv(b.prio, &b.segs[0]), OPAL_SUCCESS);
    check(NULL != ops->send_batch);
    check_int_eq(ops->send_batch(a.data, true), OPAL_SUCCESS);
    check_int_eq(ops->post_send(a.data, &dest, "one", 3, 0, NULL, NULL), OPAL_SUCCESS);
    check_int_eq(ops->post_send(a.data, &dest, "two", 3, 0, NULL, &sent), OPAL_SUCCESS);
    check_int_eq(ops->post_send(a.data, &dest, "three", 5, 0, NULL, NULL), OPAL_SUCCESS);
    dest.qpn = b.pinfo.qp_num;
    check_int_eq(ops->post_send(a.prio, &dest, "ping", 4, 0, NULL, NULL), OPAL_SUCCESS);
    check_int_eq(poll_for(b.prio, cqe, 1), 1);
    check(USNIC_CQE_OK == cqe[0].status && cqe[0].cookie == &b.segs[0].base);
    check_int_eq(memcmp(b.segs[0].buf + USNIC_GRH_LEN, "ping", 4), 0);
    /* (sent after them, it would have come after them) */
    check_int_eq(ops->poll(b.data, cqe, 4), 0);
    check_int_eq(ops->send_batch(a.data, false), OPAL_SUCCESS);
    check_int_eq(poll_for(b.data, cqe, 3), 3);
    for (int i = 0; i < 3; ++i) {
        const char *want[] = {"one", "two", "three"};
        opal_btl_usnic_recv_seg_t *r = usnic_container_of(cqe[i].cookie, opal_btl_usnic_recv_seg_t,
                                                          base);

        check(USNIC_CQE_OK == cqe[i].status);
        check_int_eq(cqe[i].len, USNIC_GRH_LEN + strlen(want[i]));
        check_int_eq(memcmp(r->buf + USNIC_GRH_LEN, want[i], strlen(want[i])), 0);
    }
    /* the signalled one's completion */
    check_int_eq(poll_for(a.prio, cqe, 1), 1);
    check(cqe[0].cookie == &sent);
    rc = 0;
out:
    lo_close(&w, &a, &b);
    check_int_eq(rc, 0);
    return 0;
}

/* b's completions: n datagrams in this order, these payloads. */
static int got_in_order(proc_t *b, opal_btl_usnic_cqe_t *cqe, const char *const *want, int n)
{
    if (poll_for(b->prio, cqe, n) != n) {
        return -1;
    }
    for (int i = 0; i < n; ++i) {
        opal_btl_usnic_recv_seg_t *r = usnic_container_of(cqe[i].cookie, opal_btl_usnic_recv_seg_t,
                                                          base);
        if (USNIC_CQE_OK != cqe[i].status || cqe[i].len != USNIC_GRH_LEN + strlen(want[i]) ||
            0 != memcmp(r->buf + USNIC_GRH_LEN, want[i], strlen(want[i]))) {
            return -1;
        }
    }
    return 0;
}

USNIC_TEST(udp_batch_to_one_peer_is_segmented_by_the_kernel)
{
    static const char *const want[] = {"aaaa", "bbbb", "cccc", "ee", "ffff", "gggg"};
    opal_btl_usnic_cqe_t cqe[8];
    opal_btl_usnic_dest_t data, prio;
    lo_world_t w;
    proc_t a, b;
    int rc = 1;

    if (0 != lo_open(&w, &a, &b)) {
        goto out;
    }
    data = (opal_btl_usnic_dest_t){.ah = w.ah, .qpn = b.dinfo.qp_num, .qkey = 0x5678};
    prio = (opal_btl_usnic_dest_t){.ah = w.ah, .qpn = b.pinfo.qp_num, .qkey = 0x5678};
    for (int i = 4; i < NSEGS - 1; ++i) {
        b.segs[i].next = &b.segs[i + 1];
    }
    check_int_eq(ops->post_recv(b.data, &b.segs[4]), OPAL_SUCCESS);
    for (int round = 0; round < 3; ++round) {
        /* round 1: the kernel refuses segmentation (EIO), as a device
         * without checksum offload does; round 2: after that refusal */
        mm_seen = (typeof(mm_seen)){.refuse = 1 == round};
        b.segs[0].next = NULL;
        check_int_eq(ops->post_recv(b.prio, &b.segs[0]), OPAL_SUCCESS);
        check_int_eq(ops->send_batch(a.data, true), OPAL_SUCCESS);
        /* equal lengths, one shorter, then one after it, and one to b's
         * other channel: the runs are [aaaa .. ee], [ffff], [gggg] (every
         * datagram lands in a data buffer first: 6 of them) */
        for (int i = 0; i < 5; ++i) {
            check_int_eq(ops->post_send(a.data, &data, want[i], (uint32_t) strlen(want[i]), 0,
                                        NULL, NULL), OPAL_SUCCESS);
        }
        check_int_eq(ops->post_send(a.data, &prio, want[5], 4, 0, NULL, NULL), OPAL_SUCCESS);
        check_int_eq(mm_seen.calls, 0);
        check_int_eq(ops->send_batch(a.data, false), OPAL_SUCCESS);
        check_int_eq(got_in_order(&b, cqe, want, 6), 0);
        if (0 == round) {
            check_int_eq(mm_seen.calls, 1);
            check_int_eq(mm_seen.msgs, 3);
            /* a datagram: the 5-byte prefix and 4 bytes */
            check_int_eq(mm_seen.seg[0], 9);
            check_int_eq(mm_seen.seg[1], 0);
            check_int_eq(mm_seen.seg[2], 0);
        } else {
            /* refused once, then one message per datagram */
            check_int_eq(mm_seen.calls, 1 == round ? 2 : 1);
            check_int_eq(mm_seen.msgs, 6);
            check_int_eq(mm_seen.seg[0], 0);
        }
        /* the data buffers the datagrams took go back */
        for (int i = 0; i < 5; ++i) {
            opal_btl_usnic_recv_seg_t *r = usnic_container_of(cqe[i].cookie,
                                                              opal_btl_usnic_recv_seg_t, base);
            r->next = NULL;
            check_int_eq(ops->post_recv(b.data, r), OPAL_SUCCESS);
        }
    }
    rc = 0;
out:
    lo_close(&w, &a, &b);
    check_int_eq(rc, 0);
    return 0;
}
