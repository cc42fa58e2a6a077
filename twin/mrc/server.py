"""The MRC endpoint's control server: a unix socket beside the packet loop.

Newline-delimited JSON, one request per line, one reply per request (`wait` replies
when its write completes). Each request is checked against its op in the protocol's
table (twin.mrc.control.OPS) and handed, as checked arguments, to the server's
`op_<name>` method; every op of the table has one, and no other.

The socket is mode 0600: it registers memory and writes into it. Connections share
the packet loop's thread and selector, so nothing here blocks: replies are queued
and written as the client reads. A request is refused with an error reply when it
is not a JSON object, names an unknown op or has an argument of the wrong type or
range (sizes are capped by the memory there is); a line longer than MAX_LINE closes
the connection, and a client that stops reading only loses its own connection (at
MAX_PENDING bytes), never stalls the data path.
"""

from __future__ import annotations

import hashlib
import json
import os
import selectors
import socket
from pathlib import Path

from twin import unixsock
from twin.mrc import control, counters
from twin.mrc.loop import PacketLoop, SendQp, now_ns
from twin.mrc.transport import EVENT_KINDS

MAX_LINE = 1 << 20  # control request bytes without a newline before the client is cut off
MAX_PENDING = 64 << 20  # reply bytes a client may leave unread before it is cut off
MAX_CLIENTS = 256  # control connections at once; more are accepted and closed


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
        """A request's reply, from the handler of its op (`op_<name>`), its arguments
        checked against the op's table entry first; None for a reply that comes later."""
        op = control.op_of(req)
        return getattr(self, f"op_{op.name}")(control.parse(op, req, self.loop),
                                               (conn, req.get("id")))

    # -- one handler per op (control.OPS): its checked arguments, who asked ----------------

    def op_hello(self, a: dict, asker) -> dict:
        loop = self.loop
        return {"host": loop.host, "nic": loop.nic, "planes": sorted(loop.ports),
                "ports": loop.port_bitmap, "pid": os.getpid(), "datapath": loop.datapath,
                "icrc": loop.icrc, "transport": loop.transport, **loop.batching()}

    def op_recv_qp(self, a: dict, asker) -> dict:
        qp = self.loop.open_recv_qp(a["size"], a["seed"], a.get("transport"))
        return {"qpn": qp.qpn, "rkey": qp.rkey}

    def op_send_qp(self, a: dict, asker) -> dict:
        tunables = {t.name: a[t.name] for t in control.TUNABLES if t.name in a}
        qp = self.loop.open_send_qp(a["peer"], a["mode"], a["size"], a["peer_qpn"], a["rkey"],
                                    a["evs"], a["seed"], tunables, a.get("transport"))
        return {"qpn": qp.qpn, "planes": list(self.loop.fabric.nic_planes)}

    def op_connect(self, a: dict, asker) -> dict:
        self.loop.connect(a["qpn"], a["peer"], a["peer_qpn"])
        return {"qpn": a["qpn"].qpn}

    def op_deny(self, a: dict, asker) -> dict:
        sender = a["qpn"].sender
        sender.deny(a["evs"], now_ns())
        return {"denied": len(sender.evs.denylist)}

    def op_write(self, a: dict, asker) -> dict:
        return {"msn": self.loop.write(a["qpn"], a["size"], a["offset"], a["imm"])}

    def op_wait(self, a: dict, asker) -> dict | None:
        qp = a["qpn"]
        if qp.sender.idle or qp.sender.failed:
            return counters.send_qp_stats(self.loop, qp).to_dict()
        qp.waiters.append(asker)  # answered by _answer_waits
        return None

    def op_digest(self, a: dict, asker) -> dict:
        off = a["offset"]
        return {"sha256": hashlib.sha256(a["qpn"].buffer[off:off + a["size"]]).hexdigest()}

    def op_guards(self, a: dict, asker) -> dict:
        return counters.guards(self.loop)

    def op_events(self, a: dict, asker) -> dict:
        sender = a["qpn"].sender
        log = sender.log
        return {"events": [e.to_dict() for e in log], "dropped": log.dropped,
                "total": log.total, "kinds": EVENT_KINDS,
                "acked_bins": sender.acked_bins.to_dict()}

    def op_stats(self, a: dict, asker) -> dict:
        return counters.endpoint_stats(self.loop).to_dict()

    def op_metrics(self, a: dict, asker) -> dict:
        return {"text": counters.metrics(self.loop)}

    def op_close(self, a: dict, asker) -> dict:
        self.loop.close(a["qpn"])
        return {"closed": a["qpn"]}
