#!/bin/bash
# vm-timeout: 480
# world: native
# native-hosts: 2-2
# Busy peers are alive, dead ones are not: btl_usnic_peer_timeout 4 s, one rank per host over
# usnic,self, the connectivity checker on (its default) unless said otherwise.
#   a) busy peer (progs/busypeer.c busy 12): a rank sleeps, calling nothing in MPI, for 12 s
#      (3 x the timeout) while its partner sends it 64 B to 2 MiB messages and waits for them:
#      the sender's data stays unacknowledged all that time, but the sleeper's progress thread
#      answers the liveness pings. Both directions in turn. The job must complete, every byte
#      checked and carried by usnic, each sender must have waited at least 11 s, and nothing
#      may be reported.
#   b) compute phase (busypeer compute 6): after an exchange a rank sleeps 6 s (> the timeout)
#      and then sends, while its partner sleeps 2 s longer. The dead-peer clock must start when
#      that data goes out, not when the rank last called MPI: the job must complete as in a).
#   c) killed peer: pingloop (t-deadpeer.sh) for 60 s; 5 s in, the rank on hostB is killed
#      (SIGKILL). The job must end, not hang and not succeed, within 15 s (1.25 x the timeout
#      plus 10 s) of the kill: mpirun's own notice of the killed process or usnic's
#      peer-unreachable message ends it.
#   d) cut link: pingloop for 60 s with every UDP datagram (RoCE and the checker's sockets)
#      dropped in both directions from 5 s in: the job must abort with the peer-unreachable
#      message naming its host and device and the other host, saying that the liveness pings
#      got no answer, no sooner than the timeout and within 15 s of the cut.
#   e) checker off (btl_usnic_connectivity_check 0): no liveness pings, so the old rule holds:
#      the busy peer of a) is declared dead; the job must abort with the peer-unreachable
#      message saying that the pings are not used, within 40 s of the launch.
# progs/busypeer.c and the checks of its output are for one pair: in a world of more hosts the
# jobs run on hostA and hostB.
# SPDX-License-Identifier: BSD-3-Clause
set -u
. "$(dirname "$0")/lib.sh"
[ "$NHOSTS" -gt 2 ] && export MPI_HOSTS="A B"
. "$(dirname "$0")/dp-lib.sh"
. "$(dirname "$0")/fault-lib.sh"
mpi_build busypeer
mpi_build pingloop
PT=4

# unreachable OUT LABEL PINGS-ERE: the peer-unreachable message was printed, with the 4 s
# timeout and a "Liveness pings:" line matching PINGS-ERE
unreachable() {
    if grep -q "^The usnic BTL has been retransmitting to a peer that has not" "$1"; then
        pass "$2: the peer-unreachable message was printed"
    else
        dp_fail "$2: no peer-unreachable message"
    fi
    if grep -Eq "^ *Timeout: +$PT seconds$" "$1"; then
        pass "$2: the message gives the $PT s timeout"
    else
        dp_fail "$2: the message does not give the $PT s timeout"
    fi
    if grep -Eq "^ *Liveness pings: +$3" "$1"; then
        pass "$2: the message says: $(grep -E "^ *Liveness pings:" "$1" | head -1 | sed 's/^ *//')"
    else
        dp_fail "$2: no 'Liveness pings: $3' line"
    fi
}

# waited OUT LABEL MIN: both phases' senders waited at least MIN s for their sends
waited() {
    local p t
    for p in 0 1; do
        t=$(sed -nE "s/^busypeer: phase $p: rank [0-9]+'s sends completed after ([0-9.]+) s$/\1/p" "$1")
        if [ -z "$t" ]; then
            dp_fail "$2: phase $p: the sender did not report"
        elif lt "$t" "$3"; then
            dp_fail "$2: phase $p: the sends completed after ${t}s: the peer was not away ${3}s"
        else
            pass "$2: phase $p: the sends stayed unacknowledged for ${t}s"
        fi
    done
}

echo "=== a) busy peer: the receiver sleeps 12 s (3 x the timeout) with our data"
dp_run 1 "$WORK/a.out" --mca btl_usnic_peer_timeout $PT "$WORK/busypeer" busy 12
dp_check busypeer 1 "$WORK/a.out"
waited "$WORK/a.out" "a)" 11
no_message "$WORK/a.out" "a)"

echo "=== b) compute phase: the sender sleeps 6 s, then sends to a partner asleep for 2 s more"
dp_run 1 "$WORK/b.out" --mca btl_usnic_peer_timeout $PT "$WORK/busypeer" compute 6
dp_check busypeer 1 "$WORK/b.out"
waited "$WORK/b.out" "b)" 1.5
no_message "$WORK/b.out" "b)"

# pingloop_job OUT [MPIRUN-ARGS...]: pingloop for 60 s in the background (JOB = mpirun's pid)
pingloop_job() {
    local out=$1
    shift
    BTL=usnic,self mpirun_usnic -t 120 --mca btl_usnic_peer_timeout $PT "$@" \
        "$WORK/pingloop" 60 > "$out" 2>&1 &
    JOB=$!
}

echo "=== c) killed peer: the rank on hostB gets SIGKILL 5 s into a ping-pong"
pingloop_job "$WORK/c.out"
wait_ranks pingloop
sleep 5
victim=
for p in $(ip netns pids nsB); do
    [ "$(cat "/proc/$p/comm" 2>/dev/null)" = pingloop ] && victim=$p
done
if [ -n "$victim" ]; then kill -KILL "$victim"; else dp_fail "c) no pingloop process in nsB"; fi
t0=$EPOCHREALTIME
echo "== $(date +%T) killed pingloop pid $victim on hostB"
wait $JOB; rc=$?
t=$(elapsed "$t0")
cat "$WORK/c.out"
echo "== mpirun exit code $rc, ${t}s after the kill"
aborted "$rc" "c)"
if lt "$t" 15; then pass "c) ended ${t}s after the kill (bound 15 s)"
else dp_fail "c) ended ${t}s after the kill (bound 15 s)"; fi
if grep -Eq "exited on signal 9|retransmitting to a peer that has not" "$WORK/c.out"; then
    pass "c) ended by: $(grep -Eo "exited on signal 9|retransmitting to a peer that has not" \
        "$WORK/c.out" | head -1)"
else
    dp_fail "c) neither mpirun's notice of the killed process nor usnic's message"
fi

echo "=== d) cut link: every UDP datagram dropped both ways 5 s into a ping-pong"
netem_udp_all loss 0%
pingloop_job "$WORK/d.out"
wait_ranks pingloop
sleep 5
netem_change_all loss 100%
t0=$EPOCHREALTIME
echo "== $(date +%T) link cut"
wait $JOB; rc=$?
t=$(elapsed "$t0")
read -r _ da <<< "$(netem_stats A)"; read -r _ db <<< "$(netem_stats B)"
netem_clear
cat "$WORK/d.out"
echo "== mpirun exit code $rc, ${t}s after the cut; dropped $da/$db datagrams"
aborted "$rc" "d)"
if lt "$t" 15; then pass "d) ended ${t}s after the cut (bound 15 s)"
else dp_fail "d) ended ${t}s after the cut (bound 15 s)"; fi
if lt "$t" 3.5; then dp_fail "d) aborted ${t}s after the cut: before the $PT s timeout"
else pass "d) not before the $PT s timeout"; fi
[ $((da + db)) -gt 0 ] || dp_fail "d) the cut dropped nothing"
unreachable "$WORK/d.out" "d)" "no answer"
check_reports "$WORK/d.out" "d)"

echo "=== e) checker off: the busy peer of a) is declared dead"
t0=$SECONDS
dp_run 1 "$WORK/e.out" --mca btl_usnic_peer_timeout $PT --mca btl_usnic_connectivity_check 0 \
    "$WORK/busypeer" busy 12
t=$((SECONDS - t0))
aborted "$DP_RC" "e)"
unreachable "$WORK/e.out" "e)" "not used"
check_reports "$WORK/e.out" "e)"
if [ "$t" -lt 40 ]; then pass "e) aborted ${t}s after the launch (bound 40 s)"
else dp_fail "e) aborted ${t}s after the launch (bound 40 s)"; fi
dp_done
