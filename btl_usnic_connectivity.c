/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 * $COPYRIGHT$
 * SPDX-License-Identifier: BSD-3-Clause
 *
 * Connectivity checker; see btl_usnic_connectivity.h for the design.
 * Threads: checks are created on the main thread and then run on OPAL's
 * progress thread; the list of checks is shared under a mutex, and a
 * failure is handed back through opal_btl_usnic_connectivity_failed.
 * Liveness records are owned by their endpoint and listed under the same
 * mutex, so that the progress thread can find one by the answer's address.
 */

#include "opal_config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "opal/runtime/opal_progress_threads.h"
#include "opal/sys/atomic.h"
#include "opal/util/proc.h"
#include "opal/util/show_help.h"

#include "btl_usnic.h"
#include "btl_usnic_connectivity.h"
#include "btl_usnic_endpoint.h"
#include "btl_usnic_module.h"
#include "btl_usnic_proc.h"
#include "btl_usnic_util.h"

/* Room for the largest IPv4 header (60) plus UDP (8) below the MTU. */
#define USNIC_CONN_HDR_ROOM 68
#define USNIC_CONN_SMALL sizeof(usnic_conn_msg_t)
#define USNIC_CONN_BUF_SIZE 65536
/* Datagrams drained per wake-up of the progress thread: a flood on the
 * socket gives the thread's other events their turn (the event stays
 * readable, the drain goes on at the next wake-up). */
#define USNIC_CONN_DRAIN_BUDGET 64
/* IPv4, UDP, BTH, DETH and ICRC around a RoCE v2 UD payload. */
#define USNIC_ROCE_V2_OVERHEAD (20 + 8 + 12 + 8 + 4)

typedef struct {
    opal_list_item_t super;
    opal_event_t ev;                 /* start, then the retry timer */
    opal_btl_usnic_module_t *module;
    opal_proc_t *peer_proc;
    struct sockaddr_in peer;
    uint32_t sizes[2];               /* small, large */
    uint64_t nonces[2];              /* of the pings of each size, from getrandom */
    uint32_t key[4];                 /* the peer's (it authenticates pings and ACKs) */
    bool acked[2];
    int rounds;
    bool cancelled;
    char peer_ip[32];
    char peer_mac[24];
} usnic_conn_check_t;
OBJ_CLASS_INSTANCE(usnic_conn_check_t, opal_list_item_t, NULL, NULL);

struct opal_btl_usnic_live_t {
    opal_list_item_t super;
    opal_btl_usnic_module_t *module;
    struct sockaddr_in peer;
    uint32_t key[4];                 /* the peer's */
    uint64_t nonce_sent;             /* of the last ping (under conn_lock) */
    uint64_t nonce_answered;         /* of the last answer counted (under conn_lock) */
    bool listed;                     /* on conn_live (under conn_lock) */
    volatile int64_t answer_us;      /* the last answer, monotonic */
    volatile int64_t busy_us;        /* the last answer from a peer outside progress */
};
OBJ_CLASS_INSTANCE(opal_btl_usnic_live_t, opal_list_item_t, NULL, NULL);

volatile int32_t opal_btl_usnic_connectivity_failed = 0;

static opal_event_base_t *conn_evbase = NULL;
static pthread_mutex_t conn_lock = PTHREAD_MUTEX_INITIALIZER;
static opal_list_t conn_checks;
static opal_list_t conn_live;
static bool conn_checks_ready = false;
static usnic_conn_check_t *conn_failure = NULL;

/* A PING is sent padded to its size; every other message is a bare header
 * (an ACK names the size of the PING it answers), authenticated under key
 * (the pinged process's).  Returns 0 or the errno of sendto. */
static int send_msg(opal_btl_usnic_module_t *module, const struct sockaddr_in *to, uint8_t type,
                    uint32_t size, uint64_t nonce, const uint32_t key[4], void *buf)
{
    usnic_conn_msg_t *m = buf;
    size_t len = USNIC_CONN_PING == type ? size : sizeof(*m);
    int fd = module->conn_fd;

    memset(buf, 0, len);
    m->magic = USNIC_CONN_PING == type || USNIC_CONN_LIVE_PING == type ? USNIC_CONN_MAGIC_PING
                                                                       : USNIC_CONN_MAGIC_ACK;
    m->type = type;
    m->size = size;
    m->nonce = nonce;
    m->mac = usnic_conn_mac(key, m, module->if_ipv4,
                            htons((uint16_t) module->local_addr.connectivity_udp_port),
                            to->sin_addr.s_addr, to->sin_port);
    /* Losses (full socket buffer, EPERM under load) simply show up as
     * missing ACKs and are retried. */
    if (sendto(fd, buf, len, MSG_DONTWAIT, (const struct sockaddr *) to, sizeof(*to)) < 0) {
        return errno;
    }
    return 0;
}

/* The local kernel refused the large ping (EMSGSIZE): its route to the
 * peer has a smaller MTU than both interfaces.  That is how this host is
 * set up, not a broken path, so test what the route carries, as long as
 * that still holds usnic's largest datagram.  True if the ping got smaller. */
static bool fit_local_path_mtu(usnic_conn_check_t *c)
{
    int fd = socket(AF_INET, SOCK_DGRAM, 0), mtu = 0;
    socklen_t len = sizeof(mtu);
    bool ok;

    if (fd < 0) {
        return false;
    }
    ok = 0 == connect(fd, (const struct sockaddr *) &c->peer, sizeof(c->peer)) &&
         0 == getsockopt(fd, IPPROTO_IP, IP_MTU, &mtu, &len) &&
         mtu >= (int) c->module->local_addr.mtu + USNIC_ROCE_V2_OVERHEAD &&
         (uint32_t) mtu - USNIC_CONN_HDR_ROOM < c->sizes[1];
    close(fd);
    if (!ok) {
        return false;
    }
    /* Test contract (docs/tests.md, "Test contracts"): t-mtu parses this line's fields. The route
     * to the peer has a smaller MTU than the interfaces: large pings are cut to fit it. */
    usnic_verbose(5, "fact ping_cut host=%s dev=%s peer=%s route_mtu=%d from=%u to=%u",
                  opal_process_info.nodename, c->module->dev_name, c->peer_ip, mtu, c->sizes[1],
                  (uint32_t) mtu - USNIC_CONN_HDR_ROOM);
    c->sizes[1] = (uint32_t) mtu - USNIC_CONN_HDR_ROOM;
    return true;
}

static void send_pings(usnic_conn_check_t *c)
{
    for (int i = 0; i < 2; ++i) {
        if (!c->acked[i]) {
            int err = send_msg(c->module, &c->peer, USNIC_CONN_PING, c->sizes[i], c->nonces[i],
                               c->key, c->module->conn_send_buf);
            if (1 == i && EMSGSIZE == err && fit_local_path_mtu(c)) {
                send_msg(c->module, &c->peer, USNIC_CONN_PING, c->sizes[1], c->nonces[1], c->key,
                         c->module->conn_send_buf);
            }
        }
    }
}

static void arm_timer(usnic_conn_check_t *c);

static void timer_cb(int fd, short flags, void *arg)
{
    usnic_conn_check_t *c = arg;
    (void) fd;
    (void) flags;

    pthread_mutex_lock(&conn_lock);
    if (c->cancelled || (c->acked[0] && c->acked[1])) {
        pthread_mutex_unlock(&conn_lock);
        return;
    }
    if (++c->rounds > usnic_component.connectivity_num_retries) {
        if (NULL == conn_failure) {
            conn_failure = c;
            opal_atomic_wmb();
            opal_btl_usnic_connectivity_failed = 1;
        }
        pthread_mutex_unlock(&conn_lock);
        return;
    }
    send_pings(c);
    arm_timer(c);
    pthread_mutex_unlock(&conn_lock);
}

static void arm_timer(usnic_conn_check_t *c)
{
    struct timeval tv = {.tv_sec = usnic_component.connectivity_ack_timeout / 1000,
                         .tv_usec = (usnic_component.connectivity_ack_timeout % 1000) * 1000};
    opal_event_evtimer_set(conn_evbase, &c->ev, timer_cb, c);
    opal_event_add(&c->ev, &tv);
}

static void start_cb(int fd, short flags, void *arg)
{
    usnic_conn_check_t *c = arg;
    (void) fd;
    (void) flags;

    pthread_mutex_lock(&conn_lock);
    if (!c->cancelled) {
        send_pings(c);
        arm_timer(c);
    }
    pthread_mutex_unlock(&conn_lock);
}

/* Whether m came from from under key (the pinged process's) to this module. */
static bool authentic(opal_btl_usnic_module_t *module, const usnic_conn_msg_t *m,
                      const uint32_t key[4], const struct sockaddr_in *from)
{
    return m->mac == usnic_conn_mac(key, m, from->sin_addr.s_addr, from->sin_port,
                                    module->if_ipv4,
                                    htons((uint16_t) module->local_addr.connectivity_udp_port));
}

static inline uint64_t peer_key(uint32_t ip, uint16_t port)
{
    return (uint64_t) ip << 16 | port;
}

void opal_btl_usnic_connectivity_add_peer(opal_btl_usnic_module_t *module, uint32_t ip,
                                          uint16_t port)
{
    void *count = NULL;

    pthread_mutex_lock(&conn_lock);
    if (NULL != module->conn_peers) {
        (void) opal_hash_table_get_value_uint64(module->conn_peers, peer_key(ip, port), &count);
        (void) opal_hash_table_set_value_uint64(module->conn_peers, peer_key(ip, port),
                                                (void *) ((uintptr_t) count + 1));
    }
    pthread_mutex_unlock(&conn_lock);
}

void opal_btl_usnic_connectivity_remove_peer(opal_btl_usnic_module_t *module, uint32_t ip,
                                             uint16_t port)
{
    void *count = NULL;

    pthread_mutex_lock(&conn_lock);
    if (NULL != module->conn_peers &&
        OPAL_SUCCESS == opal_hash_table_get_value_uint64(module->conn_peers, peer_key(ip, port),
                                                         &count)) {
        if ((uintptr_t) count > 1) {
            (void) opal_hash_table_set_value_uint64(module->conn_peers, peer_key(ip, port),
                                                    (void *) ((uintptr_t) count - 1));
        } else {
            (void) opal_hash_table_remove_value_uint64(module->conn_peers, peer_key(ip, port));
        }
    }
    pthread_mutex_unlock(&conn_lock);
}

/* A PING or LIVE_PING: answered only if it comes from a peer's checker
 * socket and is authentic under this process's key (only the job's
 * processes have it: the modex); else counted. */
static void answer(opal_btl_usnic_module_t *module, const usnic_conn_msg_t *m, ssize_t n,
                   const struct sockaddr_in *from)
{
    usnic_conn_msg_t reply;
    uint32_t size = m->size;
    void *count = NULL;

    pthread_mutex_lock(&conn_lock);
    if (NULL != module->conn_peers) {
        (void) opal_hash_table_get_value_uint64(module->conn_peers, peer_key(from->sin_addr.s_addr,
                                                                             from->sin_port),
                                                &count);
    }
    pthread_mutex_unlock(&conn_lock);
    /* A PING counts only if it arrived whole: that is the MTU test. */
    if (NULL == count ||
        !(USNIC_CONN_PING == m->type ? m->size == (uint32_t) n
                                     : USNIC_CONN_LIVE_PING == m->type && sizeof(*m) == (size_t) n) ||
        !authentic(module, m, usnic_component.conn_key, from)) {
        ++module->stats.num_conn_refused;
        return;
    }
    if (USNIC_CONN_LIVE_PING == m->type) {
        int64_t idle_ms = ((int64_t) opal_btl_usnic_now_us() - usnic_component.progress_stamp_us) /
                          1000;
        size = idle_ms < 0 ? 0 : idle_ms > UINT32_MAX ? UINT32_MAX : (uint32_t) idle_ms;
    }
    send_msg(module, from, USNIC_CONN_PING == m->type ? USNIC_CONN_ACK : USNIC_CONN_LIVE_ACK, size,
             m->nonce, usnic_component.conn_key, &reply);
}

/* An ACK or LIVE_ACK: counted only for a ping outstanding to the peer at
 * that address, authentic under that peer's key; else counted as stray. */
static void record(opal_btl_usnic_module_t *module, const usnic_conn_msg_t *m, ssize_t n,
                   const struct sockaddr_in *from)
{
    bool counted = false;

    if (sizeof(*m) != (size_t) n) {
        ++module->stats.num_conn_stray;
        return;
    }
    pthread_mutex_lock(&conn_lock);
    if (USNIC_CONN_LIVE_ACK == m->type) {
        opal_btl_usnic_live_t *l;
        OPAL_LIST_FOREACH (l, &conn_live, opal_btl_usnic_live_t) {
            if (l->module == module && l->peer.sin_addr.s_addr == from->sin_addr.s_addr &&
                l->peer.sin_port == from->sin_port &&
                usnic_live_nonce_ok(m->nonce, l->nonce_sent, l->nonce_answered) &&
                authentic(module, m, l->key, from)) {
                int64_t now = (int64_t) opal_btl_usnic_now_us();
                l->nonce_answered = m->nonce;
                l->answer_us = now;
                if (m->size >= 1000 * usnic_peer_busy_idle(usnic_component.peer_timeout)) {
                    l->busy_us = now;
                }
                counted = true;
                break;
            }
        }
    } else if (USNIC_CONN_ACK == m->type) {
        usnic_conn_check_t *c;
        OPAL_LIST_FOREACH (c, &conn_checks, usnic_conn_check_t) {
            if (c->module == module && c->peer.sin_addr.s_addr == from->sin_addr.s_addr &&
                c->peer.sin_port == from->sin_port && authentic(module, m, c->key, from)) {
                for (int i = 0; i < 2; ++i) {
                    if (m->nonce == c->nonces[i] && m->size == c->sizes[i] && !c->acked[i]) {
                        c->acked[i] = counted = true;
                    }
                }
            }
        }
    }
    pthread_mutex_unlock(&conn_lock);
    if (!counted) {
        ++module->stats.num_conn_stray;
    }
}

/* Datagrams on a module's socket: answer pings, record answers; at most
 * USNIC_CONN_DRAIN_BUDGET per wake-up. */
static void recv_cb(int fd, short flags, void *arg)
{
    opal_btl_usnic_module_t *module = arg;
    uint8_t *buf = module->conn_recv_buf;
    (void) flags;

    for (int budget = USNIC_CONN_DRAIN_BUDGET; budget > 0; --budget) {
        struct sockaddr_in from;
        socklen_t fromlen = sizeof(from);
        const usnic_conn_msg_t *m = (const usnic_conn_msg_t *) buf;
        ssize_t n = recvfrom(fd, buf, USNIC_CONN_BUF_SIZE, MSG_DONTWAIT, (struct sockaddr *) &from,
                             &fromlen);
        if (n < 0) {
            return;
        }
        /* (the header of the first version, 16 bytes, tells pings and
         * answers apart; the two check the length) */
        if (n < 16 || AF_INET != from.sin_family) {
            ++module->stats.num_conn_refused;
        } else if (USNIC_CONN_MAGIC_PING == m->magic) {
            answer(module, m, n, &from);
        } else if (USNIC_CONN_MAGIC_ACK == m->magic) {
            record(module, m, n, &from);
        } else {
            ++module->stats.num_conn_refused;
        }
    }
    ++module->stats.num_conn_budget;
}

int opal_btl_usnic_connectivity_listen(opal_btl_usnic_module_t *module)
{
    struct sockaddr_in sin;
    socklen_t len = sizeof(sin);
    int fd, val = IP_PMTUDISC_DO;

    module->conn_fd = -1;
    module->conn_peers = NULL;
    module->local_addr.connectivity_udp_port = 0;
    if (!usnic_component.connectivity_enabled) {
        return OPAL_SUCCESS;
    }
    if (NULL == conn_evbase) {
        conn_evbase = opal_progress_thread_init(NULL);
        if (NULL == conn_evbase) {
            return OPAL_ERROR;
        }
        OBJ_CONSTRUCT(&conn_checks, opal_list_t);
        OBJ_CONSTRUCT(&conn_live, opal_list_t);
        conn_checks_ready = true;
    }
    module->conn_recv_buf = malloc(USNIC_CONN_BUF_SIZE);
    module->conn_send_buf = malloc(USNIC_CONN_BUF_SIZE);
    fd = socket(AF_INET, SOCK_DGRAM, 0);
    memset(&sin, 0, sizeof(sin));
    sin.sin_family = AF_INET;
    sin.sin_addr.s_addr = module->if_ipv4;
    if (NULL == module->conn_recv_buf || NULL == module->conn_send_buf || fd < 0 ||
        0 != setsockopt(fd, IPPROTO_IP, IP_MTU_DISCOVER, &val, sizeof(val)) ||
        0 != bind(fd, (struct sockaddr *) &sin, sizeof(sin)) ||
        0 != getsockname(fd, (struct sockaddr *) &sin, &len)) {
        opal_show_help("help-mpi-btl-usnic.txt", "connectivity socket failed", true,
                       opal_process_info.nodename, module->dev_name, module->if_name,
                       strerror(errno));
        if (fd >= 0) {
            close(fd);
        }
        free(module->conn_recv_buf);
        free(module->conn_send_buf);
        module->conn_recv_buf = module->conn_send_buf = NULL;
        return OPAL_ERROR;
    }
    module->conn_peers = OBJ_NEW(opal_hash_table_t);
    if (NULL == module->conn_peers ||
        OPAL_SUCCESS != opal_hash_table_init(module->conn_peers, 64)) {
        if (NULL != module->conn_peers) {
            OBJ_RELEASE(module->conn_peers);
        }
        close(fd);
        free(module->conn_recv_buf);
        free(module->conn_send_buf);
        module->conn_recv_buf = module->conn_send_buf = NULL;
        return OPAL_ERR_OUT_OF_RESOURCE;
    }
    module->conn_fd = fd;
    module->local_addr.connectivity_udp_port = ntohs(sin.sin_port);
    opal_event_set(conn_evbase, &module->conn_ev, fd, OPAL_EV_READ | OPAL_EV_PERSIST, recv_cb,
                   module);
    opal_event_add(&module->conn_ev, NULL);
    usnic_verbose(5, "%s: %s: connectivity checker listening on UDP port %u",
                  opal_process_info.nodename, module->dev_name,
                  module->local_addr.connectivity_udp_port);
    return OPAL_SUCCESS;
}

/* Take a module's checks (or all, for NULL) off the list and stop them. */
static void cancel_checks(opal_btl_usnic_module_t *module)
{
    opal_list_t doomed;
    usnic_conn_check_t *c, *next;

    if (!conn_checks_ready) {
        return;
    }
    OBJ_CONSTRUCT(&doomed, opal_list_t);
    pthread_mutex_lock(&conn_lock);
    OPAL_LIST_FOREACH_SAFE (c, next, &conn_checks, usnic_conn_check_t) {
        if (NULL == module || c->module == module) {
            c->cancelled = true;
            opal_list_remove_item(&conn_checks, &c->super);
            opal_list_append(&doomed, &c->super);
        }
    }
    pthread_mutex_unlock(&conn_lock);
    /* Outside the lock: deleting waits for a running callback, which may
     * itself be waiting for the lock. */
    OPAL_LIST_FOREACH_SAFE (c, next, &doomed, usnic_conn_check_t) {
        opal_event_del(&c->ev);
        opal_list_remove_item(&doomed, &c->super);
        /* the failed check stays for the report; fini releases it */
        if (c != conn_failure) {
            OBJ_RELEASE(c);
        }
    }
    OBJ_DESTRUCT(&doomed);
}

static void unlisten(opal_btl_usnic_module_t *module)
{
    cancel_checks(module);
    if (module->conn_fd >= 0) {
        opal_event_del(&module->conn_ev);
        close(module->conn_fd);
        module->conn_fd = -1;
    }
    free(module->conn_recv_buf);
    free(module->conn_send_buf);
    module->conn_recv_buf = module->conn_send_buf = NULL;
    pthread_mutex_lock(&conn_lock);
    if (NULL != module->conn_peers) {
        OBJ_RELEASE(module->conn_peers);
        module->conn_peers = NULL;
    }
    pthread_mutex_unlock(&conn_lock);
}

void opal_btl_usnic_connectivity_check(opal_btl_usnic_endpoint_t *ep)
{
    opal_btl_usnic_module_t *module = ep->module;
    usnic_conn_check_t *c;
    uint32_t large, mtu;

    ep->connectivity_checked = true;
    if (module->conn_fd < 0 || 0 == ep->remote.connectivity_udp_port) {
        return;
    }
    /* Interfaces with different MTUs (9000 and 9216, say) still carry
     * whatever the smaller one does, and usnic's datagrams are far smaller. */
    mtu = ep->remote.if_mtu < (uint32_t) module->if_mtu ? ep->remote.if_mtu
                                                         : (uint32_t) module->if_mtu;
    large = mtu > USNIC_CONN_HDR_ROOM + USNIC_CONN_SMALL ? mtu - USNIC_CONN_HDR_ROOM
                                                         : USNIC_CONN_SMALL + 1;
    if (large > USNIC_CONN_BUF_SIZE) {
        large = USNIC_CONN_BUF_SIZE;
    }
    c = OBJ_NEW(usnic_conn_check_t);
    if (NULL == c) {
        return;
    }
    /* (OBJ_NEW does not clear: a reused allocation held anything) */
    c->acked[0] = c->acked[1] = false;
    c->rounds = 0;
    c->cancelled = false;
    c->module = module;
    c->peer_proc = ep->proc->proc_opal;
    memset(&c->peer, 0, sizeof(c->peer));
    c->peer.sin_family = AF_INET;
    c->peer.sin_addr.s_addr = ep->remote.ipv4_addr;
    c->peer.sin_port = htons((uint16_t) ep->remote.connectivity_udp_port);
    c->sizes[0] = USNIC_CONN_SMALL;
    c->sizes[1] = large;
    memcpy(c->key, ep->remote.conn_key, sizeof(c->key));
    if (0 != opal_btl_usnic_random(c->nonces, sizeof(c->nonces))) {
        /* (init_identity got random numbers: this cannot fail for long) */
        OBJ_RELEASE(c);
        return;
    }
    opal_btl_usnic_snprintf_ipv4(c->peer_ip, sizeof(c->peer_ip), ep->remote.ipv4_addr,
                                 ep->remote.prefix);
    opal_btl_usnic_snprintf_mac(c->peer_mac, sizeof(c->peer_mac), ep->remote.mac);

    usnic_verbose(10, "%s: %s: checking the path to %s with %u and %u byte pings",
                  opal_process_info.nodename, module->dev_name, c->peer_ip, c->sizes[0],
                  c->sizes[1]);
    pthread_mutex_lock(&conn_lock);
    opal_list_append(&conn_checks, &c->super);
    pthread_mutex_unlock(&conn_lock);
    /* Hand the check to the progress thread. */
    opal_event_set(conn_evbase, &c->ev, -1, OPAL_EV_WRITE, start_cb, c);
    opal_event_active(&c->ev, OPAL_EV_WRITE, 1);
}

void opal_btl_usnic_liveness_ping(opal_btl_usnic_endpoint_t *ep)
{
    opal_btl_usnic_module_t *module = ep->module;
    usnic_conn_msg_t m;
    uint64_t nonce;

    if (module->conn_fd < 0 || 0 == ep->remote.connectivity_udp_port) {
        return;
    }
    if (NULL == ep->live) {
        opal_btl_usnic_live_t *l = OBJ_NEW(opal_btl_usnic_live_t);
        if (NULL == l) {
            return;
        }
        l->module = module;
        memset(&l->peer, 0, sizeof(l->peer));
        l->peer.sin_family = AF_INET;
        l->peer.sin_addr.s_addr = ep->remote.ipv4_addr;
        l->peer.sin_port = htons((uint16_t) ep->remote.connectivity_udp_port);
        l->answer_us = l->busy_us = 0;
        memcpy(l->key, ep->remote.conn_key, sizeof(l->key));
        if (0 != opal_btl_usnic_random(&l->nonce_sent, sizeof(l->nonce_sent))) {
            OBJ_RELEASE(l);
            return;
        }
        l->nonce_answered = l->nonce_sent;
        pthread_mutex_lock(&conn_lock);
        opal_list_append(&conn_live, &l->super);
        l->listed = true;
        pthread_mutex_unlock(&conn_lock);
        ep->live = l;
    }
    pthread_mutex_lock(&conn_lock);
    nonce = ++ep->live->nonce_sent;
    pthread_mutex_unlock(&conn_lock);
    /* A lost ping is a missing answer; the next one follows. */
    (void) send_msg(module, &ep->live->peer, USNIC_CONN_LIVE_PING, sizeof(m), nonce,
                    ep->live->key, &m);
}

double opal_btl_usnic_liveness_answer(opal_btl_usnic_endpoint_t *ep)
{
    return NULL == ep->live ? 0 : ep->live->answer_us / 1e6;
}

double opal_btl_usnic_liveness_busy(opal_btl_usnic_endpoint_t *ep)
{
    return NULL == ep->live ? 0 : ep->live->busy_us / 1e6;
}

const char *opal_btl_usnic_liveness_summary(opal_btl_usnic_endpoint_t *ep, double now,
                                            double timeout)
{
    if (ep->module->conn_fd < 0 || 0 == ep->remote.connectivity_udp_port) {
        return "not used (the connectivity checker is off)";
    }
    if (NULL == ep->live || now - ep->live->answer_us / 1e6 >= timeout) {
        return "no answer (peer process or host gone, or no path)";
    }
    return "answered by a peer process that runs MPI but acknowledges nothing";
}

void opal_btl_usnic_liveness_release(opal_btl_usnic_endpoint_t *ep)
{
    opal_btl_usnic_live_t *l = ep->live;

    if (NULL == l) {
        return;
    }
    pthread_mutex_lock(&conn_lock);
    if (l->listed) {
        opal_list_remove_item(&conn_live, &l->super);
        l->listed = false;
    }
    pthread_mutex_unlock(&conn_lock);
    ep->live = NULL;
    OBJ_RELEASE(l);
}

void opal_btl_usnic_connectivity_report(void)
{
    usnic_conn_check_t *c;
    opal_btl_usnic_module_t *m;
    char ip[32], mac[24];
    const char *topic;
    char *peer_host;

    opal_atomic_rmb();
    c = conn_failure;
    opal_btl_usnic_connectivity_failed = 0;
    if (NULL == c) {
        return;
    }
    m = c->module;
    opal_btl_usnic_snprintf_ipv4(ip, sizeof(ip), m->if_ipv4, m->if_prefix);
    opal_btl_usnic_snprintf_mac(mac, sizeof(mac), m->if_mac);
    peer_host = usnic_hostname_dup(c->peer_proc);
    topic = c->acked[0] ? "connectivity error: small ok, large bad"
            : c->acked[1] ? "connectivity error: small bad, large ok"
                          : "connectivity error: small bad, large bad";
    opal_btl_usnic_show_fatal(topic, opal_process_info.nodename,
                   m->dev_name, m->if_name, ip, mac, peer_host,
                   c->peer_ip, c->peer_mac, (int) c->sizes[0], (int) c->sizes[1],
                   usnic_component.connectivity_num_retries + 1,
                   usnic_component.connectivity_ack_timeout);
    free(peer_host);
    snprintf(m->fatal_cause, sizeof(m->fatal_cause), "connectivity check: %s from %s",
             c->acked[0] ? "no answer to large pings" : c->acked[1] ? "no answer to small pings"
                                                           : "no answer at all",
             c->peer_ip);
    opal_btl_usnic_module_fatal(m, c->peer_proc);
}

void opal_btl_usnic_connectivity_fini(void)
{
    if (NULL == conn_evbase) {
        return;
    }
    cancel_checks(NULL);
    /* Endpoints may outlive the checker: they free their records later. */
    pthread_mutex_lock(&conn_lock);
    while (!opal_list_is_empty(&conn_live)) {
        opal_btl_usnic_live_t *l = (opal_btl_usnic_live_t *) opal_list_remove_first(&conn_live);
        l->listed = false;
    }
    pthread_mutex_unlock(&conn_lock);
    for (int i = 0; i < usnic_component.num_modules; ++i) {
        unlisten(&usnic_component.modules[i]);
    }
    if (NULL != conn_failure) {
        OBJ_RELEASE(conn_failure);
        conn_failure = NULL;
    }
    OBJ_DESTRUCT(&conn_checks);
    OBJ_DESTRUCT(&conn_live);
    conn_checks_ready = false;
    opal_progress_thread_finalize(NULL);
    conn_evbase = NULL;
}
