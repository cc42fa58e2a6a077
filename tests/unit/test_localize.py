"""Continuous localization on synthetic probe outcomes over mrc-4p and mrc-8p.

A fault is simulated by which loopback paths it breaks:
    a dead link       every path over the link
    a dead switch     every path through it (switch-down, blackhole, sid-loss alike)
    route-corrupt     every path on which the node hands a packet to the neighbour its
                      corrupted route (twin.faults' deterministic pick) should reach
"""

from pathlib import Path

import pytest

from tests.helpers import golden
from twin import faults as F
from twin.fabric import paths as P
from twin.fabric.model import Endpoint, build_fabric
from twin.fabric.plan import build_plan
from twin.fabric.spec import load_spec, parse_spec
from twin.verify.localize import CongestionLocalizer, Localizer, Outcome, explain

ROOT = Path(__file__).resolve().parents[2]
FABRICS = {name: build_fabric(load_spec(ROOT / f"lab/fabrics/{name}.yml"))
           for name in ("mrc-4p", "mrc-8p")}
LOOPS = {name: P.loopback_paths(f) for name, f in FABRICS.items()}
MS = 1_000_000


def dead_links(links):
    return lambda p: bool(set(p.links) & set(links))


def dead_switch(node):
    return lambda p: node in p.hops


def corrupt_route(fabric, node):
    """The node sends what its first forwarding route carries to the wrong port: every
    path on which `node` is followed by the neighbour that route leads to breaks."""
    good, _ = F.corruption(build_plan(fabric)[node])
    towards = fabric.link_at(Endpoint(node, good.dev)).peer(node).node

    def broken(p):
        walk = [p.src, *p.hops, p.dst]
        return any(a == node and b == towards for a, b in zip(walk, walk[1:], strict=False))
    return broken, fabric.link_at(Endpoint(node, good.dev)).id


class Sim:
    """Rounds 20 ms apart, each path probed once per round at its own offset."""

    def __init__(self, fabric, period_ns=20 * MS, **kw):
        self.fabric = fabric
        self.paths = LOOPS.get(fabric.name) or P.loopback_paths(fabric)
        self.loc = Localizer(fabric, self.paths, **kw)
        self.period = period_ns
        self.now = 0
        self.changes = []

    def sent_at(self, i):
        return self.now + i * self.period // (2 * len(self.paths))

    def round(self, broken=lambda p: False, *, lost=(), fault_at=None):
        """One round; `fault_at`: the fault lands at that path index mid-round."""
        outcomes = []
        for i, p in enumerate(self.paths):
            hit = broken(p) and (fault_at is None or i >= fault_at)
            outcomes.append(Outcome(ok=not hit and i not in lost, sent_ns=self.sent_at(i)))
        self.now += self.period
        self.changes += self.loc.observe(outcomes, self.now)
        return [loc.target for loc in self.loc.named()]

    def rounds(self, n, broken=lambda p: False):
        for _ in range(n):
            named = self.round(broken)
        return named


@pytest.mark.parametrize("name", FABRICS)
def test_every_t0_t1_link_dead_names_that_link_after_two_rounds(name):
    fabric = FABRICS[name]
    for lk in fabric.links:
        if lk.kind != "fabric":
            continue
        sim = Sim(fabric)
        sim.rounds(3)
        assert sim.round(dead_links([lk.id])) == [], "named on one round"
        assert sim.round(dead_links([lk.id])) == [lk.id]
        loc = sim.loc.named()[0]
        assert loc.kind == "link" and loc.ends == (str(lk.a), str(lk.b))
        assert loc.names(str(lk.a)) and loc.names(lk.id) and not loc.names(lk.a.node)
        assert loc.alternatives == ()
        assert loc.first_failed_ns >= 3 * sim.period and loc.named_ns == 5 * sim.period
        assert loc.failed_probes == 2 * fabric.spec.hosts_per_rack


@pytest.mark.parametrize("name", FABRICS)
def test_every_dead_t1_names_the_switch_and_none_of_its_links(name):
    fabric = FABRICS[name]
    for t1 in (n.name for n in fabric.nodes if n.name.startswith("t1-")):
        sim = Sim(fabric)
        sim.rounds(1)
        sim.rounds(2, dead_switch(t1))
        assert [(loc.target, loc.kind) for loc in sim.loc.localizations()] == [(t1, "switch")]


@pytest.mark.parametrize("name", FABRICS)
def test_every_dead_t0_names_the_t0_and_every_host_link_names_the_link(name):
    fabric = FABRICS[name]
    for t0 in (n.name for n in fabric.nodes if n.name.startswith("t0-")):
        sim = Sim(fabric)
        assert sim.rounds(2, dead_switch(t0)) == [t0]
    for lk in fabric.links:
        if lk.kind == "host":
            sim = Sim(fabric)
            assert sim.rounds(2, dead_links([lk.id])) == [lk.id]


@pytest.mark.parametrize("name", FABRICS)
def test_route_corrupt_on_any_switch_names_what_holds_it(name):
    """The corrupted route is a T0's way up to a T1, or a T1's way down to a T0:
    what breaks is every probe over that one link, so that link is named: one of
    its ends is the corrupted node."""
    fabric = FABRICS[name]
    for node in (n.name for n in fabric.nodes if n.is_switch):
        broken, link = corrupt_route(fabric, node)
        sim = Sim(fabric)
        assert sim.rounds(2, broken) == [link]
        loc = sim.loc.named()[0]
        assert node in {e.split(":")[0] for e in loc.ends}


def test_one_lost_probe_names_nothing_and_neither_do_scattered_losses():
    sim = Sim(FABRICS["mrc-4p"])
    for r in range(20):  # a different probe lost every round, now and then two
        assert sim.round(lost={(r * 7) % 48, (r * 11 + 3) % 48}) == []
    assert sim.loc.localizations() == [] and sim.changes == []


def test_a_fault_is_cleared_after_two_good_rounds_and_named_again_when_it_returns():
    fabric = FABRICS["mrc-4p"]
    sim = Sim(fabric)
    dead = dead_switch("t1-p0-0")
    sim.rounds(2, dead)
    assert sim.round() == ["t1-p0-0"], "cleared on one good round"
    assert sim.round() == []
    first = sim.loc.localizations()[0]
    assert first.cleared_ns == 4 * sim.period and not first.open
    assert first.failed_probes == 2 * 4  # 4 loop-t1s through it, lost twice
    sim.rounds(2, dead)
    assert [(loc.target, loc.open) for loc in sim.loc.localizations()] == \
        [("t1-p0-0", False), ("t1-p0-0", True)]
    assert [(c.event, c.localization.target) for c in sim.changes] == \
        [("named", "t1-p0-0"), ("cleared", "t1-p0-0"), ("named", "t1-p0-0")]


def test_a_lossy_link_is_named_and_stays_named_instead_of_flapping():
    """Half of the probes over a link lost at random: named, cleared and named again
    a few times at first, then held; it clears once the link is good for long enough."""
    import random

    fabric = FABRICS["mrc-4p"]
    link = "t0-p0-r1:eth4--t1-p0-1:eth2"
    rng = random.Random(3)
    sim = Sim(fabric)
    over = [i for i, p in enumerate(sim.paths) if link in p.links]
    for _ in range(200):
        sim.round(lost={i for i in over if rng.random() < 0.5})
    named = [c for c in sim.changes if c.event == "named"]
    assert {c.localization.target for c in sim.changes} == {link}
    assert 1 <= len(named) <= 6, len(named)
    sim.rounds(40)
    assert sim.loc.named() == []


def test_a_fault_landing_mid_round_is_not_first_named_as_one_of_its_links():
    """The round a T1 dies in, the probes sent before show its links to one rack fine:
    the next round, the confirmed paths alone would blame a link; the wider picture
    (everything failing now) blames the T1; nothing is named until they agree."""
    fabric = FABRICS["mrc-4p"]
    sim = Sim(fabric)
    dead = dead_switch("t1-p0-0")
    first_r1 = next(i for i, p in enumerate(sim.paths)
                    if p.src.startswith("r1") and p.t1 == 0 and p.plane == 0)
    sim.round()
    assert sim.round(dead, fault_at=first_r1) == []
    assert sim.round(dead) == []
    assert sim.round(dead) == ["t1-p0-0"]
    assert [c.localization.target for c in sim.changes] == ["t1-p0-0"]
    assert sim.loc.named()[0].first_failed_ns == sim.sent_at(first_r1) - 3 * sim.period


def test_two_faults_at_once_are_both_named():
    fabric = FABRICS["mrc-8p"]
    sim = Sim(fabric)
    link = "t0-p3-r2:eth5--t1-p3-0:eth3"
    assert link in {lk.id for lk in fabric.links}

    def both(p):
        return dead_switch("t1-p5-2")(p) or dead_links([link])(p)
    assert sorted(sim.rounds(2, both)) == sorted(["t1-p5-2", link])


def test_a_link_named_first_stays_named_when_its_switch_dies_after():
    fabric = FABRICS["mrc-4p"]
    sim = Sim(fabric)
    link = "t0-p0-r0:eth3--t1-p0-0:eth1"
    assert sim.rounds(2, dead_links([link])) == [link]
    assert sim.rounds(2, dead_switch("t1-p0-0")) == [link, "t1-p0-0"]
    assert sim.rounds(2) == []
    assert all(loc.cleared_ns == sim.now for loc in sim.loc.localizations())


def test_a_switch_coming_back_part_by_part_is_not_named_again_as_a_link():
    """Reverting a T1 fault re-programs it route by route: its way to rack 1 back first,
    rack 0 still failing for a few rounds. That lies within the T1 already named."""
    fabric = FABRICS["mrc-4p"]
    sim = Sim(fabric)
    assert sim.rounds(2, dead_switch("t1-p0-0")) == ["t1-p0-0"]
    assert sim.rounds(4, dead_links(["t0-p0-r0:eth3--t1-p0-0:eth1"])) == ["t1-p0-0"]
    assert sim.rounds(2) == []
    assert [(c.event, c.localization.target) for c in sim.changes] == \
        [("named", "t1-p0-0"), ("cleared", "t1-p0-0")]


def test_where_the_evidence_cannot_tell_them_apart_the_link_is_named_with_alternatives():
    """One host per rack: its T0 and its host link fail exactly the same probes."""
    fabric = build_fabric(parse_spec("name: tiny\nplanes: 2\nracks: 2\nhosts_per_rack: 1\n"
                                     "t1_per_plane: 2\n"))
    sim = Sim(fabric)
    sim.rounds(2, dead_switch("t0-p1-r0"))
    [loc] = sim.loc.named()
    host_link = fabric.link_at(Endpoint("t0-p1-r0", "eth1")).id
    assert (loc.target, loc.kind) == (host_link, "link")
    assert "t0-p1-r0" in loc.alternatives
    # ... and so is the T1 of a one-rack fabric and its one link
    one = build_fabric(parse_spec("name: one\nplanes: 1\nracks: 1\nhosts_per_rack: 2\n"
                                  "t1_per_plane: 2\n"))
    sim = Sim(one)
    assert sim.rounds(2, dead_switch("t1-p0-1")) == [one.link_at(Endpoint("t1-p0-1", "eth1")).id]
    assert sim.loc.named()[0].alternatives == ("t1-p0-1",)


def test_a_failure_nothing_uncleared_explains_is_reported_not_named():
    """A path lost while every element it crosses carried another probe fine."""
    fabric = FABRICS["mrc-4p"]
    paths = P.loopback_paths(fabric)
    elements = [frozenset(p.links) | frozenset(p.hops) for p in paths]
    kinds = {e: "link" if "--" in e else "switch" for els in elements for e in els}
    lone = next(i for i, p in enumerate(paths) if p.kind == "loop-t1")
    blames, unexplained = explain(elements, kinds, {lone}, set(range(len(paths))) - {lone})
    assert blames == [] and unexplained == {lone}
    sim = Sim(fabric)
    sim.rounds(3, lambda p: p == paths[lone])
    snap = sim.loc.snapshot()
    assert snap["named"] == [] and [u["address"] for u in snap["unexplained"]] == \
        [paths[lone].address]


def test_snapshot_is_json_and_localizations_are_bounded():
    import json

    fabric = FABRICS["mrc-4p"]
    sim = Sim(fabric, keep=3)
    for t1 in ("t1-p0-0", "t1-p1-0", "t1-p2-0", "t1-p2-1", "t1-p3-0"):
        sim.rounds(2, dead_switch(t1))
        sim.rounds(2)
    assert len(sim.loc.localizations()) == 3
    snap = json.loads(json.dumps(sim.loc.snapshot()))
    assert snap["rounds"] == 20 and snap["named"] == [] and len(snap["localizations"]) == 3


def test_outcomes_must_cover_every_path():
    sim = Sim(FABRICS["mrc-4p"])
    with pytest.raises(ValueError, match="47 outcomes for 48 paths"):
        sim.loc.observe([Outcome(True, 0)] * 47, 0)


def test_golden_what_each_single_fault_on_mrc_4p_is_named_as():
    """Every link and switch of mrc-4p dead in turn, and every switch's route-corrupt:
    what the prober names after two rounds."""
    fabric = FABRICS["mrc-4p"]
    lines = []
    cases = [(f"link {lk.id}", dead_links([lk.id])) for lk in fabric.links]
    cases += [(f"switch {n.name}", dead_switch(n.name)) for n in fabric.nodes if n.is_switch]
    cases += [(f"route-corrupt {n.name}", corrupt_route(fabric, n.name)[0])
              for n in fabric.nodes if n.is_switch]
    for what, broken in cases:
        sim = Sim(fabric)
        sim.rounds(2, broken)
        named = [f"{loc.kind} {loc.target}" + (f" (or {', '.join(loc.alternatives)})"
                                               if loc.alternatives else "")
                 for loc in sim.loc.named()]
        lines.append(f"{what:<40} -> {'; '.join(named) or '(nothing)'}")
    golden("localize-mrc-4p.txt", "\n".join(lines) + "\n")


# --- congestion: CE-marked probes, never a fault -------------------------------------

class CongestionSim(Sim):
    """Rounds in which every probe comes back, those over `hot` links CE-marked."""

    def __init__(self, fabric, **kw):
        super().__init__(fabric, **kw)
        self.cong = CongestionLocalizer(fabric, self.paths)
        self.cong_changes = []

    def marked_round(self, hot=(), lost=()):
        outcomes = [Outcome(ok=i not in lost, sent_ns=self.sent_at(i),
                            ce=bool(set(p.links) & set(hot)) and i not in lost,
                            rtt_ns=(30 + i) * MS if set(p.links) & set(hot) else 50_000)
                    for i, p in enumerate(self.paths)]
        self.now += self.period
        self.changes += self.loc.observe(outcomes, self.now)
        self.cong_changes += self.cong.observe(outcomes, self.now)
        return [loc.target for loc in self.cong.named()]


def host_links(fabric, host):
    return [lk.id for lk in fabric.links if lk.kind == "host" and host in (lk.a.node, lk.b.node)]


@pytest.mark.parametrize("name", FABRICS)
def test_a_congested_last_hop_is_named_congested_and_never_faulty(name):
    """The incast's queue, at T0 -> r0h0 on every plane: probes come back CE-marked."""
    fabric = FABRICS[name]
    hot = host_links(fabric, "r0h0")
    sim = CongestionSim(fabric)
    assert sim.marked_round(hot) == []  # one round is not enough
    assert sorted(sim.marked_round(hot)) == sorted(hot)
    for _ in range(5):
        sim.marked_round(hot)
    assert sim.loc.localizations() == [] and sim.changes == []
    locs = sim.cong.named()
    assert {loc.verdict for loc in locs} == {"congested"}
    assert all(loc.rtt_max_us and loc.rtt_max_us >= 30_000 for loc in locs)
    assert [c.event for c in sim.cong_changes] == ["congested"] * len(hot)
    assert all(c.localization.verdict == "congested" for c in sim.cong_changes)
    sim.marked_round()
    assert len(sim.cong.named()) == len(hot)  # held for `clear` rounds
    sim.marked_round()
    assert sim.cong.named() == []
    assert [c.event for c in sim.cong_changes[len(hot):]] == ["uncongested"] * len(hot)
    assert all(loc.to_dict()["verdict"] == "congested" for loc in sim.cong.localizations())


def test_a_lost_probe_is_no_evidence_of_congestion_either_way():
    fabric = FABRICS["mrc-4p"]
    hot = host_links(fabric, "r0h0")[:1]
    sim = CongestionSim(fabric)
    over = {i for i, p in enumerate(sim.paths) if set(p.links) & set(hot)}
    sim.marked_round(hot)
    sim.marked_round(hot, lost=over)  # lost: the CE streak neither grows nor breaks
    assert sim.cong.named() == []
    assert sim.marked_round(hot) == hot


def test_a_dead_link_is_faulty_and_not_congested():
    fabric = FABRICS["mrc-4p"]
    lk = next(lk for lk in fabric.links if lk.kind == "fabric")
    sim = CongestionSim(fabric)
    over = {i for i, p in enumerate(sim.paths) if lk.id in p.links}
    for _ in range(3):
        sim.marked_round(lost=over)
    assert [loc.target for loc in sim.loc.named()] == [lk.id]
    assert sim.loc.named()[0].verdict == "faulty"
    assert sim.cong.named() == [] and sim.cong_changes == []


def _dead_t1_outcomes(paths, t1, ok_for_rest=True, sent_ns=0):
    return [Outcome(False, sent_ns) if t1 in p.hops else Outcome(True if ok_for_rest else None,
                                                                   sent_ns)
            for p in paths]


def test_a_probe_back_late_retracts_the_losses_sent_before_it():
    """A round counts t1-p1-1's probes (sent at 1 ms) lost; they come back late (noted as
    back, sent at 1 ms): the streak is the losses sent after the newest probe back, so the
    next round's loss is the first again and nothing is named. Without the retraction,
    two rounds in a row would name the T1."""
    fabric, paths = FABRICS["mrc-4p"], LOOPS["mrc-4p"]
    loc = Localizer(fabric, paths)
    via = [i for i, p in enumerate(paths) if "t1-p1-1" in p.hops]
    loc.observe(_dead_t1_outcomes(paths, "t1-p1-1", sent_ns=1 * MS), 10 * MS)
    assert all(loc.streak(i) == 1 for i in via)
    loc.note([Outcome(True, 1 * MS) if i in via else Outcome(None, 0)
              for i in range(len(paths))])
    assert all(loc.streak(i) == 0 for i in via)
    assert loc.observe(_dead_t1_outcomes(paths, "t1-p1-1", sent_ns=21 * MS), 30 * MS) == []
    assert loc.named() == [] and all(loc.streak(i) == 1 for i in via)
    # a second loss sent after what came back does count: named then
    [c] = loc.observe(_dead_t1_outcomes(paths, "t1-p1-1", sent_ns=41 * MS), 50 * MS)
    assert (c.event, c.localization.target) == ("named", "t1-p1-1")
    assert c.localization.first_failed_ns == 21 * MS  # the first loss not retracted


def test_a_loss_sent_before_a_probe_that_came_back_is_no_news():
    """Outcomes can arrive out of send order (a round judged after a confirmation): a
    loss older than the path's newest probe back changes nothing."""
    fabric, paths = FABRICS["mrc-4p"], LOOPS["mrc-4p"]
    loc = Localizer(fabric, paths)
    loc.observe([Outcome(True, 10 * MS)] * len(paths), 20 * MS)
    loc.observe(_dead_t1_outcomes(paths, "t1-p1-1", ok_for_rest=False, sent_ns=5 * MS),
                30 * MS, partial=True)
    assert all(loc.streak(i) == 0 for i in range(len(paths)))


def test_noted_outcomes_give_no_verdict_until_a_round_or_confirmation():
    """A round's losses noted as they fall due (twin.verify.continuous) count toward the
    streak but name nothing: the picture is partial until the round or its confirmation
    is judged whole."""
    fabric, paths = FABRICS["mrc-4p"], LOOPS["mrc-4p"]
    loc = Localizer(fabric, paths)
    for sent in (1 * MS, 11 * MS):
        loc.note(_dead_t1_outcomes(paths, "t1-p1-1", ok_for_rest=False, sent_ns=sent))
    assert loc.named() == []
    [c] = loc.observe([Outcome(None, 0)] * len(paths), 20 * MS, partial=True)
    assert (c.event, c.localization.target) == ("named", "t1-p1-1")
    with pytest.raises(ValueError, match="outcomes for"):
        loc.note([])
