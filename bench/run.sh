#!/bin/bash
# bench/run.sh [--quick|--main] [--runs N] [--no-callgrind] [--out DIR]: the benchmark suite in ONE boot of the
# rxe-vm VM: MPI micro-benchmarks (bench/mpibench.c: latency, streaming and bidirectional
# bandwidth, multi-pair message rate) over usnic and over btl/tcp, and the raw verbs UD
# baselines (perftest, and bench/rawud.c under mpibench's bw load) on the same Soft-RoCE
# devices, hostA <-> hostB, N runs each (default 7),
# interleaved round by round (usnic, tcp, raw UD, scaling; then the next round), so that the
# per-round ratios usnic / raw UD pair measurements taken under the same conditions.
# Results replace those of the previous run in bench/results/latest/ (older runs are in git
# history; bench/loss.sh's loss/ there is left alone):
#   results.md      tables: medians over the runs and the usnic/raw-UD and usnic/tcp ratios,
#                   usnic's retransmit counters, run times, instructions per message
#   latency.png, bandwidth.png   gnuplot plots
#   raw/*.txt, callgrind/callgrind.out*, plan.txt, status.txt, times.txt, host-load.txt: the
#                   inputs bench/report.sh makes the above from
#   component.txt   the run's UTC time, the git commit and the installed mca_btl_usnic.so
#   vm.log, raw/*.log, callgrind/*.txt, *.dat, *.tsv: logs and derived files (not committed)
# --quick: a smoke run (5 sizes, 1 run, no callgrind) for CI: under a minute of VM time on
# an idle 2-core host. The full suite (7 runs, callgrind) takes about 20 minutes there, several
# times that on a busy host. --no-callgrind skips the instruction counts (valgrind).
# --main: bench/main-job.sh's run: 5 sizes, 3 runs, no message-rate, scaling or callgrind jobs.
# --out DIR: results go to DIR, below the checkout, instead (bench/results/latest is left
# alone); CI's smoke run.
# Exits non-zero if the VM, any benchmark or the report failed, or if any expected number
# is missing.
# Benchmarks the usnic component installed in Open MPI (make -C standalone install).
# Other VM users: run it as `flock /tmp/usnic-vm.lock bench/run.sh` where VM runs must
# not overlap.
# SPDX-License-Identifier: BSD-3-Clause
set -u    # not -e: runs the VM and the report whatever fails, then reports (docs/development.md, Scripts)
cd "$(dirname "$0")/.." || exit 2
mode=full runs=7 callgrind=1 outdir=
while [ $# -gt 0 ]; do
    case $1 in
        --quick) mode=quick runs=1 callgrind=0 ;;
        --main) mode=main runs=3 callgrind=0 ;;
        --runs) runs=${2:?--runs needs a number}; shift ;;
        --no-callgrind) callgrind=0 ;;
        --callgrind) callgrind=1 ;;
        --out) outdir=${2:?--out needs a directory}; shift ;;
        -h|--help) sed -n '2,24s/^# \{0,1\}//p' "$0"; exit 0 ;;
        *) echo "usage: bench/run.sh [--quick|--main] [--runs N] [--no-callgrind|--callgrind] [--out DIR]" >&2; exit 2 ;;
    esac
    shift
done
case $runs in ''|*[!0-9]*|0) echo "run.sh: --runs needs a positive number" >&2; exit 2 ;; esac

ompi_info 2>/dev/null | grep -q "MCA btl: usnic" ||
    { echo "run.sh: the usnic BTL is not installed (make -C standalone install)" >&2; exit 2; }
if [ "$callgrind" = 1 ] && ! command -v valgrind > /dev/null; then
    echo "run.sh: valgrind not installed (tools/deps.sh): skipping instruction counts" >&2
    callgrind=0
fi
command -v gnuplot > /dev/null || echo "run.sh: gnuplot not installed (tools/deps.sh): no plots" >&2

so=$(ompi_info --path pkglibdir | awk '{ print $NF }')/mca_btl_usnic.so
# component SO: which usnic was benchmarked (the VM runs the host's installed files)
component() {
    echo "installed: $1 $(sha256sum < "$1" | cut -c1-16) $(date -u -r "$1" +%Y-%m-%dT%H:%M:%SZ)"
}
ts=$(date -u +%Y%m%dT%H%M%SZ)
out=$PWD/bench/results/latest
if [ -n "$outdir" ]; then
    out=$(realpath -m "$outdir") || exit 2
    case $out/ in    # the guest can write only below the checkout (RXE_VM_RW below)
        "$PWD"/*) ;;
        *) echo "bench/run.sh: --out $outdir is outside $PWD; the VM can write only there" >&2
           exit 2 ;;
    esac
else
    # all but loss/: bench/loss.sh's results are a run of their own
    [ ! -d "$out" ] || find "$out" -mindepth 1 -maxdepth 1 ! -name loss -exec rm -rf {} +
fi
mkdir -p "$out" || exit 2
echo "run.sh: $mode suite, $runs run(s), results in $out"
{
    echo "run: $ts"
    echo "source: $(git log -1 --format='%h %cI' 2>/dev/null)" \
         "$(git status --porcelain -- 'btl_usnic*' 2>/dev/null | grep -q . && echo '(sources modified)')"
    component "$so"
} > "$out/component.txt"
so_before=$(component "$so")
# The results are written from inside the guest: the repository is shared read-write.
case $mode in
    quick) vm_timeout=600 ;;
    main) vm_timeout=$((runs * 300 + 600)) ;;
    *) vm_timeout=$((runs * 900 + 900)) ;;
esac
export RXE_VM_RW=$PWD RXE_VM_TIMEOUT=${RXE_VM_TIMEOUT:-$vm_timeout}
# The host's load while the VM runs: other load slows the emulated guest down.
( while :; do cut -d' ' -f1 /proc/loadavg >> "$out/host-load.txt"; sleep 20; done ) &
sampler=$!
trap 'kill "$sampler" 2>/dev/null' EXIT
trap 'echo "run.sh: interrupted" >&2; exit 130' INT TERM
t0=$(date +%s)
tools/rxe-vm/rxe-vm bench/in-vm-bench.sh "$mode" "$runs" "$callgrind" "$out" 2>&1 |
    tee "$out/vm.log"
vmrc=${PIPESTATUS[0]}
t1=$(date +%s)
kill "$sampler" 2>/dev/null
wait "$sampler" 2>/dev/null
echo "VM run (boot included): $((t1 - t0)) s wall clock, rxe-vm exit code $vmrc" > "$out/times.txt"
if [ "$(component "$so")" != "$so_before" ]; then
    echo "run.sh: WARNING: $so changed during the run" >&2
    echo "changed during the run to: $(component "$so")" >> "$out/component.txt"
fi
cat "$out/times.txt"

bench/report.sh "$out"
reprc=$?
echo "run.sh: $out/results.md"
[ -f "$out/latency.png" ] || { echo "run.sh: no latency.png" >&2; reprc=1; }
[ -f "$out/bandwidth.png" ] || { echo "run.sh: no bandwidth.png" >&2; reprc=1; }
if [ "$vmrc" != 0 ] || [ "$reprc" != 0 ]; then
    echo "run.sh: FAILED (VM exit code $vmrc, report exit code $reprc)" >&2
    exit 1
fi
echo "run.sh: all benchmarks produced numbers"
