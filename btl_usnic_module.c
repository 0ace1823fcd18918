/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 * $COPYRIGHT$
 * SPDX-License-Identifier: BSD-3-Clause
 *
 * Module set-up and tear-down: device limits, protection domain,
 * registration cache, both channels, free lists, the modex record; and the
 * fatal-error path.  The BTL operations are in btl_usnic_btl.c, progress in
 * btl_usnic_progress.c.
 */

#include "opal_config.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <sys/resource.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "opal/mca/rcache/base/base.h"
#include "opal/util/proc.h"
#include "opal/util/error.h"
#include "opal/util/show_help.h"
#include "opal/util/sys_limits.h"

#include "btl_usnic.h"
#include "btl_usnic_channel.h"
#include "btl_usnic_connectivity.h"
#include "btl_usnic_endpoint.h"
#include "btl_usnic_frag.h"
#include "btl_usnic_module.h"
#include "btl_usnic_rdma.h"
#include "btl_usnic_util.h"

/* Rendered here and written to stderr: Open MPI 4.1.4 sometimes loses the
 * help message of a process that aborts right after it (mpirun logged a
 * failed unpack in show_help.c), while its stderr reaches mpirun. */
void opal_btl_usnic_show_fatal(const char *topic, ...)
{
    va_list ap;
    char *msg;

    va_start(ap, topic);
    msg = opal_show_help_vstring("help-mpi-btl-usnic.txt", topic, true, ap);
    va_end(ap);
    if (NULL != msg) {
        opal_output(0, "%s", msg);
        free(msg);
    }
}

void opal_btl_usnic_module_fatal(opal_btl_usnic_module_t *module, opal_proc_t *peer)
{
    char info[256];

    module->dead = true;
    if (NULL != usnic_component.fatal_hook) {
        usnic_component.fatal_hook(module, peer);
        return;
    }
    /* The peer usually hits the same failure within a second.  Let both help
     * messages reach mpirun before the abort below tears the job down. */
    sleep(1);
    /* This line is a test contract (t-connectivity). */
    snprintf(info, sizeof(info), "btl/usnic: %s: fatal error on %s (%s), the job is aborted",
             opal_process_info.nodename, module->dev_name,
             '\0' != module->fatal_cause[0] ? module->fatal_cause : "see the message above");
    if (NULL != module->pml_error_callback) {
        module->pml_error_callback(&module->super, MCA_BTL_ERROR_FLAGS_FATAL,
                                   NULL != peer ? peer : opal_proc_local_get(), info);
    }
    /* The PML normally aborts the job; if it did not, do not go on with a
     * transport that lost data. */
    abort();
}

/* Buffers every free list starts with. */
#define USNIC_SMALL_FRAGS_INIT 128
#define USNIC_CHUNKS_INIT 256
#define USNIC_ACKS_INIT 128
#define USNIC_INLINE_INIT 128
#define USNIC_ACK_BUF 64

/* Bytes a free list of n buffers of len bytes registers (each buffer
 * cache-line aligned, the slab rounded to pages). */
static size_t slab_bytes(size_t n, size_t len)
{
    size_t line = (size_t) opal_cache_line_size, page = (size_t) opal_getpagesize();

    return (n * ((len + line - 1) / line * line) + page - 1) / page * page + page;
}

/* Memory the module registers when it starts: the receive buffers of both
 * channels and the first buffers of the send free lists. */
static size_t startup_locked_bytes(uint32_t data_mtu, uint32_t prio_mtu, int rd, int prd)
{
    return slab_bytes((size_t) rd, USNIC_GRH_LEN + data_mtu) +
           slab_bytes((size_t) prd, USNIC_GRH_LEN + prio_mtu) +
           slab_bytes(USNIC_SMALL_FRAGS_INIT, data_mtu) + slab_bytes(USNIC_CHUNKS_INIT, data_mtu) +
           slab_bytes(USNIC_INLINE_INIT, prio_mtu) + slab_bytes(USNIC_ACKS_INIT, USNIC_ACK_BUF);
}

/* Whether the locked-memory limit leaves room for this module's start-up
 * registrations on top of those of the modules set up before it. */
static bool memlock_allows(opal_btl_usnic_module_t *module, size_t need)
{
    struct rlimit rl;

    if (opal_btl_usnic_may_lock_unlimited() || 0 != getrlimit(RLIMIT_MEMLOCK, &rl) ||
        RLIM_INFINITY == rl.rlim_cur ||
        usnic_component.locked_planned + need <= (size_t) rl.rlim_cur) {
        usnic_component.locked_planned += need;
        return true;
    }
    opal_show_help("help-mpi-btl-usnic.txt", "locked memory too low", true,
                   opal_process_info.nodename, module->dev_name, (unsigned long) need,
                   (unsigned long) usnic_component.locked_planned, (unsigned long) rl.rlim_cur);
    return false;
}

static int clamp_depth(int requested, int dflt, int max)
{
    int v = requested > 0 ? requested : dflt;
    return v < max ? v : max;
}

static int init_free_list(opal_btl_usnic_module_t *module, opal_free_list_t *fl, size_t elem_size,
                          opal_class_t *cls, size_t payload, int n0, int max, int inc,
                          opal_free_list_item_init_fn_t init, void *ctx)
{
    OBJ_CONSTRUCT(fl, opal_free_list_t);
    return opal_free_list_init(fl, elem_size, opal_cache_line_size, cls, payload,
                               opal_cache_line_size, n0, max, inc, NULL, 0,
                               payload > 0 ? module->rcache : NULL, init, ctx);
}

/* rcache callbacks: register / deregister memory with the device. */
static int reg_mem(void *reg_data, void *base, size_t size, mca_rcache_base_registration_t *reg)
{
    opal_btl_usnic_module_t *module = reg_data;
    opal_btl_usnic_reg_t *ureg = (opal_btl_usnic_reg_t *) reg;
    int err = module->ops->reg_mem(module->pd, base, size, true, &ureg->mr, &ureg->lkey);

    if (0 != err) {
        ureg->mr = NULL;
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
                           (unsigned long) module->reg_bytes, limit, strerror(err));
        }
        return OPAL_ERR_OUT_OF_RESOURCE;
    }
    ureg->len = size;
    module->reg_bytes += size;
    return OPAL_SUCCESS;
}

static int dereg_mem(void *reg_data, mca_rcache_base_registration_t *reg)
{
    opal_btl_usnic_module_t *module = reg_data;
    opal_btl_usnic_reg_t *ureg = (opal_btl_usnic_reg_t *) reg;

    if (NULL != ureg->mr) {
        module->reg_bytes -= ureg->len;
        module->ops->dereg_mem(ureg->mr);
        ureg->mr = NULL;
    }
    return OPAL_SUCCESS;
}

/* The sequence numbers, the device's limits and the payload sizes they
 * allow; queue depths into depth[] (data send, data receive, priority
 * send, priority receive). */
static int init_limits(opal_btl_usnic_module_t *module, uint32_t *prio_mtu, int depth[4])
{
    uint32_t data_mtu = module->port_mtu;
    int rc = opal_btl_usnic_random(&module->isn, sizeof(module->isn));
    int prio_rd;

    if (0 != rc) {
        opal_show_help("help-mpi-btl-usnic.txt", "no random numbers", true,
                       opal_process_info.nodename, module->dev_name, "initial sequence numbers",
                       strerror(rc));
        return OPAL_ERROR;
    }
    rc = module->ops->query(module->dev, module->dev_name, &module->limits);
    if (OPAL_SUCCESS != rc) {
        return rc;
    }
    /* Payload sizes follow the port's active MTU. */
    *prio_mtu = 768;
    if (usnic_component.priority_limit > 0) {
        *prio_mtu = (uint32_t) usnic_component.priority_limit + sizeof(usnic_btl_header_t);
    }
    if (*prio_mtu > data_mtu) {
        *prio_mtu = data_mtu;
    }
    module->max_frag_payload = data_mtu - sizeof(usnic_btl_header_t);
    module->max_chunk_payload = data_mtu - sizeof(usnic_btl_chunk_header_t);
    module->max_tiny_payload = *prio_mtu - sizeof(usnic_btl_header_t);

    depth[0] = clamp_depth(usnic_component.sd_num, 1024, module->limits.max_qp_wr);
    depth[1] = clamp_depth(usnic_component.rd_num, 1024, module->limits.max_qp_wr);
    depth[2] = clamp_depth(usnic_component.prio_sd_num, 127, module->limits.max_qp_wr);
    /* Where a datagram finding no buffer is lost, the ACKs that peers send
     * while this process is off its CPU must find buffers, beside their
     * fast-path sends (127 lost hundreds per stream in the test VM): half
     * the data queue's depth. */
    prio_rd = 127;
    if (module->limits.drops_unbuffered && depth[1] / 2 - 1 > prio_rd) {
        prio_rd = depth[1] / 2 - 1;
    }
    depth[3] = clamp_depth(usnic_component.prio_rd_num, prio_rd, module->limits.max_qp_wr);
    return OPAL_SUCCESS;
}

/* The protection domain and the registration cache over it. */
static int init_registration(opal_btl_usnic_module_t *module)
{
    mca_rcache_base_resources_t res;
    char name[96];

    module->reg_bytes = 0;
    module->reg_failure_shown = false;
    module->pd = module->ops->pd_alloc(module->dev, module->dev_name);
    if (NULL == module->pd) {
        return OPAL_ERROR;
    }
    snprintf(name, sizeof(name), "usnic.%s", module->dev_name);
    memset(&res, 0, sizeof(res));
    res.cache_name = name;
    res.reg_data = module;
    res.sizeof_reg = sizeof(opal_btl_usnic_reg_t);
    res.register_mem = reg_mem;
    res.deregister_mem = dereg_mem;
    module->rcache = mca_rcache_base_module_create(usnic_component.rcache_name, module, &res);
    if (NULL == module->rcache) {
        opal_show_help("help-mpi-btl-usnic.txt", "internal error during init", true,
                       opal_process_info.nodename, module->dev_name,
                       "registration cache creation", usnic_component.rcache_name);
        module->ops->pd_free(module->pd);
        module->pd = NULL;
        return OPAL_ERROR;
    }
    return OPAL_SUCCESS;
}

static int init_channels(opal_btl_usnic_module_t *module, uint32_t prio_mtu, const int depth[4])
{
    /* The CQ holds a completion of every receive and send either queue may have posted. */
    int cq_num = clamp_depth(usnic_component.cq_num, depth[0] + depth[1] + depth[2] + depth[3],
                             module->limits.max_cqe);
    int rc;

    rc = opal_btl_usnic_channel_init(module, USNIC_PRIORITY_CHANNEL, depth[2], depth[3], cq_num,
                                     NULL, prio_mtu);
    if (OPAL_SUCCESS != rc) {
        return rc;
    }
    rc = opal_btl_usnic_channel_init(module, USNIC_DATA_CHANNEL, depth[0], depth[1], 0,
                                     &module->channels[USNIC_PRIORITY_CHANNEL],
                                     module->port_mtu);
    if (OPAL_SUCCESS != rc) {
        return rc;
    }
    opal_btl_usnic_module_tune_channels(module);
    for (int c = 0; c < USNIC_NUM_CHANNELS; ++c) {
        opal_btl_usnic_channel_t *ch = &module->channels[c];
        usnic_verbose(5, "%s: %s: %s channel ready: CQ %d entries (shared), QP %u, send depth "
                      "%d, receive depth %d, MTU %u, inline %u",
                      opal_process_info.nodename, module->dev_name,
                      USNIC_PRIORITY_CHANNEL == c ? "priority" : "data", cq_num,
                      ch->qp_num, ch->sd_num, ch->rd_num, ch->mtu, ch->max_inline);
    }
    return OPAL_SUCCESS;
}

static int init_free_lists(opal_btl_usnic_module_t *module)
{
    uint32_t data_mtu = module->port_mtu;
    int rc;

    rc = init_free_list(module, &module->small_send_frags, sizeof(opal_btl_usnic_send_frag_t),
                        OBJ_CLASS(opal_btl_usnic_send_frag_t), data_mtu, USNIC_SMALL_FRAGS_INIT,
                        USNIC_SMALL_FRAGS_MAX, USNIC_SMALL_FRAGS_INIT,
                        opal_btl_usnic_small_frag_init, NULL);
    rc = (OPAL_SUCCESS != rc) ? rc
         : init_free_list(module, &module->large_send_frags, sizeof(opal_btl_usnic_send_frag_t),
                          OBJ_CLASS(opal_btl_usnic_send_frag_t), 0, 16, USNIC_LARGE_FRAGS_MAX, 16,
                          NULL, NULL);
    rc = (OPAL_SUCCESS != rc) ? rc
         : init_free_list(module, &module->chunk_segs, sizeof(opal_btl_usnic_chunk_t),
                          OBJ_CLASS(opal_btl_usnic_chunk_t), data_mtu, USNIC_CHUNKS_INIT, -1,
                          USNIC_CHUNKS_INIT, opal_btl_usnic_chunk_init,
                          (void *)(uintptr_t) USNIC_SEG_CHUNK);
    rc = (OPAL_SUCCESS != rc) ? rc
         : init_free_list(module, &module->inline_segs, sizeof(opal_btl_usnic_chunk_t),
                          OBJ_CLASS(opal_btl_usnic_chunk_t),
                          sizeof(usnic_btl_header_t) + module->max_tiny_payload,
                          USNIC_INLINE_INIT, USNIC_SMALL_FRAGS_MAX, USNIC_INLINE_INIT,
                          opal_btl_usnic_chunk_init, (void *)(uintptr_t) USNIC_SEG_INLINE);
    rc = (OPAL_SUCCESS != rc) ? rc
         : init_free_list(module, &module->ack_segs, sizeof(opal_btl_usnic_ack_item_t),
                          OBJ_CLASS(opal_btl_usnic_chunk_t), USNIC_ACK_BUF, USNIC_ACKS_INIT, -1, 64,
                          opal_btl_usnic_chunk_init, (void *)(uintptr_t) USNIC_SEG_ACK);
    if (OPAL_SUCCESS != rc) {
        opal_show_help("help-mpi-btl-usnic.txt", "internal error during init", true,
                       opal_process_info.nodename, module->dev_name, "free list creation",
                       opal_strerror(rc));
        OBJ_DESTRUCT(&module->ack_segs);
        OBJ_DESTRUCT(&module->inline_segs);
        OBJ_DESTRUCT(&module->chunk_segs);
        OBJ_DESTRUCT(&module->large_send_frags);
        OBJ_DESTRUCT(&module->small_send_frags);
    }
    return rc;
}

static void init_lists(opal_btl_usnic_module_t *module)
{
    OBJ_CONSTRUCT(&module->senders, opal_hash_table_t);
    opal_hash_table_init(&module->senders, 256);
    module->last_sender = NULL;
    OBJ_CONSTRUCT(&module->all_endpoints, opal_list_t);
    OBJ_CONSTRUCT(&module->endpoints_with_sends, opal_list_t);
    OBJ_CONSTRUCT(&module->endpoints_that_need_acks, opal_list_t);
    module->acks_due_tick = UINT64_MAX;
    module->work_queued = false;
    module->acks_owed = 0;
    OBJ_CONSTRUCT(&module->endpoints_with_timers, opal_list_t);
    module->last_timer_check_us = 0;
    module->loss_seen_us = -HUGE_VAL;
    module->timers_running = 0;
    module->timer_due_us = 0;
    module->timer_restarted = false;
    OBJ_CONSTRUCT(&module->pending_resend_segs, opal_list_t);
    OBJ_CONSTRUCT(&module->fastpath_done, opal_list_t);
    OBJ_CONSTRUCT(&module->zombie_endpoints, opal_list_t);
    memset(module->tx_tables_free, 0, sizeof(module->tx_tables_free));
    memset(module->tx_tables_cached, 0, sizeof(module->tx_tables_cached));
    module->rx_frags_free = NULL;
    module->rx_frags_cached = 0;
    opal_btl_usnic_rdma_init(module);
}

/* What this module publishes in the modex. */
static void init_modex_record(opal_btl_usnic_module_t *module)
{
    usnic_modex_addr_t *a = &module->local_addr;

    memset(a, 0, sizeof(*a));
    memcpy(a->gid, module->gid, sizeof(a->gid));
    a->qp_num[USNIC_PRIORITY_CHANNEL] = module->channels[USNIC_PRIORITY_CHANNEL].qp_num;
    a->qp_num[USNIC_DATA_CHANNEL] = module->channels[USNIC_DATA_CHANNEL].qp_num;
    a->qkey = usnic_component.qkey;
    memcpy(a->conn_key, usnic_component.conn_key, sizeof(a->conn_key));
    a->ipv4_addr = module->if_ipv4;
    a->prefix = module->if_prefix;
    a->link_speed_mbps = module->link_speed_mbps;
    a->mtu = (uint16_t) module->port_mtu;
    a->isn = module->isn;
    a->version = USNIC_MODEX_VERSION;
    a->transport = module->ops->transport;
    memcpy(a->mac, module->if_mac, sizeof(module->if_mac));
    a->if_mtu = (uint32_t) module->if_mtu;
    opal_btl_usnic_module_publish_depths(module);
}

int opal_btl_usnic_module_init(opal_btl_usnic_module_t *module)
{
    uint32_t prio_mtu;
    int depth[4], rc;
    char ip[32];

    module->ops = usnic_component.dev_ops;
    rc = init_limits(module, &prio_mtu, depth);
    if (OPAL_SUCCESS != rc) {
        return rc;
    }
    if (module->limits.pins_memory &&
        !memlock_allows(module,
                        startup_locked_bytes(module->port_mtu, prio_mtu, depth[1], depth[3]))) {
        return OPAL_ERR_OUT_OF_RESOURCE;
    }
    rc = init_registration(module);
    if (OPAL_SUCCESS != rc) {
        return rc;
    }
    rc = init_channels(module, prio_mtu, depth);
    if (OPAL_SUCCESS == rc) {
        rc = init_free_lists(module);
    }
    if (OPAL_SUCCESS != rc) {
        opal_btl_usnic_channel_fini(module, USNIC_DATA_CHANNEL);
        opal_btl_usnic_channel_fini(module, USNIC_PRIORITY_CHANNEL);
        mca_rcache_base_module_destroy(module->rcache);
        module->ops->pd_free(module->pd);
        module->pd = NULL;
        return OPAL_ERROR;
    }
    init_lists(module);
    init_modex_record(module);
    memset(&module->stats, 0, sizeof(module->stats));
    module->fatal_cause[0] = '\0';
    /* Without its socket the module works, just unchecked (a warning was shown). */
    opal_btl_usnic_connectivity_listen(module);

    opal_btl_usnic_snprintf_ipv4(ip, sizeof(ip), module->if_ipv4, module->if_prefix);
    usnic_verbose(5, "%s: %s: module ready: %s %s, max payload %u per datagram, %u per chunk, "
                  "%u on the fast path", opal_process_info.nodename, module->dev_name,
                  module->if_name, ip, module->max_frag_payload, module->max_chunk_payload,
                  module->max_tiny_payload);
    return OPAL_SUCCESS;
}

void opal_btl_usnic_module_teardown(opal_btl_usnic_module_t *module)
{
    opal_list_item_t *li;

    if (NULL == module->pd) {
        return;
    }
    /* progress may still be called until the BML unregisters it */
    module->dead = true;
    while (NULL != (li = opal_list_get_first(&module->all_endpoints)) &&
           li != opal_list_get_end(&module->all_endpoints)) {
        opal_btl_usnic_module_release_endpoint(
            module, usnic_container_of(li, opal_btl_usnic_endpoint_t, all_li));
    }
    opal_btl_usnic_module_drain_sends(module);
    /* Queue pairs before the buffers they use (data first: its CQ is the
     * priority channel's), the PD after everything in it. */
    opal_btl_usnic_channel_fini(module, USNIC_DATA_CHANNEL);
    opal_btl_usnic_channel_fini(module, USNIC_PRIORITY_CHANNEL);
    /* No completion can arrive any more. */
    while (NULL != (li = opal_list_remove_first(&module->zombie_endpoints))) {
        opal_btl_usnic_endpoint_t *ep = usnic_container_of(li, opal_btl_usnic_endpoint_t, all_li);
        OBJ_RELEASE(ep);
    }
    opal_btl_usnic_tx_tables_fini(module);
    opal_btl_usnic_rdma_fini(module);
    free(module->rx_spare);
    module->rx_spare = NULL;
    OBJ_DESTRUCT(&module->zombie_endpoints);
    OBJ_DESTRUCT(&module->fastpath_done);
    OBJ_DESTRUCT(&module->pending_resend_segs);
    OBJ_DESTRUCT(&module->endpoints_that_need_acks);
    OBJ_DESTRUCT(&module->endpoints_with_timers);
    OBJ_DESTRUCT(&module->endpoints_with_sends);
    OBJ_DESTRUCT(&module->all_endpoints);
    OBJ_DESTRUCT(&module->senders);
    OBJ_DESTRUCT(&module->ack_segs);
    OBJ_DESTRUCT(&module->inline_segs);
    OBJ_DESTRUCT(&module->chunk_segs);
    OBJ_DESTRUCT(&module->large_send_frags);
    OBJ_DESTRUCT(&module->small_send_frags);
    mca_rcache_base_module_destroy(module->rcache);
    module->ops->pd_free(module->pd);
    module->pd = NULL;
    /* The device context is closed by the component: ports may share it. */
}
