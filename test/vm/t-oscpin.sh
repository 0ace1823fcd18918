#!/bin/bash
# vm-timeout: 900
# world: vm
# One-sided windows far larger than what is used, on a device that pins what it registers
# (Soft-RoCE): progs/oscmem.c with a window of OSCPIN_WIN_MB (512) MiB of malloc'ed memory
# (MPI_Win_create) of which the rounds touch the first 5 KiB, as MPICH's rma tests putfence1,
# getfence1 and accfence1 make theirs (1 GiB there). Debian's default osc (osc/rdma over
# usnic), every one-sided path of oscmem: fence (put and get of contiguous, vector, indexed
# and struct int types of 1..300 elements), acc (accumulate, get_accumulate), atomics
# (fetch-and-op, compare-and-swap under exclusive lock/unlock), flush (lock_all, put and get,
# MPI_Win_flush) and pscw, 1 rank per host; fence also at 2 per host. Every rank's peak RSS is
# printed and must stay below OSCPIN_PEAK_MB (96) MiB (about 25 MiB measured); each run must
# also pass dp_check (results right, usnic carried the traffic).
# Before GET data's device registration covered only what a GET reads, usnic registered every
# region osc/rdma registered for GETs, whole, with the device when the window was created:
# rdma_rxe pins, and so faults in, every page of a registration. MPICH's putfence1 grew a rank
# by about 25 MB/s until the guest's OOM killer ended it at 1 GB (VmPin 1054388 kB). This
# test on that code (4c0d8c5): peak RSS 535-538 MiB in every mode at 1 per host; at 2 per host
# the OOM killer ended the job (mpirun exit code 137).
# In the native world (UDP mode) nothing is registered with a device: the test is for the VM.
# SPDX-License-Identifier: BSD-3-Clause
set -u
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/dp-lib.sh"

OSCPIN_WIN_MB=512 OSCPIN_PEAK_MB=96

mpi_build oscmem
# PER_HOST:MODE:ROUNDS
for spec in 1:fence:200 1:acc:100 1:atomics:200 1:flush:200 1:pscw:200 2:fence:100; do
    n=${spec%%:*} mode=${spec#*:} rounds=${spec##*:}
    mode=${mode%:*}
    out=$WORK/$mode-$n.out
    DP_TIMEOUT=300 dp_run "$n" "$out" "$WORK/oscmem" "$mode" "$rounds" "$OSCPIN_WIN_MB"
    dp_check oscmem "$n" "$out"
    seen=0
    while read -r rank peak; do
        [ -n "$rank" ] || continue
        seen=$((seen + 1))
        if [ "$peak" -le $((OSCPIN_PEAK_MB * 1024)) ]; then
            pass "$mode, $n per host: rank $rank peak RSS $((peak / 1024)) MiB (bound $OSCPIN_PEAK_MB)"
        else
            dp_fail "$mode, $n per host: rank $rank peak RSS $((peak / 1024)) MiB, more than $OSCPIN_PEAK_MB"
        fi
    done <<< "$(sed -nE "s/^oscmem: rank ([0-9]+) mode $mode rounds .* peak_rss_kb ([0-9]+) .*/\1 \2/p" "$out")"
    [ "$seen" = $((n * 2)) ] || dp_fail "$mode, $n per host: $seen of $((n * 2)) ranks printed their memory"
done
dp_done
