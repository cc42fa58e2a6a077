"""Traffic patterns through the hosts' MRC endpoints, measured from outside.

A pattern is a list of flows (src host, dst host, bytes). For each flow twin
registers a receive buffer at the destination, opens a sending QP at the
source (mode mrc, single-path or spray-static), connects the two and posts
one RDMA WRITE with immediate. While the writes run, every sender's acked
bytes are sampled, which gives goodput over time (and so the recovery time
after a fault); at the end every destination buffer's sha256 is compared with
its source's.

Each run also reports what the transports did: every QP's event log (losses,
EV retirements, retransmissions, port changes, revivals, CLOCK_MONOTONIC µs)
next to the faults it applied, and from the two a failover summary per fault
(twin.failover).

    bulk        one flow, src -> dst
    incast      every other host -> one destination (N-to-1)
    all-to-all  every ordered host pair
    ring        host i -> host i+1: one step of a ring all-reduce

QPs per flow (`split_qps`, `twin traffic --qps N`, a drill's `qps:`): each flow is
carried by N QPs, each with its own buffers, its own EV set (so, in single-path, its
own hashed path) and 1/N of the bytes (the first size % N QPs one byte more). Within
a run every QP is a `Flow` of its own, `group` naming the flow it is a part of; the
flow is done when all of its QPs are, exact when all of them are, and its goodput is
their sum (`Run.flow_rows`).

Congestion control (`cc`, twin.mrc.cc): named, or else the mode's default there
(single-path runs DCQCN, the RoCE baseline; the spraying modes the MRC window).
"""

from __future__ import annotations

import collections
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from twin import endpoints, failover
from twin import validate as V
from twin.errors import LabError, UsageError
from twin.faults.timeline import AppliedFault, Timeline
from twin.mrc import cc as CC
from twin.mrc.control import MAX_EVS
from twin.mrc.modes import Mode
from twin.mrc.stats import EndpointStats, SendQpStats

PATTERNS = ("bulk", "incast", "all-to-all", "ring", "permutation")
# The fields of a flow's SendQpStats that its row of `twin traffic --json` carries
FLOW_FIELDS = ("failed", "goodput_gbps", "elapsed_s", "srtt_us", "reorder_window_us", "evs",
               "ev_set_size", "ev_retirements_total", "ev_revivals_total",
               "ev_retirements_undone_total", "probes_sent", "planes_in_use", "single_path",
               "messages_completed", "completions", "events_logged")
MAX_QPS = 64  # QPs per flow: the one bound, of `twin traffic --qps` and a drill's `qps:`
# QPs per flow, and entropy values per QP (the endpoint's MAX_EVS: it keeps a template
# per EV), as `twin traffic --qps/--evs` and drill files check them (twin.validate)
QPS = V.Int(1, MAX_QPS, words=V.SPAN, hint="QPs per flow")
EVS = V.Int(1, MAX_EVS, words=V.SPAN, hint="entropy values per QP")


@dataclass
class Flow:
    src: str
    dst: str
    size: int
    send_qpn: int = 0
    recv_qpn: int = 0
    # the sending QP as last polled; None until then (run() returns once every flow has one)
    result: SendQpStats | None = None
    exact: bool | None = None
    group: int | None = None  # split_qps: the flow (its index) this QP carries a part of

    def to_dict(self) -> dict:
        """A row of `twin traffic --json`: the flow, FLOW_FIELDS of its QP, and two of its
        sender counters (all null if the QP was never polled)."""
        qp = self.result.to_dict() if self.result is not None else {}
        sender = qp.get("sender", {})
        return {"src": self.src, "dst": self.dst, "bytes": self.size, "exact": self.exact,
                **{k: qp.get(k) for k in FLOW_FIELDS},
                "retransmits": sender.get("retransmits"),
                "per_plane_packets": sender.get("per_plane_packets"),
                "congestion": _congestion(qp)}


def _congestion(qp: dict) -> dict | None:
    """The congestion signals of a flow's QP (docs/congestion.md): its algorithm and
    signals, the marks echoed to it, its EV skips by reason, the trims it resent."""
    if not qp:
        return None
    s = qp.get("sender", {})
    return {"cc": qp.get("cc"), "signals": qp.get("signals"), "window": qp.get("window"),
            "ecn_marks": s.get("ecn_marks"), "ecn_echoes": s.get("ecn_echoes"),
            "ev_skips_by": qp.get("ev_skips_by"), "nacks_trimmed": s.get("nacks_trimmed"),
            "nacks_seq": s.get("nacks_seq"), "trims_ignored": s.get("trims_ignored"),
            "quick_adapts": s.get("quick_adapts"), "window_decreases": s.get("window_decreases")}


def split_qps(flows: list[Flow], qps: int) -> list[Flow]:
    """Each flow carried by `qps` QPs: `qps` Flows of 1/qps of its bytes each (the first
    size % qps one byte more), `group` the index of the flow they carry."""
    QPS.check(qps, "qps")
    small = [f for f in flows if f.size < qps]
    if small:
        raise UsageError(f"--qps {qps}: a flow of {small[0].size} bytes cannot be split "
                         f"over {qps} QPs (each carries at least one byte); use a larger "
                         "--size or fewer QPs")
    out = []
    for i, f in enumerate(flows):
        share, extra = divmod(f.size, qps)
        out.extend(Flow(f.src, f.dst, share + (k < extra), group=i) for k in range(qps))
    return out


def merge_rows(rows: list[dict]) -> dict:
    """One flow's row from its QPs' rows (Flow.to_dict): bytes, goodput and counters
    summed, the slowest QP's time, exact only if every QP is, the first failure."""
    if len(rows) == 1:
        return {**rows[0], "qps": 1}

    def total(key):
        vals = [r[key] for r in rows if r.get(key) is not None]
        return sum(vals) if vals else None

    def worst(key):
        vals = [r[key] for r in rows if r.get(key) is not None]
        return max(vals) if vals else None

    planes: dict[str, int] = {}
    for r in rows:
        for p, n in (r.get("per_plane_packets") or {}).items():
            planes[str(p)] = planes.get(str(p), 0) + n
    first = rows[0]
    return {
        "src": first["src"], "dst": first["dst"], "bytes": total("bytes"),
        "exact": all(r["exact"] for r in rows) if all(r["exact"] is not None for r in rows)
        else None,
        "failed": next((r["failed"] for r in rows if r.get("failed")), None),
        "goodput_gbps": total("goodput_gbps"), "elapsed_s": worst("elapsed_s"),
        "srtt_us": worst("srtt_us"), "reorder_window_us": worst("reorder_window_us"),
        "ev_retirements_total": total("ev_retirements_total"),
        "ev_revivals_total": total("ev_revivals_total"),
        "ev_retirements_undone_total": total("ev_retirements_undone_total"),
        "probes_sent": total("probes_sent"),
        "planes_in_use": sorted({p for r in rows for p in (r.get("planes_in_use") or [])}),
        "single_path": [r.get("single_path") for r in rows],
        "messages_completed": total("messages_completed"),
        "events_logged": total("events_logged"), "retransmits": total("retransmits"),
        "per_plane_packets": planes, "qps": len(rows)}


@dataclass
class Run:
    pattern: str
    mode: str
    flows: list[Flow]
    samples: list[tuple[float, int]] = field(default_factory=list)  # (t, acked bytes, all)
    # as applied (fault_row): {"t_s", "t_us" (in force by), "applied_us", "what"}
    faults: list[dict] = field(default_factory=list)
    in_force: list[str] = field(default_factory=list)  # faults in force as it began
    events: list[dict] = field(default_factory=list)  # the QPs' event logs, "flow" added
    events_dropped: int = 0  # fell out of a bounded log (its head and tail are kept)
    bins: dict[int, dict] = field(default_factory=dict)  # flow -> its QP's acked_bins
    start_us: int = 0  # CLOCK_MONOTONIC at the first write
    elapsed_s: float = 0.0
    cc: str = CC.DEFAULT  # the QPs' congestion control
    qps: int = 1  # QPs per flow (flows carrying a `group`)

    def flow_rows(self) -> list[dict]:
        """A row per flow (its QPs' rows merged, `merge_rows`), in flow order."""
        groups: dict[object, list[dict]] = {}
        for i, f in enumerate(self.flows):
            groups.setdefault(("g", f.group) if f.group is not None else ("f", i),
                              []).append(f.to_dict())
        return [merge_rows(rows) for rows in groups.values()]

    @property
    def ok(self) -> bool:
        return not self.failures()

    def failures(self) -> list[str]:
        """What kept it from `ok`, a line per flow (QP) that failed, arrived altered or
        was never checked."""
        out = []
        for f in self.flows:
            if f.result is not None and f.result.failed:
                out.append(f"{f.src} -> {f.dst} QP {f.send_qpn} failed: {f.result.failed}")
            elif not f.exact:
                out.append(f"{f.src} -> {f.dst} QP {f.send_qpn}: "
                           f"{'not byte-exact' if f.exact is False else 'never checked'}")
        return out

    def goodput_series(self, window_s: float = 0.1) -> list[tuple[float, float]]:
        """(t, Gbit/s) over a sliding window of the acked-byte samples."""
        out = []
        j = 0
        for i, (t, b) in enumerate(self.samples):
            while self.samples[j][0] < t - window_s:
                j += 1
            if i > j:
                t0, b0 = self.samples[j]
                out.append((t, (b - b0) * 8 / (t - t0) / 1e9))
        return out

    def recovery_s(self, fault_at: float, threshold: float = 0.9) -> float | None:
        """Time from the fault until goodput is back above `threshold` of its
        pre-fault level (None: it never came back)."""
        series = self.goodput_series()
        before = [g for t, g in series if fault_at - 0.5 <= t < fault_at]
        if not before:
            return None
        level = sum(before) / len(before)
        dipped = False
        for t, g in series:
            if t < fault_at:
                continue
            if g < threshold * level:
                dipped = True
            elif dipped:
                return max(0.0, t - fault_at)
        return None if dipped else 0.0  # never below the threshold: no recovery needed

    def failover(self) -> list[failover.Episode]:
        return failover.episodes(self.faults, self.events, self.in_force,
                                 self.start_us or None)

    def to_dict(self) -> dict:
        return {
            "pattern": self.pattern, "mode": self.mode, "cc": self.cc, "qps": self.qps,
            "ok": self.ok, "elapsed_s": round(self.elapsed_s, 3), "start_us": self.start_us,
            "flows": [f.to_dict() for f in self.flows] if self.qps == 1
            else self.flow_rows(),
            **({"qp_rows": [f.to_dict() for f in self.flows]} if self.qps > 1 else {}),
            "faults": self.faults, "in_force": self.in_force,
            "events": self.events, "events_dropped": self.events_dropped,
            "failover": [e.to_dict() for e in self.failover()],
        }


REGISTRABLE_SHARE = 0.5  # of the machine's available memory: every host's buffers are in it


def registrable_bytes() -> int:
    """What the hosts can register between them: a share of the memory this machine
    has available (all of a lab's hosts, and their buffers, live in it)."""
    try:
        with open("/proc/meminfo") as f:
            kib = next(int(line.split()[1]) for line in f if line.startswith("MemAvailable:"))
    except (OSError, StopIteration, ValueError):
        return 1 << 62  # unknown: let the endpoint refuse what it cannot have
    return int(kib * 1024 * REGISTRABLE_SHARE)


def check_fits(flows: list[Flow]) -> None:
    """Refuse, before any endpoint allocates, flows whose buffers (a source and a
    destination per flow) cannot all be registered at once."""
    need = sum(2 * f.size for f in flows)
    limit = registrable_bytes()
    if need > limit:
        many = len(flows) != 1
        raise UsageError(f"{len(flows)} flow{'s' if many else ''} of {_gib(flows[0].size)} "
                         f"need{'' if many else 's'} {_gib(need)} of registered buffers (a "
                         f"source and a destination each); the hosts can register "
                         f"{_gib(limit)} ({REGISTRABLE_SHARE:.0%} of this machine's available "
                         "memory): use a smaller --size")


def _gib(n: int) -> str:
    return f"{n / 2**30:.1f} GiB" if n >= 2**30 else f"{n / 2**20:.0f} MiB"


def flows_for(pattern: str, hosts: list[str], size: int, src: str | None = None,
              dst: str | None = None) -> list[Flow]:
    if pattern == "bulk":
        if not src or not dst or src == dst:
            raise UsageError("bulk needs --src and --dst, two different hosts")
        return [Flow(src, dst, size)]
    if pattern == "incast":
        target = dst or hosts[0]
        return [Flow(h, target, size) for h in hosts if h != target]
    if pattern == "all-to-all":
        return [Flow(a, b, size) for a in hosts for b in hosts if a != b]
    if pattern == "ring":
        return [Flow(h, hosts[(i + 1) % len(hosts)], size) for i, h in enumerate(hosts)]
    if pattern == "permutation":  # host i -> host i + n/2: every host sends to one and
        half = len(hosts) // 2  # receives from one, and (racks in order) across racks
        return [Flow(h, hosts[(i + half) % len(hosts)], size) for i, h in enumerate(hosts)]
    raise UsageError(f"unknown pattern {pattern!r}; patterns: {', '.join(PATTERNS)}")


def fault_row(fault: AppliedFault, start_us: int) -> dict:
    """A fault of a run as its `faults` hold it: when it was in force by (`t_us`, its
    apply returned; `t_s` after the first write), how long the change itself took
    (`applied_us`: it began just before the kernel change, after its record was written)
    and what it was (`what`: its kind and target). Times on CLOCK_MONOTONIC, the local
    clock (twin traffic runs the timeline on it)."""
    t_us = (fault.applied_ns if fault.applied_ns is not None else fault.at_ns) // 1000
    return {"t_s": round((t_us - start_us) / 1e6, 6), "t_us": t_us,
            "applied_us": t_us - fault.at_ns // 1000,
            "what": " ".join(w for w in (fault.kind, fault.target) if w)}


def run(rt, pattern: str, flows: list[Flow], mode: str = Mode.MRC.value, *, evs: int = 128,
        cc: str | None = None, ecn: bool | None = None, trim: bool | None = None,
        timeout_s: float = 300.0, sample_s: float = 0.02,
        timeline: Timeline | None = None,
        in_force: list[str] | None = None,
        progress: Callable[[int, int, float], None] | None = None,
        on_start: Callable[[int], None] | None = None,
        note: Callable[[str], None] | None = None) -> Run:
    """Run the flows to completion (or failure, or timeout). `timeline` (twin.faults.
    timeline, not yet begun): the faults to apply during the run, at their offsets after
    the first write; it is begun then and halted when the traffic is done (a fault it
    failed to apply ends the run, raised), and the faults it applied are the run's
    `faults`; reverting them is its caller's (`revert_all`, in a finally).
    `in_force` names the faults already in force (the lab's record: a `twin fault`
    before the run), so that its failover figures answer them.
    `on_start(t0_ns)` is called once every write is posted (t0_ns: CLOCK_MONOTONIC
    before the first), e.g. to start a timeline of its own. `note(text)` is told of
    the steps before and after the writes that take seconds at GiB sizes: registering
    the buffers, and hashing both ends. `cc`, `ecn`, `trim` choose the senders'
    congestion control and the signals it uses (SenderConfig; None: the endpoint's
    default, nscc with both)."""
    if Mode.of(mode) is None:
        raise UsageError(f"unknown mode {mode!r}; modes: {Mode.listed()}")
    cc = cc or CC.default_for(mode)
    why = CC.problem(cc, mode)
    if why:
        raise UsageError(f"--cc: {why}")
    check_fits(flows)
    hosts = sorted({f.src for f in flows} | {f.dst for f in flows})
    clients = {h: endpoints.client(rt, h) for h in hosts}
    parts = collections.Counter(f.group for f in flows if f.group is not None)
    result = Run(pattern, mode, flows, cc=cc, qps=max(parts.values(), default=1),
                 in_force=list(in_force or []))
    total = sum(f.size for f in flows)
    if note:
        note(f"registering buffers: {len(flows)} QP{'s' * (len(flows) != 1)}, "
             f"{total / 2**20:,.0f} MiB at each end")
    try:
        _register(clients, flows, mode, evs, {"cc": cc, "ecn": ecn, "trim": trim})
        start = time.monotonic()
        t0_ns = time.monotonic_ns()
        result.start_us = t0_ns // 1000
        for f in flows:
            clients[f.src].write(qpn=f.send_qpn, size=f.size, imm=f.recv_qpn)
        if timeline is not None:
            timeline.begin(t0_ns)
        if on_start:
            on_start(t0_ns)
        while True:
            t = time.monotonic() - start
            if timeline is not None and timeline.error is not None:
                raise timeline.error
            done, acked = _poll(clients, flows)
            result.samples.append((t, acked))
            if progress:
                progress(acked, total, t)
            if done:
                break
            if t > timeout_s:
                raise LabError(f"traffic did not finish within {timeout_s:.0f}s "
                               f"({acked}/{total} bytes acked)")
            time.sleep(sample_s)
        result.elapsed_s = time.monotonic() - start
        if timeline is not None:  # no fault after the traffic (nor while hashing)
            timeline.halt()
        if note:
            note(f"checking bytes: sha256 of {total / 2**20:,.0f} MiB at each end")
        _compare(clients, flows)
    finally:
        if timeline is not None:
            timeline.halt()
            result.faults = [fault_row(a, start_us=result.start_us) for a in timeline.applied]
        _collect_events(clients, flows, result)
        for f in flows:  # also after a timeout: a stalled QP must not keep retrying
            for host, qpn in ((f.src, f.send_qpn), (f.dst, f.recv_qpn)):
                if qpn:
                    try:
                        clients[host].close_qp(qpn)
                    except (LabError, OSError):
                        pass
        for c in clients.values():
            c.close()
    return result


def _at_every_host(work: dict[str, list], do) -> dict[str, list]:
    """`do(host, item)` for each host's items, in order, every host at once (one thread
    each, so a host's control client is only ever used by one): {host: results}. Every
    host finishes before the first error, if any, is raised."""
    with ThreadPoolExecutor(max_workers=max(1, min(len(work), 16))) as pool:
        futures = {h: pool.submit(lambda h=h: [do(h, x) for x in work[h]]) for h in work}
    errors = [e for e in (f.exception() for f in futures.values()) if e is not None]
    if errors:
        raise errors[0]
    return {h: f.result() for h, f in futures.items()}


def _register(clients, flows: list[Flow], mode: str, evs: int | None,
              signals: dict | None = None) -> None:
    """Every flow's two QPs, connected. The receiving QPs come first (a sending QP is
    created with its peer's QPN and rkey), then the sending QPs. Within each step every
    host registers its own buffers, all hosts at once: at GiB sizes that is seconds of
    the kernel faulting pages in, which runs on every core. A flow's QPNs are set as
    each QP exists, so a failure part way leaves only QPs the caller will close."""
    rkeys: dict[int, int] = {}  # flow -> its receiving QP's rkey

    def by(host_of) -> dict[str, list[int]]:
        out: dict[str, list[int]] = {}
        for i, f in enumerate(flows):
            out.setdefault(host_of(f), []).append(i)
        return out

    def recv(host: str, i: int) -> None:
        f = flows[i]
        reply = clients[host].recv_qp(size=f.size)
        f.recv_qpn, rkeys[i] = reply["qpn"], reply["rkey"]

    def send(host: str, i: int) -> None:
        f = flows[i]
        f.send_qpn = clients[host].send_qp(peer=f.dst, peer_qpn=f.recv_qpn,
                                           rkey=rkeys[i], size=f.size, mode=mode, evs=evs,
                                           seed=i + 1, **(signals or {}))["qpn"]

    _at_every_host(by(lambda f: f.dst), recv)
    _at_every_host(by(lambda f: f.src), send)
    for f in flows:
        clients[f.dst].connect(qpn=f.recv_qpn, peer=f.src, peer_qpn=f.send_qpn)


def _compare(clients, flows: list[Flow]) -> None:
    """Each flow's destination buffer against its source, by sha256: every host hashes
    its own buffers, all hosts at once (at GiB sizes, seconds each)."""
    asks: dict[str, list[int]] = {}  # host -> its QPs, in flow order
    for f in flows:
        asks.setdefault(f.src, []).append(f.send_qpn)
        asks.setdefault(f.dst, []).append(f.recv_qpn)
    # keyed (host, qpn): each endpoint numbers its QPs itself, so a flow's two ends
    # often carry the same QPN
    digests = _at_every_host(asks, lambda host, qpn:
                             clients[host].digest(qpn=qpn)["sha256"])
    got = {(h, qpn): d for h in asks for qpn, d in zip(asks[h], digests[h], strict=True)}
    for f in flows:
        f.exact = got[f.src, f.send_qpn] == got[f.dst, f.recv_qpn]


def _collect_events(clients, flows: list[Flow], result: Run) -> None:
    for i, f in enumerate(flows):
        if not f.send_qpn:
            continue
        try:
            log = clients[f.src].events(qpn=f.send_qpn)
        except (LabError, OSError):
            continue
        result.events_dropped += log["dropped"]
        result.events.extend({**e, "flow": i} for e in log["events"])
        if log.get("acked_bins"):
            result.bins[i] = log["acked_bins"]
    result.events.sort(key=lambda e: e["t_us"])


def _poll(clients, flows: list[Flow]) -> tuple[bool, int]:
    by_src: dict[str, dict[int, SendQpStats]] = {}
    for f in flows:
        if f.src not in by_src:
            ep = EndpointStats.from_dict(clients[f.src].stats())
            by_src[f.src] = {q.qpn: q for q in ep.send_qps}
        f.result = by_src[f.src].get(f.send_qpn, f.result)
    acked = sum(min(f.size, f.result.sender.acked * f.result.mtu) for f in flows
                if f.result is not None)
    done = all(f.result is not None and (f.result.idle or f.result.failed) for f in flows)
    return done, acked
