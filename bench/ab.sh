#!/bin/bash
# bench/ab.sh [--vm] [--rounds N] [--tests T] [--sizes S] [--mtu M] [--loss PCT] [--out DIR] A.so B.so: two builds of
# mca_btl_usnic.so measured against each other in the native world (tools/netns-world: 2 hosts,
# usnic over UDP), in paired interleaved rounds (default 6; A then B in odd rounds, B then A in
# even ones), so that each round's ratio B / A pairs two runs taken under the same conditions.
# Each run is one job of bench/mpibench.c (-t T, default bw; -S S, default 65536,1048576,4194304;
# -T 1500 -W 300 -n 20 -N 10000), one rank per host, each pinned to a CPU of its own, as
# bench/native.sh's p2p job; each build from a private component directory (as USNIC_SO).
# --loss PCT: every job runs with PCT% of what hostA sends dropped (netem on its veth, or an
# nftables egress rule where the kernel has no netem; as bench/native.sh --loss).
# --vm: the same rounds in one boot of the rxe-vm VM instead (usnic over verbs on Soft-RoCE),
# as bench/in-vm-bench.sh runs its usnic job: ranks not bound, under SCHED_IDLE, mpibench's
# budget -T 300 -W 60; the builds' component directories below the checkout, which the guest
# shares (not with --mtu or --loss).
# Writes DIR/results.md (default bench/results/ab): per test and size the median of each
# build and the paired ratios B / A of every round (for bw and mr: rate; for lat: time, both
# the median iteration and the mean one, which counts every loss's recovery), and
# DIR/raw/ (every job's output). The commit message or a doc says what A and B are.
# Exits non-zero if a job failed or a figure is missing.
# SPDX-License-Identifier: BSD-3-Clause
set -u
cd "$(dirname "$0")/.." || exit 2
REPO=$PWD

if [ "${1:-}" = --in-world ] || [ "${1:-}" = --in-vm ]; then
    world=$1
    shift
    rounds=$1 tests=$2 sizes=$3 out=$4 comps=$5 loss=$6
    if [ "$world" = --in-vm ]; then
        # shellcheck source=/dev/null
        . /run/rxevm/env || exit 2
        bin=$(mktemp -d /tmp/usnic-ab.XXXXXX) || exit 2
    else
        # shellcheck source=/dev/null
        . "$NETNS_WORLD_ENV" || exit 2
        bin=$comps
    fi
    mpicc -O2 -Wall -o "$bin/mpibench" bench/mpibench.c || exit 1
    if [ "$loss" != 0 ] &&
       ! ip netns exec nsA tc qdisc replace dev vethA root netem loss "$loss%" 2>/dev/null; then
        ip netns exec nsA nft -f - <<EOF || exit 2
table netdev usnic_ab_loss {
    chain egress {
        type filter hook egress device vethA priority 0;
        numgen random mod 100000 < $(awk -v p="$loss" 'BEGIN { printf "%d", p * 1000 }') drop
    }
}
EOF
    fi
    fails=0
    for r in $(seq 1 "$rounds"); do
        order="A B"; [ $((r % 2)) = 0 ] && order="B A"
        for v in $order; do
            f=$out/raw/$v-r$r.txt
            if [ "$world" = --in-vm ]; then
                args=(-t "$tests" -S "$sizes" -T 300 -W 60 -n 20 -N 10000)
                onhost A chrt --idle 0 timeout -k 10 600 \
                    mpirun --allow-run-as-root --bind-to none \
                    --mca mca_base_component_path "$comps/$v" \
                    --mca plm_rsh_agent rxevm-rsh --mca oob_tcp_if_include "$RXEVM_NET.0/24" \
                    --mca pml ob1 --mca btl usnic,self --mca btl_usnic_stats 100000 \
                    -np 2 --host hostA:1,hostB:1 "$bin/mpibench" "${args[@]}" > "$f" 2>&1
            else
                args=(-t "$tests" -S "$sizes" -T 1500 -W 300 -n 20 -N 10000)
                OMPI_MCA_mca_base_component_path=$comps/$v onhost A timeout -k 10 300 \
                    mpirun --allow-run-as-root --bind-to none -x OMPI_MCA_mca_base_component_path \
                    --mca plm_rsh_agent "$RXEVM_RSH" --mca oob_tcp_if_include "$RXEVM_NET.0/24" \
                    --mca pml ob1 --mca btl usnic,self --mca btl_usnic_transport udp \
                    -np 1 --host hostA taskset -c 0 "$bin/mpibench" "${args[@]}" \
                    : -np 1 --host hostB taskset -c 1 "$bin/mpibench" "${args[@]}" > "$f" 2>&1
            fi
            rc=$?
            echo "ab: round $r $v rc=$rc"
            [ "$rc" = 0 ] || fails=$((fails + 1))
        done
    done
    exit $((fails > 0))
fi

rounds=6 tests=bw sizes=65536,1048576,4194304 mtu=9000 loss=0 out=$REPO/bench/results/ab vm=0
while [ $# -gt 2 ]; do
    case $1 in
        --vm) vm=1; shift ;;
        --rounds) rounds=$2; shift 2 ;;
        --tests) tests=$2; shift 2 ;;
        --sizes) sizes=$2; shift 2 ;;
        --mtu) mtu=$2; shift 2 ;;
        --loss) loss=$2; shift 2 ;;
        --out) out=$2; shift 2 ;;
        *) echo "ab.sh: unknown option $1" >&2; exit 2 ;;
    esac
done
if [ $# != 2 ] || [ ! -f "$1" ] || [ ! -f "$2" ]; then
    echo "usage: bench/ab.sh [--vm] [--rounds N] [--tests T] [--sizes S] [--mtu M] [--loss PCT] [--out DIR] A.so B.so" >&2
    exit 2
fi
if [ "$vm" = 1 ] && { [ "$mtu" != 9000 ] || [ "$loss" != 0 ]; }; then
    echo "ab.sh: --vm takes no --mtu or --loss" >&2
    exit 2
fi
out=$(realpath -m "$out")
case $out/ in
    "$REPO"/*) ;;
    *) [ "$vm" = 1 ] && { echo "ab.sh: --vm writes only below the checkout (--out)" >&2; exit 2; } ;;
esac
# (--vm: below the checkout, which the guest shares read-write)
if [ "$vm" = 1 ]; then
    comps=$(mktemp -d "$REPO/.ab-vm.XXXXXX") || exit 2
else
    comps=$(mktemp -d /tmp/usnic-ab.XXXXXX) || exit 2
fi
trap 'rm -rf "$comps"' EXIT
pkglib=$(ompi_info --path pkglibdir --parsable | cut -d: -f3)
for v in A B; do
    mkdir "$comps/$v"
    for f in "$pkglib"/*; do
        case ${f##*/} in mca_btl_usnic.*) ;; *) ln -s "$f" "$comps/$v/" ;; esac
    done
done
cp "$1" "$comps/A/mca_btl_usnic.so" && cp "$2" "$comps/B/mca_btl_usnic.so" || exit 2
rm -rf "$out/raw" && mkdir -p "$out/raw" || exit 2
if [ "$vm" = 1 ]; then
    RXE_VM_RW=$REPO RXE_VM_TIMEOUT=$((rounds * 1200 + 600)) \
        tools/rxe-vm/rxe-vm "$0" --in-vm "$rounds" "$tests" "$sizes" "$out" "$comps" 0
    rc=$?
    world="the rxe-vm VM (Soft-RoCE, verbs), ranks under SCHED_IDLE, not bound"
    kernel="$(uname -r) on the host, 2 vCPUs"
else
    tools/netns-world/netns-world -n 2 --mtu "$mtu" \
        "$0" --in-world "$rounds" "$tests" "$sizes" "$out" "$comps" "$loss"
    rc=$?
    world="native world of 2 hosts, MTU $mtu, each rank pinned to a CPU"
    kernel="$(uname -r), $(nproc) CPUs"
fi

# the report: per test and size, each round's figure of A and B (rate: MB/s for bw, msg/s for
# mr; time: the median half round trip for lat, and the mean for `lat mean`), B / A per
# round, their medians
{
    echo "# A/B: $(basename "$1") (A) against $(basename "$2") (B)"
    echo
    echo "bench/ab.sh, $(date -u +%Y-%m-%dT%H:%MZ), source $(git log -1 --format='%h %cI'), $rounds paired"
    echo "rounds (A then B in odd rounds, B then A in even ones), $world,"
    echo "kernel $kernel; A sha256 $(sha256sum "$1" | cut -c1-16), B sha256"
    echo "$(sha256sum "$2" | cut -c1-16). bench/mpibench.c -t $tests -S $sizes, one rank per host;"
    echo "$loss% of what hostA sends dropped."
    echo "B / A > 1: B is faster (for lat, the ratio is A / B: time; lat: the median iteration,"
    echo "lat mean: the mean one, which counts every recovery from a loss)."
    echo
    echo "| test | size | A median | B median | B / A per round | median B / A |"
    echo "|---|---:|---:|---:|---|---:|"
    awk -v rounds="$rounds" -v raw="$out/raw" '
        function med(a, n,   i, j, t) {
            for (i = 1; i <= n; ++i) for (j = i + 1; j <= n; ++j) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
            return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
        }
        BEGIN {
            for (r = 1; r <= rounds; ++r) for (v = 0; v < 2; ++v) {
                f = raw "/" (v ? "B" : "A") "-r" r ".txt"
                while ((getline line < f) > 0) {
                    n = split(line, w, " ")
                    if (w[1] !~ /^(bw|mr|lat)$/ || n < 9) continue
                    key = w[1] " " w[2]
                    if (!(key in seen)) { seen[key] = 1; keys[++nk] = key }
                    val[key, r, v] = w[1] == "bw" ? w[8] : (w[1] == "mr" ? w[9] : w[6])
                    if (w[1] != "lat") continue
                    key = "lat-mean " w[2]
                    if (!(key in seen)) { seen[key] = 1; keys[++nk] = key }
                    val[key, r, v] = w[5]
                }
                close(f)
            }
            for (k = 1; k <= nk; ++k) {
                key = keys[k]; split(key, kw, " "); per = ""; m = 0; bad = 0
                for (r = 1; r <= rounds; ++r) {
                    a = val[key, r, 0]; b = val[key, r, 1]
                    if (a == "" || b == "" || a == 0 || b == 0) { bad = 1; continue }
                    ++m; ra[m] = a; rb[m] = b
                    q[m] = kw[1] ~ /^lat/ ? a / b : b / a
                    per = per (per == "" ? "" : " ") sprintf("%.2f", q[m])
                }
                if (bad) { print "missing figures for " key > "/dev/stderr"; missing = 1 }
                if (m == 0) continue
                printf "| %s | %s | %.4g | %.4g | %s | **%.2f** |\n", kw[1] == "lat-mean" ? "lat mean" : kw[1], kw[2], med(ra, m), med(rb, m), per, med(q, m)
            }
            exit missing
        }'
} > "$out/results.md" || rc=1
cat "$out/results.md"
exit "$rc"
