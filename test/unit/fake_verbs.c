/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 * $COPYRIGHT$
 *
 * The fake device of the engine tests; see fake_verbs.h.  Everything here
 * replaces btl_usnic_verbs.c and does what the real code does to the
 * component's own state: send work requests, posted counts, repost
 * chains, statistics.
 */

#include "opal_config.h"

#include <stdlib.h>
#include <string.h>

#include "opal/class/opal_free_list.h"
#include "opal/util/proc.h"
#include "opal/util/show_help.h"

#include "btl_usnic.h"
#include "btl_usnic_endpoint.h"
#include "btl_usnic_frag.h"
#include "btl_usnic_module.h"
#include "btl_usnic_verbs.h"

#include "fake_verbs.h"

fake_device_t fake_dev;

/* ------------------------------------------------------------------ */
/* a FIFO of fixed-size elements                                       */

typedef struct {
    uint8_t *buf;
    size_t esz, head, tail, cap;    /* live elements are [head, tail) */
} fifo_t;

static void fifo_init(fifo_t *f, size_t esz)
{
    memset(f, 0, sizeof(*f));
    f->esz = esz;
}

static void fifo_fini(fifo_t *f)
{
    free(f->buf);
    memset(f, 0, sizeof(*f));
}

static size_t fifo_count(const fifo_t *f)
{
    return f->tail - f->head;
}

static void *fifo_at(const fifo_t *f, size_t i)
{
    return f->buf + (f->head + i) * f->esz;
}

static void fifo_push(fifo_t *f, const void *e)
{
    if (f->tail == f->cap) {
        if (f->head > 0 && f->head >= f->cap / 2) {
            memmove(f->buf, fifo_at(f, 0), fifo_count(f) * f->esz);
            f->tail -= f->head;
            f->head = 0;
        } else {
            size_t cap = f->cap ? 2 * f->cap : 64;
            uint8_t *b = realloc(f->buf, cap * f->esz);
            if (NULL == b) {
                abort();
            }
            f->buf = b;
            f->cap = cap;
        }
    }
    memcpy(f->buf + f->tail * f->esz, e, f->esz);
    ++f->tail;
}

/* Remove the i-th element; the ones in front of it keep their order. */
static bool fifo_take(fifo_t *f, size_t i, void *out)
{
    if (i >= fifo_count(f)) {
        return false;
    }
    if (NULL != out) {
        memcpy(out, fifo_at(f, i), f->esz);
    }
    memmove(fifo_at(f, 1), fifo_at(f, 0), i * f->esz);
    if (++f->head == f->tail) {
        f->head = f->tail = 0;
    }
    return true;
}

/* ------------------------------------------------------------------ */
/* fake CQs and QPs                                                    */

typedef struct {
    struct ibv_cq cq;
    fifo_t wcs;                     /* struct ibv_wc */
} fake_cq_t;

typedef struct {
    struct ibv_qp qp;
    fake_cq_t *cq;
    opal_btl_usnic_module_t *module;
    int channel;
    int rq_max;                     /* receive queue depth */
    fifo_t rq;                      /* struct ibv_recv_wr *, posted receive buffers */
} fake_qp_t;

typedef struct {
    fake_cq_t *cq;
    struct ibv_wc wc;
} held_wc_t;

#define FAKE_MAX_QPS 16

static fake_qp_t *qps[FAKE_MAX_QPS];
static uint32_t next_qpn = 0x100;
static fifo_t wire = {NULL, sizeof(fake_dgram_t), 0, 0, 0};
static fifo_t held = {NULL, sizeof(held_wc_t), 0, 0, 0};
static struct ibv_context fake_ctx;

static fake_qp_t *qp_of(opal_btl_usnic_module_t *module, int channel)
{
    return usnic_container_of(module->channels[channel].qp, fake_qp_t, qp);
}

static fake_qp_t *qp_by_num(uint32_t qpn)
{
    for (int i = 0; i < FAKE_MAX_QPS; ++i) {
        if (NULL != qps[i] && qps[i]->qp.qp_num == qpn) {
            return qps[i];
        }
    }
    return NULL;
}

static int fake_poll_cq(struct ibv_cq *cq, int num_entries, struct ibv_wc *wc)
{
    fake_cq_t *fcq = usnic_container_of(cq, fake_cq_t, cq);
    int n = 0;

    while (n < num_entries && fifo_take(&fcq->wcs, 0, &wc[n])) {
        opal_btl_usnic_seg_base_t *base = (opal_btl_usnic_seg_base_t *)(uintptr_t) wc[n].wr_id;
        /* The completion of a frag's segment leads the component to its
         * endpoint: that endpoint must still exist. */
        if (IBV_WC_SEND == wc[n].opcode && USNIC_SEG_ACK != base->type &&
            NULL != fake_dev.endpoint_alive) {
            opal_btl_usnic_send_seg_t *seg = usnic_container_of(base, opal_btl_usnic_send_seg_t,
                                                                base);
            if (!fake_dev.endpoint_alive(seg->frag->endpoint)) {
                ++fake_dev.stale_completions;
            }
        }
        ++n;
    }
    fake_dev.polled += n;
    return n;
}

struct ibv_context *fake_context(void)
{
    fake_ctx.ops.poll_cq = fake_poll_cq;
    return &fake_ctx;
}

void fake_device_reset(void)
{
    fake_dgram_t d;

    while (fifo_take(&wire, 0, &d)) {
        fake_dgram_free(&d);
    }
    fifo_fini(&wire);
    fifo_init(&wire, sizeof(fake_dgram_t));
    fifo_fini(&held);
    fifo_init(&held, sizeof(held_wc_t));
    memset(&fake_dev, 0, sizeof(fake_dev));
}

/* ------------------------------------------------------------------ */
/* the wire                                                            */

size_t fake_wire_count(void)
{
    return fifo_count(&wire);
}

fake_dgram_t *fake_wire_peek(size_t i)
{
    return i < fifo_count(&wire) ? fifo_at(&wire, i) : NULL;
}

bool fake_wire_take(size_t i, fake_dgram_t *out)
{
    return fifo_take(&wire, i, out);
}

void fake_wire_push(const fake_dgram_t *d)
{
    fifo_push(&wire, d);
}

void fake_dgram_free(fake_dgram_t *d)
{
    free(d->bytes);
    d->bytes = NULL;
}

/* ------------------------------------------------------------------ */
/* receiving and completions                                           */

static bool gid_is_ipv4(const uint8_t *gid)
{
    static const uint8_t prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    return 0 == memcmp(gid, prefix, sizeof(prefix));
}

/* The network header in front of a UD receive, as Linux RoCE devices
 * write it (union rdma_network_hdr). */
static void write_grh(uint8_t *grh, const uint8_t *sgid, const uint8_t *dgid)
{
    memset(grh, 0, USNIC_GRH_LEN);
    if (gid_is_ipv4(sgid)) {
        uint8_t *ip = grh + 20;
        ip[0] = 0x45;                   /* IPv4, 20-byte header */
        ip[8] = 64;                     /* TTL */
        ip[9] = 17;                     /* UDP */
        memcpy(ip + 12, sgid + 12, 4);
        memcpy(ip + 16, dgid + 12, 4);
    } else {
        grh[0] = 0x60;                  /* IPv6 */
        grh[6] = 17;
        grh[7] = 64;
        memcpy(grh + 8, sgid, 16);
        memcpy(grh + 24, dgid, 16);
    }
}

fake_rx_result_t fake_deliver_raw(uint32_t qpn, const fake_src_t *src, const void *bytes,
                                  uint32_t len, uint32_t byte_len, enum ibv_wc_status status)
{
    fake_qp_t *q = qp_by_num(qpn);
    struct ibv_recv_wr *wr;
    struct ibv_wc wc;
    uint8_t *buf;
    uint32_t room;

    if (NULL == q) {
        return FAKE_RX_NO_QP;
    }
    if (!fifo_take(&q->rq, 0, &wr)) {
        return FAKE_RX_NO_BUFFER;
    }
    buf = (uint8_t *)(uintptr_t) wr->sg_list[0].addr;
    room = wr->sg_list[0].length;
    if (room >= USNIC_GRH_LEN) {
        write_grh(buf, src->gid, q->module->gid.raw);
        memcpy(buf + USNIC_GRH_LEN, bytes, len < room - USNIC_GRH_LEN ? len : room - USNIC_GRH_LEN);
    }
    memset(&wc, 0, sizeof(wc));
    wc.wr_id = wr->wr_id;
    wc.status = status;
    wc.opcode = IBV_WC_RECV;
    wc.byte_len = byte_len;
    wc.qp_num = qpn;
    wc.src_qp = src->qpn;
    wc.wc_flags = IBV_WC_GRH;
    fifo_push(&q->cq->wcs, &wc);
    ++fake_dev.rx_delivered;
    return FAKE_RX_OK;
}

fake_rx_result_t fake_deliver(uint32_t qpn, const fake_src_t *src, const void *bytes,
                              uint32_t len)
{
    fake_qp_t *q = qp_by_num(qpn);

    if (NULL != q && fifo_count(&q->rq) > 0) {
        struct ibv_recv_wr *wr = *(struct ibv_recv_wr **) fifo_at(&q->rq, 0);
        if ((uint64_t) len + USNIC_GRH_LEN > wr->sg_list[0].length) {
            /* A UD receive larger than the buffer completes in error. */
            ++fake_dev.rx_len_errors;
            return fake_deliver_raw(qpn, src, bytes, 0, 0, IBV_WC_LOC_LEN_ERR);
        }
    }
    return fake_deliver_raw(qpn, src, bytes, len, USNIC_GRH_LEN + len, IBV_WC_SUCCESS);
}

size_t fake_rx_posted(opal_btl_usnic_module_t *module, int channel)
{
    return fifo_count(&qp_of(module, channel)->rq);
}

long fake_qp_rx_posted(uint32_t qpn)
{
    fake_qp_t *q = qp_by_num(qpn);
    return NULL != q ? (long) fifo_count(&q->rq) : -1;
}

size_t fake_cq_depth(opal_btl_usnic_module_t *module, int channel)
{
    return fifo_count(&qp_of(module, channel)->cq->wcs);
}

size_t fake_held_count(void)
{
    return fifo_count(&held);
}

void fake_release_send_completions(enum ibv_wc_status first_status)
{
    held_wc_t h;
    bool first = true;

    while (fifo_take(&held, 0, &h)) {
        if (first) {
            h.wc.status = first_status;
            first = false;
        }
        fifo_push(&h.cq->wcs, &h.wc);
    }
}

/* ------------------------------------------------------------------ */
/* btl_usnic_verbs.h                                                   */

int opal_btl_usnic_verbs_find_ports(opal_btl_usnic_port_t **ports, int *num_ports)
{
    *ports = NULL;
    *num_ports = 0;
    return OPAL_SUCCESS;
}

int opal_btl_usnic_verbs_channel_init(opal_btl_usnic_module_t *module, int index, int sd_num,
                                      int rd_num, int cq_num, uint32_t mtu)
{
    opal_btl_usnic_channel_t *chan = &module->channels[index];
    fake_cq_t *fcq;
    fake_qp_t *fqp;
    int slot = -1, rc;

    memset(chan, 0, sizeof(*chan));
    chan->index = index;
    chan->mtu = mtu;
    chan->repost_tail = &chan->repost_head;
    OBJ_CONSTRUCT(&chan->recv_segs, opal_free_list_t);

    for (int i = 0; i < FAKE_MAX_QPS && slot < 0; ++i) {
        slot = NULL == qps[i] ? i : -1;
    }
    fcq = calloc(1, sizeof(*fcq));
    fqp = calloc(1, sizeof(*fqp));
    if (slot < 0 || NULL == fcq || NULL == fqp) {
        free(fcq);
        free(fqp);
        return OPAL_ERR_OUT_OF_RESOURCE;
    }
    fcq->cq.context = fake_context();
    fcq->cq.cqe = cq_num;
    fifo_init(&fcq->wcs, sizeof(struct ibv_wc));
    fqp->qp.context = fake_context();
    fqp->qp.qp_num = next_qpn++;
    fqp->qp.qp_type = IBV_QPT_UD;
    fqp->qp.state = IBV_QPS_RTS;
    fqp->qp.send_cq = fqp->qp.recv_cq = &fcq->cq;
    fqp->cq = fcq;
    fqp->module = module;
    fqp->channel = index;
    fqp->rq_max = rd_num;
    fifo_init(&fqp->rq, sizeof(struct ibv_recv_wr *));
    qps[slot] = fqp;
    chan->cq = &fcq->cq;
    chan->cq_num = cq_num;
    chan->qp = &fqp->qp;
    chan->sd_num = chan->sd_wqe = sd_num;
    chan->rd_num = rd_num;
    chan->max_inline = 128;

    /* As the real channel: receive buffers of GRH + MTU, all posted. */
    rc = opal_free_list_init(&chan->recv_segs, sizeof(opal_btl_usnic_recv_seg_t),
                             opal_cache_line_size, OBJ_CLASS(opal_btl_usnic_recv_seg_t),
                             USNIC_GRH_LEN + mtu, opal_cache_line_size, rd_num, rd_num, rd_num,
                             NULL, 0, module->rcache, opal_btl_usnic_recv_seg_init, chan);
    if (OPAL_SUCCESS != rc) {
        return rc;
    }
    for (int i = 0; i < rd_num; ++i) {
        opal_btl_usnic_recv_seg_t *rseg =
            (opal_btl_usnic_recv_seg_t *) opal_free_list_get_st(&chan->recv_segs);
        if (NULL == rseg) {
            return OPAL_ERR_OUT_OF_RESOURCE;
        }
        rseg->wr.next = NULL;
        *chan->repost_tail = &rseg->wr;
        chan->repost_tail = &rseg->wr.next;
        ++chan->repost_count;
    }
    return opal_btl_usnic_verbs_repost(module, index);
}

void opal_btl_usnic_verbs_channel_fini(opal_btl_usnic_module_t *module, int index)
{
    opal_btl_usnic_channel_t *chan = &module->channels[index];

    if (NULL != chan->qp) {
        fake_qp_t *fqp = qp_of(module, index);
        for (int i = 0; i < FAKE_MAX_QPS; ++i) {
            if (qps[i] == fqp) {
                qps[i] = NULL;
            }
        }
        fifo_fini(&fqp->rq);
        fifo_fini(&fqp->cq->wcs);
        free(fqp->cq);
        free(fqp);
        chan->qp = NULL;
        chan->cq = NULL;
    }
    OBJ_DESTRUCT(&chan->recv_segs);
}

int opal_btl_usnic_verbs_post(opal_btl_usnic_module_t *module, opal_btl_usnic_endpoint_t *ep,
                              opal_btl_usnic_send_seg_t *seg, int channel)
{
    opal_btl_usnic_channel_t *chan = &module->channels[channel];
    fake_dgram_t d;
    held_wc_t h;

    if (fake_dev.fail_post) {
        return OPAL_ERROR;
    }
    if (chan->sd_wqe <= 0) {
        ++fake_dev.overposts;
    }
    if (seg->len > chan->mtu) {
        ++fake_dev.oversize_posts;
    }
    seg->base.channel = channel;

    d.bytes = malloc(seg->len > 0 ? seg->len : 1);
    if (NULL == d.bytes) {
        return OPAL_ERR_OUT_OF_RESOURCE;
    }
    memcpy(d.bytes, seg->hdr, seg->len);
    d.len = seg->len;
    d.dst_qpn = ep->remote.qp_num[channel];
    d.channel = channel;
    d.src = module;
    d.from.qpn = chan->qp->qp_num;
    memcpy(d.from.gid, module->gid.raw, sizeof(d.from.gid));
    fifo_push(&wire, &d);

    /* as the device: a completion only when asked for */
    if (!opal_btl_usnic_channel_signal(chan, seg)) {
        --chan->sd_wqe;
        ++module->stats.num_total_sends;
        ++fake_dev.posts;
        return OPAL_SUCCESS;
    }
    ++fake_dev.send_wcs;
    memset(&h, 0, sizeof(h));
    h.cq = qp_of(module, channel)->cq;
    h.wc.wr_id = (uintptr_t) &seg->base;
    h.wc.status = IBV_WC_SUCCESS;
    h.wc.opcode = IBV_WC_SEND;
    h.wc.qp_num = chan->qp->qp_num;
    if (fake_dev.hold_send_completions) {
        fifo_push(&held, &h);
    } else {
        fifo_push(&h.cq->wcs, &h.wc);
    }

    --chan->sd_wqe;
    ++seg->posted;
    ++module->stats.num_total_sends;
    ++fake_dev.posts;
    return OPAL_SUCCESS;
}

int opal_btl_usnic_verbs_repost(opal_btl_usnic_module_t *module, int channel)
{
    opal_btl_usnic_channel_t *chan = &module->channels[channel];
    fake_qp_t *fqp;

    if (NULL == chan->repost_head) {
        return OPAL_SUCCESS;
    }
    if (fake_dev.fail_repost) {
        return OPAL_ERROR;
    }
    fqp = qp_of(module, channel);
    *chan->repost_tail = NULL;
    for (struct ibv_recv_wr *wr = chan->repost_head; NULL != wr; wr = wr->next) {
        if (fifo_count(&fqp->rq) >= (size_t) fqp->rq_max) {
            /* More receives than the queue holds: ibv_post_recv fails. */
            return OPAL_ERROR;
        }
        fifo_push(&fqp->rq, &wr);
        ++fake_dev.recv_wrs_posted;
    }
    module->stats.num_recv_reposts += chan->repost_count;
    chan->repost_head = NULL;
    chan->repost_tail = &chan->repost_head;
    chan->repost_count = 0;
    return OPAL_SUCCESS;
}

int opal_btl_usnic_verbs_create_ah(opal_btl_usnic_module_t *module, opal_btl_usnic_endpoint_t *ep)
{
    (void) module;
    ep->ah = NULL;
    return 0;
}

/* No device, no asynchronous events. */
int opal_btl_usnic_verbs_async_start(struct ibv_context *ctx, opal_event_t *ev)
{
    (void) ctx;
    (void) ev;
    return OPAL_SUCCESS;
}

void opal_btl_usnic_verbs_async_stop(opal_event_t *ev)
{
    (void) ev;
}

/* The fake device raises no asynchronous events. */
void opal_btl_usnic_verbs_async_drain(struct ibv_context *ctx)
{
    (void) ctx;
}

int opal_btl_usnic_verbs_reg_mem(void *reg_data, void *base, size_t size,
                                 mca_rcache_base_registration_t *reg)
{
    (void) reg_data;
    (void) base;
    (void) size;
    ((opal_btl_usnic_reg_t *) reg)->mr = NULL;
    return OPAL_SUCCESS;
}

int opal_btl_usnic_verbs_dereg_mem(void *reg_data, mca_rcache_base_registration_t *reg)
{
    (void) reg_data;
    ((opal_btl_usnic_reg_t *) reg)->mr = NULL;
    return OPAL_SUCCESS;
}

/* ------------------------------------------------------------------ */
/* the rest of the component's environment                             */

/* The real one (btl_usnic_module.c, made weak for this binary) aborts;
 * this one does the same to the module and records the call. */
void opal_btl_usnic_module_fatal(opal_btl_usnic_module_t *module, struct opal_proc_t *peer)
{
    module->dead = true;
    if (NULL != module->pml_error_callback) {
        module->pml_error_callback(&module->super, MCA_BTL_ERROR_FLAGS_FATAL,
                                   NULL != peer ? peer : opal_proc_local_get(), "usnic");
    }
    ++fake_dev.fatal_calls;
    fake_dev.fatal_module = module;
    fake_dev.fatal_peer = peer;
}

void fake_component_reset(void)
{
    static opal_btl_usnic_component_t pristine;
    static bool saved = false;
    opal_btl_usnic_component_t *c = &usnic_component;

    /* Help messages come from this tree's help file, not from one that a
     * (maybe older) installed component left in Open MPI's data dir, which
     * opal_show_help would search first (on 5.0: usnic_test.c). */
#if OPAL_MAJOR_VERSION < 5
    if (!saved) {
        opal_show_help_finalize();
        opal_show_help_add_dir(USNIC_SRCDIR);
        opal_show_help_init();
    }
#endif
    /* Back to the state the component object has when it is loaded, then
     * the MCA parameters at their defaults (btl_usnic_mca.c), as the MCA
     * base registers them before the component opens. */
    if (!saved) {
        pristine = *c;
        saved = true;
    }
    *c = pristine;
    opal_btl_usnic_component_register();
    /* What usnic_component_open sets up. */
    OBJ_CONSTRUCT(&c->procs, opal_list_t);
    OBJ_CONSTRUCT(&c->put_targets, opal_list_t);
    c->qkey = 0x75736e69;
    c->coarse_time = opal_btl_usnic_now_us() / 1e6;
    /* No dead-peer check unless a test wants one. */
    c->peer_timeout = 0;
}

void fake_component_fini(void)
{
    OPAL_LIST_DESTRUCT(&usnic_component.procs);
    OPAL_LIST_DESTRUCT(&usnic_component.put_targets);
    usnic_component.modules = NULL;
    usnic_component.num_modules = 0;
}
