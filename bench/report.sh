#!/bin/bash
# bench/report.sh OUTDIR: turn the raw outputs of bench/in-vm-bench.sh in OUTDIR into
#   medians.tsv     per transport, test and size: the median over the runs of each column
#   results.md      tables (sizes, medians, ratios), usnic's retransmit counters, run times,
#                   callgrind instruction counts when present
#   latency.png, bandwidth.png (gnuplot), and the .dat files they are drawn from
# Exits 1 if a benchmark failed or an expected number is missing (0, nan, or fewer runs
# than planned), 2 on bad usage.
# SPDX-License-Identifier: BSD-3-Clause
set -euo pipefail
out=$(readlink -f "${1:?usage: bench/report.sh OUTDIR}")
plan=$out/plan.txt
[ -f "$plan" ] || { echo "report: no $plan" >&2; exit 2; }
planval() { sed -n "s/^$1 //p" "$plan"; }
runs=$(planval runs) sizes=$(planval sizes) mr_sizes=$(planval mr_sizes)
raw_sizes=$(planval raw_sizes) mr_pairs=$(planval mr_pairs)

# all.tsv: TRANSPORT RUN TEST SIZE ITERS WINDOW MEAN_US MEDIAN_US MIN_US MB/S MSG/S, one line per
# result line of every raw output (usnic-r1.txt, usnic-mr-r1.txt, tcp-..., rawud-r1.txt)
for f in "$out"/raw/*-r[0-9]*.txt; do
    [ -e "$f" ] || continue
    b=${f##*/}; b=${b%.txt}
    tr=${b%%-*} run=${b##*-r}
    awk -v tr="$tr" -v run="$run" '
        $1 ~ /^(lat|bw|bibw|mr)$/ && NF == 9 && $2 ~ /^[0-9]+$/ {
            print tr, run, $1, $2, $3, $4, $5, $6, $7, $8, $9 }' "$f"
done > "$out/all.tsv"

# medians.tsv: TRANSPORT TEST SIZE NRUNS MEAN_US MEDIAN_US MIN_US MB/S MSG/S WINDOW (medians
# over the runs)
# shellcheck source=bench/report-lib.sh
. "$(dirname "$0")/report-lib.sh"
medians 2
# pratio TEST SIZE COLUMN(7 mean|8 median|9 min|10 MB/s|11 msg/s) [RAW]: usnic / RAW (default
# rawud: perftest) paired run by run (the same run of the interleaved suite), as "MEDIAN
# (MIN-MAX)" over the runs; "–" if no run has both
pratio() {
    awk -v x="$1" -v s="$2" -v c="$3" -v raw="${4:-rawud}" '
        $3 == x && $4 == s && ($1 == "usnic" || $1 == raw) { v[$1, $2] = $c; r[$2] = 1 }
        END {
            for (k in r) if ((("usnic", k) in v) && ((raw, k) in v) && v[raw, k] + 0 > 0)
                a[++n] = v["usnic", k] / v[raw, k]
            if (!n) { print "–"; exit }
            for (i = 2; i <= n; i++) { t = a[i]; for (j = i - 1; j >= 1 && a[j] > t; j--) a[j + 1] = a[j]; a[j + 1] = t }
            m = n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
            printf "%.2f (%.2f-%.2f)\n", m, a[1], a[n] }' "$out/all.tsv"
}
# fmt VALUE: a number with 3 significant digits at least, "–" if missing
fmt() {
    awk -v v="$1" 'BEGIN {
        if (v == "") { print "–"; exit }
        v += 0
        if (v >= 100) printf "%.0f\n", v; else if (v >= 10) printf "%.1f\n", v
        else if (v >= 1) printf "%.2f\n", v; else printf "%.3g\n", v }'
}
# ratio A B: A/B with 2 decimals, "–" if either is missing or B is 0
ratio() {
    awk -v a="$1" -v b="$2" 'BEGIN {
        if (a == "" || b == "" || b + 0 == 0) print "–"; else printf "%.2f\n", a / b }'
}
human() {
    awk -v s="$1" 'BEGIN {
        if (s >= 1048576 && s % 1048576 == 0) print s / 1048576 " MiB"
        else if (s >= 1024 && s % 1024 == 0) print s / 1024 " KiB"
        else print s " B" }'
}

# --- completeness: every planned number is there, from every run, and positive
missing=()
expect() { # TRANSPORT TEST SIZES...
    local t=$1 x=$2 s n v; shift 2
    for s; do
        n=$(get "$t" "$x" "$s" n) v=$(get "$t" "$x" "$s" rate)
        if [ -z "$n" ] || [ "$n" -lt "$runs" ] ||
           ! awk -v v="$v" 'BEGIN { exit !(v + 0 > 0) }'; then
            missing+=("$t $x $s (${n:-0} of $runs runs)")
        fi
    done
}
for t in usnic tcp; do
    for x in lat bw bibw; do
        # shellcheck disable=SC2086
        expect "$t" "$x" $sizes
    done
    # shellcheck disable=SC2086
    expect "$t" mr $mr_sizes
done
# shellcheck disable=SC2086
expect rawud lat $raw_sizes
# shellcheck disable=SC2086
expect rawud bw $raw_sizes
# shellcheck disable=SC2086
expect rawudw bw $raw_sizes
for n in $(planval scaling_ranks_per_host); do
    for ((r = 1; r <= runs; r++)); do
        grep -qs '^scaling ranks' "$out/raw/scaling-n$((2 * n))-r$r.txt" ||
            missing+=("scaling $((2 * n)) ranks (run $r)")
    done
done
failed=$(grep ' rc=' "$out/status.txt" 2>/dev/null | grep -v ' rc=0 ' || true)
status_ok=1
[ -s "$out/status.txt" ] || { status_ok=0; failed="no status.txt: the VM run did not start"; }
[ -n "$failed" ] && status_ok=0

# --- plot data: SIZE usnic rawud tcp ("-" = missing)
dat() { # FILE TEST COLUMN TRANSPORTS...
    local f=$1 x=$2 c=$3 s t v line; shift 3
    for s in $sizes; do
        line=$s
        for t; do
            v=$(get "$t" "$x" "$s" "$c")
            line="$line ${v:--}"
        done
        echo "$line"
    done > "$f"
}
dat "$out/latency.dat" lat median usnic rawud tcp
dat "$out/latency-min.dat" lat min usnic rawud tcp
dat "$out/bandwidth.dat" bw mbs usnic rawud tcp
dat "$out/bibw.dat" bibw mbs usnic tcp
if command -v gnuplot > /dev/null; then
    # shellcheck disable=SC2016
    gnuplot <<EOF || echo "report: gnuplot failed" >&2
set terminal pngcairo size 1100,700 font ",12" noenhanced
set datafile missing "-"
set logscale x 2
set logscale y
set grid xtics ytics mytics
set key top left box opaque
set xlabel "message size (bytes)"
set xtics ("1" 1, "4" 4, "16" 16, "64" 64, "256" 256, "1K" 1024, "4K" 4096, "16K" 16384, \
           "64K" 65536, "256K" 262144, "1M" 1048576, "4M" 4194304)
set xrange [0.7:6e6]
set style line 1 lw 2 pt 7 ps 1.2 lc rgb "#d62728"
set style line 2 lw 2 pt 5 ps 1.2 lc rgb "#1f77b4"
set style line 3 lw 2 pt 9 ps 1.2 lc rgb "#2ca02c"
set style line 4 lw 2 dt 2 pt 6 ps 1.2 lc rgb "#d62728"
set style line 5 lw 2 dt 2 pt 8 ps 1.2 lc rgb "#2ca02c"
set style line 6 lw 2 dt 2 pt 4 ps 1.2 lc rgb "#1f77b4"
set output "$out/latency.png"
set title "Ping-pong latency, hostA <-> hostB (rxe in a TCG VM), median of $runs run(s)"
set ylabel "half round trip (us)"
set format y "%g"
plot "$out/latency.dat" using 1:2 with linespoints ls 1 title "MPI over usnic (ob1, btl usnic,self): median", \
     "" using 1:3 with linespoints ls 2 title "raw verbs UD (ib_send_lat -c UD, <= 4096 B): median", \
     "" using 1:4 with linespoints ls 3 title "MPI over btl/tcp (same veth): median", \
     "$out/latency-min.dat" using 1:2 with lines ls 4 title "usnic: minimum", \
     "" using 1:3 with lines ls 6 title "raw UD: minimum", \
     "" using 1:4 with lines ls 5 title "tcp: minimum"
set output "$out/bandwidth.png"
set key top left box opaque
set title "Bandwidth, hostA <-> hostB (rxe in a TCG VM), median of $runs run(s)"
set ylabel "MB/s (10^6 B/s)"
plot "$out/bandwidth.dat" using 1:2 with linespoints ls 1 title "usnic: streaming (window of Isends)", \
     "" using 1:3 with linespoints ls 2 title "raw verbs UD (ib_send_bw -c UD, <= 4096 B)", \
     "" using 1:4 with linespoints ls 3 title "btl/tcp: streaming", \
     "$out/bibw.dat" using 1:2 with linespoints ls 4 title "usnic: bidirectional (both directions)", \
     "" using 1:3 with linespoints ls 5 title "btl/tcp: bidirectional (both directions)"
EOF
else
    echo "report: gnuplot not installed (tools/deps.sh installs gnuplot-nox): no plots" >&2
fi

# --- results.md
{
    echo "# usnic benchmarks $(sed -n 's/^run: //p' "$out/component.txt" 2>/dev/null | grep . || basename "$out")"
    echo
    echo "hostA <-> hostB in the rxe-vm VM (two network namespaces, Soft-RoCE over one veth pair,"
    echo "$(planval cpus) vCPUs, TCG-emulated, kernel $(planval kernel)). Mode \`$(planval mode)\`,"
    echo "$runs run(s) of everything, interleaved (usnic, tcp, raw UD, usnic, ...); every figure"
    echo "is the median over the runs. MB/s = 10^6 bytes/s."
    if [ -f "$out/component.txt" ]; then
        echo
        echo "Component benchmarked (the VM runs the host's installed files):"
        echo
        sed 's/^/    /' "$out/component.txt"
    fi
    echo
    echo "- **usnic**: \`mpirun --mca pml ob1 --mca btl usnic,self\`, one rank per host, not bound."
    echo "- **tcp**: \`--mca btl tcp,self --mca btl_tcp_if_include 10.88.0.0/24\`, same veth."
    echo "- **raw UD**: perftest \`ib_send_lat\` / \`ib_send_bw -c UD -x 1\` between rxeA and"
    echo "  rxeB (QP numbers exchanged over TCP); UD messages are limited to the MTU (4096 B)."
    echo "- **raw UD, same windows**: \`bench/rawud.c\`, mpibench's bw load over one UD queue pair"
    echo "  per side: windows of 64 sends (each signalled), each answered by 4 bytes."
    echo "- MPI programs: \`bench/mpibench.c\` ($(planval mpibench_args); per size: warm-up, then"
    echo "  as many iterations as fit the time budget). Latency is half the round trip, the median"
    echo "  over the iterations (perftest: \`t_typical\`, its median). Bandwidth: a window of up"
    echo "  to 64 Isends (at most 4 MiB per window) answered by a 4-byte ack; perftest: the"
    echo "  sender's message rate times the size (TX depth 128), counted only when the receiver,"
    echo "  with a buffer posted for every message, reports that all of them arrived."
    echo
    if [ "$status_ok" = 1 ] && [ ${#missing[@]} = 0 ]; then
        echo "All benchmarks ran and produced numbers."
    else
        echo "**FAILURES**"
        echo
        [ -n "$failed" ] && while IFS= read -r l; do echo "- failed: $l"; done <<< "$failed"
        for m in "${missing[@]}"; do echo "- missing: $m"; done
    fi
    echo
    echo "## Latency (µs, half round trip: the median iteration)"
    echo
    echo "Ratio > 1: usnic is slower. The means (OSU's figure) are skewed by long outliers."
    echo
    echo "\`paired\`: usnic / raw UD run by run (both measured in the same round of the interleaved"
    echo "suite), the median over the runs and, in brackets, the smallest and largest: a change"
    echo "that stays inside that range is noise."
    echo
    echo "| size | usnic | raw UD | tcp | usnic / raw UD | paired usnic / raw UD | usnic / tcp | usnic mean | tcp mean |"
    echo "|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    for s in $sizes; do
        u=$(get usnic lat "$s" median) r=$(get rawud lat "$s" median) t=$(get tcp lat "$s" median)
        echo "| $(human "$s") | $(fmt "$u") | $(fmt "$r") | $(fmt "$t") | $(ratio "$u" "$r") |" \
             "$(pratio lat "$s" 8) | $(ratio "$u" "$t") | $(fmt "$(get usnic lat "$s" mean)") |" \
             "$(fmt "$(get tcp lat "$s" mean)") |"
    done
    echo
    echo "## Best-case latency (µs, half round trip: the shortest iteration)"
    echo
    echo "The shortest round trip of each run (perftest: \`t_min\`), the least disturbed by"
    echo "the host's scheduling of the VM's vCPUs: closest to what the software path costs."
    echo
    echo "| size | usnic | raw UD | tcp | usnic / raw UD | paired usnic / raw UD | usnic / tcp |"
    echo "|---:|---:|---:|---:|---:|---:|---:|"
    for s in $sizes; do
        u=$(get usnic lat "$s" min) r=$(get rawud lat "$s" min) t=$(get tcp lat "$s" min)
        echo "| $(human "$s") | $(fmt "$u") | $(fmt "$r") | $(fmt "$t") | $(ratio "$u" "$r") |" \
             "$(pratio lat "$s" 9) | $(ratio "$u" "$t") |"
    done
    echo
    echo "## Bandwidth (MB/s, one direction)"
    echo
    echo "Ratio < 1: usnic is slower. \`win\`: messages per window (usnic and tcp)."
    echo
    echo "| size | win | usnic | raw UD | tcp | usnic / raw UD | paired usnic / raw UD | usnic / tcp | usnic msg/s | raw UD msg/s | tcp msg/s |"
    echo "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    for s in $sizes; do
        u=$(get usnic bw "$s" mbs) r=$(get rawud bw "$s" mbs) t=$(get tcp bw "$s" mbs)
        echo "| $(human "$s") | $(get usnic bw "$s" win) | $(fmt "$u") | $(fmt "$r") | $(fmt "$t") |" \
             "$(ratio "$u" "$r") | $(pratio bw "$s" 10) | $(ratio "$u" "$t") |" \
             "$(fmt "$(get usnic bw "$s" rate)") | $(fmt "$(get rawud bw "$s" rate)") |" \
             "$(fmt "$(get tcp bw "$s" rate)") |"
    done
    echo
    echo "## Small-message streams against raw UD under the same load (messages/s)"
    echo
    echo "The bandwidth test's rates up to the MTU beside raw UD sending the same windows (each"
    echo "of 64 messages, answered by 4 bytes: \`bench/rawud.c\`), the limit of that load on this"
    echo "device; perftest keeps 128 sends in flight without a pause. Ratio < 1: usnic is slower."
    echo
    echo "| size | usnic | raw UD, same windows | perftest | usnic / raw UD, same windows | paired | usnic median window | raw UD median window |"
    echo "|---:|---:|---:|---:|---:|---:|---:|---:|"
    for s in $raw_sizes; do
        case " $sizes " in *" $s "*) ;; *) continue ;; esac
        u=$(get usnic bw "$s" rate) r=$(get rawudw bw "$s" rate)
        echo "| $(human "$s") | $(fmt "$u") | $(fmt "$r") | $(fmt "$(get rawud bw "$s" rate)") |" \
             "$(ratio "$u" "$r") | $(pratio bw "$s" 11 rawudw) |" \
             "$(fmt "$(get usnic bw "$s" median)") µs | $(fmt "$(get rawudw bw "$s" median)") µs |"
    done
    echo
    echo "(median window: the median window's time per message.)"
    echo
    echo "## Bidirectional bandwidth (MB/s, both directions together)"
    echo
    echo "| size | usnic | tcp | usnic / tcp |"
    echo "|---:|---:|---:|---:|"
    for s in $sizes; do
        u=$(get usnic bibw "$s" mbs) t=$(get tcp bibw "$s" mbs)
        echo "| $(human "$s") | $(fmt "$u") | $(fmt "$t") | $(ratio "$u" "$t") |"
    done
    echo
    echo "## Message rate ($mr_pairs pairs, messages/s over all pairs)"
    echo
    echo "$mr_pairs ranks per host (same-host peers over vader), rank i streams to rank i + $mr_pairs"
    echo "on the other host. With 2 vCPUs shared by both hosts, 4 polling ranks oversubscribe"
    echo "the CPUs: these figures measure scheduling as much as the transport."
    echo
    echo "| size | usnic | tcp | usnic / tcp | usnic MB/s | tcp MB/s |"
    echo "|---:|---:|---:|---:|---:|---:|"
    for s in $mr_sizes; do
        u=$(get usnic mr "$s" rate) t=$(get tcp mr "$s" rate)
        echo "| $(human "$s") | $(fmt "$u") | $(fmt "$t") | $(ratio "$u" "$t") |" \
             "$(fmt "$(get usnic mr "$s" mbs)") | $(fmt "$(get tcp mr "$s" mbs)") |"
    done
    echo
    echo "## Scaling: start-up and per-peer memory (bench/scaling.c)"
    echo
    echo "N ranks, half on each host (usnic between the hosts, vader within; beyond 2 ranks the"
    echo "2 vCPUs are oversubscribed). MPI_Init: the slowest rank's; add_procs: the slowest rank's"
    echo "time in usnic's add_procs (MPI_T \`btl_usnic_add_procs_usec\`); endpoints: usnic peers"
    echo "per rank; per-peer memory: \`btl_usnic_endpoint_bytes\` / endpoints after every rank has"
    echo "sent to every other (send tables allocated), the largest over the ranks. Medians over"
    echo "the runs."
    echo
    echo "| ranks | MPI_Init (ms) | add_procs (ms) | usnic peers per rank | bytes per peer | RSS (KiB) |"
    echo "|---:|---:|---:|---:|---:|---:|"
    { cat "$out"/raw/scaling-n*-r*.txt 2>/dev/null || true; } | awk '
        $1 == "scaling" && $2 == "ranks" {
            n = $3; k = ++cnt[n]
            init[n, k] = $5; ap[n, k] = $7; epmin[n, k] = $9; epmax[n, k] = $11
            bpp[n, k] = $13; rss[n, k] = $15 }
        function med(a, n,    v, i, j, t, c) {
            c = cnt[n]
            for (i = 1; i <= c; i++) v[i] = a[n, i]
            for (i = 1; i <= c; i++) for (j = i + 1; j <= c; j++) if (v[j] < v[i]) { t = v[i]; v[i] = v[j]; v[j] = t }
            return c % 2 ? v[(c + 1) / 2] : (v[c / 2] + v[c / 2 + 1]) / 2 }
        END {
            for (n = 1; n <= 4096; n++) {
                if (!(n in cnt)) continue
                printf "| %d | %.0f | %.1f | %s | %.0f | %.0f |\n", n, med(init, n), med(ap, n),
                       (med(epmin, n) == med(epmax, n) ? med(epmin, n) : med(epmin, n) "-" med(epmax, n)),
                       med(bpp, n), med(rss, n) } }'
    echo
    echo "## usnic reliability counters"
    echo
    echo "From the final statistics lines (\`--mca btl_usnic_stats 100000\`), summed over the"
    echo "hosts' processes of each job. \`resent\`: segments sent again; \`timer\`: retransmit-timer"
    echo "expiries; \`fast\`: duplicate-ACK retransmits; \`below win\`: datagrams that arrived"
    echo "again after the first copy had been received (a resend that was not needed);"
    echo "\`dup\`: duplicates inside the window."
    echo
    echo "| job | datagrams sent | resent | resent % | timer | fast | below win | dup | standalone ACKs |"
    echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|"
    for f in "$out"/raw/usnic-*r[0-9]*.txt; do
        [ -e "$f" ] || continue
        b=${f##*/}
        awk -v job="${b%.txt}" '
            /btl:usnic: stats final/ {
                for (i = 1; i <= NF; i++) if (split($i, kv, "=") == 2) sum[kv[1]] += kv[2]
                n++ }
            END {
                if (!n) { printf "| %s | no statistics lines | | | | | | | |\n", job; exit }
                printf "| %s | %d | %d | %.2f | %d | %d | %d | %d | %d |\n", job,
                       sum["num_total_sends"], sum["num_resends"],
                       sum["num_total_sends"] ? 100 * sum["num_resends"] / sum["num_total_sends"] : 0,
                       sum["num_timeout_retrans"], sum["num_fast_retrans"],
                       sum["num_oow_low_recvs"], sum["num_dup_recvs"], sum["num_ack_sends"] }' "$f"
    done
    echo
    echo "Per size (the \`usnic\` lines of mpibench: MPI_T counters read around each size, warm-up"
    echo "included, summed over the ranks and the runs): \`data\` datagrams sent (fragments and"
    echo "chunks), \`timer\` and \`fast\` retransmits and their rate per 10^4 data datagrams,"
    echo "\`dups\`: duplicates received (a resend whose original had arrived), \`spurious\`:"
    echo "timeouts undone on the peer's duplicate report; \`win full\`: segments that filled"
    echo "their send window, after which the sender waits for an ACK; \`waits / proofs\`: reported"
    echo "holes that waited for a late original, and resends proven needless by one (the"
    echo "reordering window's counters). 0 from a component without the counter, or where the"
    echo "run's mpibench did not read it."
    echo
    echo "| test | size | data | timer | fast | per 10^4 | resent | dups | spurious | win full | waits / proofs |"
    echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    { cat "$out"/raw/usnic-r[0-9]*.txt "$out"/raw/usnic-mr-r[0-9]*.txt 2>/dev/null || true; } | awk '
        $1 == "usnic" && $2 ~ /^(lat|bw|bibw|mr)$/ {
            k = $2 " " $3
            if (!(k in seen)) { seen[k] = 1; order[++n] = k }
            for (i = 4; i <= NF; i++) if (split($i, kv, "=") == 2) v[k, kv[1]] += kv[2] }
        END {
            for (i = 1; i <= n; i++) {
                k = order[i]; split(k, p, " ")
                printf "| %s | %s | %d | %d | %d | %.1f | %d | %d | %d | %d | %d / %d |\n", p[1], p[2],
                       v[k, "data"], v[k, "timer"], v[k, "fast"],
                       v[k, "data"] ? 1e4 * (v[k, "timer"] + v[k, "fast"]) / v[k, "data"] : 0,
                       v[k, "resends"], v[k, "dups"], v[k, "spurious"], v[k, "wfull"],
                       v[k, "waits"], v[k, "proofs"] } }'
    echo
    cg=$out/callgrind
    if [ -d "$cg" ]; then
        echo "## Instructions per message (callgrind)"
        echo
        "$(dirname "$0")/callgrind-report.sh" "$cg" || echo "callgrind: no usable profile (see $cg/run.txt)"
        echo
    fi
    echo "## Run times (guest seconds, including mpirun start-up)"
    echo
    echo "| job | exit | seconds |"
    echo "|---|---:|---:|"
    [ -f "$out/status.txt" ] && awk '/ rc=[0-9]+ [0-9]+s$/ {
        sub(/^rc=/, "", $2); sub(/s$/, "", $3); print "| " $1 " | " $2 " | " $3 " |" }' "$out/status.txt"
    sed -n 's/^\(.*killed leftover.*\)$/- \1/p' "$out/status.txt" 2>/dev/null || true
    if [ -s "$out/host-load.txt" ]; then
        echo
        awk '{ n++; s += $1; if (n == 1 || $1 > max) max = $1; if (n == 1 || $1 < min) min = $1 }
             END { printf "Host load (1-minute load average, sampled every 20 s while the VM ran, %d samples): ", n
                   printf "min %.2f, mean %.2f, max %.2f on %s host CPUs. ", min, s / n, max, cpus
                   print "The VM'"'"'s two vCPU threads need two host CPUs of their own; any other load" 
                   print "on the host stretches the guest'"'"'s latencies by host scheduling time slices." }' \
            cpus="$(nproc)" "$out/host-load.txt"
    fi
    [ -f "$out/times.txt" ] && { echo; cat "$out/times.txt"; }
    echo
    echo "Raw outputs: \`raw/\` (\`*-rN.txt\`: mpibench lines and usnic statistics;"
    echo "\`rawud-rN.log\`: perftest's full outputs), \`all.tsv\` (every run), \`medians.tsv\`."
    echo "\`bench/report.sh DIR\` regenerates this page, the plots and the tables from \`raw/*.txt\`,"
    echo "\`callgrind/callgrind.out*\` and the other \`.txt\` files: the run's inputs, which is all"
    echo "git keeps of bench/results/latest (older runs are in its history)."
} > "$out/results.md"

if [ "$status_ok" = 0 ] || [ ${#missing[@]} -gt 0 ]; then
    [ -n "$failed" ] && while IFS= read -r l; do echo "report: failed: $l" >&2; done <<< "$failed"
    for m in "${missing[@]}"; do echo "report: missing: $m" >&2; done
    exit 1
fi
exit 0
