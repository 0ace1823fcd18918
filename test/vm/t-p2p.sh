#!/bin/bash
# vm-timeout: 540
# world: native
# Point-to-point data path (progs/p2p.c): ping-pong and streaming between ranks on hostA and
# hostB, every byte checked, at 211 sizes from 0 B to 16 MiB that put every protocol boundary
# between two neighbouring sizes: all of 700-760 B (priority fast path: 736 B incl. the 14-byte
# PML header), all of 4000-4100 B (one datagram: 4064 B incl. header; 4051 is the first chunked
# size), two chunks (8082/8083), 16 KiB +-1, the eager limit 153600 +-1 and ob1's eager/
# rendezvous switch at 153544/153545 (rendezvous sends btl_rndv_eager_limit = 500 B first; also
# 499/500/501 B messages), 2 x max_send_size +-1, 1 MiB +-1, 4 MiB + 3 and 16 MiB.
# Ping-pong: the receiver checks the pattern (size, iteration, pair, position), XORs every byte
# with a second pattern and sends it back from its receive buffer; streaming: up to 16 messages
# in flight, one way, the other way, both ways at once. Receive buffers are poisoned and have a
# guard that must stay untouched; counts, sources and tags are checked.
#   1) 1 rank per host, btl usnic,self (rank 0 also prints the time of every size)
#   2) 3 ranks per host, btl usnic,self,vader: 3 cross-host pairs at the same time
# Each run: no wrong byte, and on both hosts the usnic counters (num_frag_recvs +
# num_chunk_recvs) reach the datagrams that traffic needs: usnic carried it. Messages above
# the eager limit go by ob1's RGET, whose data usnic sends from the sender's registered
# buffer itself (btl_usnic_zero_copy): in run 1 both hosts sent such chunks
# (num_zcopy_chunks), so every byte checked above also checks the zero-copy path (in the
# native world the kernel copies that data from the user's buffer when the datagram is sent).
# In the VM (lossless link), both runs together resend at most P2P_RESENDS_MAX segments per
# 10^4 data datagrams: with 3 ranks per host on 2 vCPUs receivers are kept off their CPU for
# longer than the retransmit timeout, and the timer's probe (btl_usnic_timer_probe) finds them
# late, not lost (bounds and the runs that set them: docs/tests.md).
# SPDX-License-Identifier: BSD-3-Clause
set -u
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/dp-lib.sh"

mpi_build p2p
# ~15 s and ~35 s on an idle 2-core host; room for slower or busy ones
DP_TIMEOUT=240
# resends per 10^4 data datagrams of both runs, at most (VM; docs/tests.md)
P2P_RESENDS_MAX=0.1
dp_run 1 "$WORK/p2p-1.out" "$WORK/p2p" -v 1
dp_check p2p 1 "$WORK/p2p-1.out"
for x in "${HOSTS[@]}"; do
    zc=$(dp_counter "$WORK/p2p-1.out" "$x" num_zcopy_chunks)
    if [ "$zc" -gt 0 ]; then
        pass "p2p (1 per host): host$x sent $zc GET data chunks from the user's buffer (zero copy)"
    else
        dp_fail "p2p (1 per host): host$x sent no GET data chunk without a copy (num_zcopy_chunks 0)"
    fi
done
dp_run 3 "$WORK/p2p-3.out" "$WORK/p2p"
dp_check p2p 3 "$WORK/p2p-3.out"
# On the VM's lossless link every resend was the timer's, for a receiver kept off its vCPU;
# the timer now probes such a peer instead (btl_usnic_timer_probe)
if [ "$WORLD" = vm ]; then
    data=0 resends=0
    for x in "${HOSTS[@]}"; do
        for f in "$WORK/p2p-1.out" "$WORK/p2p-3.out"; do
            data=$((data + $(dp_counter "$f" "$x" num_frag_sends) + $(dp_counter "$f" "$x" num_chunk_sends)))
            resends=$((resends + $(dp_counter "$f" "$x" num_resends)))
        done
    done
    if awk -v r="$resends" -v d="$data" -v m="$P2P_RESENDS_MAX" 'BEGIN { exit !(d > 0 && 1e4 * r / d <= m) }'; then
        pass "p2p: $resends resends for $data data datagrams on a lossless link (at most $P2P_RESENDS_MAX per 10^4)"
    else
        dp_fail "p2p: $resends resends for $data data datagrams on a lossless link: more than $P2P_RESENDS_MAX per 10^4"
    fi
fi
dp_done
