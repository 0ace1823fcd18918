#!/bin/bash
# vm-timeout: 240
# Bring-up: the usnic component is installed and registers its parameters, and in a 2-host
# job (one rank on hostA, one on hostB, BTLs usnic,self only) each host opens its rxe device,
# creates both UD channels and publishes its modex, and the job completes.
. "$(dirname "$0")/lib.sh"

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

mpi_build hello
echo "== mpirun hello, btl usnic,self"
BTL=usnic,self mpirun_usnic --mca btl_base_verbose 100 "$WORK/hello" 2>&1 | tee "$WORK/mpirun.out"
rc=${PIPESTATUS[0]}
# opal_output may prefix "[host:pid] "; more ", name value" fields may follow the checked ones
P='^(\[[^]]*\] )?btl:usnic: ' MORE='(, .*)?$'
for x in A B; do
    ip=RXEVM_IP_$x; ip=${!ip}
    h="host$x: rxe$x"
    assert_grep "${P}$h: opened, port 1, netdev veth$x ${ip//./\\.}/24, GID index [0-9]+, MTU [0-9]+$MORE" \
        "$WORK/mpirun.out" "host$x opened rxe$x on veth$x"
    for ch in priority data; do
        assert_grep "${P}$h: $ch channel ready: CQ [0-9]+ entries, QP [0-9]+$MORE" \
            "$WORK/mpirun.out" "host$x rxe$x $ch channel ready"
    done
    assert_grep "${P}host$x: modex published for [1-9][0-9]* module\(s\)$" \
        "$WORK/mpirun.out" "host$x published its modex"
done
assert_grep '^hello: rank 0 of 2 on hostA$' "$WORK/mpirun.out" "rank 0 ran on hostA"
assert_grep '^hello: rank 1 of 2 on hostB$' "$WORK/mpirun.out" "rank 1 ran on hostB"
[ "$rc" = 0 ] || fail "mpirun exit code $rc"
pass "mpirun exit code 0"
