#!/bin/bash
# vm-timeout: 1200
# world: native
# Reliability under packet loss: netem drops RoCE v2 datagrams (UDP port 4791, fault-lib.sh's
# netem_roce; the launcher's TCP and the connectivity checker are not touched) in BOTH
# directions at once, so data, ACKs and retransmissions are all lost:
#   none     no impairment (the netem is in place with no effect): the baseline counters
#   loss1%, loss10%, loss30% (lighter workloads at 30%)
# Workloads, each run once per fault:
#   p2p       1 rank per host, btl usnic,self: progs/p2p.c at the sizes that straddle every
#             protocol boundary (0, 1, 722|723 fast path, 4050|4051 one datagram|chunks,
#             16384, 153544|153545 eager|rendezvous, 1 MiB), ping-pong and streams (-W: at
#             most 256 KiB per stream); at 30% without 1 MiB, 8 KiB per stream (at least one
#             message: 16 of 0 and of 1 B, 11 of 722/723 B, 2 of 4050/4051 B, 1 of the others)
#   faultmix  3 ranks per host, btl usnic,self,vader: progs/faultmix.c, all-to-all among the
#             6 ranks at the same sizes (up to 153545) with MPI_ANY_SOURCE receives and
#             MPI_Alltoall, 2 rounds x 2 messages per pair (1 x 1 at 30%)
# Every run (fault_run, fault-lib.sh): each byte, count, source and per-source order right,
# nothing left over, exit code 0, within the run's bound; per direction the data datagrams
# sent once equal those accepted once (exactly-once delivery by usnic); netem dropped
# datagrams in both directions and usnic retransmitted. A "faults: ..." line per run gives
# the counters (X/Y: hostA/hostB).
# Bounds per run (launch included): 60 s (none, 1%), 120 s (10%), 180 s (30%); measured on a
# 2-core host (two runs): 6-12 s (none, 1%); at 10% 6 s (p2p) and 18-26 s (faultmix); at 30%
# 16-23 s (p2p) and 26-31 s (faultmix). Recovery at 10%: each program's own time (from the end
# of MPI_Init to its verdict, "verified (T s)") at most RATIO = 30 times that of the same
# workload in this run's lossless case (none; at least FAULT_BASE_MIN = 0.5 s, below which a
# lossless time is noise). Natively (2 hosts, shared 2-core host): lossless 0.05 s (p2p) and
# 0.48-1.3 s (faultmix), 10% 1.3-1.4 s and 0.9-10.3 s: faultmix at 10% varies most. Before
# issue 11's recovery fixes (commit 1a19ec3: Karn's rule for RTT samples, ACK requests, hole
# reports) 10% took 104 s and 30% 294 s (p2p, VM): every recovery raised the RTO toward its
# 1 s ceiling. That commit's Karn rule undone (a resend cancels the RTT sample only if it is
# the timed segment itself), natively in two runs: p2p at 10% 49.4 s and 25.6 s against
# limits of 15 s (FAIL), faultmix 26.8 s (FAIL) and 14.7 s (passed its 15 s), p2p at 30% not
# finished within 180 s; this code in the same session: 1.4 s and 3.0 s, 0.9 s and 1.2 s. A timeout resends only
# the oldest segment and partial ACKs the next ones, one round trip each; in a ping-pong
# nothing follows a lost tail to report a hole, and with the ACKs lost too the timer's backoff
# dominates, so the time still varies from run to run. The 30% workloads are lighter than the
# lossless ones: only the absolute bound applies there.
# SPDX-License-Identifier: BSD-3-Clause
set -u
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/dp-lib.sh"
. "$(dirname "$0")/fault-lib.sh"
fault_init
P2P_LIGHT=(-s "0,1,722,723,4050,4051,16384,153544,153545" -W 8192)

fault_case none none 60 delay 0ms
fault_case loss1% loss 60 loss 1%
RATIO=30 fault_case loss10% loss 120 loss 10%
P2P=("${P2P_LIGHT[@]}") MIX=(-r 1 -k 1)
fault_case loss30% loss 180 loss 30%

netem_clear
fault_summary
dp_done
