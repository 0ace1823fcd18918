#!/bin/bash
# bench/pml-cost.sh [--out DIR]: what an 8 B MPI message costs above the BTL, counted by
# callgrind on the host (no VM, about a minute). bench/pml/pml_cost.c sends to itself over
# btl/self (MPI_Isend, MPI_Recv, MPI_Wait per message); the instructions inside those calls
# are counted for 2,000 and for 22,000 messages, and the difference per message is split by
# object: ob1 (mca_pml_ob1.so), the MPI layer (libmpi), opal (libopen-pal: convertor,
# progress), libc, and btl/self itself. Everything but btl/self is what every message over
# usnic pays besides usnic's own cost (bench/engine.sh: per 8 B message, sender's sendi and
# receiver's progress pass), and what the raw verbs baseline of the VM benchmark does not.
# Writes DIR/results.md (default bench/results/pml).
# SPDX-License-Identifier: BSD-3-Clause
set -euo pipefail
cd "$(dirname "$0")/.."
out=bench/results/pml
while [ $# -gt 0 ]; do
    case $1 in
        --out) out=${2:?--out needs a directory}; shift ;;
        -h|--help) sed -n '2,10s/^# \{0,1\}//p' "$0"; exit 0 ;;
        *) echo "usage: bench/pml-cost.sh [--out DIR]" >&2; exit 2 ;;
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
} > "$out/results.md"
cat "$out/results.md"
