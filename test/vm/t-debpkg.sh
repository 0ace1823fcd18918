#!/bin/bash
# vm-timeout: 300
# The Debian package of this world's release (tools/build-deb.sh, packaging/out/CODENAME/):
#   1) the stand-alone install is moved aside (put back at the end): no usnic in ompi_info;
#   2) dpkg -i: its dependencies hold here, it pins the Open MPI release series of this world
#      (a Depends on the package that ships libopen-pal, below the next minor release), and it
#      puts the component and the help file in Open MPI's pkglibdir and pkgdatadir;
#      ompi_info lists usnic, and a bad parameter gets usnic's own help text (the help file
#      is found);
#   3) jobs over it: progs/p2p up to 256 KiB (every usnic and ob1 protocol), 1 rank per host with btl usnic,self and
#      2 per host with usnic,self,vader (sm on Open MPI 5.0), every byte checked, usnic's counters showing it
#      carried the inter-host traffic (dp-lib.sh);
#   4) dpkg --purge: no file of the package left (directories only where another package
#      owns them), dpkg forgets it, ompi_info no longer lists usnic.
# The guest's root is a throw-away overlay: dpkg changes nothing on the host. Debian 12 (this
# machine's root, Open MPI 4.1) and Debian 13 (RXE_VM_ROOT=$(tools/debian13-root.sh), 5.0):
# each finds its own package, packaging/out/bookworm or packaging/out/trixie.
# SPDX-License-Identifier: BSD-3-Clause
set -u
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/dp-lib.sh"
. /etc/os-release

PKG=openmpi-btl-usnic
debs=("$REPO/packaging/out/$VERSION_CODENAME/${PKG}_"*.deb)
{ [ ${#debs[@]} = 1 ] && [ -f "${debs[0]}" ]; } ||
    fail "not one $PKG .deb in packaging/out/$VERSION_CODENAME (run tools/build-deb.sh): ${debs[*]}"
DEB=${debs[0]}
echo "package: $DEB"
LIBDIR=$(ompi_info --path pkglibdir --parsable | cut -d: -f3)
DATADIR=$(ompi_info --path pkgdatadir --parsable | cut -d: -f3)
OMPI_VER=$(ompi_info --parsable | sed -n 's/^ompi:version:full://p')
{ [ -n "$LIBDIR" ] && [ -n "$DATADIR" ] && [ -n "$OMPI_VER" ]; } || fail "ompi_info gave no paths or version"
COMP=$LIBDIR/mca_btl_usnic.so HELP=$DATADIR/help-mpi-btl-usnic.txt

installed() { [ "$(dpkg-query -W -f='${Status}' "$PKG" 2>/dev/null)" = "install ok installed" ]; }
# lists_usnic: ompi_info on hostA lists the usnic BTL (its line goes to $WORK/ompi_info.usnic)
lists_usnic() { onhost A ompi_info 2>&1 | grep 'MCA btl: usnic' > "$WORK/ompi_info.usnic"; }

# the stand-alone install goes back after the test, for the tests that follow in this VM
mkdir -p "$WORK/standalone"
restore() {
    installed && dpkg --purge "$PKG" > /dev/null 2>&1
    for f in "$COMP" "$HELP"; do
        [ -e "$WORK/standalone/${f##*/}" ] && mv "$WORK/standalone/${f##*/}" "$f"
    done
}
trap restore EXIT
for f in "$COMP" "$HELP"; do
    [ -e "$f" ] && mv "$f" "$WORK/standalone/"
done
! lists_usnic || fail "ompi_info still lists usnic without the stand-alone files: $(cat "$WORK/ompi_info.usnic")"
pass "stand-alone install moved aside: ompi_info lists no usnic"

echo "== dpkg -i ${DEB##*/}"
dpkg -i "$DEB" 2>&1 || fail "dpkg -i failed (are its dependencies installed in this world?)"
installed || fail "dpkg does not list $PKG as installed"
pass "dpkg -i: $PKG $(dpkg-query -W -f='${Version}' "$PKG") installed"
dpkg -L "$PKG" > "$WORK/files"
for f in "$COMP" "$HELP"; do
    { grep -qxF "$f" "$WORK/files" && [ -f "$f" ]; } || fail "$PKG does not install $f"
done
pass "$PKG installs ${COMP##*/} in pkglibdir $LIBDIR and ${HELP##*/} in pkgdatadir $DATADIR"
# the package of the libopen-pal the component loads
libpkg=$(dpkg-query -S "$(readlink -f "$(ldd "$COMP" | awk '/libopen-pal/ { print $3 }')")" | cut -d: -f1)
next=$(echo "$OMPI_VER" | awk -F. '{ print $1 "." $2 + 1 }')
depends=$(dpkg-query -W -f='${Depends}' "$PKG")
echo "Depends: $depends"
for d in "$libpkg (>= $OMPI_VER)" "$libpkg (<< $next~)"; do
    case ", $depends," in *", $d,"*) ;; *) fail "Depends lacks '$d' (Open MPI $OMPI_VER)" ;; esac
done
pass "Depends pins $libpkg to Open MPI $OMPI_VER up to $next"

lists_usnic || fail "ompi_info does not list usnic with the package installed"
assert_grep "MCA btl: usnic \(MCA v[0-9.]+, API v[0-9.]+, Component v${OMPI_VER//./\\.}\)" \
    "$WORK/ompi_info.usnic" "ompi_info lists usnic: $(sed 's/^ *//' "$WORK/ompi_info.usnic")"
onhost A env OMPI_MCA_btl_usnic_max_btls=-1 ompi_info > "$WORK/badparam" 2>&1
assert_grep '^ *Parameter: *btl_usnic_max_btls$' "$WORK/badparam" \
    "a bad btl_usnic_max_btls gets the 'invalid param value' text of the installed help file"

mpi_build p2p
DP_TIMEOUT=120
dp_run 1 "$WORK/p2p-1.out" "$WORK/p2p" -m 262144
dp_check p2p 1 "$WORK/p2p-1.out"
dp_run 2 "$WORK/p2p-2.out" "$WORK/p2p" -m 262144
dp_check p2p 2 "$WORK/p2p-2.out"

echo "== dpkg --purge $PKG"
dpkg --purge "$PKG" 2>&1 || fail "dpkg --purge failed"
! dpkg-query -W "$PKG" > /dev/null 2>&1 || fail "dpkg still knows $PKG after the purge"
pass "dpkg --purge: dpkg no longer knows $PKG"
left=0 dirs=()
while read -r f; do
    if [ "$f" = /. ]; then continue
    elif [ -d "$f" ] && [ ! -L "$f" ]; then dirs+=("$f")
    elif [ -e "$f" ] || [ -L "$f" ]; then
        echo "left: $f"; left=1
    fi
done < "$WORK/files"
# the directories left must belong to other packages: one query for all of them (each
# dpkg-query reads dpkg's whole database, several seconds in the VM)
if [ ${#dirs[@]} -gt 0 ]; then
    dpkg-query -S "${dirs[@]}" 2>/dev/null | sed 's/.*: //' > "$WORK/owned"
    for f in "${dirs[@]}"; do
        grep -qxF "$f" "$WORK/owned" || { echo "left: directory $f"; left=1; }
    done
fi
[ "$left" = 0 ] || fail "the purge left files of $PKG behind"
pass "no file of $PKG left ($(wc -l < "$WORK/files") paths checked)"
! lists_usnic || fail "ompi_info still lists usnic after the purge"
pass "ompi_info no longer lists usnic"
dp_done
