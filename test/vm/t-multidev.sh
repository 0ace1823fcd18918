#!/bin/bash
# vm-timeout: 360
# vm-pairs: 2
# Several devices per host: hostA and hostB are joined by two veth pairs on two subnets, with
# two Soft-RoCE devices each (rxeA on vethA 10.88.0.1 and rxeA2 on vethA2 10.88.1.1; rxeB on
# vethB 10.88.0.2 and rxeB2 on vethB2 10.88.1.2). One rank per host, btl usnic,self.
#   a) each host opens both devices (netdev and address of each), publishes 2 modex records,
#      and each module gets an endpoint to the peer's device on its own subnet (rxeX <-> rxeY,
#      rxeX2 <-> rxeY2): the "endpoint to" line names the peer's record, which must be the
#      peer's module on the same subnet, and that module's data QP; the connectivity map
#      lists the same device@peer_ip pairs;
#   b) large messages (1 MiB to 16 MiB, every byte checked) are striped by ob1 over both
#      BTLs: every device of both hosts sent and received data chunks, and the datagrams
#      delivered on each host (both devices together) reach what the traffic needs;
#   c) btl_usnic_if_include rxeA,rxeB (device names), btl_usnic_if_include 10.88.1.0/24
#      (network) and btl_usnic_if_exclude 10.88.0.0/24 each leave exactly the expected device
#      per host (one "opened" line, the other device skipped by the filter, 1 modex record),
#      which carries the traffic, and the job passes;
#   d) both btl_usnic_if_include and btl_usnic_if_exclude: Open MPI's "mutually-exclusive MCA
#      variables" message, usnic is not used, and with btl usnic,self the job stops at once
#      with the "unable to reach each other" error instead of hanging;
#   e) btl_usnic_if_include rxeA,rxeB2 leaves hostA only 10.88.0.1 and hostB only 10.88.1.2,
#      between which there is no route: no module pairs with the peer's, no endpoint is made,
#      and the job stops with the "unable to reach each other" error instead of hanging.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/dp-lib.sh"
need_pairs 2

# opal_output may prefix "[host:pid] "; more ", name value" fields may follow the checked ones
P='^(\[[^]]*\] )?btl:usnic: ' MORE='(, .*)?$'
NET1=${RXEVM_IP_A%.*} NET2=${RXEVM_IP2_A%.*}
SIZES=1048576,4194307,16777216
re() { printf '%s' "$1" | sed 's/[.]/\\./g'; }        # an address as a regex
other() { [ "$1" = A ] && echo B || echo A; }

# check_grep ERE FILE MSG / check_count N ERE FILE MSG: like assert_grep, but the test goes on
check_grep() {
    if grep -Eq -- "$1" "$2"; then pass "$3"
    else echo "--- no line of $2 matches: $1"; dp_fail "$3"; fi
}
check_count() {
    local got
    got=$(grep -Ec -- "$2" "$3")
    if [ "$got" = "$1" ]; then pass "$4"
    else echo "--- $got lines of $3 match (expected $1): $2"; dp_fail "$4"; fi
}
# stat OUT HOST DEV NAME: counter NAME of the final statistics of device DEV on HOST
stat() {
    grep -E "btl:usnic: stats final $2 $3: " "$1" | head -n 1 | tr ' ' '\n' | sed -n "s/^$4=//p"
}
# run OUT MPIRUN-ARGS... PROGRAM [ARGS...]: mpirun_usnic, verbose, final statistics; sets RC
run() {
    local out=$1 t0=$SECONDS
    shift
    echo "== mpirun $*"
    mpirun_usnic -t "${T:-240}" --mca btl_base_verbose 100 --mca btl_usnic_stats 100000 "$@" \
        > "$out" 2>&1
    RC=$?
    cat "$out"
    echo "== exit code $RC after $((SECONDS - t0)) s"
}
# check_p2p OUT WHAT: p2p verified everything and exited 0
check_p2p() {
    if grep -Eq '^p2p: (MISMATCH|ERROR|FAILED)' "$1"; then
        grep -E '^p2p: (MISMATCH|ERROR|FAILED)' "$1" | head -n 20
        dp_fail "$2: p2p found wrong data"
    elif grep -Eq '^p2p: OK [0-9]+ messages, [0-9]+ bytes verified' "$1"; then
        pass "$2: p2p $(sed -nE 's/^p2p: OK //p' "$1")"
    else
        dp_fail "$2: p2p did not finish its checks"
    fi
    if [ "$RC" = 0 ]; then pass "$2: exit code 0"
    else dp_fail "$2: mpirun exit code $RC$([ "$RC" = 124 ] && echo " (timed out)")"; fi
}
# check_pairing OUT X DEV PEERDEV WHAT: on hostX, module DEV has exactly one endpoint to the
# other host, and it is the peer's module PEERDEV: the record index of the "endpoint to" line is
# PEERDEV's position among the peer's "module ready" lines (= its modex record) and the data
# QP is the one PEERDEV's data channel reported
check_pairing() {
    local out=$1 x=$2 d=$3 e=$4 what=$5 y eps rec qp recs peer_qp
    y=$(other "$x")
    eps=$(sed -nE "s/${P}host$x: $d: endpoint to host$y \(host$y record ([0-9]+), data QP ([0-9]+)\)$/\2 \3/p" "$out")
    if [ "$(printf '%s\n' "$eps" | grep -c .)" != 1 ]; then
        echo "--- host$x $d endpoint lines: ${eps:-none}"
        dp_fail "$what: host$x $d has one endpoint to host$y"
        return
    fi
    read -r rec qp <<< "$eps"
    recs=($(sed -nE "s/${P}host$y: ([^ :]+): module ready: .*/\2/p" "$out"))
    peer_qp=$(sed -nE "s/${P}host$y: $e: data channel ready: CQ [0-9]+ entries, QP ([0-9]+)$MORE/\2/p" "$out")
    if [ "${recs[$rec]:-}" = "$e" ] && [ -n "$peer_qp" ] && [ "$qp" = "$peer_qp" ]; then
        pass "$what: host$x $d -> host$y record $rec = $e (data QP $qp)"
    else
        echo "--- host$y records (module ready order): ${recs[*]:-none}; $e data QP: ${peer_qp:-none}"
        dp_fail "$what: host$x $d -> host$y record $rec (${recs[$rec]:-?}), data QP $qp: expected $e, QP ${peer_qp:-?}"
    fi
}
# check_one_device OUT WHAT PARAM X=DEV...: exactly the listed device of each host was opened
# (with its netdev and address), the host's other device was skipped by PARAM (if given),
# one modex record was published, the device paired with the peer's and carried traffic
check_one_device() {
    local out=$1 what=$2 param=$3 x d n y e skip ip net sends recvs
    shift 3
    for x in A B; do
        y=$(other "$x")
        case " $* " in
            *" $x=rxe${x}2 "*) d=rxe${x}2 n=veth${x}2 ip=RXEVM_IP2_$x skip=rxe$x e=rxe${y}2 ;;
            *) d=rxe$x n=veth$x ip=RXEVM_IP_$x skip=rxe${x}2 e=rxe$y ;;
        esac
        check_count 1 "${P}host$x: [^ ]+: opened, " "$out" "$what: host$x opened one device"
        check_grep "${P}host$x: $d: opened, port 1, netdev $n $(re "${!ip}")/24, GID index [0-9]+, MTU [0-9]+$MORE" \
            "$out" "$what: host$x opened $d on $n ${!ip}/24"
        [ -n "$param" ] && check_grep "${P}host$x: $skip: skipped by btl_usnic_$param$" "$out" \
            "$what: host$x skipped $skip (btl_usnic_$param)"
        check_grep "${P}host$x: modex published for 1 module\(s\)$" "$out" \
            "$what: host$x published 1 modex record"
        check_pairing "$out" "$x" "$d" "$e" "$what"
        check_count 1 "btl:usnic: stats final host$x " "$out" "$what: host$x: one device reported statistics"
        sends=$(( $(stat "$out" "host$x" "$d" num_chunk_sends) + 0 ))
        recvs=$(( $(stat "$out" "host$x" "$d" num_chunk_recvs) + 0 ))
        if [ "$sends" -gt 0 ] && [ "$recvs" -gt 0 ]; then
            pass "$what: host$x $d sent $sends and received $recvs data chunks"
        else
            dp_fail "$what: host$x $d sent $sends and received $recvs data chunks (expected > 0)"
        fi
    done
}

mpi_build p2p
mpi_build hello

echo "=== a+b) both devices on each host, large messages ($SIZES)"
run "$WORK/both.out" --mca btl_usnic_connectivity_map "$WORK/map" "$WORK/p2p" -s "$SIZES"
OUT=$WORK/both.out
for x in A B; do
    y=$(other "$x")
    ip1=RXEVM_IP_$x ip2=RXEVM_IP2_$x
    check_count 2 "${P}host$x: [^ ]+: opened, " "$OUT" "host$x opened two devices"
    check_grep "${P}host$x: rxe$x: opened, port 1, netdev veth$x $(re "${!ip1}")/24, GID index [0-9]+, MTU [0-9]+$MORE" \
        "$OUT" "host$x opened rxe$x on veth$x ${!ip1}/24"
    check_grep "${P}host$x: rxe${x}2: opened, port 1, netdev veth${x}2 $(re "${!ip2}")/24, GID index [0-9]+, MTU [0-9]+$MORE" \
        "$OUT" "host$x opened rxe${x}2 on veth${x}2 ${!ip2}/24"
    check_grep "${P}host$x: modex published for 2 module\(s\)$" "$OUT" "host$x published 2 modex records"
    check_pairing "$OUT" "$x" "rxe$x" "rxe$y" "same subnet $NET1.0/24"
    check_pairing "$OUT" "$x" "rxe${x}2" "rxe${y}2" "same subnet $NET2.0/24"
    # the connectivity map: both devices, each with the peer's address on its own subnet
    f=$(ls "$WORK"/map-host$x.pid*.job*.mcwrank*.txt 2>/dev/null | head -n 1)
    if [ -z "$f" ]; then
        dp_fail "host$x wrote no connectivity map"
    else
        cat "$f"
        check_grep "^device=rxe$x,interface=veth$x,ip=$(re "${!ip1}")/24," "$f" "host$x map lists rxe$x"
        check_grep "^device=rxe${x}2,interface=veth${x}2,ip=$(re "${!ip2}")/24," "$f" "host$x map lists rxe${x}2"
        ip1=RXEVM_IP_$y ip2=RXEVM_IP2_$y
        check_grep "^peer=[01],hostname=host$y,(.*,)?device=rxe$x@peer_ip=$(re "${!ip1}")/24@" "$f" \
            "host$x map: rxe$x reaches host$y at ${!ip1}"
        check_grep "^peer=[01],hostname=host$y,(.*,)?device=rxe${x}2@peer_ip=$(re "${!ip2}")/24@" "$f" \
            "host$x map: rxe${x}2 reaches host$y at ${!ip2}"
    fi
done
check_p2p "$OUT" "both devices"
# b) every device sent and received data chunks; together they delivered what the traffic needs
for x in A B; do
    got=0 total=0
    for d in rxe$x rxe${x}2; do
        cs=$(( $(stat "$OUT" "host$x" "$d" num_chunk_sends) + 0 ))
        cr=$(( $(stat "$OUT" "host$x" "$d" num_chunk_recvs) + 0 ))
        fs=$(( $(stat "$OUT" "host$x" "$d" num_frag_sends) + 0 ))
        fr=$(( $(stat "$OUT" "host$x" "$d" num_frag_recvs) + 0 ))
        pu=$(( $(stat "$OUT" "host$x" "$d" num_puts) + 0 ))
        echo "info: host$x $d: chunk_sends=$cs chunk_recvs=$cr frag_sends=$fs frag_recvs=$fr puts=$pu"
        if [ "$cs" -gt 0 ] && [ "$cr" -gt 0 ]; then
            pass "host$x $d carried data: $cs chunks sent, $cr received"
        else
            dp_fail "host$x $d carried no data: $cs chunks sent, $cr received (both devices should)"
        fi
        got=$((got + cr + fr))
    done
    check_count 2 "btl:usnic: stats final host$x " "$OUT" "host$x reported statistics for two devices"
    min=$(sed -nE "s/^p2p: host host$x min_usnic_dgrams_in ([0-9]+)$/\1/p" "$OUT")
    if [ -n "$min" ] && [ "$min" -gt 0 ] && [ "$got" -ge "$min" ]; then
        pass "host$x: both devices delivered $got data datagrams, the traffic needs at least $min"
    else
        dp_fail "host$x: both devices delivered $got data datagrams, the traffic needs at least ${min:-?}"
    fi
done

echo "=== c) one device per host by btl_usnic_if_include / btl_usnic_if_exclude"
run "$WORK/inc-names.out" --mca btl_usnic_if_include rxeA,rxeB "$WORK/p2p" -s 65536,1048576
check_one_device "$WORK/inc-names.out" "if_include rxeA,rxeB" if_include A=rxeA B=rxeB
check_p2p "$WORK/inc-names.out" "if_include rxeA,rxeB"

run "$WORK/inc-net.out" --mca btl_usnic_if_include "$NET2.0/24" "$WORK/p2p" -s 65536,1048576
check_one_device "$WORK/inc-net.out" "if_include $NET2.0/24" if_include A=rxeA2 B=rxeB2
check_p2p "$WORK/inc-net.out" "if_include $NET2.0/24"

run "$WORK/exc-net.out" --mca btl_usnic_if_exclude "$NET1.0/24" "$WORK/p2p" -s 65536,1048576
check_one_device "$WORK/exc-net.out" "if_exclude $NET1.0/24" if_exclude A=rxeA2 B=rxeB2
check_p2p "$WORK/exc-net.out" "if_exclude $NET1.0/24"

echo "=== d) btl_usnic_if_include and btl_usnic_if_exclude together"
OUT=$WORK/both-filters.out
T=90 run "$OUT" --mca btl_usnic_if_include rxeA,rxeB --mca btl_usnic_if_exclude "$NET1.0/24" "$WORK/hello"
if [ "$RC" = 124 ]; then
    dp_fail "both filters: the job hung (killed after 90 s)"
elif [ "$RC" = 0 ]; then
    dp_fail "both filters: the job succeeded; it must fail (usnic disabled, no other BTL)"
else
    pass "both filters: mpirun failed with exit code $RC (not a hang)"
fi
check_grep 'Two mutually-exclusive MCA variables were specified' "$OUT" \
    "both filters: Open MPI's mutually-exclusive message"
check_grep '1st MCA variable: btl_usnic_if_include' "$OUT" "both filters: the message names btl_usnic_if_include"
check_grep '2nd MCA variable: btl_usnic_if_exclude' "$OUT" "both filters: the message names btl_usnic_if_exclude"
check_grep 'unable to reach each other' "$OUT" "both filters: the job fails as unreachable"
check_count 0 "${P}host[AB]: [^ ]+: opened, " "$OUT" "both filters: usnic opened no device"
check_count 0 '^hello: rank ' "$OUT" "both filters: no rank completed a communication"

echo "=== e) the only devices left are on different subnets (no route between them)"
OUT=$WORK/no-route.out
T=90 run "$OUT" --mca btl_usnic_if_include rxeA,rxeB2 "$WORK/hello"
if [ "$RC" = 124 ]; then
    dp_fail "no route: the job hung (killed after 90 s)"
elif [ "$RC" = 0 ]; then
    dp_fail "no route: the job succeeded; it must fail (the hosts cannot reach each other)"
else
    pass "no route: mpirun failed with exit code $RC (not a hang)"
fi
check_grep "${P}hostA: rxeA: no device of hostB pairs with this one$" "$OUT" \
    "no route: hostA rxeA pairs with no device of hostB"
check_grep "${P}hostB: rxeB2: no device of hostA pairs with this one$" "$OUT" \
    "no route: hostB rxeB2 pairs with no device of hostA"
check_count 0 "${P}host[AB]: [^ ]+: endpoint to " "$OUT" "no route: no endpoint was created"
check_grep 'unable to reach each other' "$OUT" "no route: the job fails as unreachable"
grep -E 'OPAL ERROR: .*bipartite_graph' "$OUT" |
    sed 's/^/info: no route: printed (usnic solves an empty pairing graph): /'
dp_done
