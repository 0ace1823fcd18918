#!/bin/bash
# vm-timeout: 480
# Forged, replayed and flooded connectivity and liveness messages (test/rogue/usnic_connrogue.c,
# which knows no key: what anyone on the network can send). One rank per host, btl usnic,self.
#   a) dead peer, forged answers: progs/livedead.c; rank 1 (hostB) first stays outside MPI 5 s
#      with rank 0's data unacknowledged, so its progress thread answers rank 0's liveness
#      pings (busy); those LIVE_ACKs are captured on hostA's veth. Then, during a ping-pong,
#      rank 1 is frozen (SIGSTOP: dead, but mpirun sees no exit) with btl_usnic_peer_timeout 8.
#      From then on, from hostB with rank 1's address and port (spoofed) and from a third
#      address on hostB's link, every 100 ms: the captured LIVE_ACKs replayed, and LIVE_ACKs
#      claiming a busy peer forged in the first version's 16-byte format and in the current one
#      (random nonce and mac). The job must still abort with usnic's peer-unreachable message
#      ("no answer" to the liveness pings) between 1 and 1.25 times the timeout after the
#      freeze (plus MARGIN = 2 s for the message's way to mpirun's output from the emulated
#      hosts; mpirun's own teardown, within 10 s of it, is not in the bound: under load it
#      had taken the job's end to the old bound of 1.25 x T + 3 s), and
#      hostA must count the forgeries
#      (num_conn_stray). Before authenticated answers, a forged one marked the peer busy: the
#      job hung.
#   b) blocked path, forged checker ACKs: UDP datagrams of 8192 bytes or more dropped both ways
#      (a path with a smaller MTU, as in t-connectivity), progs/busy for 60 s; as soon as the
#      processes' checker sockets exist, ACKs of both ping sizes (32 and 8932 bytes) are forged
#      to each host's socket from the other's every 50 ms. The checker must still abort the job with its
#      "large datagrams do not" message. Before, a forged ACK of the large size hid the blocked
#      path: the job ran its 60 s and succeeded.
#   c) flood: progs/busypeer busy 10 (rank 1 outside MPI for 10 s with rank 0's data
#      unacknowledged, peer timeout 8), while the third address floods rank 1's checker socket
#      with forged LIVE_PINGs. Rank 1's answers to rank 0's real pings must still get through:
#      the job completes with every byte verified and no peer-unreachable message, and hostB
#      counts the flood (num_conn_refused) and the drain budgets it used up (num_conn_budget).
#      (This one guards the budget; the code before the fix passes it too.)
# SPDX-License-Identifier: BSD-3-Clause
set -u
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/dp-lib.sh"

T=8 MARGIN=2
ROGUE=$WORK/usnic_connrogue
THIRD=$RXEVM_NET.77
mpi_build livedead
mpi_build busy
mpi_build busypeer
cc_cached "$WORK/usnic_connrogue" gcc -O2 -Wall -Wextra -I"$REPO" "$REPO/test/rogue/usnic_connrogue.c" ||
    fail "gcc usnic_connrogue.c"
ip netns exec nsB ip addr add "$THIRD/24" dev vethB || fail "the third address"
BG=()
# cleanup: stop what this test started in the background
cleanup() {
    local p
    for p in "${BG[@]}"; do kill "$p" 2>/dev/null; done
    ip netns exec nsB ip addr del "$THIRD/24" dev vethB 2>/dev/null
    netem_clear
}
trap cleanup EXIT

# conn_port X PROG: the port of PROG's connectivity socket on hostX (UDP, bound to the veth
# address), or ""
conn_port() {
    local ip=RXEVM_IP_$1
    ip netns exec "ns$1" ss -Hunlp 2>/dev/null |
        awk -v a="${!ip}" -v p="\"$2\"" 'index($0, p) { n = split($4, f, ":")
            if (f[1] == a) { print f[n]; exit } }'
}
# wait_ports PROG: APORT and BPORT of PROG's processes (at most 30 s)
wait_ports() {
    APORT='' BPORT=''
    for _ in $(seq 300); do
        APORT=$(conn_port A "$1") BPORT=$(conn_port B "$1")
        [ -n "$APORT" ] && [ -n "$BPORT" ] && return 0
        sleep 0.1
    done
    dp_fail "$1: no connectivity sockets found (hostA '$APORT', hostB '$BPORT')"
    return 1
}
# max_stat OUT X NAME: the largest value of counter NAME in hostX's statistics lines
max_stat() {
    grep -E "btl:usnic: stats .*host$2 rxe$2[0-9]*: " "$1" | tr ' ' '\n' |
        sed -n "s/^$3=//p" | sort -n | tail -n 1
}

echo "=== a) a dead peer with forged and replayed liveness answers, peer timeout $T s"
OUT=$WORK/a.out
ip netns exec nsA "$ROGUE" capture vethA "$RXEVM_IP_B" "$RXEVM_IP_A" 90 "$WORK/acks.bin" \
    > "$WORK/capture.out" 2>&1 &
CAP=$!
BG+=("$CAP")
BTL=usnic,self mpirun_usnic -t 120 --mca btl_usnic_peer_timeout $T --mca btl_usnic_stats 1 \
    "$WORK/livedead" 5 > "$OUT" 2>&1 &
JOB=$!
for _ in $(seq 600); do
    grep -q '^livedead: ping-pong$' "$OUT" && break
    kill -0 $JOB 2>/dev/null || break
    sleep 0.1
done
grep -q '^livedead: ping-pong$' "$OUT" || { cat "$OUT"; fail "a) the ping-pong did not start"; }
wait_ports livedead
kill -TERM "$CAP"; wait "$CAP"
cat "$WORK/capture.out"
ncap=$(sed -n 's/^usnic_connrogue: captured \([0-9]*\) LIVE_ACKs$/\1/p' "$WORK/capture.out")
if [ "${ncap:-0}" -ge 1 ]; then pass "a) $ncap genuine LIVE_ACKs of the busy peer captured"
else dp_fail "a) no genuine LIVE_ACK captured: the replay proves nothing"; fi
sleep 1
victim=
for p in $(ip netns pids nsB); do
    [ "$(cat "/proc/$p/comm" 2>/dev/null)" = livedead ] && victim=$p
done
[ -n "$victim" ] || fail "a) no livedead process on hostB"
kill -STOP "$victim"
t0=$EPOCHREALTIME
echo "== $(date +%T) froze livedead pid $victim on hostB; forging from $RXEVM_IP_B:$BPORT and $THIRD"
for from in "" "$THIRD"; do
    # shellcheck disable=SC2086 # no FROM: the recorded (spoofed) source
    ip netns exec nsB "$ROGUE" replay "$WORK/acks.bin" $from 200 100 > /dev/null &
    BG+=($!)
    ip netns exec nsB "$ROGUE" forge "${from:-$RXEVM_IP_B}:$BPORT" "$RXEVM_IP_A:$APORT" live-ack \
        600000 200 100 > /dev/null &
    BG+=($!)
done
# usnic's verdict: its message, or its fatal-error line where Open MPI lost the message (below)
verdict='retransmitting to a peer that has not|fatal error on rxeA \(peer [0-9./]+ unreachable\)'
msg_t=
while kill -0 $JOB 2>/dev/null; do
    [ -z "$msg_t" ] && grep -Eq "$verdict" "$OUT" && msg_t=$(elapsed "$t0")
    sleep 0.1
done
wait $JOB; rc=$?
t=$(elapsed "$t0")
[ -z "$msg_t" ] && grep -Eq "$verdict" "$OUT" && msg_t=$t
kill -KILL "$victim" 2>/dev/null
cat "$OUT"
echo "== mpirun exit code $rc, ${t}s after the freeze; usnic's verdict after ${msg_t:-?}s"
aborted "$rc" "a)"
within "a)" "usnic's verdict" "$msg_t" $((T - 1)) "$(awk -v t=$T -v m=$MARGIN 'BEGIN { print 1.25 * t + m }')"
if [ -n "$msg_t" ] && lt "$t" "$(awk -v m="$msg_t" 'BEGIN { print m + 10 }')"; then
    pass "a) mpirun ended ${t}s after the freeze, within 10 s of usnic's verdict"
else
    dp_fail "a) mpirun ended ${t}s after the freeze, not within 10 s of usnic's verdict"
fi
# (Open MPI 4.1.4 sometimes loses a help message from a process on mpirun's own host; the
# PML's abort line, which names the cause, is not lost)
if grep -q 'retransmitting to a peer that has not' "$OUT"; then
    pass "a) usnic's peer-unreachable message"
    assert_grep '^ *Liveness pings: +no answer' "$OUT" "a) the message says the pings got no answer"
elif grep -Eq 'fatal error on rxeA \(peer [0-9./]+ unreachable\)' "$OUT"; then
    pass "a) usnic aborted the job: peer unreachable (its help message was lost)"
else
    dp_fail "a) usnic did not declare the peer unreachable"
fi
n=$(max_stat "$OUT" A num_conn_stray)
if [ "${n:-0}" -ge 1 ]; then pass "a) hostA dropped $n forged or replayed answers (num_conn_stray)"
else dp_fail "a) hostA's statistics show no num_conn_stray"; fi
for p in "${BG[@]}"; do kill "$p" 2>/dev/null; done
BG=()

echo "=== b) a blocked path (UDP of 8192 bytes or more dropped) with forged checker ACKs"
OUT=$WORK/b.out
drop_large_udp
SECONDS=0
BTL=usnic,self MPI_TIMEOUT=90 mpirun_usnic "$WORK/busy" 60 > "$OUT" 2>&1 &
JOB=$!
if wait_ports busy; then
    # (both ends check the path: each gets the other's answers forged)
    echo "== $(date +%T) forging ACKs between $RXEVM_IP_A:$APORT and $RXEVM_IP_B:$BPORT"
    for size in 32 8932; do
        ip netns exec nsB "$ROGUE" forge "$RXEVM_IP_B:$BPORT" "$RXEVM_IP_A:$APORT" ack $size \
            600 50 > /dev/null &
        BG+=($!)
        ip netns exec nsA "$ROGUE" forge "$RXEVM_IP_A:$APORT" "$RXEVM_IP_B:$BPORT" ack $size \
            600 50 > /dev/null &
        BG+=($!)
    done
fi
wait $JOB; rc=$?
t=$SECONDS
for p in "${BG[@]}"; do kill "$p" 2>/dev/null; done
BG=()
netem_clear
cat "$OUT"
echo "== mpirun exit code $rc after ${t}s"
aborted "$rc" "b)"
if [ "$t" -lt 45 ]; then pass "b) ended after ${t}s (bound 45 s)"
else dp_fail "b) ended after ${t}s (bound 45 s)"; fi
assert_grep 'large datagrams do not' "$OUT" "b) the checker reported the large pings failing"

echo "=== c) a busy peer's liveness answers under a flood of forged pings"
OUT=$WORK/c.out
BTL=usnic,self mpirun_usnic -t 120 --mca btl_usnic_peer_timeout $T --mca btl_usnic_stats 1000000 \
    "$WORK/busypeer" busy 10 > "$OUT" 2>&1 &
JOB=$!
if wait_ports busypeer; then
    echo "== $(date +%T) flooding $RXEVM_IP_B:$BPORT from $THIRD"
    ip netns exec nsB "$ROGUE" flood "$THIRD" "$RXEVM_IP_B:$BPORT" 40 > "$WORK/flood.out" 2>&1 &
    BG+=($!)
fi
wait $JOB; DP_RC=$?
for p in "${BG[@]}"; do kill "$p" 2>/dev/null; done
BG=()
cat "$OUT" "$WORK/flood.out"
dp_check busypeer 1 "$OUT"
no_message "$OUT" "c)"
n=$(dp_counter "$OUT" B num_conn_refused) b=$(dp_counter "$OUT" B num_conn_budget)
if [ "$n" -ge 1000 ] && [ "$b" -ge 1 ]; then
    pass "c) hostB dropped $n forged pings, $b drains stopped at their budget"
else
    dp_fail "c) hostB counted $n forged pings and $b drain budgets used up (at least 1000 and 1)"
fi
dp_done
