#!/bin/bash
# vm-timeout: 240
# Collectives over both hosts (progs/coll.c), results checked on every rank: MPI_Barrier (a
# late rank each time; nobody may leave before the last one entered), MPI_Bcast (1 B - 1 MiB,
# roots on both hosts), MPI_Reduce and MPI_Allreduce (MPI_SUM of up to 131077 int64, exact;
# MPI_MAX of doubles), MPI_Allgather, MPI_Alltoall (blocks up to 50 KB) and MPI_Alltoallv
# (uneven and empty blocks, gaps that must stay untouched).
#   1) 1 rank per host, btl usnic,self
#   2) 3 ranks per host, btl usnic,self,vader (usnic,self,sm on Open MPI 5), with
#      btl_base_verbose: every process uses usnic for each of the 3 processes on the other
#      host and the shared-memory BTL for the 2 on its own host
# Each run: all results right, and on both hosts the usnic counters reach the datagrams needed
# for the data that had to cross the hosts.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/dp-lib.sh"

mpi_build coll
dp_run 1 "$WORK/coll-1.out" "$WORK/coll"
dp_check coll 1 "$WORK/coll-1.out"
dp_run 3 "$WORK/coll-3.out" --mca btl_base_verbose 100 "$WORK/coll"
dp_check coll 3 "$WORK/coll-3.out"
# "mca: bml: Using BTL btl for send to [[JOB,1],RANK] on node HOST", from each process
P='^(\[[^]]*\] )?mca: bml: Using'
for x in A B; do
    y=$([ $x = A ] && echo B || echo A)
    u=$(grep -Ec "^\[host$x:[0-9]+\] mca: bml: Using usnic btl for send to .* on node host$y$" "$WORK/coll-3.out")
    v=$(grep -Ec "^\[host$x:[0-9]+\] mca: bml: Using $SM_BTL btl for send to .* on node host$x$" "$WORK/coll-3.out")
    w=$(grep -Ec "^\[host$x:[0-9]+\] mca: bml: Using usnic btl for send to .* on node host$x$" "$WORK/coll-3.out")
    if [ "$u" = 9 ] && [ "$v" = 6 ] && [ "$w" = 0 ]; then
        pass "host$x: its 3 processes chose usnic for the 9 peers on host$y, $SM_BTL for the 6 on host$x"
    else
        grep -E "$P" "$WORK/coll-3.out" | head -n 40
        dp_fail "host$x: bml chose usnic $u times for host$y peers (expected 9), $SM_BTL $v times" \
            "for host$x peers (expected 6), usnic $w times for host$x peers (expected 0)"
    fi
done
dp_done
