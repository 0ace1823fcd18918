#!/bin/bash
# vm-timeout: 900
# world: native
# Passive-target one-sided communication: every rank appends to one linked list
# (progs/llist.c): exclusive MPI_Win_lock/unlock on the owner of the tail, compare-and-swap
# of its next pointer, put and get, ranks locking and targeting their own window too; then
# every rank walks the whole list and checks it. No osc component is chosen (Debian's
# default, osc/rdma over usnic's emulated RDMA), 1 rank per host (btl usnic,self) and 2 per
# host (usnic,self,$SM_BTL):
#  a) the elements in a window of MPI_Win_create: completes within the time bound, every
#     element there once and in order, usnic carried the traffic (dp_check);
#  b) the elements from MPI_Alloc_mem, attached to an MPI_Win_create_dynamic window. Open MPI
#     4.1.0-4.1.4's osc/rdma deadlocks there by itself (it holds the target's region lock and
#     then waits for the same lock again; fixed in 4.1.5): with those versions, usnic (which
#     carries out the lock's atomics) must end the job within LLIST_DEADLOCK_S (60 s) with its
#     message naming the cause ("osc waits for itself", help-mpi-btl-usnic.txt) instead of
#     hanging (before that check existed the job hung until mpirun was killed). With later
#     versions the run must complete as in a);
#  c) on Open MPI 4.1, the dynamic window once more with --mca osc pt2pt (the workaround the
#     message names): completes, checked as in a).
# SPDX-License-Identifier: BSD-3-Clause
set -u
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/dp-lib.sh"

LLIST_DEADLOCK_S=60
OMPI_VERSION=$(ompi_info --parsable | sed -n 's/^ompi:version:full://p')
# osc/rdma with the dynamic-window deadlock: 4.1.0 to 4.1.4
case $OMPI_VERSION in
    4.1.[0-4]) DEADLOCK=1 ;;
    *) DEADLOCK=0 ;;
esac
echo "Open MPI $OMPI_VERSION; osc/rdma's dynamic-window deadlock: $([ "$DEADLOCK" = 1 ] && echo yes || echo no)"

mpi_build llist
for n in 1 2; do
    # 32 elements per rank with 2 ranks, 16 with 4 (4 ranks on 2 vCPUs are slow)
    per=(-x "LLIST_PER_RANK=$((64 / (2 * n)))")
    DP_TIMEOUT=300 dp_run "$n" "$WORK/create-$n.out" "${per[@]}" "$WORK/llist" create
    dp_check llist "$n" "$WORK/create-$n.out"

    if [ "$DEADLOCK" = 0 ]; then
        DP_TIMEOUT=300 dp_run "$n" "$WORK/dynamic-$n.out" "${per[@]}" "$WORK/llist"
        dp_check llist "$n" "$WORK/dynamic-$n.out"
        continue
    fi
    t0=$SECONDS
    DP_TIMEOUT=$((LLIST_DEADLOCK_S + 60)) dp_run "$n" "$WORK/dynamic-$n.out" "${per[@]}" "$WORK/llist"
    t=$((SECONDS - t0))
    if [ "$DP_RC" = 124 ]; then
        dp_fail "dynamic window ($n per host): still hanging after $((LLIST_DEADLOCK_S + 60)) s"
    elif ! grep -q "It is not a fault of the network or of the usnic BTL" "$WORK/dynamic-$n.out" ||
         ! grep -Eq "fatal error on .* \(a one-sided lock waits for its own holder\)" "$WORK/dynamic-$n.out"; then
        dp_fail "dynamic window ($n per host): the job ended (exit code $DP_RC) without usnic's" \
            "'osc waits for itself' message"
    elif [ "$t" -gt "$LLIST_DEADLOCK_S" ]; then
        dp_fail "dynamic window ($n per host): usnic's message came, but the job took $t s" \
            "(bound $LLIST_DEADLOCK_S s)"
    else
        pass "dynamic window ($n per host): osc/rdma's deadlock ended by usnic's message after $t s"
    fi
    DP_TIMEOUT=300 dp_run "$n" "$WORK/pt2pt-$n.out" --mca osc pt2pt "${per[@]}" "$WORK/llist"
    dp_check llist "$n" "$WORK/pt2pt-$n.out"
done
dp_done
