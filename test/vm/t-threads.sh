#!/bin/bash
# vm-timeout: 1500
# world: native
# MPI_THREAD_MULTIPLE over usnic (progs/threads.c): each process must be granted
# MPI_THREAD_MULTIPLE, then 4 threads per rank send to and receive from every other rank at
# once, with tags of their own, any-source receives, blocking probes and matched probes mixed
# across the threads, at sizes from 0 B through the fast-path, one-datagram and eager limits to
# 512 KiB (rendezvous, sent as emulated PUTs); every byte, length, source and guard checked.
#   none     1 rank per host (btl usnic,self) and 2 per host (usnic,self,vader)
#   loss5%   the same with 5% of the RoCE datagrams dropped in both directions
# Each run (fault_run, fault-lib.sh): no wrong data, exit code 0 within its bound, usnic carried
# the traffic between the hosts (its counters reach the program's datagram bound) and
# delivered each data datagram exactly once; under loss, netem dropped datagrams on both hosts
# and usnic retransmitted.
# Bounds per run (launch included): 120 s without loss, 300 s at 5%.
# SPDX-License-Identifier: BSD-3-Clause
set -u
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/dp-lib.sh"
. "$(dirname "$0")/fault-lib.sh"

mpi_build threads
netem_roce_both delay 0ms
fault_run none none 120 1 "$WORK/none-1.out" threads
fault_run none none 120 2 "$WORK/none-2.out" threads
netem_roce_both loss 5%
fault_run loss5% loss 300 1 "$WORK/loss-1.out" threads
fault_run loss5% loss 300 2 "$WORK/loss-2.out" threads
netem_clear
fault_summary
dp_done
