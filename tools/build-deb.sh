#!/bin/bash
# tools/build-deb.sh [--nocheck] [--out DIR]: build the openmpi-btl-usnic Debian package for
# the Debian release this runs on, against its Open MPI (Debian 12: 4.1, Debian 13: 5.0).
#  - stages the component sources, standalone/, test/unit/ and packaging/debian/ (as debian/)
#    into a clean tree under ${USNIC_DEB_WORK:-~/.cache/usnic-deb}/CODENAME, so the repository
#    (the component directory of an Open MPI tree) never gets a debian/ directory or build
#    files; only files git tracks are taken, as they are in the work tree;
#  - versions it VERSION+debN (N: the Debian major release), with a changelog entry for the
#    release's codename, so the Debian 13 build is newer than the Debian 12 one;
#  - installs what is missing of dpkg-dev, debhelper, lintian and the Build-Depends
#    (apt-get; nothing is installed when all is there);
#  - runs dpkg-buildpackage -us -uc (the unit tests run as dh_auto_test unless --nocheck) and
#    lintian, which must report no error and no warning;
#  - leaves the .deb, .dsc, .tar.xz, .buildinfo and .changes in DIR (default
#    packaging/out/CODENAME, git-ignored; emptied first), where test/vm/t-debpkg.sh finds them.
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$PWD

nocheck=0 out=
while [ $# -gt 0 ]; do
    case $1 in
        --nocheck) nocheck=1; shift ;;
        --out) out=$2; shift 2 ;;
        *) echo "usage: $0 [--nocheck] [--out DIR]" >&2; exit 2 ;;
    esac
done

. /etc/os-release
[ "${ID:-}" = debian ] && [ -n "${VERSION_CODENAME:-}" ] && [ -n "${VERSION_ID:-}" ] ||
    { echo "build-deb: not a Debian release (/etc/os-release: ${PRETTY_NAME:-?})" >&2; exit 2; }
codename=$VERSION_CODENAME
out=${out:-$REPO/packaging/out/$codename}
work=${USNIC_DEB_WORK:-${XDG_CACHE_HOME:-$HOME/.cache}/usnic-deb}/$codename

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
[ ${#missing[@]} = 0 ] || { echo "build-deb: installing ${missing[*]}"; apt_install install -y "${missing[@]}"; }

base=$(dpkg-parsechangelog -l packaging/debian/changelog -S Version)
version=$base+deb${VERSION_ID%%.*}
src=$work/openmpi-btl-usnic-$version
rm -rf "$work"
mkdir -p "$src"
# the component as it sits in Open MPI's tree, its stand-alone build and its unit tests
git ls-files -z -- 'btl_usnic*' help-mpi-btl-usnic.txt configure.m4 Makefile.am README.md \
    standalone test/unit | xargs -0 cp --parents -t "$src"
cp -r packaging/debian "$src/debian"
# dated by the last commit (reproducible), and after the entry it builds on
t_base=$(dpkg-parsechangelog -l packaging/debian/changelog -S Timestamp)
t=$(git log -1 --format=%ct)
[ "$t" -gt "$t_base" ] || t=$((t_base + 1))
{
    printf 'openmpi-btl-usnic (%s) %s; urgency=medium\n\n' "$version" "$codename"
    printf '  * Build for %s with Open MPI %s.\n\n' "$PRETTY_NAME" \
        "$(ompi_info --parsable 2>/dev/null | sed -n 's/^opal:version:full://p')"
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
