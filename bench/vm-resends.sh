#!/bin/bash
# Resends per VM test, from the logs of test/vm/run.sh (usnic's "stats final" line of every rank,
# summed per test log): usage: bench/vm-resends.sh LABEL=LOGDIR [LABEL=LOGDIR...]
#   e.g. bench/vm-resends.sh 4.1=test/vm/logs 5.0=test/vm/logs/ompi5
# Prints a markdown table: data datagrams sent (frags and chunks), resends, by the timer and at
# once (num_fast_retrans), timer resends proven spurious, timer probes, those the peer's answer
# showed needless and those it answered as missing (num_probe_missing), resends per 10^4 data
# datagrams. Logs without statistics are skipped.
# SPDX-License-Identifier: BSD-3-Clause
set -euo pipefail
[ $# -ge 1 ] || { sed -n '2,3s/^# //p' "$0" >&2; exit 2; }
echo "| world | test | data | resends | timer | at once | spurious | probes | probes needless | probes missing | per 10^4 |"
echo "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
for arg; do
    label=${arg%%=*} dir=${arg#*=}
    [ -d "$dir" ] || { echo "vm-resends.sh: no directory $dir" >&2; exit 2; }
    for log in "$dir"/t-*.log; do
        [ -f "$log" ] || continue
        name=${log##*/}; name=${name%.log}
        { grep -ah "btl:usnic: stats final " "$log" || true; } | awk -v w="$label" -v t="$name" '
            { for (i = 1; i <= NF; i++)
                  if (split($i, kv, "=") == 2 && kv[2] ~ /^[0-9]+$/) v[kv[1]] += kv[2]
              n++ }
            END { if (n == 0) exit 0
                  data = v["num_frag_sends"] + v["num_chunk_sends"]
                  printf "| %s | %s | %d | %d | %d | %d | %d | %d | %d | %d | %.2f |\n", w, t,
                      data, v["num_resends"], v["num_timeout_retrans"], v["num_fast_retrans"],
                      v["num_spurious_timeouts"], v["num_timer_probes"], v["num_probe_spurious"],
                      v["num_probe_missing"], (data > 0 ? 1e4 * v["num_resends"] / data : 0) }'
    done
done
