"""The prober's verdicts beside the queues: what a drill's switch ports queued, link by
link, next to what the continuous prober called each link (faulty, congested, or
nothing), so that a congestion drill's report shows a deep queue named "congested"
and never "faulty".

    QueueWatch(att)    while a drill runs, a thread reads every shaped switch port's
                       virtual queue (the queue program's port map, docs/ebpf.md
                       "The port map") every SAMPLE_S, by map id, as the telemetry
                       exporter does: the deepest each port got during the run, and
                       its packets, CE marks, trims and drops over the run
    verdicts(...)      (pure) one row per link that queued or that the prober named:
                       {"link", "verdict", "named_ns", "max_queue_bytes", "ce_marked",
                       "trimmed", "dropped"}, the deepest first; a link's queue is the
                       deeper of its two ends'
    false_alarm(...)   (pure) the check a drill with no fault on its timeline gets
                       (its main run, not a baseline): the prober named nothing faulty

On a fabric without queue programs (unshaped), or a runtime whose maps are not on
this machine's kernel (an attached fabric), there are no queues: the rows are the
prober's alone.
"""

from __future__ import annotations

import os
import threading
import time

from twin.chaos.results import Judged
from twin.errors import LabError
from twin.node.ebpf import bpf, read_ports

SAMPLE_S = 0.05  # 20 reads a second: a node's ports are one map lookup each
COUNTED = ("packets", "ce_marked", "trimmed", "dropped")


class QueueWatch:
    """Samples the shaped switch ports of a lab from a thread (see the module docstring)."""

    def __init__(self, att, sample_s: float = SAMPLE_S):
        self.sample_s = sample_s
        self._maps: dict[str, tuple[int, dict[int, str]]] = {}  # node -> (map id, slot->dev)
        self._links = {}
        for lk in att.fabric.links:
            self._links[(lk.a.node, lk.a.ifname)] = lk.id
            self._links[(lk.b.node, lk.b.ifname)] = lk.id
        for name, plan in att.plan.nodes.items():
            if not plan.queues:
                continue
            try:
                found = att.dataplane.signals(att.runtime, name)
            except (LabError, OSError, ValueError):
                continue
            if found:
                self._maps[name] = (found["ports_map_id"],
                                    {slot: dev for dev, slot in found["slots"].items()})
        self.deepest: dict[str, int] = {}  # link -> bytes
        self._first: dict[tuple[str, str], dict] = {}
        self._last: dict[tuple[str, str], dict] = {}
        self.samples = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> QueueWatch:
        if self._maps:
            self._read()
            self._thread = threading.Thread(target=self._run, name="twin-queue-watch",
                                            daemon=True)
            self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(2.0)
            self._read()

    def _run(self) -> None:
        while not self._stop.wait(self.sample_s):
            self._read()

    def _read(self) -> None:
        now = time.monotonic_ns()
        for node, (map_id, devs) in list(self._maps.items()):
            try:
                fd = bpf.map_fd_by_id(map_id)
            except OSError:  # gone (the node restarted) or not on this kernel
                self._maps.pop(node, None)
                continue
            try:
                by_slot = read_ports(fd, sorted(devs), now)
            except OSError:
                continue
            finally:
                os.close(fd)
            for slot, values in by_slot.items():
                end = (node, devs[slot])
                link = self._links.get(end)
                if link is None:
                    continue
                self.deepest[link] = max(self.deepest.get(link, 0), values["queue_bytes_now"],
                                         _since_first(self._first, end, values))
                self._first.setdefault(end, values)
                self._last[end] = values
        self.samples += 1

    def port_counts(self) -> dict[tuple[str, str], dict[str, int]]:
        """Each switch port's packets, CE marks, trims and drops over the watch, by
        (node, ifname)."""
        return {end: {k: max(0, last[k] - self._first[end][k]) for k in COUNTED}
                for end, last in self._last.items()}

    def counts(self) -> dict[str, dict[str, int]]:
        """Each link's packets, CE marks, trims and drops over the watch (both ends)."""
        out: dict[str, dict[str, int]] = {}
        for end, counted in self.port_counts().items():
            got = out.setdefault(self._links[end], dict.fromkeys(COUNTED, 0))
            for k in COUNTED:
                got[k] += counted[k]
        return out


def _since_first(first: dict, end, values: dict) -> int:
    """The port's high water, if it rose since the watch began (a burst between two
    samples); 0 if it did not, since the high water may be from before the drill."""
    before = first.get(end)
    if before is None or values["high_water_bytes"] <= before["high_water_bytes"]:
        return 0
    return values["high_water_bytes"]


def verdicts(faulty: list[dict], congested: list[dict], deepest: dict[str, int],
             counts: dict[str, dict[str, int]]) -> list[dict]:
    """One row per link (or switch) the prober named, or whose queue held anything:
    its verdict (faulty over congested over none; the first naming's time) beside its
    deepest queue and its signals over the run; the deepest queues first."""
    rows: dict[str, dict] = {}

    def row(target: str) -> dict:
        return rows.setdefault(target, {"link": target, "verdict": "none", "named_ns": None,
                                        "max_queue_bytes": deepest.get(target, 0),
                                        **counts.get(target, dict.fromkeys(COUNTED, 0))})
    for verdict, locs in (("congested", congested), ("faulty", faulty)):
        for loc in locs:
            r = row(loc["target"])
            if r["verdict"] != "faulty":
                r["verdict"] = verdict
                r["named_ns"] = loc.get("named_ns")
    for link, depth in deepest.items():
        if depth or any(counts.get(link, {}).get(k) for k in ("ce_marked", "trimmed",
                                                               "dropped")):
            row(link)
    return sorted(rows.values(), key=lambda r: (-r["max_queue_bytes"], r["link"]))


def false_alarm(faulty: list[dict], faults_on_timeline: int,
                baseline_of: str | None = None) -> Judged | None:
    """The expectation row a drill with no fault on its timeline gets (a congestion
    drill): the prober named nothing faulty. None for a drill with faults, and for a
    baseline run, which its drill's `baseline_expect` alone judges (its count is in
    report.json's `prober` beside it)."""
    if faults_on_timeline or baseline_of:
        return None
    named = sorted({loc["target"] for loc in faulty})
    return Judged("prober: nothing named faulty", "0 (no fault on the timeline)",
                  str(len(named)) if not named else
                  f"{len(named)}: {', '.join(named[:6])}{' ...' if len(named) > 6 else ''}",
                  not named)
