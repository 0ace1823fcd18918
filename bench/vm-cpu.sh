#!/bin/bash
# bench/vm-cpu.sh [--rounds N] [--perf | --events] [--mca NAME VALUE]... [--out DIR]: where the VM's CPU goes per datagram of a stream,
# usnic against raw UD, in one boot of tools/rxe-vm (2 vCPUs, Soft-RoCE).
# Each round runs, under SCHED_IDLE as bench/run.sh does, perftest's raw UD stream
# (ib_send_bw -c UD -s 4096, hostA to hostB) and usnic's 1 MiB stream (bench/mpibench.c -t bw
# -S 1048576, --mca btl usnic,self, the installed component), one after the other (the order
# alternates by round), and samples each for SAMPLE_S seconds once it runs steadily:
#   - the guest's CPU time from /proc/stat (user, system, softirq, idle) and its task switches;
#   - the two benchmark processes' own user and system time and task switches (/proc/PID);
#   - the datagrams each Soft-RoCE device sent (hw_counters/sent_pkts).
# "others" is the busy time outside the two processes: Soft-RoCE's kernel workers, softirqs,
# mpirun's daemons. --perf: the sample is also a system-wide perf profile (cpu-clock, 499 Hz),
# reported per kernel or user symbol in µs per datagram hostA sent. --events: the sample also
# counts kernel events (ftrace's hist triggers: task switches, wake-ups, work items, softirqs,
# system calls, and Soft-RoCE's functions through kprobes), reported per datagram hostA sent.
# --mca: an MCA parameter
# for usnic's job (as mpirun's --mca). Writes DIR/results.md (default bench/results/vm-cpu): per round and
# transport the figures per datagram hostA sent (4 KiB of payload each), and their medians;
# DIR/raw/ the samples. Exits non-zero if a sample is missing.
# SPDX-License-Identifier: BSD-3-Clause
set -u
cd "$(dirname "$0")/.." || exit 2
REPO=$PWD
SAMPLE_S=6
# shellcheck source=bench/vm-lib.sh
. bench/vm-lib.sh

if [ "${1:-}" = --in-vm ]; then
    rounds=$2 out=$3 mode=$4
    read -ra mca <<< "${5:-}"
    # shellcheck source=/dev/null
    . /run/rxevm/env || exit 2
    W=$(mktemp -d /tmp/usnic-cpu.XXXXXX) || exit 2
    mpicc -O2 -Wall -o "$W/mpibench" bench/mpibench.c || exit 1
    hz=$(getconf CLK_TCK)
    T=$VM_TRACE events=()
    if [ "$mode" = events ]; then
        # Counted in the kernel by hist triggers, set up now while the guest is idle
        # (vm_rxe_probes). Soft-RoCE's steps: a post, a work item queued and run, the sender's
        # and receiver's tasks, a packet out and in, a completion queued, a sent packet's
        # buffer freed.
        probes=(rxe_post_send rxe_sched_task do_work rxe_sender rxe_requester rxe_completer
            rxe_receiver rxe_rcv rxe_xmit_packet rxe_cq_post rxe_skb_tx_dtor)
        vm_rxe_probes "${probes[@]}" || exit 2
        events=("${probes[@]/#/usnicrxe/}")
        events+=(sched/sched_switch sched/sched_wakeup workqueue/workqueue_execute_start
            irq/softirq_entry raw_syscalls/sys_enter syscalls/sys_enter_sched_yield
            syscalls/sys_enter_write syscalls/sys_enter_ioctl syscalls/sys_enter_ppoll)
        for e in "${events[@]}"; do
            echo 'hist:keys=common_cpu' > "$T/events/$e/trigger" || exit 2
        done
        sleep 2
    fi
    # snap FILE PID...: one sample line per field group (see the parser below)
    snap() {
        local f=$1 p h d
        shift
        {
            echo "time $(date +%s.%N)"
            grep -E '^(cpu |ctxt )' /proc/stat
            # (each device is seen in its own host's namespace)
            for h in A B; do
                d=RXEVM_DEV_$h
                echo "pkts ${!d} $(onhost "$h" cat "/sys/class/infiniband/${!d}/ports/1/hw_counters/sent_pkts")"
            done
            for e in "${events[@]}"; do
                echo "event ${e#*/} $(awk '$1 == "Hits:" { print $2 }' "$T/events/$e/hist")"
            done
            for p in "$@"; do
                # utime and stime: fields 14 and 15 (the command name has no spaces here)
                echo "proc $p $(cut -d' ' -f14,15 "/proc/$p/stat")" \
                    "$(awk '/ctxt_switches/ { s += $2 } END { print s }' "/proc/$p/status")"
            done
        } >> "$f"
    }
    # measure NAME PATTERN WARM: once the two processes named PATTERN run, WARM s later,
    # samples them SAMPLE_S s apart into raw/NAME.txt
    measure() {
        local name=$1 pat=$2 warm=$3 pids=() i
        for ((i = 0; i < 100; i++)); do
            read -ra pids <<< "$(pgrep -x "$pat" | tr '\n' ' ')"
            [ "${#pids[@]}" = 2 ] && break
            sleep 0.2
        done
        [ "${#pids[@]}" = 2 ] || { echo "vm-cpu: $name: ${#pids[@]} $pat processes"; return 1; }
        sleep "$warm"
        : > "$out/raw/$name.txt"
        echo "hz $hz" >> "$out/raw/$name.txt"
        snap "$out/raw/$name.txt" "${pids[@]}"
        case $mode in
            perf) perf record -q -a -e cpu-clock -F 499 -o "$W/$name.data" -- sleep "$SAMPLE_S" 2> /dev/null ;;
            *) sleep "$SAMPLE_S" ;;
        esac
        snap "$out/raw/$name.txt" "${pids[@]}"
        if [ "$mode" = perf ]; then
            perf report -i "$W/$name.data" --sort sym --stdio 2> /dev/null | grep -v '^#' |
                grep . | head -60 > "$out/raw/$name.perf.txt"
        fi
    }
    port=18600 fails=0
    raw() {
        port=$((port + 1))
        local i args=(-c UD -x "$RXEVM_GID_INDEX" -s 4096 -n 2000000 -F -p "$port")
        onhost B chrt --idle 0 timeout -k 5 120 ib_send_bw -d "$RXEVM_DEV_B" "${args[@]}" \
            > "$W/raw.server" 2>&1 &
        for ((i = 0; i < 100; i++)); do
            ip netns exec "$RXEVM_NS_B" ss -ltn "sport = :$port" | grep -q LISTEN && break
            sleep 0.1
        done
        onhost A chrt --idle 0 timeout -k 5 120 ib_send_bw -d "$RXEVM_DEV_A" "${args[@]}" \
            "$RXEVM_IP_B" > "$W/raw.client" 2>&1 &
        measure "raw-r$1" ib_send_bw 4 || fails=$((fails + 1))
        pkill -x ib_send_bw
        wait
    }
    usnic() {
        onhost A chrt --idle 0 timeout -k 10 300 mpirun --allow-run-as-root --bind-to none \
            -np 2 --host hostA:1,hostB:1 --mca plm_rsh_agent rxevm-rsh \
            --mca oob_tcp_if_include "$RXEVM_NET.0/24" --mca pml ob1 --mca btl usnic,self \
            "${mca[@]}" "$W/mpibench" -t bw -S 1048576 -T 60000 -W 300 -n 2000 -N 2000 \
            > "$W/usnic.out" 2>&1 &
        measure "usnic-r$1" mpibench 8 || fails=$((fails + 1))
        pkill -x mpibench
        wait
    }
    for r in $(seq 1 "$rounds"); do
        if [ $((r % 2)) = 1 ]; then raw "$r"; usnic "$r"; else usnic "$r"; raw "$r"; fi
        echo "vm-cpu: round $r done"
    done
    exit $((fails > 0))
fi

rounds=3 out=$REPO/bench/results/vm-cpu mode=none mcas=""
while [ $# -gt 0 ]; do
    case $1 in
        --rounds) rounds=$2; shift 2 ;;
        --out) out=$2; shift 2 ;;
        --perf) mode=perf; shift ;;
        --events) mode=events; shift ;;
        --mca) mcas+="${mcas:+ }--mca $2 $3"; shift 3 ;;
        *) echo "usage: bench/vm-cpu.sh [--rounds N] [--perf | --events] [--mca NAME VALUE]... [--out DIR]" >&2; exit 2 ;;
    esac
done
out=$(vm_bench_out vm-cpu.sh "$out") || exit 2
RXE_VM_RW=$REPO RXE_VM_TIMEOUT=$((rounds * 200 + 600)) tools/rxe-vm/rxe-vm "$0" --in-vm "$rounds" "$out" "$mode" "$mcas"
rc=$?

# per sample: the deltas, per datagram hostA's device sent
report() {
    awk -v tr="$1" -v r="$2" '
        $1 == "hz" { hz = $2 }
        $1 == "time" { n++; t[n] = $2 }
        $1 == "cpu" { busy[n] = $2 + $3 + $4 + $7 + $8 + $9; idle[n] = $5 + $6 }
        $1 == "ctxt" { cs[n] = $2 }
        $1 == "pkts" { k[n, ++np[n]] = $3 }
        $1 == "proc" { pu[n] += $3; ps[n] += $4; pc[n] += $5 }
        END {
            if (n != 2 || np[1] != 2 || np[2] != 2) exit 1
            d = k[2, 1] - k[1, 1]; b = k[2, 2] - k[1, 2]; s = t[2] - t[1]
            if (d <= 0 || s <= 0) exit 1
            us = 1e6 / hz / d
            printf "| %s | %d | %.0f | %.0f | %.0f | %.1f | %.1f | %.1f | %.1f | %.1f | %.2f | %.2f |\n", tr, r,
                d / s, b / s, 100 * (busy[2] - busy[1]) / hz / s / 2,
                (busy[2] - busy[1]) * us, (pu[2] - pu[1]) * us, (ps[2] - ps[1]) * us,
                ((busy[2] - busy[1]) - (pu[2] - pu[1]) - (ps[2] - ps[1])) * us,
                (idle[2] - idle[1]) * us, (cs[2] - cs[1]) / d, (pc[2] - pc[1]) / d
        }' "$out/raw/$1-r$2.txt"
}
# the samples: "TRANSPORT ROUND" lines
samples() {
    local tr r
    for tr in raw usnic; do
        for r in $(seq 1 "$rounds"); do echo "$tr $r"; done
    done
}
rows=$(for tr in raw usnic; do
    for r in $(seq 1 "$rounds"); do report "$tr" "$r" || echo "| $tr | $r | missing |"; done
done)
grep -q missing <<< "$rows" && rc=1
{
    echo "# CPU per datagram of a stream in the VM: usnic against raw UD"
    echo
    echo "bench/vm-cpu.sh, $(date -u +%Y-%m-%dT%H:%MZ), source $(git log -1 --format='%h %cI'), $rounds rounds,"
    echo "one boot of tools/rxe-vm (2 vCPUs, TCG), kernel $(uname -r) on the host; installed component"
    echo "$(sha256sum "$(ompi_info --path pkglibdir --parsable | cut -d: -f3)/mca_btl_usnic.so" | cut -c1-16)."
    echo "raw: perftest \`ib_send_bw -c UD -s 4096\`; usnic: \`mpibench -t bw -S 1048576\` over"
    echo "\`--mca btl usnic,self${mcas:+ $mcas}\`; both under SCHED_IDLE, sampled for $SAMPLE_S s once steady."
    echo "Per datagram hostA's device sent (its payload 4 KiB): µs of CPU (of both vCPUs) busy in"
    echo "all, in the two processes (user, system), elsewhere (others: Soft-RoCE's kernel workers,"
    echo "softirqs, mpirun's daemons), idle; task switches in all and of the two processes' main threads."
    echo
    echo "| transport | round | A datagrams/s | B datagrams/s | busy % | busy µs | procs user µs | procs system µs | others µs | idle µs | switches | procs' switches |"
    echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    echo "$rows"
    echo
    echo "Medians over the rounds:"
    echo
    echo "| transport | A datagrams/s | busy µs | procs user µs | procs system µs | others µs | switches |"
    echo "|---|---:|---:|---:|---:|---:|---:|"
    for tr in raw usnic; do
        grep "^| $tr | [0-9]* | [0-9]" <<< "$rows" | awk -F'|' -v tr="$tr" '
            function med(a, n,   i, j, x) {
                for (i = 1; i <= n; ++i) for (j = i + 1; j <= n; ++j) if (a[j] < a[i]) { x = a[i]; a[i] = a[j]; a[j] = x }
                return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
            }
            { ++n; a[n] = $4; b[n] = $7; u[n] = $8; s[n] = $9; o[n] = $10; c[n] = $12 }
            END { if (n) printf "| %s | %.0f | %.1f | %.1f | %.1f | %.1f | %.2f |\n", tr, med(a, n), med(b, n), med(u, n), med(s, n), med(o, n), med(c, n) }'
    done
    if [ "$mode" = perf ]; then
        echo
        echo "Where the time goes (perf, all rounds' samples): µs per datagram hostA sent, the 30"
        echo "symbols that take most in either transport (all processes and kernel threads together)."
        echo
        echo "| symbol | raw µs | usnic µs | usnic - raw |"
        echo "|---|---:|---:|---:|"
        samples | while read -r tr r; do
            f=$out/raw/$tr-r$r
            [ -s "$f.perf.txt" ] || continue
            # this sample's µs of both vCPUs per datagram hostA sent
            per=$(awk '$1 == "time" { t[++n] = $2 } $1 == "pkts" { k[n, ++np[n]] = $3 }
                END { print 2e6 * (t[2] - t[1]) / (k[2, 1] - k[1, 1]) }' "$f.txt")
            awk -v tr="$tr" -v per="$per" -v rounds="$rounds" '$1 ~ /%$/ {
                sym = $0; sub(/^ *[0-9.]+% +/, "", sym)
                print tr "|" sym "|" ($1 + 0) / 100 * per / rounds }' "$f.perf.txt"
        done | awk -F'|' '{ v[$2, $1] += $3; s[$2] = 1 }
            END { for (x in s) {
                m = v[x, "raw"] > v[x, "usnic"] ? v[x, "raw"] : v[x, "usnic"]
                printf "%.4f|`%s`|%.2f|%.2f|%+.2f\n", m, x, v[x, "raw"], v[x, "usnic"], v[x, "usnic"] - v[x, "raw"] } }' |
            sort -t'|' -k1,1gr | head -30 | awk -F'|' '{ printf "| %s | %s | %s | %s |\n", $2, $3, $4, $5 }'
    fi
    if [ "$mode" = events ]; then
        echo
        echo "Kernel events per datagram hostA sent (ftrace hist triggers; rxe_*, do_work: kprobes on"
        echo "Soft-RoCE's functions), medians over the rounds:"
        echo
        echo "| event | raw | usnic | usnic - raw |"
        echo "|---|---:|---:|---:|"
        samples | while read -r tr r; do
            awk -v tr="$tr" '$1 == "pkts" && !b[n]++ { k[n] = $3 } $1 == "time" { ++n }
                $1 == "event" { e[n, $2] = $3; if (n == 1) o[++ne] = $2 }
                END { for (i = 1; i <= ne; ++i) print tr "|" o[i] "|" (e[2, o[i]] - e[1, o[i]]) / (k[2] - k[1]) }' \
                "$out/raw/$tr-r$r.txt" 2> /dev/null
        done | awk -F'|' '
            function med(tr, x,   i, j, n, a, y) {
                n = c[tr, x]; for (i = 1; i <= n; ++i) a[i] = v[tr, x, i]
                for (i = 1; i <= n; ++i) for (j = i + 1; j <= n; ++j) if (a[j] < a[i]) { y = a[i]; a[i] = a[j]; a[j] = y }
                return n == 0 ? 0 : n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
            }
            { v[$1, $2, ++c[$1, $2]] = $3; if (!($2 in s)) { s[$2] = 1; o[++ne] = $2 } }
            END { for (i = 1; i <= ne; ++i) { x = o[i]
                printf "| `%s` | %.2f | %.2f | %+.2f |\n", x, med("raw", x), med("usnic", x), med("usnic", x) - med("raw", x) } }'
    fi
} > "$out/results.md"
cat "$out/results.md"
exit "$rc"
