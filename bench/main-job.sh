#!/bin/bash
# bench/main-job.sh [--rounds N]: the project's main job, one command from a fresh Debian 12
# machine (as root, no RDMA hardware):
#   1. packages   tools/deps.sh --main-job: only what this job needs (build, perftest, gnuplot)
#   2. build      make -C standalone, make -C standalone install (into Open MPI)
#   3. VM         bench/run.sh --main: boots the two-host Soft-RoCE VM (tools/rxe-vm/rxe-vm,
#                 which fetches its kernel and builds its image the first time) and runs, N
#                 rounds (default 3) interleaved, MPI latency (8 B to 1 MiB), streaming
#                 bandwidth and the 8 B message rate over usnic and over btl/tcp, and raw verbs
#                 UD (perftest) on the same devices
#   4. reading    bench/main-summary.sh: usnic beside raw UD and tcp with the ratios,
#                 usnic's retransmits from its statistics, a one-line reading, and where the
#                 PNG plots are (latency.png, bandwidth.png)
# It prints each step's expected time first (from this machine's last run,
# ~/.cache/usnic-main-job.times, or defaults) and its progress as it goes; the full outputs
# are in bench/results/main/ (results.md, main-job.log). Other VM users: run it as
# `flock /tmp/usnic-vm.lock bench/main-job.sh`.
# SPDX-License-Identifier: BSD-3-Clause
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=3
while [ $# -gt 0 ]; do
    case $1 in
        --rounds) rounds=${2:?--rounds needs a number}; shift 2 ;;
        -h|--help) sed -n '2,17s/^# \{0,1\}//p' "$0"; exit 0 ;;
        *) echo "usage: bench/main-job.sh [--rounds N]" >&2; exit 2 ;;
    esac
done
case $rounds in ''|*[!0-9]*|0) echo "main-job: --rounds needs a positive number" >&2; exit 2 ;; esac

out=bench/results/main
rm -rf "$out"           # the report reads every round's file it finds there
mkdir -p "$out"
log=$PWD/$out/main-job.log
: > "$log"
TIMES=${XDG_CACHE_HOME:-$HOME/.cache}/usnic-main-job.times
# seconds per step on an idle 2-core machine: packages and the VM's first image are what a
# fresh machine adds (the VM step's default assumes a built image)
declare -A est=([packages]=5 [build]=60 [vm]=$((90 + 60 * rounds)) [reading]=5)
[ -r "$TIMES" ] && while read -r k v; do [[ $v =~ ^[0-9]+$ ]] && est[$k]=$v; done < "$TIMES"
est[vm]=$((est[vm] * rounds / $(sed -n 's/^rounds //p' "$TIMES" 2>/dev/null | grep . || echo "$rounds")))
fresh=()
if ! dpkg-query -W -f='${db:Status-Abbrev}\n' libopenmpi-dev perftest gnuplot-nox 2>/dev/null |
        grep -c '^ii' | grep -qx 3; then
    est[packages]=300; fresh+=("packages to install")
fi
if [ ! -d "${XDG_CACHE_HOME:-$HOME/.cache}/usnic-rxe-vm/vm" ]; then
    est[vm]=$((est[vm] + 240)); fresh+=("the VM image to build")
fi
total=$((est[packages] + est[build] + est[vm] + est[reading]))
mmss() { printf '%dm%02ds' $(($1 / 60)) $(($1 % 60)); }
echo "main-job: 4 steps, about $(mmss "$total"), done near $(date -d "@$(($(date +%s) + total))" +%H:%M)" \
     "${fresh[*]:+(includes ${fresh[*]})}"
for k in packages build vm reading; do printf '  %-9s %s\n' "$k" "$(mmss "${est[$k]}")"; done
echo "  log: $log"

declare -A took=()
n=0
# run_step NAME WHAT CMD...: CMD's output goes to the log; lines that show progress are shown
run_step() {
    local name=$1 what=$2 t0=$SECONDS rc; shift 2
    n=$((n + 1))
    echo "[$n/4] $what (expected $(mmss "${est[$name]}"))"
    echo "=== $name: $*" >> "$log"
    set +e
    "$@" 2>&1 | tee -a "$log" | grep --line-buffered -E \
        '^(deps: installing|bench: \[|rxe-vm: (building|fetching|downloading|ready))' |
        sed -u "s/^/      /"
    rc=${PIPESTATUS[0]}
    set -e
    took[$name]=$((SECONDS - t0))
    if [ "$rc" != 0 ]; then
        tail -n 25 "$log"
        echo "main-job: step $name failed (exit code $rc); full output in $log" >&2
        exit 1
    fi
    echo "      done in $(mmss "${took[$name]}")"
}

run_step packages "packages this job needs" tools/deps.sh --main-job
run_step build "build and install the usnic BTL" \
    bash -c 'make -C standalone && make -C standalone install'
run_step vm "VM: usnic, btl/tcp and raw UD, $rounds rounds" \
    bench/run.sh --main --runs "$rounds" --out "$out"
n=$((n + 1))
echo "[$n/4] reading"
echo
bench/main-summary.sh "$out"
echo
echo "Plots: $out/latency.png, $out/bandwidth.png; all tables: $out/results.md"
mkdir -p "$(dirname "$TIMES")" &&
    { for k in build vm; do echo "$k ${took[$k]}"; done; echo "rounds $rounds"; } > "$TIMES"
