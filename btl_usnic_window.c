/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 * $COPYRIGHT$
 * SPDX-License-Identifier: BSD-3-Clause
 *
 * Pure reliability arithmetic; see btl_usnic_window.h.
 */

#include <stddef.h>
#include <string.h>

#include "btl_usnic_window.h"

bool usnic_tx_loss_clustered(usnic_tx_window_t *w, uint16_t lost_seq)
{
    bool clustered = w->loss_seen &&
                     (uint16_t)(lost_seq - w->loss_seq) <= USNIC_CWND_LOSS_SPAN;

    w->loss_seen = true;
    w->loss_seq = lost_seq;
    return clustered;
}

bool usnic_tx_cwnd_loss(usnic_tx_window_t *w, bool timeout)
{
    uint32_t half = usnic_tx_window_inflight(w) / 2;

    /* One cut per window: losses among the segments already in flight
     * at the last cut belong to the same congestion event. */
    if (w->cut_active && USNIC_SEQ_DIFF16(w->cut_seq, w->ack_seq_rcvd) > 0) {
        return false;
    }
    if (half < USNIC_CWND_MIN) {
        half = USNIC_CWND_MIN;
    }
    w->ssthresh = half;
    w->cwnd = timeout ? USNIC_CWND_MIN : half;
    w->cwnd_acked = 0;
    w->cut_seq = (uint16_t)(w->next_seq_to_send - 1);
    w->cut_active = true;
    usnic_tx_window_limit(w);
    return true;
}

void usnic_tx_cwnd_grow(usnic_tx_window_t *w, uint32_t acked)
{
    if (w->cut_active && USNIC_SEQ_DIFF16(w->cut_seq, w->ack_seq_rcvd) <= 0) {
        w->cut_active = false;
    }
    if (w->cwnd < w->ssthresh) {
        w->cwnd += acked;
        if (w->cwnd > w->ssthresh) {
            w->cwnd = w->ssthresh;
        }
    } else {
        w->cwnd_acked += acked;
        while (w->cwnd_acked >= w->cwnd) {
            w->cwnd_acked -= w->cwnd;
            ++w->cwnd;
        }
    }
    if (w->cwnd >= w->size) {
        w->cwnd = USNIC_CWND_OPEN;
    }
    usnic_tx_window_limit(w);
}

static void bdp_round_start(usnic_tx_window_t *w, double now_us)
{
    w->round_active = true;
    w->round_blocked = false;
    w->round_loss = false;
    w->round_seq = (uint16_t)(w->next_seq_to_send - 1);
    w->round_ack = w->ack_seq_rcvd;
    w->round_start_us = now_us;
}

void usnic_tx_bdp_blocked(usnic_tx_window_t *w, double now_us)
{
    if (w->round_active) {
        w->round_blocked = true;
    } else if (usnic_tx_bdp_limits(w)) {
        bdp_round_start(w, now_us);
    }
}

/* Double bdp (up to size) and remember what it delivered before. */
static bool bdp_probe(usnic_tx_window_t *w, double rate)
{
    uint32_t next = w->bdp < w->size / 2 ? 2 * w->bdp : w->size;

    w->probing = next > w->bdp;
    if (!w->probing) {
        return false;
    }
    w->prev_bdp = w->bdp;
    w->prev_rate = rate;
    w->bdp = next;
    return true;
}

bool usnic_tx_bdp_round_end(usnic_tx_window_t *w, double now_us)
{
    double dt = now_us - w->round_start_us;
    double rate = (uint16_t)(w->ack_seq_rcvd - w->round_ack) / (dt > 0.01 ? dt : 0.01);
    uint32_t before = w->bdp;

    w->round_active = false;
    if (w->round_loss || !w->round_blocked || !usnic_tx_bdp_limits(w)) {
        /* a loss is the congestion window's (and so is a window it
         * limits); an unfilled window covers the flow: either way the
         * round says nothing about the path */
        w->probing = false;
    } else if (w->probing) {
        if (8 * rate >= 9 * w->prev_rate) {
            bdp_probe(w, rate);
        } else {
            w->bdp = w->prev_bdp;
            w->probing = false;
            w->hold = USNIC_BDP_HOLD;
        }
    } else if (w->hold > 0) {
        --w->hold;
    } else {
        bdp_probe(w, rate);
    }
    /* still limited by the window: measure the next round at once (not
     * if all is ACKed: that round would end at the next ACK, whenever the
     * sender sends again, and count the pause as the path's) */
    if (w->round_blocked && 0 != usnic_tx_window_inflight(w)) {
        bdp_round_start(w, now_us);
    }
    usnic_tx_window_limit(w);
    return w->bdp != before;
}

void usnic_rx_window_init(usnic_rx_window_t *w, uint16_t first_seq, uint32_t size, uint64_t *bits)
{
    w->next_contig = first_seq;
    w->highest_rcvd = (uint16_t)(first_seq - 1);
    w->size = size;
    w->start = 0;
    w->bits = bits;
    w->nlost = 0;
    memset(bits, 0, size / 8);
}

static inline bool bit_test(const uint64_t *bits, uint32_t i)
{
    return (bits[i >> 6] >> (i & 63)) & 1;
}

bool usnic_rx_note_lost(usnic_rx_window_t *w, uint16_t prev, uint16_t seq)
{
    int16_t d = USNIC_SEQ_DIFF16(prev, w->next_contig);

    /* (below the edge: arrived; at or above seq: no claim about a hole) */
    if (d < 0 || USNIC_SEQ_DIFF16(prev, seq) >= 0 ||
        bit_test(w->bits, (w->start + (uint32_t) d) & (w->size - 1))) {
        return false;
    }
    for (uint32_t i = 0; i < w->nlost; ++i) {
        if (w->lost[i] == prev) {
            return 0 == d;
        }
    }
    if (w->nlost < USNIC_RX_LOST_MAX) {
        w->lost[w->nlost++] = prev;
    } else if (0 == d) {
        /* full: the edge matters most, it is what the next ACK names */
        w->lost[USNIC_RX_LOST_MAX - 1] = prev;
    }
    return 0 == d;
}

uint32_t usnic_rx_edge_lost(usnic_rx_window_t *w)
{
    int16_t open = USNIC_SEQ_DIFF16(w->highest_rcvd, w->next_contig);
    int32_t far = -1, first = 0, run = -1;
    bool edge = false;
    uint32_t i = 0;

    while (i < w->nlost) {
        int16_t d = USNIC_SEQ_DIFF16(w->lost[i], w->next_contig);
        if (d < 0 || d >= open) {
            /* filled (a resend, or late after all), or no hole any more */
            w->lost[i] = w->lost[--w->nlost];
            continue;
        }
        edge |= 0 == d;
        far = d > far ? d : far;
        ++i;
    }
    if (far <= 0) {
        return edge ? 1 : 0;
    }
    /* how far the hole at the edge reaches (the edge itself is missing) */
    while (first <= far && first < USNIC_ACK_RUN_MAX &&
           !bit_test(w->bits, (w->start + (uint32_t) first) & (w->size - 1))) {
        ++first;
    }
    for (i = 0; i < w->nlost; ++i) {
        int32_t d = USNIC_SEQ_DIFF16(w->lost[i], w->next_contig);
        if (d < first && d > run) {
            run = d;
        }
    }
    return run >= 0 ? (uint32_t) run + 1 : 0;
}

usnic_rx_class_t usnic_rx_classify(const usnic_rx_window_t *w, uint16_t seq)
{
    int16_t d = USNIC_SEQ_DIFF16(seq, w->next_contig);
    if (d < 0) {
        return USNIC_RX_OOW_LOW;
    }
    if ((uint32_t)d >= w->size) {
        return USNIC_RX_OOW_HIGH;
    }
    if (bit_test(w->bits, (w->start + (uint32_t)d) & (w->size - 1))) {
        return USNIC_RX_DUP;
    }
    return USNIC_RX_ACCEPT;
}

uint32_t usnic_rx_mark_held(usnic_rx_window_t *w, uint16_t seq)
{
    uint32_t mask = w->size - 1;
    uint32_t i = (w->start + (uint16_t)(seq - w->next_contig)) & mask;
    uint32_t moved = 0;

    w->bits[i >> 6] |= 1ULL << (i & 63);
    if (USNIC_SEQ_DIFF16(seq, w->highest_rcvd) > 0) {
        w->highest_rcvd = seq;
    }
    while (bit_test(w->bits, w->start)) {
        w->bits[w->start >> 6] &= ~(1ULL << (w->start & 63));
        w->start = (w->start + 1) & mask;
        ++w->next_contig;
        ++moved;
    }
    return moved;
}

void usnic_rto_init(usnic_rto_t *r, uint32_t min_us, uint32_t max_us)
{
    r->srtt_us = 0;
    r->rttvar_us = 0;
    r->min_us = r->base_us = min_us;
    r->max_us = max_us > min_us ? max_us : min_us;
    r->rto_us = min_us;
    r->have_sample = false;
    r->backed_off = false;
}

static uint32_t rto_clamp(const usnic_rto_t *r, double us)
{
    if (us < r->min_us) {
        return r->min_us;
    }
    return us > r->max_us ? r->max_us : (uint32_t) us;
}

void usnic_rto_sample(usnic_rto_t *r, double sample_us)
{
    if (!r->have_sample) {
        r->srtt_us = sample_us;
        r->rttvar_us = sample_us / 2;
        r->have_sample = true;
    } else {
        double err = sample_us - r->srtt_us;
        r->rttvar_us += ((err < 0 ? -err : err) - r->rttvar_us) / 4;
        r->srtt_us += err / 8;
    }
    r->rto_us = rto_clamp(r, r->srtt_us + 4 * r->rttvar_us);
    r->backed_off = false;
}

void usnic_rto_reset(usnic_rto_t *r)
{
    r->rto_us = r->have_sample ? rto_clamp(r, r->srtt_us + 4 * r->rttvar_us) : r->min_us;
    r->backed_off = false;
}

void usnic_rto_raise_floor(usnic_rto_t *r, double late_us, uint32_t cap_us)
{
    double f = late_us + late_us / 4;

    if (f > cap_us) {
        f = cap_us;
    }
    if (f > r->max_us) {
        f = r->max_us;
    }
    if (f > r->min_us) {
        r->min_us = (uint32_t) f;
    }
    if (r->rto_us < r->min_us) {
        r->rto_us = r->min_us;
    }
}

bool usnic_rto_lower_floor(usnic_rto_t *r)
{
    if (r->min_us <= r->base_us) {
        return false;
    }
    r->min_us = r->min_us / 2 > r->base_us ? r->min_us / 2 : r->base_us;
    if (!r->backed_off) {
        usnic_rto_reset(r);
    }
    return true;
}

void usnic_rto_backoff(usnic_rto_t *r)
{
    r->backed_off = true;
    r->rto_us = rto_clamp(r, 2.0 * r->rto_us);
}

void usnic_reo_proven(usnic_reo_t *r)
{
    if (r->steps < USNIC_REO_STEPS_MAX) {
        ++r->steps;
    }
    r->persist = USNIC_REO_PERSIST;
}

void usnic_reo_loss(usnic_reo_t *r)
{
    if (0 != r->steps && 0 == --r->persist) {
        r->steps = 0;
    }
}

usnic_peer_verdict_t usnic_peer_judge(usnic_peer_watch_t *w, double now, double last_seen,
                                      double timeout, bool restart)
{
    double stall = now - last_seen;

    if (stall < timeout / USNIC_PEER_WATCH_FRACTION) {
        w->watch_since = 0;
        return USNIC_PEER_OK;
    }
    if (restart || 0 == w->watch_since) {
        w->watch_since = now;
    }
    if (stall >= timeout && now - w->watch_since >= timeout / 2) {
        return USNIC_PEER_DEAD;
    }
    if (now - w->last_ping >= usnic_peer_ping_interval(timeout)) {
        w->last_ping = now;
        return USNIC_PEER_PING;
    }
    return USNIC_PEER_OK;
}

const char *usnic_pkt_result_str(usnic_pkt_result_t r)
{
    static const char *const names[USNIC_PKT_NUM_RESULTS] = {
        "ok", "short packet", "length mismatch", "unknown payload type", "chunk out of range",
        "PUT outside registered memory", "bad GET/atomic message",
        "GET/atomic outside registered memory",
    };
    return (r >= 0 && r < USNIC_PKT_NUM_RESULTS) ? names[r] : "?";
}

usnic_chunk_class_t usnic_rx_classify_chunk(const usnic_rx_frag_t *slot,
                                            const usnic_btl_chunk_header_t *ch)
{
    if (0 == slot->frag_id) {
        return USNIC_CHUNK_NEW;
    }
    if (slot->frag_id != ch->frag_id) {
        return USNIC_CHUNK_BUSY;
    }
    if (slot->frag_size != ch->frag_size || slot->put_addr != ch->hdr.put_addr ||
        slot->tag != ch->hdr.tag) {
        return USNIC_CHUNK_MISMATCH;
    }
    return USNIC_CHUNK_FITS;
}

usnic_pkt_result_t usnic_rdma_msg_check(const void *buf, size_t len, uint32_t max_get)
{
    usnic_rdma_msg_t m;

    if (len < sizeof(m)) {
        return USNIC_PKT_SHORT;
    }
    memcpy(&m, buf, sizeof(m));
    switch (m.kind) {
    case USNIC_RDMA_GET:
        if (len != sizeof(m) || 0 == m.len || m.len > max_get || 0 == m.addr) {
            return USNIC_PKT_BAD_RDMA;
        }
        return USNIC_PKT_OK;
    case USNIC_RDMA_AOP:
    case USNIC_RDMA_FOP:
        if (0 == m.aop || m.aop >= USNIC_AOP_LAST) {
            return USNIC_PKT_BAD_RDMA;
        }
        /* fall through */
    case USNIC_RDMA_CSWAP:
        if (len != sizeof(m) || (4 != m.width && 8 != m.width) || 0 == m.addr ||
            0 != (m.addr & (m.width - 1))) {
            return USNIC_PKT_BAD_RDMA;
        }
        return USNIC_PKT_OK;
    case USNIC_RDMA_REPLY:
        if ((size_t) m.len != len - sizeof(m) || m.status > USNIC_RDMA_REFUSED) {
            return USNIC_PKT_BAD_RDMA;
        }
        return USNIC_PKT_OK;
    default:
        return USNIC_PKT_BAD_RDMA;
    }
}

/* One width: the fetch-and-op builtins where the CPU has them, a
 * compare-and-swap loop for the logical operations. */
#define USNIC_ATOMIC_BODY(T)                                                            \
    do {                                                                                \
        T *p = mem, a = (T) m->operand, old, nv;                                        \
        switch (m->kind == USNIC_RDMA_CSWAP ? 0 : m->aop) {                             \
        case 0:                                                                         \
            old = a;                                                                    \
            __atomic_compare_exchange_n(p, &old, (T) m->operand2, false,                \
                                        __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);            \
            return old;                                                                 \
        case USNIC_AOP_ADD: return __atomic_fetch_add(p, a, __ATOMIC_SEQ_CST);         \
        case USNIC_AOP_AND: return __atomic_fetch_and(p, a, __ATOMIC_SEQ_CST);         \
        case USNIC_AOP_OR: return __atomic_fetch_or(p, a, __ATOMIC_SEQ_CST);           \
        case USNIC_AOP_XOR: return __atomic_fetch_xor(p, a, __ATOMIC_SEQ_CST);         \
        case USNIC_AOP_SWAP: return __atomic_exchange_n(p, a, __ATOMIC_SEQ_CST);       \
        default:                                                                        \
            old = __atomic_load_n(p, __ATOMIC_SEQ_CST);                                 \
            do {                                                                        \
                switch (m->aop) {                                                       \
                case USNIC_AOP_LAND: nv = (old && a); break;                            \
                case USNIC_AOP_LOR: nv = (old || a); break;                             \
                default: nv = (!old != !a); break;                                      \
                }                                                                       \
            } while (!__atomic_compare_exchange_n(p, &old, nv, false, __ATOMIC_SEQ_CST, \
                                                  __ATOMIC_SEQ_CST));                   \
            return old;                                                                 \
        }                                                                               \
    } while (0)

uint64_t usnic_rdma_atomic(void *mem, const usnic_rdma_msg_t *m)
{
    if (4 == m->width) {
        USNIC_ATOMIC_BODY(uint32_t);
    }
    USNIC_ATOMIC_BODY(uint64_t);
}

/* ---- connectivity messages ---- */

static inline uint64_t rotl64(uint64_t x, int b)
{
    return (x << b) | (x >> (64 - b));
}

#define SIP_ROUND(v0, v1, v2, v3)                                                           \
    do {                                                                                     \
        v0 += v1; v1 = rotl64(v1, 13); v1 ^= v0; v0 = rotl64(v0, 32);                       \
        v2 += v3; v3 = rotl64(v3, 16); v3 ^= v2;                                             \
        v0 += v3; v3 = rotl64(v3, 21); v3 ^= v0;                                             \
        v2 += v1; v1 = rotl64(v1, 17); v1 ^= v2; v2 = rotl64(v2, 32);                        \
    } while (0)

/* len bytes (at most 8) at p, little-endian */
static inline uint64_t load_le(const uint8_t *p, size_t len)
{
    uint64_t v = 0;

    for (size_t i = 0; i < len; ++i) {
        v |= (uint64_t) p[i] << (8 * i);
    }
    return v;
}

uint64_t usnic_siphash24(const uint32_t key[4], const void *data, size_t len)
{
    const uint8_t *p = data;
    uint64_t k0 = key[0] | (uint64_t) key[1] << 32, k1 = key[2] | (uint64_t) key[3] << 32;
    uint64_t v0 = k0 ^ 0x736f6d6570736575ULL, v1 = k1 ^ 0x646f72616e646f6dULL;
    uint64_t v2 = k0 ^ 0x6c7967656e657261ULL, v3 = k1 ^ 0x7465646279746573ULL;
    uint64_t m;
    size_t left = len;

    for (; left >= 8; left -= 8, p += 8) {
        m = load_le(p, 8);
        v3 ^= m;
        SIP_ROUND(v0, v1, v2, v3);
        SIP_ROUND(v0, v1, v2, v3);
        v0 ^= m;
    }
    m = load_le(p, left) | (uint64_t) (len & 0xff) << 56;
    v3 ^= m;
    SIP_ROUND(v0, v1, v2, v3);
    SIP_ROUND(v0, v1, v2, v3);
    v0 ^= m;
    v2 ^= 0xff;
    for (int i = 0; i < 4; ++i) {
        SIP_ROUND(v0, v1, v2, v3);
    }
    return v0 ^ v1 ^ v2 ^ v3;
}

uint64_t usnic_conn_mac(const uint32_t key[4], const usnic_conn_msg_t *m, uint32_t from_ip,
                        uint16_t from_port, uint32_t to_ip, uint16_t to_port)
{
    uint8_t b[offsetof(usnic_conn_msg_t, mac) + 12];

    memcpy(b, m, offsetof(usnic_conn_msg_t, mac));
    memcpy(b + offsetof(usnic_conn_msg_t, mac), &from_ip, 4);
    memcpy(b + offsetof(usnic_conn_msg_t, mac) + 4, &from_port, 2);
    memcpy(b + offsetof(usnic_conn_msg_t, mac) + 6, &to_ip, 4);
    memcpy(b + offsetof(usnic_conn_msg_t, mac) + 10, &to_port, 2);
    return usnic_siphash24(key, b, sizeof(b));
}
