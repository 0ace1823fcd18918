#!/bin/bash
# bench/native.sh [--quick] [--rounds N] [--loss PCT] [--mtu M] [--no-usnic] [--no-lock] [--out DIR]:
# the benchmark suite in the native world (tools/netns-world/netns-world: 4 hosts as network
# namespaces on one bridge of this machine, no VM, no RDMA): MPI over usnic's UDP transport
# (--mca btl_usnic_transport udp), MPI over btl/tcp, and raw UDP sockets (bench/rawudp.c,
# the limit of usnic's path), in paired interleaved rounds (default 7; the order of the three
# rotates from round to round), so that each round's ratios pair measurements taken under the
# same conditions. Per round and transport:
#   p2p   latency and streaming bandwidth by size, hostA <-> hostB, one rank per host
#         (bench/mpibench.c -t lat,bw; rawudp -t lat,bw; and raw UDP's stream again with -g,
#         runs of equal datagrams as UDP_SEGMENT messages, as usnic's UDP device sends them:
#         job rawseg-bw)
#   mr1, mr4   8 B message rate, 1 pair and 4 pairs (4 ranks per host, usnic/tcp with vader
#         within a host; rawudp -P 4): rank i of hostA streams to rank i of hostB
#   a2a   MPI_Alltoall of 64 KiB at 8 ranks on 4 hosts (2 per host; usnic/tcp with vader)
#   bwref, bwloss   (usnic, with --loss PCT > 0, default 1; not in --quick) streaming at
#         64 KiB, 1 MiB and 4 MiB on a lossless link, then with PCT% of what hostA sends
#         dropped (netem on vethA, or an nftables egress rule where the kernel has no netem)
# Results replace the previous run's in DIR (default bench/results/native):
#   results.md      targets (issue 28) against the medians and the per-round paired ratios
#                   usnic / raw UDP and usnic / tcp, tables, usnic's retransmit counters
#   latency.png, bandwidth.png   gnuplot plots
#   raw/*.txt, plan.txt, status.txt, component.txt, times.txt, host-load.txt: the inputs
#                   bench/native-report.sh makes the above from
#   raw/*.log, *.dat, *.tsv: logs and derived files (not committed)
# --quick: a smoke run for CI (4 sizes, 1 round, short budgets, no loss runs): a minute or so.
# --no-usnic: raw UDP and tcp only (also chosen, with a note, when the installed usnic has no
# UDP transport). --mtu M: the world's MTU (default: netns-world's, 9000). --no-lock: do not
# wait for /tmp/usnic-vm.lock (taken by default in full runs: a VM on the same 2 CPUs
# would be measured too).
# Exits non-zero if the world, a benchmark or the report failed, or a number is missing.
# Benchmarks the usnic component installed in Open MPI, or with USNIC_SO=FILE that build of
# mca_btl_usnic.so (a private component directory, as test/native/run.sh does, so that a
# branch is measured without installing it). NETNS_WORLD overrides the path of the world
# script.
# SPDX-License-Identifier: BSD-3-Clause
set -u    # not -e: runs every benchmark whatever fails, records each exit code (README, Scripts)
cd "$(dirname "$0")/.." || exit 2

# ---------------------------------------------------------------- inside the world
if [ "${1:-}" = --in-world ]; then
    shift
    mode=$1 rounds=$2 loss=$3 usnic=$4 out=$5
    # shellcheck source=/dev/null
    . "$NETNS_WORLD_ENV" || exit 2
    W=$(mktemp -d /tmp/usnic-native.XXXXXX) || exit 2
    trap 'rm -rf "$W"' EXIT
    mkdir -p "$out/raw" || exit 2
    if [ "$mode" = quick ]; then
        SIZES="8 4096 65536 1048576 4194304"
        MB_ARGS=(-T 60 -W 20 -n 2 -N 2000)
    else
        SIZES="8 64 256 1024 4096 8192 16384 65536 262144 1048576 4194304"
        MB_ARGS=(-T 300 -W 60 -n 20 -N 10000)
    fi
    LOSS_SIZES="65536 1048576 4194304"
    csv() { echo "$*" | tr -s ' ' ','; }
    failures=0
    # record NAME RC SECONDS: a job's result; whatever it left running in the hosts would
    # steal the CPUs from the next one: killed and named in status.txt
    record() {
        local left x
        for x in $RXEVM_HOST_LETTERS; do left+=" $(ip netns pids "ns$x" | tr '\n' ' ')"; done
        left=$(echo "$left" | xargs)
        if [ -n "$left" ]; then
            sleep 2
            left=""
            for x in $RXEVM_HOST_LETTERS; do left+=" $(ip netns pids "ns$x" | tr '\n' ' ')"; done
            left=$(echo "$left" | xargs)
        fi
        if [ -n "$left" ]; then
            echo "$1: killed leftover processes: $(ps -o args= -p "${left// /,}" | tr '\n' ';')" \
                >> "$out/status.txt"
            # shellcheck disable=SC2086
            kill -KILL $left 2>/dev/null
        fi
        echo "$1 rc=$2 ${3}s" >> "$out/status.txt"
        echo "native: $1 rc=$2 (${3}s)"
        [ "$2" = 0 ] || failures=$((failures + 1))
    }
    mpicc -O2 -Wall -o "$W/mpibench" bench/mpibench.c || { record build 1 0; exit 1; }
    cc -O2 -Wall -o "$W/rawudp" bench/rawudp.c || { record build 1 0; exit 1; }
    {
        echo "mode $mode"
        echo "rounds $rounds"
        echo "sizes $SIZES"
        echo "loss_sizes $LOSS_SIZES"
        echo "loss $loss"
        echo "usnic $usnic"
        echo "mpibench_args ${MB_ARGS[*]}"
        echo "hosts $RXEVM_NHOSTS"
        echo "mtu $RXEVM_MTU"
        echo "kernel $(uname -r)"
        echo "cpus $(nproc)"
    } > "$out/plan.txt"

    # mpirun_world HOSTLIST MPIRUN-ARGS...: mpirun on hostA, ranks not bound (a host's first
    # rank would go to core 0 on every host)
    # shellcheck disable=SC2317 # called through job
    mpirun_world() {
        local hosts=$1 np=0 h; shift
        for h in ${hosts//,/ }; do np=$((np + ${h#*:})); done
        onhost A timeout -k 10 600 mpirun --allow-run-as-root --bind-to none -np "$np" \
            --host "$hosts" --mca plm_rsh_agent "$RXEVM_RSH" \
            --mca oob_tcp_if_include "$RXEVM_NET.0/24" --mca pml ob1 "$@"
    }
    # mpirun_pair MPIRUN-ARGS... -- PROGRAM [ARG...]: one rank on hostA pinned to CPU 0, one
    # on hostB pinned to CPU 1: each busy-polling rank keeps a CPU of its own, whatever the
    # scheduler would do (two spinners sharing a CPU take turns of a tick, milliseconds)
    # shellcheck disable=SC2317 # called through job
    mpirun_pair() {
        local opts=()
        while [ "$1" != -- ]; do opts+=("$1"); shift; done
        shift
        onhost A timeout -k 10 600 mpirun --allow-run-as-root --bind-to none \
            --mca plm_rsh_agent "$RXEVM_RSH" --mca oob_tcp_if_include "$RXEVM_NET.0/24" \
            --mca pml ob1 "${opts[@]}" -np 1 --host hostA taskset -c 0 "$@" \
            : -np 1 --host hostB taskset -c 1 "$@"
    }
    # btl_args TRANSPORT EXTRA-BTLS: the BTL selection; jobs with more ranks than CPUs
    # yield when idle (both transports alike)
    btl_args() {
        case $1 in
            usnic) echo "--mca btl usnic,self$2 --mca btl_usnic_transport udp --mca btl_usnic_stats 100000" ;;
            tcp) echo "--mca btl tcp,self$2 --mca btl_tcp_if_include $RXEVM_NET.0/24" ;;
        esac
    }
    oversub=(--mca mpi_yield_when_idle 1)
    # job NAME CMD...: run a benchmark job into raw/NAME.txt and record it
    job() {
        local name=$1 t0=$SECONDS rc; shift
        "$@" > "$out/raw/$name.txt" 2>&1
        rc=$?
        record "$name" "$rc" $((SECONDS - t0))
    }
    # shellcheck disable=SC2046 # btl_args gives words
    run_mpi() {
        local tr=$1 r=$2
        job "$tr-p2p-r$r" mpirun_pair $(btl_args "$tr" "") -- \
            "$W/mpibench" -t lat,bw -S "$(csv "$SIZES")" "${MB_ARGS[@]}"
        job "$tr-mr1-r$r" mpirun_pair $(btl_args "$tr" "") -- \
            "$W/mpibench" -t mr -S 8 "${MB_ARGS[@]}"
        job "$tr-mr4-r$r" mpirun_world hostA:4,hostB:4 $(btl_args "$tr" ",vader") "${oversub[@]}" \
            "$W/mpibench" -t mr -S 8 "${MB_ARGS[@]}"
        job "$tr-a2a-r$r" mpirun_world hostA:2,hostB:2,hostC:2,hostD:2 $(btl_args "$tr" ",vader") \
            "${oversub[@]}" "$W/mpibench" -t a2a -S 65536 "${MB_ARGS[@]}"
    }
    # rawudp JOB-ARGS...: responder on hostB, initiator on hostA (which ends the responder);
    # with one pair (no -P) pinned to CPUs 1 and 0 as the MPI pairs
    port=18700
    # shellcheck disable=SC2317 # called through job
    rawudp() {
        local rpid rc ry=() pa=(taskset -c 0) pb=(taskset -c 1)
        case " $* " in *" -y "*) ry=(-y) ;; esac     # the responder yields as the initiator
        case " $* " in *" -P "*) pa=() pb=() ;; esac
        port=$((port + 1))
        onhost B timeout -k 5 300 "${pb[@]}" "$W/rawudp" -r "${ry[@]}" -p "$port" -k 300 > "$W/responder.log" 2>&1 &
        rpid=$!
        onhost A timeout -k 5 300 "${pa[@]}" "$W/rawudp" -c hostB -p "$port" -k 300 -q "$@"
        rc=$?
        [ "$rc" = 0 ] || kill "$rpid" 2>/dev/null
        wait "$rpid" || rc=1
        return "$rc"
    }
    run_raw() {
        local r=$1
        job "rawudp-p2p-r$r" rawudp -t lat,bw -S "$(csv "$SIZES")" "${MB_ARGS[@]}"
        job "rawseg-bw-r$r" rawudp -t bw -g -S "$(csv "$SIZES")" "${MB_ARGS[@]}"
        job "rawudp-mr1-r$r" rawudp -t mr -S 8 "${MB_ARGS[@]}"
        job "rawudp-mr4-r$r" rawudp -t mr -S 8 -P 4 -y "${MB_ARGS[@]}"
    }
    # loss_on PCT / loss_off: drop PCT% of what hostA sends (its veth's egress)
    loss_on() {
        if ip netns exec nsA tc qdisc replace dev vethA root netem loss "$1%" 2>/dev/null; then
            echo "netem" > "$W/loss-kind"
            return 0
        fi
        echo "nftables" > "$W/loss-kind"
        ip netns exec nsA nft -f - <<EOF
table netdev usnic_bench_loss {
    chain egress {
        type filter hook egress device vethA priority 0;
        numgen random mod 100000 < $(awk -v p="$1" 'BEGIN { printf "%d", p * 1000 }') drop
    }
}
EOF
    }
    loss_off() {
        ip netns exec nsA tc qdisc del dev vethA root 2>/dev/null
        ip netns exec nsA nft delete table netdev usnic_bench_loss 2>/dev/null
        return 0
    }
    # shellcheck disable=SC2046
    run_loss() {
        local r=$1
        job "usnic-bwref-r$r" mpirun_pair $(btl_args usnic "") -- \
            "$W/mpibench" -t bw -S "$(csv "$LOSS_SIZES")" -T 1000 -W 200 -n 5 -N 1000
        if loss_on "$loss"; then
            job "usnic-bwloss-r$r" mpirun_pair $(btl_args usnic "") -- \
                "$W/mpibench" -t bw -S "$(csv "$LOSS_SIZES")" -T 1000 -W 200 -n 5 -N 1000
        else
            record "usnic-bwloss-r$r" 1 0
        fi
        loss_off
    }

    trs=(rawudp tcp)
    [ "$usnic" = 1 ] && trs=(usnic rawudp tcp)
    for ((r = 1; r <= rounds; r++)); do
        # rotate the order: no transport always runs first (after a pause) or last
        for ((i = 0; i < ${#trs[@]}; i++)); do
            tr=${trs[(i + r - 1) % ${#trs[@]}]}
            if [ "$tr" = rawudp ]; then run_raw "$r"; else run_mpi "$tr" "$r"; fi
        done
        if [ "$usnic" = 1 ] && [ "$loss" != 0 ]; then run_loss "$r"; fi
    done
    [ -f "$W/loss-kind" ] && echo "loss_kind $(cat "$W/loss-kind")" >> "$out/plan.txt"
    echo "native: $failures failed"
    [ "$failures" = 0 ]
    exit
fi

# ---------------------------------------------------------------- on the machine
mode=full rounds=7 loss=1 mtu='' usnic=auto lock=1 outdir=''
usage() { echo "usage: bench/native.sh [--quick] [--rounds N] [--loss PCT] [--mtu M] [--no-usnic] [--no-lock] [--out DIR]" >&2; exit 2; }
while [ $# -gt 0 ]; do
    case $1 in
        --quick) mode=quick rounds=1 loss=0 lock=0 ;;
        --rounds) rounds=${2:-}; shift ;;
        --loss) loss=${2:-}; shift ;;
        --mtu) mtu=${2:-}; shift ;;
        --no-usnic) usnic=0 ;;
        --no-lock) lock=0 ;;
        --out) outdir=${2:-}; shift ;;
        -h|--help) sed -n '2,/^set -u/p' "$0" | grep -v '^set -u' | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) usage ;;
    esac
    shift
done
case $rounds in ''|*[!0-9]*|0) echo "native.sh: --rounds needs a positive number" >&2; exit 2 ;; esac
awk -v p="$loss" 'BEGIN { exit !(p ~ /^[0-9]+(\.[0-9]+)?$/ && p < 100) }' ||
    { echo "native.sh: --loss needs a percentage below 100" >&2; exit 2; }
world=${NETNS_WORLD:-tools/netns-world/netns-world}
[ -x "$world" ] || { echo "native.sh: no $world (the native world)" >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "native.sh: needs root (network namespaces)" >&2; exit 2; }
command -v gnuplot > /dev/null || echo "native.sh: gnuplot not installed (tools/deps.sh): no plots" >&2
comps=''
if [ -n "${USNIC_SO:-}" ]; then
    [ -f "$USNIC_SO" ] || { echo "native.sh: USNIC_SO: no such file: $USNIC_SO" >&2; exit 2; }
    comps=$(mktemp -d /tmp/usnic-components.XXXXXX) || exit 2
    for f in "$(ompi_info --path pkglibdir --parsable | cut -d: -f3)"/*; do
        case ${f##*/} in mca_btl_usnic.*) ;; *) ln -s "$f" "$comps/" ;; esac
    done
    cp "$USNIC_SO" "$comps/mca_btl_usnic.so" || exit 2
    # every process of the world inherits it (ompi_info below too)
    export OMPI_MCA_mca_base_component_path=$comps
fi
if [ "$usnic" = auto ]; then
    if ompi_info --param btl usnic --level 9 2>/dev/null | grep -q 'btl_usnic_transport'; then
        usnic=1
    else
        usnic=0
        echo "native.sh: the installed usnic has no btl_usnic_transport (UDP mode): raw UDP and tcp only" >&2
    fi
fi
if [ "$usnic" = 0 ]; then loss=0; fi

out=$PWD/bench/results/native
[ -n "$outdir" ] && out=$(realpath -m "$outdir")
[ ! -d "$out" ] || find "$out" -mindepth 1 -maxdepth 1 -exec rm -rf {} +
mkdir -p "$out" || exit 2
so=$(ompi_info --path pkglibdir 2>/dev/null | awk '{ print $NF }')/mca_btl_usnic.so
what=installed
[ -n "$comps" ] && so=$(realpath "$USNIC_SO") what=USNIC_SO
component() {
    if [ -f "$1" ]; then
        echo "$what: $1 sha256 $(sha256sum < "$1" | cut -c1-16) $(date -u -r "$1" +%Y-%m-%dT%H:%M:%SZ)"
    else
        echo "$what: none ($1)"
    fi
}
{
    echo "run: $(date -u +%Y%m%dT%H%M%SZ)"
    echo "source: $(git log -1 --format='%h %cI' 2>/dev/null)" \
         "$(git status --porcelain -- 'btl_usnic*' 2>/dev/null | grep -q . && echo '(sources modified)')"
    component "$so"
    [ "$usnic" = 1 ] || echo "usnic: not measured (no UDP transport installed, or --no-usnic)"
} > "$out/component.txt"
so_before=$(component "$so")
echo "native.sh: $mode suite, $rounds round(s), results in $out"

# the machine's load while the world runs: other load is measured too
( while :; do cut -d' ' -f1 /proc/loadavg >> "$out/host-load.txt"; sleep 10; done ) &
sampler=$!
trap 'kill "$sampler" 2>/dev/null; [ -z "$comps" ] || rm -rf "$comps"' EXIT
trap 'echo "native.sh: interrupted" >&2; exit 130' INT TERM
lockcmd=()
[ "$lock" = 1 ] && lockcmd=(flock /tmp/usnic-vm.lock)
worldargs=(-n 4)
[ -n "$mtu" ] && worldargs+=(--mtu "$mtu")
t0=$(date +%s)
"${lockcmd[@]}" "$world" "${worldargs[@]}" bench/native.sh --in-world "$mode" "$rounds" "$loss" \
    "$usnic" "$out" 2>&1 | tee "$out/world.log"
rc=${PIPESTATUS[0]}
t1=$(date +%s)
kill "$sampler" 2>/dev/null
wait "$sampler" 2>/dev/null
echo "world run: $((t1 - t0)) s wall clock, exit code $rc" > "$out/times.txt"
if [ "$(component "$so")" != "$so_before" ]; then
    echo "native.sh: WARNING: $so changed during the run" >&2
    echo "changed during the run to: $(component "$so")" >> "$out/component.txt"
fi
cat "$out/times.txt"
bench/native-report.sh "$out"
reprc=$?
echo "native.sh: $out/results.md"
if [ "$rc" != 0 ] || [ "$reprc" != 0 ]; then
    echo "native.sh: FAILED (world exit code $rc, report exit code $reprc)" >&2
    exit 1
fi
echo "native.sh: all benchmarks produced numbers"
