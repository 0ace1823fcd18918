#!/bin/bash
# vm-timeout: 400
# world: native
# native-hosts: 2-2
# The progress thread (btl_usnic_progress_thread) moves a transfer while the application
# computes (bench/overlap.c, 1 rank per host, btl usnic,self): rank 0 sends 1 MiB (a
# rendezvous message) with MPI_Isend, computes 2 s without calling MPI, then MPI_Wait; rank 1
# waits in MPI_Wait. 3 trials, every byte checked. The two hosts of the VM share one kernel,
# hence one clock, so rank 1's completion time and the end of rank 0's computation compare.
#   off  (default)  no trial completes on rank 1 before rank 0 stops computing: only the
#                   eager part moves until rank 0 is back in MPI (as before the thread existed)
#   on              every trial completes on rank 1 while rank 0 still computes, and rank 0's
#                   MPI_Wait then takes less than a quarter of the computation; the thread
#                   costs less than half a core while the process sleeps outside MPI
# Both: exit code 0, every byte right, and usnic's counters on hostB reach the datagrams
# the three messages need.
# shellcheck disable=SC2015 # pass only prints: "A && pass || dp_fail" is an if-then-else here
# bench/overlap.c is a two-rank program: in a world of more hosts it runs on hostA and the last
# host (Y below; hostB in the VM).
# SPDX-License-Identifier: BSD-3-Clause
set -u
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/dp-lib.sh"
[ "$NHOSTS" -gt 2 ] && export MPI_HOSTS="A ${HOSTS[NHOSTS - 1]}"
Y=${HOSTS[NHOSTS - 1]}
[ "$NHOSTS" -gt 2 ] || Y=B

cc_cached "$WORK/overlap" mpicc -O2 -Wall "$REPO/bench/overlap.c" || fail "mpicc overlap.c"
SIZE=1048576 TRIALS=3 COMPUTE=2000
ARGS=(-s "$SIZE" -n "$TRIALS" -c "$COMPUTE" -l 200 -b 3 -d 2000)
# the fewest datagrams host Y's process accepted for the three messages (4064 bytes each)
MIN=$((TRIALS * ((SIZE + 4063) / 4064)))

# overlap_run LABEL ON OUT
overlap_run() {
    local label=$1 on=$2 out=$3 got
    echo "== progress thread $label"
    mpirun_usnic -t 120 --mca btl_usnic_stats 1000000 --mca btl_usnic_progress_thread "$on" \
        "$WORK/overlap" "${ARGS[@]}" > "$out" 2>&1
    DP_RC=$?
    cat "$out"
    [ "$DP_RC" = 0 ] && pass "$label: exit code 0" || dp_fail "$label: mpirun exit code $DP_RC"
    grep -q "^overlap: OK every byte checked" "$out" && pass "$label: every byte right" ||
        dp_fail "$label: the data was not verified"
    got=$(grep -E "btl:usnic: stats final host$Y " "$out" | awk '
        { for (i = 1; i <= NF; i++) { split($i, kv, "=")
              if (kv[1] == "num_frag_recvs" || kv[1] == "num_chunk_recvs") s += kv[2] } }
        END { print s + 0 }')
    [ "$got" -ge "$MIN" ] && pass "$label: usnic delivered $got data datagrams on host$Y (>= $MIN)" ||
        dp_fail "$label: usnic delivered $got data datagrams on host$Y, the messages need $MIN"
}

overlap_run off 0 "$WORK/off.out"
during=$(sed -nE 's/^overlap: summary .* during ([0-9]+)\/[0-9]+$/\1/p' "$WORK/off.out")
[ "$during" = 0 ] && pass "off: no transfer completed while the sender computed" ||
    dp_fail "off: ${during:-?} of $TRIALS transfers completed while the sender computed"

overlap_run on 1 "$WORK/on.out"
during=$(sed -nE 's/^overlap: summary .* during ([0-9]+)\/[0-9]+$/\1/p' "$WORK/on.out")
[ "$during" = "$TRIALS" ] && pass "on: all $TRIALS transfers completed while the sender computed" ||
    dp_fail "on: ${during:-?} of $TRIALS transfers completed while the sender computed"
wait_ms=$(sed -nE 's/^overlap: summary .* median_wait_ms ([0-9.]+) .*/\1/p' "$WORK/on.out")
if [ -n "$wait_ms" ] && lt "$wait_ms" $((COMPUTE / 4)); then
    pass "on: the sender's MPI_Wait took $wait_ms ms (median) after computing"
else
    dp_fail "on: the sender's MPI_Wait took ${wait_ms:-?} ms (median), not under $((COMPUTE / 4))"
fi
read -r c0 c1 <<< "$(sed -nE 's/^overlap: idle_cpu_pct ([0-9.]+) ([0-9.]+) .*/\1 \2/p' "$WORK/on.out")"
if [ -n "$c1" ] && lt "$c0" 50 && lt "$c1" 50; then
    pass "on: idle CPU with the thread $c0% / $c1% of a core"
else
    dp_fail "on: idle CPU with the thread ${c0:-?}% / ${c1:-?}% of a core (not under 50%)"
fi
dp_done
