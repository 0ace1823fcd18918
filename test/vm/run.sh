#!/bin/bash
# test/vm/run.sh [t-NAME...]: run the VM integration tests test/vm/t-*.sh one after the other
# in ONE rxe-vm VM (booting takes longer than most tests). Default: the tests that need the
# VM (a verbs device; no `# world:` header, or `# world: vm ...`); those marked
# `# world: native` run in the native world by default (test/native/run.sh,
# docs/native-world.md) and here only when named. Prints
# `PASS|FAIL NAME (Ns)` per test and finally `vm: N passed, N failed`; exits non-zero if a
# test failed or the VM did. Each test's output goes to test/vm/logs/NAME.log (a test given
# more than once, to see how it varies: NAME.2.log, NAME.3.log, ...; each run counts).
# A test may set its timeout with a header line `# vm-timeout: SECONDS` (default 300);
# RXE_VM_TIMEOUT (the whole VM) defaults to the sum of the tests' timeouts plus boot time.
# A test that needs two RoCE devices per host has the header line `# vm-pairs: 2` (default 1):
# such tests run in a second VM, booted with RXE_VM_PAIRS=2 (a second veth pair with rxeA2 and
# rxeB2) after the one-pair VM; the others always run with RXE_VM_PAIRS=1.
# USNIC_ASAN=1 (set by test/vm/asan-run.sh) is passed into the guest, where lib.sh runs the MPI
# processes under AddressSanitizer; the test timeouts are then multiplied by USNIC_ASAN_SLOW
# (default 3). VM_TEST_TIMEOUT=SECONDS replaces every test's own timeout. Variables SOAK_*
# are passed into the guest too (t-soak's settings), and so are OMPI_MCA_btl_usnic_* (a
# parameter changed for every job, as OMPI_MCA_btl_usnic_timer_probe=0). VM_LOGS=DIR (inside the repo) replaces
# test/vm/logs. With RXE_VM_ROOT=$(tools/debian13-root.sh) the VM runs the Debian 13 world
# (Open MPI 5.0): install the component there first (tools/debian13-root.sh run make -C
# standalone install); lib.sh adapts the tests to the Open MPI version it finds.
# SPDX-License-Identifier: BSD-3-Clause
set -u
VM=$(cd "$(dirname "$0")" && pwd)
REPO=${VM%/test/vm}
LOGS=${VM_LOGS:-$VM/logs}

if [ "${1:-}" = --in-guest ]; then
    # in a world (the VM; test/native/run.sh: the native one): run.sh --in-guest TEST:TIMEOUT...,
    # TEST a name in test/vm or the path of a test script
    shift
    . "$VM/lib.sh"
    cd "$REPO" || exit 2
    declare -A runs=()
    for spec; do
        file=${spec%:*} to=${spec##*:}
        case $file in */*) ;; *) file=$VM/$file.sh ;; esac
        name=${file##*/} name=${name%.sh} log=$LOGS/$name.log
        # a test given again (to see how it varies) keeps each run's log: NAME.2.log, ...
        runs[$name]=$((${runs[$name]:-0} + 1))
        [ "${runs[$name]}" = 1 ] || log=$LOGS/$name.${runs[$name]}.log
        t0=$SECONDS
        timeout -k 10 "$to" bash "$file" > "$log" 2>&1
        rc=$?
        t=$((SECONDS - t0))
        # Give the next test clean hosts: nothing but tests runs in the hosts' namespaces, so
        # any process still there (an orted that did not exit, say) was left behind by this one.
        left=$(for x in "${HOSTS[@]}"; do ip netns pids "ns$x"; done)
        [ -n "$left" ] && { echo "run.sh: killing leftover processes:"; ps -o pid,args -p "${left//$'\n'/,}"; } >> "$log"
        # shellcheck disable=SC2086 # a list of pids
        [ -n "$left" ] && kill -KILL $left 2>/dev/null
        netem_clear
        if [ "$rc" = 0 ]; then
            echo "PASS $name (${t}s)"
        else
            echo "FAIL $name (${t}s)"
            [ "$rc" = 124 ] && echo "    timed out after ${to}s"
            tail -n 20 "$log" | sed 's/^/    /'
        fi
    done
    exit 0
fi

# default: the tests of the VM's world (no `# world:` header, or one that names vm); those
# whose header names only native run in the native world (test/native/run.sh), but here too
# when named
if [ $# = 0 ]; then
    for t in "$VM"/t-*.sh; do
        w=$(sed -n 's/^# world: *//p' "$t" | head -1)
        case " ${w:-vm} " in *" vm "*) set -- "$@" "$t" ;; esac
    done
fi
# rxe-vm does not pass the environment into the guest: hand it what the tests need
guestenv=(env VM_LOGS="$LOGS") slow=1
if [ "${USNIC_ASAN:-0}" = 1 ]; then
    slow=${USNIC_ASAN_SLOW:-3}
    guestenv+=(USNIC_ASAN=1 USNIC_ASAN_SLOW="$slow")
fi
# (and usnic's MCA parameters, which mpirun hands on to the ranks: a test run with one changed)
for v in $(compgen -e | grep -E '^(SOAK_[A-Z_]+|OMPI_MCA_btl_usnic_[a-z_]+)$'); do
    guestenv+=("$v=${!v}")
done
specs=() group1=() group2=() sum1=0 sum2=0
for t; do
    name=${t##*/}; name=${name%.sh}
    [ -f "$VM/$name.sh" ] || { echo "run.sh: no such test: $VM/$name.sh" >&2; exit 2; }
    to=$(sed -n 's/^# vm-timeout: *\([0-9][0-9]*\) *$/\1/p' "$VM/$name.sh" | head -1)
    pairs=$(sed -n 's/^# vm-pairs: *\([0-9][0-9]*\) *$/\1/p' "$VM/$name.sh" | head -1)
    to=$((${VM_TEST_TIMEOUT:-${to:-300}} * slow))
    specs+=("$name:$to")
    case ${pairs:=1} in              # + 10: timeout's -k grace
        1) group1+=("$name:$to"); sum1=$((sum1 + to + 10)) ;;
        2) group2+=("$name:$to"); sum2=$((sum2 + to + 10)) ;;
        *) echo "run.sh: $name: vm-pairs must be 1 or 2, not $pairs" >&2; exit 2 ;;
    esac
done
mkdir -p "$LOGS" || exit 2
for s in "${specs[@]}"; do rm -f "$LOGS/${s%:*}.log" "$LOGS/${s%:*}".[0-9]*.log; done
: > "$LOGS/run.log"
# the logs are written from inside the guest: the repo must be shared read-write
export RXE_VM_RW=$REPO
cd "$REPO" || exit 2
t0=$SECONDS
# the tests' programs, compiled here in the root the VM boots over (seconds, not minutes of
# TCG); the guest takes them from the cache (test/vm/progs-cache.sh)
files=()
for s in "${specs[@]}"; do files+=("test/vm/${s%:*}.sh"); done
vmroot=$(readlink -f "${RXE_VM_ROOT:-/}")
if [ "$vmroot" = / ]; then fill=(bash)
elif [ "$vmroot" = "$(readlink -f "$(tools/debian13-root.sh)")" ]; then fill=(tools/debian13-root.sh run bash)
else fill=()     # a root of another kind: the guest compiles
fi
[ ${#fill[@]} = 0 ] || "${fill[@]}" test/vm/progs-cache.sh --fill "${files[@]}" > "$LOGS/progs-cache.log" 2>&1 ||
    echo "run.sh: some programs did not compile here ($LOGS/progs-cache.log); the tests will say which"
vmerr=() boots=0
for pairs in 1 2; do             # one VM per topology that a requested test needs
    if [ "$pairs" = 1 ]; then group=("${group1[@]}") sum=$sum1
    else group=("${group2[@]}") sum=$sum2; fi
    [ ${#group[@]} -gt 0 ] || continue
    [ "$boots" -gt 0 ] && echo "run.sh: booting a VM with $pairs veth pairs for ${#group[@]} test(s)" |
        tee -a "$LOGS/run.log"
    boots=$((boots + 1))
    RXE_VM_PAIRS=$pairs RXE_VM_TIMEOUT=${RXE_VM_TIMEOUT:-$((sum + 180))} \
        tools/rxe-vm/rxe-vm "${guestenv[@]}" test/vm/run.sh --in-guest "${group[@]}" | tee -a "$LOGS/run.log"
    vmrc=${PIPESTATUS[0]}
    [ "$vmrc" = 0 ] || vmerr+=("vm: the VM failed (rxe-vm exit code $vmrc$([ "$pairs" = 1 ] || echo ", RXE_VM_PAIRS=$pairs"))")
done
# the k-th run of a test is the k-th result line of its name
npass=0 nfail=0
declare -A seen=()
for s in "${specs[@]}"; do
    name=${s%:*}
    seen[$name]=$((${seen[$name]:-0} + 1))
    result=$(grep -aE "^(PASS|FAIL) $name \(" "$LOGS/run.log" | sed -n "${seen[$name]}p")
    case $result in
        PASS*) npass=$((npass + 1)) ;;
        FAIL*) nfail=$((nfail + 1)) ;;
        *) echo "FAIL $name (not run)"; nfail=$((nfail + 1)) ;;
    esac
done
for e in "${vmerr[@]}"; do echo "$e"; done
echo "vm: VM run took $((SECONDS - t0))s$([ "$boots" -gt 1 ] && echo " ($boots VM boots)"), logs in $LOGS"
echo "vm: $npass passed, $nfail failed"
[ "$nfail" = 0 ] && [ ${#vmerr[@]} = 0 ]
