/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 * $COPYRIGHT$
 * SPDX-License-Identifier: BSD-3-Clause
 *
 * The component: open/close, device discovery and module creation at init,
 * the modex, and the progress function the BML registers.
 */

#include "opal_config.h"

#include <arpa/inet.h>
#include <dlfcn.h>
#include <ifaddrs.h>
#include <inttypes.h>
#include <libgen.h>
#include <net/if.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "opal/mca/base/mca_base_var.h"
#include "opal/mca/reachable/base/base.h"
#include "opal/util/if.h"
#include "opal/util/proc.h"
#include "opal/util/error.h"
#include "opal/util/show_help.h"

#include "btl_usnic.h"
#include "btl_usnic_connectivity.h"
#include "btl_usnic_module.h"
#include "btl_usnic_proc.h"
#include "btl_usnic_stats.h"
#include "btl_usnic_thread.h"
#include "btl_usnic_util.h"
#include "btl_usnic_device.h"

/* Eager limit when several devices share the traffic (unless set by the user). */
#define USNIC_DFLT_EAGER_LIMIT_NDEVS (25 * 1024)

static int usnic_component_open(void);
static int usnic_component_close(void);
static mca_btl_base_module_t **usnic_component_init(int *num_btls, bool progress_threads,
                                                    bool mpi_threads);

opal_btl_usnic_component_t mca_btl_usnic_component = {
    .super = {
        .btl_version = {
            MCA_BTL_DEFAULT_VERSION("usnic"),
            .mca_open_component = usnic_component_open,
            .mca_close_component = usnic_component_close,
            .mca_register_component_params = opal_btl_usnic_component_register,
        },
        .btl_data = {
            .param_field = MCA_BASE_METADATA_PARAM_CHECKPOINT,
        },
        .btl_init = usnic_component_init,
        .btl_progress = opal_btl_usnic_component_progress,
    },
};

/* Let help messages be found next to the component when it was installed
 * outside Open MPI's own tree (a user component path). */
static void add_help_dir(void)
{
    Dl_info info;
    if (0 != dladdr((void *) &mca_btl_usnic_component, &info) && NULL != info.dli_fname) {
        char *copy = strdup(info.dli_fname);
        if (NULL != copy) {
            opal_show_help_add_dir(dirname(copy));
            free(copy);
        }
    }
}

static int usnic_component_open(void)
{
    opal_btl_usnic_component_t *c = &usnic_component;

    c->output = opal_btl_base_framework.framework_output;
    c->num_modules = 0;
    c->modules = NULL;
    c->contexts = NULL;
    c->num_contexts = 0;
    c->filter = NULL;
    c->progress_ticks = 0;
    c->quiesced = false;
    c->dev_ops = USNIC_TRANSPORT_UDP == c->transport ? &opal_btl_usnic_udp_ops
                                                     : &opal_btl_usnic_verbs_ops;
    c->reachable_ready = false;
    OBJ_CONSTRUCT(&c->procs, opal_list_t);
    opal_btl_usnic_regs_init(&c->reg_table);
    c->regs = &c->reg_table;
    OBJ_CONSTRUCT(&c->lock, opal_recursive_mutex_t);
    add_help_dir();

    return mca_base_var_check_exclusive("opal", c->super.btl_version.mca_type_name,
                                        c->super.btl_version.mca_component_name, "if_include",
                                        c->super.btl_version.mca_type_name,
                                        c->super.btl_version.mca_component_name, "if_exclude");
}

static int usnic_component_close(void)
{
    opal_btl_usnic_component_t *c = &usnic_component;

    opal_btl_usnic_component_quiesce();
    if (c->reachable_ready) {
        (void) mca_base_framework_close(&opal_reachable_base_framework);
        c->reachable_ready = false;
    }
    OPAL_LIST_DESTRUCT(&c->procs);
    opal_btl_usnic_regs_fini(&c->reg_table);
    OBJ_DESTRUCT(&c->lock);
    for (int i = 0; i < c->num_contexts; ++i) {
        c->dev_ops->close(c->contexts[i].dev);
    }
    free(c->contexts);
    free(c->modules);
    opal_btl_usnic_free_filter(c->filter);
    c->contexts = NULL;
    c->num_contexts = 0;
    c->modules = NULL;
    c->filter = NULL;
    c->num_modules = 0;
    return OPAL_SUCCESS;
}

/* The prefix length of IPv4 address addr (network order) on kernel interface
 * kindex, from getifaddrs: OPAL's interface list holds one address per
 * interface name (it asks SIOCGIFADDR by name), so it never shows an
 * interface's second address. */
static bool ipv4_prefix_of(uint32_t addr, int kindex, uint32_t *prefix)
{
    struct ifaddrs *ifs, *ifa;
    bool found = false;

    if (0 != getifaddrs(&ifs)) {
        return false;
    }
    for (ifa = ifs; NULL != ifa && !found; ifa = ifa->ifa_next) {
        char name[IF_NAMESIZE];

        if (NULL == ifa->ifa_addr || AF_INET != ifa->ifa_addr->sa_family ||
            NULL == ifa->ifa_netmask ||
            ((struct sockaddr_in *) ifa->ifa_addr)->sin_addr.s_addr != addr) {
            continue;
        }
        /* an address label "eth0:1" names interface eth0 */
        snprintf(name, sizeof(name), "%.*s", (int) strcspn(ifa->ifa_name, ":"), ifa->ifa_name);
        if ((int) if_nametoindex(name) != kindex) {
            continue;
        }
        *prefix = (uint32_t) __builtin_popcount(
            ((struct sockaddr_in *) ifa->ifa_netmask)->sin_addr.s_addr);
        found = true;
    }
    freeifaddrs(ifs);
    return found;
}

/* Fill the netdev facts of a module from OPAL's interface list. */
static bool find_netdev(opal_btl_usnic_module_t *m, int kindex)
{
    static const uint8_t v4mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    uint32_t gid_ipv4;

    memcpy(&gid_ipv4, m->gid + 12, sizeof(gid_ipv4));
    for (int i = opal_ifbegin(); i >= 0; i = opal_ifnext(i)) {
        struct sockaddr_storage ss;
        struct sockaddr_in *sin = (struct sockaddr_in *) &ss;

        if (0 != opal_ifindextoaddr(i, (struct sockaddr *) &ss, sizeof(ss)) ||
            AF_INET != ss.ss_family) {
            continue;
        }
        /* The GID names its netdev (RoCE) or carries its address (usNIC). */
        if ((kindex > 0 && opal_ifindextokindex(i) != kindex) ||
            (kindex <= 0 && sin->sin_addr.s_addr != gid_ipv4)) {
            continue;
        }
        opal_ifindextoname(i, m->if_name, sizeof(m->if_name));
        m->if_kindex = opal_ifindextokindex(i);
        m->if_ipv4 = sin->sin_addr.s_addr;
        opal_ifindextomask(i, &m->if_prefix, sizeof(m->if_prefix));
        opal_ifindextomtu(i, &m->if_mtu);
        opal_ifindextomac(i, m->if_mac);
        /* A netdev may have several addresses: publish the GID's, with its
         * prefix, so that peers route and pair by what the device uses. */
        if (0 == memcmp(m->gid, v4mapped, sizeof(v4mapped)) && m->if_ipv4 != gid_ipv4) {
            if (!ipv4_prefix_of(gid_ipv4, m->if_kindex, &m->if_prefix)) {
                return false;
            }
            m->if_ipv4 = gid_ipv4;
        }
        return true;
    }
    return false;
}

static void remember_context(opal_btl_usnic_dev_t *dev)
{
    opal_btl_usnic_component_t *c = &usnic_component;
    opal_btl_usnic_context_t *grown;

    for (int i = 0; i < c->num_contexts; ++i) {
        if (c->contexts[i].dev == dev) {
            return;
        }
    }
    /* Grows only before any async event is armed (events must not move). */
    grown = realloc(c->contexts, (c->num_contexts + 1) * sizeof(*grown));
    if (NULL == grown) {
        c->dev_ops->close(dev);
        return;
    }
    c->contexts = grown;
    c->contexts[c->num_contexts].dev = dev;
    c->contexts[c->num_contexts].async_armed = false;
    ++c->num_contexts;
}

/* Publish one record per module; nothing at all when there is none, so
 * peers see us as unreachable rather than reading an empty record. */
static void modex_send(void)
{
    opal_btl_usnic_component_t *c = &usnic_component;
    usnic_modex_addr_t *recs;
    int rc;

    if (0 == c->num_modules) {
        return;
    }
    recs = calloc(c->num_modules, sizeof(*recs));
    if (NULL == recs) {
        return;
    }
    for (int i = 0; i < c->num_modules; ++i) {
        recs[i] = c->modules[i].local_addr;
    }
    OPAL_MODEX_SEND(rc, USNIC_MODEX_SCOPE, &c->super.btl_version, recs,
                    c->num_modules * sizeof(*recs));
    rc = usnic_modex_status(rc);
    free(recs);
    if (OPAL_SUCCESS != rc) {
        opal_show_help("help-mpi-btl-usnic.txt", "internal error during init", true,
                       opal_process_info.nodename, "(all devices)", "modex send",
                       opal_strerror(rc));
        return;
    }
    usnic_verbose(5, "%s: modex published for %d module(s)", opal_process_info.nodename,
                  c->num_modules);
}

static void stats_timer_cb(int fd, short flags, void *arg)
{
    opal_btl_usnic_module_t *module = arg;
    char prefix[16];
    struct timeval tv = {.tv_sec = usnic_component.stats_frequency, .tv_usec = 0};
    (void) fd;
    (void) flags;

    USNIC_LOCK();
    snprintf(prefix, sizeof(prefix), "%04d", ++module->stats_report_num);
    opal_btl_usnic_stats_print(module, prefix);
    opal_event_add(&module->stats_timer, &tv);
    USNIC_UNLOCK();
}

/* This process's sender id, its Q_Key and the progress clock. */
static bool init_identity(opal_btl_usnic_component_t *c)
{
    c->my_hashed_name = opal_btl_usnic_hash_name(&opal_proc_local_get()->proc_name);
    do {
        int err = opal_btl_usnic_random(&c->qkey, sizeof(c->qkey));
        if (0 != err) {
            opal_show_help("help-mpi-btl-usnic.txt", "no random numbers", true,
                           opal_process_info.nodename, "(all devices)", "the Q_Key",
                           strerror(err));
            return false;
        }
        c->qkey &= 0x7fffffffu;     /* high bit: controlled Q_Keys */
    } while (0 == c->qkey);
    {
        int err = opal_btl_usnic_random(c->conn_key, sizeof(c->conn_key));
        if (0 != err) {
            opal_show_help("help-mpi-btl-usnic.txt", "no random numbers", true,
                           opal_process_info.nodename, "(all devices)",
                           "the key of the connectivity messages", strerror(err));
            return false;
        }
    }
    c->coarse_time = opal_btl_usnic_now_us() / 1e6;
    c->progress_stamp_us = (int64_t)(c->coarse_time * 1e6);
    /* Test contract (docs/tests.md, "Test contracts"): t-rogue parses this line's fields. */
    usnic_verbose(10, "fact id host=%s pid=%d sender_id=0x%016" PRIx64, opal_process_info.nodename,
                  (int) getpid(), c->my_hashed_name);
    return true;
}

static void parse_filter(opal_btl_usnic_component_t *c)
{
    if (NULL != c->if_include) {
        c->filter = opal_btl_usnic_parse_ifex_str(c->if_include, "btl_usnic_if_include");
        c->filter_is_include = true;
    } else if (NULL != c->if_exclude) {
        c->filter = opal_btl_usnic_parse_ifex_str(c->if_exclude, "btl_usnic_if_exclude");
        c->filter_is_include = false;
    }
}

/* Make module m from a port: its netdev facts, the interface filter, then
 * the module's own set-up.  False if the port is not used. */
static bool module_from_port(opal_btl_usnic_component_t *c, opal_btl_usnic_module_t *m,
                             const opal_btl_usnic_port_t *port)
{
    char ip[32];

    *m = opal_btl_usnic_module_template;
    m->dev = port->dev;
    snprintf(m->dev_name, sizeof(m->dev_name), "%s", port->dev_name);
    m->port_num = port->port_num;
    m->gid_index = port->gid_index;
    memcpy(m->gid, port->gid, sizeof(m->gid));
    m->grh_ipv4 = port->grh_ipv4;
    m->port_mtu = port->port_mtu;
    m->link_speed_mbps = port->link_speed_mbps;
    if (!find_netdev(m, port->netdev_kindex)) {
        opal_show_help("help-mpi-btl-usnic.txt", "no netdev", true,
                       opal_process_info.nodename, m->dev_name, m->port_num,
                       m->gid_index);
        return false;
    }
    if (port->loopback && (NULL == c->filter || !c->filter_is_include)) {
        usnic_verbose(5, "%s: %s: the loopback, used only when btl_usnic_if_include names it",
                      opal_process_info.nodename, m->dev_name);
        return false;
    }
    /* Facts first, then the filter: networks need the prefix. */
    if (NULL != c->filter &&
        c->filter_is_include != opal_btl_usnic_filter_match(c->filter, m->dev_name,
                                                            m->if_name, m->if_ipv4,
                                                            m->if_prefix)) {
        usnic_verbose(5, "%s: %s: skipped by btl_usnic_%s", opal_process_info.nodename,
                      m->dev_name, c->filter_is_include ? "if_include" : "if_exclude");
        return false;
    }
    if (0 == m->super.btl_bandwidth) {
        m->super.btl_bandwidth = m->link_speed_mbps;
    }
    opal_btl_usnic_snprintf_ipv4(ip, sizeof(ip), m->if_ipv4, m->if_prefix);
    usnic_verbose(5, "%s: %s: opened, port %u, netdev %s %s, GID index %d, MTU %u",
                  opal_process_info.nodename, m->dev_name, m->port_num, m->if_name, ip,
                  m->gid_index, m->port_mtu);
    if (OPAL_SUCCESS != opal_btl_usnic_module_init(m)) {
        return false;
    }
    opal_btl_usnic_hwloc_rate_module(m);
    return true;
}

/* One module per usable port, up to btl_usnic_max_btls. */
static bool open_modules(opal_btl_usnic_component_t *c)
{
    opal_btl_usnic_port_t *ports = NULL;
    int num_ports = 0;

    c->dev_ops->find_ports(&ports, &num_ports);
    if (0 == num_ports && USNIC_TRANSPORT_AUTO != c->transport) {
        opal_show_help("help-mpi-btl-usnic.txt", "no devices for transport", true,
                       opal_process_info.nodename,
                       opal_btl_usnic_transport_name(c->dev_ops->transport));
    }
    c->modules = calloc(num_ports > 0 ? num_ports : 1, sizeof(*c->modules));
    if (NULL == c->modules) {
        free(ports);
        return false;
    }
    for (int p = 0; p < num_ports; ++p) {
        remember_context(ports[p].dev);
        if (c->max_btls > 0 && c->num_modules >= c->max_btls) {
            usnic_verbose(5, "%s: %s: skipped, btl_usnic_max_btls (%d) reached",
                          opal_process_info.nodename, ports[p].dev_name, c->max_btls);
            continue;
        }
        if (module_from_port(c, &c->modules[c->num_modules], &ports[p])) {
            ++c->num_modules;
        }
    }
    free(ports);
    return true;
}

/* The progress callback when idle passes yield under the component lock,
 * and the one it wraps (without threads the callback yields itself). */
static mca_btl_base_component_progress_fn_t yielding_inner;

static int progress_yielding(void)
{
    int count = yielding_inner();

    if (0 == count) {
        sched_yield();
    }
    return count;
}

/* Idle passes yield the CPU (btl_usnic_yield_when_idle) where a module's
 * device needs the host's CPUs for its work: the kernel threads of a
 * software device get them too late from polling processes (docs/usage.md).
 * A callback of its own (around the locked one thread_init may have
 * chosen), so that no other device's pass pays for the test. */
static void choose_yield(opal_btl_usnic_component_t *c)
{
    bool yield = 1 == c->yield_when_idle;

    for (int i = 0; i < c->num_modules && -1 == c->yield_when_idle && !yield; ++i) {
        if (c->modules[i].limits.host_kernel_work) {
            usnic_verbose(5, "%s: %s: the host's kernel does this device's work: idle progress "
                          "passes yield the CPU (btl_usnic_yield_when_idle -1)",
                          opal_process_info.nodename, c->modules[i].dev_name);
            yield = true;
        }
    }
    if (!yield) {
        return;
    }
    if (1 == c->yield_when_idle) {
        usnic_verbose(5, "%s: idle progress passes yield the CPU (btl_usnic_yield_when_idle 1)",
                      opal_process_info.nodename);
    }
    if (opal_btl_usnic_component_progress == c->super.btl_progress) {
        c->super.btl_progress = opal_btl_usnic_component_progress_yielding;
        return;
    }
    yielding_inner = c->super.btl_progress;
    c->super.btl_progress = progress_yielding;
}

/* Several devices share the traffic: a smaller eager limit, unless set. */
static void apply_eager_limit_policy(opal_btl_usnic_component_t *c)
{
    if (c->num_modules <= 1 || c->eager_limit_set_by_user) {
        return;
    }
    for (int i = 0; i < c->num_modules; ++i) {
        c->modules[i].super.btl_eager_limit = USNIC_DFLT_EAGER_LIMIT_NDEVS;
        if (c->modules[i].super.btl_max_send_size > USNIC_DFLT_EAGER_LIMIT_NDEVS) {
            c->modules[i].super.btl_max_send_size = USNIC_DFLT_EAGER_LIMIT_NDEVS;
        }
    }
}

/* MPI_T variables, route lookups and async device events, once modules exist. */
static void start_services(opal_btl_usnic_component_t *c)
{
    if (c->num_modules > 0) {
        opal_btl_usnic_stats_register_pvars();
        /* Route lookups for pairing devices with the peers'; without them
         * pairing falls back to subnets and link speeds. */
        if (OPAL_SUCCESS == mca_base_framework_open(&opal_reachable_base_framework, 0)) {
            c->reachable_ready = (OPAL_SUCCESS == opal_reachable_base_select());
            if (!c->reachable_ready) {
                (void) mca_base_framework_close(&opal_reachable_base_framework);
            }
        }
    }

    /* Watch the devices that carry modules for port and device failures. */
    for (int i = 0; i < c->num_contexts; ++i) {
        for (int m = 0; m < c->num_modules; ++m) {
            if (c->modules[m].dev == c->contexts[i].dev) {
                c->contexts[i].async_armed = (OPAL_SUCCESS ==
                    c->dev_ops->async_start(c->contexts[i].dev, &c->contexts[i].async_ev));
                break;
            }
        }
    }
}

/* The array the BTL base gets (and frees); the periodic statistics start. */
static mca_btl_base_module_t **hand_out_btls(opal_btl_usnic_component_t *c)
{
    mca_btl_base_module_t **btls = calloc(c->num_modules > 0 ? c->num_modules : 1,
                                          sizeof(*btls));

    if (NULL == btls) {
        return NULL;
    }
    for (int i = 0; i < c->num_modules; ++i) {
        opal_btl_usnic_module_t *m = &c->modules[i];
        btls[i] = &m->super;
        if (c->stats_frequency > 0) {
            struct timeval tv = {.tv_sec = c->stats_frequency, .tv_usec = 0};
            opal_event_evtimer_set(opal_sync_event_base, &m->stats_timer, stats_timer_cb, m);
            opal_event_add(&m->stats_timer, &tv);
            m->stats_timer_armed = true;
        }
    }
    return btls;
}

static mca_btl_base_module_t **usnic_component_init(int *num_btls, bool progress_threads,
                                                    bool mpi_threads)
{
    opal_btl_usnic_component_t *c = &usnic_component;
    mca_btl_base_module_t **btls = NULL;
    (void) progress_threads;
    (void) mpi_threads;     /* opal_using_threads() says the same; see btl_usnic_thread.c */

    *num_btls = 0;
    /* (the callback as registered; init chooses its wrappers again) */
    c->super.btl_progress = opal_btl_usnic_component_progress;
    /* each module checks the locked-memory limit for what it registers */
    c->locked_planned = 0;
    if (!init_identity(c)) {
        return NULL;
    }
    parse_filter(c);
    if (open_modules(c)) {
        apply_eager_limit_policy(c);
        start_services(c);
        btls = hand_out_btls(c);
        if (NULL != btls) {
            opal_btl_usnic_thread_init();
            choose_yield(c);
        } else {
            c->num_modules = 0;
        }
    }
    modex_send();
    if (0 == c->num_modules) {
        usnic_verbose(5, "%s: no usable devices", opal_process_info.nodename);
        free(btls);
        return NULL;
    }
    *num_btls = c->num_modules;
    return btls;
}

void opal_btl_usnic_device_event(opal_btl_usnic_dev_t *dev, int port, bool fatal,
                                 const char *what, int code)
{
    opal_btl_usnic_module_t *m = NULL;
    const char *dev_name = "?";

    /* OPAL's event loop runs this outside the BTL's entry points. */
    USNIC_LOCK();
    for (int i = 0; i < usnic_component.num_modules; ++i) {
        opal_btl_usnic_module_t *cand = &usnic_component.modules[i];
        if (cand->dev == dev) {
            dev_name = cand->dev_name;
            if (NULL == m && (port <= 0 || cand->port_num == port)) {
                m = cand;
            }
        }
    }
    if (!fatal || NULL == m || m->dead) {
        usnic_verbose(5, "%s: %s: async event \"%s\" (port %d) ignored",
                      opal_process_info.nodename, dev_name, what, port);
        USNIC_UNLOCK();
        return;
    }
    opal_btl_usnic_show_fatal("async event", opal_process_info.nodename,
                   m->dev_name, m->if_name, what, code, port);
    opal_btl_usnic_module_fatal(m, NULL);
    USNIC_UNLOCK();
}

void opal_btl_usnic_component_quiesce(void)
{
    opal_btl_usnic_component_t *c = &usnic_component;

    if (c->quiesced) {
        return;
    }
    c->quiesced = true;
    opal_btl_usnic_thread_fini();
    opal_btl_usnic_connectivity_fini();
    for (int i = 0; i < c->num_modules; ++i) {
        opal_btl_usnic_module_t *m = &c->modules[i];
        if (m->stats_timer_armed) {
            opal_event_del(&m->stats_timer);
            m->stats_timer_armed = false;
        }
        if (c->stats_frequency > 0) {
            opal_btl_usnic_stats_print(m, "final");
        }
    }
    for (int i = 0; i < c->num_contexts; ++i) {
        if (c->contexts[i].async_armed) {
            c->dev_ops->async_stop(&c->contexts[i].async_ev);
            c->contexts[i].async_armed = false;
        }
    }
}
