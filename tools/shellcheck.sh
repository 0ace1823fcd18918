#!/bin/bash
# tools/shellcheck.sh: shellcheck (settings in .shellcheckrc) over every shell script of the
# project: the files under .ci/, bench/, test/ and tools/ that end in .sh or start with a bash
# shebang (logs, build outputs and benchmark results aside); then tools/doclinks.sh, which
# checks the relative links of the Markdown files. Prints the findings of both and exits
# non-zero if there are any; test/run-all.sh runs it as its lint step.
# SPDX-License-Identifier: BSD-3-Clause
set -euo pipefail
cd "$(dirname "$0")/.."
command -v shellcheck > /dev/null ||
    { echo "shellcheck: not installed (tools/deps.sh installs it)" >&2; exit 2; }
scripts=()
while IFS= read -r -d '' f; do
    case $f in
        *.sh) scripts+=("$f") ;;
        *) head -n 1 "$f" | grep -q '^#!/bin/bash' && scripts+=("$f") ;;
    esac
done < <(find .ci bench test tools \
             \( -path bench/results -o -path test/vm/logs -o -path test/fuzz/build \
                -o -path test/fuzz/corpus -o -path test/fuzz/corpus.new \) -prune -o -type f -print0)
rc=0
# in batches on every CPU (each batch parses the files it sources again)
if printf '%s\0' "${scripts[@]}" | xargs -0 -n 12 -P "$(nproc)" shellcheck -x; then
    echo "shellcheck: ${#scripts[@]} scripts, no findings"
else
    rc=1
fi
tools/doclinks.sh || rc=1
exit "$rc"
