"""A QP's entropy-value set: which paths its packets are sprayed over.

DESIGN.md section 1. A QP draws `size` EVs (default 128), split equally over
the planes both ends have up, chosen at random within each plane, plus a
backup set to draw replacements from. Packets take the active EVs in
rotation. Each EV is in one state:

    GOOD         used in rotation
    SKIP         congested (RTT above target, or ECN-marked): passed over for
                 one rotation, then GOOD again
    ASSUMED_BAD  a packet on it was lost (not merely late): retired at once and
                 replaced from the backup set of the same plane (or a fresh draw
                 there, while any EV of the plane still works); background
                 probes bring it back after `resurrect_after` good probes
    DENIED       on the denylist: never used

A plane whose NIC port is down (locally, or at the peer as its SACK
port-state bitmap says) is left out of the rotation until it comes back.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from enum import Enum

from twin.paths import ev_encode, ev_fields


class EvState(Enum):
    GOOD = "good"
    SKIP = "skip"
    ASSUMED_BAD = "assumed_bad"
    DENIED = "denied"


@dataclass
class Ev:
    value: int
    plane: int
    state: EvState = EvState.GOOD
    probe_ok: int = 0  # consecutive good probes while ASSUMED_BAD
    sent: int = 0
    lost: int = 0
    rtt_ns: float = 0.0  # smoothed


@dataclass
class EvSet:
    planes: list[int]  # planes both ends share
    t1_per_plane: int
    size: int = 128
    backup: int = 32
    resurrect_after: int = 3
    seed: int | None = None
    denylist: set[int] = field(default_factory=set)
    # filled by __post_init__
    active: list[Ev] = field(init=False)
    spare: dict[int, list[Ev]] = field(init=False)
    retired: list[Ev] = field(init=False)
    planes_down: set[int] = field(init=False, default_factory=set)

    def __post_init__(self) -> None:
        if not self.planes:
            raise ValueError("an EV set needs at least one plane")
        rng = random.Random(self.seed)
        self._rng = rng
        per_plane = max(1, self.size // len(self.planes))
        spare_per_plane = max(1, self.backup // len(self.planes))
        self.spare, self.retired = {}, []
        self.retirements = 0  # EVs retired over the set's life (resurrected ones too)
        columns = []
        for p in self.planes:
            values = self._draw(rng, p, per_plane + spare_per_plane)
            evs = [Ev(v, p, EvState.DENIED if v in self.denylist else EvState.GOOD)
                   for v in values]
            columns.append(evs[:per_plane])
            self.spare[p] = evs[per_plane:]
        # interleave planes, so consecutive packets land on different planes
        self.active = [ev for row in zip(*columns, strict=True) for ev in row]
        self._cursor = 0
        self._skipped: set[int] = set()
        self._per_plane = per_plane
        self._failures: dict[int, int] = {}  # plane -> losses since its last delivery

    def _draw(self, rng: random.Random, plane: int, n: int) -> list[int]:
        seen: set[int] = set()
        out = []
        while len(out) < n:
            ev = ev_encode(plane, rng.randrange(self.t1_per_plane), rng.getrandbits(20))
            if ev not in seen:
                seen.add(ev)
                out.append(ev)
        return out

    # -- rotation ---------------------------------------------------------------

    def next(self) -> Ev:
        """The next usable EV in rotation (SKIP ones are passed over once)."""
        n = len(self.active)
        for _ in range(2 * n):
            ev = self.active[self._cursor]
            self._cursor = (self._cursor + 1) % n
            if self._cursor == 0:
                self._end_of_rotation()
            if ev.plane in self.planes_down or ev.state in (EvState.DENIED,
                                                            EvState.ASSUMED_BAD):
                continue
            if ev.state is EvState.SKIP:
                self._skipped.add(ev.value)
                continue
            return ev
        raise NoUsableEv(f"no usable EV: planes down {sorted(self.planes_down)}")

    def _end_of_rotation(self) -> None:
        for ev in self.active:
            if ev.state is EvState.SKIP and ev.value in self._skipped:
                ev.state = EvState.GOOD
        self._skipped.clear()

    # -- events -----------------------------------------------------------------

    def congested(self, ev: Ev) -> None:
        if ev.state is EvState.GOOD:
            ev.state = EvState.SKIP

    def lost(self, ev: Ev) -> Ev | None:
        """A real loss on `ev`: retire it now; return its replacement (same plane)."""
        ev.lost += 1
        self._failures[ev.plane] = self._failures.get(ev.plane, 0) + 1
        if ev.state in (EvState.ASSUMED_BAD, EvState.DENIED):
            return None
        ev.state = EvState.ASSUMED_BAD
        ev.probe_ok = 0
        self.retirements += 1
        idx = self.active.index(ev)
        self.retired.append(ev)
        pool = self.spare[ev.plane]
        fresh = next((e for e in pool if e.state is EvState.GOOD), None)
        if fresh is not None:
            pool.remove(fresh)
        elif self._plane_works(ev.plane):  # backup set spent: draw anew in the same plane
            fresh = Ev(self._draw(self._rng, ev.plane, 1)[0], ev.plane)
        else:
            # Every EV of this plane has failed: the plane itself is broken here. Leave
            # the slot retired (rotation skips it) until a probe brings an EV back.
            return None
        self.active[idx] = fresh
        return fresh

    def _plane_works(self, plane: int) -> bool:
        """Not while more EVs of it have failed in a row than it has slots: then fresh
        draws fail too, and the plane itself is broken from here."""
        return self._failures.get(plane, 0) < self._per_plane

    def delivered(self, ev: Ev) -> None:
        """A packet on `ev` got through: its plane works."""
        self._failures[ev.plane] = 0

    def _refill(self, plane: int) -> None:
        """Put good spares of `plane` into the slots its retired EVs still hold."""
        pool = self.spare[plane]
        for i, ev in enumerate(self.active):
            if ev.plane == plane and ev.state is EvState.ASSUMED_BAD and pool:
                self.active[i] = pool.pop(0)

    def probe_result(self, value: int, ok: bool) -> bool:
        """A background probe on a retired EV; True when it is resurrected (to spare)."""
        ev = next((e for e in self.retired if e.value == value), None)
        if ev is None or value in self.denylist:
            return False
        ev.probe_ok = ev.probe_ok + 1 if ok else 0
        if ev.probe_ok >= self.resurrect_after:
            ev.state = EvState.GOOD
            self.retired.remove(ev)
            self.spare[ev.plane].append(ev)
            self._refill(ev.plane)
            return True
        return False

    def deny(self, value: int) -> None:
        self.denylist.add(value)
        for ev in self.active:
            if ev.value == value:
                ev.state = EvState.DENIED
                self.lost(ev)  # replace it like a loss, but keep it DENIED
                ev.state = EvState.DENIED

    def set_plane(self, plane: int, up: bool) -> None:
        (self.planes_down.discard if up else self.planes_down.add)(plane)

    # -- reporting --------------------------------------------------------------

    def counts(self) -> dict[str, int]:
        out = {s.value: 0 for s in EvState}
        for ev in self.active:
            out[ev.state.value] += 1
        in_slots = {id(e) for e in self.active}
        out["assumed_bad"] += sum(1 for e in self.retired
                                  if e.state is EvState.ASSUMED_BAD and id(e) not in in_slots)
        return out

    def planes_in_use(self) -> list[int]:
        return sorted({e.plane for e in self.active} - self.planes_down)

    @staticmethod
    def plane_of(value: int) -> int:
        return ev_fields(value)[0]


class NoUsableEv(RuntimeError):
    pass
