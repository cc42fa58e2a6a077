"""The continuous prober's pacing, and its thread over fake sockets (no root):
a fabric where what a "fault" breaks never comes back."""

import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from twin.errors import UsageError
from twin.fabric.model import build_fabric
from twin.fabric.plan import build_plan
from twin.fabric.spec import load_spec
from twin.verify import continuous as C

ROOT = Path(__file__).resolve().parents[2]


def test_pace_keeps_the_period_under_the_cap_and_stretches_it_over():
    p = C.pace(48, 20)
    assert (p.period_ms, p.probe_pps, p.timeout_ms, p.stretched) == (20, 2400, 10, False)
    p = C.pace(640, 20, rate_pps=5000)  # mrc-8p: 32000 pps asked, 5000 allowed
    assert p.period_ms == pytest.approx(128 * 1.1) and p.stretched  # a tenth to spare
    assert p.probe_pps == pytest.approx(5000 / 1.1)
    assert C.pace(48, 2, rate_pps=48000).timeout_ms == 5
    assert C.pace(48, 20, timeout_ms=50).timeout_ms == 50
    assert p.to_dict()["requested_period_ms"] == 20


@pytest.mark.parametrize("kw, message", [
    ({"period_ms": 0}, "period must be 1 to 60000 ms"),
    ({"period_ms": float("nan")}, "period must be"),
    ({"period_ms": 20, "rate_pps": 0}, "rate must be 1 to 50000"),
    ({"period_ms": 20, "rate_pps": 10**6}, "rate must be"),
    ({"period_ms": 20, "timeout_ms": 1}, "timeout must be 5 to"),
])
def test_pace_refuses_what_it_cannot_do(kw, message):
    with pytest.raises(UsageError, match=message):
        C.pace(48, **kw)


class FakeSockets:
    """Loop probes come back at once unless `broken(path)`; sends are timed."""

    broken = staticmethod(lambda path: False)

    def __init__(self, hosts):
        self.hosts = hosts
        self.back = []
        self.sent_ns = []
        self.cv = threading.Condition()

    def send(self, src, dst, path, body):
        self.sent_ns.append(time.monotonic_ns())
        if not FakeSockets.broken(path):
            with self.cv:
                self.back.append((src, body))
                self.cv.notify()

    def receive(self, timeout, limit=4096):
        self.wakes = getattr(self, "wakes", 0) + 1
        with self.cv:
            if not self.back:
                self.cv.wait(timeout)
            got, self.back = self.back, []
        return got

    def close(self):
        pass


@pytest.fixture
def att(monkeypatch):
    fabric = build_fabric(load_spec(ROOT / "lab/fabrics/mrc-4p.yml"))
    monkeypatch.setattr(C, "HostSockets", FakeSockets)
    monkeypatch.setattr(C, "probing_supported", lambda: None)
    monkeypatch.setattr(FakeSockets, "broken", staticmethod(lambda path: False))
    return SimpleNamespace(lab="fake", fabric=fabric, plan=build_plan(fabric),
                           runtime=SimpleNamespace(netns_path=lambda n: f"/fake/{n}"))


def test_the_thread_names_a_dead_t1_and_clears_it(att):
    changes = []
    with C.ContinuousProber(att, period_ms=10, on_change=changes.append) as cp:
        assert cp.wait_rounds(3, 5)
        assert cp.named() == [] and cp.snapshot()["probes_lost"] == 0
        FakeSockets.broken = staticmethod(lambda path: "t1-p1-1" in path.hops)
        fault_ns = time.monotonic_ns()
        for _ in range(10):  # named after CONFIRM lost rounds (a round may straddle the fault)
            assert cp.wait_rounds(1, 5)
            if cp.named():
                break
        [loc] = cp.named()
        assert (loc.target, loc.kind) == ("t1-p1-1", "switch")
        assert fault_ns < loc.first_failed_ns < loc.named_ns
        FakeSockets.broken = staticmethod(lambda path: False)
        for _ in range(10):  # cleared after CLEAR good rounds (a round may straddle the fix)
            assert cp.wait_rounds(1, 5)
            if not cp.named():
                break
        snap = cp.snapshot()
    assert not cp.running
    assert [(c.event, c.localization.target) for c in changes] == \
        [("named", "t1-p1-1"), ("cleared", "t1-p1-1")]
    assert snap["named"] == [] and snap["error"] is None and snap["rounds"] >= 3 + 2 + 2
    assert snap["probes_lost"] >= 2 * 4  # 4 loop-t1s through it, at least 2 rounds
    assert cp.localizations()[0].cleared_ns is not None


def test_the_thread_stays_under_its_rate_cap(att):
    with C.ContinuousProber(att, period_ms=1, rate_pps=2000) as cp:
        assert cp.pace.period_ms == pytest.approx(24 * 1.1)  # 48 probes at 2000 pps
        assert cp.wait_rounds(6, 10)
        sent = list(cp._sockets.sent_ns)
    span_s = (sent[-1] - sent[0]) / 1e9
    assert len(sent) / span_s <= 2000 * 1.05
    # The bucket holds 2 ms of the cap: any 10 ms carries at most 2000 * 12 ms = 24 probes.
    assert all(b - a > 10_000_000 for a, b in zip(sent, sent[24:], strict=False))


def test_the_thread_wakes_once_a_batch_not_once_a_probe(att):
    """At 5000 pps the bucket holds 10 probes: the thread sends them together, so it
    wakes (and preempts the endpoints) about a quarter as often as it sends, where a
    wake per probe was 0.6 (rounds to start and judge come on top)."""
    with C.ContinuousProber(att, period_ms=1, rate_pps=5000) as cp:
        assert cp.wait_rounds(10, 10)
        sent, wakes = len(cp._sockets.sent_ns), cp._sockets.wakes
    assert wakes <= sent / 3, (wakes, sent)


def test_an_error_in_the_thread_is_kept_not_lost(att):
    def boom(*a):
        raise OSError(9, "Bad file descriptor")
    with C.ContinuousProber(att, period_ms=10) as cp:
        cp._sockets.send = boom
        deadline = time.monotonic() + 5
        while cp.running and time.monotonic() < deadline:
            time.sleep(0.01)
        assert not cp.running
    assert cp.snapshot()["error"] == "OSError: [Errno 9] Bad file descriptor"


def test_a_lost_path_is_confirmed_at_once_not_a_period_later(att):
    """A round's lost paths are probed again as soon as the round is judged: a dead T1
    is named from one whole round and its confirmation (a partial round, not counted),
    where it took two whole rounds, a period apart."""
    at_change = []
    with C.ContinuousProber(att, period_ms=200, timeout_ms=5) as cp:
        cp.on_change = lambda c: at_change.append((c.event, cp.localizer.rounds))
        assert cp.wait_rounds(1, 5)
        rounds = cp.localizer.rounds
        FakeSockets.broken = staticmethod(lambda path: "t1-p1-1" in path.hops)
        sent_before = len(cp._sockets.sent_ns)
        assert cp.wait_rounds(1, 5)
        deadline = time.monotonic() + 5
        while not cp.named() and time.monotonic() < deadline:
            time.sleep(0.005)
        sent = len(cp._sockets.sent_ns) - sent_before
    assert at_change == [("named", rounds + 1)]
    assert 48 + 4 <= sent < 2 * 48  # one round, then the 4 loop-t1s through it again


def test_without_fast_confirm_it_takes_a_second_round(att, monkeypatch):
    monkeypatch.setattr(C.LoopRounds, "fast_confirm", False)
    at_change = []
    with C.ContinuousProber(att, period_ms=20, timeout_ms=5) as cp:
        cp.on_change = lambda c: at_change.append((c.event, cp.localizer.rounds))
        assert cp.wait_rounds(1, 5)
        rounds = cp.localizer.rounds
        FakeSockets.broken = staticmethod(lambda path: "t1-p1-1" in path.hops)
        for _ in range(10):
            assert cp.wait_rounds(1, 5)
            if cp.named():
                break
    assert at_change and at_change[0][0] == "named" and at_change[0][1] >= rounds + 2


def test_a_confirmation_also_probes_every_path_sharing_a_switch_with_the_lost():
    """A T1 dying mid-round: only the last host's loop through it is lost. Confirming that
    one alone would name its T0-T1 link; its siblings through the T1 go too."""
    from twin.fabric.paths import loopback_paths
    from twin.verify.localize import elements_of
    paths = loopback_paths(build_fabric(load_spec(ROOT / "lab/fabrics/mrc-4p.yml")))
    via = [i for i, p in enumerate(paths) if "t1-p1-1" in p.hops]
    again = C.confirmation([elements_of(p) for p in paths], via[-1:])
    assert set(via) <= set(again) and len(again) < len(paths)
