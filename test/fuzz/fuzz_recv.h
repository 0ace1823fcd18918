/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 * $COPYRIGHT$
 * SPDX-License-Identifier: BSD-3-Clause
 *
 * The receive-path fuzzer of the usnic BTL: input format and the
 * constants that the harness (fuzz_recv.c) and the seed generator
 * (make_seeds.c) share.
 *
 * An input drives side B of an engine world (test/unit/engine_world.h):
 *
 *   byte 0        options, FUZZ_OPT_* below
 *   then records  a 16-bit little-endian word W, with FUZZ_REC_PAD a
 *                 second one P, then (W & FUZZ_REC_LEN_MASK) bytes:
 *                   bits 0-12   how many bytes follow (a record cut short by
 *                               the end of the input has what is left)
 *                   bit 13      FUZZ_REC_PAD: the datagram is
 *                               (P & FUZZ_REC_PAD_MASK) bytes long, those
 *                               given and then zeros (never shorter than
 *                               the bytes given); chunks of full size cost
 *                               an input a few dozen bytes instead of 4 KB,
 *                               so mutations land on headers and options
 *                   bit 14      FUZZ_REC_BATCH: inject the next datagram too
 *                               before B's next progress pass
 *                   bit 15      FUZZ_REC_OTHER_CHANNEL: the other channel
 *                               than the options byte says
 *
 * Each datagram is what arrives after the 40-byte GRH: a BTL header
 * (usnic_btl_header_t) and what follows.  The harness rebases three
 * header fields and the registration key, each by a plain addition (so every value the component
 * can be sent stays reachable), and changes nothing else:
 *
 *   put_addr (if not 0)  is FUZZ_PUT_BASE + an offset into the harness's
 *                        PUT region, wherever that region happens to be;
 *                        so is the addr (if not 0) of a GET/atomic request
 *                        (a FRAG with tag USNIC_TAG_RDMA whose payload
 *                        starts with a usnic_rdma_msg_t that is no reply);
 *   a registration key   of 0, in the usnic_reg_ref_t of a PUT (after the
 *                        header of a PUT FRAG or CHUNK) or of a GET/atomic
 *                        request, stands for the key B's table holds now
 *                        in the slot the reference names (the random keys
 *                        of live registrations could not be guessed; no
 *                        registration has key 0, other keys stay);
 *   pkt_seq              is as if B's receive window still started at
 *                        FUZZ_ISN_A (it is moved by how far the window's
 *                        left edge has moved in the world so far);
 *   ack_seq              is as if B's next sequence number were still
 *                        FUZZ_ISN_B at the start of the input.
 *
 * In a fresh world both sequence offsets are 0.  The PUT region is
 * [0, FUZZ_PUT_RW_LEN) registered for remote writes, reads and atomics (slot
 * FUZZ_SLOT_RW), [FUZZ_PUT_RO_OFF, FUZZ_REGION_SIZE) registered for local
 * writes only (slot FUZZ_SLOT_RO), with an unregistered gap in between.
 */

#ifndef USNIC_FUZZ_RECV_H
#define USNIC_FUZZ_RECV_H

#include <stddef.h>
#include <stdint.h>

/* First sequence numbers of both sides: near the wrap, so that window
 * comparisons cross 65535 -> 0 within a few packets. */
#define FUZZ_ISN_A 0xfff0   /* B's receive window starts here */
#define FUZZ_ISN_B 0xfffd   /* B's own sends (FUZZ_OPT_TRAFFIC) start here */

#define FUZZ_PUT_BASE 0x100000000ULL
#define FUZZ_REGION_SIZE (128 * 1024)
#define FUZZ_PUT_RW_LEN (64 * 1024)
#define FUZZ_PUT_RO_OFF (68 * 1024)
#define FUZZ_SLOT_RW 0
#define FUZZ_SLOT_RO 1

/* options byte */
#define FUZZ_OPT_DATA_CHANNEL 0x01  /* datagrams go to the data channel, else priority */
#define FUZZ_OPT_TRAFFIC_MASK 0x06  /* what B sends to A before the datagrams: */
#define FUZZ_OPT_TRAFFIC_SHIFT 1
enum {
    FUZZ_TRAFFIC_NONE = 0,
    FUZZ_TRAFFIC_ONE = 1,           /* one small message: seq ISN_B */
    FUZZ_TRAFFIC_FOUR = 2,          /* four small messages: ISN_B .. ISN_B+3 */
    FUZZ_TRAFFIC_LARGE = 3,         /* 3-chunk message then a small one: ISN_B .. ISN_B+3 */
};
#define FUZZ_OPT_NET 0x08           /* B's output reaches A, A progresses and answers */
#define FUZZ_OPT_TIMEOUTS 0x10      /* at the end, B's retransmit timers fire */
#define FUZZ_OPT_WARN 0x20          /* warn after the first bad packet (else never);
                                     * only the first FUZZ_WARN_LIMIT inputs of a
                                     * process that ask for it get it */
#define FUZZ_WARN_LIMIT 32
#define FUZZ_OPT_SEND_AFTER 0x40    /* after the datagrams B sends a small message,
                                     * which carries any ACK B owes */
#define FUZZ_OPT_DEREG 0x80         /* once the first datagram (or batch) is processed,
                                     * B deregisters the writable part of the PUT region
                                     * (the PML is done with it) and the harness poisons
                                     * it; registered again after the input.  Ignored
                                     * if FUZZ_NO_DEREG=1 is in the environment. */

#define FUZZ_REC_LEN_MASK 0x1fff
#define FUZZ_REC_PAD 0x2000
#define FUZZ_REC_PAD_MASK 0x3fff
#define FUZZ_REC_BATCH 0x4000
#define FUZZ_REC_OTHER_CHANNEL 0x8000

/* Sizes of FUZZ_TRAFFIC_* messages. */
#define FUZZ_SMALL_MSG 64
#define FUZZ_LARGE_MSG 10000

struct world;
/* The world inputs run in; for make_seeds. */
struct world *fuzz_world(void);
/* The PUT region: FUZZ_REGION_SIZE bytes at FUZZ_PUT_BASE in inputs. */
uint8_t *fuzz_put_region(void);
/* If set, called at the end of every input, before its world may be
 * released. */
extern void (*fuzz_after_input)(struct world *w);

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#endif /* USNIC_FUZZ_RECV_H */
