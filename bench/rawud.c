/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 * $COPYRIGHT$
 * SPDX-License-Identifier: BSD-3-Clause
 *
 * rawud: raw verbs UD under bench/mpibench.c's bw load, the limit of usnic's
 * stream on a verbs device.  perftest's ib_send_bw keeps its send queue full
 * without a pause; mpibench's bw sends a window of messages, then waits for
 * the receiver's 4-byte answer to the window before it sends the next.  This
 * program does the same over one UD queue pair per side: a window of WINDOW
 * sends of SIZE bytes (one datagram each, every send signalled; usnic asks
 * only for those whose data the device reads after the post), the receiver
 * reposts each buffer as it completes and answers the window's last
 * datagram with a datagram of 4 bytes.  Both sides busy-poll,
 * or with -y yield the CPU (sched_yield) after each poll that found nothing,
 * as usnic's progress does on Soft-RoCE.  A window of 1 is a round trip.
 * With -m (a build with mpicc -DRAWUD_MPI, run by mpirun -np 1 --mca btl self)
 * each side passes every datagram it receives through an 8-byte MPI message
 * to itself (MPI_Isend, MPI_Recv, MPI_Wait) before it goes on: ob1's path,
 * which an MPI ping-pong pays per message over any BTL, on raw UD's trip.
 *
 *   rawud -r -d DEV [-x GID_INDEX] [-p PORT] [-y] [-m]
 *       responder: serves one initiator, then exits
 *   rawud -c HOST -d DEV [-x GID_INDEX] [-p PORT] [-y] [-m] [-S SIZE,...] [-w WINDOW]
 *         [-T BUDGET_MS] [-W WARMUP_MS] [-n MIN_ITERS] [-N MAX_ITERS]
 *       initiator: one output line per size, in mpibench's format
 *       (TEST SIZE ITERS WINDOW MEAN_US MEDIAN_US MIN_US MB/S MSG/S), the test
 *       named bw; ITERS windows measured, MEAN_US the measured time per
 *       message, MEDIAN_US and MIN_US the median and shortest window's time
 *       per message.  Iteration counts adapt as mpibench's: one timed warm-up
 *       window, more within the warm-up budget (at most 20), then the
 *       measured windows fill the budget, clamped to [-n, -N].
 *
 * The queue pairs' numbers and GIDs are exchanged over a TCP connection, on
 * which the initiator also tells the responder how many windows of which
 * size come next.  A window whose answer does not come within 2 s ends the
 * program with an error: the path (the VM's Soft-RoCE over a veth) loses
 * nothing, and a lost datagram would otherwise leave both sides waiting.
 */

#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <infiniband/verbs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#ifdef RAWUD_MPI
#include <mpi.h>
#endif

#define QKEY 0x11111111u
#define GRH 40           /* a UD receive buffer starts with the GRH */
#define ANSWER 4         /* the receiver's answer to a window */
#define MAX_SIZES 64
#define TIMEOUT_NS 2000000000LL

static int yield_when_idle;   /* -y */
static int mpi_hop;           /* -m */

#ifdef RAWUD_MPI
/* One 8-byte message to itself, the data checked. */
static void mpi_message(void)
{
    static char sbuf[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    char rbuf[8];
    MPI_Request r;

    MPI_Isend(sbuf, 8, MPI_CHAR, 0, 1, MPI_COMM_SELF, &r);
    MPI_Recv(rbuf, 8, MPI_CHAR, 0, 1, MPI_COMM_SELF, MPI_STATUS_IGNORE);
    MPI_Wait(&r, MPI_STATUS_IGNORE);
    if (rbuf[7] != 8) {
        fprintf(stderr, "rawud: wrong data from MPI\n");
        exit(1);
    }
}

static void mpi_start(int *argc, char ***argv)
{
    MPI_Init(argc, argv);
}

static void mpi_end(void)
{
    if (mpi_hop) {
        MPI_Finalize();
    }
}
#else
static void mpi_message(void) {}

static void mpi_start(int *argc, char ***argv)
{
    (void) argc;
    (void) argv;
    fprintf(stderr, "rawud: -m needs a build with mpicc -DRAWUD_MPI\n");
    exit(2);
}

static void mpi_end(void) {}
#endif

struct wire_addr {
    uint32_t qpn;
    uint8_t gid[16];
};

struct request {         /* initiator -> responder, before each run of windows */
    uint32_t size;       /* 0: the end */
    uint32_t window;
    uint32_t windows;
};

struct ud {
    struct ibv_context *ctx;
    struct ibv_pd *pd;
    struct ibv_cq *scq, *rcq;
    struct ibv_qp *qp;
    struct ibv_mr *mr;
    struct ibv_ah *ah;
    uint32_t remote_qpn;
    uint8_t *buf;          /* nrecv receive slots, then one send slot per window entry */
    size_t slot;           /* GRH + the largest size */
    int nrecv, nsend;
    int gid_index;
    uint32_t mtu;          /* the port's active MTU in bytes: the largest datagram */
};

static void die(const char *what)
{
    fprintf(stderr, "rawud: %s: %s\n", what, errno ? strerror(errno) : "failed");
    exit(1);
}

static long long now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void xfer(int fd, void *p, size_t n, int out)
{
    uint8_t *b = p;

    while (n > 0) {
        ssize_t k = out ? send(fd, b, n, MSG_NOSIGNAL) : recv(fd, b, n, 0);

        if (k <= 0) {
            if (k < 0 && EINTR == errno) {
                continue;
            }
            die(out ? "control send" : "control connection closed");
        }
        b += k;
        n -= (size_t) k;
    }
}

static void post_recv(struct ud *u, int i)
{
    struct ibv_sge sge = {.addr = (uintptr_t)(u->buf + (size_t) i * u->slot),
                          .length = (uint32_t) u->slot, .lkey = u->mr->lkey};
    struct ibv_recv_wr wr = {.wr_id = (uint64_t) i, .sg_list = &sge, .num_sge = 1}, *bad;

    if (ibv_post_recv(u->qp, &wr, &bad)) {
        die("ibv_post_recv");
    }
}

/* Opens DEV, makes a UD queue pair in RTS with nrecv receives posted. */
static void ud_open(struct ud *u, const char *dev, size_t max_size, int window)
{
    struct ibv_device **list = ibv_get_device_list(NULL);
    struct ibv_port_attr port;
    struct ibv_qp_attr a;

    for (int i = 0; list && list[i]; ++i) {
        if (0 == strcmp(ibv_get_device_name(list[i]), dev)) {
            u->ctx = ibv_open_device(list[i]);
        }
    }
    if (NULL == u->ctx) {
        fprintf(stderr, "rawud: no device %s\n", dev);
        exit(1);
    }
    ibv_free_device_list(list);
    if (ibv_query_port(u->ctx, 1, &port)) {
        die("ibv_query_port");
    }
    u->mtu = 128u << port.active_mtu;
    if (max_size > u->mtu) {
        fprintf(stderr, "rawud: %zu bytes do not fit the port's MTU of %u\n", max_size, u->mtu);
        exit(1);
    }
    u->slot = GRH + (max_size > ANSWER ? max_size : ANSWER);
    u->nrecv = 2 * window + 16;
    u->nsend = window + 1;
    u->buf = calloc((size_t)(u->nrecv + u->nsend), u->slot);
    u->pd = ibv_alloc_pd(u->ctx);
    u->scq = ibv_create_cq(u->ctx, u->nsend + 16, NULL, NULL, 0);
    u->rcq = ibv_create_cq(u->ctx, u->nrecv + 16, NULL, NULL, 0);
    if (!u->buf || !u->pd || !u->scq || !u->rcq) {
        die("device resources");
    }
    u->mr = ibv_reg_mr(u->pd, u->buf, (size_t)(u->nrecv + u->nsend) * u->slot,
                       IBV_ACCESS_LOCAL_WRITE);
    struct ibv_qp_init_attr ia = {.send_cq = u->scq, .recv_cq = u->rcq, .qp_type = IBV_QPT_UD,
                                  .cap = {.max_send_wr = (uint32_t) u->nsend + 16,
                                          .max_recv_wr = (uint32_t) u->nrecv,
                                          .max_send_sge = 1, .max_recv_sge = 1}};
    u->qp = ibv_create_qp(u->pd, &ia);
    if (!u->mr || !u->qp) {
        die("ibv_reg_mr / ibv_create_qp");
    }
    memset(&a, 0, sizeof(a));
    a.qp_state = IBV_QPS_INIT;
    a.port_num = 1;
    a.qkey = QKEY;
    if (ibv_modify_qp(u->qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY)) {
        die("QP to INIT");
    }
    a.qp_state = IBV_QPS_RTR;
    if (ibv_modify_qp(u->qp, &a, IBV_QP_STATE)) {
        die("QP to RTR");
    }
    a.qp_state = IBV_QPS_RTS;
    a.sq_psn = 0;
    if (ibv_modify_qp(u->qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN)) {
        die("QP to RTS");
    }
    for (int i = 0; i < u->nrecv; ++i) {
        post_recv(u, i);
    }
}

/* Swaps queue pair numbers and GIDs over the control connection; makes the AH. */
static void ud_connect(struct ud *u, int ctl)
{
    struct wire_addr mine = {.qpn = htonl(u->qp->qp_num)}, theirs;
    union ibv_gid gid;

    if (ibv_query_gid(u->ctx, 1, u->gid_index, &gid)) {
        die("ibv_query_gid");
    }
    memcpy(mine.gid, gid.raw, sizeof(mine.gid));
    xfer(ctl, &mine, sizeof(mine), 1);
    xfer(ctl, &theirs, sizeof(theirs), 0);
    u->remote_qpn = ntohl(theirs.qpn);
    struct ibv_ah_attr ah = {.is_global = 1, .port_num = 1,
                             .grh = {.sgid_index = (uint8_t) u->gid_index, .hop_limit = 64}};
    memcpy(ah.grh.dgid.raw, theirs.gid, sizeof(theirs.gid));
    u->ah = ibv_create_ah(u->pd, &ah);
    if (NULL == u->ah) {
        die("ibv_create_ah");
    }
}

static void post_send(struct ud *u, int i, uint32_t len)
{
    struct ibv_sge sge = {.addr = (uintptr_t)(u->buf + (size_t)(u->nrecv + i) * u->slot + GRH),
                          .length = len, .lkey = u->mr->lkey};
    struct ibv_send_wr wr = {.wr_id = (uint64_t) i, .sg_list = &sge, .num_sge = 1,
                             .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED,
                             .wr.ud = {.ah = u->ah, .remote_qpn = u->remote_qpn,
                                       .remote_qkey = QKEY}}, *bad;

    if (ibv_post_send(u->qp, &wr, &bad)) {
        die("ibv_post_send");
    }
}

/* Waits for n completions of cq, the send or the receive queue's; a
 * receive's buffer is posted again at once. */
static void wait_cq(struct ud *u, struct ibv_cq *cq, int n, long long deadline)
{
    const char *what = cq == u->rcq ? "receive" : "send";
    struct ibv_wc wc[32];

    while (n > 0) {
        int got = ibv_poll_cq(cq, n < 32 ? n : 32, wc);

        if (got < 0) {
            die("ibv_poll_cq");
        }
        for (int i = 0; i < got; ++i) {
            if (IBV_WC_SUCCESS != wc[i].status) {
                fprintf(stderr, "rawud: %s: %s\n", what, ibv_wc_status_str(wc[i].status));
                exit(1);
            }
            if (cq == u->rcq) {
                post_recv(u, (int) wc[i].wr_id);
                if (mpi_hop) {
                    mpi_message();
                }
            }
        }
        n -= got;
        if (0 == got && yield_when_idle) {
            sched_yield();
        }
        if (0 == got && now_ns() > deadline) {
            fprintf(stderr, "rawud: %d %s completion(s) missing after 2 s\n", n, what);
            exit(1);
        }
    }
}

/* One window as the sender: WINDOW sends, then the answer; its time in ns. */
static long long send_window(struct ud *u, uint32_t size, int window)
{
    long long t0 = now_ns();

    for (int i = 0; i < window; ++i) {
        post_send(u, i, size);
    }
    wait_cq(u, u->scq, window, t0 + TIMEOUT_NS);
    wait_cq(u, u->rcq, 1, now_ns() + TIMEOUT_NS);
    return now_ns() - t0;
}

/* One window as the receiver: WINDOW datagrams, then the answer. */
static void recv_window(struct ud *u, int window)
{
    wait_cq(u, u->rcq, window, now_ns() + TIMEOUT_NS);
    post_send(u, 0, ANSWER);
    wait_cq(u, u->scq, 1, now_ns() + TIMEOUT_NS);
}

static int cmp_ll(const void *a, const void *b)
{
    long long x = *(const long long *) a, y = *(const long long *) b;

    return x < y ? -1 : x > y;
}

static int ctl_listen(int port)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t) port),
                             .sin_addr.s_addr = htonl(INADDR_ANY)};
    int one = 1, fd = socket(AF_INET, SOCK_STREAM, 0), c;

    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (fd < 0 || bind(fd, (struct sockaddr *) &sa, sizeof(sa)) || listen(fd, 1)) {
        die("control listen");
    }
    c = accept(fd, NULL, NULL);
    if (c < 0) {
        die("control accept");
    }
    close(fd);
    setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    return c;
}

static int ctl_connect(const char *host, int port)
{
    struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM}, *ai;
    char ps[16];
    int one = 1, fd = -1;

    snprintf(ps, sizeof(ps), "%d", port);
    if (getaddrinfo(host, ps, &hints, &ai)) {
        fprintf(stderr, "rawud: cannot resolve %s\n", host);
        exit(1);
    }
    /* the responder may still be starting: retry for 10 s */
    for (int i = 0; i < 100; ++i) {
        fd = socket(AF_INET, SOCK_STREAM, 0);
        if (0 == connect(fd, ai->ai_addr, ai->ai_addrlen)) {
            break;
        }
        close(fd);
        fd = -1;
        usleep(100000);
    }
    freeaddrinfo(ai);
    if (fd < 0) {
        die("control connect");
    }
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    return fd;
}

static long clamp_long(double v, long lo, long hi)
{
    return v < lo ? lo : v > hi ? hi : (long) v;
}

/* Tells the responder what comes, then sends that many windows; times into t. */
static void run_windows(struct ud *u, int ctl, uint32_t size, int window, long n, long long *t)
{
    struct request rq = {.size = htonl(size), .window = htonl((uint32_t) window),
                         .windows = htonl((uint32_t) n)};
    char ok;

    xfer(ctl, &rq, sizeof(rq), 1);
    xfer(ctl, &ok, 1, 0);    /* the responder is polling */
    for (long i = 0; i < n; ++i) {
        long long d = send_window(u, size, window);

        if (t) {
            t[i] = d;
        }
    }
}

int main(int argc, char **argv)
{
    const char *dev = NULL, *host = NULL, *list = "8";
    double budget = 0.3, warm_budget = 0.06;
    long min_iters = 20, max_iters = 10000;
    int opt, port = 18900, responder = 0, window = 64, gid_index = 1;
    size_t sizes[MAX_SIZES], nsizes = 0, max_size = 0;
    struct ud u = {0};

    while ((opt = getopt(argc, argv, "rc:d:x:p:ymS:w:T:W:n:N:")) != -1) {
        switch (opt) {
        case 'r': responder = 1; break;
        case 'c': host = optarg; break;
        case 'd': dev = optarg; break;
        case 'x': gid_index = atoi(optarg); break;
        case 'p': port = atoi(optarg); break;
        case 'y': yield_when_idle = 1; break;
        case 'm': mpi_hop = 1; break;
        case 'S': list = optarg; break;
        case 'w': window = atoi(optarg); break;
        case 'T': budget = atof(optarg) / 1e3; break;
        case 'W': warm_budget = atof(optarg) / 1e3; break;
        case 'n': min_iters = atol(optarg); break;
        case 'N': max_iters = atol(optarg); break;
        default: return 2;
        }
    }
    if (NULL == dev || responder == (NULL != host) || window < 1 || window > 4096 ||
        min_iters < 1 || max_iters < min_iters) {
        fprintf(stderr, "usage: rawud -r -d DEV [-x GID_INDEX] [-p PORT] [-y] [-m]\n"
                        "       rawud -c HOST -d DEV [-x GID_INDEX] [-p PORT] [-y] [-m] [-S SIZE,...]"
                        " [-w WINDOW] [-T MS] [-W MS] [-n MIN] [-N MAX]\n");
        return 2;
    }
    for (char *s = strtok(strdup(list), ","); s && nsizes < MAX_SIZES; s = strtok(NULL, ",")) {
        sizes[nsizes] = strtoull(s, NULL, 0);
        if (sizes[nsizes] < 1) {
            fprintf(stderr, "rawud: sizes start at 1 byte\n");
            return 2;
        }
        max_size = sizes[nsizes] > max_size ? sizes[nsizes] : max_size;
        ++nsizes;
    }
    if (mpi_hop) {
        mpi_start(&argc, &argv);
    }
    u.gid_index = gid_index;
    if (responder) {
        int ctl = ctl_listen(port);
        struct request rq;

        /* the initiator names the largest size and the window first: the buffers */
        xfer(ctl, &rq, sizeof(rq), 0);
        window = (int) ntohl(rq.window);
        if (window < 1 || window > 4096) {
            fprintf(stderr, "rawud: the initiator asked for a window of %d\n", window);
            return 1;
        }
        ud_open(&u, dev, ntohl(rq.size), window);
        ud_connect(&u, ctl);
        for (;;) {
            xfer(ctl, &rq, sizeof(rq), 0);
            if (0 == rq.size) {
                mpi_end();
                return 0;
            }
            if (ntohl(rq.size) > u.slot - GRH || (int) ntohl(rq.window) > window) {
                fprintf(stderr, "rawud: a request beyond the buffers\n");
                return 1;
            }
            xfer(ctl, "k", 1, 1);
            for (uint32_t i = 0; i < ntohl(rq.windows); ++i) {
                recv_window(&u, (int) ntohl(rq.window));
            }
        }
    }
    int ctl = ctl_connect(host, port);
    struct request first = {.size = htonl((uint32_t) max_size), .window = htonl((uint32_t) window)},
                   end = {0};

    xfer(ctl, &first, sizeof(first), 1);
    ud_open(&u, dev, max_size, window);
    ud_connect(&u, ctl);
    printf("# rawud: %s, MTU %u B, window %d; budget %.0f ms/size, warm-up %.0f ms, "
           "iterations %ld..%ld\n", dev, u.mtu, window, budget * 1e3, warm_budget * 1e3,
           min_iters, max_iters);
    printf("# %-3s %8s %7s %5s %12s %12s %12s %12s %12s\n", "test", "size", "iters", "win",
           "mean_us", "median_us", "min_us", "MB/s", "msg/s");
    for (size_t k = 0; k < nsizes; ++k) {
        uint32_t size = (uint32_t) sizes[k];
        long long one, *t, sum = 0;
        long warm, n;

        run_windows(&u, ctl, size, window, 1, &one);
        warm = clamp_long(warm_budget / (one * 1e-9), 0, 20);
        run_windows(&u, ctl, size, window, warm, NULL);
        n = clamp_long(budget / (one * 1e-9), min_iters, max_iters);
        t = calloc((size_t) n, sizeof(*t));
        run_windows(&u, ctl, size, window, n, t);
        for (long i = 0; i < n; ++i) {
            sum += t[i];
        }
        qsort(t, (size_t) n, sizeof(*t), cmp_ll);
        double msgs = (double) n * window, secs = sum * 1e-9;
        printf("%-5s %8u %7ld %5d %12.2f %12.2f %12.2f %12.3f %12.1f\n", "bw", size, n, window,
               secs / msgs * 1e6, t[n / 2] * 1e-3 / window, t[0] * 1e-3 / window,
               msgs * size / secs / 1e6, msgs / secs);
        fflush(stdout);
        free(t);
    }
    xfer(ctl, &end, sizeof(end), 1);
    mpi_end();
    return 0;
}
