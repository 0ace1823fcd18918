# The instruction-count gate shared by bench/engine.sh and bench/btl-count.sh (sourced).
# baseline_check SCRIPT BASELINE LABEL NAME=NOW...: each figure NOW against NAME's value in
# BASELINE: FAIL if missing or more than 5% above it, else PASS (with a hint to refresh the
# baseline with SCRIPT --update-baseline when more than 5% below); prints
# "LABEL: N passed, N failed" and returns non-zero if any failed.
# SPDX-License-Identifier: BSD-3-Clause

baseline_check() {
    local script=$1 baseline=$2 label=$3 pair name now was np=0 nf=0
    shift 3
    for pair; do
        name=${pair%%=*} now=${pair#*=}
        was=$(awk -v k="$name" '$1 == k { print $2 }' "$baseline")
        if [ -z "$was" ]; then
            echo "FAIL $name: not in $baseline"
            nf=$((nf + 1))
        elif awk -v a="$now" -v b="$was" 'BEGIN { exit !(a > 1.05 * b) }'; then
            echo "FAIL $name: $now instructions, baseline $was (+$(awk -v a="$now" -v b="$was" \
                'BEGIN { printf "%.1f", 100 * (a / b - 1) }')%, more than 5%)"
            nf=$((nf + 1))
        else
            echo "PASS $name: $now instructions, baseline $was"
            if awk -v a="$now" -v b="$was" 'BEGIN { exit !(a < 0.95 * b) }'; then
                echo "     (more than 5% below the baseline: $script --update-baseline)"
            fi
            np=$((np + 1))
        fi
    done
    echo "$label: $np passed, $nf failed"
    [ "$nf" = 0 ]
}
