/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 * $COPYRIGHT$
 * SPDX-License-Identifier: BSD-3-Clause
 *
 * On-the-wire formats.  Plain C, no Open MPI types: the pure protocol code,
 * the unit tests, the fuzzer and the rogue-sender tool all include this.
 * Fields are host byte order (homogeneous x86-64 jobs), IPv4 addresses
 * network order.
 */

#ifndef BTL_USNIC_WIRE_H
#define BTL_USNIC_WIRE_H

#include <stdbool.h>
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
/* ack_flags: ack_seq + 1 .. ack_seq + hole_run are missing, and the last
 * of them is lost, not late: a segment sent after it on the same channel
 * has arrived (chan_prev; each channel is one queue pair, which keeps its
 * order), so those of them sent on that channel are lost too.  Resend
 * them now, even if this ACK also moved the window. */
#define USNIC_ACK_HOLE 0x02
/* The longest hole_run (a longer run of losses waits for the timer). */
#define USNIC_ACK_RUN_MAX 255
/* ack_flags: since its last ACK the receiver got a resend (USNIC_HDR_RESEND):
 * where this ACK stops, it stops after the resend arrived. */
#define USNIC_ACK_RESEND_SEEN 0x04
/* ack_flags, with USNIC_ACK_DUP_SEEN: the duplicate arrived before the
 * receiver had acknowledged the original: it was late (away from progress),
 * no ACK of it was lost. */
#define USNIC_ACK_DUP_LATE 0x08
/* ack_flags: sent after the receiver got a probe (an ACK with
 * USNIC_HDR_ACK_REQ): a segment this ACK does not cover, sent before the
 * probe, has not arrived. */
#define USNIC_ACK_PROBED 0x10
/* ack_flags, with USNIC_ACK_PROBED: the segment the probe named (its
 * pkt_seq) had arrived, but the receiver had not acknowledged it yet: it
 * was late (away from progress), no ACK of it was lost. */
#define USNIC_ACK_PROBE_LATE 0x20
/* flags: the sender cannot send more until this is acknowledged (its
 * window is full, or this is a resend): ACK at once, do not delay.  On an
 * ACK: a probe from a sender whose timer expired (answer at once, with
 * USNIC_ACK_PROBED). */
#define USNIC_HDR_ACK_REQ 0x01
/* flags: a resend (always with USNIC_HDR_ACK_REQ). */
#define USNIC_HDR_RESEND 0x02

typedef struct {
    uint64_t sender;        /* (jobid << 32) | vpid of the sending process */
    uint16_t pkt_seq;       /* sequence number; in a probe, the segment it asks about */
    uint16_t ack_seq;       /* cumulative ACK, valid if ack_present */
    uint16_t payload_len;   /* bytes after this (or the chunk) header */
    uint16_t dup_seq;       /* with USNIC_ACK_DUP_SEEN: a sequence number received again */
    uint64_t put_addr;      /* 0 for a send, else the target address of an emulated PUT
                             * (of the GET's id: usnic_is_get_data) */
    uint8_t payload_type;   /* USNIC_PAYLOAD_TYPE_* */
    uint8_t ack_present;
    uint8_t tag;            /* active-message tag for the PML */
    uint8_t ack_flags;      /* USNIC_ACK_*, valid if ack_present */
    uint8_t flags;          /* USNIC_HDR_* */
    uint8_t hole_run;       /* with USNIC_ACK_HOLE: the run of missing segments (0: 1) */
    uint16_t chan_prev;     /* the sequence number first sent before this one on its
                             * channel (resends: pkt_seq itself, no claim) */
} usnic_btl_header_t;

/* A chunk of a fragment too large for one datagram: 48 bytes. */
typedef struct {
    usnic_btl_header_t hdr;
    uint32_t frag_id;       /* per sending endpoint, never 0 */
    uint32_t frag_size;     /* total bytes of the fragment */
    uint32_t frag_offset;   /* where this chunk's payload goes */
    uint32_t pad;
} usnic_btl_chunk_header_t;

/* Emulated GET and atomics travel as ordinary fragments (FRAG or CHUNK)
 * on the reliable channel with this tag, which no PML message can carry
 * (the PML's tags are below 255): the reliability engine then gives each
 * request and each reply exactly once, and the receive path of other
 * messages does not change.  The payload starts with usnic_rdma_msg_t; a
 * GET reply's data follows it.  A GET too large for one datagram is
 * answered with its data alone instead: a chunked fragment of this tag
 * whose put_addr is the id of the GET (never 0), which the initiator
 * reassembles straight into the GET's local buffer and which completes the
 * GET when whole. */
#define USNIC_TAG_RDMA 255

/* Whether a fragment of tag and put_addr is the data of a GET. */
static inline bool usnic_is_get_data(uint8_t tag, uint64_t put_addr)
{
    return USNIC_TAG_RDMA == tag && 0 != put_addr;
}

/* Whether it is an emulated PUT (written at put_addr). */
static inline bool usnic_is_put(uint8_t tag, uint64_t put_addr)
{
    return USNIC_TAG_RDMA != tag && 0 != put_addr;
}

/* The target's registration a PUT, GET or atomic names: the handle the
 * target's btl_register_mem gave out (a slot of its table and the random
 * key of that registration).  Every PUT datagram carries one: a FRAG's
 * payload starts with it (payload_len counts it), a CHUNK has it between
 * the chunk header and the data (payload_len counts the data only, so
 * that chunk offsets stay in data bytes). */
typedef struct {
    uint64_t key;
    uint32_t index;
    uint32_t pad;
} usnic_reg_ref_t;

/* Bytes between a datagram's (chunk) header and its data. */
static inline uint32_t usnic_put_ref_len(uint8_t tag, uint64_t put_addr)
{
    return usnic_is_put(tag, put_addr) ? (uint32_t) sizeof(usnic_reg_ref_t) : 0;
}

enum {
    USNIC_RDMA_GET = 1,     /* read len bytes at addr */
    USNIC_RDMA_AOP = 2,     /* atomic aop with operand, no result wanted */
    USNIC_RDMA_FOP = 3,     /* the same, returning the old value */
    USNIC_RDMA_CSWAP = 4,   /* if *addr == operand then *addr = operand2; old value back */
    USNIC_RDMA_REPLY = 5,   /* answer to any of them */
};

/* Atomic operations (integers; MIN/MAX and floats are not offered). */
enum {
    USNIC_AOP_ADD = 1,
    USNIC_AOP_AND,
    USNIC_AOP_OR,
    USNIC_AOP_XOR,
    USNIC_AOP_LAND,
    USNIC_AOP_LOR,
    USNIC_AOP_LXOR,
    USNIC_AOP_SWAP,
    USNIC_AOP_LAST
};

/* Reply status. */
enum {
    USNIC_RDMA_OK = 0,
    USNIC_RDMA_REFUSED = 1, /* not inside memory registered for that access */
};

typedef struct {
    uint8_t kind;           /* USNIC_RDMA_* */
    uint8_t aop;            /* USNIC_AOP_*: AOP and FOP */
    uint8_t width;          /* atomics: 4 or 8 bytes */
    uint8_t status;         /* replies */
    uint32_t len;           /* GET: bytes asked for; reply: bytes of data after this */
    uint64_t id;            /* chosen by the initiator, repeated in the reply */
    uint64_t addr;          /* target address (requests) */
    uint64_t operand;       /* atomics; in a reply the old value */
    uint64_t operand2;      /* compare-and-swap: the value written */
    usnic_reg_ref_t reg;    /* requests: the target's registration */
} usnic_rdma_msg_t;

/* One record per usable device, published in the modex. */
#define USNIC_MODEX_VERSION 7

/* What carries a device's datagrams (usnic_modex_addr_t.transport; 0,
 * "auto", is only a value of btl_usnic_transport). */
#define USNIC_TRANSPORT_AUTO 0
#define USNIC_TRANSPORT_VERBS 1     /* UD queue pairs, RoCE v2 */
#define USNIC_TRANSPORT_UDP 2       /* kernel UDP sockets */
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
    uint32_t conn_key[4];       /* SipHash key of this process's connectivity messages
                                 * (getrandom; travels only here, never printed) */
    uint8_t transport;          /* USNIC_TRANSPORT_*: peers must use the same */
    uint8_t pad[3];
} usnic_modex_addr_t;

_Static_assert(sizeof(usnic_btl_header_t) == 32, "BTL header must be 32 bytes");
_Static_assert(sizeof(usnic_btl_chunk_header_t) == 48, "chunk header must be 48 bytes");
_Static_assert(sizeof(usnic_modex_addr_t) == 88, "modex record must be 88 bytes");
_Static_assert(sizeof(usnic_rdma_msg_t) == 56, "GET/atomic message header must be 56 bytes");
_Static_assert(sizeof(usnic_reg_ref_t) == 16, "registration reference must be 16 bytes");

/* Connectivity checker datagram (UDP, from the BTL's own socket): a PING is
 * padded to its size; the ACK repeats that size.  A LIVE_PING asks whether
 * the peer process is alive; its LIVE_ACK (magic ACK) carries in size the
 * milliseconds since the peer last ran progress.  A ping carries a nonce
 * its answer repeats.  Both are authenticated with the key of the process
 * pinged (conn_key of its modex record, so known only to the job): mac is
 * SipHash-2-4 under that key over the other fields and the sender's and
 * receiver's address and port (usnic_conn_mac).  The key itself never
 * travels on the wire. */
#define USNIC_CONN_MAGIC_PING 0x75736e6963504e47ULL
#define USNIC_CONN_MAGIC_ACK 0x75736e69634b4341ULL
enum { USNIC_CONN_PING = 17, USNIC_CONN_ACK = 18, USNIC_CONN_LIVE_PING = 19,
       USNIC_CONN_LIVE_ACK = 20 };
typedef struct {
    uint64_t magic;
    uint8_t type;
    uint8_t pad[3];
    uint32_t size;
    uint64_t nonce;         /* chosen by the pinger, repeated by the answer */
    uint64_t mac;
} usnic_conn_msg_t;
_Static_assert(sizeof(usnic_conn_msg_t) == 32, "connectivity message must be 32 bytes");

#endif /* BTL_USNIC_WIRE_H */
