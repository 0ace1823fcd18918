/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 * $COPYRIGHT$
 * SPDX-License-Identifier: BSD-3-Clause
 *
 * rawudp: what kernel UDP sockets alone give between two hosts, the limit of
 * usnic's UDP mode.  The sockets are used as a BTL would use them: non-blocking,
 * busy-polled (never sleeping), datagrams sent with sendmmsg and received with
 * recvmmsg in batches, no fragmentation (IP_PMTUDISC_DO), large socket buffers.
 *
 *   rawudp -r [-p PORT] [-k SECONDS]
 *       responder: serves sessions (one process per TCP control connection)
 *       until an initiator sends "quit"
 *   rawudp -c HOST [-p PORT] [-t lat,bw,mr] [-S SIZE,...] [-P PAIRS]
 *          [-T BUDGET_MS] [-W WARMUP_MS] [-n MIN_ITERS] [-N MAX_ITERS] [-q] [-y]
 *          [-b BATCH] [-a] [-g]
 *       initiator: runs the tests against the responder on HOST; -q ends the
 *       responder afterwards; -y: sched_yield() on an empty poll, for more
 *       processes than CPUs (as MPI's mpi_yield_when_idle); -b: at most BATCH
 *       datagrams per sendmmsg (default and most 64); -a: every send names
 *       the peer's address, as on a socket shared by many peers (usnic's); -g:
 *       runs of equal datagrams (the last of a run may be shorter) of a sendmmsg
 *       go as one UDP_SEGMENT message each, which the kernel cuts into the same
 *       datagrams (as usnic's UDP device sends a batch)
 *
 * Tests, one output line per size in bench/mpibench.c's format
 * (TEST SIZE ITERS WINDOW MEAN_US MEDIAN_US MIN_US MB/S MSG/S):
 *   lat  ping-pong: a message of SIZE bytes is one datagram up to the path's
 *        largest UDP payload, beyond that a sequence of full datagrams (the last
 *        one partial); the reply, the same size, starts after the last datagram
 *        has arrived.  Half the round trip, as mpibench.  A round trip that
 *        receives nothing for 50 ms is retried (counted: "retries"; on this
 *        lossless path a peer that got no CPU for that long).
 *   bw   a stream of messages of SIZE bytes (datagrams as for lat) for the time
 *        budget; the receiver counts what arrived and acknowledges the highest
 *        sequence number it has seen; the sender keeps at most WINDOW datagrams
 *        beyond that, WINDOW sized so that the window's datagrams fit half the
 *        receive buffer: an overflowing socket buffer cannot pass for
 *        bandwidth.  Rate: the bytes that ARRIVED over the time from the first
 *        send to the acknowledgement of the last datagram.
 *   mr   bw with PAIRS (-P, default 1) processes on each side, each pair its own
 *        sockets, started together; aggregate rate over the span from the first
 *        start to the last end.
 * bw and mr are followed by a line
 *   rawudp TEST SIZE sent=N delivered=N lost=N window=N stalls=N
 * (datagrams; stalls: times the sender found no acknowledgement for 200 ms and
 * wrote its window off as lost), lat by "rawudp lat SIZE retries=N".
 * SIZE >= 8: each datagram carries an 8-byte header in its first bytes.
 */

#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <netinet/udp.h>
#include <poll.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define BATCH 64
#define SOCKBUF (32 << 20)
#define MAX_WINDOW 4096
#define MAX_SIZES 64
#define HDR 8
#define RETRY_NS 50000000LL    /* a lost ping-pong datagram: retry after 50 ms */
#define STALL_NS 200000000LL   /* no ACK for 200 ms: the window is written off (lost) */
#define ACK_IDLE_NS 20000LL    /* the receiver acknowledges a pause of 20 us */

struct hdr {
    uint32_t a; /* lat: iteration; stream: sequence number */
    uint32_t b; /* lat: index in the message; stream: unused */
};

struct ack {
    uint32_t high;     /* highest sequence number seen + 1 */
    uint32_t received; /* datagrams received */
};

struct session {
    int ctl;          /* TCP control connection */
    int udp;          /* connected, non-blocking UDP socket */
    size_t maxpay;    /* largest UDP payload on the path */
    int peer_rcvbuf;  /* the responder's receive buffer (kernel accounting bytes) */
    char *sbuf, *rbuf;
    size_t bufsize;
};

static double budget = 0.3, warm_budget = 0.06;
static unsigned kill_after = 900;
static int yield_idle; /* -y: more processes than CPUs: give the CPU up on an empty poll */
static unsigned send_batch = BATCH;     /* -b */
static int name_peer;                   /* -a */
static int segment;                     /* -g */
static struct sockaddr_in peer_addr;    /* the UDP peer, for -a */
static long min_iters = 2, max_iters = 10000, max_warmup = 20;

static void die(const char *what)
{
    perror(what);
    exit(1);
}

static long long now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* ---- control connection: one text line per request or answer */

static void ctl_send(int fd, const char *line)
{
    size_t len = strlen(line), off = 0;

    while (off < len) {
        ssize_t n = send(fd, line + off, len - off, MSG_NOSIGNAL);

        if (n < 0 && EINTR != errno) {
            die("control send");
        }
        off += n > 0 ? (size_t) n : 0;
    }
}

/* Reads one line (without the newline) into buf; 0 on end of stream. */
static int ctl_recv(int fd, char *buf, size_t cap)
{
    size_t n = 0;

    while (n + 1 < cap) {
        ssize_t r = recv(fd, buf + n, 1, 0);

        if (r < 0 && EINTR == errno) {
            continue;
        }
        if (r <= 0) {
            return 0;
        }
        if ('\n' == buf[n]) {
            break;
        }
        ++n;
    }
    buf[n] = '\0';
    return 1;
}

/* A line on the control connection is waiting (checked while busy-polling). */
static int ctl_ready(int fd)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};

    return poll(&p, 1, 0) > 0;
}

/* ---- UDP socket as a BTL sets it up */

static int udp_socket(void)
{
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK, 0), v = SOCKBUF;
    int pmtu = IP_PMTUDISC_DO;
    struct sockaddr_in a = {.sin_family = AF_INET};

    if (fd < 0) {
        die("udp socket");
    }
    /* FORCE exceeds net.core.[rw]mem_max when privileged; otherwise the cap applies */
    if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &v, sizeof(v))) {
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &v, sizeof(v));
    }
    if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &v, sizeof(v))) {
        setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &v, sizeof(v));
    }
    setsockopt(fd, IPPROTO_IP, IP_MTU_DISCOVER, &pmtu, sizeof(pmtu));
    if (bind(fd, (struct sockaddr *) &a, sizeof(a))) {
        die("udp bind");
    }
    return fd;
}

static int sock_int(int fd, int level, int name)
{
    int v = 0;
    socklen_t l = sizeof(v);

    getsockopt(fd, level, name, &v, &l);
    return v;
}

static int local_port(int fd)
{
    struct sockaddr_in a;
    socklen_t l = sizeof(a);

    getsockname(fd, (struct sockaddr *) &a, &l);
    return ntohs(a.sin_port);
}

/* Connects the UDP socket to the control peer's address at PORT; returns the path's
 * largest UDP payload. */
static size_t udp_connect(struct session *s, int port)
{
    struct sockaddr_in a;
    socklen_t l = sizeof(a);
    int mtu;

    if (getpeername(s->ctl, (struct sockaddr *) &a, &l)) {
        die("getpeername");
    }
    a.sin_port = htons((uint16_t) port);
    if (connect(s->udp, (struct sockaddr *) &a, sizeof(a))) {
        die("udp connect");
    }
    peer_addr = a;
    mtu = sock_int(s->udp, IPPROTO_IP, IP_MTU);
    if (mtu < 576) {
        fprintf(stderr, "rawudp: path MTU %d unusable\n", mtu);
        exit(1);
    }
    return (size_t) mtu - 28; /* IPv4 and UDP headers */
}

static void session_buffers(struct session *s, size_t bytes)
{
    if (bytes <= s->bufsize) {
        return;
    }
    free(s->sbuf);
    free(s->rbuf);
    if (posix_memalign((void **) &s->sbuf, 4096, bytes) ||
        posix_memalign((void **) &s->rbuf, 4096, bytes)) {
        fprintf(stderr, "rawudp: out of memory (%zu bytes)\n", bytes);
        exit(1);
    }
    memset(s->sbuf, 'u', bytes);
    memset(s->rbuf, 0, bytes);
    s->bufsize = bytes;
}

/* Datagrams of a message of SIZE bytes. */
static uint32_t dgrams_of(const struct session *s, size_t size)
{
    return size <= s->maxpay ? 1 : (uint32_t) ((size + s->maxpay - 1) / s->maxpay);
}

static size_t dgram_len(const struct session *s, size_t size, uint32_t idx)
{
    size_t off = (size_t) idx * s->maxpay;

    return size - off < s->maxpay ? size - off : s->maxpay;
}

#ifndef UDP_SEGMENT
#define UDP_SEGMENT 103
#endif
#define GSO_MAX_SEGS 64
#define GSO_MAX_BYTES (65535 - 28)

/* send_all with -g: the N messages (one iovec each) as runs of UDP_SEGMENT
 * messages, sent as send_all sends. */
static void send_segmented(int fd, struct mmsghdr *m, unsigned n)
{
    struct mmsghdr g[BATCH];
    struct iovec iov[BATCH];
    union {
        char buf[CMSG_SPACE(sizeof(uint16_t))];
        struct cmsghdr align;
    } cm[BATCH];
    unsigned first[BATCH + 1], ng = 0, sent = 0;

    for (unsigned i = 0; i < n; ++i) {
        size_t len = m[i].msg_hdr.msg_iov[0].iov_len;
        struct msghdr *h = ng > 0 ? &g[ng - 1].msg_hdr : NULL;
        unsigned segs = ng > 0 ? i - first[ng - 1] : 0;
        size_t seg = segs > 0 ? iov[first[ng - 1]].iov_len : 0;

        iov[i] = m[i].msg_hdr.msg_iov[0];
        /* (joins while the run's datagrams are all as long as its first) */
        if (NULL != h && len <= seg && iov[i - 1].iov_len == seg && segs < GSO_MAX_SEGS &&
            (segs + 1) * seg <= GSO_MAX_BYTES) {
            ++h->msg_iovlen;
            continue;
        }
        first[ng] = i;
        memset(&g[ng], 0, sizeof(g[ng]));
        g[ng].msg_hdr.msg_name = m[i].msg_hdr.msg_name;
        g[ng].msg_hdr.msg_namelen = m[i].msg_hdr.msg_namelen;
        g[ng].msg_hdr.msg_iov = &iov[i];
        g[ng].msg_hdr.msg_iovlen = 1;
        ++ng;
    }
    first[ng] = n;
    for (unsigned j = 0; j < ng; ++j) {
        if (first[j + 1] - first[j] > 1) {
            struct cmsghdr *c = &cm[j].align;
            uint16_t seg = (uint16_t) iov[first[j]].iov_len;

            c->cmsg_level = SOL_UDP;
            c->cmsg_type = UDP_SEGMENT;
            c->cmsg_len = CMSG_LEN(sizeof(seg));
            memcpy(CMSG_DATA(c), &seg, sizeof(seg));
            g[j].msg_hdr.msg_control = cm[j].buf;
            g[j].msg_hdr.msg_controllen = sizeof(cm[j].buf);
        }
    }
    while (sent < ng) {
        int k = sendmmsg(fd, &g[sent], ng - sent, 0);

        if (k < 0) {
            if (EAGAIN == errno || EWOULDBLOCK == errno || EINTR == errno ||
                ECONNREFUSED == errno) {
                continue;
            }
            die("sendmmsg (UDP_SEGMENT)");
        }
        sent += (unsigned) k;
    }
}

/* Sends N prepared messages, spinning while the socket is full. */
static void send_all(int fd, struct mmsghdr *m, unsigned n)
{
    if (name_peer) {
        for (unsigned i = 0; i < n; ++i) {
            m[i].msg_hdr.msg_name = &peer_addr;
            m[i].msg_hdr.msg_namelen = sizeof(peer_addr);
        }
    }
    if (segment) {
        send_segmented(fd, m, n);
        return;
    }
    while (n > 0) {
        int k = sendmmsg(fd, m, n < send_batch ? n : send_batch, 0);

        if (k < 0) {
            if (EAGAIN == errno || EWOULDBLOCK == errno || EINTR == errno) {
                continue;
            }
            if (ECONNREFUSED == errno) { /* an ICMP error of an earlier send: nothing lost here */
                continue;
            }
            die("sendmmsg");
        }
        m += k;
        n -= (unsigned) k;
    }
}

/* Receives up to BATCH datagrams into the buffers of M without waiting; returns how
 * many (0 when none is there). */
static int recv_some(int fd, struct mmsghdr *m, unsigned n)
{
    int k = recvmmsg(fd, m, n, MSG_DONTWAIT, NULL);

    if (k < 0) {
        if (EAGAIN == errno || EWOULDBLOCK == errno || EINTR == errno || ECONNREFUSED == errno) {
            k = 0;
        } else {
            die("recvmmsg");
        }
    }
    if (0 == k && yield_idle) {
        sched_yield();
    }
    return k;
}

/* ---- ping-pong */

/* Sends message ITER of SIZE bytes (all its datagrams). */
static void send_message(struct session *s, size_t size, uint32_t iter)
{
    struct mmsghdr m[BATCH];
    struct iovec iov[BATCH];
    uint32_t n = dgrams_of(s, size), i = 0;

    while (i < n) {
        unsigned k = 0;

        for (; k < BATCH && i < n; ++k, ++i) {
            char *p = s->sbuf + (size_t) i * s->maxpay;
            struct hdr h = {iter, i};

            memcpy(p, &h, sizeof(h));
            iov[k].iov_base = p;
            iov[k].iov_len = dgram_len(s, size, i);
            memset(&m[k], 0, sizeof(m[k]));
            m[k].msg_hdr.msg_iov = &iov[k];
            m[k].msg_hdr.msg_iovlen = 1;
        }
        send_all(s->udp, m, k);
    }
}

/* Receive state of one message: which datagrams of iteration ITER have arrived. */
struct rx_msg {
    uint32_t iter, want, got;
    unsigned char *seen;
};

static void rx_reset(struct rx_msg *r, uint32_t iter)
{
    r->iter = iter;
    r->got = 0;
    memset(r->seen, 0, r->want);
}

/* Posts receive buffers where the next datagrams of the message would go (in order),
 * so that the data lands in a message-sized buffer as an MPI receive's would. */
static unsigned post_rx(struct session *s, struct mmsghdr *m, struct iovec *iov, uint32_t next,
                        uint32_t want)
{
    for (unsigned k = 0; k < BATCH; ++k) {
        uint32_t i = (next + k) % want;

        iov[k].iov_base = s->rbuf + (size_t) i * s->maxpay;
        iov[k].iov_len = s->maxpay;
        memset(&m[k], 0, sizeof(m[k]));
        m[k].msg_hdr.msg_iov = &iov[k];
        m[k].msg_hdr.msg_iovlen = 1;
    }
    return want < BATCH ? want : BATCH;
}

/* Takes in the received datagrams; returns 1 when message r->iter is complete. For a
 * datagram of iteration r->iter - 1's last index, *again is set (the peer resent it). */
static int rx_take(struct rx_msg *r, struct mmsghdr *m, int k, int *again)
{
    for (int j = 0; j < k; ++j) {
        struct hdr h;

        if (m[j].msg_len < HDR) {
            continue;
        }
        memcpy(&h, m[j].msg_hdr.msg_iov->iov_base, sizeof(h));
        if (h.a == r->iter && h.b < r->want && !r->seen[h.b]) {
            r->seen[h.b] = 1;
            ++r->got;
        } else if (again && h.a + 1 == r->iter && h.b + 1 == r->want) {
            *again = 1;
        }
    }
    return r->got == r->want;
}

/* Initiator: one round trip of iteration ITER; returns the retries it took. */
static long round_trip(struct session *s, size_t size, uint32_t iter, struct rx_msg *r)
{
    struct mmsghdr m[BATCH];
    struct iovec iov[BATCH];
    long retries = 0;
    long long t;

    rx_reset(r, iter);
    send_message(s, size, iter);
    t = now_ns();
    for (;;) {
        int k = recv_some(s->udp, m, post_rx(s, m, iov, r->got, r->want));

        if (k > 0) {
            if (rx_take(r, m, k, NULL)) {
                return retries;
            }
            t = now_ns();
        } else if (now_ns() - t > RETRY_NS) {
            /* a datagram was lost: the whole round trip again */
            rx_reset(r, iter);
            send_message(s, size, iter);
            ++retries;
            t = now_ns();
        }
    }
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *) a, y = *(const double *) b;

    return x < y ? -1 : x > y;
}

static long clamp_long(double v, long lo, long hi)
{
    if (v < lo) {
        return lo;
    }
    return v > hi ? hi : (long) v;
}

static void init_lat(struct session *s, size_t size, double *times)
{
    char line[128];
    struct rx_msg r;
    uint32_t iter = 1;
    long warm, iters, retries = 0;
    double t, first, total, med;

    r.want = dgrams_of(s, size);
    r.seen = malloc(r.want);
    session_buffers(s, (size_t) r.want * s->maxpay);
    snprintf(line, sizeof(line), "lat %zu\n", size);
    ctl_send(s->ctl, line);
    if (!ctl_recv(s->ctl, line, sizeof(line)) || strcmp(line, "ok")) {
        fprintf(stderr, "rawudp: responder refused lat %zu: %s\n", size, line);
        exit(1);
    }
    t = now_ns();
    retries += round_trip(s, size, iter++, &r);
    first = (now_ns() - t) / 1e9;
    warm = clamp_long(first > 0 ? warm_budget / first : max_warmup, 0, max_warmup - 1);
    t = now_ns();
    for (long i = 0; i < warm; ++i) {
        retries += round_trip(s, size, iter++, &r);
    }
    t = warm > 0 ? (now_ns() - t) / 1e9 / warm : first;
    iters = clamp_long(t > 0 ? budget / t : max_iters, min_iters, max_iters);
    total = now_ns();
    for (long i = 0; i < iters; ++i) {
        long long t0 = now_ns();

        retries += round_trip(s, size, iter++, &r);
        times[i] = (now_ns() - t0) / 1e9;
    }
    total = (now_ns() - total) / 1e9;
    ctl_send(s->ctl, "stop 0\n");
    if (!ctl_recv(s->ctl, line, sizeof(line))) {
        fprintf(stderr, "rawudp: responder gone\n");
        exit(1);
    }
    qsort(times, iters, sizeof(double), cmp_double);
    med = iters % 2 ? times[iters / 2] : (times[iters / 2 - 1] + times[iters / 2]) / 2;
    /* per message: half a round trip */
    printf("%-5s %8zu %7ld %5d %12.2f %12.2f %12.2f %12.3f %12.1f\n", "lat", size, iters, 1,
           total / iters / 2 * 1e6, med / 2 * 1e6, times[0] / 2 * 1e6,
           (double) size * 2 * iters / total / 1e6, 2 * iters / total);
    printf("rawudp lat %zu retries=%ld responder:%s\n", size, retries, line + 4);
    fflush(stdout);
    free(r.seen);
}

/* Responder: answers every complete message of SIZE until "stop" comes. */
static void serve_lat(struct session *s, size_t size)
{
    struct mmsghdr m[BATCH];
    struct iovec iov[BATCH];
    struct rx_msg r;
    long again_count = 0;
    unsigned idle = 0;
    char line[128];

    r.want = dgrams_of(s, size);
    r.seen = malloc(r.want);
    session_buffers(s, (size_t) r.want * s->maxpay);
    rx_reset(&r, 1);
    ctl_send(s->ctl, "ok\n");
    for (;;) {
        int again = 0, k = recv_some(s->udp, m, post_rx(s, m, iov, r.got, r.want));

        if (0 == k) {
            if (++idle % 1024 == 0 && ctl_ready(s->ctl)) {
                break;
            }
            continue;
        }
        idle = 0;
        /* a message of a later iteration: the initiator gave up on this one */
        for (int j = 0; j < k; ++j) {
            struct hdr h;

            memcpy(&h, m[j].msg_hdr.msg_iov->iov_base, sizeof(h));
            if (m[j].msg_len >= HDR && h.a > r.iter) {
                rx_reset(&r, h.a);
            }
        }
        if (rx_take(&r, m, k, &again)) {
            send_message(s, size, r.iter);
            rx_reset(&r, r.iter + 1);
        } else if (again) {
            /* the initiator resent the last one: our reply was lost */
            send_message(s, size, r.iter - 1);
            ++again_count;
        }
    }
    ctl_recv(s->ctl, line, sizeof(line));
    snprintf(line, sizeof(line), "done rereplies=%ld\n", again_count);
    ctl_send(s->ctl, line);
    free(r.seen);
}

/* ---- stream */

/* Datagrams in flight: the window's datagrams fit half the receiver's buffer, at the
 * kernel's accounting of a datagram (its buffer rounded up to a power of two plus the
 * socket buffer head; an over-estimate is only a smaller window). */
static uint32_t window_for(const struct session *s, size_t size)
{
    size_t len = (size < s->maxpay ? size : s->maxpay) + 28 + 14 + 64 + 320, truesize = 512;
    size_t w;

    while (truesize < len) {
        truesize *= 2;
    }
    w = (size_t) s->peer_rcvbuf / 2 / (truesize + 256);
    return w > MAX_WINDOW ? MAX_WINDOW : w < 8 ? 8 : (uint32_t) w;
}

struct stream_result {
    long long t_start, t_end;
    unsigned long long sent, delivered, bytes, stalls;
    uint32_t window;
};

/* Initiator side of one stream of SIZE-byte messages for the time budget. */
static void stream_send(struct session *s, size_t size, double seconds, struct stream_result *res)
{
    struct mmsghdr m[BATCH], am[BATCH];
    struct iovec iov[BATCH], aiov[BATCH];
    struct ack acks[BATCH];
    uint32_t per_msg = dgrams_of(s, size), window = window_for(s, size), idx = 0;
    uint32_t seq = 0, acked = 0;
    long long t0, last_ack, deadline;
    char line[128];
    int done = 0;

    session_buffers(s, (size_t) per_msg * s->maxpay);
    snprintf(line, sizeof(line), "bw %zu %u\n", size, window);
    ctl_send(s->ctl, line);
    if (!ctl_recv(s->ctl, line, sizeof(line)) || strcmp(line, "ok")) {
        fprintf(stderr, "rawudp: responder refused bw %zu: %s\n", size, line);
        exit(1);
    }
    for (int k = 0; k < BATCH; ++k) {
        aiov[k].iov_base = &acks[k];
        aiov[k].iov_len = sizeof(acks[k]);
        memset(&am[k], 0, sizeof(am[k]));
        am[k].msg_hdr.msg_iov = &aiov[k];
        am[k].msg_hdr.msg_iovlen = 1;
    }
    res->stalls = 0;
    t0 = last_ack = now_ns();
    deadline = t0 + (long long) (seconds * 1e9);
    /* whole messages only: stop at a message boundary after the deadline */
    while (!done || acked != seq) {
        int k = recv_some(s->udp, am, BATCH);
        unsigned n = 0;

        for (int j = 0; j < k; ++j) {
            if (am[j].msg_len == sizeof(struct ack) && acks[j].high - acked <= seq - acked &&
                acks[j].high != acked) {
                acked = acks[j].high;
                last_ack = now_ns();
            }
        }
        if (!done) {
            for (; n < BATCH && seq - acked < window; ++n, ++seq) {
                char *p = s->sbuf + (size_t) idx * s->maxpay;
                struct hdr h = {seq, 0};

                memcpy(p, &h, sizeof(h));
                iov[n].iov_base = p;
                iov[n].iov_len = dgram_len(s, size, idx);
                memset(&m[n], 0, sizeof(m[n]));
                m[n].msg_hdr.msg_iov = &iov[n];
                m[n].msg_hdr.msg_iovlen = 1;
                if (++idx == per_msg) {
                    idx = 0;
                    if ((seq & 63) == 63 || per_msg > 1) {
                        if (now_ns() >= deadline) {
                            ++seq, ++n;
                            done = 1;
                            break;
                        }
                    }
                }
            }
            send_all(s->udp, m, n);
        }
        if (0 == k && 0 == n && now_ns() - last_ack > STALL_NS) {
            /* nothing acknowledged for a while: what is in flight was lost */
            acked = seq;
            last_ack = now_ns();
            ++res->stalls;
        }
    }
    res->t_start = t0;
    res->t_end = now_ns();
    res->sent = seq;
    res->window = window;
    snprintf(line, sizeof(line), "stop %u\n", seq);
    ctl_send(s->ctl, line);
    if (!ctl_recv(s->ctl, line, sizeof(line)) ||
        2 != sscanf(line, "done %llu %llu", &res->delivered, &res->bytes)) {
        fprintf(stderr, "rawudp: no stream report from the responder: %s\n", line);
        exit(1);
    }
}

/* Responder side of a stream: counts what arrives, acknowledges every quarter window
 * and whenever the socket runs dry, until "stop N" comes and N datagrams are accounted
 * for (or nothing came for 200 ms). */
static void serve_bw(struct session *s, size_t size, uint32_t window)
{
    struct mmsghdr m[BATCH];
    struct iovec iov[BATCH];
    uint32_t per_msg = dgrams_of(s, size), high = 0, next = 0, unacked = 0, total = 0;
    unsigned long long received = 0, bytes = 0;
    unsigned idle = 0;
    int stopping = 0;
    long long quiet = 0, last_data = now_ns();
    char line[128];

    session_buffers(s, (size_t) per_msg * s->maxpay);
    ctl_send(s->ctl, "ok\n");
    for (;;) {
        int k = recv_some(s->udp, m, post_rx(s, m, iov, next, per_msg));

        for (int j = 0; j < k; ++j) {
            struct hdr h;

            if (m[j].msg_len < HDR) {
                continue;
            }
            memcpy(&h, m[j].msg_hdr.msg_iov->iov_base, sizeof(h));
            ++received;
            bytes += m[j].msg_len;
            if (h.a + 1 - high < 0x80000000u) {
                high = h.a + 1;
            }
        }
        next = (next + (unsigned) k) % per_msg;
        unacked += (unsigned) k;
        if (k > 0) {
            last_data = now_ns();
        }
        /* an ACK per quarter window, and one when the stream pauses (the sender waits
         * for it, or a datagram was lost); not one per empty poll, which would cost the
         * sender a receive per batch */
        if (unacked > 0 && (unacked >= window / 4 || (0 == k && now_ns() - last_data > ACK_IDLE_NS))) {
            struct ack a = {high, (uint32_t) received};

            if (send(s->udp, &a, sizeof(a), 0) == (ssize_t) sizeof(a) || EAGAIN != errno) {
                unacked = 0;
            }
        }
        if (k > 0) {
            idle = 0;
            quiet = 0;
            continue;
        }
        if (stopping) {
            if (high == total && received >= total) {
                break;
            }
            if (0 == quiet) {
                quiet = now_ns();
            } else if (now_ns() - quiet > STALL_NS) {
                break;
            }
        } else if (++idle % 1024 == 0 && ctl_ready(s->ctl)) {
            if (!ctl_recv(s->ctl, line, sizeof(line)) || 1 != sscanf(line, "stop %u", &total)) {
                fprintf(stderr, "rawudp: bad stream end: %s\n", line);
                exit(1);
            }
            stopping = 1;
        }
    }
    snprintf(line, sizeof(line), "done %llu %llu\n", received, bytes);
    ctl_send(s->ctl, line);
}

static void print_stream(const char *test, size_t size, const struct stream_result *r,
                         unsigned long long sent, unsigned long long delivered,
                         unsigned long long bytes, unsigned long long stalls, double secs)
{
    /* messages: delivered payload in whole-message units; MB/s counts only what arrived
     * (the 8-byte header is the message's own first bytes) */
    double msgs = (double) bytes / size;

    printf("%-5s %8zu %7.0f %5u %12.3f %12.3f %12.3f %12.3f %12.1f\n", test, size, msgs,
           r->window, secs / msgs * 1e6, secs / msgs * 1e6, secs / msgs * 1e6,
           bytes / secs / 1e6, msgs / secs);
    printf("rawudp %s %zu sent=%llu delivered=%llu lost=%llu window=%u stalls=%llu\n", test,
           size, sent, delivered, sent - delivered, r->window, stalls);
    fflush(stdout);
}

static void init_bw(struct session *s, size_t size)
{
    struct stream_result r, w;

    stream_send(s, size, warm_budget, &w); /* warm-up: not reported */
    stream_send(s, size, budget, &r);
    print_stream("bw", size, &r, r.sent, r.delivered, r.bytes, r.stalls,
                 (r.t_end - r.t_start) / 1e9);
}

/* ---- sessions */

static struct session *open_session(const char *host, int port)
{
    struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM}, *ai;
    struct session *s = calloc(1, sizeof(*s));
    char portstr[16], line[128];
    int one = 1, peer_port;

    snprintf(portstr, sizeof(portstr), "%d", port);
    if (getaddrinfo(host, portstr, &hints, &ai)) {
        fprintf(stderr, "rawudp: cannot resolve %s\n", host);
        exit(1);
    }
    s->ctl = socket(AF_INET, SOCK_STREAM, 0);
    /* the responder may still be starting */
    for (int tries = 0; connect(s->ctl, ai->ai_addr, ai->ai_addrlen); ++tries) {
        if (tries > 100) {
            die("control connect");
        }
        close(s->ctl);
        s->ctl = socket(AF_INET, SOCK_STREAM, 0);
        usleep(100000);
    }
    freeaddrinfo(ai);
    setsockopt(s->ctl, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    s->udp = udp_socket();
    if (!ctl_recv(s->ctl, line, sizeof(line)) ||
        2 != sscanf(line, "hello %d %d", &peer_port, &s->peer_rcvbuf)) {
        fprintf(stderr, "rawudp: bad greeting from the responder: %s\n", line);
        exit(1);
    }
    snprintf(line, sizeof(line), "hello %d %d\n", local_port(s->udp),
             sock_int(s->udp, SOL_SOCKET, SO_RCVBUF));
    ctl_send(s->ctl, line);
    s->maxpay = udp_connect(s, peer_port);
    return s;
}

/* Responder: one session on control connection FD; exits 3 on "quit". */
static void serve_session(int fd)
{
    struct session s = {.ctl = fd};
    char line[128];
    int one = 1, peer_port, rcvbuf;
    size_t size;
    unsigned window;

    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    s.udp = udp_socket();
    snprintf(line, sizeof(line), "hello %d %d\n", local_port(s.udp),
             sock_int(s.udp, SOL_SOCKET, SO_RCVBUF));
    ctl_send(fd, line);
    if (!ctl_recv(fd, line, sizeof(line)) || 2 != sscanf(line, "hello %d %d", &peer_port, &rcvbuf)) {
        exit(1);
    }
    s.maxpay = udp_connect(&s, peer_port);
    while (ctl_recv(fd, line, sizeof(line))) {
        if (1 == sscanf(line, "lat %zu", &size) && size >= HDR) {
            serve_lat(&s, size);
        } else if (2 == sscanf(line, "bw %zu %u", &size, &window) && size >= HDR && window > 0) {
            serve_bw(&s, size, window);
        } else if (0 == strcmp(line, "quit")) {
            exit(3);
        } else if (0 == strcmp(line, "bye")) {
            exit(0);
        } else {
            ctl_send(fd, "error\n");
        }
    }
    exit(0);
}

static void responder(int port)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t) port)};
    int lfd = socket(AF_INET, SOCK_STREAM, 0), one = 1;

    setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(lfd, (struct sockaddr *) &a, sizeof(a)) || listen(lfd, 16)) {
        die("control listen");
    }
    printf("# rawudp responder on port %d\n", port);
    fflush(stdout);
    for (;;) {
        struct pollfd p = {.fd = lfd, .events = POLLIN};
        int status;
        pid_t pid;

        /* Sessions are reaped on every turn, not from a SIGCHLD handler: a
         * session that ends while none is awaited (many end at once after
         * mr) would otherwise leave this loop blocked in accept for good. */
        while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
            if (WIFEXITED(status) && 3 == WEXITSTATUS(status)) {
                exit(0);
            }
        }
        if (poll(&p, 1, 100) > 0) {
            int fd = accept(lfd, NULL, NULL);

            if (fd >= 0) {
                if (0 == fork()) {
                    close(lfd);
                    alarm(kill_after); /* fork cleared the parent's */
                    serve_session(fd);
                }
                close(fd);
            }
        }
    }
}

/* mr: PAIRS processes, each its own session, stream together. */
static void init_mr(const char *host, int port, int pairs, size_t size)
{
    int ready[2], go[2], results[2];
    struct stream_result sum = {0}, r;
    unsigned long long sent = 0, delivered = 0, bytes = 0, stalls = 0;
    long long first = 0, last = 0;
    char c = 'g';

    if (pipe(ready) || pipe(go) || pipe(results)) {
        die("pipe");
    }
    for (int i = 0; i < pairs; ++i) {
        if (0 == fork()) {
            struct session *s = open_session(host, port);
            struct stream_result w;

            stream_send(s, size, warm_budget, &w);
            if (write(ready[1], &c, 1) != 1 || read(go[0], &c, 1) != 1) {
                exit(1);
            }
            stream_send(s, size, budget, &r);
            if (write(results[1], &r, sizeof(r)) != (ssize_t) sizeof(r)) {
                exit(1);
            }
            ctl_send(s->ctl, "bye\n");
            exit(0);
        }
    }
    for (int i = 0; i < pairs; ++i) {
        if (read(ready[0], &c, 1) != 1) {
            die("mr: a pair failed to start");
        }
    }
    for (int i = 0; i < pairs; ++i) {
        if (write(go[1], &c, 1) != 1) {
            die("mr: start");
        }
    }
    for (int i = 0; i < pairs; ++i) {
        if (read(results[0], &r, sizeof(r)) != (ssize_t) sizeof(r)) {
            die("mr: a pair failed");
        }
        sent += r.sent, delivered += r.delivered, bytes += r.bytes, stalls += r.stalls;
        first = 0 == i || r.t_start < first ? r.t_start : first;
        last = 0 == i || r.t_end > last ? r.t_end : last;
        sum.window = r.window;
    }
    for (int i = 0; i < pairs; ++i) {
        int status;

        wait(&status);
    }
    print_stream("mr", size, &sum, sent, delivered, bytes, stalls, (last - first) / 1e9);
}

static void usage(void)
{
    fprintf(stderr,
            "usage: rawudp -r [-p PORT] [-k SECONDS]\n"
            "       rawudp -c HOST [-p PORT] [-t lat,bw,mr] [-S SIZE,...] [-P PAIRS]\n"
            "              [-T BUDGET_MS] [-W WARMUP_MS] [-n MIN_ITERS] [-N MAX_ITERS] [-q] [-y]\n"
            "              [-b BATCH] [-a] [-g]\n"
            "  sizes >= 8 bytes; -k: give up after that many seconds (default 900);\n"
            "  -y: sched_yield() on an empty poll (more processes than CPUs); -b: datagrams\n"
            "  per sendmmsg; -a: name the peer in every send; -g: runs of equal datagrams as\n"
            "  one UDP_SEGMENT message\n");
    exit(2);
}

int main(int argc, char **argv)
{
    const char *host = NULL;
    char *list = NULL, *tests = NULL, *tok, *save;
    int opt, port = 18600, serve = 0, pairs = 1, quit = 0, nsizes = 0;
    size_t sizes[MAX_SIZES];
    double *times;
    struct session *s;

    while ((opt = getopt(argc, argv, "rc:p:k:t:S:P:T:W:n:N:qyb:ag")) != -1) {
        switch (opt) {
        case 'r': serve = 1; break;
        case 'c': host = optarg; break;
        case 'p': port = atoi(optarg); break;
        case 'k': kill_after = (unsigned) atoi(optarg); break;
        case 't': tests = optarg; break;
        case 'S': list = optarg; break;
        case 'P': pairs = atoi(optarg); break;
        case 'T': budget = atof(optarg) / 1e3; break;
        case 'W': warm_budget = atof(optarg) / 1e3; break;
        case 'n': min_iters = atol(optarg); break;
        case 'N': max_iters = atol(optarg); break;
        case 'q': quit = 1; break;
        case 'y': yield_idle = 1; break;
        case 'b':
            send_batch = (unsigned) atoi(optarg);
            if (send_batch < 1 || send_batch > BATCH) {
                fprintf(stderr, "rawudp: -b takes 1 to %d\n", BATCH);
                return 2;
            }
            break;
        case 'a': name_peer = 1; break;
        case 'g': segment = 1; break;
        default: usage();
        }
    }
    if (optind != argc || serve == (NULL != host) || port <= 0 || pairs < 1 || min_iters < 1 ||
        max_iters < min_iters) {
        usage();
    }
    alarm(kill_after); /* a lost peer must not leave a spinning process behind */
    if (serve) {
        responder(port);
    }
    for (tok = strtok_r(list ? list : "8,64,1024", ",", &save); tok && nsizes < MAX_SIZES;
         tok = strtok_r(NULL, ",", &save)) {
        sizes[nsizes] = strtoull(tok, NULL, 0);
        if (sizes[nsizes++] < HDR) {
            usage();
        }
    }
    if (!(times = malloc((size_t) max_iters * sizeof(*times)))) {
        die("malloc");
    }
    s = open_session(host, port);
    printf("# rawudp: %s, path MTU payload %zu B, receive buffer %d / %d B, send buffer %d B; "
           "budget %.0f ms/size, warm-up %.0f ms, iterations %ld..%ld\n",
           host, s->maxpay, sock_int(s->udp, SOL_SOCKET, SO_RCVBUF), s->peer_rcvbuf,
           sock_int(s->udp, SOL_SOCKET, SO_SNDBUF), budget * 1e3, warm_budget * 1e3, min_iters,
           max_iters);
    printf("# %-3s %8s %7s %5s %12s %12s %12s %12s %12s\n", "test", "size", "iters", "win",
           "mean_us", "median_us", "min_us", "MB/s", "msg/s");
    fflush(stdout);
    for (tok = strtok_r(tests ? tests : "lat,bw", ",", &save); tok;
         tok = strtok_r(NULL, ",", &save)) {
        for (int j = 0; j < nsizes; ++j) {
            if (0 == strcmp(tok, "lat")) {
                init_lat(s, sizes[j], times);
            } else if (0 == strcmp(tok, "bw")) {
                init_bw(s, sizes[j]);
            } else if (0 == strcmp(tok, "mr")) {
                init_mr(host, port, pairs, sizes[j]);
            } else {
                usage();
            }
        }
    }
    ctl_send(s->ctl, quit ? "quit\n" : "bye\n");
    printf("# rawudp: done\n");
    return 0;
}
