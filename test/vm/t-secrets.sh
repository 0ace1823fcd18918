#!/bin/bash
# vm-timeout: 300
# The Q_Key (whoever knows it can send to a job's queue pairs) and the initial sequence
# numbers come from getrandom(), and the Q_Key is printed nowhere.
#   1) a 2-host job (progs/steady.c, usnic,self, btl_base_verbose 100, statistics): the Q_Key
#      of each rank, read from its memory (test/rogue/usnic_rogue -A PID -D, as a local
#      attacker with the job's user id could), appears nowhere in the job's output, and is
#      not what the old derivation from pid, start time and rank gives (progs/oldqkey.c)
#   2) getrandom failing inside the component (progs/nogetrandom.c, LD_PRELOAD), first for the
#      Q_Key, then for the key of the connectivity messages, then for a device's initial
#      sequence numbers: the "no random numbers" help
#      message, usnic without devices (no statistics) and the job still runs (over tcp)
# SPDX-License-Identifier: BSD-3-Clause
set -u
. "$(dirname "$0")/lib.sh"

mpi_build steady
mpi_build hello
cc_cached "$WORK/usnic_rogue" gcc -O2 -Wall -Wextra -I"$REPO" "$REPO/test/rogue/usnic_rogue.c" -libverbs ||
    fail "gcc usnic_rogue.c"
mpi_build oldqkey -lopen-pal
cc_cached "$WORK/nogetrandom.so" gcc -shared -fPIC -O2 -Wall "$REPO/test/vm/progs/nogetrandom.c" -ldl ||
    fail "gcc nogetrandom.c"

# pid_on X: the pid of the job's process (steady) on hostX (the hosts have their own mount
# namespaces: the executable's path is seen with a prefix from here)
pid_on() {
    local p
    for p in $(ip netns pids "ns$1"); do
        case $(readlink "/proc/$p/exe" 2>/dev/null) in
            *"$WORK/steady") echo "$p"; return ;;
        esac
    done
}

echo "== 1) the Q_Key is unpredictable and never printed"
STOP=$WORK/stop OUT=$WORK/steady.out
T0=$(date +%s)
BTL=usnic,self mpirun_usnic -t 200 --mca btl_base_verbose 100 --mca btl_usnic_stats 1 \
    "$WORK/steady" -t 150 -f "$STOP" > "$OUT" 2>&1 &
JOB=$!
for _ in $(seq 180); do
    grep -q '^steady: running$' "$OUT" && break
    kill -0 $JOB 2>/dev/null || break
    sleep 0.5
done
T1=$(date +%s)
grep -q '^steady: running$' "$OUT" || { cat "$OUT"; fail "the job did not start"; }
declare -A QK PID
for x in A B; do
    PID[$x]=$(pid_on $x)
    ip=RXEVM_IP_$x
    [ -n "${PID[$x]}" ] && onhost $x "$WORK/usnic_rogue" -G "${!ip}" -A "${PID[$x]}" -D > "$WORK/rec$x" 2>&1
    cat "$WORK/rec$x"
    QK[$x]=$(sed -nE 's/.*, Q_Key (0x[0-9a-f]{8}), .*/\1/p' "$WORK/rec$x")
    [ -n "${QK[$x]}" ] || { touch "$STOP"; wait $JOB; fail "no Q_Key found in the memory of host$x's rank"; }
done
touch "$STOP"
wait $JOB
rc=$?
grep -E '^steady: |stats final' "$OUT"
{ [ "$rc" = 0 ] && grep -q '^steady: OK ' "$OUT"; } || { cat "$OUT"; fail "the job failed (exit code $rc)"; }
assert_grep '^(\[[^]]*\] )?btl:usnic: stats final hostB rxeB: .*num_frag_recvs=[1-9]' "$OUT" \
    "usnic carried the job's traffic"
[ "${QK[A]}" != "${QK[B]}" ] || fail "both ranks have Q_Key ${QK[A]}"
pass "the ranks have different Q_Keys (${QK[A]}, ${QK[B]})"
for x in A B; do
    hex=$(printf '%x' "${QK[$x]}") dec=$(printf '%u' "${QK[$x]}")
    if grep -qi -- "$hex" "$OUT" || grep -qw -- "$dec" "$OUT"; then
        grep -ni -e "$hex" -e "$dec" "$OUT"
        fail "host$x's Q_Key ${QK[$x]} is in the job's output"
    fi
    pass "host$x's Q_Key ${QK[$x]} is nowhere in $(wc -l < "$OUT") lines of verbose output"
    vpid=$([ $x = A ] && echo 0 || echo 1)
    "$WORK/oldqkey" "${PID[$x]}" "$vpid" $((T0 - 5)) $((T1 + 5)) "${QK[$x]}" ||
        fail "host$x's Q_Key follows from its pid, the time and its rank"
    pass "host$x's Q_Key does not follow from pid ${PID[$x]}, rank $vpid and the time"
done

echo "== 2) getrandom fails"
for after in 0 1 2; do
    case $after in
        0) need="the Q_Key" ;;
        1) need="the key of the connectivity messages" ;;
        *) need="initial sequence numbers" ;;
    esac
    echo "-- getrandom fails in usnic after $after successful call(s): no $need"
    BTL=usnic,self,tcp mpirun_usnic -x LD_PRELOAD="$WORK/nogetrandom.so" -x NOGETRANDOM_AFTER=$after \
        --mca btl_tcp_if_include "$RXEVM_NET.0/24" --mca btl_usnic_stats 1000000 \
        --mca orte_base_help_aggregate 0 "$WORK/hello" > "$WORK/norandom$after.out" 2>&1
    rc=$?
    cat "$WORK/norandom$after.out"
    [ "$rc" = 0 ] || fail "the job exited with $rc"
    for r in 0 1; do
        assert_grep "^hello: rank $r of 2 on host[AB]\$" "$WORK/norandom$after.out" "rank $r ran"
    done
    assert_grep 'could not get random numbers from the operating system' "$WORK/norandom$after.out" \
        "the 'no random numbers' help message"
    assert_grep "^ +Needed: +$need\$" "$WORK/norandom$after.out" "it names what was needed: $need"
    assert_grep '^ +Host: +host[AB]$' "$WORK/norandom$after.out" "it names the host"
    grep -q 'btl:usnic: stats' "$WORK/norandom$after.out" &&
        fail "usnic printed statistics: it has a device"
    pass "usnic has no device (no statistics), the job ran over tcp"
done
