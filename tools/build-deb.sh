#!/bin/bash
# tools/build-deb.sh [--debian13] [--nocheck] [--out DIR]: build the openmpi-btl-usnic Debian
# package for the Debian release this runs on, against its Open MPI (Debian 12: 4.1, Debian
# 13: 5.0). --debian13 builds it in the Debian 13 root of tools/debian13-root.sh (chroot).
#  - stages the component sources, standalone/, test/unit/ and packaging/debian/ (as debian/)
#    into a clean tree under packaging/build/CODENAME (git-ignored; USNIC_DEB_WORK replaces
#    packaging/build), so the repository (the component directory of an Open MPI tree) never
#    gets a debian/ directory or build files; only files git tracks are taken, as they are in
#    the work tree;
#  - with Open MPI 5, whose devel headers lack some that opal_config.h includes, adds those
#    (standalone/ompi-headers.sh) with Open MPI's LICENSE as ompi-headers/, taken from Debian's
#    openmpi source package of the installed version (apt-get source, kept in
#    packaging/build/CODENAME-openmpi-src), so that the source package builds offline;
#  - versions it VERSION+debN (N: the Debian major release), with a changelog entry for the
#    release's codename, so the Debian 13 build is newer than the Debian 12 one;
#  - installs what is missing of dpkg-dev, debhelper, lintian and the Build-Depends
#    (apt-get; nothing is installed when all is there);
#  - runs dpkg-buildpackage -us -uc (the unit tests run as dh_auto_test unless --nocheck) and
#    lintian, which must report no error and no warning;
#  - leaves the .deb, .dsc, .tar.xz, .buildinfo and .changes in DIR (default
#    packaging/out/CODENAME, git-ignored; emptied first), where test/vm/t-debpkg.sh finds them.
# SPDX-License-Identifier: BSD-3-Clause
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$PWD

nocheck=0 out='' d13=0 staged=0
while [ $# -gt 0 ]; do
    case $1 in
        --debian13) d13=1; shift ;;
        --nocheck) nocheck=1; shift ;;
        --out) out=$2; shift 2 ;;
        --staged) staged=1; shift ;;     # internal: the tree is staged, build it here
        *) echo "usage: $0 [--debian13] [--nocheck] [--out DIR]" >&2; exit 2 ;;
    esac
done

osrel=/etc/os-release
[ "$d13" = 1 ] && osrel=$(tools/debian13-root.sh)/etc/os-release
# shellcheck source=/dev/null
. "$osrel"
{ [ "${ID:-}" = debian ] && [ -n "${VERSION_CODENAME:-}" ] && [ -n "${VERSION_ID:-}" ]; } ||
    { echo "build-deb: not a Debian release ($osrel: ${PRETTY_NAME:-?})" >&2; exit 2; }
codename=$VERSION_CODENAME
out=${out:-$REPO/packaging/out/$codename}
base=${USNIC_DEB_WORK:-$REPO/packaging/build}
work=$base/$codename

apt_install() {
    local sudo=()
    [ "$(id -u)" = 0 ] || sudo=(sudo -n)
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get -q -o DPkg::Lock::Timeout=600 update
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get -q -o DPkg::Lock::Timeout=600 "$@"
}
missing=()
for p in dpkg-dev debhelper lintian; do
    dpkg-query -W -f='${db:Status-Abbrev}' "$p" 2>/dev/null | grep -q '^ii' || missing+=("$p")
done
[ ${#missing[@]} = 0 ] || { echo "build-deb: installing ${missing[*]}"; apt_install install -y --no-install-recommends "${missing[@]}"; }
version=$(dpkg-parsechangelog -l packaging/debian/changelog -S Version)+deb${VERSION_ID%%.*}
src=$work/openmpi-btl-usnic-$version

# staging needs git, which the Debian 13 root has not: it is done here, the rest in the root
if [ "$staged" = 0 ]; then
    rm -rf "$work"
    mkdir -p "$src"
    # the component as it sits in Open MPI's tree, its stand-alone build and its unit tests
    git ls-files -z -- 'btl_usnic*' help-mpi-btl-usnic.txt configure.m4 Makefile.am README.md LICENSE docs \
        standalone test/unit | xargs -0 cp --parents -t "$src"
    cp -r packaging/debian "$src/debian"
    git log -1 --format=%ct > "$work/commit-time"
fi
if [ "$d13" = 1 ]; then
    args=(--staged --out "$out")
    [ "$nocheck" = 1 ] && args+=(--nocheck)
    exec tools/debian13-root.sh run tools/build-deb.sh "${args[@]}"
fi

ompi_ver=$(ompi_info --parsable 2>/dev/null | sed -n 's/^ompi:version:full://p')
[ -n "$ompi_ver" ] || { echo "build-deb: no Open MPI (ompi_info) here" >&2; exit 2; }

if [ "${ompi_ver%%.*}" != 4 ]; then
    debver=$(dpkg-query -W -f='${Version}' libopenmpi-dev)
    osrc=$base/$codename-openmpi-src
    if [ "$(cat "$osrc/.version" 2>/dev/null)" != "$debver" ]; then
        echo "build-deb: apt-get source openmpi=$debver (for the headers libopenmpi-dev lacks)"
        rm -rf "$osrc"
        mkdir -p "$osrc"
        (cd "$osrc" && apt-get -q source "openmpi=$debver" > apt.log 2>&1) ||
            { tail -n 5 "$osrc/apt.log"; echo "build-deb: apt-get source openmpi=$debver failed: it needs deb-src entries in the apt sources for this release (and the network)" >&2; exit 1; }
        echo "$debver" > "$osrc/.version"
    fi
    tree=$(find "$osrc" -mindepth 1 -maxdepth 1 -type d -name 'openmpi-*' | head -n 1)
    read -ra incdirs <<< "$(mpicc.openmpi --showme:incdirs)"
    OMPI_SRC=$tree sh standalone/ompi-headers.sh "$work/ompi-headers" "${incdirs[@]}"
    mapfile -t hdrs < <(cd "$work/ompi-headers" && find . -name '*.h' | sed 's|^\./||' | sort)
    if [ ${#hdrs[@]} -gt 0 ]; then
        mkdir -p "$src/ompi-headers"
        (cd "$work/ompi-headers" && cp --parents -t "$src/ompi-headers" "${hdrs[@]}")
        cp "$tree/LICENSE" "$src/ompi-headers/LICENSE"
        echo "build-deb: ompi-headers/ from openmpi $debver: ${hdrs[*]}"
        {
            printf '\nFiles: ompi-headers/*\nCopyright:'
            (cd "$src/ompi-headers" && sed -n 's/^ \* Copyright (c) *//p' "${hdrs[@]}") |
                sed 's/ *All rights reserved\.$//; s/^/ /' | sort -u
            printf 'Comment: Open MPI %s headers that libopenmpi-dev %s does not ship,\n' "$ompi_ver" "$debver"
            printf ' from Debian'"'"'s openmpi source package; LICENSE is Open MPI'"'"'s.\n'
            printf 'License: Open-MPI\n'
            expand "$tree/LICENSE" | sed 's/^[[:space:]]*$/./; s/^/ /'
        } >> "$src/debian/copyright"
    fi
fi

# dated by the last commit (reproducible), and after the entry it builds on
t_base=$(dpkg-parsechangelog -l packaging/debian/changelog -S Timestamp)
t=$(cat "$work/commit-time")
[ "$t" -gt "$t_base" ] || t=$((t_base + 1))
{
    printf 'openmpi-btl-usnic (%s) %s; urgency=medium\n\n' "$version" "$codename"
    printf '  * Build for %s with Open MPI %s.\n\n' "$PRETTY_NAME" "$ompi_ver"
    printf ' -- %s  %s\n\n' "$(dpkg-parsechangelog -l packaging/debian/changelog -S Maintainer)" \
        "$(date -u -R -d "@$t")"
    cat packaging/debian/changelog
} > "$src/debian/changelog"

cd "$src"
if ! dpkg-checkbuilddeps >/dev/null 2>&1; then
    echo "build-deb: installing the Build-Depends"
    apt_install build-dep -y "$src"
fi
opts=${DEB_BUILD_OPTIONS:-}
[ "$nocheck" = 1 ] && opts="$opts nocheck"
echo "build-deb: dpkg-buildpackage in $src (log: $work/build.log)"
if ! DEB_BUILD_OPTIONS=$opts dpkg-buildpackage -us -uc > "$work/build.log" 2>&1; then
    tail -n 40 "$work/build.log"
    echo "build-deb: dpkg-buildpackage failed (log: $work/build.log)" >&2
    exit 1
fi
grep -E '^(unit: |dpkg-deb: building)' "$work/build.log" || true

changes=$work/openmpi-btl-usnic_${version}_$(dpkg --print-architecture).changes
echo "build-deb: lintian $changes"
lintian --fail-on error,warning -I "$changes" || { echo "build-deb: lintian found problems" >&2; exit 1; }

mkdir -p "$out"
rm -f "$out"/*
cp -t "$out" "$work"/openmpi-btl-usnic*_"$version"[._]*
ls -l "$out"
dpkg-deb -I "$out"/openmpi-btl-usnic_"$version"_*.deb | sed -n '/^ Package:/,$p'
dpkg-deb -c "$out"/openmpi-btl-usnic_"$version"_*.deb
