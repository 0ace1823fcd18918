#!/bin/bash
# bench/loss.sh [--rounds N] [--loss PCT] [--out DIR]: streaming bandwidth over usnic with
# the congestion window on and off (btl_usnic_congestion_control 1 / 0), on a lossless link
# and with PCT% (default 1) of the RoCE datagrams each host sends dropped by netem, in ONE
# boot of the rxe-vm VM, hostA -> hostB, one rank per host (bench/mpibench.c -t bw at 64 KiB,
# 1 MiB and 4 MiB). Each round runs both settings back to back, in alternating order, so
# that the VM's drift hits both alike; the report gives per size and link the median MB/s of
# each setting, the median of the per-round ratios on/off, and the median retransmissions and
# congestion-window cuts per run (from usnic's "stats final" counters).
# Results: DIR/loss.md and DIR/raw/ (default bench/results/latest/loss).
# Benchmarks the usnic component installed in Open MPI (make -C standalone install); run it
# as `flock /tmp/usnic-vm.lock bench/loss.sh` where VM runs must not overlap.
# SPDX-License-Identifier: BSD-3-Clause
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=5 loss=1 out=bench/results/latest/loss mode=host
while [ $# -gt 0 ]; do
    case $1 in
        --rounds) rounds=${2:?--rounds needs a number}; shift ;;
        --loss) loss=${2:?--loss needs a percentage}; shift ;;
        --out) out=${2:?--out needs a directory}; shift ;;
        --in-vm|--report) mode=${1#--}; rounds=$2 loss=$3 out=$4; break ;;
        -h|--help) sed -n '2,12s/^# \{0,1\}//p' "$0"; exit 0 ;;
        *) echo "usage: bench/loss.sh [--rounds N] [--loss PCT] [--out DIR]" >&2; exit 2 ;;
    esac
    shift
done

if [ "$mode" = host ]; then
    case $rounds in ''|*[!0-9]*|0) echo "loss.sh: --rounds needs a positive number" >&2; exit 2 ;; esac
    mkdir -p "$out/raw"
    rm -f "$out"/raw/*
    tools/rxe-vm/rxe-vm bench/loss.sh --in-vm "$rounds" "$loss" "$out"
    exec bench/loss.sh --report "$rounds" "$loss" "$out"
fi
SIZES=65536,1048576,4194304

if [ "$mode" = in-vm ]; then
    # shellcheck source=SCRIPTDIR/../test/vm/lib.sh
    . test/vm/lib.sh
    # shellcheck source=SCRIPTDIR/../test/vm/fault-lib.sh
    . test/vm/fault-lib.sh
    mpicc -O2 -Wall -o "$WORK/mpibench" bench/mpibench.c
    for ((r = 1; r <= rounds; r++)); do
        for link in 0 "$loss"; do
            # (in a || list: the helpers' tc calls that find no qdisc to delete do not end the
            # script under set -e; their own checks still fail it)
            if [ "$link" = 0 ]; then
                netem_clear || true
            else
                netem_roce A loss "$link%" || exit 1
                netem_roce B loss "$link%" || exit 1
            fi
            order="1 0"
            [ $((r % 2)) = 0 ] && order="0 1"
            for cc in $order; do
                f=$out/raw/loss$link-cc$cc-r$r.txt
                MPI_TIMEOUT=600 mpirun_usnic --mca btl_usnic_congestion_control "$cc" \
                    --mca btl_usnic_stats 100000 "$WORK/mpibench" -t bw -S "$SIZES" \
                    -T 1000 -W 200 -n 2 -N 200 > "$f" 2>&1 || echo "loss.sh: $f: exit code $?"
                fault_sums "$f" > "${f%.txt}.sums" || true
                echo "loss.sh: round $r loss $link% congestion_control $cc: $(awk '$1 == "bw" { printf "%s=%s MB/s ", $2, $8 }' "$f")"
            done
        done
    done
    netem_clear || true
    exit 0
fi

# report: medians over the rounds; a missing number fails the report
median() { sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) exit 1
    print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2) }'; }
bw() { awk -v s="$1" '$1 == "bw" && $2 == s { print $8; f = 1 } END { exit !f }' "$2"; }
sum() { awk -F= -v k="$1" '$1 == "A_" k || $1 == "B_" k { n += $2 } END { print n + 0 }' "$2"; }
{
    echo "# Bandwidth with the congestion window on and off"
    echo
    echo "$rounds paired rounds, hostA -> hostB, one rank per host, bench/mpibench.c -t bw;" \
         "lossy link: netem drops $loss% of the RoCE datagrams each host sends."
    echo "Ratio: median over the rounds of (MB/s on) / (MB/s off) of the same round."
    echo
    echo "| link | size | on MB/s | off MB/s | ratio on/off | resends on | resends off | cwnd cuts on |"
    echo "|---|---|---|---|---|---|---|---|"
    for link in 0 "$loss"; do
        for s in ${SIZES//,/ }; do
            on=() off=() ratios=() ron=() roff=() cuts=()
            for ((r = 1; r <= rounds; r++)); do
                a=$out/raw/loss$link-cc1-r$r.txt b=$out/raw/loss$link-cc0-r$r.txt
                x=$(bw "$s" "$a") y=$(bw "$s" "$b")
                on+=("$x") off+=("$y")
                ratios+=("$(awk -v x="$x" -v y="$y" 'BEGIN { printf "%.3f", x / y }')")
                ron+=("$(sum num_resends "${a%.txt}.sums")")
                roff+=("$(sum num_resends "${b%.txt}.sums")")
                cuts+=("$(sum num_cwnd_cuts "${a%.txt}.sums")")
            done
            printf '| %s%% | %s | %s | %s | %s | %s | %s | %s |\n' "$link" "$s" \
                "$(printf '%s\n' "${on[@]}" | median)" "$(printf '%s\n' "${off[@]}" | median)" \
                "$(printf '%s\n' "${ratios[@]}" | median)" "$(printf '%s\n' "${ron[@]}" | median)" \
                "$(printf '%s\n' "${roff[@]}" | median)" "$(printf '%s\n' "${cuts[@]}" | median)"
        done
    done
    echo
    echo "(resends and cuts: per run, both hosts, all three sizes)"
    echo
    echo "Under loss vs lossless, same round and setting (median of the per-round ratios):"
    echo
    echo "| size | $loss% / 0%, on | $loss% / 0%, off |"
    echo "|---|---|---|"
    for s in ${SIZES//,/ }; do
        row=()
        for cc in 1 0; do
            ratios=()
            for ((r = 1; r <= rounds; r++)); do
                x=$(bw "$s" "$out/raw/loss$loss-cc$cc-r$r.txt") y=$(bw "$s" "$out/raw/loss0-cc$cc-r$r.txt")
                ratios+=("$(awk -v x="$x" -v y="$y" 'BEGIN { printf "%.3f", x / y }')")
            done
            row+=("$(printf '%s\n' "${ratios[@]}" | median)")
        done
        printf '| %s | %s | %s |\n' "$s" "${row[0]}" "${row[1]}"
    done
} > "$out/loss.md"
cat "$out/loss.md"
