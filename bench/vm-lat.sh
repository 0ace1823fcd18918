#!/bin/bash
# bench/vm-lat.sh [--rounds N] [--trace] [--out DIR]: an 8 B round trip in the VM, usnic's against
# raw UD's alone and with ob1's path on it, busy-polling and yielding, in one boot of tools/rxe-vm
# (2 vCPUs, Soft-RoCE).
# Each round runs, in an order that rotates by round, under SCHED_IDLE as bench/run.sh does:
#   raw       bench/rawud.c with a window of 1 (8 B out, a 4 B answer back), busy-polling;
#   raw-y     the same, each side yielding after every poll that found nothing (-y);
#   raw-m     raw, each side under mpirun -np 1 --mca btl self passing every datagram it receives
#             through an 8 B MPI message to itself before it answers (-m): ob1's path on raw UD's
#             trip, what an MPI ping-pong would take over a BTL that cost nothing;
#   usnic     bench/mpibench.c -t lat -S 8 over --mca btl usnic,self (yields: the default);
#   usnic-n   the same with --mca btl_usnic_yield_when_idle 0 (busy-polling).
# The figure of each is the median iteration's time per message one way (rawud's round trip
# halved). Writes DIR/results.md (default bench/results/vm-lat): per round and in medians,
# and the ratios paired round by round; DIR/raw/ the outputs. Exits non-zero if a run failed.
# --trace: after the rounds, raw and usnic-n run once more, and 2 s of their steady ping-pong
# are traced (ftrace, kprobes on Soft-RoCE's functions, set up while the guest is idle): each
# one-way trip is split into its steps, from the send's post (rxe_post_send) through the
# packet out (rxe_xmit_packet) and in (rxe_rcv), the receive task (rxe_receiver) and its
# completion (rxe_cq_post), to the answer's post, the receiving process's reaction
# (DIR/raw/trace-NAME.txt: a line per trip, µs per step; results.md: their medians).
# SPDX-License-Identifier: BSD-3-Clause
set -u
cd "$(dirname "$0")/.." || exit 2
REPO=$PWD
NAMES=(raw raw-y raw-m usnic usnic-n)
# shellcheck source=bench/vm-lib.sh
. bench/vm-lib.sh

if [ "${1:-}" = --in-vm ]; then
    rounds=$2 out=$3 trace=$4
    # shellcheck source=/dev/null
    . /run/rxevm/env || exit 2
    W=$(mktemp -d /tmp/usnic-lat.XXXXXX) || exit 2
    mpicc -O2 -Wall -o "$W/mpibench" bench/mpibench.c || exit 1
    cc -O2 -Wall -o "$W/rawud" bench/rawud.c -libverbs || exit 1
    mpicc -O2 -Wall -DRAWUD_MPI -o "$W/rawud-m" bench/rawud.c -libverbs || exit 1
    IDLE=(chrt --idle 0)
    BUDGET=(-T 1000 -W 100 -n 200 -N 20000)
    port=18700 fails=0
    # raw [-y | -m]
    raw() {
        local ud=("$W/rawud")
        [ "${1:-}" = -m ] &&
            ud=(mpirun --allow-run-as-root --bind-to none -np 1 --mca pml ob1 --mca btl self "$W/rawud-m")
        port=$((port + 1))
        onhost B "${IDLE[@]}" timeout -k 5 120 "${ud[@]}" -r -d "$RXEVM_DEV_B" \
            -x "$RXEVM_GID_INDEX" -p "$port" "$@" > "$W/server.txt" 2>&1 &
        onhost A "${IDLE[@]}" timeout -k 5 120 "${ud[@]}" -c "$RXEVM_IP_B" -d "$RXEVM_DEV_A" \
            -x "$RXEVM_GID_INDEX" -p "$port" "$@" -w 1 -S 8 "${BUDGET[@]}"
        local rc=$?
        wait
        cat "$W/server.txt"
        return $rc
    }
    usnic() {
        onhost A "${IDLE[@]}" timeout -k 10 300 mpirun --allow-run-as-root --bind-to none \
            -np 2 --host hostA:1,hostB:1 --mca plm_rsh_agent rxevm-rsh \
            --mca oob_tcp_if_include "$RXEVM_NET.0/24" --mca pml ob1 --mca btl usnic,self \
            --mca btl_usnic_stats 100000 "$@" "$W/mpibench" -t lat -S 8 "${BUDGET[@]}"
    }
    run() {
        case $1 in
            raw) raw ;;
            raw-y) raw -y ;;
            raw-m) raw -m ;;
            usnic) usnic ;;
            usnic-n) usnic --mca btl_usnic_yield_when_idle 0 ;;
        esac > "$out/raw/$1-r$2.txt" 2>&1 || { echo "vm-lat: $1 round $2 failed"; fails=$((fails + 1)); }
    }
    for r in $(seq 1 "$rounds"); do
        for k in "${!NAMES[@]}"; do
            run "${NAMES[$(((k + r) % ${#NAMES[@]}))]}" "$r"
        done
        echo "vm-lat: round $r done"
    done
    [ "$trace" = 1 ] || exit $((fails > 0))
    T=$VM_TRACE
    vm_rxe_probes rxe_post_send rxe_xmit_packet rxe_rcv rxe_receiver rxe_cq_post || exit 2
    echo 0 > "$T/tracing_on"
    echo 40000 > "$T/buffer_size_kb"
    echo 1 > "$T/events/usnicrxe/enable"
    sleep 2
    BUDGET=(-T 100000 -W 1 -n 1000000 -N 1000000)
    for n in raw usnic-n; do
        case $n in
            raw) raw > /dev/null 2>&1 & ;;
            usnic-n) usnic --mca btl_usnic_yield_when_idle 0 > /dev/null 2>&1 & ;;
        esac
        sleep 15
        echo > "$T/trace"
        echo 1 > "$T/tracing_on"
        sleep 2
        echo 0 > "$T/tracing_on"
        # one line per one-way trip: the 5 steps' µs, the trip, the CPUs of the post and of
        # the packet's send
        awk '$5 ~ /^rxe_/ { split($1, a, "-"); ++n; ev[n] = $5; t[n] = $4 * 1e6; cpu[n] = $2 }
            END {
                split("rxe_xmit_packet: rxe_rcv: rxe_receiver: rxe_cq_post: rxe_post_send:", chain, " ")
                for (i = 1; i <= n; ++i) {
                    if (ev[i] != "rxe_post_send:") continue
                    j = i; last = t[i]; line = ""
                    for (c = 1; c <= 5; ++c) {
                        for (++j; j <= n && ev[j] != chain[c]; ++j) ;
                        if (j > n) exit
                        if (c == 1) kcpu = cpu[j]
                        line = line sprintf("%.1f ", t[j] - last); last = t[j]
                    }
                    print line sprintf("%.1f", t[j] - t[i]), cpu[i], kcpu
                }
            }' "$T/trace" > "$out/raw/trace-$n.txt"
        pkill -x rawud
        pkill -x mpibench
        wait
    done
    exit $((fails > 0))
fi

rounds=7 out=$REPO/bench/results/vm-lat trace=0
while [ $# -gt 0 ]; do
    case $1 in
        --rounds) rounds=$2; shift 2 ;;
        --out) out=$2; shift 2 ;;
        --trace) trace=1; shift ;;
        *) echo "usage: bench/vm-lat.sh [--rounds N] [--trace] [--out DIR]" >&2; exit 2 ;;
    esac
done
out=$(vm_bench_out vm-lat.sh "$out") || exit 2
RXE_VM_RW=$REPO RXE_VM_TIMEOUT=$((rounds * 150 + 600)) tools/rxe-vm/rxe-vm "$0" --in-vm "$rounds" "$out" "$trace"
rc=$?

# one way, µs: the median column (rawud's round trip halved)
oneway() {
    case $1 in
        raw*) awk '$1 == "bw" && $2 == 8 { print $6 / 2; exit }' "$out/raw/$1-r$2.txt" ;;
        *) awk '$1 == "lat" && $2 == 8 { print $6; exit }' "$out/raw/$1-r$2.txt" ;;
    esac 2> /dev/null
}
table=$(for r in $(seq 1 "$rounds"); do
    line="$r"
    for n in "${NAMES[@]}"; do
        v=$(oneway "$n" "$r")
        [ -n "$v" ] || v=NA
        line+=" $v"
    done
    echo "$line"
done)
grep -qw NA <<< "$table" && rc=1
# median and range of column expression over the rounds
stat() {
    awk -v e="$1" '{ split("", c); for (i = 1; i <= NF; ++i) c[i] = $i
        if (e ~ /\//) { split(e, p, "/"); if (c[p[1]] == "NA" || c[p[2]] == "NA") next; v[++n] = c[p[1]] / c[p[2]] }
        else { if (c[e] == "NA") next; v[++n] = c[e] } }
        END { if (!n) { print "NA"; exit }
              for (i = 1; i <= n; ++i) for (j = i + 1; j <= n; ++j) if (v[j] < v[i]) { x = v[i]; v[i] = v[j]; v[j] = x }
              m = n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2
              printf "%.2f (%.2f-%.2f)", m, v[1], v[n] }' <<< "$table"
}
{
    echo "# 8 B round trips in the VM: usnic and raw UD, busy-polling and yielding"
    echo
    echo "bench/vm-lat.sh, $(date -u +%Y-%m-%dT%H:%MZ), source $(git log -1 --format='%h %cI'), $rounds rounds,"
    echo "one boot of tools/rxe-vm (2 vCPUs, TCG), kernel $(uname -r) on the host; installed component"
    echo "$(sha256sum "$(ompi_info --path pkglibdir --parsable | cut -d: -f3)/mca_btl_usnic.so" | cut -c1-16)."
    echo "raw: bench/rawud.c, a window of one 8 B datagram answered by 4 B, busy-polling; raw-y: the same"
    echo "yielding after each empty poll; raw-m: raw with each received datagram passed through an 8 B"
    echo "MPI message to itself (ob1, btl/self) on both sides; usnic: mpibench -t lat -S 8 over usnic,self (yields, the"
    echo "default on Soft-RoCE); usnic-n: with btl_usnic_yield_when_idle 0. All under SCHED_IDLE."
    echo "µs one way at the median iteration (rawud: its round trip halved)."
    echo
    echo "| round | raw | raw-y | raw-m | usnic | usnic-n |"
    echo "|---:|---:|---:|---:|---:|---:|"
    awk '{ printf "| %s | %s | %s | %s | %s | %s |\n", $1, $2, $3, $4, $5, $6 }' <<< "$table"
    echo
    echo "Medians over the rounds (range), and ratios paired round by round:"
    echo
    echo "| figure | median (range) |"
    echo "|---|---|"
    echo "| raw, µs | $(stat 2) |"
    echo "| raw-y, µs | $(stat 3) |"
    echo "| raw-m, µs | $(stat 4) |"
    echo "| usnic, µs | $(stat 5) |"
    echo "| usnic-n, µs | $(stat 6) |"
    echo "| raw-y / raw: what yielding costs raw UD | $(stat 3/2) |"
    echo "| raw-m / raw: ob1's path on raw UD's trip, both busy-polling | $(stat 4/2) |"
    echo "| usnic / usnic-n: what yielding costs usnic | $(stat 5/6) |"
    echo "| usnic / raw | $(stat 5/2) |"
    echo "| usnic / raw-y: both yielding | $(stat 5/3) |"
    echo "| usnic-n / raw: both busy-polling | $(stat 6/2) |"
    echo "| usnic-n / raw-m: usnic's own share, ob1 on both, busy-polling | $(stat 6/4) |"
    if [ "$trace" = 1 ]; then
        echo
        echo "One-way trips of 2 s of each steady ping-pong, traced (\`--trace\`; the probes slow both):"
        echo "median µs of each step; the last column the share of trips whose packet Soft-RoCE's"
        echo "worker sent on the CPU of the process that posted it."
        echo
        echo "| transport | trips | post > packet out | out > in | in > receive task | task > completion | completion > answer posted | one way | same CPU |"
        echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|"
        for n in raw usnic-n; do
            f=$out/raw/trace-$n.txt
            [ -s "$f" ] || { echo "| $n | missing |"; continue; }
            line="| $n | $(wc -l < "$f")"
            for c in 1 2 3 4 5 6; do
                line+=" | $(cut -d' ' -f$c "$f" | sort -g | awk '{ v[++n] = $1 } END { print v[int((n + 1) / 2)] }')"
            done
            echo "$line | $(awk '{ s += $7 == $8 } END { printf "%.2f", s / NR }' "$f") |"
        done
    fi
} > "$out/results.md"
cat "$out/results.md"
exit "$rc"
