#!/bin/bash
# tools/debian13-root.sh [run CMD [ARG...]]: the Debian 13 (trixie) world with Open MPI 5.0.
#
#   tools/debian13-root.sh          make the root filesystem once (cached), print its path
#   tools/debian13-root.sh run CMD  run CMD as root chrooted into it, in the current directory,
#                                   with /proc, /sys, /dev and the repository bind-mounted at
#                                   their own paths (e.g. `run make -C standalone install`)
#
# The root is made with debootstrap --variant=minbase from the Debian mirror of this machine's
# apt sources (tools/apt-mirror.sh; DEBIAN13_MIRROR overrides it; neither: it stops),
# then the packages below are installed with the root's own apt (its own sources.list, in the
# root): Open MPI 5 (openmpi-bin, libopenmpi-dev), rdma-core, ibverbs-providers/-utils,
# libibverbs-dev, iproute2, perftest, gcc, make, pkg-config, and what tools/rxe-vm/rxe-vm and
# test/vm need in a guest root (busybox-static, procps, ...). minbase is a complete install
# (both debootstrap stages, dpkg and apt configured), so chroot and apt-get work in it; only
# priority "important" packages such as systemd are left out, which nothing here needs.
# The root's sources also list deb-src, for the Open MPI source package that the stand-alone
# build takes the headers missing from libopenmpi-dev from (standalone/ompi-src.sh).
# This machine's apt configuration and packages are not touched (debootstrap is installed
# with apt-get if missing). Cache: ${XDG_CACHE_HOME:-$HOME/.cache}/usnic-debian13/root
# (DEBIAN13_CACHE overrides the directory), ~1 GB (+0.4 GB once tools/intree-check.sh --ompi 5.0
# cached its tree in it); packages added to the list below are
# installed into the cached root on the next run.
# tools/rxe-vm/rxe-vm boots over it with RXE_VM_ROOT=$(tools/debian13-root.sh).
# SPDX-License-Identifier: BSD-3-Clause
set -euo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd)
SUITE=trixie
# the world, the stand-alone build, the VM guest's tools, tools/intree-check.sh's build
PKGS=(openmpi-bin libopenmpi-dev rdma-core ibverbs-providers ibverbs-utils libibverbs-dev
      libhwloc-dev iproute2 perftest gcc make pkg-config dpkg-dev busybox-static procps
      util-linux kmod hostname
      autoconf automake libtool flex perl libevent-dev libpmix-dev libnl-3-dev libnl-route-3-dev)
C=${DEBIAN13_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/usnic-debian13}
ROOT=$C/root
msg() { echo "debian13-root: $*" >&2; }
die() { msg "error: $*"; exit 1; }

# run_in ROOT CMD...: chroot with the pseudo filesystems and the repo mounted, in a private
# mount namespace so that every mount goes away with the command, however it ends
run_in() {
    local r=$1; shift
    # shellcheck disable=SC2016 # the inner script expands its own arguments
    unshare --mount --propagation private -- /bin/sh -euc '
        r=$1 repo=$2 cwd=$3; shift 3
        mount -t proc proc "$r/proc"
        mount --rbind /sys "$r/sys"
        mount --rbind /dev "$r/dev"
        mkdir -p "$r$repo"
        mount --bind "$repo" "$r$repo"
        exec chroot "$r" /bin/sh -c "cd \"\$0\" 2>/dev/null || cd /; exec \"\$@\"" "$cwd" "$@"
    ' sh "$r" "$REPO" "$PWD" "$@"
}

stamp=$(printf '%s\n' "$SUITE" "${PKGS[@]}" | sha256sum | cut -c1-16)
install_pkgs() { # root
    msg "installing ${PKGS[*]}"
    if ! { run_in "$1" env DEBIAN_FRONTEND=noninteractive LC_ALL=C apt-get -q update &&
           run_in "$1" env DEBIAN_FRONTEND=noninteractive LC_ALL=C apt-get -q install -y \
               --no-install-recommends "${PKGS[@]}"; } > "$C/apt.log" 2>&1; then
        tail -n 30 "$C/apt.log" >&2
        die "apt-get in $1 failed (log: $C/apt.log)"
    fi
    run_in "$1" apt-get clean
    echo "$stamp" > "$1/.usnic-debian13"
}
build() {
    local mirror T
    mirror=${DEBIAN13_MIRROR:-}
    if [ -z "$mirror" ]; then
        mirror=$("$REPO/tools/apt-mirror.sh" "$SUITE") ||
            die "no Debian archive in this machine's apt sources (/etc/apt/sources.list, /etc/apt/sources.list.d/*.list or *.sources); set DEBIAN13_MIRROR to the URI of a Debian mirror"
        mirror=${mirror%% *}
    fi
    if ! command -v debootstrap >/dev/null; then
        msg "installing debootstrap on this machine"
        DEBIAN_FRONTEND=noninteractive apt-get -q -o DPkg::Lock::Timeout=600 install -y debootstrap >&2
    fi
    T=$C/root.tmp
    rm -rf "$T"
    msg "debootstrap $SUITE from $mirror into $T (several minutes)"
    debootstrap --variant=minbase --arch=amd64 "$SUITE" "$T" "$mirror" > "$C/debootstrap.log" 2>&1 ||
        { tail -n 30 "$C/debootstrap.log" >&2; die "debootstrap failed (log: $C/debootstrap.log)"; }
    printf 'deb %s %s main\ndeb-src %s %s main\n' "$mirror" "$SUITE" "$mirror" "$SUITE" > "$T/etc/apt/sources.list"
    cp /etc/resolv.conf "$T/etc/resolv.conf"
    install_pkgs "$T"
    rm -rf "$ROOT"
    mv "$T" "$ROOT"
}

mkdir -p "$C"
if [ "$(cat "$ROOT/.usnic-debian13" 2>/dev/null)" != "$stamp" ]; then
    exec {lock}>"$C/.lock"
    flock -x "$lock"
    if [ ! -s "$ROOT/.usnic-debian13" ]; then build
    elif [ "$(cat "$ROOT/.usnic-debian13")" != "$stamp" ]; then install_pkgs "$ROOT"; fi
    exec {lock}>&-
fi
case ${1:-} in
    "") echo "$ROOT" ;;
    run) shift; [ $# -gt 0 ] || die "usage: $0 run CMD [ARG...]"; run_in "$ROOT" "$@" ;;
    *) echo "usage: $0 [run CMD [ARG...]]" >&2; exit 2 ;;
esac
