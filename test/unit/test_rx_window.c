/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 * $COPYRIGHT$
 * SPDX-License-Identifier: BSD-3-Clause
 *
 * Receive window: classification, marking and the ACK value
 * (btl_usnic_window.h) with the default width of 4096.
 */

#include <stdbool.h>

#include "btl_usnic_window.h"
#include "usnic_test.h"

#define SIZE 4096

/* Bitmap memory; usnic_rx_window_init clears it. */
static uint64_t bits[SIZE / 64];

USNIC_TEST(rx_in_order)
{
    usnic_rx_window_t w;

    usnic_rx_window_init(&w, 100, SIZE, bits);
    check_int_eq(w.next_contig, 100);
    for (uint16_t seq = 100; seq < 200; ++seq) {
        check_int_eq(usnic_rx_classify(&w, seq), USNIC_RX_ACCEPT);
        check_int_eq(usnic_rx_mark(&w, seq), 1);
        check_int_eq(w.next_contig, seq + 1);
        check_int_eq(usnic_rx_ack_value(&w), seq);
    }
    return 0;
}

USNIC_TEST(rx_reorder)
{
    usnic_rx_window_t w;

    usnic_rx_window_init(&w, 100, SIZE, bits);
    check_int_eq(usnic_rx_mark(&w, 103), 0);
    check_int_eq(usnic_rx_mark(&w, 102), 0);
    check_int_eq(usnic_rx_mark(&w, 101), 0);
    check_int_eq(w.next_contig, 100);
    check_int_eq(usnic_rx_ack_value(&w), 99);
    check_int_eq(w.highest_rcvd, 103);
    /* the gap filled: the left edge jumps over all four */
    check_int_eq(usnic_rx_classify(&w, 100), USNIC_RX_ACCEPT);
    check_int_eq(usnic_rx_mark(&w, 100), 4);
    check_int_eq(w.next_contig, 104);
    check_int_eq(usnic_rx_ack_value(&w), 103);
    check_int_eq(usnic_rx_classify(&w, 104), USNIC_RX_ACCEPT);
    return 0;
}

USNIC_TEST(rx_duplicates)
{
    usnic_rx_window_t w;

    usnic_rx_window_init(&w, 100, SIZE, bits);
    usnic_rx_mark(&w, 105);
    check_int_eq(usnic_rx_classify(&w, 105), USNIC_RX_DUP);
    check_int_eq(usnic_rx_classify(&w, 104), USNIC_RX_ACCEPT);
    /* delivered and passed: below the window */
    usnic_rx_mark(&w, 100);
    check_int_eq(usnic_rx_classify(&w, 100), USNIC_RX_OOW_LOW);
    check_int_eq(usnic_rx_classify(&w, 105), USNIC_RX_DUP);
    return 0;
}

USNIC_TEST(rx_window_bounds)
{
    usnic_rx_window_t w;

    usnic_rx_window_init(&w, 100, SIZE, bits);
    check_int_eq(usnic_rx_classify(&w, 99), USNIC_RX_OOW_LOW);
    check_int_eq(usnic_rx_classify(&w, (uint16_t) (100 - 10000)), USNIC_RX_OOW_LOW);
    check_int_eq(usnic_rx_classify(&w, 100), USNIC_RX_ACCEPT);
    check_int_eq(usnic_rx_classify(&w, 100 + SIZE - 1), USNIC_RX_ACCEPT);
    check_int_eq(usnic_rx_classify(&w, 100 + SIZE), USNIC_RX_OOW_HIGH);
    check_int_eq(usnic_rx_classify(&w, 100 + 10000), USNIC_RX_OOW_HIGH);
    return 0;
}

USNIC_TEST(rx_seq_wraparound)
{
    usnic_rx_window_t w;

    /* in order across 65535 -> 0 */
    usnic_rx_window_init(&w, 65534, SIZE, bits);
    check_int_eq(usnic_rx_ack_value(&w), 65533);
    check_int_eq(usnic_rx_mark(&w, 65534), 1);
    check_int_eq(usnic_rx_mark(&w, 65535), 1);
    check_int_eq(usnic_rx_ack_value(&w), 65535);
    check_int_eq(usnic_rx_mark(&w, 0), 1);
    check_int_eq(usnic_rx_ack_value(&w), 0);
    check_int_eq(w.next_contig, 1);
    check_int_eq(usnic_rx_classify(&w, 65535), USNIC_RX_OOW_LOW);

    /* reordered across the wrap */
    usnic_rx_window_init(&w, 65534, SIZE, bits);
    check_int_eq(usnic_rx_mark(&w, 1), 0);
    check_int_eq(usnic_rx_mark(&w, 0), 0);
    check_int_eq(usnic_rx_mark(&w, 65535), 0);
    check_int_eq(usnic_rx_classify(&w, 0), USNIC_RX_DUP);
    check_int_eq(w.highest_rcvd, 1);
    check_int_eq(usnic_rx_mark(&w, 65534), 4);
    check_int_eq(w.next_contig, 2);
    check_int_eq(usnic_rx_ack_value(&w), 1);

    /* the right edge wraps too */
    usnic_rx_window_init(&w, 65534, SIZE, bits);
    check_int_eq(usnic_rx_classify(&w, (uint16_t) (65534 + SIZE - 1)), USNIC_RX_ACCEPT);
    check_int_eq(usnic_rx_classify(&w, (uint16_t) (65534 + SIZE)), USNIC_RX_OOW_HIGH);
    return 0;
}

USNIC_TEST(rx_ack_value)
{
    usnic_rx_window_t w;

    /* before anything arrives, the ACK names the sequence before the first */
    usnic_rx_window_init(&w, 0, SIZE, bits);
    check_int_eq(usnic_rx_ack_value(&w), 65535);
    usnic_rx_mark(&w, 1);
    check_int_eq(usnic_rx_ack_value(&w), 65535);
    usnic_rx_mark(&w, 0);
    check_int_eq(usnic_rx_ack_value(&w), 1);
    return 0;
}

/* xorshift32: the same sequence on every libc. */
static uint32_t next_random(uint32_t *state)
{
    uint32_t x = *state;
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    return *state = x;
}

/* Random traffic against a reference model that counts in unbounded
 * (64-bit) sequence numbers, so it needs no wrap arithmetic.  A sender
 * keeps up to POOL segments in flight, never past the window, and they
 * arrive in random order; mixed in are arrivals anywhere in the window
 * (early copies, later duplicates) and outside it.  Runs long enough for
 * the 16-bit sequence number and the bitmap index to wrap many times. */
#define POOL 300

USNIC_TEST(rx_random_vs_model)
{
    static bool got[SIZE];      /* by absolute sequence % SIZE, at or above next */
    static uint64_t pool[POOL];
    const uint64_t first = 60000;
    uint64_t next = first, sent = first, highest = first - 1;
    uint32_t rng = 12345;
    int npool = 0;
    usnic_rx_window_t w;

    usnic_rx_window_init(&w, (uint16_t) first, SIZE, bits);
    for (int iter = 0; iter < 300000; ++iter) {
        uint32_t r = next_random(&rng), pick = r % 100, r2 = r >> 8;
        uint64_t seq;
        usnic_rx_class_t want;

        while (npool < POOL && sent - next < SIZE) {
            pool[npool++] = sent++;
        }
        if (pick < 80) {
            int i = (int) (r2 % (uint32_t) npool);
            seq = pool[i];
            pool[i] = pool[--npool];
        } else if (pick < 90) {
            seq = next + r2 % SIZE;
        } else if (pick < 95) {
            seq = next - 1 - r2 % 64;
        } else {
            seq = next + SIZE + r2 % 64;
        }

        if (seq < next) {
            want = USNIC_RX_OOW_LOW;
        } else if (seq >= next + SIZE) {
            want = USNIC_RX_OOW_HIGH;
        } else {
            want = got[seq % SIZE] ? USNIC_RX_DUP : USNIC_RX_ACCEPT;
        }
        check_int_eq(usnic_rx_classify(&w, (uint16_t) seq), want);

        if (USNIC_RX_ACCEPT == want) {
            uint64_t moved = 0;

            got[seq % SIZE] = true;
            if (seq > highest) {
                highest = seq;
            }
            /* flags are cleared as the edge passes: the slot is reused SIZE later */
            while (got[next % SIZE]) {
                got[next++ % SIZE] = false;
                ++moved;
            }
            check_int_eq(usnic_rx_mark(&w, (uint16_t) seq), moved);
        }
        check_int_eq(w.next_contig, (uint16_t) next);
        check_int_eq(w.highest_rcvd, (uint16_t) highest);
        check_int_eq(usnic_rx_ack_value(&w), (uint16_t) (next - 1));
    }
    /* the run must have covered the wraps it is meant to test */
    check(next - first > 3 * 65536);
    return 0;
}

/* Holes known lost: a segment names the one sent before it on its channel;
 * a missing one inside the window is remembered until the edge passes it. */
USNIC_TEST(rx_known_lost)
{
    usnic_rx_window_t w;

    usnic_rx_window_init(&w, 100, SIZE, bits);
    /* 102 sent after 100 on one channel, 101 on the other: 100 is lost */
    check(usnic_rx_note_lost(&w, 100, 102));
    usnic_rx_mark(&w, 102);
    check_int_eq(usnic_rx_edge_lost(&w), 1);
    /* claims about arrived, future or own sequence numbers are no news */
    check(!usnic_rx_note_lost(&w, 102, 105));
    check(!usnic_rx_note_lost(&w, 99, 103));
    check(!usnic_rx_note_lost(&w, 104, 104));
    check(!usnic_rx_note_lost(&w, 110, 104));
    check_int_eq(w.nlost, 1);
    /* 104 lost above the edge: remembered, not the edge */
    check(!usnic_rx_note_lost(&w, 104, 106));
    usnic_rx_mark(&w, 106);
    check(!usnic_rx_note_lost(&w, 104, 107));       /* named twice: once */
    check_int_eq(w.nlost, 2);
    /* 100 resent and 101 late: the edge moves to 103, which nobody named,
     * but 104 after it is lost and 103 missing too: the run 103-104 (the
     * sender resends those of it sent on 104's channel) */
    usnic_rx_mark(&w, 100);
    usnic_rx_mark(&w, 101);
    check_int_eq(w.next_contig, 103);
    check_int_eq(usnic_rx_edge_lost(&w), 2);
    check_int_eq(w.nlost, 1);
    usnic_rx_mark(&w, 103);
    check_int_eq(w.next_contig, 104);
    check_int_eq(usnic_rx_edge_lost(&w), 1);
    /* all filled: nothing is remembered */
    usnic_rx_mark(&w, 104);
    usnic_rx_mark(&w, 105);
    check_int_eq(w.next_contig, 107);
    check(!usnic_rx_edge_lost(&w));
    check_int_eq(w.nlost, 0);
    /* more holes than it remembers: the edge still gets its place */
    for (uint16_t k = 0; k <= USNIC_RX_LOST_MAX; ++k) {
        check(!usnic_rx_note_lost(&w, (uint16_t) (108 + 2 * k), (uint16_t) (109 + 2 * k)));
        usnic_rx_mark(&w, (uint16_t) (109 + 2 * k));
    }
    check_int_eq(w.nlost, USNIC_RX_LOST_MAX);
    /* (107 missing before 108, which is lost: the run 107-108) */
    check_int_eq(usnic_rx_edge_lost(&w), 2);
    check(usnic_rx_note_lost(&w, 107, 200));
    check_int_eq(w.nlost, USNIC_RX_LOST_MAX);
    check_int_eq(usnic_rx_edge_lost(&w), 2);
    return 0;
}

/* A burst: a run of segments lost together, the first arrival after it
 * naming the run's last; the run reaches back to the edge only while
 * nothing in it arrived. */
USNIC_TEST(rx_known_lost_run)
{
    usnic_rx_window_t w;

    usnic_rx_window_init(&w, 200, SIZE, bits);
    usnic_rx_mark(&w, 200);
    /* 201-207 dropped together; 208 was sent after 207 on its channel */
    check(!usnic_rx_note_lost(&w, 207, 208));
    usnic_rx_mark(&w, 208);
    check_int_eq(usnic_rx_edge_lost(&w), 7);
    /* 203 was late after all (the other channel): the run stops before it,
     * and no hole known lost lies in 201-202 */
    usnic_rx_mark(&w, 203);
    check_int_eq(usnic_rx_edge_lost(&w), 0);
    check_int_eq(w.nlost, 1);
    /* 201 and 202 arrive: the edge is 204, and 204-207 is the run */
    usnic_rx_mark(&w, 201);
    usnic_rx_mark(&w, 202);
    check_int_eq(w.next_contig, 204);
    check_int_eq(usnic_rx_edge_lost(&w), 4);
    /* a run longer than an ACK can name, its edge not known lost: none */
    usnic_rx_window_init(&w, 1000, SIZE, bits);
    check(!usnic_rx_note_lost(&w, (uint16_t) (1000 + USNIC_ACK_RUN_MAX), 1300));
    usnic_rx_mark(&w, 1300);
    check_int_eq(usnic_rx_edge_lost(&w), 0);
    check(!usnic_rx_note_lost(&w, (uint16_t) (999 + USNIC_ACK_RUN_MAX), 1301));
    usnic_rx_mark(&w, 1301);
    check_int_eq(usnic_rx_edge_lost(&w), USNIC_ACK_RUN_MAX);
    return 0;
}
