#!/bin/bash
# vm-timeout: 7200
# world: native
# The world half of bench/probe-loss.sh (not a test: test/native/run.sh runs it only when
# named). PROBELOSS_ROUNDS rounds (default 24) of t-faults' 30% loss case (fault_case of
# fault-lib.sh: PROBELOSS_LOSS, default 30%, of the data-path datagrams dropped in both
# directions; p2p with 1 rank per host and faultmix with 3, at t-faults' lighter 30% workloads),
# each workload once with btl_usnic_timer_probe 0 and once with 1, the order alternating from
# round to round. After each job one line:
#   probeloss: ROUND PROBE WORKLOAD SECONDS COUNTER=A/B ...
# SECONDS the program's own time (from the end of MPI_Init to its verdict), the counters
# summed over each host's processes (max_rto_us: their largest). Every job is checked as in
# t-faults (every byte, exactly-once delivery, the bound of 180 s).
# SPDX-License-Identifier: BSD-3-Clause
set -u
. "$(dirname "$0")/../vm/lib.sh"
. "$(dirname "$0")/../vm/dp-lib.sh"
. "$(dirname "$0")/../vm/fault-lib.sh"
fault_init
# (t-faults.sh's workloads at 30%)
P2P=(-s "0,1,722,723,4050,4051,16384,153544,153545" -W 8192) MIX=(-r 1 -k 1)
loss=${PROBELOSS_LOSS:-30%}
counters="num_timer_probes num_probe_unanswered num_probe_spurious num_timeout_retrans"
counters+=" num_fast_retrans num_spurious_timeouts max_rto_us"

for r in $(seq 1 "${PROBELOSS_ROUNDS:-24}"); do
    order="0 1"
    [ $((r % 2)) = 0 ] && order="1 0"
    for p in $order; do
        export OMPI_MCA_btl_usnic_timer_probe=$p
        fault_case "r$r-p$p" loss 180 loss "$loss"
        for w in p2p:p2p faultmix:mix; do
            out=$WORK/r$r-p$p-${w#*:}.out
            t=$(sed -nE "s/^${w%:*}: OK .* verified \(([0-9.]+) s\)$/\1/p" "$out")
            sums=$(fault_sums "$out")
            line="probeloss: $r $p ${w%:*} ${t:-none}"
            for k in $counters; do
                a=$(sed -n "s/^A_$k=//p" <<< "$sums") b=$(sed -n "s/^B_$k=//p" <<< "$sums")
                line+=" $k=${a:-0}/${b:-0}"
            done
            echo "$line"
        done
    done
done
unset OMPI_MCA_btl_usnic_timer_probe
netem_clear
dp_done
