#!/bin/bash
# test/vm/asan-run.sh [--native [-n HOSTS]] [t-NAME...]: the integration tests under
# AddressSanitizer + LeakSanitizer (default: t-bringup t-p2p t-dtypes t-flood t-coll t-osc
# t-faults t-stats), in the VM, or with --native in the native world (test/native/run.sh:
# HOSTS hosts, default 2; usnic over kernel UDP; no VM to boot, so it is much faster). With
# --native nothing is installed and the VM lock is not taken: the ASan build is used from a
# private component directory (test/vm/logs/asan/components: links to Open MPI's components,
# usnic's replaced) that every process finds through OMPI_MCA_mca_base_component_path, which
# the native world passes on as any environment variable; steps 1, 2 and 4 below are the
# VM's.
#
#   1. takes the VM lock /tmp/usnic-vm.lock (flock; waits while another run holds it: the
#      VM uses the component installed on the host, so nobody else may run VM tests while the
#      ASan build is installed; host programs that load it, ompi_info too, need libasan
#      preloaded meanwhile). USNIC_VM_LOCKED=1 skips this when the caller holds it already
#      (`USNIC_VM_LOCKED=1 flock /tmp/usnic-vm.lock test/vm/asan-run.sh`);
#   2. builds and installs the ASan component (make -C standalone SANITIZE=address install);
#   3. runs test/vm/run.sh (--native: test/native/run.sh) with USNIC_ASAN=1: lib.sh preloads
#      libasan into every MPI process
#      (and ompi_info), which write their reports to test/vm/logs/asan/<test>/asan.<exe>.<pid>;
#   4. reinstalls the normal build (make -C standalone install), also on failure or ^C; if that
#      build fails, the component that was installed before is put back;
#   5. analyses every report: an ASan error (heap-buffer-overflow, use-after-free, SEGV, ...)
#      with a frame in mca_btl_usnic, or a leak (Direct/Indirect leak block) with a frame in
#      mca_btl_usnic, is ours. Leaks without such a frame are Open MPI's own (it leaks plenty at
#      MPI_Finalize) and only counted. Ours are printed in full.
# Ends with `asan: N passed, N failed` (the VM tests) and a summary; exits non-zero if a test
# failed or if anything of ours was reported. USNIC_ASAN_SLOW (default 3) multiplies timeouts.
# SPDX-License-Identifier: BSD-3-Clause
set -u    # not -e: reinstalls the normal build and reads the reports whatever fails (docs/development.md, Scripts)
VM=$(cd "$(dirname "$0")" && pwd)
REPO=${VM%/test/vm}
ALOGS=$VM/logs/asan
cd "$REPO" || exit 2
RUNNER=("$VM/run.sh") NATIVE=0
if [ "${1:-}" = --native ]; then
    shift
    NATIVE=1 RUNNER=("$REPO/test/native/run.sh")
    if [ "${1:-}" = -n ]; then RUNNER+=(-n "${2:-}"); shift 2; fi
fi
[ $# -gt 0 ] || set -- t-bringup t-p2p t-dtypes t-flood t-coll t-osc t-faults t-stats
t0=$SECONDS

# (--native installs nothing, see below: no VM lock)
if [ "${USNIC_VM_LOCKED:-0}" != 1 ] && [ "$NATIVE" = 0 ]; then
    exec 9>/tmp/usnic-vm.lock || exit 2
    if ! flock -n 9; then
        echo "asan-run: waiting for the VM lock /tmp/usnic-vm.lock (another VM run holds it)"
        flock 9 || exit 2
        echo "asan-run: got the VM lock after $((SECONDS - t0))s"
    fi
fi

# Where the component goes. Asked once, with libasan preloaded (ompi_info dies if the ASan build
# is installed and it is not), and passed to make: its own ompi_info call would fail while the
# ASan build is installed.
ASAN_LIB=$(readlink -f "$(gcc -print-file-name=libasan.so)")
ompi_path() {
    LD_PRELOAD=$ASAN_LIB ASAN_OPTIONS=detect_leaks=0 ompi_info --path "$1" --parsable | cut -d: -f3
}
OMPI_PKGLIBDIR=$(ompi_path pkglibdir) OMPI_DATADIR=$(ompi_path pkgdatadir)
{ [ -d "$OMPI_PKGLIBDIR" ] && [ -d "$OMPI_DATADIR" ]; } || { echo "asan-run: ompi_info --path failed" >&2; exit 2; }
# (and the version, which the Makefile would ask ompi_info for)
OMPI_VERSION=$(LD_PRELOAD=$ASAN_LIB ASAN_OPTIONS=detect_leaks=0 ompi_info --parsable |
               sed -n 's/^ompi:version:full://p')
[ -n "$OMPI_VERSION" ] || { echo "asan-run: ompi_info gives no version" >&2; exit 2; }
MK=(make -s -C standalone OMPI_INFO=true OMPI_VERSION="$OMPI_VERSION" OMPI_PKGLIBDIR="$OMPI_PKGLIBDIR"
    OMPI_DATADIR="$OMPI_DATADIR")
SAVED=$(mktemp -d /tmp/usnic-asan-saved.XXXXXX) || exit 2
cp -p "$OMPI_PKGLIBDIR/mca_btl_usnic.so" "$SAVED/" 2>/dev/null
restore() {
    echo "asan-run: reinstalling the normal build (make -C standalone install)"
    if ! "${MK[@]}" install > "$ALOGS/reinstall.log" 2>&1; then
        cat "$ALOGS/reinstall.log"
        if [ -f "$SAVED/mca_btl_usnic.so" ]; then
            echo "asan-run: the normal build failed; putting back the component installed before"
            install -m 0644 "$SAVED/mca_btl_usnic.so" "$OMPI_PKGLIBDIR/mca_btl_usnic.so"
        else
            echo "asan-run: WARNING: the ASan component is still installed in $OMPI_PKGLIBDIR"
        fi
    fi
    rm -rf "$SAVED"
}
rm -rf "$ALOGS"
mkdir -p "$ALOGS" || exit 2
if [ "$NATIVE" = 1 ]; then
    # Natively every process (mpirun, its daemons, the ranks, ompi_info) inherits the
    # environment: the ASan build is used from a private component directory (links to
    # Open MPI's components, usnic's replaced) named by mca_base_component_path, and the
    # component installed in Open MPI's directory is not touched.
    rm -rf "$SAVED"
    echo "asan-run: make -C standalone SANITIZE=address (used from $ALOGS/components)"
    if ! "${MK[@]}" SANITIZE=address > "$ALOGS/build.log" 2>&1; then
        cat "$ALOGS/build.log"
        echo "asan-run: the ASan build failed"
        exit 2
    fi
    mkdir -p "$ALOGS/components" || exit 2
    for f in "$OMPI_PKGLIBDIR"/*; do
        case ${f##*/} in mca_btl_usnic.*) ;; *) ln -s "$f" "$ALOGS/components/" ;; esac
    done
    cp standalone/build-asan/mca_btl_usnic.so "$ALOGS/components/" || exit 2
    export OMPI_MCA_mca_base_component_path=$ALOGS/components
    tvm=$SECONDS
    USNIC_ASAN=1 "${RUNNER[@]}" "$@" | tee "$ALOGS/run.out"
    vmrc=${PIPESTATUS[0]}
    tvm=$((SECONDS - tvm))
    restore() { :; }
fi
trap 'restore; trap - EXIT; exit 130' INT TERM
trap restore EXIT

if [ "$NATIVE" = 0 ]; then
    echo "asan-run: make -C standalone SANITIZE=address install"
    if ! "${MK[@]}" SANITIZE=address install > "$ALOGS/build.log" 2>&1; then
        cat "$ALOGS/build.log"
        echo "asan-run: the ASan build failed"
        exit 2
    fi
    tvm=$SECONDS
    USNIC_ASAN=1 "${RUNNER[@]}" "$@" | tee "$ALOGS/run.out"
    vmrc=${PIPESTATUS[0]}
    tvm=$((SECONDS - tvm))
fi
restore
trap - EXIT INT TERM
[ "${USNIC_VM_LOCKED:-0}" = 1 ] || exec 9>&-        # release the VM lock

npass=$(grep -c '^PASS ' "$ALOGS/run.out")
nfail=$(grep -Ec '^FAIL .*\(' "$ALOGS/run.out")
python3 - "$ALOGS" "$npass" "$nfail" "$vmrc" "$tvm" "$((SECONDS - t0))" <<'EOF'
import os, re, sys
alogs, npass, nfail, vmrc, tvm, ttot = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5], sys.argv[6]
OURS = re.compile(r'mca_btl_usnic|btl_usnic_')
# A leak whose stack passes through our code but was allocated inside Open MPI's MCA base
# (frameworks opened on demand, e.g. rcache by mca_rcache_base_module_create; the variable and
# pvar registries) belongs to Open MPI's global state, which Open MPI itself does not free at
# finalize: counted with the others. Enums from mca_base_var_enum_create are ours to release.
MCA_BASE = re.compile(r' in mca_base_(?!var_enum_create)\w+')
FRAME = re.compile(r'^\s*#\d+ ')
LEAK = re.compile(r'^(Direct|Indirect) leak of (\d+) byte\(s\) in (\d+) object\(s\)')
files = []
for d, _, names in os.walk(alogs):
    files += [os.path.join(d, n) for n in sorted(names) if re.match(r'asan\..*\.\d+$', n)]
procs = len(files)
our_err, other_err, our_leaks, other_leaks, nolsan, exited, via = [], [], [], [], [], set(), []
ob = oo = xb = xo = 0
for f in sorted(files):
    test = os.path.relpath(f, alogs).split(os.sep)[0]
    lines = open(f, errors='replace').read().splitlines()
    i = 0
    while i < len(lines):
        l = lines[i]
        m = LEAK.match(l)
        if m:                                   # one leak block: up to the blank line
            j = i + 1
            while j < len(lines) and lines[j].strip():
                j += 1
            block = lines[i:j]
            frames = [x for x in block if FRAME.match(x)]
            b, o = int(m.group(2)), int(m.group(3))
            k = [n for n, x in enumerate(frames) if OURS.search(x)]
            if k and any(MCA_BASE.search(x) for x in frames[1:k[0]]):
                via.append((test, f, block)); xb += b; xo += o
            elif k:
                our_leaks.append((test, f, block)); ob += b; oo += o
            else:
                other_leaks.append((test, f, block)); xb += b; xo += o
            i = j
            continue
        if 'ERROR: AddressSanitizer' in l or 'AddressSanitizer:DEADLYSIGNAL' in l or \
           'LeakSanitizer has encountered a fatal error' in l:
            j = i + 1                           # the whole report, up to its SUMMARY line
            while j < len(lines) and not lines[j].startswith('SUMMARY:') and \
                  'LeakSanitizer has encountered' not in lines[i]:
                j += 1
            block = lines[i:j + 1]
            if 'LeakSanitizer has encountered' in l:
                nolsan.append((test, f, block))
            elif any(OURS.search(x) for x in block if FRAME.match(x)):
                our_err.append((test, f, block))
            else:
                other_err.append((test, f, block))
            i = j + 1
            continue
        if l.startswith('Stats: ') and 'malloced' in l:   # atexit=1: the process exited
            exited.add(f)
        i += 1

def show(title, items, limit):
    if not items:
        return
    print('asan: --- %s (%d) ---' % (title, len(items)))
    for test, f, block in items[:limit]:
        print('asan: [%s] %s' % (test, os.path.relpath(f, alogs)))
        for x in block:
            print('    ' + x)
    if len(items) > limit:
        print('asan: ... %d more, see %s' % (len(items) - limit, alogs))
show('errors with a frame in mca_btl_usnic', our_err, 50)
show('leaks with a frame in mca_btl_usnic', our_leaks, 50)
show('errors without a frame in mca_btl_usnic (Open MPI or elsewhere)', other_err, 10)
per = {}
for f in files:
    t = os.path.relpath(f, alogs).split(os.sep)[0]
    per[t] = per.get(t, 0) + 1
print('asan: processes analysed: %d, %d of them reached exit (%s)' % (procs, len(exited), ', '.join('%s %d' % kv for kv in sorted(per.items()))))
if nolsan:
    show('processes whose leak check failed', nolsan, 5)
print('asan: our errors: %d; errors elsewhere: %d' % (len(our_err), len(other_err)))
print('asan: our leaks: %d bytes in %d objects (%d reports)' % (ob, oo, len(our_leaks)))
print('asan: others\' leaks (Open MPI etc., not failures): %d bytes in %d objects (%d reports, %d of them'
      ' allocated by Open MPI\'s MCA base under a usnic call)' % (xb, xo, len(other_leaks) + len(via), len(via)))
print('asan: VM run %ss, total %ss, logs in %s' % (tvm, ttot, alogs))
bad = len(our_err) + len(our_leaks)
print('asan: %d passed, %d failed%s' % (npass, nfail, '' if vmrc == 0 else ' (run.sh exit code %d)' % vmrc))
if procs == 0:
    print('asan: FAIL: no ASan report files at all (were the processes run with libasan?)')
print('asan: %s' % ('CLEAN: nothing of ours reported' if bad == 0 and procs > 0 else 'FAIL: %d error(s) and %d leak report(s) of ours' % (len(our_err), len(our_leaks))))
sys.exit(1 if bad or procs == 0 or nfail or vmrc else 0)
EOF
