#!/bin/bash
# Runs inside the VM (see bench/main-job.sh): ping-pong hostA <-> hostB over usnic.
set -euo pipefail
. /run/rxevm/env
cd "$(dirname "$0")"
work=$(mktemp -d)
mpicc -O2 -o "$work/pingpong" pingpong.c
onhost A timeout 600 mpirun --allow-run-as-root -np 2 --host hostA,hostB \
    --mca plm_rsh_agent rxevm-rsh --mca oob_tcp_if_include "$RXEVM_NET.0/24" \
    --mca pml ob1 --mca btl usnic,self --mca btl_usnic_stats 100000 \
    "$work/pingpong" "$@"
