#!/bin/bash
# tools/deps.sh [--no-vm-prepare|--main-job]: install every Debian package the project needs (build,
# unit tests, in-tree check, Debian package, VM tests, plots), then warm up the VM cache with
# `tools/rxe-vm/rxe-vm --prepare` (kernel download + image build) and make the Debian 13
# world with Open MPI 5.0 (tools/debian13-root.sh; both skipped with --no-vm-prepare or
# USNIC_SKIP_VM_PREPARE=1). --main-job: only what bench/main-job.sh needs (build, perftest,
# gnuplot; tools/rxe-vm/rxe-vm installs its own host packages), no VM or Debian 13 preparation.
# Idempotent: when everything is installed it only runs one
# dpkg-query (and the two preparations, fast no-ops once their caches are built).
# SPDX-License-Identifier: BSD-3-Clause
set -euo pipefail
cd "$(dirname "$0")/.."

PKGS=(build-essential pkg-config libopenmpi-dev openmpi-bin libibverbs-dev ibverbs-utils debootstrap
      ibverbs-providers rdma-core libnl-3-dev libnl-route-3-dev libhwloc-dev perftest
      qemu-system-x86 busybox-static xz-utils zstd iproute2 util-linux autoconf automake
      libtool flex dpkg-dev debhelper lintian clang libclang-rt-14-dev gnuplot-nox valgrind shellcheck
      nftables)
skip_vm=${USNIC_SKIP_VM_PREPARE:-0}
case ${1:-} in
    --no-vm-prepare) skip_vm=1 ;;
    --main-job) skip_vm=1
        PKGS=(build-essential pkg-config libopenmpi-dev openmpi-bin libibverbs-dev libhwloc-dev
              perftest gnuplot-nox) ;;
    "") ;;
    *) echo "usage: $0 [--no-vm-prepare|--main-job]" >&2; exit 2 ;;
esac

# dpkg-query fails when it has never heard of a package; it still lists the others
installed=" $({ dpkg-query -W -f='${db:Status-Abbrev}|${Package}\n' "${PKGS[@]}" 2>/dev/null || true; } |
              sed -n 's/^ii *|//p' | tr '\n' ' ') "
missing=()
for p in "${PKGS[@]}"; do
    case $installed in *" $p "*) ;; *) missing+=("$p") ;; esac
done
if [ ${#missing[@]} -gt 0 ]; then
    sudo=()
    [ "$(id -u)" = 0 ] || sudo=(sudo -n)
    echo "deps: installing ${missing[*]}"
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get -q -o DPkg::Lock::Timeout=600 update
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get -q -o DPkg::Lock::Timeout=600 \
        install -y "${missing[@]}"
fi
echo "deps: all ${#PKGS[@]} packages installed"

[ "$skip_vm" = 1 ] || { tools/rxe-vm/rxe-vm --prepare && echo "deps: Debian 13 world in $(tools/debian13-root.sh)"; }
