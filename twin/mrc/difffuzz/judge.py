"""Judging a trace: replayed into the reference and into each compiled implementation,
the decision logs must agree (trace.first_divergence), neither may raise anything but
QpFailed, and the sender's send order may not grow past its bound (DESIGN.md section 7:
never grow without bound). Pure, in this process: runner.check_trace is the same with
each compiled replay in a child process of its own.

The compiled Receiver is judged twice: placing through place(), as the trace replays it,
and copying into a buffer itself (as the endpoint runs it), what landed in the buffer
reported as placed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from twin.mrc import trace
from twin.mrc.difffuzz.adversary import RX_BUFFER, FuzzCase
from twin.mrc.modes import Mode
from twin.mrc.transport import Receiver, RxPacket, Sender

# The send order may hold, per PSN posted, one entry per copy the QP's limits allow
# (its first send, trim_limit trims, loss_limit or retry_limit losses) twice over, and
# a window's worth more: state that grows with the data posted, not with what the peer
# says. (Single-path's go-back-N resends more than the lost PSN; the slack covers it.)
ORDER_SLACK = 2

EXPECTED_EXCEPTIONS = frozenset({"QpFailed"})  # what a call may raise: the QP gave up
KINDS = {
    "divergence": "the compiled core decided otherwise than the reference",
    "exception": "a call raised something other than QpFailed",
    "unbounded": "the send order outgrew its bound (order_bound)",
    "replay-error": "the replay itself failed (an implementation raised ValueError)",
    "crash": "the process replaying the compiled core died (a signal, a sanitizer)",
    "hang": "the process replaying it did not finish in time",
}


@dataclass(frozen=True)
class Finding:
    """One thing judging found: in one implementation, on one trace of case (seed,
    index) (-1, -1: a trace from a file)."""

    seed: int
    index: int
    side: str  # "sender" or "receiver": which trace of the case
    impl: str  # "reference", "_fastpath.Sender", ...
    kind: str  # one of KINDS
    call: int  # the index of the call in the side's trace (-1: none in particular)
    op: str  # that call's op ("sack", "data", ...)
    detail: str

    def signature(self) -> tuple[str, str, str, str]:
        """What makes two findings the same: side, implementation, kind, the call's op."""
        return self.side, self.impl, self.kind, self.op

    def headline(self) -> str:
        return (f"seed {self.seed} case {self.index} {self.side}: {self.kind} in {self.impl}"
                f" at call {self.call} ({self.op})")


@dataclass(frozen=True)
class Impl:
    """An implementation to hold to the reference: what trace.replay builds it with."""

    name: str
    side: str  # "sender" or "receiver"
    factory: Callable


class BufferedReceiver:
    """A compiled Receiver that copies payloads into a buffer itself (as the endpoint
    runs it), seen by trace.replay as placing through place(): after each packet it
    places, what landed in the buffer is reported, so a wrong copy is a divergence."""

    def __init__(self, impl: Callable, place: Callable, **kw: Any):
        self._buf = bytearray(RX_BUFFER)
        self._r = impl(self._buf, **kw)
        self._place = place

    def __getattr__(self, name: str) -> Any:
        return getattr(self._r, name)

    def on_data(self, pkt: RxPacket) -> Any:
        before = self._r.stats.packets
        out = self._r.on_data(pkt)
        if self._r.stats.packets != before:
            n = len(pkt.payload)
            self._place(pkt.va, bytes(self._buf[pkt.va:pkt.va + n]))
        return out


def compiled_impls() -> list[Impl]:
    """The compiled core's Sender and Receiver (the Receiver placing both ways).
    RuntimeError, saying why, where the module or its transport is missing. The module
    comes bound, through twin.mrc.core (core.compiled)."""
    from twin.mrc import core
    try:
        from twin.mrc import _fastpath
    except ImportError as e:
        raise RuntimeError(f"twin.mrc._fastpath does not import ({e}): build it with "
                           "pip install -e . (make venv)") from e
    if not all(hasattr(_fastpath, n) for n in ("Sender", "Receiver", "bind")):
        raise RuntimeError(f"{_fastpath.__file__} was built without the transport core")
    _fastpath = core.compiled()
    rx = _fastpath.Receiver
    return [Impl("_fastpath.Sender", "sender", _fastpath.Sender),
            Impl("_fastpath.Receiver", "receiver", rx),
            Impl("_fastpath.Receiver(buffer)", "receiver",
                 lambda place, **kw: BufferedReceiver(rx, place, **kw))]


SIDES = ("sender", "receiver")
REFERENCE = {"sender": Impl("reference", "sender", Sender),
             "receiver": Impl("reference", "receiver", Receiver)}


def order_bound(t: trace.Trace) -> int:
    """The most entries a sender trace's send order (and the reference's per-EV send
    orders, summed) may hold: ORDER_SLACK x (each PSN posted, sent once and resent as
    often as the QP's limits allow, plus a window)."""
    cfg = t.config
    psns = sum(-(-c[2] // cfg["mtu"]) for c in t.calls if c[0] == "post")
    limit = cfg["retry_limit"] if cfg["mode"] == Mode.SINGLE_PATH else cfg["loss_limit"]
    copies = 1 + limit + cfg.get("trim_limit", 0)  # trim_limit: absent from older traces
    return ORDER_SLACK * (psns * copies + int(cfg["max_window"]))


def send_order_size(s: Any) -> int:
    """Entries in a Sender's send order: the compiled core says (send_order_len); the
    reference's is read here, by the fuzzer alone (its deque and per-EV deques)."""
    n = getattr(s, "send_order_len", None)
    if n is not None:
        return n
    return max(len(s._order), sum(len(q) for q in s._per_path.values()))


class _Watched:
    """A Sender as trace.replay sees it; after every poll (where the send order grows)
    its size is measured, and the first call that took it past `bound` kept."""

    def __init__(self, inner: Any, bound: int, at: list[int]):
        self._inner, self._bound, self._at = inner, bound, at
        self.peak, self.over_at = 0, -1

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def poll(self, now: int, source: Any, budget: int = 64) -> Any:
        out = self._inner.poll(now, source, budget)
        n = send_order_size(self._inner)
        if n > self.peak:
            self.peak = n
            if n > self._bound and self.over_at < 0:
                self.over_at = self._at[0]
        return out


@dataclass
class Replayed:
    decisions: list[dict] | None
    error: str | None = None  # the replay raised this
    peak: int = 0
    over_at: int = -1


def replay_into(t: trace.Trace, impl: Impl, progress: Callable[[int], None] | None) -> Replayed:
    at = [0]

    def tell(i: int) -> None:
        at[0] = i
        if progress is not None:
            progress(i)

    watched: list[_Watched] = []
    factory = impl.factory
    if t.kind == "sender":
        bound = order_bound(t)

        def factory(evset, remote_va, cfg, _make=impl.factory):
            watched.append(_Watched(_make(evset, remote_va, cfg), bound, at))
            return watched[-1]
    try:
        decisions = trace.replay(t, factory, tell)
    except Exception as e:  # an implementation's ValueError: a finding
        return Replayed(None, f"{type(e).__name__}: {e}")
    w = watched[0] if watched else None
    return Replayed(decisions, None, w.peak if w else 0, w.over_at if w else -1)


def op_of(t: trace.Trace, i: int) -> str:
    return t.calls[i][0] if 0 <= i < len(t.calls) else "-"


def findings_of(t: trace.Trace, impl: Impl, got: Replayed, seed: int,
                 index: int) -> list[Finding]:
    """What one replay shows on its own: it failed, raised, or outgrew its bound."""
    def finding(kind: str, call: int, detail: str) -> Finding:
        return Finding(seed, index, t.kind, impl.name, kind, call, op_of(t, call), detail)

    if got.decisions is None:
        return [finding("replay-error", -1, got.error or "")]
    out = []
    for i, d in enumerate(got.decisions):
        exc = d.get("exc")
        if exc and exc[0] not in EXPECTED_EXCEPTIONS:
            out.append(finding("exception", i, f"call {i} {trace._short(t.calls[i], 200)} "
                                                f"raised {exc[0]}: {exc[1]}"))
            break
    if got.over_at >= 0:
        out.append(finding("unbounded", got.over_at,
                           f"the send order reached {got.peak} entries (bound "
                           f"{order_bound(t)}) from call {got.over_at} on"))
    return out


def judge_impl(t: trace.Trace, impl: Impl, ref: Replayed, seed: int = -1, index: int = -1,
               progress: Callable[[int], None] | None = None) -> list[Finding]:
    """Replay trace `t` into `impl` and hold it to the reference's replay `ref`."""
    got = replay_into(t, impl, progress)
    out = findings_of(t, impl, got, seed, index)
    if ref.decisions is not None and got.decisions is not None:
        why = trace.first_divergence(ref.decisions, got.decisions, t.calls,
                                     ("reference", impl.name))
        if why is not None:
            call = int(why.split()[1]) if why.startswith("call ") else -1
            out.append(Finding(seed, index, t.kind, impl.name, "divergence", call,
                               op_of(t, call), why))
    return out


def judge_trace(t: trace.Trace, impls: Iterable[Impl], seed: int = -1,
                index: int = -1) -> list[Finding]:
    """Replay trace `t` into the reference and each of `impls` of its side, in this
    process (a crash in compiled code kills it: `check_trace` is the isolated way)."""
    ref_impl = REFERENCE[t.kind]
    ref = replay_into(t, ref_impl, None)
    out = findings_of(t, ref_impl, ref, seed, index)
    for impl in impls:
        if impl.side == t.kind:
            out += judge_impl(t, impl, ref, seed, index)
    return out


def judge_case(case: FuzzCase, impls: Iterable[Impl]) -> list[Finding]:
    """Both traces of a case, in this process (see judge_trace)."""
    impls = list(impls)
    return [f for t in (case.sender, case.receiver)
            for f in judge_trace(t, impls, case.spec.seed, case.spec.index)]
