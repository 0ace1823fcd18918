#!/bin/bash
# Runs inside the rxe-vm guest (see bench/run.sh): the benchmark suite over usnic, btl/tcp
# and raw verbs UD (perftest, and bench/rawud.c: mpibench's windows of the bw test over raw UD),
# hostA <-> hostB, RUNS times each, interleaved.
#   bench/in-vm-bench.sh full|quick|main RUNS CALLGRIND(0|1) OUTDIR
# (main: the main job's few sizes, bench/main-job.sh; no message-rate or scaling jobs)
# Writes into OUTDIR: plan.txt (what was run), raw/ (every benchmark's output; rawud-*.txt
# are perftest's results in mpibench's line format, rawudw-*.txt bench/rawud.c's), status.txt (one line per benchmark:
# name, exit code, seconds), callgrind/ (optional). Exits non-zero if a benchmark failed.
# SPDX-License-Identifier: BSD-3-Clause
set -u    # not -e: runs every benchmark whatever fails, records each exit code (docs/development.md, Scripts)
# shellcheck source=/dev/null
. /run/rxevm/env || exit 2
mode=$1 runs=$2 callgrind=$3 out=$4
BENCH=$(cd "$(dirname "$0")" && pwd)
W=$(mktemp -d /tmp/usnic-bench.XXXXXX) || exit 2
mkdir -p "$out/raw" || exit 2

pow2() { local s=$1; while [ "$s" -le "$2" ]; do printf '%s ' "$s"; s=$((s * 2)); done; }
if [ "$mode" = main ]; then
    SIZES="8 1024 4096 65536 1048576" MR_SIZES="" RAW_SIZES="8 1024 4096" SCALE_PER_HOST=""
    MB_ARGS=(-T 300 -W 60 -n 20 -N 10000) RAW_LAT_ITERS=1000 RAW_BW_ITERS=2000
elif [ "$mode" = quick ]; then
    SIZES="1 64 4096 65536 1048576" MR_SIZES="1 4096" RAW_SIZES="1 64 4096" SCALE_PER_HOST="1 2"
    # per size: measurement and warm-up budgets (ms), iteration bounds
    MB_ARGS=(-T 100 -W 30 -n 2 -N 2000) RAW_LAT_ITERS=200 RAW_BW_ITERS=1000
else
    SIZES=$(pow2 1 4194304) MR_SIZES=$(pow2 1 4194304) RAW_SIZES=$(pow2 1 4096)
    SCALE_PER_HOST="1 2 4 8"
    # at least 20 measured iterations of every size, however slow the large ones are
    MB_ARGS=(-T 300 -W 60 -n 20 -N 10000) RAW_LAT_ITERS=1000 RAW_BW_ITERS=2000
fi
MR_PAIRS=2
# Every benchmark runs under SCHED_IDLE (inherited by mpirun's daemons and ranks, and by
# perftest): Soft-RoCE does the NIC's work in kernel threads (kworkers), which then preempt a
# polling process at once. Under the default policy a kworker could wait for a polling
# process's time slice to end, which put whole 0.3 s measurements of usnic's 8 B ping-pong
# at 500-740 µs instead of 60-145 (docs/benchmarks.md); a hardware NIC waits for no CPU.
IDLE=(chrt --idle 0)
{
    echo "mode $mode"
    echo "runs $runs"
    echo "sizes $SIZES"
    echo "mr_sizes $MR_SIZES"
    echo "mr_pairs $MR_PAIRS"
    echo "raw_sizes $RAW_SIZES"
    echo "mpibench_args ${MB_ARGS[*]}"
    echo "raw_iters lat $RAW_LAT_ITERS bw $RAW_BW_ITERS"
    echo "scaling_ranks_per_host $SCALE_PER_HOST"
    echo "kernel $(uname -r)"
    echo "cpus $(nproc)"
    echo "policy ${IDLE[*]}"
} > "$out/plan.txt"

csv() { echo "$*" | tr -s ' ' ','; }
failures=0 done_n=0
# benchmarks per run: usnic and tcp (each with its message-rate job if any), raw UD (perftest
# and rawud), scaling
# shellcheck disable=SC2086
total=$((runs * (4 + (${#MR_SIZES} > 0 ? 2 : 0) + $(echo $SCALE_PER_HOST | wc -w)) + callgrind))
# record NAME RC SECONDS: a benchmark's result. Then the hosts are cleaned up for the next
# one: nothing but the benchmarks runs in nsA/nsB, so whatever is left there (an orted or a
# rank that did not exit, a perftest server) would steal the two vCPUs; it is killed and
# named in status.txt.
record() {
    local left
    left=$(ip netns pids "$RXEVM_NS_A"; ip netns pids "$RXEVM_NS_B")
    if [ -n "$left" ]; then         # give exiting daemons a moment
        sleep 2
        left=$(ip netns pids "$RXEVM_NS_A"; ip netns pids "$RXEVM_NS_B")
    fi
    if [ -n "$left" ]; then
        echo "$1: killed leftover processes: $(ps -o args= -p "${left//$'\n'/,}" | tr '\n' ';')" \
            >> "$out/status.txt"
        # shellcheck disable=SC2086
        kill -KILL $left 2>/dev/null
    fi
    echo "$1 rc=$2 ${3}s" >> "$out/status.txt"
    done_n=$((done_n + 1))
    echo "bench: [$done_n/$total] $1 rc=$2 (${3}s)"
    [ "$2" = 0 ] || failures=$((failures + 1))
}

mpicc -O2 -Wall -o "$W/mpibench" "$BENCH/mpibench.c" || { record build 1 0; exit 1; }
mpicc -O2 -Wall -o "$W/scaling" "$BENCH/scaling.c" || { record build 1 0; exit 1; }
cc -O2 -Wall -o "$W/rawud" "$BENCH/rawud.c" -libverbs || { record build 1 0; exit 1; }

# One rank per host: ranks are not bound, so that the two hosts' ranks do not share one vCPU
# (both namespaces see the same two vCPUs, and binding would put both ranks on core 0).
mpirun_ab() {
    local per_host=$1; shift
    onhost A "${IDLE[@]}" timeout -k 10 900 mpirun --allow-run-as-root --bind-to none \
        -np $((2 * per_host)) --host "hostA:$per_host,hostB:$per_host" \
        --mca plm_rsh_agent rxevm-rsh --mca oob_tcp_if_include "$RXEVM_NET.0/24" \
        --mca pml ob1 "$@"
}
btl_args() {
    case $1 in
        usnic) echo "--mca btl usnic,self$2 --mca btl_usnic_stats 100000" ;;
        tcp) echo "--mca btl tcp,self$2 --mca btl_tcp_if_include $RXEVM_NET.0/24" ;;
    esac
}

# run_mpi TRANSPORT RUN: lat, bw, bibw with one rank per host; mr with MR_PAIRS per host
# (same-host peers over vader; the pairs talk across the hosts)
run_mpi() {
    local tr=$1 r=$2 t0 rc f
    f=$out/raw/$tr-r$r.txt
    t0=$SECONDS
    # shellcheck disable=SC2046
    mpirun_ab 1 $(btl_args "$tr" "") "$W/mpibench" -t lat,bw,bibw -S "$(csv "$SIZES")" \
        "${MB_ARGS[@]}" > "$f" 2>&1
    rc=$?
    record "$tr-r$r" "$rc" $((SECONDS - t0))
    [ -n "$MR_SIZES" ] || return 0
    f=$out/raw/$tr-mr-r$r.txt
    t0=$SECONDS
    # shellcheck disable=SC2046
    mpirun_ab "$MR_PAIRS" $(btl_args "$tr" ",vader") "$W/mpibench" -t mr -S "$(csv "$MR_SIZES")" \
        "${MB_ARGS[@]}" > "$f" 2>&1
    rc=$?
    record "$tr-mr-r$r" "$rc" $((SECONDS - t0))
}

# perftest KIND SIZES ITERS PREFIX: ib_send_KIND over UD between rxeA and rxeB (GID index 1,
# QP numbers exchanged over TCP), server on hostB; SIZES is "-a" (2 B to the MTU) or one
# size. PREFIX.client/.server get the outputs, which are appended to $log.
port=18515
perftest() {
    local kind=$1 sizes=$2 iters=$3 pre=$4 spid i t0=$SECONDS
    local args=(-c UD -x "$RXEVM_GID_INDEX" -n "$iters" -F)
    if [ "$sizes" = -a ]; then args+=(-a); else args+=(-s "$sizes"); fi
    port=$((port + 1))
    onhost B "${IDLE[@]}" timeout -k 5 300 "ib_send_$kind" -d "$RXEVM_DEV_B" -p "$port" "${args[@]}" \
        > "$pre.server" 2>&1 &
    spid=$!
    for ((i = 0; i < 100; i++)); do
        ip netns exec "$RXEVM_NS_B" ss -ltn "sport = :$port" | grep -q LISTEN && break
        sleep 0.1
    done
    onhost A "${IDLE[@]}" timeout -k 5 300 "ib_send_$kind" -d "$RXEVM_DEV_A" -p "$port" "${args[@]}" \
        "$RXEVM_IP_B" > "$pre.client" 2>&1
    wait "$spid"
    { echo "=== ib_send_$kind ${args[*]} ($((SECONDS - t0)) s): client (hostA)"; cat "$pre.client"
      echo "=== server (hostB)"; cat "$pre.server"; } >> "$log"
}
# lat_line SIZE PREFIX: ib_send_lat's result for SIZE (PREFIX.client) as an mpibench line
#   (#bytes #iterations t_min t_max t_typical t_avg ...: typical is the median)
lat_line() {
    awk -v s="$1" '$1 == s && NF >= 6 && $2 ~ /^[0-9]+$/ && $6 + 0 > 0 {
        printf "lat   %8d %7d %5d %12.2f %12.2f %12.2f %12.3f %12.1f\n", s, $2, 1, $6, $5, $3,
               s / $6, 1e6 / $6; exit }' "$2.client"
}
# bw_line SIZE PREFIX: ib_send_bw's result for SIZE as an mpibench line
#   (#bytes #iterations BW-peak BW-average[MB/s] MsgRate[Mpps]; window: TX depth 128).
#   The sender's rate (PREFIX.client), and only when the receiver (PREFIX.server) reports
#   the size: it reports once every message has arrived, and it posts a receive buffer for
#   each before the first is sent (RX depth = iterations), so none can be dropped for want
#   of one, and the sender's rate is the delivered rate. The receiver's own rate is not
#   used: it is timed from the first completion it polls, and under SCHED_IDLE rxe's
#   receive work can fill its CQ before it polls at all (reported: 52,037-70,069 MB/s).
bw_line() {
    awk -v s="$1" '/RX depth/ { d = $4 } $1 == s && NF >= 5 && $2 ~ /^[0-9]+$/ && d >= $2 {
        ok = 1 } END { exit !ok }' "$2.server" || return 0
    awk -v s="$1" '$1 == s && NF >= 5 && $2 ~ /^[0-9]+$/ && $5 + 0 > 0 {
        printf "bw    %8d %7d %5d %12.2f %12.2f %12.2f %12.3f %12.1f\n", s, $2, 128,
               1 / $5, 1 / $5, 1 / $5, s * $5, $5 * 1e6; exit }' "$2.client"
}

# run_raw RUN: latency and bandwidth at every RAW size; rawud-rN.txt gets them as mpibench
# lines, rawud-rN.log perftest's outputs. One -a run per test covers 2 B .. MTU; perftest
# measures the CPU clock before each report and gives up (ending the -a run) when the
# measurement is too noisy, as happens under TCG: sizes still missing then get a run of
# their own, tried up to 3 times.
run_raw() {
    local r=$1 t0 rc=0 s kind line try f=$out/raw/rawud-r$1.txt
    log=$out/raw/rawud-r$1.log
    t0=$SECONDS
    echo "# raw verbs UD (perftest ib_send_lat/ib_send_bw -c UD), rxeA <-> rxeB" > "$f"
    : > "$log"
    for kind in lat bw; do
        local iters=$RAW_LAT_ITERS
        [ "$kind" = bw ] && iters=$RAW_BW_ITERS
        # shellcheck disable=SC2086
        [ "$(echo $RAW_SIZES | wc -w)" -gt 4 ] && perftest "$kind" -a "$iters" "$W/a"
        for s in $RAW_SIZES; do
            line=$("${kind}_line" "$s" "$W/a" 2>/dev/null)
            try=1
            while [ -z "$line" ] && [ "$try" -le 3 ]; do
                perftest "$kind" "$s" "$iters" "$W/p"
                line=$("${kind}_line" "$s" "$W/p")
                [ -n "$line" ] || echo "bench: ib_send_$kind -s $s: no result (try $try)"
                try=$((try + 1))
            done
            if [ -n "$line" ]; then echo "$line" >> "$f"; else rc=1; fi
        done
        rm -f "$W"/a.*
    done
    record "rawud-r$r" "$rc" $((SECONDS - t0))
}

# run_rawud RUN: raw UD under mpibench's bw load (bench/rawud.c: windows of 64 messages, each
# answered by 4 bytes) at every RAW size, with mpibench's budgets; rawudw-rN.txt
run_rawud() {
    local t0=$SECONDS rc spid
    port=$((port + 1))
    onhost B "${IDLE[@]}" timeout -k 5 300 "$W/rawud" -r -d "$RXEVM_DEV_B" -x "$RXEVM_GID_INDEX" \
        -p "$port" > "$W/rawud-server.txt" 2>&1 &
    spid=$!
    onhost A "${IDLE[@]}" timeout -k 5 300 "$W/rawud" -c "$RXEVM_IP_B" -d "$RXEVM_DEV_A" \
        -x "$RXEVM_GID_INDEX" -p "$port" -S "$(csv "$RAW_SIZES")" "${MB_ARGS[@]}" \
        > "$out/raw/rawudw-r$1.txt" 2>&1
    rc=$?
    wait "$spid" || rc=1
    cat "$W/rawud-server.txt" >> "$out/raw/rawudw-r$1.txt"
    record "rawudw-r$1" "$rc" $((SECONDS - t0))
}

# Instructions per message in the usnic BTL: rank 0 (hostA) runs an 8-byte ping-pong under
# callgrind, which counts only mpibench's measured iterations (dumped to callgrind.out.1
# when idle_progress starts) and then IDLE progress passes with nothing to receive
# (callgrind.out); rank 1 (hostB) runs natively. bench/callgrind-report.sh reads them.
run_callgrind() {
    local d=$out/callgrind t0 rc iters=${CALLGRIND_ITERS:-300}
    local args=(-t lat -S 8 -n "$iters" -N "$iters" -w 1 -P 2000)
    mkdir -p "$d"
    t0=$SECONDS
    onhost A timeout -k 10 900 mpirun --allow-run-as-root --bind-to none \
        --mca plm_rsh_agent rxevm-rsh --mca oob_tcp_if_include "$RXEVM_NET.0/24" \
        --mca pml ob1 --mca btl usnic,self --mca btl_usnic_stats 100000 \
        -np 1 --host hostA valgrind --tool=callgrind --collect-atstart=no \
        --toggle-collect=measured_iteration --toggle-collect=idle_progress \
        --dump-before=idle_progress --callgrind-out-file="$d/callgrind.out" \
        "$W/mpibench" "${args[@]}" : -np 1 --host hostB "$W/mpibench" "${args[@]}" \
        > "$d/run.txt" 2>&1
    rc=$?
    if [ "$rc" = 0 ] && [ ! -s "$d/callgrind.out.1" ]; then rc=1; fi
    record callgrind "$rc" $((SECONDS - t0))
}

# Start-up cost and per-peer memory (bench/scaling.c) at 2 x N ranks, usnic between the hosts
# and vader within; each job is oversubscribed beyond 2 ranks (2 vCPUs).
run_scaling() {
    local n t0 rc f
    for n in $SCALE_PER_HOST; do
        f=$out/raw/scaling-n$((2 * n))-r$1.txt
        t0=$SECONDS
        # shellcheck disable=SC2046
        mpirun_ab "$n" $(btl_args usnic ",vader") --oversubscribe "$W/scaling" > "$f" 2>&1
        rc=$?
        grep -q '^scaling ranks' "$f" || rc=1
        record "scaling-n$((2 * n))-r$1" "$rc" $((SECONDS - t0))
    done
}

for ((r = 1; r <= runs; r++)); do
    run_mpi usnic "$r"
    run_mpi tcp "$r"
    run_raw "$r"
    run_rawud "$r"
    run_scaling "$r"
done
[ "$callgrind" = 1 ] && run_callgrind
rm -rf "$W"
echo "bench: $failures failed"
[ "$failures" = 0 ]
