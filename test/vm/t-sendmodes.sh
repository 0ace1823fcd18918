#!/bin/bash
# vm-timeout: 300
# world: native
# Every MPI send mode across the hosts (progs/sendmodes.c): MPI_Send, MPI_Bsend, MPI_Ibsend,
# MPI_Rsend, MPI_Irsend, MPI_Ssend, MPI_Issend and persistent MPI_Send_init, MPI_Bsend_init,
# MPI_Ssend_init, MPI_Rsend_init + MPI_Start, both directions, at every protocol boundary +-1:
# 0 and 1 B, the fast-path payload, one datagram's payload, two chunks, btl_usnic_rndv_eager_limit,
# ob1's eager/rendezvous switch, the eager limit, 2x and 4x + 3 the eager limit. The limits
# come from the component's parameters (ompi_info) and the device's active MTU. Buffered and
# ready sends take ob1's copy path (btl_sendi, then the descriptor it hands back, or
# btl_alloc up to the eager limit), the others prepare_src and rendezvous. Every byte, the
# guard after it and the status are checked; a hang is killed after DP_TIMEOUT and fails.
#   1) 1 rank per host, btl usnic,self
#   2) 3 ranks per host, btl usnic,self,vader: 3 cross-host pairs at the same time
# Each run: no wrong byte, exit code 0, and on both hosts the usnic counters (num_frag_recvs +
# num_chunk_recvs) reach the datagrams that traffic needs: usnic carried it.
# SPDX-License-Identifier: BSD-3-Clause
set -u
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/dp-lib.sh"

mtu=$DEV_MTU
[ -n "$mtu" ] || fail "no device MTU in the world's environment (RXEVM_ACTIVE_MTU_A, RXEVM_MTU)"
onhost A ompi_info --param btl usnic --level 9 --parsable > "$WORK/params" 2>&1 ||
    fail "ompi_info --param btl usnic failed"
param() {
    sed -nE "s/^mca:btl:usnic:param:btl_usnic_$1:value:(-?[0-9]+)$/\1/p" "$WORK/params"
}
eager=$(param eager_limit) rndv=$(param rndv_eager_limit) prio=$(param priority_limit)
{ [ -n "$eager" ] && [ -n "$rndv" ] && [ -n "$prio" ]; } ||
    fail "ompi_info shows no btl_usnic_eager_limit, rndv_eager_limit or priority_limit"
# As the component sizes its channels: a datagram carries the MTU minus the 32-byte usnic
# header, a chunk the MTU minus the 48-byte chunk header; the fast path's datagrams are 768
# bytes, or priority_limit + 32 if set, at most the MTU.
prio_mtu=768
[ "$prio" -gt 0 ] && prio_mtu=$((prio + 32))
[ "$prio_mtu" -gt "$mtu" ] && prio_mtu=$mtu
limits=(-T $((prio_mtu - 32)) -D $((mtu - 32)) -C $((mtu - 48)) -E "$eager" -R "$rndv")
echo "active MTU $mtu, eager limit $eager, rndv eager limit $rndv: ${limits[*]}"

mpi_build sendmodes
# ~7 s and ~25 s on an idle 2-core host; a hang fails after DP_TIMEOUT
DP_TIMEOUT=120
dp_run 1 "$WORK/sendmodes-1.out" "$WORK/sendmodes" "${limits[@]}"
dp_check sendmodes 1 "$WORK/sendmodes-1.out"
dp_run 3 "$WORK/sendmodes-3.out" "$WORK/sendmodes" "${limits[@]}"
dp_check sendmodes 3 "$WORK/sendmodes-3.out"
dp_done
