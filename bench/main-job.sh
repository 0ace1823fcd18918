#!/bin/bash
# The project's main job: install what is needed, build and install the usnic
# BTL, then boot the two-host Soft-RoCE VM and run the ping-pong benchmark with
# one rank on hostA and one on hostB over usnic only (--mca btl usnic,self).
# The per-module statistics printed at the end show that usnic carried the
# traffic.  Usage: bench/main-job.sh [pingpong options, e.g. -m 1048576]
# SPDX-License-Identifier: BSD-3-Clause
set -euo pipefail
cd "$(dirname "$0")/.."
tools/deps.sh
make -C standalone
make -C standalone install
exec tools/rxe-vm/rxe-vm bench/in-vm-pingpong.sh "$@"
