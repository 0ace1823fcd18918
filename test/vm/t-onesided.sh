#!/bin/bash
# vm-timeout: 600
# world: native
# One-sided MPI as the OSU benchmarks do it (progs/onesided.c: put/get latency with lock/flush
# and with fence, put/get bandwidth windows, accumulate, get_accumulate, fetch-and-op and
# compare-and-swap at 64 and 32 bit, all ranks contending on one counter), over
# MPI_Win_allocate and MPI_Win_create, every result checked. No osc component is chosen:
# Open MPI's configured default applies (Debian's openmpi-mca-params.conf turns osc/pt2pt off,
# so on 4.1 the traffic has to go through osc/rdma, which needs usnic's GET and atomics).
#   1) 1 rank per host, btl usnic,self
#   2) 3 ranks per host, btl usnic,self,vader (usnic,self,sm on Open MPI 5)
# Each run: all results right, exit code 0, on both hosts the usnic counters reach the
# datagrams the data crossing the hosts needs, and on Open MPI 4.1 usnic's emulated RDMA
# carried it: on each host num_gets + num_atomics > 0 (operations started there) and
# num_rdma_served > 0 (operations of the other host's ranks carried out there). Open MPI 5.0's
# osc/rdma uses its own active-message RDMA over usnic's sends instead (it takes a BTL's RDMA
# only from one that reaches the process itself too): there the counters are only shown.
# SPDX-License-Identifier: BSD-3-Clause
set -u
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/dp-lib.sh"

# rdma_check N OUT: the emulated GET/atomic counters of the run with N ranks per host
rdma_check() {
    local n=$1 out=$2 x started served
    for x in $(job_hosts); do
        read -r started served <<< "$(grep -E "btl:usnic: stats final host$x " "$out" | awk '
            { for (i = 1; i <= NF; i++) {
                  split($i, kv, "=")
                  if (kv[1] == "num_gets" || kv[1] == "num_atomics") s += kv[2]
                  if (kv[1] == "num_rdma_served") r += kv[2]
              } }
            END { print s + 0, r + 0 }')"
        if [ "${OMPI_MAJOR:-0}" -ge 5 ]; then
            echo "info: onesided ($n per host): host$x: usnic started $started GETs/atomics" \
                "and carried out $served for peers (Open MPI 5: active-message RDMA)"
        elif [ "$started" -gt 0 ] && [ "$served" -gt 0 ]; then
            pass "onesided ($n per host): host$x: usnic started $started GETs/atomics and" \
                "carried out $served for peers"
        else
            dp_fail "onesided ($n per host): host$x: usnic started $started GETs/atomics and" \
                "carried out $served: the one-sided traffic did not use usnic's RDMA"
        fi
    done
}

mpi_build onesided
dp_run 1 "$WORK/onesided-1.out" "$WORK/onesided"
dp_check onesided 1 "$WORK/onesided-1.out"
rdma_check 1 "$WORK/onesided-1.out"
DP_TIMEOUT=300 dp_run 3 "$WORK/onesided-3.out" "$WORK/onesided"
dp_check onesided 3 "$WORK/onesided-3.out"
rdma_check 3 "$WORK/onesided-3.out"
dp_done
