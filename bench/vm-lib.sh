# Helpers of the benchmarks that run themselves in one boot of tools/rxe-vm (sourced from the
# checkout's root; REPO: its path).
# vm_bench_out NAME DIR: DIR made absolute and printed; it must lie below the checkout, the
# only place the guest can write (NAME names the script in the message); its raw/ is emptied.
# SPDX-License-Identifier: BSD-3-Clause
# shellcheck disable=SC2154 # REPO: set by the script that sources this file

vm_bench_out() {
    local out
    out=$(realpath -m "$2") || return 2
    case $out/ in
        "$REPO"/*) ;;
        *) echo "$1: writes only below the checkout (--out), which the guest shares" >&2; return 2 ;;
    esac
    rm -rf "$out/raw" && mkdir -p "$out/raw" || return 2
    echo "$out"
}
