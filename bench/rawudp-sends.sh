#!/bin/bash
# bench/rawudp-sends.sh [--rounds N] [--out DIR]: what the way of sending costs raw UDP itself,
# in a native world of 2 hosts (MTU 9000): bench/rawudp.c's stream (-t bw) at 8 B and 1 MiB,
# as it is (sendmmsg batches of 64 on a connected socket), with one datagram per call (-b 1),
# with one per call naming the peer's address (-b 1 -a: as usnic sends, one socket for
# every peer), and with the batches' runs of equal datagrams as UDP_SEGMENT messages (-g: as
# usnic's UDP device sends a batch), the four in turn in each of N rounds (default 3; the
# order rotates). Writes
# DIR/results.md (default bench/results/rawudp-sends): per variant and size the median rate
# and each round's ratio to the unchanged stream of the same round; the outputs in DIR/raw/.
# SPDX-License-Identifier: BSD-3-Clause
set -u
cd "$(dirname "$0")/.." || exit 2
VARIANTS=("batch64:" "one:-b 1" "one-named:-b 1 -a" "segmented:-g")

if [ "${1:-}" = --in-world ]; then
    rounds=$2 out=$3 bin=$4
    fails=0
    for r in $(seq 1 "$rounds"); do
        for k in 0 1 2 3; do
            v=${VARIANTS[$(((k + r - 1) % 4))]}
            name=${v%%:*} args=${v#*:}
            onhost B timeout 120 "$bin" -r -p 7777 -k 100 > /dev/null 2>&1 &
            sleep 0.5
            # shellcheck disable=SC2086 # the variant's options are words
            onhost A timeout 120 "$bin" -c hostB -p 7777 -k 100 -q -t bw -S 8,1048576 \
                -T 1000 -W 200 $args > "$out/raw/$name-r$r.txt" 2>&1 || fails=$((fails + 1))
            wait
        done
    done
    exit $((fails > 0))
fi

rounds=3 out=bench/results/rawudp-sends
while [ $# -gt 0 ]; do
    case $1 in
        --rounds) rounds=$2; shift 2 ;;
        --out) out=$2; shift 2 ;;
        *) echo "usage: bench/rawudp-sends.sh [--rounds N] [--out DIR]" >&2; exit 2 ;;
    esac
done
bin=$(mktemp /tmp/rawudp.XXXXXX) || exit 2
trap 'rm -f "$bin"' EXIT
cc -O2 -Wall -o "$bin" bench/rawudp.c || exit 1
rm -rf "$out/raw" && mkdir -p "$out/raw" || exit 2
tools/netns-world/netns-world -n 2 --mtu 9000 "$0" --in-world "$rounds" "$out" "$bin"
rc=$?
{
    echo "# Raw UDP by way of sending"
    echo
    echo "bench/rawudp-sends.sh, $(date -u +%Y-%m-%dT%H:%MZ), source $(git log -1 --format=%h), $rounds"
    echo "rounds, native world of 2 hosts, MTU 9000, kernel $(uname -r), $(nproc) CPUs."
    echo "\`rawudp -t bw\`: batch64 as bench/native.sh runs it, one = \`-b 1\`, one-named ="
    echo "\`-b 1 -a\`, segmented = \`-g\`. Rate: MB/s at 1 MiB, datagrams/s at 8 B; ratio: to batch64 of the"
    echo "same round."
    echo
    echo "| variant | size | median rate | per round / batch64 | median ratio |"
    echo "|---|---:|---:|---|---:|"
    awk -v rounds="$rounds" -v raw="$out/raw" '
        function med(a, n,   i, j, t) {
            for (i = 1; i <= n; ++i) for (j = i + 1; j <= n; ++j) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
            return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
        }
        BEGIN {
            nv = split("batch64 one one-named segmented", v, " ")
            for (r = 1; r <= rounds; ++r) for (i = 1; i <= nv; ++i) {
                f = raw "/" v[i] "-r" r ".txt"
                while ((getline line < f) > 0) {
                    n = split(line, w, " ")
                    if (w[1] == "bw" && n >= 9) val[v[i], w[2], r] = w[2] == 8 ? w[9] : w[8]
                }
                close(f)
            }
            for (i = 1; i <= nv; ++i) for (s = 1; s <= 2; ++s) {
                size = s == 1 ? 8 : 1048576; per = ""; m = 0
                for (r = 1; r <= rounds; ++r) {
                    x = val[v[i], size, r]; b = val["batch64", size, r]
                    if (x == "" || b == "") { bad = 1; continue }
                    ++m; xs[m] = x; q[m] = x / b
                    per = per (per == "" ? "" : " ") sprintf("%.2f", q[m])
                }
                if (m > 0) printf "| %s | %d | %.0f | %s | %.2f |\n", v[i], size, med(xs, m), per, med(q, m)
            }
            exit bad
        }'
} > "$out/results.md" || rc=1
cat "$out/results.md"
exit "$rc"
