"""The MRC endpoint's packet loop: its sockets, its QPs and the data path.

One thread, one loop (`PacketLoop.run`):
    send   Sender.poll -> a precomputed DataTemplate per (QP, EV) -> an IPPROTO_RAW
           socket writes the whole IPv6-in-IPv6 packet onto the EV's uSID path
    recv   the host's End.DT6 decap delivers the inner packet to a UDP socket on
           [NIC]:4791 (UDP_NO_CHECK6_RX: checksum 0, integrity from the RoCEv2 ICRC,
           checked against the peer address, port and flow label the socket reports)
    acks   SACKs and NAKs go back the way the data packet came (its plane and T1,
           reversed): one reverse EV per forward path, its entropy from the QP's rng.
           Coalesced per receive batch: of a QP's plain SACKs (every 2nd packet) the last
           of a batch is sent, since it says all the others did, and with it the last
           before it that went another path, so one dead path cannot take a batch's
           whole acknowledgement (_coalesce); a SACK that answers a duplicate, an ACK
           request, a message's last packet or a CE-marked packet (its congestion byte
           echoes the mark) goes at once. A packet left unacknowledged (ack_every's odd
           one out, a flight's tail) is acknowledged DELAYED_ACK_NS after its QP's last
           packet, on a deadline of its own: the wait is part of the RTT the sender
           measures, and of the reordering it learns.
    ECN    data packets leave ECT(0) (wire.TC_DATA); the receiver reads the inner
           traffic class from the IPV6_FLOWINFO cmsg (what the host's decap left
           there) and echoes CE in its SACKs
    trims  a data packet whose traffic class carries DSCP 7 was trimmed by a switch
           (wire.TRIM_DSCP): no ICRC is left, so only its QP, rkey and bounds are
           checked; it is never placed, and is answered at once with a NAK_TRIMMED
    ports  the host's NIC port state comes from netlink link events (RTNLGRP_LINK):
           a port that goes down stops its plane locally and, through the port-state
           bitmap in every SACK, at the peers
    cnps   DCQCN (twin.mrc.dcqcn, docs/roce-baseline.md): CE-marked data makes the
           receiving side send a CNP back the SACKs' way (one per QP per interval); a
           CNP cuts the sending QP's rate. A paced QP's packets wait for its pacer, the
           loop sleeping until `Sender.next_send_ns`; paced single-path QPs on one NIC
           port share it equally (`_port_shares`), as a NIC's port scheduler does

Two implementations of send and recv, the same bytes on the wire (MRC_TWIN_DATAPATH):
    compiled  twin.mrc._fastpath, built by `pip install` from _datapath.c: a window's
              packets built in C and sent with one sendmmsg straight from the source
              buffer (a compiled Sender's decisions taken in C, TxBatch.post_sender;
              the reference's TxPackets read by TxBatch.post); recvmmsg of up to RX_SLOTS
              datagrams into a ring, ICRC checked and headers parsed in C, payloads
              placed from the ring; a QP with the compiled receiver is bound to the
              ring (_bind): its packets placed, acknowledged (coalesced, framed, sent
              with sendmmsg) in C, Python given per batch only what it acts on
              (_on_bound); a compiled Sender's ACKs decoded and handed to it in C
              (RxRing.bind_sender). The default where it is built (auto).
    python    the standard library only: one sendto / recvmsg per packet, wire's
              encoder and decoder. Where the module is missing (a container whose
              Python cannot load it) or stale (built from other sources than the
              tree's: twin.mrc.core.stale_build), or asked for with MRC_TWIN_DATAPATH=python.

Idle, the loop blocks in its selector (UDP, control, netlink sockets) with no
timeout; the 1 ms transport timer, the delayed ACKs' deadline and the probe timer
run only while a QP has work for them. Other sockets join the selector with a
callback as their key's data (the control server's: twin.mrc.server); the loop calls
it when they are ready.

QPs are opened, written to and closed by the control server, with arguments it has
already checked (twin.mrc.control); what the loop counts is read by twin.mrc.counters.

A packet is checked before anything of it is believed, and each drop is counted by
reason (stats.EndpointDrops): too short, malformed, a bad ICRC, no such QP, a wrong
rkey, VA + length outside the buffer, a PSN too far ahead, a duplicate, an ACK for a
PSN never sent; and a control packet whose claim its QP's state refutes (a SACK bit
for a PSN never sent, a NAK or trim notice for nothing in flight, a probe reply for no
probe, a CNP sooner than any notification point sends one) is counted and ignored.
Every registered buffer sits between guard bytes (twin.mrc.buffer).

Framing (twin.mrc.framing, from endpoint.json): srv6 on a static-srv6 fabric, as above;
udp-entropy on a routing: bgp fabric ("MRC over ECMP", docs/bgp-baseline.md): a packet
is one IPv6 header from this host's port address in the EV's plane to the peer's
(wire.frame_ecmp), the kernel routes it out of that plane's port (one /52 per plane via
its T0), the UDP source port carries the EV's T1 and entropy bits for the routers' L4
hash, and it arrives on a UDP socket bound to the port address (one per plane: no
decap). SACKs, NAKs, CNPs and probes go back the same way, port address to port address
in the data packet's plane. Only the Python data path frames it: the compiled one
(TxBatch, RxRing) is built for IPv6-in-IPv6 and is refused (load_datapath); the
compiled transport core is framing-blind and runs in both.

Seeds make runs reproducible: a QP's EV set, rkey and reverse EVs come from
generators seeded with (host, QP number, the request's seed).

MRC_TWIN_RECORD=DIR records every sending QP's transport inputs as the loop makes them
(twin.mrc.trace's format: its polls, SACKs, NAKs and timers, with their times), written
to DIR/<host>-<qpn>.json.gz when the QP closes: a trace with the loop's own cadence, to
replay into either transport (tests/traces/endpoint). Its payload bytes are not the
QP's (a replay makes them with sim.source_bytes); its decisions are not stored.
"""

from __future__ import annotations

import fcntl
import os
import random
import selectors
import socket
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from twin.fabric.model import build_fabric
from twin.fabric.paths import ENTROPY_SHIFT, PLANE_BITS, ev_fields, route
from twin.fabric.plan import nic_address
from twin.fabric.spec import parse_spec
from twin.mrc import framing, trace, wire
from twin.mrc.buffer import GuardedBuffer
from twin.mrc.core import CHOICES, Compiled, Transport, choose, load_transport, short_name
from twin.mrc.counters import EndpointCounters
from twin.mrc.dcqcn import Dcqcn, NotificationPoint
from twin.mrc.evset import EvSet
from twin.mrc.modes import Mode
from twin.mrc.transport import (
    QpFailed,
    Receiver,
    RxPacket,
    SackReport,
    Sender,
    SenderConfig,
    queueing_target_ns,
    slow_link_floors,
)

RECV_BATCH = 256
RX_SLOTS = 64  # datagrams per recvmmsg (compiled data path)
RECV_BUF = wire.MTU + 256
ANC_BUF = socket.CMSG_SPACE(4)  # one IPV6_FLOWINFO cmsg
SEND_BUDGET = 64
TIMER_NS = 1_000_000
DELAYED_ACK_NS = 200_000  # a receiver's owed ACK goes this long after its last packet
NEVER = 1 << 62  # a deadline nothing waits for
PORT_POLL_NS = 5_000_000  # only where netlink link events are unavailable
PROBE_NS = 10_000_000  # background EV probes of retired EVs, per QP
PROBE_TIMEOUT_NS = 50_000_000
PROBES_PER_ROUND = 8
PEERS_CACHED = 1024
ROUTES_CACHED = 1 << 16  # (host, plane, T1): every path of a 64-host, 8x16 fabric fits
SO_RCVBUFFORCE, SO_SNDBUFFORCE = 33, 32
IPV6_FREEBIND = 78  # bind a port address that is still tentative, or on a port that is down
SIOCGIFFLAGS, IFF_UP, IFF_RUNNING = 0x8913, 0x1, 0x40
RTMGRP_LINK = 1

# Where each BadPacket reason is counted (stats.EndpointDrops)
_DROP_OF_REASON = {"short": "truncated", "icrc": "bad_icrc", "opcode": "malformed",
                   "length": "malformed", "syndrome": "malformed"}


_PATH_MASK = (1 << ENTROPY_SHIFT) - 1  # an EV's plane and T1: which path it takes
_PLANE_MASK = (1 << PLANE_BITS) - 1  # an EV's plane


def now_ns() -> int:
    return time.monotonic_ns()


DATAPATHS = CHOICES
DATAPATH_ENV = "MRC_TWIN_DATAPATH"
RECORD_ENV = "MRC_TWIN_RECORD"  # a directory: every sending QP's inputs, as traces


NO_COMPILED_ECMP = ("the compiled data path frames IPv6-in-IPv6 to a uSID path only, and "
                    f"this endpoint's framing is {framing.UDP_ENTROPY} (routing: bgp)")
DATAPATH = Compiled(DATAPATH_ENV, "the compiled data path does not load ({})",
                    "twin.mrc._fastpath does not load ({})")


def load_datapath(asked: str | None = None, framing_name: str = framing.SRV6):
    """(the compiled module or None, "compiled" or "python: why"), as MRC_TWIN_DATAPATH
    asks: auto (compiled where it is built and current), compiled (refuse to run without
    it), python. In udp-entropy framing the compiled data path is never used (its C
    builds the 96-byte srv6 head and reads the outer destination at its offset): auto
    says why, compiled is refused."""
    unfit = None if framing_name == framing.SRV6 else (
        NO_COMPILED_ECMP, f"; hint: {DATAPATH_ENV}=auto runs it on the Python data path")
    chosen = choose(DATAPATH, asked, unfit=unfit)
    return chosen.module, chosen.name


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
    cnps_sent: int = 0  # DCQCN: CNPs to the sending QP for CE-marked data
    transport: str = "python"  # its receiver's: "compiled" or "python" (twin.mrc.core)

    @property
    def buffer(self) -> memoryview:
        """The registered bytes: where the peer's writes land."""
        return self.buf


@dataclass
class SendQp:
    qpn: int
    peer: str
    peer_nic: str
    peer_qpn: int
    rkey: int
    mem: GuardedBuffer  # src is its view
    src: memoryview
    sender: Sender  # or the compiled core's (twin.mrc.core): the same interface
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
    transport: str = "python"  # its sender's: "compiled" or "python" (twin.mrc.core)
    # its sender is the compiled one and the data path too: TxBatch.post_sender polls it
    # and builds its packets in C, no TxPacket made
    direct: bool = False

    @property
    def buffer(self) -> memoryview:
        """The registered bytes: the source of its writes."""
        return self.src

    @property
    def cache_max(self) -> int:
        """Templates and paths kept: a few per slot of the EV set, then the dead go."""
        return 4 * self.sender.evs.size + 16


class PacketLoop:
    """One host's NIC: its sockets, its QPs, and the loop that moves their packets."""

    _direct_sender: type | None = None  # the compiled Sender, where TxBatch runs too

    def __init__(self, config: dict):
        self.cfg = config
        self.host = config["host"]
        self.nic = config["nic"]
        self.nic_packed = socket.inet_pton(socket.AF_INET6, self.nic)
        self.ports: dict[int, str] = {int(p): ifname for p, ifname in config["ports"].items()}
        self.fabric = build_fabric(parse_spec(config["spec"], "endpoint.json"))
        self.me = self.fabric.node(self.host)
        self.framing = framing.parse(config, self.fabric, self.host)
        # any address of a host (its NIC; in udp-entropy its port addresses too) -> node
        self._hosts_by_nic = {a: self.fabric.node(h) for a, h in self.framing.hosts.items()}
        self._peers: dict[str, bytes] = {}  # peer address text -> packed
        self._routes: dict[tuple[str, int, int], str] = {}  # (host, plane, T1) -> uSIDs
        # The paths (plane | t1 << 4) of this fabric. An EV from the wire may name any
        # (its plane and T1 are flow-label bits anyone can set): replies use these only.
        self._path_keys = sorted(p | t << 4 for p in self.fabric.nic_planes
                                 for t in range(self.fabric.spec.t1_per_plane))
        self._path_set = frozenset(self._path_keys)
        self.recv_qps: dict[int, RecvQp] = {}
        self.send_qps: dict[int, SendQp] = {}
        self._paced: dict[int, SendQp] = {}  # single-path dcqcn QPs: _port_shares' work
        self._next_qpn = 1
        self.record_dir = os.environ.get(RECORD_ENV) or None
        self._records: dict[int, trace.Trace] = {}  # QPN -> its trace, until it closes
        self.counters = EndpointCounters(self.fabric.nic_planes)
        # the data path counts into these (the counters' own dicts, one lookup less)
        self.drops = self.counters.drops
        self.tx_plane_bytes = self.counters.tx_plane_bytes
        self.rx_plane_bytes = self.counters.rx_plane_bytes
        # coalesced per QP: its last plain SACK of this batch, and the last before it on
        # another path (None: none yet)
        self._pending_sacks: dict[int, tuple[RecvQp, SackReport, SackReport | None]] = {}
        # DCQCN's notification point: a CNP per QP per interval while data arrives CE
        spec = self.fabric.spec
        self.np = NotificationPoint(Dcqcn.scaled(
            spec.host_rate_bps, max_payload(spec.mtu) + wire.MAX_FRAME - wire.MTU
        ).min_time_between_cnps_ns)
        self._next_timer = self._next_probe = self._next_port_poll = 0
        # When the earliest owed (delayed) ACK may be due: no later than it is, often
        # sooner (a QP's last packet moves its own deadline on); NEVER: nothing owed
        self._next_ack = NEVER
        # The timers' period: 1 ms, or a quarter frame's time on a slow fabric's slowest
        # link (4 KB at 3 Mbit/s is 11 ms a frame, and 16 endpoints waking every 1 ms
        # for nothing were most of two cores' work)
        rates = [r for r in (spec.host_rate_bps, spec.fabric_rate_bps) if r]
        self.timer_ns = max(TIMER_NS, max_payload(spec.mtu) * 8 * 10**9 // min(rates) // 4) \
            if rates else TIMER_NS
        # called when a QP with waiters goes idle or fails (the control server's `wait`)
        self.on_done: Callable[[SendQp], None] = lambda qp: qp.waiters.clear()
        self._open_sockets()
        self.port_bitmap = self._read_ports()
        if self.rx_ring is not None:
            self.rx_ring.port_bitmap = self.port_bitmap  # what its SACKs carry

    # -- sockets ----------------------------------------------------------------

    def _open_sockets(self) -> None:
        self.raw = socket.socket(socket.AF_INET6, socket.SOCK_RAW, socket.IPPROTO_RAW)
        self.udp = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
        wire.allow_zero_udp_checksum(self.udp)
        wire.receive_flow_labels(self.udp)
        for sock, opt in ((self.udp, SO_RCVBUFFORCE), (self.raw, SO_SNDBUFFORCE)):
            try:
                sock.setsockopt(socket.SOL_SOCKET, opt, 8 << 20)
            except OSError:
                pass
        # (socket, the local address the ICRC covers): the NIC's; in udp-entropy, one per
        # plane on its port address (packets arrive there, with no decap)
        self.rx_socks = [(self.udp, self.nic_packed)]
        if self.framing.ecmp:
            self.udp.close()
            self.rx_socks = [self._port_socket(a) for _, a in sorted(self.framing.own.items())]
            self.udp = self.rx_socks[0][0]
        else:
            self.udp.bind((self.nic, wire.ROCE_PORT))
            self.udp.setblocking(False)
        fast, self.datapath = load_datapath(framing_name=self.framing.name)
        self.core = load_transport()  # the Sender and Receiver classes QPs are built with
        self.transport = self.core.name  # "compiled", or "python: why"
        self._cores: dict[str, Transport] = {}  # a QP's own, by name (transport_for)
        # who computes the ICRC: the compiled path's ISA-L or zlib; Python's zlib.crc32
        self.icrc = getattr(fast, "ICRC", "zlib") if fast is not None else "zlib (python)"
        self.tx_batch = self.rx_ring = None
        # the compiled Sender's class, where the compiled data path runs (post_sender)
        self._direct_sender = getattr(fast, "Sender", None)
        if fast is not None:
            self.tx_batch = fast.TxBatch(self.raw.fileno(), SEND_BUDGET)
            self.rx_ring = fast.RxRing(self.udp.fileno(), self.nic_packed, RX_SLOTS, RECV_BUF)
            # bound QPs' SACKs framed in C and sent on the raw socket, their ways back
            # asked of _reverse (its reverse EVs come from the QP's seeded rng)
            self.rx_ring.acks(self.raw.fileno(), self._ack_way, _PATH_MASK)
        self.sel = selectors.DefaultSelector()
        for sock, _ in self.rx_socks:
            self.sel.register(sock, selectors.EVENT_READ, None)  # read every round anyway
        # where the loop sleeps in the ring's C (_wait): the selector's epoll, when it has
        # one, and the ring is what reads the data socket
        self._epoll_fd = self.sel.fileno() if self.rx_ring is not None and isinstance(
            self.sel, selectors.EpollSelector) else None
        self.netlink = self._open_netlink()

    def _port_socket(self, addr: str) -> tuple[socket.socket, bytes]:
        """udp-entropy: a UDP socket on a NIC port's address, port 4791 (IPV6_FREEBIND:
        the address may still be tentative, or its port down, when the endpoint starts)."""
        sock = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
        wire.allow_zero_udp_checksum(sock)
        wire.receive_flow_labels(sock)
        for level, opt, value in ((socket.SOL_SOCKET, SO_RCVBUFFORCE, 8 << 20),
                                  (socket.IPPROTO_IPV6, IPV6_FREEBIND, 1)):
            try:
                sock.setsockopt(level, opt, value)
            except OSError:
                pass
        sock.bind((addr, wire.ROCE_PORT))
        sock.setblocking(False)
        return sock, socket.inet_pton(socket.AF_INET6, addr)

    def _open_netlink(self) -> socket.socket | None:
        """Link events of our namespace (RTNLGRP_LINK); None means poll instead."""
        try:
            nl = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, socket.NETLINK_ROUTE)
            nl.bind((0, RTMGRP_LINK))
        except OSError:
            return None
        nl.setblocking(False)
        self.sel.register(nl, selectors.EVENT_READ, lambda mask: self._on_netlink())
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

    # -- QPs: opened, written and closed by the control server ------------------------

    def _qpn(self) -> int:
        qpn = self._next_qpn
        self._next_qpn += 1
        return qpn

    def transport_for(self, asked: str | None) -> Transport:
        """The transport a QP is built with: the endpoint's own (asked None), or the one
        asked for by name ("compiled", "python"), loaded once. UsageError where the
        compiled core is asked for and not built: the request's error reply."""
        if asked is None:
            return self.core
        core = self._cores.get(asked)
        if core is None:
            core = self._cores[asked] = load_transport(asked, named="transport")
        return core

    def open_recv_qp(self, size: int, seed: int | str, transport: str | None = None
                     ) -> RecvQp:
        """Register a receive buffer of `size` bytes (zeroed), its receiver of the
        `transport` asked for (None: the endpoint's)."""
        core = self.transport_for(transport)  # before anything is registered
        mem = GuardedBuffer(size)
        qpn = self._qpn()
        rng = random.Random(f"{self.host}/recv/{qpn}/{seed}")
        rkey = rng.getrandbits(32)
        qp = RecvQp(qpn, rkey, mem, mem.view, None, rng, transport=short_name(core.name))
        # the compiled Receiver copies payloads into the buffer itself; the reference
        # calls a placer per packet
        place = qp.buf if core.compiled else _placer(qp.buf)
        qp.receiver = core.receiver(place, port_state=lambda: self.port_bitmap)
        self.recv_qps[qpn] = qp
        return qp

    def open_send_qp(self, peer, mode: str, size: int, peer_qpn: int, rkey: int,
                     n_evs: int, seed: int | str, tunables: dict,
                     transport: str | None = None) -> SendQp:
        """A sending QP to `peer` (a host node), its source buffer filled from `seed`;
        `tunables` override SenderConfig fields; its sender of the `transport` asked for
        (None: the endpoint's)."""
        core = self.transport_for(transport)  # before anything is registered
        planes = list(self.fabric.nic_planes)  # every NIC has ports on the same planes
        # Payload per packet: 4096, or less where the fabric's MTU cannot carry it;
        # the delay target from the slowest link a packet crosses.
        payload = max_payload(self.fabric.spec.mtu)
        spec = self.fabric.spec
        rates = [r for r in (spec.host_rate_bps, spec.fabric_rate_bps) if r]
        frame = payload + wire.MAX_FRAME - wire.MTU
        slowest = min(rates) if rates else None
        cfg = SenderConfig(mode=mode, mtu=payload, target_ns=queueing_target_ns(frame, slowest),
                           **slow_link_floors(frame, slowest),
            # dcqcn's line rate: its port's (a sprayed QP's: every port's together)
            line_rate_bps=(spec.host_rate_bps or 0) * (1 if mode == Mode.SINGLE_PATH
                                                        else len(planes)))
        for key, value in tunables.items():
            setattr(cfg, key, type(getattr(cfg, key))(value))
        mem = GuardedBuffer.filled(size, seed)
        qpn = self._qpn()
        evset = {"planes": planes, "t1_per_plane": self.fabric.spec.t1_per_plane,
                 "size": n_evs, "seed": f"{self.host}/send/{qpn}/{seed}",
                 "cross_rack": peer.rack != self.me.rack}
        recorded = trace.config_to_dict(cfg) if self.record_dir else None  # as built
        sender = core.sender(EvSet(**evset), 0, cfg)
        if recorded is not None:
            calls: list[list] = []
            sender = trace.SenderRecorder(sender, calls)
            self._records[qpn] = trace.Trace(
                f"{self.host}-{qpn}", "sender", f"recorded by the endpoint on {self.host} "
                f"({short_name(core.name)} transport), QP {qpn} to {peer.name}", calls,
                evset=evset, config=recorded, source_size=size, source_seed=0)
        t = now_ns()
        sender.set_local_ports(self.port_bitmap, t)
        qp = SendQp(qpn, peer.name, str(nic_address(self.fabric, peer)), peer_qpn, rkey, mem,
                    mem.view, sender, mode, started_ns=t, transport=short_name(core.name))
        qp.direct = self._direct_sender is not None and type(sender) is self._direct_sender
        self.send_qps[qpn] = qp
        if qp.direct:  # its ACKs go straight to its sender, in C (RxRing.recv)
            self.rx_ring.bind_sender(qpn, sender)
        if sender.pacer is not None and sender.single_ev is not None:
            self._paced[qpn] = qp
        self._warm_routes(peer)
        return qp

    def connect(self, qp: RecvQp, peer, peer_qpn: int) -> None:
        """Tell a receiving QP which QP at which peer (a host node) sends to it."""
        qp.peer_nic = str(nic_address(self.fabric, peer))
        qp.peer_qpn = peer_qpn
        self._warm_routes(peer)
        self._bind(qp)

    def _bind(self, qp: RecvQp) -> None:
        """Once its peer is known (connect, or its first packet), a compiled receiver's
        data packets go straight from the receive ring to it (RxRing.bind): checked,
        placed and acknowledged in C, Python given only what it acts on (_recv_ring). A
        reference receiver's, and any before the peer is known, take the tuple path."""
        if self.rx_ring is not None and qp.transport == "compiled" and qp.peer_nic:
            self.rx_ring.bind(qp.qpn, qp.receiver, qp.rkey, qp.peer_qpn)

    def _ack_way(self, qpn: int, ev: int) -> tuple[bytes, int, bytes] | None:
        """For the ring (RxRing.acks): the way back of a bound QP's SACKs for `ev`'s
        path, as _send_sack frames them: (headers, ICRC seed, packed destination)."""
        qp = self.recv_qps.get(qpn)
        rev = None if qp is None else self._reverse(qp, ev)
        if rev is None:
            return None
        head, seed = rev[0].headers(wire.ACK_SIZE)
        return head, seed, self._packed_peer(rev[1])

    def write(self, qp: SendQp, size: int, offset: int, imm: int | None) -> int:
        """Post an RDMA WRITE of the source buffer's [offset, offset + size); its MSN."""
        if not qp.first_write_ns:
            qp.first_write_ns = now_ns()
        qp.done_ns = 0
        return qp.sender.post(size, offset, imm, now_ns())

    def close(self, qpn: int) -> None:
        """Forget QP `qpn` (sending or receiving); its counters stay in the totals (and
        with MRC_TWIN_RECORD, a sending QP's trace is written)."""
        rec = self._records.pop(qpn, None)
        if rec is not None:
            try:
                trace.save(rec, Path(self.record_dir) / f"{rec.name}.json.gz")
            except OSError:
                pass  # a diagnostic: the data path does not fail for it
        self._paced.pop(qpn, None)
        if self.rx_ring is not None:
            self.rx_ring.unbind(qpn)
        sq = self.send_qps.get(qpn)
        if sq is not None and sq.direct:
            self.rx_ring.unbind_sender(qpn)
        self.counters.close(self.send_qps.pop(qpn, None), self.recv_qps.pop(qpn, None))
        self.np.forget(qpn)

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
                self._next_timer = t + self.timer_ns
            # Owed ACKs on their own deadline, not the 1 ms timer's: a delayed ACK's wait
            # is in the RTT its sender measures (and in the reordering it learns from it)
            if t >= self._next_ack and got < RECV_BATCH:
                self._delayed_acks(t)
            if t >= self._next_probe:
                self._probe_retired(t)
                self._next_probe = t + PROBE_NS
            if self.netlink is None and t >= self._next_port_poll:
                self._poll_ports()
                self._next_port_poll = t + PORT_POLL_NS
            # The sockets drained (fewer than a whole batch came), the selector may block:
            # the next datagram wakes it (epoll is level-triggered: one still queued
            # returns at once), and so does the earliest deadline (_sleep_s). Polling it
            # again instead cost the receiver a round of this loop, and a recvmmsg that
            # gets nothing, per wakeup: two rounds for every 2-3 packets at full rate.
            timeout = 0 if busy or got >= RECV_BATCH else self._sleep_s(t)
            if timeout != 0 and self._epoll_fd is not None:
                self._wait(timeout)  # the ring's C reads it while nothing needs Python
                timeout = 0  # and the selector hands out what woke it
            for key, mask in self.sel.select(timeout):
                if key.data is not None:  # UDP's is None: read above, every round
                    key.data(mask)

    def _sleep_s(self, t: int) -> float | None:
        """How long the selector may block: until the earliest timer that has work, or
        for ever (None) when no QP needs a timer. Packets and requests wake it."""
        deadlines = []
        if any(q.sender.wants_to_send(t) for q in self.send_qps.values()):
            return 0
        for q in self.send_qps.values():  # dcqcn: wake when the pacer lets a packet go
            if not q.sender.idle and not q.sender.failed:
                n = q.sender.next_send_ns(t)
                if n is not None and n > t:
                    deadlines.append(n)
        if any(not q.sender.idle and not q.sender.failed for q in self.send_qps.values()):
            deadlines.append(self._next_timer)
        if self._next_ack != NEVER:
            deadlines.append(self._next_ack)
        if any(q.probes or q.sender.evs.retired for q in self.send_qps.values()
               if q.mode == Mode.MRC):
            deadlines.append(self._next_probe)
        if self.netlink is None:
            deadlines.append(self._next_port_poll)
        return max(0.0, (min(deadlines) - t) / 1e9) if deadlines else None

    def _port_shares(self) -> None:
        """dcqcn: a NIC port serves its backlogged QPs in turn, so n paced QPs on one
        port get 1/n of its rate each (a real NIC's port never drops what its QPs send;
        the host link here would). Single-path QPs only: a sprayed QP's ports vary.
        Runs every loop round, so it walks the paced QPs only (none on an MRC host)."""
        line = self.fabric.spec.host_rate_bps
        if not line or not self._paced:
            return
        on_port: dict[int, list] = {}
        for qp in self._paced.values():
            s = qp.sender
            if s.idle or s.failed:
                s.pacer.cap_bps = None
            else:
                on_port.setdefault(s.single_ev.plane, []).append(s.pacer)
        for pacers in on_port.values():
            for pacer in pacers:
                pacer.cap_bps = line / len(pacers)

    def _send_all(self) -> bool:
        busy = False
        t = now_ns()
        self._port_shares()
        for qp in self.send_qps.values():
            if qp.sender.idle or qp.sender.failed:
                continue
            if qp.direct:  # polled and built in C: no TxPacket
                polled, refused = self.tx_batch.post_sender(
                    qp.sender, t, qp.src, SEND_BUDGET, qp.templates,
                    lambda ev, qp=qp: self._template(qp, ev), qp)
                if polled:
                    busy = True
                    if refused:
                        self._refused(refused)
                continue
            txs = qp.sender.poll(t, qp.src, SEND_BUDGET)
            if txs:
                busy = True
                (self._send_python if self.tx_batch is None else self._send_batch)(qp, txs)
        return busy

    def batching(self) -> dict:
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

    def rx_bytes_per_plane(self) -> dict[int, int]:
        """Payload placed, per plane, over the endpoint's life: the Python path's count,
        and what the ring placed for bound QPs."""
        placed = self.rx_ring.plane_bytes if self.rx_ring is not None else {}
        return {p: n + placed.get(p, 0) for p, n in self.rx_plane_bytes.items()}

    def path(self, qp: SendQp, ev: int) -> str:
        """The uSID program an EV of this QP travels (udp-entropy: the peer's port
        address in the EV's plane; which T1 it crosses is the fabric's hash)."""
        path = qp.paths.get(ev)
        if path is None:
            if self.framing.ecmp:
                path = qp.paths[ev] = self.framing.address(qp.peer, ev & _PLANE_MASK)
                return path
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
        """Every path to `peer`, before its QP's first packet (on the control path);
        udp-entropy has none to compute (its addresses are computed once, at start)."""
        if self.framing.ecmp:
            return
        for plane in self.fabric.nic_planes:
            for t1 in range(self.fabric.spec.t1_per_plane):
                self._route(peer, plane, t1)

    def _template(self, qp: SendQp, ev: int) -> wire.DataTemplate:
        if len(qp.templates) >= qp.cache_max:  # bounded: keep the EVs still in slots
            live = {e.value for e in qp.sender.evs.active}
            for cache in (qp.templates, qp.paths):  # in place: TxBatch.post holds the dict
                for k in [k for k in cache if k not in live]:
                    del cache[k]
        if self.framing.ecmp:  # one IPv6 header, port address to port address
            tpl = qp.templates[ev] = wire.DataTemplate(
                None, None, self.framing.own[ev & _PLANE_MASK], self.path(qp, ev), ev,
                qp.peer_qpn, qp.rkey)
            return tpl
        tpl = qp.templates[ev] = wire.DataTemplate(self.nic, self.path(qp, ev), self.nic,
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
        if self.rx_ring is not None:  # bound QPs' held SACKs: sent in C
            for item in self.rx_ring.flush_sacks():
                self._on_bound(item)
        if got:  # a QP that got data may owe an ACK now: due DELAYED_ACK_NS from now
            self._next_ack = min(self._next_ack, now_ns() + DELAYED_ACK_NS)
        return got

    def _recv_python(self) -> int:
        if len(self.rx_socks) == 1:
            return self._recv_socket(self.udp, self.nic_packed)
        got = 0  # udp-entropy: a socket per plane, each its share of the batch
        for sock, local in self.rx_socks:
            got += self._recv_socket(sock, local, RECV_BATCH // len(self.rx_socks), True)
        return got

    def _recv_socket(self, sock: socket.socket, local: bytes, batch: int = RECV_BATCH,
                     ecmp: bool = False) -> int:
        """Up to `batch` datagrams from one socket, `local` the address it is bound to
        (the destination the ICRC covers), `ecmp` its framing's (wire.decode)."""
        got = 0
        recvmsg = sock.recvmsg
        for _ in range(batch):
            try:
                data, anc, _, addr = recvmsg(RECV_BUF, ANC_BUF)
            except BlockingIOError:
                break
            got += 1
            try:
                pkt = wire.decode(data, self._packed_peer(addr[0]), local, addr[1],
                                  wire.flowinfo_of(anc), ecmp)
            except wire.BadPacket as e:
                self.drops[_DROP_OF_REASON[e.reason]] += 1
                continue
            if isinstance(pkt, wire.DataPacket):
                self._on_data(pkt.dest_qp, pkt.psn, pkt.va, pkt.rkey, pkt.payload, pkt.ev,
                              pkt.tries, pkt.ack_req, pkt.imm, addr[0], pkt.tc)
            elif isinstance(pkt, wire.Trimmed):
                self._on_trimmed(pkt.dest_qp, pkt.psn, pkt.va, pkt.rkey, pkt.dma_len, pkt.ev,
                                 pkt.tries, pkt.opcode, pkt.tc, addr[0])
            else:
                self._on_control(pkt)
        return got

    def _recv_ring(self) -> int:
        """Up to RECV_BATCH datagrams, RX_SLOTS per recvmmsg, parsed in C. A payload is a
        view into the ring, placed before the next recvmmsg overwrites it. A bound QP's
        data packets (_bind) never come here: their Receiver took them in C, and what
        comes instead is what Python acts on (_on_bound)."""
        got = 0
        for _ in range(RECV_BATCH // RX_SLOTS):
            items = self.rx_ring.recv()
            received = self.rx_ring.received  # what a bound QP's C took makes no item
            got += received
            if items:
                self._on_items(items)
            if received < RX_SLOTS:
                break
        return got

    def _on_items(self, items: list) -> None:
        """What the ring's recv (or wait) gave back for Python: parse's tuples and the
        bound QPs' events."""
        on_data, on_bound, drops = self._on_data, self._on_bound, self.drops
        for item in items:
            kind = item[0]
            if kind >= 4:
                on_bound(item)
            elif kind == 1:  # (1, dest_qp, psn, va, rkey, payload, ev, tries, ack_req,
                on_data(*item[1:])  # imm, src, tc)
            elif kind == 0:  # (0, reason)
                drops[_DROP_OF_REASON[item[1]]] += 1
            elif kind == 3:  # (3, dest_qp, psn, va, rkey, dma_len, ev, tries, opcode, tc,
                self._on_trimmed(*item[1:])  # src): trimmed by a switch
            else:  # (2, whole, opcode, ...): the ICRC is checked, the rest is wire's
                _, whole, opcode, *_ = item
                try:
                    pkt = wire.decode_checked(whole, opcode)
                except wire.BadPacket as e:
                    drops[_DROP_OF_REASON[e.reason]] += 1
                    continue
                self._on_control(pkt)

    def _wait(self, timeout: float | None) -> None:
        """Sleep until the selector has something, or `timeout` (s; None: no deadline),
        in the ring's C (RxRing.wait): while only the ring's socket wakes it and what it
        reads needs no Python (a bound QP's data, acknowledged in C), it does not come
        back here. What it read counts as _recv_batch's would: the delayed ACK is due
        DELAYED_ACK_NS after its first batch, and its leftovers are handled as recv's."""
        items, got, first_ns, _ = self.rx_ring.wait(
            self._epoll_fd, -1 if timeout is None else int(timeout * 1e9), DELAYED_ACK_NS)
        if items:
            self._on_items(items)
        if self._pending_sacks:
            self._flush_sacks()
        if got:
            self._next_ack = min(self._next_ack, first_ns + DELAYED_ACK_NS)

    def _on_bound(self, item: tuple) -> None:
        """What a bound QP's compiled Receiver left to Python (RxRing.recv's events): a
        NAK, a CE notice for DCQCN's notification point, its drops (its last packet, the
        delayed ACK's, is asked for by _delayed_acks: _last; the bytes placed are read
        from the ring: rx_bytes_per_plane). Its SACKs are coalesced, framed
        and sent by the ring (RxRing.acks); without that, each comes here to send or
        coalesce, and with acks but no fd, each frame comes here to send. A QP closed
        since (its events still in the batch) is gone: nothing is sent for it."""
        kind = item[0]
        if kind == 11:  # (11, qpn): its ACKs taken in C (bind_sender), its sender idle or
            qp = self.send_qps.get(item[1])  # failed
            if qp is not None:
                self._maybe_done(qp)
            return
        if kind == 10:  # (10, qpn, frame, dst): a SACK framed in C, no fd to send it on
            try:
                self.raw.sendto(item[2], (socket.inet_ntop(socket.AF_INET6, item[3]), 0))
            except OSError:
                pass
            return
        qp = self.recv_qps.get(item[1])
        if kind == 8:  # (8, qpn, bad_rkey, out_of_bounds)
            self.drops["bad_rkey"] += item[2]
            self.drops["out_of_bounds"] += item[3]
            if qp is not None:
                qp.bad_rkey += item[2] + item[3]
            return
        if qp is None:
            return
        if kind == 4:  # (4, qpn, cum, bitmap, ev, psn, tries, congestion, dup, urgent)
            _, _, cum, bitmap, ev, psn, tries, congestion, dup, urgent = item
            sack = SackReport(cum, bitmap, ev, psn, tries, self.port_bitmap, congestion, dup)
            if urgent:  # the sender waits on it, or it echoes a CE mark (as _on_data)
                self._pending_sacks.pop(qp.qpn, None)
                self._send_sack(qp, sack)
            else:
                self._coalesce(qp, sack)
        elif kind == 5:  # (5, qpn, psn, ev): psn is cum as it was then
            self._send_nack(qp, item[2], item[3], cum=item[2])
        elif kind == 6:  # (6, qpn, ev, t_ns)
            if self.np.on_ce(qp.qpn, item[3]):
                self._send_cnp(qp, item[2])

    def _on_control(self, pkt) -> None:
        if isinstance(pkt, wire.Ack):
            self._on_ack(pkt)
        elif isinstance(pkt, wire.Nack):
            qp = self.send_qps.get(pkt.dest_qp)
            if qp is None:
                self.drops["unknown_qp"] += 1
                return
            try:  # a NAK can be the loss (or the trim) that reaches a PSN's limit
                qp.sender.on_nack(_unwrap24(pkt.psn, qp.sender.cum), now_ns(),
                                  pkt.code == wire.NAK_TRIMMED, pkt.sack.ev, pkt.sack.tries)
            except QpFailed:
                pass
            self._maybe_done(qp)
        elif isinstance(pkt, wire.Probe):
            self._on_probe(pkt)
        elif isinstance(pkt, wire.Cnp):
            qp = self.send_qps.get(pkt.dest_qp)  # addressed to the requester's QP
            if qp is None:
                self.drops["unknown_qp"] += 1
            else:
                qp.sender.on_cnp(now_ns())

    def _on_data(self, dest_qp: int, psn: int, va: int, rkey: int, payload, ev: int,
                 tries: int, ack_req: bool, imm: int | None, src: str | bytes,
                 tc: int = 0) -> None:
        """One data packet, its fields as decoded; `src` the peer's address (text or
        packed), `tc` the inner traffic class it came with (ECN: its low 2 bits). The
        payload may be a view into the receive ring: placed now or never."""
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
        ce = tc & wire.ECN_MASK == wire.CE
        rp = RxPacket(_unwrap24(psn, rx.cum), va, payload, imm, ev, tries, ack_req, ce)
        if qp.peer_nic is None:
            qp.peer_nic = src if isinstance(src, str) else socket.inet_ntop(socket.AF_INET6,
                                                                            src)
            self._bind(qp)  # its next packets: the ring's
        qp.last_pkt = rp  # for a delayed ACK: its PSN, EV and try (never its payload)
        qp.last_data_ns = now_ns()
        placed = rx.bytes_placed
        sack = rx.on_data(rp)
        if rx.bytes_placed != placed:
            plane = ev & _PLANE_MASK
            if plane in self.rx_plane_bytes:
                self.rx_plane_bytes[plane] += rx.bytes_placed - placed
        if sack is not None:
            # the sender waits on this one, or it echoes a CE mark (never coalesced away)
            if sack.dup or ack_req or imm is not None or sack.congestion:
                self._pending_sacks.pop(qp.qpn, None)  # it says all a pending one would
                self._send_sack(qp, sack)
            else:
                self._coalesce(qp, sack)
        while rx.nacks:
            self._send_nack(qp, rx.nacks.pop(), ev)
        if ce and self.np.on_ce(qp.qpn, qp.last_data_ns):
            self._send_cnp(qp, ev)

    def _on_trimmed(self, dest_qp: int, psn: int, va: int, rkey: int, dma_len: int, ev: int,
                    tries: int, opcode: int, tc: int, src: str | bytes) -> None:
        """A data packet a switch cut to its headers (DSCP 7). It carries no ICRC, so it
        is believed only as far as a NAK goes: for a QP of ours, with its rkey, inside
        its buffer; then a NAK_TRIMMED for its PSN goes back at once, echoing its EV and
        transmission number (the sender resends only the copy they name). Never placed."""
        qp = self.recv_qps.get(dest_qp)
        if qp is None:
            self.drops["unknown_qp"] += 1
            return
        if rkey != qp.rkey or va + dma_len > len(qp.buf) or dma_len > wire.MTU:
            qp.bad_rkey += 1
            self.drops["bad_rkey" if rkey != qp.rkey else "out_of_bounds"] += 1
            return
        if qp.peer_nic is None:
            return  # nobody to NAK yet: the sender's loss detection finds it
        rx = qp.receiver
        report, nack = rx.on_trimmed(RxPacket(_unwrap24(psn, rx.cum), va, b"", None, ev,
                                              tries, False, tc & wire.ECN_MASK == wire.CE))
        if report is None:
            return
        if nack:
            self._send_nack(qp, report.psn, ev, wire.NAK_TRIMMED, report)
        else:
            self._send_sack(qp, report)

    def _coalesce(self, qp: RecvQp, sack: SackReport) -> None:
        """Keep `sack` as its QP's last of this batch, and the one it replaces as the
        companion if that went another way: a batch's acknowledgement then travels two
        paths, and one path dying (links fail both ways) cannot take all of it. With one
        SACK per batch, a flight that arrived whole was acknowledged by one packet; lost
        with its path, it left the sender's window full and nothing to say so until the
        retransmit timer (measured in bench_endpoint's recovery: 8.8 ms, 7 of the 8
        PSNs it resent had arrived)."""
        held = self._pending_sacks.get(qp.qpn)
        other = None
        if held is not None:
            last, other = held[1], held[2]
            if (last.ev ^ sack.ev) & _PATH_MASK:
                other = last
        self._pending_sacks[qp.qpn] = (qp, sack, other)

    def _flush_sacks(self) -> None:
        """Each QP's last plain SACK of this receive batch, after the last before it on
        another path (the others coalesced: the last says all they did)."""
        for qp, sack, other in self._pending_sacks.values():
            if other is not None:
                self._send_sack(qp, other)
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
            if self.framing.ecmp:
                qp.rev_evs[key] = rev
                hit = qp.framers[key] = self._ecmp_framer(self._host_of(qp.peer_nic), rev)
                return hit
            path = self._reverse_path(qp, rev)
            qp.rev_evs[key] = rev
            hit = qp.framers[key] = (wire.Framer(self.nic, path, self.nic, qp.peer_nic, rev),
                                     path)
        return hit

    def _ecmp_framer(self, peer, ev: int) -> tuple[wire.Framer, str]:
        """udp-entropy framing: a Framer for control packets of `ev` to host `peer`, from
        our port address in the EV's plane to the peer's, and where to send them (the
        peer's port address: the kernel's route for that plane's /52 takes it out of
        that plane's port)."""
        plane = ev & _PLANE_MASK
        dst = self.framing.address(peer.name, plane)
        return wire.Framer(None, None, self.framing.own[plane], dst, ev), dst

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
            cum, sack.bitmap, sack.ev, sack.tries, sack.congestion, self.port_bitmap,
            sack.dup))
        try:
            self.raw.sendto(rev[0].frame(body), (rev[1], 0))
        except OSError:
            pass

    def _send_nack(self, qp: RecvQp, psn: int, ev: int,
                   code: int = wire.NAK_PSN_SEQUENCE_ERROR,
                   report: SackReport | None = None, cum: int | None = None) -> None:
        """A NAK on the path of the packet that showed it: PSN sequence error for a hole,
        or NAK_TRIMMED for a trimmed packet (`report`: its SACK, echoing that copy's EV
        and transmission number, and the congestion byte); `cum` the receiver's when the
        hole showed (None: now)."""
        rev = self._reverse(qp, ev)
        if rev is None:
            return
        cum = (qp.receiver.cum if cum is None else cum) & 0xFFFFFF
        sack = wire.Sack(cum, 0, ev, 0, 0, self.port_bitmap) if report is None else \
            wire.Sack(cum, report.bitmap, report.ev, report.tries, report.congestion,
                      self.port_bitmap)
        body = wire.encode_nack(qp.peer_qpn, psn & 0xFFFFFF, cum, code, sack)
        try:
            self.raw.sendto(rev[0].frame(body), (rev[1], 0))
        except OSError:
            pass

    def _send_cnp(self, qp: RecvQp, ev: int) -> None:
        """DCQCN: a CNP to the sending QP, on the reverse of the marked packet's path
        (Not-ECT, as every control packet)."""
        rev = self._reverse(qp, ev)
        if rev is None:
            return
        try:
            self.raw.sendto(rev[0].frame(wire.encode_cnp(qp.peer_qpn)), (rev[1], 0))
            qp.cnps_sent += 1
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

    def _delayed_acks(self, t: int) -> None:
        """The delayed ACK of every receiving QP whose last packet came DELAYED_ACK_NS
        ago and is not yet acknowledged (ack_every: an odd one out, a flight's tail);
        then when the next one is due (NEVER: none is owed)."""
        due = NEVER
        for rq in self.recv_qps.values():
            if not rq.receiver.owes_ack:
                continue
            self._last(rq)
            if t - rq.last_data_ns >= DELAYED_ACK_NS:
                sack = rq.receiver.flush(rq.last_pkt)
                if sack is not None:
                    self._send_sack(rq, sack)
            else:
                due = min(due, rq.last_data_ns + DELAYED_ACK_NS)
        self._next_ack = due

    def _last(self, rq: RecvQp) -> None:
        """A bound QP's last packet and when it came, from the ring (which kept them in C:
        nothing per batch), into `last_pkt` and `last_data_ns`; an unbound QP's are
        already there."""
        last = self.rx_ring.last(rq.qpn) if self.rx_ring is not None else None
        if last is not None:
            psn, va, ev, tries, ack_req, ce, rq.last_data_ns = last
            rq.last_pkt = RxPacket(psn, va, b"", None, ev, tries, ack_req, ce)

    def _probe_retired(self, t: int) -> None:
        """Background EV probes: retired EVs come back after enough answered probes.
        Each round probes the next few retired EVs (round robin), so none starves."""
        for qp in self.send_qps.values():
            if qp.mode != Mode.MRC:
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
                path = qp.paths.get(e.value) or self.path(qp, e.value)
                try:
                    self.raw.sendto(self._frame(qp.peer_nic, path, e.value, body), (path, 0))
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
                self.raw.sendto(self._frame(qp.peer_nic, path, probe.reverse_ev, body),
                                (path, 0))
            except OSError:
                pass
            return
        qp = self.send_qps.get(probe.dest_qp)
        if qp is None:
            self.drops["unknown_qp"] += 1
            return
        if probe.ev not in qp.probes:  # late (timed out already), forged, or never probed
            self.drops["probe_unknown"] += 1
            return
        del qp.probes[probe.ev]
        qp.sender.probe_result(probe.ev, True, now_ns())

    def _reverse_path(self, qp: RecvQp, ev: int) -> str:
        """Where a packet of `ev` to the QP's peer is sent: its uSID program (srv6), or
        the peer's port address in the EV's plane (udp-entropy)."""
        if self.framing.ecmp:
            return self.framing.address(self._host_of(qp.peer_nic).name, ev & _PLANE_MASK)
        plane, t1, _ = ev_fields(ev)
        return self._route(self._host_of(qp.peer_nic), plane, t1)

    def _frame(self, peer_nic: str, path: str, ev: int, body: bytes) -> bytes:
        """A whole control packet of `ev` to `path` (what _reverse_path or path gave):
        srv6, IPv6-in-IPv6 NIC to NIC; udp-entropy, our port address in the EV's plane
        to `path`, the peer's there."""
        if self.framing.ecmp:
            return wire.frame_ecmp(self.framing.own[ev & _PLANE_MASK], path, ev, body)
        return wire.frame(self.nic, path, ev, self.nic, peer_nic, body)

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
            if self.rx_ring is not None:
                self.rx_ring.port_bitmap = bitmap
            t = now_ns()
            for qp in self.send_qps.values():
                qp.sender.set_local_ports(bitmap, t)

    def _maybe_done(self, qp: SendQp) -> None:
        if (qp.sender.idle or qp.sender.failed) and qp.waiters:
            if not qp.done_ns:
                qp.done_ns = now_ns()
            self.on_done(qp)  # answers the waiters and clears them


def max_payload(link_mtu: int) -> int:
    """The largest payload whose whole IPv6-in-IPv6 packet fits the link MTU."""
    return max(64, min(wire.MTU, link_mtu - (wire.MAX_FRAME - wire.MTU)))


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

