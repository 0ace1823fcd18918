#!/bin/bash
# vm-timeout: 660
# Reliability under reordering, duplication, corruption and a mix of them, on RoCE v2
# datagrams only (fault-lib.sh's netem_roce) and in BOTH directions at once:
#   none        no impairment (the netem in place with no effect): the lossless base
#   reorder     delay 1ms reorder 25% 50%: a quarter of the datagrams (correlated) overtake
#               the others, which wait 1 ms
#   dup20%      duplicate 20%
#   corrupt10%  corrupt 10%: one bit flipped; rxe drops the datagram (its ICRC is wrong), so
#               this is loss that netem does not count
#   mix         loss 5% duplicate 5% delay 1ms reorder 25% 50%
# Workloads as in t-faults.sh: p2p (1 rank per host, sizes across every protocol boundary up
# to 1 MiB) and faultmix (3 ranks per host, all-to-all among 6 ranks with MPI_ANY_SOURCE and
# MPI_Alltoall). Every run (fault_run, fault-lib.sh): data, counts, order right, nothing left
# over, exit 0 within the bound, exactly-once delivery by usnic (data datagrams sent once =
# accepted once, per direction), and evidence that the fault acted:
#   reorder  every datagram usnic sent went through the delaying netem, nothing dropped; p2p
#            resent at most 120 segments (both hosts): a late segment waits out the reordering
#            window once the path has proven that it reorders.  Measured (12 VM runs each,
#            bench/results/vm-ab-reorder): 12-83 with the window (51a43e8, 167054e), 167-401
#            without it (cc572e1, which resent every late run at once)
#   dup20%   duplicates dropped on both hosts (num_dup_recvs + num_oow_low_recvs: a duplicate
#            of an in-order datagram is below the window) and more datagrams arrived than sent
#   corrupt  fewer datagrams arrived than were sent, in both directions, and usnic resent
#   mix      netem dropped in both directions, usnic resent, duplicates dropped on both hosts
# Bounds per run (launch included): 60 s (none, reorder, dup), 90 s (corrupt, mix); measured
# on a 2-core host (two runs): 5-15 s (reorder, dup), 7-15 s (corrupt, mix). Recovery
# (corrupt, mix): each program's own time (from the end of MPI_Init to its verdict) at most
# RATIO = 12 times that of the same workload in this run's lossless case (at least 0.5 s).
# Measured on the shared host under load (1272 vCPU stalls over 10 ms in t-lossless's
# bandwidth job of the same boot): lossless 2.4 s (p2p) and 5.9 s (faultmix); corrupt 7.1 x
# and 5.1 x, mix 5.2 x and 3.8 x. Before issue 11's recovery fixes (commit 1a19ec3: Karn's
# rule for RTT samples, ACK requests, hole reports) corrupt p2p took 45-91 s with launch
# (about 35-80 s of program time, 15-33 x): every recovery raised the RTO toward its 1 s
# ceiling. That commit's Karn rule undone alone (a resend cancels the RTT sample only if it is
# the timed segment; not committed), one VM run: corrupt10% p2p 69.7 s = 38.7 x and faultmix
# 42.7 s = 21.6 x: FAIL (both within the 90 s bound); mix 1.6 x and 2.0 x: passed, as this
# code's mix does (1.8-5.2 x): at 5% loss the rule makes no difference the ratio can see, so
# the corrupt case is the one that guards it. This code in the same session: corrupt 6.2 x
# and 7.9 x (lossless 0.58 s and 1.42 s), mix 5.0 x and 1.8 x.
# SPDX-License-Identifier: BSD-3-Clause
set -u
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/dp-lib.sh"
. "$(dirname "$0")/fault-lib.sh"
fault_init

fault_case none none 60 delay 0ms
REORDER_P2P_RESENDS_MAX=120 fault_case reorder reorder 60 delay 1ms reorder 25% 50%
fault_case dup20% dup 60 duplicate 20%
RATIO=12 fault_case corrupt10% corrupt 90 corrupt 10%
RATIO=12 fault_case mix mix 90 loss 5% duplicate 5% delay 1ms reorder 25% 50%

netem_clear
fault_summary
dp_done
