#!/bin/bash
# test/native/run.sh [-n HOSTS] [--private] [t-NAME...]: run integration tests in the native world
# (tools/netns-world/netns-world: HOSTS hosts on this machine, default 2, no VM, no RDMA;
# usnic over kernel UDP), one after the other in ONE world. Default: every test of test/vm/
# and test/native/ whose header line `# world: ...` names native and whose
# `# native-hosts: MIN[-MAX]` (default 2, no maximum) admits HOSTS (a test whose programs run
# on two hosts of any world says 2-2: on more it would repeat the 2-host run exactly, with the
# other hosts idle). A name is looked up in test/native/,
# then test/vm/. Prints `PASS|FAIL NAME (Ns)` per test and finally
# `native: N passed, N failed` (`nativeN: ...` with HOSTS = N other than 2); exits non-zero if
# a test or the world failed. Logs: test/native/logs/ (2 hosts) or test/native/logs/nN/,
# NAME.log per test (NAME.2.log ... for a test named again), run.log; NATIVE_LOGS=DIR
# replaces that. Timeouts as in test/vm/run.sh: `# vm-timeout: SECONDS` (default 300),
# VM_TEST_TIMEOUT replaces them, USNIC_ASAN=1 (test/vm/asan-run.sh --native) multiplies them
# by USNIC_ASAN_SLOW (default 3). USNIC_SO=FILE runs the tests with that build of
# mca_btl_usnic.so instead of the one installed in Open MPI's directory (a private component
# directory of links, named by OMPI_MCA_mca_base_component_path, which every process of the
# world inherits), so that a branch is tested without installing it. --private: the world is
# private (netns-world --private), so that this run goes on beside another world's
# (test/run-all.sh runs the 2-host and 4-host worlds at once).
# The world's interfaces get MTU 4129 (NATIVE_MTU): usnic's UDP datagrams are then at most
# 4096 bytes, as in the VM (rxe's active MTU), so that the protocol boundaries the test
# programs straddle (one datagram, chunks, the fast path) are the same in both worlds.
# SPDX-License-Identifier: BSD-3-Clause
set -u
NATIVE=$(cd "$(dirname "$0")" && pwd)
REPO=${NATIVE%/test/native}
VM=$REPO/test/vm
HOSTS=2 private=()
while [ $# -gt 0 ]; do
    case $1 in
        -n) HOSTS=${2:-}; shift 2 ;;
        --private) private=(--private); shift ;;
        *) break ;;
    esac
done
[[ $HOSTS =~ ^[2-8]$ ]] || { echo "run.sh: -n needs 2..8 hosts" >&2; exit 2; }
label=native
[ "$HOSTS" = 2 ] || label=native$HOSTS
LOGS=${NATIVE_LOGS:-$NATIVE/logs$([ "$HOSTS" = 2 ] || echo "/n$HOSTS")}

# test_file NAME: the script of test NAME
test_file() {
    if [ -f "$NATIVE/$1.sh" ]; then echo "$NATIVE/$1.sh"
    elif [ -f "$VM/$1.sh" ]; then echo "$VM/$1.sh"
    fi
}
# header FILE KEY: the value of the header line `# KEY: VALUE`
header() { sed -n "s/^# $2: *//p" "$1" | head -1; }

if [ $# = 0 ]; then
    for t in "$VM"/t-*.sh "$NATIVE"/t-*.sh; do
        [ -f "$t" ] || continue
        case " $(header "$t" world) " in *" native "*) ;; *) continue ;; esac
        nh=$(header "$t" native-hosts)
        [ "$(grep -Eo '^[0-9]+' <<< "$nh")" -gt "$HOSTS" ] 2>/dev/null && continue
        [ "$(grep -Eo '[0-9]+$' <<< "${nh#*-}")" -lt "$HOSTS" ] 2>/dev/null && [[ $nh == *-* ]] && continue
        n=${t##*/}; set -- "$@" "${n%.sh}"
    done
fi
slow=1
[ "${USNIC_ASAN:-0}" = 1 ] && slow=${USNIC_ASAN_SLOW:-3}
specs=()
for t; do
    name=${t##*/}; name=${name%.sh}
    f=$(test_file "$name")
    [ -n "$f" ] || { echo "run.sh: no such test: $name (in $NATIVE or $VM)" >&2; exit 2; }
    to=$(header "$f" vm-timeout | grep -Eo '^[0-9]+')
    specs+=("$f:$((${VM_TEST_TIMEOUT:-${to:-300}} * slow))")
done
mkdir -p "$LOGS" || exit 2
if [ -n "${USNIC_SO:-}" ]; then
    [ -f "$USNIC_SO" ] || { echo "run.sh: USNIC_SO: no such file: $USNIC_SO" >&2; exit 2; }
    comps=$(mktemp -d /tmp/usnic-components.XXXXXX) || exit 2
    trap 'rm -rf "$comps"' EXIT
    for f in "$(ompi_info --path pkglibdir --parsable | cut -d: -f3)"/*; do
        case ${f##*/} in mca_btl_usnic.*) ;; *) ln -s "$f" "$comps/" ;; esac
    done
    cp "$USNIC_SO" "$comps/mca_btl_usnic.so" || exit 2
    export OMPI_MCA_mca_base_component_path=$comps
    echo "$label: usnic from $USNIC_SO"
fi
for s in "${specs[@]}"; do
    n=${s%:*}; n=${n##*/}; n=${n%.sh}
    rm -f "$LOGS/$n.log" "$LOGS/$n".[0-9]*.log
done
: > "$LOGS/run.log"
cd "$REPO" || exit 2
t0=$SECONDS
VM_LOGS=$LOGS tools/netns-world/netns-world "${private[@]}" -n "$HOSTS" --mtu "${NATIVE_MTU:-4129}" \
    test/vm/run.sh --in-guest "${specs[@]}" < /dev/null 2>&1 | tee -a "$LOGS/run.log"
wrc=${PIPESTATUS[0]}
# the k-th run of a test is the k-th result line of its name
npass=0 nfail=0
declare -A seen=()
for s in "${specs[@]}"; do
    name=${s%:*}; name=${name##*/}; name=${name%.sh}
    seen[$name]=$((${seen[$name]:-0} + 1))
    result=$(grep -E "^(PASS|FAIL) $name \(" "$LOGS/run.log" | sed -n "${seen[$name]}p")
    case $result in
        PASS*) npass=$((npass + 1)) ;;
        FAIL*) nfail=$((nfail + 1)) ;;
        *) echo "FAIL $name (not run)"; nfail=$((nfail + 1)) ;;
    esac
done
[ "$wrc" = 0 ] || echo "$label: the world failed (netns-world exit code $wrc)"
echo "$label: $HOSTS hosts, run took $((SECONDS - t0))s, logs in $LOGS"
echo "$label: $npass passed, $nfail failed"
[ "$nfail" = 0 ] && [ "$wrc" = 0 ]
