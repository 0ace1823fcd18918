#!/bin/bash
# vm-timeout: 600
# vm-pairs: 2
# Messages striped over two devices per host (rxeX on the first veth pair, rxeX2 on the
# second): ob1 splits every rendezvous message between the two usnic modules in pieces whose
# lengths are not multiples of an element, so elements of a derived datatype straddle
# fragments. progs/stripe.c exchanges one MPI_Type_vector(count, 3, 7, MPI_INT) element per
# count (packed 12 B to 1.9 MB; every protocol size: fast path, one datagram, chunked,
# chunked and packed lazily, rendezvous) and contiguous messages of every protocol size ±1,
# both ways at once, every byte checked (blocks, the gaps between them and a guard after
# the buffer); progs/dtypes.c adds vector/indexed/struct types.
#   1) default eager limit (25 KiB with two devices), 1 rank per host, btl usnic,self
#   2) btl_usnic_eager_limit 153600 (the vector of 8000 is eager, 20000 and up rendezvous)
#   3) 3 ranks per host, btl usnic,self,vader
#   4) progs/dtypes.c, 1 rank per host
# Each run: no wrong byte, usnic carried the traffic (data datagrams counted over both
# devices reach what the traffic needs) and both devices of both hosts received chunks.
# SPDX-License-Identifier: BSD-3-Clause
set -u
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/dp-lib.sh"
need_pairs 2
export DP_DEVS=2 DP_TIMEOUT=300

# both_devices OUT WHAT: every device of both hosts received data chunks in run OUT
both_devices() {
    local x d got
    for x in A B; do
        for d in "rxe$x" "rxe${x}2"; do
            got=$(grep -E "btl:usnic: stats final host$x $d: " "$1" | tr ' ' '\n' |
                  sed -n 's/^num_chunk_recvs=//p' | awk '{ s += $1 } END { print s + 0 }')
            if [ "$got" -gt 0 ]; then pass "$2: $d on host$x received $got chunks"
            else dp_fail "$2: $d on host$x received no chunks: the messages were not striped"; fi
        done
    done
}

mpi_build stripe
mpi_build dtypes
dp_run 1 "$WORK/stripe-1.out" "$WORK/stripe"
dp_check stripe 1 "$WORK/stripe-1.out"
both_devices "$WORK/stripe-1.out" "stripe (1 per host)"

dp_run 1 "$WORK/stripe-e.out" --mca btl_usnic_eager_limit 153600 "$WORK/stripe" \
    -c 8000,20000,160000 -s 153599,153600,153601,1048576
dp_check stripe 1 "$WORK/stripe-e.out"
both_devices "$WORK/stripe-e.out" "stripe (eager limit 153600)"

dp_run 3 "$WORK/stripe-3.out" "$WORK/stripe" -c 1,2134,8000,20000 -s 1,4065,25601,1048576 -r 1
dp_check stripe 3 "$WORK/stripe-3.out"

dp_run 1 "$WORK/dtypes-1.out" "$WORK/dtypes"
dp_check dtypes 1 "$WORK/dtypes-1.out"
dp_done
