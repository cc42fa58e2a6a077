"""A QP's entropy-value set: which paths its packets are sprayed over.

DESIGN.md section 1. A QP draws `size` EVs (default 128), split equally over
the planes both ends have up, chosen at random within each plane, plus a
backup set to draw replacements from. Packets take the active EVs in
rotation. Each EV is in one state:

    GOOD         used in rotation
    SKIP         congested: the receiver echoed a CE mark on a packet it carried
                 (ECN), a switch trimmed a packet it carried, or its own smoothed
                 RTT is more than twice the queueing target above the QP's base RTT.
                 Passed over for one rotation, then GOOD again. Each way is counted
                 (skips_by: ecn, trim, rtt; `skips` is their sum).
    ASSUMED_BAD  a packet on it was lost (not merely late): retired at once and
                 replaced from the same plane, by a spare on another path (another
                 T1, so neither of the retired EV's T0-T1 links) when there is one;
                 background probes bring it back after `resurrect_after` good probes
    DENIED       on the denylist: never used, and replaced like a loss (but no
                 loss is counted against its plane)

Paths. With static SRv6 an EV's plane and T1 are its path: for one QP (one source,
one destination) they fix every link it crosses, both T0-T1 links included. Each
EV points at its `PathState`. A path is *dead* once `dead_after` packets sent on it
were lost and nothing sent on it after the first of them was delivered: then every
EV on it is retired at once (its siblings need not each lose a packet first), and
replacements avoid it. One loss is not enough: under random loss a path often has
had no chance yet to deliver the packet sent after the lost one; a second loss
with still nothing delivered is as unlikely as the loss rate itself. A packet sent
on a dead path after its death's first loss that is delivered after all proves it
alive: the siblings go back into their slots, and their replacements to the spares.

A path's first loss is checked at once: the sender's next packet goes on one of its
siblings (`check`), not wherever the rotation is. A slow QP (a shaped fabric, most of
its EVs SKIPped) may otherwise send nothing on the path for tens of milliseconds, and
the second loss that shows it dead waits for that; checked, it comes one loss
detection later. A random loss costs nothing: the check is delivered and clears it.

A path not yet *proven* (nothing delivered on it since the QP began, or since it
was last shown dead) carries at most `unproven_cap` packets at a time (at least
`dead_after`): a path dead from the start then costs a QP `dead_after` packets, not
one per EV the rotation reaches before the first loss is detected. The first
window is spread over every path anyway, so a healthy start is not held back.

A plane whose NIC port is down (locally, or at the peer as its SACK
port-state bitmap says) is left out of the rotation until it comes back. A
plane every one of whose paths has lost a packet since the plane last
delivered one is broken beyond its EVs (a T0 cut off from every T1, say):
its lost EVs are not replaced until a probe brings one back.

Every state change but GOOD <-> SKIP is reported to `on_change(ev, old, new, why)`
when it is set (the sender logs them); `old` and `new` are state names, or "spare" /
"new" for an EV coming into a slot from the spares or a fresh draw, "spare" for one
leaving a slot for the spares. SKIPs are only counted (`skips`): on the lab a
transfer skips an EV every few packets, and logging each would crowd the failures
out of a bounded log.

The per-packet state (the rotation's cursor, the SKIP EVs it passed over, whether a
path is still unproven, the failed paths per plane) has one owner, the set's `ring`: a
`Rotation` here, or the compiled core's `EvRing` (the same interface, in C; its Sender
calls it per packet). The set is its face for the rare paths and reaches it only
through that interface.

Everything is bounded: the slots, the spares, and the retired pool (at most
`size + backup` EVs; the oldest are forgotten). Draws come from the set's own
seeded generator, so a seeded set is the same on every run.
"""

from __future__ import annotations

import random
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum

from twin.fabric.paths import ev_encode


class EvState(Enum):
    GOOD = "good"
    SKIP = "skip"
    ASSUMED_BAD = "assumed_bad"
    DENIED = "denied"


_SKIP, _ASSUMED_BAD, _DENIED = EvState.SKIP, EvState.ASSUMED_BAD, EvState.DENIED  # hot path

DEAD_AFTER = 2  # losses on a path, none delivered since the first, that show it dead
SKIP_REASONS = ("ecn", "trim", "rtt")  # what sends an EV to SKIP: an echoed CE mark, a
# NACK(TRIMMED) for a packet it carried, its own RTT far above the QP's base


@dataclass(slots=True, eq=False)
class PathState:
    """One path of the QP (plane, T1): every link an EV on it crosses."""

    plane: int
    t1: int
    delivered_ns: int = -1  # latest send time of a packet on it that was delivered
    losses: list[int] = field(default_factory=list)  # send times of losses since then
    proven: bool = False  # delivered a packet since the QP began or it was last dead
    inflight: int = 0  # packets outstanding on it while not proven
    dead_since: int | None = None  # send time of the first loss that showed it dead
    # (sibling retired with it, its replacement): what a proof of life puts back
    victims: list[tuple[Ev, Ev | None]] = field(default_factory=list)


@dataclass(slots=True)
class Ev:
    value: int
    plane: int
    t1: int
    state: EvState = EvState.GOOD
    slot: int = -1  # index in the active list, -1 when not in a slot
    probe_ok: int = 0  # consecutive good probes while ASSUMED_BAD
    sent: int = 0
    lost: int = 0
    rtt_ns: float = 0.0  # smoothed
    path: PathState | None = None
    first_loss_ns: int = -1  # when the sender first declared a packet on it lost
    probed: str = ""  # the last probe answer logged while retired: "", "ok", "lost"


class NoUsableEv(RuntimeError):
    pass


class Rotation:
    """The EV set's per-packet state, and the steps that touch it on every packet: the
    rotation's cursor, the SKIP EVs it passed over in this rotation, whether some path
    is still unproven (and so held to `unproven_cap`), and per plane the paths that
    failed since the plane last delivered. EvSet holds one (`EvSet.ring`) and calls it
    through this interface on its rare paths; the compiled core has a twin with the
    same interface (twin.mrc._fastpath.EvRing, which its Sender calls in C per packet),
    and this one is the specification the twin is held equal to.

    The slots (`active`), the planes down and the paths are the set's, shared: the set
    changes them on its rare paths (a retirement, a port event), the ring reads them.
    A dead path that delivers after all is the set's to bring back: `on_alive(path,
    why)` (EvSet's), called from `delivered`."""

    __slots__ = ("active", "planes_down", "paths", "failed", "unproven_cap", "cursor",
                 "skipped", "proving", "on_alive")

    def __init__(self, active: list[Ev], planes_down: set[int],
                 paths: dict[tuple[int, int], PathState],
                 failed: dict[int, set[tuple[int, int]]], unproven_cap: int | None,
                 cursor: int = 0, skipped: set[int] | frozenset[int] = frozenset(),
                 proving: bool = True):
        self.active = active
        self.planes_down = planes_down
        self.paths = paths
        self.failed = failed  # plane -> paths that lost a packet since it last delivered
        self.unproven_cap = unproven_cap  # None: no cap (spray-static)
        self.cursor = cursor
        self.skipped = set(skipped)  # values of the SKIP EVs passed over this rotation
        self.proving = proving  # some live path is not proven yet: next() checks the cap
        self.on_alive: Callable[[PathState, str], None] | None = None

    def next(self) -> Ev:
        """The next usable EV in rotation (SKIP ones are passed over once)."""
        active, down = self.active, self.planes_down  # locals: once per packet sent
        n = len(active)
        cursor = self.cursor
        for _ in range(2 * n):
            ev = active[cursor]
            cursor += 1
            if cursor == n:
                cursor = 0
                self.end_of_rotation()  # may turn this very EV from SKIP to GOOD
            state = ev.state
            if ev.plane in down or state is _DENIED or state is _ASSUMED_BAD:
                continue
            if state is _SKIP:
                self.skipped.add(ev.value)
                continue
            if self.proving:
                path = ev.path
                if not path.proven and path.inflight >= self.unproven_cap:
                    continue
            self.cursor = cursor
            return ev
        self.cursor = cursor
        raise NoUsableEv(f"no usable EV: planes down {sorted(self.planes_down)}, "
                         f"{self.capped()} unproven paths full")

    def end_of_rotation(self) -> None:
        """The rotation wrapped: the SKIP EVs it passed over are GOOD again."""
        if self.skipped:
            for ev in self.active:
                if ev.state is EvState.SKIP and ev.value in self.skipped:
                    ev.state = EvState.GOOD
            self.skipped.clear()

    def sent_unproven(self, ev: Ev) -> None:
        """A packet goes out on `ev` while some path is unproven (the sender checks
        `proving` first: once every path is proven, sending costs nothing here)."""
        path = ev.path
        if not path.proven:
            path.inflight += 1

    def gone(self, ev: Ev) -> None:
        """A packet on `ev` is no longer outstanding (acked, or declared lost)."""
        path = ev.path
        if not path.proven and path.inflight > 0:
            path.inflight -= 1

    def delivered(self, ev: Ev, sent_ns: int = -1) -> None:
        """A packet sent on `ev` at `sent_ns` got through: its plane and its path work. A
        dead path that delivers a packet sent after its death began was not dead."""
        path = ev.path
        if sent_ns > path.delivered_ns:
            path.delivered_ns = sent_ns
            if path.dead_since is not None and sent_ns >= path.dead_since:
                self.on_alive(path, "a packet sent on it after its first loss arrived")
            if not path.proven and path.dead_since is None:
                path.proven, path.inflight = True, 0
                self.update_proving()
        failed = self.failed[ev.plane]
        if failed:
            failed.clear()

    def update_proving(self) -> None:
        """Whether some live path is still unproven, after a path's state changed."""
        self.proving = self.unproven_cap is not None and any(
            not p.proven and p.dead_since is None for p in self.paths.values())

    def capped(self) -> int:
        """Unproven paths carrying their cap now."""
        cap = self.unproven_cap
        return 0 if cap is None else sum(
            1 for p in self.paths.values() if not p.proven and p.inflight >= cap)


class EvSet:
    def __init__(self, planes: list[int], t1_per_plane: int, size: int = 128, backup: int = 32,
                 resurrect_after: int = 3, seed: int | None = None,
                 denylist: set[int] | frozenset[int] = frozenset(), cross_rack: bool = True,
                 dead_after: int = DEAD_AFTER):
        if not planes:
            raise ValueError("an EV set needs at least one plane")
        self.planes = list(planes)
        self.t1_per_plane = t1_per_plane
        self.resurrect_after = resurrect_after
        self.denylist = set(denylist)
        self.dead_after = dead_after
        self.on_change: Callable[[Ev, str, str, str], None] | None = None
        # Same-rack paths never reach a T1: every EV of a plane is then one path.
        self.paths_per_plane = t1_per_plane if cross_rack else 1
        self.paths: dict[tuple[int, int], PathState] = {}
        self.dead_paths = 0  # events: a path shown dead (its EVs retired together)
        self.path_checks = 0  # events: a packet sent on a sibling to check a path's loss
        # paths that lost a packet and delivered none since, waiting for a check (each once)
        self.suspects: list[PathState] = []
        self.paths_back = 0  # events: a dead path works again (a delivery, or a probe)
        self._rng = random.Random(seed)
        self._per_plane = per_plane = max(1, size // len(self.planes))
        self._spare_max = spare_per_plane = max(1, backup // len(self.planes))
        self.retired_max = per_plane * len(self.planes) + spare_per_plane * len(self.planes)
        # Recent draws, so no EV comes back as "fresh" while it may still be remembered
        # anywhere (slots, spares, retired pool, the sender's records): bounded too.
        self._seen: OrderedDict[int, None] = OrderedDict()
        self._seen_max = 4 * self.retired_max
        self.spare: dict[int, list[Ev]] = {}
        self.retired: OrderedDict[int, Ev] = OrderedDict()  # value -> EV, oldest first
        self.planes_down: set[int] = set()
        self.retirements = 0  # events: an EV went GOOD/SKIP -> ASSUMED_BAD
        self.revivals = 0  # events: a probe brought a retired EV back
        self.undone = 0  # events: a retirement that a late delivery proved spurious
        self.skips = 0  # events: an EV went GOOD -> SKIP (congestion), every reason
        self.skips_by = dict.fromkeys(SKIP_REASONS, 0)  # the same, by what showed it
        columns = []
        for p in self.planes:
            evs = [self._fresh(p) for _ in range(per_plane + spare_per_plane)]
            columns.append(evs[:per_plane])
            self.spare[p] = evs[per_plane:]
        # interleave planes, so consecutive packets land on different planes
        self.active: list[Ev] = [ev for row in zip(*columns, strict=True) for ev in row]
        for i, ev in enumerate(self.active):
            ev.slot = i
        # The per-packet state: the rotation (see Rotation). It shares the slots, the
        # planes down and the paths with the set, which changes them on the rare paths.
        self.ring: Rotation = Rotation(self.active, self.planes_down, self.paths,
                                       {p: set() for p in self.planes}, dead_after)
        self.ring.on_alive = self._path_alive
        for ev in list(self.active):
            if ev.value in self.denylist:
                self._deny_slot(ev)

    def use_ring(self, ring_type: type) -> None:
        """Run the rotation on another implementation of Rotation's interface (the
        compiled core's twin.mrc._fastpath.EvRing): its state so far moves there."""
        old = self.ring
        self.ring = ring_type(self.active, self.planes_down, self.paths, old.failed,
                              old.unproven_cap, old.cursor, old.skipped, old.proving)
        self.ring.on_alive = self._path_alive

    @property
    def unproven_cap(self) -> int | None:
        """Packets a path not yet proven may carry at once (None: no cap, spray-static)."""
        return self.ring.unproven_cap

    @property
    def proving(self) -> bool:
        """Some live path is not proven yet: sends count against the cap."""
        return self.ring.proving

    @property
    def size(self) -> int:
        return len(self.active)

    def path_of(self, ev: Ev) -> tuple[int, int]:
        return (ev.plane, ev.t1 if self.paths_per_plane > 1 else 0)

    def _path(self, plane: int, t1: int) -> PathState:
        key = (plane, t1 if self.paths_per_plane > 1 else 0)
        path = self.paths.get(key)
        if path is None:
            path = self.paths[key] = PathState(*key)
        return path

    def _changed(self, ev: Ev, old: str, new: str, why: str) -> None:
        if self.on_change is not None:
            self.on_change(ev, old, new, why)

    def _fresh(self, plane: int, avoid_t1: set[int] | None = None) -> Ev:
        """A never-drawn EV of `plane`, not on the denylist, on a T1 outside `avoid_t1`
        when the plane has one."""
        t1s = [t for t in range(self.t1_per_plane) if not avoid_t1 or t not in avoid_t1] \
            or list(range(self.t1_per_plane))
        while True:
            t1 = t1s[self._rng.randrange(len(t1s))]
            value = ev_encode(plane, t1, self._rng.getrandbits(20))
            if value not in self._seen and value not in self.denylist:
                self._seen[value] = None
                if len(self._seen) > self._seen_max:
                    self._seen.popitem(last=False)
                return Ev(value, plane, t1, path=self._path(plane, t1))

    # -- rotation ---------------------------------------------------------------

    def hashed(self) -> Ev:
        """One usable EV drawn with the set's seed from every slot, whatever its plane:
        what a RoCE QP's hash picks once for its life (its NIC port, then its ECMP
        path). The rotation's first EV would always be on the first plane."""
        usable = [ev for ev in self.active if ev.plane not in self.planes_down
                  and ev.state is not EvState.DENIED and ev.state is not EvState.ASSUMED_BAD]
        if not usable:
            return self.next()  # raises: nothing usable
        return usable[self._rng.randrange(len(usable))]

    def next(self) -> Ev:
        """The next usable EV in rotation (SKIP ones are passed over once): Rotation.next."""
        return self.ring.next()

    def check(self) -> Ev | None:
        """An EV to send the next new packet on because its path has just lost one, so
        the path is known dead (or alive) one loss detection later rather than whenever
        the rotation comes back to it; None when no path waits. The sender asks first,
        while `suspects` is not empty. The path's sibling is GOOD, else SKIP (the check
        is of the path, not the EV); a path whose plane is down waits; one that delivered
        since its loss, died, or has no sibling in a slot is dropped."""
        suspects, i = self.suspects, 0
        while i < len(suspects):
            path = suspects[i]
            if path.plane in self.planes_down:
                i += 1
                continue
            del suspects[i]
            ev = self._sibling(path)
            if ev is not None:
                self.path_checks += 1
                return ev
        return None

    def _sibling(self, path: PathState) -> Ev | None:
        """An EV in a slot on `path` to check it with (None: it needs no check now)."""
        if path.dead_since is not None or not path.losses or \
                path.delivered_ns > path.losses[-1]:
            return None  # known dead, or delivered since its loss
        if self.ring.proving and not path.proven and path.inflight >= self.unproven_cap:
            return None  # held at its cap: what it carries will tell
        skipped = None
        for ev in self.active:
            if ev.path is path:
                if ev.state is EvState.GOOD:
                    return ev
                if ev.state is _SKIP and skipped is None:
                    skipped = ev
        return skipped

    def set_unproven_cap(self, cap: int | None) -> None:
        """Packets a path not yet proven may carry at once (None: any number)."""
        self.ring.unproven_cap = None if cap is None else max(cap, self.dead_after)
        self.ring.update_proving()

    def sent_unproven(self, ev: Ev) -> None:
        """A packet goes out on `ev` while some path is unproven (the sender checks
        `proving` first): Rotation.sent_unproven."""
        self.ring.sent_unproven(ev)

    def gone(self, ev: Ev) -> None:
        """A packet on `ev` is no longer outstanding (acked, or declared lost):
        Rotation.gone."""
        self.ring.gone(ev)

    # -- events -----------------------------------------------------------------

    def congested(self, ev: Ev, why: str = "rtt") -> bool:
        """`ev` is congested (`why`: one of SKIP_REASONS): SKIP for a rotation. True when
        it went GOOD -> SKIP now."""
        if ev.state is EvState.GOOD:
            ev.state = EvState.SKIP
            self.skips += 1  # counted, not reported: a busy QP skips EVs every rotation
            self.skips_by[why] += 1
            return True
        return False

    def find(self, value: int) -> Ev | None:
        """The EV in a slot with this value (None: not in a slot now)."""
        for ev in self.active:
            if ev.value == value:
                return ev
        return None

    def lost(self, ev: Ev, why: str = "loss") -> tuple[bool, Ev | None]:
        """A real loss on `ev`. Returns (retired now, its replacement). Only the first loss
        retires an EV; later ones on a retired EV change nothing."""
        ev.lost += 1
        if ev.state is EvState.ASSUMED_BAD or ev.state is EvState.DENIED:
            return False, None
        return True, self._retire_slot(ev, why)

    def _retire_slot(self, ev: Ev, why: str) -> Ev | None:
        """ev goes ASSUMED_BAD; its slot gets a replacement, which is returned (None: it
        held no slot, or its plane is broken here)."""
        self._changed(ev, ev.state.value, "assumed_bad", why)
        ev.state = EvState.ASSUMED_BAD
        ev.probe_ok = 0
        ev.probed = ""
        self.retirements += 1
        self.ring.failed[ev.plane].add(self.path_of(ev))
        self._retire(ev)
        if ev.slot < 0:  # a spare or an evicted EV: nothing to refill
            return None
        if not self._plane_works(ev.plane):
            # Every path of this plane has failed since it last delivered: the plane
            # itself is broken here. The slot stays retired (rotation skips it) until a
            # probe brings an EV back.
            return None
        replacement, origin = self._replacement_of(ev)
        self._put(ev.slot, replacement)
        self._changed(replacement, origin, replacement.state.value, f"replaces {ev.value:#x}")
        return replacement

    def path_lost(self, ev: Ev, sent_ns: int) -> list[tuple[Ev, Ev | None]]:
        """A packet sent on `ev` at `sent_ns` was lost (the sender called `lost` first).
        When that shows its path dead, every other EV in a slot on it is retired now:
        returns those (EV, replacement) pairs, else []."""
        path = ev.path
        if path is None or path.dead_since is not None:
            return []
        losses = [t for t in path.losses if t > path.delivered_ns]
        losses.append(sent_ns)
        path.losses = losses[-self.dead_after:]
        if len(losses) < self.dead_after:
            if path not in self.suspects:
                self.suspects.append(path)
            return []
        path.dead_since = min(losses)
        path.proven, path.inflight = False, 0  # when it comes back, it is held until it delivers
        self.dead_paths += 1
        self.ring.update_proving()
        why = f"path dead: {len(losses)} lost on plane {path.plane} T1 {path.t1}, " \
            "none delivered since"
        for sibling in [e for e in self.active if e.path is path and
                        (e.state is EvState.GOOD or e.state is EvState.SKIP)]:
            path.victims.append((sibling, self._retire_slot(sibling, why)))
        return list(path.victims)

    def _retire(self, ev: Ev) -> None:
        self.retired[ev.value] = ev
        self.retired.move_to_end(ev.value)
        while len(self.retired) > self.retired_max:  # bounded: forget the oldest
            _, old = self.retired.popitem(last=False)
            if old.slot >= 0 and old is not ev:
                old.state = EvState.ASSUMED_BAD  # keeps its slot, still skipped

    def _replacement(self, ev: Ev) -> Ev:
        return self._replacement_of(ev)[0]

    def _replacement_of(self, ev: Ev) -> tuple[Ev, str]:
        """A spare of the same plane on the best path ("spare"), else a fresh draw there
        ("new"). The best paths are those not dead with the fewest retired EVs: a T1
        with none when there is one, so never the retired EV's own T1 (nor so either of
        its T0-T1 links) while another is clean; and never a dead path while another is
        alive, even when every T1 has retired EVs (a spurious retirement on the healthy
        one, say)."""
        pool = self.spare[ev.plane]
        if self.paths_per_plane == 1:
            for i, cand in enumerate(pool):
                if cand.state is EvState.GOOD:
                    return pool.pop(i), "spare"
            return self._fresh(ev.plane), "new"
        best = self._best_t1s(ev.plane)
        for i, cand in enumerate(pool):
            if cand.state is EvState.GOOD and cand.t1 in best:
                return pool.pop(i), "spare"
        return self._fresh(ev.plane, set(range(self.t1_per_plane)) - best), "new"

    def _best_t1s(self, plane: int) -> set[int]:
        bad = dict.fromkeys(range(self.t1_per_plane), 0)
        for e in self.retired.values():
            if e.plane == plane:
                bad[e.t1] += 1
        for (p, t1), path in self.paths.items():
            if p == plane and path.dead_since is not None:
                bad[t1] += 1 << 30
        least = min(bad.values())
        return {t1 for t1, n in bad.items() if n == least}

    def _put(self, slot: int, ev: Ev) -> None:
        old = self.active[slot]
        old.slot = -1
        ev.slot = slot
        self.active[slot] = ev

    def _plane_works(self, plane: int) -> bool:
        if len(self.ring.failed[plane]) >= self.paths_per_plane:
            return False
        dead = sum(1 for (p, _), path in self.paths.items()
                   if p == plane and path.dead_since is not None)
        return dead < self.paths_per_plane

    def delivered(self, ev: Ev, sent_ns: int = -1) -> None:
        """A packet sent on `ev` at `sent_ns` got through: its plane and its path work
        (Rotation.delivered; a dead path back comes to _path_alive)."""
        self.ring.delivered(ev, sent_ns)

    def _path_alive(self, path: PathState, why: str) -> None:
        """The path works: the EVs its death retired go back into their slots (their
        replacements back to the spares), as if it had not happened. Counted as undone
        retirements: the death was wrong, or is over (a probe got through)."""
        path.dead_since = None
        path.losses = []
        self.paths_back += 1
        self.ring.update_proving()
        self.ring.failed[path.plane].discard((path.plane, path.t1))
        victims, path.victims = path.victims, []
        pool = self.spare[path.plane]
        for ev, repl in victims:
            if ev.state is not EvState.ASSUMED_BAD or self.retired.get(ev.value) is not ev:
                continue  # revived, denied or forgotten since
            del self.retired[ev.value]
            self._changed(ev, "assumed_bad", "good", why)
            ev.state = EvState.GOOD
            ev.probe_ok = 0
            self.undone += 1
            if repl is not None and repl.slot >= 0 and ev.slot < 0 and \
                    (repl.state is EvState.GOOD or repl.state is EvState.SKIP):
                self._put(repl.slot, ev)  # the replacement leaves the slot for the spares
                pool.insert(0, repl)
                self._changed(repl, repl.state.value, "spare", f"slot back to {ev.value:#x}")
            elif ev.slot < 0:
                pool.insert(0, ev)
        del pool[self._spare_max:]  # bounded: the spares a plane started with

    def _refill(self, plane: int) -> None:
        """Put good spares of `plane` into the slots its retired EVs still hold."""
        pool = self.spare[plane]
        for i, ev in enumerate(self.active):
            if not pool:
                return
            if ev.plane == plane and ev.state is EvState.ASSUMED_BAD:
                spare = pool.pop(0)
                self._put(i, spare)
                self._changed(spare, "spare", spare.state.value, f"refills {ev.value:#x}")

    def probe_candidates(self, n: int) -> list[Ev]:
        """Up to `n` retired EVs to probe, round robin: each call moves on, so EVs that
        stay bad never starve the rest."""
        out = []
        for _ in range(min(n, len(self.retired))):
            value, ev = next(iter(self.retired.items()))
            self.retired.move_to_end(value)
            out.append(ev)
        return out

    def probe_result(self, value: int, ok: bool) -> bool:
        """A background probe on a retired EV; True when it is resurrected (to spare)."""
        ev = self.retired.get(value)
        if ev is None or value in self.denylist:
            return False
        ev.probe_ok = ev.probe_ok + 1 if ok else 0
        if ev.probe_ok < self.resurrect_after:
            return False
        self._restore(ev, f"{ev.probe_ok} probes answered")
        self.revivals += 1
        return True

    def unretire(self, value: int) -> bool:
        """A packet declared lost on this EV arrived after all: the retirement was
        spurious. The EV goes back to the spares (and into a retired slot of its plane)."""
        ev = self.retired.get(value)
        if ev is None or ev.state is not EvState.ASSUMED_BAD:
            return False
        self._restore(ev, "the copy declared lost arrived late")
        self.undone += 1
        return True

    def _restore(self, ev: Ev, why: str) -> None:
        """ev works: back in its slot, or to the spares (and on into a retired slot). A
        path its loss had shown dead works too: its other EVs come back with it."""
        del self.retired[ev.value]
        self._changed(ev, "assumed_bad", "good" if ev.slot >= 0 else "spare", why)
        ev.state = EvState.GOOD
        ev.probe_ok = 0
        self.ring.failed[ev.plane].discard(self.path_of(ev))
        if ev.slot < 0:
            self.spare[ev.plane].insert(0, ev)
        if ev.path.dead_since is not None:
            self._path_alive(ev.path, f"{ev.value:#x} on it works: {why}")
        self._refill(ev.plane)

    def deny(self, value: int) -> None:
        """Never use `value` again: it leaves its slot (replaced from its plane, like a
        loss, but no loss is counted), the spares and the retired pool."""
        self.denylist.add(value)
        for ev in self.active:
            if ev.value == value and ev.state is not EvState.DENIED:
                self._deny_slot(ev)
        for pool in self.spare.values():
            pool[:] = [e for e in pool if e.value != value]
        self.retired.pop(value, None)

    def _deny_slot(self, ev: Ev) -> None:
        self._changed(ev, ev.state.value, "denied", "on the denylist")
        ev.state = EvState.DENIED
        replacement, origin = self._replacement_of(ev)
        self._put(ev.slot, replacement)
        self._changed(replacement, origin, replacement.state.value, f"replaces {ev.value:#x}")

    def set_plane(self, plane: int, up: bool) -> bool:
        """Mark a plane's port up or down; True when that changed anything."""
        if up == (plane not in self.planes_down):
            return False
        (self.planes_down.discard if up else self.planes_down.add)(plane)
        return True

    # -- reporting --------------------------------------------------------------

    def counts(self) -> dict[str, int]:
        """EVs in the slots by state now: the values add up to `size`."""
        out = {s.value: 0 for s in EvState}
        for ev in self.active:
            out[ev.state.value] += 1
        return out

    def pools(self) -> dict[str, int]:
        """EVs outside the slots: spares ready to use, retired ones being probed."""
        return {"spare": sum(len(p) for p in self.spare.values()),
                "retired": len(self.retired)}

    def planes_in_use(self) -> list[int]:
        return sorted({e.plane for e in self.active
                       if e.state is not EvState.DENIED} - self.planes_down)
