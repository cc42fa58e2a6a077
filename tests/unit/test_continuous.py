"""The continuous prober's pacing, and its thread over fake sockets (no root):
a fabric where what a "fault" breaks never comes back."""

import threading
import time
from dataclasses import replace
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
    ({"period_ms": 0}, r"^period: must be a number 1 to 60000 \(got 0\) \(milliseconds\)$"),
    ({"period_ms": float("nan")}, r"period: must be a number 1 to 60000 \(got nan\)"),
    ({"period_ms": 20, "rate_pps": 0}, r"rate: must be a number 1 to 50000 \(got 0\) "
                                       r"\(probes per second\)"),
    ({"period_ms": 20, "rate_pps": 10**6}, "rate: must be"),
    ({"period_ms": 20, "timeout_ms": 1}, "timeout: must be a number 5 to 60000"),
])
def test_pace_refuses_what_it_cannot_do(kw, message):
    with pytest.raises(UsageError, match=message):
        C.pace(48, **kw)


class FakeSockets:
    """Loop probes come back at once unless `broken(path)`, or `delay(path)` seconds
    later; while `stalled`, nothing comes back, and what was held comes back in order
    when it ends (a softirq backlog on a loaded machine). Sends are timed."""

    broken = staticmethod(lambda path: False)
    delay = staticmethod(lambda path: 0.0)
    ce = staticmethod(lambda path: False)  # comes back CE-marked
    stalled = False

    def __init__(self, hosts):
        self.hosts = hosts
        self.back = []  # (due, src, body)
        self.held = []
        self.sent_ns = []
        self.cv = threading.Condition()

    def send(self, src, dst, path, body):
        self.sent_ns.append(time.monotonic_ns())
        if FakeSockets.broken(path):
            return
        if FakeSockets.ce(path):
            body = replace(body, ce=True)
        with self.cv:
            item = (time.monotonic() + FakeSockets.delay(path), src, body)
            (self.held if FakeSockets.stalled else self.back).append(item)
            self.cv.notify()

    def receive(self, timeout, limit=4096):
        self.wakes = getattr(self, "wakes", 0) + 1
        deadline = time.monotonic() + timeout
        with self.cv:
            if self.held and not FakeSockets.stalled:
                self.back += [(0.0, src, body) for _, src, body in self.held]
                self.held = []
            while True:
                now = time.monotonic()
                got = [(src, body) for due, src, body in self.back if due <= now]
                if got or now >= deadline:
                    break
                first = min((due for due, _, _ in self.back), default=deadline)
                self.cv.wait(max(0.0, min(deadline, first) - now))
            self.back = [x for x in self.back if x[0] > now]
        return got

    def close(self):
        pass


@pytest.fixture
def att(monkeypatch):
    fabric = build_fabric(load_spec(ROOT / "lab/fabrics/mrc-4p.yml"))
    monkeypatch.setattr(C, "HostSockets", FakeSockets)
    monkeypatch.setattr(C, "probing_supported", lambda: None)
    monkeypatch.setattr(FakeSockets, "broken", staticmethod(lambda path: False))
    monkeypatch.setattr(FakeSockets, "delay", staticmethod(lambda path: 0.0))
    monkeypatch.setattr(FakeSockets, "stalled", False)
    monkeypatch.setattr(FakeSockets, "ce", staticmethod(lambda path: False))
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
    assert snap["named"] == [] and snap["error"] is None and snap["rounds"] >= 3 + 2
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
    """A probe lost is noted at its own deadline and its path and neighbours probed again
    at once (confirmations, judged whole, another while losses are not confirmed): a dead
    T1 is named a few timeouts after its first probe is lost, before the round that
    lost it is even judged (it is sent over most of the 200 ms period)."""
    at_change = []
    with C.ContinuousProber(att, period_ms=200, timeout_ms=5) as cp:
        cp.on_change = lambda c: at_change.append((c.event, cp.localizer.rounds))
        assert cp.wait_rounds(1, 5)
        rounds = cp.localizer.rounds
        FakeSockets.broken = staticmethod(lambda path: "t1-p1-1" in path.hops)
        deadline = time.monotonic() + 5
        while not cp.named() and time.monotonic() < deadline:
            time.sleep(0.005)
        [loc] = cp.named()
    assert loc.target == "t1-p1-1"
    assert at_change == [("named", rounds)]


def test_a_round_is_sent_over_the_period_not_in_one_burst(att):
    """Spread, each element's paths are crossed every few ms: at 100 ms, mrc-4p's 48
    probes go out over most of it (at the 5000 pps cap in one burst: under 10 ms)."""
    with C.ContinuousProber(att, period_ms=100) as cp:
        assert cp.wait_rounds(2, 5)
        sent = list(cp._sockets.sent_ns)
    first = sent[:48]
    assert (first[-1] - first[0]) / 1e6 >= 0.5 * 100 * C.SPREAD


def test_a_probe_back_late_is_alive_not_lost(att):
    """t1-p1-1's probes come back 15 ms late, past the 10 ms timeout: each is counted lost
    and confirmed, and each comes back before its confirmation is judged, retracting the
    loss (twin.verify.localize: losses sent before a probe that came back do not count).
    Nothing is named; the late ones are counted."""
    with C.ContinuousProber(att, period_ms=20, timeout_ms=10) as cp:
        assert cp.wait_rounds(1, 5)
        FakeSockets.delay = staticmethod(lambda path: 0.015 if "t1-p1-1" in path.hops else 0)
        assert cp.wait_rounds(8, 10)
        snap = cp.snapshot()
    assert snap["probes_late"] >= 4 and snap["late_rtt_max_us"] >= 15_000
    assert cp.localizations() == [], [loc.target for loc in cp.localizations()]


def test_a_stalled_machine_loses_no_probe(att):
    """For 40 ms nothing comes back (every probe held, as a softirq backlog holds them),
    then all of it, in order: past their deadline, the probes are held too, since nothing
    sent after them came back. Nothing lost, nothing named."""
    with C.ContinuousProber(att, period_ms=20, timeout_ms=5) as cp:
        assert cp.wait_rounds(2, 5)
        FakeSockets.stalled = True
        time.sleep(0.04)
        FakeSockets.stalled = False
        assert cp.wait_rounds(4, 10)
        snap = cp.snapshot()
    assert snap["probes_held"] > 0
    assert snap["probes_lost"] == 0 and cp.localizations() == []


def test_the_timeout_follows_the_round_trips_within_its_floor_and_ceiling():
    assert C.measured_timeout_ns(50_000, 10_000) == C.TIMEOUT_FLOOR_MS * 1e6  # a lab's µs
    assert C.measured_timeout_ns(4e6, 1e6) == 8e6  # srtt + 4 rttvar
    assert C.measured_timeout_ns(40e6, 20e6) == C.TIMEOUT_CEIL_MS * 1e6
    p = C.pace(48, 20)
    assert p.measured and p.to_dict()["timeout_measured"]
    assert not C.pace(48, 20, timeout_ms=10).measured


def test_the_thread_measures_its_timeout_from_the_probes(att):
    """Probes back in 8 ms: the timeout moves from where it starts (10 ms) to srtt + 4
    rttvar; instant ones bring it down to the floor. Given a timeout, it keeps it."""
    FakeSockets.delay = staticmethod(lambda path: 0.008)
    with C.ContinuousProber(att, period_ms=20) as cp:
        assert cp.wait_rounds(5, 10)
        assert cp.snapshot()["timeout_ms"] > 8  # srtt 8 ms and a little variance
        FakeSockets.delay = staticmethod(lambda path: 0.0)
        for _ in range(50):
            assert cp.wait_rounds(1, 5)
            if cp.snapshot()["timeout_ms"] == C.TIMEOUT_FLOOR_MS:
                break
        assert cp.snapshot()["timeout_ms"] == C.TIMEOUT_FLOOR_MS
        assert cp.localizations() == []
    with C.ContinuousProber(att, period_ms=20, timeout_ms=7) as cp:
        assert cp.wait_rounds(3, 10)
        assert cp.snapshot()["timeout_ms"] == 7


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


def test_a_path_through_a_congested_port_waits_the_ceiling(att):
    """t1-p1-1's probes come back CE-marked (a port on the way is congested), then 30 ms
    late: behind a busy shaped port a probe waits for the timer of the data frame ahead of
    it, per hop. Its paths' timeout is the ceiling, so they are neither lost nor named;
    the others keep the floor."""
    FakeSockets.ce = staticmethod(lambda path: "t1-p1-1" in path.hops)
    with C.ContinuousProber(att, period_ms=20) as cp:
        assert cp.wait_rounds(3, 5)
        snap = cp.snapshot()
        assert snap["timeout_max_ms"] >= 0.9 * C.TIMEOUT_CEIL_MS  # decaying since
        assert snap["timeout_ms"] == C.TIMEOUT_FLOOR_MS
        FakeSockets.delay = staticmethod(lambda path: 0.03 if "t1-p1-1" in path.hops else 0)
        assert cp.wait_rounds(8, 10)
        snap = cp.snapshot()
    assert snap["probes_lost"] == 0 and cp.localizations() == []


def test_a_path_over_an_element_slow_lately_waits_longer(att):
    """t1-p1-1's probes take 6 ms, then 10: the element's slowest round trip lately (6,
    then 10 ms) doubled is its paths' timeout, above the base the other 44 paths keep
    low. Once learned (a probe sent before the first came back may be lost, and come
    back late), nothing is lost."""
    FakeSockets.delay = staticmethod(lambda path: 0.006 if "t1-p1-1" in path.hops else 0)
    with C.ContinuousProber(att, period_ms=20) as cp:
        assert cp.wait_rounds(5, 5)
        snap = cp.snapshot()
        assert snap["timeout_max_ms"] >= 2 * 6 * 0.9  # decaying since
        lost = snap["probes_lost"]
        FakeSockets.delay = staticmethod(lambda path: 0.01 if "t1-p1-1" in path.hops else 0)
        assert cp.wait_rounds(8, 10)
        snap = cp.snapshot()
    # the base is srtt + 4 rttvar over every path: 4 of 48 at 10 ms keep it well under
    assert snap["timeout_max_ms"] >= 2 * 10 * 0.9 > snap["timeout_ms"]
    assert snap["probes_lost"] == lost and cp.localizations() == []
