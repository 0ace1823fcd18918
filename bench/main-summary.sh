#!/bin/bash
# bench/main-summary.sh DIR: the main job's reading of a bench/run.sh result directory (made by
# bench/report.sh: medians.tsv, all.tsv, raw/usnic-r*.txt): usnic beside the raw device
# (perftest over verbs UD on the same Soft-RoCE devices) and btl/tcp (the same veth), for
# latency at each size, streaming bandwidth and the 8 B message rate, with the ratios to the
# raw device (of the medians, and paired: the median of the per-round ratios), usnic's
# retransmits on this lossless link from its own statistics, and a one-line reading against
# the project's targets (docs/benchmarks.md). Exits 1 if a figure it needs is missing.
# SPDX-License-Identifier: BSD-3-Clause
set -euo pipefail
d=${1:?usage: bench/main-summary.sh DIR}
med=$d/medians.tsv all=$d/all.tsv
if [ ! -s "$med" ] || [ ! -s "$all" ]; then
    echo "main-summary: no $med or $all (bench/report.sh makes them)" >&2
    exit 1
fi
# targets (docs/benchmarks.md): latency at most 1.10 x raw UD, bandwidth at least 0.95 x,
# lossless retransmits under 1 per 10^4 data datagrams
LAT_TARGET=1.10 BW_TARGET=0.95 RESEND_TARGET=1

# get TRANSPORT TEST SIZE COLUMN (medians.tsv: 6 median us, 7 min us, 8 MB/s, 9 msg/s)
get() { awk -v t="$1" -v x="$2" -v s="$3" -v c="$4" '$1 == t && $2 == x && $3 == s { print $c; exit }' "$med"; }
# paired TEST SIZE RAWSIZE COLUMN [RAW]: median over the rounds of usnic / raw UD (RAW: rawud,
# perftest, or rawudw, bench/rawud.c; all.tsv: 8 median us, 10 MB/s, 11 msg/s)
paired() {
    awk -v x="$1" -v s="$2" -v rs="$3" -v c="$4" -v raw="${5:-rawud}" '
        $3 == x && $1 == "usnic" && $4 == s { u[$2] = $c }
        $3 == x && $1 == raw && $4 == rs { r[$2] = $c }
        END { n = 0
              for (k in u) if ((k in r) && r[k] > 0) a[++n] = u[k] / r[k]
              if (n == 0) exit
              for (i = 2; i <= n; i++) { v = a[i]; for (j = i - 1; j >= 1 && a[j] > v; j--) a[j + 1] = a[j]; a[j + 1] = v }
              printf "%.2f", n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2 }' "$all"
}
ratio() { awk -v a="${1:-}" -v b="${2:-}" 'BEGIN { if (a + 0 > 0 && b + 0 > 0) printf "%.2f", a / b; else printf "-" }'; }
fmt() { awk -v v="${1:-}" 'BEGIN { if (v == "") print "-"; else if (v >= 1000) printf "%.0f\n", v; else if (v >= 10) printf "%.1f\n", v; else printf "%.2f\n", v }'; }
label() { awk -v s="$1" 'BEGIN { if (s >= 1048576) print s / 1048576 " MiB"; else if (s >= 1024) print s / 1024 " KiB"; else print s " B" }'; }

runs=$(awk '$1 == "usnic" { n[$2] = 1 } END { print length(n) }' "$all")
sizes=$(awk '$1 == "usnic" && $2 == "lat" { print $3 }' "$med" | sort -n -u)
missing=0
row() { printf '%-28s %10s %10s %10s   %-18s %s\n' "$@"; }
echo "usnic beside raw verbs UD (perftest, same Soft-RoCE devices) and btl/tcp (same veth),"
echo "hostA <-> hostB in the VM, one rank per host; medians of $runs rounds. Ratios to raw UD:"
echo "of the medians, and paired (the median of the per-round ratios). Lower latency and higher"
echo "bandwidth are better; raw UD is the device with no MPI above it, the bound to approach."
echo
row "" usnic "raw UD" tcp "usnic / raw UD" "usnic / tcp"
row "" "" "" "" "(paired)" ""
for s in $sizes; do
    u=$(get usnic lat "$s" 6) r=$(get rawud lat "$s" 6) t=$(get tcp lat "$s" 6)
    [ -n "$u" ] && [ -n "$t" ] || missing=1
    p=$(paired lat "$s" "$s" 8)
    row "latency $(label "$s") (µs)" "$(fmt "$u")" "$(fmt "$r")" "$(fmt "$t")" \
        "$(ratio "$u" "$r")${p:+ ($p)}" "$(ratio "$u" "$t")"
done
# the raw device's bandwidth is that of its largest message, the MTU
rbw=$(awk '$1 == "rawud" && $2 == "bw" && $3 + 0 > s + 0 { s = $3 } END { print s }' "$med")
for s in $sizes; do
    [ "$s" -ge 65536 ] || continue
    u=$(get usnic bw "$s" 8) r=$(get rawud bw "$rbw" 8) t=$(get tcp bw "$s" 8)
    [ -n "$u" ] && [ -n "$r" ] && [ -n "$t" ] || missing=1
    p=$(paired bw "$s" "$rbw" 10)
    row "bandwidth $(label "$s") (MB/s)" "$(fmt "$u")" "$(fmt "$r")*" "$(fmt "$t")" \
        "$(ratio "$u" "$r")${p:+ ($p)}" "$(ratio "$u" "$t")"
done
u=$(get usnic bw 8 9) r=$(get rawud bw 8 9) t=$(get tcp bw 8 9)
[ -n "$u" ] && [ -n "$r" ] && [ -n "$t" ] || missing=1
p=$(paired bw 8 8 11)
row "8 B message rate (msg/s)" "$(fmt "$u")" "$(fmt "$r")" "$(fmt "$t")" \
    "$(ratio "$u" "$r")${p:+ ($p)}" "$(ratio "$u" "$t")"
r=$(get rawudw bw 8 9)
[ -n "$r" ] || missing=1
p=$(paired bw 8 8 11 rawudw)
row "  raw UD in the same windows" "" "$(fmt "$r")" "" "$(ratio "$u" "$r")${p:+ ($p)}" ""
echo "* raw UD: $(label "$rbw") messages (UD sends at most one MTU); usnic and tcp stream the size named."
echo "Raw UD's message rate: perftest keeps 128 sends in flight; in the same windows (bench/rawud.c) it"
echo "sends mpibench's windows of 64, each answered by 4 bytes, as usnic's rate is measured."

# usnic's own counters, from the final statistics lines of its jobs (both hosts)
read -r resent data timer fast spur jobs < <(cat "$d"/raw/usnic-r*.txt 2>/dev/null | awk '
    /btl:usnic: stats final/ { for (i = 1; i <= NF; i++) { split($i, kv, "="); v[kv[1]] += kv[2] } }
    /btl:usnic: stats final/ { n++ }
    END { printf "%d %d %d %d %d %d\n", v["num_resends"], v["num_frag_sends"] + v["num_chunk_sends"],
          v["num_timeout_retrans"], v["num_fast_retrans"], v["num_spurious_timeouts"], n }')
if [ "$jobs" = 0 ] || [ "$data" = 0 ]; then
    echo "main-summary: no usnic statistics in $d/raw" >&2
    exit 1
fi
per=$(awk -v r="$resent" -v d="$data" 'BEGIN { printf "%.2f", r * 1e4 / d }')
echo
echo "usnic retransmits on this lossless link (its statistics, $runs jobs): $resent resent of $data data"
echo "datagrams, $per per 10^4 ($timer at the timer, $fast fast; $spur timeouts found spurious and undone)."

# what else ran: the VM's two vCPUs need two host CPUs of their own
if [ -s "$d/host-load.txt" ]; then
    awk -v c="$(nproc)" '{ s += $1; n++; if (n == 1 || $1 < lo) lo = $1; if ($1 > hi) hi = $1 }
        END { printf "Host load while the VM ran: %.1f-%.1f (mean %.1f) on %d CPUs%s\n", lo, hi, s / n, c,
              (s / n > 1.5 ? ": other work slowed the emulated hosts, compare ratios only" : "") }' \
        "$d/host-load.txt"
fi
if grep -q 'changed during the run' "$d/component.txt" 2>/dev/null; then
    echo "WARNING: the installed mca_btl_usnic.so changed during the run ($d/component.txt)"
fi

# one-line reading against the targets
l8=$(paired lat 8 8 8) b1=$(paired bw 1048576 "$rbw" 10)
echo
awk -v l="$l8" -v lt="$LAT_TARGET" -v b="$b1" -v bt="$BW_TARGET" -v r="$per" -v rt="$RESEND_TARGET" 'BEGIN {
    printf "Reading: 8 B latency %s x the raw device (target %s: %s); 1 MiB streaming %s of its bandwidth (target %s: %s); retransmits %s per 10^4 (target < %s: %s).\n",
        l, lt, (l != "" && l <= lt ? "met" : "not met"), b, bt, (b != "" && b >= bt ? "met" : "not met"),
        r, rt, (r < rt ? "met" : "not met") }'
[ "$missing" = 0 ] || { echo "main-summary: some figures are missing (see $d/results.md)" >&2; exit 1; }
