#!/bin/bash
# tools/doclinks.sh: check that every relative link in the project's Markdown files (those git
# tracks) resolves: the file or directory exists, and a #fragment names a heading of the
# target page (GitHub's anchors: lower case, punctuation dropped, spaces as dashes). Links
# to http(s) and mailto are not followed. Fenced code blocks are skipped. Prints each broken
# link as FILE: TARGET (why) and exits 1 if there is one. test/run-all.sh's lint step runs it.
# SPDX-License-Identifier: BSD-3-Clause
set -euo pipefail
cd "$(dirname "$0")/.."

# anchors of a Markdown file, one per line
anchors() {
    awk '/^```/ { code = !code; next }
         !code && /^#+ / {
             h = $0; sub(/^#+ +/, "", h); h = tolower(h)
             gsub(/[^a-z0-9 _-]/, "", h); gsub(/ /, "-", h)
             n[h]++; print (n[h] > 1 ? h "-" (n[h] - 1) : h) }' "$1"
}

# links of a Markdown file, one target per line
links() {
    awk '/^```/ { code = !code; next }
         !code { l = $0
             while (match(l, /\]\([^)]+\)/)) {
                 print substr(l, RSTART + 2, RLENGTH - 3); l = substr(l, RSTART + RLENGTH) } }' "$1"
}

bad=0 n=0
while IFS= read -r -d '' md; do
    dir=$(dirname "$md")
    while IFS= read -r target; do
        case $target in http://*|https://*|mailto:*) continue ;; esac
        n=$((n + 1))
        path=${target%%#*} frag=
        [ "$path" = "$target" ] || frag=${target#*#}
        if [ -z "$path" ]; then file=$md; else file=$dir/$path; fi
        if [ ! -e "$file" ]; then
            echo "$md: $target (no such file)"; bad=1; continue
        fi
        if [ -n "$frag" ] && [ -f "$file" ] && ! anchors "$file" | grep -qxF -- "$frag"; then
            echo "$md: $target (no heading for #$frag in $file)"; bad=1
        fi
    done < <(links "$md")
done < <(git ls-files -z -- '*.md')
[ "$bad" = 0 ] || { echo "doclinks: broken links above" >&2; exit 1; }
echo "doclinks: $n relative links resolve"
