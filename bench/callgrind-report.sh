#!/bin/bash
# bench/callgrind-report.sh DIR: Markdown summary of the callgrind profiles that
# bench/in-vm-bench.sh leaves in DIR. Rank 0 of an 8-byte ping-pong over usnic ran under
#   valgrind --tool=callgrind --collect-atstart=no --toggle-collect=measured_iteration
#            --toggle-collect=idle_progress --dump-before=idle_progress
# so callgrind.out.1 holds exactly the measured round trips (one message sent and one
# received each) and callgrind.out the idle progress passes that follow (MPI_Iprobe with
# nothing to receive). Writes, per profile P (ping, idle): P.annotate.txt
# (callgrind_annotate's function list), P.objects.txt and P.functions.txt (totals).
# SPDX-License-Identifier: BSD-3-Clause
set -euo pipefail
d=${1:?usage: bench/callgrind-report.sh DIR}
ping=$d/callgrind.out.1 idle=$d/callgrind.out
[ -s "$ping" ] || { echo "No profile ($ping)."; exit 1; }
command -v callgrind_annotate > /dev/null || { echo "callgrind_annotate is not installed."; exit 1; }

# calls NAME PROFILE: how often NAME was called. Names are compressed in a profile:
# "cfn=(id) name" (or fn=) the first time, "cfn=(id)" after; "calls=N ..." follows a cfn=.
calls() {
    awk -v want="$1" '
        /^c?fn=\([0-9]+\) / { s = $0; sub(/^c?fn=/, "", s); id = s; sub(/ .*/, "", id)
                              sub(/^\([0-9]+\) /, "", s); if (s == want) wid = id }
        /^cfn=/ { c = $0; sub(/^cfn=/, "", c); sub(/ .*/, "", c); hit = (wid != "" && c == wid); next }
        /^calls=/ && hit { split($0, a, /[= ]/); n += a[2]; hit = 0 }
        END { print n + 0 }' "$2"
}

# summarize PROFILE NAME: callgrind_annotate's function list -> NAME.annotate.txt, and
# per-object totals -> NAME.objects.txt (COST OBJECT, then SUM and PROGRAM_TOTALS),
# per-function totals -> NAME.functions.txt (COST OBJECT FUNCTION).
# callgrind_annotate prints each function's self cost as "COST (PCT%)  file:function
# [object]", one line per source file its code comes from; only some of a function's lines
# name the object (the others hold code inlined from other files) and take the object of
# the line that does. The lines add up to PROGRAM TOTALS.
summarize() {
    local prof=$1 n=$d/$2
    callgrind_annotate --auto=no --inclusive=no --threshold=100 "$prof" > "$n.annotate.txt" 2>&1 ||
        return 1
    awk '
        /PROGRAM TOTALS/ { v = $1; gsub(",", "", v); total = v; next }
        /^ *[0-9,]+ +\( *[0-9.]+%\) / {
            v = $1; gsub(",", "", v); f = $0
            sub(/^ *[0-9,]+ +\( *[0-9.]+%\) +/, "", f)
            o = ""
            if (f ~ / \[[^]]*\]$/) {
                o = f; sub(/.* \[/, "", o); sub(/\]$/, "", o); sub(/ \[[^]]*\]$/, "", f)
            }
            sub(/^[^:]*:/, "", f)
            n++; cost[n] = v; fn[n] = f
            if (o != "") objof[f] = o
        }
        END {
            for (i = 1; i <= n; i++) {
                o = (fn[i] in objof) ? objof[fn[i]] : "(unknown)"
                fsum[o " " fn[i]] += cost[i]; osum[o] += cost[i]; all += cost[i]
            }
            for (k in fsum) print fsum[k], k > "/dev/stderr"
            for (o in osum) print osum[o], o
            print all + 0, "SUM"; print total + 0, "PROGRAM_TOTALS"
        }' "$n.annotate.txt" 2> "$n.functions.unsorted" | sort -rn > "$n.objects.txt"
    sort -rn "$n.functions.unsorted" > "$n.functions.txt"
    rm -f "$n.functions.unsorted"
}
# selfcost PROFILE OBJECT-REGEX: the object's self cost read from the profile itself, as a
# cross-check: cost lines, except the one after each calls= line (a call's inclusive
# cost); object names are compressed like function names (ob= and cob= lines).
selfcost() {
    awk -v want="$2" '
        /^c?ob=/ { s = $0; sub(/^c?ob=/, "", s); id = s; sub(/\).*/, ")", id)
                   if (s != id) name[id] = substr(s, length(id) + 2)
                   if ($0 ~ /^ob=/) ob = id
                   next }
        /^calls=/ { skip = 1; next }
        /^[+*0-9-]/ { if (skip) { skip = 0; next }
                      self[ob] += $NF; next }
        END { for (o in self) if (name[o] ~ want) print self[o] }' "$1"
}
objcost() { awk -v p="$2" '$2 ~ p { print $1; exit }' "$d/$1.objects.txt"; }
div() { awk -v a="$1" -v b="$2" 'BEGIN { if (b + 0 == 0) print "?"; else printf "%.0f", a / b }'; }

summarize "$ping" ping || { echo "callgrind_annotate failed (see $d/ping.annotate.txt)."; exit 1; }
iters=$(calls measured_iteration "$ping")
[ "$iters" -gt 0 ] || { echo "No measured_iteration calls in $ping."; exit 1; }
usnic=$(objcost ping 'mca_btl_usnic\.so$') total=$(objcost ping '^PROGRAM_TOTALS$')
sum=$(objcost ping '^SUM$') usnic_prof=$(selfcost "$ping" 'mca_btl_usnic\.so$')
# (the callback: the yielding one where idle passes yield, as over Soft-RoCE)
passes=$(($(calls opal_btl_usnic_component_progress "$ping") +
          $(calls opal_btl_usnic_component_progress_yielding "$ping")))

echo "Rank 0 (hostA) of an 8-byte ping-pong over usnic (\`--mca btl usnic,self\`) runs under"
echo "callgrind, which counts only the $iters measured round trips of \`mpibench -t lat -S 8\`"
echo "(\`--collect-atstart=no --toggle-collect=measured_iteration\`). A round trip is one"
echo "message sent and one received: *per round trip* = send side + receive side of one"
echo "message. Rank 1 (hostB) runs natively."
echo
if [ -z "$usnic" ]; then
    echo "mca_btl_usnic.so does not appear in the profile."
    exit 1
fi
echo "**mca_btl_usnic.so: $(div "$usnic" "$iters") instructions per message (send + receive)**,"
echo "$usnic in $iters round trips: callgrind_annotate's per-object total"
if [ "$usnic" = "${usnic_prof:-}" ]; then
    echo "(equal to the object's self costs read from the profile itself)."
else
    echo "(the object's self costs read from the profile itself: ${usnic_prof:-none})."
fi
echo
if [ -s "$idle" ] && summarize "$idle" idle; then
    idle_usnic=$(objcost idle 'mca_btl_usnic\.so$')
    idle_passes=$(($(calls opal_btl_usnic_component_progress "$idle") +
                   $(calls opal_btl_usnic_component_progress_yielding "$idle")))
    e=$(div "${idle_usnic:-0}" "$idle_passes")
    p=$(awk -v a="$passes" -v n="$iters" 'BEGIN { printf "%.1f", a / n }')
    echo "That count includes polling: the progress engine ran usnic's progress function"
    echo "$p times per round trip (the profiled rank waits for its native peer), and an idle"
    echo "pass (MPI_Iprobe with nothing to receive, $idle_passes passes measured) costs $e"
    echo "instructions in mca_btl_usnic.so. Without the polling, a message costs about"
    awk -v c="$usnic" -v n="$iters" -v a="$passes" -v e="$e" 'BEGIN {
        w = (c - a * e) / n
        printf "**%.0f instructions (send + receive)** in usnic (%.0f - %.1f x %s; every pass\n", w, c / n, a / n, e
        print "counted as idle, so this slightly underestimates the work)." }'
    echo
fi
echo "| object | instructions per round trip | share |"
echo "|---|---:|---:|"
awk -v n="$iters" -v t="$total" '
    $2 != "SUM" && $2 != "PROGRAM_TOTALS" && ++k <= 10 { o = $2; sub(/.*\//, "", o)
        printf "| %s | %.0f | %.1f%% |\n", o, $1 / n, t ? 100 * $1 / t : 0 }' "$d/ping.objects.txt"
echo "| all (PROGRAM TOTALS) | $(div "$total" "$iters") | 100% |"
[ "$sum" = "$total" ] || echo "(the function lines add up to $sum, PROGRAM TOTALS is $total)"
echo
echo "mca_btl_usnic.so's most expensive functions (self instructions per round trip; idle:"
echo "per idle progress pass):"
echo
echo "| function | per round trip | per idle pass |"
echo "|---|---:|---:|"
idlef=
[ -f "$d/idle.functions.txt" ] && idlef=$d/idle.functions.txt
awk -v n="$iters" -v ip="${idle_passes:-0}" -v idlef="$idlef" '
    BEGIN {
        while (idlef != "" && (getline line < idlef) > 0) {
            split(line, a, " "); if (a[2] ~ /mca_btl_usnic\.so$/) idle[a[3]] = a[1]
        }
    }
    $2 ~ /mca_btl_usnic\.so$/ && ++k <= 12 {
        printf "| `%s` | %.0f | %s |\n", $3, $1 / n,
               (ip > 0 ? sprintf("%.0f", idle[$3] / ip) : "–") }' "$d/ping.functions.txt"
