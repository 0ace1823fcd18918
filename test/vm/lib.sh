# Helpers for the VM integration tests (test/vm/t-*.sh). Sourced INSIDE the rxe-vm guest:
#   . "$(dirname "$0")/lib.sh"
# Gives REPO (repo root), WORK (a fresh dir under /tmp, which is one tmpfs shared by hostA,
# hostB and the root namespace), mpi_build, mpirun_usnic, assertions and netem helpers.
. /run/rxevm/env 2>/dev/null || { echo "lib.sh: not inside rxe-vm (no /run/rxevm/env)" >&2; exit 2; }
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
WORK=$(mktemp -d /tmp/usnic-vm.XXXXXX) || exit 2

# fail MSG: the test fails here (exits the test script; do not call it from a subshell)
fail() { echo "FAIL: $*"; exit 1; }
pass() { echo "ok: $*"; }
# assert_grep ERE FILE MSG: FILE has a line matching the extended regex ERE
assert_grep() {
    grep -Eq -- "$1" "$2" && { pass "$3"; return; }
    echo "--- no line of $2 matches: $1"
    fail "$3"
}

# mpi_build NAME: compile test/vm/progs/NAME.c with mpicc into $WORK/NAME
mpi_build() {
    mpicc -O2 -Wall -o "$WORK/$1" "$REPO/test/vm/progs/$1.c" || fail "mpicc $1.c"
}

# mpirun_usnic [-n RANKS_PER_HOST] [-t SECONDS] MPIRUN-ARGS... PROGRAM [ARGS...]
# mpirun on hostA, ranks on hostA and hostB (default 1 each), BTLs ${BTL:-usnic,self}, killed
# after ${MPI_TIMEOUT:-120} s (exit code 124); returns mpirun's exit code.
# pml ob1 is forced: only ob1 drives BTLs, so no other PML can carry the traffic instead.
# The out-of-band (ORTE) traffic is pinned to the veth subnet. Ranks are not bound: each host
# binds its first rank to core 0, which would put both hosts' ranks on the same vCPU.
mpirun_usnic() {
    local n=1 t=${MPI_TIMEOUT:-120}
    while :; do
        case ${1:-} in
            -n) n=$2; shift 2 ;;
            -t) t=$2; shift 2 ;;
            *) break ;;
        esac
    done
    onhost A timeout -k 5 "$t" mpirun --allow-run-as-root -np $((2 * n)) --host "hostA:$n,hostB:$n" \
        --mca plm_rsh_agent rxevm-rsh --mca oob_tcp_if_include "$RXEVM_NET.0/24" \
        --bind-to none --mca pml ob1 --mca btl "${BTL:-usnic,self}" "$@"
}

# need_pairs N: the test needs a VM with N veth pairs (RoCE devices per host); run.sh boots
# one for tests with the header line `# vm-pairs: N` (rxe-vm: RXE_VM_PAIRS=N)
need_pairs() {
    [ "${RXEVM_PAIRS:-1}" -ge "$1" ] ||
        fail "this test needs $1 veth pairs (header '# vm-pairs: $1'), the VM has ${RXEVM_PAIRS:-1}"
}

# netem HOST NETEM-ARGS...: netem on what host A or B sends (egress of its veth end),
#   e.g. `netem A loss 10%`; HOST A2 or B2: on the second pair (vethA2/vethB2, vm-pairs 2);
# netem_both NETEM-ARGS...: the same on both directions of the first pair;
# netem_clear: remove them from every pair (the runner also does this after every test)
netem() {
    local x=$1; shift
    ip netns exec "ns${x%2}" tc qdisc replace dev "veth$x" root netem "$@" || fail "netem $x $*"
}
netem_both() { netem A "$@"; netem B "$@"; }
netem_clear() {
    local x
    for x in A B; do ip netns exec "ns$x" tc qdisc del dev "veth$x" root 2>/dev/null; done
    if [ "${RXEVM_PAIRS:-1}" -ge 2 ]; then
        for x in A B; do ip netns exec "ns$x" tc qdisc del dev "veth${x}2" root 2>/dev/null; done
    fi
    return 0
}
