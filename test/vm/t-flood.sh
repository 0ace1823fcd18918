#!/bin/bash
# vm-timeout: 480
# world: native
# Floods of small messages (progs/flood.c): 5000 messages of 0-1200 bytes (both sides of the
# fast-path limit) in flight per sender at once, more than the usnic send window (at most 256
# segments per peer) and the send queue (1024), every byte, size, tag and the per-source order
# checked:
#   pairs-preposted   each cross-host pair posts 5000 receives, then both send 5000 at once
#   pairs-unexpected  both send 5000 first, receives posted only after a barrier
#   anysource         all other ranks send 5000 each to rank 0 (receives pre-posted), then to
#                     the last rank (on the other host; receives posted late), which receive
#                     with MPI_ANY_SOURCE/MPI_ANY_TAG: many-to-one with 6 ranks
#   1) 1 rank per host, btl usnic,self
#   2) 3 ranks per host, btl usnic,self,vader
# Each run: no wrong or misordered message, and on both hosts the usnic counters reach at
# least one datagram per message that crossed the hosts.
# SPDX-License-Identifier: BSD-3-Clause
set -u
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/dp-lib.sh"

mpi_build flood
# ~15 s and ~30-55 s on a 2-core host (receive-queue overruns make it retransmit a lot)
DP_TIMEOUT=200
dp_run 1 "$WORK/flood-1.out" "$WORK/flood"
dp_check flood 1 "$WORK/flood-1.out"
dp_run 3 "$WORK/flood-3.out" "$WORK/flood"
dp_check flood 3 "$WORK/flood-3.out"
dp_done
