#!/bin/bash
# vm-timeout: 150
# Async device events: taking vethB down in the middle of a job makes both rxe ports go
# down; usnic reports it with a message naming host and device (the "port error" event, or
# the queue pair it flushed when that comes first) and aborts the job, rather than hanging
# in retransmits.  The link comes back after 3 s so
# that the launcher's own TCP connections survive to tear the job down.
# SPDX-License-Identifier: BSD-3-Clause
set -u
. "$(dirname "$0")/lib.sh"
mpi_build busy

trap 'ip netns exec nsB ip link set vethB up' EXIT
BTL=usnic,self MPI_TIMEOUT=100 mpirun_usnic "$WORK/busy" 60 > "$WORK/async.out" 2>&1 &
job=$!
# wait until both ranks are inside MPI (the connectivity checker listens by then)
for _ in $(seq 60); do
    [ "$(pgrep -x busy | wc -l)" = 2 ] && break
    sleep 0.5
done
sleep 5
echo "== vethB down"
SECONDS=0
ip netns exec nsB ip link set vethB down || fail "link down"
sleep 3
ip netns exec nsB ip link set vethB up
echo "== vethB up"
wait $job; rc=$?
t=$SECONDS
cat "$WORK/async.out"
{ [ "$rc" != 0 ] && [ "$rc" != 124 ]; } || fail "exit code $rc (expected an abort, not success or a hang)"
[ "$t" -lt 60 ] || fail "took ${t}s after the link went down (bound 60 s)"
assert_grep 'A usnic device reported an error event|A queue pair of the usnic BTL stopped working' \
    "$WORK/async.out" "usnic reported the failure"
assert_grep 'Event: +port error|Status: +Work Request Flushed Error' "$WORK/async.out" \
    "the cause is the port error (or the flush it caused)"
assert_grep 'Device: +rxe[AB]' "$WORK/async.out" "message names the device"
pass "job aborted ${t}s after the link went down"
