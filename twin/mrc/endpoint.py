"""The MRC endpoint daemon: one per GPU host, inside the host's network namespace.

    python -m twin.mrc.endpoint --config endpoint.json --control endpoint.sock

Data path (one thread, one loop):
    send   Sender.poll -> a precomputed DataTemplate per (QP, EV) -> an IPPROTO_RAW
           socket writes the whole IPv6-in-IPv6 packet onto the EV's uSID path
    recv   the host's End.DT6 decap delivers the inner packet to a UDP socket on
           [NIC]:4791 (UDP_NO_CHECK6_RX: checksum 0, integrity from the RoCEv2 ICRC,
           checked against the peer address, port and flow label the socket reports)
    acks   SACKs and NAKs go back the way the data packet came (its plane and T1,
           reversed): one reverse EV per forward path, its entropy from the QP's rng.
           Coalesced per receive batch: of a QP's plain SACKs (every 2nd packet) only
           the last of a batch is sent, since it says all the others did; a SACK that
           answers a duplicate, an ACK request or a message's last packet goes at once.
    ports  the host's NIC port state comes from netlink link events (RTNLGRP_LINK):
           a port that goes down stops its plane locally and, through the port-state
           bitmap in every SACK, at the peers

Two implementations of send and recv, the same bytes on the wire (MRC_TWIN_DATAPATH):
    compiled  twin.mrc._fastpath, built by `pip install` from _fastpath.c: a window's
              packets built in C from the transport's TxPackets and sent with one
              sendmmsg straight from the source buffer; recvmmsg of up to RX_SLOTS
              datagrams into a ring, ICRC checked and headers parsed in C, payloads
              placed from the ring. The default where it is built (auto).
    python    the standard library only: one sendto / recvmsg per packet, wire's
              encoder and decoder. Where the module is missing (a container whose
              Python cannot load it), or asked for with MRC_TWIN_DATAPATH=python.

Idle, the loop blocks in its selector (UDP, control, netlink sockets) with no
timeout; the 1 ms transport timer and the probe timer run only while a QP has
work for them.

Control: newline-delimited JSON on a unix socket, one request per line, one reply
per request (`wait` replies when its write completes). Requests:

    hello                          who am I: host, NIC, planes
    recv_qp   {size, seed}         register a receive buffer: {qpn, rkey}
    send_qp   {peer, peer_qpn, rkey, size, mode, evs, seed}   a sending QP: {qpn}
    connect   {qpn, peer, peer_qpn}   tell a receiving QP its sender (ACKs go there)
    deny      {qpn, evs}           put EVs on the QP's denylist
    write     {qpn, size, offset, imm}   post an RDMA WRITE (WRITE_IMM with imm)
    wait      {qpn, timeout}       reply when the QP is idle, failed or timed out
    digest    {qpn, size, offset}  sha256 of a QP's buffer (source or destination)
    guards                         whether every buffer's guard bytes are intact
    events    {qpn}                a sending QP's event log (CLOCK_MONOTONIC ns and us)
                                   and its acked bytes per 1 ms bin and plane
    stats                          every QP's counters, as JSON (schema: twin.mrc.stats)
    metrics                        the same in Prometheus text format
    close     {qpn}

Hostile input. A packet is checked before anything of it is believed, and each drop
is counted by reason (stats.EndpointDrops): too short, malformed, a bad ICRC, no such
QP, a wrong rkey, VA + length outside the buffer, a PSN too far ahead, a duplicate, an
ACK for a PSN never sent. Every registered buffer sits between guard bytes
(twin.mrc.buffer), which the `guards` op checks. The control socket is mode 0600; a
request is refused with an error reply when it is not a JSON object, names an unknown
op or has an argument of the wrong type or range (sizes are capped by the memory
there is); a line longer than MAX_LINE closes the connection, and replies are queued
and written as the client reads, so a client that stops reading only loses its own
connection (at MAX_PENDING bytes), never stalls the datapath.

Seeds make runs reproducible: a QP's EV set, rkey and reverse EVs come from
generators seeded with (host, QP number, the request's seed).

Imports only the standard library, PyYAML and twin's pure modules, so it runs with
the bind-mounted code inside a host container.
"""

from __future__ import annotations

import argparse
import faulthandler
import fcntl
import gc
import hashlib
import json
import math
import os
import random
import selectors
import signal
import socket
import struct
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from twin import unixsock
from twin.errors import UsageError
from twin.fabric.model import build_fabric
from twin.fabric.paths import ENTROPY_SHIFT, PLANE_BITS, ev_fields, route
from twin.fabric.plan import nic_address
from twin.fabric.spec import parse_spec
from twin.mrc import wire
from twin.mrc.buffer import GuardedBuffer
from twin.mrc.evset import EvSet
from twin.mrc.stats import (
    EndpointDrops,
    EndpointStats,
    EndpointTotals,
    MessageLatency,
    RecvQpStats,
    SenderCounters,
    SendQpStats,
)
from twin.mrc.transport import (
    EVENT_KINDS,
    MODES,
    QpFailed,
    Receiver,
    RxPacket,
    SackReport,
    Sender,
    SenderConfig,
    queueing_target_ns,
)

RECV_BATCH = 256
RX_SLOTS = 64  # datagrams per recvmmsg (compiled data path)
RECV_BUF = wire.MTU + 256
ANC_BUF = socket.CMSG_SPACE(4)  # one IPV6_FLOWINFO cmsg
SEND_BUDGET = 64
TIMER_NS = 1_000_000
DELAYED_ACK_NS = 200_000
PORT_POLL_NS = 5_000_000  # only where netlink link events are unavailable
PROBE_NS = 10_000_000  # background EV probes of retired EVs, per QP
PROBE_TIMEOUT_NS = 50_000_000
PROBES_PER_ROUND = 8
PEERS_CACHED = 1024
ROUTES_CACHED = 1 << 16  # (host, plane, T1): every path of a 64-host, 8x16 fabric fits
SO_RCVBUFFORCE, SO_SNDBUFFORCE = 33, 32
SIOCGIFFLAGS, IFF_UP, IFF_RUNNING = 0x8913, 0x1, 0x40
RTMGRP_LINK = 1
MAX_LINE = 1 << 20  # control request bytes without a newline before the client is cut off
MAX_PENDING = 64 << 20  # reply bytes a client may leave unread before it is cut off
MAX_CLIENTS = 256  # control connections at once; more are accepted and closed
MAX_BUFFER = 1 << 34  # a registered buffer's ceiling, whatever the memory (16 GiB)
MAX_EVS = 4096

# Where each BadPacket reason is counted (stats.EndpointDrops)
_DROP_OF_REASON = {"short": "truncated", "icrc": "bad_icrc", "opcode": "malformed",
                   "length": "malformed", "syndrome": "malformed"}
# Drops the endpoint counts itself; the rest are its QPs' transport counters
_ENDPOINT_DROPS = ("truncated", "malformed", "bad_icrc", "unknown_qp", "bad_rkey",
                   "out_of_bounds")


_PATH_MASK = (1 << ENTROPY_SHIFT) - 1  # an EV's plane and T1: which path it takes
_PLANE_MASK = (1 << PLANE_BITS) - 1  # an EV's plane


def now_ns() -> int:
    return time.monotonic_ns()


DATAPATHS = ("auto", "compiled", "python")
DATAPATH_ENV = "MRC_TWIN_DATAPATH"


def load_datapath(asked: str | None = None):
    """(the compiled module or None, "compiled" or "python: why"), as MRC_TWIN_DATAPATH
    asks: auto (compiled where it is built), compiled (refuse to run without it), python."""
    asked = asked or os.environ.get(DATAPATH_ENV, "auto")
    if asked not in DATAPATHS:
        raise UsageError(f"{DATAPATH_ENV}={asked!r}: want one of {', '.join(DATAPATHS)}")
    if asked == "python":
        return None, "python: asked for"
    try:
        from twin.mrc import _fastpath
    except ImportError as e:
        if asked == "compiled":
            raise UsageError(f"{DATAPATH_ENV}=compiled, but twin.mrc._fastpath does not "
                             f"load ({e}); `pip install -e .` builds it with gcc") from e
        return None, f"python: the compiled data path does not load ({e})"
    return _fastpath, "compiled"


@dataclass
class RecvQp:
    qpn: int
    rkey: int
    mem: GuardedBuffer  # buf is its view: the registered bytes, guards either side
    buf: memoryview
    receiver: Receiver
    rng: random.Random
    peer_nic: str | None = None
    peer_qpn: int = 0  # the sending QP at the peer: ACKs are addressed to it
    # path (plane | t1 << 4) -> reverse EV, and its framer and segment list
    rev_evs: dict[int, int] = field(default_factory=dict)
    framers: dict[int, tuple[wire.Framer, str]] = field(default_factory=dict)
    last_pkt: RxPacket | None = None
    last_data_ns: int = 0
    bad_rkey: int = 0


@dataclass
class SendQp:
    qpn: int
    peer: str
    peer_nic: str
    peer_qpn: int
    rkey: int
    mem: GuardedBuffer  # src is its view
    src: memoryview
    sender: Sender
    mode: str
    templates: dict[int, wire.DataTemplate] = field(default_factory=dict)
    paths: dict[int, str] = field(default_factory=dict)  # EV -> uSID program
    started_ns: int = 0
    first_write_ns: int = 0
    done_ns: int = 0
    waiters: list = field(default_factory=list)
    send_errors: int = 0
    probes: dict[int, int] = field(default_factory=dict)  # retired EV -> probe sent ns
    probes_sent: int = 0

    @property
    def cache_max(self) -> int:
        """Templates and paths kept: a few per slot of the EV set, then the dead go."""
        return 4 * self.sender.evs.size + 16


class Endpoint:
    def __init__(self, config: dict, control: str):
        self.cfg = config
        self.host = config["host"]
        self.nic = config["nic"]
        self.nic_packed = socket.inet_pton(socket.AF_INET6, self.nic)
        self.ports: dict[int, str] = {int(p): ifname for p, ifname in config["ports"].items()}
        self.fabric = build_fabric(parse_spec(config["spec"], "endpoint.json"))
        self.me = self.fabric.node(self.host)
        self._hosts_by_nic = {str(nic_address(self.fabric, h)): h for h in self.fabric.hosts}
        self._peers: dict[str, bytes] = {}  # peer address text -> packed
        self._routes: dict[tuple[str, int, int], str] = {}  # (host, plane, T1) -> uSIDs
        # The paths (plane | t1 << 4) of this fabric. An EV from the wire may name any
        # (its plane and T1 are flow-label bits anyone can set): replies use these only.
        self._path_keys = sorted(p | t << 4 for p in self.fabric.nic_planes
                                 for t in range(self.fabric.spec.t1_per_plane))
        self._path_set = frozenset(self._path_keys)
        self.recv_qps: dict[int, RecvQp] = {}
        self.send_qps: dict[int, SendQp] = {}
        self._next_qpn = 1
        self.drops = dict.fromkeys(_ENDPOINT_DROPS, 0)
        self.totals = {"bytes_sent": 0, "bytes_placed": 0, "retransmits": 0,
                       "ev_retirements": 0}
        # per plane, over the endpoint's life: payload sent (retransmissions included)
        # and placed (duplicates not), for per-plane telemetry across QPs come and gone
        self.tx_plane_bytes: dict[int, int] = {p: 0 for p in self.fabric.nic_planes}
        self.rx_plane_bytes: dict[int, int] = {p: 0 for p in self.fabric.nic_planes}
        # the QPs' own drop counters, of QPs closed before
        self._closed_drops = {"duplicate": 0, "psn_window": 0, "ack_unsent": 0}
        self._clients = 0
        self._pending_sacks: dict[int, tuple[RecvQp, SackReport]] = {}  # coalesced
        self._next_timer = self._next_probe = self._next_port_poll = 0
        self._open_sockets(control)
        self.port_bitmap = self._read_ports()

    # -- sockets ----------------------------------------------------------------

    def _open_sockets(self, control: str) -> None:
        self.raw = socket.socket(socket.AF_INET6, socket.SOCK_RAW, socket.IPPROTO_RAW)
        self.udp = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
        wire.allow_zero_udp_checksum(self.udp)
        wire.receive_flow_labels(self.udp)
        for sock, opt in ((self.udp, SO_RCVBUFFORCE), (self.raw, SO_SNDBUFFORCE)):
            try:
                sock.setsockopt(socket.SOL_SOCKET, opt, 8 << 20)
            except OSError:
                pass
        self.udp.bind((self.nic, wire.ROCE_PORT))
        self.udp.setblocking(False)
        fast, self.datapath = load_datapath()
        # who computes the ICRC: the compiled path's ISA-L or zlib; Python's zlib.crc32
        self.icrc = getattr(fast, "ICRC", "zlib") if fast is not None else "zlib (python)"
        self.tx_batch = self.rx_ring = None
        if fast is not None:
            self.tx_batch = fast.TxBatch(self.raw.fileno(), SEND_BUDGET)
            self.rx_ring = fast.RxRing(self.udp.fileno(), self.nic_packed, RX_SLOTS, RECV_BUF)
        Path(control).parent.mkdir(parents=True, exist_ok=True)
        if os.path.exists(control):
            os.unlink(control)
        self.ctl = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        # Root only: the socket registers memory and writes into it. The umask covers
        # the moment between bind and chmod; the chmod says so explicitly.
        umask = os.umask(0o177)
        try:
            unixsock.bind(self.ctl, control)  # a run dir of any depth
        finally:
            os.umask(umask)
        os.chmod(control, 0o600)
        self.ctl.listen(16)
        self.ctl.setblocking(False)
        self.sel = selectors.DefaultSelector()
        self.sel.register(self.ctl, selectors.EVENT_READ, ("accept", None))
        self.sel.register(self.udp, selectors.EVENT_READ, ("udp", None))
        self.netlink = self._open_netlink()

    def _open_netlink(self) -> socket.socket | None:
        """Link events of our namespace (RTNLGRP_LINK); None means poll instead."""
        try:
            nl = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, socket.NETLINK_ROUTE)
            nl.bind((0, RTMGRP_LINK))
        except OSError:
            return None
        nl.setblocking(False)
        self.sel.register(nl, selectors.EVENT_READ, ("netlink", None))
        return nl

    def _read_ports(self) -> int:
        """Port state from SIOCGIFFLAGS on a socket in our namespace (sysfs may belong
        to another namespace when we were started with nsenter --net)."""
        bitmap = 0
        for plane, ifname in self.ports.items():
            try:
                req = struct.pack("16sH", ifname.encode(), 0)
                flags = struct.unpack("16sH", fcntl.ioctl(self.udp, SIOCGIFFLAGS, req))[1]
                up = flags & IFF_UP and flags & IFF_RUNNING
            except OSError:
                up = False
            bitmap |= int(bool(up)) << plane
        return bitmap

    # -- the loop -----------------------------------------------------------------

    def run(self) -> None:
        while True:
            busy = self._send_all()
            got = self._recv_batch()
            t = now_ns()
            # Timers only once every ACK that arrived is processed: after a stall (CPU
            # steal, GC) the queue holds the answers a timer would otherwise miss.
            if t >= self._next_timer and got < RECV_BATCH:
                self._timers(t)
                self._next_timer = t + TIMER_NS
            if t >= self._next_probe:
                self._probe_retired(t)
                self._next_probe = t + PROBE_NS
            if self.netlink is None and t >= self._next_port_poll:
                self._poll_ports()
                self._next_port_poll = t + PORT_POLL_NS
            timeout = 0 if busy or got else self._sleep_s(t)
            for key, mask in self.sel.select(timeout):
                kind, conn = key.data
                if kind == "accept":
                    self._accept()
                elif kind == "ctl":
                    if mask & selectors.EVENT_WRITE:
                        self._flush(conn)
                    if mask & selectors.EVENT_READ and conn["open"]:
                        self._control(conn)
                elif kind == "netlink":
                    self._on_netlink()

    def _sleep_s(self, t: int) -> float | None:
        """How long the selector may block: until the earliest timer that has work, or
        for ever (None) when no QP needs a timer. Packets and requests wake it."""
        deadlines = []
        if any(q.sender.wants_to_send() for q in self.send_qps.values()):
            return 0
        if any(not q.sender.idle and not q.sender.failed for q in self.send_qps.values()) \
                or any(q.receiver.owes_ack for q in self.recv_qps.values()):
            deadlines.append(self._next_timer)
        if any(q.probes or q.sender.evs.retired for q in self.send_qps.values()
               if q.mode == "mrc"):
            deadlines.append(self._next_probe)
        if self.netlink is None:
            deadlines.append(self._next_port_poll)
        return max(0.0, (min(deadlines) - t) / 1e9) if deadlines else None

    def _send_all(self) -> bool:
        busy = False
        t = now_ns()
        for qp in self.send_qps.values():
            if qp.sender.idle or qp.sender.failed:
                continue
            txs = qp.sender.poll(t, qp.src, SEND_BUDGET)
            if txs:
                busy = True
                (self._send_python if self.tx_batch is None else self._send_batch)(qp, txs)
        return busy

    def _batching(self) -> dict:
        """The compiled data path's counters: packets per sendmmsg and per recvmmsg."""
        if self.tx_batch is None:
            return {}
        sent, refused, batches = self.tx_batch.counters
        datagrams, reads = self.rx_ring.counters
        return {"tx": {"packets": sent, "refused": refused, "batches": batches},
                "rx": {"datagrams": datagrams, "batches": reads}}

    def _send_python(self, qp: SendQp, txs: list) -> None:
        for tx in txs:
            tpl = qp.templates.get(tx.ev) or self._template(qp, tx.ev)
            pkt = tpl.build(tx.psn & 0xFFFFFF, tx.va, tx.payload, tx.tries, tx.ack_req, tx.imm)
            try:
                self.raw.sendto(pkt, (qp.paths[tx.ev], 0))
                self.tx_plane_bytes[tx.ev & _PLANE_MASK] += len(tx.payload)
            except OSError:
                qp.send_errors += 1  # no route (our port is down): lost, recovered

    def _send_batch(self, qp: SendQp, txs: list) -> None:
        """The window's packets built in C from their templates (the same bytes as
        build) and sent with one sendmmsg, straight from the source buffer."""
        self._refused(self.tx_batch.post(txs, qp.templates,
                                         lambda ev: self._template(qp, ev), qp))

    def _refused(self, qps: list) -> None:
        """Packets the kernel refused (no route: our port is down): lost, and
        recovered by the transport."""
        for qp in qps:
            qp.send_errors += 1

    def tx_bytes_per_plane(self) -> dict[int, int]:
        """Payload the kernel took, per plane, over the endpoint's life."""
        if self.tx_batch is None:
            return dict(self.tx_plane_bytes)
        sent = self.tx_batch.plane_bytes
        return {p: sent.get(p, 0) for p in self.tx_plane_bytes}

    def _path(self, qp: SendQp, ev: int) -> str:
        """The uSID program an EV of this QP travels."""
        path = qp.paths.get(ev)
        if path is None:
            plane, t1, _ = ev_fields(ev)
            path = qp.paths[ev] = self._route(self.fabric.node(qp.peer), plane, t1)
        return path

    def _route(self, peer, plane: int, t1: int) -> str:
        """The uSID program to a host on a plane and T1: computed once per endpoint
        (route() costs ~130 µs, and a new EV, a replacement in a failover included,
        would otherwise pay it in the datapath), only the paths there are."""
        same_rack = peer.rack == self.me.rack
        key = (peer.name, plane, 0 if same_rack else t1)
        path = self._routes.get(key)
        if path is None:
            if len(self._routes) >= ROUTES_CACHED:
                self._routes.clear()
            path = self._routes[key] = route(self.fabric, self.me, peer, plane,
                                             None if same_rack else t1).address
        return path

    def _warm_routes(self, peer) -> None:
        """Every path to `peer`, before its QP's first packet (on the control path)."""
        for plane in self.fabric.nic_planes:
            for t1 in range(self.fabric.spec.t1_per_plane):
                self._route(peer, plane, t1)

    def _template(self, qp: SendQp, ev: int) -> wire.DataTemplate:
        if len(qp.templates) >= qp.cache_max:  # bounded: keep the EVs still in slots
            live = {e.value for e in qp.sender.evs.active}
            for cache in (qp.templates, qp.paths):  # in place: TxBatch.post holds the dict
                for k in [k for k in cache if k not in live]:
                    del cache[k]
        tpl = qp.templates[ev] = wire.DataTemplate(self.nic, self._path(qp, ev), self.nic,
                                                   qp.peer_nic, ev, qp.peer_qpn, qp.rkey)
        return tpl

    def _packed_peer(self, addr: str) -> bytes:
        packed = self._peers.get(addr)
        if packed is None:
            if len(self._peers) >= PEERS_CACHED:
                self._peers.clear()
            packed = self._peers[addr] = socket.inet_pton(socket.AF_INET6, addr)
        return packed

    def _recv_batch(self) -> int:
        got = self._recv_python() if self.rx_ring is None else self._recv_ring()
        if self._pending_sacks:
            self._flush_sacks()
        return got

    def _recv_python(self) -> int:
        got = 0
        recvmsg = self.udp.recvmsg
        for _ in range(RECV_BATCH):
            try:
                data, anc, _, addr = recvmsg(RECV_BUF, ANC_BUF)
            except BlockingIOError:
                break
            got += 1
            try:
                pkt = wire.decode(data, self._packed_peer(addr[0]), self.nic_packed, addr[1],
                                  wire.flow_label_of(anc))
            except wire.BadPacket as e:
                self.drops[_DROP_OF_REASON[e.reason]] += 1
                continue
            if isinstance(pkt, wire.DataPacket):
                self._on_data(pkt.dest_qp, pkt.psn, pkt.va, pkt.rkey, pkt.payload, pkt.ev,
                              pkt.tries, pkt.ack_req, pkt.imm, addr[0])
            else:
                self._on_control(pkt)
        return got

    def _recv_ring(self) -> int:
        """Up to RECV_BATCH datagrams, RX_SLOTS per recvmmsg, parsed in C. A payload is a
        view into the ring, placed before the next recvmmsg overwrites it."""
        got = 0
        recv, on_data, drops = self.rx_ring.recv, self._on_data, self.drops
        for _ in range(RECV_BATCH // RX_SLOTS):
            items = recv()
            got += len(items)
            for item in items:
                kind = item[0]
                if kind == 1:  # (1, dest_qp, psn, va, rkey, payload, ev, tries, ack_req, imm, src)
                    on_data(*item[1:])
                elif kind == 0:  # (0, reason)
                    drops[_DROP_OF_REASON[item[1]]] += 1
                else:  # (2, whole, opcode, ...): the ICRC is checked, the rest is wire's
                    _, whole, opcode, *_ = item
                    try:
                        pkt = wire.decode_checked(whole, opcode)
                    except wire.BadPacket as e:
                        drops[_DROP_OF_REASON[e.reason]] += 1
                        continue
                    self._on_control(pkt)
            if len(items) < RX_SLOTS:
                break
        return got

    def _on_control(self, pkt) -> None:
        if isinstance(pkt, wire.Ack):
            self._on_ack(pkt)
        elif isinstance(pkt, wire.Nack):
            qp = self.send_qps.get(pkt.dest_qp)
            if qp is None:
                self.drops["unknown_qp"] += 1
            else:
                qp.sender.on_nack(_unwrap24(pkt.psn, qp.sender.cum), now_ns())
        elif isinstance(pkt, wire.Probe):
            self._on_probe(pkt)

    def _on_data(self, dest_qp: int, psn: int, va: int, rkey: int, payload, ev: int,
                 tries: int, ack_req: bool, imm: int | None, src: str | bytes) -> None:
        """One data packet, its fields as decoded; `src` the peer's address (text or
        packed). The payload may be a view into the receive ring: placed now or never."""
        qp = self.recv_qps.get(dest_qp)
        if qp is None:
            self.drops["unknown_qp"] += 1
            return
        # Python ints: VA near 2**64 plus a length does not wrap, it is just too large.
        if rkey != qp.rkey or va + len(payload) > len(qp.buf):
            qp.bad_rkey += 1
            self.drops["bad_rkey" if rkey != qp.rkey else "out_of_bounds"] += 1
            return
        rx = qp.receiver
        rp = RxPacket(_unwrap24(psn, rx.cum), va, payload, imm, ev, tries, ack_req)
        if qp.peer_nic is None:
            qp.peer_nic = src if isinstance(src, str) else socket.inet_ntop(socket.AF_INET6,
                                                                            src)
        qp.last_pkt = rp  # for a delayed ACK: its PSN, EV and try (never its payload)
        qp.last_data_ns = now_ns()
        placed = rx.stats.bytes
        sack = rx.on_data(rp)
        if rx.stats.bytes != placed:
            plane = ev & _PLANE_MASK
            if plane in self.rx_plane_bytes:
                self.rx_plane_bytes[plane] += rx.stats.bytes - placed
        if sack is not None:
            if sack.dup or ack_req or imm is not None:  # the sender waits on this one
                self._pending_sacks.pop(qp.qpn, None)  # it says all a pending one would
                self._send_sack(qp, sack)
            else:
                self._pending_sacks[qp.qpn] = (qp, sack)
        while rx.nacks:
            self._send_nack(qp, rx.nacks.pop(), ev)

    def _flush_sacks(self) -> None:
        """The last plain SACK of each QP in this receive batch (the others coalesced)."""
        for qp, sack in self._pending_sacks.values():
            self._send_sack(qp, sack)
        self._pending_sacks.clear()

    def _reverse(self, qp: RecvQp, data_ev: int) -> tuple[wire.Framer, str] | None:
        """SACKs and NAKs go back the way the data packet came: the same plane and T1,
        which just carried it (links fail both ways). One reverse EV per path, its
        entropy drawn from the QP's seeded rng, so the cache is bounded by the paths."""
        key = data_ev & _PATH_MASK
        hit = qp.framers.get(key)
        if hit is None:
            if self._host_of(qp.peer_nic) is None:
                return None
            rev = self._real_path(key) | qp.rng.getrandbits(20) << ENTROPY_SHIFT
            path = self._reverse_path(qp, rev)
            qp.rev_evs[key] = rev
            hit = qp.framers[key] = (wire.Framer(self.nic, path, self.nic, qp.peer_nic, rev),
                                     path)
        return hit

    def _real_path(self, key: int) -> int:
        """A path of this fabric for a path key from the wire: itself, or (a plane or
        T1 that does not exist: a forged or rewritten flow label) one picked from the
        key, so the SACK still goes somewhere and the same key always goes the same way.
        The QP's caches stay bounded: there are 4096 keys at most."""
        if key in self._path_set:
            return key
        return self._path_keys[key % len(self._path_keys)]

    def _send_sack(self, qp: RecvQp, sack: SackReport) -> None:
        """On the reverse of the data packet's path; the SACK echoes the data packet's EV."""
        rev = self._reverse(qp, sack.ev)
        if rev is None:
            return
        cum = sack.cum & 0xFFFFFF
        body = wire.encode_ack(qp.peer_qpn, sack.psn & 0xFFFFFF, cum, wire.Sack(
            cum, sack.bitmap, sack.ev, sack.tries, 0, self.port_bitmap, sack.dup))
        try:
            self.raw.sendto(rev[0].frame(body), (rev[1], 0))
        except OSError:
            pass

    def _send_nack(self, qp: RecvQp, psn: int, ev: int) -> None:
        """NAK (PSN sequence error) for a hole, on the path of the packet that showed it."""
        rev = self._reverse(qp, ev)
        if rev is None:
            return
        cum = qp.receiver.cum & 0xFFFFFF
        body = wire.encode_nack(qp.peer_qpn, psn & 0xFFFFFF, cum, wire.NAK_PSN_SEQUENCE_ERROR,
                                wire.Sack(cum, 0, ev, 0, 0, self.port_bitmap))
        try:
            self.raw.sendto(rev[0].frame(body), (rev[1], 0))
        except OSError:
            pass

    def _host_of(self, nic: str | None):
        return self._hosts_by_nic.get(nic)

    def _on_ack(self, ack: wire.Ack) -> None:
        qp = self.send_qps.get(ack.dest_qp)  # an ACK is addressed to the requester's QP
        if qp is None:
            self.drops["unknown_qp"] += 1
            return
        s = ack.sack
        sender = qp.sender
        cum = _unwrap24(s.cum, sender.cum)
        try:
            sender.on_sack(SackReport(cum, s.bitmap, s.ev, _unwrap24(ack.psn, cum), s.tries,
                                s.port_state, s.congestion, s.dup), now_ns())
        except QpFailed:
            pass
        self._maybe_done(qp)

    def _timers(self, t: int) -> None:
        for qp in self.send_qps.values():
            if not qp.sender.idle and not qp.sender.failed:
                try:
                    qp.sender.on_timer(t)
                except QpFailed:
                    pass
            self._maybe_done(qp)
        for rq in self.recv_qps.values():
            if rq.receiver.owes_ack and t - rq.last_data_ns > DELAYED_ACK_NS:
                sack = rq.receiver.flush(rq.last_pkt)
                if sack is not None:
                    self._send_sack(rq, sack)

    def _probe_retired(self, t: int) -> None:
        """Background EV probes: retired EVs come back after enough answered probes.
        Each round probes the next few retired EVs (round robin), so none starves."""
        for qp in self.send_qps.values():
            if qp.mode != "mrc":
                continue
            for ev, sent in list(qp.probes.items()):
                if t - sent > PROBE_TIMEOUT_NS:  # unanswered: the path is still bad
                    del qp.probes[ev]
                    qp.sender.probe_result(ev, False, t)
            for e in qp.sender.evs.probe_candidates(PROBES_PER_ROUND):
                if e.value in qp.probes:
                    continue
                body = wire.encode_probe(qp.peer_qpn, e.value, qp.qpn, t, e.value,
                                         self.port_bitmap)
                path = qp.paths.get(e.value) or self._path(qp, e.value)
                try:
                    self.raw.sendto(wire.frame(self.nic, path, e.value, self.nic, qp.peer_nic,
                                               body), (path, 0))
                except OSError:
                    continue
                qp.probes[e.value] = t
                qp.probes_sent += 1

    def _on_probe(self, probe: wire.Probe) -> None:
        if not probe.reply:  # we are the receiver: answer on the reverse of the probed path
            qp = self.recv_qps.get(probe.dest_qp)
            if qp is None or not qp.peer_nic or self._host_of(qp.peer_nic) is None:
                self.drops["unknown_qp"] += 1
                return
            if probe.reverse_ev & _PATH_MASK not in self._path_set:  # no such way back
                self.drops["malformed"] += 1
                return
            path = self._reverse_path(qp, probe.reverse_ev)
            body = wire.encode_probe(qp.peer_qpn, probe.ev, probe.probe_id, probe.sent_ns,
                                     probe.reverse_ev, self.port_bitmap, reply=True)
            try:
                self.raw.sendto(wire.frame(self.nic, path, probe.reverse_ev, self.nic,
                                           qp.peer_nic, body), (path, 0))
            except OSError:
                pass
            return
        qp = self.send_qps.get(probe.dest_qp)
        if qp is None:
            self.drops["unknown_qp"] += 1
            return
        if probe.ev not in qp.probes:  # late (timed out already) or not ours
            return
        del qp.probes[probe.ev]
        qp.sender.probe_result(probe.ev, True, now_ns())

    def _reverse_path(self, qp: RecvQp, ev: int) -> str:
        plane, t1, _ = ev_fields(ev)
        return self._route(self._host_of(qp.peer_nic), plane, t1)

    def _on_netlink(self) -> None:
        """A link changed somewhere in our namespace: drain the events, read our ports."""
        while True:
            try:
                if not self.netlink.recv(65536):
                    break
            except BlockingIOError:
                break
            except OSError:  # ENOBUFS: events were lost; reading the ports covers it
                break
        self._poll_ports()

    def _poll_ports(self) -> None:
        bitmap = self._read_ports()
        if bitmap != self.port_bitmap:
            self.port_bitmap = bitmap
            t = now_ns()
            for qp in self.send_qps.values():
                qp.sender.set_local_ports(bitmap, t)

    def _maybe_done(self, qp: SendQp) -> None:
        if (qp.sender.idle or qp.sender.failed) and qp.waiters:
            if not qp.done_ns:
                qp.done_ns = now_ns()
            for conn, req_id in qp.waiters:
                self._reply(conn, req_id, self._qp_stats(qp).to_dict())
            qp.waiters.clear()

    # -- control --------------------------------------------------------------------

    def _accept(self) -> None:
        try:
            c, _ = self.ctl.accept()
        except OSError:  # out of descriptors, or the client already left: not fatal
            return
        if self._clients >= MAX_CLIENTS:
            c.close()
            return
        c.setblocking(False)
        conn = {"sock": c, "buf": b"", "out": bytearray(), "open": True,
                "events": selectors.EVENT_READ}
        self.sel.register(c, selectors.EVENT_READ, ("ctl", conn))
        self._clients += 1

    def _control(self, conn: dict) -> None:
        try:
            chunk = conn["sock"].recv(65536)
        except BlockingIOError:
            return
        except OSError:
            chunk = b""
        if not chunk:  # the client left, maybe mid-request: what it sent is dropped
            self._drop(conn)
            return
        conn["buf"] += chunk
        while b"\n" in conn["buf"] and conn["open"]:
            line, conn["buf"] = conn["buf"].split(b"\n", 1)
            req_id = None
            try:
                req = json.loads(line)
                if not isinstance(req, dict):
                    raise ValueError(f"a request is a JSON object, not {type(req).__name__}")
                req_id = req.get("id")
                result = self._handle(conn, req)
            except Exception as e:  # a bad request answers with an error, never kills us
                self._reply(conn, req_id, {"error": f"{type(e).__name__}: {e}"})
                continue
            if result is not None:
                self._reply(conn, req_id, result)
        if conn["open"] and len(conn["buf"]) > MAX_LINE:  # no newline in sight: cut off
            self._reply(conn, None, {"error": f"request line longer than {MAX_LINE} bytes"})
            self._drop(conn)

    def _reply(self, conn: dict, req_id, result: dict) -> None:
        """Queue a reply and write what the socket takes now; the rest goes out as the
        client reads (EVENT_WRITE). Never blocks: the datapath shares this thread."""
        if not conn["open"]:
            return
        conn["out"] += json.dumps({"id": req_id, **result}).encode() + b"\n"
        self._flush(conn)

    def _flush(self, conn: dict) -> None:
        out, sock = conn["out"], conn["sock"]
        while out:
            try:
                n = sock.send(out)
            except BlockingIOError:
                break
            except OSError:  # the client left before its reply
                self._drop(conn)
                return
            del out[:n]
        if len(out) > MAX_PENDING:  # it stopped reading: drop it, not our memory
            self._drop(conn)
            return
        events = selectors.EVENT_READ | (selectors.EVENT_WRITE if out else 0)
        if events != conn["events"]:
            conn["events"] = events
            self.sel.modify(sock, events, ("ctl", conn))

    def _drop(self, conn: dict) -> None:
        """Close a control connection and forget it, its pending `wait`s included."""
        if not conn["open"]:
            return
        conn["open"] = False
        self._clients -= 1
        self.sel.unregister(conn["sock"])
        conn["sock"].close()
        conn["out"].clear()
        for qp in self.send_qps.values():
            if qp.waiters:
                qp.waiters = [w for w in qp.waiters if w[0] is not conn]

    def _handle(self, conn: dict, req: dict) -> dict | None:
        op = req.get("op")
        if op == "hello":
            return {"host": self.host, "nic": self.nic, "planes": sorted(self.ports),
                    "ports": self.port_bitmap, "pid": os.getpid(), "datapath": self.datapath,
                    "icrc": self.icrc, **self._batching()}
        if op == "recv_qp":
            size = _int_arg(req, "size", 1, _buffer_limit())
            seed = _seed_arg(req)
            mem = GuardedBuffer(size)
            qpn = self._qpn()
            rng = random.Random(f"{self.host}/recv/{qpn}/{seed}")
            rkey = rng.getrandbits(32)
            qp = RecvQp(qpn, rkey, mem, mem.view, None, rng)
            qp.receiver = Receiver(_placer(qp.buf), port_state=lambda: self.port_bitmap)
            self.recv_qps[qpn] = qp
            return {"qpn": qpn, "rkey": rkey}
        if op == "send_qp":
            return self._send_qp(req)
        if op == "connect":  # tell a receiving QP which QP at which peer sends to it
            qp = self._recv_qp_of(req)
            peer_qpn = _int_arg(req, "peer_qpn", 0, wire.PSN_MASK)
            peer = self._host_arg(req, "peer")
            qp.peer_nic = str(nic_address(self.fabric, peer))
            qp.peer_qpn = peer_qpn
            self._warm_routes(peer)
            return {"qpn": qp.qpn}
        if op == "write":
            qp = self._send_qp_of(req)
            size = _int_arg(req, "size", 1, len(qp.src))
            offset = _int_arg(req, "offset", 0, len(qp.src) - size, default=0)
            imm = req.get("imm")
            if imm is not None:
                imm = _int_arg(req, "imm", 0, 0xFFFFFFFF)
            if not qp.first_write_ns:
                qp.first_write_ns = now_ns()
            qp.done_ns = 0
            msn = qp.sender.post(size, offset, imm, now_ns())
            return {"msn": msn}
        if op == "deny":  # denylist input (e.g. from a clustermapper): never use these EVs
            qp = self._send_qp_of(req)
            evs = req.get("evs")
            if not isinstance(evs, list) or len(evs) > 1 << 16:
                raise ValueError("evs must be a list of at most 65536 EVs")
            values = [_int_arg({"ev": ev}, "ev", 0, 0xFFFFFFFF) for ev in evs]
            qp.sender.deny(values, now_ns())
            return {"denied": len(qp.sender.evs.denylist)}
        if op == "wait":
            qp = self._send_qp_of(req)
            if qp.sender.idle or qp.sender.failed:
                return self._qp_stats(qp).to_dict()
            qp.waiters.append((conn, req.get("id")))
            return None
        if op == "digest":
            qpn = _int_arg(req, "qpn", 0, 1 << 62)
            buf = self.send_qps[qpn].src if qpn in self.send_qps else self._recv_qp_of(req).buf
            off = _int_arg(req, "offset", 0, len(buf), default=0)
            size = _int_arg(req, "size", 0, len(buf) - off, default=len(buf) - off)
            return {"sha256": hashlib.sha256(buf[off:off + size]).hexdigest()}
        if op == "guards":
            return self.guards()
        if op == "events":
            sender = self._send_qp_of(req).sender
            log = sender.log
            return {"events": [e.to_dict() for e in log], "dropped": log.dropped,
                    "total": log.total, "kinds": EVENT_KINDS,
                    "acked_bins": sender.acked_bins.to_dict()}
        if op == "stats":
            return self.stats().to_dict()
        if op == "metrics":
            return {"text": self.metrics()}
        if op == "close":
            qpn = _int_arg(req, "qpn", 0, 1 << 62)
            sq, rq = self.send_qps.pop(qpn, None), self.recv_qps.pop(qpn, None)
            if sq is not None:  # closed QPs still count in the endpoint's totals
                self.totals["bytes_sent"] += sq.sender.stats.bytes
                self.totals["retransmits"] += sq.sender.stats.retransmits
                self.totals["ev_retirements"] += sq.sender.evs.retirements
                self._closed_drops["ack_unsent"] += sq.sender.stats.acks_unsent
            if rq is not None:
                self.totals["bytes_placed"] += rq.receiver.stats.bytes
                self._closed_drops["duplicate"] += rq.receiver.stats.duplicates
                self._closed_drops["psn_window"] += rq.receiver.stats.out_of_window
            return {"closed": qpn}
        raise ValueError(f"unknown op {str(op)[:40]!r}")

    def _send_qp_of(self, req: dict) -> SendQp:
        qpn = _int_arg(req, "qpn", 0, 1 << 62)
        try:
            return self.send_qps[qpn]
        except KeyError:
            raise ValueError(f"no sending QP {qpn}") from None

    def _recv_qp_of(self, req: dict) -> RecvQp:
        qpn = _int_arg(req, "qpn", 0, 1 << 62)
        try:
            return self.recv_qps[qpn]
        except KeyError:
            raise ValueError(f"no receiving QP {qpn}") from None

    def _host_arg(self, req: dict, key: str):
        """A host of this fabric by name (a switch has no NIC to send to)."""
        name = req.get(key)
        if not isinstance(name, str) or not self.fabric.has_node(name) \
                or self.fabric.node(name) not in self.fabric.hosts:
            raise ValueError(f"{key} must name a host of {self.fabric.name}, "
                             f"not {str(name)[:40]!r}")
        return self.fabric.node(name)

    def _qpn(self) -> int:
        qpn = self._next_qpn
        self._next_qpn += 1
        return qpn

    def _send_qp(self, req: dict) -> dict:
        peer = self._host_arg(req, "peer")
        planes = list(self.fabric.nic_planes)  # every NIC has ports on the same planes
        mode = req.get("mode", "mrc")
        if mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}")
        size = _int_arg(req, "size", 1, _buffer_limit())
        peer_qpn = _int_arg(req, "peer_qpn", 0, wire.PSN_MASK)
        rkey = _int_arg(req, "rkey", 0, 0xFFFFFFFF)
        n_evs = _int_arg(req, "evs", 1, MAX_EVS, default=128)
        seed_arg = _seed_arg(req)
        # Payload per packet: 4096, or less where the fabric's MTU cannot carry it;
        # the delay target from the slowest link a packet crosses.
        payload = max_payload(self.fabric.spec.mtu)
        spec = self.fabric.spec
        rates = [r for r in (spec.host_rate_bps, spec.fabric_rate_bps) if r]
        cfg = SenderConfig(mode=mode, mtu=payload, target_ns=queueing_target_ns(
            payload + wire.MAX_FRAME - wire.MTU, min(rates) if rates else None))
        for key, (lo, hi) in _TUNABLES.items():
            if key in req:
                setattr(cfg, key, type(getattr(cfg, key))(_num_arg(req, key, lo, hi)))
        mem = GuardedBuffer.filled(size, seed_arg)
        qpn = self._qpn()
        seed = f"{self.host}/send/{qpn}/{seed_arg}"
        evs = EvSet(planes, self.fabric.spec.t1_per_plane, size=n_evs,
                    seed=seed, cross_rack=peer.rack != self.me.rack)
        sender = Sender(evs, 0, cfg)
        t = now_ns()
        sender.set_local_ports(self.port_bitmap, t)
        qp = SendQp(qpn, peer.name, str(nic_address(self.fabric, peer)), peer_qpn, rkey, mem,
                    mem.view, sender, mode, started_ns=t)
        self.send_qps[qpn] = qp
        self._warm_routes(peer)
        return {"qpn": qpn, "planes": planes}

    # -- reporting ------------------------------------------------------------------

    def _qp_stats(self, qp: SendQp) -> SendQpStats:
        sender = qp.sender
        st = sender.stats
        elapsed = ((qp.done_ns or now_ns()) - qp.first_write_ns) / 1e9 if qp.first_write_ns else 0
        acked_bytes = min(st.acked * sender.cfg.mtu, sender.posted_bytes)
        single = sender.single_ev
        evs = sender.evs
        return SendQpStats(
            qpn=qp.qpn, peer=qp.peer, mode=qp.mode, idle=sender.idle, mtu=sender.cfg.mtu,
            failed=sender.failed, elapsed_s=elapsed,
            goodput_gbps=acked_bytes * 8 / elapsed / 1e9 if elapsed else 0.0,
            sender=SenderCounters(**asdict(st)), window=sender.window,
            srtt_us=sender.srtt / 1000, reorder_window_us=sender.reorder_window_ns() / 1000,
            # EVs now: the slots by state (they add up to ev_set_size), and the pools
            evs=evs.counts(), ev_set_size=evs.size, ev_pools=evs.pools(),
            # events over the QP's life
            ev_retirements_total=evs.retirements, ev_revivals_total=evs.revivals,
            ev_retirements_undone_total=evs.undone,
            planes_in_use=tuple(sender.planes_in_use()), send_errors=qp.send_errors,
            probes_sent=qp.probes_sent, messages_completed=sender.messages_completed,
            completions=tuple(MessageLatency(m.msn, (m.done_ns - m.posted_ns) / 1e3)
                              for m in list(sender.completed)[-16:]),
            events_logged=sender.log.total,
            single_path=self._path(qp, single.value) if single is not None else None,
            ev_skips_total=evs.skips, dead_paths_total=evs.dead_paths,
            target_us=sender.cfg.target_ns / 1000)

    def _recv_qp_stats(self, qp: RecvQp) -> RecvQpStats:
        return RecvQpStats(qp.qpn, qp.bad_rkey, qp.receiver.cum,
                           tuple(list(qp.receiver.completions)[-16:]),  # (n, imm)
                           tuple(sorted(qp.rev_evs.values())), **asdict(qp.receiver.stats))

    def guards(self) -> dict:
        """Whether every registered buffer's guard bytes still hold their pattern."""
        qps = [*self.recv_qps.values(), *self.send_qps.values()]
        broken = sorted(q.qpn for q in qps if not q.mem.intact())
        return {"intact": not broken, "buffers": len(qps), "broken": broken}

    def drop_counts(self) -> EndpointDrops:
        """The endpoint's own drop counters, and its QPs' (closed ones included)."""
        sq, rq = self.send_qps.values(), self.recv_qps.values()
        closed = self._closed_drops
        return EndpointDrops(
            **self.drops,
            psn_window=closed["psn_window"] + sum(q.receiver.stats.out_of_window for q in rq),
            duplicate=closed["duplicate"] + sum(q.receiver.stats.duplicates for q in rq),
            ack_unsent=closed["ack_unsent"] + sum(q.sender.stats.acks_unsent for q in sq))

    def stats(self) -> EndpointStats:
        sq, rq = self.send_qps.values(), self.recv_qps.values()
        totals = EndpointTotals(
            bytes_sent=self.totals["bytes_sent"] + sum(q.sender.stats.bytes for q in sq),
            bytes_placed=self.totals["bytes_placed"] + sum(q.receiver.stats.bytes for q in rq),
            retransmits=self.totals["retransmits"]
            + sum(q.sender.stats.retransmits for q in sq),
            ev_retirements=self.totals["ev_retirements"]
            + sum(q.sender.evs.retirements for q in sq),
            tx_bytes_per_plane=self.tx_bytes_per_plane(),
            rx_bytes_per_plane=dict(self.rx_plane_bytes))
        drops = self.drop_counts()
        bad = drops.truncated + drops.malformed + drops.bad_icrc
        return EndpointStats(self.host, self.port_bitmap, bad, drops.unknown_qp,
                             totals, tuple(self._qp_stats(q) for q in sq),
                             tuple(self._recv_qp_stats(q) for q in rq), drops,
                             self.datapath)

    def metrics(self) -> str:
        """Prometheus text exposition of this endpoint's counters."""
        lines = []

        def metric(name, kind, help_, samples):
            lines.append(f"# HELP mrc_{name} {help_}")
            lines.append(f"# TYPE mrc_{name} {kind}")
            for labels, value in samples:
                lab = ",".join(f'{k}="{v}"' for k, v in {"host": self.host, **labels}.items())
                lines.append(f"mrc_{name}{{{lab}}} {value}")

        sq = list(self.send_qps.values())
        metric("tx_packets_total", "counter", "Data packets sent, per QP and plane",
               [({"qp": q.qpn, "peer": q.peer, "mode": q.mode, "plane": p}, n)
                for q in sq for p, n in sorted(q.sender.stats.per_plane_packets.items())])
        metric("tx_bytes_total", "counter", "Payload bytes sent, per QP",
               [({"qp": q.qpn, "mode": q.mode}, q.sender.stats.bytes) for q in sq])
        metric("retransmits_total", "counter", "Packets sent again, per QP",
               [({"qp": q.qpn, "mode": q.mode}, q.sender.stats.retransmits) for q in sq])
        metric("srtt_seconds", "gauge", "Smoothed RTT, per QP",
               [({"qp": q.qpn}, q.sender.srtt / 1e9) for q in sq])
        metric("window_packets", "gauge", "Congestion window, per QP",
               [({"qp": q.qpn}, q.sender.window) for q in sq])
        metric("evs", "gauge", "EVs in the QP's set now, by state (they add up to the set size)",
               [({"qp": q.qpn, "state": s}, n) for q in sq
                for s, n in q.sender.evs.counts().items()])
        metric("ev_retirements_total", "counter",
               "Retirement events: an EV went ASSUMED_BAD (a revived EV may retire again)",
               [({"qp": q.qpn}, q.sender.evs.retirements) for q in sq])
        metric("ev_revivals_total", "counter", "Retired EVs brought back by probes",
               [({"qp": q.qpn}, q.sender.evs.revivals) for q in sq])
        metric("goodput_bits_per_second", "gauge", "Acked payload rate of the last write",
               [({"qp": q.qpn}, self._qp_stats(q).goodput_gbps * 1e9) for q in sq])
        metric("rx_bytes_total", "counter", "Payload bytes placed, per receiving QP",
               [({"qp": q.qpn}, q.receiver.stats.bytes) for q in self.recv_qps.values()])
        metric("rx_duplicates_total", "counter", "Duplicate data packets dropped",
               [({"qp": q.qpn}, q.receiver.stats.duplicates) for q in self.recv_qps.values()])
        drops = self.drop_counts().to_dict()
        metric("bad_packets_total", "counter", "Packets dropped for a bad ICRC or header",
               [({}, drops["truncated"] + drops["malformed"] + drops["bad_icrc"])])
        metric("drops_total", "counter", "Packets dropped, by reason (stats.EndpointDrops)",
               [({"reason": k}, n) for k, n in drops.items()])
        metric("port_up", "gauge", "NIC port state, per plane",
               [({"plane": p}, self.port_bitmap >> p & 1) for p in sorted(self.ports)])
        return "\n".join(lines) + "\n"


def max_payload(link_mtu: int) -> int:
    """The largest payload whose whole IPv6-in-IPv6 packet fits the link MTU."""
    return max(64, min(wire.MTU, link_mtu - (wire.MAX_FRAME - wire.MTU)))


# A send_qp's transport tunables: the range each must lie in (a window of 0, or a target
# delay of 0, would stall or divide by zero inside the datapath, long after the reply)
_TUNABLES = {"init_window": (1, 1 << 16), "max_window": (1, 1 << 16),
             "target_ns": (1, 60_000_000_000), "rto_min_ns": (1, 60_000_000_000),
             "reorder_ns": (1, 60_000_000_000)}


def _int_arg(req: dict, key: str, lo: int, hi: int, default: int | None = None) -> int:
    """An integer argument in [lo, hi]. JSON integers only: "abc", true and 1e30 are
    refused here, as an error reply, not turned into a huge allocation or a crash in the
    datapath later."""
    if key not in req and default is not None:
        return default
    if key not in req:
        raise ValueError(f"missing argument {key!r}")
    v = req[key]
    if isinstance(v, bool) or not isinstance(v, int):
        raise ValueError(f"{key} must be an integer, not {str(v)[:40]!r}")
    if not lo <= v <= hi:
        raise ValueError(f"{key} must be in {lo}..{hi}, got {v}"[:200])
    return v


def _num_arg(req: dict, key: str, lo: float, hi: float) -> float:
    v = req[key]
    if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v) \
            or not lo <= v <= hi:
        raise ValueError(f"{key} must be a number in {lo}..{hi}, not {str(v)[:40]!r}")
    return v


def _seed_arg(req: dict) -> int | str:
    seed = req.get("seed", 0)
    if isinstance(seed, bool) or not isinstance(seed, int | str) or len(str(seed)) > 256:
        raise ValueError(f"seed must be an integer or a short string, not {str(seed)[:40]!r}")
    return seed


def _buffer_limit() -> int:
    """The largest buffer a QP may register now: half the memory available (the zeroed
    buffer is touched in full at once), at most MAX_BUFFER. Refusing here is an error
    reply; a MemoryError or the OOM killer later would not be."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return min(MAX_BUFFER, int(line.split()[1]) * 1024 // 2)
    except (OSError, ValueError, IndexError):
        pass
    return 1 << 30


def _placer(buf: memoryview):
    def place(va: int, payload) -> None:
        buf[va:va + len(payload)] = payload
    return place


def _unwrap24(psn: int, ref: int) -> int:
    """The full PSN nearest `ref` whose low 24 bits are `psn`."""
    base = ref & ~0xFFFFFF
    full = base | psn
    if full < ref - (1 << 23):
        full += 1 << 24
    elif full > ref + (1 << 23) and full >= 1 << 24:
        full -= 1 << 24
    return full


def _stopped_by_signal(signum, frame) -> None:
    """Say in the log how the endpoint ended, then end as the signal would."""
    print(f"mrc endpoint: stopped by {signal.Signals(signum).name}", flush=True)
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--config", required=True, help="endpoint.json rendered for this host")
    ap.add_argument("--control", required=True, help="unix socket path for the control API")
    args = ap.parse_args(argv)
    faulthandler.enable()  # a crash leaves its traceback in endpoint.log (stderr)
    signal.signal(signal.SIGTERM, _stopped_by_signal)
    config = json.loads(Path(args.config).read_text())
    try:
        ep = Endpoint(config, args.control)
    except UsageError as e:
        raise SystemExit(f"mrc endpoint: {e}") from None
    gc.freeze()  # long-lived setup objects leave the collector's generations
    print(f"mrc endpoint {ep.host} ({ep.nic}) up, control {args.control}, "
          f"data path {ep.datapath}, ICRC by {ep.icrc}", flush=True)
    try:
        ep.run()
    except KeyboardInterrupt:
        print("mrc endpoint: stopped by SIGINT", flush=True)


if __name__ == "__main__":
    main()
