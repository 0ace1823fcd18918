#!/bin/bash
# vm-timeout: 200
# A netdev with several IPv4 addresses: usnic publishes the address of the GID it uses (and
# that address's prefix), not whichever address of the netdev comes first. Each host's veth
# gets a second address in another subnet (10.77.0.x/16, after its own 10.88.0.x/24); the job
# (progs/mpit.c, usnic,self, 1 rank per host, which checks from MPI_T that usnic carried its
# ping-pongs) uses the RoCE v2 GID of that second address (btl_usnic_gid_index, per host from
# sysfs). The connectivity map (the module's address and the peer's published one) must show
# 10.77.0.x/16 on both hosts.
# SPDX-License-Identifier: BSD-3-Clause
set -u
. "$(dirname "$0")/lib.sh"

NET2=10.77.0
declare -A N=([A]=1 [B]=2)
# the extra addresses must not outlive the test (their GIDs would change later tests' devices)
cleanup() {
    for x in A B; do ip netns exec "ns$x" ip addr del "$NET2.${N[$x]}/16" dev "veth$x" 2>/dev/null; done
}
trap cleanup EXIT
trap 'exit 1' TERM INT
cleanup

# gid_of X ADDR: index of the RoCE v2 GID ::ffff:ADDR of rxeX ("" if none); the device's
# sysfs is only seen from its host's namespace
gid_of() {
    local hex a b c d
    IFS=. read -r a b c d <<< "$2"
    hex=$(printf '0000:0000:0000:0000:0000:ffff:%02x%02x:%02x%02x' "$a" "$b" "$c" "$d")
    # shellcheck disable=SC2016 # expanded by the inner sh
    ip netns exec "ns$1" sh -c 'cd "/sys/class/infiniband/$0/ports/1" || exit
        for g in gids/*; do
            [ "$(cat "$g")" = "$1" ] && [ "$(cat "gid_attrs/types/${g#gids/}")" = "RoCE v2" ] &&
                { echo "${g#gids/}"; exit; }
        done' "rxe$1" "$hex" 2>/dev/null
}

declare -A GI
for x in A B; do
    n=${N[$x]}
    ip netns exec "ns$x" ip addr add "$NET2.$n/16" dev "veth$x" || fail "ip addr add on veth$x"
    for _ in $(seq 50); do
        GI[$x]=$(gid_of $x "$NET2.$n")
        [ -n "${GI[$x]}" ] && break
        sleep 0.2
    done
    [ -n "${GI[$x]}" ] || fail "rxe$x has no RoCE v2 GID for $NET2.$n"
    echo "host$x: $(ip netns exec "ns$x" ip -4 -o addr show dev "veth$x" | awk '{print $4}' | xargs)," \
        "RoCE v2 GID of $NET2.$n at index ${GI[$x]}"
done

mpi_build mpit
onhost A timeout -k 5 120 mpirun --allow-run-as-root --mca plm_rsh_agent rxevm-rsh \
    --mca oob_tcp_if_include "$RXEVM_NET.0/24" --bind-to none --mca pml ob1 --mca btl usnic,self \
    --mca btl_usnic_connectivity_map "$WORK/map" \
    -np 1 --host hostA env OMPI_MCA_btl_usnic_gid_index="${GI[A]}" "$WORK/mpit" : \
    -np 1 --host hostB env OMPI_MCA_btl_usnic_gid_index="${GI[B]}" "$WORK/mpit" \
    > "$WORK/mpit.out" 2>&1
rc=$?
cat "$WORK/mpit.out"
[ "$rc" = 0 ] || fail "mpit exit code $rc"
pass "the job ran over the GIDs of $NET2.x (usnic counters checked by mpit)"

for x in A B; do
    f=$(ls "$WORK"/map-host$x.pid*.job*.mcwrank*.txt 2>/dev/null)
    [ -n "$f" ] || fail "no map file for host$x"
    cat "$f"
    assert_grep "^device=rxe$x,interface=veth$x,ip=${NET2//./\\.}\.[12]/16," "$f" \
        "host$x publishes the GID's address $NET2.x/16 for rxe$x"
    assert_grep "^peer=[01],hostname=host[AB],device=rxe$x@peer_ip=${NET2//./\\.}\.[12]/16@" "$f" \
        "host$x got its peer's GID address $NET2.x/16"
done
