/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 * $COPYRIGHT$
 *
 * Verbs glue: device scan, UD channels, posting, address handles and
 * memory registration.  The rest of the component never calls libibverbs.
 */

#include "opal_config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "opal/constants.h"
#include "opal/mca/event/event.h"
#include "opal/runtime/opal.h"
#include "opal/util/error.h"
#include "opal/util/show_help.h"

#include "btl_usnic.h"
#include "btl_usnic_endpoint.h"
#include "btl_usnic_module.h"
#include "btl_usnic_thread.h"
#include "btl_usnic_util.h"
#include "btl_usnic_verbs.h"

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
        out->gid = entry.gid;
        out->netdev_kindex = (int) entry.ndev_ifindex;
        out->grh_ipv4 = IBV_GID_TYPE_ROCE_V2 == entry.gid_type && gid_is_ipv4(&entry.gid);
        return OPAL_SUCCESS;
    }
    usnic_verbose(5, "%s: %s port %u: no usable IPv4 RoCE v2 GID", opal_process_info.nodename,
                  dev_name, port);
    return OPAL_ERR_NOT_FOUND;
}

int opal_btl_usnic_verbs_find_ports(opal_btl_usnic_port_t **ports_out, int *num_out)
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
        for (uint8_t p = 1; p <= da.phys_port_cnt; ++p) {
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
            port.context = ctx;
            snprintf(port.dev_name, sizeof(port.dev_name), "%s", name);
            port.port_num = p;
            port.port_mtu = 128u << pa.active_mtu;
            port.link_speed_mbps = port_speed_mbps(&pa);

            opal_btl_usnic_port_t *grown = realloc(ports, (n + 1) * sizeof(*ports));
            if (NULL == grown) {
                break;
            }
            ports = grown;
            ports[n++] = port;
            used = true;
        }
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

static int modify_qp(opal_btl_usnic_module_t *module, struct ibv_qp *qp,
                     struct ibv_qp_attr *attr, int mask, const char *what)
{
    int rc = ibv_modify_qp(qp, attr, mask);
    if (0 != rc) {
        opal_show_help("help-mpi-btl-usnic.txt", "ibv API failed", true,
                       opal_process_info.nodename, module->dev_name, what, strerror(rc));
        return OPAL_ERROR;
    }
    return OPAL_SUCCESS;
}

int opal_btl_usnic_verbs_channel_init(opal_btl_usnic_module_t *module, int index, int sd_num,
                                      int rd_num, int cq_num, uint32_t mtu)
{
    opal_btl_usnic_channel_t *chan = &module->channels[index];
    struct ibv_qp_init_attr qia;
    struct ibv_qp_attr qa;
    int rc;

    memset(chan, 0, sizeof(*chan));
    chan->index = index;
    chan->mtu = mtu;
    chan->repost_tail = &chan->repost_head;
    OBJ_CONSTRUCT(&chan->recv_segs, opal_free_list_t);

    chan->cq = ibv_create_cq(module->context, cq_num, NULL, NULL, 0);
    if (NULL == chan->cq) {
        opal_show_help("help-mpi-btl-usnic.txt", "create ibv resource failed", true,
                       opal_process_info.nodename, module->dev_name, "ibv_create_cq",
                       strerror(errno), cq_num);
        return OPAL_ERR_OUT_OF_RESOURCE;
    }
    chan->cq_num = cq_num;

    memset(&qia, 0, sizeof(qia));
    qia.send_cq = chan->cq;
    qia.recv_cq = chan->cq;
    qia.qp_type = IBV_QPT_UD;
    qia.sq_sig_all = 0;           /* sends ask for completions themselves */
    qia.cap.max_send_wr = sd_num;
    qia.cap.max_recv_wr = rd_num;
    qia.cap.max_send_sge = 1;
    qia.cap.max_recv_sge = 1;
    qia.cap.max_inline_data = 128;
    chan->qp = ibv_create_qp(module->pd, &qia);
    if (NULL == chan->qp) {
        /* Some providers have no inline data; ask again without. */
        qia.cap.max_inline_data = 0;
        chan->qp = ibv_create_qp(module->pd, &qia);
    }
    if (NULL == chan->qp) {
        opal_show_help("help-mpi-btl-usnic.txt", "create ibv resource failed", true,
                       opal_process_info.nodename, module->dev_name, "ibv_create_qp",
                       strerror(errno), sd_num + rd_num);
        return OPAL_ERR_OUT_OF_RESOURCE;
    }
    /* The provider may grant more than asked; use what it granted. */
    chan->sd_num = chan->sd_wqe = qia.cap.max_send_wr;
    chan->rd_num = qia.cap.max_recv_wr < (uint32_t) rd_num ? (int) qia.cap.max_recv_wr : rd_num;
    chan->max_inline = qia.cap.max_inline_data;

    memset(&qa, 0, sizeof(qa));
    qa.qp_state = IBV_QPS_INIT;
    qa.pkey_index = 0;
    qa.port_num = module->port_num;
    qa.qkey = usnic_component.qkey;
    rc = modify_qp(module, chan->qp, &qa,
                   IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY,
                   "ibv_modify_qp(INIT)");
    if (OPAL_SUCCESS != rc) {
        return rc;
    }

    /* Receive buffers: GRH + datagram, one registered slab. */
    rc = opal_free_list_init(&chan->recv_segs, sizeof(opal_btl_usnic_recv_seg_t),
                             opal_cache_line_size, OBJ_CLASS(opal_btl_usnic_recv_seg_t),
                             USNIC_GRH_LEN + mtu, opal_cache_line_size, chan->rd_num,
                             chan->rd_num, chan->rd_num, NULL, 0, module->rcache,
                             opal_btl_usnic_recv_seg_init, chan);
    if (OPAL_SUCCESS != rc) {
        opal_show_help("help-mpi-btl-usnic.txt", "internal error during init", true,
                       opal_process_info.nodename, module->dev_name,
                       "receive buffer allocation", opal_strerror(rc));
        return rc;
    }
    for (int i = 0; i < chan->rd_num; ++i) {
        opal_btl_usnic_recv_seg_t *rseg = (opal_btl_usnic_recv_seg_t *)
            opal_free_list_get_st(&chan->recv_segs);
        if (NULL == rseg) {
            return OPAL_ERR_OUT_OF_RESOURCE;
        }
        rseg->wr.next = NULL;
        *chan->repost_tail = &rseg->wr;
        chan->repost_tail = &rseg->wr.next;
        ++chan->repost_count;
    }
    rc = opal_btl_usnic_verbs_repost(module, index);
    if (OPAL_SUCCESS != rc) {
        return rc;
    }

    qa.qp_state = IBV_QPS_RTR;
    rc = modify_qp(module, chan->qp, &qa, IBV_QP_STATE, "ibv_modify_qp(RTR)");
    if (OPAL_SUCCESS != rc) {
        return rc;
    }
    qa.qp_state = IBV_QPS_RTS;
    qa.sq_psn = 0;
    return modify_qp(module, chan->qp, &qa, IBV_QP_STATE | IBV_QP_SQ_PSN, "ibv_modify_qp(RTS)");
}

void opal_btl_usnic_verbs_channel_fini(opal_btl_usnic_module_t *module, int index)
{
    opal_btl_usnic_channel_t *chan = &module->channels[index];
    (void) module;

    /* The QP goes before its CQ and before the buffers it may still use. */
    if (NULL != chan->qp) {
        ibv_destroy_qp(chan->qp);
        chan->qp = NULL;
    }
    if (NULL != chan->cq) {
        ibv_destroy_cq(chan->cq);
        chan->cq = NULL;
    }
    OBJ_DESTRUCT(&chan->recv_segs);
}

int opal_btl_usnic_verbs_post(opal_btl_usnic_module_t *module, opal_btl_usnic_endpoint_t *ep,
                              opal_btl_usnic_send_seg_t *seg, int channel)
{
    opal_btl_usnic_channel_t *chan = &module->channels[channel];
    struct ibv_send_wr wr, *bad;
    struct ibv_sge sge;
    bool signaled;
    int rc;

    sge.addr = (uintptr_t) seg->hdr;
    sge.length = seg->len;
    sge.lkey = seg->lkey;

    memset(&wr, 0, sizeof(wr));
    signaled = opal_btl_usnic_channel_signal(chan, seg);
    wr.wr_id = signaled ? (uintptr_t) &seg->base : 0;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_SEND;
    wr.send_flags = signaled ? IBV_SEND_SIGNALED : 0;
    if (seg->len <= chan->max_inline) {
        wr.send_flags |= IBV_SEND_INLINE;
    }
    wr.wr.ud.ah = ep->ah;
    wr.wr.ud.remote_qpn = ep->remote.qp_num[channel];
    wr.wr.ud.remote_qkey = ep->remote.qkey;

    seg->base.channel = channel;
    rc = ibv_post_send(chan->qp, &wr, &bad);
    if (OPAL_UNLIKELY(0 != rc)) {
        opal_show_help("help-mpi-btl-usnic.txt", "ibv API failed", true,
                       opal_process_info.nodename, module->dev_name, "ibv_post_send",
                       strerror(rc));
        return OPAL_ERROR;
    }
    --chan->sd_wqe;
    seg->posted += signaled;
    ++module->stats.num_total_sends;
    return OPAL_SUCCESS;
}

int opal_btl_usnic_verbs_repost(opal_btl_usnic_module_t *module, int channel)
{
    opal_btl_usnic_channel_t *chan = &module->channels[channel];
    struct ibv_recv_wr *bad;
    int rc;

    if (NULL == chan->repost_head) {
        return OPAL_SUCCESS;
    }
    *chan->repost_tail = NULL;
    rc = ibv_post_recv(chan->qp, chan->repost_head, &bad);
    if (OPAL_UNLIKELY(0 != rc)) {
        opal_show_help("help-mpi-btl-usnic.txt", "ibv API failed", true,
                       opal_process_info.nodename, module->dev_name, "ibv_post_recv",
                       strerror(rc));
        return OPAL_ERROR;
    }
    module->stats.num_recv_reposts += chan->repost_count;
    chan->repost_head = NULL;
    chan->repost_tail = &chan->repost_head;
    chan->repost_count = 0;
    return OPAL_SUCCESS;
}

int opal_btl_usnic_verbs_create_ah(opal_btl_usnic_module_t *module, opal_btl_usnic_endpoint_t *ep)
{
    struct ibv_ah_attr aa;

    memset(&aa, 0, sizeof(aa));
    aa.is_global = 1;
    memcpy(aa.grh.dgid.raw, ep->remote.gid, sizeof(aa.grh.dgid.raw));
    aa.grh.sgid_index = (uint8_t) module->gid_index;
    aa.grh.hop_limit = 64;
    aa.port_num = module->port_num;
    errno = 0;
    ep->ah = ibv_create_ah(module->pd, &aa);
    if (NULL == ep->ah) {
        return 0 != errno ? errno : EINVAL;
    }
    return 0;
}

/* The module of a context and port, if any. */
static opal_btl_usnic_module_t *module_of(struct ibv_context *ctx, int port)
{
    for (int i = 0; i < usnic_component.num_modules; ++i) {
        opal_btl_usnic_module_t *m = &usnic_component.modules[i];
        if (m->context == ctx && (port <= 0 || m->port_num == port)) {
            return m;
        }
    }
    return NULL;
}

static void async_event_cb(int fd, short flags, void *arg)
{
    struct ibv_context *ctx = arg;
    struct ibv_async_event ae;
    (void) fd;
    (void) flags;

    USNIC_LOCK();
    while (0 == ibv_get_async_event(ctx, &ae)) {
        enum ibv_event_type type = ae.event_type;
        int port = -1;
        opal_btl_usnic_module_t *m;

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
        m = module_of(ctx, port);
        /* Informational events; everything else leaves the device unusable. */
        if (IBV_EVENT_PORT_ACTIVE == type || IBV_EVENT_LID_CHANGE == type ||
            IBV_EVENT_PKEY_CHANGE == type || IBV_EVENT_SM_CHANGE == type ||
            IBV_EVENT_CLIENT_REREGISTER == type || IBV_EVENT_GID_CHANGE == type ||
            NULL == m || m->dead) {
            usnic_verbose(5, "%s: %s: async event \"%s\" (port %d) ignored",
                          opal_process_info.nodename, ibv_get_device_name(ctx->device),
                          ibv_event_type_str(type), port);
            continue;
        }
        opal_show_help("help-mpi-btl-usnic.txt", "async event", true, opal_process_info.nodename,
                       m->dev_name, m->if_name, ibv_event_type_str(type), (int) type, port);
        opal_btl_usnic_module_fatal(m, NULL);
    }
    USNIC_UNLOCK();
}

void opal_btl_usnic_verbs_async_drain(struct ibv_context *ctx)
{
    async_event_cb(-1, 0, ctx);
}

int opal_btl_usnic_verbs_async_start(struct ibv_context *ctx, opal_event_t *ev)
{
    int fl = fcntl(ctx->async_fd, F_GETFL);

    if (fl < 0 || 0 != fcntl(ctx->async_fd, F_SETFL, fl | O_NONBLOCK)) {
        return OPAL_ERROR;
    }
    opal_event_set(opal_sync_event_base, ev, ctx->async_fd, OPAL_EV_READ | OPAL_EV_PERSIST,
                   async_event_cb, ctx);
    opal_event_add(ev, NULL);
    return OPAL_SUCCESS;
}

void opal_btl_usnic_verbs_async_stop(opal_event_t *ev)
{
    opal_event_del(ev);
}

int opal_btl_usnic_verbs_reg_mem(void *reg_data, void *base, size_t size,
                                 mca_rcache_base_registration_t *reg)
{
    opal_btl_usnic_module_t *module = reg_data;
    opal_btl_usnic_reg_t *ureg = (opal_btl_usnic_reg_t *) reg;

    ureg->mr = ibv_reg_mr(module->pd, base, size, IBV_ACCESS_LOCAL_WRITE);
    if (NULL == ureg->mr) {
        /* The component goes on with the buffers it has: say so once. */
        if (!module->reg_failure_shown) {
            struct rlimit rl;
            char limit[32] = "unlimited";
            if (0 == getrlimit(RLIMIT_MEMLOCK, &rl) && RLIM_INFINITY != rl.rlim_cur) {
                snprintf(limit, sizeof(limit), "%lu bytes", (unsigned long) rl.rlim_cur);
            }
            module->reg_failure_shown = true;
            opal_show_help("help-mpi-btl-usnic.txt", "registration failed", true,
                           opal_process_info.nodename, module->dev_name, (unsigned long) size,
                           (unsigned long) module->reg_bytes, limit, strerror(errno));
        }
        return OPAL_ERR_OUT_OF_RESOURCE;
    }
    module->reg_bytes += size;
    return OPAL_SUCCESS;
}

int opal_btl_usnic_verbs_dereg_mem(void *reg_data, mca_rcache_base_registration_t *reg)
{
    opal_btl_usnic_reg_t *ureg = (opal_btl_usnic_reg_t *) reg;
    opal_btl_usnic_module_t *module = reg_data;

    if (NULL != ureg->mr) {
        module->reg_bytes -= ureg->mr->length;
        ibv_dereg_mr(ureg->mr);
        ureg->mr = NULL;
    }
    return OPAL_SUCCESS;
}
