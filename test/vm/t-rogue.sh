#!/bin/bash
# vm-timeout: 480
# Rogue sender (test/rogue/usnic_rogue.c): while an MPI job runs, a program sends crafted UD
# datagrams straight at the usnic queue pairs of the job's process on hostA.
# The job (progs/steady.c) is rank 0 on hostA ping-ponging checksummed messages of every
# usnic size class with rank 1 on hostB (rank 2 on hostB is quiet).
# The Q_Key is random and printed nowhere. The tool reads rank 0's modex record (its queue
# pairs and Q_Key) from the memory of a process of the job (/proc/PID/mem): what any local
# attacker with the job's user id can do (ptrace rights over the user's own processes; the
# tests run as root). On hostB it reads rank 1, which keeps rank 0's record; on hostA rank 0
# itself. (Reading the PMIx modex would need a PMIx client of the job; memory is simpler and
# no weaker.) Sender ids and pids come from the job's output (btl_base_verbose 10: the
# "fact id" line, a test contract, see docs/tests.md; a sender id is just a process name), sequence
# numbers from the wire (AF_PACKET on the host's veth).
#   1) baseline     the job alone: the drop counters of a clean run are 0 (oow_low aside),
#                   num_forged_recvs too (every real datagram passes the source check)
#   2) wrongqkey    datagrams of every kind below with wrong Q_Keys: the device drops them
#                   (hostA's Q_Key violation counter moves), usnic's counters do not
#   3) attack       from hostB with the right Q_Key: truncated packets, wrong lengths, unknown
#                   senders, chunks out of range, random bytes (-> bad, unk), and datagrams
#                   forged in rank 1's name from the tool's own queue pair on rank 1's host
#                   (so with rank 1's GID): ACKs for what rank 0 sent last, fragments and
#                   first chunks next in rank 1's stream, PUTs into a canary rank 0 checks,
#                   GETs of it and fetch-and-adds on it (tag 255), fragments for tag 254
#                   (-> forged); then datagrams larger than
#                   the priority channel's buffers. The counters grow by what the tool sent,
#                   the "received too many bad packets" warning appears
#   4) samehost     from hostA, the target's own host (neither rank 1's queue pair nor its
#                   GID): the same forgeries, all counted in num_forged_recvs
# Every job must verify all its data (every byte), keep running during and after the attack
# and exit 0 with the canary intact; no forged datagram may reach the window, ACK or
# reassembly counters.
# SPDX-License-Identifier: BSD-3-Clause
set -u
. "$(dirname "$0")/lib.sh"

# Datagrams per attack mode; the drop counters must account for at least MIN_PCT percent of
# what the tool sent (UD may drop a few when a receive queue runs dry; in practice none are).
N=${ROGUE_COUNT:-200}
MIN_PCT=${ROGUE_MIN_PCT:-95}
ROGUE=$WORK/usnic_rogue
FAILED=0
# check failed: the test goes on (later phases still give their evidence), fails at the end
bad() { echo "FAIL: $*"; FAILED=1; }

mpi_build steady
cc_cached "$WORK/usnic_rogue" gcc -O2 -Wall -Wextra -I"$REPO" "$REPO/test/rogue/usnic_rogue.c" -libverbs ||
    fail "gcc usnic_rogue.c"

# job_start NAME: steady (3 ranks: 1 on hostA, 2 on hostB) in the background, output in
# $WORK/NAME.out; waits until its first messages are verified and parses what the rogue
# sender needs: A_ID A_PID (rank 0), B1_ID B1_PID (rank 1), CANARY CANARY_LEN
job_start() {
    local name=$1
    OUT=$WORK/$name.out STOP=$WORK/stop-$name
    rm -f "$STOP"
    echo "== $name: starting the job"
    # mpirun runs on hostB, with rank 0 on hostA: a help message from a process on mpirun's
    # own host sometimes gets lost in Open MPI 4.1.4 (the launcher logs "ORTE_ERROR_LOG: ...
    # show_help.c"), one relayed by the other host's daemon arrives. The sequential mapper
    # places the ranks in the order of the hostfile.
    printf 'hostA\nhostB\nhostB\n' > "$WORK/hostfile"
    onhost B timeout -k 5 300 mpirun --allow-run-as-root -np 3 --hostfile "$WORK/hostfile" \
        --mca rmaps seq --mca plm_rsh_agent rxevm-rsh --mca oob_tcp_if_include "$RXEVM_NET.0/24" \
        --mca pml ob1 --mca btl usnic,self,vader --mca btl_usnic_stats 1000000 \
        --mca btl_base_verbose 10 "$WORK/steady" -t 240 -f "$STOP" > "$OUT" 2>&1 &
    JOB=$!
    T0=$SECONDS
    for _ in $(seq 180); do
        grep -q '^steady: running$' "$OUT" && break
        kill -0 $JOB 2>/dev/null || break
        sleep 0.5
    done
    grep -q '^steady: running$' "$OUT" || { job_dump; fail "$name: the job did not start"; }
    echo "job running after $((SECONDS - T0)) s"
    job_parse
}

# the whole job output (verbose) only when something went wrong
job_dump() { echo "--- $OUT:"; cat "$OUT"; echo "--- end of $OUT"; }

job_parse() {
    local host pid id
    A_ID='' B1_ID='' A_PID='' B1_PID=''
    # "btl:usnic: fact id host=hostA pid=123 sender_id=0x0000abcd00000000" (sender id =
    # jobid << 32 | vpid); opal_output may put "[host:pid] " before it, more fields may follow
    sed -nE 's/^(\[[^]]*\] )?btl:usnic: fact id host=(host[AB]) pid=([0-9]+) sender_id=(0x[0-9a-f]+)( .*)?$/\2 \3 \4/p' \
        "$OUT" > "$WORK/ids"
    while read -r host pid id; do
        case "$host:$((id & 0xffffffff))" in
            hostA:0) A_ID=$id A_PID=$pid ;;
            hostB:1) B1_ID=$id B1_PID=$pid ;;
        esac
    done < "$WORK/ids"
    { [ -n "$A_ID" ] && [ -n "$B1_ID" ]; } ||
        { job_dump; fail "no 'fact id' lines for rank 0 on hostA and rank 1 on hostB"; }
    read -r CANARY CANARY_LEN <<< "$(sed -nE 's/^steady: canary (0x[0-9a-f]+) ([0-9]+)$/\1 \2/p' "$OUT")"
    [ -n "$CANARY" ] || { job_dump; fail "no canary address"; }
    echo "target: rank 0 (hostA pid $A_PID) sender id $A_ID, canary $CANARY ($CANARY_LEN bytes);" \
        "peer: rank 1 (hostB pid $B1_PID) sender id $B1_ID"
}

# rogue HOST PID ARGS...: the tool on hostHOST against rank 0, its record read from process
# PID of that host; output to the log and $WORK/rogue.txt
rogue() {
    local h=$1 pid=$2 dev netdev
    shift 2
    dev=RXEVM_DEV_$h netdev=RXEVM_NETDEV_$h
    echo "-- usnic_rogue on host$h $*"
    onhost "$h" "$ROGUE" -d "${!dev:-rxe$h}" -g "${RXEVM_GID_INDEX:-1}" -G "$RXEVM_IP_A" \
        -A "$pid" -T "$A_ID" -s "$B1_ID" -I "${!netdev:-veth$h}" -c "$CANARY:$CANARY_LEN" "$@" \
        > "$WORK/rogue.txt" 2>&1
    ROGUE_RC=$?
    cat "$WORK/rogue.txt"
    [ "$ROGUE_RC" = 0 ] || bad "usnic_rogue $* exited with $ROGUE_RC"
}

# rogue_total FIELD: a number from the tool's last "total:" line
rogue_total() {
    grep '^rogue: total: ' "$WORK/rogue.txt" | tail -n 1 | tr -d '()' |
        awk -v f="$1" '{ for (i = 1; i < NF; i++) if ($i == f) { print $(i + 1); exit } }'
}

qkey_viol() {
    onhost A "$ROGUE" -d "${RXEVM_DEV_A:-rxeA}" -Q | sed -nE 's/.* qkey_viol_cntr ([0-9]+) .*/\1/p'
}

# iterations: the last "steady: t=S iterations=N" count
iterations() { sed -nE 's/^steady: t=[0-9]+ iterations=([0-9]+)$/\1/p' "$OUT" | tail -n 1; }

# wait_progress NAME: the job still verifies messages (a newer iterations report, within 40 s)
wait_progress() {
    local before after
    before=$(iterations)
    for _ in $(seq 80); do
        after=$(iterations)
        [ -n "$after" ] && [ "${after}" -gt "${before:-0}" ] && break
        kill -0 $JOB 2>/dev/null || break
        sleep 0.5
    done
    if [ -n "$after" ] && [ "$after" -gt "${before:-0}" ]; then
        pass "$1: the job kept verifying messages (${before:-no report yet} -> $after ping-pongs)"
    else
        bad "$1: the job made no progress (iterations ${before:-none} -> ${after:-none})"
    fi
}

# job_stop NAME: stop file, wait, check the job: exit code 0, all data verified, canary
job_stop() {
    local name=$1
    touch "$STOP"
    wait $JOB
    JOB_RC=$?
    echo "job ran $((SECONDS - T0)) s, exit code $JOB_RC"
    grep -E '^steady: |btl:usnic: stats final|MISMATCH|ERROR|dropped many malformed|^ +(Host|Device|Dropped|Last): ' "$OUT"
    if [ "$JOB_RC" != 0 ] || ! grep -q '^steady: OK [0-9]* messages' "$OUT" ||
        grep -Eq '^steady: (MISMATCH|ERROR|FAILED)' "$OUT"; then
        job_dump
        bad "$name: the job failed (exit code $JOB_RC$([ "$JOB_RC" = 124 ] && echo ", timed out"))"
    else
        pass "$name: job exit code 0, $(sed -nE 's/^steady: OK //p' "$OUT")"
    fi
    if grep -q '^steady: canary intact$' "$OUT"; then pass "$name: canary intact"
    else bad "$name: the canary was not confirmed intact"; fi
}

# hstat NAME: counter NAME of hostA's final statistics ("" if none)
hstat() {
    grep -E "btl:usnic: stats final hostA " "$OUT" | tail -n 1 | tr ' ' '\n' | sed -n "s/^$1=//p"
}
# zero PHASE COUNTER...: hostA's counters are 0
zero() {
    local what=$1 c v
    shift
    for c; do
        v=$(hstat "$c")
        if [ "$v" = 0 ]; then pass "$what: hostA $c=0"
        else bad "$what: hostA $c=${v:-none}, expected 0"; fi
    done
}

# grew PHASE WHAT SENT COUNTER...: the sum of hostA's counters is at least MIN_PCT% of SENT
# (what the tool sent) and at most SENT (they are 0 without the tool: see the baseline)
grew() {
    local what=$1 label=$2 sent=$3 got=0 c v
    shift 3
    for c; do
        v=$(hstat "$c")
        [ -n "$v" ] || { bad "$what: no $c in hostA's statistics"; return; }
        got=$((got + v))
    done
    if [ -z "$sent" ] || [ "$sent" -le 0 ]; then
        bad "$what: the tool sent no $label datagrams"
    elif [ "$got" -lt $((sent * MIN_PCT / 100)) ] || [ "$got" -gt "$sent" ]; then
        bad "$what: $label counters at $got for $sent rogue datagrams (expected $MIN_PCT-100%)"
    else
        pass "$what: $label counters at $got for $sent rogue datagrams$([ "$got" = "$sent" ] && echo " (all)")"
    fi
}

# the counters no rogue datagram may reach any more (a forged one would be counted there
# if it got past the source check); num_oow_low_recvs also counts late retransmissions
UNREACHED=(num_oow_high_recvs num_badfrag_recvs num_bogus_acks)

echo "== 1) baseline: the job alone"
job_start baseline
sleep 10
wait_progress baseline
job_stop baseline
zero baseline num_bad_recvs num_unk_recvs num_forged_recvs "${UNREACHED[@]}"

echo "== 2) wrong Q_Keys"
job_start wrongqkey
V0=$(qkey_viol)
rogue B "$B1_PID" -m wrongqkey -n $((3 * N))
V1=$(qkey_viol)
WRONG=$(rogue_total wrong_qkey)
wait_progress wrongqkey
job_stop wrongqkey
echo "rxeA Q_Key violations: $V0 -> $V1; datagrams sent with a wrong Q_Key: $WRONG"
if [ -z "$V0" ] || [ -z "$V1" ] || [ -z "$WRONG" ]; then
    bad "wrongqkey: no Q_Key violation counter or no total from the tool"
elif [ "$V1" -lt 65535 ] && [ $((V1 - V0)) -lt "$WRONG" ]; then
    bad "wrongqkey: rxeA counted $((V1 - V0)) Q_Key violations for $WRONG datagrams"
else
    pass "wrongqkey: rxeA dropped all $WRONG datagrams for their Q_Key ($V0 -> $V1 violations)"
fi
zero wrongqkey num_bad_recvs num_unk_recvs num_forged_recvs "${UNREACHED[@]}" num_recv_errors
if grep -q 'dropped many malformed' "$OUT"; then bad "wrongqkey: usnic warned about bad packets"
else pass "wrongqkey: no bad-packet warning"; fi

echo "== 3) attacks from hostB with the right Q_Key"
job_start attack
rogue B "$B1_PID" -m all -n "$N"
E_BAD=$(rogue_total bad) E_UNK=$(rogue_total unk) E_FORGED=$(rogue_total forged)
rogue B "$B1_PID" -m oversize -n 50
X_OVERSIZE=$(rogue_total oversize)
wait_progress attack
job_stop attack
echo "tool: bad $E_BAD, unk $E_UNK, forged $E_FORGED, oversized $X_OVERSIZE"
# random bytes count as bad or as unk (well-formed by chance, unknown sender): together
grew attack "bad+unk" $((E_BAD + E_UNK)) num_bad_recvs num_unk_recvs
grew attack "unk" "$E_UNK" num_unk_recvs
grew attack "forged" "$E_FORGED" num_forged_recvs
zero attack "${UNREACHED[@]}"
# datagrams larger than the priority channel's receive buffers: rxe drops them before any
# completion (or completes them with an error: num_recv_errors); the job carries on
echo "info: $X_OVERSIZE oversized datagrams to the priority QP: num_recv_errors=$(hstat num_recv_errors)"
if grep -q 'The usnic BTL has dropped many malformed datagrams' "$OUT" &&
    grep -Eq '^ +Host: +hostA$' "$OUT"; then
    pass "attack: hostA showed the 'received too many bad packets' warning"
else
    grep -n 'show_help\|ORTE_ERROR_LOG' "$OUT"
    bad "attack: no 'received too many bad packets' warning from hostA"
fi

echo "== 4) forgeries from the target's own host"
job_start samehost
rogue A "$A_PID" -m forge -n $((2 * N))
E_FORGED=$(rogue_total forged)
wait_progress samehost
job_stop samehost
grew samehost "forged" "$E_FORGED" num_forged_recvs
zero samehost num_bad_recvs num_unk_recvs "${UNREACHED[@]}"

[ "$FAILED" = 0 ] || fail "see the FAIL lines above"
pass "all checks passed"
