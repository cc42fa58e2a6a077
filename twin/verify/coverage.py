"""Coverage verify: the fewest probes that still cross everything K times (pure).

Exhaustive verify probes every path between every ordered host pair, on every plane,
through every T1: hosts² x planes x T1s probes. On a fabric of 8 planes x 16 racks x
4 hosts x 16 T1s that is 516,096 probes, minutes of probing, to test what a few
thousand probes test as well. A probe tests what it crosses; call those its
*elements*:

    route:NODE>PEER      a static route, as the directed link it sends out of:
                         host>T0 (a host's route to its T0), T0>T1, T1>T0, T0>host.
                         Both directions of every link, so every link is crossed
                         both ways and every static route of every node is used.
    sid:NODE             a switch's uN local SID (it shifted the program)
    sid:HOST/P           a host port's End.DT6 decap SID (plane P)
    answer:HOST/P        the host's endpoint answered a probe that came in on plane
                         P from another host (only a host-to-host probe does this)

A probe's reply comes back on the reverse path (same plane, same T1), so a forward
probe's elements are both directions' (that is how the prober judges it).

`choose(fabric, k)` takes every loopback probe, then adds host-to-host probes until
every element is crossed by at least k of them, greedily: each pick is the candidate
that crosses the most elements still short of k (a lazy greedy over a heap: a
candidate's gain only ever falls). The candidates are, for every host, plane and
T1, one cross-rack path to a host in another rack (a rack further on for each T1, so
every rack pair and T1 appears); in a fabric of one rack, one same-rack path per
host and plane. Whatever k the candidates cannot reach is reported as the coverage
achieved, never claimed.

Why every loopback: coverage alone does not name a fault. A greedy K-cover of
mrc-4p with host-to-host probes only crossed some T0-T1 links only on probes that
also crossed one other T0-T1 link, and a dead link took the innocent one down with
it in the suspect list. A loopback crosses one host link, or one host link and one
T0-T1 link, so a failure is named by the loopbacks that pass beside it (the
prober's localization works the same way). They are hosts x planes x (1 + T1s)
probes: 8,704 of the 501,760 on the 256-router fabric.
"""

from __future__ import annotations

import heapq
from collections import Counter
from dataclasses import dataclass

from twin.fabric import paths as P
from twin.fabric.model import Fabric
from twin.fabric.paths import Path

EXHAUSTIVE_MAX = 20_000  # host-to-host paths up to which plain `twin verify` is exhaustive
DEFAULT_K = 2


def elements(fabric: Fabric, path: Path) -> list[str]:
    """What a probe along `path` tests (its reply's way back included)."""
    out: list[str] = []
    for p in (path,) if path.src == path.dst else (path, P.reverse(fabric, path)):
        nodes = [p.src, *p.hops, p.dst]
        out.extend(f"route:{a}>{b}" for a, b in zip(nodes, nodes[1:], strict=False))
        out.extend(f"sid:{h}" for h in p.hops)
        out.append(f"sid:{p.dst}/{p.plane}")
        if p.src != p.dst:
            out.append(f"answer:{p.dst}/{p.plane}")
    return out


def universe(fabric: Fabric) -> set[str]:
    """Every element a fabric has (what exhaustive verify crosses)."""
    found: set[str] = set()
    for p in candidates(fabric):
        found.update(elements(fabric, p))
    return found


def candidates(fabric: Fabric) -> list[Path]:
    """Every loopback path, then a host-to-host path per host, plane and T1."""
    spec = fabric.spec
    hosts = fabric.hosts
    out = P.loopback_paths(fabric)
    for src in hosts:
        for plane in fabric.nic_planes:
            if spec.racks == 1:
                if len(hosts) > 1:
                    dst = fabric.host_at((src.index + 1) % len(hosts))
                    out.append(P.route(fabric, src, dst, plane, None))
                continue
            for t in range(spec.t1_per_plane):
                rack = (src.rack + 1 + t % (spec.racks - 1)) % spec.racks
                slot = (src.index + t) % spec.hosts_per_rack
                dst = fabric.host_at(rack * spec.hosts_per_rack + slot)
                out.append(P.route(fabric, src, dst, plane, t))
    return out


@dataclass(frozen=True)
class Coverage:
    k: int  # asked for
    achieved: int  # the least any element is crossed by the chosen probes
    loops: tuple[Path, ...]
    forward: tuple[Path, ...]
    elements: int
    short: tuple[str, ...]  # elements crossed fewer than k times (empty when achieved)
    exhaustive_probes: int  # what exhaustive verify sends: loops + every host pair path

    @property
    def probes(self) -> int:
        return len(self.loops) + len(self.forward)

    def to_dict(self) -> dict:
        return {"k": self.k, "achieved": self.achieved, "probes": self.probes,
                "loopback_probes": len(self.loops), "host_probes": len(self.forward),
                "elements": self.elements, "short": list(self.short[:20]),
                "exhaustive_probes": self.exhaustive_probes}


def exhaustive_probes(fabric: Fabric) -> int:
    """len(loopback_paths) + len(host_pairs_paths), counted, not built."""
    spec, hosts = fabric.spec, len(fabric.hosts)
    planes, t1s, per_rack = len(fabric.nic_planes), spec.t1_per_plane, spec.hosts_per_rack
    same = hosts * (per_rack - 1) * planes
    cross = hosts * (hosts - per_rack) * planes * t1s
    return hosts * planes * (1 + t1s) + same + cross


def choose(fabric: Fabric, k: int = DEFAULT_K) -> Coverage:
    if k < 1:
        raise ValueError(f"coverage k must be at least 1, got {k}")
    loops = P.loopback_paths(fabric)
    pool = candidates(fabric)[len(loops):]  # the host-to-host candidates
    elems = [elements(fabric, p) for p in pool]
    need: dict[str, int] = {}
    for e in [*elems, *(elements(fabric, p) for p in loops)]:
        need.update(dict.fromkeys(e, k))  # every element, wanted k times
    counts: Counter[str] = Counter()
    for p in loops:
        counts.update(elements(fabric, p))
    for e, n in counts.items():
        need[e] = max(0, k - n)
    left = sum(1 for n in need.values() if n)  # elements still short of k
    # Lazy greedy: (negative gain, index); a popped gain is recomputed, and the
    # candidate is taken if it still beats the next best.
    heap = [(-len(set(e)), i) for i, e in enumerate(elems)]
    heapq.heapify(heap)
    chosen: list[int] = []
    while heap and left:
        _, i = heapq.heappop(heap)
        gain = sum(1 for e in set(elems[i]) if need[e] > 0)
        if gain == 0:
            continue
        if heap and gain < -heap[0][0]:
            heapq.heappush(heap, (-gain, i))
            continue
        chosen.append(i)
        for e in elems[i]:
            if need[e] > 0:
                need[e] -= 1
                left -= need[e] == 0
        counts.update(elems[i])
    achieved = min((counts[e] for e in need), default=0)
    short = tuple(sorted(e for e in need if counts[e] < k))
    forward = tuple(pool[i] for i in sorted(chosen))
    return Coverage(k, achieved, tuple(loops), forward, len(need), short,
                    exhaustive_probes(fabric))
