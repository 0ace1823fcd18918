#!/bin/bash
# Runs inside the VM (see bench/main-job.sh): ping-pong hostA <-> hostB over usnic.
# SPDX-License-Identifier: BSD-3-Clause
set -euo pipefail
# shellcheck source=/dev/null # written by tools/rxe-vm/rxe-vm in the guest
. /run/rxevm/env
cd "$(dirname "$0")"
work=$(mktemp -d)
mpicc -O2 -o "$work/pingpong" pingpong.c
# --bind-to none: both hosts see the same two vCPUs, and by default each host's orted binds
# its rank to core 0, so the two ranks would take turns on one vCPU (~1.5 ms round trips).
onhost A timeout 600 mpirun --allow-run-as-root --bind-to none -np 2 --host hostA,hostB \
    --mca plm_rsh_agent rxevm-rsh --mca oob_tcp_if_include "$RXEVM_NET.0/24" \
    --mca pml ob1 --mca btl usnic,self --mca btl_usnic_stats 100000 \
    "$work/pingpong" "$@"
