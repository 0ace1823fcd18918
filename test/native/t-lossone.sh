#!/bin/bash
# vm-timeout: 600
# world: native
# Loss on one host's link only: netem drops 5% of the data-path datagrams that the LAST host
# of the world sends (hostB with 2 hosts, hostD with 4: its link's egress; ACKs, data and
# resends alike), while every other host's link is clean (a netem without impairment counts
# its traffic). Workloads:
#   p2p       1 rank per host (pairs across the hosts: the lossy host's partner is the host
#             half the world away), sizes at every protocol boundary up to 1 MiB, ping-pong
#             and streams of up to 256 KiB
#   faultmix  2 ranks per host, all-to-all among all ranks, the same sizes up to 153545
# Each run (fault_run, fault-lib.sh): every byte, count, source and order right, exit code 0
# within its bound, usnic carried the traffic into every host, exactly-once delivery; and
# the loss acted where it was put: the lossy host's netem dropped datagrams, no other
# host's netem dropped any, and the lossy host's usnic retransmitted (num_resends > 0: what
# its link lost was recovered by the reliability engine).
# SPDX-License-Identifier: BSD-3-Clause
set -u
. "$(dirname "$0")/../vm/lib.sh"
. "$(dirname "$0")/../vm/dp-lib.sh"
. "$(dirname "$0")/../vm/fault-lib.sh"
fault_init
L=${HOSTS[NHOSTS - 1]}

# lossy_check OUT LABEL: drops only on host L's link, and host L's usnic resent
lossy_check() {
    local x p d r
    for x in "${HOSTS[@]}"; do
        read -r p d <<< "$(netem_stats "$x")"
        if [ "$x" = "$L" ]; then
            if [ "$d" -gt 0 ]; then pass "$2: host$x's link dropped $d of $p datagrams"
            else dp_fail "$2: host$x's lossy netem dropped nothing ($p datagrams)"; fi
        elif [ "$d" = 0 ]; then
            pass "$2: host$x's link dropped nothing ($p datagrams)"
        else
            dp_fail "$2: host$x's clean link dropped $d datagrams"
        fi
    done
    r=$(dp_counter "$1" "$L" num_resends)
    if [ "$r" -gt 0 ]; then pass "$2: host$L's usnic retransmitted $r segments"
    else dp_fail "$2: host$L lost datagrams, but its usnic retransmitted nothing"; fi
    echo "info: $2: usnic resends per host: $(for x in "${HOSTS[@]}"; do
        printf 'host%s=%s ' "$x" "$(dp_counter "$1" "$x" num_resends)"; done)"
}

for x in "${HOSTS[@]}"; do
    if [ "$x" = "$L" ]; then netem_roce "$x" loss 5%; else netem_roce "$x" delay 0ms; fi
done
fault_run "loss5%@host$L" none 180 1 "$WORK/p2p.out" p2p "${P2P[@]}"
lossy_check "$WORK/p2p.out" "p2p (1 per host)"
# fresh counters for the second run
for x in "${HOSTS[@]}"; do
    if [ "$x" = "$L" ]; then netem_roce "$x" loss 5%; else netem_roce "$x" delay 0ms; fi
done
fault_run "loss5%@host$L" none 240 2 "$WORK/mix.out" faultmix "${MIX[@]}"
lossy_check "$WORK/mix.out" "faultmix (2 per host)"
netem_clear
fault_summary
dp_done
