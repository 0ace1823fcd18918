#!/bin/bash
# tools/apt-mirror.sh [SUITE]: print "URI KEYRING" of the Debian archive this machine's apt
# sources use, for the scripts that need a private apt setup or a debootstrap (the tree names
# no mirror of its own). Read, never written: /etc/apt/sources.list.d/*.sources (deb822),
# /etc/apt/sources.list and /etc/apt/sources.list.d/*.list. Security archives are skipped;
# with SUITE, an entry that lists SUITE wins over the first other Debian entry. An archive
# counts as Debian's if it is in debian.sources or sources.list, or its URI ends in /debian. KEYRING is the
# entry's Signed-By file, or "-" when it names none (or embeds the key).
# Exits 1, printing nothing, if no entry qualifies. USNIC_APT_ETC replaces /etc/apt (tests).
# SPDX-License-Identifier: BSD-3-Clause
set -euo pipefail
suite=${1:-}
etc=${USNIC_APT_ETC:-/etc/apt}

# One line per usable entry: "URI KEYRING SUITE...", in the order apt reads the files.
entries() {
    local f strict
    for f in "$etc"/sources.list.d/*.sources; do
        [ -f "$f" ] || continue
        strict=1
        [ "${f##*/}" = debian.sources ] && strict=0
        # shellcheck disable=SC2016 # an awk program
        awk -v strict="$strict" 'BEGIN { RS = ""; FS = "\n" }
            { t = u = s = k = e = ""
              for (i = 1; i <= NF; i++) {
                  l = $i
                  if (l ~ /^[ \t]*#/ || l ~ /^[ \t]/ || l !~ /:/) continue
                  key = tolower(l); sub(/[ \t]*:.*/, "", key)
                  v = l; sub(/^[^:]*:[ \t]*/, "", v)
                  if (key == "types") t = v; else if (key == "uris") u = v
                  else if (key == "suites") s = v; else if (key == "signed-by") k = v
                  else if (key == "enabled") e = tolower(v) }
              if (e == "no" || (" " t " ") !~ /[ \t]deb[ \t]/ || u == "") next
              split(u, uu, /[ \t]+/)
              if (uu[1] ~ /security/ || (strict && uu[1] !~ /\/debian\/?$/)) next
              if (k !~ /^\//) k = "-"
              print uu[1], k, s }' "$f"
    done
    for f in "$etc"/sources.list "$etc"/sources.list.d/*.list; do
        [ -f "$f" ] || continue
        strict=1
        [ "$f" = "$etc/sources.list" ] && strict=0
        # shellcheck disable=SC2016 # an awk program
        awk -v strict="$strict" '/^[ \t]*deb[ \t]/ {
                l = $0; sub(/^[ \t]*deb[ \t]+/, "", l); o = ""
                if (substr(l, 1, 1) == "[") {
                    p = index(l, "]"); o = substr(l, 2, p - 2); l = substr(l, p + 1)
                    sub(/^[ \t]+/, "", l) }
                split(l, w, /[ \t]+/)
                if (w[1] ~ /security/ || (strict && w[1] !~ /\/debian\/?$/)) next
                k = "-"
                if (match(o, /signed-by=[^ \t]+/)) k = substr(o, RSTART + 10, RLENGTH - 10)
                print w[1], k, w[2] }' "$f"
    done
}

list=$(entries)
[ -n "$list" ] || exit 1
if [ -n "$suite" ]; then
    hit=$(awk -v s="$suite" '{ for (i = 3; i <= NF; i++) if ($i == s) { print $1, $2; exit } }' <<< "$list")
    [ -n "$hit" ] && { echo "$hit"; exit 0; }
fi
awk 'NR == 1 { print $1, $2 }' <<< "$list"
