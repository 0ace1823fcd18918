/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 * $COPYRIGHT$
 * SPDX-License-Identifier: BSD-3-Clause
 *
 * The component's half of a channel; see btl_usnic_channel.h.  Everything
 * the device does goes through module->ops (btl_usnic_device.h).
 */

#include "opal_config.h"

#include <string.h>

#include "opal/util/error.h"
#include "opal/util/proc.h"
#include "opal/util/show_help.h"

#include "btl_usnic.h"
#include "btl_usnic_channel.h"
#include "btl_usnic_endpoint.h"
#include "btl_usnic_module.h"

int opal_btl_usnic_channel_init(opal_btl_usnic_module_t *module, int index, int sd_num,
                                int rd_num, int cq_num, opal_btl_usnic_channel_t *cq_of,
                                uint32_t mtu)
{
    opal_btl_usnic_channel_t *chan = &module->channels[index];
    opal_btl_usnic_chan_req_t req = {.dev_name = module->dev_name, .port_num = module->port_num,
                                     .qkey = usnic_component.qkey, .sd_num = sd_num,
                                     .rd_num = rd_num, .cq_num = cq_num, .mtu = mtu};
    opal_btl_usnic_chan_info_t info;
    int rc;

    memset(chan, 0, sizeof(*chan));
    chan->index = index;
    chan->mtu = mtu;
    chan->repost_tail = &chan->repost_head;
    OBJ_CONSTRUCT(&chan->recv_segs, opal_free_list_t);

    rc = module->ops->chan_create(module->dev, module->pd, &req,
                                  NULL != cq_of ? cq_of->hw : NULL, &info, &chan->hw);
    if (OPAL_SUCCESS != rc) {
        return rc;
    }
    chan->qp_num = info.qp_num;
    chan->sd_num = chan->sd_wqe = info.sd_num;
    chan->rd_num = info.rd_num;
    chan->max_inline = info.max_inline;
    chan->max_send_sge = info.max_send_sge;

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
        opal_btl_usnic_channel_queue_recv(chan, rseg);
    }
    rc = opal_btl_usnic_channel_repost(module, index);
    if (OPAL_SUCCESS != rc) {
        return rc;
    }
    return module->ops->chan_start(chan->hw);
}

void opal_btl_usnic_channel_fini(opal_btl_usnic_module_t *module, int index)
{
    opal_btl_usnic_channel_t *chan = &module->channels[index];

    if (NULL != chan->hw) {
        module->ops->chan_destroy(chan->hw);
        chan->hw = NULL;
    }
    OBJ_DESTRUCT(&chan->recv_segs);
}

int opal_btl_usnic_channel_repost(opal_btl_usnic_module_t *module, int channel)
{
    opal_btl_usnic_channel_t *chan = &module->channels[channel];
    int rc;

    if (NULL == chan->repost_head) {
        return OPAL_SUCCESS;
    }
    *chan->repost_tail = NULL;
    rc = module->ops->post_recv(chan->hw, chan->repost_head);
    if (OPAL_UNLIKELY(OPAL_SUCCESS != rc)) {
        return rc;
    }
    module->stats.num_recv_reposts += chan->repost_count;
    chan->repost_head = NULL;
    chan->repost_tail = &chan->repost_head;
    chan->repost_count = 0;
    return OPAL_SUCCESS;
}
