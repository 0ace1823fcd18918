#!/bin/bash
# test/run-all.sh: the project's whole test run (what CI runs, from a fresh clone):
#   deps      tools/deps.sh (packages + VM cache)
#   lint      tools/shellcheck.sh        (shellcheck over every script of the project: no findings;
#             tools/doclinks.sh: every relative link of the Markdown files resolves)
#   build     make -C standalone
#   install   make -C standalone install (into Open MPI's component dir, for the VM tests)
#   unit      make -C standalone check     (prints "unit: N passed, N failed")
#   engine    bench/engine.sh --check      (host engine benchmark under callgrind: each
#             headline instruction count within 5% of bench/engine-baseline.txt;
#             prints "engine: N passed, N failed", results in bench/results/engine-check)
#   btlcount  bench/btl-count.sh --check   (the whole BTL per message of a real 8 B MPI
#             ping-pong over usnic's UDP mode on the loopback, both ranks under callgrind:
#             each figure within 5% of bench/btl-count-baseline.txt; prints
#             "btlcount: N passed, N failed", results in bench/results/btl-count-check)
#   build5, install5, unit5
#             the same three on Open MPI 5.0, in the Debian 13 world (tools/debian13-root.sh,
#             made by deps): `tools/debian13-root.sh run make -C standalone ...`
#   intree    tools/intree-check.sh        (4.1 and 5.0 trees; skipped with USNIC_SKIP_INTREE=1)
#   deb       tools/build-deb.sh --nocheck (the Debian 12 package, lintian clean, for
#             t-debpkg; the unit tests it would repeat ran in the unit step)
#   deb5      tools/build-deb.sh --debian13 --nocheck (the Debian 13 package, Open MPI 5.0,
#             built chrooted in the Debian 13 world; t-debpkg in vm5 tests it)
#   native    test/native/run.sh           (the tests that need no verbs device, in the native
#             world of 2 hosts on this machine, usnic over kernel UDP; prints
#             "native: N passed, N failed"; docs/native-world.md)
#   native4   test/native/run.sh -n 4 --private (the same and the tests of many hosts, 4 hosts,
#             in a private world started beside native's: its step shows the time it ran on
#             after native; prints "native4: N passed, N failed")
#   vm        test/vm/run.sh               (the tests that need the VM's verbs devices;
#             prints "vm: N passed, N failed")
#   vm5       test/vm/run.sh $VM5_TESTS in the Debian 13 world (Open MPI 5.0, where the tests
#             run --mca btl usnic,self,sm), logs in test/vm/logs/ompi5
#   fuzz      make -C test/fuzz run        (libFuzzer on the receive path, USNIC_FUZZ_SECONDS,
#             default 120; started beside vm5, its step shows the time it ran on after vm5)
#   bench     bench/run.sh --quick          (benchmark smoke run, results in bench/results/smoke)
#   nbench    bench/native.sh --quick       (native-world benchmark smoke run: usnic over UDP,
#             tcp, raw UDP; results in bench/results/native-smoke)
# Before the first step it prints each step's expected time: what the last run on this machine
# took (USNIC_RUN_TIMES, default ~/.cache/usnic-run-all.times, written at the end of every
# run), else a default measured on an idle 2-core machine; the summary sets them beside the
# actual times.
# Every step runs even after a failure. A step that prints its own "NAME: N passed, N failed"
# line counts with those numbers, any other step as one test. Ends with the line
# "N passed, N failed" and exits non-zero if anything failed; before it, a failed step's
# FAIL lines (its failed tests and their reasons), so that the end of the output names them.
# SPDX-License-Identifier: BSD-3-Clause
set -u    # not -e: runs every step whatever fails, counts the failures (docs/development.md, Scripts)
cd "$(dirname "$0")/.." || exit 2
OUT=$(mktemp) || exit 2
BG=$(mktemp -d) || exit 2
declare -A bgpid=()
trap 'for p in "${bgpid[@]}"; do kill -TERM -- "-$p" 2>/dev/null; done; rm -rf "$OUT" "$BG"' EXIT
npass=0 nfail=0 table=() failed=()
TIMES=${USNIC_RUN_TIMES:-${XDG_CACHE_HOME:-$HOME/.cache}/usnic-run-all.times}
# seconds per step on an idle 2-core machine with warm caches, from the rehearsal of
# bench/results/ci (deps: a fresh machine's packages, VM image and Debian 13 world take
# several minutes more; intree: its first build of the two trees, about 10 minutes more)
declare -A est=([deps]=240 [lint]=15 [build]=10 [install]=5 [unit]=20 [build5]=10
    [install5]=5 [unit5]=20 [engine]=5 [btlcount]=5 [intree]=60 [fuzz]=5 [deb]=15 [deb5]=15
    [native]=240 [native4]=5 [vm]=675 [vm5]=375 [bench]=85 [nbench]=15)
declare -A took=()
estimate() {
    local from="defaults" name line total=0
    if [ -r "$TIMES" ]; then
        while read -r name line; do
            [[ $line =~ ^[0-9]+$ ]] && est[$name]=$line
        done < "$TIMES"
        from="the run of $(date -r "$TIMES" '+%F %H:%M'), defaults for steps it lacks"
    fi
    echo "=== plan (expected times: $from)"
    # the steps, in order, as this script calls them below
    while read -r name; do
        if [ "$name" = intree ] && [ "${USNIC_SKIP_INTREE:-0}" = 1 ]; then continue; fi
        printf '  %-8s %4dm%02ds\n' "$name" $((${est[$name]:-60} / 60)) $((${est[$name]:-60} % 60))
        total=$((total + ${est[$name]:-60}))
    done < <(sed -n 's/^ *step \([a-z0-9]*\) .*/\1/p' "$0")
    printf '  %-8s %4dm%02ds, until about %s\n' all $((total / 60)) $((total % 60)) \
        "$(date -d "@$(($(date +%s) + total))" +%H:%M)"
}
estimate

# the representative subset that runs on Open MPI 5.0 too
VM5_TESTS=(t-bringup t-p2p t-coll t-osc t-onesided t-faults-mix t-stats t-debpkg t-transport)

# step NAME CMD...: run CMD with its output streamed, time it and count its tests (NAME5, the
# Open MPI 5.0 run of step NAME, prints NAME's counts)
step() {
    local name=$1 t0=$SECONDS rc p f res counts; shift
    echo "=== $name: $*"
    "$@" 2>&1 | tee "$OUT"
    rc=${PIPESTATUS[0]}
    counts=$(grep -E "^${name%5}: [0-9]+ passed, [0-9]+ failed" "$OUT" | tail -n 1)
    if [[ $counts =~ ([0-9]+)\ passed,\ ([0-9]+)\ failed ]]; then
        p=${BASH_REMATCH[1]} f=${BASH_REMATCH[2]}
        [ "$rc" != 0 ] && [ "$f" = 0 ] && f=1   # it failed beyond its own tests (e.g. the VM)
    elif [ "$rc" = 0 ]; then p=1 f=0
    else p=0 f=1
    fi
    res=PASS; [ "$rc" = 0 ] && [ "$f" = 0 ] || res=FAIL
    if [ "$res" = FAIL ]; then
        mapfile -t -O "${#failed[@]}" failed < <(grep -aE '^FAIL' "$OUT" | head -n 40 |
                                                 sed "s/^/$name: /")
    fi
    npass=$((npass + p)) nfail=$((nfail + f))
    [ "$res" = PASS ] && took[$name]=$((SECONDS - t0))    # a failed step may have stopped early
    table+=("$(printf '%-8s %s %5ss  (expected %5ss; %s passed, %s failed)' "$name" "$res" \
        $((SECONDS - t0)) "${est[$name]:-60}" "$p" "$f")")
    echo "--- $name: $res ($((SECONDS - t0))s, exit code $rc)"
}

# bg_start NAME CMD...: CMD in the background, in a process group of its own (an interrupted
# run stops it), its output kept; `step NAME bg_done NAME` later prints that output and takes
# its exit status: the step's time is then what CMD ran on after the steps it ran beside
bg_start() {
    local name=$1; shift
    echo "=== $name: started, beside the steps that follow: $*"
    # shellcheck disable=SC2016 # the inner script expands its own arguments
    setsid bash -c '"$@" > "$0.out" 2>&1; echo $? > "$0.rc"' "$BG/$name" "$@" &
    bgpid[$name]=$!
}
bg_done() {
    while [ ! -s "$BG/$1.rc" ]; do sleep 1; done
    cat "$BG/$1.out"
    return "$(cat "$BG/$1.rc")"
}

step deps tools/deps.sh
step lint tools/shellcheck.sh
step build make -C standalone
step install make -C standalone install
step unit make -C standalone check
step build5 tools/debian13-root.sh run make -C standalone
step install5 tools/debian13-root.sh run make -C standalone install
step unit5 tools/debian13-root.sh run make -C standalone check
step engine bench/engine.sh --check --out bench/results/engine-check
step btlcount bench/btl-count.sh --check --out bench/results/btl-count-check
if [ "${USNIC_SKIP_INTREE:-0}" = 1 ]; then
    table+=("$(printf '%-8s SKIP (USNIC_SKIP_INTREE=1)' intree)")
else
    step intree tools/intree-check.sh
fi
step deb tools/build-deb.sh --nocheck
step deb5 tools/build-deb.sh --debian13 --nocheck
# The 4-host native world runs beside the 2-host one, in a private world of its own: most of
# either run waits on timers (dead-peer and loss tests).
bg_start native4 test/native/run.sh -n 4 --private
step native test/native/run.sh
step native4 bg_done native4
step vm test/vm/run.sh
# Fuzzing (one process, one CPU) runs beside the Open MPI 5.0 VM subset, whose first tests
# (bring-up, the data paths) bound no time but mpirun's.
bg_start fuzz make -C test/fuzz run FUZZ_SECONDS="${USNIC_FUZZ_SECONDS:-120}"
step vm5 env RXE_VM_ROOT="$(tools/debian13-root.sh)" VM_LOGS="$PWD/test/vm/logs/ompi5" \
    test/vm/run.sh "${VM5_TESTS[@]}"
step fuzz bg_done fuzz
step bench bench/run.sh --quick --out bench/results/smoke
step nbench bench/native.sh --quick --out bench/results/native-smoke

echo "=== summary (step, result, time taken, expected)"
printf '%s\n' "${table[@]}"
for n in "${!took[@]}"; do est[$n]=${took[$n]}; done    # steps not run keep their old figure
mkdir -p "$(dirname "$TIMES")" && for n in "${!est[@]}"; do echo "$n ${est[$n]}"; done > "$TIMES"
if [ "${#failed[@]}" -gt 0 ]; then
    echo "=== what failed (the FAIL lines of the failed steps; their logs: test/vm/logs, test/native/logs)"
    printf '%s\n' "${failed[@]}"
fi
echo "$npass passed, $nfail failed"
[ "$nfail" = 0 ]
