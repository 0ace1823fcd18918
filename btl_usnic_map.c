/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 * $COPYRIGHT$
 * SPDX-License-Identifier: BSD-3-Clause
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
#include <sys/stat.h>
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

bool opal_btl_usnic_map_path(char *path, size_t size)
{
    const opal_process_name_t *me = &opal_proc_local_get()->proc_name;
    int n = snprintf(path, size, "%s-%s.pid%d.job%u.mcwrank%u.txt",
                     usnic_component.connectivity_map_prefix, opal_process_info.nodename,
                     (int) getpid(), me->jobid, me->vpid);
    return n > 0 && (size_t) n < size;
}

/* A new file next to path, under a name nobody can guess: the map goes
 * there and then replaces path by rename, which never follows a symlink
 * (the name of path is predictable, and its directory may be shared). */
static FILE *open_temp(const char *path, char *tmp, size_t size)
{
    FILE *f;
    int fd, n = snprintf(tmp, size, "%s.XXXXXX", path);

    if (n < 0 || (size_t) n >= size) {
        errno = ENAMETOOLONG;
        return NULL;
    }
    fd = mkstemp(tmp);
    if (fd < 0) {
        return NULL;
    }
    if (0 != fchmod(fd, 0644) || NULL == (f = fdopen(fd, "w"))) {
        int err = errno;
        close(fd);
        unlink(tmp);
        errno = err;
        return NULL;
    }
    return f;
}

/* One peer's line: its endpoints, by the modules in mods order. */
static void write_peer(FILE *f, opal_btl_usnic_proc_t *proc, opal_btl_usnic_module_t **mods)
{
    opal_btl_usnic_component_t *c = &usnic_component;
    char ip[32], mac[24];
    bool first = true;

    fprintf(f, "peer=%u,hostname=%s,", proc->proc_opal->proc_name.vpid, proc->hostname);
    for (int m = 0; m < c->num_modules; ++m) {
        int mi = (int)(mods[m] - c->modules);
        opal_btl_usnic_endpoint_t *ep = proc->endpoints[mi];
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

void opal_btl_usnic_write_connectivity_map(void)
{
    opal_btl_usnic_component_t *c = &usnic_component;
    opal_btl_usnic_module_t **mods = NULL;
    opal_btl_usnic_proc_t **procs = NULL, *p;
    size_t nprocs = 0, i = 0;
    char path[4096], tmp[4096 + 8], ip[32], mac[24];
    int err = 0;
    FILE *f;

    if (NULL == c->connectivity_map_prefix || 0 == c->num_modules) {
        return;
    }
    if (!opal_btl_usnic_map_path(path, sizeof(path))) {
        opal_show_help("help-mpi-btl-usnic.txt", "cannot write to map file", true,
                       opal_process_info.nodename, c->connectivity_map_prefix,
                       strerror(ENAMETOOLONG));
        return;
    }
    f = open_temp(path, tmp, sizeof(tmp));
    if (NULL == f) {
        opal_show_help("help-mpi-btl-usnic.txt", "cannot write to map file", true,
                       opal_process_info.nodename, path, strerror(errno));
        return;
    }
    nprocs = opal_list_get_size(&c->procs);
    mods = calloc(c->num_modules, sizeof(*mods));
    procs = calloc(nprocs > 0 ? nprocs : 1, sizeof(*procs));
    if (NULL == mods || NULL == procs) {
        err = ENOMEM;
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

    /* Test contract (docs/tests.md, "Test contracts"): the VM tests read these lines. */
    for (int m = 0; m < c->num_modules; ++m) {
        opal_btl_usnic_snprintf_ipv4(ip, sizeof(ip), mods[m]->if_ipv4, mods[m]->if_prefix);
        opal_btl_usnic_snprintf_mac(mac, sizeof(mac), mods[m]->if_mac);
        fprintf(f, "device=%s,interface=%s,ip=%s,mac=%s,mtu=%d\n", mods[m]->dev_name,
                mods[m]->if_name, ip, mac, mods[m]->if_mtu);
    }
    for (i = 0; i < nprocs; ++i) {
        write_peer(f, procs[i], mods);
    }
out:
    free(mods);
    free(procs);
    if (0 == err && 0 != ferror(f)) {
        err = EIO;
    }
    if (0 != fclose(f) && 0 == err) {
        err = errno;
    }
    if (0 == err && 0 != rename(tmp, path)) {
        err = errno;
    }
    if (0 != err) {
        unlink(tmp);
        opal_show_help("help-mpi-btl-usnic.txt", "cannot write to map file", true,
                       opal_process_info.nodename, path, strerror(err));
    }
}
