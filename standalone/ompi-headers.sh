#!/bin/sh
# standalone/ompi-headers.sh OUTDIR INCDIR...: make sure every header that opal_config.h
# names in its MCA_*_HEADER macros can be included, with the headers these include. Open MPI 5.0.7's devel headers (Debian 13's
# libopenmpi-dev) lack the ones of the threads and timer components it was built with
# (opal/mca/threads/pthreads/threads_pthreads_*.h, opal/mca/timer/linux/timer_linux.h).
# Those missing from the INCDIRs are copied into OUTDIR from the Open MPI source: $OMPI_SRC
# (an unpacked source tree of the same version) if set, else Debian's source package of the
# installed libopenmpi-dev version, fetched with `apt-get source` (needs deb-src entries in
# the apt sources and dpkg-dev; both are checked first) and thrown away afterwards. OUTDIR/.stamp records what it was made from; with 4.1,
# whose devel headers are complete, OUTDIR stays empty.
# SPDX-License-Identifier: BSD-3-Clause
set -eu
etc=${USNIC_APT_ETC:-/etc/apt}
has_deb_src() {
    for f in "$etc"/sources.list "$etc"/sources.list.d/*.list; do
        [ -f "$f" ] && grep -Eq '^[[:space:]]*deb-src[[:space:]]' "$f" && return 0
    done
    for f in "$etc"/sources.list.d/*.sources; do
        [ -f "$f" ] && awk 'BEGIN { RS = ""; FS = "\n" }
            { t = e = ""
              for (i = 1; i <= NF; i++) {
                  l = tolower($i)
                  if (l ~ /^types:/) t = l " "
                  if (l ~ /^enabled:/) e = l }
              if (t ~ /[ \t]deb-src[ \t]/ && e !~ /no/) found = 1 }
            END { exit !found }' "$f" && return 0
    done
    return 1
}
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
        # apt-get source needs deb-src entries to find the package and dpkg-source to unpack it
        lack=
        command -v dpkg-source > /dev/null 2>&1 ||
            lack="the package dpkg-dev (apt-get install dpkg-dev)"
        has_deb_src ||
            lack="${lack:+$lack, and }deb-src entries in the apt sources (add deb-src to the Types: line of /etc/apt/sources.list.d/debian.sources, or deb-src lines to /etc/apt/sources.list, then apt-get update)"
        if [ -n "$lack" ]; then
            echo "ompi-headers: the Open MPI $ver devel headers lack:$missing. They are taken from Debian's openmpi source package, which needs $lack. Or set OMPI_SRC to an unpacked Open MPI source tree of the installed version." >&2
            exit 1
        fi
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
