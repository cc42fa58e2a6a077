#!/bin/sh
# Captures the kernel's own route output for tests/unit/test_routes_iproute2.py (root).
# Run from the repository root: sh tests/data/routes/capture.sh <python>
# Each capture is a network namespace shaped like a node (eth1..eth4, veth peers in a
# second namespace, sr0 an ifb), its routes installed with `ip -6 -batch`, read back with
# `ip -6 route show` and `ip -j -6 route show`, then deleted.
set -eu
PY=${1:-python3}
OUT=tests/data/routes
NS=rtfmt-$$
cleanup() { ip netns del "$NS" 2>/dev/null || true; ip netns del "$NS-peer" 2>/dev/null || true; }
trap cleanup EXIT

node() {  # node <name> "<eth1..eth4 link-locals>" <lo address or ""> <batch file> <show args>
    ip netns add "$NS"; ip netns add "$NS-peer"
    ip netns exec "$NS" sysctl -qw net.ipv6.conf.all.forwarding=1 \
        net.ipv6.conf.default.addr_gen_mode=1 net.ipv6.conf.all.seg6_enabled=1
    ip -n "$NS" link set lo up
    ip -n "$NS" link add sr0 type ifb && ip -n "$NS" link set sr0 up
    i=1
    for a in $2; do
        ip -n "$NS" link add "eth$i" type veth peer name "p$i" netns "$NS-peer"
        ip -n "$NS" link set "eth$i" up && ip -n "$NS-peer" link set "p$i" up
        ip -n "$NS" addr add "$a/64" dev "eth$i" nodad
        i=$((i + 1))
    done
    [ -z "$3" ] || ip -n "$NS" addr add "$3" dev lo
    ip -n "$NS" -6 -force -batch "$4" || true   # the zoo holds lines the kernel refuses
    ip -n "$NS-peer" link set p3 down            # eth3 loses carrier: a linkdown flag
    n=0; until ip -n "$NS" link show eth3 | grep -q NO-CARRIER; do   # poll, bounded
        n=$((n + 1)); [ $n -lt 50 ] || exit 1; sleep 0.1
    done
    ip -n "$NS" -6 route show $5 > "$OUT/$1.route-show.txt"
    ip -n "$NS" -j -6 route show $5 > "$OUT/$1.route-show.json"
    cleanup
}

plan_batch() {  # twin's own batch lines for a node of mrc-4p, as the lab installs them
    $PY -c "
from twin.dataplane.seg6local import route_line
from twin.lab.compile import compile_spec
n = compile_spec('mrc-4p').plan['$1']
print('\n'.join([r.iproute2() for r in n.routes] + [route_line(s) for s in n.sids]))"
}

T0="fe80::100 fe80::100 fe80::100 fe80::100"
HOST="fe80::300 fe80::1300 fe80::2300 fe80::3300"
NIC=fd00:4d52:43::1/128
plan_batch t0-p0-r0 > "/tmp/$NS.batch" && node t0-p0-r0 "$T0" "" "/tmp/$NS.batch" ""
plan_batch r0h0 > "/tmp/$NS.batch" && node r0h0 "$HOST" "$NIC" "/tmp/$NS.batch" ""
rm -f "/tmp/$NS.batch"
node zoo "$T0" "$NIC" "$OUT/zoo.batch" "table all"
