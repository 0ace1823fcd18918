#!/bin/bash
# vm-timeout: 150
# world: native
# native-hosts: 2-2
# Statistics: the counters move as expected when read through MPI_T (progs/mpit.c checks each
# variable against the traffic it made, and exits 1 otherwise); with
# btl_usnic_stats=1 reports are printed every second and once at finalize; with
# btl_usnic_connectivity_map each process writes a map of its device and its peer.
# progs/mpit.c and progs/busy.c are two-rank programs: in a world of more hosts the jobs run
# on hostA and the last host.
# SPDX-License-Identifier: BSD-3-Clause
set -u
. "$(dirname "$0")/lib.sh"
[ "$NHOSTS" -gt 2 ] && export MPI_HOSTS="A ${HOSTS[NHOSTS - 1]}"
# shellcheck disable=SC2206 # letters
ON=(${MPI_HOSTS:-A B})
mpi_build mpit
mpi_build busy

echo "== MPI_T counters"
BTL=usnic,self mpirun_usnic "$WORK/mpit" > "$WORK/mpit.out" 2>&1; rc=$?
cat "$WORK/mpit.out"
[ "$rc" = 0 ] || fail "mpit exit code $rc"
for r in 0 1; do
    for v in num_frag_sends num_frag_recvs num_chunk_sends num_bad_recvs num_forged_recvs \
        endpoints endpoint_bytes send_table_bytes progress_passes; do
        assert_grep "^mpit: rank $r: btl_usnic_$v [0-9]+ -> [0-9]+ \(1 device\(s\)\)$" \
            "$WORK/mpit.out" "rank $r read btl_usnic_$v"
    done
done

echo "== periodic and final reports, connectivity map"
BTL=usnic,self mpirun_usnic --mca btl_usnic_stats 1 --mca btl_usnic_connectivity_map "$WORK/map" \
    "$WORK/busy" 4 > "$WORK/stats.out" 2>&1; rc=$?
cat "$WORK/stats.out"
[ "$rc" = 0 ] || fail "busy exit code $rc"
for x in "${ON[@]}"; do
    d=$(dev_of "$x")
    assert_grep "btl:usnic: stats 0002 host$x $d: num_total_sends=[1-9][0-9]* " \
        "$WORK/stats.out" "host$x printed periodic reports"
    assert_grep "btl:usnic: stats final host$x $d: .*num_total_recvs=[1-9][0-9]* " \
        "$WORK/stats.out" "host$x printed a final report with received datagrams"
    # rank 0 (hostA) broadcasts: the other host receives the frags
    [ "$x" != A ] && assert_grep "btl:usnic: stats final host$x $d: .*num_frag_recvs=[1-9][0-9]* " \
        "$WORK/stats.out" "host$x received the broadcast frags"
    f=$(ls "$WORK"/map-host"$x".pid*.job*.mcwrank*.txt 2>/dev/null)
    [ -n "$f" ] || fail "no map file for host$x"
    cat "$f"
    ip=RXEVM_IP_$x
    assert_grep "^device=$d,interface=veth$x,ip=${!ip//./\\.}/24,mac=([0-9a-f]{2}:){5}[0-9a-f]{2},mtu=$RXEVM_MTU$" \
        "$f" "host$x map lists its device"
    assert_grep "^peer=[01],hostname=host[A-H],device=$d@peer_ip=${RXEVM_NET//./\\.}\.[0-9]+/24@peer_mac=" \
        "$f" "host$x map lists its peer"
done
