# Helpers of the fault-injection tests (t-faults*.sh, t-deadpeer.sh), sourced after lib.sh and
# dp-lib.sh.
#
# netem_roce puts the netem impairment on RoCE v2 only (UDP destination port 4791) of what a
# host sends; everything else on the veth pair (the launcher's TCP, the usnic connectivity
# checker's UDP pings, ARP) passes untouched, so a lossy data path cannot stall the launch:
#
#   vethX root: prio qdisc 1:, every priority mapped to band 1:2 (a plain FIFO)
#               u32 filter: IPv4, protocol 17 (UDP), destination port 4791  ->  band 1:3
#   band 1:3:   netem NETEM-ARGS (handle 30:)
#
# (netem_udp is the same for every UDP datagram: RoCE and the connectivity checker's pings.)
#
# fault_run runs a data-path program (test/vm/progs) under the current fault, checks it
# (dp_check: every byte right, exit 0, usnic carried the traffic) and then checks the usnic
# counters of the "stats final" lines:
#   - exactly once: per direction, the data datagrams the sending host's processes sent for
#     the first time (num_frag_sends + num_chunk_sends) equal the ones the receiving host's
#     processes accepted (num_frag_recvs + num_chunk_recvs); every retransmission and
#     duplicate must have been dropped as such, and nothing may be missing;
#   - the run ended within its bound (a hang is killed at the bound: exit code 124);
#   - the fault did something (see fault_run's KIND);
# and prints one summary line per run, "faults: LABEL PROG: ..." (fault_summary: all of them).
# SPDX-License-Identifier: BSD-3-Clause

# netem_roce HOST NETEM-ARGS...: netem on the RoCE v2 datagrams host A or B sends
netem_roce() { local x=$1; shift; netem_class "$x" "match ip dport 4791 0xffff" "$@"; }
# netem_udp HOST NETEM-ARGS...: netem on every UDP datagram host A or B sends (RoCE v2 and the
# connectivity checker's pings; TCP passes)
netem_udp() { local x=$1; shift; netem_class "$x" "" "$@"; }
# netem_class HOST "MORE-U32-MATCHES" NETEM-ARGS...: netem on what host sends of UDP that
# also matches the given u32 matches
netem_class() {
    local x=$1 ns=ns$1 dev=veth$1 more=$2
    shift 2
    ip netns exec "$ns" tc qdisc del dev "$dev" root 2>/dev/null
    ip netns exec "$ns" tc qdisc add dev "$dev" root handle 1: prio bands 3 \
        priomap 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 || fail "netem $x: prio qdisc"
    ip netns exec "$ns" tc qdisc add dev "$dev" parent 1:3 handle 30: netem "$@" ||
        fail "netem $x: netem $*"
    # shellcheck disable=SC2086 # $more is a list of words
    ip netns exec "$ns" tc filter add dev "$dev" parent 1: protocol ip prio 1 u32 \
        match ip protocol 17 0xff $more flowid 1:3 || fail "netem $x: u32 filter"
}
# netem_change HOST NETEM-ARGS...: new impairment (all of it: what is not given is off) for
# the netem of netem_roce / netem_udp on HOST. Use this, not netem_roce / netem_udp / netem_clear,
# while usnic traffic flows: grafting or deleting a root qdisc under traffic makes rxe fail a
# send and put the sending UD queue pair into the error state (send_err counts it), and usnic
# then aborts the job ("A queue pair of the usnic BTL stopped working")
netem_change() {
    local x=$1
    shift
    ip netns exec "ns$x" tc qdisc change dev "veth$x" parent 1:3 handle 30: netem "$@" ||
        fail "netem_change $x $*"
}
# netem_roce_both NETEM-ARGS...: the same impairment in both directions
netem_roce_both() { netem_roce A "$@"; netem_roce B "$@"; }
# netem_stats HOST: "PACKETS DROPPED": what the netem of netem_roce / netem_udp on HOST has
# let through and dropped so far ("0 0" if there is none)
netem_stats() {
    ip netns exec "ns$1" tc -s qdisc show dev "veth$1" 2>/dev/null | awk '
        /^qdisc netem 30:/ { on = 1; next }
        /^qdisc / { on = 0 }
        on && /Sent/ { for (i = 1; i <= NF; i++) { if ($i == "pkt") p = $(i - 1)
                                                   if ($i == "(dropped") d = $(i + 1) } }
        END { sub(",", "", d); print p + 0, d + 0 }'
}

# fault_sums OUT: shell assignments A_<counter>=SUM and B_<counter>=SUM of every counter of the
# "stats final" lines in OUT, summed over the processes of hostA and hostB (max_* fields: the
# largest), and A_procs / B_procs (number of lines)
fault_sums() {
    grep -E "btl:usnic: stats final host[AB] " "$1" | awk '
        { for (i = 1; i <= NF; i++) if ($i == "final") h = substr($(i + 1), 5, 1)
          procs[h]++
          for (i = 1; i <= NF; i++) {
              if (split($i, kv, "=") != 2 || kv[2] !~ /^[0-9]+$/) continue
              k = h "_" kv[1]; keys[k] = 1
              if (kv[1] ~ /^max_/) { if (kv[2] + 0 > v[k]) v[k] = kv[2] + 0 }
              else v[k] += kv[2]
          } }
        END { for (k in keys) printf "%s=%d\n", k, v[k]
              printf "A_procs=%d\nB_procs=%d\n", procs["A"], procs["B"] }'
}

# pct N D: 100 * N / D with one decimal (D > 0), e.g. "9.8"
pct() { awk -v n="$1" -v d="$2" 'BEGIN { printf "%.1f", (d > 0 ? 100 * n / d : 0) }'; }

# fault_run LABEL KIND BOUND N OUT PROG [ARGS...]: run $WORK/PROG with N ranks per host under
# the fault now in place (LABEL names it in the summary), killed after BOUND seconds, checked
# with dp_check and the counter checks above. KIND says what the fault must have done:
#   none     nothing (baseline)
#   loss     the RoCE netem dropped datagrams on both hosts, and usnic retransmitted
#   corrupt  datagrams were lost in both directions (rxe drops a corrupted datagram: its ICRC
#            is wrong), and usnic retransmitted
#   reorder  every datagram usnic sent (num_total_sends) went through the delaying netem on
#            both hosts, which dropped nothing
#   dup      both hosts received duplicates (num_dup_recvs + num_oow_low_recvs: a duplicate of
#            a datagram that was already in order lies below the window), and in at least one
#            direction more datagrams arrived than were sent
#   mix      netem dropped datagrams on both hosts, usnic retransmitted, and duplicates arrived
# Failures are dp_fail (the test goes on; dp_done gives the verdict).
# shellcheck disable=SC2034 # counters read indirectly, as ${s}_num_frag_sends etc.
fault_run() {
    local label=$1 kind=$2 bound=$3 n=$4 out=$5 prog=$6 t0 t x y na0 nb0 na1 nb1
    local pa da pb db sa rb sb ra lab lba k v what="$label: $prog ($n per host)"
    shift 6
    read -r na0 x <<< "$(netem_stats A)"
    read -r nb0 y <<< "$(netem_stats B)"
    local da0=$x db0=$y
    t0=$SECONDS
    DP_TIMEOUT=$bound dp_run "$n" "$out" "$WORK/$prog" "$@"
    t=$((SECONDS - t0))
    read -r na1 x <<< "$(netem_stats A)"
    read -r nb1 y <<< "$(netem_stats B)"
    pa=$((na1 - na0)) da=$((x - da0)) pb=$((nb1 - nb0)) db=$((y - db0))
    dp_check "$prog" "$n" "$out"
    if [ "$DP_RC" = 124 ]; then
        dp_fail "$what: not finished within its bound of ${bound}s (killed: hang?)"
    else
        pass "$what: finished in ${t}s (bound ${bound}s)"
    fi

    # counters (unset ones count as 0; some are only read as ${s}_num_...)
    local A_num_total_sends=0 A_num_frag_sends=0 A_num_chunk_sends=0 A_num_resends=0
    local A_num_timeout_retrans=0 A_num_fast_retrans=0 A_num_total_recvs=0 A_num_frag_recvs=0
    local A_num_chunk_recvs=0 A_num_dup_recvs=0 A_num_oow_low_recvs=0 A_num_oow_high_recvs=0
    local A_num_badfrag_recvs=0 A_num_bad_recvs=0 A_num_recv_errors=0 A_num_unk_recvs=0
    local A_max_rcvd_window_size=0 A_max_rto_us=0 A_procs=0
    local B_num_total_sends=0 B_num_frag_sends=0 B_num_chunk_sends=0 B_num_resends=0
    local B_num_timeout_retrans=0 B_num_fast_retrans=0 B_num_total_recvs=0 B_num_frag_recvs=0
    local B_num_chunk_recvs=0 B_num_dup_recvs=0 B_num_oow_low_recvs=0 B_num_oow_high_recvs=0
    local B_num_badfrag_recvs=0 B_num_bad_recvs=0 B_num_recv_errors=0 B_num_unk_recvs=0
    local B_max_rcvd_window_size=0 B_max_rto_us=0 B_procs=0
    while IFS='=' read -r k v; do
        [[ $k =~ ^[AB]_[a-z_]+$ && $v =~ ^[0-9]+$ ]] && printf -v "$k" '%s' "$v"
    done <<< "$(fault_sums "$out")"

    # all datagrams (data, ACKs, resends) sent by one host and received by the other
    sa=$A_num_total_sends rb=$B_num_total_recvs sb=$B_num_total_sends ra=$A_num_total_recvs
    echo "faults: $label $prog: ${t}s" \
        "A->B sent=$sa arrived=$rb (lost $(pct $((sa - rb)) "$sa")%)" \
        "B->A sent=$sb arrived=$ra (lost $(pct $((sb - ra)) "$sb")%)" \
        "resends=$A_num_resends/$B_num_resends" \
        "timeouts=$A_num_timeout_retrans/$B_num_timeout_retrans" \
        "fast_retrans=$A_num_fast_retrans/$B_num_fast_retrans" \
        "dups=$A_num_dup_recvs/$B_num_dup_recvs" \
        "oow_low=$A_num_oow_low_recvs/$B_num_oow_low_recvs" \
        "oow_high=$A_num_oow_high_recvs/$B_num_oow_high_recvs" \
        "badfrag=$A_num_badfrag_recvs/$B_num_badfrag_recvs" \
        "bad=$A_num_bad_recvs/$B_num_bad_recvs recv_err=$A_num_recv_errors/$B_num_recv_errors" \
        "unk=$A_num_unk_recvs/$B_num_unk_recvs" \
        "max_rcvd_window=$A_max_rcvd_window_size/$B_max_rcvd_window_size" \
        "max_rto_us=$A_max_rto_us/$B_max_rto_us" \
        "netem A: pkts=$pa dropped=$da B: pkts=$pb dropped=$db" |
        tee -a "$WORK/faults-summary"

    [ "$A_procs" = "$n" ] && [ "$B_procs" = "$n" ] || return 0   # dp_check said why
    for x in AB BA; do
        local s=${x:0:1} r=${x:1:1} first got
        first=$(( ${s}_num_frag_sends + ${s}_num_chunk_sends ))
        got=$(( ${r}_num_frag_recvs + ${r}_num_chunk_recvs ))
        if [ "$first" = "$got" ]; then
            pass "$what: host$s->host$r: $first data datagrams sent, each accepted exactly once"
        else
            dp_fail "$what: host$s->host$r: $first data datagrams sent (num_frag_sends +" \
                "num_chunk_sends), but host$r accepted $got (num_frag_recvs + num_chunk_recvs)"
        fi
    done

    lab=$((A_num_dup_recvs + A_num_oow_low_recvs)) lba=$((B_num_dup_recvs + B_num_oow_low_recvs))
    case $kind in
    none) ;;
    loss|mix)
        [ "$da" -gt 0 ] && [ "$db" -gt 0 ]
        verdict $? "$what: netem dropped $da/$db datagrams" \
            "$what: the RoCE netem dropped $da (hostA) and $db (hostB) datagrams"
        [ $((A_num_resends + B_num_resends)) -gt 0 ]
        verdict $? "$what: usnic retransmitted $A_num_resends/$B_num_resends segments" \
            "$what: datagrams were dropped, but usnic retransmitted nothing"
        if [ "$kind" = mix ]; then
            [ "$lab" -gt 0 ] && [ "$lba" -gt 0 ]
            verdict $? "$what: duplicates dropped: $lab/$lba" \
                "$what: no duplicates seen on both hosts ($lab/$lba)"
        fi ;;
    corrupt)
        [ "$sa" -gt "$rb" ] && [ "$sb" -gt "$ra" ]
        verdict $? "$what: datagrams lost in both directions" \
            "$what: corruption lost no datagrams (A->B $sa/$rb, B->A $sb/$ra)"
        [ $((A_num_resends + B_num_resends)) -gt 0 ]
        verdict $? "$what: usnic retransmitted $A_num_resends/$B_num_resends segments" \
            "$what: datagrams were lost, but usnic retransmitted nothing" ;;
    reorder)
        [ "$pa" -ge "$sa" ] && [ "$pb" -ge "$sb" ] && [ "$da" = 0 ] && [ "$db" = 0 ]
        verdict $? "$what: all $pa/$pb datagrams went through the reordering netem" \
            "$what: the RoCE netem passed $pa/$pb datagrams (usnic sent $sa/$sb)," \
            "dropped $da/$db" ;;
    dup)
        [ "$lab" -gt 0 ] && [ "$lba" -gt 0 ]
        verdict $? "$what: duplicates dropped: $lab/$lba" \
            "$what: no duplicates seen on both hosts ($lab/$lba)"
        [ "$rb" -gt "$sa" ] || [ "$ra" -gt "$sb" ]
        verdict $? "$what: more datagrams arrived than were sent" \
            "$what: no more datagrams arrived than sent (A->B $sa/$rb, B->A $sb/$ra)" ;;
    *) dp_fail "fault_run: unknown kind $kind" ;;
    esac
}

# verdict STATUS PASS-MSG FAIL-MSG: pass if STATUS is 0, else dp_fail
# fault_init: builds both workloads and sets their default arguments: P2P, the sizes that
# straddle every protocol boundary with at most 256 KiB per stream; MIX, none.
fault_init() {
    mpi_build p2p
    mpi_build faultmix
    P2P=(-s "0,1,722,723,4050,4051,16384,153544,153545,1048576" -W 262144)
    MIX=()
}

# fault_case LABEL KIND BOUND NETEM-ARGS...: netem NETEM-ARGS on the RoCE datagrams of both
# hosts, then both workloads under it (fault_run): p2p with 1 rank per host and the arguments
# in the caller's array P2P, faultmix with 3 per host and those in MIX (may be empty).
fault_case() {
    local label=$1 kind=$2 bound=$3 tag=${1//%/}; shift 3
    netem_roce_both "$@"
    fault_run "$label" "$kind" "$bound" 1 "$WORK/$tag-p2p.out" p2p "${P2P[@]}"
    fault_run "$label" "$kind" "$bound" 3 "$WORK/$tag-mix.out" faultmix "${MIX[@]}"
}

verdict() {
    if [ "$1" = 0 ]; then pass "$2"; else dp_fail "$3"; fi
}

# fault_summary: the summary lines of every fault_run so far
fault_summary() {
    echo "== summary (X/Y: hostA/hostB)"
    cat "$WORK/faults-summary" 2>/dev/null
}
