"""Timing held to the reference: a trace recorded by a live endpoint, with the endpoint
loop's own cadence, replayed into both transports, must give the same loss decisions at
the same times.

tests/traces/endpoint/link_cut.json.gz is what one sending QP was told by its endpoint's
loop (twin.mrc.loop, MRC_TWIN_RECORD) during a 32 MiB bulk on a netns mrc-4p while a
T0-T1 link on its paths went down (tests/traces/endpoint/record.py makes it again): its
polls of SEND_BUDGET packets, its timers at the loop's period, the SACKs as the peer's
loop coalesced them per receive batch and as they arrived, each with its time. The
simulated traces (tests/traces/*.json.gz, twin.mrc.sim) call the transport with the
simulator's cadence instead; this one holds the compiled core to the reference on the
calls the loop really makes. Its decisions are not stored: the two transports are
compared with each other here, so a change of the detection rules (made in both) does
not make it stale.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from twin.mrc import loop as L
from twin.mrc import trace as T
from twin.mrc.core import compiled
from twin.mrc.transport import Sender

TRACE = Path(T.TRACES_DIR) / "endpoint" / "link_cut.json.gz"
DECIDING = ("loss", "first_loss", "retire", "repaired", "spurious", "port", "trim")


@pytest.fixture(scope="module")
def recorded() -> T.Trace:
    return T.load(TRACE)


@pytest.fixture(scope="module")
def reference(recorded) -> list[dict]:
    return T.replay(recorded, Sender)


def compiled_sender():
    try:
        _fastpath = compiled()  # the module, bound to what its C uses
    except ImportError:
        _fastpath = None
    if _fastpath is None or not hasattr(_fastpath, "Sender"):
        if os.environ.get("MRC_TWIN_TRANSPORT") == "python":
            pytest.skip("MRC_TWIN_TRANSPORT=python: the reference alone")
        pytest.fail("the compiled core is not built (`make venv`)")
    return _fastpath.Sender


def decisions_in_time(log: list[dict]) -> list[list]:
    """Every loss decision and its consequences, with its time: [t_ns, kind, EV, PSN,
    detail] in the order they were made."""
    return [e for d in log for e in d.get("events", ()) if e[1] in DECIDING]


def test_the_trace_has_the_endpoint_loops_cadence(recorded):
    calls = [c for c in recorded.calls if c[0] != "candidates"]
    polls = [c for c in calls if c[0] == "poll"]
    assert len(polls) > 100 and {c[2] for c in polls} == {L.SEND_BUDGET}
    timers = [c[1] for c in calls if c[0] == "timer"]
    assert len(timers) > 20
    assert min(b - a for a, b in zip(timers, timers[1:], strict=False)) >= L.TIMER_NS  # its period
    assert all(a[1] <= b[1] for a, b in zip(calls, calls[1:], strict=False))  # one clock, in order
    # SACKs come as the loop reads them: several between two polls, in a receive batch
    runs, n = [], 0
    for c in calls:
        if c[0] == "sack":
            n += 1
        elif c[0] == "poll" and n:
            runs.append(n)
            n = 0
    assert max(runs) > 1


def test_the_cut_costs_losses_and_retirements(recorded, reference):
    """Not vacuous: the link went down on the QP's paths while it sent."""
    fault = recorded.facts["fault_ns"]
    after = [e for e in decisions_in_time(reference) if e[0] >= fault - 10_000_000]
    assert any(e[1] == "loss" for e in after) and any(e[1] == "retire" for e in after)
    assert recorded.facts["ok"]


def test_the_compiled_core_decides_losses_when_the_reference_does(recorded, reference):
    theirs = T.replay(recorded, compiled_sender())
    ours, got = decisions_in_time(reference), decisions_in_time(theirs)
    for i, (a, b) in enumerate(zip(ours, got, strict=False)):
        assert a == b, f"decision {i}: the reference {a}, the compiled core {b}"
    assert len(ours) == len(got)
    why = T.first_divergence(reference, theirs, recorded.calls, ("reference", "compiled"))
    assert why is None, why


def test_the_comparison_sees_a_change_of_cadence(recorded, reference):
    """The power to tell: the same inputs with the loop's timer at half its rate (every
    other timer call dropped) give loss decisions at other times."""
    timers = [i for i, c in enumerate(recorded.calls) if c[0] == "timer"]
    dropped = set(timers[1::2])
    slower = T.Trace(recorded.name, recorded.kind, recorded.about,
                     [c for i, c in enumerate(recorded.calls) if i not in dropped],
                     evset=recorded.evset, config=recorded.config,
                     source_size=recorded.source_size, source_seed=recorded.source_seed)
    assert decisions_in_time(T.replay(slower, Sender)) != decisions_in_time(reference)
