"""`twin traffic --cut`: the cut is a link-down on the fault timeline (twin.faults.timeline),
reported in the run's faults, and reverted however the command ends. On mrc-4p up on the
in-memory runtime, with twin.traffic.run's own loop and endpoints that answer from here."""

from __future__ import annotations

import json
import time

import pytest
from click.testing import CliRunner

from twin import faults as F
from twin import traffic as T
from twin.cli import main
from twin.runtime import fake

CUT = "t0-p0-r0:eth3"
BULK = ["traffic", "bulk", "--src", "r0h0", "--dst", "r1h0", "--size", "1M", "--json"]


class Client:
    def close(self):
        pass

    def write(self, **kw):
        pass


@pytest.fixture
def endpoints(att, monkeypatch):
    """The run's endpoints: every flow done once `done()` says so (after `run_s`, by
    default), byte-exact; `polled` counts the polls."""
    state = {"polled": 0, "run_s": 0.2}
    began = []

    def poll(clients, flows):
        if not began:
            began.append(time.monotonic())
        state["polled"] += 1
        state.get("on_poll", lambda: None)()
        return time.monotonic() - began[0] >= state["run_s"], 0

    def compare(clients, flows):
        for f in flows:
            f.exact = True

    monkeypatch.setattr(T.endpoints, "client", lambda rt, host: Client())
    monkeypatch.setattr(T, "_register", lambda *a, **kw: None)
    monkeypatch.setattr(T, "_poll", poll)
    monkeypatch.setattr(T, "_compare", compare)
    monkeypatch.setattr(T, "_collect_events", lambda clients, flows, result: None)
    return state


def admin(node, ifname):
    return fake.WORLD["mrc-4p"][node].interfaces[ifname].up


def events(att):
    return [(e["event"], e["target"]) for e in F.events(att)]


def test_the_cut_is_applied_at_its_time_reported_and_reverted(att, endpoints):
    link = att.fabric.link_at(F.parse_endpoint(att, CUT)).id
    res = CliRunner().invoke(main, [*BULK, "--cut", CUT, "--cut-at", "0.05"])
    assert res.exit_code == 0, res.output
    (row,) = json.loads(res.output)["faults"]
    assert row["what"] == f"link-down {CUT}"
    assert 0.05 <= row["t_s"] < 0.2 and 0 <= row["applied_us"] < 1_000_000
    assert set(row) == {"t_s", "t_us", "applied_us", "what"}  # the format it always had
    assert F.active(att) == [] and admin("t0-p0-r0", "eth3")
    assert events(att) == [("apply", link), ("revert", link)]  # on the lab's record


def test_ctrl_c_mid_run_reverts_the_cut(att, endpoints):
    def interrupt_once_cut():
        if F.active(att):
            raise KeyboardInterrupt

    endpoints.update(run_s=10.0, on_poll=interrupt_once_cut)
    res = CliRunner().invoke(main, [*BULK, "--cut", CUT, "--cut-at", "0"])
    assert res.exit_code != 0
    assert F.active(att) == [] and admin("t0-p0-r0", "eth3")
    assert [e for e, _ in events(att)] == ["apply", "revert"]


def test_a_cut_applied_half_way_is_reverted_from_the_record(att, endpoints, monkeypatch):
    """The cut was recorded on disk, then its kernel change failed: the run stops with
    the error, and the record is reverted as a `twin fault` would be."""
    real = fake.FakeRuntime.set_link_state

    def broken(self, node, ifname, up):
        if not up:
            raise OSError("ip link set down: the node went away")
        return real(self, node, ifname, up)

    monkeypatch.setattr(fake.FakeRuntime, "set_link_state", broken)
    endpoints.update(run_s=10.0)
    res = CliRunner().invoke(main, [*BULK, "--cut", CUT, "--cut-at", "0"])
    assert res.exit_code != 0 and "the node went away" in str(res.exception)
    assert endpoints["polled"] < 100  # ended by the error, not the run's 10 s
    assert F.active(att) == [] and [e for e, _ in events(att)] == ["apply", "revert"]


def test_a_cut_due_after_the_traffic_is_never_applied(att, endpoints):
    endpoints.update(run_s=0.0)
    started = time.monotonic()
    res = CliRunner().invoke(main, [*BULK, "--cut", CUT, "--cut-at", "30"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.output)["faults"] == []
    assert time.monotonic() - started < 10  # the timeline was halted, not waited for
    assert F.active(att) == [] and events(att) == []


@pytest.mark.parametrize("at", ["-1", "nan", "inf"])
def test_a_cut_at_no_time_is_refused(att, endpoints, at):
    res = CliRunner().invoke(main, [*BULK, "--cut", CUT, "--cut-at", at])
    assert res.exit_code != 0 and "--cut-at: must be" in res.output
    assert events(att) == []
