"""`twin verify`: prove a running lab matches its plan.

    (a) routes     every node's routes and interfaces, read back with iproute2,
                   equal the plan (missing / extra / different, per node)
    (b) paths      a source-routed probe through every distinct path between
                   every ordered host pair (every plane, every T1) is answered
    (c) loopbacks  from every host port, probes bounce off its T0 and off each
                   T1 of the plane and come back, so every link is probed
                   without a remote responder (as MRC's clustermapper does)

Paths and loopbacks are exhaustive up to coverage.EXHAUSTIVE_MAX probes. Past that,
or with `coverage=K`, verify sends the probes twin.verify.coverage chooses: every
route, local SID and host port crossed by at least K probes (hosts x planes x T1s
probes instead of hosts² x planes x T1s), and the report says the coverage achieved.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

from twin.fabric import paths as P
from twin.fabric.plan import Plan
from twin.readback import read_node
from twin.verify import coverage as C
from twin.verify.report import VerifyReport, path_key

__all__ = ["VerifyReport", "run_verify"]


AUTO = "auto"


def run_verify(runtime, plan: Plan, *, dataplane: bool = True, steps=None,
               coverage: int | str | None = AUTO) -> VerifyReport:
    """`coverage`: None probes exhaustively, K probes for K-coverage, AUTO (the default)
    is exhaustive up to coverage.EXHAUSTIVE_MAX probes and K = DEFAULT_K past it."""
    started = time.monotonic()
    fabric = plan.fabric
    nodes = []
    names = list(plan.nodes)
    if steps:
        steps.start("reading routes back", len(names))
    with ThreadPoolExecutor(max(1, runtime.exec_workers)) as pool:  # remote: commands wait
        for check in pool.map(lambda name: read_node(runtime, plan[name]), names):
            nodes.append(check)
            if steps:
                steps.advance()
    report = VerifyReport(fabric.name, runtime.name, nodes)
    if fabric.spec.bgp is not None:
        _verify_bgp(runtime, plan, report, dataplane, steps)
    elif not dataplane:
        report.dataplane_skipped = "skipped (--no-dataplane)"
    else:
        if coverage == AUTO:
            coverage = None if C.exhaustive_probes(fabric) <= C.EXHAUSTIVE_MAX \
                else C.DEFAULT_K
        if coverage is None:
            forward = P.host_pairs_paths(fabric)
            loops = P.loopback_paths(fabric)
        else:
            if steps:
                steps.start(f"choosing probes for coverage {coverage}")
            chosen = C.choose(fabric, int(coverage))
            forward, loops = list(chosen.forward), list(chosen.loops)
            report.coverage = chosen.to_dict()
        everything = loops + forward  # loops first: they resolve every first-hop neighbour
        reverse = {i: P.reverse(fabric, p) for i, p in enumerate(everything)
                   if p.kind not in ("loop-t0", "loop-t1")}
        report.reverse = {path_key(everything[i]): back for i, back in reverse.items()}
        if steps:
            steps.start("probing paths", len(everything))
        results = runtime.probe_paths(plan, everything, reverse, progress=(
            (lambda done, total, attempt: steps.update(done, total, attempt)) if steps
            else None))
        report.loops = results[:len(loops)]
        report.paths = results[len(loops):]
    if steps:
        steps.done()
    report.seconds = time.monotonic() - started
    return report


def _verify_bgp(runtime, plan: Plan, report: VerifyReport, dataplane: bool, steps) -> None:
    """routing: bgp: each router's FRR held to its plan (sessions with the planned
    peers, every prefix with its ECMP width: twin.verify.bgp) beside the kernel's
    routes read above, then a UDP probe per host pair and plane (twin.verify.ecmp)."""
    from twin import frr
    from twin.errors import LabError
    from twin.verify import bgp as B
    from twin.verify import ecmp

    routers = {n.node: n for n in report.nodes if plan[n.node].bgp is not None}
    ids = {name: plan[name].bgp.router_id for name in routers}
    if steps:
        steps.start("reading BGP back from FRR", len(routers))
    for name, check in routers.items():
        try:
            view = B.RouterView.read(name, frr.show(runtime, name, "show bgp neighbors json"),
                                     frr.show(runtime, name, "show ipv6 route json"))
            check.routing += [p.removeprefix(f"{name}: ")
                              for p in B.problems(name, plan[name].bgp, view, ids)]
        except LabError as e:
            check.routing.append(str(e).removeprefix(f"{name}: "))
        if steps:
            steps.advance()
    if not dataplane:
        report.dataplane_skipped = "skipped (--no-dataplane)"
        return
    todo = ecmp.pairs(plan)
    if steps:
        steps.start("probing host pairs per plane", len(todo))
    report.paths = ecmp.probe(runtime, plan, todo, progress=(
        (lambda done, total, attempt: steps.update(done, total, attempt)) if steps else None))
