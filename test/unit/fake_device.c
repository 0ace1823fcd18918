/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 * $COPYRIGHT$
 * SPDX-License-Identifier: BSD-3-Clause
 *
 * The fake device of the engine tests; see fake_device.h.
 */

#include "opal_config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "opal/class/opal_free_list.h"
#include "opal/mca/rcache/base/base.h"
#include "opal/memoryhooks/memory.h"
#include "opal/util/proc.h"
#include "opal/util/show_help.h"

#include "btl_usnic.h"
#include "btl_usnic_device.h"
#include "btl_usnic_endpoint.h"
#include "btl_usnic_frag.h"
#include "btl_usnic_module.h"

#include "fake_device.h"

fake_device_t fake_dev;
fake_device_next_t fake_dev_next;

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
/* fake devices, CQs and QPs                                           */

struct opal_btl_usnic_dev {
    uint8_t gid[16];
};

struct opal_btl_usnic_pd {
    opal_btl_usnic_dev_t *dev;
};

/* Registrations and address handles carry nothing a fake needs. */
/* A registration: what a send may read through its key.  reading counts
 * the sends from it whose completion the device has not produced yet (it
 * may still read them); a registration released before is kept (dead)
 * until they are done, as the pages stay pinned. */
struct opal_btl_usnic_mr {
    const uint8_t *base;
    size_t len;
    uint32_t lkey;
    int reading;
    bool writable;
    bool dead;
    struct opal_btl_usnic_mr *next;     /* live registrations */
};
struct opal_btl_usnic_ah {
    int unused;
};
static struct opal_btl_usnic_ah the_ah;
static struct opal_btl_usnic_mr *live_mrs;
static uint32_t next_lkey = 0x1000;

/* Sends up to this long are inline: copied at the post. */
#define FAKE_MAX_INLINE 128

static opal_btl_usnic_mr_t *mr_covering(uint32_t lkey, const void *addr, size_t len);
static void done_reading(opal_btl_usnic_mr_t *m);

/* A completion, and the send-queue slots it frees (of queue q) when polled. */
typedef struct {
    opal_btl_usnic_cqe_t cqe;
    int slots;
    struct opal_btl_usnic_hwchan *q;
    struct opal_btl_usnic_mr *reads;    /* a held send's second buffer, or NULL */
} fake_cqe_t;

struct opal_btl_usnic_hwchan {
    opal_btl_usnic_dev_t *dev;
    uint32_t qpn;
    uint32_t mtu;
    uint32_t max_inline;            /* sends up to this long are copied at the post */
    int sq_max;                     /* send queue depth */
    int sq_used;                    /* sends holding a slot until their completion is polled */
    int unsignalled;                /* sends since the last that asked for a completion */
    int rq_max;                     /* receive queue depth */
    bool started;
    fifo_t rq;                      /* opal_btl_usnic_recv_seg_t *, posted receive buffers */
    fifo_t own_cq;                  /* fake_cqe_t; unused when the CQ is another queue's */
    fifo_t *cq;                     /* where its completions go */
};

#define FAKE_MAX_QPS 16

static opal_btl_usnic_hwchan_t *qps[FAKE_MAX_QPS];
static uint32_t next_qpn = 0x100;
static fifo_t wire = {NULL, sizeof(fake_dgram_t), 0, 0, 0};
static fifo_t held = {NULL, sizeof(fake_cqe_t), 0, 0, 0};

static opal_btl_usnic_hwchan_t *qp_by_num(uint32_t qpn)
{
    for (int i = 0; i < FAKE_MAX_QPS; ++i) {
        if (NULL != qps[i] && qps[i]->qpn == qpn) {
            return qps[i];
        }
    }
    return NULL;
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
    fifo_init(&held, sizeof(fake_cqe_t));
    while (NULL != live_mrs) {
        opal_btl_usnic_mr_t *m = live_mrs;
        live_mrs = m->next;
        free(m);
    }
    memset(&fake_dev, 0, sizeof(fake_dev));
    fake_dev.one_sge = fake_dev_next.one_sge;
    fake_dev.inline_mtu = fake_dev_next.inline_mtu;
    memset(&fake_dev_next, 0, sizeof(fake_dev_next));
}

opal_btl_usnic_dev_t *fake_device_open(const uint8_t gid[16])
{
    opal_btl_usnic_dev_t *dev = calloc(1, sizeof(*dev));

    if (NULL != dev) {
        memcpy(dev->gid, gid, sizeof(dev->gid));
    }
    return dev;
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
                                  uint32_t len, uint32_t byte_len,
                                  opal_btl_usnic_cqe_status_t status)
{
    opal_btl_usnic_hwchan_t *q = qp_by_num(qpn);
    opal_btl_usnic_recv_seg_t *rseg;
    fake_cqe_t c;

    if (NULL == q || !q->started) {
        return FAKE_RX_NO_QP;
    }
    if (!fifo_take(&q->rq, 0, &rseg)) {
        return FAKE_RX_NO_BUFFER;
    }
    if (rseg->len >= USNIC_GRH_LEN) {
        uint32_t room = rseg->len - USNIC_GRH_LEN;
        write_grh(rseg->buf, src->gid, q->dev->gid);
        memcpy(rseg->buf + USNIC_GRH_LEN, bytes, len < room ? len : room);
    }
    memset(&c, 0, sizeof(c));
    c.q = q;
    c.cqe.cookie = &rseg->base;
    c.cqe.status = status;
    c.cqe.code = (int) status;
    c.cqe.len = byte_len;
    c.cqe.src_qp = src->qpn;
    c.cqe.grh = true;
    fifo_push(q->cq, &c);
    ++fake_dev.rx_delivered;
    return FAKE_RX_OK;
}

fake_rx_result_t fake_deliver(uint32_t qpn, const fake_src_t *src, const void *bytes,
                              uint32_t len)
{
    opal_btl_usnic_hwchan_t *q = qp_by_num(qpn);

    if (NULL != q && fifo_count(&q->rq) > 0) {
        opal_btl_usnic_recv_seg_t *rseg = *(opal_btl_usnic_recv_seg_t **) fifo_at(&q->rq, 0);
        if ((uint64_t) len + USNIC_GRH_LEN > rseg->len) {
            /* A UD receive larger than the buffer completes in error. */
            ++fake_dev.rx_len_errors;
            return fake_deliver_raw(qpn, src, bytes, 0, 0, USNIC_CQE_ERROR);
        }
    }
    return fake_deliver_raw(qpn, src, bytes, len, USNIC_GRH_LEN + len, USNIC_CQE_OK);
}

size_t fake_rx_posted(opal_btl_usnic_module_t *module, int channel)
{
    return fifo_count(&module->channels[channel].hw->rq);
}

long fake_qp_rx_posted(uint32_t qpn)
{
    opal_btl_usnic_hwchan_t *q = qp_by_num(qpn);
    return NULL != q ? (long) fifo_count(&q->rq) : -1;
}

size_t fake_cq_depth(opal_btl_usnic_module_t *module, int channel)
{
    return fifo_count(module->channels[channel].hw->cq);
}

size_t fake_held_count(void)
{
    return fifo_count(&held);
}

void fake_release_send_completions(opal_btl_usnic_cqe_status_t first_status)
{
    fake_cqe_t h;
    bool first = true;

    while (fifo_take(&held, 0, &h)) {
        if (first) {
            h.cqe.status = first_status;
            h.cqe.code = (int) first_status;
            first = false;
        }
        done_reading(h.reads);
        h.reads = NULL;
        fifo_push(h.q->cq, &h);
    }
}

/* ------------------------------------------------------------------ */
/* registrations                                                       */

/* The live registration of key lkey that holds [addr, addr + len), or NULL. */
static opal_btl_usnic_mr_t *mr_covering(uint32_t lkey, const void *addr, size_t len)
{
    const uint8_t *a = addr;

    for (opal_btl_usnic_mr_t *m = live_mrs; NULL != m; m = m->next) {
        if (m->lkey == lkey) {
            return a >= m->base && len <= m->len && (size_t)(a - m->base) <= m->len - len ? m
                                                                                           : NULL;
        }
    }
    return NULL;
}

/* A send's completion is produced: the device has read its buffers. */
static void done_reading(opal_btl_usnic_mr_t *m)
{
    if (NULL != m && 0 == --m->reading && m->dead) {
        free(m);
    }
}

/* ------------------------------------------------------------------ */
/* the device operations                                               */

static int fake_find_ports(opal_btl_usnic_port_t **ports, int *num_ports)
{
    *ports = NULL;
    *num_ports = 0;
    return OPAL_SUCCESS;
}

static void fake_close(opal_btl_usnic_dev_t *dev)
{
    free(dev);
}

static int fake_query(opal_btl_usnic_dev_t *dev, const char *dev_name,
                      opal_btl_usnic_dev_limits_t *limits)
{
    (void) dev;
    (void) dev_name;
    limits->max_qp_wr = 16384;
    limits->max_cqe = 65536;
    limits->pins_memory = true;
    limits->drops_unbuffered = true;
    limits->channels_apart = true;
    return OPAL_SUCCESS;
}

/* No topology: the NUMA distance stays unknown. */
static int fake_cpuset(opal_btl_usnic_dev_t *dev, hwloc_topology_t topo, hwloc_bitmap_t set)
{
    (void) dev;
    (void) topo;
    (void) set;
    return -1;
}

static opal_btl_usnic_pd_t *fake_pd_alloc(opal_btl_usnic_dev_t *dev, const char *dev_name)
{
    opal_btl_usnic_pd_t *pd = malloc(sizeof(*pd));
    (void) dev_name;

    if (NULL != pd) {
        pd->dev = dev;
    }
    return pd;
}

static void fake_pd_free(opal_btl_usnic_pd_t *pd)
{
    free(pd);
}

static int fake_reg_mem(opal_btl_usnic_pd_t *pd, void *base, size_t len, bool writable,
                        opal_btl_usnic_mr_t **mr, uint32_t *lkey)
{
    opal_btl_usnic_mr_t *m;
    (void) pd;

    if (!writable && fake_dev.fail_readonly_reg) {
        return ENOMEM;
    }
    m = calloc(1, sizeof(*m));
    if (NULL == m) {
        return ENOMEM;
    }
    m->base = base;
    m->len = len;
    m->writable = writable;
    m->lkey = next_lkey++;
    m->next = live_mrs;
    live_mrs = m;
    ++fake_dev.mrs_live;
    if (!writable) {
        fake_dev.readonly_bytes_live += len;
        if (fake_dev.readonly_bytes_live > fake_dev.readonly_bytes_max) {
            fake_dev.readonly_bytes_max = fake_dev.readonly_bytes_live;
        }
    }
    ++fake_dev.regs;
    *mr = m;
    *lkey = m->lkey;
    return 0;
}

static void fake_dereg_mem(opal_btl_usnic_mr_t *mr)
{
    opal_btl_usnic_mr_t **p = &live_mrs;

    while (NULL != *p && *p != mr) {
        p = &(*p)->next;
    }
    if (NULL == *p || mr->dead) {
        ++fake_dev.bad_deregs;
        return;
    }
    *p = mr->next;
    --fake_dev.mrs_live;
    if (!mr->writable) {
        fake_dev.readonly_bytes_live -= mr->len;
    }
    if (mr->reading > 0) {
        /* a send may still read it: on a device, a protection error */
        ++fake_dev.busy_deregs;
        mr->dead = true;
        return;
    }
    free(mr);
}

static int fake_chan_create(opal_btl_usnic_dev_t *dev, opal_btl_usnic_pd_t *pd,
                            const opal_btl_usnic_chan_req_t *req,
                            opal_btl_usnic_hwchan_t *cq_of, opal_btl_usnic_chan_info_t *info,
                            opal_btl_usnic_hwchan_t **out)
{
    opal_btl_usnic_hwchan_t *q;
    int slot = -1;
    (void) pd;

    for (int i = 0; i < FAKE_MAX_QPS && slot < 0; ++i) {
        slot = NULL == qps[i] ? i : -1;
    }
    q = calloc(1, sizeof(*q));
    if (slot < 0 || NULL == q) {
        free(q);
        return OPAL_ERR_OUT_OF_RESOURCE;
    }
    q->dev = dev;
    q->qpn = next_qpn++;
    q->mtu = req->mtu;
    q->sq_max = req->sd_num;
    q->rq_max = req->rd_num;
    fifo_init(&q->rq, sizeof(opal_btl_usnic_recv_seg_t *));
    fifo_init(&q->own_cq, sizeof(fake_cqe_t));
    q->cq = NULL != cq_of ? cq_of->cq : &q->own_cq;
    qps[slot] = q;
    info->qp_num = q->qpn;
    info->sd_num = req->sd_num;
    info->rd_num = req->rd_num;
    q->max_inline = fake_dev.inline_mtu ? req->mtu : FAKE_MAX_INLINE;
    info->max_inline = q->max_inline;
    info->max_send_sge = fake_dev.one_sge ? 1 : 2;
    *out = q;
    return OPAL_SUCCESS;
}

static int fake_chan_start(opal_btl_usnic_hwchan_t *q)
{
    q->started = true;
    return OPAL_SUCCESS;
}

/* Drop the completions of queue q from fifo f. */
static void drop_completions_of(fifo_t *f, const opal_btl_usnic_hwchan_t *q)
{
    fake_cqe_t c;

    for (size_t i = 0; i < fifo_count(f);) {
        if (((fake_cqe_t *) fifo_at(f, i))->q == q) {
            fifo_take(f, i, &c);
            done_reading(c.reads);
        } else {
            ++i;
        }
    }
}

static void fake_chan_destroy(opal_btl_usnic_hwchan_t *q)
{
    for (int i = 0; i < FAKE_MAX_QPS; ++i) {
        if (qps[i] == q) {
            qps[i] = NULL;
        }
    }
    /* Its completions go with it, held or on a CQ it shares (as verbs
     * providers clean a CQ of a destroyed queue pair's entries). */
    drop_completions_of(&held, q);
    if (q->cq != &q->own_cq) {
        drop_completions_of(q->cq, q);
    }
    fifo_fini(&q->rq);
    fifo_fini(&q->own_cq);
    free(q);
}

static int fake_post_send(opal_btl_usnic_hwchan_t *q, const opal_btl_usnic_dest_t *dest,
                          const void *buf, uint32_t len, uint32_t lkey,
                          const opal_btl_usnic_sge_t *more, void *cookie)
{
    bool signalled = NULL != cookie;
    uint32_t total = len + (NULL != more ? more->len : 0);
    opal_btl_usnic_mr_t *reads = NULL;
    fake_dgram_t d;
    fake_cqe_t h;

    if (fake_dev.fail_post) {
        return OPAL_ERROR;
    }
    if (q->sq_used >= q->sq_max) {
        ++fake_dev.overposts;
    }
    if (total > q->mtu) {
        ++fake_dev.oversize_posts;
    }
    /* (inline data is copied at the post: its key is not looked at) */
    if (total > q->max_inline && NULL == mr_covering(lkey, buf, len)) {
        ++fake_dev.bad_key_posts;
    }
    if (NULL != more) {
        ++fake_dev.gather_posts;
        reads = mr_covering(more->lkey, more->addr, more->len);
        if (NULL == reads) {
            ++fake_dev.bad_key_posts;
        }
        if (total <= q->max_inline) {
            reads = NULL;   /* copied now */
        } else if (!signalled) {
            /* nothing would tell the sender when the device has read it */
            ++fake_dev.unsignalled_gathers;
            reads = NULL;
        }
    }
    d.bytes = malloc(total > 0 ? total : 1);
    if (NULL == d.bytes) {
        return OPAL_ERR_OUT_OF_RESOURCE;
    }
    memcpy(d.bytes, buf, len);
    if (NULL != more) {
        memcpy(d.bytes + len, more->addr, more->len);
    }
    d.len = total;
    d.dst_qpn = dest->qpn;
    d.src = q->dev;
    d.from.qpn = q->qpn;
    memcpy(d.from.gid, q->dev->gid, sizeof(d.from.gid));
    fifo_push(&wire, &d);
    ++q->sq_used;
    ++fake_dev.posts;

    /* As the device: a completion only when asked for, freeing the slots
     * of the silent sends before it. */
    if (!signalled) {
        ++q->unsignalled;
        return OPAL_SUCCESS;
    }
    ++fake_dev.send_wcs;
    memset(&h, 0, sizeof(h));
    h.q = q;
    h.cqe.cookie = cookie;
    h.cqe.status = USNIC_CQE_OK;
    h.slots = q->unsignalled + 1;
    q->unsignalled = 0;
    if (fake_dev.hold_send_completions) {
        h.reads = reads;
        if (NULL != reads) {
            ++reads->reading;
        }
        fifo_push(&held, &h);
    } else {
        fifo_push(q->cq, &h);
    }
    return OPAL_SUCCESS;
}

static int fake_post_recv(opal_btl_usnic_hwchan_t *q, opal_btl_usnic_recv_seg_t *first)
{
    if (fake_dev.fail_repost) {
        return OPAL_ERROR;
    }
    for (opal_btl_usnic_recv_seg_t *rseg = first; NULL != rseg; rseg = rseg->next) {
        if (fifo_count(&q->rq) >= (size_t) q->rq_max) {
            /* More receives than the queue holds: the device refuses. */
            return OPAL_ERROR;
        }
        fifo_push(&q->rq, &rseg);
        ++fake_dev.recv_wrs_posted;
    }
    return OPAL_SUCCESS;
}

static int fake_poll(opal_btl_usnic_hwchan_t *q, opal_btl_usnic_cqe_t *cqe, int max)
{
    fake_cqe_t c;
    int n = 0;

    while (n < max && fifo_take(q->cq, 0, &c)) {
        opal_btl_usnic_seg_base_t *base = c.cqe.cookie;
        c.q->sq_used -= c.slots;
        /* The completion of a data segment leads the component to its
         * endpoint: that endpoint must still exist. */
        if (c.slots > 0 && NULL != base && USNIC_SEG_ACK != base->type &&
            NULL != fake_dev.endpoint_alive) {
            opal_btl_usnic_send_seg_t *seg = usnic_container_of(base, opal_btl_usnic_send_seg_t,
                                                                base);
            if (!fake_dev.endpoint_alive(seg->ep)) {
                ++fake_dev.stale_completions;
            }
        }
        cqe[n++] = c.cqe;
    }
    fake_dev.polled += n;
    ++fake_dev.poll_calls;
    return n;
}

static const char *fake_status_str(int code)
{
    switch (code) {
    case USNIC_CQE_OK:
        return "success";
    case USNIC_CQE_FLUSHED:
        return "flushed";
    default:
        return "error";
    }
}

static int fake_ah_create(opal_btl_usnic_pd_t *pd, uint8_t port_num, int gid_index,
                          const uint8_t gid[16], opal_btl_usnic_ah_t **ah)
{
    (void) pd;
    (void) port_num;
    (void) gid_index;
    (void) gid;
    *ah = &the_ah;
    return 0;
}

static void fake_ah_destroy(opal_btl_usnic_ah_t *ah)
{
    (void) ah;
}

/* No device, no asynchronous events. */
static int fake_async_start(opal_btl_usnic_dev_t *dev, opal_event_t *ev)
{
    (void) dev;
    (void) ev;
    return OPAL_SUCCESS;
}

static void fake_async_stop(opal_event_t *ev)
{
    (void) ev;
}

static void fake_async_drain(opal_btl_usnic_dev_t *dev)
{
    (void) dev;
}

const opal_btl_usnic_device_ops_t fake_device_ops = {
    .find_ports = fake_find_ports,
    .close = fake_close,
    .query = fake_query,
    .cpuset = fake_cpuset,
    .pd_alloc = fake_pd_alloc,
    .pd_free = fake_pd_free,
    .reg_mem = fake_reg_mem,
    .dereg_mem = fake_dereg_mem,
    .chan_create = fake_chan_create,
    .chan_start = fake_chan_start,
    .chan_destroy = fake_chan_destroy,
    .post_send = fake_post_send,
    .post_recv = fake_post_recv,
    .poll = fake_poll,
    .status_str = fake_status_str,
    .ah_create = fake_ah_create,
    .ah_destroy = fake_ah_destroy,
    .async_start = fake_async_start,
    .async_stop = fake_async_stop,
    .async_drain = fake_async_drain,
};

/* ------------------------------------------------------------------ */
/* the rest of the component's environment                             */

/* opal_btl_usnic_module_fatal, which marked the module dead, would end the
 * process here; the tests tell the PML and record the call instead. */
static void fatal_hook(opal_btl_usnic_module_t *module, struct opal_proc_t *peer)
{
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
    if (!saved) {
#if OPAL_MAJOR_VERSION < 5
        opal_show_help_finalize();
        opal_show_help_add_dir(USNIC_SRCDIR);
        opal_show_help_init();
#endif
        /* What opal_init (beyond opal_init_util) would provide for the
         * modules' registration caches. */
        opal_mem_hooks_init();
        mca_base_framework_open(&opal_rcache_base_framework, 0);
    }
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
    opal_btl_usnic_regs_init(&c->reg_table);
    c->regs = &c->reg_table;
    c->qkey = 0x75736e69;
    c->coarse_time = opal_btl_usnic_now_us() / 1e6;
    /* No dead-peer check unless a test wants one, no checker thread. */
    c->peer_timeout = 0;
    c->connectivity_enabled = false;
    c->dev_ops = &fake_device_ops;
    c->fatal_hook = fatal_hook;
}

void fake_component_fini(void)
{
    OPAL_LIST_DESTRUCT(&usnic_component.procs);
    opal_btl_usnic_regs_fini(&usnic_component.reg_table);
    usnic_component.regs = &usnic_component.reg_table;
    usnic_component.modules = NULL;
    usnic_component.num_modules = 0;
}
