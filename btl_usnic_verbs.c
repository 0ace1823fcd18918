/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 * $COPYRIGHT$
 * SPDX-License-Identifier: BSD-3-Clause
 *
 * Verbs glue: the device operations (btl_usnic_device.h) over libibverbs:
 * device scan, UD channels, posting and polling, address handles, memory
 * registration and asynchronous events.  The only file that includes
 * <infiniband/verbs.h>; it keeps none of the component's books.
 */

#include "opal_config.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "opal/constants.h"
#include "opal/runtime/opal.h"
#include "opal/util/proc.h"
#include "opal/util/show_help.h"

#include <hwloc/openfabrics-verbs.h>
#include <infiniband/verbs.h>

#include "btl_usnic.h"
#include "btl_usnic_device.h"
#include "btl_usnic_frag.h"
#include "btl_usnic_util.h"
#include "btl_usnic_wire.h"

/* The opaque handles are the verbs objects themselves, except a channel. */
#define CTX(dev) ((struct ibv_context *) (dev))
#define PD(pd) ((struct ibv_pd *) (pd))

/* Sends a batch (send_batch) holds for one ibv_post_send at most; the
 * engine posts up to USNIC_SENDS_PER_PASS first sends and some resends per
 * pass. */
#define VERBS_SEND_BATCH 32

struct opal_btl_usnic_hwchan {
    struct ibv_cq *cq;
    bool own_cq;                    /* false: the CQ is another channel's */
    struct ibv_qp *qp;
    uint32_t max_inline;
    const char *dev_name;           /* for messages */
    /* A send work request built once: a post fills in only what changes. */
    struct ibv_send_wr send_wr;
    struct ibv_sge send_sge[2];
    /* An open batch's sends (built once, as send_wr), posted as one list:
     * on Soft-RoCE each ibv_post_send is a system call and a wake-up of the
     * kernel's worker. */
    bool batching;
    int nbatch;
    struct ibv_send_wr batch_wr[VERBS_SEND_BATCH];
    struct ibv_sge batch_sge[VERBS_SEND_BATCH][2];
};

/* An IPv4-mapped GID: ::ffff:a.b.c.d */
static bool gid_is_ipv4(const union ibv_gid *gid)
{
    static const uint8_t prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    return 0 == memcmp(gid->raw, prefix, sizeof(prefix));
}

static uint32_t port_speed_mbps(const struct ibv_port_attr *pa)
{
    uint32_t lane;
    uint32_t width;

    switch (pa->active_speed) {
    case 1: lane = 2500; break;
    case 2: lane = 5000; break;
    case 4: case 8: lane = 10000; break;
    case 16: lane = 14000; break;
    case 32: lane = 25000; break;
    case 64: lane = 50000; break;
    case 128: lane = 100000; break;
    default: lane = 10000; break;
    }
    switch (pa->active_width) {
    case 2: width = 4; break;
    case 4: width = 8; break;
    case 8: width = 12; break;
    case 16: width = 2; break;
    default: width = 1; break;
    }
    return lane * width;
}

/* A device with no hardware below it (Soft-RoCE): the kernel registers it
 * under /sys/devices/virtual. */
static bool device_is_virtual(struct ibv_device *dev)
{
    char path[PATH_MAX];

    return NULL != realpath(dev->ibdev_path, path) && NULL != strstr(path, "/devices/virtual/");
}

static bool device_is_usnic(struct ibv_device *dev)
{
    return IBV_TRANSPORT_USNIC == dev->transport_type ||
           IBV_TRANSPORT_USNIC_UDP == dev->transport_type ||
           0 == strncmp(ibv_get_device_name(dev), "usnic_", 6);
}

/* Pick the GID to publish: the user's index, else the first RoCE v2 GID
 * carrying an IPv4 address (index 0 is usually the link-local one). */
static int find_gid(struct ibv_context *ctx, const char *dev_name, uint8_t port,
                    int gid_tbl_len, opal_btl_usnic_port_t *out)
{
    struct ibv_gid_entry entry;
    int first = 0, last = gid_tbl_len - 1;

    if (usnic_component.gid_index >= 0) {
        first = last = usnic_component.gid_index;
    }
    for (int i = first; i <= last && i < gid_tbl_len; ++i) {
        if (0 != ibv_query_gid_ex(ctx, port, i, &entry, 0)) {
            continue;
        }
        if (usnic_component.gid_index < 0 &&
            (IBV_GID_TYPE_ROCE_V2 != entry.gid_type || !gid_is_ipv4(&entry.gid))) {
            continue;
        }
        out->gid_index = i;
        memcpy(out->gid, entry.gid.raw, sizeof(out->gid));
        out->netdev_kindex = (int) entry.ndev_ifindex;
        out->grh_ipv4 = IBV_GID_TYPE_ROCE_V2 == entry.gid_type && gid_is_ipv4(&entry.gid);
        return OPAL_SUCCESS;
    }
    usnic_verbose(5, "%s: %s port %u: no usable IPv4 RoCE v2 GID", opal_process_info.nodename,
                  dev_name, port);
    return OPAL_ERR_NOT_FOUND;
}

/* Add the usable ports of an open device; true if there was one. */
static bool add_ports(struct ibv_context *ctx, const char *name, uint8_t nports,
                      opal_btl_usnic_port_t **ports, int *n)
{
    bool used = false;

    for (uint8_t p = 1; p <= nports; ++p) {
        struct ibv_port_attr pa;
        opal_btl_usnic_port_t port;

        if (0 != ibv_query_port(ctx, p, &pa)) {
            opal_show_help("help-mpi-btl-usnic.txt", "ibv API failed", true,
                           opal_process_info.nodename, name, "ibv_query_port",
                           strerror(errno));
            continue;
        }
        if (IBV_PORT_ACTIVE != pa.state) {
            usnic_verbose(5, "%s: %s port %u: not ACTIVE, skipped",
                          opal_process_info.nodename, name, p);
            continue;
        }
        if (IBV_LINK_LAYER_ETHERNET != pa.link_layer) {
            usnic_verbose(5, "%s: %s port %u: not Ethernet, skipped",
                          opal_process_info.nodename, name, p);
            continue;
        }
        memset(&port, 0, sizeof(port));
        if (OPAL_SUCCESS != find_gid(ctx, name, p, pa.gid_tbl_len, &port)) {
            continue;
        }
        port.dev = (opal_btl_usnic_dev_t *) ctx;
        snprintf(port.dev_name, sizeof(port.dev_name), "%s", name);
        port.port_num = p;
        port.port_mtu = 128u << pa.active_mtu;
        port.link_speed_mbps = port_speed_mbps(&pa);

        opal_btl_usnic_port_t *grown = realloc(*ports, (*n + 1) * sizeof(**ports));
        if (NULL == grown) {
            break;
        }
        *ports = grown;
        (*ports)[(*n)++] = port;
        used = true;
    }
    return used;
}

static int verbs_find_ports(opal_btl_usnic_port_t **ports_out, int *num_out)
{
    int num_devs = 0, n = 0;
    struct ibv_device **devs = ibv_get_device_list(&num_devs);
    opal_btl_usnic_port_t *ports = NULL;

    *ports_out = NULL;
    *num_out = 0;
    if (NULL == devs || 0 == num_devs) {
        usnic_verbose(5, "%s: no verbs devices found", opal_process_info.nodename);
        if (devs) {
            ibv_free_device_list(devs);
        }
        return OPAL_SUCCESS;
    }

    for (int d = 0; d < num_devs; ++d) {
        const char *name = ibv_get_device_name(devs[d]);
        struct ibv_device_attr da;
        struct ibv_context *ctx;
        bool used = false;

        if (device_is_usnic(devs[d])) {
            opal_show_help("help-mpi-btl-usnic.txt", "usNIC device not supported", true,
                           opal_process_info.nodename, name);
            continue;
        }
        if (IBV_TRANSPORT_IWARP == devs[d]->transport_type) {
            usnic_verbose(5, "%s: %s: iWARP has no UD queue pairs, skipped",
                          opal_process_info.nodename, name);
            continue;
        }
        ctx = ibv_open_device(devs[d]);
        if (NULL == ctx) {
            opal_show_help("help-mpi-btl-usnic.txt", "ibv API failed", true,
                           opal_process_info.nodename, name, "ibv_open_device", strerror(errno));
            continue;
        }
        if (0 != ibv_query_device(ctx, &da)) {
            opal_show_help("help-mpi-btl-usnic.txt", "ibv API failed", true,
                           opal_process_info.nodename, name, "ibv_query_device", strerror(errno));
            ibv_close_device(ctx);
            continue;
        }
        used = add_ports(ctx, name, da.phys_port_cnt, &ports, &n);
        /* A context shared by several ports is closed with the last module. */
        if (!used) {
            ibv_close_device(ctx);
        }
    }
    ibv_free_device_list(devs);
    *ports_out = ports;
    *num_out = n;
    return OPAL_SUCCESS;
}

static void verbs_close(opal_btl_usnic_dev_t *dev)
{
    ibv_close_device(CTX(dev));
}

static int verbs_query(opal_btl_usnic_dev_t *dev, const char *dev_name,
                       opal_btl_usnic_dev_limits_t *limits)
{
    struct ibv_device_attr da;

    if (0 != ibv_query_device(CTX(dev), &da)) {
        opal_show_help("help-mpi-btl-usnic.txt", "ibv API failed", true,
                       opal_process_info.nodename, dev_name, "ibv_query_device",
                       strerror(errno));
        return OPAL_ERROR;
    }
    limits->max_qp_wr = da.max_qp_wr;
    limits->max_cqe = da.max_cqe;
    limits->pins_memory = true;
    limits->drops_unbuffered = true;
    limits->host_kernel_work = device_is_virtual(CTX(dev)->device);
    limits->channels_apart = true;
    return OPAL_SUCCESS;
}

static int verbs_cpuset(opal_btl_usnic_dev_t *dev, hwloc_topology_t topo, hwloc_bitmap_t set)
{
    return hwloc_ibv_get_device_cpuset(topo, CTX(dev)->device, set);
}

static opal_btl_usnic_pd_t *verbs_pd_alloc(opal_btl_usnic_dev_t *dev, const char *dev_name)
{
    struct ibv_pd *pd = ibv_alloc_pd(CTX(dev));

    if (NULL == pd) {
        opal_show_help("help-mpi-btl-usnic.txt", "ibv API failed", true,
                       opal_process_info.nodename, dev_name, "ibv_alloc_pd", strerror(errno));
    }
    return (opal_btl_usnic_pd_t *) pd;
}

static void verbs_pd_free(opal_btl_usnic_pd_t *pd)
{
    ibv_dealloc_pd(PD(pd));
}

static int verbs_reg_mem(opal_btl_usnic_pd_t *pd, void *base, size_t len, bool writable,
                         opal_btl_usnic_mr_t **mr, uint32_t *lkey)
{
    struct ibv_mr *m;

    errno = 0;
    m = ibv_reg_mr(PD(pd), base, len, writable ? IBV_ACCESS_LOCAL_WRITE : 0);
    if (NULL == m) {
        return 0 != errno ? errno : ENOMEM;
    }
    *mr = (opal_btl_usnic_mr_t *) m;
    *lkey = m->lkey;
    return 0;
}

static void verbs_dereg_mem(opal_btl_usnic_mr_t *mr)
{
    ibv_dereg_mr((struct ibv_mr *) mr);
}

static int modify_qp(struct opal_btl_usnic_hwchan *ch, struct ibv_qp_attr *attr, int mask,
                     const char *what)
{
    int rc = ibv_modify_qp(ch->qp, attr, mask);
    if (0 != rc) {
        opal_show_help("help-mpi-btl-usnic.txt", "ibv API failed", true,
                       opal_process_info.nodename, ch->dev_name, what, strerror(rc));
        return OPAL_ERROR;
    }
    return OPAL_SUCCESS;
}

static void verbs_chan_destroy(opal_btl_usnic_hwchan_t *ch)
{
    /* The QP goes before its CQ. */
    if (NULL != ch->qp) {
        ibv_destroy_qp(ch->qp);
    }
    if (NULL != ch->cq && ch->own_cq) {
        ibv_destroy_cq(ch->cq);
    }
    free(ch);
}

/* The UD queue pair of a channel; NULL (with the message shown) on failure. */
static struct ibv_qp *create_qp(opal_btl_usnic_pd_t *pd, struct opal_btl_usnic_hwchan *ch,
                                const opal_btl_usnic_chan_req_t *req, struct ibv_qp_init_attr *qia)
{
    struct ibv_qp *qp = NULL;

    memset(qia, 0, sizeof(*qia));
    qia->send_cq = ch->cq;
    qia->recv_cq = ch->cq;
    qia->qp_type = IBV_QPT_UD;
    qia->sq_sig_all = 0;           /* sends ask for completions themselves */
    qia->cap.max_send_wr = req->sd_num;
    qia->cap.max_recv_wr = req->rd_num;
    qia->cap.max_recv_sge = 1;
    /* Two send buffers (a header, and data sent from where it lies) and
     * inline data, or what the provider has of them. */
    for (int i = 0; i < 4; ++i) {
        qia->cap.max_send_sge = i < 2 ? 2 : 1;
        qia->cap.max_inline_data = 0 == i % 2 ? 128 : 0;
        qp = ibv_create_qp(PD(pd), qia);
        if (NULL != qp) {
            break;
        }
    }
    if (NULL == qp) {
        opal_show_help("help-mpi-btl-usnic.txt", "create ibv resource failed", true,
                       opal_process_info.nodename, req->dev_name, "ibv_create_qp",
                       strerror(errno), req->sd_num + req->rd_num);
    }
    return qp;
}

static int verbs_chan_create(opal_btl_usnic_dev_t *dev, opal_btl_usnic_pd_t *pd,
                             const opal_btl_usnic_chan_req_t *req,
                             opal_btl_usnic_hwchan_t *cq_of, opal_btl_usnic_chan_info_t *info,
                             opal_btl_usnic_hwchan_t **out)
{
    struct opal_btl_usnic_hwchan *ch = calloc(1, sizeof(*ch));
    struct ibv_qp_init_attr qia;
    struct ibv_qp_attr qa;

    if (NULL == ch) {
        return OPAL_ERR_OUT_OF_RESOURCE;
    }
    ch->dev_name = req->dev_name;
    *out = ch;
    ch->own_cq = NULL == cq_of;
    ch->cq = ch->own_cq ? ibv_create_cq(CTX(dev), req->cq_num, NULL, NULL, 0) : cq_of->cq;
    if (NULL == ch->cq) {
        opal_show_help("help-mpi-btl-usnic.txt", "create ibv resource failed", true,
                       opal_process_info.nodename, req->dev_name, "ibv_create_cq",
                       strerror(errno), req->cq_num);
        return OPAL_ERR_OUT_OF_RESOURCE;
    }
    ch->qp = create_qp(pd, ch, req, &qia);
    if (NULL == ch->qp) {
        return OPAL_ERR_OUT_OF_RESOURCE;
    }
    /* The provider may grant more than asked; use what it granted. */
    info->qp_num = ch->qp->qp_num;
    info->sd_num = (int) qia.cap.max_send_wr;
    info->rd_num = qia.cap.max_recv_wr < (uint32_t) req->rd_num ? (int) qia.cap.max_recv_wr
                                                                 : req->rd_num;
    info->max_inline = ch->max_inline = qia.cap.max_inline_data;
    info->max_send_sge = (int) qia.cap.max_send_sge;
    ch->send_wr.sg_list = ch->send_sge;
    ch->send_wr.num_sge = 1;
    ch->send_wr.opcode = IBV_WR_SEND;
    for (int i = 0; i < VERBS_SEND_BATCH; ++i) {
        ch->batch_wr[i].sg_list = ch->batch_sge[i];
        ch->batch_wr[i].opcode = IBV_WR_SEND;
    }

    memset(&qa, 0, sizeof(qa));
    qa.qp_state = IBV_QPS_INIT;
    qa.pkey_index = 0;
    qa.port_num = req->port_num;
    qa.qkey = req->qkey;
    return modify_qp(ch, &qa, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY,
                     "ibv_modify_qp(INIT)");
}

static int verbs_chan_start(opal_btl_usnic_hwchan_t *ch)
{
    struct ibv_qp_attr qa;
    int rc;

    memset(&qa, 0, sizeof(qa));
    qa.qp_state = IBV_QPS_RTR;
    rc = modify_qp(ch, &qa, IBV_QP_STATE, "ibv_modify_qp(RTR)");
    if (OPAL_SUCCESS != rc) {
        return rc;
    }
    qa.qp_state = IBV_QPS_RTS;
    qa.sq_psn = 0;
    return modify_qp(ch, &qa, IBV_QP_STATE | IBV_QP_SQ_PSN, "ibv_modify_qp(RTS)");
}

static int post_send_list(opal_btl_usnic_hwchan_t *ch, struct ibv_send_wr *wr)
{
    struct ibv_send_wr *bad;
    int rc = ibv_post_send(ch->qp, wr, &bad);

    if (OPAL_UNLIKELY(0 != rc)) {
        opal_show_help("help-mpi-btl-usnic.txt", "ibv API failed", true,
                       opal_process_info.nodename, ch->dev_name, "ibv_post_send", strerror(rc));
        return OPAL_ERROR;
    }
    return OPAL_SUCCESS;
}

/* The batch's sends, posted as one list. */
static int flush_batch(opal_btl_usnic_hwchan_t *ch)
{
    int n = ch->nbatch;

    ch->nbatch = 0;
    for (int i = 0; i < n - 1; ++i) {
        ch->batch_wr[i].next = &ch->batch_wr[i + 1];
    }
    ch->batch_wr[n - 1].next = NULL;
    return post_send_list(ch, ch->batch_wr);
}

static int verbs_post_send(opal_btl_usnic_hwchan_t *ch, const opal_btl_usnic_dest_t *dest,
                           const void *buf, uint32_t len, uint32_t lkey,
                           const opal_btl_usnic_sge_t *more, void *cookie)
{
    struct ibv_send_wr *wr = &ch->send_wr;
    struct ibv_sge *sge = ch->send_sge;
    uint32_t total = len;

    if (ch->batching) {
        sge = ch->batch_sge[ch->nbatch];
        wr = &ch->batch_wr[ch->nbatch++];
    }
    sge[0].addr = (uintptr_t) buf;
    sge[0].length = len;
    sge[0].lkey = lkey;
    wr->num_sge = 1;
    if (NULL != more) {
        sge[1].addr = (uintptr_t) more->addr;
        sge[1].length = more->len;
        sge[1].lkey = more->lkey;
        wr->num_sge = 2;
        total += more->len;
    }
    wr->wr_id = (uintptr_t) cookie;
    wr->send_flags = (NULL != cookie ? IBV_SEND_SIGNALED : 0) |
                     (total <= ch->max_inline ? IBV_SEND_INLINE : 0);
    wr->wr.ud.ah = (struct ibv_ah *) dest->ah;
    wr->wr.ud.remote_qpn = dest->qpn;
    wr->wr.ud.remote_qkey = dest->qkey;
    if (ch->batching) {
        return VERBS_SEND_BATCH == ch->nbatch ? flush_batch(ch) : OPAL_SUCCESS;
    }
    return post_send_list(ch, wr);
}

/* A batch of the channel's sends opens (open) or ends: those posted in
 * between go out as one list when it ends (or fills).  A batch opened and
 * ended inside another ends both, as in UDP mode. */
static int verbs_send_batch(opal_btl_usnic_hwchan_t *ch, bool open)
{
    ch->batching = open;
    return open || 0 == ch->nbatch ? OPAL_SUCCESS : flush_batch(ch);
}

/* Receive work requests are built on the stack, this many per call. */
#define RECV_BATCH 64

static int verbs_post_recv(opal_btl_usnic_hwchan_t *ch, opal_btl_usnic_recv_seg_t *first)
{
    struct ibv_recv_wr wr[RECV_BATCH], *bad;
    struct ibv_sge sge[RECV_BATCH];

    while (NULL != first) {
        int n = 0, rc;

        for (; NULL != first && n < RECV_BATCH; first = first->next, ++n) {
            sge[n].addr = (uintptr_t) first->buf;
            sge[n].length = first->len;
            sge[n].lkey = first->lkey;
            wr[n].wr_id = (uintptr_t) &first->base;
            wr[n].sg_list = &sge[n];
            wr[n].num_sge = 1;
            wr[n].next = &wr[n + 1];
        }
        wr[n - 1].next = NULL;
        rc = ibv_post_recv(ch->qp, wr, &bad);
        if (OPAL_UNLIKELY(0 != rc)) {
            opal_show_help("help-mpi-btl-usnic.txt", "ibv API failed", true,
                           opal_process_info.nodename, ch->dev_name, "ibv_post_recv",
                           strerror(rc));
            return OPAL_ERROR;
        }
    }
    return OPAL_SUCCESS;
}

static int verbs_poll(opal_btl_usnic_hwchan_t *ch, opal_btl_usnic_cqe_t *cqe, int max)
{
    struct ibv_wc wc[32];
    int n = ibv_poll_cq(ch->cq, max < 32 ? max : 32, wc);

    if (OPAL_UNLIKELY(n < 0)) {
        opal_show_help("help-mpi-btl-usnic.txt", "ibv API failed", true,
                       opal_process_info.nodename, ch->dev_name, "ibv_poll_cq", strerror(-n));
        return -1;
    }
    for (int i = 0; i < n; ++i) {
        cqe[i].cookie = (void *)(uintptr_t) wc[i].wr_id;
        cqe[i].status = OPAL_LIKELY(IBV_WC_SUCCESS == wc[i].status) ? USNIC_CQE_OK
                        : IBV_WC_WR_FLUSH_ERR == wc[i].status     ? USNIC_CQE_FLUSHED
                                                                   : USNIC_CQE_ERROR;
        cqe[i].code = (int) wc[i].status;
        cqe[i].len = wc[i].byte_len;
        cqe[i].src_qp = wc[i].src_qp;
        cqe[i].grh = 0 != (wc[i].wc_flags & IBV_WC_GRH);
    }
    return n;
}

static const char *verbs_status_str(int code)
{
    return ibv_wc_status_str((enum ibv_wc_status) code);
}

static int verbs_ah_create(opal_btl_usnic_pd_t *pd, uint8_t port_num, int gid_index,
                           const uint8_t gid[16], opal_btl_usnic_ah_t **ah)
{
    struct ibv_ah_attr aa;

    memset(&aa, 0, sizeof(aa));
    aa.is_global = 1;
    memcpy(aa.grh.dgid.raw, gid, sizeof(aa.grh.dgid.raw));
    aa.grh.sgid_index = (uint8_t) gid_index;
    aa.grh.hop_limit = 64;
    aa.port_num = port_num;
    errno = 0;
    *ah = (opal_btl_usnic_ah_t *) ibv_create_ah(PD(pd), &aa);
    if (NULL == *ah) {
        return 0 != errno ? errno : EINVAL;
    }
    return 0;
}

static void verbs_ah_destroy(opal_btl_usnic_ah_t *ah)
{
    ibv_destroy_ah((struct ibv_ah *) ah);
}

static void async_event_cb(int fd, short flags, void *arg)
{
    struct ibv_context *ctx = arg;
    struct ibv_async_event ae;
    (void) fd;
    (void) flags;

    while (0 == ibv_get_async_event(ctx, &ae)) {
        enum ibv_event_type type = ae.event_type;
        bool informational;
        int port = -1;

        switch (type) {
        case IBV_EVENT_PORT_ACTIVE:
        case IBV_EVENT_PORT_ERR:
        case IBV_EVENT_LID_CHANGE:
        case IBV_EVENT_PKEY_CHANGE:
        case IBV_EVENT_SM_CHANGE:
        case IBV_EVENT_CLIENT_REREGISTER:
        case IBV_EVENT_GID_CHANGE:
            port = ae.element.port_num;
            break;
        default:
            break;
        }
        ibv_ack_async_event(&ae);
        /* Everything but these leaves the device unusable. */
        informational = IBV_EVENT_PORT_ACTIVE == type || IBV_EVENT_LID_CHANGE == type ||
                        IBV_EVENT_PKEY_CHANGE == type || IBV_EVENT_SM_CHANGE == type ||
                        IBV_EVENT_CLIENT_REREGISTER == type || IBV_EVENT_GID_CHANGE == type;
        opal_btl_usnic_device_event((opal_btl_usnic_dev_t *) ctx, port, !informational,
                                    ibv_event_type_str(type), (int) type);
    }
}

static void verbs_async_drain(opal_btl_usnic_dev_t *dev)
{
    async_event_cb(-1, 0, CTX(dev));
}

static int verbs_async_start(opal_btl_usnic_dev_t *dev, opal_event_t *ev)
{
    struct ibv_context *ctx = CTX(dev);
    int fl = fcntl(ctx->async_fd, F_GETFL);

    if (fl < 0 || 0 != fcntl(ctx->async_fd, F_SETFL, fl | O_NONBLOCK)) {
        return OPAL_ERROR;
    }
    opal_event_set(opal_sync_event_base, ev, ctx->async_fd, OPAL_EV_READ | OPAL_EV_PERSIST,
                   async_event_cb, ctx);
    opal_event_add(ev, NULL);
    return OPAL_SUCCESS;
}

static void verbs_async_stop(opal_event_t *ev)
{
    opal_event_del(ev);
}

const opal_btl_usnic_device_ops_t opal_btl_usnic_verbs_ops = {
    .transport = USNIC_TRANSPORT_VERBS,
    .find_ports = verbs_find_ports,
    .close = verbs_close,
    .query = verbs_query,
    .cpuset = verbs_cpuset,
    .pd_alloc = verbs_pd_alloc,
    .pd_free = verbs_pd_free,
    .reg_mem = verbs_reg_mem,
    .dereg_mem = verbs_dereg_mem,
    .chan_create = verbs_chan_create,
    .chan_start = verbs_chan_start,
    .chan_destroy = verbs_chan_destroy,
    .post_send = verbs_post_send,
    .send_batch = verbs_send_batch,
    .post_recv = verbs_post_recv,
    .poll = verbs_poll,
    .status_str = verbs_status_str,
    .ah_create = verbs_ah_create,
    .ah_destroy = verbs_ah_destroy,
    .async_start = verbs_async_start,
    .async_stop = verbs_async_stop,
    .async_drain = verbs_async_drain,
};
