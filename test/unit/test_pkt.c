/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 * $COPYRIGHT$
 * SPDX-License-Identifier: BSD-3-Clause
 *
 * Received-packet validation, chunk tiling and reassembly-slot classification
 * (btl_usnic_window.h, formats in btl_usnic_wire.h).
 */

#include <string.h>

#include "btl_usnic_window.h"
#include "usnic_test.h"

#define HDR sizeof(usnic_btl_header_t)
#define CHDR sizeof(usnic_btl_chunk_header_t)
#define MAX_FRAG 4096

/* A datagram as the device delivers it (after the GRH). */
typedef union {
    usnic_btl_header_t hdr;
    usnic_btl_chunk_header_t ch;
    uint8_t bytes[HDR + 2048];
} packet_t;

static void make_hdr(packet_t *p, uint8_t type, uint16_t payload_len)
{
    memset(p, 0, sizeof(*p));
    p->hdr.sender = 0x0000000700000003ULL;
    p->hdr.payload_type = type;
    p->hdr.payload_len = payload_len;
}

/* A send fragment of 1000 bytes: this chunk carries [offset, offset+len). */
static size_t make_chunk(packet_t *p, uint32_t offset, uint16_t len)
{
    make_hdr(p, USNIC_PAYLOAD_TYPE_CHUNK, len);
    p->ch.frag_id = 7;
    p->ch.frag_size = 1000;
    p->ch.frag_offset = offset;
    return CHDR + len;
}

USNIC_TEST(pkt_short)
{
    packet_t p;

    make_hdr(&p, USNIC_PAYLOAD_TYPE_FRAG, 0);
    check_int_eq(usnic_pkt_validate(&p, 0, MAX_FRAG), USNIC_PKT_SHORT);
    check_int_eq(usnic_pkt_validate(&p, HDR - 1, MAX_FRAG), USNIC_PKT_SHORT);
    check_int_eq(usnic_pkt_validate(&p, HDR, MAX_FRAG), USNIC_PKT_OK);
    return 0;
}

USNIC_TEST(pkt_ack)
{
    packet_t p;

    make_hdr(&p, USNIC_PAYLOAD_TYPE_ACK, 0);
    p.hdr.ack_present = 1;
    check_int_eq(usnic_pkt_validate(&p, HDR, MAX_FRAG), USNIC_PKT_OK);
    /* trailing bytes after a bare ACK are as wrong as a short one */
    check_int_eq(usnic_pkt_validate(&p, HDR + 1, MAX_FRAG), USNIC_PKT_BAD_LENGTH);
    p.hdr.payload_len = 4;
    check_int_eq(usnic_pkt_validate(&p, HDR, MAX_FRAG), USNIC_PKT_BAD_LENGTH);
    p.hdr.payload_len = 0;
    p.hdr.ack_present = 0;
    check_int_eq(usnic_pkt_validate(&p, HDR, MAX_FRAG), USNIC_PKT_BAD_LENGTH);
    return 0;
}

USNIC_TEST(pkt_frag_length)
{
    packet_t p;

    make_hdr(&p, USNIC_PAYLOAD_TYPE_FRAG, 100);
    check_int_eq(usnic_pkt_validate(&p, HDR + 100, MAX_FRAG), USNIC_PKT_OK);
    check_int_eq(usnic_pkt_validate(&p, HDR + 99, MAX_FRAG), USNIC_PKT_BAD_LENGTH);
    check_int_eq(usnic_pkt_validate(&p, HDR + 101, MAX_FRAG), USNIC_PKT_BAD_LENGTH);
    return 0;
}

USNIC_TEST(pkt_bad_type)
{
    static const uint8_t types[] = {0, USNIC_PAYLOAD_TYPE_CHUNK + 1, 255};
    packet_t p;

    for (size_t i = 0; i < sizeof(types); ++i) {
        make_hdr(&p, types[i], 0);
        check_int_eq(usnic_pkt_validate(&p, HDR, MAX_FRAG), USNIC_PKT_BAD_TYPE);
    }
    return 0;
}

USNIC_TEST(pkt_chunk_ok)
{
    packet_t p;
    size_t len;

    len = make_chunk(&p, 0, 100);
    check_int_eq(usnic_pkt_validate(&p, len, MAX_FRAG), USNIC_PKT_OK);
    /* the last chunk ends exactly at the fragment's end */
    len = make_chunk(&p, 900, 100);
    check_int_eq(usnic_pkt_validate(&p, len, MAX_FRAG), USNIC_PKT_OK);
    /* a fragment of exactly the limit */
    len = make_chunk(&p, 0, 100);
    check_int_eq(usnic_pkt_validate(&p, len, 1000), USNIC_PKT_OK);
    return 0;
}

USNIC_TEST(pkt_chunk_length)
{
    packet_t p;
    size_t len = make_chunk(&p, 0, 100);

    /* a full header but no chunk header */
    check_int_eq(usnic_pkt_validate(&p, HDR, MAX_FRAG), USNIC_PKT_SHORT);
    check_int_eq(usnic_pkt_validate(&p, CHDR - 1, MAX_FRAG), USNIC_PKT_SHORT);
    check_int_eq(usnic_pkt_validate(&p, len - 1, MAX_FRAG), USNIC_PKT_BAD_LENGTH);
    check_int_eq(usnic_pkt_validate(&p, len + 1, MAX_FRAG), USNIC_PKT_BAD_LENGTH);
    return 0;
}

USNIC_TEST(pkt_chunk_range)
{
    packet_t p;
    size_t len;

    len = make_chunk(&p, 0, 100);
    p.ch.frag_id = 0;
    check_int_eq(usnic_pkt_validate(&p, len, MAX_FRAG), USNIC_PKT_BAD_CHUNK);

    len = make_chunk(&p, 0, 100);
    p.ch.frag_size = 0;
    check_int_eq(usnic_pkt_validate(&p, len, MAX_FRAG), USNIC_PKT_BAD_CHUNK);

    len = make_chunk(&p, 0, 0);
    check_int_eq(usnic_pkt_validate(&p, len, MAX_FRAG), USNIC_PKT_BAD_CHUNK);

    len = make_chunk(&p, 1000, 100);
    check_int_eq(usnic_pkt_validate(&p, len, MAX_FRAG), USNIC_PKT_BAD_CHUNK);

    len = make_chunk(&p, 950, 100);
    check_int_eq(usnic_pkt_validate(&p, len, MAX_FRAG), USNIC_PKT_BAD_CHUNK);

    /* offset + length would wrap 32 bits */
    len = make_chunk(&p, 0xfffffff0u, 100);
    p.ch.frag_size = 0xffffffffu;
    p.ch.hdr.put_addr = 0x10000;
    len += sizeof(usnic_reg_ref_t);     /* a PUT's chunks carry the target's registration */
    check_int_eq(usnic_pkt_validate(&p, len, MAX_FRAG), USNIC_PKT_BAD_CHUNK);
    return 0;
}

USNIC_TEST(pkt_chunk_size_limit)
{
    packet_t p;
    size_t len = make_chunk(&p, 0, 100);

    /* a send fragment above the limit */
    check_int_eq(usnic_pkt_validate(&p, len, 999), USNIC_PKT_BAD_CHUNK);
    /* an emulated PUT lands in user memory: its size is not bounded (its
     * chunks carry the target's registration between header and data) */
    p.ch.hdr.put_addr = 0x7f0000001000ULL;
    check_int_eq(usnic_pkt_validate(&p, len, 999), USNIC_PKT_BAD_LENGTH);
    len += sizeof(usnic_reg_ref_t);
    check_int_eq(usnic_pkt_validate(&p, len, 999), USNIC_PKT_OK);
    /* GET data names the GET in put_addr and carries none */
    p.ch.hdr.tag = USNIC_TAG_RDMA;
    check_int_eq(usnic_pkt_validate(&p, len, 999), USNIC_PKT_BAD_LENGTH);
    return 0;
}

/* A PUT in one datagram: its payload starts with the registration. */
USNIC_TEST(pkt_put_frag_carries_registration)
{
    packet_t p;

    memset(&p, 0, sizeof(p));
    p.hdr.payload_type = USNIC_PAYLOAD_TYPE_FRAG;
    p.hdr.put_addr = 0x7f0000001000ULL;
    p.hdr.payload_len = sizeof(usnic_reg_ref_t) - 1;
    check_int_eq(usnic_pkt_validate(&p, HDR + p.hdr.payload_len, MAX_FRAG), USNIC_PKT_BAD_LENGTH);
    p.hdr.payload_len = sizeof(usnic_reg_ref_t);
    check_int_eq(usnic_pkt_validate(&p, HDR + p.hdr.payload_len, MAX_FRAG), USNIC_PKT_OK);
    /* a send names no registration: any length */
    p.hdr.put_addr = 0;
    p.hdr.payload_len = 3;
    check_int_eq(usnic_pkt_validate(&p, HDR + 3, MAX_FRAG), USNIC_PKT_OK);
    return 0;
}

USNIC_TEST(pkt_result_str)
{
    check_str_eq(usnic_pkt_result_str(USNIC_PKT_OK), "ok");
    check_str_eq(usnic_pkt_result_str(USNIC_PKT_SHORT), "short packet");
    check_str_eq(usnic_pkt_result_str(USNIC_PKT_BAD_LENGTH), "length mismatch");
    check_str_eq(usnic_pkt_result_str(USNIC_PKT_BAD_TYPE), "unknown payload type");
    check_str_eq(usnic_pkt_result_str(USNIC_PKT_BAD_CHUNK), "chunk out of range");
    check_str_eq(usnic_pkt_result_str(USNIC_PKT_BAD_PUT), "PUT outside registered memory");
    check_str_eq(usnic_pkt_result_str(USNIC_PKT_NUM_RESULTS), "?");
    check_str_eq(usnic_pkt_result_str((usnic_pkt_result_t) -1), "?");
    return 0;
}

USNIC_TEST(chunk_classify)
{
    usnic_rx_frag_t slot = {0};
    packet_t p;

    make_chunk(&p, 0, 100);
    p.ch.hdr.tag = 65;
    check_int_eq(usnic_rx_classify_chunk(&slot, &p.ch), USNIC_CHUNK_NEW);

    slot.frag_id = 7;
    slot.frag_size = 1000;
    slot.bytes_left = 1000;
    slot.tag = 65;
    check_int_eq(usnic_rx_classify_chunk(&slot, &p.ch), USNIC_CHUNK_FITS);

    p.ch.frag_id = 8;
    check_int_eq(usnic_rx_classify_chunk(&slot, &p.ch), USNIC_CHUNK_BUSY);
    p.ch.frag_id = 7;

    p.ch.frag_size = 999;
    check_int_eq(usnic_rx_classify_chunk(&slot, &p.ch), USNIC_CHUNK_MISMATCH);
    p.ch.frag_size = 1000;

    p.ch.hdr.put_addr = 0x1000;
    check_int_eq(usnic_rx_classify_chunk(&slot, &p.ch), USNIC_CHUNK_MISMATCH);
    p.ch.hdr.put_addr = 0;

    p.ch.hdr.tag = 66;
    check_int_eq(usnic_rx_classify_chunk(&slot, &p.ch), USNIC_CHUNK_MISMATCH);
    p.ch.hdr.tag = 65;

    /* restored: fits again, so each mismatch above was the one field */
    check_int_eq(usnic_rx_classify_chunk(&slot, &p.ch), USNIC_CHUNK_FITS);
    return 0;
}

/* A 1000-byte fragment in chunks of 300: [0,300) [300,600) [600,900) [900,1000). */
USNIC_TEST(chunk_tiling)
{
    packet_t p;

    make_chunk(&p, 0, 300);
    check(usnic_chunk_tiles(&p.ch, 300));
    make_chunk(&p, 600, 300);
    check(usnic_chunk_tiles(&p.ch, 300));
    make_chunk(&p, 900, 100);
    check(usnic_chunk_tiles(&p.ch, 300));
    /* short but not last, last but short of the end, overlapping, off the grid */
    make_chunk(&p, 300, 299);
    check(!usnic_chunk_tiles(&p.ch, 300));
    make_chunk(&p, 900, 99);
    check(!usnic_chunk_tiles(&p.ch, 300));
    make_chunk(&p, 0, 301);
    check(!usnic_chunk_tiles(&p.ch, 300));
    make_chunk(&p, 150, 300);
    check(!usnic_chunk_tiles(&p.ch, 300));
    make_chunk(&p, 901, 99);
    check(!usnic_chunk_tiles(&p.ch, 300));
    /* one chunk holds it all */
    make_chunk(&p, 0, 1000);
    check(usnic_chunk_tiles(&p.ch, 4000));
    check(!usnic_chunk_tiles(&p.ch, 300));
    return 0;
}

USNIC_TEST(chunk_first_seq)
{
    packet_t p;

    make_chunk(&p, 0, 300);
    p.ch.hdr.pkt_seq = 40;
    check_int_eq(usnic_chunk_first_seq(&p.ch, 300), 40);
    make_chunk(&p, 900, 100);
    p.ch.hdr.pkt_seq = 43;
    check_int_eq(usnic_chunk_first_seq(&p.ch, 300), 40);
    /* across the wrap of the 16-bit sequence space */
    make_chunk(&p, 600, 300);
    p.ch.hdr.pkt_seq = 1;
    check_int_eq(usnic_chunk_first_seq(&p.ch, 300), 65535);
    /* a chunk that names another position of the same fragment disagrees */
    make_chunk(&p, 300, 300);
    p.ch.hdr.pkt_seq = 43;
    check(40 != usnic_chunk_first_seq(&p.ch, 300));
    return 0;
}
