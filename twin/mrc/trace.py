"""Recorded inputs of one QP's transport, replayed into any implementation of it
(pure; the differential test of twin.mrc._fastpath against twin.mrc.transport).

A *trace* is everything a Sender (or a Receiver) was told during one simulated
transfer (twin.mrc.sim.run_transfer), in order, with its arguments: the constructor,
then every call. Replaying it into another implementation and writing down what it
decided after each call (its *decision log*) shows where two implementations part:
`first_divergence` names the call, its input, the field and both values.

Recording
    `Recording` is run_transfer's `record=` hook: it builds the Sender and Receiver
    and wraps each in a recorder that writes down every call before making it.
    `record(spec)` runs one `TraceSpec` (tests/traces/make_traces.py lists them),
    replays what it recorded into the reference and checks that the replay ends
    where the live run ended (so no input went unrecorded), and returns the trace.

Sender calls (`Trace.calls`, one list each; `now` is the caller's clock in ns)
    ["post", now, length, offset, imm]        ["poll", now, budget]
    ["sack", now, cum, bitmap, ev, psn, tries, port_state, congestion, dup]
    ["nack", now, psn, trimmed, ev, tries]    ["timer", now]
    ["ports", now, bitmap]  (set_local_ports) ["probe", now, ev, ok]  (probe_result)
    ["deny", now, [ev, ...]]                  ["cnp", now]
    ["candidates", n]       (sender.evs.probe_candidates: the endpoint's probe round)
  The source buffer of poll is sim.source_bytes(source_size, source_seed), made again.

Receiver calls (the peer's port bitmap its SACKs echo is part of each input)
    ["data", ports, psn, va, length, imm, ev, tries, ack_req, ce]
    ["trim", ports, psn, va, length, imm, ev, tries, ack_req, ce]
    ["flush", ports, psn | None, ...the same fields]
  A payload is `length` bytes of `payload_bytes(psn, length)` (a seeded fill).

Decisions (one dict per call; keys only where there is something to say)
    tx      sender: the packets a poll returned, [psn, ev, va, len, crc32, tries,
            ack_req, imm] each
    ret     what the call returned (post's MSN, probe_result, the probe candidates;
            receiver: the SACK [cum, bitmap, ev, psn, tries, port_state, congestion,
            dup], on_trimmed's (SACK, nack))
    exc     an exception's type and message (QpFailed)
    events  events the call appended to sender.log, [t_ns, kind, ev, psn, detail]
            (the log is bounded: new ones are counted by log.total)
    placed  receiver: [va, len, crc32] of each packet placed; nacks: the PSNs NAKed
    snap    the state after the call: window, srtt, cum, the EV slots and their
            states, the retired EVs, the counters (`sender_snapshot`)

Files: tests/traces/<name>.json.gz, the trace with the decisions its recording
replayed to, the snapshots stored as changes from the one before (`pack`/`unpack`).
`python -m twin.mrc.trace record [--out DIR] [NAME...]` makes them again; the same
seeds give the same files.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import gzip
import json
import random
import sys
import zlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from twin.mrc import dcqcn, sim
from twin.mrc.evset import EvSet, EvState
from twin.mrc.transport import (
    Receiver,
    ReceiverStats,
    RxPacket,
    SackReport,
    Sender,
    SenderConfig,
    SenderStats,
)

FORMAT = 1
TRACES_DIR = Path(__file__).resolve().parents[2] / "tests" / "traces"
RECORD_COMMAND = "python -m twin.mrc.trace record"

SenderFactory = Callable[[EvSet, int, SenderConfig], Any]
ReceiverFactory = Callable[..., Any]  # (place, ack_every=, port_state=, span=)


@dataclass
class Trace:
    """One recorded run: `kind` "sender" or "receiver", how to build it, the calls."""

    name: str
    kind: str
    about: str
    calls: list[list]
    evset: dict = field(default_factory=dict)  # EvSet keyword arguments (sender)
    remote_va: int = 0
    config: dict = field(default_factory=dict)  # SenderConfig fields (sender)
    source_size: int = 0
    source_seed: int = 0
    receiver: dict = field(default_factory=dict)  # ack_every, span (receiver)
    decisions: list[dict] | None = None  # what the reference decided when recorded
    facts: dict = field(default_factory=dict)  # what the live run did (tests assert on it)


# -- recording ----------------------------------------------------------------------


def config_to_dict(cfg: SenderConfig) -> dict:
    out = {f.name: getattr(cfg, f.name) for f in dataclasses.fields(cfg)}
    if out["dcqcn"] is not None:
        out["dcqcn"] = dataclasses.asdict(out["dcqcn"])
    return out


def config_from_dict(d: dict) -> SenderConfig:
    d = dict(d)
    if d.get("dcqcn") is not None:
        d["dcqcn"] = dcqcn.Dcqcn(**d["dcqcn"])
    return SenderConfig(**d)


class _EvsRecorder:
    """sender.evs, but probe_candidates (the endpoint's probe round) is written down."""

    def __init__(self, evs: EvSet, calls: list[list]):
        self._evs, self._calls = evs, calls

    def probe_candidates(self, n: int):
        self._calls.append(["candidates", n])
        return self._evs.probe_candidates(n)

    def __getattr__(self, name: str):
        return getattr(self._evs, name)


class SenderRecorder:
    """A Sender whose every input is appended to `calls` before it is made."""

    def __init__(self, sender: Sender, calls: list[list]):
        self._s, self._calls = sender, calls
        self.evs = _EvsRecorder(sender.evs, calls)

    def __getattr__(self, name: str):
        return getattr(self._s, name)

    def post(self, length: int, offset: int = 0, imm: int | None = None, now: int = 0) -> int:
        self._calls.append(["post", now, length, offset, imm])
        return self._s.post(length, offset, imm, now)

    def poll(self, now: int, source, budget: int = 64):
        self._calls.append(["poll", now, budget])
        return self._s.poll(now, source, budget)

    def on_sack(self, sack: SackReport, now: int) -> None:
        self._calls.append(["sack", now, sack.cum, sack.bitmap, sack.ev, sack.psn, sack.tries,
                            sack.port_state, sack.congestion, sack.dup])
        self._s.on_sack(sack, now)

    def on_nack(self, psn: int, now: int, trimmed: bool = False, ev: int = -1,
                tries: int = -1) -> None:
        self._calls.append(["nack", now, psn, trimmed, ev, tries])
        self._s.on_nack(psn, now, trimmed, ev, tries)

    def on_timer(self, now: int) -> None:
        self._calls.append(["timer", now])
        self._s.on_timer(now)

    def set_local_ports(self, bitmap: int, now: int = 0) -> None:
        self._calls.append(["ports", now, bitmap])
        self._s.set_local_ports(bitmap, now)

    def probe_result(self, value: int, ok: bool, now: int) -> bool:
        self._calls.append(["probe", now, value, ok])
        return self._s.probe_result(value, ok, now)

    def deny(self, values: Iterable[int], now: int) -> None:
        values = list(values)
        self._calls.append(["deny", now, values])
        self._s.deny(values, now)

    def on_cnp(self, now: int) -> None:
        self._calls.append(["cnp", now])
        self._s.on_cnp(now)


def _rx_fields(pkt: RxPacket) -> list:
    return [pkt.psn, pkt.va, len(pkt.payload), pkt.imm, pkt.ev, pkt.tries, pkt.ack_req,
            pkt.ce]


class ReceiverRecorder:
    """A Receiver whose every input is appended to `calls` before it is made."""

    def __init__(self, receiver: Receiver, calls: list[list], port_state: Callable[[], int]):
        self._r, self._calls, self._ports = receiver, calls, port_state

    def __getattr__(self, name: str):
        return getattr(self._r, name)

    def on_data(self, pkt: RxPacket):
        self._calls.append(["data", self._ports(), *_rx_fields(pkt)])
        return self._r.on_data(pkt)

    def on_trimmed(self, pkt: RxPacket):
        self._calls.append(["trim", self._ports(), *_rx_fields(pkt)])
        return self._r.on_trimmed(pkt)

    def flush(self, pkt: RxPacket | None):
        self._calls.append(["flush", self._ports(), *(_rx_fields(pkt) if pkt else [None])])
        return self._r.flush(pkt)


class Recording:
    """run_transfer's `record=` hook: builds the pair, keeps both call lists."""

    def __init__(self) -> None:
        self.sender_calls: list[list] = []
        self.receiver_calls: list[list] = []
        self.evset: dict = {}
        self.config: dict = {}
        self.remote_va = 0
        self.source_size = self.source_seed = 0
        self.receiver_args: dict = {}

    def sender(self, evset_args: dict, remote_va: int, cfg: SenderConfig, source_size: int,
               source_seed: int) -> SenderRecorder:
        self.evset, self.remote_va = dict(evset_args), remote_va
        self.config = config_to_dict(cfg)  # before the Sender sees it (dcqcn copies it)
        self.source_size, self.source_seed = source_size, source_seed
        return SenderRecorder(Sender(EvSet(**evset_args), remote_va, cfg), self.sender_calls)

    def receiver(self, place: Callable, ack_every: int = 2,
                 port_state: Callable[[], int] = lambda: 0xFFFF, span: int | None = None
                 ) -> ReceiverRecorder:
        kw = {"ack_every": ack_every} if span is None else {"ack_every": ack_every, "span": span}
        self.receiver_args = kw
        return ReceiverRecorder(Receiver(place, port_state=port_state, **kw),
                                self.receiver_calls, port_state)

    def sender_trace(self, name: str, about: str) -> Trace:
        return Trace(name, "sender", about, self.sender_calls, evset=self.evset,
                     remote_va=self.remote_va, config=self.config,
                     source_size=self.source_size, source_seed=self.source_seed)

    def receiver_trace(self, name: str, about: str) -> Trace:
        return Trace(name, "receiver", about, self.receiver_calls,
                     receiver=self.receiver_args)


# -- replay -------------------------------------------------------------------------

_STATS = [f.name for f in dataclasses.fields(SenderStats)]
_RX_STATS = [f.name for f in dataclasses.fields(ReceiverStats)]
TX_FIELDS = ("psn", "ev", "va", "len", "crc32", "tries", "ack_req", "imm")  # a tx entry
_STATE_NAMES = [s.value for s in EvState]
_EVS_COUNTERS = ("retirements", "revivals", "undone", "skips", "dead_paths", "paths_back",
                 "path_checks")


def sender_snapshot(s, before: dict | None = None) -> dict:
    """What a Sender's decisions left behind, compactly (every value JSON-plain, lists
    not tuples). `slots` is flat: EV value, state, EV value, state, ... in slot order
    (a list per slot would make a million small objects per test run); `counts` is
    EvSet.counts(), taken from the slots (the same numbers). `before`: the previous
    snapshot, whose lists are shared where nothing changed."""
    evs = s.evs
    slots = []
    for ev in evs.active:  # _value_, not .value: Enum's property costs 10x, per slot
        slots += (ev.value, ev.state._value_)
    if before is not None and before["slots"] == slots:
        slots = before["slots"]
    counts = dict.fromkeys(_STATE_NAMES, 0)
    for state in slots[1::2]:
        counts[state] += 1
    stats = {name: getattr(s.stats, name) for name in _STATS}
    stats["per_plane_packets"] = [[p, n] for p, n in sorted(stats["per_plane_packets"].items())]
    snap = {"window": s.window, "srtt": s.srtt, "cum": s.cum, "idle": s.idle,
            "failed": s.failed, "rack_ns": s.reorder_window_ns(), "probe_ns": s.tail_probe_ns(),
            "slots": slots, "retired": list(evs.retired), "counts": counts,
            "planes_down": sorted(evs.planes_down), "stats": stats,
            "evs": {name: getattr(evs, name) for name in _EVS_COUNTERS}}
    if s.pacer is not None:
        snap["rate_bps"] = s.pacer.rate_bps
    return snap


def receiver_snapshot(r) -> dict:
    return {"cum": r.cum, "owes_ack": r.owes_ack,
            "stats": {name: getattr(r.stats, name) for name in _RX_STATS},
            "completions": [list(c) for c in list(r.completions)[-4:]]}


def _exc(e: Exception) -> list[str]:
    return [type(e).__name__, str(e)]


def _sack(report) -> list | None:
    if report is None:
        return None
    return [report.cum, report.bitmap, report.ev, report.psn, report.tries, report.port_state,
            report.congestion, report.dup]


@functools.lru_cache(maxsize=4)
def _source(size: int, seed: int) -> bytes:
    return sim.source_bytes(size, seed)


def payload_bytes(psn: int, length: int) -> bytes:
    """A receiver trace's payload for `psn`: a seeded fill, the same on every replay."""
    return random.Random(psn).randbytes(length)


def replay(trace: Trace, factory: SenderFactory | ReceiverFactory | None = None,
           progress: Callable[[int], None] | None = None) -> list[dict]:
    """Feed `trace`'s calls, in order, to an implementation built by `factory` (default:
    the reference, transport.Sender or transport.Receiver); its decision log.
    `progress(i)` is told each call's index before the call is made, so a replay that
    kills its process (a crash in compiled code) can be traced to its call."""
    if trace.kind == "receiver":
        return _replay_receiver(trace, factory or Receiver, progress)
    return _replay_sender(trace, factory or Sender, progress)


def _replay_sender(trace: Trace, factory: SenderFactory,
                   progress: Callable[[int], None] | None) -> list[dict]:
    s = factory(EvSet(**trace.evset), trace.remote_va, config_from_dict(trace.config))
    source = memoryview(_source(trace.source_size, trace.source_seed))
    log = s.log
    seen = log.total
    out, snap = [], None
    for i, call in enumerate(trace.calls):
        if progress is not None:
            progress(i)
        op, d = call[0], {}
        try:
            if op == "poll":
                d["tx"] = [[t.psn, t.ev, t.va, len(t.payload), zlib.crc32(t.payload), t.tries,
                            t.ack_req, t.imm] for t in s.poll(call[1], source, call[2])]
            elif op == "sack":
                s.on_sack(SackReport(*call[2:]), call[1])
            elif op == "nack":
                s.on_nack(call[2], call[1], *call[3:])
            elif op == "timer":
                s.on_timer(call[1])
            elif op == "post":
                d["ret"] = s.post(call[2], call[3], call[4], call[1])
            elif op == "ports":
                s.set_local_ports(call[2], call[1])
            elif op == "probe":
                d["ret"] = s.probe_result(call[2], call[3], call[1])
            elif op == "deny":
                s.deny(call[2], call[1])
            elif op == "cnp":
                s.on_cnp(call[1])
            elif op == "candidates":
                d["ret"] = [ev.value for ev in s.evs.probe_candidates(call[1])]
            else:
                raise ValueError(f"unknown sender call {op!r}")
        except ValueError:
            raise
        except Exception as e:  # QpFailed, or whatever an implementation raises
            d["exc"] = _exc(e)
        if log.total != seen:
            new = log.total - seen
            seen = log.total
            d["events"] = [[e.t_ns, e.kind, e.ev, e.psn, e.detail] for e in list(log)[-new:]]
            if len(d["events"]) < new:
                d["events_unseen"] = new - len(d["events"])
        d["snap"] = snap = sender_snapshot(s, snap)
        out.append(d)
    return out


def _replay_receiver(trace: Trace, factory: ReceiverFactory,
                     progress: Callable[[int], None] | None) -> list[dict]:
    placed: list[list] = []
    ports = [0xFFFF]

    def place(va: int, payload) -> None:
        placed.append([va, len(payload), zlib.crc32(payload)])

    r = factory(place, port_state=lambda: ports[0], **trace.receiver)
    out = []
    for i, call in enumerate(trace.calls):
        if progress is not None:
            progress(i)
        op, d = call[0], {}
        ports[0] = call[1]
        if call[2] is None:
            pkt = None
        else:
            psn, va, length, imm, ev, tries, ack_req, ce = call[2:]
            pkt = RxPacket(psn, va, b"" if op == "trim" else payload_bytes(psn, length), imm,
                           ev, tries, ack_req, ce)
        try:
            if op == "data":
                d["ret"] = _sack(r.on_data(pkt))
            elif op == "trim":
                report, nack = r.on_trimmed(pkt)
                d["ret"] = [_sack(report), nack]
            elif op == "flush":
                d["ret"] = _sack(r.flush(pkt))
            else:
                raise ValueError(f"unknown receiver call {op!r}")
        except ValueError:
            raise
        except Exception as e:
            d["exc"] = _exc(e)
        if placed:
            d["placed"], placed[:] = list(placed), []
        if r.nacks:  # the datapath sends and clears them
            d["nacks"] = list(r.nacks)
            r.nacks.clear()
        d["snap"] = receiver_snapshot(r)
        out.append(d)
    return out


# -- compare ------------------------------------------------------------------------


def _diff(a: Any, b: Any, path: str) -> tuple[str, Any, Any] | None:
    """The first place two JSON-plain values differ: (path, a's, b's)."""
    if isinstance(a, dict) and isinstance(b, dict):
        # in the order the decision is written: what was sent, returned or raised, the
        # events, then the state it left (window first, counters last)
        for key in [*a, *(k for k in b if k not in a)]:
            if key not in a or key not in b:
                return f"{path}.{key}", a.get(key, "<absent>"), b.get(key, "<absent>")
            found = _diff(a[key], b[key], f"{path}.{key}")
            if found:
                return found
        return None
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        for i, (x, y) in enumerate(zip(a, b, strict=False)):
            found = _diff(x, y, f"{path}[{i}]")
            if found:
                return found
        if len(a) != len(b):
            return f"{path} (length {len(a)} vs {len(b)})", a[len(b):] or "<shorter>", \
                b[len(a):] or "<shorter>"
        return None
    return None if a == b else (path, a, b)  # 1 == 1.0 == True: the same decision


def first_divergence(a: list[dict], b: list[dict], calls: list[list] | None = None,
                     names: tuple[str, str] = ("a", "b")) -> str | None:
    """None when two decision logs agree; else where they first part, readably: the
    call's index and input (from `calls`, the trace's), the field, both values."""
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if x == y:  # the common case, at C speed (a snapshot is lists, never tuples)
            continue
        found = _diff(x, y, "")
        if found is None:
            continue
        where, va, vb = found
        if where.startswith(".tx[") and where.count("[") == 2:  # name the packet's field
            j = int(where.rsplit("[", 1)[1].rstrip("]"))
            where += f" ({TX_FIELDS[j]})" if j < len(TX_FIELDS) else ""
        elif where.startswith(".snap.slots["):  # flat: say which slot, value or state
            i_item = int(where[len(".snap.slots["):].split("]")[0])
            where = f"snap.slots: slot {i_item // 2}'s {('EV value', 'state')[i_item % 2]}"
        call = calls[i] if calls is not None and i < len(calls) else "?"
        before = calls[max(0, i - 3):i] if calls is not None else []
        return (f"call {i} {call}: {where.lstrip('.')} differs\n"
                f"  {names[0]}: {_short(va)}\n  {names[1]}: {_short(vb)}\n"
                f"  (calls before it: {before})")
    if len(a) != len(b):
        return f"{names[0]} has {len(a)} decisions, {names[1]} {len(b)}: one stopped early"
    return None


def _short(value: Any, limit: int = 600) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + f"... ({len(text)} chars)"


# -- files --------------------------------------------------------------------------


def pack(decisions: list[dict]) -> list[dict]:
    """Decisions as stored: each snapshot only as its changes from the one before
    (`snap~`: changed keys; changed items of the flat EV slots as [[index, item], ...])."""
    out, prev = [], {}
    for d in decisions:
        d = dict(d)
        snap = d.pop("snap", None)
        if snap is not None:
            delta = {}
            for key, value in snap.items():
                old = prev.get(key, "<absent>")
                if old == value and type(old) is type(value):
                    continue
                if key == "slots" and isinstance(old, list) and len(old) == len(value):
                    pairs = enumerate(zip(old, value, strict=True))
                    delta["slots~"] = [[i, v] for i, (o, v) in pairs if o != v]
                else:
                    delta[key] = value
            gone = [k for k in prev if k not in snap]
            if gone:
                delta["-"] = gone
            d["snap~"] = delta
            prev = snap
        out.append(d)
    return out


def unpack(packed: list[dict]) -> list[dict]:
    out, prev = [], {}
    for d in packed:
        d = dict(d)
        delta = d.pop("snap~", None)
        if delta is not None:
            snap = {k: v for k, v in prev.items() if k not in delta.get("-", ())}
            for key, value in delta.items():
                if key == "slots~":
                    slots = list(prev["slots"])
                    for i, v in value:
                        slots[i] = v
                    snap["slots"] = slots
                elif key != "-":
                    snap[key] = value
            d["snap"] = snap
            prev = snap
        out.append(d)
    return out


def save(trace: Trace, path: Path) -> None:
    body = dataclasses.asdict(trace)
    body["format"] = FORMAT
    if trace.decisions is not None:
        body["decisions"] = pack(trace.decisions)
    text = json.dumps(body, separators=(",", ":"))
    path.write_bytes(gzip.compress(text.encode(), compresslevel=9, mtime=0))


def load(path: Path) -> Trace:
    body = json.loads(gzip.decompress(path.read_bytes()))
    if body.pop("format", None) != FORMAT:
        raise ValueError(f"{path}: not a format-{FORMAT} trace; re-record: {RECORD_COMMAND}")
    if body.get("decisions") is not None:
        body["decisions"] = unpack(body["decisions"])
    return Trace(**body)


def stored(directory: Path = TRACES_DIR) -> list[Path]:
    return sorted(directory.glob("*.json.gz"))


# -- the traces ---------------------------------------------------------------------


@dataclass
class TraceSpec:
    """One simulated transfer to record: run_transfer's arguments, and the names of
    the traces it gives (its sender's; its receiver's too when `receiver` is set)."""

    name: str
    about: str
    size: int
    fabric: Callable[[], sim.SimFabric]
    run: dict = field(default_factory=dict)  # more run_transfer keywords
    config: dict = field(default_factory=dict)  # SenderConfig fields
    receiver: str | None = None  # the receiver trace's name
    sender: bool = True  # False: only the receiver trace is kept


def record(spec: TraceSpec) -> list[Trace]:
    """Run `spec`, replay what it recorded into the reference, and check the replay
    ends where the live run did (a call the recorder missed would show here)."""
    rec = Recording()
    fabric = spec.fabric()
    run = dict(spec.run)
    mode = run.pop("mode", "mrc")
    cfg = SenderConfig(mode=mode, **spec.config)
    result = sim.run_transfer(spec.size, fabric, mode=mode, config=cfg, record=rec, **run)
    live = result.sender._s
    facts = {"ok": result.ok, "exact": result.exact, "failed": result.failed,
             "elapsed_ns": result.elapsed_ns, "fabric_marks": fabric.marks,
             "fabric_trims": fabric.trims, "events": sorted({e.kind for e in live.log}),
             "evs_retirements": live.evs.retirements, "evs_revivals": live.evs.revivals,
             "evs_denied": len(live.evs.denylist), "evs_skips": dict(live.evs.skips_by),
             "evs_dead_paths": live.evs.dead_paths, "cnps_ignored": live.cnps_ignored,
             "stats": {k: v for k, v in sender_snapshot(live)["stats"].items()},
             "receiver": receiver_snapshot(result.receiver._r)["stats"]}
    traces = []
    if spec.sender:
        t = rec.sender_trace(spec.name, spec.about)
        t.decisions = replay(t)
        t.facts = facts
        end = sender_snapshot(live)
        if t.decisions[-1]["snap"] != end:
            raise AssertionError(f"{spec.name}: the replay does not end where the live "
                                 "run did: an input went unrecorded")
        traces.append(t)
    if spec.receiver:
        t = rec.receiver_trace(spec.receiver, spec.about)
        t.decisions = replay(t)
        t.facts = facts
        if t.decisions[-1]["snap"] != receiver_snapshot(result.receiver._r):
            raise AssertionError(f"{spec.receiver}: the replay does not end where the live "
                                 "run did: an input went unrecorded")
        traces.append(t)
    return traces


def write(specs: Iterable[TraceSpec], out: Path = TRACES_DIR,
          only: set[str] | None = None) -> list[tuple[Path, int]]:
    """Record `specs` (those named in `only`, when given) into `out`; (file, bytes)."""
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for spec in specs:
        if only and spec.name not in only and spec.receiver not in only:
            continue
        for t in record(spec):
            path = out / f"{t.name}.json.gz"
            save(t, path)
            written.append((path, path.stat().st_size))
    return written


def main(argv: list[str] | None = None) -> int:
    """`record`: make tests/traces again from the specs in tests/traces/make_traces.py."""
    p = argparse.ArgumentParser(prog="python -m twin.mrc.trace", description=__doc__.split(
        "\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("record", help="record the traces (all, or those named)")
    r.add_argument("names", nargs="*")
    r.add_argument("--out", type=Path, default=TRACES_DIR)
    args = p.parse_args(argv)
    sys.path.insert(0, str(TRACES_DIR))
    import make_traces  # tests/traces/make_traces.py: the specs, next to their files

    for path, size in write(make_traces.SPECS, args.out, set(args.names) or None):
        sys.stdout.write(f"{path.name}\t{size} bytes\n")  # the CLI's output
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
