"""Host-to-host probes through a BGP lab (routing: bgp), one per host pair and plane.

There is no source route to write: a probe is a plain UDP datagram from the source's
NIC port address in a plane to the destination's port address in the same plane
(twin.fabric.bgp.host_link), and the fabric's routing and ECMP hash carry it. One
process holds, in every host's namespace, a UDP socket on each port address (port
PORT); a request that lands is answered at once from the destination's socket, so a
result says whether the request arrived (`forward`) and whether the answer came back.
Which T1 a probe crossed is the hash's choice, unknown here: a result names the links
it is sure of, the two host links, and `twin verify` reads the ECMP width from the
FIBs instead (twin.readback.compare_bgp).

Requests are sent in chunks with the sockets drained in between; one without an
answer is sent again, ATTEMPTS times at most. Every loop is bounded in count and time.
"""

from __future__ import annotations

import select
import socket
import struct
import time
from dataclasses import dataclass

from twin import nsenter
from twin.fabric import bgp
from twin.fabric.paths import Path
from twin.fabric.plan import Plan
from twin.verify.prober import ProbeResult

PORT = 33434  # where every port address listens for probes (a traceroute port)
IPV6_FREEBIND = 78  # linux/in6.h; not in Python's socket module
MAGIC = b"twin-ecmp"
HEAD = struct.Struct("!9sBQ")  # magic, 0 request / 1 answer, probe id
CHUNK = 64
ATTEMPTS = 3
WAIT_S = 1.0  # for the answers of one round
EXHAUSTIVE_MAX = 20_000  # probes; past that, every host to one host of every other rack


@dataclass(frozen=True)
class Pair:
    src: str
    dst: str
    plane: int


def pairs(plan: Plan) -> list[Pair]:
    """Every ordered host pair in every plane both have a port in; past EXHAUSTIVE_MAX,
    every host to the host of the same slot in every other rack (and to each host of
    its own rack), so every host link and every T0 is still crossed both ways."""
    fabric = plan.fabric
    hosts = [h.name for h in fabric.hosts]
    planes = list(fabric.nic_planes)
    every = [Pair(s, d, p) for s in hosts for d in hosts if s != d for p in planes]
    if len(every) <= EXHAUSTIVE_MAX:
        return every
    per = fabric.spec.hosts_per_rack
    out = []
    for i, s in enumerate(hosts):
        rack, slot = divmod(i, per)
        for r in range(fabric.spec.racks):
            targets = range(per) if r == rack else (slot,)
            out += [Pair(s, fabric.host_name(r, t), p) for t in targets
                    if fabric.host_name(r, t) != s for p in planes]
    return out


def path_of(plan: Plan, pair: Pair) -> Path:
    """What a probe of `pair` is sure to cross: its two host links and T0s."""
    fabric = plan.fabric
    a = bgp.host_link(fabric, pair.src, pair.plane)
    b = bgp.host_link(fabric, pair.dst, pair.plane)
    links = tuple(fabric.links_of(h) for h in (pair.src, pair.dst))
    ids = tuple(next(lk.id for lk in ls if lk.end(h).ifname == port)
                for ls, h, port in zip(links, (pair.src, pair.dst),
                                       (a.host_ifname, b.host_ifname), strict=True))
    hops = (a.t0,) if a.t0 == b.t0 else (a.t0, "a T1 by hash", b.t0)
    return Path("ecmp", pair.src, pair.dst, pair.plane, None, b.host_address, hops, ids)


def probe(runtime, plan: Plan, todo: list[Pair], progress=None,
          attempts: int = ATTEMPTS) -> list[ProbeResult]:
    """Send every pair's probe (a lost one again, `attempts` times in all); a
    ProbeResult each, in `todo`'s order."""
    fabric = plan.fabric
    socks: dict[tuple[str, int], socket.socket] = {}
    try:
        for host in sorted({p.src for p in todo} | {p.dst for p in todo}):
            with nsenter.inside(runtime.netns_path(host)):
                for plane in fabric.nic_planes:
                    s = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
                    s.setblocking(False)
                    # a port whose link is down has lost its address (the kernel
                    # flushes it): bound all the same, its probes fail, not the round
                    s.setsockopt(socket.IPPROTO_IPV6, IPV6_FREEBIND, 1)
                    s.bind((bgp.host_link(fabric, host, plane).host_address, PORT))
                    socks[(host, plane)] = s
        return _run(plan, todo, socks, progress, attempts)
    finally:
        for s in socks.values():
            s.close()


def _run(plan, todo, socks, progress, attempts=ATTEMPTS) -> list[ProbeResult]:
    fabric = plan.fabric
    results = [ProbeResult(path_of(plan, p)) for p in todo]
    owner = {s.fileno(): key for key, s in socks.items()}
    pending = list(range(len(todo)))
    for attempt in range(1, attempts + 1):
        for start in range(0, len(pending), CHUNK):
            chunk = pending[start:start + CHUNK]
            for i in chunk:
                p = todo[i]
                results[i].attempts = attempt
                dst = bgp.host_link(fabric, p.dst, p.plane).host_address
                try:
                    socks[(p.src, p.plane)].sendto(HEAD.pack(MAGIC, 0, i), (dst, PORT))
                except OSError:  # no route: the plane is cut off at the source
                    pass
            _drain(results, todo, socks, owner, time.monotonic() + WAIT_S, chunk)
            if progress:
                progress(sum(r.ok for r in results), len(results), attempt - 1)
        pending = [i for i in pending if not results[i].ok]
        if not pending:
            break
    return results


def _drain(results, todo, socks, owner, deadline, waiting) -> None:
    """Answer requests and note answers until `waiting` all came back or the deadline.
    A request counts only on its destination's socket, an answer only on its source's
    and from its destination's address: nothing else in the lab can pass a probe."""
    left = {i for i in waiting if not results[i].ok}
    sent = {i: time.monotonic() for i in left}
    fds = list(owner)
    for _ in range(1_000_000):  # bounded: every pass reads or waits
        if not left:
            return
        now = time.monotonic()
        if now >= deadline:
            return
        ready, _, _ = select.select(fds, [], [], deadline - now)
        for fd in ready:
            s = socks[owner[fd]]
            for _ in range(CHUNK * 4):
                try:
                    data, addr = s.recvfrom(64)
                except BlockingIOError:
                    break
                if len(data) != HEAD.size:
                    continue
                magic, kind, i = HEAD.unpack(data)
                if magic != MAGIC or i >= len(results):
                    continue
                p, here = todo[i], owner[fd]
                if kind == 0 and here != (p.dst, p.plane) \
                        or kind == 1 and (here != (p.src, p.plane)
                                          or addr[0] != results[i].path.address):
                    continue
                if kind == 0:
                    results[i].forward = True
                    try:
                        s.sendto(HEAD.pack(MAGIC, 1, i), addr[:2])
                    except OSError:
                        pass
                elif kind == 1 and not results[i].reply:
                    results[i].forward = results[i].reply = True
                    results[i].rtt_us = (time.monotonic() - sent.get(i, now)) * 1e6
                    left.discard(i)


def localize(plan: Plan, results: list[ProbeResult]) -> list[tuple[str, str]]:
    """What the failed probes name, as (verdict, target): the fewest elements that
    explain them, of those no passing probe crossed. A probe is sure of its host links
    and T0s only: the T1 it crossed is the hash's choice. So a host link or a T0 is
    named when every probe through it failed and none passed, and the failures left,
    between racks, name a plane's T1 layer as a whole ("a T1 of plane P"): on ECMP a
    prober cannot say which T1, which is what an operator of such a fabric learns."""
    failed = [r for r in results if not r.ok]
    if not failed:
        return []
    passed = [r for r in results if r.ok]
    clear_links = {lk for r in passed for lk in r.path.links}
    clear_t0s = {h for r in passed for h in r.path.hops if h.startswith("t0-")}
    named: list[tuple[str, str]] = []
    left = failed
    suspects = {lk for r in failed for lk in r.path.links} - clear_links
    fabric = plan.fabric
    for t0 in sorted({h for r in failed for h in r.path.hops if h.startswith("t0-")}
                     - clear_t0s):  # every host link of a T0 dead: the T0 is, once
        mine = {lk.id for lk in fabric.links_of(t0) if lk.kind == "host"}
        if mine <= suspects:
            named.append(("faulty", t0))
            suspects -= mine
            left = [r for r in left if t0 not in r.path.hops]
    for lk in sorted(suspects):
        named.append(("faulty", lk))
        left = [r for r in left if lk not in r.path.links]
    for plane in sorted({r.path.plane for r in left if len(r.path.hops) > 1}):
        named.append(("faulty", f"a T1 of plane {plane} (ECMP: the hash hides which)"))
    if any(len(r.path.hops) == 1 for r in left):  # same rack, its links and T0 clear
        named.append(("faulty", "unexplained: a same-rack probe failed over cleared "
                      "elements"))
    return named


__all__ = ["PORT", "Pair", "localize", "pairs", "path_of", "probe"]
