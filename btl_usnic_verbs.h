/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 * $COPYRIGHT$
 *
 * Verbs glue: everything that calls libibverbs lives behind these functions.
 */

#ifndef BTL_USNIC_VERBS_H
#define BTL_USNIC_VERBS_H

#include <infiniband/verbs.h>

#include "btl_usnic_compat.h"

#include "btl_usnic.h"
#include "btl_usnic_frag.h"

BEGIN_C_DECLS

struct opal_btl_usnic_module_t;
struct mca_btl_base_endpoint_t;

/* A device port we can use, as found by the device scan. */
typedef struct {
    struct ibv_context *context;
    char dev_name[IBV_SYSFS_NAME_MAX];
    uint8_t port_num;
    int gid_index;
    union ibv_gid gid;
    int netdev_kindex;              /* kernel ifindex of the netdev behind the GID */
    bool grh_ipv4;                  /* RoCE v2 over IPv4: receives carry an IPv4 header */
    uint32_t port_mtu;              /* active MTU in bytes */
    uint32_t link_speed_mbps;
} opal_btl_usnic_port_t;

/* Scan for ACTIVE Ethernet ports that support UD; returns a malloc'ed array. */
int opal_btl_usnic_verbs_find_ports(opal_btl_usnic_port_t **ports, int *num_ports);

/* Bring a channel up: CQ, UD QP through INIT/RTR/RTS, receives posted. */
int opal_btl_usnic_verbs_channel_init(struct opal_btl_usnic_module_t *module, int index,
                                      int sd_num, int rd_num, int cq_num, uint32_t mtu);
void opal_btl_usnic_verbs_channel_fini(struct opal_btl_usnic_module_t *module, int index);

/* Post one send segment; the only place that calls ibv_post_send. */
int opal_btl_usnic_verbs_post(struct opal_btl_usnic_module_t *module,
                              struct mca_btl_base_endpoint_t *ep,
                              opal_btl_usnic_send_seg_t *seg, int channel);

/* Hand the queued receive buffers of a channel back to the device. */
int opal_btl_usnic_verbs_repost(struct opal_btl_usnic_module_t *module, int channel);

/* Address handle toward a peer; returns the errno of the last failure. */
int opal_btl_usnic_verbs_create_ah(struct opal_btl_usnic_module_t *module,
                                   struct mca_btl_base_endpoint_t *ep);

/* Watch a device context's asynchronous events (port down, fatal device
 * errors, ...) from OPAL's event loop; fatal ones abort the job with a
 * message naming the device. */
int opal_btl_usnic_verbs_async_start(struct ibv_context *ctx, opal_event_t *ev);
void opal_btl_usnic_verbs_async_stop(opal_event_t *ev);
/* Handle the async events already queued (a port error explains flushed
 * work requests better than the flush itself). */
void opal_btl_usnic_verbs_async_drain(struct ibv_context *ctx);

/* rcache callbacks: register / deregister memory with the device. */
int opal_btl_usnic_verbs_reg_mem(void *reg_data, void *base, size_t size,
                                 mca_rcache_base_registration_t *reg);
int opal_btl_usnic_verbs_dereg_mem(void *reg_data, mca_rcache_base_registration_t *reg);

END_C_DECLS
#endif /* BTL_USNIC_VERBS_H */
