/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 * $COPYRIGHT$
 * SPDX-License-Identifier: BSD-3-Clause
 *
 * The connectivity and liveness channel (btl_usnic_connectivity.c): its
 * authenticator (SipHash-2-4 against the reference vectors, usnic_conn_mac)
 * and the nonce window; then both modules of the engine world listening
 * on loopback, with the test as a third party on the network: pings that
 * are not authentic get no answer, answers count only when authentic and
 * for a ping outstanding to that peer, a flood is drained in budgets.
 */

#include "opal_config.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "btl_usnic_connectivity.h"
#include "btl_usnic_endpoint.h"
#include "btl_usnic_module.h"
#include "btl_usnic_util.h"
#include "btl_usnic_window.h"

#include "engine_world.h"
#include "usnic_test.h"

#define STATS(w, s) (&(w)->mods[s].stats)

/* ------------------------------------------------------------------ */
/* the pure layer                                                      */

USNIC_TEST(conn_siphash_reference_vectors)
{
    /* key 00 01 .. 0f; messages 00 01 .. (len - 1) (the paper's vectors) */
    const uint32_t key[4] = {0x03020100, 0x07060504, 0x0b0a0908, 0x0f0e0d0c};
    uint8_t msg[64];

    for (int i = 0; i < 64; ++i) {
        msg[i] = (uint8_t) i;
    }
    check(0x726fdb47dd0e0e31ULL == usnic_siphash24(key, msg, 0));
    check(0xa129ca6149be45e5ULL == usnic_siphash24(key, msg, 15));
    check(0x74f839c593dc67fdULL == usnic_siphash24(key, msg, 1));
    check(0x958a324ceb064572ULL == usnic_siphash24(key, msg, 63));
    return 0;
}

USNIC_TEST(conn_mac_covers_every_field_and_address)
{
    const uint32_t key[4] = {1, 2, 3, 4}, other[4] = {1, 2, 3, 5};
    usnic_conn_msg_t m, x;
    uint64_t mac;

    memset(&m, 0, sizeof(m));
    m.magic = USNIC_CONN_MAGIC_ACK;
    m.type = USNIC_CONN_LIVE_ACK;
    m.size = 1234;
    m.nonce = 0x1122334455667788ULL;
    mac = usnic_conn_mac(key, &m, htonl(0x0a000001), htons(5000), htonl(0x0a000002), htons(6000));
    check(mac == usnic_conn_mac(key, &m, htonl(0x0a000001), htons(5000), htonl(0x0a000002),
                                htons(6000)));
    /* the mac field itself is not covered */
    x = m;
    x.mac = ~mac;
    check(mac == usnic_conn_mac(key, &x, htonl(0x0a000001), htons(5000), htonl(0x0a000002),
                                htons(6000)));
    check(mac != usnic_conn_mac(other, &m, htonl(0x0a000001), htons(5000), htonl(0x0a000002),
                                htons(6000)));
    check(mac != usnic_conn_mac(key, &m, htonl(0x0a000003), htons(5000), htonl(0x0a000002),
                                htons(6000)));
    check(mac != usnic_conn_mac(key, &m, htonl(0x0a000001), htons(5001), htonl(0x0a000002),
                                htons(6000)));
    check(mac != usnic_conn_mac(key, &m, htonl(0x0a000001), htons(5000), htonl(0x0a000004),
                                htons(6000)));
    check(mac != usnic_conn_mac(key, &m, htonl(0x0a000001), htons(5000), htonl(0x0a000002),
                                htons(6001)));
    /* each byte of the message but the mac */
    for (size_t i = 0; i < offsetof(usnic_conn_msg_t, mac); ++i) {
        x = m;
        ((uint8_t *) &x)[i] ^= 0x40;
        check(mac != usnic_conn_mac(key, &x, htonl(0x0a000001), htons(5000), htonl(0x0a000002),
                                    htons(6000)));
    }
    return 0;
}

USNIC_TEST(conn_live_nonce_window)
{
    const uint64_t base = UINT64_MAX - 2; /* the window wraps */

    /* nothing sent: nothing outstanding */
    check(!usnic_live_nonce_ok(base, base, base));
    check(!usnic_live_nonce_ok(base + 1, base, base));
    /* sent base+1 .. base+6, none answered: the last USNIC_LIVE_NONCES count */
    for (uint64_t k = 1; k <= 6; ++k) {
        check(usnic_live_nonce_ok(base + k, base + 6, base) == (k >= 6 - USNIC_LIVE_NONCES + 1));
    }
    check(!usnic_live_nonce_ok(base + 7, base + 6, base));
    check(!usnic_live_nonce_ok(base, base + 6, base));
    /* base+5 answered: only base+6 left; base+5 and older never again */
    check(usnic_live_nonce_ok(base + 6, base + 6, base + 5));
    check(!usnic_live_nonce_ok(base + 5, base + 6, base + 5));
    check(!usnic_live_nonce_ok(base + 4, base + 6, base + 5));
    check(!usnic_live_nonce_ok(base + 6, base + 6, base + 6));
    return 0;
}

/* ------------------------------------------------------------------ */
/* on loopback                                                         */

#define LOOPBACK htonl(INADDR_LOOPBACK)

typedef struct {
    world_t *w;
    int fd;                         /* the test's own socket: a third party */
    struct sockaddr_in self;
    struct sockaddr_in b;           /* B's connectivity socket */
} conn_world_t;

/* Both modules listen on loopback; A's endpoint names `peer` (B's socket,
 * or the test's) with key as the peer's. */
static bool conn_world(conn_world_t *cw, bool peer_is_test, const uint32_t key[4])
{
    socklen_t len = sizeof(cw->self);

    memset(cw, 0, sizeof(*cw));
    cw->w = world_new(10, 20);
    if (NULL == cw->w) {
        return false;
    }
    usnic_component.connectivity_enabled = true;
    usnic_component.peer_timeout = 8;
    for (int s = 0; s < 2; ++s) {
        cw->w->mods[s].if_ipv4 = LOOPBACK;
        if (OPAL_SUCCESS != opal_btl_usnic_connectivity_listen(&cw->w->mods[s])) {
            return false;
        }
    }
    cw->fd = socket(AF_INET, SOCK_DGRAM, 0);
    cw->self.sin_family = AF_INET;
    cw->self.sin_addr.s_addr = LOOPBACK;
    if (cw->fd < 0 || 0 != bind(cw->fd, (struct sockaddr *) &cw->self, sizeof(cw->self)) ||
        0 != getsockname(cw->fd, (struct sockaddr *) &cw->self, &len)) {
        return false;
    }
    cw->b.sin_family = AF_INET;
    cw->b.sin_addr.s_addr = LOOPBACK;
    cw->b.sin_port = htons((uint16_t) cw->w->mods[SIDE_B].local_addr.connectivity_udp_port);
    cw->w->ep[SIDE_A]->remote.ipv4_addr = LOOPBACK;
    cw->w->ep[SIDE_A]->remote.connectivity_udp_port =
        peer_is_test ? ntohs(cw->self.sin_port)
                     : cw->w->mods[SIDE_B].local_addr.connectivity_udp_port;
    memcpy(cw->w->ep[SIDE_A]->remote.conn_key, key, 4 * sizeof(uint32_t));
    /* (the endpoints were made before the sockets: each side's peer, as
     * endpoint set-up records it) */
    for (int s = 0; s < 2; ++s) {
        opal_btl_usnic_connectivity_add_peer(
            &cw->w->mods[s], LOOPBACK,
            htons((uint16_t) cw->w->mods[1 - s].local_addr.connectivity_udp_port));
    }
    return true;
}

static void conn_world_fini(conn_world_t *cw)
{
    opal_btl_usnic_connectivity_fini();
    usnic_component.connectivity_enabled = false;
    if (cw->fd >= 0) {
        close(cw->fd);
    }
    world_fini(cw->w);
}

/* Send len bytes of m from the test's socket to `to`. */
static void send_raw(conn_world_t *cw, const struct sockaddr_in *to, const void *m, size_t len)
{
    (void) sendto(cw->fd, m, len, 0, (const struct sockaddr *) to, sizeof(*to));
}

/* A message from the test's socket to `to`, authentic under key. */
static void send_authentic(conn_world_t *cw, const struct sockaddr_in *to, uint64_t magic,
                           uint8_t type, uint32_t size, uint64_t nonce, const uint32_t key[4])
{
    usnic_conn_msg_t m;

    memset(&m, 0, sizeof(m));
    m.magic = magic;
    m.type = type;
    m.size = size;
    m.nonce = nonce;
    m.mac = usnic_conn_mac(key, &m, cw->self.sin_addr.s_addr, cw->self.sin_port,
                           to->sin_addr.s_addr, to->sin_port);
    send_raw(cw, to, &m, sizeof(m));
}

/* The next datagram to the test's socket within ms milliseconds: its
 * length, or -1. */
static ssize_t recv_within(conn_world_t *cw, void *buf, size_t size, int ms,
                           struct sockaddr_in *from)
{
    struct pollfd p = {.fd = cw->fd, .events = POLLIN};
    socklen_t len = sizeof(*from);

    if (1 != poll(&p, 1, ms)) {
        return -1;
    }
    return recvfrom(cw->fd, buf, size, 0, (struct sockaddr *) from, &len);
}

/* Wait up to ms for counter to reach want (the progress thread counts). */
static bool wait_count(volatile uint64_t *counter, uint64_t want, int ms)
{
    for (int i = 0; i < ms && *counter < want; ++i) {
        usleep(1000);
    }
    return *counter >= want;
}

/* B answers only pings from a peer's socket, authentic under its key; the
 * answer repeats the nonce and is authentic under B's key too. */
USNIC_TEST(conn_pings_answered_only_when_authentic)
{
    conn_world_t cw;
    uint8_t buf[65536];
    usnic_conn_msg_t m, *r = (usnic_conn_msg_t *) buf;
    struct sockaddr_in from;
    const uint32_t wrong[4] = {9, 9, 9, 9};
    ssize_t n;

    check(conn_world(&cw, false, usnic_component.conn_key));
    /* a LIVE_PING of the old format (magic, type, size: no nonce, no mac) */
    memset(&m, 0, sizeof(m));
    m.magic = USNIC_CONN_MAGIC_PING;
    m.type = USNIC_CONN_LIVE_PING;
    m.size = 16;
    send_raw(&cw, &cw.b, &m, 16);
    /* a checker PING of 16 bytes, likewise */
    m.type = USNIC_CONN_PING;
    send_raw(&cw, &cw.b, &m, 16);
    /* under the wrong key, and with the right key but another source
     * address claimed (the mac names the test's address as 127.0.0.2) */
    send_authentic(&cw, &cw.b, USNIC_CONN_MAGIC_PING, USNIC_CONN_LIVE_PING, 32, 7, wrong);
    memset(&m, 0, sizeof(m));
    m.magic = USNIC_CONN_MAGIC_PING;
    m.type = USNIC_CONN_LIVE_PING;
    m.nonce = 8;
    m.mac = usnic_conn_mac(usnic_component.conn_key, &m, htonl(0x7f000002), cw.self.sin_port,
                           cw.b.sin_addr.s_addr, cw.b.sin_port);
    send_raw(&cw, &cw.b, &m, sizeof(m));
    /* authentic, but the test's socket is no peer of B */
    send_authentic(&cw, &cw.b, USNIC_CONN_MAGIC_PING, USNIC_CONN_LIVE_PING, 0, 9,
                   usnic_component.conn_key);
    check(wait_count(&STATS(cw.w, SIDE_B)->num_conn_refused, 5, 2000));
    check(recv_within(&cw, buf, sizeof(buf), 200, &from) < 0);

    /* a peer now, authentic: answered */
    opal_btl_usnic_connectivity_add_peer(&cw.w->mods[SIDE_B], cw.self.sin_addr.s_addr,
                                         cw.self.sin_port);
    send_raw(&cw, &cw.b, &m, sizeof(m));        /* (the one claiming another address) */
    send_authentic(&cw, &cw.b, USNIC_CONN_MAGIC_PING, USNIC_CONN_LIVE_PING, 0,
                   0x5555aaaa5555aaaaULL, usnic_component.conn_key);
    n = recv_within(&cw, buf, sizeof(buf), 2000, &from);
    check_int_eq(n, sizeof(usnic_conn_msg_t));
    check(USNIC_CONN_MAGIC_ACK == r->magic && USNIC_CONN_LIVE_ACK == r->type);
    check(0x5555aaaa5555aaaaULL == r->nonce);
    check(r->mac == usnic_conn_mac(usnic_component.conn_key, r, from.sin_addr.s_addr,
                                   from.sin_port, cw.self.sin_addr.s_addr, cw.self.sin_port));
    check_int_eq(STATS(cw.w, SIDE_B)->num_conn_refused, 6);
    /* a peer no more */
    opal_btl_usnic_connectivity_remove_peer(&cw.w->mods[SIDE_B], cw.self.sin_addr.s_addr,
                                            cw.self.sin_port);
    send_authentic(&cw, &cw.b, USNIC_CONN_MAGIC_PING, USNIC_CONN_LIVE_PING, 0, 10,
                   usnic_component.conn_key);
    check(wait_count(&STATS(cw.w, SIDE_B)->num_conn_refused, 7, 2000));
    check(recv_within(&cw, buf, sizeof(buf), 200, &from) < 0);
    conn_world_fini(&cw);
    return 0;
}

/* A's liveness record takes an answer only from the peer's address,
 * authentic under the peer's key, for one of its outstanding pings, once. */
USNIC_TEST(conn_live_answers_only_for_outstanding_pings)
{
    conn_world_t cw;
    const uint32_t peer_key[4] = {0x11111111, 0x22222222, 0x33333333, 0x44444444};
    uint8_t buf[256];
    usnic_conn_msg_t *p = (usnic_conn_msg_t *) buf, ans;
    struct sockaddr_in from, a;
    opal_btl_usnic_endpoint_t *ep;
    uint64_t nonce;
    double t;

    /* the test's socket is A's peer */
    check(conn_world(&cw, true, peer_key));
    ep = cw.w->ep[SIDE_A];
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = LOOPBACK;
    a.sin_port = htons((uint16_t) cw.w->mods[SIDE_A].local_addr.connectivity_udp_port);

    /* answers before any ping: none outstanding */
    opal_btl_usnic_liveness_ping(ep);
    check(NULL != ep->live);
    check_int_eq(recv_within(&cw, buf, sizeof(buf), 2000, &from), sizeof(usnic_conn_msg_t));
    check(USNIC_CONN_LIVE_PING == p->type);
    /* the ping is authentic under the peer's key */
    check(p->mac == usnic_conn_mac(peer_key, p, from.sin_addr.s_addr, from.sin_port,
                                   cw.self.sin_addr.s_addr, cw.self.sin_port));
    nonce = p->nonce;

    /* forged: the old format; the wrong nonce; the wrong key; a nonce
     * before the window */
    memset(&ans, 0, sizeof(ans));
    ans.magic = USNIC_CONN_MAGIC_ACK;
    ans.type = USNIC_CONN_LIVE_ACK;
    ans.size = 60000;
    send_raw(&cw, &a, &ans, 16);
    send_authentic(&cw, &a, USNIC_CONN_MAGIC_ACK, USNIC_CONN_LIVE_ACK, 60000, nonce + 1,
                   peer_key);
    send_authentic(&cw, &a, USNIC_CONN_MAGIC_ACK, USNIC_CONN_LIVE_ACK, 60000, nonce,
                   usnic_component.conn_key);
    send_authentic(&cw, &a, USNIC_CONN_MAGIC_ACK, USNIC_CONN_LIVE_ACK, 60000,
                   nonce - USNIC_LIVE_NONCES, peer_key);
    check(wait_count(&STATS(cw.w, SIDE_A)->num_conn_stray, 4, 2000));
    check(0 == opal_btl_usnic_liveness_answer(ep) && 0 == opal_btl_usnic_liveness_busy(ep));

    /* the answer: counted, busy (60 s outside progress) */
    t = opal_btl_usnic_now_us() / 1e6;
    send_authentic(&cw, &a, USNIC_CONN_MAGIC_ACK, USNIC_CONN_LIVE_ACK, 60000, nonce, peer_key);
    for (int i = 0; i < 2000 && 0 == opal_btl_usnic_liveness_answer(ep); ++i) {
        usleep(1000);
    }
    check(opal_btl_usnic_liveness_answer(ep) >= t);
    check(opal_btl_usnic_liveness_busy(ep) > 0);
    check_int_eq(STATS(cw.w, SIDE_A)->num_conn_stray, 4);

    /* replayed: not counted again */
    t = opal_btl_usnic_liveness_answer(ep);
    send_authentic(&cw, &a, USNIC_CONN_MAGIC_ACK, USNIC_CONN_LIVE_ACK, 60000, nonce, peer_key);
    check(wait_count(&STATS(cw.w, SIDE_A)->num_conn_stray, 5, 2000));
    check(opal_btl_usnic_liveness_answer(ep) == t);

    /* a later ping is answered late, after the next went out: still counted */
    opal_btl_usnic_liveness_ping(ep);
    check_int_eq(recv_within(&cw, buf, sizeof(buf), 2000, &from), sizeof(usnic_conn_msg_t));
    nonce = p->nonce;
    opal_btl_usnic_liveness_ping(ep);
    check_int_eq(recv_within(&cw, buf, sizeof(buf), 2000, &from), sizeof(usnic_conn_msg_t));
    check(p->nonce == nonce + 1);
    send_authentic(&cw, &a, USNIC_CONN_MAGIC_ACK, USNIC_CONN_LIVE_ACK, 0, nonce, peer_key);
    for (int i = 0; i < 2000 && opal_btl_usnic_liveness_answer(ep) == t; ++i) {
        usleep(1000);
    }
    check(opal_btl_usnic_liveness_answer(ep) > t);
    check_int_eq(STATS(cw.w, SIDE_A)->num_conn_stray, 5);
    conn_world_fini(&cw);
    return 0;
}

/* A flood of datagrams on B's socket is drained in budgets, and an
 * authentic ping sent after it is answered. */
USNIC_TEST(conn_flood_drained_in_budgets)
{
    conn_world_t cw;
    uint8_t buf[256];
    usnic_conn_msg_t m;
    struct sockaddr_in from;
    int rcvbuf = 4 << 20, sent = 0;
    ssize_t n;

    check(conn_world(&cw, false, usnic_component.conn_key));
    (void) setsockopt(cw.w->mods[SIDE_B].conn_fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf,
                      sizeof(rcvbuf));
    memset(&m, 0, sizeof(m));
    m.magic = USNIC_CONN_MAGIC_PING;
    m.type = USNIC_CONN_LIVE_PING;
    /* B does not listen while the flood is sent, so that its next wake-up
     * finds more than a budget queued: a drainer running beside the sender
     * on a loaded machine could keep pace and never use one up */
    opal_event_del(&cw.w->mods[SIDE_B].conn_ev);
    for (int i = 0; i < 5000; ++i) {
        m.nonce = (uint64_t) i;
        sent += sizeof(m) == sendto(cw.fd, &m, sizeof(m), 0, (struct sockaddr *) &cw.b,
                                    sizeof(cw.b));
    }
    opal_event_add(&cw.w->mods[SIDE_B].conn_ev, NULL);
    opal_btl_usnic_connectivity_add_peer(&cw.w->mods[SIDE_B], cw.self.sin_addr.s_addr,
                                         cw.self.sin_port);
    send_authentic(&cw, &cw.b, USNIC_CONN_MAGIC_PING, USNIC_CONN_LIVE_PING, 0, 42,
                   usnic_component.conn_key);
    n = recv_within(&cw, buf, sizeof(buf), 5000, &from);
    check_int_eq(n, sizeof(usnic_conn_msg_t));
    check(42 == ((usnic_conn_msg_t *) buf)->nonce);
    /* every forged one was dropped unanswered (the kernel may have dropped
     * some before: a full socket buffer) */
    check(STATS(cw.w, SIDE_B)->num_conn_refused > 0);
    check(STATS(cw.w, SIDE_B)->num_conn_refused <= (uint64_t) sent);
    check(recv_within(&cw, buf, sizeof(buf), 100, &from) < 0);
    check(STATS(cw.w, SIDE_B)->num_conn_budget > 0);
    conn_world_fini(&cw);
    return 0;
}

/* The connectivity checker of A toward a peer that is the test's socket:
 * the test answers A's small ping authentically and, for the large one,
 * only forges (the first version's 16-byte format, random nonce and mac,
 * the right nonce under the wrong key, the small ping's nonce with the
 * large size): A must still report the path as failed.  With both
 * answered authentically it must not. */
static int checker_case(bool answer_large)
{
    conn_world_t cw;
    const uint32_t peer_key[4] = {0x0a0a0a0a, 0x0b0b0b0b, 0x0c0c0c0c, 0x0d0d0d0d};
    uint8_t buf[2048];
    usnic_conn_msg_t *p = (usnic_conn_msg_t *) buf, f;
    struct sockaddr_in from, a;
    opal_btl_usnic_endpoint_t *ep;
    uint64_t small_nonce = 0;
    bool seen[2] = {false, false};
    double end;
    ssize_t n;

    check(conn_world(&cw, true, peer_key));
    opal_btl_usnic_connectivity_failed = 0;
    usnic_component.connectivity_num_retries = 4;
    usnic_component.connectivity_ack_timeout = 100;
    ep = cw.w->ep[SIDE_A];
    cw.w->mods[SIDE_A].if_mtu = 1500;
    ep->remote.if_mtu = 1500;
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = LOOPBACK;
    a.sin_port = htons((uint16_t) cw.w->mods[SIDE_A].local_addr.connectivity_udp_port);
    opal_btl_usnic_connectivity_check(ep);

    /* every round of pings until the checker gives up or 2 s pass */
    end = opal_btl_usnic_now_us() / 1e6 + 2.0;
    while (opal_btl_usnic_now_us() / 1e6 < end && !opal_btl_usnic_connectivity_failed) {
        n = recv_within(&cw, buf, sizeof(buf), 50, &from);
        if (n < (ssize_t) sizeof(usnic_conn_msg_t) || USNIC_CONN_PING != p->type) {
            continue;
        }
        check(p->mac == usnic_conn_mac(peer_key, p, from.sin_addr.s_addr, from.sin_port,
                                       cw.self.sin_addr.s_addr, cw.self.sin_port));
        check_int_eq(p->size, n);
        if (sizeof(usnic_conn_msg_t) == (size_t) n) {
            seen[0] = true;
            small_nonce = p->nonce;
            send_authentic(&cw, &a, USNIC_CONN_MAGIC_ACK, USNIC_CONN_ACK, p->size, p->nonce,
                           peer_key);
            continue;
        }
        seen[1] = true;
        check_int_eq(n, 1500 - 68);
        if (answer_large) {
            send_authentic(&cw, &a, USNIC_CONN_MAGIC_ACK, USNIC_CONN_ACK, p->size, p->nonce,
                           peer_key);
            continue;
        }
        memset(&f, 0, sizeof(f));
        f.magic = USNIC_CONN_MAGIC_ACK;
        f.type = USNIC_CONN_ACK;
        f.size = p->size;
        send_raw(&cw, &a, &f, 16);
        f.nonce = 0x1234567;
        f.mac = 0x89abcdef;
        send_raw(&cw, &a, &f, sizeof(f));
        send_authentic(&cw, &a, USNIC_CONN_MAGIC_ACK, USNIC_CONN_ACK, p->size, p->nonce,
                       usnic_component.conn_key);
        send_authentic(&cw, &a, USNIC_CONN_MAGIC_ACK, USNIC_CONN_ACK, p->size, small_nonce,
                       peer_key);
    }
    check(seen[0] && seen[1]);
    if (answer_large) {
        /* past the checker's whole budget */
        usleep(700000);
        check_int_eq(opal_btl_usnic_connectivity_failed, 0);
    } else {
        check_int_eq(opal_btl_usnic_connectivity_failed, 1);
        check(STATS(cw.w, SIDE_A)->num_conn_stray >= 4);
    }
    opal_btl_usnic_connectivity_failed = 0;
    conn_world_fini(&cw);
    return 0;
}

USNIC_TEST(conn_forged_checker_acks_hide_no_failure)
{
    return checker_case(false);
}

USNIC_TEST(conn_checker_passes_when_answered)
{
    return checker_case(true);
}
