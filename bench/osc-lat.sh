#!/bin/bash
# bench/osc-lat.sh [ROUNDS [ITERS]]: one-sided latency over usnic as ratios to the same run's
# 8 B MPI ping-pong round trip (bench/osc-lat.c: put, get, fetch-and-op, compare-and-swap,
# accumulate of 8 B, each completed with MPI_Win_flush, a fence epoch with one 8 B put from
# each rank, an exclusive lock/unlock of the target, fetch-and-op under an exclusive lock, and
# fetch-and-op and exclusive lock/unlock aimed at the origin's own window), ROUNDS rounds (default 5) of ITERS iterations (default 200) per operation,
# medians; every ratio is paired with the round trip of its own round. Debian's default osc
# (osc/rdma over usnic's emulated RDMA), 1 rank per host, btl usnic,self, the installed
# component. Runs inside a world (the rxe-vm guest or the native world: test/vm/lib.sh's
# mpirun_usnic), e.g.  tools/rxe-vm/rxe-vm bench/osc-lat.sh  or, in the native world,
# netns-world bench/osc-lat.sh. Prints the per-round lines and the medians over the rounds
# ("osc-lat: median rtt_us X put Y get Y fop Y cas Y acc Y fence Y lock Y xfop Y sfop Y slock Y"); with OSC_LAT_OUT=FILE
# also writes them there. OSC_LAT_MCA="NAME VALUE ..." adds --mca NAME VALUE pairs to mpirun
# (to see what an osc setting changes, e.g. "osc_rdma_acc_single_intrinsic true").
# SPDX-License-Identifier: BSD-3-Clause
set -u
. "$(dirname "$0")/../test/vm/lib.sh"

rounds=${1:-5} iters=${2:-200}
mca=()
# shellcheck disable=SC2206 # NAME VALUE pairs, split on blanks
extra=(${OSC_LAT_MCA:-})
for ((i = 0; i + 1 < ${#extra[@]}; i += 2)); do mca+=(--mca "${extra[i]}" "${extra[i + 1]}"); done
mpicc -O2 -Wall -o "$WORK/osc-lat" "$REPO/bench/osc-lat.c" || fail "mpicc osc-lat.c"
mpirun_usnic -t 600 --mca btl_usnic_stats 1000000 "${mca[@]}" "$WORK/osc-lat" "$rounds" "$iters" \
    > "$WORK/osc-lat.out" 2>&1
rc=$?
grep -E "^osc-lat: " "$WORK/osc-lat.out"
grep -q "btl:usnic: stats final" "$WORK/osc-lat.out" || fail "no usnic statistics: usnic did not run"
[ "$rc" = 0 ] || { tail -n 20 "$WORK/osc-lat.out"; fail "mpirun exit code $rc"; }
[ -n "${OSC_LAT_OUT:-}" ] && grep -E "^osc-lat: " "$WORK/osc-lat.out" > "$OSC_LAT_OUT"
exit 0
