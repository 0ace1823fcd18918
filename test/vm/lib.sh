# Helpers for the integration tests (test/vm/t-*.sh). Sourced in either world:
#   . "$(dirname "$0")/lib.sh"
#  - the rxe-vm guest (tools/rxe-vm/rxe-vm: hosts hostA and hostB, Soft-RoCE devices rxeX,
#    env file /run/rxevm/env), where test/vm/run.sh runs them;
#  - the native world (tools/netns-world/netns-world: 2-8 hosts hostA, hostB, ... on this
#    machine, no RDMA, usnic over kernel UDP with device names vethX; env file
#    $NETNS_WORLD_ENV, RXEVM_WORLD=native), where test/native/run.sh runs them.
# Gives REPO (repo root), WORK (a fresh dir under /tmp, which is one file system shared by
# every host and the root namespace), WORLD (vm | native), HOSTS (the host letters: A B, or
# A B C D ...), NHOSTS, mpi_build, mpirun_usnic, dev_of, assertions and netem helpers.
# SPDX-License-Identifier: BSD-3-Clause
if [ -n "${NETNS_WORLD_ENV:-}" ] && [ -r "$NETNS_WORLD_ENV" ]; then
    # shellcheck source=/dev/null # written by tools/netns-world/netns-world
    . "$NETNS_WORLD_ENV"
elif [ -r /run/rxevm/env ]; then
    # shellcheck source=/dev/null # written by tools/rxe-vm/rxe-vm in the guest
    . /run/rxevm/env
else
    echo "lib.sh: in no test world (no \$NETNS_WORLD_ENV, no /run/rxevm/env): run the tests" \
        "with test/vm/run.sh or test/native/run.sh" >&2
    exit 2
fi
WORLD=${RXEVM_WORLD:-vm}
# shellcheck disable=SC2206 # a list of letters
HOSTS=(${RXEVM_HOST_LETTERS:-A B})
# shellcheck disable=SC2034 # for the tests
NHOSTS=${#HOSTS[@]}
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
WORK=$(mktemp -d /tmp/usnic-vm.XXXXXX) || exit 2

# The Open MPI of the world the VM runs (4.1: Debian 12, this machine; 5.0: Debian 13,
# RXE_VM_ROOT=$(tools/debian13-root.sh)): SM_BTL is its shared-memory BTL (4.1's "sm" is a
# stub that aborts), BTL_API the BTL API version its components report, and MPIRUN_WORLD what
# its mpirun needs besides. Open MPI 5.0's mpirun (PRRTE) finds no interface for a subnet in
# oob_tcp_if_include (each host has only lo and its veth anyway), and Debian 13's exports its
# PMIx component dir to the ranks as Open MPI's component path, which hides the components
# installed in Open MPI's own dir: give that dir back (docs/install.md, "Stand-alone build").
OMPI_MAJOR=$(mpirun --version 2>/dev/null | sed -n 's/^mpirun (Open MPI) \([0-9][0-9]*\)\..*/\1/p')
# shellcheck disable=SC2034 # SM_BTL and BTL_API are for the tests that source this file
if [ "${OMPI_MAJOR:-0}" -ge 5 ]; then
    SM_BTL=sm BTL_API=3.3.0
    MPIRUN_WORLD=(--mca mca_base_component_path "$(ompi_info --path pkglibdir --parsable | cut -d: -f3)")
else
    SM_BTL=vader BTL_API=3.1.0
    MPIRUN_WORLD=(--mca oob_tcp_if_include "$RXEVM_NET.0/24")
fi
# The native world has no RDMA device: usnic runs over kernel UDP (its device is the netdev).
[ "$WORLD" = native ] && MPIRUN_WORLD+=(--mca btl_usnic_transport udp)
# The hosts of both worlds share a few CPUs (the machine's 2 natively, the VM's 2 vCPUs) while
# mpirun sees a slot per rank on each: idle ranks yield, as Open MPI makes them do itself on a
# node it knows to be oversubscribed. Natively always (8 ranks of t-onesided spinning on 2 CPUs
# took more than 300 s without it); in the VM when a job has more ranks than vCPUs (6 ranks of
# t-onesided took 92 s; jobs of one rank per host keep spinning, as on a real cluster).
YIELD_CPUS=$(nproc)

# dev_of X: the name usnic gives host X's (first) device: rxeX in the VM, vethX natively
dev_of() { local v=RXEVM_DEV_$1; echo "${!v}"; }
# DEV_MTU: the largest usnic datagram (header included) of the device, the RoCE MTU in the VM,
# the netdev MTU less IPv4, UDP, the Q_Key and the channel byte in the native world
# (test/native/run.sh makes that 4096 too, so that the protocol boundaries of the programs
# are the same in both)
# shellcheck disable=SC2034 # for the tests
if [ "$WORLD" = native ]; then DEV_MTU=$((RXEVM_MTU - 33)); else DEV_MTU=${RXEVM_ACTIVE_MTU_A:-}; fi

# fail MSG: the test fails here (exits the test script; do not call it from a subshell)
fail() { echo "FAIL: $*"; exit 1; }
pass() { echo "ok: $*"; }
# assert_grep ERE FILE MSG: FILE has a line matching the extended regex ERE
assert_grep() {
    grep -Eq -- "$1" "$2" && { pass "$3"; return; }
    echo "--- no line of $2 matches: $1"
    fail "$3"
}

# USNIC_ASAN=1 (test/vm/asan-run.sh, which installs the component built with
# `make -C standalone SANITIZE=address`): every MPI process started by mpirun_usnic (and
# ompi_info) runs with libasan preloaded and LeakSanitizer on. Reports go to
# test/vm/logs/asan/<test>/asan.<exe>.<pid> (the repo is shared read-write with the host,
# where asan-run.sh reads them). Options: exitcode=0 so that Open MPI's own leaks at exit do
# not change the exit code, abort_on_error=1 so that a real error still kills the process;
# fast_unwind_on_malloc=0 because Open MPI is built without frame pointers (the fast unwinder
# would stop at its first frame and hide who called malloc); a small quarantine because up to
# 6 ranks share the VM's 2 GB. ASAN_X holds the matching `mpirun -x` arguments for tests that
# start mpirun themselves. ASAN_SLOW multiplies mpirun_usnic's timeouts (default 3).
ASAN_X=() ASAN_SLOW=1
if [ "${USNIC_ASAN:-0}" = 1 ] && [ "${0##*/}" != run.sh ]; then     # not for the runner itself
    ASAN_LIB=$(readlink -f "$(gcc -print-file-name=libasan.so)")      # .../libasan.so.8.0.0
    [ -f "${ASAN_LIB%/*}/libasan.so.8" ] && ASAN_LIB=${ASAN_LIB%/*}/libasan.so.8
    [ -f "$ASAN_LIB" ] || { echo "lib.sh: USNIC_ASAN=1 but no libasan ($ASAN_LIB)" >&2; exit 2; }
    ASAN_DIR=$REPO/test/vm/logs/asan/$(basename "$0" .sh)
    mkdir -p "$ASAN_DIR" || exit 2
    ASAN_OPTIONS="detect_leaks=1:log_path=$ASAN_DIR/asan:log_exe_name=1:exitcode=0:abort_on_error=1"
    ASAN_OPTIONS+=":fast_unwind_on_malloc=0:malloc_context_size=30:quarantine_size_mb=16"
    ASAN_OPTIONS+=":detect_odr_violation=0:allocator_may_return_null=1:print_suppressions=0:atexit=1"
    ASAN_X=(-x "LD_PRELOAD=$ASAN_LIB" -x "ASAN_OPTIONS=$ASAN_OPTIONS")
    ASAN_SLOW=${USNIC_ASAN_SLOW:-3}
    # ompi_info loads the component too: a wrapper first in PATH preloads libasan for it
    mkdir -p "$WORK/asan-bin" || exit 2
    USNIC_ASAN_OMPI_INFO=${USNIC_ASAN_OMPI_INFO:-$(command -v ompi_info)}   # the real one
    export USNIC_ASAN_OMPI_INFO
    printf '#!/bin/sh\nLD_PRELOAD=%s ASAN_OPTIONS=%s exec %s "$@"\n' "$ASAN_LIB" "$ASAN_OPTIONS" \
        "$USNIC_ASAN_OMPI_INFO" > "$WORK/asan-bin/ompi_info"
    chmod +x "$WORK/asan-bin/ompi_info"
    PATH=$WORK/asan-bin:$PATH
fi

# mpi_build NAME [ARG...] and cc_cached "$WORK/OUT" CC ARG...: the tests' compiles, through
# the cache that test/vm/run.sh fills before it boots the VM
. "$REPO/test/vm/progs-cache.sh"

# mpirun_usnic [-n RANKS_PER_HOST] [-t SECONDS] MPIRUN-ARGS... PROGRAM [ARGS...]
# mpirun on hostA, ranks on every host of the world (hostA and hostB in the VM; default 1
# each, by slot: rank 0 .. n-1 on hostA, then hostB, ...), BTLs ${BTL:-usnic,self}, killed
# after ${MPI_TIMEOUT:-120} s (exit code 124; times ASAN_SLOW under USNIC_ASAN=1); returns
# mpirun's exit code. MPI_HOSTS="A B" (letters) restricts the job to those hosts.
# pml ob1 is forced: only ob1 drives BTLs, so no other PML can carry the traffic instead.
# On 4.1 the out-of-band (ORTE) traffic is pinned to the veth subnet. Ranks are not bound: each host
# binds its first rank to core 0, which would put both hosts' ranks on the same vCPU.
mpirun_usnic() {
    local n=1 t=${MPI_TIMEOUT:-120} x hl=() mh
    while :; do
        case ${1:-} in
            -n) n=$2; shift 2 ;;
            -t) t=$2; shift 2 ;;
            *) break ;;
        esac
    done
    # shellcheck disable=SC2206 # a list of letters
    mh=(${MPI_HOSTS:-${HOSTS[*]}})
    for x in "${mh[@]}"; do hl+=("host$x:$n"); done
    if [ "$WORLD" = native ] || [ $((${#mh[@]} * n)) -gt "$YIELD_CPUS" ]; then
        set -- --mca mpi_yield_when_idle 1 "$@"
    fi
    onhost "${mh[0]}" timeout -k 5 $((t * ASAN_SLOW)) mpirun --allow-run-as-root -np $((${#mh[@]} * n)) \
        --host "$(IFS=,; echo "${hl[*]}")" --mca plm_rsh_agent "${RXEVM_RSH:-rxevm-rsh}" "${MPIRUN_WORLD[@]}" \
        --bind-to none --mca pml ob1 --mca btl "${BTL:-usnic,self}" "${ASAN_X[@]}" "$@"
}

# job_hosts: the letters of the hosts mpirun_usnic starts ranks on
job_hosts() { echo "${MPI_HOSTS:-${HOSTS[*]}}"; }

# need_pairs N: the test needs a VM with N veth pairs (RoCE devices per host); run.sh boots
# one for tests with the header line `# vm-pairs: N` (rxe-vm: RXE_VM_PAIRS=N)
need_pairs() {
    [ "${RXEVM_PAIRS:-1}" -ge "$1" ] ||
        fail "this test needs $1 veth pairs (header '# vm-pairs: $1'), the VM has ${RXEVM_PAIRS:-1}"
}

# netem HOST NETEM-ARGS...: netem on what host A, B, ... sends (egress of its veth end),
#   e.g. `netem A loss 10%`; HOST A2 or B2: on the second pair (vethA2/vethB2, vm-pairs 2);
# netem_both NETEM-ARGS...: the same on both directions of the first pair (hostA and hostB);
# netem_clear: remove them from every host and pair (the runner also does this after every test)
netem() {
    local x=$1; shift
    [ "$WORLD" = native ] && fail "netem: no netem in the native world (fault-lib.sh: netem_roce, netem_udp)"
    ip netns exec "ns${x%2}" tc qdisc replace dev "veth$x" root netem "$@" || fail "netem $x $*"
}
netem_both() { netem A "$@"; netem B "$@"; }
# drop_large_udp: both hosts drop every UDP packet of 8192 bytes or more they send (IPv4
# total length, offset 2, with bit 13 set: 8192 to 9000 bytes on these links), as a path of
# a smaller MTU would; netem_clear removes it
drop_large_udp() {
    local x
    for x in A B; do
        ip netns exec "ns$x" tc qdisc replace dev "veth$x" root handle 1: prio || fail "tc qdisc"
        ip netns exec "ns$x" tc filter add dev "veth$x" parent 1: protocol ip prio 1 u32 \
            match ip protocol 17 0xff match u16 0x2000 0x2000 at 2 action drop || fail "tc filter"
    done
}
netem_clear() {
    local x
    for x in "${HOSTS[@]}"; do
        ip netns exec "ns$x" tc qdisc del dev "veth$x" root 2>/dev/null
        # the native world's impairments (fault-lib.sh: nft_fault)
        [ "$WORLD" = native ] && ip netns exec "ns$x" nft delete table netdev usnic_fault 2>/dev/null
    done
    if [ "${RXEVM_PAIRS:-1}" -ge 2 ]; then
        for x in A B; do ip netns exec "ns$x" tc qdisc del dev "veth${x}2" root 2>/dev/null; done
    fi
    return 0
}
