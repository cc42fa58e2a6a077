"""Continuous probing, as MRC's Clustermapper does it: verify's loopback probes,
round after round, from a thread of the caller's process; the localizer
(twin.verify.localize) names what fails.

    round      one probe on every loopback path (from every host port: host>T0>host,
               and host>T0>T1>T0>host for each T1 of the plane), so every link is
               crossed at least once per round; a round starts every `period`
    rate       a round sends len(paths) probes per period: len(paths) * 1000 /
               period_ms per second on average. That may not pass the cap
               `rate_pps` (default 5000, at most 50000): a period that would is
               lengthened to len(paths) / rate_pps and a tenth (so that a round
               is sent before the next is due), and `period_ms` says what is
               used. Within a round, sends are paced by a token bucket filled at
               the cap and holding 2 ms of it: any window of T carries at most
               rate_pps * (T + 2 ms) probes. The thread wakes when a batch is
               due (the bucket full, or what is left of the round), not once a
               probe: a wake-up per probe at thousands a second preempts the
               endpoints it measures. It runs at the caller's priority: a niced
               thread preempted while it holds the GIL stalls every other thread
               of the process (a drill's timeline applied faults 440 ms late).
    lost       a probe not back `timeout_ms` after the round's last send (default:
               the period, but 5 to 10 ms; rounds may overlap). The sockets are
               read once more after that deadline, so a thread slowed by a busy
               machine may see a probe late, never count as lost one the kernel
               delivered in time.

    confirm    the paths a round lost, and every path sharing a link or switch with
               them, are probed again at once, ahead of the next round (a partial
               round: `confirmation`): a fault is named a timeout after the round that
               first lost it, not a period later. So localization takes up to a period
               (until a probe crosses the fault) + the round's sending (paths /
               rate_pps) + two timeouts. Not on a remote fabric's agents, whose rounds
               twin merges one from each.
    CE         probes travel in the fabric's probe class (twin.verify.packets): served
               ahead of data, never trimmed, marked CE by a port whose data queue is
               at its ecn_min; one back CE-marked is evidence of congestion, and the
               CongestionLocalizer names such links `congested`, never faulty.

The rounds are `LoopRounds`, which hands each judged round to `round_judged`: the
ContinuousProber below localizes it; on an attached fabric an agent in each host runs
the same rounds for its own paths and reports them (twin.remote.loop_agent).

Which prober a lab gets is its runtime's to say (`Runtime.continuous_prober`): this
one, or on a lab twin attached to (twin.runtime.remote) the agents'
(twin.remote.continuous), both a `LabProber`; `twin probe` and drills both ask it.

The sockets and packets are one-shot verify's (twin.verify.prober.HostSockets):
a raw and a UDP socket in every host's namespace, opened when the prober
starts (in the caller's thread, so a lab that is not there fails there).

    with ContinuousProber(att, period_ms=20) as cp:   # att: twin.lab.attach(...)
        ...
        cp.localizations()   # [Localization], oldest first (twin.verify.localize)
        cp.snapshot()        # what is named and suspect now, and the counters (JSON-able)
"""

from __future__ import annotations

import random
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Protocol

from twin.errors import LabError, UsageError
from twin.fabric.paths import Path, loopback_paths
from twin.verify import packets
from twin.verify.localize import (
    CLEAR,
    CONFIRM,
    Change,
    CongestionLocalizer,
    Localization,
    Localizer,
    Outcome,
    elements_of,
)
from twin.verify.prober import HostSockets, Prober, probe_hosts, probing_supported


class LabProber(Protocol):
    """What `twin probe` and a drill use of a lab's continuous prober, whichever the
    runtime hands out (ContinuousProber here, twin.remote.continuous's agents)."""

    def __init__(self, att, period_ms: float = ..., rate_pps: float = ..., **kw): ...
    def start(self) -> LabProber: ...
    def stop(self) -> None: ...
    def __enter__(self) -> LabProber: ...
    def __exit__(self, *exc) -> None: ...
    @property
    def running(self) -> bool: ...
    def now_ns(self) -> int: ...
    def localizations(self) -> list[Localization]: ...
    def snapshot(self) -> dict: ...
    @staticmethod
    def once(att, rate_pps: float = ...) -> Localizer: ...


RATE_PPS = 5000  # the default cap
RATE_MAX = 50_000
PERIOD_MIN_MS = 1.0
PERIOD_MAX_MS = 60_000.0
TIMEOUT_MIN_MS = 5.0
TIMEOUT_DEFAULT_MS = 10.0  # a lab's loopback round trip is tens of µs: the rest is headroom
STRETCH_SLACK = 1.1  # a stretched period leaves a tenth to spare: rounds start on time
BUCKET_S = 0.002  # the token bucket holds this much of the rate
STOP_WAIT_S = 5.0


@dataclass(frozen=True)
class Pace:
    """How often rounds start, and at what packet rate, for `paths` probes a round."""

    paths: int
    requested_ms: float
    period_ms: float
    rate_pps: float  # the cap
    timeout_ms: float

    @property
    def probe_pps(self) -> float:
        """The average rate the rounds send at (never above the cap)."""
        return self.paths * 1000 / self.period_ms

    @property
    def stretched(self) -> bool:
        return self.period_ms > self.requested_ms

    def to_dict(self) -> dict:
        return {"paths": self.paths, "requested_period_ms": self.requested_ms,
                "period_ms": round(self.period_ms, 3), "rate_cap_pps": self.rate_pps,
                "probe_pps": round(self.probe_pps, 1), "timeout_ms": round(self.timeout_ms, 3)}


def pace(paths: int, period_ms: float, rate_pps: float = RATE_PPS,
         timeout_ms: float | None = None) -> Pace:
    """Check what a person or a drill asked for, and fit the period under the cap."""
    if not PERIOD_MIN_MS <= period_ms <= PERIOD_MAX_MS:  # NaN fails too
        raise UsageError(f"period must be {PERIOD_MIN_MS:g} to {PERIOD_MAX_MS:g} ms "
                         f"(got {period_ms})")
    if not 1 <= rate_pps <= RATE_MAX:
        raise UsageError(f"rate must be 1 to {RATE_MAX} probes per second (got {rate_pps})")
    if timeout_ms is not None and not TIMEOUT_MIN_MS <= timeout_ms <= PERIOD_MAX_MS:
        raise UsageError(f"timeout must be {TIMEOUT_MIN_MS:g} to {PERIOD_MAX_MS:g} ms "
                         f"(got {timeout_ms})")
    if paths < 1:
        raise LabError("the lab has no loopback paths to probe (no hosts?)")
    needed = paths * 1000 / rate_pps
    period = period_ms if period_ms >= needed else needed * STRETCH_SLACK
    timeout = timeout_ms if timeout_ms is not None else \
        max(TIMEOUT_MIN_MS, min(period, TIMEOUT_DEFAULT_MS))
    return Pace(paths, period_ms, period, rate_pps, timeout)


def confirmation(elements: list[frozenset[str]], lost: list[int]) -> list[int]:
    """What a confirmation probes again (pure): the lost paths, and every path that shares
    a link or switch with one. Only the lost ones would name the wrong thing when a fault
    lands mid-round: the paths probed before it came back and clear the switch, so the
    few lost after it would blame a link of it; probed again, the switch's other paths
    fail too and the localizer waits for the wider picture (twin.verify.localize)."""
    suspect = frozenset().union(*(elements[i] for i in lost))
    return [i for i, els in enumerate(elements) if els & suspect]


@dataclass
class _Round:
    number: int
    started_ns: int
    sent_ns: list[int]
    back: list[bool]
    ce: list[bool] = field(default_factory=list)
    rtt_ns: list[int | None] = field(default_factory=list)
    seqs: list[int] = field(default_factory=list)
    unsent: int = 0
    last_sent_ns: int = 0
    only: frozenset[int] | None = None  # a confirmation: just these paths, sent again


class LoopRounds:
    """Rounds of loopback probes on `paths` from the sockets of `hosts`, every period,
    from a background thread; each judged round goes to `round_judged`. The
    continuous prober below localizes them; on a remote fabric an agent in each host
    runs one of these for that host's own paths (twin.remote.loop_agent)."""

    def __init__(self, name: str, paths: list[Path], hosts: dict[str, tuple[str | None, str]],
                 pace_: Pace):
        self.lab = name
        self.paths = paths
        self.pace = pace_
        self._hosts = hosts
        self._sockets: HostSockets | None = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._run_id = random.getrandbits(32)
        self._elements = [elements_of(p) for p in paths]
        self.error: str | None = None
        self.started_ns = 0
        self.probes_sent = 0
        self.probes_lost = 0
        self.probes_ce = 0  # came back CE-marked: crossed a congested port
        self.rounds_late = 0  # rounds started over a tenth of a period (1 ms at least) late
        self.last_round: dict = {}

    on_change: Callable[[Change], None] | None = None
    fast_confirm = True  # a round's lost paths are probed again at once

    def round_judged(self, outcomes: list[Outcome], now_ns: int) -> list[Change]:
        """One round's outcomes, path by path, judged at now_ns (the prober's thread,
        holding self._lock); what changed, for on_change."""
        return []

    # -- lifecycle -----------------------------------------------------------------------

    def start(self):
        missing = probing_supported()
        if missing:
            raise LabError(missing)
        if self._thread is not None:
            raise RuntimeError("this prober was started already")
        self._sockets = HostSockets(self._hosts)
        self.started_ns = time.monotonic_ns()
        self._thread = threading.Thread(target=self._guarded, name=f"twin-probe-{self.lab}",
                                        daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(STOP_WAIT_S)
        if self._sockets is not None and not (self._thread and self._thread.is_alive()):
            self._sockets.close()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()


    # -- the thread ---------------------------------------------------------------------

    def _guarded(self) -> None:
        try:
            self._loop()
        except Exception as e:  # the caller reads it from snapshot(); the thread ends
            self.error = f"{type(e).__name__}: {e}"
        finally:
            if self._sockets is not None:
                self._sockets.close()

    def _loop(self) -> None:
        p = self.pace
        n = len(self.paths)
        period_ns = int(p.period_ms * 1e6)
        timeout_ns = int(p.timeout_ms * 1e6)
        late_ns = max(1_000_000, period_ns // 10)
        burst = max(1.0, p.rate_pps * BUCKET_S)
        rounds: deque[_Round] = deque()  # started, not judged yet; oldest first
        queue: deque[tuple[_Round, int]] = deque()  # probes due to be sent
        outstanding: dict[int, tuple[_Round, int]] = {}
        seq = 0
        number = 0
        tokens = burst
        last = next_start = time.monotonic_ns()
        while not self._stop.is_set():
            now = time.monotonic_ns()
            if now >= next_start and not queue:  # a round still being sent delays the next
                if now - next_start > late_ns:
                    self.rounds_late += 1
                number += 1
                r = _Round(number, now, [0] * n, [False] * n, [False] * n, [None] * n,
                           unsent=n)
                rounds.append(r)
                queue.extend((r, i) for i in range(n))
                next_start = max(next_start + period_ns, now)  # late: no burst to catch up
            tokens = min(burst, tokens + (now - last) * p.rate_pps / 1e9)
            last = now
            while queue and tokens >= 1:
                r, i = queue.popleft()
                tokens -= 1
                seq = (seq + 1) & 0xFFFFFFFF
                path = self.paths[i]
                sent = time.monotonic_ns()
                r.sent_ns[i] = r.last_sent_ns = sent
                r.seqs.append(seq)
                r.unsent -= 1
                outstanding[seq] = (r, i)
                self._sockets.send(path.src, path.dst, path,
                                   packets.ProbeBody(packets.LOOP, self._run_id, seq, sent))
                self.probes_sent += 1
            wake = [next_start] if not queue else []
            if queue:  # when the next batch is due: a full bucket, or the rest of the round
                batch = min(burst, len(queue))
                wake.append(now + int(1e9 * max(0.0, batch - tokens) / p.rate_pps))
            if rounds and not rounds[0].unsent:
                wake.append(rounds[0].last_sent_ns + timeout_ns)
            wait = max(0, min(wake) - time.monotonic_ns()) / 1e9
            self._collect(self._sockets.receive(min(wait, 0.005)), outstanding)
            while rounds and not rounds[0].unsent and (
                    all(rounds[0].back) or time.monotonic_ns() >= rounds[0].last_sent_ns
                    + timeout_ns):
                self._collect(self._sockets.receive(0), outstanding)  # what came in time
                r = rounds.popleft()
                lost = self._judge(r, outstanding)
                if lost and r.only is None and self.fast_confirm:
                    # the lost paths again now, ahead of the rest: a fault is confirmed a
                    # timeout after it is first seen, not a period later
                    again = confirmation(self._elements, lost)
                    c = _Round(r.number, time.monotonic_ns(), [0] * n, [True] * n,
                               [False] * n, [None] * n, unsent=len(again),
                               only=frozenset(again))
                    for i in again:
                        c.back[i] = False
                    queue.extendleft((c, i) for i in reversed(again))
                    rounds.appendleft(c)

    def _collect(self, got, outstanding) -> None:
        for host, body in got:
            if body.run != self._run_id or body.kind != packets.LOOP:
                continue
            hit = outstanding.get(body.probe)
            if hit is not None and host == self.paths[hit[1]].src:
                del outstanding[body.probe]
                r, i = hit
                r.back[i] = True
                r.ce[i] = body.ce
                r.rtt_ns[i] = time.monotonic_ns() - r.sent_ns[i]

    def _judge(self, r: _Round, outstanding) -> list[int]:
        """Hand the round's outcomes on; the paths it lost."""
        for s in r.seqs:
            outstanding.pop(s, None)
        now = time.monotonic_ns()
        outcomes = [Outcome(ok if r.only is None or i in r.only else None, sent, ce, rtt)
                    for i, (ok, sent, ce, rtt)
                    in enumerate(zip(r.back, r.sent_ns, r.ce, r.rtt_ns, strict=True))]
        lost_paths = [i for i, ok in enumerate(r.back) if not ok]
        lost = len(lost_paths)
        marked = r.ce.count(True)
        with self._lock:
            changes = self.round_judged(outcomes, now)
            self.probes_lost += lost
            self.probes_ce += marked
            self.last_round = {"round": r.number, "started_ns": r.started_ns, "judged_ns": now,
                               "lost": lost, "ce": marked, "sent": len(r.seqs)}
        if self.on_change:
            for c in changes:
                self.on_change(c)
        return lost_paths


class ContinuousProber(LoopRounds):
    """Loopback probes from every host port of a running lab, every period, from a
    background thread; see the module docstring."""

    def __init__(self, att, period_ms: float = 20, rate_pps: float = RATE_PPS, *,
                 timeout_ms: float | None = None, confirm: int = CONFIRM, clear: int = CLEAR,
                 on_change: Callable[[Change], None] | None = None):
        paths = loopback_paths(att.fabric)
        super().__init__(att.lab, paths, probe_hosts(att.runtime, att.plan),
                         pace(len(paths), period_ms, rate_pps, timeout_ms))
        self.localizer = Localizer(att.fabric, self.paths, confirm=confirm, clear=clear)
        self.congestion = CongestionLocalizer(att.fabric, self.paths, confirm=confirm,
                                              clear=clear)
        self.on_change = on_change

    def round_judged(self, outcomes: list[Outcome], now_ns: int) -> list[Change]:
        partial = any(o.ok is None for o in outcomes)  # a confirmation of lost paths
        return self.localizer.observe(outcomes, now_ns, partial=partial) + \
            self.congestion.observe(outcomes, now_ns, partial=partial)

    # -- what callers read (any thread) -----------------------------------------------------

    def localizations(self) -> list[Localization]:
        """Every localization so far, oldest first; copies (the thread goes on)."""
        with self._lock:
            return [replace(loc) for loc in self.localizer.localizations()]

    def named(self) -> list[Localization]:
        with self._lock:
            return [replace(loc) for loc in self.localizer.named()]

    def congestions(self) -> list[Localization]:
        """Every link or switch found congested so far (verdict "congested"), oldest
        first; copies. Never among `localizations()`, which are the faulty ones."""
        with self._lock:
            return [replace(loc) for loc in self.congestion.localizations()]

    def now_ns(self) -> int:
        """The clock `named_ns` and changes are on: this machine's."""
        return time.monotonic_ns()

    @staticmethod
    def once(att, rate_pps: float = RATE_PPS) -> Localizer:
        return probe_once(att, rate_pps)

    def snapshot(self) -> dict:
        with self._lock:
            return {"lab": self.lab, "running": self.running, "error": self.error,
                    **self.pace.to_dict(),
                    "probes_sent": self.probes_sent, "probes_lost": self.probes_lost,
                    "probes_ce": self.probes_ce,
                    "rounds_late": self.rounds_late, "last_round": dict(self.last_round),
                    **self.localizer.snapshot(), **self.congestion.snapshot()}

    def wait_rounds(self, n: int, timeout_s: float) -> bool:
        """Block until `n` more rounds are judged (or the thread stops, or time runs out)."""
        with self._lock:
            want = self.localizer.rounds + n
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and self.running:
            with self._lock:
                if self.localizer.rounds >= want:
                    return True
            time.sleep(min(0.005, self.pace.period_ms / 4000))
        return False


def probe_once(att, rate_pps: float = RATE_PPS, timeout_ms: float = 300) -> Localizer:
    """One round and a verdict (`twin probe --once`): every loopback path probed, a lost
    one sent again once (two lost probes in a row, the continuous prober's rule),
    paced under `rate_pps`; the localizer, having seen that one round."""
    missing = probing_supported()
    if missing:
        raise LabError(missing)
    paths = loopback_paths(att.fabric)
    p = pace(len(paths), PERIOD_MIN_MS, rate_pps, timeout_ms)
    began = time.monotonic_ns()
    with Prober(probe_hosts(att.runtime, att.plan)) as prober:
        results = prober.run(paths, {}, attempts=CONFIRM, wait=p.timeout_ms / 1000,
                             rate_pps=p.rate_pps)
    loc = Localizer(att.fabric, paths, confirm=1)
    now = time.monotonic_ns()
    loc.observe([Outcome(r.ok, began) for r in results], now)
    return loc
