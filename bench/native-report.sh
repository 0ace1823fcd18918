#!/bin/bash
# bench/native-report.sh OUTDIR: turn the raw outputs of bench/native.sh in OUTDIR into
#   all.tsv, medians.tsv   every result line; the median over the rounds of each column
#   results.md      the targets of issue 28 against the per-round paired ratios, tables by
#                   size, usnic's retransmit counters, raw UDP's losses, run times
#   latency.png, bandwidth.png (gnuplot), and the .dat files they are drawn from
# Exits 1 if a benchmark failed or an expected number is missing (fewer rounds than
# planned, or not positive), 2 on bad usage.
# SPDX-License-Identifier: BSD-3-Clause
set -euo pipefail
out=$(readlink -f "${1:?usage: bench/native-report.sh OUTDIR}")
plan=$out/plan.txt
[ -f "$plan" ] || { echo "native-report: no $plan" >&2; exit 2; }
planval() { sed -n "s/^$1 //p" "$plan"; }
rounds=$(planval rounds) sizes=$(planval sizes) usnic=$(planval usnic) loss=$(planval loss)
loss_sizes=$(planval loss_sizes)

# all.tsv: TRANSPORT ROUND KEY SIZE ITERS WINDOW MEAN_US MEDIAN_US MIN_US MB/S MSG/S from
# raw/TRANSPORT-JOB-rROUND.txt; KEY is the test (lat, bw) for job p2p, else the job
for f in "$out"/raw/*-r[0-9]*.txt; do
    [ -e "$f" ] || continue
    b=${f##*/}; b=${b%.txt}
    tr=${b%%-*} run=${b##*-r} jobname=${b#*-}; jobname=${jobname%-r*}
    awk -v tr="$tr" -v run="$run" -v job="$jobname" '
        $1 ~ /^(lat|bw|mr|a2a)$/ && NF == 9 && $2 ~ /^[0-9]+$/ {
            print tr, run, (job == "p2p" ? $1 : job), $2, $3, $4, $5, $6, $7, $8, $9 }' "$f"
done > "$out/all.tsv"

# shellcheck source=bench/report-lib.sh
. "$(dirname "$0")/report-lib.sh"
medians 3
# pratio TR-A KEY-A TR-B KEY-B SIZE COLUMN(7 mean|8 median|9 min|10 MB/s|11 msg/s): A / B
# paired round by round: "MEDIAN MIN MAX N" over the rounds that have both, empty if none
pratio() {
    awk -v ta="$1" -v ka="$2" -v tb="$3" -v kb="$4" -v s="$5" -v c="$6" '
        $4 == s && $1 == ta && $3 == ka { a[$2] = $c }
        $4 == s && $1 == tb && $3 == kb { b[$2] = $c }
        END {
            for (r in a) if ((r in b) && b[r] + 0 > 0) v[++n] = a[r] / b[r]
            if (!n) exit
            for (i = 2; i <= n; i++) { t = v[i]; for (j = i - 1; j >= 1 && v[j] > t; j--) v[j + 1] = v[j]; v[j + 1] = t }
            printf "%.3f %.3f %.3f %d\n", (n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2), v[1], v[n], n }' \
        "$out/all.tsv"
}
# pfmt "MEDIAN MIN MAX N": "0.97 (0.91-1.02)", "–" if empty
pfmt() {
    [ -n "$1" ] || { echo "–"; return; }
    awk -v p="$1" 'BEGIN { split(p, a, " "); printf "%.2f (%.2f-%.2f)\n", a[1], a[2], a[3] }'
}
fmt() {
    awk -v v="$1" 'BEGIN {
        if (v == "") { print "–"; exit }
        v += 0
        if (v >= 100) printf "%.0f\n", v; else if (v >= 10) printf "%.1f\n", v
        else if (v >= 1) printf "%.2f\n", v; else printf "%.3g\n", v }'
}
human() {
    awk -v s="$1" 'BEGIN {
        if (s >= 1048576 && s % 1048576 == 0) print s / 1048576 " MiB"
        else if (s >= 1024 && s % 1024 == 0) print s / 1024 " KiB"
        else print s " B" }'
}
# verdict "MEDIAN ..." OP BOUND: PASS when the median of the paired ratios meets the bound
verdict() {
    [ -n "$1" ] || { echo "not measured"; return; }
    awk -v p="$1" -v op="$2" -v b="$3" 'BEGIN { split(p, a, " "); m = a[1] + 0
        ok = (op == "<=" ? m <= b : op == "<" ? m < b : op == ">=" ? m >= b : m > b)
        print (ok ? "**PASS**" : "**FAIL**") }'
}

# --- completeness
missing=()
expect() { # TRANSPORT KEY SIZES...
    local t=$1 x=$2 s n v; shift 2
    for s; do
        n=$(get "$t" "$x" "$s" n) v=$(get "$t" "$x" "$s" rate)
        if [ -z "$n" ] || [ "$n" -lt "$rounds" ] ||
           ! awk -v v="$v" 'BEGIN { exit !(v + 0 > 0) }'; then
            missing+=("$t $x $s (${n:-0} of $rounds rounds)")
        fi
    done
}
trs="rawudp tcp"
[ "$usnic" = 1 ] && trs="usnic rawudp tcp"
for t in $trs; do
    # shellcheck disable=SC2086
    expect "$t" lat $sizes
    # shellcheck disable=SC2086
    expect "$t" bw $sizes
    expect "$t" mr1 8
    expect "$t" mr4 8
    [ "$t" = rawudp ] || expect "$t" a2a 65536
done
# shellcheck disable=SC2086
expect rawseg bw $sizes
if [ "$usnic" = 1 ] && [ "$loss" != 0 ]; then
    # shellcheck disable=SC2086
    expect usnic bwref $loss_sizes
    # shellcheck disable=SC2086
    expect usnic bwloss $loss_sizes
fi
failed=$(grep ' rc=' "$out/status.txt" 2>/dev/null | grep -v ' rc=0 ' || true)
status_ok=1
[ -s "$out/status.txt" ] || { status_ok=0; failed="no status.txt: the world did not run"; }
[ -n "$failed" ] && status_ok=0

# --- plots
dat() { # FILE KEY COLUMN
    local s t v line
    for s in $sizes; do
        line=$s
        for t in usnic rawudp tcp; do
            v=$(get "$t" "$2" "$s" "$3")
            line="$line ${v:--}"
        done
        echo "$line"
    done > "$1"
}
dat "$out/latency.dat" lat median
dat "$out/latency-min.dat" lat min
dat "$out/bandwidth.dat" bw mbs
mtu=$(planval mtu) cpus=$(planval cpus)
if command -v gnuplot > /dev/null; then
    gnuplot <<EOF || echo "native-report: gnuplot failed" >&2
set terminal pngcairo size 1100,700 font ",12" noenhanced
set datafile missing "-"
set logscale x 2
set logscale y
set grid xtics ytics mytics
set key top left box opaque
set xlabel "message size (bytes)"
set xtics ("8" 8, "64" 64, "256" 256, "1K" 1024, "4K" 4096, "16K" 16384, \
           "64K" 65536, "256K" 262144, "1M" 1048576, "4M" 4194304)
set xrange [6:6e6]
set style line 1 lw 2 pt 7 ps 1.2 lc rgb "#d62728"
set style line 2 lw 2 pt 5 ps 1.2 lc rgb "#1f77b4"
set style line 3 lw 2 pt 9 ps 1.2 lc rgb "#2ca02c"
set style line 4 lw 1 dt 2 pt 6 ps 1 lc rgb "#d62728"
set style line 5 lw 1 dt 2 pt 4 ps 1 lc rgb "#1f77b4"
set style line 6 lw 1 dt 2 pt 8 ps 1 lc rgb "#2ca02c"
set output "$out/latency.png"
set title "Ping-pong latency, hostA <-> hostB (network namespaces, veth + bridge, MTU $mtu, $cpus CPUs), median of $rounds round(s)"
set ylabel "half round trip (us)"
set format y "%g"
plot "$out/latency.dat" using 1:2 with linespoints ls 1 title "MPI over usnic, UDP transport (ob1): median", \
     "" using 1:3 with linespoints ls 2 title "raw UDP sockets (bench/rawudp.c): median", \
     "" using 1:4 with linespoints ls 3 title "MPI over btl/tcp: median", \
     "$out/latency-min.dat" using 1:2 with lines ls 4 title "usnic: minimum", \
     "" using 1:3 with lines ls 5 title "raw UDP: minimum", \
     "" using 1:4 with lines ls 6 title "tcp: minimum"
set output "$out/bandwidth.png"
set title "Streaming bandwidth, hostA -> hostB (network namespaces, MTU $mtu, $cpus CPUs), median of $rounds round(s)"
set ylabel "MB/s (10^6 B/s)"
plot "$out/bandwidth.dat" using 1:2 with linespoints ls 1 title "MPI over usnic, UDP transport: window of Isends", \
     "" using 1:3 with linespoints ls 2 title "raw UDP: windowed stream, bytes that arrived", \
     "" using 1:4 with linespoints ls 3 title "MPI over btl/tcp: window of Isends"
EOF
fi

# stats_sum JOB-GLOB: usnic's "stats final" counters summed over the processes of the
# matching usnic jobs: "DATA RESENDS TIMER FAST DUPS TOTAL"
stats_sum() {
    # shellcheck disable=SC2086
    { cat $1 2>/dev/null || true; } | awk '
        /btl:usnic: stats final/ {
            for (i = 1; i <= NF; i++) if (split($i, kv, "=") == 2) sum[kv[1]] += kv[2]
            n++ }
        END { if (!n) exit
              printf "%d %d %d %d %d %d\n", sum["num_frag_sends"] + sum["num_chunk_sends"],
                  sum["num_resends"], sum["num_timeout_retrans"], sum["num_fast_retrans"],
                  sum["num_dup_recvs"] + sum["num_oow_low_recvs"], sum["num_total_sends"] }'
}
per10k() { awk -v r="$1" -v d="$2" 'BEGIN { if (d + 0 > 0) printf "%.2f\n", 1e4 * r / d; else print "–" }'; }

# --- results.md
lat8_raw=$(pratio usnic lat rawudp lat 8 8) lat8_tcp=$(pratio usnic lat tcp lat 8 8)
mr1=$(pratio usnic mr1 tcp mr1 8 11) mr4=$(pratio usnic mr4 tcp mr4 8 11)
a2a=$(pratio usnic a2a tcp a2a 65536 8)
lossless=$(stats_sum "$out/raw/usnic-p2p-r*.txt $out/raw/usnic-mr[14]-r*.txt $out/raw/usnic-a2a-r*.txt $out/raw/usnic-bwref-r*.txt")
{
    echo "# Native benchmarks $(sed -n 's/^run: //p' "$out/component.txt" 2>/dev/null)"
    echo
    echo "$(planval hosts) hosts as network namespaces of one machine (tools/netns-world/netns-world: veth pairs"
    echo "on one bridge, MTU $mtu, no VM, no RDMA), $cpus CPUs shared by every process of every host,"
    echo "kernel $(planval kernel). Mode \`$(planval mode)\`, $rounds round(s), each round running"
    echo "every transport's jobs in turn (the order rotates from round to round). Every figure is"
    echo "the median over the rounds; \`paired\` ratios are taken round by round and given as"
    echo "median (smallest-largest). MB/s = 10^6 bytes/s."
    echo
    echo "Component benchmarked:"
    echo
    sed 's/^/    /' "$out/component.txt"
    echo
    echo "- **usnic**: \`mpirun --mca pml ob1 --mca btl usnic,self --mca btl_usnic_transport udp\`"
    echo "  (\`,vader\` added for jobs with several ranks per host)."
    echo "- **tcp**: \`--mca pml ob1 --mca btl tcp,self\` (\`,vader\` likewise), same veths."
    echo "- **raw UDP**: \`bench/rawudp.c\`: non-blocking UDP sockets, busy-polled, recvmmsg/"
    echo "  sendmmsg batches of 64, 32 MiB socket buffers, no fragmentation; messages larger than"
    echo "  the path's UDP payload are sequences of full datagrams. Its stream is windowed by the"
    echo "  receiver's acknowledgements so that it cannot overflow the receive buffer, and it counts"
    echo "  only the bytes that arrived."
    echo "- **raw UDP seg**: the same stream with \`-g\`: each batch's runs of equal datagrams"
    echo "  are one UDP_SEGMENT message, which the kernel cuts into the same datagrams, as usnic's"
    echo "  UDP device sends a batch (since 1a718c0): the limit of usnic's streams on these sockets."
    echo "- MPI programs: \`bench/mpibench.c\` ($(planval mpibench_args)). Latency: half the round trip,"
    echo "  median iteration. Bandwidth: windows of up to 64 Isends (at most 4 MiB per window), each"
    echo "  answered by a 4-byte ack. Message rate: 8 B, windows of 64, 1 pair (one rank per host)"
    echo "  or 4 pairs (4 ranks per host, rank i of hostA to rank i of hostB; with more busy"
    echo "  processes than CPUs, MPI runs with \`mpi_yield_when_idle 1\` and raw UDP with \`-y\`)."
    echo "  All-to-all: MPI_Alltoall, 64 KiB to every rank, 8 ranks on 4 hosts, time per call."
    echo
    if [ "$status_ok" = 1 ] && [ ${#missing[@]} = 0 ]; then
        echo "All benchmarks ran and produced numbers."
    else
        echo "**FAILURES**"
        echo
        [ -n "$failed" ] && while IFS= read -r l; do echo "- failed: $l"; done <<< "$failed"
        for m in "${missing[@]}"; do echo "- missing: $m"; done
    fi
    [ "$usnic" = 1 ] || { echo; echo "**usnic not measured**: the installed component has no UDP transport (or --no-usnic)."; }
    echo
    echo "## Targets (issue 28)"
    echo
    echo "Judged on the median of the per-round paired ratios."
    echo
    echo "| target | measured (paired: median (min-max)) | verdict |"
    echo "|---|---|---|"
    echo "| 8 B latency <= 1.15 x raw UDP | usnic / raw UDP $(pfmt "$lat8_raw") | $(verdict "$lat8_raw" "<=" 1.15) |"
    echo "| 8 B latency below tcp | usnic / tcp $(pfmt "$lat8_tcp") | $(verdict "$lat8_tcp" "<" 1) |"
    echo "| 8 B message rate >= tcp, 1 pair | usnic / tcp $(pfmt "$mr1") | $(verdict "$mr1" ">=" 1) |"
    echo "| 8 B message rate >= tcp, 4 pairs | usnic / tcp $(pfmt "$mr4") | $(verdict "$mr4" ">=" 1) |"
    for s in 1048576 4194304; do
        p=$(pratio usnic bw tcp bw "$s" 10) q=$(pratio usnic bw rawudp bw "$s" 10)
        echo "| $(human "$s") streaming >= 0.9 x tcp | usnic / tcp $(pfmt "$p") | $(verdict "$p" ">=" 0.9) |"
        echo "| $(human "$s") streaming >= 0.8 x raw UDP | usnic / raw UDP $(pfmt "$q") | $(verdict "$q" ">=" 0.8) |"
        q=$(pratio usnic bw rawseg bw "$s" 10)
        echo "| $(human "$s") streaming >= 0.8 x raw UDP seg | usnic / raw UDP seg $(pfmt "$q") | $(verdict "$q" ">=" 0.8) |"
    done
    echo "| all-to-all, 8 ranks / 4 hosts, 64 KiB: no slower than tcp | time usnic / tcp $(pfmt "$a2a") | $(verdict "$a2a" "<=" 1) |"
    if [ -n "$lossless" ]; then
        read -r d rs _ <<< "$lossless"
        echo "| lossless: <= 0.1 retransmits per 10^4 datagrams | $rs resent of $d data datagrams: $(per10k "$rs" "$d") per 10^4 (every lossless usnic job, start-up and finalize included) | $(awk -v r="$rs" -v d="$d" 'BEGIN { print (d > 0 && 1e4 * r / d <= 0.1 ? "**PASS**" : "**FAIL**") }') |"
    else
        echo "| lossless: <= 0.1 retransmits per 10^4 datagrams | no statistics lines | not measured |"
    fi
    if [ "$loss" != 0 ] && [ "$usnic" = 1 ]; then
        for s in $loss_sizes; do
            p=$(pratio usnic bwloss usnic bwref "$s" 10)
            echo "| $loss% loss on one link keeps >= 0.7 of lossless bandwidth, $(human "$s") | lossy / lossless $(pfmt "$p") | $(verdict "$p" ">=" 0.7) |"
        done
    else
        echo "| 1% loss on one link keeps >= 0.7 of lossless bandwidth | no loss runs in this mode | not measured |"
    fi
    echo
    echo "## Latency (µs, half round trip, median iteration)"
    echo
    echo "Ratio > 1: usnic is slower."
    echo
    echo "| size | usnic | raw UDP | tcp | paired usnic / raw UDP | paired usnic / tcp | usnic min | raw UDP min | tcp min |"
    echo "|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    for s in $sizes; do
        echo "| $(human "$s") | $(fmt "$(get usnic lat "$s" median)") | $(fmt "$(get rawudp lat "$s" median)") |" \
             "$(fmt "$(get tcp lat "$s" median)") | $(pfmt "$(pratio usnic lat rawudp lat "$s" 8)") |" \
             "$(pfmt "$(pratio usnic lat tcp lat "$s" 8)") | $(fmt "$(get usnic lat "$s" min)") |" \
             "$(fmt "$(get rawudp lat "$s" min)") | $(fmt "$(get tcp lat "$s" min)") |"
    done
    echo
    echo "## Streaming bandwidth (MB/s, hostA -> hostB)"
    echo
    echo "Ratio < 1: usnic is slower. \`raw win\`: raw UDP's window (datagrams)."
    echo
    echo "| size | usnic | raw UDP | raw UDP seg | tcp | paired usnic / raw UDP | paired usnic / raw UDP seg | paired usnic / tcp | paired tcp / raw UDP | raw win |"
    echo "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    for s in $sizes; do
        echo "| $(human "$s") | $(fmt "$(get usnic bw "$s" mbs)") | $(fmt "$(get rawudp bw "$s" mbs)") |" \
             "$(fmt "$(get rawseg bw "$s" mbs)") |" \
             "$(fmt "$(get tcp bw "$s" mbs)") | $(pfmt "$(pratio usnic bw rawudp bw "$s" 10)") |" \
             "$(pfmt "$(pratio usnic bw rawseg bw "$s" 10)") |" \
             "$(pfmt "$(pratio usnic bw tcp bw "$s" 10)") | $(pfmt "$(pratio tcp bw rawudp bw "$s" 10)") |" \
             "$(get rawudp bw "$s" win) |"
    done
    echo
    echo "## 8 B message rate (messages/s, all pairs)"
    echo
    echo "| pairs | usnic | raw UDP | tcp | paired usnic / tcp | paired usnic / raw UDP |"
    echo "|---:|---:|---:|---:|---:|---:|"
    for k in mr1 mr4; do
        echo "| ${k#mr} | $(fmt "$(get usnic "$k" 8 rate)") | $(fmt "$(get rawudp "$k" 8 rate)") |" \
             "$(fmt "$(get tcp "$k" 8 rate)") | $(pfmt "$(pratio usnic "$k" tcp "$k" 8 11)") |" \
             "$(pfmt "$(pratio usnic "$k" rawudp "$k" 8 11)") |"
    done
    echo
    echo "## All-to-all (8 ranks on 4 hosts, 64 KiB to every rank; µs per MPI_Alltoall)"
    echo
    echo "| | usnic | tcp | paired usnic / tcp |"
    echo "|---|---:|---:|---:|"
    echo "| median | $(fmt "$(get usnic a2a 65536 median)") | $(fmt "$(get tcp a2a 65536 median)") | $(pfmt "$(pratio usnic a2a tcp a2a 65536 8)") |"
    echo "| mean | $(fmt "$(get usnic a2a 65536 mean)") | $(fmt "$(get tcp a2a 65536 mean)") | $(pfmt "$(pratio usnic a2a tcp a2a 65536 7)") |"
    if [ "$loss" != 0 ] && [ "$usnic" = 1 ]; then
        echo
        echo "## Streaming under loss (usnic, MB/s)"
        echo
        echo "Each round: a lossless run, then one with $loss% of what hostA sends dropped"
        echo "($(planval loss_kind) on vethA's egress: data from A, ACKs from B get through)."
        echo
        echo "| size | lossless | $loss% loss | paired lossy / lossless |"
        echo "|---:|---:|---:|---:|"
        for s in $loss_sizes; do
            echo "| $(human "$s") | $(fmt "$(get usnic bwref "$s" mbs)") | $(fmt "$(get usnic bwloss "$s" mbs)") |" \
                 "$(pfmt "$(pratio usnic bwloss usnic bwref "$s" 10)") |"
        done
    fi
    if [ "$usnic" = 1 ]; then
        echo
        echo "## usnic retransmit counters"
        echo
        echo "Per job kind, from the final statistics lines (\`btl_usnic_stats\`), summed over the"
        echo "processes and rounds: \`data\` datagrams sent (fragments and chunks), segments"
        echo "\`resent\`, of them by the \`timer\` and \`fast\` retransmit, duplicates received."
        echo
        echo "| jobs | data | resent | per 10^4 | timer | fast | dups | all datagrams sent |"
        echo "|---|---:|---:|---:|---:|---:|---:|---:|"
        for k in p2p mr1 mr4 a2a bwref bwloss; do
            v=$(stats_sum "$out/raw/usnic-$k-r*.txt")
            [ -n "$v" ] || continue
            read -r d rs ti fa du to <<< "$v"
            echo "| $k | $d | $rs | $(per10k "$rs" "$d") | $ti | $fa | $du | $to |"
        done
        echo
        echo "Per job and size (mpibench's MPI_T counters around each size, warm-up included,"
        echo "summed over ranks and rounds; \`win full\`: segments that filled their send window;"
        echo "\`waits / proofs\`: reported holes that waited for a late original, and resends proven"
        echo "needless by one, the reordering window's counters; 0 where the run's mpibench did not read them):"
        echo
        echo "| job | test | size | data | resent | per 10^4 | timer | fast | dups | win full | waits / proofs |"
        echo "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
        for f in "$out"/raw/usnic-*-r[0-9]*.txt; do
            [ -e "$f" ] || continue
            j=${f##*/usnic-}
            awk -v job="${j%-r*}" '$1 == "usnic" && $2 ~ /^(lat|bw|mr|a2a)$/ { print job, $0 }' "$f"
        done | awk '
            {
                k = $1 " " $3 " " $4
                if (!(k in seen)) { seen[k] = 1; order[++n] = k }
                for (i = 5; i <= NF; i++) if (split($i, kv, "=") == 2) v[k, kv[1]] += kv[2] }
            END {
                for (i = 1; i <= n; i++) {
                    k = order[i]; split(k, p, " ")
                    printf "| %s | %s | %s | %d | %d | %.2f | %d | %d | %d | %d | %d / %d |\n", p[1], p[2],
                           p[3], v[k, "data"], v[k, "resends"],
                           v[k, "data"] ? 1e4 * v[k, "resends"] / v[k, "data"] : 0,
                           v[k, "timer"], v[k, "fast"], v[k, "dups"], v[k, "wfull"],
                           v[k, "waits"], v[k, "proofs"] } }'
    fi
    echo
    echo "## Raw UDP: what was lost"
    echo
    echo "Datagrams the raw UDP streams sent and the receiver counted (all rounds); \`stalls\`:"
    echo "times the sender saw no acknowledgement for 200 ms (and wrote its window off); \`retries\`: ping-pongs resent."
    echo
    echo "| test | size | sent | delivered | lost | stalls |"
    echo "|---|---:|---:|---:|---:|---:|"
    { cat "$out"/raw/rawudp-*-r[0-9]*.txt "$out"/raw/rawseg-*-r[0-9]*.txt 2>/dev/null || true; } | awk '
        $1 == "rawudp" && ($2 == "bw" || $2 == "mr") {
            k = $2 " " $3
            if (!(k in seen)) { seen[k] = 1; order[++n] = k }
            for (i = 4; i <= NF; i++) if (split($i, kv, "=") == 2) v[k, kv[1]] += kv[2] }
        $1 == "rawudp" && $2 == "lat" { split($4, kv, "="); retries += kv[2] }
        END {
            for (i = 1; i <= n; i++) {
                k = order[i]; split(k, p, " ")
                printf "| %s | %s | %d | %d | %d | %d |\n", p[1], p[2], v[k, "sent"], v[k, "delivered"],
                       v[k, "lost"], v[k, "stalls"] }
            printf "\nPing-pong retries (all sizes and rounds): %d\n", retries }'
    echo
    echo "## Run times (seconds, mpirun start-up included)"
    echo
    echo "| job | exit | seconds |"
    echo "|---|---:|---:|"
    [ -f "$out/status.txt" ] && awk '/ rc=[0-9]+ [0-9]+s$/ {
        sub(/^rc=/, "", $2); sub(/s$/, "", $3); print "| " $1 " | " $2 " | " $3 " |" }' "$out/status.txt"
    sed -n 's/^\(.*killed leftover.*\)$/- \1/p' "$out/status.txt" 2>/dev/null || true
    if [ -s "$out/host-load.txt" ]; then
        echo
        awk '{ n++; s += $1; if (n == 1 || $1 > max) max = $1; if (n == 1 || $1 < min) min = $1 }
             END { printf "Machine load (1-minute load average every 10 s during the run, %d samples): ", n
                   printf "min %.2f, mean %.2f, max %.2f on %s CPUs; the benchmarks themselves keep\n", min, s / n, max, cpus
                   print "2 busy (4 pairs and all-to-all: 8); anything beyond that is other load on the machine." }' \
            cpus="$cpus" "$out/host-load.txt"
    fi
    [ -f "$out/times.txt" ] && { echo; cat "$out/times.txt"; }
    echo
    echo "Raw outputs: \`raw/TRANSPORT-JOB-rROUND.txt\` (mpibench or rawudp lines, usnic's statistics"
    echo "lines). \`bench/native-report.sh DIR\` regenerates this page and the plots from them and"
    echo "the other \`.txt\` files."
} > "$out/results.md"

if [ "$status_ok" = 0 ] || [ ${#missing[@]} -gt 0 ]; then
    [ -n "$failed" ] && while IFS= read -r l; do echo "native-report: failed: $l" >&2; done <<< "$failed"
    for m in "${missing[@]}"; do echo "native-report: missing: $m" >&2; done
    exit 1
fi
exit 0
