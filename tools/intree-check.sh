#!/bin/bash
#
# intree-check.sh: prove that the usnic BTL builds and loads inside a
# real Open MPI 4.1 source tree and a real Open MPI 5.0 one.
#
# Open MPI 4.1 is Debian 12's (this machine's), 5.0 Debian 13's: that
# check runs chrooted in the Debian 13 world of tools/debian13-root.sh,
# whose packages (PMIx 5, libevent, hwloc, autotools) the 5.0 tree builds
# against; its cache is then inside that root.
#
# What it does, step by step, for each version:
#   1. fetch   Debian's openmpi (4.1.x or 5.0.x) source package with
#              `apt-get source`, through a private apt configuration
#              (own sources list, state, lists and cache dirs); the
#              machine's apt setup is never touched.  Cached.
#   2. unpack  dpkg-source -x into the work dir (once per source version).
#   3. sync    replace opal/mca/btl/usnic with this component's files
#              (configure.m4, Makefile.am, btl_usnic*.[ch],
#              help-mpi-btl-usnic.txt); unchanged files keep their mtime.
#   4. autogen ./autogen.pl, only when configure.m4, Makefile.am or the
#              options changed since the last successful run.  4.1: OPAL
#              only; 5.0 cannot leave out OMPI, only the bundled packages.
#   5. config  ./configure --with-usnic ..., only when autogen ran or the
#              options changed; requires "btl:usnic can compile... yes".
#   6. build   libopen-pal and the OPAL components, then the usnic
#              component alone, from clean, so that all its compiler
#              diagnostics are shown on every run.
#   7. load    build test/intree/load-check.c against that tree and run
#              it: opal_init(), open the btl framework with btl=usnic,
#              check usnic was loaded, registered and opened.
#
# Usage: tools/intree-check.sh [options]
#   --ompi VER    4.1, 5.0 or both (default: both, 4.1 first)
#   --src DIR     component sources to test (default: the repo root;
#                 for 5.0 it must be inside the repository, which is
#                 what the Debian 13 root sees)
#   --cache DIR   cache and work dir
#                 (default: ${XDG_CACHE_HOME:-$HOME/.cache}/usnic-intree,
#                  or $USNIC_INTREE_CACHE)
#   --jobs N      parallel make jobs (default: 2)
#   --werror      fail when the component compiles with warnings
#   --clean       throw the unpacked tree away first (the downloaded
#                 source package stays cached)
#   -h, --help    this text
#
# Exit status 0 when every step passed; otherwise non-zero, with the
# step that failed and the end of its log.
# SPDX-License-Identifier: BSD-3-Clause

set -Eeuo pipefail
export LC_ALL=C
# Not part of an outer make's job server.
unset MAKEFLAGS MFLAGS MAKELEVEL MAKEOVERRIDES

# ---------------------------------------------------------------------------
# settings

script_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo_root=$(cd "$script_dir/.." && pwd)

src_dir=$repo_root
cache_dir=${USNIC_INTREE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/usnic-intree}
jobs=2
werror=0
clean=0
ompi=both
args=("$@")
src_package=openmpi

usage() { sed -n '/^# Usage:/,/^# Exit status/p' "$0" | sed 's/^# \{0,1\}//'; }

while [ $# -gt 0 ]; do
    case "$1" in
        --src)      src_dir=$2; shift 2 ;;
        --src=*)    src_dir=${1#--src=}; shift ;;
        --cache)    cache_dir=$2; shift 2 ;;
        --cache=*)  cache_dir=${1#--cache=}; shift ;;
        --jobs)     jobs=$2; shift 2 ;;
        --jobs=*)   jobs=${1#--jobs=}; shift ;;
        -j*)        jobs=${1#-j}; shift ;;
        --werror)   werror=1; shift ;;
        --clean)    clean=1; shift ;;
        --ompi)     ompi=$2; shift 2 ;;
        --ompi=*)   ompi=${1#--ompi=}; shift ;;
        -h|--help)  usage; exit 0 ;;
        *)          echo "intree-check: unknown option: $1" >&2; usage >&2; exit 2 ;;
    esac
done

# both: one run per version, the 5.0 one in the Debian 13 world
case $ompi in
    both)
        rc=0
        "$0" "${args[@]}" --ompi 4.1 || rc=1
        "$0" "${args[@]}" --ompi 5.0 || rc=1
        exit $rc ;;
    4.1) suite=bookworm ;;
    5.0) suite=trixie
         if [ ! -f /.usnic-debian13 ]; then
             exec "$repo_root/tools/debian13-root.sh" run "$0" "${args[@]}" --ompi 5.0
         fi ;;
    *)   echo "intree-check: --ompi must be 4.1, 5.0 or both" >&2; exit 2 ;;
esac
# Debian release whose openmpi source package is used.
suite=${USNIC_INTREE_SUITE:-$suite}

src_dir=$(cd "$src_dir" && pwd) || { echo "intree-check: no such dir: $src_dir" >&2; exit 2; }
mkdir -p "$cache_dir"
cache_dir=$(cd "$cache_dir" && pwd)

apt_dir=$cache_dir/apt          # private apt configuration and state
pkg_dir=$cache_dir/source       # downloaded .dsc and tarballs
work_dir=$cache_dir/work        # unpacked tree, logs, stamps
log_dir=$work_dir/logs
mkdir -p "$apt_dir" "$pkg_dir" "$work_dir" "$log_dir"

# ---------------------------------------------------------------------------
# helpers

t_start=$EPOCHREALTIME
step_names=()
step_times=()
current_step=
current_log=
step_t0=

now() { printf '%s' "$EPOCHREALTIME"; }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", b - a }'; }

say() { printf 'intree-check: %s\n' "$*"; }

step() {
    current_step=$1
    current_log=${2:-}
    step_t0=$(now)
    say "== $current_step${current_log:+ (log: $current_log)}"
}

step_done() {
    local secs
    secs=$(elapsed "$step_t0" "$(now)")
    step_names+=("$current_step${1:+ ($1)}")
    step_times+=("$secs")
    say "   done in ${secs}s${1:+ ($1)}"
    current_step=
    current_log=
}

print_timings() {
    local i
    say "timings:"
    for i in "${!step_names[@]}"; do
        printf 'intree-check:   %7ss  %s\n' "${step_times[$i]}" "${step_names[$i]}"
    done
    printf 'intree-check:   %7ss  total\n' "$(elapsed "$t_start" "$(now)")"
}

# fail MESSAGE [LOG]: report, show the end of LOG (default: the current
# step's log; "-": none), exit 1.
fail() {
    local msg=$1 log=${2:-$current_log}
    [ "$log" = - ] && log=
    trap - ERR
    echo >&2
    local where=''
    [ -z "$current_step" ] || where=" in step '$current_step'"
    echo "intree-check: FAILED$where: $msg" >&2
    if [ -n "$log" ] && [ -s "$log" ]; then
        echo "intree-check: last lines of $log:" >&2
        tail -n 40 "$log" | sed 's/^/    | /' >&2
    fi
    [ "${#step_names[@]}" -gt 0 ] && print_timings >&2
    exit 1
}

trap 'fail "command failed (line $LINENO, status $?): $BASH_COMMAND"' ERR

# run LOG CMD...: run a command with all output into LOG; fail on error.
run() {
    local log=$1; shift
    if ! "$@" >"$log" 2>&1; then
        fail "'$*' failed (see $log)" "$log"
    fi
}

sha_of() {  # sha256 of the named files' contents, then of stdin
    { if [ $# -gt 0 ]; then cat -- "$@"; fi; cat; } | sha256sum | cut -d' ' -f1
}

stamp_get() { cat "$work_dir/.stamp-$1" 2>/dev/null || true; }
stamp_set() { printf '%s\n' "$2" >"$work_dir/.stamp-$1"; }
stamp_del() { rm -f "$work_dir/.stamp-$1"; }

# ---------------------------------------------------------------------------
# only one run per cache dir at a time

exec 9>"$cache_dir/.lock"
if ! flock -n 9; then
    say "another intree-check is using $cache_dir; waiting for it"
    flock 9
fi

say "Open MPI $ompi (Debian $suite's source package)"
say "component sources: $src_dir"
say "cache / work dir:  $cache_dir"

# ---------------------------------------------------------------------------
# 0. tools and libraries

step "prerequisites"
missing=()
for c in apt-get dpkg-source perl autoconf automake libtoolize flex m4 gcc make \
         sha256sum flock awk; do
    command -v "$c" >/dev/null 2>&1 || missing+=("command $c")
done
multiarch=$(gcc -print-multiarch 2>/dev/null || true)
[ -n "$multiarch" ] || multiarch=x86_64-linux-gnu
for f in /usr/include/infiniband/verbs.h /usr/include/libnl3/netlink/route/route.h \
         /usr/include/hwloc.h /usr/include/event.h; do
    [ -e "$f" ] || missing+=("header $f")
done
pmix_dir=/usr/lib/$multiarch/pmix2
if [ ! -e "$pmix_dir/include/pmix.h" ]; then
    if [ -e /usr/include/pmix.h ]; then
        pmix_dir=external
    else
        missing+=("PMIx headers ($pmix_dir/include/pmix.h)")
    fi
fi
if [ "${#missing[@]}" -gt 0 ]; then
    printf 'intree-check:   missing: %s\n' "${missing[@]}" >&2
    fail "prerequisites missing; install them with tools/deps.sh (packages: autoconf automake libtool flex dpkg-dev libibverbs-dev libnl-3-dev libnl-route-3-dev libhwloc-dev libevent-dev libpmix-dev)"
fi
for f in configure.m4 Makefile.am help-mpi-btl-usnic.txt; do
    [ -f "$src_dir/$f" ] || fail "component file $src_dir/$f is missing"
done
compgen -G "$src_dir/btl_usnic*.c" >/dev/null || fail "no btl_usnic*.c in $src_dir"
step_done

# ---------------------------------------------------------------------------
# 1. fetch the source package (cached)

find_dsc() {  # newest cached ${src_package}_$ompi.*.dsc, or nothing
    local f last=
    for f in "$pkg_dir/${src_package}_$ompi".*.dsc; do
        [ -f "$f" ] && last=$f
    done
    printf '%s' "$last"
}

dsc=$(find_dsc)
step "fetch $src_package source from Debian $suite" "$log_dir/fetch.log"
if [ -n "$dsc" ]; then
    step_done "cached: $(basename "$dsc")"
else
    # Private apt setup: only a deb-src line, on the mirror and keyring
    # that this machine's Debian sources already use.
    mirror_keyring=$("$script_dir/apt-mirror.sh" "$suite") ||
        fail "no Debian archive in this machine's apt sources (/etc/apt/sources.list, /etc/apt/sources.list.d/*.list or *.sources) to fetch the $src_package source from"
    mirror=${mirror_keyring%% *}
    keyring=${mirror_keyring#* }
    case "$keyring" in
        /*) ;;
        *)  keyring=/usr/share/keyrings/debian-archive-keyring.gpg ;;
    esac
    [ -r "$keyring" ] || fail "Debian archive keyring $keyring not found (package debian-archive-keyring)"
    say "   mirror $mirror, keyring $keyring"

    mkdir -p "$apt_dir/etc/sources.list.d" "$apt_dir/etc/preferences.d" \
             "$apt_dir/state/lists/partial" "$apt_dir/cache/archives/partial"
    printf 'deb-src [signed-by=%s] %s %s main\n' "$keyring" "$mirror" "$suite" \
        >"$apt_dir/etc/sources.list"
    apt_opts=(
        -o "Dir::State=$apt_dir/state"
        -o "Dir::State::status=/var/lib/dpkg/status"
        -o "Dir::Cache=$apt_dir/cache"
        -o "Dir::Etc::SourceList=$apt_dir/etc/sources.list"
        -o "Dir::Etc::SourceParts=$apt_dir/etc/sources.list.d"
        -o "Dir::Etc::Preferences=$apt_dir/etc/preferences"
        -o "Dir::Etc::PreferencesParts=$apt_dir/etc/preferences.d"
        -o "Acquire::Languages=none"
        -o "APT::Get::Only-Source=true"
    )
    [ "$(id -u)" = 0 ] && apt_opts+=(-o "APT::Sandbox::User=root")
    {
        echo "+ apt-get update (private)"
        apt-get "${apt_opts[@]}" update
        echo "+ apt-get source --download-only $src_package (private)"
        (cd "$pkg_dir" && apt-get "${apt_opts[@]}" source --download-only "$src_package")
    } >"$log_dir/fetch.log" 2>&1 || fail "apt-get could not fetch the $src_package source package"
    dsc=$(find_dsc)
    [ -n "$dsc" ] || fail "apt-get source gave no ${src_package}_$ompi.*.dsc (is $suite's $src_package still $ompi?)"
    step_done "downloaded $(basename "$dsc")"
fi
src_version=$(sed -n 's/^Version: //p' "$dsc")
upstream_version=${src_version%-*}
upstream_version=${upstream_version#*:}
tree=$work_dir/openmpi-$upstream_version

# ---------------------------------------------------------------------------
# 2. unpack (once per source package version)

if [ "$clean" = 1 ]; then
    say "--clean: removing $work_dir/openmpi-* and stamps"
    rm -rf "$work_dir"/openmpi-* "$work_dir"/.stamp-*
fi

step "unpack $(basename "$dsc")" "$log_dir/unpack.log"
if [ "$(stamp_get unpack)" = "$(basename "$dsc")" ] && [ -f "$tree/autogen.pl" ]; then
    step_done "reused $tree"
else
    rm -rf "$tree" "$work_dir"/.stamp-*
    (cd "$work_dir" && dpkg-source -x "$dsc" "$(basename "$tree")") \
        >"$log_dir/unpack.log" 2>&1 || fail "dpkg-source -x failed"
    rm -f "$work_dir"/*.orig.tar.* "$work_dir"/*.debian.tar.*   # copies left by dpkg-source
    if [ ! -f "$tree/opal/mca/btl/btl.h" ] || [ ! -f "$tree/autogen.pl" ]; then
        fail "unpacked tree does not look like Open MPI"
    fi
    stamp_set unpack "$(basename "$dsc")"
    step_done "$src_version into $tree"
fi

# ---------------------------------------------------------------------------
# 3. put this component in place of opal/mca/btl/usnic

step "sync component files into opal/mca/btl/usnic"
comp_dir=$tree/opal/mca/btl/usnic
if [ "$(stamp_get replaced)" != yes ]; then
    # First time: drop Open MPI's own usnic component entirely.
    rm -rf "$comp_dir"
    mkdir -p "$comp_dir"
    stamp_set replaced yes
fi
changed=0
shopt -s nullglob
wanted=()
for f in "$src_dir"/configure.m4 "$src_dir"/Makefile.am "$src_dir"/help-mpi-btl-usnic.txt \
         "$src_dir"/btl_usnic*.c "$src_dir"/btl_usnic*.h; do
    b=$(basename "$f")
    wanted+=("$b")
    if ! cmp -s "$f" "$comp_dir/$b"; then
        cp "$f" "$comp_dir/$b"
        changed=$((changed + 1))
    fi
done
# Remove component sources that are gone from the source dir.
for f in "$comp_dir"/btl_usnic*.c "$comp_dir"/btl_usnic*.h; do
    b=$(basename "$f")
    if [[ " ${wanted[*]} " != *" $b "* ]]; then
        rm -f "$f"
        changed=$((changed + 1))
    fi
done
shopt -u nullglob
step_done "${#wanted[@]} files, $changed changed"

# ---------------------------------------------------------------------------
# 4. autogen
#
# --force       the Debian tree is a release tarball; autogen.pl refuses
#               to run there without it.
# --no-ompi --no-orte --no-oshmem
#               generate OPAL only: the usnic BTL lives in OPAL and needs
#               nothing from the MPI, RTE or SHMEM layers.  Cuts autogen
#               and configure to a fraction.
# --exclude=pmix-pmix3x,event-libevent2022,hwloc-hwloc201
#               skip the bundled PMIx, libevent and hwloc (their own
#               autogen and configure runs are the slowest part); the
#               system ones are used instead, as Debian's package does.
# 5.0: --force --no-3rdparty pmix,prrte,hwloc,libevent,romio341,treematch
#               its autogen.pl has no --no-ompi; the bundled packages
#               (PMIx, PRRTE, ...) are left out as above.

# shellcheck disable=SC2054 # --exclude and --no-3rdparty take comma-separated lists
if [ "$ompi" = 4.1 ]; then
    autogen_opts=(--force --no-ompi --no-orte --no-oshmem
                  --exclude=pmix-pmix3x,event-libevent2022,hwloc-hwloc201)
else
    autogen_opts=(--force --no-3rdparty pmix,prrte,hwloc,libevent,romio341,treematch)
fi
autogen_key=$(printf '%s\n' "${autogen_opts[@]}" | sha_of "$comp_dir/configure.m4" "$comp_dir/Makefile.am")

step "autogen.pl ${autogen_opts[*]}" "$log_dir/autogen.log"
if [ "$(stamp_get autogen)" = "$autogen_key" ]; then
    step_done "skipped: configure.m4 and Makefile.am unchanged"
else
    stamp_del autogen
    stamp_del configure
    (cd "$tree" && ./autogen.pl "${autogen_opts[@]}") >"$log_dir/autogen.log" 2>&1 \
        || fail "autogen.pl failed"
    grep -q -- '--- Found opal / btl / usnic component' "$log_dir/autogen.log" \
        || fail "autogen.pl did not find the usnic component"
    if grep -E 'btl/usnic/(configure\.m4|Makefile\.am):[0-9]+:.*(warning|error)' \
            "$log_dir/autogen.log" >/dev/null; then
        say "   autotools diagnostics about the component:"
        grep -E -A3 'btl/usnic/(configure\.m4|Makefile\.am):[0-9]+:.*(warning|error)' \
            "$log_dir/autogen.log" | sed 's/^/    | /'
    fi
    stamp_set autogen "$autogen_key"
    step_done "ran"
fi

# ---------------------------------------------------------------------------
# 5. configure
#
# --with-usnic  the component must build: a missing dependency is an error.
# --with-verbs  libibverbs must be found (clearer error than a silent "no").
# --with-pmix=<Debian's PMIx dir> --with-libevent=external
# --with-hwloc=external
#               the system libraries (Debian's own build uses them too);
#               the bundled copies were left out at autogen time.
# --enable-picky
#               Open MPI's developer warning flags (-Wall -Wundef
#               -Wsign-compare -Wmissing-prototypes -Wstrict-prototypes
#               -pedantic ...), so the component is compiled as strictly
#               as Open MPI's own code is in a developer build.
# dlopen stays enabled (the default): the component is built as a DSO,
# mca_btl_usnic.so, as it would be in a distribution package.

# 5.0 (no --with-verbs: it has no verbs support of its own any more):
# --with-prrte=no  the launcher is not needed to build or load a BTL.
# --with-pmix=external
#               PMIx through pkg-config, as Debian builds it: OPAL includes
#               PMIx's internal headers (src/include/...) too.
# --enable-mca-dso=btl-usnic
#               5.0 builds components into the libraries by default.
# --disable-mpi-fortran --disable-oshmem --disable-io-romio --disable-mpi-java
#               less to configure: only OPAL is built.
if [ "$ompi" = 4.1 ]; then
    configure_opts=(--prefix="$work_dir/install"
                    --with-usnic --with-verbs
                    --with-pmix="$pmix_dir" --with-libevent=external --with-hwloc=external
                    --enable-picky)
else
    configure_opts=(--prefix="$work_dir/install"
                    --with-usnic --with-prrte=no --enable-mca-dso=btl-usnic
                    --with-pmix=external --with-libevent=external --with-hwloc=external
                    --disable-mpi-fortran --disable-oshmem --disable-io-romio --disable-mpi-java
                    --enable-picky)
fi
configure_key=$(printf '%s\n' "$autogen_key" "${configure_opts[@]}" | sha_of)

step "configure ${configure_opts[*]}" "$log_dir/configure.log"
if [ "$(stamp_get configure)" = "$configure_key" ] && [ -f "$tree/config.status" ]; then
    step_done "skipped: nothing changed since the last configure"
else
    stamp_del configure
    (cd "$tree" && ./configure "${configure_opts[@]}") >"$log_dir/configure.log" 2>&1 \
        || fail "configure failed"
    stamp_set configure "$configure_key"
    step_done "ran"
fi
# Show what configure decided about the component (fresh or cached log).
grep -E '^checking (for MCA component btl:usnic|if MCA component btl:usnic|whether the usnic BTL|whether IBV_EVENT_GID_CHANGE|whether ibv_event_type_str|whether libibverbs and libnl-route-3)|usnic BTL will not' \
    "$log_dir/configure.log" | sed 's/^/intree-check:   configure: /' || true
grep -q '^checking if MCA component btl:usnic can compile\.\.\. yes' "$log_dir/configure.log" \
    || fail "configure did not enable the usnic component" "$log_dir/configure.log"
grep -q '^checking for MCA component btl:usnic compile mode\.\.\. dso' "$log_dir/configure.log" \
    || fail "configure does not build the usnic component as a DSO" "$log_dir/configure.log"
say "   configure reports: checking if MCA component btl:usnic can compile... yes"

# ---------------------------------------------------------------------------
# 6. build OPAL, then the component on its own

# The btl DSO directories without usnic, so that the first make leaves
# the component for the second one (whose log then holds all of its
# compiler output, unmixed).
btl_dso_subdirs=$(sed -n 's/^MCA_opal_btl_DSO_SUBDIRS = *//p' "$tree/opal/Makefile")
case " $btl_dso_subdirs " in
    *" mca/btl/usnic "*) ;;
    *) fail "opal/Makefile does not list mca/btl/usnic among the btl DSOs" ;;
esac
read -ra btl_dsos <<< "$btl_dso_subdirs"
# (none on 5.0, which builds only usnic as a DSO)
btl_dso_others=$(printf '%s\n' "${btl_dsos[@]}" | { grep -vx 'mca/btl/usnic' || true; } | paste -sd' ')

step "make -C opal -j$jobs (libopen-pal and OPAL components, usnic aside)" "$log_dir/build-opal.log"
run "$log_dir/build-opal.log" make -C "$tree/opal" -j"$jobs" "MCA_opal_btl_DSO_SUBDIRS=$btl_dso_others"
[ -f "$tree/opal/.libs/libopen-pal.so" ] || fail "libopen-pal.so was not built"
step_done

step "make -C opal/mca/btl/usnic -j$jobs (from clean)" "$log_dir/build-usnic.log"
make -C "$comp_dir" clean >/dev/null 2>&1 || true
run "$log_dir/build-usnic.log" make -C "$comp_dir" -j"$jobs"
so=$comp_dir/.libs/mca_btl_usnic.so
[ -f "$so" ] || fail "mca_btl_usnic.so was not built" "$log_dir/build-usnic.log"
# Put the component's diagnostics on screen.
diag_re='^[^ ]*btl_usnic[^ ]*\.[ch]:[0-9]+(:[0-9]+)?: (warning|error)'
n_warn=$(grep -E -c "$diag_re" "$log_dir/build-usnic.log" || true)
if [ "$n_warn" -gt 0 ]; then
    say "   the component compiled with $n_warn warning(s):"
    grep -v -E '^( +[A-Z]+ +[^ ]+$|make(\[[0-9]+\])?: )' \
        "$log_dir/build-usnic.log" | sed 's/^/    | /'
else
    say "   the component compiled without warnings"
fi
step_done "$n_warn warning(s)"
if [ "$werror" = 1 ] && [ "$n_warn" -gt 0 ]; then
    fail "--werror: the component has $n_warn compiler warning(s)" "$log_dir/build-usnic.log"
fi

# ---------------------------------------------------------------------------
# 7. load the component through OPAL's MCA machinery

step "load check (test/intree/load-check.c)" "$log_dir/load-check.log"
flags_mk=$work_dir/load-check.mk
load_check=$work_dir/load-check
# Built by make from the component dir, with that dir's compiler and flags (its include
# paths are relative to it).
cat >"$flags_mk" <<'EOF'
load-check:
	$(CC) $(DEFAULT_INCLUDES) $(CPPFLAGS) $(CFLAGS) -Wall -o $(LOAD_CHECK) $(LOAD_CHECK_SRC) \
	    -L$(OPAL_LIBS) -lopen-pal -Wl,-rpath,$(OPAL_LIBS)
EOF
make -s --no-print-directory -C "$comp_dir" -f Makefile -f "$flags_mk" load-check \
    LOAD_CHECK="$load_check" LOAD_CHECK_SRC="$repo_root/test/intree/load-check.c" \
    OPAL_LIBS="$tree/opal/.libs" >"$log_dir/load-check-build.log" 2>&1 \
    || fail "could not build load-check" "$log_dir/load-check-build.log"

# Help files (show_help text) of the build tree, where OPAL looks for them.
help_dir=$work_dir/help
rm -rf "$help_dir"
mkdir -p "$help_dir"
find "$tree/opal" -name 'help-*.txt' -exec ln -sf {} "$help_dir/" \;

# Every built OPAL component dir, so that opal_init() finds its shmem,
# reachable, ... components just as an installed Open MPI would.
component_path=$(find "$tree/opal/mca" -path '*/.libs/mca_*.so' -printf '%h\n' | sort -u | paste -sd:)

rc=0
(
    # An earlier-installed Open MPI must not interfere.
    unset OPAL_PREFIX OPAL_LIBDIR
    for v in $(env | sed -n 's/^\(OMPI_MCA_[^=]*\)=.*/\1/p'); do unset "$v"; done
    export OPAL_PKGDATADIR=$help_dir
    export OMPI_MCA_mca_base_component_path=$component_path
    export OMPI_MCA_mca_base_component_show_load_errors=1
    export OMPI_MCA_btl=usnic
    export OMPI_MCA_btl_base_verbose=100
    # OPAL dlopen()s components lazily: make an undefined symbol in the
    # component fail the load itself rather than a later call.
    export LD_BIND_NOW=1
    exec timeout 120 "$load_check"
) >"$log_dir/load-check.log" 2>&1 || rc=$?
sed 's/^/    | /' "$log_dir/load-check.log"
[ "$rc" -eq 0 ] || fail "load-check exited with status $rc (output above, also in $log_dir/load-check.log)" -
for want in "component usnic register function successful" \
            "component usnic open function successful"; do
    grep -q "$want" "$log_dir/load-check.log" \
        || fail "OPAL did not report \"$want\"" "$log_dir/load-check.log"
done
step_done "usnic loaded, registered, opened and closed"

# ---------------------------------------------------------------------------

say "PASS: usnic builds in Open MPI $upstream_version ($src_version) as $so"
say "      and OPAL loads, registers and opens it"
print_timings
