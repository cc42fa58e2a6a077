"""Run a drill on a lab: steady state, the timeline under traffic, the verdict, and a
rollback that always runs.

    1. resolve   every target (random ones drawn with the seed) is checked against the
                 lab, and the lab must have no fault in force: nothing is applied yet
    2. steady    verify passes (unless the drill says not to)
    3. method    the continuous prober starts; traffic starts; a timeline thread
                 applies each fault at its offset after the first write (and reverts
                 it after its `for`); link counters are read before and after
    4. rollback  every fault the drill applied is reverted, then verify runs again:
                 also after a failure, Ctrl-C or SIGTERM (KeyboardInterrupt)
    5. verdict   the figures (metrics.py) against the expectations

Faults go through twin.faults, so each is recorded on disk before it is applied
and `twin fault clear` reverts it after a crash, as with a typed fault.

Every time the figures compare is on the endpoints' clock: twin's own on one
machine, the nodes' on an attached fabric, where the faults are stamped in the
nodes and the prober runs as an agent in every host (twin.runtime.clock, injected
here; the metrics stay pure).
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import random
import signal
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from twin import faults as F
from twin import traffic as T
from twin.chaos import metrics as M
from twin.chaos import queues as Q
from twin.chaos.drill import OPS, PER_STEP, Drill, Expectation, Step, Variant
from twin.chaos.results import DrillRun, FaultFigures, Judged, LinkLoad, PortSignals
from twin.errors import LabError, TwinError, UsageError
from twin.fabric.model import Fabric
from twin.faults import timeline as FT
from twin.faults.targets import Scope, draw_random
from twin.lab import Attached
from twin.mrc.modes import Mode
from twin.runtime.clock import LocalClock
from twin.verify import run_verify

# -- 1. resolve --------------------------------------------------------------------


@dataclass(frozen=True)
class Planned:
    """A step with its target named."""

    step: Step
    target: str
    links: frozenset[str]
    nodes: frozenset[str]


def traffic_hosts(drill: Drill, fabric: Fabric) -> list[tuple[str, str]]:
    hosts = [h.name for h in fabric.hosts]
    t = drill.traffic
    for where, h in (("src", t.src), ("dst", t.dst), *(("senders", s) for s in t.senders)):
        if h is not None and h not in hosts:
            raise UsageError(f"{drill.source}: method.traffic.{where}: {h!r} is not a host of "
                             f"lab {fabric.name} ({', '.join(hosts)})")
    if drill.bystander:
        for where, h in (("src", drill.bystander.src), ("dst", drill.bystander.dst)):
            if h not in hosts:
                raise UsageError(f"{drill.source}: method.bystander.{where}: {h!r} is not a "
                                 f"host of lab {fabric.name} ({', '.join(hosts)})")
    return [(f.src, f.dst) for f in _flows(drill, fabric)]


def plan_targets(drill: Drill, att: Attached, seed: int) -> list[Planned]:
    """Name every step's target (a random one drawn with `seed` among what the traffic
    crosses) and check it against the lab. Raises UsageError; applies nothing."""
    fabric = att.fabric
    pairs = traffic_hosts(drill, fabric)
    rng = random.Random(seed)
    out: list[Planned] = []
    for step in drill.timeline:
        kind = step.kind
        refused = kind.unsupported(att)
        if refused:
            raise UsageError(f"{drill.source}: {step.where}: {refused}")
        if step.target is not None:
            target = step.target
        else:  # not on a link a fault in force at the same time holds (it would be refused)
            held = set().union(*(p.links for p in out if _overlap(p.step, step)))
            try:
                target = _draw(step.random, fabric, pairs, rng, _taken(kind, fabric, held))
            except UsageError as e:
                raise UsageError(f"{drill.source}: {step.where}.target: {e}") from None
        try:
            links, nodes = kind.elements(fabric, kind.parse(fabric, target))
        except (UsageError, LabError) as e:
            raise UsageError(f"{drill.source}: {step.where}.target {target!r}: {e} "
                             f"({step.fault} takes {kind.target_form()})") from None
        out.append(Planned(step, target, frozenset(links), frozenset(nodes)))
    return out


def _draw(form: str, fabric: Fabric, pairs: list[tuple[str, str]], rng: random.Random,
          taken=None) -> str:
    """A `random: FORM` target, among what the traffic between `pairs` crosses (and
    `taken` does not refuse)."""
    return draw_random(form, fabric, Scope.of(fabric, pairs), rng, taken)


def _in_force(step: Step) -> tuple[float, float]:
    """When a step's fault holds its links: from its `at` to its end (to the end of the
    run when nothing reverts it); a reboot holds none (it is not held against others)."""
    if not step.kind.lasting:
        return (step.at_ns, step.at_ns)
    length = step.kind.length_ns(step)
    return (step.at_ns, step.at_ns + length if length else float("inf"))


def _overlap(a: Step, b: Step) -> bool:
    (a0, a1), (b0, b1) = _in_force(a), _in_force(b)
    return a0 < b1 and b0 < a1


def _taken(kind, fabric: Fabric, held: set[str]):
    """Whether a fault of `kind` on a target would share a link in `held`; None: none held."""
    if not held:
        return None
    return lambda target: bool(held & kind.elements(fabric, kind.parse(fabric, target))[0])


# -- 3. the timeline -----------------------------------------------------------------


def _scheduled(att: Attached, p: Planned) -> FT.Scheduled:
    """A step on the fault timeline: its kind's changes, applied as the drill file's
    checks gave its values, reverted by clearing the fault it recorded."""
    kind = p.step.kind
    return FT.Scheduled(
        str(p.step.fault), p.target,
        apply=lambda: kind.on_timeline(att, p.target, dict(p.step.params)),
        changes=tuple(kind.actions(p.step)),
        revert=lambda fault: F.clear(att, fault.target),
        lasting=kind.lasting, links=p.links, nodes=p.nodes, step=p.step.where,
        named_by_links=kind.named_by_links, of=p)


class Timeline(FT.Timeline):
    """The drill's steps on the fault timeline (twin.faults.timeline); `log` is told of
    each change with its step (Planned)."""

    def __init__(self, att: Attached, planned: list[Planned], log, clock=None):
        super().__init__([_scheduled(att, p) for p in planned],
                         lambda what, s, t_ns: log(what, s.of, t_ns), clock,
                         name="drill-timeline")

    def revert_all(self) -> list[str]:
        """Revert what is still in force (the timeline is stopped first): the targets of
        the faults reverted, as recorded."""
        return [fault.target for fault in super().revert_all()]


# -- link counters ---------------------------------------------------------------------


def link_bytes(att: Attached) -> dict[str, int]:
    """Bytes each link carried so far, both directions (tx at both ends, kernel counters)."""
    import json

    fabric = att.fabric
    tx: dict[tuple[str, str], int] = {}
    for node in fabric.nodes:
        try:
            r = att.runtime.exec(node.name, ["ip", "-s", "-j", "link", "show"], timeout=10)
            for link in json.loads(r.stdout):
                stats = link.get("stats64") or link.get("stats") or {}
                tx[(node.name, link["ifname"].split("@")[0])] = \
                    int(stats.get("tx", {}).get("bytes", 0))
        except (TwinError, ValueError, KeyError, OSError):
            continue
    return {lk.id: tx.get((lk.a.node, lk.a.ifname), 0) + tx.get((lk.b.node, lk.b.ifname), 0)
            for lk in fabric.links}


# -- 2-5. a run ------------------------------------------------------------------------


@dataclass
class RunResult:
    drill: Drill
    mode: str
    seed: int
    lab: str
    run: DrillRun = field(default_factory=DrillRun)  # what this run found (JSON at the edge)

    @property
    def ok(self) -> bool:
        return self.run.ok


def _verify(att: Attached) -> tuple[bool, str]:
    report = run_verify(att.runtime, att.plan)
    if report.ok:
        return True, "pass"
    s = report.summary()
    failed = [f"{s[k]['failed']} {k}" for k in ("routes", "paths", "loopbacks") if s[k]["failed"]]
    suspects = report.suspect_links()
    return False, "fail: " + ", ".join(failed) + (f"; suspect {', '.join(suspects[:3])}"
                                                 if suspects else "")


@dataclass
class Collected:
    """What a run collected for its verdict, filled in as the run goes (`run`), then
    judged (`_judge`): the faults as applied, the traffic, the checks, the prober, the
    link counters before and after."""

    att: Attached
    drill: Drill
    mode: str
    seed: int
    baseline_of: str | None
    planned: list[Planned]
    timeline: Timeline
    clock: object = field(default_factory=LocalClock)  # the figures' (twin.runtime.clock)
    run_data: T.Run | None = None
    n_main: int = 0  # the main flows; a bystander's come after them
    checks: list[Judged] = field(default_factory=list)  # steady state, rollback
    prober: _Prober | None = None
    events: list[dict] = field(default_factory=list)  # the faults' timeline events
    load_before: dict[str, int] = field(default_factory=dict)
    load_after: dict[str, int] = field(default_factory=dict)
    bystander_solo_gbps: float | None = None
    wall_s: float = 0.0


def run(att: Attached, drill: Drill, *, mode: str | None = None, seed: int = 1,
        baseline_of: str | None = None, progress=None, probe: bool = True,
        variant: Variant | None = None) -> RunResult:
    """One run of `drill` in `mode` (default: the drill's), or as the baseline
    `variant` (its mode, and its QPs per flow). Always rolls back."""
    if variant is not None:
        mode = variant.mode
        if variant.qps is not None:
            drill = dataclasses.replace(drill, traffic=dataclasses.replace(
                drill.traffic, qps=variant.qps))
    mode = mode or drill.traffic.mode
    fabric = att.fabric
    started = time.monotonic()
    note = progress or (lambda text: None)
    planned = plan_targets(drill, att, seed)  # 1: nothing applied before this passes
    unshaped = unshaped_warning(fabric, drill, att.fabric_name)
    if unshaped:
        note(unshaped)
    in_force = F.active(att)
    if in_force:
        shown = ", ".join("hidden" if f.hidden else f.target for f in in_force)
        raise UsageError(f"lab {att.lab} has faults in force ({shown}); a drill starts from "
                         f"a clean fabric: `twin fault clear --lab {att.lab}` first")

    def log(what: str, p: Planned, t_ns: int) -> None:
        c.events.append({"t_ns": t_ns, "source": "fault",  # kind: the fault, or revert
                         "kind": p.step.fault.value if what == "apply" else "revert",
                         "target": p.target, "detail": p.step.fault.value})
        when = f"{(t_ns - timeline.t0_fig_ns) / 1e6:8.1f} ms" if timeline.t0_ns \
            else "before traffic"
        note(f"{when}  {what} {p.step.fault.value} {p.target}")

    clock = att.runtime.clock()  # an attached fabric over several machines is refused here
    timeline = Timeline(att, planned, log, clock)
    c = Collected(att, drill, mode, seed, baseline_of, planned, timeline, clock)
    try:
        for text in clock.open(_touched(att, planned)):
            note(text)
        _method(c, probe, note)
    except _SteadyStateFailed:
        pass
    finally:  # 4: rollback, always (a second Ctrl-C does not cut it short)
        with uninterrupted():
            try:
                _rollback(att, drill, planned, timeline, c.prober, c.checks, note)
            finally:
                clock.close()
    if timeline.error is not None:
        raise LabError(f"the timeline failed: {timeline.error}") from timeline.error
    c.wall_s = time.monotonic() - started
    found = _judge(c, variant=variant.label if variant is not None else mode,
                   warnings=[unshaped] if unshaped else [])
    return RunResult(drill, mode, seed, att.lab, found)


def _method(c: Collected, probe: bool, note) -> None:
    """2 and 3: the steady state, then the traffic with the timeline under it; fills in
    `c` as it goes (a rollback judges what was done when it fails)."""
    att, drill, mode, fabric = c.att, c.drill, c.mode, c.att.fabric
    if drill.verify:  # 2
        note("steady state: verify")
        ok, got = _verify(att)
        c.checks.append(Judged("steady state: verify", "pass", got, ok))
        if not ok:
            raise _SteadyStateFailed
    flows = _flows(drill, fabric)
    c.n_main = len(flows)
    if probe:  # before the bystander's solo run: it and the loaded run share the load
        c.prober = _start_prober(att, note)
    if drill.traffic.for_ns:
        flows, sized = size_for(att, drill, flows, mode, note)
        c.checks.append(sized)
    if drill.bystander:
        note("bystander alone")
        solo = T.run(att.runtime, "bulk", [T.Flow(drill.bystander.src, drill.bystander.dst,
                                                  drill.bystander.size)], mode,
                     evs=drill.traffic.evs, **_signals(drill, mode))
        alone = _flow_logs(solo, 1)[0]
        c.bystander_solo_gbps = alone.size * 8 / alone.completion_s / 1e9 \
            if alone.completion_s else None
        flows.append(T.Flow(drill.bystander.src, drill.bystander.dst, drill.bystander.size))
    c.load_before = link_bytes(att)
    c.timeline.before_start()
    note(f"traffic: {drill.traffic.pattern} {mode}, {len(flows)} flows; "
         f"{len(c.planned)} faults on the timeline")
    c.run_data = T.run(att.runtime, drill.traffic.pattern, flows, mode,
                       evs=drill.traffic.evs, **_signals(drill, mode), sample_s=0.05,
                       on_start=c.timeline.begin,
                       timeout_s=max(120.0, drill.end_ns / 1e9 + 60))
    c.load_after = link_bytes(att)


SIZING_START = 1 << 20  # bytes per flow of the first sizing transfer
SIZING_MIN_S = 0.15  # a sizing transfer this long measures the steady state, not the ramp
SIZING_TRIES = 6


def size_for(att: Attached, drill: Drill, flows: list[T.Flow], mode: str,
             note) -> tuple[list[T.Flow], Judged]:
    """The flows sized so the traffic lasts `for` at the goodput measured now (on this
    machine, this fabric, in this mode, with the prober running): the same flows move
    1 MiB each, then more, until a transfer takes SIZING_MIN_S; every flow then moves
    its own goodput times `for`. Returns the flows and the steady-state row saying so.

    A sizing transfer that fails ends the drill, naming what failed, unless an
    earlier, smaller one went through: that one sizes the traffic then, and the row
    says why (a single-path QP can die at its retry limit on a healthy fabric when
    this machine's load stretches its round trips past the RTO; the judged run
    reports what its own QPs do)."""
    for_s = drill.traffic.for_ns / 1e9
    size = SIZING_START
    measured = None  # the last transfer that went through: (flows, run, size)
    failed = ""
    for attempt in range(SIZING_TRIES):
        note(f"steady state: sizing the traffic ({size / 2**20:g} MiB per flow)")
        probe = [T.Flow(f.src, f.dst, size, group=f.group) for f in flows]
        r = T.run(att.runtime, drill.traffic.pattern, probe, mode, evs=drill.traffic.evs,
                  **_signals(drill, mode))
        if not r.ok:
            why = r.failures()
            said = "; ".join(why[:3]) + (f" (and {len(why) - 3} more)" if len(why) > 3 else "")
            if measured is None:
                raise LabError(f"steady state: the sizing transfer failed ({size} bytes per "
                               f"flow in {mode}), before any fault: {said}")
            failed = f"the {size / 2**20:.3g} MiB transfer failed ({said})"
            note(f"steady state: {failed}; sized from the "
                 f"{measured[2] / 2**20:.3g} MiB one")
            break
        measured = (probe, r, size)
        if r.elapsed_s >= SIZING_MIN_S or attempt == SIZING_TRIES - 1:
            break
        size = int(size * min(16.0, 1.5 * SIZING_MIN_S / max(r.elapsed_s, 1e-3)))
    probe, r, size = measured
    rates = [f.size / max((f.result.elapsed_s if f.result else 0) or r.elapsed_s, 1e-3)
             for f in probe]
    sized = [T.Flow(f.src, f.dst, max(size, -(-int(rate * for_s) // 2**20) * 2**20),
                    group=f.group) for f, rate in zip(flows, rates, strict=True)]
    T.check_fits(sized)
    mbps = sum(rates) * 8 / 1e6 / len(rates)
    got = (f"{mbps:.4g} Mbit/s per flow measured: {sized[0].size / 2**20:g} MiB"
           f"{' per flow' if len(sized) > 1 else ''}")
    if failed:
        got += f" (from the {size / 2**20:.3g} MiB transfer; {failed})"
    note(f"steady state: {got}")
    return sized, Judged("steady state: traffic sized", f"lasts {for_s:g} s", got, True)


def _touched(att: Attached, planned: list[Planned]) -> list[str]:
    """The nodes the drill's faults change, and mend (both ends of every link), after
    one host: the node an attached fabric's clock is read in (twin.runtime.clock)."""
    ends = {n for lk in att.fabric.links if any(lk.id in p.links for p in planned)
            for n in (lk.a.node, lk.b.node)}
    nodes = sorted(ends | {n for p in planned for n in p.nodes})
    host = att.fabric.hosts[0].name
    return [host, *[n for n in nodes if n != host]]


class _SteadyStateFailed(Exception):
    pass


def _rollback(att, drill: Drill, planned, timeline: Timeline, prober, checks, note) -> None:
    reverted = timeline.revert_all()
    if prober is not None:
        prober.close()
    for f in F.active(att):  # a half-applied fault of ours (recorded, not yet held)
        if any(f.target == p.target for p in planned):
            F.clear(att, f.target)
            reverted.append(f.target)
    if reverted:
        note(f"rollback: reverted {', '.join(reverted)}")
    if att.fabric.spec.bgp is not None and timeline.done:  # a reboot reverts nothing,
        checks.append(_reconverged(att, note))             # and its sessions flap too
    if drill.rollback_verify and (not drill.verify or (checks and checks[0].ok)):
        ok, got = _verify(att)
        note(f"rollback: verify {got}")
        checks.append(Judged("rollback: verify", "pass", got, ok))


def _reconverged(att: Attached, note) -> Judged:
    """On a BGP lab the faults' revert is not the end: the sessions and routes come
    back in seconds. Wait until every router holds its plan again (bounded), and say
    how long it took: a figure of the world MRC replaces."""
    from twin.lab import phases
    from twin.progress import Steps

    routers = [n for n in att.plan.nodes.values() if n.bgp is not None]
    start = time.monotonic()
    want = f"<= {phases.CONVERGE_S:g} s"
    try:
        phases.converged(att.runtime, routers, Steps(), phases.CONVERGE_S)
    except LabError as e:
        note(f"rollback: BGP did not reconverge: {e}")
        return Judged("rollback: BGP reconverged", want, str(e).splitlines()[0], False)
    took = time.monotonic() - start
    note(f"rollback: BGP reconverged in {took:.1f} s")
    return Judged("rollback: BGP reconverged", want, f"{took:.1f} s", True)


@contextlib.contextmanager
def uninterrupted():
    """SIGINT ignored while a rollback runs (a drill's, twin ci's teardown); main thread
    only. SIGTERM's handler raises KeyboardInterrupt too, so it is held the same way."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = {s: signal.signal(s, signal.SIG_IGN) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, handler in old.items():
            signal.signal(s, handler)


def _signals(drill: Drill, mode: str) -> dict:
    """The senders' congestion control and signals the drill asks for (None: default).
    The drill's cc is for its own mode: a baseline in another mode runs that mode's
    default (twin.mrc.cc.default_for)."""
    t = drill.traffic
    return {"cc": t.cc if mode == t.mode else None, "ecn": t.ecn, "trim": t.trim}


def _flows(drill: Drill, fabric: Fabric) -> list[T.Flow]:
    hosts = [h.name for h in fabric.hosts]
    t = drill.traffic
    base = T.flows_for(t.pattern, hosts, t.size, t.src, t.dst)
    if t.senders:
        base = [f for f in base if f.src in t.senders]
    return T.split_qps([T.Flow(f.src, f.dst, f.size) for f in base], t.qps)


def _start_prober(att: Attached, note):
    try:  # attached: an agent in every host, stamped on the nodes' clock
        cp = att.runtime.continuous_prober()(att)
        cp.__enter__()
        return _Prober(cp, Q.QueueWatch(att).start())
    except (TwinError, OSError) as e:
        note(f"prober: cannot start ({e}); faults are not localized")
        return None


# what a run's report keeps of the prober's snapshot (twin.verify.continuous): how its
# probes fared, and the timeouts they were judged by at the end
COUNTERS = ("rounds", "probes_sent", "probes_lost", "probes_late", "late_rtt_max_us",
            "probes_held", "probes_ce", "rounds_late", "timeout_ms", "timeout_max_ms")


class _Prober:
    """The prober, and the switch ports' queues watched beside it (twin.chaos.queues)."""

    def __init__(self, cp, watch: Q.QueueWatch):
        self.cp = cp
        self.watch = watch
        self.found: list[dict] = []  # named faulty
        self.congested: list[dict] = []
        self.counters: dict = {}  # the prober's own, at the end (COUNTERS)

    def close(self) -> None:
        try:
            snap = self.cp.snapshot()
            self.counters = {k: snap.get(k) for k in COUNTERS}
            self.found = [loc.to_dict() for loc in self.cp.localizations()]
            congestions = getattr(self.cp, "congestions", None)
            self.congested = [loc.to_dict() for loc in congestions()] if congestions else []
        finally:
            self.watch.stop()
            self.cp.__exit__(None, None, None)


def lost_for_good(events: list[dict]) -> int:
    """Packets one QP lost: its losses, less those a late copy proved wrong (each
    `spurious` event undoes one `loss`). A machine that stalls the receiver past the RTO
    makes the sender declare a whole window lost at once, and every copy then arrives:
    44 such in one startup-dead-link run, where the dead link itself cost 2."""
    lost = sum(e["kind"] == "loss" for e in events)
    return max(0, lost - sum(e["kind"] == "spurious" for e in events))


@dataclass(frozen=True)
class _Figures:
    """What the metrics (twin.chaos.metrics) make of a run's flows and faults."""

    logs: list[M.FlowLog]
    main_logs: list[M.FlowLog]
    localizations: list[dict]
    faults: list[FaultFigures]
    bins: M.Goodput
    gp: dict  # goodput_figures
    figures: dict  # what an expectation names (twin.chaos.drill.FIGURES)
    variables: dict  # what an expectation's bound may use
    steps: list[M.StepFigure]
    per_flow: dict
    flow_goodput: dict
    failures: list[dict]  # failed_qps
    t0_ns: int  # the first write, on the figures' clock


def _judge(c: Collected, *, variant: str, warnings: list[str]) -> DrillRun:
    """5: the figures against the expectations, and the run as the report draws it."""
    f = _figures(c)
    ran = c.run_data is not None
    rows = _rows(c, f)
    reported = c.baseline_of is not None and not c.drill.baseline_expect
    if reported:  # a baseline with nothing to judge: only the lab's health is judged
        rows = [r if r.what.endswith("verify") else dataclasses.replace(r, judged=False)
                for r in rows]
    fabric, drill, figures, gp, g = c.att.fabric, c.drill, f.figures, f.gp, f.bins
    return DrillRun(
        name=drill.name, description=drill.description, lab=c.att.lab, mode=c.mode,
        baseline_of=c.baseline_of, seed=c.seed,
        verdict=verdict_of(rows, ran=ran, reported=reported),
        outcome=outcome(c.mode, ran, figures["exact"], f.failures, f.faults,
                        len(f.main_logs)),
        failed_qps=f.failures,
        expectations=tuple(rows),
        faults=tuple(f.faults),
        prober=_prober_json(c.prober),
        goodput_retained=figures["goodput_retained"], exact=figures["exact"],
        wall_s=round(c.wall_s, 3),
        t0_ns=f.t0_ns,
        clock=c.clock.to_dict(),
        goodput={"bin_ns": M.BIN_NS, "planes": {str(p): v for p, v in g.planes.items()}},
        ev_states=M.ev_state_series(f.main_logs, g, drill.traffic.evs) if f.main_logs
        else {"bin_ns": M.BIN_NS, "series": {}},
        timeline=_timeline_json(c, f.localizations),
        link_load=tuple(_link_load(c)),
        metrics={**{k: figures[k] for k in ("dip_depth", "back_to_90_ms", "completion_s",
                                             "goodput_gbps", "settled_retained",
                                             "packets_lost_per_qp", "bystander_retained",
                                             "flow_spread", "least_fair_share")},
                 "flow_mbps": f.per_flow["flow_mbps"],
                 "fair_share_mbps": f.per_flow["fair_share_mbps"],
                 "dip_ms": gp["dip_ms"], "pre_fault_gbps": None if gp["pre_bps"] is None
                 else round(gp["pre_bps"] / 1e9, 4),
                 "lost_share": f.variables["lost_share"],
                 "steps": [st.to_dict(g.t0_ns) for st in f.steps],
                 "events_dropped": c.run_data.events_dropped if ran else 0},
        targets=[p.target for p in c.planned],
        variables=f.variables,
        flows=_flows_json(c.run_data, c.n_main),
        flow_goodput=f.flow_goodput,
        signals={**M.signal_series([e for x in f.main_logs for e in x.events],
                                   f.flow_goodput["t0_ns"],
                                   max((len(x["bytes"]) for x in f.flow_goodput["series"]),
                                       default=0)),
                 **_signal_totals(c.run_data, c.n_main)},
        variant=variant,
        warnings=warnings,
        qps=drill.traffic.qps,
        shaped=any(lk.rate_bps for lk in fabric.links),  # else the CPU sets goodput
    )


def _figures(c: Collected) -> _Figures:
    fabric, timeline = c.att.fabric, c.timeline
    logs = _flow_logs(c.run_data, c.n_main) if c.run_data else []
    localizations = c.prober.found if c.prober else []
    faults = M.fault_figures(fabric, logs, timeline.applied, localizations,
                             timeline.t0_fig_ns or None, _carried(c))
    g = M.merge_bins(logs)
    gp = M.goodput_figures(g, timeline.applied)
    main_logs = [f for f in logs if not f.bystander]
    exact = bool(logs) and all(f.exact for f in logs)
    completion = max((f.completion_s or 0 for f in main_logs), default=None)
    moved = sum(f.size for f in main_logs)
    pairs = [(f.src, f.dst, f.size) for f in main_logs]
    variables = {
        "planes": float(len(fabric.nic_planes)), "t1_per_plane": float(fabric.spec.t1_per_plane),
        "racks": float(fabric.spec.racks), "hosts": float(len(fabric.hosts)),
        "paths": float(len(fabric.nic_planes) * fabric.spec.t1_per_plane),
        "lost_share": M.lost_share(fabric, pairs, timeline.applied) if pairs else 0.0,
    }
    steps = M.step_figures(fabric, pairs, g, timeline.applied) if pairs else []
    repair_us, localized_us = _worst(faults, "repair_us"), _worst(faults, "localized_us")
    figures = {
        "steps": steps,
        "exact": exact,
        "detection_us": _worst(faults, "detection_us"),
        "repair_us": repair_us,
        "repair_ms": None if repair_us is None else repair_us / 1000,
        "localized_ms": None if localized_us is None else localized_us / 1000,
        "packets_lost": max((f.packets_lost for f in faults), default=0),
        "packets_lost_per_qp": max((lost_for_good(f.events) for f in main_logs),
                                   default=None),
        "goodput_retained": gp["goodput_retained"],
        "settled_retained": gp["settled_retained"],
        "dip_depth": gp["dip_depth"],
        "back_to_90_ms": gp["back_to_90_ms"],
        "goodput_gbps": round(moved * 8 / completion / 1e9, 4) if completion else None,
        "completion_s": round(completion, 4) if completion else None,
        "bystander_retained": None,
        "speedup": None,
    }
    per_flow = M.flow_figures(fabric, logs)
    figures["flow_spread"] = per_flow["flow_spread"]
    figures["least_fair_share"] = per_flow["least_fair_share"]
    by = [f for f in logs if f.bystander]
    if by and c.bystander_solo_gbps and by[0].completion_s:
        loaded = by[0].size * 8 / by[0].completion_s / 1e9
        figures["bystander_retained"] = round(loaded / c.bystander_solo_gbps, 4)
    t0 = g.t0_ns or (c.clock.to_fig(c.run_data.start_us * 1000) if c.run_data else 0)
    return _Figures(logs, main_logs, localizations, faults, g, gp, figures, variables, steps,
                    per_flow, M.flow_series(logs), failed_qps(main_logs, t0), t0)


def _carried(c: Collected) -> dict[str, int] | None:
    """ECMP: the routers' hash chose the T1s, the link counters say which. A link whose
    counters went back was made again (its switch rebooted, the fault itself): what it
    carried before is gone, so it is taken as crossed. None: not a BGP lab."""
    before, after = c.load_before, c.load_after
    if c.att.fabric.spec.bgp is None or not after:
        return None
    return {lk.id: (after.get(lk.id, 0) - before.get(lk.id, 0))
            if after.get(lk.id, 0) >= before.get(lk.id, 0) else M.CARRIED_MIN
            for lk in c.att.fabric.links}


def _rows(c: Collected, f: _Figures) -> list[Judged]:
    """The verdict table: the steady state, what the run itself must have done (the
    timeline ran, the faults met traffic), the drill's expectations, the rollback."""
    drill, ran, timeline = c.drill, c.run_data is not None, c.timeline
    rows = [r for r in c.checks if r.what.startswith("steady")]
    if drill.goodput_floor_bps and ran:
        before = f.gp["pre_bps"] if f.gp["pre_bps"] is not None else \
            (f.figures["goodput_gbps"] or 0) * 1e9
        rows.append(Judged("steady state: goodput",
                           f">= {drill.goodput_floor_bps / 1e6:g} Mbit/s",
                           f"{before / 1e6:.4g} Mbit/s", before >= drill.goodput_floor_bps))
    qps = len(f.main_logs)
    if ran and timeline.done < timeline.total:
        rows.append(Judged("timeline ran", f"{timeline.total} actions",
                           f"{timeline.done} "
                           f"({_ended_early(drill, c.mode, f.failures, qps)})", False))
    if ran and f.faults:
        rows.append(_met_traffic(f.faults, drill, c.mode, f.failures, qps))
    if ran:
        expect = drill.baseline_expect if c.baseline_of else drill.expect
        rows += [_expectation(e, f.figures, f.faults, f.variables) for e in expect]
    rows += [r for r in c.checks if not r.what.startswith("steady")]
    cried_wolf = Q.false_alarm(f.localizations, len(c.planned), c.baseline_of) \
        if c.prober else None
    if cried_wolf is not None and ran:
        rows.append(cried_wolf)
    return rows


def _prober_json(prober: _Prober | None) -> dict | None:
    if prober is None:
        return None
    return {"named_faulty": len({loc["target"] for loc in prober.found}),
            "named_congested": len({loc["target"] for loc in prober.congested}),
            "queue_samples": prober.watch.samples,
            "counters": prober.counters,
            "verdicts": Q.verdicts(prober.found, prober.congested, prober.watch.deepest,
                                   prober.watch.counts())}


def _timeline_json(c: Collected, localizations: list[dict]) -> list[dict]:
    """The faults' events, the endpoints', and the prober's namings, in time order."""
    congested = c.prober.congested if c.prober else []
    return sorted(c.events + _endpoint_timeline(c.run_data) +
                  [{"t_ns": loc.get("named_ns"), "source": "probe", "kind": "named",
                    "target": loc.get("target"), "detail": loc.get("kind", "")}
                   for loc in localizations if loc.get("named_ns")] +
                  [{"t_ns": loc.get("named_ns"), "source": "probe", "kind": "congested",
                    "target": loc.get("target"), "detail": loc.get("kind", "")}
                   for loc in congested if loc.get("named_ns")],
                  key=lambda e: e["t_ns"])


def _link_load(c: Collected) -> list[LinkLoad]:
    """Bytes each link carried over the run (its kernel counters, read before and after),
    and the CE marks and trims its switch ports made, where the queue watch read them
    (twin.chaos.queues: a shaped fabric's ports)."""
    if not c.load_after:
        return []
    ports = c.prober.watch.port_counts() if c.prober else {}
    out = []
    for lk in c.att.fabric.links:
        got = max(0, c.load_after.get(lk.id, 0) - c.load_before.get(lk.id, 0))
        read = tuple(PortSignals(f"{end.node}:{end.ifname}", **{
            k: ports[(end.node, end.ifname)][k] for k in ("ce_marked", "trimmed", "dropped")})
            for end in (lk.a, lk.b) if (end.node, end.ifname) in ports)
        out.append(LinkLoad(
            lk.id, lk.plane, lk.kind, got,
            ce_marked=sum(p.ce_marked for p in read) if read else None,
            trimmed=sum(p.trimmed for p in read) if read else None, ports=read))
    return out


def _signal_totals(run_data: T.Run | None, n_main: int) -> dict:
    """The main flows' congestion signals over the run: CE marks echoed to the senders,
    EVs skipped for them, trims NAKed and resent (docs/congestion.md)."""
    totals = {"ce_echoed": 0, "ev_skips_ecn": 0, "trims_resent": 0}
    for f in (run_data.flows[:n_main] if run_data else []):
        c = f.to_dict().get("congestion") or {}
        totals["ce_echoed"] += c.get("ecn_marks") or 0
        totals["ev_skips_ecn"] += (c.get("ev_skips_by") or {}).get("ecn", 0)
        totals["trims_resent"] += c.get("nacks_trimmed") or 0
    return totals


def verdict_of(rows: list[Judged], *, ran: bool, reported: bool = False) -> str:
    """pass, fail, or reported: a baseline with no `baseline_expect`, whose outcome is
    shown beside the main run's and fails nothing. Rows marked `judged: False` are
    shown, not judged; a run whose traffic never ran fails."""
    if not ran or any(e.failed for e in rows):
        return "fail"
    return "reported" if reported else "pass"


def failed_qps(logs: list[M.FlowLog], t0_ns: int) -> list[dict]:
    """The main QPs that failed: between whom, why (the endpoint's words) and when (ms
    after the first write: the loss that took the QP past its limit), earliest first."""
    out = [{"src": f.src, "dst": f.dst, "why": f.failed,
            "at_ms": None if f.failed_ns is None or not t0_ns
            else round((f.failed_ns - t0_ns) / 1e6, 1)}
           for f in logs if not f.bystander and f.failed]
    return sorted(out, key=lambda q: (q["at_ms"] is None, q["at_ms"] or 0))


def _qp_noun(mode: str) -> str:
    return "RoCE QP" if mode == Mode.SINGLE_PATH else f"{mode} QP"


def _failure_text(mode: str, failures: list[dict], qps: int) -> str:
    """"RoCE QP failed: PSN 12 lost 8 times (retry limit) at 302 ms", or "2 of 8 ...":
    the first to fail."""
    first = failures[0]
    when = f" at {first['at_ms']:g} ms" if first["at_ms"] is not None else ""
    many = f"{len(failures)} of {qps} {_qp_noun(mode)}s failed, the first" if qps > 1 \
        else f"{_qp_noun(mode)} failed"
    return f"{many}: {first['why']}{when}"


def outcome(mode: str, ran: bool, exact: bool, failures: list[dict],
            faults: list[FaultFigures],
            qps: int) -> str:
    """What the run came to, in a line: what a baseline without expectations reports."""
    if not ran:
        return "the traffic did not run"
    said = [_failure_text(mode, failures, qps) if failures else
            "byte-exact" if exact else "not byte-exact"]
    unmet = dict.fromkeys(  # a flap's downs are one target; a plane's is its number
        f"plane {f.target}" if str(f.kind or "").startswith("plane") else f.target
        for f in faults if f.crossed is False)
    if unmet:
        said.append(f"its traffic never crossed {', '.join(unmet)}")
    return "; ".join(said)


def _ended_early(drill: Drill, mode: str, failures: list[dict], qps: int) -> str:
    """Why traffic stopped before a fault was done with it: a QP that failed, or a
    transfer too short (and then what to change)."""
    if failures:
        return f"the traffic stopped: {_failure_text(mode, failures, qps)}"
    if drill.traffic.for_ns:
        return "the transfer ended first: make the traffic's `for` longer"
    return "the transfer ended first: give the traffic `for: 2s`"


def _met_traffic(faults: list[FaultFigures], drill: Drill, mode: str, failures: list[dict],
                 qps: int) -> Judged:
    """The row that fails a drill whose faults tested nothing (metrics.exposure): the
    traffic ended before a fault (or soon after: a transfer too short, or a QP that
    failed), or none of it crossed it."""
    want = f">= {M.MIN_EXPOSURE_NS // 1_000_000} ms under traffic, on its paths"
    missed = [f for f in faults if not f.met]
    if not missed:
        least = min(f.under_traffic_ms for f in faults)
        return Judged("faults met traffic", want,
                      f"{len(faults)}/{len(faults)} (the least {least:g} ms)", True)
    why = []
    for f in missed:
        if f.crossed is False and f.crossed_from == "link counters":
            why.append(f"{f.target}: the routers' hash put none of the traffic on it "
                       "(its link counters)")
        elif f.crossed is False:
            taken = f.crossed_from == "paths taken"
            why.append(f"{f.target}: no path the traffic {'took' if taken else 'could take'}"
                       " crosses it")
        else:
            why.append(f"{f.target}: {f.under_traffic_ms:g} ms under traffic "
                       f"({_ended_early(drill, mode, failures, qps)})")
    return Judged("faults met traffic", want, "; ".join(why), False)


def _flows_json(run_data: T.Run | None, n_main: int) -> list[dict]:
    """Each QP: between whom, how it ended, and single-path's one path (which the
    QP's ECMP hash chose: whether a fault hit it is read from here)."""
    if run_data is None:
        return []
    out = []
    for i, f in enumerate(run_data.flows):
        r = f.result
        out.append({"src": f.src, "dst": f.dst, "size": f.size, "bystander": i >= n_main,
                    "exact": f.exact, "failed": r.failed if r is not None else None,
                    "goodput_gbps": round(r.goodput_gbps, 4) if r is not None else None,
                    "single_path": r.single_path if r is not None else None,
                    "paths_used": [list(x) for x in r.paths_used] if r is not None else None})
    return out


def _worst(faults: list[FaultFigures], key: str):
    values = [getattr(f, key) for f in faults]
    if not values:
        return None
    if any(v is None for v in values):
        return None
    return max(values)


def _expectation(e: Expectation, figures: dict, faults: list[FaultFigures],
                 variables: dict) -> Judged:
    """An expectation of the drill file judged on the run's figures."""
    if e.what == "exact":
        got = figures["exact"]
        return Judged("exact", e.want, str(got).lower(), got == e.value)
    if e.what == "localized":
        named = [f"{f.target}: {f.localized_as or 'not named'}" for f in faults]
        ok = bool(faults) and all(f.localized for f in faults)
        return Judged("localized", "target", "; ".join(named) or "no fault", ok)
    if e.what in PER_STEP:
        return _per_step(e, figures["steps"], variables)
    got = figures.get(e.what)
    want_value = e.evaluate(variables)
    want = f"{e.op} {e.value}" + (f" = {want_value:g}" if str(e.value) != f"{want_value:g}"
                                  else "")
    if got is None:
        return Judged(e.what, want, "not measured", False)
    return Judged(e.what, want, f"{got:g}", bool(OPS[e.op](float(got), want_value)))


def _per_step(e: Expectation, steps: list[M.StepFigure], variables: dict) -> Judged:
    """A figure judged at each step of the timeline, with lost_share the step's own."""
    want = f"{e.op} {e.value} at each step"
    judged = [st for st in steps if st.retained is not None]
    if not judged:
        return Judged(e.what, want, "not measured", False)
    rows, ok = [], True
    for st in judged:
        bound = e.evaluate({**variables, "lost_share": st.lost_share})
        holds = bool(OPS[e.op](st.retained, bound))
        ok = ok and holds
        rows.append(f"{st.retained:g}{'' if holds else ' (fails)'} {e.op} {bound:g}")
    return Judged(e.what, want, "; ".join(rows), ok)


def _flow_logs(run_data: T.Run, n_main: int) -> list[M.FlowLog]:
    logs = []
    for i, f in enumerate(run_data.flows):
        events = [{**e, "t_ns": e.get("t_ns", e["t_us"] * 1000)}
                  for e in run_data.events if e.get("flow") == i]
        bins = run_data.bins.get(i) or {}
        planes = {int(p): v for p, v in bins.get("planes", {}).items()}
        completion = None
        busy = [max((j for j, b in enumerate(v) if b), default=-1) for v in planes.values()]
        if busy and max(busy) >= 0:  # to the millisecond: the last bin with acked bytes
            completion = (max(busy) + 1) * bins.get("bin_ns", M.BIN_NS) / 1e9
        elif f.result is not None:  # no bins (an older endpoint): as sampled
            completion = f.result.elapsed_s
        r = f.result
        losses = [e["t_ns"] for e in events if e["kind"] == "loss"]
        logs.append(M.FlowLog(f.src, f.dst, f.size, events, bins.get("t0_ns", 0), planes,
                              completion, f.exact, bystander=i >= n_main,
                              paths=_paths_used(r), failed=r.failed if r else None,
                              failed_ns=losses[-1] if r and r.failed and losses else None))
    return logs


def _paths_used(r) -> frozenset[tuple[int, int]] | None:
    """The paths the QP's packets went on (SendQpStats.paths_used), or None where the
    endpoint did not say: it sent packets and names no path (an endpoint before it)."""
    if r is None or (not r.paths_used and r.sender.packets):
        return None
    return frozenset((plane, t1) for plane, t1, _ in r.paths_used)


def _endpoint_timeline(run_data: T.Run | None) -> list[dict]:
    """The events a person reads on the timeline: retirements, port changes, revivals
    (per-packet losses and retransmits are counted in the figures instead)."""
    if run_data is None:
        return []
    out = []
    for e in run_data.events:
        if e["kind"] in ("retire", "port", "revive", "first_loss", "spurious"):
            out.append({"t_ns": e.get("t_ns", e["t_us"] * 1000), "source": "endpoint",
                        "kind": e["kind"], "target": f"flow {e.get('flow')}",
                        "detail": f"ev {e.get('ev', 0):#x} {e.get('detail', '')}".strip()})
    return out


BGP = "bgp"  # --compare bgp: the same fabric as operators run it today (twin.fabric.bgp)
BGP_BFD = "bgp-bfd"  # --compare bgp-bfd: the same with BFD on every session
BGP_FLAVOURS = (BGP, BGP_BFD)
BFD = {"interval_ms": 100, "multiplier": 3}  # detected in 300 ms, against BGP's 9 s hold
BGP_ROCE_QPS = 16  # RoCE over ECMP: several QPs, each hashed apart (16 over 8 paths leave
#                   a given path without one 12% of the time; 8 left it 34%)


def variants_of(compare: str) -> tuple[Variant, ...]:
    """The baselines `--compare X` names: a mode on the drill's lab, or with `bgp` the
    world MRC replaces, on a BGP/ECMP lab of the same fabric: RoCE single-path (8 QPs a
    flow, each on one plane and one T1 by the routers' hash) and MRC over ECMP (EVs as
    UDP source ports); `bgp-bfd` the same with BFD on every session."""
    if compare in BGP_FLAVOURS:
        return (Variant(Mode.SINGLE_PATH.value, BGP_ROCE_QPS, routing=compare),
                Variant(Mode.MRC.value, routing=compare))
    return (Variant(compare),)


def run_all(att: Attached, drill: Drill, *, mode: str | None = None,
            compare: str | None = None, seed: int = 1, progress=None) -> list[RunResult]:
    """The drill in its mode, then on each baseline with the same seed, so all see the
    same faults: `compare` (--compare MODE, or bgp), else the drill's own `compare`
    list. A baseline in the main run's mode and QPs on the same lab is not run again.
    Speedup is a baseline's completion time over this run's: with several baselines,
    the least of them. A baseline over bgp runs on lab `<lab>-bgp` (brought up for it,
    and down after, unless it was up) and is reported beside the main run, not judged:
    the drill's expectations are MRC's claims."""
    main = run(att, drill, mode=mode, seed=seed, progress=progress)
    runs = [main]
    variants = variants_of(compare) if compare else drill.compare
    bases = []
    with contextlib.ExitStack() as stack:
        twins = {f: stack.enter_context(BgpTwin(att, f, progress)) for f in BGP_FLAVOURS}
        for v in variants:
            if v.routing is None and v.mode == main.mode and \
                    (v.qps is None or v.qps == drill.traffic.qps):
                continue
            if progress:
                progress(f"baseline: {v.label}")
            if v.routing is None:
                bases.append(run(att, drill, seed=seed, baseline_of=main.mode,
                                 progress=progress, variant=v))
                continue
            bases.append(run(twins[v.routing].lab(),
                             dataclasses.replace(drill, baseline_expect=()),
                             seed=seed, baseline_of=main.mode, progress=progress,
                             variant=v, probe=False))
    runs += bases
    _speedup(main, bases)
    return runs


class BgpTwin:
    """The drill's fabric on BGP/ECMP (`<lab>-bgp`, or `<lab>-bgp-bfd` with BFD), brought
    up on first need on the same runtime from the lab's own spec, and taken down at the
    end if it was not up before (a failure included)."""

    def __init__(self, att: Attached, flavour: str = BGP, progress=None) -> None:
        self.att = att
        self.flavour = flavour
        self.name = f"{att.lab}-{flavour}"
        self.note = progress or (lambda text: None)
        self._att: Attached | None = None
        self._made = False

    def spec(self) -> Path:
        """The lab's spec in routing: bgp (with BFD for bgp-bfd), beside its own copy."""
        import yaml

        data = yaml.safe_load((self.att.state.dir / "spec.yml").read_text())
        data["routing"] = BGP
        if isinstance(data.get("srv6"), dict):
            data["srv6"].pop("dataplane", None)  # no SID to install on BGP
        bgp = dict(data.get("bgp") or {})
        if self.flavour == BGP_BFD:
            bgp["bfd"] = dict(BFD)
        if bgp:
            data["bgp"] = bgp
        path = self.att.state.dir / f"spec-{self.flavour}.yml"
        path.write_text(yaml.safe_dump(data, sort_keys=False))
        return path

    def lab(self) -> Attached:
        if self._att is None:
            from twin import lab as L
            from twin.state import LabState

            if LabState.load(self.name) is None:
                bfd = " with BFD" if self.flavour == BGP_BFD else ""
                self.note(f"bringing up {self.name}: fabric {self.att.fabric.spec.name} on "
                          f"BGP/ECMP (FRR){bfd}, for the baselines")
                L.up(str(self.spec()), self.att.state.runtime, name=self.name)
                self._made = True
            self._att = L.attach(self.name)
            if self._att.fabric.spec.bgp is None:
                raise UsageError(f"lab {self.name} is up but does not run BGP; "
                                 f"`twin down --lab {self.name}` it first")
        return self._att

    def __enter__(self) -> BgpTwin:
        return self

    def __exit__(self, *exc) -> None:
        if self._made:
            from twin import lifecycle

            with uninterrupted():
                lifecycle.down(self.name)
            self.note(f"took {self.name} down")


def results(runs: list[RunResult]) -> list[DrillRun]:
    """What the runs found, as twin.chaos.report draws them (results.document: as
    `twin drill run --json` prints them)."""
    return [r.run for r in runs]


# Expectations that are claims about queues: on an unshaped fabric nothing queues (the
# CPU is the bottleneck), so they measure the machine, not the transport
CONGESTION_CLAIMS = ("bystander_retained", "flow_spread", "least_fair_share", "speedup")


def unshaped_warning(fabric: Fabric, drill: Drill, name: str | None = None) -> str | None:
    """What to say when a drill that claims congestion runs on a fabric without rates, or
    None: an unshaped veth never queues, so no switch marks or trims and the figures are
    the CPU's (docs/ebpf.md, "Fabric signals"). `name`: the fabric's own (a lab brought
    up with --name keeps its spec's), else the fabric's spec's."""
    claims = sorted({e.what for e in drill.expect if e.what in CONGESTION_CLAIMS})
    if not claims or any(lk.rate_bps for lk in fabric.links):
        return None
    return (f"warning: {drill.name} claims congestion ({', '.join(claims)}) but fabric "
            f"{name or fabric.spec.name} is unshaped: its links never queue, no switch marks or "
            "trims, and the CPU sets the figures; run it on a shaped fabric "
            "(mrc-4p-shaped, mrc-8p-shaped)")


def written_for(att: Attached, drill: Drill) -> str | None:
    """What to say when a drill written for one fabric runs on another's lab (its
    figures are then the lab's fabric's), or None. Fabrics are compared by the spec's
    own name: a lab brought up with `--name other` runs its spec's fabric all the same."""
    fabric = att.fabric_name
    if not drill.fabric or fabric == drill.fabric:
        return None
    on = att.lab if att.lab == fabric else f"{att.lab} (fabric {fabric})"
    return f"written for {drill.fabric}, running on {on}: the figures are this fabric's"


def _speedup(main: RunResult, bases: list[RunResult]) -> None:
    """Fill in `speedup` now that the baselines ran (or say none did): each baseline's
    completion time over this run's, and the least of them is the figure. A baseline a
    QP of which failed never completed: its speedup is infinite, and says why."""
    wanted = {e.where: e for e in main.drill.expect if e.what == "speedup"}
    if not wanted:
        return
    e = next(iter(wanted.values()))
    found = main.run
    mine = found.metric("completion_s")
    got, text = speedup_of(mine, [
        (b.run.variant, b.run.metric("completion_s"),
         b.run.outcome if b.run.failed_qps else None) for b in bases])
    ok = got is not None and bool(OPS[e.op](got, e.evaluate(found.variables)))
    rows = tuple(dataclasses.replace(x, got=text, ok=ok) if x.what == "speedup" else x
                 for x in found.expectations)
    main.run = dataclasses.replace(
        found, expectations=rows, verdict=verdict_of(rows, ran=mine is not None),
        metrics={**found.metrics,
                 "speedup": None if got is None or math.isinf(got) else round(got, 4)})


def speedup_of(mine: float | None, bases: list[tuple[str, float | None, str | None]]
               ) -> tuple[float | None, str]:
    """The least of each baseline's completion over `mine`, and the row's text. Each
    baseline is (label, completion_s, why it failed or None): a failed one never
    completed, so it is infinitely slower (inf), and the text says why."""
    if not bases:
        return None, "not measured (needs --compare)"
    if not mine or any(t is None and why is None for _, t, why in bases):
        return None, "not measured"
    each = {label: math.inf if why else t / mine for label, t, why in bases}
    got = min(each.values())

    def shown(label: str, v: float) -> str:
        why = next(w for k, _, w in bases if k == label)
        return f"∞ ({label} did not finish: {why})" if math.isinf(v) else \
            f"{label} {v:.3g}" if len(each) > 1 else f"{v:.3g}"

    if len(each) == 1:
        label, v = next(iter(each.items()))
        return got, shown(label, v)
    head = "∞" if math.isinf(got) else f"{got:.3g}"
    return got, f"{head} (" + ", ".join(shown(k, v) if not math.isinf(v) else
                                         f"{k} did not finish" for k, v in each.items()) + ")"


# -- a suite of drills (twin drill all, make chaos) ---------------------------------------


@dataclass(frozen=True)
class SuiteRow:
    """One line of a suite's summary: a run's verdict and why, or a drill that could not
    run (its error)."""

    name: str
    mode: str
    lab: str
    verdict: str  # pass, fail, reported
    why: str = ""  # fail: what failed (want/got) or the error; reported: the outcome
    baseline: bool = False

    def to_dict(self) -> dict:
        return {"name": self.name, "mode": self.mode, "lab": self.lab,
                "verdict": self.verdict, "why": self.why, "baseline": self.baseline}


def why_of(found: DrillRun) -> str:
    """Why a run has its verdict, in a line: the judged rows that failed ("what: want W,
    got G"), else for a reported baseline its outcome, else ""."""
    failed = found.failed_rows()
    if failed:
        return "; ".join(e.failure() for e in failed)
    if found.verdict == "fail":
        return "the traffic did not run"
    return found.outcome or "" if found.verdict == "reported" else ""


def suite_row(r: RunResult) -> SuiteRow:
    return SuiteRow(r.run.name, r.run.variant or r.mode, r.lab, r.run.verdict,
                    why_of(r.run), baseline=bool(r.run.baseline_of))


def error_row(drill: Drill, lab: str, error: BaseException) -> SuiteRow:
    """A drill that did not run to a verdict: the error names the reason."""
    return SuiteRow(drill.name, drill.traffic.mode, lab, "fail",
                    f"error: {error}" if str(error) else f"error: {type(error).__name__}")


def suite_verdict(rows: list[SuiteRow]) -> tuple[bool, str]:
    """Whether every main run's verdict holds (and no drill failed to run; a baseline
    fails the suite only on its own baseline_expect or the lab's health), and the line
    that says so."""
    failed = [r for r in rows if r.verdict == "fail"]
    drills = sorted({r.name for r in rows})
    reported = sum(r.verdict == "reported" for r in rows)
    if not failed:
        return True, (f"every MRC verdict holds: {len(drills)} drill"
                      f"{'s' * (len(drills) != 1)} pass"
                      + (f", {reported} baseline{'s' * (reported != 1)} reported beside "
                         "them (not judged)" if reported else ""))
    names = sorted({r.name for r in failed})
    return False, (f"{len(names)} of {len(drills)} drill{'s' * (len(drills) != 1)} failed: "
                   + "; ".join(f"{r.name} ({r.mode}): {r.why}" for r in failed))
