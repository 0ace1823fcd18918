#!/bin/bash
# vm-timeout: 300
# Hosts whose interface MTUs differ while both RoCE MTUs stay 4096: the connectivity checker
# sizes its large (Don't Fragment) ping from the smaller of the two interface MTUs, and from
# a local route's smaller MTU when the kernel refuses the ping with EMSGSIZE, so the job runs.
#   a) vethA 9000, vethB 9216
#   b) vethA 4200, vethB 9000
#   c) both 9000, hostA's route to the subnet with MTU 8500 (a 8932-byte ping cannot leave)
# Each case: rxeA and rxeB show active_mtu 4096 (ibv_devinfo), and a checked ping-pong
# (progs/pingloop.c, 64 B to 200 KB, 1 rank per host, usnic,self) runs for 4 s, longer than
# the checker's budget, cut to 1.1 s (10 rounds 100 ms apart): it must complete with every
# byte right, usnic carrying the traffic, and no connectivity checker message. In c) the
# checker must have cut its large ping to what the route carries (8500 - 68 bytes; its
# "fact ping_cut" line, a test contract, says so). The MTUs and the route are restored at the end. (A path that really carries less than the interfaces,
# a switch dropping large frames, must still abort the job: t-connectivity.sh.)
# SPDX-License-Identifier: BSD-3-Clause
set -u
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/dp-lib.sh"
mpi_build pingloop

route=$(ip -n nsA route show "$RXEVM_NET.0/24" | head -1)
restore() {
    ip -n nsA link set vethA mtu "$RXEVM_MTU"
    ip -n nsB link set vethB mtu "$RXEVM_MTU"
    # shellcheck disable=SC2086 # the route as ip printed it
    [ -n "$route" ] && ip -n nsA route replace $route
}
trap restore EXIT
echo "hostA's route: $route"

# rxe_mtus LABEL: both rxe devices still have active_mtu 4096
rxe_mtus() {
    local x m
    for x in A B; do
        m=$(onhost $x ibv_devinfo -d "rxe$x" | awk '/active_mtu:/ { print $2 }')
        if [ "$m" = 4096 ]; then pass "$1: rxe$x active_mtu 4096"
        else dp_fail "$1: rxe$x active_mtu ${m:-?}, expected 4096"; fi
    done
}

# ifmtu X: the MTU of vethX
ifmtu() { ip -n "ns$1" -o link show "veth$1" | sed -E 's/.* mtu ([0-9]+) .*/\1/'; }

# run_case LABEL [MPIRUN-ARGS...]: the checked ping-pong under the current MTUs
run_case() {
    local out=$WORK/$1.out label=$1
    shift
    echo "== $label: vethA mtu $(ifmtu A), vethB mtu $(ifmtu B)"
    rxe_mtus "$label"
    dp_run 1 "$out" --mca btl_usnic_connectivity_ack_timeout 100 \
        --mca btl_usnic_connectivity_error_num_retries 9 "$@" "$WORK/pingloop" 4
    dp_check pingloop 1 "$out"
    if grep -q "^The usnic BTL connectivity checker" "$out"; then
        dp_fail "$label: the connectivity checker reported a failure"
    else
        pass "$label: no connectivity checker message"
    fi
}

echo "=== a) vethA 9000, vethB 9216"
ip -n nsA link set vethA mtu 9000 || fail "set MTU"
ip -n nsB link set vethB mtu 9216 || fail "set MTU"
run_case a

echo "=== b) vethA 4200, vethB 9000"
ip -n nsA link set vethA mtu 4200 || fail "set MTU"
ip -n nsB link set vethB mtu 9000 || fail "set MTU"
run_case b

echo "=== c) both 9000, hostA's route with MTU 8500"
ip -n nsA link set vethA mtu 9000 || fail "set MTU"
# shellcheck disable=SC2086 # the route as ip printed it
ip -n nsA route replace $route mtu lock 8500 || fail "route mtu"
ip -n nsA route show "$RXEVM_NET.0/24"
run_case c --mca btl_base_verbose 5
if grep -Eq "btl:usnic: fact ping_cut host=hostA dev=rxeA peer=${RXEVM_IP_B//./\\.}/24 route_mtu=8500 from=8932 to=8432( |$)" "$WORK/c.out"; then
    pass "c: hostA's checker cut its large ping to the route's MTU"
else
    dp_fail "c: hostA's checker did not report cutting its large ping to 8432 bytes"
fi
dp_done
