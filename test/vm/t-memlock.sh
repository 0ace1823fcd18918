#!/bin/bash
# vm-timeout: 400
# Locked memory (RLIMIT_MEMLOCK) too small for what usnic would register. The ranks run
# without CAP_IPC_LOCK (setpriv drops it from the bounding set; as root they could lock
# memory past any limit) under a limit set with prlimit.
#   a) 1 MiB, less than one device's receive queues: each process says which device needs
#      how much ("locked memory too low", naming host and device) and does not use it; with
#      btl usnic,self the job then stops at once (peers unreachable) instead of hanging.
#   b) what a device needs at start (read from (a)'s message) plus 1.5 MiB: usnic starts,
#      and the free lists soon cannot grow (progs/flood.c keeps thousands of small sends
#      queued; progs/p2p.c streams large messages with 3 ranks per host). The jobs complete
#      with every byte checked and usnic carrying the traffic, and the "registration
#      failed" message is shown (once per device and process) instead of the send engine
#      spinning or the job aborting.
# SPDX-License-Identifier: BSD-3-Clause
set -u
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/dp-lib.sh"

mpi_build flood
mpi_build p2p
limited() { echo setpriv --bounding-set=-ipc_lock prlimit --memlock="$1:$1"; }

# shellcheck disable=SC2046
DP_TIMEOUT=60 dp_run 1 "$WORK/low.out" $(limited 1048576) "$WORK/p2p" -s 1000
if [ "$DP_RC" = 0 ] || [ "$DP_RC" = 124 ]; then
    dp_fail "a) 1 MiB: the job should stop with an error, exit code $DP_RC"
else
    pass "a) 1 MiB: the job stopped with exit code $DP_RC"
fi
need=$(sed -nE 's/^ *Needed by this device: *([0-9]+) bytes.*/\1/p' "$WORK/low.out" | head -n 1)
if grep -q "Locked memory max: *1048576 bytes" "$WORK/low.out" && [ -n "$need" ]; then
    pass "a) 'locked memory too low' shown: a device needs $need bytes"
else
    dp_fail "a) no 'locked memory too low' message naming the need and the 1 MiB limit"
    need=8388608
fi
grep -Eq "Device: +rxe[AB]" "$WORK/low.out" || dp_fail "a) the message names no device"

lim=$((need + 1572864))
echo "== b) limit $lim bytes"
# shellcheck disable=SC2046
DP_TIMEOUT=240 dp_run 1 "$WORK/flood.out" $(limited $lim) "$WORK/flood"
dp_check flood 1 "$WORK/flood.out"
# shellcheck disable=SC2046
DP_TIMEOUT=240 dp_run 3 "$WORK/p2p.out" $(limited $lim) "$WORK/p2p" -p stream
dp_check p2p 3 "$WORK/p2p.out"
shown=$(cat "$WORK/flood.out" "$WORK/p2p.out" | grep -c "could not register more memory")
if [ "$shown" -gt 0 ]; then
    pass "b) 'registration failed' shown $shown times"
else
    dp_fail "b) the limit was never reached: no 'registration failed' message"
fi
dp_done
