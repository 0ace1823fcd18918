#!/bin/bash
# vm-timeout: 420
# world: native
# Soak: many-to-many traffic of mixed sizes (0 B to 256 KiB) among 6 ranks (3 per host,
# usnic between the hosts, vader within) with 1% loss on the RoCE datagrams in both
# directions: every message arrives intact, and resident memory stays flat after warm-up.
# CI runs a short version; the full one (about 10^6 messages) is
#   SOAK_ROUNDS=33400 SOAK_TIMEOUT=7200 VM_TEST_TIMEOUT=7300 test/vm/run.sh t-soak
# SPDX-License-Identifier: BSD-3-Clause
set -u
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/dp-lib.sh"
. "$(dirname "$0")/fault-lib.sh"
mpi_build soak

rounds=${SOAK_ROUNDS:-400}
netem_roce_both loss 1%
SECONDS=0
BTL=usnic,self,$SM_BTL mpirun_usnic -n "$(dp_per_host 3)" -t "${SOAK_TIMEOUT:-300}" --mca btl_usnic_stats 1000000 \
    "$WORK/soak" -r "$rounds" -g 16 > "$WORK/soak.out" 2>&1; rc=$?
t=$SECONDS
netem_clear
grep -v "^\[host.:[0-9]*\] btl:usnic: stats final" "$WORK/soak.out"
grep "stats final" "$WORK/soak.out" | grep -o "host. [a-z]*[A-H]: num_total_sends=[0-9]*\|num_resends=[0-9]*\|num_dup_recvs=[0-9]*" |
    paste -d' ' - - - | sed 's/^/soak counters: /'
[ "$rc" = 0 ] || fail "soak exit code $rc after ${t}s"
assert_grep "^soak: OK [0-9]+ messages, [0-9]+ bytes verified$" "$WORK/soak.out" \
    "every message of $rounds rounds verified"
if grep -q "^soak: MEMORY" "$WORK/soak.out"; then fail "resident memory grew after warm-up"; fi
pass "memory flat after warm-up (limit 16 MiB per process), ${t}s"
total=$(grep "stats final" "$WORK/soak.out" | sed -nE 's/.* num_resends=([0-9]+) .*/\1/p' |
        awk '{ s += $1 } END { print s + 0 }')
[ "$total" -gt 0 ] || fail "no retransmissions: the 1% loss did not reach usnic's traffic"
pass "usnic recovered from the loss with $total retransmissions"
