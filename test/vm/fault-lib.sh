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

# netem_roce HOST NETEM-ARGS...: netem on the data-path datagrams host X sends: RoCE v2 in the
# VM; in the native world (usnic over UDP, every socket on an ephemeral port) every UDP
# datagram but the connectivity checker's, which are let pass by their magic
# (btl_usnic_wire.h: USNIC_CONN_MAGIC_PING/ACK, host order on x86, both with the bytes "insu"
# at UDP payload offset 4)
netem_roce() {
    local x=$1; shift
    if [ "$WORLD" = native ]; then
        nft_clear "$x"
        nft_fault "$x" skip "$@"
    else
        netem_class "$x" "match ip dport 4791 0xffff" "$@"
    fi
}
# netem_udp HOST NETEM-ARGS...: netem on every UDP datagram host X sends (the data path and the
# connectivity checker's pings; TCP passes)
netem_udp() {
    local x=$1; shift
    if [ "$WORLD" = native ]; then nft_clear "$x"; nft_fault "$x" all "$@"
    else netem_class "$x" "" "$@"; fi
}
# netem_class HOST "MORE-U32-MATCHES" NETEM-ARGS...: netem on what host sends of UDP that
# also matches the given u32 matches (VM)
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
# The native world's kernel may have no netem (this machine's has none, nor prio or u32):
# there the impairment is an nftables rule on the egress hook of host X's veth (table netdev
# usnic_fault), which drops the chosen share of the UDP datagrams the host sends after the
# socket took them, as the wire would (a drop on the output hook would fail the send with
# EPERM, which the UDP device retries), with named counters "passed" and "dropped"
# (netem_stats). Only loss (and no impairment:
# `delay 0ms`, `loss 0%`) can be done this way; the tests of reordering, duplication and
# corruption run in the VM.
# nft_fault HOST skip|all NETEM-ARGS...: (re)write host X's rule, counters kept
nft_fault() {
    local x=$1 what=$2 per10k=0 skiprule="" drop
    shift 2
    case "$*" in
        "delay 0ms") ;;
        "loss "[0-9]*%)
            per10k=$(awk -v p="${2%\%}" 'BEGIN { printf "%d", p * 100 + 0.5 }') ;;
        *) fail "netem $x: '$*' cannot be done with nftables (native world: loss only)" ;;
    esac
    [ "$what" = skip ] &&
        skiprule="add rule netdev usnic_fault out meta protocol ip meta l4proto udp @th,96,32 0x696e7375 accept"
    # (nft refuses a comparison that always holds: 100% is a plain drop)
    drop="numgen random mod 10000 lt $per10k"
    [ "$per10k" -ge 10000 ] && drop=""
    ip netns exec "ns$x" nft -f - <<NFT || fail "netem $x: nft ($*)"
table netdev usnic_fault {
    counter passed { }
    counter dropped { }
    chain out { type filter hook egress device "veth$x" priority 0; policy accept; }
}
flush chain netdev usnic_fault out
$skiprule
add rule netdev usnic_fault out meta protocol ip meta l4proto udp $drop counter name "dropped" drop
add rule netdev usnic_fault out meta protocol ip meta l4proto udp counter name "passed"
NFT
}
# nft_clear HOST: no rule and no counters on host X (a new netem starts from zero)
nft_clear() { ip netns exec "ns$1" nft delete table netdev usnic_fault 2>/dev/null; return 0; }
# nft_counter HOST NAME: packets of counter NAME of host X's fault rule (0 if none)
nft_counter() {
    local n
    n=$(ip netns exec "ns$1" nft list counter netdev usnic_fault "$2" 2>/dev/null |
        sed -nE 's/.*packets ([0-9]+).*/\1/p' | head -n 1)
    echo "${n:-0}"
}
# netem_change HOST NETEM-ARGS...: new impairment (all of it: what is not given is off) for
# the netem of netem_roce / netem_udp on HOST. Use this, not netem_roce / netem_udp / netem_clear,
# while usnic traffic flows: grafting or deleting a root qdisc under traffic makes rxe fail a
# send and put the sending UD queue pair into the error state (send_err counts it), and usnic
# then aborts the job ("A queue pair of the usnic BTL stopped working"). (Native world: the
# rule is rewritten, its counters kept, and whether it spares the checker's datagrams too.)
netem_change() {
    local x=$1
    shift
    if [ "$WORLD" = native ]; then
        if ip netns exec "ns$x" nft list chain netdev usnic_fault out 2>/dev/null | grep -q 0x696e7375; then
            nft_fault "$x" skip "$@"
        else
            nft_fault "$x" all "$@"
        fi
        return
    fi
    ip netns exec "ns$x" tc qdisc change dev "veth$x" parent 1:3 handle 30: netem "$@" ||
        fail "netem_change $x $*"
}
# netem_change_all NETEM-ARGS...: netem_change on every host
netem_change_all() { local x; for x in "${HOSTS[@]}"; do netem_change "$x" "$@"; done; }
# netem_udp_all NETEM-ARGS...: netem_udp on every host
netem_udp_all() { local x; for x in "${HOSTS[@]}"; do netem_udp "$x" "$@"; done; }
# netem_roce_both NETEM-ARGS...: the same impairment on what every host sends (both directions
# between hostA and hostB; all of them in a native world of more hosts)
netem_roce_both() { local x; for x in "${HOSTS[@]}"; do netem_roce "$x" "$@"; done; }
# netem_stats HOST: "PACKETS DROPPED": what the netem of netem_roce / netem_udp on HOST has
# let through and dropped so far ("0 0" if there is none)
netem_stats() {
    if [ "$WORLD" = native ]; then
        echo "$(nft_counter "$1" passed) $(nft_counter "$1" dropped)"
        return
    fi
    ip netns exec "ns$1" tc -s qdisc show dev "veth$1" 2>/dev/null | awk '
        /^qdisc netem 30:/ { on = 1; next }
        /^qdisc / { on = 0 }
        on && /Sent/ { for (i = 1; i <= NF; i++) { if ($i == "pkt") p = $(i - 1)
                                                   if ($i == "(dropped") d = $(i + 1) } }
        END { sub(",", "", d); print p + 0, d + 0 }'
}

# fault_sums OUT: shell assignments X_<counter>=SUM (X = A, B, ...) of every counter of the
# "stats final" lines in OUT, summed over the processes of hostX (max_* fields: the largest),
# and X_procs (number of lines; A_procs and B_procs always)
fault_sums() {
    grep -E "btl:usnic: stats final host[A-H] " "$1" | awk '
        { for (i = 1; i <= NF; i++) if ($i == "final") h = substr($(i + 1), 5, 1)
          procs[h]++
          for (i = 1; i <= NF; i++) {
              if (split($i, kv, "=") != 2 || kv[2] !~ /^[0-9]+$/) continue
              k = h "_" kv[1]; keys[k] = 1
              if (kv[1] ~ /^max_/) { if (kv[2] + 0 > v[k]) v[k] = kv[2] + 0 }
              else v[k] += kv[2]
          } }
        END { for (k in keys) printf "%s=%d\n", k, v[k]
              printf "A_procs=%d\nB_procs=%d\n", procs["A"], procs["B"]
              for (h in procs) if (h != "A" && h != "B") printf "%s_procs=%d\n", h, procs[h] }'
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
#            both hosts, which dropped nothing; with REORDER_P2P_RESENDS_MAX set, the p2p
#            workload resent at most that many segments (both hosts)
#   dup      both hosts received duplicates (num_dup_recvs + num_oow_low_recvs: a duplicate of
#            a datagram that was already in order lies below the window), and in at least one
#            direction more datagrams arrived than were sent
#   mix      netem dropped datagrams on both hosts, usnic retransmitted, and duplicates arrived
# Failures are dp_fail (the test goes on; dp_done gives the verdict).
fault_run() {
    local label=$1 kind=$2 bound=$3 n=$4 out=$5 prog=$6 t0 t x k v pkts drops pt try undropped
    local what="$label: $prog ($n per host)" sent_all=0 arrived_all=0 first_all=0 got_all=0
    local dups_all=0 resends_all=0 summary line_a=""
    local -A P0 D0 P D C
    shift 6
    # A loss run in which netem dropped nothing on a host tested no recovery there (at 1%, a
    # p2p run's ~480 datagrams per host all pass about once in 120): it runs again, up to
    # FAULT_TRIES times in all.
    for ((try = 1; ; try++)); do
        for x in "${HOSTS[@]}"; do read -r "P0[$x]" "D0[$x]" <<< "$(netem_stats "$x")"; done
        t0=$SECONDS
        DP_TIMEOUT=$bound dp_run "$n" "$out" "$WORK/$prog" "$@"
        t=$((SECONDS - t0))
        undropped=""
        for x in "${HOSTS[@]}"; do
            read -r pkts drops <<< "$(netem_stats "$x")"
            P[$x]=$((pkts - P0[$x])) D[$x]=$((drops - D0[$x]))
            [ "${D[$x]}" -gt 0 ] || undropped+=" host$x"
        done
        case $kind in loss|mix) ;; *) break ;; esac
        if [ -z "$undropped" ] || [ "$try" -ge "$FAULT_TRIES" ]; then break; fi
        echo "faults: $label $prog: netem dropped nothing on$undropped; run again"
    done
    dp_check "$prog" "$n" "$out"
    if [ "$DP_RC" = 124 ]; then
        dp_fail "$what: not finished within its bound of ${bound}s (killed: hang?)"
    else
        pass "$what: finished in ${t}s (bound ${bound}s)"
    fi
    # the program's own time (from MPI_Init's end to its verdict): the lossless run's is the
    # base of the recovery bound of the same workload under a fault (RATIO)
    pt=$(sed -nE "s/^$prog: OK .* verified \(([0-9.]+) s\)$/\1/p" "$out")
    if [ "$kind" = none ]; then
        FAULT_BASE[$prog]=$pt
    elif [ -n "${RATIO:-}" ] && [ -n "$pt" ]; then
        local base=${FAULT_BASE[$prog]:-} lim
        if [ -z "$base" ]; then
            dp_fail "$what: no lossless run of $prog before it (the base of its bound)"
        else
            # (a base under FAULT_BASE_MIN s is timer noise: that much at least)
            lim=$(awk -v b="$base" -v m="$FAULT_BASE_MIN" -v r="$RATIO" \
                'BEGIN { printf "%.3f", (b > m ? b : m) * r }')
            if lt "$lim" "$pt"; then
                dp_fail "$what: took ${pt}s, more than $RATIO x the lossless ${base}s" \
                    "(at least ${FAULT_BASE_MIN}s): ${lim}s"
            else
                pass "$what: took ${pt}s, at most $RATIO x the lossless ${base}s (at least" \
                    "${FAULT_BASE_MIN}s): ${lim}s"
            fi
        fi
    fi

    # C[X_counter]: the counters of host X's processes (unset ones count as 0)
    while IFS='=' read -r k v; do
        [[ $k =~ ^[A-H]_[a-z_]+$ && $v =~ ^[0-9]+$ ]] && C[$k]=$v
    done <<< "$(fault_sums "$out")"
    c() { echo "${C[$1_$2]:-0}"; }
    # per host, X/Y/...: hostA/hostB/...
    per() { local f=$1 x r=""; for x in "${HOSTS[@]}"; do r+="${r:+/}$(c "$x" "$f")"; done; echo "$r"; }
    for x in "${HOSTS[@]}"; do
        sent_all=$((sent_all + $(c "$x" num_total_sends))) arrived_all=$((arrived_all + $(c "$x" num_total_recvs)))
        first_all=$((first_all + $(c "$x" num_frag_sends) + $(c "$x" num_chunk_sends)))
        got_all=$((got_all + $(c "$x" num_frag_recvs) + $(c "$x" num_chunk_recvs)))
        resends_all=$((resends_all + $(c "$x" num_resends)))
    done
    # all datagrams (data, ACKs, resends) sent by one host and received by the other
    if [ "$NHOSTS" = 2 ]; then
        line_a="A->B sent=$(c A num_total_sends) arrived=$(c B num_total_recvs) (lost $(pct $(($(c A num_total_sends) - $(c B num_total_recvs))) "$(c A num_total_sends)")%) B->A sent=$(c B num_total_sends) arrived=$(c A num_total_recvs) (lost $(pct $(($(c B num_total_sends) - $(c A num_total_recvs))) "$(c B num_total_sends)")%)"
    else
        line_a="all hosts sent=$sent_all arrived=$arrived_all (lost $(pct $((sent_all - arrived_all)) "$sent_all")%)"
    fi
    summary="netem"
    for x in "${HOSTS[@]}"; do summary+=" $x: pkts=${P[$x]} dropped=${D[$x]}"; done
    echo "faults: $label $prog: ${t}s (program ${pt:-?}s) $line_a" \
        "resends=$(per num_resends)" \
        "timeouts=$(per num_timeout_retrans)" \
        "fast_retrans=$(per num_fast_retrans)" \
        "dups=$(per num_dup_recvs)" \
        "oow_low=$(per num_oow_low_recvs)" \
        "oow_high=$(per num_oow_high_recvs)" \
        "badfrag=$(per num_badfrag_recvs)" \
        "bad=$(per num_bad_recvs) recv_err=$(per num_recv_errors)" \
        "unk=$(per num_unk_recvs)" \
        "max_rcvd_window=$(per max_rcvd_window_size)" \
        "max_rto_us=$(per max_rto_us)" \
        "$summary" |
        tee -a "$WORK/faults-summary"

    for x in "${HOSTS[@]}"; do
        [ "$(c "$x" procs)" = "$(dp_per_host "$n")" ] || return 0   # dp_check said why
    done
    if [ "$NHOSTS" = 2 ]; then
        for x in AB BA; do
            local s=${x:0:1} r=${x:1:1} first got
            first=$(( $(c "$s" num_frag_sends) + $(c "$s" num_chunk_sends) ))
            got=$(( $(c "$r" num_frag_recvs) + $(c "$r" num_chunk_recvs) ))
            if [ "$first" = "$got" ]; then
                pass "$what: host$s->host$r: $first data datagrams sent, each accepted exactly once"
            else
                dp_fail "$what: host$s->host$r: $first data datagrams sent (num_frag_sends +" \
                    "num_chunk_sends), but host$r accepted $got (num_frag_recvs + num_chunk_recvs)"
            fi
        done
    elif [ "$first_all" = "$got_all" ]; then
        # (the counters are per process, not per peer: with more hosts, over all of them)
        pass "$what: $first_all data datagrams sent by all hosts, each accepted exactly once"
    else
        dp_fail "$what: $first_all data datagrams sent by all hosts (num_frag_sends +" \
            "num_chunk_sends), but they accepted $got_all (num_frag_recvs + num_chunk_recvs)"
    fi

    local nodrop="" nodup="" passes="" dupl=""
    for x in "${HOSTS[@]}"; do
        [ "${D[$x]}" -gt 0 ] || nodrop+=" host$x"
        v=$(( $(c "$x" num_dup_recvs) + $(c "$x" num_oow_low_recvs) ))
        dupl+="${dupl:+/}$v" dups_all=$((dups_all + v))
        [ "$v" -gt 0 ] || nodup+=" host$x"
        { [ "${P[$x]}" -ge "$(c "$x" num_total_sends)" ] && [ "${D[$x]}" = 0 ]; } || passes+=" host$x"
    done
    case $kind in
    none) ;;
    loss|mix)
        [ -z "$nodrop" ]
        verdict $? "$what: netem dropped $(for x in "${HOSTS[@]}"; do printf '%s ' "${D[$x]}"; done)datagrams" \
            "$what: the data-path netem dropped nothing on$nodrop"
        [ "$resends_all" -gt 0 ]
        verdict $? "$what: usnic retransmitted $(per num_resends) segments" \
            "$what: datagrams were dropped, but usnic retransmitted nothing"
        if [ "$kind" = mix ]; then
            [ -z "$nodup" ]
            verdict $? "$what: duplicates dropped: $dupl" \
                "$what: no duplicates seen on$nodup ($dupl)"
        fi ;;
    corrupt)
        # (rxe drops a corrupted datagram for its ICRC, the kernel for its UDP checksum)
        if [ "$NHOSTS" = 2 ]; then
            [ "$(c A num_total_sends)" -gt "$(c B num_total_recvs)" ] &&
                [ "$(c B num_total_sends)" -gt "$(c A num_total_recvs)" ]
        else
            [ "$sent_all" -gt "$arrived_all" ]
        fi
        verdict $? "$what: datagrams lost in every direction" \
            "$what: corruption lost no datagrams ($line_a)"
        [ "$resends_all" -gt 0 ]
        verdict $? "$what: usnic retransmitted $(per num_resends) segments" \
            "$what: datagrams were lost, but usnic retransmitted nothing" ;;
    reorder)
        [ -z "$passes" ]
        verdict $? "$what: all datagrams went through the reordering netem ($summary)" \
            "$what: on$passes the data-path netem did not pass every datagram usnic sent\
 ($(per num_total_sends)), or dropped some: $summary"
        if [ "$prog" = p2p ] && [ -n "${REORDER_P2P_RESENDS_MAX:-}" ]; then
            [ "$resends_all" -le "$REORDER_P2P_RESENDS_MAX" ]
            verdict $? "$what: $resends_all resends, at most $REORDER_P2P_RESENDS_MAX" \
                "$what: $resends_all resends, more than $REORDER_P2P_RESENDS_MAX: late segments\
 taken for lost (reordering window: $(per num_reorder_waits) waits,\
 $(per num_spurious_fast) proofs)"
        fi ;;
    dup)
        [ -z "$nodup" ]
        verdict $? "$what: duplicates dropped: $dupl" \
            "$what: no duplicates seen on$nodup ($dupl)"
        if [ "$NHOSTS" = 2 ]; then
            [ "$(c B num_total_recvs)" -gt "$(c A num_total_sends)" ] ||
                [ "$(c A num_total_recvs)" -gt "$(c B num_total_sends)" ]
        else
            [ "$arrived_all" -gt "$sent_all" ]
        fi
        verdict $? "$what: more datagrams arrived than were sent" \
            "$what: no more datagrams arrived than sent ($line_a)" ;;
    *) dp_fail "fault_run: unknown kind $kind" ;;
    esac
}

# fault_run's lossless program times, by program (the bases of the recovery bounds), for
# every test that sources this file, whether or not it calls fault_init
declare -gA FAULT_BASE=()
FAULT_BASE_MIN=${FAULT_BASE_MIN:-0.5}
# runs of a loss case at most, while netem drops nothing on a host (fault_run)
FAULT_TRIES=${FAULT_TRIES:-3}

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

# verdict STATUS PASS-MSG FAIL-MSG: pass if STATUS is 0, else dp_fail
verdict() {
    if [ "$1" = 0 ]; then pass "$2"; else dp_fail "$3"; fi
}

# fault_summary: the summary lines of every fault_run so far
fault_summary() {
    echo "== summary (X/Y: hostA/hostB)"
    cat "$WORK/faults-summary" 2>/dev/null
}
