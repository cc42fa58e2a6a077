"""The differential fuzzer of the transport (twin.mrc.difffuzz), and the traces it found.

  - every trace it found (tests/traces/fuzz) replays into the reference and the compiled
    core alike: no divergence, no exception but QpFailed, no crash, bounded state;
  - a case is made again, call for call, from its (seed, index), and every call in it
    is well-formed (hostile content, never a type error); every move acts;
  - a short run of fixed seeds finds nothing;
  - it has the power to tell: mutants of the compiled core are caught, a crash (a known
    bug put back) is a finding that names its call, shrinks and is saved as a trace
    that fails again, a hang and an unbounded send order are findings too.
"""

from __future__ import annotations

import os
import re
import signal
import time

import pytest

from twin.mrc import difffuzz as D
from twin.mrc import trace as T
from twin.mrc.difffuzz import adversary as A
from twin.mrc.transport import RECV_WINDOW

STORED = sorted(D.FUZZ_TRACES.glob("*.json.gz"))

# A trace here that shows a known bug, being fixed elsewhere: its name and the bug. The
# mark is strict, so the fix that makes it pass fails it: delete its line then. (Both
# traces here showed issue 34's (a) and (b) when found; main's fixes made them pass.)
KNOWN: dict[str, str] = {}


def _impls() -> list[D.Impl]:
    try:
        return D.compiled_impls()
    except RuntimeError as e:
        if os.environ.get("MRC_TWIN_TRANSPORT") == "python":
            pytest.skip(f"{e}; MRC_TWIN_TRANSPORT=python: the reference alone is under test")
        pytest.fail(f"{e}: the compiled transport is missing, so it cannot be fuzzed",
                    pytrace=False)


# -- the traces it found ------------------------------------------------------------------


def test_the_fuzz_traces_are_there():
    assert STORED, f"no trace in {D.FUZZ_TRACES}"


@pytest.mark.parametrize("path", STORED, ids=[p.name.removesuffix(".json.gz") for p in STORED])
def test_a_fuzz_trace_decides_alike_in_both(path, request):
    name = path.name.removesuffix(".json.gz")
    if name in KNOWN:
        request.applymarker(pytest.mark.xfail(reason=KNOWN[name], strict=True))
    t = T.load(path)
    found = D.check_trace(t, _impls())
    assert not found, "\n\n".join(f"{f.headline()}\n{f.detail}" for f in found)


# -- cases --------------------------------------------------------------------------------


def test_a_case_is_made_again_from_its_seed_and_index():
    for index in range(4):
        a, b = (A.make_case(A.plan_case(9, index)) for _ in range(2))
        assert a.spec == b.spec and a.sender.calls == b.sender.calls
        assert a.receiver.calls == b.receiver.calls
    assert A.make_case(A.plan_case(9, 0)).sender.calls != \
        A.make_case(A.plan_case(9, 1)).sender.calls


def _u(value, limit: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < limit


def _sender_call_problem(call: list) -> str | None:
    op, now = call[0], call[1]
    psn, ev, tries, ports = A.PSN_LIMIT, A.EV_LIMIT, A.TRIES_LIMIT, A.PORTS_LIMIT
    ok = {
        "post": lambda: call[2] >= 1 and call[3] >= 0 and call[2] + call[3] <= A.SOURCE_SIZE
        and (call[4] is None or _u(call[4], ev)),
        "poll": lambda: _u(call[2], 1 << 31),
        "sack": lambda: _u(call[2], psn) and _u(call[3], 1 << 64) and _u(call[4], ev)
        and _u(call[5], psn) and _u(call[6], tries) and _u(call[7], ports)
        and _u(call[8], 256) and isinstance(call[9], bool),
        "nack": lambda: _u(call[2], psn) and isinstance(call[3], bool)
        and (_u(call[4], ev) or call[4] == -1) and (_u(call[5], tries) or call[5] == -1),
        "timer": lambda: True, "cnp": lambda: True,
        "ports": lambda: _u(call[2], ports),
        "probe": lambda: _u(call[2], ev) and isinstance(call[3], bool),
        "deny": lambda: all(_u(v, ev) for v in call[2]),
    }
    if op == "candidates":
        return None if _u(call[1], 1 << 31) else "candidates"
    if not _u(now, 1 << 62):
        return "now"
    return None if op in ok and ok[op]() else op


def _receiver_call_problem(call: list) -> str | None:
    op, ports = call[0], call[1]
    if not _u(ports, A.PORTS_LIMIT):
        return "ports"
    if op == "flush" and call[2] is None:
        return None
    psn, va, length, imm, ev, tries, ack_req, ce = call[2:]
    ok = (_u(psn, A.PSN_LIMIT) and _u(va, A.RX_BUFFER + 1) and _u(length, A.RX_MAX_LEN + 1)
          and va + length <= A.RX_BUFFER and (imm is None or _u(imm, A.EV_LIMIT))
          and _u(ev, A.EV_LIMIT) and _u(tries, A.TRIES_LIMIT)
          and isinstance(ack_req, bool) and isinstance(ce, bool))
    return None if ok and op in ("data", "trim", "flush") else op


def test_every_call_is_well_formed_and_time_never_goes_back():
    for index in range(30):
        case = A.make_case(A.plan_case(5, index))
        last = 0
        for i, call in enumerate(case.sender.calls):
            problem = _sender_call_problem(call)
            assert problem is None, f"case {index} sender call {i} {call}: {problem}"
            if call[0] != "candidates":
                assert call[1] >= last, f"case {index} call {i}: time went back"
                last = call[1]
        for i, call in enumerate(case.receiver.calls):
            problem = _receiver_call_problem(call)
            assert problem is None, f"case {index} receiver call {i} {call}: {problem}"


@pytest.mark.parametrize("move", sorted(A.MOVES))
def test_every_move_acts(move):
    """No knob is dead: a case of that move alone makes it, and it adds calls."""
    for index in range(20):
        case = A.make_case(A.plan_case(3, index, (move,)))
        if case.moves_made[move]:
            return
    pytest.fail(f"{move} never acted in 20 cases")


def test_an_unknown_move_is_refused_with_the_valid_names():
    with pytest.raises(ValueError, match="unknown move.*nope.*want any of sack_cum"):
        A.select_moves(without=["nope"])
    assert "trim_storm" not in A.select_moves(without=["trim_storm"])
    assert A.select_moves(only=["deny"]) == ("deny",)


def test_the_command_line_lists_moves_refuses_bad_ones_and_runs_a_case(capsys):
    from twin.mrc.difffuzz.__main__ import main

    assert main(["--list-moves"]) == 0
    assert "trim_storm" in capsys.readouterr().out
    assert main(["--without", "nope"]) == 2
    assert "unknown move(s) nope" in capsys.readouterr().err
    _impls()
    assert main(["--seed", "1", "--case", "4", "--no-save", "--only", "deny,probe"]) == 0
    out = capsys.readouterr().out
    assert "1 cases" in out and "0 distinct finding(s)" in out


# -- a short run --------------------------------------------------------------------------


def test_a_short_run_finds_nothing():
    """A few seconds of fixed seeds: the first cases of seed 1, as many as fit, every
    move; the receiver's side of more cases, as it replays faster."""
    impls = _impls()
    sender = D.fuzz(1, 4.0, cases=40, impls=impls, sides=("sender",))
    receiver = D.fuzz(1, 2.0, cases=150, impls=impls, sides=("receiver",))
    for report in (sender, receiver):
        assert report.cases >= 1 and report.calls > 100
        assert not report.findings, "\n\n".join(f"{f.headline()}\n{f.detail}"
                                                for f in report.findings)


# -- the power to tell -------------------------------------------------------------------


class _Proxy:
    def __init__(self, inner):
        self._inner = inner

    def __getattr__(self, name):
        return getattr(self._inner, name)


class _IgnoresOldSacks(_Proxy):
    """A SACK whose cum is behind ours is dropped whole (its marks, ports, bits too)."""

    def on_sack(self, sack, now):
        if sack.cum < self._inner.cum:
            return None
        return self._inner.on_sack(sack, now)


class _WindowOneShort(_Proxy):
    """The last PSN of the receive window is taken as out of it."""

    def on_data(self, pkt):
        if pkt.psn - self._inner.cum == RECV_WINDOW - 1:
            return None
        return self._inner.on_data(pkt)


class _SegfaultsOnUnsentBits(_Proxy):
    """Issue 34's bug (a) put back: a SACK whose bitmap reaches past the highest PSN
    sent kills the process with SIGSEGV, as the compiled Sender did."""

    high = -1

    def poll(self, now, source, budget=64):
        out = self._inner.poll(now, source, budget)
        self.high = max([self.high, *(t.psn for t in out)])
        return out

    def on_sack(self, sack, now):
        sent = 0 <= sack.psn <= self.high and 0 <= sack.cum <= self.high + 1
        if sent and sack.bitmap >> max(0, self.high - sack.cum):
            os.kill(os.getpid(), signal.SIGSEGV)
        return self._inner.on_sack(sack, now)


class _Hangs(_Proxy):
    def on_timer(self, now):
        time.sleep(30)


class _SendOrderGrows(_Proxy):
    @property
    def send_order_len(self):
        return 10**9


def _fastpath():
    _impls()  # skips where the compiled core is not there
    from twin.mrc import core

    return core.compiled()


def _mutant(side: str, wrap):
    fp = _fastpath()
    if side == "sender":
        return D.Impl("mutant", side, lambda *a: wrap(fp.Sender(*a)))
    return D.Impl("mutant", side, lambda place, **kw: wrap(fp.Receiver(place, **kw)))


@pytest.mark.parametrize(("wrap", "side", "moves"), [
    (_IgnoresOldSacks, "sender", ("sack_replay", "events_shuffle")),
    (_WindowOneShort, "receiver", ("rx_far",)),
], ids=["sender ignores old SACKs", "receiver window one short"])
def test_a_mutant_of_the_compiled_core_is_caught(wrap, side, moves):
    report = D.fuzz(1, 30.0, cases=20, moves=moves, impls=[_mutant(side, wrap)],
                    sides=(side,), max_findings=1)
    assert any(f.impl == "mutant" and f.kind == "divergence" for f in report.findings), \
        f"{wrap.__doc__} not caught in {report.cases} cases"


def test_a_wrong_copy_into_the_receivers_buffer_is_caught():
    fp = _fastpath()

    class Corrupts(_Proxy):  # the compiled Receiver placing into the buffer, a byte off
        def __init__(self, buf, **kw):
            super().__init__(fp.Receiver(buf, **kw))
            self._buf = buf

        def on_data(self, pkt):
            out = self._inner.on_data(pkt)
            if len(pkt.payload):
                self._buf[pkt.va] ^= 1
            return out

    impl = D.Impl("mutant", "receiver",
                  lambda place, **kw: D.BufferedReceiver(Corrupts, place, **kw))
    report = D.fuzz(1, 30.0, cases=5, impls=[impl], sides=("receiver",), max_findings=1)
    assert any(f.kind == "divergence" and "placed" in f.detail for f in report.findings)


def test_a_crash_is_a_finding_that_names_its_call_and_is_saved_as_a_trace(tmp_path):
    mutant = _mutant("sender", _SegfaultsOnUnsentBits)
    report = D.fuzz(1, 60.0, cases=10, moves=("sack_bits_unsent",), impls=[mutant],
                    sides=("sender",), max_findings=1, out=tmp_path, shrink_s=2)
    crashes = [f for f in report.findings if f.impl == "mutant"]
    assert crashes and crashes[0].kind == "crash" and crashes[0].op == "sack"
    # SIGSEGV, or under the sanitizer tier SIGABRT: ASan reports the SEGV and aborts
    assert re.match(r"killed by SIG(SEGV|ABRT) in mutant at call", crashes[0].detail)
    f = crashes[0]
    case = A.make_case(A.plan_case(1, f.index, ("sack_bits_unsent",)))
    call = case.sender.calls[f.call]
    assert call[0] == "sack" and call[3]  # the SACK it died in has bits set
    saved = T.load(tmp_path / f"fuzz-1-{f.index}-sender.json.gz")
    assert len(saved.calls) <= f.call + 1 and saved.facts["kind"] in ("crash", "exception")
    again = D.check_trace(saved, [mutant])
    assert any(g.kind == "crash" and g.op == "sack" for g in again)


def test_a_hang_is_a_finding():
    t = A.make_case(A.plan_case(1, 5, ())).sender
    found = D.runner.check_trace(t, [_mutant("sender", _Hangs)], timeout_s=1.0)
    assert [f.kind for f in found] == ["hang"] and found[0].op == "timer"


def test_a_send_order_past_its_bound_is_a_finding():
    t = A.make_case(A.plan_case(1, 5, ())).sender
    found = D.judge_trace(t, [_mutant("sender", _SendOrderGrows)])
    assert [f.kind for f in found] == ["unbounded"] and found[0].op == "poll"
