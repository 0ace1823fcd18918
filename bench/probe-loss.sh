#!/bin/bash
# bench/probe-loss.sh [--rounds N] [--loss PCT] [--so FILE] [--out DIR] | --report DIR: loss
# recovery with the retransmit timer's probes on and off (btl_usnic_timer_probe 1 / 0), paired
# round by round, in the native world (2 hosts, usnic over UDP). Each round runs t-faults' 30%
# loss case (PCT, default 30) once with each setting, in alternating order
# (test/native/bench-probeloss.sh: p2p with 1 rank per host, faultmix with 3; loss in both
# directions, so data, ACKs, probes and their answers are all lost). Probes act only before
# a device has seen a loss; this measures what they cost where losses are many.
# Per workload the report gives: the median program time of each setting; the ratio probe
# on / off of the summed times and the geometric mean of the per-round ratios, each with a
# 95% bootstrap interval (2000 resamples of the rounds); the rounds in which probes were
# slower; probes per job; and the jobs in which a host's retransmit timeout rose above
# 10 ms (max_rto_us: from round-trip samples or a late peer's floor; 5 ms is the default floor).
# --so FILE: that build of mca_btl_usnic.so (as test/native/run.sh's USNIC_SO), else the
# installed one. Default: 24 rounds (about 15 minutes), DIR bench/results/probe-loss.
# Writes DIR/results.md and DIR/raw/probeloss.txt (the probeloss: lines, bench-probeloss.sh),
# DIR/raw/world.log. --report DIR: the report again from DIR/raw/probeloss.txt.
# SPDX-License-Identifier: BSD-3-Clause
set -u
cd "$(dirname "$0")/.." || exit 2
rounds=24 loss=30 so="" out=bench/results/probe-loss report_only=0
while [ $# -gt 0 ]; do
    case $1 in
        --rounds) rounds=${2:-}; shift 2 ;;
        --loss) loss=${2:-}; shift 2 ;;
        --so) so=${2:-}; shift 2 ;;
        --out) out=${2:-}; shift 2 ;;
        --report) report_only=1 out=${2:-}; shift 2 ;;
        -h|--help) sed -n '2,19s/^# \{0,1\}//p' "$0"; exit 0 ;;
        *) echo "usage: bench/probe-loss.sh [--rounds N] [--loss PCT] [--so FILE] [--out DIR]" \
                "| --report DIR" >&2; exit 2 ;;
    esac
done
[[ $rounds =~ ^[1-9][0-9]*$ ]] || { echo "probe-loss.sh: --rounds needs a positive number" >&2; exit 2; }
[[ $loss =~ ^[1-9][0-9]?$ ]] || { echo "probe-loss.sh: --loss needs a percentage 1-99" >&2; exit 2; }
[ -n "$out" ] || { echo "probe-loss.sh: --out needs a directory" >&2; exit 2; }
raw=$out/raw/probeloss.txt

if [ "$report_only" = 0 ]; then
    mkdir -p "$out/raw" || exit 2
    logs=$(mktemp -d /tmp/usnic-probeloss.XXXXXX) || exit 2
    trap 'rm -rf "$logs"' EXIT
    src="$(git log -1 --format='%h %cI' 2>/dev/null) $(git status --porcelain -uno 2>/dev/null |
        grep -q . && echo '(uncommitted changes)')"
    started=$(date -u +%Y-%m-%dT%H:%MZ)
    PROBELOSS_ROUNDS=$rounds PROBELOSS_LOSS=$loss% NATIVE_LOGS=$logs USNIC_SO=$so \
        test/native/run.sh bench-probeloss > "$out/raw/world.log" 2>&1
    rc=$?
    grep '^probeloss: ' "$logs/bench-probeloss.log" > "$raw"
    {
        echo "# bench/probe-loss.sh, $started, source $src, $rounds rounds, $loss% loss"
        echo "# build: ${so:-the installed component} (sha256 $(sha256sum "${so:-$(ompi_info \
            --path pkglibdir --parsable | cut -d: -f3)/mca_btl_usnic.so}" | cut -c1-16))"
        cat "$raw"
    } > "$raw.new" && mv "$raw.new" "$raw"
    [ "$rc" = 0 ] || { echo "probe-loss.sh: the world run failed ($out/raw/world.log)" >&2; exit 1; }
fi
[ -s "$raw" ] || { echo "probe-loss.sh: no results in $raw" >&2; exit 1; }

{
    echo "# Loss recovery with timer probes on and off"
    echo
    sed -n 's/^# //p' "$raw"
    echo
    echo "Program time (s) of each job, paired per round; ratio > 1: probes made it slower."
    echo "\`raised\`: jobs (of each setting) in which a host's retransmit timeout rose above 10 ms."
    echo
    echo "| workload | rounds | off: median | on: median | on / off, summed (95%) | on / off, geometric mean (95%) | slower with probes | probes per job | raised off / on |"
    echo "|---|---:|---:|---:|---|---|---:|---|---|"
    for w in p2p faultmix; do
        awk -v w="$w" '
            function ratio_of(idx, n,   i, a, b, l) {
                a = b = l = 0
                for (i = 1; i <= n; i++) { a += on[idx[i]]; b += off[idx[i]]; l += log(on[idx[i]] / off[idx[i]]) }
                sum_r = a / b; geo_r = exp(l / n)
            }
            function sort(x, n,   i, j, t) {
                for (i = 2; i <= n; i++) for (j = i; j > 1 && x[j - 1] > x[j]; j--) { t = x[j]; x[j] = x[j - 1]; x[j - 1] = t }
            }
            function median(x, n) { sort(x, n); return n % 2 ? x[(n + 1) / 2] : (x[n / 2] + x[n / 2 + 1]) / 2 }
            function raised(   i, kv, ab) {
                for (i = 5; i <= NF; i++) if (split($i, kv, "=") == 2 && kv[1] == "max_rto_us") {
                    split(kv[2], ab, "/"); return ab[1] > 10000 || ab[2] > 10000 }
                return 0
            }
            function field(name,   i, kv, ab) {
                for (i = 5; i <= NF; i++) if (split($i, kv, "=") == 2 && kv[1] == name) {
                    split(kv[2], ab, "/"); return ab[1] + ab[2] }
                return 0
            }
            $1 == "probeloss:" && $4 == w && $5 != "none" {
                if ($3 == 1) { on[$2] = $5; pr[$2] = field("num_timer_probes"); ron += raised() }
                else { off[$2] = $5; roff += raised() }
            }
            END {
                n = 0
                for (r in on) if (r in off) { n++; idx[n] = r }
                if (n == 0) { printf "| %s | 0 | | | | | | | |\n", w; exit }
                for (i = 1; i <= n; i++) { xo[i] = off[idx[i]]; xn[i] = on[idx[i]]; xp[i] = pr[idx[i]]
                                           slower += on[idx[i]] > off[idx[i]] }
                ratio_of(idx, n); s0 = sum_r; g0 = geo_r
                srand(1)
                for (b = 1; b <= 2000; b++) {
                    for (i = 1; i <= n; i++) pick[i] = idx[1 + int(rand() * n)]
                    ratio_of(pick, n); bs[b] = sum_r; bg[b] = geo_r
                }
                sort(bs, 2000); sort(bg, 2000)
                sort(xp, n)
                printf "| %s | %d | %.2f | %.2f | **%.2f** (%.2f-%.2f) | %.2f (%.2f-%.2f) | %d of %d | %d-%d (median %s) | %d / %d |\n",
                    w, n, median(xo, n), median(xn, n), s0, bs[50], bs[1950], g0, bg[50], bg[1950],
                    slower, n, xp[1], xp[n], median(xp, n), roff, ron
            }' "$raw"
    done
} > "$out/results.md"
cat "$out/results.md"
