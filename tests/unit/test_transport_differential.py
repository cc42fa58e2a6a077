"""The differential test of the transport: every recorded trace (tests/traces), replayed
into each implementation, must give the reference's decisions (twin.mrc.trace).

For every trace:
  (a) the reference replayed twice decides the same (it is deterministic);
  (b) the reference still decides what it decided when the trace was recorded (a change
      to its behaviour fails here: re-record with `python -m twin.mrc.trace record`);
  (c) each compiled implementation (twin.mrc._fastpath.Sender / Receiver) decides as
      the reference does. Without them (c) fails, unless MRC_TWIN_TRANSPORT=python
      says this run is of the reference alone (then it skips, saying so).
And: no trace is vacuous (each does what its name says), and the harness has the power
to tell: small mutants of the reference must be reported divergent.
"""

from __future__ import annotations

import os

import pytest

from twin.mrc import core
from twin.mrc import trace as T
from twin.mrc.transport import Receiver, Sender

PATHS = T.stored()
TRACES = {p.name.removesuffix(".json.gz"): T.load(p) for p in PATHS}
SENDERS = sorted(n for n, t in TRACES.items() if t.kind == "sender")
RECEIVERS = sorted(n for n, t in TRACES.items() if t.kind == "receiver")
_REFERENCE: dict[str, list[dict]] = {}


def reference(name: str) -> list[dict]:
    """The reference's decisions on a trace, replayed once per test run."""
    if name not in _REFERENCE:
        _REFERENCE[name] = T.replay(TRACES[name])
    return _REFERENCE[name]


def test_there_are_enough_traces():
    assert len(SENDERS) >= 12 and len(RECEIVERS) >= 3, \
        f"tests/traces has {SENDERS} and {RECEIVERS}: re-record with {T.RECORD_COMMAND}"


@pytest.mark.parametrize("name", sorted(TRACES))
def test_the_reference_is_deterministic(name):
    again = T.replay(TRACES[name])
    assert T.first_divergence(reference(name), again, TRACES[name].calls,
                              ("first replay", "second replay")) is None


@pytest.mark.parametrize("name", sorted(TRACES))
def test_the_reference_decides_as_recorded(name):
    t = TRACES[name]
    why = T.first_divergence(t.decisions, reference(name), t.calls, ("recorded", "now"))
    assert why is None, (f"the reference's behaviour changed on trace {name}:\n{why}\n"
                         f"if that is intended, re-record the traces: {T.RECORD_COMMAND}")


# -- compiled implementations -----------------------------------------------------------


def _compiled(kind: str):
    """twin.mrc._fastpath's Sender or Receiver, or why there is none."""
    try:
        module = core.compiled()  # bound to what its C uses
    except ImportError as e:
        return None, f"twin.mrc._fastpath does not import ({e})"
    impl = getattr(module, kind, None)
    if impl is None:
        return None, f"twin.mrc._fastpath has no {kind} (built from {module.__file__})"
    return impl, ""


def _require(kind: str):
    impl, why = _compiled(kind)
    if impl is not None:
        return impl
    if os.environ.get("MRC_TWIN_TRANSPORT") == "python":
        pytest.skip(f"{why}; MRC_TWIN_TRANSPORT=python: the reference alone is under test")
    pytest.fail(f"{why}: the compiled transport is missing, so it cannot be held to the "
                "reference. Build it (pip install -e .), or set MRC_TWIN_TRANSPORT=python "
                "to test the Python transport alone", pytrace=False)


@pytest.mark.parametrize("name", SENDERS)
def test_the_compiled_sender_decides_as_the_reference(name):
    impl = _require("Sender")
    why = T.first_divergence(reference(name), T.replay(TRACES[name], impl),
                             TRACES[name].calls, ("reference", "_fastpath.Sender"))
    assert why is None, f"trace {name}: {why}"


@pytest.mark.parametrize("name", RECEIVERS)
def test_the_compiled_receiver_decides_as_the_reference(name):
    impl = _require("Receiver")
    why = T.first_divergence(reference(name), T.replay(TRACES[name], impl),
                             TRACES[name].calls, ("reference", "_fastpath.Receiver"))
    assert why is None, f"trace {name}: {why}"


# -- no trace is vacuous ------------------------------------------------------------------


def _facts(name: str) -> tuple[dict, dict, set[str], dict[str, int]]:
    t = TRACES[name]
    ops: dict[str, int] = {}
    for call in t.calls:
        ops[call[0]] = ops.get(call[0], 0) + 1
    return t.facts, t.facts["stats"], set(t.facts["events"]), ops


def test_clean_has_no_loss():
    f, st, _, _ = _facts("clean")
    assert f["ok"] and f["exact"] and st["retransmits"] == 0 and st["packets"] >= 100


@pytest.mark.parametrize("name", ["loss_1pct", "loss_0_1pct", "burst_loss"])
def test_the_lossy_traces_lose_retire_and_resend(name):
    f, st, ev, _ = _facts(name)
    assert f["ok"] and f["exact"]
    assert st["retransmits"] > 0 and f["evs_retirements"] > 0 and {"loss", "retire"} <= ev


def test_burst_loss_shows_a_path_dead():
    assert _facts("burst_loss")[0]["evs_dead_paths"] > 0


def test_reorder_reorders_and_undoes_spurious_losses():
    f, st, ev, _ = _facts("reorder")
    assert st["spurious"] > 0 and "spurious" in ev
    assert TRACES["rx_reorder"].facts["receiver"]["out_of_order"] > 100


def test_duplicates_arrive_twice():
    assert _facts("duplicates")[0]["receiver"]["duplicates"] > 10


def test_link_cut_retires_the_path_and_resends_its_flight():
    f, st, ev, _ = _facts("link_cut")
    assert f["ok"] and f["evs_dead_paths"] >= 1 and f["evs_retirements"] > 1
    assert st["lost_dead_path"] > 0 and st["retransmits"] > 0 and "retire" in ev


def test_port_down_up_changes_ports_both_sides():
    f, st, ev, ops = _facts("port_down_up")
    assert ops["ports"] == 2 and "port" in ev
    planes = [p for p, n in st["per_plane_packets"]]
    assert planes == [0, 1, 2, 3] and f["ok"]
    details = {e[4] for d in TRACES["port_down_up"].decisions for e in d.get("events", [])
               if e[1] == "port"}
    assert any("(peer)" in d for d in details) and any("(local)" in d for d in details)


def test_ecn_marks_are_echoed_and_skip_evs():
    f, st, _, _ = _facts("ecn_marks")
    assert f["fabric_marks"] > 0 and st["ecn_marks"] > 0 and f["evs_skips"]["ecn"] > 0


def test_trims_are_nacked_and_resent():
    f, st, ev, ops = _facts("trims")
    assert f["fabric_trims"] > 0 and st["nacks_trimmed"] > 0 and "trim" in ev
    assert ops["nack"] > 0 and f["evs_skips"]["trim"] > 0 and st["quick_adapts"] > 0


def test_denylist_denies():
    f, _, ev, ops = _facts("denylist")
    assert ops["deny"] == 1 and f["evs_denied"] == 3 and "ev_state" in ev


def test_probes_revive_retired_evs():
    f, _, ev, ops = _facts("probes_revive")
    assert ops["probe"] > 0 and ops["candidates"] > 0
    assert f["evs_revivals"] > 0 and {"probe", "revive"} <= ev


def test_single_path_goes_back_n_then_fails_at_the_retry_limit():
    f, st, _, _ = _facts("single_path_fail")
    assert not f["ok"] and "retry limit" in f["failed"] and st["retransmits"] > 0
    assert any(d.get("exc", [""])[0] == "QpFailed" for d in TRACES["single_path_fail"].decisions)
    assert len(st["per_plane_packets"]) == 1


def test_spray_static_resends_but_never_retires():
    f, st, _, _ = _facts("spray_static")
    assert st["retransmits"] > 0 and f["evs_retirements"] == 0 and f["ok"]


def test_dcqcn_gets_cnps():
    f, st, _, ops = _facts("dcqcn_cnp")
    assert ops["cnp"] > 0 and f["fabric_marks"] > 0 and f["cnps_ignored"] == 0
    assert 0 < st["cnps_limited"] < ops["cnp"]  # its NP sends faster than N allows
    rates = {d["snap"]["rate_bps"] for d in TRACES["dcqcn_cnp"].decisions}
    assert len(rates) > 1


def test_delay_cc_runs_delay_only():
    t = TRACES["delay_cc"]
    assert t.config["cc"] == "delay" and t.facts["ok"]
    windows = {d["snap"]["window"] for d in t.decisions}
    assert len(windows) > 10


def test_slow_path_makes_deep_holes_the_receiver_naks():
    f, st, _, ops = _facts("slow_path_nak")
    assert st["nacks_seq"] > 0 and ops["nack"] > 0
    assert TRACES["rx_deep_holes"].facts["receiver"]["nacks"] > 0
    assert any(d.get("nacks") for d in TRACES["rx_deep_holes"].decisions)


def test_dup_ce_trim_receiver_sees_all_three():
    rx = TRACES["rx_dup_ce_trim"].facts["receiver"]
    assert rx["duplicates"] > 0 and rx["ce_marked"] > 0 and rx["trimmed"] > 0


# -- the harness has the power to tell ----------------------------------------------------


class _WiderRack(Sender):
    def reorder_window_ns(self) -> int:
        return super().reorder_window_ns() * 2


class _WindowOffByOne(Sender):
    def _emit_new(self, now, source, out, budget):
        self.window += 1
        try:
            return super()._emit_new(now, source, out, budget)
        finally:
            self.window -= 1


class _TrimNoSkip(Sender):
    def _on_trimmed(self, psn, ev_value, tries, now):
        congested = self.evs.congested
        self.evs.congested = lambda ev, why="rtt": False
        try:
            super()._on_trimmed(psn, ev_value, tries, now)
        finally:
            self.evs.congested = congested


class _ResendAnywhere(Sender):
    def _pick_ev(self, avoid):
        return super()._pick_ev(None)


class _NakOneShallower(Receiver):
    def on_data(self, pkt):
        import twin.mrc.transport as tr

        old = tr.NACK_DISTANCE
        tr.NACK_DISTANCE = old - 1
        try:
            return super().on_data(pkt)
        finally:
            tr.NACK_DISTANCE = old


def _mutant_receiver_sack_every_3(place, **kw):
    kw["ack_every"] = kw.get("ack_every", 2) + 1
    return Receiver(place, **kw)


MUTANTS = [
    ("a RACK window twice as wide", _WiderRack, "reorder"),
    ("a window one packet larger", _WindowOffByOne, "clean"),
    ("a trimmed EV not skipped", _TrimNoSkip, "trims"),
    ("a resend on any EV, the lost copy's too", _ResendAnywhere, "link_cut"),
    ("NAKs one PSN shallower", _NakOneShallower, "rx_dup_ce_trim"),
    ("a SACK every 3 packets", _mutant_receiver_sack_every_3, "rx_reorder"),
]


@pytest.mark.parametrize(("what", "mutant", "name"), MUTANTS, ids=[m[0] for m in MUTANTS])
def test_a_mutant_is_reported_divergent(what, mutant, name):
    why = T.first_divergence(reference(name), T.replay(TRACES[name], mutant),
                             TRACES[name].calls, ("reference", "mutant"))
    assert why is not None, f"{what}: the harness did not tell it from the reference"
    assert why.startswith("call ") and "differs" in why


def test_a_divergence_names_the_call_the_field_and_both_values():
    ref = reference("trims")
    mutated = T.replay(TRACES["trims"], _TrimNoSkip)
    why = T.first_divergence(ref, mutated, TRACES["trims"].calls, ("reference", "mutant"))
    i = next(i for i, (a, b) in enumerate(zip(ref, mutated, strict=True)) if a != b)
    assert why.splitlines()[0].startswith(f"call {i} {TRACES['trims'].calls[i]}")
    assert "reference: " in why and "mutant: " in why


def test_pack_and_unpack_are_inverse():
    ref = reference("link_cut")
    assert T.unpack(T.pack(ref)) == ref
