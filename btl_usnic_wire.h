/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 * $COPYRIGHT$
 *
 * On-the-wire formats.  Plain C, no Open MPI types: the pure protocol code,
 * the unit tests, the fuzzer and the rogue-sender tool all include this.
 * Fields are host byte order (homogeneous x86-64 jobs), IPv4 addresses
 * network order.
 */

#ifndef BTL_USNIC_WIRE_H
#define BTL_USNIC_WIRE_H

#include <stdint.h>

/* Largest fragment sent as chunks (except emulated PUTs), whatever the
 * local limits: receivers check against this, so peers with different
 * eager limits still understand each other. */
#define USNIC_MAX_FRAG_SIZE (1024 * 1024)

/* Bytes the device writes in front of every UD receive (RoCE carries a GRH). */
#define USNIC_GRH_LEN 40
/* Where the sender's address sits in them: an IB/RoCE v1/RoCE v2-over-IPv6
 * GRH has the source GID at byte 8; for RoCE v2 over IPv4 the device writes
 * 20 zero bytes and then the packet's IPv4 header, source address at byte
 * 20 + 12 (Linux rdma_network_hdr, as rxe and RoCE NICs fill it). */
#define USNIC_GRH_SGID_OFF 8
#define USNIC_GRH_IPV4_SRC_OFF 32

enum {
    USNIC_PAYLOAD_TYPE_ACK = 1,
    USNIC_PAYLOAD_TYPE_FRAG = 2,
    USNIC_PAYLOAD_TYPE_CHUNK = 3,
};

/* Every datagram starts with this 32-byte header. */
/* ack_flags: since its last ACK the receiver got a datagram it already had
 * (dup_seq): the sender's resend of it was not needed. */
#define USNIC_ACK_DUP_SEEN 0x01

typedef struct {
    uint64_t sender;        /* (jobid << 32) | vpid of the sending process */
    uint16_t pkt_seq;       /* sequence number; unused in ACKs */
    uint16_t ack_seq;       /* cumulative ACK, valid if ack_present */
    uint16_t payload_len;   /* bytes after this (or the chunk) header */
    uint16_t dup_seq;       /* with USNIC_ACK_DUP_SEEN: a sequence number received again */
    uint64_t put_addr;      /* 0 for a send, else the target address of an emulated PUT */
    uint8_t payload_type;   /* USNIC_PAYLOAD_TYPE_* */
    uint8_t ack_present;
    uint8_t tag;            /* active-message tag for the PML */
    uint8_t ack_flags;      /* USNIC_ACK_*, valid if ack_present */
    uint8_t pad[4];
} usnic_btl_header_t;

/* A chunk of a fragment too large for one datagram: 48 bytes. */
typedef struct {
    usnic_btl_header_t hdr;
    uint32_t frag_id;       /* per sending endpoint, never 0 */
    uint32_t frag_size;     /* total bytes of the fragment */
    uint32_t frag_offset;   /* where this chunk's payload goes */
    uint32_t pad;
} usnic_btl_chunk_header_t;

/* One record per usable device, published in the modex. */
#define USNIC_MODEX_VERSION 2
typedef struct {
    uint8_t gid[16];            /* RoCE v2 (or usNIC) GID the peer addresses us by */
    uint32_t qp_num[2];         /* [0] priority channel, [1] data channel */
    uint32_t qkey;              /* senders must use this Q_Key */
    uint32_t ipv4_addr;         /* network order */
    uint32_t prefix;            /* netmask length */
    uint32_t connectivity_udp_port;
    uint32_t link_speed_mbps;
    uint16_t mtu;               /* largest UD payload this device receives */
    uint16_t isn;               /* first sequence number we send */
    uint16_t version;           /* USNIC_MODEX_VERSION */
    uint8_t mac[6];
    uint32_t if_mtu;            /* MTU of the netdev (connectivity pings) */
    uint32_t rcv_depth;         /* receive buffers a sender may count on, data channel */
    uint32_t prio_rcv_depth;    /* the same for the priority channel */
} usnic_modex_addr_t;

_Static_assert(sizeof(usnic_btl_header_t) == 32, "BTL header must be 32 bytes");
_Static_assert(sizeof(usnic_btl_chunk_header_t) == 48, "chunk header must be 48 bytes");
_Static_assert(sizeof(usnic_modex_addr_t) == 68, "modex record must be 68 bytes");

/* Connectivity checker datagram (UDP, from the BTL's own socket): a PING is
 * padded to its size; the ACK repeats that size.  A LIVE_PING (16 bytes,
 * magic PING) asks whether the peer process is alive; its LIVE_ACK (magic
 * ACK) carries in size the milliseconds since the peer last ran progress. */
#define USNIC_CONN_MAGIC_PING 0x75736e6963504e47ULL
#define USNIC_CONN_MAGIC_ACK 0x75736e69634b4341ULL
enum { USNIC_CONN_PING = 17, USNIC_CONN_ACK = 18, USNIC_CONN_LIVE_PING = 19,
       USNIC_CONN_LIVE_ACK = 20 };
typedef struct {
    uint64_t magic;
    uint8_t type;
    uint8_t pad[3];
    uint32_t size;
} usnic_conn_msg_t;
_Static_assert(sizeof(usnic_conn_msg_t) == 16, "connectivity message must be 16 bytes");

#endif /* BTL_USNIC_WIRE_H */
