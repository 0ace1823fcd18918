#!/bin/bash
# vm-timeout: 240
# world: native
# native-hosts: 2-2
# A rank reuses a one-sided registration handle after its owner freed the memory
# (progs/stalehandle.c, btl usnic,self, one rank per host): rank 1 on hostB registers a buffer
# with the usnic BTL and gives rank 0 on hostA the handle; rank 0's PUT with it arrives. Rank 1
# then deregisters the buffer (as MPI_Win_free does), registers the same memory again (a new
# window on it) and fills it with a sentinel; rank 0 PUTs again with the old handle. Before
# keyed handles that PUT was written (the memory was registered again); now:
#   - the sentinel is intact (rank 1 checks it 3 s after the PUT was issued, its resends
#     arriving meanwhile), and the PUT never completes at rank 0,
#   - hostB prints the "bad registration handle" message naming its host and device, the peer
#     host and the operation, and counts the PUTs in num_bad_handles (statistics every second),
#   - the job ends: the refused PUT is resent until rank 0's btl_usnic_peer_timeout (6 s) makes
#     usnic abort with the peer-unreachable message; no hang.
# SPDX-License-Identifier: BSD-3-Clause
set -u
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/dp-lib.sh"

# the program uses the BTL and BML directly (internal headers of the Open MPI installed)
mpi_build stalehandle -lopen-pal
[ "$NHOSTS" -gt 2 ] && export MPI_HOSTS="A B"    # a program for one rank on each of two hosts
OUT=$WORK/stalehandle.out
BTL=usnic,self mpirun_usnic -t 120 --mca btl_usnic_peer_timeout 6 --mca btl_usnic_stats 1 \
    --mca orte_base_help_aggregate 0 "$WORK/stalehandle" > "$OUT" 2>&1
rc=$?
cat "$OUT"
echo "== mpirun exit code $rc"

assert_grep '^stalehandle: live PUT arrived$' "$OUT" "the PUT with the live handle arrived"
if grep -q '^stalehandle: MISMATCH' "$OUT"; then
    dp_fail "the PUT with the deregistered handle wrote the memory"
fi
assert_grep '^stalehandle: stale PUT refused, memory intact$' "$OUT" \
    "the PUT with the deregistered handle wrote nothing"
if grep -q '^stalehandle: stale PUT completed' "$OUT"; then
    dp_fail "the PUT with the deregistered handle completed at rank 0"
fi
assert_grep 'named no memory' "$OUT" "hostB printed the 'bad registration handle' message"
for f in 'Host: +hostB$' "Device: +$(dev_of B)\$" 'Peer: +hostA$' 'Operation: +PUT$'; do
    assert_grep "^ +$f" "$OUT" "the message gives ${f%%:*}"
done
n=$(grep -E "btl:usnic: stats .*hostB $(dev_of B)[0-9]*: " "$OUT" | tr ' ' '\n' |
    sed -n 's/^num_bad_handles=//p' | sort -n | tail -n 1)
if [ "${n:-0}" -ge 1 ]; then pass "hostB counted $n refused PUTs in num_bad_handles"
else dp_fail "hostB's statistics show no num_bad_handles"; fi
aborted "$rc" "the job"
# (Open MPI 4.1.4 sometimes loses a help message from a process on mpirun's own host; the
# PML's abort line, which names the cause, is not lost)
if grep -Eq "retransmitting to a peer that has not|fatal error on $(dev_of A) \\(peer [0-9./]+ unreachable\\)" \
    "$OUT"; then
    pass "usnic ended the job at the peer timeout (peer unreachable)"
else
    dp_fail "the job did not end at rank 0's peer timeout"
fi
dp_done
