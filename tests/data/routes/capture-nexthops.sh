#!/bin/sh
# Captures nexthop objects, routes through them (nhid), rules and a second table, as each
# given iproute2 prints them, for tests/unit/test_routes_iproute2_versions.py (root).
# Run from the repository root:
#   sh tests/data/routes/capture-nexthops.sh <python> <ip> [<ip> ...]
# e.g. sh tests/data/routes/capture-nexthops.sh .venv/bin/python /sbin/ip /tmp/iproute2-6.19/ip/ip
# The routes go in once per namespace (with the first <ip>, a line at a time); every <ip> then reads the same
# kernel state back into tests/data/routes/ip-<its version>/. Needs no seg6local: the
# kernel this runs on may lack it (the SIDs of these nodes are not installed).
set -eu
PY=$1; shift
OUT=tests/data/routes
NS=${NS:-rtnh-$$}
cleanup() { ip netns del "$NS" 2>/dev/null || true; ip netns del "$NS-peer" 2>/dev/null || true; }
trap cleanup EXIT

node() {  # node <name> "<eth1..eth4 link-locals>" <batch file>: installs, shows, deletes
    ip netns add "$NS"; ip netns add "$NS-peer"
    ip netns exec "$NS" sysctl -qw net.ipv6.conf.all.forwarding=1 \
        net.ipv6.conf.default.addr_gen_mode=1
    ip -n "$NS" link set lo up
    i=1
    for a in $2; do
        ip -n "$NS" link add "eth$i" type veth peer name "p$i" netns "$NS-peer"
        ip -n "$NS" link set "eth$i" up && ip -n "$NS-peer" link set "p$i" up
        ip -n "$NS" addr add "$a/64" dev "eth$i" nodad
        i=$((i + 1))
    done
    while read -r line; do  # one command a line: a group takes no -6, the rest do
        "$IP1" -n "$NS" $line
    done < "$3"
    for ip in $IPS; do
        v=$("$ip" -V | sed -n 's/.*iproute2-\([0-9.]*\).*/\1/p')
        d="$OUT/ip-$v" && mkdir -p "$d"
        "$ip" -n "$NS" -6 route show table all > "$d/$1.route-show.txt"
        "$ip" -n "$NS" -j -6 route show table all > "$d/$1.route-show.json"
        "$ip" -n "$NS" -d -6 route show table all > "$d/$1.route-show-d.txt"
        "$ip" -n "$NS" -d -j -6 route show table all > "$d/$1.route-show-d.json"
        "$ip" -n "$NS" -6 nexthop show > "$d/$1.nexthop-show.txt"
        "$ip" -n "$NS" -j -6 nexthop show > "$d/$1.nexthop-show.json"
        "$ip" -n "$NS" -6 rule show > "$d/$1.rule-show.txt"
        "$ip" -n "$NS" -j -6 rule show > "$d/$1.rule-show.json"
    done
    cleanup
}

plan_routes() {  # mrc-4p's routes for a node through nexthop objects, one per (via, dev)
    $PY -c "
from twin.lab.compile import compile_spec
n = compile_spec('mrc-4p').plan['$1']
ids = {}
for r in n.routes:
    if (r.via, r.dev) not in ids:
        ids[(r.via, r.dev)] = len(ids) + 1
        print(f'-6 nexthop add id {ids[(r.via, r.dev)]} via {r.via} dev {r.dev} proto static')
for r in n.routes:
    print(f'-6 route add {r.dst} nhid {ids[(r.via, r.dev)]} proto static')"
}

IP1=$1 IPS="$*"
T0="fe80::100 fe80::100 fe80::100 fe80::100"
plan_routes t0-p0-r0 > "/tmp/$NS.batch" && node t0-p0-r0 "$T0" "/tmp/$NS.batch"
rm -f "/tmp/$NS.batch"
node nh-zoo "$T0" "$OUT/nh-zoo.batch"
