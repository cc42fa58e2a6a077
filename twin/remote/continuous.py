"""The continuous prober on a remote fabric: an agent in every host, one localizer here.

Each host's agent (twin.remote.loop_agent) runs that host's loopback rounds in the
node and reports every round's lost probes, stamped on the node's clock. Here the
reports are merged round by round: global round K is every agent's K-th round
(they start together and run at one period), its time the latest agent's, and the
same Localizer as on one machine (twin.verify.localize) names what fails, with
`named_ns` on the nodes' clock, the clock the endpoints stamp their events with.

The interface is the local ContinuousProber's, which a drill and `twin probe` use
(the runtime hands it out: Runtime.continuous_prober): start/stop, `on_change`,
`localizations()`, `snapshot()` with the same keys, and `once` for `twin probe
--once`. Three figures are the agents' sums: `probes_sent`, `rounds_late` (agents'
rounds started late) and the last round's. `now_ns()` is the nodes' clock as
estimated from the agents' ready lines (late by at most their delivery): only the
live view's "since" column reads it. Every wait has a deadline; the agents run in
sessions of their own (a Ctrl-C at twin's terminal is twin's to handle) and are
ended in `stop`, which a drill's rollback and `twin probe` always call.
"""

from __future__ import annotations

import json
import queue
import subprocess
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace

from twin.errors import LabError
from twin.fabric.paths import loopback_paths
from twin.remote import ship, transport
from twin.remote.agent import path_to_dict
from twin.verify.continuous import PERIOD_MIN_MS, RATE_PPS, pace
from twin.verify.localize import (
    CONFIRM,
    Change,
    CongestionLocalizer,
    Localization,
    Localizer,
    Outcome,
)

AGENT = "twin.remote.loop_agent"
STARTERS = 8
READY_S = 60.0  # from start to every agent's sockets bound
STOP_S = 10.0  # from closing an agent's stdin to its exit
ONCE_TIMEOUT_MS = 300.0  # --once: a probe is lost if not back in this (local once's wait)
ONCE_S = 30.0  # --once: from every agent ready to CONFIRM rounds merged


class RemoteContinuousProber:
    def __init__(self, att, period_ms: float = 20, rate_pps: float = RATE_PPS, *,
                 timeout_ms: float | None = None,
                 on_change: Callable[[Change], None] | None = None):
        self.rt = att.runtime
        self.lab = att.lab
        self.paths = loopback_paths(att.fabric)
        # checks it; the agents judge whole rounds at a fixed timeout (their own default
        # from the period, when none is given), not one measured
        self.pace = replace(pace(len(self.paths), period_ms, rate_pps, timeout_ms),
                            measured=False)
        self.timeout_ms = timeout_ms  # None: each agent's default, from the period
        self.on_change = on_change
        self.localizer = Localizer(att.fabric, self.paths)
        self.congestion = CongestionLocalizer(att.fabric, self.paths)
        self.hosts = {h.name: str(att.plan.nic_address(h.name)) for h in att.fabric.hosts}
        self.mine = {h: [i for i, p in enumerate(self.paths) if p.src == h] for h in self.hosts}
        self.share = max(1.0, rate_pps / max(1, len(self.hosts)))  # each agent's cap
        self.procs: dict[str, subprocess.Popen] = {}
        self.inbox: queue.Queue = queue.Queue()
        self.lock = threading.Lock()
        self.error: str | None = None
        self.rounds = 0
        self.probes_lost = 0
        self.probes_ce = 0
        self.probes_sent = 0
        self.rounds_late = 0
        self.last_round: dict = {}
        self.started_ns = 0  # the first agent's ready, on the nodes' clock
        self._offset_ns: int | None = None  # nodes' clock minus ours, from the ready lines
        self.stopped: dict[str, dict] = {}
        self._pending: dict[str, list[dict]] = {h: [] for h in self.hosts}
        self._thread: threading.Thread | None = None

    # -- lifecycle -----------------------------------------------------------------------

    def start(self) -> RemoteContinuousProber:
        try:
            with ThreadPoolExecutor(STARTERS) as pool:
                for f in [pool.submit(self._start, h) for h in self.hosts]:
                    f.result()
            waiting = set(self.hosts)
            deadline = time.monotonic() + READY_S
            while waiting:
                try:
                    host, msg = self.inbox.get(timeout=max(0.0, deadline - time.monotonic()))
                except queue.Empty:
                    raise LabError(f"{sorted(waiting)[0]}: its loop agent was not ready in "
                                   f"{READY_S:.0f}s ({len(waiting)} waiting)") from None
                if msg is None or "error" in msg:
                    raise LabError(f"{host}: its loop agent failed: "
                                   f"{(msg or {}).get('error') or 'it ended'}")
                if "ready" in msg:
                    waiting.discard(host)
                    offset = msg["t"] - time.monotonic_ns()  # at most the true one
                    self._offset_ns = max(offset, self._offset_ns or offset)
                    self.started_ns = min(msg["t"], self.started_ns or msg["t"])
        except BaseException:
            self.stop()
            raise
        self._thread = threading.Thread(target=self._merge, name=f"twin-rprobe-{self.lab}",
                                        daemon=True)
        self._thread.start()
        return self

    def _start(self, host: str) -> None:
        proc = transport.popen(self.rt.transport, self.rt.ref(host), ship.boot_argv(AGENT),
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               stderr=subprocess.DEVNULL, start_new_session=True)
        with self.lock:
            self.procs[host] = proc
        threading.Thread(target=self._read, args=(host, proc), daemon=True).start()
        hello = {"host": host, "nic": self.hosts[host],
                 "paths": [path_to_dict(self.paths[i]) for i in self.mine[host]],
                 "period_ms": self.pace.period_ms, "rate_pps": self.share,
                 "timeout_ms": self.timeout_ms}
        proc.stdin.write(ship.preamble(AGENT) + json.dumps(hello).encode() + b"\n")
        proc.stdin.flush()

    def _read(self, host: str, proc: subprocess.Popen) -> None:
        for line in proc.stdout:
            try:
                self.inbox.put((host, json.loads(line)))
            except ValueError:
                continue
        self.inbox.put((host, None))

    def stop(self) -> None:
        """End every agent (stdin closed; killed past STOP_S) and the merging thread."""
        with self.lock:
            procs = list(self.procs.items())
        for _, proc in procs:
            try:
                proc.stdin.close()
            except OSError:
                pass
        deadline = time.monotonic() + STOP_S
        for _, proc in procs:
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if self._thread is not None:
            self.inbox.put(("", None))  # wake it
            self._thread.join(STOP_S)

    def __enter__(self) -> RemoteContinuousProber:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    @property
    def running(self) -> bool:
        """Merging rounds: an agent that failed or ended stops localization."""
        return self._thread is not None and self._thread.is_alive() and self.error is None

    def now_ns(self) -> int:
        """The nodes' clock now, as estimated at start (see the module docstring)."""
        return time.monotonic_ns() + (self._offset_ns or 0)

    # -- merging ---------------------------------------------------------------------------

    def _merge(self) -> None:
        ended: set[str] = set()
        while True:
            host, msg = self.inbox.get()
            if not host:
                return
            if msg is None:
                if host not in self.stopped and self.error is None:
                    self.error = f"{host}: its loop agent ended; localization stopped"
                ended.add(host)
                if ended >= set(self.hosts):
                    return
                continue
            if "error" in msg:
                self.error = f"{host}: {msg['error']}"
            elif "stopped" in msg:
                self.stopped[host] = msg["stopped"]
            elif "round" in msg:
                self._pending[host].append(msg)
                while all(self._pending.values()):
                    self._observe({h: q.pop(0) for h, q in self._pending.items()})

    def _observe(self, reports: dict[str, dict]) -> None:
        outcomes, now = merge_round(self.mine, reports, len(self.paths))
        lost = sum(not o.ok for o in outcomes)
        marked = sum(o.ce for o in outcomes)
        with self.lock:
            changes = self.round_judged(outcomes, now)
            self.rounds += 1
            self.probes_lost += lost
            self.probes_ce += marked
            self.probes_sent = sum(r.get("sent", 0) for r in reports.values())
            self.rounds_late = sum(r.get("late", 0) for r in reports.values())
            self.last_round = {"round": self.rounds, "judged_ns": now, "lost": lost,
                               "ce": marked,
                               "sent": len(outcomes), "started_ns": min(
                                   r.get("started", now) for r in reports.values())}
        if self.on_change:
            for c in changes:
                self.on_change(c)

    def round_judged(self, outcomes: list[Outcome], now_ns: int) -> list[Change]:
        """One merged round (the merging thread, holding self.lock); what changed."""
        return self.localizer.observe(outcomes, now_ns) + \
            self.congestion.observe(outcomes, now_ns)

    # -- what callers read -----------------------------------------------------------------

    def localizations(self) -> list[Localization]:
        with self.lock:
            return [replace(loc) for loc in self.localizer.localizations()]

    def congestions(self) -> list[Localization]:
        with self.lock:
            return [replace(loc) for loc in self.congestion.localizations()]

    def snapshot(self) -> dict:
        """The local prober's snapshot, key for key (JSON-able)."""
        with self.lock:
            return {"lab": self.lab, "running": self.running, "error": self.error,
                    **self.pace.to_dict(),
                    "probes_sent": self.probes_sent, "probes_lost": self.probes_lost,
                    "probes_ce": self.probes_ce,
                    # the agents report no late probes and hold none: unknown here
                    "probes_late": None, "late_rtt_max_us": None, "probes_held": None,
                    "timeout_max_ms": None,
                    "rounds_late": self.rounds_late, "last_round": dict(self.last_round),
                    **self.localizer.snapshot(), **self.congestion.snapshot()}

    # -- twin probe --once -------------------------------------------------------------------

    @classmethod
    def once(cls, att, rate_pps: float = RATE_PPS) -> Localizer:
        """`twin probe --once` by the agents: CONFIRM rounds of every loopback path, each
        probe waited for ONCE_TIMEOUT_MS; a path lost in every one is lost (local once
        sends a lost probe again once: the same rule). The localizer, having seen that
        as one round."""
        with _Kept(att, PERIOD_MIN_MS, rate_pps, timeout_ms=ONCE_TIMEOUT_MS) as cp:
            deadline = time.monotonic() + ONCE_S
            while len(cp.kept) < CONFIRM and cp.running and time.monotonic() < deadline:
                time.sleep(0.01)
            with cp.lock:
                rounds = cp.kept[:CONFIRM]
        if len(rounds) < CONFIRM:
            raise LabError(cp.error or f"lab {cp.lab}: the loop agents reported "
                           f"{len(rounds)} of {CONFIRM} rounds in {ONCE_S:.0f}s")
        loc = Localizer(att.fabric, cp.paths, confirm=1)
        loc.observe(once_outcomes(rounds), max(now for _, now in rounds))
        return loc


class _Kept(RemoteContinuousProber):
    """Keeps each merged round's outcomes (--once), localizing none."""

    def __init__(self, *args, **kw):
        super().__init__(*args, **kw)
        self.kept: list[tuple[list[Outcome], int]] = []

    def round_judged(self, outcomes: list[Outcome], now_ns: int) -> list[Change]:
        self.kept.append((outcomes, now_ns))
        return []


def once_outcomes(rounds: list[tuple[list[Outcome], int]]) -> list[Outcome]:
    """Each path's outcome over several rounds (pure): back in any of them is back (at
    that round's time); lost in all is lost, as sent in the first."""
    return [next((o for o in tries if o.ok), tries[0])
            for tries in zip(*(outcomes for outcomes, _ in rounds), strict=True)]


def merge_round(mine: dict[str, list[int]], reports: dict[str, dict], n: int
                ) -> tuple[list[Outcome], int]:
    """One global round from each host's report of its own round (pure): every path's
    outcome (a lost probe with the time it was sent, a CE-marked one with its round
    trip), and the round's time, the latest agent's."""
    now = max(r["t"] for r in reports.values())
    outcomes = [Outcome(True, now)] * n
    for host, r in reports.items():
        own = mine[host]
        for i, sent in r["lost"]:
            outcomes[own[i]] = Outcome(False, sent)
        for i, rtt in r.get("ce", ()):  # an agent from before the probe class sends none
            outcomes[own[i]] = Outcome(True, now, ce=True, rtt_ns=rtt)
    return outcomes, now
