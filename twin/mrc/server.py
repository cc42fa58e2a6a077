"""The MRC endpoint's control server: a unix socket beside the packet loop.

Newline-delimited JSON, one request per line, one reply per request (`wait` replies
when its write completes). The socket is mode 0600: it registers memory and writes
into it. Connections share the packet loop's thread and selector, so nothing here
blocks: replies are queued and written as the client reads. A request is refused
with an error reply when it is not a JSON object, names an unknown op or has an
argument of the wrong type or range (sizes are capped by the memory there is); a
line longer than MAX_LINE closes the connection, and a client that stops reading
only loses its own connection (at MAX_PENDING bytes), never stalls the data path.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import selectors
import socket
from pathlib import Path

from twin import unixsock
from twin.mrc import counters, wire
from twin.mrc.loop import PacketLoop, RecvQp, SendQp, now_ns
from twin.mrc.transport import EVENT_KINDS, MODES

MAX_LINE = 1 << 20  # control request bytes without a newline before the client is cut off
MAX_PENDING = 64 << 20  # reply bytes a client may leave unread before it is cut off
MAX_CLIENTS = 256  # control connections at once; more are accepted and closed
MAX_BUFFER = 1 << 34  # a registered buffer's ceiling, whatever the memory (16 GiB)
MAX_EVS = 4096


class ControlServer:
    """The control socket of `loop` at `path`, its connections and their requests."""

    def __init__(self, loop: PacketLoop, path: str):
        self.loop = loop
        self._clients = 0
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        if os.path.exists(path):
            os.unlink(path)
        self.ctl = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        # Root only: the socket registers memory and writes into it. The umask covers
        # the moment between bind and chmod; the chmod says so explicitly.
        umask = os.umask(0o177)
        try:
            unixsock.bind(self.ctl, path)  # a run dir of any depth
        finally:
            os.umask(umask)
        os.chmod(path, 0o600)
        self.ctl.listen(16)
        self.ctl.setblocking(False)
        self.sel = loop.sel
        self.sel.register(self.ctl, selectors.EVENT_READ, lambda mask: self._accept())
        loop.on_done = self._answer_waits

    def _answer_waits(self, qp: SendQp) -> None:
        """A QP that `wait`s were queued on is idle or failed: each gets its stats."""
        for conn, req_id in qp.waiters:
            self._reply(conn, req_id, counters.send_qp_stats(self.loop, qp).to_dict())
        qp.waiters.clear()

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
        conn["ready"] = lambda mask: self._ready(conn, mask)
        self.sel.register(c, selectors.EVENT_READ, conn["ready"])
        self._clients += 1

    def _ready(self, conn: dict, mask: int) -> None:
        if mask & selectors.EVENT_WRITE:
            self._flush(conn)
        if mask & selectors.EVENT_READ and conn["open"]:
            self._control(conn)

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
            self.sel.modify(sock, events, conn["ready"])

    def _drop(self, conn: dict) -> None:
        """Close a control connection and forget it, its pending `wait`s included."""
        if not conn["open"]:
            return
        conn["open"] = False
        self._clients -= 1
        self.sel.unregister(conn["sock"])
        conn["sock"].close()
        conn["out"].clear()
        for qp in self.loop.send_qps.values():
            if qp.waiters:
                qp.waiters = [w for w in qp.waiters if w[0] is not conn]

    def _handle(self, conn: dict, req: dict) -> dict | None:
        loop = self.loop
        op = req.get("op")
        if op == "hello":
            return {"host": loop.host, "nic": loop.nic, "planes": sorted(loop.ports),
                    "ports": loop.port_bitmap, "pid": os.getpid(), "datapath": loop.datapath,
                    "icrc": loop.icrc, **loop.batching()}
        if op == "recv_qp":
            size = _int_arg(req, "size", 1, _buffer_limit())
            seed = _seed_arg(req)
            qp = loop.open_recv_qp(size, seed)
            return {"qpn": qp.qpn, "rkey": qp.rkey}
        if op == "send_qp":
            return self._send_qp(req)
        if op == "connect":  # tell a receiving QP which QP at which peer sends to it
            qp = self._recv_qp_of(req)
            peer_qpn = _int_arg(req, "peer_qpn", 0, wire.PSN_MASK)
            peer = self._host_arg(req, "peer")
            loop.connect(qp, peer, peer_qpn)
            return {"qpn": qp.qpn}
        if op == "write":
            qp = self._send_qp_of(req)
            size = _int_arg(req, "size", 1, len(qp.src))
            offset = _int_arg(req, "offset", 0, len(qp.src) - size, default=0)
            imm = req.get("imm")
            if imm is not None:
                imm = _int_arg(req, "imm", 0, 0xFFFFFFFF)
            return {"msn": loop.write(qp, size, offset, imm)}
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
                return counters.send_qp_stats(loop, qp).to_dict()
            qp.waiters.append((conn, req.get("id")))
            return None
        if op == "digest":
            qpn = _int_arg(req, "qpn", 0, 1 << 62)
            buf = loop.send_qps[qpn].src if qpn in loop.send_qps else self._recv_qp_of(req).buf
            off = _int_arg(req, "offset", 0, len(buf), default=0)
            size = _int_arg(req, "size", 0, len(buf) - off, default=len(buf) - off)
            return {"sha256": hashlib.sha256(buf[off:off + size]).hexdigest()}
        if op == "guards":
            return counters.guards(loop)
        if op == "events":
            sender = self._send_qp_of(req).sender
            log = sender.log
            return {"events": [e.to_dict() for e in log], "dropped": log.dropped,
                    "total": log.total, "kinds": EVENT_KINDS,
                    "acked_bins": sender.acked_bins.to_dict()}
        if op == "stats":
            return counters.endpoint_stats(loop).to_dict()
        if op == "metrics":
            return {"text": counters.metrics(loop)}
        if op == "close":
            qpn = _int_arg(req, "qpn", 0, 1 << 62)
            loop.close(qpn)
            return {"closed": qpn}
        raise ValueError(f"unknown op {str(op)[:40]!r}")

    def _send_qp_of(self, req: dict) -> SendQp:
        qpn = _int_arg(req, "qpn", 0, 1 << 62)
        try:
            return self.loop.send_qps[qpn]
        except KeyError:
            raise ValueError(f"no sending QP {qpn}") from None

    def _recv_qp_of(self, req: dict) -> RecvQp:
        qpn = _int_arg(req, "qpn", 0, 1 << 62)
        try:
            return self.loop.recv_qps[qpn]
        except KeyError:
            raise ValueError(f"no receiving QP {qpn}") from None

    def _host_arg(self, req: dict, key: str):
        """A host of this fabric by name (a switch has no NIC to send to)."""
        fabric = self.loop.fabric
        name = req.get(key)
        if not isinstance(name, str) or not fabric.has_node(name) \
                or fabric.node(name) not in fabric.hosts:
            raise ValueError(f"{key} must name a host of {fabric.name}, "
                             f"not {str(name)[:40]!r}")
        return fabric.node(name)

    def _send_qp(self, req: dict) -> dict:
        peer = self._host_arg(req, "peer")
        planes = list(self.loop.fabric.nic_planes)  # every NIC has ports on the same planes
        mode = req.get("mode", "mrc")
        if mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}")
        size = _int_arg(req, "size", 1, _buffer_limit())
        peer_qpn = _int_arg(req, "peer_qpn", 0, wire.PSN_MASK)
        rkey = _int_arg(req, "rkey", 0, 0xFFFFFFFF)
        n_evs = _int_arg(req, "evs", 1, MAX_EVS, default=128)
        seed = _seed_arg(req)
        tunables = {key: _num_arg(req, key, lo, hi)
                    for key, (lo, hi) in _TUNABLES.items() if key in req}
        qp = self.loop.open_send_qp(peer, mode, size, peer_qpn, rkey, n_evs, seed, tunables)
        return {"qpn": qp.qpn, "planes": planes}


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

