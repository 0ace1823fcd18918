/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 * $COPYRIGHT$
 * SPDX-License-Identifier: BSD-3-Clause
 *
 * MCA parameters: every knob of the component, with its description and
 * info level, plus the base BTL values (exclusivity, limits, flags, ...)
 * registered through the BTL base so users override them the usual way.
 */

#include "opal_config.h"

#include <limits.h>
#include <stdint.h>
#include <stdio.h>

#include "opal/mca/base/mca_base_var.h"
#include "opal/util/proc.h"
#include "opal/util/show_help.h"

#include "btl_usnic.h"
#include "btl_usnic_module.h"
#include "btl_usnic_rdma.h"
#include "btl_usnic_wire.h"

/* Eager limit with one device; with several it drops unless the user set it. */
#define USNIC_DFLT_EAGER_LIMIT_1DEV (150 * 1024)
#define USNIC_DFLT_RNDV_EAGER_LIMIT 500

static int reg_int(const char *name, const char *desc, int dflt, int *storage,
                   mca_base_var_info_lvl_t level)
{
    *storage = dflt;
    return mca_base_component_var_register(&usnic_component.super.btl_version, name, desc,
                                           MCA_BASE_VAR_TYPE_INT, NULL, 0, 0, level,
                                           MCA_BASE_VAR_SCOPE_READONLY, storage);
}

static int reg_bool(const char *name, const char *desc, bool dflt, bool *storage,
                    mca_base_var_info_lvl_t level)
{
    *storage = dflt;
    return mca_base_component_var_register(&usnic_component.super.btl_version, name, desc,
                                           MCA_BASE_VAR_TYPE_BOOL, NULL, 0, 0, level,
                                           MCA_BASE_VAR_SCOPE_READONLY, storage);
}

static int reg_string(const char *name, const char *desc, const char *dflt, char **storage,
                      mca_base_var_info_lvl_t level)
{
    *storage = (char *) dflt;
    return mca_base_component_var_register(&usnic_component.super.btl_version, name, desc,
                                           MCA_BASE_VAR_TYPE_STRING, NULL, 0, 0, level,
                                           MCA_BASE_VAR_SCOPE_READONLY, storage);
}

/* btl_usnic_transport, by name: what carries the datagrams. */
static void reg_transport(opal_btl_usnic_component_t *c)
{
    static const mca_base_var_enum_value_t values[] = {
        {USNIC_TRANSPORT_AUTO, "auto"},
        {USNIC_TRANSPORT_VERBS, "verbs"},
        {USNIC_TRANSPORT_UDP, "udp"},
        {0, NULL},
    };
    mca_base_var_enum_t *e = NULL;

    c->transport = USNIC_TRANSPORT_AUTO;
    if (OPAL_SUCCESS != mca_base_var_enum_create("btl_usnic_transport", values, &e)) {
        return;
    }
    mca_base_component_var_register(
        &usnic_component.super.btl_version, "transport",
        "What carries usnic's datagrams: \"verbs\" (UD queue pairs of RoCE v2 devices), "
        "\"udp\" (kernel UDP sockets on every IPv4 interface but the loopback: runs on any IP "
        "network, without kernel bypass), or \"auto\" (verbs devices where there are any; "
        "UDP only when asked for, so that usnic never takes over plain IP networks from "
        "btl/tcp unasked). Every process of a job must use the same",
        MCA_BASE_VAR_TYPE_INT, e, 0, 0, OPAL_INFO_LVL_2, MCA_BASE_VAR_SCOPE_READONLY,
        &c->transport);
    OBJ_RELEASE(e);
}

/* Report a bad value unless ok; returns ok. */
static bool check_value(bool ok, const char *name, int value, const char *rule)
{
    char buf[32];

    if (!ok) {
        snprintf(buf, sizeof(buf), "%d", value);
        opal_show_help("help-mpi-btl-usnic.txt", "invalid param value", true,
                       opal_process_info.nodename, name, buf, rule);
    }
    return ok;
}

static bool check_range(const char *name, int value, int min, int max, const char *rule)
{
    return check_value(value >= min && value <= max, name, value, rule);
}

/* Queue depths: -1 (automatic) or a positive count. */
static bool check_depth(const char *name, int value)
{
    return check_value(-1 == value || value > 0, name, value, "-1 or more than 0");
}

int opal_btl_usnic_component_register(void)
{
    opal_btl_usnic_component_t *c = &usnic_component;
    mca_btl_base_module_t *base = &opal_btl_usnic_module_template.super;
    bool ok = true;

    reg_transport(c);
    reg_int("max_btls", "Maximum number of usnic devices (ports) to use (0 = all)", 0,
            &c->max_btls, OPAL_INFO_LVL_2);
    reg_string("if_include",
               "Comma-separated list of devices to use: verbs device names (e.g. rxe0), "
               "netdev names, or IPv4 networks as a.b.c.d/n; mutually exclusive with "
               "btl_usnic_if_exclude",
               NULL, &c->if_include, OPAL_INFO_LVL_1);
    reg_string("if_exclude",
               "Comma-separated list of devices NOT to use: verbs device names, netdev names, "
               "or IPv4 networks as a.b.c.d/n; mutually exclusive with btl_usnic_if_include",
               NULL, &c->if_exclude, OPAL_INFO_LVL_1);
    reg_int("stats", "Print transport statistics every this many seconds (0 = never; "
            "a final report is printed at finalize when > 0)",
            0, &c->stats_frequency, OPAL_INFO_LVL_4);
    reg_bool("stats_relative", "If true, each statistics report shows the change since the "
             "previous one (counters are reset after each print)",
             false, &c->stats_relative, OPAL_INFO_LVL_4);
    reg_int("want_numa_device_assignment",
            "If 1, rate devices that are far from this process's NUMA node as slower, so "
            "near devices are preferred (needs the process to be bound); 0 = off",
            1, &c->want_numa_device_assignment, OPAL_INFO_LVL_5);
    reg_int("gid_index", "GID table index to use on every device (-1 = the first IPv4 "
            "RoCE v2 GID)", -1, &c->gid_index, OPAL_INFO_LVL_5);
    reg_int("sd_num", "Send queue depth of the data channel (-1 = min(1024, device maximum))",
            -1, &c->sd_num, OPAL_INFO_LVL_5);
    reg_int("rd_num", "Receive queue depth of the data channel (-1 = min(1024, device "
            "maximum))", -1, &c->rd_num, OPAL_INFO_LVL_5);
    reg_int("max_send_window", "Most data segments sent to one peer and not yet acknowledged "
            "(the peer's receive buffers, shared among its peers, bound it too).  The window "
            "starts at 256 and follows the path's bandwidth-delay product up to this; its send "
            "table is held only while data is in flight, so a large value costs no memory "
            "per peer", USNIC_TX_WINDOW_MAX, &c->max_send_window, OPAL_INFO_LVL_5);
    reg_int("prio_sd_num", "Send queue depth of the priority channel (-1 = 127, capped at "
            "the device maximum)", -1, &c->prio_sd_num, OPAL_INFO_LVL_5);
    reg_int("prio_rd_num", "Receive queue depth of the priority channel, where ACKs arrive "
            "(-1 = half the data channel's receive depth, at least 127, on a verbs device, "
            "which drops a datagram that finds no buffer; 127 in UDP mode, where it waits; "
            "capped at the device maximum)", -1, &c->prio_rd_num, OPAL_INFO_LVL_5);
    reg_int("cq_num", "Entries of the completion queue the two channels share (-1 = the sum "
            "of their send and receive depths)", -1, &c->cq_num, OPAL_INFO_LVL_5);
    reg_int("retrans_timeout", "Microseconds before an unacknowledged segment is "
            "retransmitted", 5000, &c->retrans_timeout, OPAL_INFO_LVL_5);
    reg_int("max_resends_per_iteration", "Most segments retransmitted in one progress pass, "
            "so receives (and thus ACKs) keep being processed during a retransmit storm",
            16, &c->max_resends_per_iteration, OPAL_INFO_LVL_5);
    reg_bool("congestion_control", "If true, a peer's send window shrinks when segments to it "
             "are lost (halved at a fast retransmit, to 4 segments at a retransmit timeout) and "
             "grows back as ACKs arrive (AIMD); if false, only the peer's receive buffers "
             "limit it", true, &c->congestion_control, OPAL_INFO_LVL_5);
    reg_bool("timer_probe", "If true, a retransmit timeout on a device whose network lost "
             "nothing in the last 10 seconds sends a probe (a small ACK that asks for an answer at "
             "once) instead of resending: the peer's answer shows whether the segment arrived "
             "(a late receiver, as a descheduled one, resends nothing) or is lost (resent at "
             "once); each timeout without an answer probes again, the seventh resends; if "
             "false, every timeout resends", true, &c->timer_probe, OPAL_INFO_LVL_5);
    reg_bool("zero_copy", "If true, the data a GET reads (Open MPI's RGET protocol for large "
             "messages, MPI_Get) is sent from where it lies, in memory registered with the "
             "device, instead of being copied into send buffers (devices that gather a send "
             "from two buffers; chunks of at least 1024 bytes)", true, &c->zero_copy,
             OPAL_INFO_LVL_5);
    reg_int("ack_iteration_delay", "Progress passes to wait before sending a standalone ACK, "
            "giving it a chance to ride on a data packet instead", 4,
            &c->ack_iteration_delay, OPAL_INFO_LVL_5);
    reg_int("priority_limit", "Largest message (bytes) sent on the priority channel fast "
            "path (0 = as large as the priority channel allows)", 0, &c->priority_limit,
            OPAL_INFO_LVL_5);
    reg_int("pack_lazy_threshold", "Non-contiguous messages of at least this many bytes are "
            "packed chunk by chunk as they are sent, smaller ones all at once "
            "(-1 = always at once, 0 = always chunk by chunk)", 16384,
            &c->pack_lazy_threshold, OPAL_INFO_LVL_5);
    reg_int("arp_timeout", "Seconds to wait for address resolution (ARP) of peers before "
            "giving up on them", 10, &c->arp_timeout, OPAL_INFO_LVL_5);
    reg_bool("show_route_failures", "Show a warning when a peer cannot be reached through a "
             "usnic device", true, &c->show_route_failures, OPAL_INFO_LVL_3);
    reg_int("max_short_packets", "Warn once after this many truncated or malformed packets "
            "have been dropped (0 = never warn)", 25, &c->max_short_packets, OPAL_INFO_LVL_5);
    reg_int("peer_timeout", "Seconds a peer may leave outstanding data unacknowledged, "
            "without showing it is alive otherwise, before it is declared unreachable and the "
            "job is aborted, between 1 and 1.25 times this after its last sign of life "
            "(0 = retransmit forever). From a quarter of it on, the peer is pinged over the "
            "connectivity checker's UDP sockets; a peer process busy outside MPI answers from "
            "its progress thread and is waited for. With btl_usnic_connectivity_check 0 there "
            "are no pings, and a peer computing for longer than this is declared dead",
            30, &c->peer_timeout, OPAL_INFO_LVL_4);
    reg_bool("progress_thread", "If true, a thread of usnic's own progresses it every "
             "btl_usnic_progress_thread_interval microseconds, so that ACKs are answered, "
             "retransmissions sent and transfers move on while the application computes "
             "outside MPI. It sleeps in between; awake it costs some CPU (see docs/usage.md). "
             "It also turns on Open MPI's internal locking, as for MPI_THREAD_MULTIPLE",
             false, &c->progress_thread, OPAL_INFO_LVL_4);
    reg_int("progress_thread_interval", "Microseconds the progress thread sleeps between its "
            "passes (with btl_usnic_progress_thread); keep it well below "
            "btl_usnic_retrans_timeout, or computing receivers make their peers retransmit",
            1000, &c->progress_thread_interval, OPAL_INFO_LVL_5);
    reg_int("yield_when_idle", "Whether a progress pass that found nothing yields the CPU "
            "(sched_yield): -1 = on devices whose work the host's kernel does in threads of "
            "its own, on the CPUs the processes poll (Soft-RoCE), 0 = never, 1 = always. "
            "Polling processes otherwise delay that work; a hardware NIC needs no CPU",
            -1, &c->yield_when_idle, OPAL_INFO_LVL_5);
    reg_string("rcache", "Registration cache used for send and receive buffers", "grdma",
               &c->rcache_name, OPAL_INFO_LVL_5);
    reg_string("mpool_hints", "Hints for choosing the memory pool of registered buffers",
               NULL, &c->mpool_hints, OPAL_INFO_LVL_5);
    reg_bool("connectivity_check", "Check with UDP pings that every peer interface answers, "
             "with small and MTU-sized datagrams, and abort with a clear message if not",
             true, &c->connectivity_enabled, OPAL_INFO_LVL_3);
    reg_int("connectivity_ack_timeout", "Milliseconds to wait for a connectivity ping's reply "
            "before sending it again", 250, &c->connectivity_ack_timeout, OPAL_INFO_LVL_3);
    reg_int("connectivity_error_num_retries", "Connectivity ping rounds before a peer "
            "interface is declared unreachable", 40, &c->connectivity_num_retries,
            OPAL_INFO_LVL_3);
    reg_string("connectivity_map", "If set, each process writes the devices it uses and the "
               "peer interfaces it reaches to <prefix>-<host>.pid<pid>.job<jobid>.mcwrank"
               "<rank>.txt", NULL, &c->connectivity_map_prefix, OPAL_INFO_LVL_3);

    ok &= check_range("btl_usnic_max_btls", c->max_btls, 0, INT_MAX, "0 or more");
    ok &= check_range("btl_usnic_stats", c->stats_frequency, 0, INT_MAX, "0 or more");
    ok &= check_range("btl_usnic_gid_index", c->gid_index, -1, 255, "-1, or 0 to 255");
    ok &= check_depth("btl_usnic_sd_num", c->sd_num);
    ok &= check_depth("btl_usnic_rd_num", c->rd_num);
    ok &= check_range("btl_usnic_max_send_window", c->max_send_window, USNIC_MIN_WINDOW_SIZE,
                      USNIC_WINDOW_SIZE, "64 to 4096 segments");
    ok &= check_depth("btl_usnic_prio_sd_num", c->prio_sd_num);
    ok &= check_depth("btl_usnic_prio_rd_num", c->prio_rd_num);
    ok &= check_depth("btl_usnic_cq_num", c->cq_num);
    ok &= check_range("btl_usnic_retrans_timeout", c->retrans_timeout, 100, 60000000,
                      "100 to 60000000 microseconds");
    ok &= check_range("btl_usnic_max_resends_per_iteration", c->max_resends_per_iteration, 1,
                      INT_MAX, "1 or more");
    ok &= check_range("btl_usnic_ack_iteration_delay", c->ack_iteration_delay, 0, INT_MAX,
                      "0 or more");
    ok &= check_range("btl_usnic_yield_when_idle", c->yield_when_idle, -1, 1,
                      "-1 (on devices the host's kernel drives), 0 or 1");
    ok &= check_range("btl_usnic_priority_limit", c->priority_limit, 0, INT_MAX, "0 or more");
    ok &= check_range("btl_usnic_pack_lazy_threshold", c->pack_lazy_threshold, -1, INT_MAX,
                      "-1 or more");
    ok &= check_range("btl_usnic_arp_timeout", c->arp_timeout, 1, 3600, "1 to 3600 seconds");
    ok &= check_range("btl_usnic_max_short_packets", c->max_short_packets, 0, INT_MAX,
                      "0 or more");
    ok &= check_range("btl_usnic_peer_timeout", c->peer_timeout, 0, 86400, "0 to 86400 seconds");
    ok &= check_range("btl_usnic_progress_thread_interval", c->progress_thread_interval, 10,
                      1000000, "10 to 1000000 microseconds");
    ok &= check_range("btl_usnic_connectivity_ack_timeout", c->connectivity_ack_timeout, 1,
                      600000, "1 to 600000 milliseconds");
    ok &= check_range("btl_usnic_connectivity_error_num_retries", c->connectivity_num_retries,
                      1, INT_MAX, "1 or more");
    ok &= check_range("btl_usnic_want_numa_device_assignment",
                      c->want_numa_device_assignment, 0, 1, "0 or 1");
    /* A delayed ACK leaves well before the shortest timer of a sender. */
    c->ack_hold_us = c->retrans_timeout / 8.0;
    c->away_us = c->retrans_timeout / 2.0;

    /* Base BTL values: defaults here, registered (and overridable) as
     * btl_usnic_exclusivity, btl_usnic_eager_limit, ... by the BTL base. */
    base->btl_exclusivity = MCA_BTL_EXCLUSIVITY_DEFAULT;
    base->btl_latency = 4;
    base->btl_bandwidth = 0;
    base->btl_eager_limit = USNIC_DFLT_EAGER_LIMIT_1DEV;
    base->btl_rndv_eager_limit = USNIC_DFLT_RNDV_EAGER_LIMIT;
    base->btl_max_send_size = USNIC_DFLT_EAGER_LIMIT_1DEV;
    /* GET and atomics are emulated too (btl_usnic_rdma.c): osc/rdma needs
     * them, and Debian's Open MPI turns osc/pt2pt off. */
    base->btl_flags = MCA_BTL_FLAGS_SEND | MCA_BTL_FLAGS_SEND_INPLACE | MCA_BTL_FLAGS_PUT |
                      MCA_BTL_FLAGS_GET | MCA_BTL_FLAGS_ATOMIC_OPS | MCA_BTL_FLAGS_ATOMIC_FOPS |
                      MCA_BTL_FLAGS_SINGLE_ADD_PROCS;
    base->btl_atomic_flags = USNIC_RDMA_ATOMIC_FLAGS;
    base->btl_put_limit = UINT32_MAX;
    base->btl_put_alignment = 0;
    base->btl_get_limit = USNIC_RDMA_MAX_GET;
    base->btl_get_alignment = 0;
    /* No size of PUT or GET needs its local buffer registered (usnic copies
     * it): osc/rdma then hands over the user's buffer instead of copying it
     * through a bounce buffer of its own, which it registers with the BTL
     * and, in Open MPI 4.1 and 5.0, never returns when the window is freed
     * (32 KiB lost per window that did a PUT or GET). */
    base->btl_put_local_registration_threshold = SIZE_MAX;
    base->btl_get_local_registration_threshold = SIZE_MAX;
    if (OPAL_SUCCESS != mca_btl_base_param_register(&usnic_component.super.btl_version, base)) {
        return OPAL_ERROR;
    }
    /* Sizes travel in 32-bit fields. */
    /* Receivers accept fragments up to the protocol's limit. */
    ok &= check_range("btl_usnic_eager_limit", base->btl_eager_limit > INT_MAX ? -1 :
                      (int) base->btl_eager_limit, 64, USNIC_MAX_FRAG_SIZE, "64 bytes to 1 MiB");
    ok &= check_range("btl_usnic_max_send_size", base->btl_max_send_size > INT_MAX ? -1 :
                      (int) base->btl_max_send_size, 64, USNIC_MAX_FRAG_SIZE,
                      "64 bytes to 1 MiB");
    if (base->btl_put_limit > UINT32_MAX) {
        base->btl_put_limit = UINT32_MAX;
    }
    if (0 == base->btl_get_limit || base->btl_get_limit > USNIC_RDMA_MAX_GET) {
        base->btl_get_limit = USNIC_RDMA_MAX_GET;
    }

    {
        int idx = mca_base_var_find("opal", "btl", "usnic", "eager_limit");
        mca_base_var_source_t source = MCA_BASE_VAR_SOURCE_DEFAULT;
        if (idx >= 0) {
            mca_base_var_get_value(idx, NULL, &source, NULL);
        }
        c->eager_limit_set_by_user = (MCA_BASE_VAR_SOURCE_DEFAULT != source);
    }

    return ok ? OPAL_SUCCESS : OPAL_ERR_BAD_PARAM;
}
