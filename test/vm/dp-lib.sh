# Helpers of the data-path tests (t-p2p.sh, t-flood.sh, t-dtypes.sh, t-coll.sh, t-osc.sh),
# sourced after lib.sh. The programs (test/vm/progs/*.c, see progs/common.h) check every byte
# they receive, print "PROG: OK N messages, B bytes verified" or their mismatches, and per host
# "PROG: host NAME min_usnic_dgrams_in N": the fewest datagrams the usnic BTL can have
# delivered on that host for the traffic the program generated between the hosts.

DP_FAILED=0

# dp_fail MSG: a failed check; the test goes on (the next run still gives its evidence) and
# dp_done fails it at the end
dp_fail() { echo "FAIL: $*"; DP_FAILED=1; }

# dp_run N OUT MPIRUN-ARGS... PROGRAM [ARGS...]: mpirun_usnic with N ranks per host, BTLs
# usnic,self (N = 1) or usnic,self,vader (N > 1), and the usnic statistics of every process
# printed at finalize ("btl:usnic: stats final HOST DEV: ..."; the interval is longer than any
# test, so only the final report appears). All output goes to OUT and to the log. Sets DP_RC
# to mpirun's exit code (124: killed after ${DP_TIMEOUT:-120} s).
dp_run() {
    local n=$1 out=$2 btl=usnic,self t0=$SECONDS
    shift 2
    [ "$n" -gt 1 ] && btl=usnic,self,vader
    echo "== $((2 * n)) ranks ($n per host), btl $btl: $*"
    BTL=$btl mpirun_usnic -n "$n" -t "${DP_TIMEOUT:-120}" --mca btl_usnic_stats 1000000 "$@" \
        > "$out" 2>&1
    DP_RC=$?
    cat "$out"
    echo "== mpirun exit code $DP_RC after $((SECONDS - t0)) s"
}

# dp_check PROG N OUT: the run of PROG with N ranks per host whose output is OUT
#  - found no wrong data and verified everything it received,
#  - on each host, every one of the N processes printed its usnic statistics (one line per
#    device: DP_DEVS devices per host, default 1), and together
#    their num_frag_recvs + num_chunk_recvs reach the program's lower bound for that host
#    (the inter-host traffic went through usnic: the only other BTLs are self and vader),
#  - exited with code 0.
dp_check() {
    local prog=$1 n=$2 out=$3 what="$1 ($2 per host)" x min got lines
    if grep -Eq "^$prog: (MISMATCH|ERROR|FAILED)" "$out"; then
        grep -E "^$prog: (MISMATCH|ERROR|FAILED)" "$out" | head -n 20
        dp_fail "$what: the program found wrong data"
    elif grep -Eq "^$prog: OK [0-9]+ messages, [0-9]+ bytes verified" "$out"; then
        pass "$what: $(sed -nE "s/^$prog: OK //p" "$out")"
    else
        dp_fail "$what: the program did not finish its checks"
    fi
    for x in A B; do
        min=$(sed -nE "s/^$prog: host host$x min_usnic_dgrams_in ([0-9]+)$/\1/p" "$out")
        # (no process substitution: the guest has no /dev/fd)
        read -r got lines <<< "$(grep -E "btl:usnic: stats final host$x rxe$x[0-9]*: " "$out" | awk '
            { for (i = 1; i <= NF; i++) {
                  split($i, kv, "=")
                  if (kv[1] == "num_frag_recvs" || kv[1] == "num_chunk_recvs") s += kv[2]
              }
              n++ }
            END { print s + 0, n + 0 }')"
        if [ "$lines" != "$((n * ${DP_DEVS:-1}))" ]; then
            dp_fail "$what: host$x: $lines usnic 'stats final' lines, expected" \
                "$((n * ${DP_DEVS:-1})) (one per process and device)"
        elif [ -z "$min" ] || [ "$min" -le 0 ]; then
            dp_fail "$what: the program printed no datagram bound for host$x"
        elif [ "$got" -lt "$min" ]; then
            dp_fail "$what: host$x: usnic delivered $got data datagrams (num_frag_recvs +" \
                "num_chunk_recvs), the inter-host traffic needs at least $min"
        else
            pass "$what: host$x: usnic delivered $got data datagrams, at least $min needed"
        fi
        # for the log only: which usnic paths the traffic took, and the retransmissions
        echo "info: $what: host$x usnic totals: $(grep -E "btl:usnic: stats final host$x " "$out" |
            awk '{ for (i = 1; i <= NF; i++) { split($i, kv, "="); if (kv[2] != "") t[kv[1]] += kv[2] } }
                 END { printf "fast_sends=%d frag_sends=%d chunk_sends=%d puts=%d resends=%d " \
                       "timeout_retrans=%d dup_recvs=%d oow_recvs=%d badfrag_recvs=%d bad_recvs=%d",
                       t["num_fast_sends"], t["num_frag_sends"], t["num_chunk_sends"],
                       t["num_puts"], t["num_resends"], t["num_timeout_retrans"],
                       t["num_dup_recvs"], t["num_oow_low_recvs"] + t["num_oow_high_recvs"],
                       t["num_badfrag_recvs"], t["num_bad_recvs"] }')"
    done
    if [ "$DP_RC" = 0 ]; then
        pass "$what: exit code 0"
    else
        dp_fail "$what: mpirun exit code $DP_RC$([ "$DP_RC" = 124 ] && echo " (timed out)")"
    fi
}

# dp_done: the test's verdict
dp_done() {
    [ "$DP_FAILED" = 0 ] || fail "see the FAIL lines above"
    pass "all checks passed"
}
