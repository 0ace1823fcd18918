#!/bin/bash
# vm-timeout: 240
# world: native
# MPI one-sided communication across the hosts (progs/osc.c), results checked: MPI_Put (at an
# odd target offset; bytes around it untouched), MPI_Get and MPI_Accumulate (MPI_SUM of int64)
# of 8 B - 1 MiB between cross-host pairs, synchronised with MPI_Win_fence and with
# MPI_Win_lock(EXCLUSIVE)/MPI_Win_unlock; then every rank accumulates into rank 0 and into the
# last rank at once under MPI_LOCK_SHARED (exact sums: accumulate is atomic per element).
# No osc component is chosen: Open MPI's configured default applies (on Debian 12 osc/ucx and
# osc/pt2pt are off, so it is osc/rdma over usnic's emulated PUT, GET and atomics); the usnic
# counters show that the traffic went through usnic.
#   1) 1 rank per host, btl usnic,self
#   2) 3 ranks per host, btl usnic,self,vader
# Each run: all results right, and on both hosts the usnic counters reach the datagrams needed
# for the data that crossed the hosts.
# SPDX-License-Identifier: BSD-3-Clause
set -u
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/dp-lib.sh"

mpi_build osc
dp_run 1 "$WORK/osc-1.out" "$WORK/osc"
dp_check osc 1 "$WORK/osc-1.out"
dp_run 3 "$WORK/osc-3.out" "$WORK/osc"
dp_check osc 3 "$WORK/osc-3.out"
dp_done
