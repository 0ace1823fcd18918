/* Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 * SPDX-License-Identifier: BSD-3-Clause */
/*
 * usnic_rogue: a rogue sender for the usnic BTL's receive path.
 *
 * Runs on a host of the rxe VM while an MPI job uses usnic, and sends crafted UD datagrams
 * straight at the queue pairs of one usnic process (the target): wrong Q_Keys, truncated
 * packets, wrong lengths, unknown senders, chunks out of range, random bytes, and datagrams
 * forged in the name of the target's real peer. The receiver must drop every one of them
 * and count it; the job must not notice.
 *
 * What a forger needs: the target's Q_Key and queue pair numbers, and the sender ids of the
 * target and of its peer. The Q_Key is random and printed nowhere, so the tool reads it
 * from memory, as a local attacker with the job's user id can (ptrace access to the job's
 * processes; here root): -A PID scans the heap and anonymous memory of process PID (the
 * target itself, or a process of the job that talks to it and so holds its modex record)
 * for the target's usnic modex record, found by the target's GID (-G), and takes the queue
 * pairs and the Q_Key from it. Sequence numbers come from the wire: the tool watches the
 * RoCE v2 packets on its host's netdev (-I, an AF_PACKET socket: root only).
 *
 * Each datagram is sent with an expectation of what the receiver does with it (which
 * counter moves); the tool prints the totals per mode and overall, for the test to compare
 * with the receiver's "btl:usnic: stats" counters.
 *
 *   usnic_rogue -d rxeB -g 1 -G 10.88.0.1 -A PID -T TARGET_ID -s PEER_ID [-I vethB] -m MODES
 *   usnic_rogue -G 10.88.0.1 -A PID -D      print the target's record found in PID and exit
 *   usnic_rogue -d rxeA -Q                  print the port's Q_Key violation counter and exit
 * (-p PRIO_QPN -q DATA_QPN -k QKEY give the record's values instead of -A.)
 *
 * Modes (comma-separated; "all" = short badlen unknown chunk random forge):
 *   wrongqkey  datagrams of all the kinds below, with a wrong Q_Key: the device must drop
 *              them (its Q_Key violation counter moves, usnic's counters do not)
 *   short      0-31 bytes: shorter than the 32-byte header                  -> bad
 *   badlen     payload_len disagreeing with the datagram, bad ACK/chunk lengths,
 *              unknown payload types                                           -> bad
 *   unknown    well-formed datagrams from sender ids not in the job             -> unk
 *   chunk      chunks with frag ids, sizes and offsets out of range               -> bad
 *   random     random bytes, random lengths                                   -> bad/unk
 *   forge      well-formed datagrams with the peer's (-s) real sender id and sequence
 *              numbers a real one could carry, from our own queue pair and GID: ACKs for
 *              what the target sent last, fragments and first chunks next in the peer's
 *              stream (with piggy-backed ACKs), emulated PUTs into the canary (-c),
 *              emulated GETs of it and fetch-and-adds on it (tag 255), and fragments
 *              for active-message tag 254                                  -> forged
 * Extra mode, not in "all":
 *   oversize   datagrams larger than the priority channel's receive buffers: the
 *              device drops them, or completes the receive with an error  -> (recv_err)
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <net/if.h>
#include <poll.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#include "btl_usnic_wire.h"

#define SLOTS 64
#define SLOT_BYTES 4096
#define ROCE_PORT 4791
#define BTH_LEN 12
#define DETH_LEN 8
#define OP_UD_SEND_ONLY 0x64
#define OP_UD_SEND_ONLY_IMM 0x65
#define OB1_TAG 65          /* an active-message tag ob1 registers (its match header) */
#define SCAN_CHUNK (1 << 20)

/* What the receiver must do with a datagram, i.e. which usnic counter moves. */
enum expect { E_BAD, E_UNK, E_FORGED, E_OVERSIZE, E_NONE, E_NUM };
static const char *const expect_name[E_NUM] = {
    "bad", "unk", "forged", "oversize", "device-drop",
};

static struct {
    const char *dev, *ifname, *target;
    int port, gid_index;
    uint32_t qpn[2];            /* [0] priority, [1] data: as in the usnic modex */
    uint32_t qkey;
    uint64_t target_id, peer_id;
    int mem_pid;                /* -A: read the target's record from this process */
    bool dump;                  /* -D: print that record and exit */
    uint64_t canary;
    uint32_t canary_len;
    int count, batch, pause_us;
    uint32_t mtu, prio_mtu;
    uint64_t seed;
    int verbose;
} opt = {
    .dev = "rxeB", .target = "10.88.0.1", .port = 1, .gid_index = 1, .count = 200,
    .batch = 16, .pause_us = 2000, .mtu = 4096, .prio_mtu = 768,
};

static struct ibv_context *ctx;
static struct ibv_pd *pd;
static struct ibv_cq *cq;
static struct ibv_qp *qp;
static struct ibv_ah *ah;
static struct ibv_mr *mr;
static uint8_t *slots;
static int next_slot, outstanding, in_batch;
static uint32_t own_qkey;   /* our QP's Q_Key: never the target's */

static uint64_t rng_state;
static long sent[E_NUM], mode_sent[E_NUM], send_errors, wrong_qkey_sent;

static void die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "rogue: ERROR ");
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n");
    exit(1);
}

static void note(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    printf("rogue: ");
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
    fflush(stdout);
}

static uint64_t rnd(void)
{
    uint64_t x = rng_state;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return rng_state = x;
}

static uint32_t rnd_below(uint32_t n)
{
    return n ? (uint32_t)(rnd() % n) : 0;
}

static void rnd_fill(void *buf, size_t n)
{
    uint8_t *p = buf;
    for (size_t i = 0; i < n; ++i) {
        p[i] = (uint8_t) rnd();
    }
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static bool known_id(uint64_t id)
{
    return id == opt.target_id || id == opt.peer_id;
}

/* ---- verbs ---- */

static void parse_gid(const char *s, union ibv_gid *gid)
{
    struct in_addr a4;

    memset(gid, 0, sizeof(*gid));
    if (1 == inet_pton(AF_INET, s, &a4)) {
        gid->raw[10] = 0xff;
        gid->raw[11] = 0xff;
        memcpy(&gid->raw[12], &a4, 4);
    } else if (1 != inet_pton(AF_INET6, s, gid->raw)) {
        die("bad target address %s (IPv4 or IPv6 GID)", s);
    }
}

/* ---- the target's modex record, from a process's memory ---- */

static bool plausible_record(const usnic_modex_addr_t *r, const uint8_t *gid)
{
    return 0 == memcmp(r->gid, gid, sizeof(r->gid)) && USNIC_MODEX_VERSION == r->version &&
           0 != r->qkey && 0 == (r->qkey & 0x80000000u) && 0 != r->qp_num[0] &&
           0 != r->qp_num[1] && r->qp_num[0] != r->qp_num[1] && r->qp_num[0] < (1u << 24) &&
           r->qp_num[1] < (1u << 24) && r->prefix <= 32 && r->mtu >= 256 && r->mtu <= 4096 &&
           0 == (r->mtu & (r->mtu - 1));
}

/* Scan the heap and anonymous mappings of opt.mem_pid for records of the target's GID
 * (its own, or the copies a peer keeps); they must all agree. Fills opt.qpn and opt.qkey
 * where not given. */
static void find_record(void)
{
    static uint8_t chunk[SCAN_CHUNK + sizeof(usnic_modex_addr_t)];
    usnic_modex_addr_t rec, first = {.version = 0};
    union ibv_gid gid;
    char path[64], line[1024];
    long copies = 0;
    uint32_t key;
    FILE *maps;
    int mem;

    parse_gid(opt.target, &gid);
    memcpy(&key, gid.raw + 12, sizeof(key));
    snprintf(path, sizeof(path), "/proc/%d/maps", opt.mem_pid);
    maps = fopen(path, "r");
    snprintf(path, sizeof(path), "/proc/%d/mem", opt.mem_pid);
    mem = open(path, O_RDONLY);
    if (NULL == maps || mem < 0) {
        die("cannot read the memory of process %d: %s", opt.mem_pid, strerror(errno));
    }
    while (NULL != fgets(line, sizeof(line), maps)) {
        unsigned long lo, hi;
        char perms[8], name[512] = "";

        if (sscanf(line, "%lx-%lx %7s %*s %*s %*s %511s", &lo, &hi, perms, name) < 3 ||
            'r' != perms[0] || ('\0' != name[0] && 0 != strcmp(name, "[heap]"))) {
            continue;
        }
        for (unsigned long a = lo; a < hi; a += SCAN_CHUNK) {
            size_t want = hi - a < sizeof(chunk) ? hi - a : sizeof(chunk);
            ssize_t n = pread(mem, chunk, want, (off_t) a);

            /* records are 4-byte aligned; the chunks overlap by a record */
            for (size_t off = 0; n >= (ssize_t) sizeof(rec) && off < SCAN_CHUNK &&
                                 off + sizeof(rec) <= (size_t) n;
                 off += 4) {
                if (0 != memcmp(chunk + off + 12, &key, sizeof(key))) {
                    continue;
                }
                memcpy(&rec, chunk + off, sizeof(rec));
                if (!plausible_record(&rec, gid.raw)) {
                    continue;
                }
                if (0 == copies++) {
                    first = rec;
                } else if (rec.qp_num[0] != first.qp_num[0] || rec.qp_num[1] != first.qp_num[1] ||
                           rec.qkey != first.qkey) {
                    die("process %d holds different records for %s (QPs %u/%u and %u/%u)",
                        opt.mem_pid, opt.target, first.qp_num[0], first.qp_num[1],
                        rec.qp_num[0], rec.qp_num[1]);
                }
            }
        }
    }
    fclose(maps);
    close(mem);
    if (0 == copies) {
        die("no usnic modex record of %s in the memory of process %d", opt.target, opt.mem_pid);
    }
    opt.qpn[0] = opt.qpn[0] ? opt.qpn[0] : first.qp_num[0];
    opt.qpn[1] = opt.qpn[1] ? opt.qpn[1] : first.qp_num[1];
    opt.qkey = opt.qkey ? opt.qkey : first.qkey;
    note("record of %s in process %d (%ld copies): QPs %u (priority) %u (data), Q_Key 0x%08x, "
         "ISN %u", opt.target, opt.mem_pid, copies, first.qp_num[0], first.qp_num[1], first.qkey,
         first.isn);
}

static struct ibv_context *open_dev(const char *name)
{
    struct ibv_device **list = ibv_get_device_list(NULL);
    struct ibv_context *c = NULL;

    if (NULL == list) {
        die("ibv_get_device_list: %s", strerror(errno));
    }
    for (int i = 0; NULL != list[i]; ++i) {
        if (0 == strcmp(ibv_get_device_name(list[i]), name)) {
            c = ibv_open_device(list[i]);
            break;
        }
    }
    ibv_free_device_list(list);
    if (NULL == c) {
        die("cannot open device %s", name);
    }
    return c;
}

static void verbs_init(void)
{
    struct ibv_qp_init_attr qia;
    struct ibv_qp_attr qa;
    struct ibv_ah_attr aa;

    ctx = open_dev(opt.dev);
    pd = ibv_alloc_pd(ctx);
    cq = NULL != pd ? ibv_create_cq(ctx, 2 * SLOTS, NULL, NULL, 0) : NULL;
    if (NULL == cq) {
        die("ibv_alloc_pd/ibv_create_cq: %s", strerror(errno));
    }
    if (0 != posix_memalign((void **) &slots, 4096, (size_t) SLOTS * SLOT_BYTES)) {
        die("out of memory");
    }
    memset(slots, 0, (size_t) SLOTS * SLOT_BYTES);
    mr = ibv_reg_mr(pd, slots, (size_t) SLOTS * SLOT_BYTES, IBV_ACCESS_LOCAL_WRITE);
    if (NULL == mr) {
        die("ibv_reg_mr: %s", strerror(errno));
    }
    memset(&qia, 0, sizeof(qia));
    qia.send_cq = qia.recv_cq = cq;
    qia.qp_type = IBV_QPT_UD;
    qia.sq_sig_all = 1;
    qia.cap.max_send_wr = SLOTS;
    qia.cap.max_recv_wr = 1;
    qia.cap.max_send_sge = qia.cap.max_recv_sge = 1;
    qp = ibv_create_qp(pd, &qia);
    if (NULL == qp) {
        die("ibv_create_qp: %s", strerror(errno));
    }
    /* our own Q_Key is deliberately not the target's (see mode wrongqkey) */
    own_qkey = (opt.qkey ^ 0x00a5a5a5u) & 0x7fffffffu;
    memset(&qa, 0, sizeof(qa));
    qa.qp_state = IBV_QPS_INIT;
    qa.port_num = (uint8_t) opt.port;
    qa.qkey = own_qkey;
    if (ibv_modify_qp(qp, &qa, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY)) {
        die("ibv_modify_qp(INIT): %s", strerror(errno));
    }
    qa.qp_state = IBV_QPS_RTR;
    if (ibv_modify_qp(qp, &qa, IBV_QP_STATE)) {
        die("ibv_modify_qp(RTR): %s", strerror(errno));
    }
    qa.qp_state = IBV_QPS_RTS;
    qa.sq_psn = 0;
    if (ibv_modify_qp(qp, &qa, IBV_QP_STATE | IBV_QP_SQ_PSN)) {
        die("ibv_modify_qp(RTS): %s", strerror(errno));
    }
    memset(&aa, 0, sizeof(aa));
    aa.is_global = 1;
    parse_gid(opt.target, &aa.grh.dgid);
    aa.grh.sgid_index = (uint8_t) opt.gid_index;
    aa.grh.hop_limit = 64;
    aa.port_num = (uint8_t) opt.port;
    ah = ibv_create_ah(pd, &aa);
    if (NULL == ah) {
        die("ibv_create_ah to %s (GID index %d): %s", opt.target, opt.gid_index,
            strerror(errno));
    }
    note("QP %u on %s port %d, GID index %d -> %s QPs %u (priority) %u (data), Q_Key 0x%08x",
         qp->qp_num, opt.dev, opt.port, opt.gid_index, opt.target, opt.qpn[0], opt.qpn[1],
         opt.qkey);
}

/* Reap completions until at most `left` sends are outstanding. */
static void reap(int left)
{
    struct ibv_wc wc[16];
    double t0 = now_s();

    while (outstanding > left) {
        int n = ibv_poll_cq(cq, 16, wc);
        if (n < 0) {
            die("ibv_poll_cq failed");
        }
        for (int i = 0; i < n; ++i) {
            if (IBV_WC_SUCCESS != wc[i].status) {
                ++send_errors;
                if (opt.verbose) {
                    note("send completion: %s", ibv_wc_status_str(wc[i].status));
                }
            }
        }
        outstanding -= n;
        if (0 == n && now_s() - t0 > 10) {
            die("send completions stuck (%d outstanding)", outstanding);
        }
    }
}

/* Send one datagram of len bytes to the priority (0) or data (1) QP with Q_Key qkey. */
static void send_raw(int chan, const void *data, size_t len, uint32_t qkey, enum expect e)
{
    struct ibv_send_wr wr, *bad;
    struct ibv_sge sge;
    uint8_t *slot;
    int rc;

    if (len > (0 == chan ? opt.prio_mtu : opt.mtu) && E_OVERSIZE != e) {
        die("internal: %zu bytes for channel %d", len, chan);
    }
    reap(SLOTS - 1);
    slot = slots + (size_t) next_slot * SLOT_BYTES;
    next_slot = (next_slot + 1) % SLOTS;
    memcpy(slot, data, len);
    sge.addr = (uintptr_t) slot;
    sge.length = (uint32_t) len;
    sge.lkey = mr->lkey;
    memset(&wr, 0, sizeof(wr));
    wr.sg_list = &sge;
    wr.num_sge = len > 0;
    wr.opcode = IBV_WR_SEND;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.wr.ud.ah = ah;
    wr.wr.ud.remote_qpn = opt.qpn[chan];
    wr.wr.ud.remote_qkey = qkey;
    rc = ibv_post_send(qp, &wr, &bad);
    if (0 != rc) {
        die("ibv_post_send (%zu bytes): %s", len, strerror(rc));
    }
    ++outstanding;
    if (e < E_NUM) {            /* E_NUM: the caller counts it once it knows what it was */
        ++sent[e];
        ++mode_sent[e];
    }
    if (qkey != opt.qkey) {
        ++wrong_qkey_sent;
    }
    if (++in_batch >= opt.batch) {
        reap(0);
        in_batch = 0;
        if (opt.pause_us > 0) {
            usleep((useconds_t) opt.pause_us);
        }
    }
}

static void send_dg(int chan, const void *data, size_t len, enum expect e)
{
    send_raw(chan, data, len, opt.qkey, e);
}

/* ---- the wire: watching the job's own traffic ---- */

static int sniff_fd = -1;

static void sniff_open(void)
{
    struct sockaddr_ll sll;

    if (NULL == opt.ifname) {
        die("this mode needs -I IFNAME to watch the job's traffic");
    }
    if (sniff_fd >= 0) {
        close(sniff_fd);
    }
    sniff_fd = socket(AF_PACKET, SOCK_RAW, htons(ETH_P_ALL));
    if (sniff_fd < 0) {
        die("AF_PACKET socket: %s (needs root)", strerror(errno));
    }
    memset(&sll, 0, sizeof(sll));
    sll.sll_family = AF_PACKET;
    sll.sll_protocol = htons(ETH_P_ALL);
    sll.sll_ifindex = (int) if_nametoindex(opt.ifname);
    if (0 == sll.sll_ifindex || 0 != bind(sniff_fd, (struct sockaddr *) &sll, sizeof(sll))) {
        die("cannot watch %s: %s", opt.ifname, strerror(errno));
    }
}

typedef struct {
    uint32_t dst_qpn, src_qpn;
    const usnic_btl_header_t *hdr;  /* usnic header (NULL if the payload is shorter) */
    size_t len;                     /* usnic datagram bytes */
} wire_pkt_t;

/* Next RoCE v2 UD send seen on the interface within timeout_s; false on timeout. */
static bool sniff_next(wire_pkt_t *p, double timeout_s)
{
    static uint8_t frame[10000] __attribute__((aligned(8)));
    static uint8_t copy[SLOT_BYTES] __attribute__((aligned(8)));
    double end = now_s() + timeout_s;

    for (;;) {
        struct pollfd pfd = {.fd = sniff_fd, .events = POLLIN};
        int ms = (int)((end - now_s()) * 1000);
        ssize_t n;
        const uint8_t *ip, *udp, *bth;
        size_t ihl, ulen, off;

        if (ms <= 0 || poll(&pfd, 1, ms) <= 0) {
            return false;
        }
        n = recv(sniff_fd, frame, sizeof(frame), 0);
        if (n < 14 + 20 + 8 + BTH_LEN + DETH_LEN || 0x08 != frame[12] || 0x00 != frame[13]) {
            continue;
        }
        ip = frame + 14;
        ihl = (size_t)(ip[0] & 15) * 4;
        if (17 != ip[9] || 14 + ihl + 8 > (size_t) n) {
            continue;
        }
        udp = ip + ihl;
        if (ROCE_PORT != ((udp[2] << 8) | udp[3])) {
            continue;
        }
        ulen = (size_t)((udp[4] << 8) | udp[5]);
        bth = udp + 8;
        if (OP_UD_SEND_ONLY != bth[0] && OP_UD_SEND_ONLY_IMM != bth[0]) {
            continue;
        }
        off = 8 + BTH_LEN + DETH_LEN + (OP_UD_SEND_ONLY_IMM == bth[0] ? 4 : 0);
        /* payload ends before the 4-byte ICRC and the BTH pad bytes */
        if (ulen < off + 4 || (size_t)(udp - frame) + ulen > (size_t) n) {
            continue;
        }
        p->dst_qpn = ((uint32_t) bth[5] << 16) | (bth[6] << 8) | bth[7];
        p->src_qpn = ((uint32_t) bth[BTH_LEN + 5] << 16) | (bth[BTH_LEN + 6] << 8) |
                     bth[BTH_LEN + 7];
        p->len = ulen - off - 4 - ((bth[1] >> 4) & 3);
        if (p->len > sizeof(copy)) {
            continue;
        }
        memcpy(copy, udp + off, p->len);
        p->hdr = p->len >= sizeof(usnic_btl_header_t) ? (const usnic_btl_header_t *) copy
                                                       : NULL;
        return true;
    }
}

/* Latest data sequence numbers on the wire: target -> peer (s_tgt) and peer -> target
 * (s_peer), from packets the job sent (not ours). */
static void observe_streams(uint16_t *s_tgt, uint16_t *s_peer)
{
    bool have_tgt = false, have_peer = false;
    double end = now_s() + 20;
    wire_pkt_t p;

    sniff_open();
    while (!(have_tgt && have_peer)) {
        if (now_s() > end || !sniff_next(&p, end - now_s())) {
            die("no usnic data traffic between the target and the peer seen on %s for 20 s "
                "(is the job running?)", opt.ifname);
        }
        if (NULL == p.hdr || p.src_qpn == qp->qp_num ||
            (USNIC_PAYLOAD_TYPE_FRAG != p.hdr->payload_type &&
             USNIC_PAYLOAD_TYPE_CHUNK != p.hdr->payload_type)) {
            continue;
        }
        if (p.hdr->sender == opt.target_id) {
            *s_tgt = p.hdr->pkt_seq;
            have_tgt = true;
        } else if (p.hdr->sender == opt.peer_id &&
                   (p.dst_qpn == opt.qpn[0] || p.dst_qpn == opt.qpn[1])) {
            *s_peer = p.hdr->pkt_seq;
            have_peer = true;
        }
    }
    if (opt.verbose) {
        note("wire: target sends seq %u, peer sends seq %u", *s_tgt, *s_peer);
    }
}

/* ---- datagram builders ---- */

static void init_hdr(usnic_btl_header_t *h, uint64_t sender, uint8_t type, uint16_t seq,
                     uint16_t payload_len)
{
    memset(h, 0, sizeof(*h));
    h->sender = sender;
    h->pkt_seq = seq;
    h->payload_len = payload_len;
    h->payload_type = type;
    h->tag = OB1_TAG;
}

/* A well-formed small fragment of n payload bytes (random content). */
static size_t build_frag(uint8_t *buf, uint64_t sender, uint16_t seq, size_t n)
{
    usnic_btl_header_t *h = (usnic_btl_header_t *) buf;
    init_hdr(h, sender, USNIC_PAYLOAD_TYPE_FRAG, seq, (uint16_t) n);
    rnd_fill(h + 1, n);
    return sizeof(*h) + n;
}

static size_t build_ack(uint8_t *buf, uint64_t sender, uint16_t ack)
{
    usnic_btl_header_t *h = (usnic_btl_header_t *) buf;
    init_hdr(h, sender, USNIC_PAYLOAD_TYPE_ACK, 0, 0);
    h->ack_present = 1;
    h->ack_seq = ack;
    return sizeof(*h);
}

static size_t build_chunk(uint8_t *buf, uint64_t sender, uint16_t seq, uint32_t id,
                          uint32_t size, uint32_t offset, uint16_t n)
{
    usnic_btl_chunk_header_t *c = (usnic_btl_chunk_header_t *) buf;
    memset(c, 0, sizeof(*c));
    init_hdr(&c->hdr, sender, USNIC_PAYLOAD_TYPE_CHUNK, seq, n);
    c->frag_id = id;
    c->frag_size = size;
    c->frag_offset = offset;
    rnd_fill(c + 1, n);
    return sizeof(*c) + n;
}

static uint32_t max_chunk_payload(void)
{
    return opt.mtu - (uint32_t) sizeof(usnic_btl_chunk_header_t);
}

/* A sender id the target does not know: random, its own, a rank or job that does not exist. */
static uint64_t unknown_id(int i)
{
    uint64_t job = opt.target_id & 0xffffffff00000000ull, id;

    switch (i % 6) {
    case 0: id = rnd(); break;
    case 1: id = opt.target_id; break;                  /* the target itself */
    case 2: id = job | (1000 + rnd_below(100000)); break; /* our job, no such rank */
    case 3: id = (job + (1ull << 32)) | (opt.peer_id & 0xffffffffu); break; /* other job */
    case 4: id = 0; break;
    default: id = ~0ull; break;
    }
    /* the target never has itself as a peer: that one is unknown too */
    return (known_id(id) && id != opt.target_id) ? unknown_id(i + 1) : id;
}

/* ---- the attacks ---- */

/* mode short: 0-31 bytes */
static void mode_short(void)
{
    uint8_t buf[32];

    for (int i = 0; i < opt.count; ++i) {
        size_t len = (size_t) i % 32;
        rnd_fill(buf, sizeof(buf));
        if (len >= 8 && (i & 1)) {
            memcpy(buf, &opt.peer_id, 8);   /* looks like the peer */
        }
        send_dg(i & 1, buf, len, E_BAD);
    }
}

/* mode badlen: the headers' lengths or types disagree with the datagram */
static void mode_badlen(void)
{
    uint8_t buf[SLOT_BYTES];

    for (int i = 0; i < opt.count; ++i) {
        usnic_btl_header_t *h = (usnic_btl_header_t *) buf;
        int chan = i & 1;
        size_t max = 0 == chan ? opt.prio_mtu : opt.mtu, len;
        uint16_t seq = (uint16_t) rnd();

        switch (i % 8) {
        case 0: /* frag: payload_len larger than what came */
            len = build_frag(buf, opt.peer_id, seq, rnd_below((uint32_t)(max - 32)));
            h->payload_len = (uint16_t)(len - 32 + 1 + rnd_below(1000));
            break;
        case 1: /* frag: payload_len smaller */
            len = build_frag(buf, opt.peer_id, seq, 1 + rnd_below((uint32_t)(max - 33)));
            h->payload_len = (uint16_t) rnd_below((uint32_t)(len - 32));
            break;
        case 2: /* frag claiming 65535 bytes */
            len = build_frag(buf, opt.peer_id, seq, rnd_below(64));
            h->payload_len = 0xffff;
            break;
        case 3: /* ACK with a payload */
            len = build_ack(buf, opt.peer_id, seq) + 1 + rnd_below(64);
            break;
        case 4: /* ACK with payload_len != 0, or without ack_present */
            len = build_ack(buf, opt.peer_id, seq);
            if (i & 8) {
                h->payload_len = (uint16_t)(1 + rnd_below(100));
            } else {
                h->ack_present = 0;
            }
            break;
        case 5: /* chunk shorter than the chunk header */
            len = 32 + rnd_below(16);
            build_chunk(buf, opt.peer_id, seq, 7, 100, 0, 0);
            h->payload_len = 0;
            break;
        case 6: /* chunk with payload_len != bytes after the chunk header */
            len = build_chunk(buf, opt.peer_id, seq, 7, 8000, 0,
                              (uint16_t)(1 + rnd_below((uint32_t)(max - 49))));
            h->payload_len = (uint16_t)(h->payload_len + 1 + rnd_below(100));
            break;
        default: { /* unknown payload types */
            static const uint8_t types[] = {0, 4, 5, 0x7f, 0x80, 0xff};
            len = build_frag(buf, opt.peer_id, seq, rnd_below(64));
            h->payload_type = types[rnd_below(sizeof(types))];
            break;
        }
        }
        send_dg(chan, buf, len, E_BAD);
    }
}

/* mode unknown: well-formed datagrams from senders the target does not know */
static void mode_unknown(void)
{
    uint8_t buf[SLOT_BYTES];

    for (int i = 0; i < opt.count; ++i) {
        uint64_t id = unknown_id(i);
        int chan = (i / 6) & 1;
        size_t len;

        switch ((i / 2) % 3) {
        case 0:
            len = build_frag(buf, id, (uint16_t) rnd(), rnd_below(0 == chan ? 700 : 4000));
            break;
        case 1:
            len = build_ack(buf, id, (uint16_t) rnd());
            break;
        default:
            len = build_chunk(buf, id, (uint16_t) rnd(), 1 + rnd_below(100), 100, 0, 100);
            break;
        }
        send_dg(chan, buf, len, E_UNK);
    }
}

/* mode chunk: chunk headers out of range */
static void mode_chunk(void)
{
    uint8_t buf[SLOT_BYTES];
    uint32_t mcp = max_chunk_payload();

    for (int i = 0; i < opt.count; ++i) {
        uint64_t id = (i & 2) ? opt.peer_id : unknown_id(i);
        uint16_t seq = (uint16_t) rnd();
        uint32_t fid = 1 + rnd_below(1000);
        size_t len;

        switch (i % 8) {
        case 0: /* frag id 0 */
            len = build_chunk(buf, id, seq, 0, 8000, 0, 100);
            break;
        case 1: /* size 0 */
            len = build_chunk(buf, id, seq, fid, 0, 0, 100);
            break;
        case 2: /* no payload */
            len = build_chunk(buf, id, seq, fid, 8000, 0, 0);
            break;
        case 3: /* a send larger than any fragment (1 MiB) */
            len = build_chunk(buf, id, seq, fid, USNIC_MAX_FRAG_SIZE + 1 + rnd_below(1u << 30),
                              0, (uint16_t) mcp);
            break;
        case 4: /* offset at or past the end */
            len = build_chunk(buf, id, seq, fid, 8096, 8096 + rnd_below(1u << 31), 100);
            break;
        case 5: /* payload runs past the end */
            len = build_chunk(buf, id, seq, fid, 8096, 8000, (uint16_t)(97 + rnd_below(100)));
            break;
        case 6: /* offsets near 4 GiB, wrapping */
            len = build_chunk(buf, id, seq, fid, 0xfffffff8u, 0xfffffff0u, 16);
            break;
        default: /* huge PUT whose payload would wrap around the offset */
            len = build_chunk(buf, id, seq, fid, 0xffffffffu, 0xfffffff0u, 100);
            ((usnic_btl_header_t *) buf)->put_addr = opt.canary ? opt.canary : 0x1000;
            break;
        }
        send_dg(1, buf, len, E_BAD);
    }
}

/* mode random: random bytes */
static void mode_random(void)
{
    uint8_t buf[SLOT_BYTES];

    for (int i = 0; i < opt.count; ++i) {
        int chan = i & 1;
        size_t len = rnd_below((0 == chan ? opt.prio_mtu : opt.mtu) + 1);
        uint64_t id;

        rnd_fill(buf, len);
        if (len >= 8) {
            memcpy(&id, buf, 8);
            if (known_id(id)) {         /* (2^-64: but be sure) */
                buf[0] ^= 1;
            }
        }
        /* mostly malformed; what is well-formed comes from an unknown sender */
        send_dg(chan, buf, len, E_BAD);
    }
}

/* mode forge: well-formed datagrams in the name of the peer, with sequence numbers it could
 * really send next (or ACKs for what the target really sent), from our own queue pair and
 * GID. Without a source check each of these would be taken for the peer's: data nobody sent
 * delivered, the real datagram with that sequence number then dropped as a duplicate, and
 * data the peer never got released from the target's retransmit queue. */
static void mode_forge(void)
{
    uint8_t buf[SLOT_BYTES];
    usnic_btl_header_t *h = (usnic_btl_header_t *) buf;
    uint32_t mcp = max_chunk_payload();
    /* a PUT chunk carries the registration reference besides */
    uint32_t pmcp = mcp - (uint32_t) sizeof(usnic_reg_ref_t);
    uint64_t canary = opt.canary ? opt.canary : 0x1000;
    uint16_t s_tgt = 0, s_peer = 0;

    for (int i = 0; i < opt.count; ++i) {
        uint16_t seq;
        size_t len;
        int chan = i & 1;

        if (0 == i % 40) {
            observe_streams(&s_tgt, &s_peer);
        }
        /* the peer's next few: inside the target's receive window */
        seq = (uint16_t)(s_peer + 1 + rnd_below(64));
        switch (i % 6) {
        case 0: /* what the target sent last, acknowledged */
            len = build_ack(buf, opt.peer_id, (uint16_t)(s_tgt - rnd_below(4)));
            break;
        case 1: /* the peer's next fragment, acknowledging the target's last */
            len = build_frag(buf, opt.peer_id, seq, 8 + rnd_below(0 == chan ? 600 : 4000));
            h->ack_present = 1;
            h->ack_seq = s_tgt;
            break;
        case 2: /* the first chunk of a fragment */
            len = build_chunk(buf, opt.peer_id, seq, 1 + rnd_below(1u << 20), 2 * mcp, 0,
                              (uint16_t) mcp);
            chan = 1;
            break;
        case 3: /* the first chunk of an emulated PUT into the canary (a random
                 * registration reference between chunk header and data) */
            len = build_chunk(buf, opt.peer_id, seq, 1 + rnd_below(1u << 20),
                              opt.canary_len ? opt.canary_len : 2 * pmcp, 0,
                              (uint16_t)(opt.canary_len && opt.canary_len < pmcp ? opt.canary_len
                                                                                    : pmcp));
            rnd_fill(buf + len, sizeof(usnic_reg_ref_t));
            len += sizeof(usnic_reg_ref_t);
            h->put_addr = canary;
            chan = 1;
            break;
        case 4: /* an emulated PUT fragment into the canary (its payload starts
                 * with a registration reference, random here) */
            len = build_frag(buf, opt.peer_id, seq, sizeof(usnic_reg_ref_t) + 8 + rnd_below(600));
            h->put_addr = canary;
            break;
        default:
            if (0 == (i / 6) % 3) { /* tag 254, which nothing registers */
                len = build_frag(buf, opt.peer_id, seq, 16);
                h->tag = 254;
            } else {                /* an emulated GET of the canary, a fetch-and-add on it */
                usnic_rdma_msg_t m;

                memset(&m, 0, sizeof(m));
                m.kind = 1 == (i / 6) % 3 ? USNIC_RDMA_GET : USNIC_RDMA_FOP;
                m.aop = USNIC_AOP_ADD;
                m.width = 8;
                m.len = USNIC_RDMA_GET == m.kind ? 64 : 0;
                m.addr = canary & ~(uint64_t) 7;
                m.operand = 1;
                m.id = (uint64_t) i;
                len = build_frag(buf, opt.peer_id, seq, sizeof(m));
                memcpy(h + 1, &m, sizeof(m));
                h->tag = USNIC_TAG_RDMA;
            }
            break;
        }
        send_dg(chan, buf, len, E_FORGED);
    }
}

/* mode oversize: more than the priority channel's receive buffers hold */
static void mode_oversize(void)
{
    uint8_t buf[SLOT_BYTES];

    for (int i = 0; i < opt.count; ++i) {
        size_t len = build_frag(buf, opt.peer_id, (uint16_t) rnd(),
                                opt.prio_mtu + 1 + rnd_below(opt.mtu - opt.prio_mtu - 32));
        send_dg(0, buf, len, E_OVERSIZE);
    }
}

/* mode wrongqkey: a bit of everything, with Q_Keys that are not the target's */
static void mode_wrongqkey(void)
{
    uint8_t buf[SLOT_BYTES];
    uint16_t s_tgt = 0, s_peer = 0;
    bool wire = NULL != opt.ifname;

    for (int i = 0; i < opt.count; ++i) {
        int chan = i & 1;
        size_t len;
        uint32_t qkey;

        if (wire && 0 == i % 100) {
            observe_streams(&s_tgt, &s_peer);
        }
        switch (i % 5) {
        case 0:
            len = (size_t) rnd_below(32);
            rnd_fill(buf, len);
            break;
        case 1:
            len = build_frag(buf, opt.peer_id, (uint16_t) rnd(), rnd_below(600));
            ((usnic_btl_header_t *) buf)->payload_len ^= 0x100;
            break;
        case 2:
            len = build_frag(buf, unknown_id(i), (uint16_t) rnd(), rnd_below(600));
            break;
        case 3:
            len = build_ack(buf, opt.peer_id, (uint16_t)(s_tgt + 0x4000 + rnd_below(0x2000)));
            break;
        default:
            len = rnd_below(0 == chan ? opt.prio_mtu : opt.mtu);
            rnd_fill(buf, len);
            break;
        }
        switch (i % 6) {
        case 0: qkey = opt.qkey ^ (1u << rnd_below(31)); break;
        case 1: qkey = opt.qkey + 1; break;
        case 2: qkey = 0; break;
        case 3: qkey = (uint32_t) rnd() & 0x7fffffffu; break;
        case 4: qkey = opt.qkey | 0x80000000u; break;   /* high bit: the device uses */
        default: qkey = 0x80000000u; break;             /* our QP's own (wrong) Q_Key */
        }
        if (qkey == opt.qkey) {
            qkey ^= 2;
        }
        send_raw(chan, buf, len, qkey, E_NONE);
    }
}

static void query_port(void)
{
    struct ibv_port_attr pa;

    ctx = open_dev(opt.dev);
    if (ibv_query_port(ctx, (uint8_t) opt.port, &pa)) {
        die("ibv_query_port: %s", strerror(errno));
    }
    printf("rogue: %s port %d qkey_viol_cntr %u bad_pkey_cntr %u\n", opt.dev, opt.port,
           pa.qkey_viol_cntr, pa.bad_pkey_cntr);
}

static uint64_t num_arg(const char *s, const char *what)
{
    char *end;
    unsigned long long v;

    errno = 0;
    v = strtoull(s, &end, 0);
    if (0 != errno || end == s || '\0' != *end) {
        die("bad %s: %s", what, s);
    }
    return v;
}

static void usage(void)
{
    fprintf(stderr,
            "usage: usnic_rogue {-A PID | -p PRIO_QPN -q DATA_QPN -k QKEY} -T TARGET_ID -s PEER_ID\n"
            "                   [-d DEV] [-i PORT] [-g GID_INDEX] [-G TARGET_ADDR]\n"
            "                   [-I IFNAME] [-c ADDR:LEN] [-m MODES] [-n COUNT] [-B BATCH]\n"
            "                   [-u PAUSE_US] [-M MTU] [-P PRIO_MTU] [-r SEED] [-v]\n"
            "       usnic_rogue -G TARGET_ADDR -A PID -D\n"
            "       usnic_rogue -d DEV [-i PORT] -Q\n"
            "modes: wrongqkey short badlen unknown chunk random forge all oversize\n"
            "       (see the comment at the top of usnic_rogue.c)\n");
    exit(2);
}

int main(int argc, char **argv)
{
    static const char *const all[] = {"short", "badlen", "unknown", "chunk", "random", "forge"};
    char modes[512] = "all", *save = NULL, *m;
    bool query = false;
    int c;

    opt.seed = (uint64_t) time(NULL) ^ ((uint64_t) getpid() << 32);
    while (-1 != (c = getopt(argc, argv, "d:i:g:G:p:q:k:T:s:A:DI:c:m:n:B:u:M:P:r:vQh"))) {
        switch (c) {
        case 'd': opt.dev = optarg; break;
        case 'i': opt.port = (int) num_arg(optarg, "port"); break;
        case 'g': opt.gid_index = (int) num_arg(optarg, "GID index"); break;
        case 'G': opt.target = optarg; break;
        case 'p': opt.qpn[0] = (uint32_t) num_arg(optarg, "priority QPN"); break;
        case 'q': opt.qpn[1] = (uint32_t) num_arg(optarg, "data QPN"); break;
        case 'k': opt.qkey = (uint32_t) num_arg(optarg, "Q_Key"); break;
        case 'T': opt.target_id = num_arg(optarg, "target sender id"); break;
        case 's': opt.peer_id = num_arg(optarg, "peer sender id"); break;
        case 'A': opt.mem_pid = (int) num_arg(optarg, "process id"); break;
        case 'D': opt.dump = true; break;
        case 'I': opt.ifname = optarg; break;
        case 'c': {
            char *colon = strchr(optarg, ':');
            if (NULL == colon) {
                die("-c ADDR:LEN");
            }
            *colon = '\0';
            opt.canary = num_arg(optarg, "canary address");
            opt.canary_len = (uint32_t) num_arg(colon + 1, "canary length");
            break;
        }
        case 'm': snprintf(modes, sizeof(modes), "%s", optarg); break;
        case 'n': opt.count = (int) num_arg(optarg, "count"); break;
        case 'B': opt.batch = (int) num_arg(optarg, "batch"); break;
        case 'u': opt.pause_us = (int) num_arg(optarg, "pause"); break;
        case 'M': opt.mtu = (uint32_t) num_arg(optarg, "MTU"); break;
        case 'P': opt.prio_mtu = (uint32_t) num_arg(optarg, "priority MTU"); break;
        case 'r': opt.seed = num_arg(optarg, "seed"); break;
        case 'v': opt.verbose = 1; break;
        case 'Q': query = true; break;
        default: usage();
        }
    }
    if (query) {
        query_port();
        return 0;
    }
    if (opt.mem_pid > 0) {
        find_record();
    }
    if (opt.dump) {
        if (opt.mem_pid <= 0) {
            usage();
        }
        return 0;
    }
    if (optind != argc || 0 == opt.qpn[0] || 0 == opt.qpn[1] || 0 == opt.qkey ||
        0 == opt.target_id || 0 == opt.peer_id || opt.batch < 1 ||
        opt.mtu > SLOT_BYTES || opt.prio_mtu < 64 || opt.prio_mtu > opt.mtu) {
        usage();
    }
    rng_state = opt.seed ? opt.seed : 1;
    note("seed %" PRIu64, opt.seed);
    verbs_init();

    for (m = strtok_r(modes, ",", &save); NULL != m; m = strtok_r(NULL, ",", &save)) {
        const char *list[16];
        int n = 0;

        if (0 == strcmp(m, "all")) {
            for (size_t k = 0; k < sizeof(all) / sizeof(all[0]); ++k) {
                list[n++] = all[k];
            }
        } else {
            list[n++] = m;
        }
        for (int k = 0; k < n; ++k) {
            const char *name = list[k];
            double t0 = now_s();

            memset(mode_sent, 0, sizeof(mode_sent));
            if (0 == strcmp(name, "wrongqkey")) mode_wrongqkey();
            else if (0 == strcmp(name, "short")) mode_short();
            else if (0 == strcmp(name, "badlen")) mode_badlen();
            else if (0 == strcmp(name, "unknown")) mode_unknown();
            else if (0 == strcmp(name, "chunk")) mode_chunk();
            else if (0 == strcmp(name, "random")) mode_random();
            else if (0 == strcmp(name, "forge")) mode_forge();
            else if (0 == strcmp(name, "oversize")) mode_oversize();
            else die("unknown mode %s", name);
            reap(0);
            {
                char line[256];
                int len = 0;
                long total = 0;
                for (int e = 0; e < E_NUM; ++e) {
                    total += mode_sent[e];
                    if (mode_sent[e]) {
                        len += snprintf(line + len, sizeof(line) - len, " %s=%ld",
                                        expect_name[e], mode_sent[e]);
                    }
                }
                note("mode %s: sent %ld in %.1f s, expect%s", name, total, now_s() - t0, line);
            }
        }
    }
    reap(0);
    {
        long right = 0, drops = sent[E_BAD] + sent[E_UNK] + sent[E_FORGED];
        for (int e = 0; e < E_NUM; ++e) {
            right += E_NONE == e ? 0 : sent[e];
        }
        note("total: right_qkey %ld wrong_qkey %ld send_errors %ld expect_dropped %ld "
             "(bad %ld unk %ld forged %ld) oversize %ld", right, wrong_qkey_sent, send_errors,
             drops, sent[E_BAD], sent[E_UNK], sent[E_FORGED], sent[E_OVERSIZE]);
    }
    return 0;
}
