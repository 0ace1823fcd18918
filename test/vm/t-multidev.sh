#!/bin/bash
# vm-timeout: 360
# vm-pairs: 2
# Several devices per host: hostA and hostB are joined by two veth pairs on two subnets, with
# two Soft-RoCE devices each (rxeA on vethA 10.88.0.1 and rxeA2 on vethA2 10.88.1.1; rxeB on
# vethB 10.88.0.2 and rxeB2 on vethB2 10.88.1.2). One rank per host, btl usnic,self.
#   a) each host opens both devices (each with its netdev and address) and each module gets
#      an endpoint to the peer's device on its own subnet (rxeX <-> rxeY, rxeX2 <-> rxeY2),
#      i.e. to the peer's modex record with that address: the connectivity map's device lines
#      and its peer line (device@peer_ip), and one final statistics line per device;
#   b) large messages (1 MiB to 16 MiB, every byte checked) are striped by ob1 over both
#      BTLs: every device of both hosts sent and received data chunks, and the datagrams
#      delivered on each host (both devices together) reach what the traffic needs;
#   c) btl_usnic_if_include rxeA,rxeB (device names), btl_usnic_if_include 10.88.1.0/24
#      (network) and btl_usnic_if_exclude 10.88.0.0/24 each leave exactly the expected device
#      per host (the only device in the map and the statistics), which pairs with the peer's
#      and carries the traffic, and the job passes;
#   d) both btl_usnic_if_include and btl_usnic_if_exclude: Open MPI's "mutually-exclusive MCA
#      variables" message, usnic is not used (no statistics), and with btl usnic,self the job
#      stops at once with the "unable to reach each other" error instead of hanging;
#   e) btl_usnic_if_include rxeA,rxeB2 leaves hostA only 10.88.0.1 and hostB only 10.88.1.2,
#      between which there is no route: no module pairs with the peer's (the map's peer line
#      names no device), and the job stops with the "unable to reach each other" error
#      instead of hanging.
# In no case may OPAL's bipartite solver report an error (usnic pairs nothing without it when
# no local and peer device have a route: an empty graph is an error to the solver).
# Facts only (docs/tests.md, "Test contracts"): map files, statistics, help messages, exit codes.
# SPDX-License-Identifier: BSD-3-Clause
set -u
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/dp-lib.sh"
need_pairs 2

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
# run OUT MPIRUN-ARGS... PROGRAM [ARGS...]: mpirun_usnic, final statistics, connectivity
# maps OUT.map-HOST...; sets RC
run() {
    local out=$1 t0=$SECONDS
    shift
    echo "== mpirun $*"
    mpirun_usnic -t "${T:-240}" --mca btl_usnic_stats 100000 \
        --mca btl_usnic_connectivity_map "$out.map" "$@" > "$out" 2>&1
    RC=$?
    cat "$out"
    echo "== exit code $RC after $((SECONDS - t0)) s"
}
# check_map OUT X WHAT DEV...: hostX's map (run OUT) lists exactly the devices DEV..., each on
# its netdev and address, each with an endpoint to the other host's device on its subnet
check_map() {
    local out=$1 x=$2 what=$3 y f d n ip pip
    shift 3
    y=$(other "$x")
    f=$(map_file "$out.map" "host$x")
    if [ -z "$f" ]; then
        dp_fail "$what: host$x wrote no connectivity map"
        return
    fi
    cat "$f"
    check_count $# '^device=' "$f" "$what: host$x uses $# device(s)"
    for d; do
        case $d in
            *2) n=veth${x}2 ip=RXEVM_IP2_$x pip=RXEVM_IP2_$y ;;
            *) n=veth$x ip=RXEVM_IP_$x pip=RXEVM_IP_$y ;;
        esac
        check_grep "^device=$d,interface=$n,ip=$(re "${!ip}")/24," "$f" \
            "$what: host$x opened $d on $n ${!ip}/24"
        check_grep "^peer=[01],hostname=host$y,(.*,)?device=$d@peer_ip=$(re "${!pip}")/24@" "$f" \
            "$what: host$x $d has an endpoint to host$y at ${!pip} (host$y's module on its subnet)"
    done
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
# check_one_device OUT WHAT X=DEV...: exactly the listed device of each host was opened (with
# its netdev and address), paired with the peer's device and carried traffic
check_one_device() {
    local out=$1 what=$2 x d sends recvs
    shift 2
    for x in A B; do
        case " $* " in
            *" $x=rxe${x}2 "*) d=rxe${x}2 ;;
            *) d=rxe$x ;;
        esac
        check_map "$out" "$x" "$what" "$d"
        check_count 1 "btl:usnic: stats final host$x " "$out" "$what: host$x: one device reported statistics"
        sends=$(( $(final_stat "$out" "host$x" "$d" num_chunk_sends) + 0 ))
        recvs=$(( $(final_stat "$out" "host$x" "$d" num_chunk_recvs) + 0 ))
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
run "$WORK/both.out" "$WORK/p2p" -s "$SIZES"
OUT=$WORK/both.out
for x in A B; do
    check_map "$OUT" "$x" "both devices" "rxe$x" "rxe${x}2"
done
check_p2p "$OUT" "both devices"
# b) every device sent and received data chunks; together they delivered what the traffic needs
for x in A B; do
    got=0
    for d in rxe$x rxe${x}2; do
        cs=$(( $(final_stat "$OUT" "host$x" "$d" num_chunk_sends) + 0 ))
        cr=$(( $(final_stat "$OUT" "host$x" "$d" num_chunk_recvs) + 0 ))
        fs=$(( $(final_stat "$OUT" "host$x" "$d" num_frag_sends) + 0 ))
        fr=$(( $(final_stat "$OUT" "host$x" "$d" num_frag_recvs) + 0 ))
        pu=$(( $(final_stat "$OUT" "host$x" "$d" num_puts) + 0 ))
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
check_one_device "$WORK/inc-names.out" "if_include rxeA,rxeB" A=rxeA B=rxeB
check_p2p "$WORK/inc-names.out" "if_include rxeA,rxeB"

run "$WORK/inc-net.out" --mca btl_usnic_if_include "$NET2.0/24" "$WORK/p2p" -s 65536,1048576
check_one_device "$WORK/inc-net.out" "if_include $NET2.0/24" A=rxeA2 B=rxeB2
check_p2p "$WORK/inc-net.out" "if_include $NET2.0/24"

run "$WORK/exc-net.out" --mca btl_usnic_if_exclude "$NET1.0/24" "$WORK/p2p" -s 65536,1048576
check_one_device "$WORK/exc-net.out" "if_exclude $NET1.0/24" A=rxeA2 B=rxeB2
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
check_count 0 "btl:usnic: stats final " "$OUT" "both filters: usnic opened no device (no statistics)"
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
# each host's map lists the one device it kept, and a peer line that names no device
for x in A B; do
    y=$(other "$x")
    f=$(map_file "$OUT.map" "host$x")
    if [ -z "$f" ]; then
        dp_fail "no route: host$x wrote no connectivity map"
        continue
    fi
    cat "$f"
    d=rxe$x; [ $x = B ] && d=rxeB2
    check_count 1 '^device=' "$f" "no route: host$x uses one device"
    check_grep "^device=$d," "$f" "no route: host$x uses $d"
    check_grep "^peer=[01],hostname=host$y,$" "$f" "no route: host$x $d pairs with no device of host$y"
done
check_grep 'unable to reach each other' "$OUT" "no route: the job fails as unreachable"
# usnic does not hand OPAL's bipartite solver an empty pairing graph, which it reports as an
# error ("OPAL ERROR: ... bipartite_graph"): any such line in any case is a failure
if grep -E 'OPAL ERROR: .*bipartite_graph' "$WORK"/*.out; then
    dp_fail "the bipartite solver reported an error (above)"
else
    pass "no bipartite solver error in any case"
fi
dp_done
