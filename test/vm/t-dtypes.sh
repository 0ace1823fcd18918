#!/bin/bash
# vm-timeout: 240
# world: native
# Non-contiguous derived datatypes across the hosts (progs/dtypes.c): MPI_Type_vector of
# doubles, MPI_Type_indexed of ints (irregular blocks, touching blocks, typemap order different
# from memory order) and MPI_Type_create_struct {int32, double, char[3], short} (padding
# inside), at about 600 B, 3000 B, 24 KB (> 16 KiB: usnic packs chunk by chunk), 200 KB
# (> the 150 KiB eager limit: rendezvous) and 480 KB of packed data. Each cross-host pair
# exchanges, both ways at once: derived -> derived (gaps and padding must stay untouched),
# derived -> contiguous (the packed form), contiguous -> derived; checked element by element.
#   1) 1 rank per host, btl usnic,self
#   2) 3 ranks per host, btl usnic,self,vader
# Each run: no wrong byte, and on both hosts the usnic counters reach the datagrams that traffic
# needs.
# SPDX-License-Identifier: BSD-3-Clause
set -u
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/dp-lib.sh"

mpi_build dtypes
dp_run 1 "$WORK/dtypes-1.out" "$WORK/dtypes"
dp_check dtypes 1 "$WORK/dtypes-1.out"
dp_run 3 "$WORK/dtypes-3.out" "$WORK/dtypes"
dp_check dtypes 3 "$WORK/dtypes-3.out"
dp_done
