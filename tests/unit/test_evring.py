"""The EV set's per-packet state has one owner (issue 39): the set's `ring`, an
evset.Rotation in the reference and its compiled twin _fastpath.EvRing, with one public
interface. Every test runs on both: the same inputs give the same EVs, in the same
order, and leave the same state (cursor, SKIPs passed over, the unproven cap, failed
paths). And nothing in C reads the EV set's private names."""

import random

import pytest

from twin.mrc import core
from twin.mrc.evset import Ev, EvSet, EvState, NoUsableEv, PathState, Rotation

pytest.importorskip("twin.mrc._fastpath")
_fastpath = core.compiled()  # bound to what its C uses

RINGS = [pytest.param(Rotation, id="python"), pytest.param(_fastpath.EvRing, id="compiled")]


def _slots(n_planes: int = 2, per_plane: int = 3) -> tuple[list[Ev], dict]:
    """Slots interleaved over the planes, one path (plane, 0) per plane."""
    paths = {(p, 0): PathState(p, 0) for p in range(n_planes)}
    active = [Ev(0x100 * p + i, p, 0, path=paths[(p, 0)])
              for i in range(per_plane) for p in range(n_planes)]
    for i, ev in enumerate(active):
        ev.slot = i
    return active, paths


def _ring(cls, cap=None, **kw):
    active, paths = _slots(**kw)
    planes = sorted({ev.plane for ev in active})
    ring = cls(active, set(), paths, {p: set() for p in planes}, cap)
    return ring, active, paths


def _take(ring, n: int) -> list[int]:
    return [ring.next().value for _ in range(n)]


@pytest.mark.parametrize("cls", RINGS)
def test_a_skip_ev_is_passed_over_for_one_rotation_then_used_again(cls):
    ring, active, _ = _ring(cls)
    ring.update_proving()  # no cap: nothing is held
    assert not ring.proving
    active[1].state = EvState.SKIP
    first = _take(ring, 4)
    assert first == [active[i].value for i in (0, 2, 3, 4)]
    assert ring.skipped == {active[1].value} and ring.cursor == 5
    assert active[1].state is EvState.SKIP
    assert ring.next() is active[5]  # the rotation wraps: the SKIP EV is GOOD again
    assert ring.cursor == 0 and active[1].state is EvState.GOOD and not ring.skipped
    assert ring.next() is active[0]
    assert ring.next() is active[1]


@pytest.mark.parametrize("cls", RINGS)
def test_retired_denied_and_down_planes_are_passed_over(cls):
    ring, active, _ = _ring(cls)
    ring.update_proving()
    active[0].state = EvState.ASSUMED_BAD
    active[2].state = EvState.DENIED
    ring.planes_down.add(1)
    assert _take(ring, 2) == [active[4].value, active[4].value]
    ring.planes_down.clear()
    assert _take(ring, 3) == [active[5].value, active[1].value, active[3].value]


@pytest.mark.parametrize("cls", RINGS)
def test_an_unproven_path_carries_at_most_its_cap_and_delivery_proves_it(cls):
    ring, active, paths = _ring(cls, cap=2)
    assert ring.proving and ring.unproven_cap == 2
    got = []
    for _ in range(4):
        ev = ring.next()
        ring.sent_unproven(ev)
        got.append(ev)
    assert [e.plane for e in got] == [0, 1, 0, 1]
    assert paths[(0, 0)].inflight == 2 and ring.capped() == 2
    with pytest.raises(NoUsableEv, match=r"planes down \[\], 2 unproven paths full"):
        ring.next()
    ring.gone(got[0])
    assert paths[(0, 0)].inflight == 1 and ring.capped() == 1
    assert ring.next().plane == 0
    ring.delivered(got[1], 5)  # plane 1's path is proven: no longer counted or held
    assert paths[(1, 0)].proven and paths[(1, 0)].inflight == 0
    assert paths[(1, 0)].delivered_ns == 5 and ring.proving  # plane 0's is still not
    ring.delivered(got[0], 3)
    assert not ring.proving
    ring.unproven_cap = None
    assert ring.unproven_cap is None and ring.capped() == 0


@pytest.mark.parametrize("cls", RINGS)
def test_a_delivery_clears_its_planes_failed_paths_and_revives_a_dead_path(cls):
    ring, active, paths = _ring(cls, cap=2)
    calls = []

    def alive(path, why):
        calls.append((path, why))
        path.dead_since = None

    ring.on_alive = alive
    path = paths[(0, 0)]
    ring.failed[0].add((0, 0))
    path.dead_since = 10
    ring.delivered(active[0], 9)  # sent before its death began: still dead
    assert calls == [] and not ring.failed[0] and not path.proven
    ring.delivered(active[0], 12)
    assert calls == [(path, "a packet sent on it after its first loss arrived")]
    assert path.proven and path.delivered_ns == 12
    ring.delivered(active[0], 11)  # older than what it delivered: nothing moves
    assert path.delivered_ns == 12 and len(calls) == 1


@pytest.mark.parametrize("cls", RINGS)
def test_a_ring_made_from_another_ring_state_goes_on_where_it_left(cls):
    ring, active, paths = _ring(Rotation, cap=2)
    active[3].state = EvState.SKIP
    _take(ring, 4)
    twin = cls(ring.active, ring.planes_down, ring.paths, ring.failed, ring.unproven_cap,
               ring.cursor, ring.skipped, ring.proving)
    assert (twin.cursor, twin.skipped, twin.proving, twin.unproven_cap) == \
        (ring.cursor, ring.skipped, ring.proving, ring.unproven_cap)
    assert twin.active is ring.active and twin.failed is ring.failed
    assert _take(twin, 6) == _take(ring, 6)


def _state(evs: EvSet) -> tuple:
    ring = evs.ring
    return (ring.cursor, ring.proving, sorted(ring.skipped), ring.unproven_cap,
            {p: sorted(s) for p, s in ring.failed.items()}, ring.capped(),
            [(e.value, e.state.value) for e in evs.active],
            [(k, p.proven, p.inflight, p.dead_since, p.delivered_ns)
             for k, p in sorted(evs.paths.items())])


def _drive(evs: EvSet, steps: int, seed: int) -> tuple[list, dict]:
    """A seeded run of sends, deliveries, losses, SKIPs, port events, probes and
    denials: everything that moves the ring, logged with the state after each step."""
    rng = random.Random(seed)
    out: list = []
    flight: list[tuple[Ev, int]] = []
    for now in range(1, steps + 1):
        r = rng.random()
        try:
            if r < 0.45:
                ev = (evs.check() if evs.suspects else None) or evs.next()
                if evs.proving:
                    evs.sent_unproven(ev)
                flight.append((ev, now))
                out.append(("sent", ev.value))
            elif r < 0.7 and flight:
                ev, t = flight.pop(rng.randrange(len(flight)))
                evs.gone(ev)
                evs.delivered(ev, t)
                out.append(("delivered", ev.value, t))
            elif r < 0.82 and flight:
                ev, t = flight.pop(rng.randrange(len(flight)))
                evs.gone(ev)
                retired, repl = evs.lost(ev)
                victims = evs.path_lost(ev, t)
                out.append(("lost", ev.value, retired, repl and repl.value,
                            [(a.value, b and b.value) for a, b in victims]))
            elif r < 0.9:
                ev = evs.active[rng.randrange(evs.size)]
                out.append(("skip", ev.value, evs.congested(ev, "ecn")))
            elif r < 0.94:
                plane, up = evs.planes[rng.randrange(len(evs.planes))], rng.random() < 0.6
                out.append(("plane", plane, up, evs.set_plane(plane, up)))
            elif r < 0.98:
                for ev in evs.probe_candidates(2):
                    out.append(("probe", ev.value, evs.probe_result(ev.value, True)))
            elif r < 0.99:
                evs.set_unproven_cap(rng.choice([None, 2, 3]))
            else:
                value = evs.active[rng.randrange(evs.size)].value
                evs.deny(value)
                out.append(("deny", value))
        except NoUsableEv as e:
            out.append(("none", str(e)))
        out.append(_state(evs))
    counts = {"dead_paths": evs.dead_paths, "paths_back": evs.paths_back,
              "retirements": evs.retirements, "skips": evs.skips, "revivals": evs.revivals,
              "path_checks": evs.path_checks,
              "none": sum(1 for o in out if o[0] == "none"),
              "passed_over": sum(1 for o in out if len(o) == 8 and o[2])}
    return out, counts


def _evset(ring, seed: int) -> EvSet:
    evs = EvSet([0, 1, 2, 3], 2, size=16, backup=8, seed=seed)
    if ring is not Rotation:
        evs.use_ring(ring)
    assert type(evs.ring) is ring
    return evs


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_compiled_ring_makes_the_references_decisions(seed):
    """The same seeded run on an EvSet over each ring: the same EVs, events and state
    after every step, and the run reaches every kind of turn."""
    ref, ref_counts = _drive(_evset(Rotation, seed), 3000, seed)
    got, got_counts = _drive(_evset(_fastpath.EvRing, seed), 3000, seed)
    assert got_counts == ref_counts
    for i, (a, b) in enumerate(zip(ref, got, strict=True)):
        assert a == b, f"step {i // 2}: reference {a!r}, compiled {b!r}"
    assert all(ref_counts[k] > 0 for k in ref_counts), ref_counts


def test_a_compiled_sender_runs_its_evset_on_the_compiled_ring():
    evs = EvSet([0, 1], 2, seed=1)
    assert type(evs.ring) is Rotation
    taken = [evs.next() for _ in range(3)]
    cursor, failed = evs.ring.cursor, evs.ring.failed
    _fastpath.Sender(evs, 0)  # sets the unproven cap by its window, too
    assert type(evs.ring) is _fastpath.EvRing
    assert evs.ring.cursor == cursor and evs.ring.failed is failed and evs.ring.proving
    assert evs.next() is evs.active[3] and taken == evs.active[:3]
    assert evs.ring.on_alive == evs._path_alive


def test_a_blank_ring_is_an_error_not_a_crash():
    ring = _fastpath.EvRing.__new__(_fastpath.EvRing)
    with pytest.raises(RuntimeError):
        ring.next()
    with pytest.raises(RuntimeError):
        _ = ring.cursor
