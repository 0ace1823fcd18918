#!/bin/bash
# bench/engine.sh [--check] [--update-baseline] [--report-only] [--out DIR]: host benchmark of the
# reliability engine, counted by callgrind (no VM, a few seconds). Builds bench/engine/ (the
# unit tests' fake device and engine world driven by an ob1-like caller) and runs it under
# valgrind --tool=callgrind. Counted: everything executed inside the BTL entry points
# (btl_sendi, btl_prepare_src, btl_send, btl_get, btl_put) and opal_btl_usnic_module_progress,
# libc, opal and libevent included, except the fake device (its post, repost and poll functions,
# the network between the two modules) and the test PML's callbacks (receive, send, GET and PUT
# done).
# Writes to DIR (default bench/results/engine):
#   results.md        instructions per 8 B message, per idle and per waiting progress pass, per 4 KiB chunk
#                     of a send and of a GET's data, per 64 B PUT, the scaling table (1 to 10,000 peers), the most expensive functions
#   counts.txt        the program's own counts per phase (messages, passes, chunks, peers)
#   totals.txt        instructions per phase (callgrind's totals)
#   PHASE.functions.txt   self instructions per function of each phase
# --check: compare the six headline figures with bench/engine-baseline.txt and fail if
# any grew by more than 5%; prints "engine: N passed, N failed" (one per figure).
# --update-baseline: write the figures of this run into bench/engine-baseline.txt.
# --report-only: no run; results.md (and --check) from the counts, totals and function
# lists already in DIR.
# Exits non-zero if the program failed, a count is missing or the accounting is wrong.
# SPDX-License-Identifier: BSD-3-Clause
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=bench/baseline-lib.sh
. bench/baseline-lib.sh
check=0 update=0 report_only=0 out=bench/results/engine
baseline=bench/engine-baseline.txt
while [ $# -gt 0 ]; do
    case $1 in
        --check) check=1 ;;
        --update-baseline) update=1 ;;
        --report-only) report_only=1 ;;
        --out) out=${2:?--out needs a directory}; shift ;;
        -h|--help) sed -n '2,22s/^# \{0,1\}//p' "$0"; exit 0 ;;
        *) echo "usage: bench/engine.sh [--check] [--update-baseline] [--report-only] [--out DIR]" >&2
           exit 2 ;;
    esac
    shift
done
# The counted code: collection toggles on at entry to the BTL's functions and off again
# inside the fake device and the PML callbacks they call (collection is off elsewhere).
# usnic_send* stands for usnic_send and usnic_sendi: callgrind 3.19 ignores
# --toggle-collect=usnic_sendi when usnic_send and another name come after it.
counted=('usnic_send*' usnic_prepare_src opal_btl_usnic_get usnic_put
         opal_btl_usnic_module_progress)
excluded=(fake_poll fake_post_send fake_post_recv fake_reg_mem fake_dereg_mem pml_recv
          pml_send_done pml_get_done pml_put_done)
phases=(ping idle wait chunk get put)
for n in 1 100 1000 10000; do phases+=("scale-$n" "scale-$n-idle"); done

# measure: run the benchmark under callgrind; counts.txt, totals.txt and the function
# lists of every phase into $out
measure() {
    local t tmp f p prof toggles=() bad=0
    for t in valgrind callgrind_annotate; do
        command -v "$t" > /dev/null ||
            { echo "engine.sh: $t not installed (tools/deps.sh)" >&2; return 2; }
    done
    # (errexit does not reach into a function called as a condition)
    make -s -C bench/engine > /dev/null || return 1
    tmp=$(mktemp -d) || return 1
    # shellcheck disable=SC2064 # the directory of this call
    trap "rm -rf '$tmp'" EXIT
    for f in "${counted[@]}" "${excluded[@]}"; do toggles+=("--toggle-collect=$f"); done
    if ! valgrind --tool=callgrind --instr-atstart=no --collect-atstart=no \
            --callgrind-out-file="$tmp/cg.out" "${toggles[@]}" \
            standalone/build/engine/usnic_engine_bench > "$tmp/counts.txt" 2> "$tmp/valgrind.log"
    then
        cat "$tmp/valgrind.log" >&2
        echo "engine.sh: the benchmark failed" >&2
        return 1
    fi
    mkdir -p "$out"
    cp "$tmp/counts.txt" "$out/counts.txt"
    : > "$out/totals.txt"
    for p in "${phases[@]}"; do
        prof=$(grep -l -x "desc: Trigger: Client Request: $p" "$tmp"/cg.out.* || true)
        [ -n "$prof" ] || { echo "engine.sh: no profile of phase $p" >&2; return 1; }
        echo "$p $(awk '/^totals:/ { print $2 }' "$prof")" >> "$out/totals.txt"
        # Self cost per function, summed over the lines callgrind_annotate splits a function
        # into (code inlined from other files), with the function's object where one names it.
        callgrind_annotate --auto=no --inclusive=no --threshold=100 "$prof" 2> /dev/null | awk '
            /^ *[0-9,]+ +\( *[0-9.]+%\) / && !/PROGRAM TOTALS/ {
                v = $1; gsub(",", "", v); f = $0
                sub(/^ *[0-9,]+ +\( *[0-9.]+%\) +/, "", f)
                o = ""
                if (f ~ / \[[^]]*\]$/) {
                    o = f; sub(/.* \[/, "", o); sub(/\]$/, "", o); sub(/ \[[^]]*\]$/, "", f)
                }
                file = f; sub(/:[^:]*$/, "", file); sub(/^.*:/, "", f)
                cost[f] += v
                if (o != "") { sub(/.*\//, "", o); obj[f] = o }
                if (file ~ /(fake_device|engine_world|engine_bench)\.c$/) harness[f] = 1
            }
            END { for (f in cost) printf "%d %s %s%s\n", cost[f], f, (f in obj) ? obj[f] : "?",
                                         (f in harness) ? " HARNESS" : "" }' |
            sort -k1,1nr -k2 > "$out/$p.functions.txt" || return 1
        # Nothing of the harness may have been counted: that would mean the toggles failed.
        if grep -q HARNESS "$out/$p.functions.txt"; then
            echo "engine.sh: phase $p counted code of the fake device or the test PML:" >&2
            grep HARNESS "$out/$p.functions.txt" >&2
            bad=1
        fi
    done
    return "$bad"
}

if [ "$report_only" = 0 ] && ! measure; then
    [ "$check" = 1 ] && echo "engine: 0 passed, 6 failed"
    exit 1
fi

# count PHASE KEY: a count the program printed for a phase
count() {
    awk -v p="$1" -v k="$2" '$1 == "phase" && $2 == p {
        for (i = 3; i <= NF; ++i) { split($i, a, "="); if (a[1] == k) print a[2] } }' \
        "$out/counts.txt"
}
# per TOTAL N: TOTAL / N with one decimal
per() { awk -v t="$1" -v n="$2" 'BEGIN { printf "%.1f", t / n }'; }
total() { awk -v p="$1" '$1 == p { print $2 }' "$out/totals.txt"; }

msgs=$(count ping messages) passes=$(count idle passes) chunks=$(count chunk chunks)
gchunks=$(count get chunks) wpasses=$(count wait passes) nputs=$(count put puts)
for v in "$msgs" "$passes" "$wpasses" "$chunks" "$gchunks" "$nputs"; do
    if [ -z "$v" ] || [ "$v" -le 0 ]; then echo "engine.sh: a count is missing" >&2; exit 1; fi
done
ping=$(per "$(total ping)" "$msgs")
idle=$(per "$(total idle)" "$passes")
wait=$(per "$(total wait)" "$wpasses")
chunk=$(per "$(total chunk)" "$chunks")
get=$(per "$(total get)" "$gchunks")
put=$(per "$(total put)" "$nputs")

# top PHASE N UNITS: the N functions with the highest self cost, per unit
top() {
    awk -v n="$3" -v k="$2" -v t="$(total "$1")" '
        NR <= k { printf "| `%s` | %s | %.1f | %.1f%% |\n", $2, $3, $1 / n, 100 * $1 / t }' \
        "$out/$1.functions.txt"
}
# byobj PHASE UNITS: self cost per object, per unit
byobj() {
    awk -v n="$2" -v t="$(total "$1")" '
        { o = $3; if (o == "usnic_engine_bench") o = "usnic component (linked into the benchmark)"
          c[o] += $1 }
        END { for (o in c) printf "%d|%s\n", c[o], o }' "$out/$1.functions.txt" |
        sort -t'|' -k1,1nr | awk -F'|' -v n="$2" -v t="$(total "$1")" '
        { printf "| %s | %.1f | %.1f%% |\n", $2, $1 / n, 100 * $1 / t }'
}

{
    echo "# Host engine benchmark"
    echo
    echo "\`bench/engine.sh\`, source $(git log -1 --format='%h %cI' 2>/dev/null || echo '?')$(
        git status --porcelain -- 'btl_usnic*' 2>/dev/null | grep -q . && echo ' (sources modified)'),"
    echo "$(valgrind --version). Instruction counts (callgrind Ir) of the real component code"
    echo "between two modules over the fake device of the unit tests. No timer fires and"
    echo "nothing waits for real time; the clock only feeds round-trip samples, which move a"
    echo "phase's total by a few instructions from run to run (0.001% or less)."
    echo
    echo "Counted: everything executed inside \`btl_sendi\`, \`btl_prepare_src\`, \`btl_send\`,"
    echo "\`btl_get\`, \`btl_put\` and \`opal_btl_usnic_module_progress\`, including libc, opal and libevent. Not counted: the"
    echo "fake device's operations (\`fake_post_send\`, \`fake_post_recv\`, \`fake_poll\`, and the registration of a GET's data, \`fake_reg_mem\`, \`fake_dereg_mem\`) and the"
    echo "network that carries datagrams between the modules, which stand in for the verbs glue"
    echo "and the NIC (the component's books above the device table are counted); the test PML's"
    echo "callbacks (\`pml_recv\`, \`pml_send_done\`, \`pml_get_done\`, \`pml_put_done\`); and the PML's own work around the calls"
    echo "(convertor set-up, headers), as in ob1."
    echo
    echo "| figure | instructions | measured over |"
    echo "|---|---:|---|"
    echo "| per 8 B message (btl_sendi with ob1's 14-byte match header + the progress pass that receives it) | **$ping** | $msgs messages, A and B in turn |"
    echo "| per idle progress pass (one module, nothing to do) | **$idle** | $passes passes |"
    echo "| per waiting progress pass (an 8 B message out, its answer not in yet: the retransmit timer runs) | **$wait** | $wpasses passes |"
    echo "| per 4 KiB chunk (64 KiB messages: prepare_src + send, receive, reassembly, ACKs) | **$chunk** | $chunks chunks of $(count chunk messages) messages |"
    echo "| per 4 KiB chunk of GET data (256 KiB GETs, $(count get gets) of them 2 at a time: request, chunks read from the target's memory, placed in the initiator's buffer, ACKs) | **$get** | $gchunks chunks |"
    echo "| per 64 B PUT (btl_put, the target's check and copy, ACKs; $(count put registrations) more registrations on the target, the one written to last) | **$put** | $nputs PUTs, 8 at a time |"
    echo
    echo "An 8 B message costs its sender's \`btl_sendi\` and one progress pass of its receiver"
    echo "(ACKs ride on the replies: $(count ping ack_sends) standalone ACKs in the phase)."
    echo "A real ob1 polls more often; each extra pass costs the idle figure, or the waiting"
    echo "figure while its message is unacknowledged (a ping-pong rank waiting for the reply)."
    echo
    echo "## Scaling: instructions per 8 B message with N peers"
    echo
    echo "Each module has N peers: its partner and N - 1 endpoints made as \`add_procs\` makes"
    echo "them (\`opal_btl_usnic_endpoint_setup\`, the module's hash table and lists, windows"
    echo "resized for N peers) from fake modex records; $(count scale-100 active) of them exchange"
    echo "one message each way before the measurement, the rest stay idle. Then the ping-pong as"
    echo "above, $(count scale-1 messages) messages, then $(count scale-1-idle passes) idle passes."
    echo "\`btl_usnic_peer_timeout\` has its default (30 s), so progress walks all endpoints"
    echo "every 1024 passes (of all modules together). Memory: the module's"
    echo "\`endpoint_bytes\` counter after the measurement, its pooled send tables"
    echo "(\`send_table_bytes\`: held while data is in flight, or free for reuse; per module, not"
    echo "per peer), and the growth of the resident set while the peers were added (under"
    echo "valgrind; includes the proc records, hash table and the bench's own proc objects)."
    echo
    echo "| peers | per message | vs 1 peer | per idle pass | vs 1 peer | endpoint_bytes per peer | send tables (module) | RSS growth per added peer | send window | priority window |"
    echo "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    base=$(per "$(total scale-1)" "$(count scale-1 messages)")
    ibase=$(per "$(total scale-1-idle)" "$(count scale-1-idle passes)")
    for n in 1 100 1000 10000; do
        p=scale-$n
        v=$(per "$(total "$p")" "$(count "$p" messages)")
        i=$(per "$(total "$p-idle")" "$(count "$p-idle" passes)")
        rss=$(count "$p" rss_delta)
        awk -v n="$n" -v v="$v" -v b="$base" -v i="$i" -v ib="$ibase" \
            -v eb="$(count "$p" endpoint_bytes)" -v tb="$(count "$p" send_table_bytes)" \
            -v rss="$rss" \
            -v win="$(count "$p" window)" -v pw="$(count "$p" prio_window)" 'BEGIN {
            printf "| %d | %.1f | %.3f | %.1f | %.3f | %.0f | %d | %s | %d | %d |\n", n, v,
                   v / b, i, i / ib, eb / n, tb,
                   (n > 1 && rss >= 0) ? sprintf("%.0f", rss / (n - 1)) : "–", win, pw }'
    done
    echo
    for p in ping idle wait chunk get put; do
        case $p in
            ping) n=$msgs unit="per message" ;;
            idle) n=$passes unit="per pass" ;;
            wait) n=$wpasses unit="per pass" ;;
            chunk) n=$chunks unit="per chunk" ;;
            get) n=$gchunks unit="per chunk" ;;
            put) n=$nputs unit="per PUT" ;;
        esac
        echo "## $p: where the instructions go ($unit)"
        echo
        echo "| object | instructions $unit | share |"
        echo "|---|---:|---:|"
        byobj "$p" "$n"
        echo
        echo "| function (self cost) | object | instructions $unit | share |"
        echo "|---|---|---:|---:|"
        top "$p" 15 "$n"
        echo
    done
} > "$out/results.md"
echo "engine.sh: per 8 B message $ping, per idle pass $idle, per waiting pass $wait, per 4 KiB chunk $chunk," \
     "per 4 KiB of GET $get, per 64 B PUT $put instructions ($out/results.md)"

if [ "$update" = 1 ]; then
    {
        echo "# Instructions counted by bench/engine.sh (bench/engine.sh --update-baseline);"
        echo "# bench/engine.sh --check fails if a figure grows by more than 5%."
        echo "ping_message $ping"
        echo "idle_pass $idle"
        echo "wait_pass $wait"
        echo "chunk $chunk"
        echo "get_chunk $get"
        echo "put $put"
    } > "$baseline"
    echo "engine.sh: wrote $baseline"
fi
if [ "$check" = 1 ]; then
    [ -f "$baseline" ] || { echo "engine.sh: no $baseline" >&2; echo "engine: 0 passed, 6 failed"; exit 1; }
    baseline_check bench/engine.sh "$baseline" engine ping_message="$ping" idle_pass="$idle" \
        wait_pass="$wait" chunk="$chunk" get_chunk="$get" put="$put"
fi
