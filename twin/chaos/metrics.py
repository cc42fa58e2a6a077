"""Per-fault figures of a drill, from the endpoints' event logs (pure).

The inputs are stamped with the endpoints' CLOCK_MONOTONIC ns, which every
namespace and container of a machine shares (on an attached fabric, the nodes'
machine's: twin.runtime.clock puts every input on it first): the faults the timeline
applied (each with the uncertainty of its start), each QP's
events (`events` op: loss, retire, retransmit, repaired, port, ...), each QP's
acked bytes in 1 ms bins per plane, and the prober's localizations.

    detection   origin to the first EV retired on a dead path (a path that crosses
                the fault); where the mode never retires EVs (single-path), the
                first loss on one; a port-state change counts too
    repair      origin until every packet lost on a dead path after it has been
                acknowledged through another path (0: nothing was lost)
    origin      when traffic could first meet the fault: the fault, or the main
                flows' first write when that came later (a fault applied before the
                traffic: the QPs' setup, ~200 ms, is not the transport's to repair)
    lost        packets declared lost from the fault to the next one
    dip         over the 5 ms moving average of goodput: its depth below the
                goodput before the first fault, its length (from its first ms
                below 90% of before until back at 90%, or to the end), and the
                time from the fault until it is back at 90%

A fault "crosses" a path when the path uses one of its links or one of its
switches.

A fault *met the traffic* (`exposure`) when some main flow crossed it (a path its
packets took, as its endpoint recorded them, crosses it: a single-path QP hashed
onto another T1 never met a T0-T1 cut; where the endpoint recorded no paths, any
path between its hosts, on every plane and T1) and the flows were still
moving data for MIN_EXPOSURE_NS of its time in force (or for all of it, if it was
in force less long). A fault that met no traffic tested nothing: the runner fails
the drill rather than pass it on figures of 0 (a transfer that ended 2 ms after a
link cut reports repair 0 and nothing lost).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from twin.chaos.results import FaultFigures
from twin.fabric.model import Fabric
from twin.fabric.paths import ev_encode, ev_fields, path_for_ev
from twin.faults.timeline import AppliedFault  # the timeline's record (twin.faults.timeline)

BIN_NS = 1_000_000
CARRIED = ("loss", "first_loss", "retransmit", "repaired", "trim")  # events naming the EV
# that carried a packet
MIN_EXPOSURE_NS = 20_000_000  # traffic under a fault for less than this tested nothing
SMOOTH_BINS = 5  # the moving average the dip and the recovery are read from
RECOVERED = 0.9


@dataclass
class FlowLog:
    """One QP's record: who it ran between, its events and its acked bins."""

    src: str
    dst: str
    size: int
    events: list[dict] = field(default_factory=list)  # each with t_ns, kind, ev, psn
    bins_t0_ns: int = 0
    bins: dict[int, list[int]] = field(default_factory=dict)  # plane -> bytes per bin
    completion_s: float | None = None
    exact: bool = False
    bystander: bool = False
    # the paths (plane, t1) its packets went on, from the endpoint (SendQpStats.paths_used);
    # None: not recorded, then every path between its hosts is one it could have taken
    paths: frozenset[tuple[int, int]] | None = None
    failed: str | None = None  # why the QP failed (the endpoint's words), else None
    failed_ns: int | None = None  # when: the loss that took it past its limit

    def paths_taken(self) -> frozenset[tuple[int, int]] | None:
        """`paths`, and the path of every EV its event log names as carrying a packet
        (a loss, a resend, an ack of one, a trim): an EV the retired pool forgot too."""
        if self.paths is None:
            return None
        named = {ev_fields(e["ev"])[:2] for e in self.events
                 if e.get("kind") in CARRIED and e.get("ev") is not None}
        return self.paths | named


# -- per fault ---------------------------------------------------------------------


def first_write_ns(flows: list[FlowLog], fallback: int | None = None) -> int | None:
    """When the main flows' first write was posted (their acked bins start there, on the
    endpoints' clock), else `fallback` (the runner's t0: an endpoint without bins)."""
    starts = [f.bins_t0_ns for f in flows if not f.bystander and f.bins_t0_ns]
    return min(starts) if starts else fallback


def origin(fault: AppliedFault, first_write: int | None) -> tuple[int, str]:
    """What a fault's detection and repair count from, and its name: when traffic could
    first meet it. A fault applied before the first write (a step at 0: the job starts
    on a broken fabric) counts from the first write, not from the QP setup before it."""
    if first_write is not None and first_write > fault.at_ns:
        return first_write, "first write"
    return fault.at_ns, "fault"


def fault_figures(fabric: Fabric, flows: list[FlowLog], faults: list[AppliedFault],
                  localizations: list[dict], t0_ns: int | None = None,
                  carried: dict[str, int] | None = None) -> list[FaultFigures]:
    """Each fault's figures. Detection and repair count from `origin` (the fault, or
    the main flows' first write if that came later; `t0_ns`: the first write where the
    flows carry no bins); localization from the fault (the prober needs no traffic)."""
    out = []
    ordered = sorted(faults, key=lambda f: f.at_ns)
    start = first_write_ns(flows, t0_ns)
    for i, f in enumerate(ordered):
        until = ordered[i + 1].at_ns if i + 1 < len(ordered) else None
        since, since_what = origin(f, start)
        detection = repair_end = None
        lost = 0
        outstanding: dict[tuple[int, int], int] = {}
        repaired: dict[tuple[int, int], int] = {}
        for n, flow in enumerate(flows):
            dead = _dead_evs(fabric, flow, f)
            for e in flow.events:
                t = e["t_ns"]
                if t < f.at_ns or (until is not None and t >= until):
                    continue
                what = e["kind"]
                on_dead = dead(e.get("ev", 0))
                if what == "loss":
                    lost += 1
                    if on_dead:
                        outstanding.setdefault((n, e["psn"]), t)
                elif what in ("repaired", "spurious"):
                    # the first delivery counts: a copy stuck in a downed port's queue,
                    # delivered when the port returns, is a late spurious, not the repair
                    if (n, e.get("psn")) in outstanding:
                        repaired.setdefault((n, e["psn"]), t)
                if detection is None and (what == "retire" and on_dead or what == "port"):
                    detection = t
        if detection is None:  # single-path never retires: its first loss on a dead path
            firsts = [t for t in outstanding.values()]
            detection = min(firsts) if firsts else None
        if outstanding:
            if all(k in repaired for k in outstanding):
                repair_end = max(repaired.values())
        loc = _localization(f, localizations, fabric)
        out.append(FaultFigures(
            kind=f.kind, target=f.target, at_ns=f.at_ns,
            applied_us=None if f.applied_ns is None else (f.applied_ns - f.at_ns) // 1000,
            at_uncertainty_us=None if f.uncertainty_ns is None else f.uncertainty_ns // 1000,
            reverted_ns=f.reverted_ns,
            origin=since_what, origin_ns=since,
            detection_us=None if detection is None else max(0, detection - since) // 1000,
            repair_us=(0 if not outstanding else
                       None if repair_end is None else max(0, repair_end - since) // 1000),
            packets_lost=lost,
            dead_path_losses=len(outstanding),
            localized=loc is not None,
            localized_as=loc["target"] if loc else None,
            localized_us=None if loc is None else max(0, loc["named_ns"] - f.at_ns) // 1000,
            **exposure(fabric, flows, f, carried=carried),
        ))
    return out


CARRIED_MIN = 16 << 10  # bytes a link carried in a run for traffic to have crossed it (ACKs too)


def exposure(fabric: Fabric, flows: list[FlowLog], fault: AppliedFault,
             min_ns: int = MIN_EXPOSURE_NS, carried: dict[str, int] | None = None) -> dict:
    """Whether `fault` met the main flows: `crossed` (some flow's paths cross it; None
    when the fault names no link or switch, so nothing can be said), `under_traffic_ms`
    (how long flows were still moving data while it was in force), and `met`.
    `carried` (link id -> bytes its kernel counters moved during the run) decides
    `crossed` instead of the paths where a sender cannot know them: on a BGP/ECMP lab
    an EV names a plane, and the routers' hash picks the T1."""
    main = [f for f in flows if not f.bystander]
    if carried is not None and (fault.links or fault.nodes):
        links = set(fault.links) | {lk.id for n in fault.nodes for lk in fabric.links_of(n)}
        crossed = any(carried.get(lk, 0) >= CARRIED_MIN for lk in links)
    elif fault.links or fault.nodes:
        crossed = any(_crossed(fabric, f, fault) for f in main)
    else:
        crossed = None
    ends = [(f.bins_t0_ns, f.bins_t0_ns + int(f.completion_s * 1e9)) for f in main
            if f.bins_t0_ns and f.completion_s]
    # in force until reverted, or for the rest of the run (then it needs min_ns of traffic)
    until = fault.reverted_ns if fault.reverted_ns is not None else None
    under = max((min(e, until or e) - max(s, fault.at_ns) for s, e in ends), default=0)
    under = max(0, under)
    in_force = min_ns if until is None else max(0, until - fault.at_ns)
    long_enough = under > 0 and under >= min(min_ns, in_force)
    recorded = all(f.paths is not None for f in main)
    source = "link counters" if carried is not None else \
        "paths taken" if recorded else "paths possible"
    return {"crossed": crossed, "crossed_from": source,
            "under_traffic_ms": round(under / 1e6, 3),
            "met": bool(long_enough and crossed is not False)}


def _crossed(fabric: Fabric, flow: FlowLog, fault: AppliedFault) -> bool:
    """A path the flow's packets took crosses the fault (FlowLog.paths_taken); where the
    endpoint did not record them, some path between its hosts, on any plane and T1."""
    src, dst = fabric.node(flow.src), fabric.node(flow.dst)
    taken = flow.paths_taken()
    paths = taken if taken is not None else \
        {(plane, t1) for plane in fabric.nic_planes for t1 in range(fabric.spec.t1_per_plane)}
    for plane, t1 in sorted(paths):
        try:
            p = path_for_ev(fabric, src, dst, ev_encode(plane, t1))
        except ValueError:
            continue
        if fault.crosses(p.links, p.hops):
            return True
    return False


def _dead_evs(fabric: Fabric, flow: FlowLog, fault: AppliedFault):
    """EV -> does its path cross the fault (memoised per path)."""
    src, dst = fabric.node(flow.src), fabric.node(flow.dst)
    memo: dict[tuple[int, int], bool] = {}

    def dead(ev: int) -> bool:
        key = (ev & 0xF, (ev >> 4) & 0xFF)
        if key not in memo:
            try:
                p = path_for_ev(fabric, src, dst, ev)
            except ValueError:
                memo[key] = False
            else:
                memo[key] = fault.crosses(p.links, p.hops)
        return memo[key]
    return dead


def _localization(f: AppliedFault, localizations: list[dict], fabric: Fabric) -> dict | None:
    """The first naming, after the fault, of what the fault is."""
    names = set(f.nodes) if f.nodes else set()
    if not f.nodes:  # a link fault: the link, or either of its ends
        for lk in fabric.links:
            if lk.id in f.links:
                names |= {lk.id, str(lk.a), str(lk.b)}
    if f.named_by_links:  # the misrouted probes fail on one of its links: named as one of
        names |= set(f.links)  # them, by the link or an end
        names |= {str(e) for lk in fabric.links if lk.id in f.links for e in (lk.a, lk.b)}

    def matches(loc: dict) -> bool:
        return loc.get("target") in names or bool(names.intersection(loc.get("ends", ())))

    hits = [loc for loc in localizations if matches(loc) and loc.get("named_ns", 0) >= f.at_ns]
    if hits:
        return min(hits, key=lambda loc: loc["named_ns"])
    # Still named from an earlier fault on the same thing (a flap's next down): named
    # at once.
    held = [loc for loc in localizations if matches(loc) and loc.get("named_ns", 0) < f.at_ns
            and (loc.get("cleared_ns") is None or loc["cleared_ns"] >= f.at_ns)]
    return {**held[0], "named_ns": f.at_ns} if held else None


# -- goodput -----------------------------------------------------------------------


@dataclass
class Goodput:
    """Acked bytes of every (non-bystander) flow per 1 ms bin, summed, from t0_ns."""

    t0_ns: int
    planes: dict[int, list[int]]

    @property
    def total(self) -> list[int]:
        n = max((len(v) for v in self.planes.values()), default=0)
        out = [0] * n
        for series in self.planes.values():
            for i, b in enumerate(series):
                out[i] += b
        return out

    def bin_of(self, t_ns: int) -> int:
        return max(0, (t_ns - self.t0_ns) // BIN_NS)


def merge_bins(flows: list[FlowLog], bystanders: bool = False) -> Goodput:
    chosen = [f for f in flows if f.bystander == bystanders and f.bins]
    if not chosen:
        return Goodput(min((f.bins_t0_ns for f in flows if f.bins_t0_ns), default=0), {})
    t0 = min(f.bins_t0_ns for f in chosen)
    planes: dict[int, list[int]] = {}
    for f in chosen:
        shift = (f.bins_t0_ns - t0) // BIN_NS
        for plane, series in f.bins.items():
            dest = planes.setdefault(int(plane), [])
            need = shift + len(series)
            if len(dest) < need:
                dest.extend([0] * (need - len(dest)))
            for i, b in enumerate(series):
                dest[shift + i] += b
    width = max(len(v) for v in planes.values())
    for v in planes.values():
        v.extend([0] * (width - len(v)))
    return Goodput(t0, planes)


def smoothed(series: list[int], k: int = SMOOTH_BINS) -> list[float]:
    out, acc = [], 0
    for i, v in enumerate(series):
        acc += v
        if i >= k:
            acc -= series[i - k]
        out.append(acc / min(i + 1, k))
    return out


def _mean(values: list[int]) -> float | None:
    return sum(values) / len(values) if values else None


def goodput_figures(g: Goodput, faults: list[AppliedFault]) -> dict:
    """dip_depth, dip_ms, back_to_90_ms, goodput_retained and settled_retained, from the
    first fault on; all None when there is no fault or no goodput before it."""
    total = g.total
    none = {"pre_bps": None, "dip_depth": None, "dip_ms": None, "back_to_90_ms": None,
            "goodput_retained": None, "settled_retained": None}
    if not faults or not total:
        return none
    first = min(f.at_ns for f in faults)
    fb = g.bin_of(first)
    end = _last_busy_bin(total) + 1
    warm = fb // 2  # the ramp (the window opening): the first half before the fault is left out
    pre = _mean(total[warm:fb])
    if not pre or fb >= end:
        return none
    after = total[fb:end]
    reverted = [f.reverted_ns for f in faults if f.reverted_ns]
    faulted_end = min(end, g.bin_of(max(reverted))) if reverted and \
        len(reverted) == len(faults) else end
    faulted = total[fb:max(fb + 1, faulted_end)]
    settled = faulted[len(faulted) // 2:]
    s = smoothed(total)[fb:end]
    low = min(s)
    first_below = next((i for i, v in enumerate(s) if v < RECOVERED * pre), None)
    back, dip = None, 0.0
    if first_below is None:
        back = 0.0
    else:  # the dip: from its first bin below 90% until back (else to the end)
        back = next((float(i) for i in range(first_below, len(s))
                     if s[i] >= RECOVERED * pre), None)
        dip = (back if back is not None else float(len(s))) - first_below
    return {
        "pre_bps": pre * 8 * 1000,
        "dip_depth": round(max(0.0, 1 - low / pre), 4),
        "dip_ms": dip,
        "back_to_90_ms": back,
        "goodput_retained": round(_mean(after) / pre, 4),
        "settled_retained": round(_mean(settled) / pre, 4) if settled else None,
    }


def _last_busy_bin(total: list[int]) -> int:
    for i in range(len(total) - 1, -1, -1):
        if total[i]:
            return i
    return 0


def ev_state_series(flows: list[FlowLog], g: Goodput, evs_per_qp: int) -> dict:
    """EVs in the slots by state over time, in 1 ms bins (summed over QPs): a retirement
    moves one from good to assumed_bad, a revival or an undone retirement back."""
    n = len(g.total)
    delta = [0] * (n + 1)
    for f in flows:
        for e in f.events:
            step = {"retire": 1, "revive": -1, "spurious": -1}.get(e["kind"])
            if step:
                delta[min(n, g.bin_of(e["t_ns"]))] += step
    bad, acc = [], 0
    for i in range(n):
        acc = max(0, acc + delta[i])
        bad.append(acc)
    size = evs_per_qp * len([f for f in flows if not f.bystander])
    return {"bin_ns": BIN_NS, "series": {"good": [max(0, size - b) for b in bad],
                                         "assumed_bad": bad}}


# -- what the faults take away -------------------------------------------------------


def capacity(fabric: Fabric, src: str, dst: str, faults: list[AppliedFault]) -> float:
    """The src -> dst capacity over every plane (bit/s; a link without a rate counts
    as 1), with the faults' links and switches at 0."""
    s, d = fabric.node(src), fabric.node(dst)
    dead_links = set().union(*(f.links for f in faults)) if faults else set()
    dead_nodes = set().union(*(f.nodes for f in faults)) if faults else set()

    def rate(link_id: str) -> float:
        if link_id in dead_links:
            return 0.0
        lk = by_id[link_id]
        if lk.a.node in dead_nodes or lk.b.node in dead_nodes:
            return 0.0
        return float(lk.rate_bps or 1)

    by_id = {lk.id: lk for lk in fabric.links}
    total = 0.0
    for plane in fabric.nic_planes:
        if s.rack == d.rack:
            p = path_for_ev(fabric, s, d, plane)
            total += min(rate(x) for x in p.links)
            continue
        via = 0.0
        for t in range(fabric.spec.t1_per_plane):
            p = path_for_ev(fabric, s, d, plane | (t << 4))
            if fabric.t1_name(plane, t) in dead_nodes:
                continue
            via += min(rate(p.links[1]), rate(p.links[2]))
        p0 = path_for_ev(fabric, s, d, plane)
        total += min(rate(p0.links[0]), rate(p0.links[-1]), via)
    return total


def fair_shares(fabric: Fabric, pairs: list[tuple[str, str]]) -> list[float] | None:
    """Each flow's fair share (bit/s), from the fabric: its capacity over every plane
    divided among the flows that share its source or its destination (the host links,
    where a permutation or an incast meets; the Clos has full bisection, so sprayed flows
    meet nowhere else). None on a fabric without rates: there the CPU sets the share."""
    if not pairs or not all(lk.rate_bps for lk in fabric.links):
        return None
    out_of = {s: sum(1 for a, _ in pairs if a == s) for s, _ in pairs}
    into = {d: sum(1 for _, b in pairs if b == d) for _, d in pairs}
    return [capacity(fabric, s, d, []) / max(out_of[s], into[d]) for s, d in pairs]


COMMON_MIN_NS = 100 * BIN_NS  # flows side by side this long are judged on that stretch


def _per_ms(flow: FlowLog) -> list[int]:
    planes = list(flow.bins.values())
    width = max((len(v) for v in planes), default=0)
    return [sum(v[i] for v in planes if i < len(v)) for i in range(width)]


def common_rates(flows: list[FlowLog]) -> list[float] | None:
    """Each flow's goodput (bit/s) over the stretch when every one of them was moving
    data (the latest first byte to the earliest last one): flows posted one after
    another start apart, and the last ones run alone at the end, so size over
    completion would favour them. None when they overlap less than COMMON_MIN_NS."""
    spans = []
    for f in flows:
        per_ms = _per_ms(f)
        busy = [i for i, b in enumerate(per_ms) if b]
        if not busy:
            return None
        spans.append((f.bins_t0_ns, per_ms, f.bins_t0_ns + busy[0] * BIN_NS,
                      f.bins_t0_ns + (busy[-1] + 1) * BIN_NS))
    start, end = max(s[2] for s in spans), min(s[3] for s in spans)
    if end - start < COMMON_MIN_NS:
        return None
    out = []
    for t0, per_ms, _, _ in spans:
        lo, hi = (start - t0) // BIN_NS, (end - t0) // BIN_NS
        out.append(sum(per_ms[lo:hi]) * 8 / ((hi - lo) * BIN_NS / 1e9))
    return out


def flow_figures(fabric: Fabric, flows: list[FlowLog]) -> dict:
    """Per main flow: its goodput over the stretch all of them ran side by side
    (`common_rates`; else its size over its completion); `flow_spread`, 1 - the least
    over the most; `least_fair_share`, the least of goodput over fair share."""
    main = [f for f in flows if not f.bystander]
    rates = common_rates(main) if len(main) > 1 else None
    if rates is None:
        rates = [f.size * 8 / f.completion_s if f.completion_s else 0.0 for f in main]
    shares = fair_shares(fabric, [(f.src, f.dst) for f in main])
    spread = round(1 - min(rates) / max(rates), 4) if len(rates) > 1 and max(rates) else None
    least = round(min(r / s for r, s in zip(rates, shares, strict=True)), 4) \
        if shares and rates else None
    return {"flow_mbps": [round(r / 1e6, 3) for r in rates],
            "fair_share_mbps": [round(s / 1e6, 3) for s in shares] if shares else None,
            "flow_spread": spread, "least_fair_share": least}


def flow_series(flows: list[FlowLog], bin_ms: int = 10) -> dict:
    """Each main flow's acked bytes per `bin_ms`, on one clock (the earliest first write):
    the report's per-flow goodput over time."""
    main = [f for f in flows if not f.bystander and f.bins]
    if not main:
        return {"bin_ns": bin_ms * BIN_NS, "t0_ns": 0, "series": []}
    t0 = min(f.bins_t0_ns for f in main)
    series = []
    for f in main:
        shift = (f.bins_t0_ns - t0) // BIN_NS
        per_ms = [0] * shift + _per_ms(f)
        series.append({"src": f.src, "dst": f.dst,
                       "bytes": [sum(per_ms[i:i + bin_ms]) for i in range(0, len(per_ms),
                                                                            bin_ms)]})
    return {"bin_ns": bin_ms * BIN_NS, "t0_ns": t0, "series": series}


def signal_series(events: list[dict], t0_ns: int, bins: int = 0, bin_ms: int = 10) -> dict:
    """Trims the senders resent, per `bin_ms` from t0_ns (their `trim` events: one per
    NACK(TRIMMED) acted on), at least `bins` of them (the run's span, so the plot's time
    axis is the other plots'), for the report's signals plot. CE marks are counted, not
    logged (a QP echoes hundreds a second): their totals are in the run's metrics."""
    bin_ns = bin_ms * BIN_NS
    trims: list[int] = [0] * bins
    for e in events:
        if e.get("kind") != "trim" or not t0_ns:
            continue
        i = max(0, (e["t_ns"] - t0_ns) // bin_ns)
        if i >= len(trims):
            trims.extend([0] * (i + 1 - len(trims)))
        trims[i] += 1
    return {"bin_ns": bin_ns, "t0_ns": t0_ns, "trims": trims}


def lost_share(fabric: Fabric, pairs: list[tuple[str, str, int]],
               faults: list[AppliedFault]) -> float:
    """Size-weighted share of the pairs' capacity the faults take, all of them at once."""
    weight = sum(size for _, _, size in pairs) or 1
    share = 0.0
    for src, dst, size in pairs:
        full = capacity(fabric, src, dst, [])
        share += size * (1 - capacity(fabric, src, dst, faults) / full if full else 0)
    return round(share / weight, 6)


# -- per step: the stretches between timeline changes ----------------------------------

MERGE_NS = 10 * BIN_NS  # changes this close together (two ports of one flap) are one step
LEVEL_BINS = 10  # a step's level is read from its 10 ms means


def _level(bins: list[int]) -> float | None:
    """The level a stretch of 1 ms bins settled at: the mean of the middle half of its
    LEVEL_BINS means (the lowest and the highest quarter left out). A stall of a quarter
    of it (a busy machine's CPU taken for a while: every plane at half rate at once, no
    fault, no event) does not move it, and a lasting change does. Not the median: a
    10 ms mean is a whole number of packets (13 jumbo frames at 100 Mbit/s), and a
    median of them is as coarse; the middle half's mean is not."""
    chunks = sorted(sum(bins[i:i + LEVEL_BINS]) / LEVEL_BINS
                    for i in range(0, len(bins) - LEVEL_BINS + 1, LEVEL_BINS))
    if not chunks:
        return _mean(bins)
    quarter = len(chunks) // 4
    return _mean(chunks[quarter:len(chunks) - quarter])


# A step shorter than this is not judged: its settled half would be a few dozen packets
# (mrc-4p-shaped's 100 Mbit/s NIC acks 1.4 jumbo frames a ms), or all transient.
MIN_STEP_NS = 100 * BIN_NS


@dataclass(frozen=True)
class StepFigure:
    """One step of a timeline: from one change (a fault applied or reverted) to the next,
    or to the end of the traffic; what is in force during it and the share of capacity
    that takes; and its settled goodput (the last half of it) over the goodput before."""

    from_ns: int
    to_ns: int
    in_force: tuple[str, ...]  # the targets
    lost_share: float
    retained: float | None  # None: no goodput before the first fault to read it against

    def to_dict(self, t0_ns: int) -> dict:
        return {"from_ms": round((self.from_ns - t0_ns) / 1e6, 3),
                "to_ms": round((self.to_ns - t0_ns) / 1e6, 3),
                "in_force": list(self.in_force), "lost_share": self.lost_share,
                "retained": self.retained}


def step_figures(fabric: Fabric, pairs: list[tuple[str, str, int]], g: Goodput,
                 faults: list[AppliedFault]) -> list[StepFigure]:
    """The steps from the first fault to the end of the traffic. A step starts at a change
    (a fault applied, or its revert begun: a revert that re-programs nodes brings the
    link up first; changes within MERGE_NS of the first of them are one), ends at the
    next, and is
    judged against what is in force at its end (`lost_share` of `pairs`, as the run's
    lost_share but for these faults only); steps shorter than MIN_STEP_NS are left out.
    Retained is read over the last half of the step, as settled_retained is over the
    faulted time (a step's first half is its transient: the failover, or a window
    opening), as the level it settled at (`_level`), over the level before the first
    fault, read the same way over the time goodput_figures reads "before" from."""
    total = g.total
    if not faults or not total:
        return []
    first = g.bin_of(min(f.at_ns for f in faults))
    before = _level(total[first // 2:first])
    end_ns = g.t0_ns + (_last_busy_bin(total) + 1) * BIN_NS
    changes = sorted({f.at_ns for f in faults} |
                     {f.mended_ns for f in faults if f.mended_ns is not None})
    starts: list[int] = []
    for t in changes:
        if t >= end_ns:
            break
        if not starts or t - starts[-1] >= MERGE_NS:
            starts.append(t)
    out = []
    for i, start in enumerate(starts):
        stop = starts[i + 1] if i + 1 < len(starts) else end_ns
        if stop - start < MIN_STEP_NS:
            continue
        last = stop - 1
        held = [f for f in faults
                if f.at_ns <= last and (f.mended_ns is None or f.mended_ns > last)]
        level = _level(total[g.bin_of(start + (stop - start) // 2):g.bin_of(stop)])
        retained = round(level / before, 4) if level is not None and before else None
        out.append(StepFigure(start, stop, tuple(f.target for f in held),
                              lost_share(fabric, pairs, held) if held else 0.0, retained))
    return out
