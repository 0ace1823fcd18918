/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 * $COPYRIGHT$
 * SPDX-License-Identifier: BSD-3-Clause
 *
 * The pure half of the reliability engine: send and receive windows, ACK
 * classification and received-packet validation.  No verbs and no Open MPI
 * calls here, so unit tests and the fuzzer can drive it directly.
 */

#ifndef BTL_USNIC_WINDOW_H
#define BTL_USNIC_WINDOW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "btl_usnic_wire.h"

#define USNIC_SEQ_DIFF16(a, b) ((int16_t)(uint16_t)((a) - (b)))

/* ---- sender side ---- */

/* Congestion window: none (USNIC_CWND_OPEN) until a loss is seen, so a
 * lossless link sends exactly as the receiver's buffers allow. */
#define USNIC_CWND_OPEN UINT32_MAX
#define USNIC_CWND_MIN 4

/* The window that follows the path (usnic_tx_bdp_*) starts here: enough
 * for a LAN's bandwidth-delay product, and what the window was before it
 * adapted. */
#define USNIC_TX_WINDOW_INIT 256
/* Window-limited rounds without a probe after one that did not pay. */
#define USNIC_BDP_HOLD 16

typedef struct {
    uint16_t next_seq_to_send;  /* next sequence number to assign */
    uint16_t ack_seq_rcvd;      /* highest sequence cumulatively ACKed */
    uint32_t size;              /* how many may be outstanding: the peer's buffers */
    uint32_t cwnd;              /* ... and the congestion window (AIMD) */
    uint32_t bdp;               /* ... and the path's measured bandwidth-delay product */
    uint32_t slots;             /* ... and the send table's slots (grown on demand) */
    uint32_t limit;             /* the smallest of them (usnic_tx_window_limit) */
    uint32_t ssthresh;          /* below it cwnd grows per ACKed segment, above per round */
    uint32_t cwnd_acked;        /* segments ACKed toward the next +1 above ssthresh */
    uint16_t cut_seq;           /* last sequence sent when cwnd was last cut */
    bool cut_active;            /* a cut happened and cut_seq is not yet ACKed */
    bool loss_seen;             /* loss_seq holds the last segment found lost */
    uint16_t loss_seq;
    /* A round of the bandwidth-delay estimate: from a send that filled the
     * window (round_seq) until its ACK, only while the window limits. */
    bool round_active;
    bool round_blocked;         /* the window filled again during the round */
    bool round_loss;            /* a loss was seen during the round */
    bool probing;               /* bdp was doubled at the last round's end */
    uint16_t round_seq;
    uint16_t round_ack;         /* ack_seq_rcvd when the round started */
    uint32_t hold;              /* rounds left before the next probe */
    uint32_t prev_bdp;          /* bdp before the probe */
    double prev_rate;           /* segments per microsecond at prev_bdp */
    double round_start_us;
} usnic_tx_window_t;

/* After a change of size, cwnd, bdp or slots: one comparison per room test. */
static inline void usnic_tx_window_limit(usnic_tx_window_t *w)
{
    uint32_t l = w->cwnd < w->size ? w->cwnd : w->size;

    l = w->bdp < l ? w->bdp : l;
    w->limit = w->slots < l ? w->slots : l;
}

/* The window the path and the peer allow, whatever the send table holds. */
static inline uint32_t usnic_tx_window_want(const usnic_tx_window_t *w)
{
    uint32_t l = w->cwnd < w->size ? w->cwnd : w->size;

    return w->bdp < l ? w->bdp : l;
}

/* (No table bound: the engine sets slots to its table's.) */
static inline void usnic_tx_window_init(usnic_tx_window_t *w, uint16_t isn, uint32_t size)
{
    w->next_seq_to_send = isn;
    w->ack_seq_rcvd = (uint16_t)(isn - 1);
    w->size = size;
    w->cwnd = USNIC_CWND_OPEN;
    w->bdp = USNIC_TX_WINDOW_INIT;
    w->slots = UINT32_MAX;
    w->round_active = w->round_blocked = w->round_loss = w->probing = false;
    w->round_seq = w->round_ack = 0;
    w->hold = 0;
    w->prev_bdp = 0;
    w->prev_rate = 0;
    w->round_start_us = 0;
    w->ssthresh = 0;
    w->cwnd_acked = 0;
    w->cut_seq = 0;
    w->cut_active = false;
    w->loss_seen = false;
    w->loss_seq = 0;
    usnic_tx_window_limit(w);
}

/* The peer's buffers for us changed. */
static inline void usnic_tx_window_resize(usnic_tx_window_t *w, uint32_t size)
{
    w->size = size;
    usnic_tx_window_limit(w);
}

/* Segments sent but not yet ACKed. */
static inline uint32_t usnic_tx_window_inflight(const usnic_tx_window_t *w)
{
    return (uint16_t)(w->next_seq_to_send - w->ack_seq_rcvd - 1);
}

/* Whether inflight segments leave room for one more. */
static inline bool usnic_tx_window_room(const usnic_tx_window_t *w, uint32_t inflight)
{
    return inflight < w->limit;
}

static inline bool usnic_tx_window_open(const usnic_tx_window_t *w)
{
    return usnic_tx_window_room(w, usnic_tx_window_inflight(w));
}

/* Losses closer than this many segments are one run of them. */
#define USNIC_CWND_LOSS_SPAN 16
/* Segment lost_seq was found lost by a report of the receiver: true if it
 * follows another within USNIC_CWND_LOSS_SPAN segments.  A full receive
 * queue or an overloaded link drops runs of datagrams; a lone loss is the
 * path's noise, and cutting for it only slows a lossy link down. */
bool usnic_tx_loss_clustered(usnic_tx_window_t *w, uint16_t lost_seq);
/* A loss was seen (timeout: the timer expired; else a reported hole, one of a run): the
 * congestion window halves (a timeout restarts it from USNIC_CWND_MIN),
 * once per window of data.  Returns whether it was cut. */
bool usnic_tx_cwnd_loss(usnic_tx_window_t *w, bool timeout);
/* acked segments were newly acknowledged: the window grows back (one per
 * segment below ssthresh, one per window above) and opens up again once it
 * reaches the peer's buffers. */
void usnic_tx_cwnd_grow(usnic_tx_window_t *w, uint32_t acked);
static inline void usnic_tx_cwnd_acked(usnic_tx_window_t *w, uint32_t acked)
{
    if (USNIC_CWND_OPEN != w->cwnd) {
        usnic_tx_cwnd_grow(w, acked);
    }
}

/* What a congestion-window cut changes, to undo it when the loss that
 * caused it proves spurious. */
typedef struct {
    uint32_t cwnd, ssthresh, cwnd_acked;
    uint16_t cut_seq;
    bool cut_active;
} usnic_tx_cwnd_state_t;

static inline void usnic_tx_cwnd_save(const usnic_tx_window_t *w, usnic_tx_cwnd_state_t *s)
{
    s->cwnd = w->cwnd;
    s->ssthresh = w->ssthresh;
    s->cwnd_acked = w->cwnd_acked;
    s->cut_seq = w->cut_seq;
    s->cut_active = w->cut_active;
}

static inline void usnic_tx_cwnd_restore(usnic_tx_window_t *w, const usnic_tx_cwnd_state_t *s)
{
    w->cwnd = s->cwnd;
    w->ssthresh = s->ssthresh;
    w->cwnd_acked = s->cwnd_acked;
    w->cut_seq = s->cut_seq;
    w->cut_active = s->cut_active;
    usnic_tx_window_limit(w);
}

/* The window that follows the path.  Its bound is the bandwidth-delay
 * product: what the path delivers per round trip.  Only a sender that the
 * window limits measures it, in rounds from a send that filled the window
 * to that send's ACK; a round without a loss whose window filled again
 * doubles bdp (up to size), and the next round shows whether the path
 * delivered at least 1/8 more for it: if so the window keeps growing, if
 * not the extra segments only waited in a queue (the receiver's buffers,
 * a late receiver), and bdp goes back for USNIC_BDP_HOLD rounds.  Losses
 * are the congestion window's (it still bounds the window); a round with
 * one changes nothing.  No clock read unless the window fills. */
/* Whether bdp is what limits (not the congestion window after a cut): only
 * then does a full window say anything about the path's product. */
static inline bool usnic_tx_bdp_limits(const usnic_tx_window_t *w)
{
    return w->bdp <= w->cwnd;
}
/* A send filled the window at now_us (a round starts if bdp limits). */
void usnic_tx_bdp_blocked(usnic_tx_window_t *w, double now_us);
/* The ACK covered round_seq at now_us: judge the round; true if bdp changed. */
bool usnic_tx_bdp_round_end(usnic_tx_window_t *w, double now_us);
/* Whether an ACK up to ack ends the current round (inline: every new ACK). */
static inline bool usnic_tx_bdp_round_done(const usnic_tx_window_t *w, uint16_t ack)
{
    return w->round_active && USNIC_SEQ_DIFF16(ack, w->round_seq) >= 0;
}

typedef enum {
    USNIC_ACK_NEW,      /* acknowledges one or more outstanding segments */
    USNIC_ACK_DUP,      /* repeats the last ACK (alone no sign of a loss: USNIC_ACK_HOLE is) */
    USNIC_ACK_OLD,      /* older than what we already know */
    USNIC_ACK_BOGUS,    /* acknowledges something never sent: ignore it */
} usnic_ack_class_t;

/* (inline: every ACK and every data datagram carrying one asks) */
static inline usnic_ack_class_t usnic_tx_classify_ack(const usnic_tx_window_t *w, uint16_t ack)
{
    int16_t d = USNIC_SEQ_DIFF16(ack, w->ack_seq_rcvd);
    if (0 == d) {
        return USNIC_ACK_DUP;
    }
    if (d < 0) {
        return USNIC_ACK_OLD;
    }
    /* Anything at or beyond the next sequence to send was never sent. */
    if (USNIC_SEQ_DIFF16(ack, w->next_seq_to_send) >= 0) {
        return USNIC_ACK_BOGUS;
    }
    return USNIC_ACK_NEW;
}

/* ---- receiver side ---- */

/* Holes known lost that the receiver remembers at once; more wait for
 * the sender's timer. */
#define USNIC_RX_LOST_MAX 8

typedef struct {
    uint16_t next_contig;       /* left edge: lowest sequence not yet received */
    uint16_t highest_rcvd;      /* above next_contig: a hole is open */
    uint32_t size;              /* window width, a power of two, multiple of 64 */
    uint32_t start;             /* bitmap index of next_contig */
    uint64_t *bits;             /* size bits: received segments at and above next_contig */
    uint32_t nlost;             /* lost[0 .. nlost): holes known lost (usnic_rx_note_lost) */
    uint16_t lost[USNIC_RX_LOST_MAX];
} usnic_rx_window_t;

typedef enum {
    USNIC_RX_ACCEPT,
    USNIC_RX_DUP,
    USNIC_RX_OOW_LOW,
    USNIC_RX_OOW_HIGH,
} usnic_rx_class_t;

/* bits must point to size/64 zeroed words. */
void usnic_rx_window_init(usnic_rx_window_t *w, uint16_t first_seq, uint32_t size, uint64_t *bits);
usnic_rx_class_t usnic_rx_classify(const usnic_rx_window_t *w, uint16_t seq);
/* seq arrived above a hole, sent on its channel after prev (the header's
 * chan_prev).  Each channel keeps its order, so a prev inside the window
 * that has not arrived is lost, not late: it is remembered.  True if it is
 * the hole at the left edge (its ACK should go now).  (A channel unused
 * for a lap of sequence numbers names one that may look inside the window
 * again: at worst one resend that was not needed.) */
bool usnic_rx_note_lost(usnic_rx_window_t *w, uint16_t prev, uint16_t seq);
/* The run of segments at the left edge that is known lost: n > 0 when the
 * n sequence numbers from the edge on are all missing and the last of them
 * is a hole known lost (so, its channel keeping order, are those before it
 * on the same channel); 0 when none such is known (or the run is longer
 * than USNIC_ACK_RUN_MAX and its edge not known lost).  Forgets the holes
 * filled since.  Called for every ACK, so that none is remembered a lap. */
uint32_t usnic_rx_edge_lost(usnic_rx_window_t *w);
/* usnic_rx_mark when seq is not simply the next one in order. */
uint32_t usnic_rx_mark_held(usnic_rx_window_t *w, uint16_t seq);

/* Record an accepted sequence; returns how far the left edge moved.
 * Inline for the usual case: the next one in order, nothing held after it. */
static inline uint32_t usnic_rx_mark(usnic_rx_window_t *w, uint16_t seq)
{
    uint32_t next = (w->start + 1) & (w->size - 1);

    if (seq == w->next_contig && !((w->bits[next >> 6] >> (next & 63)) & 1)) {
        w->start = next;
        ++w->next_contig;
        if (USNIC_SEQ_DIFF16(seq, w->highest_rcvd) > 0) {
            w->highest_rcvd = seq;
        }
        return 1;
    }
    return usnic_rx_mark_held(w, seq);
}

/* The value to put in an ACK: the highest contiguous sequence received. */
static inline uint16_t usnic_rx_ack_value(const usnic_rx_window_t *w)
{
    return (uint16_t)(w->next_contig - 1);
}

/* ---- retransmit timeout ---- */

/* Adaptive retransmit timeout (RFC 6298 style): smoothed round-trip time
 * plus four deviations, never below the configured minimum, doubled on
 * every timeout.  A fixed timeout either fires during every large burst on
 * a slow host or waits far too long on a fast one. */
typedef struct {
    double srtt_us;
    double rttvar_us;
    uint32_t rto_us;
    uint32_t min_us;            /* the floor: base_us, or raised for a late peer */
    uint32_t base_us;           /* the configured floor */
    uint32_t max_us;
    bool have_sample;
    bool backed_off;
} usnic_rto_t;

void usnic_rto_init(usnic_rto_t *r, uint32_t min_us, uint32_t max_us);
/* A round-trip sample of a segment sent once (never of a resent one). */
void usnic_rto_sample(usnic_rto_t *r, double sample_us);
void usnic_rto_backoff(usnic_rto_t *r);
/* The peer acknowledged something new: it is alive and the path works, so
 * the timeout goes back to what the round trips say (no backoff). */
void usnic_rto_reset(usnic_rto_t *r);
static inline void usnic_rto_unback(usnic_rto_t *r)
{
    if (r->backed_off) {
        usnic_rto_reset(r);
    }
}
/* The peer acknowledged a segment late_us after it was sent, later than
 * the floor allowed (it computes outside MPI, or is descheduled): raise the
 * floor above that (Eifel's response), up to cap_us and the ceiling. */
void usnic_rto_raise_floor(usnic_rto_t *r, double late_us, uint32_t cap_us);
/* Halve a raised floor, down to the configured one; false if not raised. */
bool usnic_rto_lower_floor(usnic_rto_t *r);

/* ---- reordering window ---- */

/* How long a reported hole waits before its run is resent: not at all
 * until the path proves that it reorders (the peer got a fast resend
 * twice: the original was late, not lost); then a quarter of the smoothed
 * round trip per proof, up to the whole (RACK's adaptive window).  After
 * USNIC_REO_PERSIST holes that waited and still had to be resent, with no
 * proof between, the path is taken to keep its order again. */
#define USNIC_REO_STEPS_MAX 4
#define USNIC_REO_PERSIST 16
typedef struct {
    uint8_t steps;
    uint8_t persist;
} usnic_reo_t;

static inline double usnic_reo_wait_us(const usnic_reo_t *r, const usnic_rto_t *rto)
{
    return r->steps * rto->srtt_us / 4;
}
/* A fast resend arrived twice at the peer. */
void usnic_reo_proven(usnic_reo_t *r);
/* A hole that waited was still missing: a loss after all. */
void usnic_reo_loss(usnic_reo_t *r);

/* ---- dead-peer detection ---- */

/* A peer holding our data unacknowledged is dead only if, for the timeout,
 * it neither acknowledged anything nor proved alive otherwise (answered a
 * liveness ping while busy outside MPI), and it had at least half the
 * timeout of our attention: pings and retransmits only go out while this
 * process runs progress, so a stall we sat out ourselves proves nothing.
 * Times are seconds on a monotonic clock. */
typedef struct {
    double watch_since;         /* the current stall was first noticed; 0: no stall */
    double last_ping;           /* the last liveness ping went out */
} usnic_peer_watch_t;

typedef enum {
    USNIC_PEER_OK,
    USNIC_PEER_PING,            /* send the peer a liveness ping now */
    USNIC_PEER_DEAD,
} usnic_peer_verdict_t;

/* Liveness pings start once a stall lasts this fraction of the timeout. */
#define USNIC_PEER_WATCH_FRACTION 4

/* Seconds between liveness pings. */
static inline double usnic_peer_ping_interval(double timeout)
{
    return timeout / 8 < 1.0 ? timeout / 8 : 1.0;
}

/* How long a peer must have been outside progress for its answer to show
 * it busy (a peer spinning in MPI would have acknowledged). */
static inline double usnic_peer_busy_idle(double timeout)
{
    return timeout / USNIC_PEER_WATCH_FRACTION < 1.0 ? timeout / USNIC_PEER_WATCH_FRACTION : 1.0;
}

/* One check of an endpoint with segments in flight.  last_seen: its last
 * sign of life (first segment in flight, last ACK, last busy answer).
 * restart: this process did not check for a long time (it was away). */
usnic_peer_verdict_t usnic_peer_judge(usnic_peer_watch_t *w, double now, double last_seen,
                                      double timeout, bool restart);

/* ---- received-packet validation ---- */

typedef enum {
    USNIC_PKT_OK = 0,
    USNIC_PKT_SHORT,          /* shorter than its headers */
    USNIC_PKT_BAD_LENGTH,     /* header lengths disagree with the bytes received */
    USNIC_PKT_BAD_TYPE,
    USNIC_PKT_BAD_CHUNK,      /* chunk offset/size outside its fragment or limits */
    USNIC_PKT_BAD_PUT,        /* PUT target not inside memory registered for it */
    USNIC_PKT_BAD_RDMA,       /* malformed GET/atomic request or reply */
    USNIC_PKT_BAD_RDMA_TARGET, /* GET/atomic not inside memory registered for it */
    USNIC_PKT_NUM_RESULTS
} usnic_pkt_result_t;

/* Checks a datagram's headers against the bytes the device delivered
 * (payload after the GRH).  max_frag_size bounds chunked fragments.
 * (Inline: every datagram.) */
static inline usnic_pkt_result_t usnic_pkt_validate(const void *buf, size_t len,
                                                    uint32_t max_frag_size)
{
    const usnic_btl_header_t *h = buf;
    const usnic_btl_chunk_header_t *ch = buf;

    if (len < sizeof(*h)) {
        return USNIC_PKT_SHORT;
    }
    switch (h->payload_type) {
    case USNIC_PAYLOAD_TYPE_ACK:
        if (!h->ack_present || 0 != h->payload_len || sizeof(*h) != len) {
            return USNIC_PKT_BAD_LENGTH;
        }
        return USNIC_PKT_OK;
    case USNIC_PAYLOAD_TYPE_FRAG:
        if (sizeof(*h) + (size_t)h->payload_len != len ||
            (0 != h->put_addr && h->payload_len < usnic_put_ref_len(h->tag, h->put_addr))) {
            return USNIC_PKT_BAD_LENGTH;
        }
        return USNIC_PKT_OK;
    case USNIC_PAYLOAD_TYPE_CHUNK:
        if (len < sizeof(*ch)) {
            return USNIC_PKT_SHORT;
        }
        if (sizeof(*ch) + usnic_put_ref_len(h->tag, h->put_addr) + (size_t)h->payload_len !=
            len) {
            return USNIC_PKT_BAD_LENGTH;
        }
        if (0 == ch->frag_id || 0 == ch->frag_size || 0 == h->payload_len ||
            (0 == h->put_addr && ch->frag_size > max_frag_size) ||
            ch->frag_offset >= ch->frag_size ||
            h->payload_len > ch->frag_size - ch->frag_offset) {
            return USNIC_PKT_BAD_CHUNK;
        }
        return USNIC_PKT_OK;
    default:
        return USNIC_PKT_BAD_TYPE;
    }
}

const char *usnic_pkt_result_str(usnic_pkt_result_t r);

/* ---- emulated GET and atomics ---- */

/* Checks a message of tag USNIC_TAG_RDMA (len bytes, the whole fragment):
 * known kind, exact length, GETs of 1..max_get bytes, atomics of 4 or 8
 * bytes at an address aligned to that width, a known operation.  Whether
 * the target memory may be accessed is the engine's question. */
usnic_pkt_result_t usnic_rdma_msg_check(const void *buf, size_t len, uint32_t max_get);

/* ---- connectivity messages ---- */

/* SipHash-2-4 (Aumasson and Bernstein) of len bytes under a 128-bit key
 * (key[0] the lowest 32 bits). */
uint64_t usnic_siphash24(const uint32_t key[4], const void *data, size_t len);

/* The authenticator of connectivity message m (all but its mac field),
 * sent from from_ip:from_port to to_ip:to_port (network order), under
 * the key of the process pinged. */
uint64_t usnic_conn_mac(const uint32_t key[4], const usnic_conn_msg_t *m, uint32_t from_ip,
                        uint16_t from_port, uint32_t to_ip, uint16_t to_port);

/* Whether answer nonce n is for a liveness ping still outstanding: one of
 * the last USNIC_LIVE_NONCES pings sent (the last had nonce sent), newer
 * than the last answer counted (answered).  Each counts once. */
#define USNIC_LIVE_NONCES 4
static inline bool usnic_live_nonce_ok(uint64_t n, uint64_t sent, uint64_t answered)
{
    return sent - n < USNIC_LIVE_NONCES && n - answered - 1 < sent - answered;
}

/* Carries out a checked atomic request on mem (aligned, m->width bytes)
 * with the CPU's atomic instructions, so that it is atomic also against
 * the processes of this host working on the same memory; returns the old
 * value. */
uint64_t usnic_rdma_atomic(void *mem, const usnic_rdma_msg_t *m);

/* ---- reassembly ---- */

/* One fragment being put together from chunks. */
typedef struct {
    uint32_t frag_id;           /* 0 = slot free */
    uint32_t frag_size;
    uint32_t bytes_left;
    uint32_t buf_size;          /* room in buf (sends) */
    uint64_t put_addr;          /* 0, or where an emulated PUT lands */
    uint8_t *buf;               /* reassembly buffer (sends) or put target */
    uint16_t first_seq;         /* sequence number of the fragment's chunk 0 */
    uint8_t tag;
    bool discard;               /* PUT target gone: accept the rest, write nothing */
} usnic_rx_frag_t;

typedef enum {
    USNIC_CHUNK_FITS,           /* belongs to the fragment in this slot */
    USNIC_CHUNK_NEW,            /* slot free: starts a new fragment */
    USNIC_CHUNK_BUSY,           /* slot taken by another fragment: drop, it will come again */
    USNIC_CHUNK_MISMATCH,       /* same id, different size or target: drop as bad */
} usnic_chunk_class_t;

usnic_chunk_class_t usnic_rx_classify_chunk(const usnic_rx_frag_t *slot,
                                            const usnic_btl_chunk_header_t *ch);

/* Chunks tile their fragment: chunk k starts at k * chunk_payload, is full
 * unless it is the last, and carries sequence number first_seq + k.
 * Anything else (overlaps, holes) is malformed.  ch passed
 * usnic_pkt_validate (offset inside the fragment). */
static inline bool usnic_chunk_tiles(const usnic_btl_chunk_header_t *ch, uint32_t chunk_payload)
{
    uint32_t left = ch->frag_size - ch->frag_offset;

    return 0 == ch->frag_offset % chunk_payload &&
           ch->hdr.payload_len == (left < chunk_payload ? left : chunk_payload);
}

/* The sequence number of chunk 0 of ch's fragment, for a chunk that tiles:
 * every chunk of one fragment must name the same. */
static inline uint16_t usnic_chunk_first_seq(const usnic_btl_chunk_header_t *ch,
                                             uint32_t chunk_payload)
{
    return (uint16_t)(ch->hdr.pkt_seq - ch->frag_offset / chunk_payload);
}

#endif /* BTL_USNIC_WINDOW_H */
