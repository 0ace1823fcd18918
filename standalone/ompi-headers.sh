#!/bin/sh
# standalone/ompi-headers.sh OUTDIR INCDIR...: make sure every header that opal_config.h
# names in its MCA_*_HEADER macros can be included, with the headers these include. Open MPI 5.0.7's devel headers (Debian 13's
# libopenmpi-dev) lack the ones of the threads and timer components it was built with
# (opal/mca/threads/pthreads/threads_pthreads_*.h, opal/mca/timer/linux/timer_linux.h).
# Those missing from the INCDIRs are copied into OUTDIR from the Open MPI source: $OMPI_SRC
# (an unpacked source tree of the same version) if set, else Debian's source package of the
# installed libopenmpi-dev version, fetched with `apt-get source` (needs deb-src in the apt
# sources) and thrown away afterwards. OUTDIR/.stamp records what it was made from; with 4.1,
# whose devel headers are complete, OUTDIR stays empty.
# SPDX-License-Identifier: BSD-3-Clause
set -eu
out=$1; shift
cfg=
for d in "$@"; do [ -f "$d/opal_config.h" ] && cfg=$d/opal_config.h && break; done
[ -n "$cfg" ] || { echo "ompi-headers: no opal_config.h in $*" >&2; exit 1; }
missing=
named=$(sed -n 's/^#define MCA_[A-Za-z0-9_]*_HEADER "\(opal\/[^"]*\.h\)"$/\1/p' "$cfg" | sort -u)
for h in $named; do
    found=0
    for d in "$@"; do [ -f "$d/$h" ] && found=1; done
    [ $found = 1 ] || missing="$missing $h"
done
ver=$(dpkg-query -W -f='${Version}' libopenmpi-dev 2>/dev/null || echo unknown)
want="$ver:$missing"
[ "$(cat "$out/.stamp" 2>/dev/null)" = "$want" ] && exit 0
rm -rf "$out"
mkdir -p "$out"
if [ -n "$missing" ]; then
    src=${OMPI_SRC:-}
    tmp=
    if [ -z "$src" ]; then
        tmp=$(mktemp -d "${out%/}.src.XXXXXX")
        trap 'rm -rf "$tmp"' EXIT
        echo "ompi-headers: fetching Debian's openmpi $ver source for:$missing" >&2
        (cd "$tmp" && apt-get -q source "openmpi=$ver" > apt.log 2>&1) || {
            tail -n 5 "$tmp/apt.log" >&2
            echo "ompi-headers: cannot fetch the openmpi $ver source package. Enable deb-src lines in the apt sources (apt-get source needs them), or set OMPI_SRC to an unpacked Open MPI source tree of the installed version." >&2
            exit 1
        }
        src=$(find "$tmp" -mindepth 1 -maxdepth 1 -type d -name 'openmpi-*' | head -n 1)
    fi
    todo=$missing
    while [ -n "$todo" ]; do        # the copies may include further uninstalled headers
        next=
        for h in $todo; do
            [ -f "$src/$h" ] || { echo "ompi-headers: $h is not in $src either" >&2; exit 1; }
            mkdir -p "$out/${h%/*}"
            cp "$src/$h" "$out/$h"
            incs=$(sed -n 's/^#[ \t]*include "\(opal\/[^"]*\.h\)".*/\1/p' "$out/$h")
            for i in $incs; do
                found=0
                for d in "$@" "$out"; do [ -f "$d/$i" ] && found=1; done
                [ $found = 1 ] || case " $next " in *" $i "*) ;; *) next="$next $i" ;; esac
            done
        done
        todo=$next
    done
fi
echo "$want" > "$out/.stamp"
