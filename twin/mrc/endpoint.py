"""The MRC endpoint daemon: one per GPU host, inside the host's network namespace.

    python -m twin.mrc.endpoint --config endpoint.json --control endpoint.sock

Data path (one thread, one loop):
    send   Sender.poll -> a precomputed DataTemplate per (QP, EV) -> an IPPROTO_RAW
           socket writes the whole IPv6-in-IPv6 packet onto the EV's uSID path
    recv   the host's End.DT6 decap delivers the inner packet to a UDP socket on
           [NIC]:4791 (UDP_NO_CHECK6_RX: checksum 0, integrity from the ICRC)
    acks   SACKs and NAKs go back on the QP's reverse EV set: one EV per plane,
           seeded with the first data EV seen on that plane and redrawn whenever a
           duplicate shows the sender missed an answer
    ports  the host's NIC port state is read from sysfs every few ms: a port that
           goes down stops its plane locally and, through the port-state bitmap in
           every SACK, at the peers

Control: newline-delimited JSON on a unix socket, one request per line, one reply
per request (`wait` replies when its write completes). Requests:

    hello                          who am I: host, NIC, planes
    recv_qp   {size}               register a receive buffer: {qpn, rkey}
    send_qp   {peer, peer_qpn, rkey, size, mode, evs, seed}   a sending QP: {qpn}
    connect   {qpn, peer, peer_qpn}   tell a receiving QP its sender (ACKs go there)
    deny      {qpn, evs}           put EVs on the QP's denylist
    write     {qpn, size, offset, imm}   post an RDMA WRITE (WRITE_IMM with imm)
    wait      {qpn, timeout}       reply when the QP is idle, failed or timed out
    digest    {qpn, size, offset}  sha256 of a QP's buffer (source or destination)
    stats                          every QP's counters, as JSON
    metrics                        the same in Prometheus text format
    close     {qpn}

Imports only the standard library, PyYAML and twin's pure modules, so it runs with
the bind-mounted code inside a host container.
"""

from __future__ import annotations

import argparse
import fcntl
import gc
import hashlib
import json
import os
import random
import selectors
import socket
import struct
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from twin.model import build_fabric
from twin.mrc import wire
from twin.mrc.evset import EvSet
from twin.mrc.transport import QpFailed, Receiver, RxPacket, Sack, Sender, SenderConfig
from twin.paths import ev_encode, ev_fields, route
from twin.plan import nic_address
from twin.spec import parse_spec

RECV_BATCH = 256
SEND_BUDGET = 64
TIMER_NS = 1_000_000
DELAYED_ACK_NS = 200_000
PORT_POLL_NS = 5_000_000
PROBE_NS = 10_000_000  # background EV probes of retired EVs, per QP
PROBE_TIMEOUT_NS = 50_000_000
PROBES_PER_ROUND = 8
SO_RCVBUFFORCE, SO_SNDBUFFORCE = 33, 32
SIOCGIFFLAGS, IFF_UP, IFF_RUNNING = 0x8913, 0x1, 0x40


def now_ns() -> int:
    return time.monotonic_ns()


@dataclass
class RecvQp:
    qpn: int
    rkey: int
    buf: bytearray
    receiver: Receiver
    peer_nic: str | None = None
    peer_qpn: int = 0  # the sending QP at the peer: ACKs are addressed to it
    reverse: dict[int, str] = field(default_factory=dict)  # data EV -> path back
    ack_heads: dict[int, tuple[bytes, str]] = field(default_factory=dict)  # EV -> (hdr, path)
    rev_evs: dict[int, int] = field(default_factory=dict)  # plane -> reverse EV
    rev_refreshes: int = 0
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
    src: bytearray
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
    resurrected: int = 0


class Endpoint:
    def __init__(self, config: dict, control: str):
        self.cfg = config
        self.host = config["host"]
        self.nic = config["nic"]
        self.ports: dict[int, str] = {int(p): ifname for p, ifname in config["ports"].items()}
        self.fabric = build_fabric(parse_spec(config["spec"], "endpoint.json"))
        self.me = self.fabric.node(self.host)
        self._hosts_by_nic = {str(nic_address(self.fabric, h)): h for h in self.fabric.hosts}
        self.recv_qps: dict[int, RecvQp] = {}
        self.send_qps: dict[int, SendQp] = {}
        self._next_qpn = 1
        self.bad_packets = 0
        self.unknown_qp = 0
        self.totals = {"bytes_sent": 0, "bytes_placed": 0, "retransmits": 0}
        self._open_sockets(control)
        self.port_bitmap = self._read_ports()

    # -- sockets ----------------------------------------------------------------

    def _open_sockets(self, control: str) -> None:
        self.raw = socket.socket(socket.AF_INET6, socket.SOCK_RAW, socket.IPPROTO_RAW)
        self.udp = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
        wire.allow_zero_udp_checksum(self.udp)
        for sock, opt in ((self.udp, SO_RCVBUFFORCE), (self.raw, SO_SNDBUFFORCE)):
            try:
                sock.setsockopt(socket.SOL_SOCKET, opt, 8 << 20)
            except OSError:
                pass
        self.udp.bind((self.nic, wire.ROCE_PORT))
        self.udp.setblocking(False)
        Path(control).parent.mkdir(parents=True, exist_ok=True)
        if os.path.exists(control):
            os.unlink(control)
        self.ctl = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.ctl.bind(control)
        self.ctl.listen(16)
        self.ctl.setblocking(False)
        self.sel = selectors.DefaultSelector()
        self.sel.register(self.ctl, selectors.EVENT_READ, ("accept", None))
        self.sel.register(self.udp, selectors.EVENT_READ, ("udp", None))

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
        last_timer = last_ports = last_probe = now_ns()
        while True:
            busy = self._send_all()
            drained = self._recv_batch()
            busy |= drained != 0
            t = now_ns()
            # Timers only once every ACK that arrived is processed: after a stall (CPU
            # steal, GC) the queue holds the answers a timer would otherwise miss.
            if t - last_timer >= TIMER_NS and drained < RECV_BATCH:
                self._timers(t)
                last_timer = t
            if t - last_ports >= PORT_POLL_NS:
                self._poll_ports()
                last_ports = t
            if t - last_probe >= PROBE_NS:
                self._probe_retired(t)
                last_probe = t
            # Nothing moved: sleep until a packet or a control request arrives (the UDP
            # socket is in the selector), briefly while a QP waits on its window.
            idle_s = 0.001 if self._sending() else 0.005
            for key, _ in self.sel.select(0 if busy else idle_s):
                kind, conn = key.data
                if kind == "accept":
                    c, _ = self.ctl.accept()
                    c.setblocking(False)
                    self.sel.register(c, selectors.EVENT_READ, ("ctl", {"sock": c, "buf": b""}))
                elif kind == "ctl":
                    self._control(conn)

    def _sending(self) -> bool:
        return any(not q.sender.idle and not q.sender.failed for q in self.send_qps.values())

    def _send_all(self) -> bool:
        busy = False
        t = now_ns()
        for qp in self.send_qps.values():
            if qp.sender.idle or qp.sender.failed:
                continue
            for tx in qp.sender.poll(t, memoryview(qp.src), SEND_BUDGET):
                busy = True
                tpl = qp.templates.get(tx.ev) or self._template(qp, tx.ev)
                pkt = tpl.build(tx.psn & 0xFFFFFF, tx.va, tx.payload, tx.msn, tx.ts_ns,
                                tx.flags, tx.imm)
                try:
                    self.raw.sendto(pkt, (qp.paths[tx.ev], 0))
                except OSError:
                    qp.send_errors += 1  # no route (our port is down): lost, recovered
        return busy

    def _path(self, qp: SendQp, ev: int) -> str:
        """The uSID program an EV of this QP travels (computed once per EV)."""
        path = qp.paths.get(ev)
        if path is None:
            plane, t1, _ = ev_fields(ev)
            peer = self.fabric.node(qp.peer)
            path = qp.paths[ev] = route(self.fabric, self.me, peer, plane,
                                        None if peer.rack == self.me.rack else t1).address
        return path

    def _template(self, qp: SendQp, ev: int) -> wire.DataTemplate:
        tpl = qp.templates[ev] = wire.DataTemplate(self.nic, self._path(qp, ev), self.nic,
                                                   qp.peer_nic, ev, qp.peer_qpn, qp.rkey)
        return tpl

    def _recv_batch(self) -> int:
        got = 0
        for _ in range(RECV_BATCH):
            try:
                data, addr = self.udp.recvfrom(wire.MTU + 256)
            except BlockingIOError:
                break
            got += 1
            try:
                pkt = wire.decode(data)
            except wire.BadPacket:
                self.bad_packets += 1
                continue
            if isinstance(pkt, wire.DataPacket):
                self._on_data(pkt, addr[0])
            elif isinstance(pkt, wire.Ack):
                self._on_ack(pkt)
            elif isinstance(pkt, wire.Nack):
                qp = self.send_qps.get(pkt.dest_qp)
                if qp is not None:
                    qp.sender.on_nack(_unwrap24(pkt.psn, qp.sender._cum), now_ns())
            elif isinstance(pkt, wire.Probe):
                self._on_probe(pkt)
        return got

    def _on_data(self, pkt: wire.DataPacket, src: str) -> None:
        qp = self.recv_qps.get(pkt.dest_qp)
        if qp is None:
            self.unknown_qp += 1
            return
        if pkt.rkey != qp.rkey or pkt.va + len(pkt.payload) > len(qp.buf):
            qp.bad_rkey += 1
            return
        rx = qp.receiver
        psn = _unwrap24(pkt.psn, rx.cum)
        rp = RxPacket(psn, pkt.va, pkt.payload, pkt.msn, pkt.flags, pkt.imm, pkt.ev, pkt.ts_ns)
        qp.peer_nic = qp.peer_nic or src
        qp.last_pkt = rp
        qp.last_data_ns = now_ns()
        dups = rx.stats.duplicates
        sack = rx.on_data(rp)
        if rx.stats.duplicates != dups:
            self._refresh_reverse(qp, pkt.ev)
        if sack is not None:
            self._send_sack(qp, sack)
        while rx.nacks:
            self._send_nack(qp, rx.nacks.pop(), pkt.ev)

    def _send_nack(self, qp: RecvQp, psn: int, ev: int) -> None:
        """NAK (PSN sequence error) for a hole, on the path of the packet that showed it."""
        if self._host_of(qp.peer_nic) is None:
            return
        rev = self._reverse_ev(qp, ev)
        path = qp.reverse.get(rev) or self._reverse_path(qp, rev)
        rx = qp.receiver
        body = wire.encode_nack(qp.peer_qpn, psn & 0xFFFFFF, 0, wire.NAK_PSN_SEQUENCE_ERROR,
                                wire.Sack(rx.cum, 0, ev, 0, 0, self.port_bitmap))
        try:
            self.raw.sendto(wire.frame(self.nic, path, ev, self.nic, qp.peer_nic, body),
                            (path, 0))
        except OSError:
            pass

    def _reverse_ev(self, qp: RecvQp, data_ev: int) -> int:
        """The QP's reverse EV set: one EV per plane for SACKs and NAKs, seeded with the
        first data EV seen on the plane (its path is known to work forward)."""
        return qp.rev_evs.setdefault(ev_fields(data_ev)[0], data_ev)

    def _refresh_reverse(self, qp: RecvQp, data_ev: int) -> None:
        """A duplicate arrived: the sender missed our answer, so the plane's reverse EV
        is suspect. Draw another T1 for it."""
        plane = ev_fields(data_ev)[0]
        t1 = random.randrange(self.fabric.spec.t1_per_plane)
        qp.rev_evs[plane] = ev_encode(plane, t1, random.getrandbits(20))
        qp.rev_refreshes += 1

    def _send_sack(self, qp: RecvQp, sack: Sack) -> None:
        """On the plane's reverse EV; the SACK still echoes the data packet's EV."""
        rev = self._reverse_ev(qp, sack.ev)
        head = qp.ack_heads.get(rev)
        if head is None:
            if self._host_of(qp.peer_nic) is None:
                return
            path = qp.reverse.get(rev) or self._reverse_path(qp, rev)
            # An ACK's size never changes, so its 88 header bytes are fixed per path.
            head = qp.ack_heads[rev] = (wire.frame(
                self.nic, path, rev, self.nic, qp.peer_nic,
                bytes(wire.ACK_SIZE))[:-wire.ACK_SIZE], path)
        body = wire.encode_ack(qp.peer_qpn, sack.cum & 0xFFFFFF, 0, wire.Sack(
            sack.cum, sack.bitmap, sack.ev, sack.ts_ns, 0, self.port_bitmap))
        try:
            self.raw.sendto(head[0] + body, (head[1], 0))
        except OSError:
            pass

    def _host_of(self, nic: str):
        return self._hosts_by_nic.get(nic)

    def _on_ack(self, ack: wire.Ack) -> None:
        qp = self.send_qps.get(ack.dest_qp)  # an ACK is addressed to the requester's QP
        if qp is None:
            self.unknown_qp += 1
            return
        s = ack.sack
        cum = _unwrap(s.cum, qp.sender._cum)
        try:
            qp.sender.on_sack(Sack(cum, s.bitmap, s.ev, s.ts_ns, s.port_state, s.congestion),
                              now_ns())
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
        for qp in self.recv_qps.values():
            if qp.last_pkt is not None and t - qp.last_data_ns > DELAYED_ACK_NS:
                sack = qp.receiver.flush(qp.last_pkt)
                if sack is not None:
                    self._send_sack(qp, sack)

    def _probe_retired(self, t: int) -> None:
        """Background EV probes: retired EVs come back after enough answered probes."""
        for qp in self.send_qps.values():
            if qp.mode != "mrc":
                continue
            for ev, sent in list(qp.probes.items()):
                if t - sent > PROBE_TIMEOUT_NS:  # unanswered: the path is still bad
                    del qp.probes[ev]
                    qp.sender.evs.probe_result(ev, False)
            for e in qp.sender.evs.retired[:PROBES_PER_ROUND]:
                if e.value in qp.probes:
                    continue
                body = wire.encode_probe(qp.peer_qpn, e.value, qp.qpn, t, e.value,
                                         self.port_bitmap)
                path = self._path(qp, e.value)
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
            if qp is None or not qp.peer_nic:
                self.unknown_qp += 1
                return
            path = qp.reverse.get(probe.reverse_ev) or self._reverse_path(qp, probe.reverse_ev)
            body = wire.encode_probe(qp.peer_qpn, probe.ev, probe.probe_id, probe.sent_ns,
                                     probe.reverse_ev, self.port_bitmap, reply=True)
            try:
                self.raw.sendto(wire.frame(self.nic, path, probe.reverse_ev, self.nic,
                                           qp.peer_nic, body), (path, 0))
            except OSError:
                pass
            return
        qp = self.send_qps.get(probe.dest_qp)
        if qp is None or probe.ev not in qp.probes:
            return
        del qp.probes[probe.ev]
        if qp.sender.evs.probe_result(probe.ev, True):
            qp.resurrected += 1

    def _reverse_path(self, qp: RecvQp, ev: int) -> str:
        plane, t1, _ = ev_fields(ev)
        sender_host = self._host_of(qp.peer_nic)
        qp.reverse[ev] = path = route(self.fabric, self.me, sender_host, plane,
                                      None if sender_host.rack == self.me.rack else t1).address
        return path

    def _poll_ports(self) -> None:
        bitmap = self._read_ports()
        if bitmap != self.port_bitmap:
            self.port_bitmap = bitmap
            for qp in self.send_qps.values():
                qp.sender.set_local_ports(bitmap)

    def _maybe_done(self, qp: SendQp) -> None:
        if (qp.sender.idle or qp.sender.failed) and qp.waiters:
            if not qp.done_ns:
                qp.done_ns = now_ns()
            for conn, req_id in qp.waiters:
                self._reply(conn, req_id, self._qp_summary(qp))
            qp.waiters.clear()

    # -- control --------------------------------------------------------------------

    def _control(self, conn: dict) -> None:
        try:
            chunk = conn["sock"].recv(65536)
        except (BlockingIOError, ConnectionError):
            chunk = b"" if not isinstance(sys.exc_info()[1], BlockingIOError) else None
        if chunk is None:
            return
        if not chunk:
            self.sel.unregister(conn["sock"])
            conn["sock"].close()
            return
        conn["buf"] += chunk
        while b"\n" in conn["buf"]:
            line, conn["buf"] = conn["buf"].split(b"\n", 1)
            try:
                req = json.loads(line)
                result = self._handle(conn, req)
            except Exception as e:  # a bad request answers with an error, never kills us
                self._reply(conn, None, {"error": f"{type(e).__name__}: {e}"})
                continue
            if result is not None:
                self._reply(conn, req.get("id"), result)

    def _reply(self, conn: dict, req_id, result: dict) -> None:
        msg = json.dumps({"id": req_id, **result}).encode() + b"\n"
        try:
            conn["sock"].setblocking(True)
            conn["sock"].sendall(msg)
            conn["sock"].setblocking(False)
        except OSError:
            pass

    def _handle(self, conn: dict, req: dict) -> dict | None:
        op = req.get("op")
        if op == "hello":
            return {"host": self.host, "nic": self.nic, "planes": sorted(self.ports),
                    "ports": self.port_bitmap, "pid": os.getpid()}
        if op == "recv_qp":
            qpn = self._qpn()
            rkey = random.getrandbits(32)
            qp = RecvQp(qpn, rkey, bytearray(int(req["size"])), None)
            qp.receiver = Receiver(_placer(qp.buf), port_state=lambda: self.port_bitmap)
            self.recv_qps[qpn] = qp
            return {"qpn": qpn, "rkey": rkey}
        if op == "send_qp":
            return self._send_qp(req)
        if op == "connect":  # tell a receiving QP which QP at which peer sends to it
            qp = self.recv_qps[int(req["qpn"])]
            qp.peer_qpn = int(req["peer_qpn"])
            qp.peer_nic = str(nic_address(self.fabric, self.fabric.node(req["peer"])))
            return {"qpn": qp.qpn}
        if op == "write":
            qp = self.send_qps[int(req["qpn"])]
            size = int(req["size"])
            if not qp.first_write_ns:
                qp.first_write_ns = now_ns()
            qp.done_ns = 0
            msn = qp.sender.post(size, int(req.get("offset", 0)), req.get("imm"), now_ns())
            return {"msn": msn}
        if op == "deny":  # denylist input (e.g. from a clustermapper): never use these EVs
            qp = self.send_qps[int(req["qpn"])]
            for ev in req["evs"]:
                qp.sender.evs.deny(int(ev))
            return {"denied": len(qp.sender.evs.denylist)}
        if op == "wait":
            qp = self.send_qps[int(req["qpn"])]
            if qp.sender.idle or qp.sender.failed:
                return self._qp_summary(qp)
            qp.waiters.append((conn, req.get("id")))
            return None
        if op == "digest":
            qpn = int(req["qpn"])
            buf = self.send_qps[qpn].src if qpn in self.send_qps else self.recv_qps[qpn].buf
            off, size = int(req.get("offset", 0)), int(req.get("size", len(buf)))
            return {"sha256": hashlib.sha256(memoryview(buf)[off:off + size]).hexdigest()}
        if op == "stats":
            return self.stats()
        if op == "metrics":
            return {"text": self.metrics()}
        if op == "close":
            qpn = int(req["qpn"])
            sq, rq = self.send_qps.pop(qpn, None), self.recv_qps.pop(qpn, None)
            if sq is not None:  # closed QPs still count in the endpoint's totals
                self.totals["bytes_sent"] += sq.sender.stats.bytes
                self.totals["retransmits"] += sq.sender.stats.retransmits
            if rq is not None:
                self.totals["bytes_placed"] += rq.receiver.stats.bytes
            return {"closed": qpn}
        raise ValueError(f"unknown op {op!r}")

    def _qpn(self) -> int:
        qpn = self._next_qpn
        self._next_qpn += 1
        return qpn

    def _send_qp(self, req: dict) -> dict:
        peer = self.fabric.node(req["peer"])
        planes = [p for p in self.fabric.host_planes(self.me) if p in
                  self.fabric.host_planes(peer)]
        mode = req.get("mode", "mrc")
        evs = EvSet(planes, self.fabric.spec.t1_per_plane, size=int(req.get("evs", 128)),
                    seed=req.get("seed"))
        size = int(req["size"])
        src = _pattern(size, req.get("seed", 0))
        # Payload per packet: 4096, or less where the fabric's MTU cannot carry it.
        cfg = SenderConfig(mode=mode, mtu=max_payload(self.fabric.spec.mtu))
        for key in ("init_window", "max_window", "target_ns", "rto_min_ns"):
            if key in req:
                setattr(cfg, key, type(getattr(cfg, key))(req[key]))
        qpn = self._qpn()
        sender = Sender(evs, 0, cfg)
        sender.set_local_ports(self.port_bitmap)
        qp = SendQp(qpn, peer.name, str(nic_address(self.fabric, peer)), int(req["peer_qpn"]),
                    int(req["rkey"]), src, sender, mode, started_ns=now_ns())
        self.send_qps[qpn] = qp
        return {"qpn": qpn, "planes": planes}

    # -- reporting ------------------------------------------------------------------

    def _qp_summary(self, qp: SendQp) -> dict:
        st = qp.sender.stats
        elapsed = ((qp.done_ns or now_ns()) - qp.first_write_ns) / 1e9 if qp.first_write_ns else 0
        acked_bytes = min(st.acked * qp.sender.cfg.mtu, qp.sender.posted_bytes)
        return {"qpn": qp.qpn, "peer": qp.peer, "mode": qp.mode, "idle": qp.sender.idle,
                "mtu": qp.sender.cfg.mtu,
                "failed": qp.sender.failed, "elapsed_s": elapsed,
                "goodput_gbps": acked_bytes * 8 / elapsed / 1e9 if elapsed else 0.0,
                "sender": asdict(st), "window": qp.sender.window,
                "srtt_us": qp.sender.srtt / 1000, "evs": qp.sender.evs.counts(),
                "planes_in_use": qp.sender.evs.planes_in_use(), "send_errors": qp.send_errors,
                "probes_sent": qp.probes_sent, "resurrected": qp.resurrected,
                "completions": [{"msn": m.msn, "latency_us": (m.done_ns - m.posted_ns) / 1e3}
                                for m in qp.sender.completed[-16:]],
                "evs_retired": qp.sender.evs.retirements,
                "single_path": self._path(qp, single.value)
                if (single := qp.sender._single) is not None else None}

    def stats(self) -> dict:
        return {
            "host": self.host, "ports": self.port_bitmap, "bad_packets": self.bad_packets,
            "unknown_qp": self.unknown_qp,
            "totals": {
                "bytes_sent": self.totals["bytes_sent"]
                + sum(q.sender.stats.bytes for q in self.send_qps.values()),
                "bytes_placed": self.totals["bytes_placed"]
                + sum(q.receiver.stats.bytes for q in self.recv_qps.values()),
                "retransmits": self.totals["retransmits"]
                + sum(q.sender.stats.retransmits for q in self.send_qps.values())},
            "send_qps": [self._qp_summary(q) for q in self.send_qps.values()],
            "recv_qps": [{"qpn": q.qpn, "bad_rkey": q.bad_rkey, "cum": q.receiver.cum,
                          "completed": q.receiver.completions[-16:],  # (msn, imm), in order
                          "reverse_evs": {str(p): ev for p, ev in sorted(q.rev_evs.items())},
                          "reverse_refreshes": q.rev_refreshes,
                          **asdict(q.receiver.stats)} for q in self.recv_qps.values()],
        }

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
        metric("evs", "gauge", "EVs by state, per QP",
               [({"qp": q.qpn, "state": s}, n) for q in sq
                for s, n in q.sender.evs.counts().items()])
        metric("goodput_bits_per_second", "gauge", "Acked payload rate of the last write",
               [({"qp": q.qpn}, self._qp_summary(q)["goodput_gbps"] * 1e9) for q in sq])
        metric("rx_bytes_total", "counter", "Payload bytes placed, per receiving QP",
               [({"qp": q.qpn}, q.receiver.stats.bytes) for q in self.recv_qps.values()])
        metric("rx_duplicates_total", "counter", "Duplicate data packets dropped",
               [({"qp": q.qpn}, q.receiver.stats.duplicates) for q in self.recv_qps.values()])
        metric("bad_packets_total", "counter", "Packets dropped for a bad ICRC or header",
               [({}, self.bad_packets)])
        metric("port_up", "gauge", "NIC port state, per plane",
               [({"plane": p}, self.port_bitmap >> p & 1) for p in sorted(self.ports)])
        return "\n".join(lines) + "\n"


def max_payload(link_mtu: int) -> int:
    """The largest payload whose whole IPv6-in-IPv6 packet fits the link MTU."""
    return max(64, min(wire.MTU, link_mtu - (wire.MAX_FRAME - wire.MTU)))


def _pattern(size: int, seed) -> bytearray:
    """A source buffer of seeded random bytes, built by doubling (memmove, not Python)."""
    block = random.Random(seed).randbytes(min(size, 1 << 16))
    buf = bytearray(size)
    buf[:len(block)] = block
    filled = len(block)
    while filled < size:
        n = min(filled, size - filled)
        buf[filled:filled + n] = buf[:n]
        filled += n
    return buf


def _placer(buf: bytearray):
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


def _unwrap(cum32: int, ref: int) -> int:
    return cum32 if ref < 1 << 32 else _unwrap24(cum32 & 0xFFFFFF, ref)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--config", required=True, help="endpoint.json rendered for this host")
    ap.add_argument("--control", required=True, help="unix socket path for the control API")
    args = ap.parse_args(argv)
    config = json.loads(Path(args.config).read_text())
    ep = Endpoint(config, args.control)
    gc.freeze()  # long-lived setup objects leave the collector's generations
    print(f"mrc endpoint {ep.host} ({ep.nic}) up, control {args.control}", flush=True)
    try:
        ep.run()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
