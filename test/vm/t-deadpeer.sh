#!/bin/bash
# vm-timeout: 240
# world: native
# Dead link / dead peer: a checked ping-pong between the hosts (progs/pingloop.c: 64 B to
# 200 KB messages, always one in flight) and a network outage during it, with the usnic
# connectivity checker on (its default: 41 pings 250 ms apart, a budget of 10.25 s, at the
# first contact with each peer). A dead peer must be reported by usnic's own peer-unreachable
# message between 1 and 1.25 x btl_usnic_peer_timeout after its last sign of life (README,
# docs/usage.md), plus MARGIN = 1.5 s for the message's way to mpirun's output and a rank
# descheduled on the shared 2-core host (measured natively: the message 0-0.1 s after
# 1 x the timeout, in 2- and 4-host worlds; t-hostgone saw up to 0.3 s):
#   a) outage longer than the budget: 2 s after pingloop's first line (its ranks are past
#      MPI_Init) in a 20 s job, every RoCE datagram (UDP port 4791) is dropped in both
#      directions for good, btl_usnic_peer_timeout 4. The job must abort with the "peer
#      unreachable" message naming its host and device, the other host and its address, and
#      the 4 s budget, 4 to 1.25 x 4 + MARGIN s after the outage began (0.1 s less for the
#      last ACK, which came up to one round trip before it; a rule that waits 2 x the
#      timeout reports at 8 s); never hang, never succeed. The checker (done long before)
#      must not report anything. Its sockets still get through: the liveness pings of the
#      dead-peer check are answered by a peer process that runs MPI, which proves the data
#      path (not the peer) dead, and the message must say so.
#   b) outage shorter than the budget: the same with a 4 s outage, peer_timeout 10 and a 12 s
#      job. The job must complete (every message verified, exit 0) within 12 + 4 + 10 s of
#      its launch, its longest round trip must show the stall, and neither usnic nor the
#      checker may report anything.
#   c) outage at the first contact, shorter than both budgets: every UDP datagram (RoCE and
#      the checker's pings) dropped from before the launch until 6 s after the first drop,
#      peer_timeout 10: as b) (the stall shows in the first contact, pingloop's MPI_Allgather
#      right after MPI_Init), and the checker must not give up.
#   d) dead link from the start: every UDP datagram dropped for good from before the launch,
#      peer_timeout 30 (the default): the connectivity checker's message ("got no answer at
#      all") must end the job within its 10.25 s budget + STARTUP + MARGIN of its processes
#      running (STARTUP = 2 s: MPI_Init up to the first contact; measured: the message
#      10.6 s after the ranks were seen running),
#      naming the right peer.
# SPDX-License-Identifier: BSD-3-Clause
set -u
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/dp-lib.sh"      # also wait_ranks, elapsed, lt, no_message, check_reports, aborted
# The netem qdiscs are put in place before each job and only changed (netem_change) while it
# runs: grafting a qdisc under traffic makes rxe fail the QP (see netem_change in fault-lib.sh).
. "$(dirname "$0")/fault-lib.sh"
mpi_build pingloop

MARGIN=1.5 STARTUP=2
# start_job OUT PEER_TIMEOUT SECONDS: pingloop in the background (JOB = mpirun's pid), one
# rank per host, usnic statistics at finalize as in dp_run, killed after 60 s
start_job() {
    echo "== pingloop $3 s, btl_usnic_peer_timeout $2"
    BTL=usnic,self mpirun_usnic -t 60 --mca btl_usnic_stats 1000000 \
        --mca btl_usnic_peer_timeout "$2" "$WORK/pingloop" "$3" > "$1" 2>&1 &
    JOB=$!
}

PT=4
echo "=== a) outage longer than the budget: RoCE dropped for good 2 s into the job, peer_timeout $PT"
netem_roce_both loss 0%
start_job "$WORK/a.out" $PT 20
wait_line "$WORK/a.out" "^pingloop: [0-9]+ ranks on"
sleep 2
# (the clock starts before the cut: netem_change_all takes a while on a busy host)
t0=$EPOCHREALTIME
netem_change_all loss 100%
echo "== $(date +%T) RoCE outage begins (both directions)"
watch_job "$WORK/a.out" "$t0" "$JOB"
echo "== $(date +%T) mpirun exit code $JOB_RC, ${END_T}s after the outage began; usnic's" \
    "message after ${MSG_T:-?}s"
read -r _ da <<< "$(netem_stats A)"; read -r _ db <<< "$(netem_stats B)"
echo "== the RoCE netem dropped $da (hostA) and $db (hostB) datagrams"
netem_clear
cat "$WORK/a.out"
aborted "$JOB_RC" "a)"
within "a)" "usnic's peer-unreachable message" "$MSG_T" "$(awk -v t=$PT 'BEGIN { print t - 0.1 }')" \
    "$(awk -v t=$PT -v m=$MARGIN 'BEGIN { print 1.25 * t + m }')"
# (one host may have had nothing to send: the ping or the pong was in flight, not both)
if [ $((da + db)) = 0 ]; then dp_fail "a) the outage dropped nothing"; fi
if grep -q "^The usnic BTL has been retransmitting to a peer that has not" "$WORK/a.out" &&
   grep -q "^acknowledged anything for too long" "$WORK/a.out"; then
    pass "a) the peer-unreachable message was printed"
else
    dp_fail "a) no peer-unreachable message"
fi
if grep -Eq '^ *Liveness pings: +answered by a peer process that runs MPI' "$WORK/a.out"; then
    pass "a) the message says the peer answered its liveness pings from within MPI"
else
    dp_fail "a) the message does not say that the peer answered from within MPI"
fi
if grep -Eq "^ *Timeout: +$PT seconds$" "$WORK/a.out"; then
    pass "a) the message gives the $PT s budget"
else
    dp_fail "a) the message does not give the $PT s budget"
fi
check_reports "$WORK/a.out" "a)"
if grep -q "connectivity checker" "$WORK/a.out"; then
    dp_fail "a) the connectivity checker reported a failure"
else
    pass "a) no connectivity checker message"
fi

# run_short LABEL WHEN: a LEN = 12 s job with peer_timeout 10 and an outage WHEN = "after2s"
# (2 s after pingloop's first line, RoCE only, 4 s) or "atstart" (from before the ranks run,
# all UDP, until 6 s after the first datagram it drops)
run_short() {
    local label=$1 out=$WORK/$1.out t0 t dur longest ts=$SECONDS len=12
    if [ "$2" = atstart ]; then
        netem_udp_all loss 100%
        echo "== $(date +%T) $label: all UDP dropped (both directions)"
        start_job "$out" 10 $len
        wait_ranks pingloop
        # 6 s from the first datagram dropped (the first contact, on pingloop's clock), not
        # from the ranks' start: on a slow host MPI_Init alone can take longer than that
        for _ in $(seq 120); do
            read -r _ da <<< "$(netem_stats A)"; read -r _ db <<< "$(netem_stats B)"
            [ $((da + db)) -gt 0 ] && break
            sleep 0.5
        done
        t0=$EPOCHREALTIME
        dur=6
    else
        netem_roce_both loss 0%
        start_job "$out" 10 $len
        wait_line "$out" "^pingloop: [0-9]+ ranks on"
        sleep 2
        netem_change_all loss 100%
        t0=$EPOCHREALTIME
        echo "== $(date +%T) $label: RoCE dropped (both directions)"
        dur=4
    fi
    sleep $dur
    netem_change_all loss 0%
    read -r _ da <<< "$(netem_stats A)"; read -r _ db <<< "$(netem_stats B)"
    echo "== $(date +%T) $label: outage over after $(elapsed "$t0")s (since it began; atstart: since" \
        "its first drop); dropped $da/$db datagrams"
    wait $JOB; DP_RC=$?
    cat "$out"
    echo "== mpirun exit code $DP_RC"
    netem_clear
    dp_check pingloop 1 "$out"
    t=$((SECONDS - ts))
    if [ "$t" -le $((len + dur + 10)) ]; then pass "$label: the $len s job took ${t}s (bound $((len + dur + 10)) s)"
    else dp_fail "$label: the $len s job took ${t}s (bound $((len + dur + 10)) s)"; fi
    if [ $((da + db)) = 0 ]; then dp_fail "$label: the outage dropped nothing"; fi
    longest=$(sed -nE 's/^pingloop: .* longest ([0-9.]+) s .*/\1/p' "$out")
    if [ -z "$longest" ]; then
        dp_fail "$label: pingloop printed no longest round trip"
    elif ! lt "$longest" $((dur - 1)); then
        pass "$label: the outage stalled the ping-pong for ${longest}s"
    elif [ "$2" = atstart ]; then
        # the first contact (pingloop's MPI_Allgather right after MPI_Init) took the hit:
        # pingloop's clock, which starts before it, ran that much longer than the LEN s loop
        t=$(sed -nE 's/^pingloop: OK .* verified \(([0-9.]+) s\)$/\1/p' "$out")
        if [ -n "$t" ] && ! lt "$t" $((len + dur - 2)); then
            pass "$label: the outage stalled the first contact: ${t}s for the $len s loop"
        else
            dp_fail "$label: pingloop took ${t:-?}s for its $len s loop, longest round trip" \
                "${longest}s: the ${dur}s outage stalled nothing"
        fi
    else
        dp_fail "$label: longest round trip ${longest}s: the ${dur}s outage did not stall it"
    fi
    no_message "$out" "$label"
}

echo "=== b) outage shorter than the budget: RoCE dropped for 4 s, peer_timeout 10"
run_short b after2s
echo "=== c) outage at the first contact: all UDP dropped until 6 s after start, peer_timeout 10"
run_short c atstart

echo "=== d) dead link from the start: all UDP dropped for good, peer_timeout 30"
netem_udp_all loss 100%
start_job "$WORK/d.out" 30 20
wait_ranks pingloop
t0=$EPOCHREALTIME
watch_job "$WORK/d.out" "$t0" "$JOB"
echo "== $(date +%T) mpirun exit code $JOB_RC, ${END_T}s after both ranks ran; the checker's" \
    "message after ${CHK_T:-?}s"
netem_clear
cat "$WORK/d.out"
aborted "$JOB_RC" "d)"
within "d)" "the connectivity checker's message (from the ranks' start)" "$CHK_T" 0 \
    "$(awk -v s=$STARTUP -v m=$MARGIN 'BEGIN { print 10.25 + s + m }')"
check_reports "$WORK/d.out" "d)"
dp_done
