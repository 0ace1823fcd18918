#!/bin/bash
# bench/osc-lat.sh [ROUNDS [ITERS]]: one-sided latency over usnic as ratios to the same run's
# 8 B MPI ping-pong round trip (bench/osc-lat.c: put, get, fetch-and-op, compare-and-swap,
# accumulate of 8 B, each completed with MPI_Win_flush, and a fence epoch with one 8 B put from
# each rank), ROUNDS rounds (default 5) of ITERS iterations (default 200) per operation,
# medians; every ratio is paired with the round trip of its own round. Debian's default osc
# (osc/rdma over usnic's emulated RDMA), 1 rank per host, btl usnic,self, the installed
# component. Runs inside a world (the rxe-vm guest or the native world: test/vm/lib.sh's
# mpirun_usnic), e.g.  tools/rxe-vm/rxe-vm bench/osc-lat.sh  or, in the native world,
# netns-world bench/osc-lat.sh. Prints the per-round lines and the medians over the rounds
# ("osc-lat: median rtt_us X put Y get Y fop Y cas Y acc Y fence Y"); with OSC_LAT_OUT=FILE
# also writes them there.
# SPDX-License-Identifier: BSD-3-Clause
set -u
. "$(dirname "$0")/../test/vm/lib.sh"

rounds=${1:-5} iters=${2:-200}
mpicc -O2 -Wall -o "$WORK/osc-lat" "$REPO/bench/osc-lat.c" || fail "mpicc osc-lat.c"
mpirun_usnic -t 600 --mca btl_usnic_stats 1000000 "$WORK/osc-lat" "$rounds" "$iters" \
    > "$WORK/osc-lat.out" 2>&1
rc=$?
grep -E "^osc-lat: " "$WORK/osc-lat.out"
grep -q "btl:usnic: stats final" "$WORK/osc-lat.out" || fail "no usnic statistics: usnic did not run"
[ "$rc" = 0 ] || { tail -n 20 "$WORK/osc-lat.out"; fail "mpirun exit code $rc"; }
[ -n "${OSC_LAT_OUT:-}" ] && grep -E "^osc-lat: " "$WORK/osc-lat.out" > "$OSC_LAT_OUT"
exit 0
