#!/bin/bash
# vm-timeout: 600
# world: native
# native-hosts: 4
# Many hosts at once: 2 ranks on each of the world's hosts (4 hosts: 8 ranks; btl
# usnic,self,vader, usnic between the hosts):
#   all-to-all  progs/faultmix.c: every rank sends to every other rank with MPI_ANY_SOURCE
#               receives, then MPI_Alltoall, at every protocol boundary up to 1 MiB (0, 1,
#               722|723 fast path, 4050|4051 one datagram|chunks, 16384, 153544|153545
#               eager|rendezvous, 1048576), then the leftover probe (nothing may arrive twice)
#   incast      progs/incast.c: all other ranks (7 with 4 hosts) send to one receiver at
#               once, 4 messages each at the same sizes, to the first rank of each host in
#               turn; receives posted before the senders start, then after
# Each run (fault_run, fault-lib.sh, no fault): every byte, size, tag, source and per-source
# order checked, exit code 0 within its bound, on every host usnic's counters reach the
# datagrams the traffic into that host needs (dp_check), and over all hosts the data
# datagrams sent for the first time equal those accepted (exactly once; the counters are per
# process, not per peer, so with more than two hosts only their sums compare).
# Bounds per run (launch included): 60 s, a hang guard; measured on the shared 2-core host
# (two runs, 4 hosts): all-to-all 4 s, incast 8-9 s.
# SPDX-License-Identifier: BSD-3-Clause
set -u
. "$(dirname "$0")/../vm/lib.sh"
. "$(dirname "$0")/../vm/dp-lib.sh"
. "$(dirname "$0")/../vm/fault-lib.sh"
[ "$NHOSTS" -ge 4 ] || fail "needs a world of at least 4 hosts (test/native/run.sh -n 4), not $NHOSTS"
SIZES=0,1,722,723,4050,4051,16384,153544,153545,1048576

mpi_build faultmix
mpi_build incast
# a netem without impairment on every host: its counters show the traffic of each
netem_roce_both delay 0ms
fault_run all-to-all none 60 2 "$WORK/a2a.out" faultmix -s "$SIZES"
fault_run incast none 60 2 "$WORK/incast.out" incast -s "$SIZES" -k 4
assert_grep "^incast: $((NHOSTS * 2 - 1)) senders to one receiver" "$WORK/incast.out" \
    "incast: $((NHOSTS * 2 - 1)) senders to one receiver"
netem_clear
fault_summary
dp_done
