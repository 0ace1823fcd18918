# Helpers of the data-path tests (t-p2p.sh, t-flood.sh, t-dtypes.sh, t-coll.sh, t-osc.sh),
# sourced after lib.sh. The programs (test/vm/progs/*.c, see progs/common.h) check every byte
# they receive, print "PROG: OK N messages, B bytes verified" or their mismatches, and per host
# "PROG: host NAME min_usnic_dgrams_in N": the fewest datagrams the usnic BTL can have
# delivered on that host for the traffic the program generated between the hosts.
# SPDX-License-Identifier: BSD-3-Clause

DP_FAILED=0

# Facts the tests read (docs/tests.md, "Test contracts"): the "stats final" lines
# ("btl:usnic: stats final HOST DEV: name=value ...", btl_usnic_stats.c) and the connectivity
# map (btl_usnic_connectivity_map, btl_usnic_map.c), not the prose of verbose messages.
# final_stat OUT HOST DEV NAME: counter NAME of the first final report of DEV on HOST in OUT
final_stat() {
    grep -E "btl:usnic: stats final $2 $3: " "$1" | head -n 1 | tr ' ' '\n' | sed -n "s/^$4=//p"
}
# map_file PREFIX HOST: the connectivity map written by the (first) process on HOST, or ""
map_file() {
    local f
    for f in "$1-$2".pid*.job*.mcwrank*.txt; do
        [ -e "$f" ] && echo "$f"
        return 0
    done
}

# dp_fail MSG: a failed check; the test goes on (the next run still gives its evidence) and
# dp_done fails it at the end
dp_fail() { echo "FAIL: $*"; DP_FAILED=1; }

# dp_run N OUT MPIRUN-ARGS... PROGRAM [ARGS...]: mpirun_usnic with N ranks per host (at most
# 2 per host in a world of more than 2 hosts: the 2 CPUs run them all), BTLs
# usnic,self (N = 1) or usnic,self,$SM_BTL (N > 1: vader on 4.1, sm on 5.0), and the usnic statistics of every process
# printed at finalize ("btl:usnic: stats final HOST DEV: ..."; the interval is longer than any
# test, so only the final report appears). All output goes to OUT and to the log. Sets DP_RC
# to mpirun's exit code (124: killed after ${DP_TIMEOUT:-120} s).
dp_run() {
    local n=$1 out=$2 btl=usnic,self t0=$SECONDS
    shift 2
    n=$(dp_per_host "$n")
    [ "$n" -gt 1 ] && btl=usnic,self,$SM_BTL
    echo "== $(($(job_hosts | wc -w) * n)) ranks ($n per host on host(s) $(job_hosts)), btl $btl: $*"
    BTL=$btl mpirun_usnic -n "$n" -t "${DP_TIMEOUT:-120}" --mca btl_usnic_stats 1000000 "$@" \
        > "$out" 2>&1
    DP_RC=$?
    cat "$out"
    echo "== mpirun exit code $DP_RC after $((SECONDS - t0)) s"
}

# dp_per_host N: the ranks per host dp_run starts when asked for N
dp_per_host() { if [ "$NHOSTS" -gt 2 ] && [ "$1" -gt 2 ]; then echo 2; else echo "$1"; fi; }

# dp_check PROG N OUT: the run of PROG with N ranks per host whose output is OUT
#  - found no wrong data and verified everything it received,
#  - on each host, every one of the N processes printed its usnic statistics (one line per
#    device: DP_DEVS devices per host, default 1), and together
#    their num_frag_recvs + num_chunk_recvs reach the program's lower bound for that host
#    (the inter-host traffic went through usnic: the only other BTLs are self and vader),
#  - exited with code 0.
dp_check() {
    local prog=$1 n out=$3 what x min got lines
    n=$(dp_per_host "$2") what="$1 ($2 per host)"
    if grep -Eq "^$prog: (MISMATCH|ERROR|FAILED)" "$out"; then
        grep -E "^$prog: (MISMATCH|ERROR|FAILED)" "$out" | head -n 20
        dp_fail "$what: the program found wrong data"
    elif grep -Eq "^$prog: OK [0-9]+ messages, [0-9]+ bytes verified" "$out"; then
        pass "$what: $(sed -nE "s/^$prog: OK //p" "$out")"
    else
        dp_fail "$what: the program did not finish its checks"
    fi
    for x in $(job_hosts); do
        min=$(sed -nE "s/^$prog: host host$x min_usnic_dgrams_in ([0-9]+)$/\1/p" "$out")
        # (no process substitution: the guest has no /dev/fd)
        read -r got lines <<< "$(grep -E "btl:usnic: stats final host$x $(dev_of "$x")[0-9]*: " "$out" | awk '
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
                 END { printf "fast_sends=%d frag_sends=%d chunk_sends=%d puts=%d gets=%d " \
                       "zcopy_chunks=%d resends=%d timeout_retrans=%d dup_recvs=%d oow_recvs=%d " \
                       "badfrag_recvs=%d bad_recvs=%d",
                       t["num_fast_sends"], t["num_frag_sends"], t["num_chunk_sends"],
                       t["num_puts"], t["num_gets"], t["num_zcopy_chunks"], t["num_resends"],
                       t["num_timeout_retrans"],
                       t["num_dup_recvs"], t["num_oow_low_recvs"] + t["num_oow_high_recvs"],
                       t["num_badfrag_recvs"], t["num_bad_recvs"] }')"
    done
    if [ "$DP_RC" = 0 ]; then
        pass "$what: exit code 0"
    else
        dp_fail "$what: mpirun exit code $DP_RC$([ "$DP_RC" = 124 ] && echo " (timed out)")"
    fi
}

# dp_counter OUT HOST NAME: the sum of usnic's final statistics counter NAME over HOST's
# processes and devices in OUT
dp_counter() {
    grep -E "btl:usnic: stats final host$2 " "$1" |
        awk -v k="$3" '{ for (i = 1; i <= NF; i++) { split($i, kv, "="); if (kv[1] == k) s += kv[2] } }
                       END { print s + 0 }'
}

# dp_done: the test's verdict
dp_done() {
    [ "$DP_FAILED" = 0 ] || fail "see the FAIL lines above"
    pass "all checks passed"
}

# ---- helpers of the dead-peer tests (t-deadpeer.sh, t-busypeer.sh) ----

# wait_ranks PROG [N]: until N (default 2) PROG processes run on the world's hosts (at most
# 30 s)
wait_ranks() {
    local x
    for _ in $(seq 60); do
        [ "$(for x in "${HOSTS[@]}"; do ip netns pids "ns$x"; done |
             while read -r p; do cat "/proc/$p/comm" 2>/dev/null; echo; done |
             grep -cx "$1")" -ge "${2:-2}" ] && return 0
        sleep 0.5
    done
    dp_fail "$1 did not start within 30 s"
    return 1
}

# wait_line OUT ERE: until a line of OUT matches ERE (at most 30 s); pingloop's first line
# ("pingloop: N ranks on ...") says that its ranks are past MPI_Init and the first contact
wait_line() {
    for _ in $(seq 300); do
        grep -Eq "$2" "$1" 2>/dev/null && return 0
        sleep 0.1
    done
    dp_fail "no line matching '$2' in $1 within 30 s"
    return 1
}

# elapsed T0: seconds since $EPOCHREALTIME was T0, one decimal
elapsed() { awk -v a="$1" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }'; }
# lt X Y: X < Y (decimals)
lt() { awk -v x="$1" -v y="$2" 'BEGIN { exit !(x < y) }'; }

# watch_job OUT T0 PID: until the job PID (mpirun) ends, the times at which usnic's
# peer-unreachable message (MSG_T) and the connectivity checker's "no answer at all" message
# (CHK_T) first appear in OUT, in seconds since $EPOCHREALTIME was T0 (empty: never); then the
# job's exit code (JOB_RC) and its end (END_T). A message only found at the end counts as
# printed at the end.
watch_job() {
    local unreach="^The usnic BTL has been retransmitting to a peer that has not"
    local noanswer="connectivity checker got no answer at all from a peer"
    MSG_T='' CHK_T=''
    while kill -0 "$3" 2>/dev/null; do
        [ -z "$MSG_T" ] && grep -q "$unreach" "$1" && MSG_T=$(elapsed "$2")
        [ -z "$CHK_T" ] && grep -q "$noanswer" "$1" && CHK_T=$(elapsed "$2")
        sleep 0.1
    done
    wait "$3"
    # shellcheck disable=SC2034 # read by the tests that source this file
    JOB_RC=$? END_T=$(elapsed "$2")
    [ -z "$MSG_T" ] && grep -q "$unreach" "$1" && MSG_T=$END_T
    [ -z "$CHK_T" ] && grep -q "$noanswer" "$1" && CHK_T=$END_T
    return 0
}

# within LABEL WHAT T LO HI: WHAT came T s after its cause (empty: never), at least LO and at
# most HI s after it
within() {
    if [ -z "$3" ]; then dp_fail "$1: $2: never"
    elif lt "$3" "$4"; then dp_fail "$1: $2 ${3}s after its cause: sooner than ${4}s"
    elif lt "$5" "$3"; then dp_fail "$1: $2 ${3}s after its cause: later than ${5}s"
    else pass "$1: $2 ${3}s after its cause (${4}s to ${5}s)"; fi
}

# no_message OUT LABEL: neither the checker nor the peer timeout reported anything
no_message() {
    if grep -q "connectivity checker" "$1"; then
        dp_fail "$2: the connectivity checker reported a failure"
    else
        pass "$2: no connectivity checker message"
    fi
    if grep -q "retransmitting to a peer that has not" "$1"; then
        dp_fail "$2: usnic declared a peer dead within its budget"
    else
        pass "$2: no peer-unreachable message"
    fi
}

# check_reports OUT LABEL: every "Local host / Local device / Peer host / Peer address" block
# (the checker's and the peer-unreachable messages have one) names its own host and device
# (and its netdev) and ANOTHER host with its address
check_reports() {
    local reports lh ld1 ld2 ph pa l p ip
    reports=$(awk '
        /^ *Local host:/ { lh = $3 }
        /^ *Local device:/ { ld = $3 " " $4 }
        /^ *Peer host:/ { ph = $3 }
        /^ *Peer address:/ { pa = $3; sub(",$", "", pa); print lh, ld, ph, pa }' "$1")
    echo "reports (local host, device, peer host, peer address):"
    echo "${reports:-  (none)}"
    [ -n "$reports" ] || dp_fail "$2: no message names the local host, device and the peer"
    while read -r lh ld1 ld2 ph pa; do
        [ -n "$lh" ] || continue
        l=${lh#host} p=${ph#host} ip=RXEVM_IP_${ph#host}
        if [[ $lh =~ ^host[A-H]$ ]] && [[ $ph =~ ^host[A-H]$ ]] && [ "$l" != "$p" ] &&
           [ "$ld1 $ld2" = "$(dev_of "$l") (veth$l)" ] && [ "$pa" = "${!ip}/24" ]
        then
            pass "$2: $lh reports its device $ld1 $ld2 and the peer $ph at $pa"
        else
            dp_fail "$2: wrong report: local $lh device $ld1 $ld2, peer $ph at $pa"
        fi
    done <<< "$reports"
}

# aborted RC LABEL: the job aborted (not success, not a hang killed by mpirun_usnic -t)
aborted() {
    if [ "$1" = 0 ]; then
        dp_fail "$2: the job succeeded although it had to abort"
    elif [ "$1" = 124 ]; then
        dp_fail "$2: the job hung: killed at its time limit"
    else
        pass "$2: the job aborted (exit code $1)"
    fi
}
