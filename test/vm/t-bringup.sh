#!/bin/bash
# vm-timeout: 240
# world: vm native
# native-hosts: 2-2
# Bring-up: the usnic component is installed and registers its parameters, and in a 2-host
# job (one rank on hostA, one on hostB, BTLs usnic,self only, progs/p2p.c with ping-pongs of
# 1 B, 64 KiB and 153545 B, 1 MiB + 1 and 4 MiB + 3, the last three by ob1's RGET) each host
# opens its device (rxeX in the VM, the UDP device vethX in the native world) on its veth and
# reaches the peer's device at the peer's address, i.e. found the peer's modex record (the
# connectivity map), both channels carry datagrams both ways (the final statistics: fast-path
# fragments go on the priority channel, chunks on the data channel), every byte arrives and
# the job completes. Both hosts sent RGET data without a copy (num_zcopy_chunks: the
# zero-copy path, every byte of it checked; t-p2p checks it over all its sizes). In a native
# world of more hosts the job runs on hostA and hostB.
# SPDX-License-Identifier: BSD-3-Clause
set -u
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/dp-lib.sh"
[ "$NHOSTS" -gt 2 ] && export MPI_HOSTS="A B"

onhost A ompi_info > "$WORK/ompi_info" 2>&1
assert_grep "MCA btl: usnic \(.*API v${BTL_API//./\\.}" "$WORK/ompi_info" \
    "ompi_info lists btl usnic with BTL API v$BTL_API (make -C standalone install puts it there)"
onhost A ompi_info --param btl usnic --level 9 > "$WORK/params" 2>&1
for p in btl_usnic_if_include btl_usnic_retrans_timeout; do
    assert_grep "parameter \"$p\"" "$WORK/params" "ompi_info --param btl usnic lists $p"
done
# each parameter line is followed by its description
n=$(grep -c 'parameter "btl_usnic_' "$WORK/params")
bare=$(awk '/parameter "btl_usnic_/ { p = $0; if ((getline) <= 0 || $0 ~ /parameter "/ || $0 !~ /[a-z]/) print p }' \
       "$WORK/params")
if [ "$n" -lt 30 ] || [ -n "$bare" ]; then
    echo "$bare"
    fail "$n parameters listed, some without a description"
fi
pass "ompi_info --param btl usnic --level 9: all $n parameters have a description"

mpi_build p2p
OUT=$WORK/p2p.out
dp_run 1 "$OUT" --mca btl_usnic_connectivity_map "$WORK/map" "$WORK/p2p" \
    -s 1,65536,153545,1048577,4194307 -p pingpong
dp_check p2p 1 "$OUT"
for x in A B; do
    y=$([ $x = A ] && echo B || echo A) d=$(dev_of "$x")
    ip=RXEVM_IP_$x peer_ip=RXEVM_IP_$y
    f=$(map_file "$WORK/map" "host$x")
    if [ -z "$f" ]; then
        dp_fail "host$x wrote no connectivity map"
    else
        cat "$f"
        if grep -Eq "^device=$d,interface=veth$x,ip=${!ip//./\\.}/24," "$f"; then
            pass "host$x opened $d on veth$x ${!ip}/24"
        else
            dp_fail "host$x's map has no line device=$d,interface=veth$x,ip=${!ip}/24"
        fi
        if grep -Eq "^peer=[01],hostname=host$y,device=$d@peer_ip=${!peer_ip//./\\.}/24@" "$f"; then
            pass "host$x $d reaches host$y at ${!peer_ip} (host$y published its modex)"
        else
            dp_fail "host$x's map has no endpoint from $d to host$y at ${!peer_ip}/24"
        fi
    fi
    cs=(num_fast_sends num_frag_recvs num_chunk_sends num_chunk_recvs num_zcopy_chunks)
    for c in "${cs[@]}"; do
        v=$(final_stat "$OUT" "host$x" "$d" "$c")
        if [ "${v:-0}" -gt 0 ]; then pass "host$x $d: $c=$v"
        else dp_fail "host$x $d: $c=${v:-none}, expected > 0"; fi
    done
done
dp_done
