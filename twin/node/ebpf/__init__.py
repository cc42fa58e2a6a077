"""The eBPF data plane: SRv6 uSID local SIDs for kernels without seg6local.

Standard library only (ctypes, socket, struct), so it runs in a node image
that has python3 and nothing else; bytecode is assembled in Python and loaded
with the bpf() syscall, with no clang, libbpf or bpftool. Imports inside the
package are relative, so it also works copied (or bind-mounted) elsewhere.

    asm        a tiny eBPF assembler
    programs   the three programs, generated per node (SIDs as immediates),
               their counters, and the kernel's program tag
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
    install(entries)        a node program's `bpf` part ({dev, kind, prefix} each), in place
    filters(dev), counters()  what is attached here, read back with `tc -j`
    expected_tags(kind, prefix)  the tags the kernel gives that SID's program
    probe(dev) -> None | why not (the kernel option missing)

`kind` is "uN" (a switch's SID, on every port) or "decap" (a host port's
SID). A filter's name is `mrc-un fcbb:bb00:100::/48` (FILTER_NAMES), the
program's kernel name `mrc_un`, `mrc_decap` or `mrc_encap`, and every program
of a node counts into one per-CPU array named `mrc_srv6_ctr`, in the order
of COUNTERS. `python3 -m twin.node.ebpf counters --json` reads them back.
"""

from __future__ import annotations

import errno
import ipaddress
import json
import os
import socket
import subprocess

from . import bpf, netlink, programs
from .bpf import BpfError
from .netlink import PREF, NetlinkError
from .programs import COUNTERS

__all__ = ["COUNTERS", "COUNTERS_MAP_NAME", "PREF", "BpfError", "NetlinkError",
           "add_encap_route", "attach", "attach_fd", "counters", "counters_map", "del_route",
           "detach", "expected_tags", "filter_name", "filters", "install", "load", "probe",
           "read_counters", "read_map"]

COUNTERS_MAP_NAME = "mrc_srv6_ctr"
KINDS = ("uN", "decap")
FILTER_NAMES = {"uN": "mrc-un", "decap": "mrc-decap", "encap": "mrc-encap"}


def filter_name(kind: str, prefix: str) -> str:
    """The readable name our filter (or lwt route) carries: `mrc-un fcbb:bb00:100::/48`."""
    if kind == "encap":
        return f"{FILTER_NAMES[kind]} {ipaddress.IPv6Address(prefix).compressed}"
    net = ipaddress.IPv6Network(prefix, strict=False)
    return f"{FILTER_NAMES[kind]} {net.network_address.compressed}/{net.prefixlen}"


def _build(kind: str, prefix: str, counters_fd: int) -> bytes:
    if kind == "uN":
        return programs.un(prefix, counters_fd)
    if kind == "decap":
        return programs.decap(prefix, counters_fd)
    raise ValueError(f"unknown eBPF program kind {kind!r} (valid: {', '.join(KINDS)})")


def load(kind: str, prefix: str, counters_fd: int) -> tuple[int, str]:
    """Load a TC program for one SID; the caller owns (and closes) the fd. The
    same fd may be attached to several devices."""
    insns = _build(kind, prefix, counters_fd)
    fd = bpf.prog_load(programs.PROG_TYPE_SCHED_CLS, insns, programs.NAMES[kind])
    return fd, bpf.prog_info(fd).tag


def attach_fd(dev: str, prog_fd: int, name: str) -> None:
    """Our ingress filter on dev runs prog_fd (clsact made if missing; an
    earlier filter of ours replaced in place, so no packet goes unhandled)."""
    netlink.ensure_clsact(dev)
    netlink.replace_filter(dev, prog_fd, name)


def attach(dev: str, kind: str, prefix: str, counters_fd: int) -> dict:
    fd, tag = load(kind, prefix, counters_fd)
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


def _map_of(prog_id: int) -> int:
    """An fd for the counters map of a loaded program."""
    prog_fd = bpf.prog_fd_by_id(prog_id)
    try:
        map_ids = bpf.prog_info(prog_fd).map_ids
    finally:
        os.close(prog_fd)
    fds = [bpf.map_fd_by_id(map_id) for map_id in map_ids]
    found = None
    for fd in fds:
        if found is None and bpf.map_info(fd).name == COUNTERS_MAP_NAME:
            found = fd
        else:
            os.close(fd)
    if found is None:
        raise BpfError(errno.ENOENT, f"program {prog_id} has no {COUNTERS_MAP_NAME} map")
    return found


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


def filters(dev: str) -> list[dict]:
    """Our bpf filters on dev's ingress, as `tc -j filter show` reports them (the
    kernel's account, not ours): [{name, prog_id, tag}]; [] without a clsact."""
    out = subprocess.run(["tc", "-j", "filter", "show", "dev", dev, "ingress"],
                         capture_output=True, text=True, timeout=TC_TIMEOUT_S)
    if out.returncode != 0:  # no clsact on dev: tc says so, and there is nothing of ours
        return []
    found = []
    for entry in json.loads(out.stdout or "[]"):
        options = entry.get("options", {})
        name = options.get("bpf_name", "")
        prog = options.get("prog", {})
        if entry.get("kind") == "bpf" and name.startswith(PREFIX) and "id" in prog:
            found.append({"name": name, "prog_id": prog["id"], "tag": prog.get("tag", "")})
    return found


def counters() -> dict:
    """This namespace's filters of ours, by device, and the node's counters (and the id of
    the map that holds them: twin's telemetry reads it by id from then on)."""
    report: dict = {}
    map_ids: set[int] = set()
    for _, dev in socket.if_nameindex():
        for found in filters(dev):
            report[dev] = found
            fd = bpf.prog_fd_by_id(found["prog_id"])
            try:
                map_ids.update(bpf.prog_info(fd).map_ids)
            finally:
                os.close(fd)
    totals = dict.fromkeys(COUNTERS, 0)
    for map_id in sorted(map_ids):
        fd = bpf.map_fd_by_id(map_id)
        try:
            if bpf.map_info(fd).name != COUNTERS_MAP_NAME:
                continue
            for name, value in read_map(fd).items():
                totals[name] += value
            report["map_id"] = map_id
        finally:
            os.close(fd)
    report["counters"] = totals
    return report


def install(entries: list[dict]) -> None:
    """A node's local SIDs (the node program's `bpf` part: {dev, kind, prefix}): each
    SID's program loaded once and attached to its ports, replacing what is there in
    place. The node's counters map is the one its programs already count into, if any,
    so re-programming a node keeps its counts."""
    # a node programmed before has ours on every port: its first port tells
    existing = next((f["prog_id"] for f in filters(entries[0]["dev"])), None) \
        if entries else None
    counters_fd = counters_map(existing)
    try:
        by_sid: dict[tuple[str, str], list[str]] = {}
        for e in entries:
            by_sid.setdefault((e["kind"], e["prefix"]), []).append(e["dev"])
        for (kind, prefix), devs in by_sid.items():
            fd, _ = load(kind, prefix, counters_fd)
            try:
                for dev in devs:
                    attach_fd(dev, fd, filter_name(kind, prefix))
            finally:
                os.close(fd)  # the filters hold the program now
    finally:
        os.close(counters_fd)


def expected_tags(kind: str, prefix: str) -> set[str]:
    """The tags the kernel gives the program of this SID: SHA-1 before Linux 6.18 and
    SHA-256 since (programs.tag_digest), either accepted so that a node's kernel need not
    be this machine's."""
    insns = _build(kind, prefix, 0)  # the map fd is zeroed in the tag
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
