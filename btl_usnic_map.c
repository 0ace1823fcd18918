/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 * $COPYRIGHT$
 *
 * Connectivity map: with btl_usnic_connectivity_map=<prefix>, each process
 * writes which devices it uses and which peer interfaces each of them
 * reaches, to <prefix>-<host>.pid<pid>.job<jobid>.mcwrank<vpid>.txt.
 */

#include "opal_config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "opal/util/proc.h"
#include "opal/util/show_help.h"

#include "btl_usnic.h"
#include "btl_usnic_map.h"
#include "btl_usnic_module.h"
#include "btl_usnic_proc.h"
#include "btl_usnic_util.h"

static int cmp_modules(const void *a, const void *b)
{
    const opal_btl_usnic_module_t *const *x = a, *const *y = b;
    return strcmp((*x)->dev_name, (*y)->dev_name);
}

static int cmp_procs(const void *a, const void *b)
{
    const opal_btl_usnic_proc_t *const *x = a, *const *y = b;
    uint32_t vx = (*x)->proc_opal->proc_name.vpid, vy = (*y)->proc_opal->proc_name.vpid;
    return vx < vy ? -1 : vx > vy;
}

void opal_btl_usnic_write_connectivity_map(void)
{
    opal_btl_usnic_component_t *c = &usnic_component;
    const opal_process_name_t *me = &opal_proc_local_get()->proc_name;
    opal_btl_usnic_module_t **mods = NULL;
    opal_btl_usnic_proc_t **procs = NULL, *p;
    size_t nprocs = 0, i = 0;
    char path[4096], ip[32], mac[24];
    FILE *f;

    if (NULL == c->connectivity_map_prefix || 0 == c->num_modules) {
        return;
    }
    snprintf(path, sizeof(path), "%s-%s.pid%d.job%u.mcwrank%u.txt", c->connectivity_map_prefix,
             opal_process_info.nodename, (int) getpid(), me->jobid, me->vpid);
    f = fopen(path, "w");
    if (NULL == f) {
        opal_show_help("help-mpi-btl-usnic.txt", "cannot write to map file", true,
                       opal_process_info.nodename, path, strerror(errno));
        return;
    }
    nprocs = opal_list_get_size(&c->procs);
    mods = calloc(c->num_modules, sizeof(*mods));
    procs = calloc(nprocs > 0 ? nprocs : 1, sizeof(*procs));
    if (NULL == mods || NULL == procs) {
        goto out;
    }
    /* Sorted, so maps of different runs and processes compare easily. */
    for (int m = 0; m < c->num_modules; ++m) {
        mods[m] = &c->modules[m];
    }
    qsort(mods, c->num_modules, sizeof(*mods), cmp_modules);
    OPAL_LIST_FOREACH (p, &c->procs, opal_btl_usnic_proc_t) {
        procs[i++] = p;
    }
    qsort(procs, nprocs, sizeof(*procs), cmp_procs);

    for (int m = 0; m < c->num_modules; ++m) {
        opal_btl_usnic_snprintf_ipv4(ip, sizeof(ip), mods[m]->if_ipv4, mods[m]->if_prefix);
        opal_btl_usnic_snprintf_mac(mac, sizeof(mac), mods[m]->if_mac);
        fprintf(f, "device=%s,interface=%s,ip=%s,mac=%s,mtu=%d\n", mods[m]->dev_name,
                mods[m]->if_name, ip, mac, mods[m]->if_mtu);
    }
    for (i = 0; i < nprocs; ++i) {
        const char *host = opal_get_proc_hostname(procs[i]->proc_opal);
        bool first = true;

        fprintf(f, "peer=%u,hostname=%s,", procs[i]->proc_opal->proc_name.vpid,
                NULL != host ? host : "(unknown)");
        for (int m = 0; m < c->num_modules; ++m) {
            int mi = (int)(mods[m] - c->modules);
            opal_btl_usnic_endpoint_t *ep = procs[i]->endpoints[mi];
            if (NULL == ep) {
                continue;
            }
            opal_btl_usnic_snprintf_ipv4(ip, sizeof(ip), ep->remote.ipv4_addr, ep->remote.prefix);
            opal_btl_usnic_snprintf_mac(mac, sizeof(mac), ep->remote.mac);
            fprintf(f, "%sdevice=%s@peer_ip=%s@peer_mac=%s", first ? "" : ",", mods[m]->dev_name,
                    ip, mac);
            first = false;
        }
        fprintf(f, "\n");
    }
out:
    free(mods);
    free(procs);
    fclose(f);
}
