#!/bin/bash
# bench/pml-cost.sh [--out DIR]: what an 8 B MPI message costs above the BTL, counted by
# callgrind on the host (no VM, about a minute). bench/pml/pml_cost.c sends to itself over
# btl/self (MPI_Isend, MPI_Recv, MPI_Wait per message); the instructions inside those calls
# are counted for 2,000 and for 22,000 messages, and the difference per message is split by
# object: ob1 (mca_pml_ob1.so), the MPI layer (libmpi), opal (libopen-pal: convertor,
# progress), libc, and btl/self itself. Everything but btl/self is what every message over
# usnic pays besides usnic's own cost (bench/engine.sh: per 8 B message, sender's sendi and
# receiver's progress pass), and what the raw verbs baseline of the VM benchmark does not.
# --vm: also the time of that path per message, 9 rounds of 20,000 messages (MPI_Wtime), on
# this host and in a boot of tools/rxe-vm under SCHED_IDLE as bench/run.sh runs its ranks (a
# few minutes more): what the instructions cost where the VM's latency is measured, alone
# and each after a kernel operation, as a message over Soft-RoCE runs after the kernel's work;
# and what a function call costs there (bench/pml/vm_calls.c).
# Writes DIR/results.md (default bench/results/pml).
# SPDX-License-Identifier: BSD-3-Clause
set -euo pipefail
cd "$(dirname "$0")/.."
out=bench/results/pml vm=0
while [ $# -gt 0 ]; do
    case $1 in
        --out) out=${2:?--out needs a directory}; shift ;;
        --vm) vm=1 ;;
        -h|--help) sed -n '2,15s/^# \{0,1\}//p' "$0"; exit 0 ;;
        *) echo "usage: bench/pml-cost.sh [--vm] [--out DIR]" >&2; exit 2 ;;
    esac
    shift
done
for t in mpicc mpirun valgrind callgrind_annotate; do
    command -v "$t" > /dev/null || { echo "pml-cost.sh: $t not installed (tools/deps.sh)" >&2; exit 2; }
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mpicc -O2 -Wall -o "$tmp/pml_cost" bench/pml/pml_cost.c
runs=(2000 22000)
for n in "${runs[@]}"; do
    # (root in CI and the VM's image builder: mpirun refuses it unless told)
    mpirun --allow-run-as-root --oversubscribe -np 1 --mca btl self \
        valgrind --tool=callgrind --collect-atstart=no --toggle-collect=PMPI_Isend \
        --toggle-collect=PMPI_Recv --toggle-collect=PMPI_Wait \
        --callgrind-out-file="$tmp/cg.$n" "$tmp/pml_cost" "$n" > "$tmp/run.$n" 2>&1 ||
        { cat "$tmp/run.$n" >&2; echo "pml-cost.sh: the run of $n messages failed" >&2; exit 1; }
    # self cost per object
    callgrind_annotate --auto=no --inclusive=no --threshold=100 "$tmp/cg.$n" 2> /dev/null | awk '
        /^ *[0-9,]+ +\( *[0-9.]+%\) / && !/PROGRAM TOTALS/ && / \[[^]]*\]$/ {
            v = $1; gsub(",", "", v); o = $NF; sub(/^\[.*\//, "", o); sub(/^\[/, "", o)
            sub(/\]$/, "", o); s[o] += v }
        END { for (o in s) print o, s[o] }' | sort > "$tmp/obj.$n"
done
msgs=$((runs[1] - runs[0]))
# timed WHERE NAME:COLUMN...: a table row from lines "NAME HOT OPERATION AFTER" (columns 2-4,
# µs; 9 or more per NAME): WHERE, then each NAME's median of that COLUMN
timed() {
    awk -v w="$1" -v spec="$2" '
        function med(k,   i, j, x, n) {
            n = c[k]; for (i = 1; i <= n; ++i) for (j = i + 1; j <= n; ++j)
                if (v[k, j] < v[k, i]) { x = v[k, i]; v[k, i] = v[k, j]; v[k, j] = x }
            return v[k, int((n + 1) / 2)]
        }
        NF == 4 { for (f = 2; f <= 4; ++f) { k = $1 ":" f; v[k, ++c[k]] = $f } }
        END { row = "| " w; m = split(spec, cols, " ")
              for (i = 1; i <= m; ++i) { if (c[cols[i]] < 9) exit 1; row = row sprintf(" | %.3g", med(cols[i])) }
              print row " |" }'
}
if [ "$vm" = 1 ]; then
    cc -O2 -o "$tmp/vm_calls" bench/pml/vm_calls.c
    { mpirun --allow-run-as-root -np 1 --mca btl self "$tmp/pml_cost" 20000 9 &&
        "$tmp/vm_calls" 20000 9; } > "$tmp/time.host" 2>&1 ||
        { cat "$tmp/time.host" >&2; echo "pml-cost.sh: the timed run on this host failed" >&2; exit 1; }
    # (the guest sees the host's files read-only, the checkout read-write: it builds its own copy)
    tools/rxe-vm/rxe-vm bash -c 'mpicc -O2 -o /tmp/pml_cost bench/pml/pml_cost.c &&
        cc -O2 -o /tmp/vm_calls bench/pml/vm_calls.c &&
        chrt --idle 0 mpirun --allow-run-as-root -np 1 --mca btl self /tmp/pml_cost 20000 9 &&
        chrt --idle 0 /tmp/vm_calls 5000 9' > "$tmp/time.vm" 2>&1 ||
        { cat "$tmp/time.vm" >&2; echo "pml-cost.sh: the timed run in the VM failed" >&2; exit 1; }
    # rows: the message's table; crows: the calls'
    rows="" crows=""
    for w in host vm; do
        where="this host"
        [ "$w" = vm ] && where="the VM (tools/rxe-vm, TCG), SCHED_IDLE"
        if ! row=$(timed "$where" "message:2 message:3 message:4" < "$tmp/time.$w") ||
            ! crow=$(timed "$where" "direct:2 direct:4 indirect:2 indirect:4 loop:2 loop:4" < "$tmp/time.$w"); then
            cat "$tmp/time.$w" >&2
            echo "pml-cost.sh: a timed run failed ($where)" >&2
            exit 1
        fi
        rows+="${rows:+$'\n'}$row" crows+="${crows:+$'\n'}$crow"
    done
fi
mkdir -p "$out"
{
    echo "# Cost of an 8 B MPI message above the BTL"
    echo
    echo "\`bench/pml-cost.sh\`, $(mpirun --version 2>&1 | head -n 1), $(valgrind --version)."
    echo "One process sends 8 B to itself over btl/self (\`MPI_Isend\`, \`MPI_Recv\`,"
    echo "\`MPI_Wait\`); instructions inside those calls (callgrind), the run of ${runs[0]}"
    echo "messages subtracted from that of ${runs[1]}, per message."
    echo
    echo "| object | instructions per message |"
    echo "|---|---:|"
    join -a 2 -e 0 -o 0,1.2,2.2 "$tmp/obj.${runs[0]}" "$tmp/obj.${runs[1]}" | awk -v m="$msgs" '
        { d = ($3 - $2) / m; if (d < 0.05) next
          k = "other"
          if ($1 ~ /^mca_pml_ob1/) k = "ob1"; else if ($1 ~ /^libmpi/) k = "mpi"
          else if ($1 ~ /^libopen-pal/) k = "opal"; else if ($1 ~ /^libc[.]/) k = "libc"
          else if ($1 ~ /^mca_btl_self/) k = "self"
          c[k] += d; obj[k] = obj[k] (obj[k] == "" ? "" : ", ") $1 }
        END { split("ob1 mpi opal libc other", order, " ")
              name["ob1"] = "ob1"; name["mpi"] = "MPI layer"; name["opal"] = "opal"
              name["libc"] = "libc"; name["other"] = "other"
              for (i = 1; i <= 5; i++) {
                  k = order[i]; if (!(k in c)) continue
                  printf "| %s (%s) | %.1f |\n", name[k], obj[k], c[k]; above += c[k] }
              printf "| **above the BTL** | **%.1f** |\n", above
              printf "| btl/self (%s), not counted above | %.1f |\n", obj["self"], c["self"] }'
    if [ "$vm" = 1 ]; then
        echo
        echo "The same path timed (\`--vm\`: 9 rounds, \`MPI_Wtime\`; btl/self's share included),"
        echo "$(date -u +%Y-%m-%d), source $(git log -1 --format=%h). Each round: 20,000 messages; 20,000"
        echo "kernel operations (open, read, close /proc/self/stat); 20,000 messages each after such an"
        echo "operation, whose time less the operation's is the message's after the kernel ran."
        echo "Medians over the rounds, µs:"
        echo
        echo "| where | a message | a kernel operation | a message after one |"
        echo "|---|---:|---:|---:|"
        echo "$rows"
        echo
        echo "What a function call costs there (bench/pml/vm_calls.c, 9 rounds; 20,000 runs per round on"
        echo "the host, 5,000 in the VM): µs per run of 64 calls of distinct empty functions, direct"
        echo "and through pointers, and of a 256-iteration loop without calls, run after each other"
        echo "(hot) and each after a kernel operation as above (after; the operation's own time"
        echo "taken out). Medians:"
        echo
        echo "| where | 64 calls | after | 64 calls through pointers | after | loop | after |"
        echo "|---|---:|---:|---:|---:|---:|---:|"
        echo "$crows"
    fi
} > "$out/results.md"
cat "$out/results.md"
