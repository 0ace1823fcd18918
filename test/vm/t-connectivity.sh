#!/bin/bash
# vm-timeout: 200
# Connectivity checker: a healthy run prints nothing extra; a dead datapath (every UDP
# datagram hostA sends is dropped: RoCE v2 and the checker's pings, while the launcher's
# TCP still works) and an MTU mismatch on the path (both interfaces at 9000, but every UDP
# datagram of 8192 bytes or more dropped in both directions, as by a switch port with a
# smaller MTU; RoCE's 4096-byte datagrams and the launcher's TCP pass) each abort the job with the checker's
# message, naming both ends, well before the job would have ended on its own. (Interfaces
# whose MTUs merely differ are fine: t-mtu.sh.) The checker's help message is required: it goes
# to the process's stderr, which mpirun does not lose when the process aborts right after it.
# SPDX-License-Identifier: BSD-3-Clause
set -u
. "$(dirname "$0")/lib.sh"
mpi_build busy

echo "== healthy: 6 s of broadcasts"
BTL=usnic,self mpirun_usnic "$WORK/busy" 6 > "$WORK/ok.out" 2>&1; rc=$?
cat "$WORK/ok.out"
[ "$rc" = 0 ] || fail "healthy run exit code $rc"
assert_grep '^busy: [0-9]+ broadcasts$' "$WORK/ok.out" "healthy run completed"
if grep -q "connectivity" "$WORK/ok.out"; then fail "healthy run printed a connectivity message"; fi
pass "healthy run printed no connectivity message"

echo "== dead datapath: all UDP from hostA dropped, job of 60 s"
ip netns exec nsA tc qdisc replace dev vethA root handle 1: prio || fail "tc qdisc"
ip netns exec nsA tc filter add dev vethA parent 1: protocol ip prio 1 u32 \
    match ip protocol 17 0xff action drop || fail "tc filter"
SECONDS=0
BTL=usnic,self MPI_TIMEOUT=90 mpirun_usnic "$WORK/busy" 60 > "$WORK/dead.out" 2>&1; rc=$?
t=$SECONDS
cat "$WORK/dead.out"
netem_clear
{ [ "$rc" != 0 ] && [ "$rc" != 124 ]; } || fail "dead datapath: exit code $rc (expected an abort)"
[ "$t" -lt 45 ] || fail "dead datapath: took ${t}s (bound 45 s)"
# Only hostA's rank sends (the root of the broadcasts), so only its checker runs. Its help
# message goes to the process's stderr (docs/usage.md), so it must be there, naming the peer.
assert_grep 'got no answer at all from a peer' "$WORK/dead.out" "checker reported the dead path"
assert_grep 'Peer address: +10\.88\.0\.[12]/24, MAC ([0-9a-f]{2}:){5}[0-9a-f]{2}' \
    "$WORK/dead.out" "message names the peer address and MAC"
pass "dead datapath aborted after ${t}s"

echo "== MTU mismatch: UDP packets of 8192 bytes or more dropped both ways, job of 60 s"
drop_large_udp
SECONDS=0
BTL=usnic,self MPI_TIMEOUT=90 mpirun_usnic "$WORK/busy" 60 > "$WORK/mtu.out" 2>&1; rc=$?
t=$SECONDS
cat "$WORK/mtu.out"
netem_clear
{ [ "$rc" != 0 ] && [ "$rc" != 124 ]; } || fail "MTU mismatch: exit code $rc (expected an abort)"
[ "$t" -lt 45 ] || fail "MTU mismatch: took ${t}s (bound 45 s)"
assert_grep 'large datagrams do not' "$WORK/mtu.out" "checker reported large pings failing"
# Both ends see their large pings fail; the first to abort may end the job before the other
# prints: either report may be the one that reaches mpirun.
assert_grep 'Local host: +host[AB]' "$WORK/mtu.out" "the report names the reporting host"
assert_grep 'Ping sizes: +32 bytes \(answered\), 8932 bytes \(not answered' "$WORK/mtu.out" \
    "message gives both ping sizes"
pass "MTU mismatch aborted after ${t}s"
