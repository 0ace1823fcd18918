#!/bin/bash
# vm-timeout: 300
# No spurious retransmits on a lossless link. Streaming bandwidth (bench/mpibench.c -t bw at
# 64 KiB, 1 MiB and 4 MiB), the `streams` job (-t bw,bibw at 256 KiB, 512 KiB and 1 MiB, as
# bench/run.sh runs them: ranks under SCHED_IDLE, so that rxe's kernel work keeps them off
# their vCPU while the peer goes on sending and acknowledging) and ping-pong latency (8 B,
# 4 KiB, 64 KiB) between hostA and hostB,
# one rank per host, btl usnic,self, nothing dropped by netem. From usnic's final statistics
# and rxe's hardware counters (/sys/class/infiniband/rxeX/ports/1/hw_counters):
#  - usnic carried the traffic: hostB received at least the datagrams the messages mpibench
#    reports need (num_frag_recvs + num_chunk_recvs);
#  - no datagram was lost at a receive queue: on each host rxe's rcvd_pkts grew by
#    usnic's num_total_recvs, or by at most 4 more (the peer's last ACKs may arrive after
#    this process printed its final statistics; runs saw 1 and 2); before the fixes
#    of issue 11 a bandwidth run lost up to 215 ACKs at the sender's full priority receive
#    queue; the code of 602710e (a 127-deep priority queue, buffers reposted once per pass,
#    a window that counted on every buffer but one repost batch) lost 140-442 datagrams
#    per run of bench/run.sh's streams (bench/results/vm-receive-queues), and failed the
#    streams job in 2 runs of 2 (2 genuine resends each; the bidirectional streams alone
#    lost 10 at a receive queue in 1 run of 2);
#  - in the measured sizes (mpibench's MPI_T counters over each size, both ranks: the
#    streams themselves), what the receiver knows: a resend whose original had arrived is
#    spurious, and the receiver drops and counts exactly those as duplicates
#    (num_dup_recvs + num_oow_low_recvs, mpibench's "dups"; a lossless link makes no
#    duplicates of its own). So resends - dups are the genuine resends, of datagrams that
#    were lost: none may be (every job). The bandwidth jobs' spurious resends are at most
#    5 per 10^4 data datagrams (the streams job's: 0-6 for 202,713 in 5 runs of 8361782):
#    the code before issue 11's loss-detection rules (commit
#    3c75f3d) resent 6.3 per 10^4 in its documented run (docs/benchmarks.md, 13 timer and 8
#    fast retransmits, all spurious), and 15.6 when this test ran it (15 for 9639 datagrams:
#    FAIL; 3 timer and 9 fast retransmits, all in the 1 MiB size); this code 1.2 and 1.3 in
#    the same session, 2.1 and once 14.5 (a heavily loaded host) before; 8361782 over the
#    bound in 2 of 8 runs alone in a fresh VM (14 and 8, the sender's timer during vCPU
#    stalls of up to 44 ms), 602710e in 1 of 5, and in one boot, paired, 8361782 resent none
#    in 8 rounds, 602710e 6 (bench/results/vm-receive-queues). Not told apart by
#    this bound: the rule that commit 8061df5 removed (a repeated ACK resends the next
#    segment; a segment late through the other channel's queue pair is not lost), restored
#    alone, resent 1.0 and 3.6 per 10^4 in two VM runs (half or more of its fast retransmits
#    found the segment acknowledged before they went out). The unit tests
#    engine_repeated_ack_alone_resends_nothing and engine_late_on_other_channel_not_reported
#    guard that rule: both fail with it. No allowance grows with the host's load: a vCPU
#    descheduled past the sender's timeout does make spurious resends, and a host too busy
#    for the bound fails the test (test/vm/progs/stallprobe.c, one per vCPU at real-time
#    priority, prints the stalls over twice the 5 ms minimum timeout, for the reader of a
#    failure). The latency job's spurious resends are printed, not bounded (about 2500-5000
#    datagrams, and a ping-pong's every round trip is a timer's chance);
#  - outside the measured sizes (the job's start and end, the barriers between sizes), at
#    most 10. Traced (a scratch build logging every progress gap over 3 ms, every timer
#    expiry and every duplicate, against one clock; 4 jobs of 64 KiB streaming, whose
#    counters then still took in the first barrier): all 7 timer resends of those jobs came
#    while the peer was outside MPI, 436-575 ms of set-up (touching its buffers) or 54 ms of
#    finalize, and none in the streams. A rank outside MPI acknowledges nothing; its peer's
#    timer resends the oldest segment once per timeout, doubling (10, 20, 40 ms: 3 when the
#    peer came 38 ms later), and the peer proves the first resend spurious. mpibench's
#    counters of a size start after the barrier that starts it, where a rank may come late.
# SPDX-License-Identifier: BSD-3-Clause
set -u
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/dp-lib.sh"
. "$(dirname "$0")/fault-lib.sh"

cc_cached "$WORK/mpibench" mpicc -O2 -Wall "$REPO/bench/mpibench.c" || fail "mpicc mpibench.c"
cc_cached "$WORK/stallprobe" gcc -O2 -Wall "$REPO/test/vm/progs/stallprobe.c" || fail "gcc stallprobe.c"
netem_clear
# twice the minimum retransmit timeout (btl_usnic_retrans_timeout's default, 5000 us)
STALL_US=10000
OUTSIDE_MAX=10
# spurious resends per 10^4 data datagrams of the bandwidth job's measured sizes, at most
SPURIOUS_MAX=5

# rxe_rcvd HOST: rxe's received-packet counter of HOST's device
rxe_rcvd() {
    local x=$1 dev
    dev=RXEVM_DEV_$x
    ip netns exec "ns$x" cat "/sys/class/infiniband/${!dev}/ports/1/hw_counters/rcvd_pkts"
}

# lossless_run NAME BOUND MPIBENCH-ARGS...: one job; checks as above (BOUND: spurious resends
# per 10^4 data datagrams of the measured sizes at most, "-" for none)
lossless_run() {
    local name=$1 bound=$2 out=$WORK/$1.out a0 b0 a1 b1 data rt need rc
    shift 2
    local cpu probes=() stalls=0
    for ((cpu = 0; cpu < $(nproc); cpu++)); do
        "$WORK/stallprobe" "$cpu" "$STALL_US" > "$WORK/$name.probe$cpu" 2>&1 &
        probes+=($!)
    done
    a0=$(rxe_rcvd A) b0=$(rxe_rcvd B)
    (
        # (SCHED_IDLE, inherited by mpirun and its ranks: off their vCPU whenever rxe works)
        if [ -n "${LOSSLESS_IDLE:-}" ]; then chrt --idle -p 0 "$BASHPID" || exit 2; fi
        MPI_TIMEOUT=240 mpirun_usnic --mca btl_usnic_stats 1000000 "$WORK/mpibench" "$@" \
            > "$out" 2>&1
    )
    rc=$?
    a1=$(rxe_rcvd A) b1=$(rxe_rcvd B)
    kill -TERM "${probes[@]}"
    wait "${probes[@]}"
    for ((cpu = 0; cpu < ${#probes[@]}; cpu++)); do
        local line
        line=$(cat "$WORK/$name.probe$cpu")
        echo "info: $name: $line"
        [[ $line =~ stalls\ ([0-9]+) ]] ||
            { dp_fail "$name: stallprobe on cpu $cpu printed no result"; return; }
        stalls=$((stalls + BASH_REMATCH[1]))
    done
    grep -Ev "^btl:usnic: stats final" "$out"
    [ "$rc" = 0 ] || { dp_fail "$name: mpirun exit code $rc"; return; }
    local A_num_frag_sends=0 A_num_chunk_sends=0 B_num_frag_sends=0 B_num_chunk_sends=0
    local A_num_timeout_retrans=0 A_num_fast_retrans=0 B_num_timeout_retrans=0
    # shellcheck disable=SC2034 # read indirectly, as ${x}_num_total_recvs
    local B_num_fast_retrans=0 A_num_total_recvs=0 B_num_total_recvs=0 B_num_frag_recvs=0
    local B_num_chunk_recvs=0 A_num_spurious_timeouts=0 B_num_spurious_timeouts=0 A_procs=0
    local B_procs=0 k v
    while IFS='=' read -r k v; do
        [[ $k =~ ^[AB]_[a-z_]+$ && $v =~ ^[0-9]+$ ]] && printf -v "$k" '%s' "$v"
    done <<< "$(fault_sums "$out")"
    if [ "$A_procs" != 1 ] || [ "$B_procs" != 1 ]; then
        dp_fail "$name: expected one usnic 'stats final' line per host"
        return
    fi
    # what hostB received, as datagrams of at most 4 KiB: bw and bibw, iterations x window
    # messages;
    # lat, one message per iteration
    need=$(awk '$1 == "bw" || $1 == "bibw" { n += $3 * $4 * $2 / 4096 }
                $1 == "lat" { d = $2 / 4096; n += $3 * (d < 1 ? 1 : d) }
                END { printf "%d", n }' "$out")
    if [ "$((B_num_frag_recvs + B_num_chunk_recvs))" -lt "$need" ]; then
        dp_fail "$name: hostB: usnic received $((B_num_frag_recvs + B_num_chunk_recvs)) data" \
            "datagrams, the traffic needs at least $need"
    else
        pass "$name: hostB: usnic received $((B_num_frag_recvs + B_num_chunk_recvs)) data datagrams (at least $need needed)"
    fi
    for x in A B; do
        local got want
        got=${x}_num_total_recvs
        if [ "$x" = A ]; then want=$((a1 - a0)); else want=$((b1 - b0)); fi
        # (a few may come after the final statistics: a peer still in its last progress
        # passes sends the ACKs it owed while this process has already printed them; runs
        # saw 1 and 2; an overflowing receive queue lost tens to hundreds)
        if [ "${!got}" = "$want" ]; then
            pass "$name: host$x: every datagram rxe received ($want) was completed to usnic"
        elif [ "$((want - ${!got}))" -ge 0 ] && [ "$((want - ${!got}))" -le 4 ]; then
            pass "$name: host$x: rxe received $want datagrams, usnic $((${!got})) before its final statistics"
        else
            dp_fail "$name: host$x: rxe received $want datagrams, usnic $((${!got})):" \
                "$((want - ${!got})) lost at a receive queue"
        fi
    done
    data=$((A_num_frag_sends + A_num_chunk_sends + B_num_frag_sends + B_num_chunk_sends))
    rt=$((A_num_timeout_retrans + A_num_fast_retrans + B_num_timeout_retrans + B_num_fast_retrans))
    echo "info: $name: $data data datagrams, retransmits: timer $A_num_timeout_retrans/$B_num_timeout_retrans" \
        "fast $A_num_fast_retrans/$B_num_fast_retrans (hostA/hostB), spurious timeouts undone" \
        "$A_num_spurious_timeouts/$B_num_spurious_timeouts"
    grep -E "^usnic (bw|bibw|lat) " "$out" | sed "s/^/info: $name: per size: /"
    # the measured sizes (mpibench's MPI_T counters over each size, both ranks): the streams;
    # what the receivers dropped as duplicates are the spurious resends, the rest genuine
    local sdata srt sres sdups genuine
    read -r sdata srt sres sdups <<< "$(awk '$1 == "usnic" {
            for (i = 4; i <= NF; i++) { split($i, kv, "=")
                if (kv[1] == "data") d += kv[2]; if (kv[1] == "timer" || kv[1] == "fast") r += kv[2]
                if (kv[1] == "resends") s += kv[2]; if (kv[1] == "dups") u += kv[2] } }
        END { print d + 0, r + 0, s + 0, u + 0 }' "$out")"
    genuine=$((sres - sdups))
    echo "info: $name: measured sizes: $sdata data datagrams, $sres resends, $sdups of them" \
        "spurious (duplicates at the receiver), $stalls vCPU stalls over ${STALL_US} us"
    if [ "$data" -le 0 ] || [ "$sdata" -le 0 ]; then
        dp_fail "$name: no data datagrams counted (job $data, sizes $sdata)"
    fi
    if [ "$genuine" -le 0 ]; then
        pass "$name: no genuine resend in the measured sizes ($sres resends, $sdups duplicates" \
            "at the receiver)"
    else
        dp_fail "$name: $genuine genuine resends in the measured sizes ($sres resends, only" \
            "$sdups of them duplicates at the receiver): datagrams were lost on a lossless link"
    fi
    if [ "$bound" = - ]; then
        echo "info: $name: $sdups spurious resends for $sdata data datagrams of the measured" \
            "sizes (not bounded)"
    elif [ $((sdups * 10000)) -le $((bound * sdata)) ]; then
        pass "$name: $sdups spurious resends for $sdata data datagrams of the measured sizes" \
            "(at most $bound per 10^4)"
    else
        dp_fail "$name: $sdups spurious resends for $sdata data datagrams of the measured sizes," \
            "more than $bound per 10^4 ($srt timer and fast retransmits; $stalls vCPU stalls over" \
            "${STALL_US} us: see the test's header)"
    fi
    # outside them: start-up, finalize and the barriers between sizes, where a rank still
    # setting up (or printing, or already leaving) acknowledges nothing and its peer's timer resends the oldest segment once per
    # timeout, doubling: a second of skew makes at most 7
    if [ $((rt - srt)) -le "$OUTSIDE_MAX" ]; then
        pass "$name: $((rt - srt)) retransmits outside the measured sizes (start, end, barriers;" \
            "at most $OUTSIDE_MAX)"
    else
        dp_fail "$name: $((rt - srt)) retransmits outside the measured sizes (start, end," \
            "barriers), more than $OUTSIDE_MAX"
    fi
}

lossless_run bw "$SPURIOUS_MAX" -t bw -S 65536,1048576,4194304 -T 1000 -W 200 -n 2 -N 200
LOSSLESS_IDLE=1 lossless_run streams "$SPURIOUS_MAX" -t bw,bibw -S 262144,524288,1048576 \
    -T 300 -W 60 -n 20 -N 10000
lossless_run lat - -t lat -S 8,4096,65536 -T 500 -W 100 -n 2 -N 2000
dp_done
