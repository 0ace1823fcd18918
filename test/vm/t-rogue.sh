#!/bin/bash
# vm-timeout: 480
# Rogue sender (test/rogue/usnic_rogue.c): while an MPI job runs, a program on hostB sends
# crafted UD datagrams straight at the usnic queue pairs of the job's process on hostA.
# The job (progs/steady.c) is rank 0 on hostA ping-ponging checksummed messages of every
# usnic size class with rank 1 on hostB; rank 2 on hostB is quiet (sends nothing to rank 0
# until the end), so its sender id can be forged with sequence numbers it never reaches.
# The tool takes the target's Q_Key, queue pairs and sender ids from the job's output
# (btl_base_verbose 10) and sequence numbers from the wire (AF_PACKET on vethB).
#   1) baseline     the job alone: the drop counters of a clean run
#   2) wrongqkey    datagrams of every kind below with wrong Q_Keys: the device drops them
#                   (hostA's Q_Key violation counter moves), usnic's counters do not
#   3) attack       with the right Q_Key: truncated packets, wrong lengths, unknown senders,
#                   chunks out of range, colliding fragments, ACKs for sequences never sent,
#                   random bytes, real sender ids far outside the window, PUTs into
#                   unregistered memory (a canary rank 0 checks), then datagrams larger than
#                   the priority channel's buffers and a fragment for tag 254 (nobody's);
#                   the drop counters grow by what the tool sent, the "received too many
#                   bad packets" warning appears, the canary is intact
#   4) tag255       one in-window fragment for active-message tag 255 (beyond Open MPI's
#                   255-entry callback table): must be dropped as bad like tag 254
#                   (ROGUE_SKIP_TAG255=1 skips this phase: set it inside the VM, e.g.
#                   tools/rxe-vm/rxe-vm env ROGUE_SKIP_TAG255=1 test/vm/run.sh --in-guest t-rogue:480)
# Every job must verify all its data, keep running during and after the attack and exit 0.
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
gcc -O2 -Wall -Wextra -I"$REPO" -o "$ROGUE" "$REPO/test/rogue/usnic_rogue.c" -libverbs ||
    fail "gcc usnic_rogue.c"

# job_start NAME: steady (3 ranks: 1 on hostA, 2 on hostB) in the background, output in
# $WORK/NAME.out; waits until its first messages are verified and parses what the rogue
# sender needs: A_ID A_QKEY A_PRIO A_DATA (rank 0), B1_ID (rank 1), B2_ID B2_PRIO (rank 2),
# CANARY CANARY_LEN
job_start() {
    local name=$1 i
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
    for i in $(seq 180); do
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
    local pid id qkey rank
    A_ID= B1_ID= B2_ID= A_PID= B2_PID=
    # "[hostA:00123] btl:usnic: hostA: sender id 0x0000abcd00000000, Q_Key 0x1234abcd"
    sed -nE 's/^\[(host[AB]:[0-9]+)\] btl:usnic: host[AB]: sender id (0x[0-9a-f]+), Q_Key (0x[0-9a-f]+)$/\1 \2 \3/p' \
        "$OUT" > "$WORK/ids"
    while read -r pid id qkey; do
        rank=$((id & 0xffffffff))             # sender id = jobid << 32 | vpid
        case $rank in
            0) A_ID=$id A_QKEY=$qkey A_PID=$pid ;;
            1) B1_ID=$id ;;
            2) B2_ID=$id B2_PID=$pid ;;
        esac
    done < "$WORK/ids"
    [ -n "$A_ID" ] && [ -n "$B1_ID" ] && [ -n "$B2_ID" ] && [ "${A_PID%%:*}" = hostA ] ||
        { job_dump; fail "no sender id / Q_Key lines for ranks 0-2 (btl_base_verbose 10)"; }
    A_PRIO=$(qp_of "$A_PID" priority) A_DATA=$(qp_of "$A_PID" data) B2_PRIO=$(qp_of "$B2_PID" priority)
    [ -n "$A_PRIO" ] && [ -n "$A_DATA" ] && [ -n "$B2_PRIO" ] ||
        { job_dump; fail "no 'channel ready' lines with QP numbers"; }
    read -r CANARY CANARY_LEN <<< "$(sed -nE 's/^steady: canary (0x[0-9a-f]+) ([0-9]+)$/\1 \2/p' "$OUT")"
    [ -n "$CANARY" ] || { job_dump; fail "no canary address"; }
    echo "target: rank 0 [$A_PID] sender id $A_ID Q_Key $A_QKEY QPs $A_PRIO (priority)" \
        "$A_DATA (data), canary $CANARY ($CANARY_LEN bytes)"
    echo "peer: rank 1 sender id $B1_ID; quiet: rank 2 [$B2_PID] sender id $B2_ID, priority QP $B2_PRIO"
}

# qp_of [HOST:PID] priority|data
qp_of() {
    sed -nE "s/^\[$1\] btl:usnic: [^ ]+ [^ ]+ $2 channel ready: CQ [0-9]+ entries, QP ([0-9]+),.*/\1/p" \
        "$OUT" | head -n 1
}

# rogue ARGS...: the tool on hostB against rank 0, output to the log and $WORK/rogue.txt
rogue() {
    echo "-- usnic_rogue $*"
    onhost B "$ROGUE" -d "${RXEVM_DEV_B:-rxeB}" -g "${RXEVM_GID_INDEX:-1}" -G "$RXEVM_IP_A" \
        -p "$A_PRIO" -q "$A_DATA" -k "$A_QKEY" -T "$A_ID" -s "$B1_ID" -S "$B2_ID" -Z "$B2_PRIO" \
        -I "${RXEVM_NETDEV_B:-vethB}" -c "$CANARY:$CANARY_LEN" "$@" > "$WORK/rogue.txt" 2>&1
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
    local before after i
    before=$(iterations)
    for i in $(seq 80); do
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
    grep -q '^steady: canary intact$' "$OUT" && pass "$name: canary intact" ||
        bad "$name: the canary was not confirmed intact"
}

# hstat NAME: counter NAME of hostA's final statistics ("" if none)
hstat() {
    grep -E "btl:usnic: stats final hostA " "$OUT" | tail -n 1 | tr ' ' '\n' | sed -n "s/^$1=//p"
}
# drops: DROPS = the sum of the counters a rogue datagram can move (hostA), -1 if there are
# no statistics; DROPS_DETAIL lists them
drops() {
    local c v
    DROPS=0 DROPS_DETAIL=
    for c in num_bad_recvs num_unk_recvs num_oow_low_recvs num_oow_high_recvs \
        num_badfrag_recvs num_bogus_acks; do
        v=$(hstat $c)
        [ -n "$v" ] || { DROPS=-1; return; }
        DROPS=$((DROPS + v))
        DROPS_DETAIL+=" ${c#num_}=$v"
    done
}

echo "== 1) baseline: the job alone"
job_start baseline
sleep 10
wait_progress baseline
job_stop baseline
drops
BASE=$DROPS
BASE_DETAIL=$DROPS_DETAIL
echo "baseline drop counters:$BASE_DETAIL (sum $BASE)"
[ "$BASE" -ge 0 ] || bad "baseline: no statistics from hostA"
# without rogue datagrams these stay at 0 (oow_low counts late retransmissions too)
for c in num_bad_recvs num_unk_recvs num_oow_high_recvs num_badfrag_recvs num_bogus_acks; do
    v=$(hstat $c)
    [ "$v" = 0 ] && pass "baseline: hostA $c=0" || bad "baseline: hostA $c=${v:-none}, expected 0"
done

echo "== 2) wrong Q_Keys"
job_start wrongqkey
V0=$(qkey_viol)
rogue -m wrongqkey -n $((3 * N))
V1=$(qkey_viol)
WRONG=$(rogue_total wrong_qkey)
wait_progress wrongqkey
job_stop wrongqkey
drops
D=$DROPS
echo "wrongqkey drop counters:$DROPS_DETAIL (sum $D); baseline:$BASE_DETAIL"
echo "rxeA Q_Key violations: $V0 -> $V1; datagrams sent with a wrong Q_Key: $WRONG"
if [ -z "$V0" ] || [ -z "$V1" ] || [ -z "$WRONG" ]; then
    bad "wrongqkey: no Q_Key violation counter or no total from the tool"
elif [ "$V1" -lt 65535 ] && [ $((V1 - V0)) -lt "$WRONG" ]; then
    bad "wrongqkey: rxeA counted $((V1 - V0)) Q_Key violations for $WRONG datagrams"
else
    pass "wrongqkey: rxeA dropped all $WRONG datagrams for their Q_Key ($V0 -> $V1 violations)"
fi
# a rogue datagram that got through would be counted as bad, unk or bogus (the tool sends no
# out-of-window or fragment kinds with wrong Q_Keys); these are zero in a clean run
# (num_oow_low_recvs also counts late retransmissions in clean runs: not checked)
for c in num_bad_recvs num_unk_recvs num_oow_high_recvs num_badfrag_recvs num_bogus_acks \
    num_recv_errors; do
    v=$(hstat $c)
    [ "$v" = 0 ] && pass "wrongqkey: hostA $c=0" || bad "wrongqkey: hostA $c=${v:-none}, expected 0"
done
grep -q 'dropped many malformed' "$OUT" && bad "wrongqkey: usnic warned about bad packets" ||
    pass "wrongqkey: no bad-packet warning"

echo "== 3) attacks with the right Q_Key"
job_start attack
rogue -m all -n "$N"
for f in right_qkey expect_dropped accepted bad unk oow_low oow_high badfrag bogus; do
    eval "E_$f=\$(rogue_total $f)"
done
rogue -m oversize,tag254 -n 50
for f in right_qkey expect_dropped oversize bad unk oow_low oow_high; do
    eval "X_$f=\$(rogue_total $f)"
done
wait_progress attack
job_stop attack
drops
D=$DROPS
echo "attack drop counters:$DROPS_DETAIL (sum $D); baseline:$BASE_DETAIL (sum $BASE)"
echo "tool: $E_right_qkey + $X_right_qkey datagrams with the right Q_Key; expected drops" \
    "$E_expect_dropped + $X_expect_dropped (bad $E_bad + $X_bad, unk $E_unk, oow_low" \
    "$E_oow_low + $X_oow_low, oow_high $E_oow_high + $X_oow_high, badfrag $E_badfrag, bogus" \
    "$E_bogus), $E_accepted accepted (each forged fragment's first chunk), $X_oversize oversized"
# growth KIND EXPECTED COUNTER...: the counters (hostA, minus the baseline run's) must have
# grown by at least MIN_PCT% of EXPECTED. num_oow_low_recvs also counts late retransmissions
# (their number varies from run to run): it is taken as it is, a lower bound only.
growth() {
    local what=$1 exp=$2 got=0 c v b
    shift 2
    for c; do
        v=$(hstat "$c") b=$(sed -nE "s/.* ${c#num_}=([0-9]+).*/\1/p" <<< "$BASE_DETAIL ")
        [ -n "$v" ] || { bad "attack: no $c in hostA's statistics"; return; }
        [ "$c" = num_oow_low_recvs ] && b=0
        got=$((got + v - ${b:-0}))
    done
    if [ "$got" -ge $((exp * MIN_PCT / 100)) ]; then
        pass "attack: $what grew by $got for $exp rogue datagrams$([ "$got" = "$exp" ] && echo " (exactly)")"
    else
        bad "attack: $what grew by $got, expected at least $MIN_PCT% of $exp"
    fi
}
if [ -z "$E_expect_dropped" ] || [ -z "$X_expect_dropped" ] || [ "$D" -lt 0 ]; then
    bad "attack: no totals from the tool or no statistics from hostA"
else
    growth "all drop counters (bad+unk+oow_low+oow_high+badfrag+bogus_acks)" \
        $((E_expect_dropped + X_expect_dropped)) num_bad_recvs num_unk_recvs num_oow_low_recvs \
        num_oow_high_recvs num_badfrag_recvs num_bogus_acks
    # the same without oow_low, whose clean-run noise could hide missing drops
    growth "drop counters without oow_low" \
        $((E_expect_dropped + X_expect_dropped - E_oow_low - X_oow_low)) num_bad_recvs \
        num_unk_recvs num_oow_high_recvs num_badfrag_recvs num_bogus_acks
    # random bytes count as bad or as unk (well-formed by chance, unknown sender): together
    growth "bad+unk" $((E_bad + X_bad + E_unk + X_unk)) num_bad_recvs num_unk_recvs
    growth "unk" "$E_unk" num_unk_recvs
    growth "oow_high" $((E_oow_high + X_oow_high)) num_oow_high_recvs
    growth "oow_low" $((E_oow_low + X_oow_low)) num_oow_low_recvs
    growth "badfrag" "$E_badfrag" num_badfrag_recvs
    growth "bogus_acks" "$E_bogus" num_bogus_acks
    # the counters that stay at 0 without rogue datagrams must not exceed what was sent
    for k in "bad+unk:$((E_bad + X_bad + E_unk + X_unk)):num_bad_recvs num_unk_recvs" \
        "oow_high:$((E_oow_high + X_oow_high)):num_oow_high_recvs" \
        "badfrag:$E_badfrag:num_badfrag_recvs" "bogus_acks:$E_bogus:num_bogus_acks"; do
        v=0
        for c in ${k##*:}; do v=$((v + $(hstat "$c"))); done
        k=${k%:*}
        [ "$v" -le "${k#*:}" ] || bad "attack: ${k%%:*} is $v, more than the ${k#*:} rogue datagrams sent"
    done
    # datagrams larger than the priority channel's receive buffers: rxe drops them before
    # any completion (or completes them with an error: num_recv_errors); the job carries on
    echo "info: $X_oversize oversized datagrams to the priority QP: num_recv_errors=$(hstat num_recv_errors)"
fi
if grep -q 'The usnic BTL has dropped many malformed datagrams' "$OUT" &&
    grep -Eq '^ +Host: +hostA$' "$OUT"; then
    pass "attack: hostA showed the 'received too many bad packets' warning"
else
    grep -n 'show_help\|ORTE_ERROR_LOG' "$OUT"
    bad "attack: no 'received too many bad packets' warning from hostA"
fi

if [ "${ROGUE_SKIP_TAG255:-0}" = 1 ]; then
    echo "== 4) tag 255: skipped (ROGUE_SKIP_TAG255=1)"
else
    echo "== 4) tag 255"
    job_start tag255
    rogue -m tag255 -n 1
    sleep 3
    if kill -0 $JOB 2>/dev/null; then
        wait_progress tag255
    fi
    job_stop tag255
    E_BAD=$(rogue_total bad) B=$(hstat num_bad_recvs)
    [ -n "$B" ] && [ -n "$E_BAD" ] && [ "$B" -ge "$E_BAD" ] &&
        pass "tag255: num_bad_recvs=$B: dropped as bad (the tool expects $E_BAD, incl. probes)" ||
        bad "tag255: num_bad_recvs=${B:-none}, expected ${E_BAD:-?} (a fragment for tag 255 is bad)"
fi

[ "$FAILED" = 0 ] || fail "see the FAIL lines above"
pass "all checks passed"
