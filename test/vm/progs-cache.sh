#!/bin/bash
# test/vm/progs-cache.sh: the test programs' compile cache, sourced by lib.sh (cc_cached,
# mpi_build), and its filler:
#   test/vm/progs-cache.sh --fill TEST.sh...   compile every program the tests build
# Compiling in the VM (qemu TCG) takes 5-25 s per program, a few minutes per VM run; on this
# machine it takes a fraction of a second. test/vm/run.sh therefore fills the cache before it
# boots the VM, in the root the VM boots over (this machine's, or the Debian 13 world's
# through tools/debian13-root.sh), and the tests in the guest find their programs there. A
# program is compiled again whenever anything it may be built from changes: the key covers
# the compile command, the compilers (their paths and versions, mpicc's flags), the world's
# /etc/os-release, and every source and header of the tests, the benchmarks and the
# component. The cache lives in the checkout (USNIC_PROGS_CACHE, default
# test/vm/logs/progs-cache), which both worlds and the VM see.
# Tests build with one line each, which --fill finds and runs with a scratch WORK:
#   mpi_build NAME [ARG...]          test/vm/progs/NAME.c with mpicc into $WORK/NAME
#   cc_cached "$WORK/OUT" CC ARG...  CC ARG... -o $WORK/OUT (the part before `||` is run)
# SPDX-License-Identifier: BSD-3-Clause

# the key of everything but the command: computed once per process
progs_cache_inputs() {
    local repo=$1
    if [ -z "${PROGS_CACHE_INPUTS:-}" ]; then
        PROGS_CACHE_INPUTS=$( {
            cat /etc/os-release
            for c in gcc mpicc; do
                command -v "$c" && readlink -f "$(command -v "$c")" && "$c" --version 2>&1
            done
            mpicc --showme 2>&1
            find "$repo/test/vm/progs" "$repo/test/rogue" "$repo/bench" -maxdepth 1 \
                -name '*.[ch]' -print0 | sort -z | xargs -0 cat
            cat "$repo"/*.h
        } | sha256sum | cut -c1-32)
    fi
    echo "$PROGS_CACHE_INPUTS"
}

# cc_cached OUT CC ARG...: compile (CC ARG... -o OUT) or take OUT from the cache; fails as CC
cc_cached() {
    local out=$1 repo dir key
    shift
    repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
    dir=${USNIC_PROGS_CACHE:-$repo/test/vm/logs/progs-cache}
    key=$( { progs_cache_inputs "$repo"; printf '%s\n' "$@"; } | sha256sum | cut -c1-32)
    if [ -x "$dir/$key" ]; then
        cp "$dir/$key" "$out"
        return
    fi
    "$@" -o "$out" || return
    mkdir -p "$dir" && cp "$out" "$dir/$key.$$" && mv -f "$dir/$key.$$" "$dir/$key"
}

# mpi_build NAME [ARG...]: test/vm/progs/NAME.c with mpicc into $WORK/NAME
mpi_build() {
    local name=$1
    shift
    cc_cached "$WORK/$name" mpicc -O2 -Wall "$REPO/test/vm/progs/$name.c" "$@" ||
        fail "mpicc $name.c"
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
    [ "${1:-}" = --fill ] || { echo "usage: $0 --fill TEST.sh..." >&2; exit 2; }
    shift
    REPO=$(cd "$(dirname "$0")/../.." && pwd)
    WORK=$(mktemp -d /tmp/usnic-progs.XXXXXX) || exit 2
    trap 'rm -rf "$WORK"' EXIT
    # shellcheck disable=SC2317 # called by the lines it evaluates
    fail() { echo "progs-cache: $*" >&2; exit 1; }
    rc=0
    while read -r line; do
        ( eval "${line%%||*}" ) > "$WORK/cc.log" 2>&1 || { cat "$WORK/cc.log"; rc=1; }
    done < <(sed -n 's/^ *\(mpi_build \|cc_cached \)/\1/p' "$@" | sort -u)
    exit $rc
fi
