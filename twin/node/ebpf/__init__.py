"""The eBPF data plane: SRv6 uSID local SIDs for kernels without seg6local.

Standard library only (ctypes, socket, struct), so it runs in a node image
that has python3 and nothing else; bytecode is assembled in Python and loaded
with the bpf() syscall, with no clang, libbpf or bpftool. Imports inside the
package are relative, so it also works copied (or bind-mounted) elsewhere.

    asm        a tiny eBPF assembler
    programs   the programs, generated per node (SIDs, rates and thresholds as
               immediates), their counters, and the kernel's program tag
    bpf        the bpf() syscall: maps, programs, info, test runs
    netlink    rtnetlink: clsact, cls_bpf filters, lwt bpf routes

The public face, all acting on the calling thread's network namespace:

    load(kind, prefix, counters_fd) -> (prog_fd, tag)
    attach_fd(dev, prog_fd, name)
    attach(dev, kind, prefix, counters_fd) -> {dev, kind, prefix, prog_id, tag, name}
    detach(dev)
    counters_map(existing_prog_id) -> map fd
    read_counters(prog_id) -> {counter: total over CPUs}
    add_encap_route(dst, dev, src, path, flow_label, counters_fd) -> {...}
    del_route(dst, dev)
    install(entries, queues)  a node program's `bpf` part ({dev, kind, prefix, slot}
                            each) and its `queues` (twin.fabric.congestion.PortQueue as
                            dicts: egress programs), in place
    ports_map(existing_prog_ids, slots) -> map fd   a node's port map (fabric signals)
    load_queue(q, ports_fd) -> (prog_fd, tag), attach_queue(q, ports_fd),
    detach_queue(dev)       one port's queue program (q: a PortQueue's fields)
    read_ports(map_fd, slots) -> {slot: {field: value}}   the port map, read back
    filters(dev, egress), counters()  what is attached here, read back with `tc -j`
                            (twin.node.ebpf.tc: the one reader of its JSON)
    expected_tags(kind, prefix, slot), queue_tags(q)  the tags the kernel gives them
    probe(dev) -> None | why not (the kernel option missing)

`kind` is "uN" (a switch's SID, on every port), "decap" (a host port's
SID) or "ecn" (a host port's SID on seg6local: only RFC 6040's copy inward,
the kernel decapsulates). A filter's name is `mrc-un fcbb:bb00:100::/48`
(FILTER_NAMES), the program's kernel name `mrc_un`, `mrc_decap`, `mrc_encap`,
`mrc_queue` or `mrc_ecn_in`, and every SID program of a node counts into one
per-CPU array named `mrc_srv6_ctr`, in the order of COUNTERS. The fabric
signals (queue, and the RFC 6040 copy in decap and ecn) count per port into a
plain array named `mrc_port_q` (PORT_FIELDS, one slot per port: the N of
ethN). `python3 -m twin.node.ebpf counters --json` reads both back.
"""

from __future__ import annotations

import errno
import ipaddress
import os
import socket
import struct
import subprocess
import time

from . import bpf, netlink, programs, tc
from .bpf import BpfError
from .netlink import PREF, NetlinkError
from .programs import (
    COUNTERS,
    PORT_FIELDS,
    PORTS_MAP_NAME,
    TRIM_DSCP,
    TRIM_FRAME_LEN,
    TRIM_IP_LEN,
    port_slot,
)

__all__ = ["COUNTERS", "COUNTERS_MAP_NAME", "PORTS_MAP_NAME", "PORT_FIELDS", "PREF",
           "TRIM_DSCP", "TRIM_FRAME_LEN", "TRIM_IP_LEN", "BpfError", "NetlinkError",
           "add_encap_route", "attach", "attach_fd",
           "attach_queue", "counters", "counters_map", "del_route", "detach", "detach_queue",
           "expected_tags", "filter_name", "filters", "install", "load", "port_slot",
           "ports_map", "probe", "queue_name", "queue_tags", "read_counters", "read_map",
           "read_ports"]

COUNTERS_MAP_NAME = "mrc_srv6_ctr"
KINDS = ("uN", "decap", "ecn")
FILTER_NAMES = {"uN": "mrc-un", "decap": "mrc-decap", "encap": "mrc-encap", "ecn": "mrc-ecn",
                "queue": "mrc-queue"}


def queue_name(q: dict) -> str:
    """The name of a port's queue filter: `mrc-queue 50000000bit` (the thresholds are
    in its tag)."""
    return f"{FILTER_NAMES['queue']} {q['rate_bps']}bit"


def filter_name(kind: str, prefix: str) -> str:
    """The readable name our filter (or lwt route) carries: `mrc-un fcbb:bb00:100::/48`."""
    if kind == "encap":
        return f"{FILTER_NAMES[kind]} {ipaddress.IPv6Address(prefix).compressed}"
    net = ipaddress.IPv6Network(prefix, strict=False)
    return f"{FILTER_NAMES[kind]} {net.network_address.compressed}/{net.prefixlen}"


def _build(kind: str, prefix: str, counters_fd: int, slot: int | None = None,
           ports_fd: int = 0) -> bytes:
    if kind == "uN":
        return programs.un(prefix, counters_fd)
    if kind == "decap":
        return programs.decap(prefix, counters_fd, slot or 0, ports_fd)
    if kind == "ecn":
        return programs.ecn_in(prefix, slot or 0, ports_fd)
    raise ValueError(f"unknown eBPF program kind {kind!r} (valid: {', '.join(KINDS)})")


def load(kind: str, prefix: str, counters_fd: int, slot: int | None = None,
         ports_fd: int = 0) -> tuple[int, str]:
    """Load a TC program for one SID (decap and ecn: of the port in `slot` of the
    port map `ports_fd`); the caller owns (and closes) the fd. The same fd may be
    attached to several devices."""
    insns = _build(kind, prefix, counters_fd, slot, ports_fd)
    fd = bpf.prog_load(programs.PROG_TYPE_SCHED_CLS, insns, programs.NAMES[kind])
    return fd, bpf.prog_info(fd).tag


def load_queue(q: dict, ports_fd: int) -> tuple[int, str]:
    """Load a port's queue program (q: a PortQueue's fields); the caller closes the fd."""
    fd = bpf.prog_load(programs.PROG_TYPE_SCHED_CLS, programs.queue(q, ports_fd),
                       programs.NAMES["queue"])
    return fd, bpf.prog_info(fd).tag


def attach_queue(q: dict, ports_fd: int) -> dict:
    """The queue program of port q["dev"] at its TC egress (replacing ours in place)."""
    fd, tag = load_queue(q, ports_fd)
    try:
        netlink.ensure_clsact(q["dev"])
        netlink.replace_filter(q["dev"], fd, queue_name(q), egress=True)
        prog_id = bpf.prog_info(fd).id
    finally:
        os.close(fd)  # the filter holds the program now
    return {"dev": q["dev"], "prog_id": prog_id, "tag": tag, "name": queue_name(q)}


def detach_queue(dev: str) -> bool:
    """Remove our egress filter from dev; False if there was none."""
    return netlink.delete_filter(dev, egress=True)


def attach_fd(dev: str, prog_fd: int, name: str) -> None:
    """Our ingress filter on dev runs prog_fd (clsact made if missing; an
    earlier filter of ours replaced in place, so no packet goes unhandled)."""
    netlink.ensure_clsact(dev)
    netlink.replace_filter(dev, prog_fd, name)


def attach(dev: str, kind: str, prefix: str, counters_fd: int, slot: int | None = None,
           ports_fd: int | None = None) -> dict:
    """Load and attach one SID's program at dev's ingress. decap and ecn count into a
    port map: `ports_fd`, or a map of their own when None (slot: the N of ethN, else 0)."""
    own_ports = None
    if kind in ("decap", "ecn") and ports_fd is None:
        if slot is None:
            slot = port_slot(dev) if dev.removeprefix("eth").isdigit() else 0
        ports_fd = own_ports = ports_map([], slot + 1)
    try:
        fd, tag = load(kind, prefix, counters_fd, slot, ports_fd or 0)
    finally:
        if own_ports is not None:
            os.close(own_ports)  # the program holds the map now
    try:
        name = filter_name(kind, prefix)
        attach_fd(dev, fd, name)
        prog_id = bpf.prog_info(fd).id
    finally:
        os.close(fd)  # the filter holds the program now
    return {"dev": dev, "kind": kind, "prefix": prefix, "prog_id": prog_id, "tag": tag,
            "name": name}


def detach(dev: str) -> None:
    """Remove our ingress filter from dev; a missing one is fine."""
    netlink.delete_filter(dev)


def _map_of(prog_id: int, name: str = COUNTERS_MAP_NAME) -> int:
    """An fd for the map named `name` (the counters, or the port map) of a loaded
    program."""
    prog_fd = bpf.prog_fd_by_id(prog_id)
    try:
        map_ids = bpf.prog_info(prog_fd).map_ids
    finally:
        os.close(prog_fd)
    fds = [bpf.map_fd_by_id(map_id) for map_id in map_ids]
    found = None
    for fd in fds:
        if found is None and bpf.map_info(fd).name == name:
            found = fd
        else:
            os.close(fd)
    if found is None:
        raise BpfError(errno.ENOENT, f"program {prog_id} has no {name} map")
    return found


def ports_map(existing_prog_ids: list[int] = (), slots: int = 1) -> int:
    """An fd for a node's port map (fabric signals): the one a program of
    `existing_prog_ids` already uses, if it has room for `slots` ports (so
    re-programming a node keeps its queues and counts), else a new one."""
    for prog_id in existing_prog_ids:
        try:
            fd = _map_of(prog_id, PORTS_MAP_NAME)
        except BpfError as e:
            if e.errno != errno.ENOENT:
                raise
            continue
        if bpf.map_info(fd).max_entries >= slots:
            return fd
        os.close(fd)
    return bpf.map_create(PORTS_MAP_NAME, bpf.MAP_TYPE_ARRAY, 4, programs.PORT_VALUE_SIZE,
                          max(slots, 1))


def read_ports(map_fd: int, slots: list[int], now_ns: int | None = None) -> dict[int, dict]:
    """The port map's slots as {slot: {field: value}}, with `queue_bytes_now`: the
    depth at `now_ns` (CLOCK_MONOTONIC, what bpf_ktime_get_ns reads), drained from
    the last packet's at the port's rate."""
    now_ns = time.monotonic_ns() if now_ns is None else now_ns
    entries = bpf.map_info(map_fd).max_entries
    out = {}
    for slot in slots:
        if not 0 <= slot < entries:
            continue
        values = struct.unpack(f"={len(PORT_FIELDS)}Q",
                               bpf.lookup(map_fd, slot, programs.PORT_VALUE_SIZE))
        got = dict(zip(PORT_FIELDS, values, strict=True))
        backlog = max(0, got["busy_until_ns"] - now_ns)
        got["queue_bytes_now"] = backlog * got["rate_bps"] // (8 * programs.NS_PER_S)
        out[slot] = got
    return out


def counters_map(existing_prog_id: int | None = None) -> int:
    """An fd for a node's counters: the map of the program `existing_prog_id`
    (so re-programming a node keeps its counts) or, without one or if it is
    gone, a new map."""
    if existing_prog_id is not None:
        try:
            return _map_of(existing_prog_id)
        except BpfError as e:
            if e.errno != errno.ENOENT:
                raise
    return bpf.map_create(COUNTERS_MAP_NAME, bpf.MAP_TYPE_PERCPU_ARRAY, 4, 8, len(COUNTERS))


def read_map(map_fd: int) -> dict[str, int]:
    return {name: bpf.percpu_sum(map_fd, index) for index, name in enumerate(COUNTERS)}


def read_counters(prog_id: int) -> dict[str, int]:
    """A node's counters, summed over CPUs, found through one of its programs."""
    fd = _map_of(prog_id)
    try:
        return read_map(fd)
    finally:
        os.close(fd)


def add_encap_route(dst: str, dev: str, src: str, path: str, flow_label: int,
                    counters_fd: int) -> dict:
    """`dst/128 dev <dev> encap bpf xmit`: what the kernel sends to dst leaves
    inside an outer IPv6 header src -> path (a uSID carrier), flow label
    `flow_label`, next header 41, and is routed again on that outer DA."""
    insns = programs.encap(src, path, flow_label, counters_fd)
    fd = bpf.prog_load(programs.PROG_TYPE_LWT_XMIT, insns, programs.NAMES["encap"])
    try:
        info = bpf.prog_info(fd)
        name = filter_name("encap", path)
        netlink.replace_route(dst, dev, fd, name)
    finally:
        os.close(fd)  # the route holds the program now
    return {"dst": dst, "dev": dev, "path": path, "prog_id": info.id, "tag": info.tag,
            "name": name}


def del_route(dst: str, dev: str) -> None:
    """Remove dst/128 on dev; a missing one is fine."""
    netlink.delete_route(dst, dev)


PREFIX = "mrc-"
TC_TIMEOUT_S = 10


def filters(dev: str, egress: bool = False) -> list[dict]:
    """Our bpf filters on dev's ingress (or egress), as `tc -j filter show` reports
    them (the kernel's account, not ours): [{name, prog_id, tag}]; [] without a
    clsact."""
    hook = tc.EGRESS if egress else tc.INGRESS
    out = subprocess.run(["tc", "-j", "filter", "show", "dev", dev, hook],
                         capture_output=True, text=True, timeout=TC_TIMEOUT_S)
    if out.returncode != 0:  # no clsact on dev: tc says so, and there is nothing of ours
        return []
    return [{"name": f.name, "prog_id": f.prog_id, "tag": f.tag or ""}
            for f in tc.parse_show(out.stdout or "[]", dev, hook)
            if f.name is not None and f.name.startswith(PREFIX) and f.prog_id is not None]


def counters() -> dict:
    """This namespace's filters of ours, by device, and the node's counters (and the id of
    the map that holds them: twin's telemetry reads it by id from then on); its queue
    programs under "egress", and each port's fabric signals under "ports" (with the id
    of their map, "ports_map_id", and the slot of each port, "slots")."""
    report: dict = {}
    egress: dict = {}
    map_ids: set[int] = set()
    slots: dict[str, int] = {}
    for _, dev in socket.if_nameindex():
        for hook, found in ([("ingress", f) for f in filters(dev)]
                            + [("egress", f) for f in filters(dev, egress=True)]):
            (report if hook == "ingress" else egress)[dev] = found
            fd = bpf.prog_fd_by_id(found["prog_id"])
            try:
                map_ids.update(bpf.prog_info(fd).map_ids)
            finally:
                os.close(fd)
            if not found["name"].startswith(FILTER_NAMES["uN"] + " "):
                try:
                    slots[dev] = port_slot(dev)
                except ValueError:
                    pass
    totals = dict.fromkeys(COUNTERS, 0)
    ports: dict = {}
    for map_id in sorted(map_ids):
        fd = bpf.map_fd_by_id(map_id)
        try:
            name = bpf.map_info(fd).name
            if name == COUNTERS_MAP_NAME:
                for counter, value in read_map(fd).items():
                    totals[counter] += value
                report["map_id"] = map_id
            elif name == PORTS_MAP_NAME:
                by_slot = read_ports(fd, sorted(set(slots.values())))
                ports = {dev: by_slot[slot] for dev, slot in sorted(slots.items())
                         if slot in by_slot}
                report["ports_map_id"] = map_id
        finally:
            os.close(fd)
    report["counters"] = totals
    report["egress"] = egress
    report["ports"] = ports
    report["slots"] = slots
    return report


def install(entries: list[dict], queues: list[dict] = ()) -> None:
    """A node's local SIDs (the node program's `bpf` part: {dev, kind, prefix, slot}):
    each SID's program loaded once and attached to its ports, replacing what is there
    in place; and its ports' queue programs (`queues`, at TC egress). The node's maps
    are the ones its programs already use, if any, so re-programming a node keeps its
    counts and its queues."""
    # a node programmed before has ours on its ports: its first ports tell
    existing = [f["prog_id"] for e in entries[:1] for f in filters(e["dev"])]
    existing += [f["prog_id"] for q in queues[:1] for f in filters(q["dev"], egress=True)]
    slots = max([e.get("slot") or 0 for e in entries] + [q["slot"] for q in queues] + [0]) + 1
    signals = bool(queues) or any(e["kind"] in ("decap", "ecn") for e in entries)
    counters_fd = counters_map(existing[0] if existing else None)
    ports_fd = ports_map(existing, slots) if signals else 0
    try:
        by_sid: dict[tuple[str, str, int | None], list[str]] = {}
        for e in entries:
            slot = e.get("slot") if e["kind"] != "uN" else None
            by_sid.setdefault((e["kind"], e["prefix"], slot), []).append(e["dev"])
        for (kind, prefix, slot), devs in by_sid.items():
            fd, _ = load(kind, prefix, counters_fd, slot, ports_fd)
            try:
                for dev in devs:
                    attach_fd(dev, fd, filter_name(kind, prefix))
            finally:
                os.close(fd)  # the filters hold the program now
        for q in queues:
            attach_queue(q, ports_fd)
    finally:
        os.close(counters_fd)
        if ports_fd:
            os.close(ports_fd)


def expected_tags(kind: str, prefix: str, slot: int | None = None) -> set[str]:
    """The tags the kernel gives the program of this SID: SHA-1 before Linux 6.18 and
    SHA-256 since (programs.tag_digest), either accepted so that a node's kernel need not
    be this machine's."""
    insns = _build(kind, prefix, 0, slot)  # map fds are zeroed in the tag
    return {programs.tag(insns, digest) for digest in ("sha1", "sha256")}


def queue_tags(q: dict) -> set[str]:
    """The tags the kernel gives a port's queue program (either hash, as above)."""
    insns = programs.queue(q, 0)
    return {programs.tag(insns, digest) for digest in ("sha1", "sha256")}


def probe(dev: str) -> str | None:
    """Whether this kernel runs our programs: load a two-instruction TC program, attach
    it at dev's clsact ingress and take it off again. None, or why not with the kernel
    option that is missing."""
    insns = programs.asm.assemble([programs.asm.mov64_imm(0, 0), programs.asm.exit_()])
    try:
        fd = bpf.prog_load(programs.PROG_TYPE_SCHED_CLS, insns, "mrc_probe")
    except BpfError as e:
        if e.errno == errno.ENOSYS:
            return "no bpf() system call (CONFIG_BPF_SYSCALL)"
        if e.errno == errno.EPERM:
            return "loading BPF programs is not permitted here (CAP_BPF or CAP_SYS_ADMIN)"
        return f"a TC program does not load: {e} (CONFIG_NET_CLS_BPF)"
    try:
        try:
            netlink.ensure_clsact(dev)
        except NetlinkError as e:
            return f"no clsact qdisc: {e} (CONFIG_NET_SCH_INGRESS)"
        try:
            netlink.replace_filter(dev, fd, "mrc-probe")
        except NetlinkError as e:
            return f"no bpf classifier: {e} (CONFIG_NET_CLS_BPF)"
        netlink.delete_filter(dev)
        return None
    finally:
        os.close(fd)
