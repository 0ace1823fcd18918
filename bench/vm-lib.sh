# Helpers of the benchmarks that run themselves in one boot of tools/rxe-vm (sourced from the
# checkout's root; REPO: its path).
# vm_bench_out NAME DIR: DIR made absolute and printed; it must lie below the checkout, the
# only place the guest can write (NAME names the script in the message); its raw/ is emptied.
# vm_rxe_probes FUNC...: in the guest, kprobe events usnicrxe/FUNC on Soft-RoCE's functions
# (tracefs mounted at $VM_TRACE first if it is not). Call it while the guest is idle: enabling a
# probe patches kernel code, and under TCG a vCPU running the site during the patch has been
# seen to crash the guest.
# SPDX-License-Identifier: BSD-3-Clause
# shellcheck disable=SC2154 # REPO: set by the script that sources this file
VM_TRACE=/sys/kernel/tracing

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

vm_rxe_probes() {
    local f
    [ -d "$VM_TRACE/events" ] || mount -t tracefs nodev "$VM_TRACE" || return 2
    for f in "$@"; do
        echo "p:usnicrxe/$f $f" >> "$VM_TRACE/kprobe_events" || return 2
    done
}
