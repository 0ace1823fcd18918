#!/bin/bash
# bench/overlap.sh [--pairs N]: what usnic's progress thread (btl_usnic_progress_thread)
# costs and buys, in one boot of the rxe-vm VM, hostA <-> hostB, btl usnic,self, 1 rank per
# host: bench/overlap.c (8 B ping-pong latency; a 1 MiB MPI_Isend, 200 ms of computation
# without MPI, MPI_Wait; CPU used while the processes sleep outside MPI) run N times
# (default 3) with the thread off and on, as pairs (the order alternates from pair to pair,
# so a drifting machine affects both alike). Results: bench/results/overlap/results.md
# (per pair and median: latency and its on/off ratio, the sender's MPI_Wait after computing,
# how many transfers completed during the computation, idle CPU) and raw/.
# Benchmarks the usnic component installed in Open MPI (make -C standalone install); run it
# as `flock /tmp/usnic-vm.lock bench/overlap.sh` where VM runs must not overlap.
# SPDX-License-Identifier: BSD-3-Clause
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
OUT=$PWD/bench/results/overlap
ARGS=(-s 1048576 -c 200 -n 5 -l 1000 -b 5 -d 2000)

if [ "${1:-}" = --in-guest ]; then          # inside the VM: --in-guest PAIRS
    pairs=$2
    . test/vm/lib.sh
    mpicc -O2 -Wall -o "$WORK/overlap" bench/overlap.c || exit 2
    for ((p = 1; p <= pairs; p++)); do
        order="0 1"
        [ $((p % 2)) = 0 ] && order="1 0"
        for on in $order; do
            echo "== pair $p, progress thread $on"
            mpirun_usnic -t 300 --mca btl_usnic_progress_thread "$on" \
                "$WORK/overlap" "${ARGS[@]}" > "$OUT/raw/pair$p-thread$on.txt" 2>&1 ||
                { echo "overlap run failed (pair $p, thread $on)"; exit 1; }
        done
    done
    exit 0
fi

pairs=3
[ "${1:-}" = --pairs ] && pairs=${2:?--pairs needs a number}
rm -rf "$OUT/raw" && mkdir -p "$OUT/raw" || exit 2
export RXE_VM_RW=$PWD
tools/rxe-vm/rxe-vm bench/overlap.sh --in-guest "$pairs" || { echo "overlap.sh: the VM run failed" >&2; exit 1; }

# field FILE REGEX: the first capture group of REGEX in FILE's "overlap:" lines
field() { sed -nE "s/^overlap: $2.*/\1/p" "$1" | head -n 1; }
{
    echo "# Progress thread: cost and benefit"
    echo
    echo "bench/overlap.sh, $(git log -1 --format='commit %h' 2>/dev/null), $(date -u +%Y-%m-%d)," \
         "rxe-vm (TCG, Soft-RoCE), hostA <-> hostB, btl usnic,self, 1 rank per host," \
         "\`overlap ${ARGS[*]}\`: 1 MiB Isend, 200 ms computation, 5 trials; latency: 5 batches of" \
         "1000 round trips; idle: 2 s asleep outside MPI."
    echo
    echo "| pair | latency off (us) | latency on (us) | on/off | wait off (ms) | wait on (ms) | done during compute off | on | idle CPU off (%) | on (%) |"
    echo "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    for ((p = 1; p <= pairs; p++)); do
        f0=$OUT/raw/pair$p-thread0.txt f1=$OUT/raw/pair$p-thread1.txt
        l0=$(field "$f0" 'latency_8B_us ([0-9.]+)') l1=$(field "$f1" 'latency_8B_us ([0-9.]+)')
        w0=$(field "$f0" 'summary .* median_wait_ms ([0-9.]+)') w1=$(field "$f1" 'summary .* median_wait_ms ([0-9.]+)')
        d0=$(field "$f0" 'summary .* during ([0-9/]+)') d1=$(field "$f1" 'summary .* during ([0-9/]+)')
        c0=$(field "$f0" 'idle_cpu_pct ([0-9.]+ [0-9.]+)') c1=$(field "$f1" 'idle_cpu_pct ([0-9.]+ [0-9.]+)')
        r=$(awk -v a="$l1" -v b="$l0" 'BEGIN { printf "%.2f", a / b }')
        echo "| $p | $l0 | $l1 | $r | $w0 | $w1 | $d0 | $d1 | ${c0/ /, } | ${c1/ /, } |"
    done
} > "$OUT/results.md"
median=$(awk -F'|' 'NR > 6 && $5 != "" { print $5 }' "$OUT/results.md" | sort -n |
    awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }')
printf '\nMedian latency ratio on/off: %s\n' "$median" >> "$OUT/results.md"
cat "$OUT/results.md"
