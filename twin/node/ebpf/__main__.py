"""The eBPF data plane of this network namespace, from the command line:

    python3 -m twin.node.ebpf counters [--json]
        our filters (named mrc-*) on every interface's TC ingress, as `tc -j filter
        show` reports them (the kernel's own account, not ours), and the node's
        counters summed over CPUs from the map those programs count into:
        {"eth1": {"name": "mrc-un fcbb:bb00:100::/48", "prog_id": 41, "tag": "..."},
         ..., "counters": {"shifted": 12, ...}, "map_id": 7,
         "egress": {"eth1": {"name": "mrc-queue 50000000bit", ...}},
         "ports": {"eth1": {"queue_bytes_now": 0, "ce_marked": 3, ...}},
         "ports_map_id": 8, "slots": {"eth1": 1}}
        (the fabric signals: queue programs at TC egress, and per port the
        virtual queue and what it did; see docs/ebpf.md)
    python3 -m twin.node.ebpf encap DST DEV SRC PATH [--flow-label N]
        route DST/128 out of DEV through an encap program: what this node's kernel
        sends to DST leaves IPv6-in-IPv6, SRC -> PATH (the kernel TCP baselines)
    python3 -m twin.node.ebpf queue JSON
        (re)attach one port's queue program at its TC egress: JSON holds a
        twin.fabric.congestion.PortQueue's fields (dev, slot, rate_bps, ecn_min,
        ecn_max, mark, trim, drop); the node's port map is kept (a link-rate fault
        re-shapes a port and its queue drains at the new rate)

Runs with python3 alone (node images); exit status 1 with a message on stderr
when the kernel or tc refuses.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys

from . import (
    FILTER_NAMES,
    BpfError,
    add_encap_route,
    attach_queue,
    counters,
    counters_map,
    filters,
    ports_map,
)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m twin.node.ebpf",
                                     description="the eBPF data plane of this network namespace")
    sub = parser.add_subparsers(dest="command", required=True)
    show = sub.add_parser("counters", help=f"our filters ({', '.join(FILTER_NAMES.values())}) "
                                           "and the node's counters")
    show.add_argument("--json", action="store_true", help="one JSON object")
    enc = sub.add_parser("encap", help="DST/128 out of DEV, encapsulated SRC -> PATH")
    for name in ("dst", "dev", "src", "path"):
        enc.add_argument(name)
    enc.add_argument("--flow-label", type=int, default=0)
    que = sub.add_parser("queue", help="(re)attach one port's queue program at its egress")
    que.add_argument("json", help="the port's PortQueue fields, as a JSON object")
    args = parser.parse_args(argv)
    if args.command == "queue":
        try:
            q = json.loads(args.json)
            existing = [f["prog_id"] for f in _all_filters()]
            existing += [f["prog_id"] for _, dev in socket.if_nameindex()
                         for f in filters(dev, egress=True)]
            fd = ports_map(existing, q["slot"] + 1)
            try:
                attach_queue(q, fd)
            finally:
                os.close(fd)
        except (OSError, ValueError, KeyError) as e:
            print(f"ebpf queue: {e}", file=sys.stderr)
            return 1
        return 0
    if args.command == "encap":
        try:
            existing = next((f["prog_id"] for f in _all_filters()), None)
            fd = counters_map(existing)
            try:
                add_encap_route(args.dst, args.dev, args.src, args.path, args.flow_label, fd)
            finally:
                os.close(fd)
        except OSError as e:
            print(f"ebpf encap: {e}", file=sys.stderr)
            return 1
        return 0
    try:
        report = counters()
    except (BpfError, OSError, subprocess.SubprocessError, ValueError) as e:
        print(f"ebpf counters: {e}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(report, sort_keys=True))
        return 0
    meta = ("counters", "map_id", "egress", "ports", "ports_map_id", "slots")
    for dev, found in sorted(report.items()):
        if dev not in meta:
            print(f"{dev}: {found['name']} (prog {found['prog_id']}, tag {found['tag']})")
    for dev, found in sorted(report["egress"].items()):
        print(f"{dev} egress: {found['name']} (prog {found['prog_id']}, tag {found['tag']})")
    for name, value in report["counters"].items():
        print(f"{name}: {value}")
    for dev, port in sorted(report["ports"].items()):
        shown = ", ".join(f"{k} {v}" for k, v in port.items()
                          if v and k not in ("busy_until_ns", "rate_bps"))
        print(f"{dev} signals: {shown or 'none yet'}")
    return 0


def _all_filters() -> list[dict]:
    return [f for _, dev in socket.if_nameindex() for f in filters(dev)]


if __name__ == "__main__":
    sys.exit(main())
