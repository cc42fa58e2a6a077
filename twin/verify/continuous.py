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
               used. A round is sent over 8/10 of the period (`SPREAD`), in batches
               of 2 ms of that rate, so that every element's paths are crossed every
               few ms rather than in one burst and then not for the rest of the period;
               every send also takes a token from a bucket filled at the cap and
               holding 2 ms of it: any window of T carries at most rate_pps * (T + 2
               ms) probes. The thread wakes when a batch is due, not once a probe: a
               wake-up per probe at thousands a second preempts the endpoints it
               measures. It runs at the caller's priority: a niced thread preempted
               while it holds the GIL stalls every other thread of the process (a
               drill's timeline applied faults 440 ms late).
    timeout    each probe's own, from its send. Given (`timeout_ms`), fixed. Else
               measured: the base is srtt + 4 rttvar of every probe's round trip,
               TIMEOUT_FLOOR_MS (3) to TIMEOUT_CEIL_MS (50) (it starts at the period,
               but 5 to 10 ms); a path's is at least twice the slowest round trip lately
               over any element it crosses (halving every second), and the ceiling over
               an element a CE-marked probe crossed lately: behind a busy shaped port
               even the probe class waits for the tbf's timer armed for the data frame
               ahead of it (11 ms for 4 KB at 3 Mbit/s), per hop.
    lost       a probe past its deadline, once a probe sent after it has come back (or
               at TIMEOUT_CEIL_MS): while nothing sent later is back, the machine is
               slow (a softirq backlog on a loaded 2-core machine holds every probe
               behind it, in order), not the probe's path; those are `probes_held`.
               The sockets are read once more before, so a thread slowed by a busy
               machine never counts as lost one the kernel delivered in time.
    late       a probe counted lost that comes back within LATE_S (1 s): the path
               was alive when it was sent. The localizer retracts the losses sent
               before it (twin.verify.localize: a streak is the losses sent after the
               newest probe back), so a slow path is not named; `probes_late` counts
               them. And a loss sent within its timeout of the path's last counted loss
               does not count again: a round's probe and a confirmation in flight side
               by side are one piece of evidence, delayed by the same thing.

    confirm    with fast_confirm: a round's lost probes are noted at their own
               deadline (a streak, no verdict), and their paths, and every path sharing
               a link or switch with them, probed again at once, ahead of the rest (a
               `confirmation`, judged whole when settled; the lost ones first, so that
               the neighbours back after them let them count lost). A confirmation that
               leaves losses unconfirmed (a dead T1's other paths, first lost as
               neighbours) leads to another; a path is confirmed for its own loss at
               most once a period. Verdicts come from whole rounds and confirmations
               only: a part of the picture (a fault's first losses while its other
               paths are still being probed) names nothing. So localization takes the
               wait until a probe crosses the fault (a few ms, spread) + two or three
               timeouts. Not on a remote fabric's agents, whose rounds twin merges one
               from each: they send whole rounds at once, at a fixed timeout.
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

import heapq
import random
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Protocol

from twin import validate as V
from twin.errors import LabError
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
# What may be asked of the probing (twin.validate): `twin probe --period/--rate` are
# checked by these, and pace (an agent's hello, a drill's prober) by them again
PERIOD = V.Float(PERIOD_MIN_MS, PERIOD_MAX_MS, words=V.SPAN, hint="milliseconds")
RATE = V.Float(1, RATE_MAX, words=V.SPAN, hint="probes per second")
TIMEOUT = V.Float(TIMEOUT_MIN_MS, PERIOD_MAX_MS, words=V.SPAN, hint="milliseconds")
STRETCH_SLACK = 1.1  # a stretched period leaves a tenth to spare: rounds start on time
BUCKET_S = 0.002  # the token bucket holds this much of the rate
SPREAD = 0.8  # a round's probes are sent over this much of the period, in batches
STOP_WAIT_S = 5.0
# The measured timeout (no timeout given): srtt + 4 rttvar of the probes' round trips
# (RFC 6298's gains; late probes count too), within the floor and the ceiling. The floor
# is the thread's own jitter on a loaded 2-core machine, not the fabric's (tens of µs).
TIMEOUT_FLOOR_MS = 3.0
TIMEOUT_CEIL_MS = 50.0
# ... and per element (link, switch): a path's probe waits at least SLOW_MULT x the
# slowest round trip lately over any element it crosses (decaying by half every
# SLOW_HALF_LIFE_S), and the ceiling after one came back CE-marked through it: behind a
# busy shaped port a probe, though served first, waits for the tbf's timer armed for the
# data frame ahead of it (11 ms for 4 KB at 3 Mbit/s), per hop.
SLOW_MULT = 2.0
SLOW_HALF_LIFE_S = 1.0
LATE_S = 1.0  # a probe counted lost is still looked for this long: back, it is late
HELD_LOOK_NS = 1_000_000  # a probe held past its deadline is looked at again this soon


@dataclass(frozen=True)
class Pace:
    """How often rounds start, and at what packet rate, for `paths` probes a round."""

    paths: int
    requested_ms: float
    period_ms: float
    rate_pps: float  # the cap
    timeout_ms: float  # fixed, or where a measured one starts
    measured: bool = False  # the timeout follows the probes' round trips (none was given)

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
                "probe_pps": round(self.probe_pps, 1), "timeout_ms": round(self.timeout_ms, 3),
                "timeout_measured": self.measured}


def pace(paths: int, period_ms: float, rate_pps: float = RATE_PPS,
         timeout_ms: float | None = None) -> Pace:
    """Check what a person or a drill asked for, and fit the period under the cap."""
    PERIOD.check(period_ms, "period")  # NaN is refused too
    RATE.check(rate_pps, "rate")
    if timeout_ms is not None:
        TIMEOUT.check(timeout_ms, "timeout")
    if paths < 1:
        raise LabError("the lab has no loopback paths to probe (no hosts?)")
    needed = paths * 1000 / rate_pps
    period = period_ms if period_ms >= needed else needed * STRETCH_SLACK
    timeout = timeout_ms if timeout_ms is not None else \
        max(TIMEOUT_MIN_MS, min(period, TIMEOUT_DEFAULT_MS))
    return Pace(paths, period_ms, period, rate_pps, timeout, measured=timeout_ms is None)


def measured_timeout_ns(srtt_ns: float, rttvar_ns: float) -> int:
    """The timeout from the round trips (pure): srtt + 4 rttvar, within TIMEOUT_FLOOR_MS
    and TIMEOUT_CEIL_MS."""
    return int(min(TIMEOUT_CEIL_MS * 1e6, max(TIMEOUT_FLOOR_MS * 1e6,
                                              srtt_ns + 4 * rttvar_ns)))


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
    pending: int = 0  # sent, neither back nor past its deadline
    last_sent_ns: int = 0
    only: frozenset[int] | None = None  # a confirmation: just these paths, sent again
    lost: list[bool] = field(default_factory=list)  # past its deadline, not back
    deadline_ns: list[int] = field(default_factory=list)  # sent + its path's timeout
    handed: list[bool] = field(default_factory=list)  # its loss handed on ahead of the round

    @classmethod
    def new(cls, number: int, now: int, n: int, only: list[int] | None = None) -> _Round:
        r = cls(number, now, [0] * n, [only is not None] * n, [False] * n, [None] * n,
                unsent=n if only is None else len(only),
                only=None if only is None else frozenset(only), lost=[False] * n,
                handed=[False] * n, deadline_ns=[0] * n)
        for i in only or ():
            r.back[i] = False
        return r

    @property
    def settled(self) -> bool:
        """Every probe sent, and each back or past its deadline."""
        return not self.unsent and not self.pending


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
        self.probes_late = 0  # came back after they were counted lost (not lost after all)
        self.late_rtt_max_us = 0.0  # the slowest of them
        self.srtt_ns = self.rttvar_ns = 0.0  # the probes' round trips (measured_timeout_ns)
        self.timeout_ns = int(pace_.timeout_ms * 1e6)  # what the rounds use now (the base)
        self._slow: dict[str, tuple[float, int]] = {}  # element -> (slowest lately, when)
        self.newest_back_ns = 0  # when the newest probe that came back was sent
        self.probes_held = 0  # past their deadline, kept: nothing sent after them was back
        self._counted_ns = [-(1 << 62)] * len(paths)  # each path's last loss counted, sent
        # when each path was last confirmed for its own loss: at most once a period, so a
        # path whose probes keep coming back late is not confirmed over and over
        self._confirmed_ns = [-(1 << 62)] * len(paths)
        self._period_ns = int(pace_.period_ms * 1e6)
        self._held: set[int] = set()
        self.rounds_late = 0  # rounds started over a tenth of a period (1 ms at least) late
        self.last_round: dict = {}

    on_change: Callable[[Change], None] | None = None
    # A lost probe is handed on at its deadline and its path probed again at once, not
    # at the end of its round; the timeout follows the round trips (when none is given);
    # a round is sent over the period. Off on a remote fabric's agents (whole rounds).
    fast_confirm = True
    measure_timeout = True
    spread = True

    def round_judged(self, outcomes: list[Outcome], now_ns: int, *,
                     partial: bool = False) -> list[Change]:
        """One round's outcomes, path by path, judged at now_ns (the prober's thread,
        holding self._lock); what changed, for on_change. `partial` (only with
        fast_confirm): a confirmation, the other paths' outcomes None; with fast_confirm
        a round's losses noted already are None too."""
        return []

    def noted(self, outcomes: list[Outcome]) -> None:
        """With fast_confirm: a part of a round (the others' outcomes None), which says
        how paths fare but gives no verdict (the prober's thread, holding self._lock): a
        main round's losses at their deadline, and probes back late (alive when sent).
        Verdicts wait for whole rounds and confirmations, so that a part of the picture
        (a fault's first losses while its other paths are still being probed) names
        nothing."""

    def confirming(self, i: int) -> bool:
        """Is path i's loss worth probing again at once (not confirmed already)?"""
        return True

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
        late_ns = max(1_000_000, period_ns // 10)
        burst = max(1.0, p.rate_pps * BUCKET_S)
        # A round's batches: sent over SPREAD of the period (at most at the cap), so each
        # element's paths are crossed every few ms, not in one burst and then not at all.
        spread_pps = min(p.rate_pps, n * 1e9 / (SPREAD * period_ns)) if self.spread \
            else p.rate_pps
        batch = max(1, int(spread_pps * BUCKET_S))
        batch_ns = int(batch * 1e9 / spread_pps) if self.spread else 0
        rounds: list[_Round] = []  # started, not judged yet; oldest first
        queue: deque[tuple[_Round, int, int]] = deque()  # (round, path, due) to send
        outstanding: dict[int, tuple[_Round, int]] = {}  # seq -> sent, awaited
        deadlines: list[tuple[int, int]] = []  # heap of (deadline, seq) awaited
        late: dict[int, tuple[int, int, int]] = {}  # seq -> (path, sent, given up at): lost
        look: int | None = None  # when the oldest probe awaited falls due
        seq = 0
        number = 0
        tokens = burst
        last = next_start = time.monotonic_ns()
        while not self._stop.is_set():
            now = time.monotonic_ns()
            sending = any(r.only is None and r.unsent for r in rounds)
            if now >= next_start and not sending:
                if now - next_start > late_ns:  # a round still being sent delays the next
                    self.rounds_late += 1
                number += 1
                r = _Round.new(number, now, n)
                rounds.append(r)
                queue.extend((r, i, now + (i // batch) * batch_ns) for i in range(n))
                next_start = max(next_start + period_ns, now)  # late: no burst to catch up
                sending = True
            tokens = min(burst, tokens + (now - last) * p.rate_pps / 1e9)
            last = now
            while queue and tokens >= 1 and queue[0][2] <= now:
                r, i, _ = queue.popleft()
                tokens -= 1
                seq = (seq + 1) & 0xFFFFFFFF
                path = self.paths[i]
                sent = time.monotonic_ns()
                r.sent_ns[i] = r.last_sent_ns = sent
                r.deadline_ns[i] = sent + self._timeout_for(i, sent)
                heapq.heappush(deadlines, (r.deadline_ns[i], seq))
                r.seqs.append(seq)
                r.unsent -= 1
                r.pending += 1
                outstanding[seq] = (r, i)
                self._sockets.send(path.src, path.dst, path,
                                   packets.ProbeBody(packets.LOOP, self._run_id, seq, sent))
                self.probes_sent += 1
            sending = any(r.only is None and r.unsent for r in rounds)
            wake = [] if sending else [next_start]  # the next round waits for this one
            if queue:  # the next batch: when it is due and the bucket holds it
                need = min(batch, len(queue))
                wake.append(max(queue[0][2],
                                now + int(1e9 * max(0.0, need - tokens) / p.rate_pps)))
            if look is not None:
                wake.append(look)
            wait = max(0, min(wake) - time.monotonic_ns()) / 1e9
            self._collect(self._sockets.receive(min(wait, 0.005)), outstanding, late)
            lost, look = self._overdue(deadlines, outstanding, late)
            main = [(r, i) for r, i in lost if r.only is None]
            if main and self.fast_confirm:  # confirmed a timeout after, not at the round's end
                self._confirm(self._note_losses(main), main[0][0].number, rounds, queue)
            for r in [r for r in rounds if r.settled]:
                rounds.remove(r)
                self._judge(r)
                if r.only is not None:  # a confirmation: its losses not confirmed yet, again
                    self._confirm([i for i in r.only if r.lost[i]], r.number, rounds, queue)
            self._expire(late)

    def _overdue(self, deadlines: list[tuple[int, int]], outstanding, late
                 ) -> tuple[list[tuple[_Round, int]], int | None]:
        """The probes lost, oldest first, and when to look again. A probe is lost once
        it is past its deadline (sent + the timeout) *and* a probe sent after it came back
        (or it is TIMEOUT_CEIL_MS old): while nothing sent later is back, the machine or
        the whole fabric is slow, not this probe's path (a softirq backlog on a loaded
        2-core machine delays every probe behind it, in order). The sockets are read once
        more first, so a thread slowed by a busy machine never counts as lost a probe the
        kernel delivered in time."""
        now = time.monotonic_ns()
        ceil_ns = int(TIMEOUT_CEIL_MS * 1e6)
        due = []
        while deadlines and deadlines[0][0] <= now:
            _, s = heapq.heappop(deadlines)
            if s in outstanding:  # else back already
                due.append(s)
        while deadlines and deadlines[0][1] not in outstanding:  # back: not to wake for
            heapq.heappop(deadlines)
        wake = deadlines[0][0] if deadlines else None
        if not due:
            return [], wake
        self._collect(self._sockets.receive(0), outstanding, late)
        lost = []
        for s in due:
            hit = outstanding.get(s)
            if hit is None:
                continue  # came in just now
            r, i = hit
            sent = r.sent_ns[i]
            if sent >= self.newest_back_ns and sent + ceil_ns > now:
                if s not in self._held:
                    self._held.add(s)
                    self.probes_held += 1
                again = min(now + HELD_LOOK_NS, sent + ceil_ns)  # looked at again soon
                heapq.heappush(deadlines, (again, s))
                wake = min(wake or again, again)
                continue
            del outstanding[s]
            self._held.discard(s)
            r.pending -= 1
            r.lost[i] = True
            late[s] = (i, sent, now)
            lost.append(hit)
        return lost, wake

    def _note_losses(self, lost: list[tuple[_Round, int]]) -> list[int]:
        """With fast_confirm, a main round's losses go to the localizer at their deadline
        (noted: no verdict from a part of a round); the paths worth confirming."""
        if not self.fast_confirm:
            return []
        n = len(self.paths)
        outcomes = [Outcome(None, 0)] * n
        for r, i in lost:
            r.handed[i] = True
            outcomes[i] = Outcome(False, r.sent_ns[i]) if self._counts(r, i) else None
        self._note([o or Outcome(None, 0) for o in outcomes], len(lost))
        return [i for _, i in lost]

    def _counts(self, r: _Round, i: int) -> bool:
        """Does this loss count toward path i's streak? Not when it was sent within a
        timeout of the last loss counted: both were in flight together, and what delayed
        one (a busy machine) delayed the other; a round's probe and a confirmation sent
        side by side are one piece of evidence, not two. A confirmation, sent when the
        loss before it was counted, always counts."""
        sent = r.sent_ns[i]
        if sent - self._counted_ns[i] < r.deadline_ns[i] - sent:
            return False
        self._counted_ns[i] = sent
        return True

    def _confirm(self, lost: list[int], number: int, rounds: list[_Round], queue) -> None:
        """The lost paths not confirmed yet, and every path sharing an element with them,
        probed again ahead of everything else (a confirmation, judged whole when it is
        settled, which may lead to another while its losses are not confirmed: a dead
        T1's other paths, first lost as neighbours). A path is confirmed for its own loss
        at most once a period."""
        now = time.monotonic_ns()
        with self._lock:
            again = sorted({i for i in lost if self.confirming(i)
                            and now - self._confirmed_ns[i] >= self._period_ns})
        if not again:
            return
        for i in again:
            self._confirmed_ns[i] = now
        c = _Round.new(number, time.monotonic_ns(), len(self.paths),
                       confirmation(self._elements, again))
        # the lost first: the neighbours sent after them, back, are what lets them be
        # counted lost (see _overdue)
        order = again + sorted(c.only - set(again))
        queue.extendleft((c, i, 0) for i in reversed(order))
        rounds.append(c)

    def _expire(self, late: dict[int, tuple[int, int, int]]) -> None:
        old = time.monotonic_ns() - int(LATE_S * 1e9)
        while late:  # in the order they were counted lost
            s = next(iter(late))
            if late[s][2] >= old:
                break
            del late[s]

    def _collect(self, got, outstanding, late) -> None:
        now = time.monotonic_ns()
        back_late: dict[int, Outcome] = {}
        for host, body in got:
            if body.run != self._run_id or body.kind != packets.LOOP:
                continue
            hit = outstanding.get(body.probe)
            if hit is not None and host == self.paths[hit[1]].src:
                del outstanding[body.probe]
                r, i = hit
                r.back[i] = True
                r.pending -= 1
                r.ce[i] = body.ce
                r.rtt_ns[i] = now - r.sent_ns[i]
                self._held.discard(body.probe)
                self.newest_back_ns = max(self.newest_back_ns, r.sent_ns[i])
                self._rtt(r.rtt_ns[i], now, i, body.ce)
                continue
            gone = late.get(body.probe)
            if gone is not None and host == self.paths[gone[0]].src:
                del late[body.probe]
                i, sent, _ = gone
                self.probes_late += 1
                self.late_rtt_max_us = max(self.late_rtt_max_us, (now - sent) / 1000)
                self.newest_back_ns = max(self.newest_back_ns, sent)
                self._rtt(now - sent, now, i, body.ce)
                back_late[i] = Outcome(True, sent)  # alive when it was sent
        if back_late and self.fast_confirm:
            self._note([back_late.get(i, Outcome(None, 0)) for i in range(len(self.paths))])

    def _rtt(self, rtt_ns: int, now: int, i: int, ce: bool) -> None:
        """Path i's probe back after rtt_ns: the estimates, and the base timeout."""
        if not (self.measure_timeout and self.pace.measured):
            return
        if not self.srtt_ns:
            self.srtt_ns, self.rttvar_ns = rtt_ns, rtt_ns / 2
        else:
            self.rttvar_ns += (abs(self.srtt_ns - rtt_ns) - self.rttvar_ns) / 4
            self.srtt_ns += (rtt_ns - self.srtt_ns) / 8
        self.timeout_ns = measured_timeout_ns(self.srtt_ns, self.rttvar_ns)
        slow = max(rtt_ns, TIMEOUT_CEIL_MS * 1e6 / SLOW_MULT if ce else 0)
        for e in self._elements[i]:
            self._slow[e] = (max(slow, self._slowest(e, now)), now)

    def _slowest(self, element: str, now: int) -> float:
        v, at = self._slow.get(element, (0.0, now))
        return v * 0.5 ** ((now - at) / (SLOW_HALF_LIFE_S * 1e9))

    def _timeout_for(self, i: int, now: int) -> int:
        """Path i's timeout now: the base, or more over an element slow lately."""
        if not (self.measure_timeout and self.pace.measured):
            return self.timeout_ns
        slow = max(self._slowest(e, now) for e in self._elements[i]) * SLOW_MULT
        return int(min(TIMEOUT_CEIL_MS * 1e6, max(self.timeout_ns, slow)))

    def _note(self, outcomes: list[Outcome], lost: int = 0) -> None:
        """A part of a round to `noted` (losses at their deadline, probes back late)."""
        with self._lock:
            self.noted(outcomes)
            self.probes_lost += lost

    def _judge(self, r: _Round) -> None:
        """Hand a settled round on: what came back, and the losses not handed on yet."""
        now = time.monotonic_ns()
        outcomes = [Outcome(None if r.handed[i] or (r.only is not None and i not in r.only)
                            or (self.fast_confirm and r.lost[i] and not self._counts(r, i))
                            else back, sent, ce, rtt)
                    for i, (back, sent, ce, rtt)
                    in enumerate(zip(r.back, r.sent_ns, r.ce, r.rtt_ns, strict=True))]
        lost = sum(r.lost[i] and not r.handed[i] for i in range(len(r.lost)))
        marked = r.ce.count(True)
        with self._lock:
            changes = self.round_judged(outcomes, now, partial=r.only is not None)
            self.probes_lost += lost
            self.probes_ce += marked
            if r.only is None:
                self.last_round = {"round": r.number, "started_ns": r.started_ns,
                                   "judged_ns": now, "lost": r.lost.count(True), "ce": marked,
                                   "sent": len(r.seqs)}
        if self.on_change:
            for c in changes:
                self.on_change(c)


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

    def round_judged(self, outcomes: list[Outcome], now_ns: int, *,
                     partial: bool = False) -> list[Change]:
        return self.localizer.observe(outcomes, now_ns, partial=partial) + \
            self.congestion.observe(outcomes, now_ns, partial=partial)

    def noted(self, outcomes: list[Outcome]) -> None:
        self.localizer.note(outcomes)

    def confirming(self, i: int) -> bool:
        return self.localizer.streak(i) < self.localizer.confirm

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
        now = time.monotonic_ns()
        with self._lock:
            return {"lab": self.lab, "running": self.running, "error": self.error,
                    **self.pace.to_dict(),
                    "timeout_ms": round(self.timeout_ns / 1e6, 3),
                    "timeout_max_ms": round(max(
                        (self._timeout_for(i, now) for i in range(len(self.paths))),
                        default=self.timeout_ns) / 1e6, 3),
                    "probes_sent": self.probes_sent, "probes_lost": self.probes_lost,
                    "probes_ce": self.probes_ce, "probes_late": self.probes_late,
                    "late_rtt_max_us": round(self.late_rtt_max_us, 1),
                    "probes_held": self.probes_held,
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
