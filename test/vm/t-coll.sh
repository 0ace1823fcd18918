#!/bin/bash
# vm-timeout: 240
# world: native
# Collectives over both hosts (progs/coll.c), results checked on every rank: MPI_Barrier (a
# late rank each time; nobody may leave before the last one entered), MPI_Bcast (1 B - 1 MiB,
# roots on both hosts), MPI_Reduce and MPI_Allreduce (MPI_SUM of up to 131077 int64, exact;
# MPI_MAX of doubles), MPI_Allgather, MPI_Alltoall (blocks up to 50 KB) and MPI_Alltoallv
# (uneven and empty blocks, gaps that must stay untouched).
#   1) 1 rank per host, btl usnic,self
#   2) 3 ranks per host, btl usnic,self,vader (usnic,self,sm on Open MPI 5): every process has a usnic endpoint to each of
#      the 3 processes on the other host and to the 2 on its own host (osc/rdma needs one BTL
#      that reaches every peer; their sends still go through the more exclusive vader), as the
#      connectivity maps show
# Each run: all results right, and on both hosts the usnic counters reach the datagrams needed
# for the data that had to cross the hosts.
# SPDX-License-Identifier: BSD-3-Clause
set -u
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/dp-lib.sh"

mpi_build coll
dp_run 1 "$WORK/coll-1.out" "$WORK/coll"
dp_check coll 1 "$WORK/coll-1.out"
dp_run 3 "$WORK/coll-3.out" --mca btl_usnic_connectivity_map "$WORK/map" "$WORK/coll"
dp_check coll 3 "$WORK/coll-3.out"
# each map has a line "peer=VPID,hostname=HOST,device=DEV@peer_ip=..." per peer usnic reaches:
# each of the n processes of a host reaches the n processes of every other host and the n - 1
# others on its own host
n=$(dp_per_host 3)
for x in "${HOSTS[@]}"; do
    d=$(dev_of "$x")
    maps=("$WORK/map-host$x".pid*.job*.mcwrank*.txt)
    u=$(cat "${maps[@]}" 2>/dev/null | grep -E "^peer=[0-9]+,hostname=host[A-H],device=$d@" |
        grep -vc "hostname=host$x,")
    w=$(cat "${maps[@]}" 2>/dev/null | grep -Ec "^peer=[0-9]+,hostname=host$x,device=$d@")
    eu=$((n * n * (NHOSTS - 1))) ew=$((n * (n - 1)))
    if [ "${#maps[@]}" = "$n" ] && [ -e "${maps[0]}" ] && [ "$u" = "$eu" ] && [ "$w" = "$ew" ]; then
        pass "host$x: its $n processes have usnic endpoints to the $eu peers on other hosts and the $ew on host$x"
    else
        cat "${maps[@]}" 2>/dev/null
        dp_fail "host$x: ${#maps[@]} maps with $u usnic endpoints to other hosts' peers (expected $eu)" \
            "and $w to host$x peers (expected $ew)"
    fi
done
dp_done
