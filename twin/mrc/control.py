"""The MRC endpoint's control protocol: its ops, their arguments and replies, and a client.

Newline-delimited JSON on a unix socket: a request is one object, `{"op": ..., "id": n,
...arguments}`, and its reply is one object, `{"id": n, ...}`, or `{"id": n, "error":
"..."}`. The daemon's side is twin.mrc.server; everyone else talks through
`EndpointClient`, one method per op.

`OPS` is the one list of ops. Each `Op` names its arguments, in the order the server
checks them, and the keys of its reply. An `Arg` is one argument:

    kind      int       a JSON integer (true, 1.5 and 1e30 are refused) in lo..hi
              number    a finite JSON number in lo..hi
              seed      an integer or a string of at most 256 characters
              choice    one of `choices`
              bool      a JSON true or false
              host      the name of a host of the endpoint's fabric (not a switch)
              send_qp   the number of a sending QP of this endpoint (parsed: the QP)
              recv_qp   the number of a receiving QP
              qp        the number of either (a sending QP is looked for first)
              evs       a list of at most 65536 EVs, each an integer in 0..2**32-1
    lo, hi    the range of int and number; a bound may be a `Limit`, computed when the
              request is checked from the arguments checked before it (a write's size
              from its QP's buffer) or from the host (the memory available)
    default   REQUIRED (missing: an error), OMITTED (missing: left out), or the value
              a missing argument takes (a Limit too); with default None, null is
              missing as well

Each Op's arguments are one `Record` of twin.validate, the validators the spec, drill
files and CLI options are checked with too (`Op.record`, built once from the table: a
request's check is a walk over its fields, no parsing of the table per request).
`parse(op, request, loop)` checks a request against its op and returns the arguments,
defaults filled in and QP numbers turned into QPs; a bad request raises ValueError
with the message the reply's "error" carries. The error messages are part of the
protocol, phrased by `WIRE` ("size must be in 1..4096, got 4097"):
tests/integration/test_endpoint_hostile.py sends malformed requests.

Only the standard library and twin's leaves (twin.errors, twin.validate): the client
runs in twin's CLI, the table in the endpoint inside a host container.
"""

from __future__ import annotations

import errno
import json
import socket
import subprocess
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from twin import unixsock
from twin import validate as V
from twin.errors import LabError
from twin.mrc import wire
from twin.mrc.cc import Cc
from twin.mrc.core import TRANSPORTS
from twin.mrc.modes import Mode

REQUIRED = "required"
OMITTED = "omitted"
MAX_BUFFER = 1 << 34  # a registered buffer's ceiling, whatever the memory (16 GiB)
MAX_EVS = 4096  # EVs in a QP's set
MAX_DENY = 1 << 16  # EVs in one deny request
QPN_MAX = 1 << 62
U32 = 0xFFFFFFFF


def buffer_limit() -> int:
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


@dataclass(frozen=True)
class Limit:
    """A bound known only when a request is checked: `of(args checked so far)`."""

    name: str
    of: Callable[[Mapping[str, Any]], int]

    def __call__(self, got: Mapping[str, Any]) -> int:
        return self.of(got)

    def __repr__(self) -> str:
        return self.name


def _buffer(a: Mapping[str, Any]) -> int:
    return len(a["qpn"].buffer)


MEMORY = Limit("half the memory available", lambda a: buffer_limit())
BUFFER = Limit("the QP's buffer", _buffer)
BUFFER_AFTER_SIZE = Limit("the QP's buffer less size", lambda a: _buffer(a) - a["size"])
BUFFER_AFTER_OFFSET = Limit("the QP's buffer less offset", lambda a: _buffer(a) - a["offset"])


@dataclass(frozen=True)
class Arg:
    name: str
    kind: str
    lo: int | float | Limit = 0
    hi: int | float | Limit = 0
    default: Any = REQUIRED
    choices: tuple[str, ...] = ()
    doc: str = ""


@dataclass(frozen=True)
class Op:
    name: str
    args: tuple[Arg, ...]
    reply: tuple[str, ...]  # the keys every reply carries (besides "id")
    doc: str
    record: V.Record = field(init=False, repr=False, compare=False)  # the args, checkable

    def __post_init__(self) -> None:
        object.__setattr__(self, "record", _record(self.args))


# -- checking a request (the server's side) ----------------------------------------------

# The protocol's own words: "size must be an integer, not 'abc'", "size must be in 1..4096,
# got 4097", "missing argument 'size'" (the value quoted at most 40 characters long)
WIRE = V.Words(wrong="must be {what}, not {got}", low="must be in {lo}..{hi}, got {value}",
               high="must be in {lo}..{hi}, got {value}", choice="must be one of {names}",
               missing="missing argument {key!r}", missing_at_key=False,
               long="must be a list of at most {max} {noun}",
               show=lambda v: repr(str(v)[:40]))
_NUMBER = WIRE.but(**dict.fromkeys(("wrong", "low", "high"),
                                   "must be a number in {lo}..{hi}, not {got}"))


class Seed(V.Validator):
    """An integer, or a string of at most 256 characters."""

    what = "an integer or a short string"

    def check(self, value, path="", ctx=None):
        if isinstance(value, bool) or not isinstance(value, int | str) or len(str(value)) > 256:
            raise self.refuse(self.words.wrong, value, path)
        return value


class Host(V.Validator):
    """The name of a host of the endpoint's fabric (a switch has no NIC to send to)."""

    def check(self, value, path="", ctx=None):
        fabric = ctx.outer.fabric
        if not isinstance(value, str) or not fabric.has_node(value) \
                or fabric.node(value) not in fabric.hosts:
            raise V.Invalid(f"must name a host of {fabric.name}, not {self.words.show(value)}",
                            path=path)
        return fabric.node(value)


class Qp(V.Int):
    """A QP's number, as its QP: a sending one (`send_qp`), a receiving one (`recv_qp`) or
    either (`qp`, a sending QP looked for first)."""

    def __init__(self, kind: str, lo: int, hi: int):
        super().__init__(lo, hi, words=WIRE)
        self.kind = kind

    def check(self, value, path="", ctx=None):
        qpn = super().check(value, path, ctx)
        loop = ctx.outer
        if self.kind != "recv_qp" and qpn in loop.send_qps:
            return loop.send_qps[qpn]
        if self.kind != "send_qp" and qpn in loop.recv_qps:
            return loop.recv_qps[qpn]
        raise V.Invalid(f"no {'sending' if self.kind == 'send_qp' else 'receiving'} QP {qpn}")


# An argument's kind -> its validator
_KINDS: dict[str, Callable[[Arg], V.Validator]] = {
    "int": lambda a: V.Int(a.lo, a.hi, words=WIRE),
    "number": lambda a: V.Float(a.lo, a.hi, words=_NUMBER),
    "seed": lambda a: Seed(words=WIRE),
    "choice": lambda a: V.Choice(a.choices, words=WIRE),
    "bool": lambda a: V.Bool(words=WIRE),
    "host": lambda a: Host(words=WIRE),
    "send_qp": lambda a: Qp("send_qp", a.lo, a.hi),
    "recv_qp": lambda a: Qp("recv_qp", a.lo, a.hi),
    "qp": lambda a: Qp("qp", a.lo, a.hi),
    "evs": lambda a: V.ListOf(V.Int(0, U32, words=WIRE), max_len=MAX_DENY, noun="EVs",
                              item_path=lambda path, i: "ev", words=WIRE.but(wrong=WIRE.long)),
}


def _record(args: tuple[Arg, ...]) -> V.Record:
    """An op's arguments as one Record: a REQUIRED one missing is refused, an OMITTED one
    left out, any other takes its default (with default None, null is missing too: the
    argument is Optional); keys the table does not name ("op", "id") are let through."""
    fields: dict[str, V.Validator] = {}
    defaults: dict[str, Any] = {}
    for arg in args:
        v = _KINDS[arg.kind](arg)
        if arg.default is None:
            v = V.Optional(v)
        fields[arg.name] = v
        if arg.default not in (REQUIRED, OMITTED):
            defaults[arg.name] = arg.default
        elif arg.kind == "host" and arg.default is REQUIRED:  # missing, it is no host:
            defaults[arg.name] = None  # "peer must name a host of mrc-4p, not 'None'"
    return V.Record(fields, defaults=defaults, words=WIRE, extra="ignore",
                    optional=[a.name for a in args if a.default is OMITTED])


# -- the ops ------------------------------------------------------------------------------


def _qpn(kind: str, doc: str) -> Arg:
    return Arg("qpn", kind, 0, QPN_MAX, doc=doc)


# A send_qp's transport tunables: the range each must lie in (a window of 0, or a target
# delay of 0, would stall or divide by zero inside the datapath, long after the reply)
TUNABLES = (Arg("init_window", "number", 1, 1 << 16, OMITTED, doc="packets"),
            Arg("max_window", "number", 1, 1 << 16, OMITTED, doc="packets"),
            Arg("target_ns", "number", 1, 60_000_000_000, OMITTED, doc="queueing delay"),
            Arg("rto_min_ns", "number", 1, 60_000_000_000, OMITTED),
            Arg("reorder_ns", "number", 1, 60_000_000_000, OMITTED),
            Arg("cc", "choice", default=OMITTED, choices=Cc.names(),
                doc=f"congestion control (twin.mrc.cc): {Cc.described()}; omitted: nscc"),
            Arg("ecn", "bool", default=OMITTED, doc="use echoed CE marks"),
            Arg("trim", "bool", default=OMITTED, doc="act on NACK(TRIMMED)"))

# A QP's transport (twin.mrc.core): one of the two by name; omitted, the endpoint's own
# (MRC_TWIN_TRANSPORT, or the compiled core where it is built). "compiled" where the module
# does not load is an error reply, and no QP is registered.
TRANSPORT = Arg("transport", "choice", default=OMITTED,
                choices=tuple(t for t in TRANSPORTS if t != "auto"),
                doc="the QP's transport (twin.mrc.core); omitted: the endpoint's")

# The SendQpStats keys (twin.mrc.stats): the reply to `wait`
_SEND_QP_STATS = ("qpn", "peer", "mode", "idle", "mtu", "failed", "elapsed_s", "goodput_gbps",
                  "sender", "window", "srtt_us", "reorder_window_us", "evs", "ev_set_size",
                  "ev_pools", "ev_retirements_total", "ev_revivals_total",
                  "ev_retirements_undone_total", "planes_in_use", "send_errors",
                  "probes_sent", "messages_completed", "completions", "events_logged",
                  "single_path", "ev_skips_total", "dead_paths_total", "target_us")

OPS: dict[str, Op] = {op.name: op for op in (
    Op("hello", (), ("host", "nic", "planes", "ports", "pid", "datapath", "icrc",
                     "transport"),
       "who am I: host, NIC, planes, port state, pid, data path, ICRC and transport "
       "(compiled, or python: why; the compiled data path adds its batching counters: "
       "tx, rx)"),
    Op("recv_qp", (Arg("size", "int", 1, MEMORY, doc="bytes"),
                   Arg("seed", "seed", default=0, doc="seeds the rkey and reverse EVs"),
                   TRANSPORT),
       ("qpn", "rkey"), "register a receive buffer (zeroed)"),
    Op("send_qp", (Arg("peer", "host", doc="the receiving host"),
                   Arg("mode", "choice", default=Mode.MRC.value, choices=Mode.names(),
                       doc=Mode.described()),
                   Arg("size", "int", 1, MEMORY, doc="bytes of source buffer"),
                   Arg("peer_qpn", "int", 0, wire.PSN_MASK, doc="the receiving QP at the peer"),
                   Arg("rkey", "int", 0, U32, doc="the receiving QP's rkey"),
                   Arg("evs", "int", 1, MAX_EVS, default=128, doc="EVs in the QP's set"),
                   Arg("seed", "seed", default=0, doc="seeds the buffer and the EV set"),
                   TRANSPORT, *TUNABLES),
       ("qpn", "planes"), "a sending QP, its source buffer filled from the seed"),
    Op("connect", (_qpn("recv_qp", "a receiving QP"),
                   Arg("peer_qpn", "int", 0, wire.PSN_MASK, doc="the sending QP at the peer"),
                   Arg("peer", "host", doc="the sending host")),
       ("qpn",), "tell a receiving QP its sender (ACKs go there)"),
    Op("deny", (_qpn("send_qp", "a sending QP"), Arg("evs", "evs")),
       ("denied",), "put EVs on the QP's denylist (e.g. from a clustermapper)"),
    Op("write", (_qpn("send_qp", "a sending QP"),
                 Arg("size", "int", 1, BUFFER, doc="bytes"),
                 Arg("offset", "int", 0, BUFFER_AFTER_SIZE, default=0),
                 Arg("imm", "int", 0, U32, default=None, doc="WRITE_IMM's immediate")),
       ("msn",), "post an RDMA WRITE (WRITE_IMM with imm)"),
    Op("wait", (_qpn("send_qp", "a sending QP"),), _SEND_QP_STATS,
       "reply when the QP is idle or failed: its stats (twin.mrc.stats.SendQpStats)"),
    Op("digest", (_qpn("qp", "a sending or receiving QP"),
                  Arg("offset", "int", 0, BUFFER, default=0),
                  Arg("size", "int", 0, BUFFER_AFTER_OFFSET, default=BUFFER_AFTER_OFFSET)),
       ("sha256",), "sha256 of a QP's buffer (source or destination)"),
    Op("guards", (), ("intact", "buffers", "broken"),
       "whether every buffer's guard bytes are intact"),
    Op("events", (_qpn("send_qp", "a sending QP"),),
       ("events", "dropped", "total", "kinds", "acked_bins"),
       "a sending QP's event log (CLOCK_MONOTONIC ns and us) and its acked bytes per "
       "1 ms bin and plane"),
    Op("stats", (), ("host", "ports", "bad_packets", "unknown_qp", "totals", "send_qps",
                     "recv_qps", "drops", "datapath", "transport"),
       "every QP's counters (twin.mrc.stats.EndpointStats)"),
    Op("metrics", (), ("text",),
       "the same in Prometheus text format: twin.mrc.exposition's names (docs/metrics.md), "
       "without a lab label"),
    Op("close", (Arg("qpn", "int", 0, QPN_MAX),), ("closed",),
       "forget a QP; its counters stay in the endpoint's totals"),
)}


def parse(op: Op, req: Mapping, loop) -> dict[str, Any]:
    """`req`'s arguments for `op`, checked in the table's order: {name: value}, defaults
    filled in, an OMITTED argument left out, a QP number as its QP. `loop` supplies what
    names are checked against: its `fabric`, `send_qps` and `recv_qps`. A refusal is a
    ValueError in the protocol's words: "size must be in 1..4096, got 4097"."""
    try:
        return op.record.check(req, "", loop)
    except V.Invalid as e:
        raise ValueError(f"{e.path} {e.message}"[:200] if e.path else e.message) from None


def op_of(req: Mapping) -> Op:
    """The op a request names; ValueError for none or an unknown one."""
    name = req.get("op")
    op = OPS.get(name) if isinstance(name, str) else None
    if op is None:
        raise ValueError(f"unknown op {str(name)[:40]!r}")
    return op


# -- the client ----------------------------------------------------------------------------


class EndpointGone(LabError):
    """Nothing listens at an endpoint's control socket: it never started, or it ended."""


class EndpointClient:
    """One control connection: JSON lines, one reply per request, one method per op.

    Each method sends the op's arguments that are not None, in the table's order, and
    returns the reply (a dict, as the endpoint sent it, "id" included), once it holds
    every key the table names; an error reply, or one lacking a key, raises LabError.
    `timeout` bounds the wait for this reply and the calls after it.
    `call_raw` sends any op with any arguments, unchecked: for tests of hostile input.
    """

    def __init__(self, path: str, timeout: float = 30.0, sock: socket.socket | None = None,
                 relay: subprocess.Popen | None = None):
        """Connect to the socket at `path`; or talk over `sock`, already connected to
        it through `relay` (a remote node's), which ends with the client."""
        self.path = path
        self.relay = relay
        self.sock = sock or socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(timeout)
        if sock is None:
            try:
                unixsock.connect(self.sock, path)
            except OSError as e:
                self.sock.close()
                gone = e.errno in (errno.ECONNREFUSED, errno.ENOENT)
                raise (EndpointGone if gone else LabError)(
                    f"endpoint at {path} does not answer: {e.strerror}") from None
        self._buf = b""
        self._id = 0

    # -- the ops (OPS): a unit test keeps these signatures and the table in step --------

    def hello(self, *, timeout: float | None = None) -> dict:
        return self._ask("hello", timeout)

    def recv_qp(self, size: int, seed: int | str | None = None, *,
                transport: str | None = None, timeout: float | None = None) -> dict:
        return self._ask("recv_qp", timeout, size=size, seed=seed, transport=transport)

    def send_qp(self, peer: str, peer_qpn: int, rkey: int, size: int,
                mode: str | None = None, evs: int | None = None,
                seed: int | str | None = None, *, transport: str | None = None,
                init_window: float | None = None,
                max_window: float | None = None, target_ns: float | None = None,
                rto_min_ns: float | None = None, reorder_ns: float | None = None,
                cc: str | None = None, ecn: bool | None = None, trim: bool | None = None,
                timeout: float | None = None) -> dict:
        return self._ask("send_qp", timeout, peer=peer, mode=mode, size=size,
                         peer_qpn=peer_qpn, rkey=rkey, evs=evs, seed=seed, transport=transport,
                         init_window=init_window, max_window=max_window, target_ns=target_ns,
                         rto_min_ns=rto_min_ns, reorder_ns=reorder_ns, cc=cc, ecn=ecn,
                         trim=trim)

    def connect(self, qpn: int, peer: str, peer_qpn: int, *,
                timeout: float | None = None) -> dict:
        return self._ask("connect", timeout, qpn=qpn, peer_qpn=peer_qpn, peer=peer)

    def deny(self, qpn: int, evs: list[int], *, timeout: float | None = None) -> dict:
        return self._ask("deny", timeout, qpn=qpn, evs=evs)

    def write(self, qpn: int, size: int, offset: int | None = None, imm: int | None = None,
              *, timeout: float | None = None) -> dict:
        return self._ask("write", timeout, qpn=qpn, size=size, offset=offset, imm=imm)

    def wait(self, qpn: int, *, timeout: float | None = None) -> dict:
        return self._ask("wait", timeout, qpn=qpn)

    def digest(self, qpn: int, size: int | None = None, offset: int | None = None, *,
               timeout: float | None = None) -> dict:
        return self._ask("digest", timeout, qpn=qpn, offset=offset, size=size)

    def guards(self, *, timeout: float | None = None) -> dict:
        return self._ask("guards", timeout)

    def events(self, qpn: int, *, timeout: float | None = None) -> dict:
        return self._ask("events", timeout, qpn=qpn)

    def stats(self, *, timeout: float | None = None) -> dict:
        return self._ask("stats", timeout)

    def metrics(self, *, timeout: float | None = None) -> dict:
        return self._ask("metrics", timeout)

    def close_qp(self, qpn: int, *, timeout: float | None = None) -> dict:
        """The `close` op (close() closes the connection)."""
        return self._ask("close", timeout, qpn=qpn)

    # -- the wire -----------------------------------------------------------------------

    def _ask(self, name: str, timeout: float | None, **args) -> dict:
        """`name` with the arguments given (not None), in the table's order."""
        op = OPS[name]
        known = {a.name for a in op.args}
        if set(args) - known:  # a method out of step with the table
            raise TypeError(f"{name}: no argument {sorted(set(args) - known)[0]!r}")
        reply = self.call_raw(name, timeout, **{a.name: args[a.name] for a in op.args
                                                if args.get(a.name) is not None})
        lacking = [k for k in op.reply if k not in reply]
        if lacking:  # an endpoint of another version (a node image built before a change)
            raise LabError(f"endpoint {self.path}: {name}: the reply lacks "
                           f"{', '.join(lacking)} (its keys: {', '.join(sorted(reply))}); is "
                           "the endpoint older than twin? rebuild the images: twin images build")
        return reply

    def call_raw(self, op: str, timeout: float | None = None, **args) -> dict:
        """Send `op` with `args` as they are, unchecked; its reply."""
        self._id += 1
        try:
            self.sock.sendall(json.dumps({"op": op, "id": self._id, **args}).encode() + b"\n")
        except OSError as e:  # EPIPE, ECONNRESET: it ended (click would swallow an EPIPE)
            raise LabError(f"endpoint {self.path}: the connection broke during {op} "
                           f"({e.strerror or e}): did the endpoint end?") from None
        if timeout is not None:
            self.sock.settimeout(timeout)
        while True:
            while b"\n" not in self._buf:
                try:
                    chunk = self.sock.recv(1 << 20)
                except TimeoutError:
                    raise LabError(f"endpoint {self.path}: no answer to {op} in time") from None
                except OSError as e:
                    raise LabError(f"endpoint {self.path}: the connection broke during {op} "
                                   f"({e.strerror or e}): did the endpoint end?") from None
                if not chunk:
                    raise LabError(f"endpoint {self.path} closed the connection during {op}")
                self._buf += chunk
            line, self._buf = self._buf.split(b"\n", 1)
            reply = json.loads(line)
            # The answer to a call cut short (Ctrl-C, SIGTERM mid-recv) arrives before
            # this one's: skipped, so each call gets its own reply.
            if reply.get("id") in (None, self._id):
                break
        if "error" in reply:
            raise LabError(f"endpoint {self.path}: {op}: {reply['error']}")
        return reply

    def close(self) -> None:
        self.sock.close()
        if self.relay is not None:  # its stdin closed with our end: it ends
            try:
                self.relay.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.relay.kill()
                self.relay.wait()

    def __enter__(self) -> EndpointClient:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
