# Helpers shared by bench/report.sh and bench/native-report.sh (sourced; both set $out).
# medians PRECISION: $out/all.tsv (TRANSPORT RUN KEY SIZE n-iters win-or-x mean median min MB/s
# msg/s) -> $out/medians.tsv, one line per transport, key and size with the medians over the
# runs (mean, median and min with PRECISION decimals); get TRANSPORT KEY SIZE
# COLUMN(n|mean|median|min|mbs|rate|win): one of those medians, empty if missing.
# SPDX-License-Identifier: BSD-3-Clause
# shellcheck disable=SC2154 # out: set by the script that sources this file

medians() {
    awk -v prec="$1" '
    function median(k, c,    n, i, j, v, a) {
        n = cnt[k]
        for (i = 1; i <= n; i++) a[i] = val[k, c, i] + 0
        for (i = 2; i <= n; i++) {            # insertion sort: a handful of runs
            v = a[i]
            for (j = i - 1; j >= 1 && a[j] > v; j--) a[j + 1] = a[j]
            a[j + 1] = v
        }
        return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
    }
    {
        k = $1 SUBSEP $3 SUBSEP $4
        if (!(k in cnt)) order[++nk] = k
        n = ++cnt[k]
        for (c = 7; c <= 11; c++) val[k, c, n] = $c
        win[k] = $6
    }
    END {
        for (i = 1; i <= nk; i++) {
            k = order[i]; split(k, p, SUBSEP)
            fmt = "%s %s %s %d %." prec "f %." prec "f %." prec "f %.3f %.1f %s\n"
            printf fmt, p[1], p[2], p[3], cnt[k],
                median(k, 7), median(k, 8), median(k, 9), median(k, 10), median(k, 11), win[k]
        }
    }' "$out/all.tsv" > "$out/medians.tsv"
}

get() {
    local col
    case $4 in
        n) col=4 ;; mean) col=5 ;; median) col=6 ;; min) col=7 ;; mbs) col=8 ;; rate) col=9 ;;
        *) col=10 ;;
    esac
    awk -v t="$1" -v x="$2" -v s="$3" -v c="$col" '
        $1 == t && $2 == x && $3 == s { print $c; exit }' "$out/medians.tsv"
}
