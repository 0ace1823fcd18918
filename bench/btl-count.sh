#!/bin/bash
# bench/btl-count.sh [--check] [--update-baseline] [--report-only] [--out DIR]: instructions
# of the whole BTL per message of a real MPI ping-pong, counted by callgrind on the host (no VM,
# about 15 s). Two ranks of bench/btlcount/btl_count.c run an 8 B ping-pong over usnic in UDP
# mode on the loopback interface (--mca btl usnic,self), both under callgrind, with this
# worktree's standalone/build/mca_btl_usnic.so (a private component directory; nothing is
# installed). Counted: every instruction whose code lies in mca_btl_usnic.so -- Open MPI's
# calls into it (the component progress callback, btl_sendi ...), the device glue (udp_*),
# the engine -- in 2000 round trips after 200 of warm-up; what the .so calls outside
# (libc, system calls, opal, ob1's receive callback) is listed apart. The waiting passes of
# the measured ping-pong (how many depends on the speed of the two ranks under callgrind)
# are taken out at the cost of a waiting pass, measured in a phase of its own, and put back
# in the number a rank makes in the VM (VM_WAIT_PASSES in bench/btl-count-baseline.txt,
# with its source); as there, a pass that finds nothing yields the CPU
# (btl_usnic_yield_when_idle 1).
# A run whose ping-pong was not on the lossless steady path (a resend, a standalone ACK, a
# cut congestion window growing back) is made again, up to 3 attempts.
# Writes to DIR (default bench/results/btl-count): results.md, figures.txt (the figures),
# PHASE.RANK.txt (the parsed profiles: S self cost, C calls, X calls out of the .so),
# stats.txt (usnic's final statistics lines), attempts.txt.
# --check: compare the figures with bench/btl-count-baseline.txt and fail if one grew by more
# than 5%; prints "btlcount: N passed, N failed". --update-baseline: write this run's figures
# into it (VM_WAIT_PASSES kept). --report-only: results.md (and --check) from DIR's files.
# SPDX-License-Identifier: BSD-3-Clause
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=bench/baseline-lib.sh
. bench/baseline-lib.sh
check=0 update=0 report_only=0 out=bench/results/btl-count
baseline=bench/btl-count-baseline.txt
rounds=2000 passes=2000 rto=2000000
figs=(message wait_pass idle_pass real_message)
while [ $# -gt 0 ]; do
    case $1 in
        --check) check=1 ;;
        --update-baseline) update=1 ;;
        --report-only) report_only=1 ;;
        --out) out=${2:?--out needs a directory}; shift ;;
        -h|--help) sed -n '2,20s/^# \{0,1\}//p' "$0"; exit 0 ;;
        *) echo "usage: bench/btl-count.sh [--check] [--update-baseline] [--report-only] [--out DIR]" >&2
           exit 2 ;;
    esac
    shift
done
so=standalone/build/mca_btl_usnic.so
vm_wait=$(awk '$1 == "VM_WAIT_PASSES" { print $2 }' "$baseline" 2> /dev/null || true)
[ -n "$vm_wait" ] || { echo "btl-count.sh: no VM_WAIT_PASSES in $baseline" >&2; exit 2; }

# parse PROFILE: S IR SYSCALLS OBJECT FUNCTION (self cost), C CALLS FUNCTION (calls to it
# from anywhere), X IR SYSCALLS OBJECT FUNCTION (calls from the .so into another object,
# inclusive). Needs --compress-strings=no --compress-pos=no; a cob= names the object of
# the next call only (none: the caller's).
parse() {
    awk '
        function base(o) { sub(/.*\//, "", o); return o }
        /^ob=/ { ob = base(substr($0, 4)); next }
        /^fn=/ { fn = substr($0, 4); next }
        /^cob=/ { cob = base(substr($0, 5)); next }
        /^cfn=/ { cfn = substr($0, 5); next }
        /^calls=/ { split(substr($0, 7), a, " "); ncalls[cfn] += a[1]; incall = 1; next }
        /^[0-9+*-]/ {
            ir = $2 + 0; sc = $3 + 0
            if (incall) {
                to = cob == "" ? ob : cob
                if (ob == "mca_btl_usnic.so" && to != ob) { xi[to " " cfn] += ir; xs[to " " cfn] += sc }
                incall = 0; cob = ""
            } else { si[ob " " fn] += ir; ss[ob " " fn] += sc }
        }
        END {
            for (k in si) print "S", si[k], ss[k], k
            for (k in ncalls) print "C", ncalls[k], k
            for (k in xi) print "X", xi[k], xs[k], k
        }' "$1"
}

# calls FUNCTION PHASE.RANK: how often FUNCTION was called in that profile
calls() { awk -v f="$1" '$1 == "C" && $3 == f { n += $2 } END { print n + 0 }' "$out/$2.txt"; }
# passes PHASE.RANK: calls of usnic's progress callback (the yielding one where idle passes
# yield, as here: btl_usnic_yield_when_idle 1)
passes() {
    echo $(($(calls opal_btl_usnic_component_progress "$1") +
            $(calls opal_btl_usnic_component_progress_yielding "$1")))
}

measure() {
    local t tmp comps f rank attempt steady
    for t in mpicc mpirun valgrind ompi_info; do
        command -v "$t" > /dev/null ||
            { echo "btl-count.sh: $t not installed (tools/deps.sh)" >&2; return 2; }
    done
    [ -f "$so" ] || { echo "btl-count.sh: no $so (make -C standalone)" >&2; return 2; }
    tmp=$(mktemp -d) || return 1
    # shellcheck disable=SC2064 # the directory of this call
    trap "rm -rf '$tmp'" EXIT
    mpicc -O2 -g -Wall -Werror -o "$tmp/btl_count" bench/btlcount/btl_count.c || return 1
    comps=$tmp/components
    mkdir "$comps"
    for f in "$(ompi_info --path pkglibdir --parsable | cut -d: -f3)"/*; do
        case ${f##*/} in mca_btl_usnic.*) ;; *) ln -s "$f" "$comps/" ;; esac
    done
    cp "$so" "$comps/mca_btl_usnic.so"
    for attempt in 1 2 3; do
        run_once "$tmp" "$comps" || return 1
        # The lossless steady path: one datagram per message, and the congestion window open.
        # A run whose window was cut before (a resend at start-up on a loaded host: it then
        # grows back by a call per ACK) measures something else: run it again.
        steady=1
        for rank in 0 1; do
            if [ "$(calls sendmsg "ping.$rank")" != "$rounds" ] ||
               [ "$(calls usnic_tx_cwnd_grow "ping.$rank")" != 0 ]; then
                steady=0
            fi
        done
        [ "$steady" = 1 ] && break
        echo "btl-count.sh: attempt $attempt: the ping-pong was not on the lossless path" \
             "(resends, standalone ACKs or a cut congestion window); usnic's final statistics:" >&2
        grep "stats final" "$tmp/run.log" >&2 || true
    done
    [ "$steady" = 1 ] || { echo "btl-count.sh: no steady ping-pong in 3 attempts" >&2; return 1; }
    echo "$attempt" > "$out/attempts.txt"
    grep "stats final" "$tmp/run.log" | sed 's/^.*btl:usnic: //' > "$out/stats.txt" || true
}

# run_once TMP COMPONENTS: one run, its profiles parsed into $out
run_once() {
    local tmp=$1 comps=$2 rank p prof bad=0
    rm -f "$tmp"/cg.* "$tmp/waited"
    # A retransmit timeout far above the waiting phase's length, so that its passes all
    # wait; the program waits out the ACK hold time it sets (an eighth of it) to send an
    # owed ACK before the idle passes. usnic's statistics once, at the end. Idle passes
    # yield as over Soft-RoCE, whose waiting passes VM_WAIT_PASSES counts: the callback
    # around the pass is then counted in each.
    # (root in CI: mpirun refuses it unless told)
    if ! (cd "$tmp" && mpirun --allow-run-as-root --oversubscribe -np 2 \
            --mca mca_base_component_path "$comps" --mca btl usnic,self \
            --mca btl_usnic_transport udp --mca btl_usnic_if_include lo \
            --mca btl_usnic_retrans_timeout "$rto" --mca btl_usnic_stats 1000000 \
            --mca btl_usnic_yield_when_idle 1 \
            valgrind --tool=callgrind --instr-atstart=no --collect-systime=yes \
            --compress-strings=no --compress-pos=no \
            --callgrind-out-file="$tmp/cg.%q{OMPI_COMM_WORLD_RANK}" \
            ./btl_count "$rounds" "$passes" "$((rto / 8))" "$tmp" > run.log 2>&1) ||
       ! grep -q "^btl_count: ok" "$tmp/run.log"; then
        cat "$tmp/run.log" >&2
        echo "btl-count.sh: the ping-pong failed" >&2
        return 1
    fi
    mkdir -p "$out"
    for rank in 0 1; do
        for p in ping wait idle; do
            [ "$p:$rank" = wait:1 ] && continue
            prof=$(grep -l -x "desc: Trigger: Client Request: $p" "$tmp/cg.$rank".* || true)
            [ -n "$prof" ] || { echo "btl-count.sh: no profile of phase $p, rank $rank" >&2; return 1; }
            parse "$prof" | sort -k2,2nr > "$out/$p.$rank.txt"
            # the parse adds up to callgrind's total
            [ "$(awk '$1 == "S" { t += $2 } END { print t + 0 }' "$out/$p.$rank.txt")" = \
              "$(awk '/^totals:/ { print $2 }' "$prof")" ] ||
                { echo "btl-count.sh: phase $p, rank $rank: self costs do not add up" >&2; bad=1; }
        done
    done
    return "$bad"
}

if [ "$report_only" = 0 ] && ! measure; then
    [ "$check" = 1 ] && echo "btlcount: 0 passed, ${#figs[@]} failed"
    exit 1
fi

# socost PHASE.RANK: self instructions in the .so
socost() { awk '$1 == "S" && $4 == "mca_btl_usnic.so" { n += $2 } END { print n + 0 }' "$out/$1.txt"; }

p0=$(passes ping.0) p1=$(passes ping.1) pw=$(passes wait.0)
pi0=$(passes idle.0) pi1=$(passes idle.1)
s0=$(calls usnic_sendi ping.0) s1=$(calls usnic_sendi ping.1)
# Every message must have gone through usnic's btl_sendi (usnic carried the traffic), and
# the waiting and idle phases must have made the passes asked for.
if [ "$s0" != "$rounds" ] || [ "$s1" != "$rounds" ] || [ "$pw" != "$passes" ] ||
   [ "$pi0" != "$passes" ] || [ "$pi1" != "$passes" ]; then
    echo "btl-count.sh: unexpected counts: btl_sendi $s0 and $s1 (want $rounds)," \
         "passes $pw, $pi0, $pi1 (want $passes)" >&2
    exit 1
fi
# Nothing was sent or received in the waiting and idle phases: a pass that did (a resend,
# an ACK, the barrier) would be neither a waiting nor an idle pass.
for p in wait.0 idle.0 idle.1; do
    if [ "$(calls sendmsg "$p")" != 0 ] || [ "$(calls opal_btl_usnic_recv "$p")" != 0 ]; then
        echo "btl-count.sh: phase ${p%.*} of rank ${p#*.} sent or received datagrams" >&2
        exit 1
    fi
done
msgs=$((2 * rounds))
# passes of the ping-pong that received nothing: all but one per message
nwait=$((p0 + p1 - msgs))
read -r wait_pass idle_pass message raw real_message < <(awk \
    -v ping="$(($(socost ping.0) + $(socost ping.1)))" -v w="$(socost wait.0)" \
    -v i="$(($(socost idle.0) + $(socost idle.1)))" -v pw="$pw" -v pi="$((2 * passes))" \
    -v nw="$nwait" -v m="$msgs" -v vw="$vm_wait" 'BEGIN {
    wp = w / pw; msg = (ping - nw * wp) / m
    printf "%.1f %.1f %.1f %.1f %.1f\n", wp, i / pi, msg, ping / m, msg + vw * wp }')
printf '%s %s\n' message "$message" wait_pass "$wait_pass" idle_pass "$idle_pass" \
    real_message "$real_message" > "$out/figures.txt"

# rows KIND: per message of the ping-pong without its waiting passes, by function (S) or by
# callee of the .so (X): the two ranks' cost less NWAIT times the cost per waiting pass
rows() {
    awk -v kind="$1" -v nw="$nwait" -v pw="$pw" -v m="$msgs" '
        FNR == 1 { f++ }
        $1 == kind && (kind == "X" || $4 == "mca_btl_usnic.so") {
            k = $4 " " $5; if (f < 3) { c[k] += $2; y[k] += $3 } else { w[k] += $2; wy[k] += $3 } }
        END { for (k in c) {
                  v = (c[k] - nw * w[k] / pw) / m; s = (y[k] - nw * wy[k] / pw) / m
                  if (v >= 0.05 || v <= -0.05) printf "%.1f %.2f %s\n", v, s, k } }' \
        "$out/ping.0.txt" "$out/ping.1.txt" "$out/wait.0.txt" | sort -k1,1nr
}
# per-pass rows of the waiting phase (self cost in the .so, or calls out of it)
passrows() {
    awk -v kind="$1" -v pw="$pw" '$1 == kind && (kind == "X" || $4 == "mca_btl_usnic.so") {
        printf "%.1f %.2f %s %s\n", $2 / pw, $3 / pw, $4, $5 }' "$out/wait.0.txt" | sort -k1,1nr
}

{
    echo "# The whole BTL per message of a real ping-pong"
    echo
    echo "\`bench/btl-count.sh\`, source $(git log -1 --format='%h %cI' 2>/dev/null || echo '?')$(
        git status --porcelain -- 'btl_usnic*' 2>/dev/null | grep -q . && echo ' (sources modified)'),"
    echo "$(mpirun --version 2>&1 | head -n 1), $(valgrind --version). Two ranks of"
    echo "\`bench/btlcount/btl_count.c\` on this host, \`--mca btl usnic,self\`, usnic in UDP mode on"
    echo "the loopback interface, both under callgrind; $rounds round trips of 8 B"
    echo "(\`MPI_Send\`, \`MPI_Recv\`) after 200 of warm-up, $msgs messages."
    echo
    echo "Counted: every instruction whose code lies in \`mca_btl_usnic.so\` (callgrind's self"
    echo "cost by object): the component progress callback Open MPI calls, \`btl_sendi\`, the"
    echo "UDP device glue (\`udp_poll\`, \`udp_post_send\`, ...) and the engine. Not counted, listed"
    echo "apart below: what the .so calls in other objects (libc with its system calls, opal,"
    echo "ob1's receive callback) and the kernel's work inside the system calls."
    echo
    echo "| figure | instructions in the .so | from |"
    echo "|---|---:|---|"
    echo "| **per message, real ping-pong with $vm_wait waiting passes per message (the VM's)** | **$real_message** | the next two lines |"
    echo "| per message without its waiting passes (send, the pass that receives, the reply's ACK) | **$message** | the ping-pong's $((p0 + p1)) passes less $nwait waiting ones at the waiting pass's cost, over $msgs messages |"
    echo "| per waiting pass (an 8 B message out and not acknowledged, nothing arrives) | **$wait_pass** | $pw passes of rank 0 while rank 1 waited outside MPI |"
    echo "| per idle pass (nothing outstanding, nothing to acknowledge) | **$idle_pass** | $((2 * passes)) passes, both ranks |"
    echo "| per message as measured here ($(awk -v a="$((p0 + p1))" -v r="$rounds" 'BEGIN { printf "%.1f", a / r }') passes per round trip under callgrind) | $raw | |"
    echo
    echo "The measured run was attempt $(cat "$out/attempts.txt") (a run whose ping-pong resent, sent a"
    echo "standalone ACK or grew a cut congestion window is made again, at most 3 times);"
    echo "usnic's final statistics of it are in \`stats.txt\`."
    echo
    echo "A rank passes through usnic's progress once per \`opal_progress\`; one pass per message"
    echo "receives it, the others find nothing. How many it makes while the other side works"
    echo "depends on the speed of both sides: here, with both ranks under callgrind, rank 0 made"
    echo "$(awk -v a="$p0" -v r="$rounds" 'BEGIN { printf "%.1f", a / r }') and rank 1 $(awk -v a="$p1" -v r="$rounds" 'BEGIN { printf "%.1f", a / r }') passes per round trip. The real figure takes"
    echo "$vm_wait waiting passes per message: $(sed -n 's/^# VM_WAIT_PASSES: //p' "$baseline")"
    echo
    echo "## Per message without its waiting passes, by function (self cost in the .so)"
    echo
    echo "| function | instructions per message |"
    echo "|---|---:|"
    rows S | awk '{ printf "| `%s` | %s |\n", $4, $1 }'
    echo
    echo "## What the .so calls outside itself, per message without its waiting passes"
    echo
    echo "Inclusive instructions of the calls the .so makes into other objects (callgrind counts"
    echo "no kernel instructions; natively, \`clock_gettime\` is no system call but a vDSO"
    echo "read, which valgrind turns into one). ob1's receive callback is the PML's own work."
    echo
    echo "| object | function | instructions per message | system calls per message |"
    echo "|---|---|---:|---:|"
    rows X | awk '{ printf "| %s | `%s` | %s | %s |\n", $3, $4, $1, $2 }'
    echo
    echo "## A waiting pass, by function"
    echo
    echo "| function | instructions in the .so per pass |"
    echo "|---|---:|"
    passrows S | awk '$1 >= 0.1 { printf "| `%s` | %s |\n", $4, $1 }'
    echo
    echo "| called outside the .so | object | instructions per pass | system calls per pass |"
    echo "|---|---|---:|---:|"
    passrows X | awk '$1 >= 0.1 { printf "| `%s` | %s | %s | %s |\n", $4, $3, $1, $2 }'
} > "$out/results.md"
echo "btl-count.sh: per message $real_message instructions in mca_btl_usnic.so with $vm_wait" \
     "waiting passes ($message without them, $wait_pass per waiting pass, $idle_pass per idle" \
     "pass; $out/results.md)"

if [ "$update" = 1 ]; then
    {
        grep '^#\|^VM_WAIT_PASSES' "$baseline"
        for f in "${figs[@]}"; do awk -v k="$f" '$1 == k' "$out/figures.txt"; done
    } > "$baseline.new"
    mv "$baseline.new" "$baseline"
    echo "btl-count.sh: wrote $baseline"
fi
if [ "$check" = 1 ]; then
    pairs=()
    for f in "${figs[@]}"; do
        pairs+=("$f=$(awk -v k="$f" '$1 == k { print $2 }' "$out/figures.txt")")
    done
    baseline_check bench/btl-count.sh "$baseline" btlcount "${pairs[@]}"
fi
