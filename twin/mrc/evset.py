"""A QP's entropy-value set: which paths its packets are sprayed over.

DESIGN.md section 1. A QP draws `size` EVs (default 128), split equally over
the planes both ends have up, chosen at random within each plane, plus a
backup set to draw replacements from. Packets take the active EVs in
rotation. Each EV is in one state:

    GOOD         used in rotation
    SKIP         congested: its own smoothed RTT is more than twice the queueing
                 target above the QP's base RTT. Passed over for one rotation,
                 then GOOD again. (RTT is the congestion signal here: ECN is not
                 used, because this kernel has no marking qdisc and End.DT6 decap
                 does not carry an outer CE mark to the inner header.)
    ASSUMED_BAD  a packet on it was lost (not merely late): retired at once and
                 replaced from the same plane, by a spare on another path (another
                 T1) when there is one; background probes bring it back after
                 `resurrect_after` good probes
    DENIED       on the denylist: never used, and replaced like a loss (but no
                 loss is counted against its plane)

A plane whose NIC port is down (locally, or at the peer as its SACK
port-state bitmap says) is left out of the rotation until it comes back. A
plane every one of whose paths has lost a packet since the plane last
delivered one is broken beyond its EVs (a T0 cut off from every T1, say):
its lost EVs are not replaced until a probe brings one back.

Everything is bounded: the slots, the spares, and the retired pool (at most
`size + backup` EVs; the oldest are forgotten). Draws come from the set's own
seeded generator, so a seeded set is the same on every run.
"""

from __future__ import annotations

import random
from collections import OrderedDict
from dataclasses import dataclass
from enum import Enum

from twin.fabric.paths import ev_encode


class EvState(Enum):
    GOOD = "good"
    SKIP = "skip"
    ASSUMED_BAD = "assumed_bad"
    DENIED = "denied"


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


class NoUsableEv(RuntimeError):
    pass


class EvSet:
    def __init__(self, planes: list[int], t1_per_plane: int, size: int = 128, backup: int = 32,
                 resurrect_after: int = 3, seed: int | None = None,
                 denylist: set[int] | frozenset[int] = frozenset(), cross_rack: bool = True):
        if not planes:
            raise ValueError("an EV set needs at least one plane")
        self.planes = list(planes)
        self.t1_per_plane = t1_per_plane
        self.resurrect_after = resurrect_after
        self.denylist = set(denylist)
        # Same-rack paths never reach a T1: every EV of a plane is then one path.
        self.paths_per_plane = t1_per_plane if cross_rack else 1
        self._rng = random.Random(seed)
        self._per_plane = per_plane = max(1, size // len(self.planes))
        spare_per_plane = max(1, backup // len(self.planes))
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
        columns = []
        for p in self.planes:
            evs = [self._fresh(p) for _ in range(per_plane + spare_per_plane)]
            columns.append(evs[:per_plane])
            self.spare[p] = evs[per_plane:]
        # interleave planes, so consecutive packets land on different planes
        self.active: list[Ev] = [ev for row in zip(*columns, strict=True) for ev in row]
        for i, ev in enumerate(self.active):
            ev.slot = i
        for ev in list(self.active):
            if ev.value in self.denylist:
                self._deny_slot(ev)
        self._cursor = 0
        self._skipped: set[int] = set()
        self._failed: dict[int, set[tuple[int, int]]] = {p: set() for p in self.planes}

    @property
    def size(self) -> int:
        return len(self.active)

    def path_of(self, ev: Ev) -> tuple[int, int]:
        return (ev.plane, ev.t1 if self.paths_per_plane > 1 else 0)

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
                return Ev(value, plane, t1)

    # -- rotation ---------------------------------------------------------------

    def next(self) -> Ev:
        """The next usable EV in rotation (SKIP ones are passed over once)."""
        n = len(self.active)
        for _ in range(2 * n):
            ev = self.active[self._cursor]
            self._cursor = (self._cursor + 1) % n
            if self._cursor == 0:
                self._end_of_rotation()
            if ev.plane in self.planes_down or ev.state is EvState.DENIED \
                    or ev.state is EvState.ASSUMED_BAD:
                continue
            if ev.state is EvState.SKIP:
                self._skipped.add(ev.value)
                continue
            return ev
        raise NoUsableEv(f"no usable EV: planes down {sorted(self.planes_down)}")

    def _end_of_rotation(self) -> None:
        if self._skipped:
            for ev in self.active:
                if ev.state is EvState.SKIP and ev.value in self._skipped:
                    ev.state = EvState.GOOD
            self._skipped.clear()

    # -- events -----------------------------------------------------------------

    def congested(self, ev: Ev) -> None:
        if ev.state is EvState.GOOD:
            ev.state = EvState.SKIP

    def lost(self, ev: Ev) -> tuple[bool, Ev | None]:
        """A real loss on `ev`. Returns (retired now, its replacement). Only the first loss
        retires an EV; later ones on a retired EV change nothing."""
        ev.lost += 1
        if ev.state is EvState.ASSUMED_BAD or ev.state is EvState.DENIED:
            return False, None
        ev.state = EvState.ASSUMED_BAD
        ev.probe_ok = 0
        self.retirements += 1
        self._failed[ev.plane].add(self.path_of(ev))
        self._retire(ev)
        if ev.slot < 0:  # a spare or an evicted EV: nothing to refill
            return True, None
        if not self._plane_works(ev.plane):
            # Every path of this plane has failed since it last delivered: the plane
            # itself is broken here. The slot stays retired (rotation skips it) until a
            # probe brings an EV back.
            return True, None
        replacement = self._replacement(ev)
        self._put(ev.slot, replacement)
        return True, replacement

    def _retire(self, ev: Ev) -> None:
        self.retired[ev.value] = ev
        self.retired.move_to_end(ev.value)
        while len(self.retired) > self.retired_max:  # bounded: forget the oldest
            _, old = self.retired.popitem(last=False)
            if old.slot >= 0 and old is not ev:
                old.state = EvState.ASSUMED_BAD  # keeps its slot, still skipped

    def _replacement(self, ev: Ev) -> Ev:
        """A spare of the same plane on a path with no retired EV, else a fresh draw there."""
        bad_t1 = {e.t1 for e in self.retired.values() if e.plane == ev.plane}
        pool = self.spare[ev.plane]
        for i, cand in enumerate(pool):
            if cand.state is EvState.GOOD and (cand.t1 not in bad_t1
                                               or self.paths_per_plane == 1):
                return pool.pop(i)
        return self._fresh(ev.plane, bad_t1 if self.paths_per_plane > 1 else None)

    def _put(self, slot: int, ev: Ev) -> None:
        old = self.active[slot]
        old.slot = -1
        ev.slot = slot
        self.active[slot] = ev

    def _plane_works(self, plane: int) -> bool:
        return len(self._failed[plane]) < self.paths_per_plane

    def delivered(self, ev: Ev) -> None:
        """A packet on `ev` got through: its plane works."""
        failed = self._failed[ev.plane]
        if failed:
            failed.clear()

    def _refill(self, plane: int) -> None:
        """Put good spares of `plane` into the slots its retired EVs still hold."""
        pool = self.spare[plane]
        for i, ev in enumerate(self.active):
            if not pool:
                return
            if ev.plane == plane and ev.state is EvState.ASSUMED_BAD:
                self._put(i, pool.pop(0))

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
        self._restore(ev)
        self.revivals += 1
        return True

    def unretire(self, value: int) -> bool:
        """A packet declared lost on this EV arrived after all: the retirement was
        spurious. The EV goes back to the spares (and into a retired slot of its plane)."""
        ev = self.retired.get(value)
        if ev is None or ev.state is not EvState.ASSUMED_BAD:
            return False
        self._restore(ev)
        self.undone += 1
        return True

    def _restore(self, ev: Ev) -> None:
        del self.retired[ev.value]
        ev.state = EvState.GOOD
        ev.probe_ok = 0
        self._failed[ev.plane].discard(self.path_of(ev))
        if ev.slot < 0:
            self.spare[ev.plane].insert(0, ev)
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
        ev.state = EvState.DENIED
        self._put(ev.slot, self._replacement(ev))

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
