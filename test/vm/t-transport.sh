#!/bin/bash
# vm-timeout: 240
# UDP mode where each host has both a verbs device (rxeX) and its netdev (vethX):
# a) --mca btl_usnic_transport udp: usnic carries p2p's traffic over UDP sockets on vethX (its
#    stats lines name vethX, none names rxeX), every byte arrives, and ompi_info lists the
#    parameter with its three values;
# b) hostA on udp, hostB on verbs (one rank each): both print the "transport mismatch"
#    help naming their own and the peer's transport, and the job ends (no usnic path between
#    them, so MPI_Init reports them unreachable) instead of hanging;
# c) idle progress passes yield the CPU on Soft-RoCE, whose work the host's kernel does
#    (btl_usnic_yield_when_idle -1: both hosts say so at btl_base_verbose 5), not over UDP
#    sockets and not with btl_usnic_yield_when_idle 0; ompi_info lists the parameter.
# SPDX-License-Identifier: BSD-3-Clause
set -u
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/dp-lib.sh"

onhost A ompi_info --param btl usnic --level 9 > "$WORK/params" 2>&1
# (4.1 prints 0:"auto", 5.0 0|auto)
assert_grep 'Valid values: 0[:|]"?auto"?, 1[:|]"?verbs"?, 2[:|]"?udp' "$WORK/params" \
    "ompi_info lists btl_usnic_transport with auto, verbs and udp"

mpi_build p2p
OUT=$WORK/udp.out
# (datagrams of the veth MTU less IPv4, UDP, the Q_Key and the channel byte: docs/udp-mode.md)
dp_run 1 "$OUT" --mca btl_usnic_transport udp --mca btl_usnic_if_include "$RXEVM_NET.0/24" \
    -x USNIC_DP_MTU=$((RXEVM_MTU - 33)) "$WORK/p2p" -s 1,65536 -p pingpong
if grep -aEq '^p2p: OK [0-9]+ messages' "$OUT"; then pass "udp: every byte verified"
else dp_fail "udp: p2p did not verify its data"; fi
if [ "$DP_RC" = 0 ]; then pass "udp: exit code 0"; else dp_fail "udp: mpirun exit code $DP_RC"; fi
for x in A B; do
    min=$(sed -nE "s/^p2p: host host$x min_usnic_dgrams_in ([0-9]+)$/\1/p" "$OUT")
    got=$(( $(final_stat "$OUT" "host$x" "veth$x" num_frag_recvs) +
            $(final_stat "$OUT" "host$x" "veth$x" num_chunk_recvs) ))
    if [ -n "$min" ] && [ "$min" -gt 0 ] && [ "$got" -ge "$min" ]; then
        pass "udp: host$x veth$x received $got data datagrams, at least $min needed"
    else
        dp_fail "udp: host$x veth$x received $got data datagrams, needed ${min:-?}"
    fi
    grep -aq "stats final host$x rxe" "$OUT" && dp_fail "udp: host$x opened its verbs device"
done

# b) the transport set per host by a wrapper (5.0's mpirun crashes on per-context -x)
cat > "$WORK/pick.sh" <<'EOS'
#!/bin/sh
if [ "$(hostname)" = hostA ]; then t=udp; else t=verbs; fi
OMPI_MCA_btl_usnic_transport=$t exec "$@"
EOS
chmod +x "$WORK/pick.sh"
OUT=$WORK/mismatch.out
BTL=usnic,self mpirun_usnic -t 60 --mca btl_usnic_if_include "$RXEVM_NET.0/24" \
    "$WORK/pick.sh" "$WORK/p2p" -s 1 -p pingpong > "$OUT" 2>&1
rc=$?
cat "$OUT"
aborted "$rc" "mismatch"
# show_help may fold the two ranks' identical-topic messages into one: both hosts must appear
for x in A B; do
    y=$([ $x = A ] && echo B || echo A)
    mine=$([ $x = A ] && echo udp || echo verbs) theirs=$([ $x = A ] && echo verbs || echo udp)
    if grep -a -A1 -E "This host: host$x, transport $mine" "$OUT" |
        grep -Eq "Peer host: host$y, transport $theirs"; then
        pass "mismatch: host$x names its transport ($mine) and host$y's ($theirs)"
    elif grep -aq "Two processes of this job use the usnic BTL over different" "$OUT" &&
        grep -aEq "This host: host$y, transport $theirs" "$OUT"; then
        pass "mismatch: host$x's message folded into host$y's (show_help aggregation)"
    else
        dp_fail "mismatch: no 'transport mismatch' message from host$x"
    fi
done

# c) the idle yield
assert_grep 'btl_usnic_yield_when_idle' "$WORK/params" "ompi_info lists btl_usnic_yield_when_idle"
for mode in verbs udp off; do
    args=(--mca btl_base_verbose 5)
    case $mode in
        udp) args+=(--mca btl_usnic_transport udp --mca btl_usnic_if_include "$RXEVM_NET.0/24") ;;
        off) args+=(--mca btl_usnic_yield_when_idle 0) ;;
    esac
    OUT=$WORK/yield-$mode.out
    dp_run 1 "$OUT" "${args[@]}" "$WORK/p2p" -s 1,4096 -p pingpong
    [ "$DP_RC" = 0 ] || dp_fail "yield $mode: mpirun exit code $DP_RC"
    want=$([ $mode = verbs ] && echo yes || echo no)
    for x in A B; do
        got=no
        grep -aq "host$x: rxe$x: the host's kernel does this device's work: idle progress passes yield the CPU" \
            "$OUT" && got=yes
        if [ "$got" = "$want" ]; then pass "yield $mode: host$x's idle passes yield: $got"
        else dp_fail "yield $mode: host$x's idle passes yield: $got, expected $want"; fi
    done
done
dp_done
