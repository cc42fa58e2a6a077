"""Coverage verify's probe choice (pure): K-coverage achieved with a fraction of the
probes, nothing exhaustive verify tests left out, and still enough to name a dead
link or switch."""

import pytest

from tests.helpers import golden
from twin.fabric import paths as P
from twin.fabric.spec import parse_spec
from twin.lab import compile_loaded, compile_spec
from twin.verify import coverage as C
from twin.verify.prober import ProbeResult
from twin.verify.report import VerifyReport, path_key

BIG = """name: big
planes: 8
racks: 16
hosts_per_rack: 4
t1_per_plane: 16
"""


def fabric(ref: str):
    if ref == "big":
        return compile_loaded("big.yml", parse_spec(BIG, "big.yml"), "big").fabric
    return compile_spec(ref).fabric


@pytest.mark.parametrize("ref", ["mrc-4p", "mrc-8p", "mrc-4p-shaped"])
def test_the_candidates_test_everything_exhaustive_verify_tests(ref):
    f = fabric(ref)
    exhaustive = set()
    for p in P.host_pairs_paths(f) + P.loopback_paths(f):
        exhaustive.update(C.elements(f, p))
    assert C.universe(f) == exhaustive
    assert C.exhaustive_probes(f) == len(P.host_pairs_paths(f)) + len(P.loopback_paths(f))


@pytest.mark.parametrize("ref,k", [("mrc-4p", 1), ("mrc-4p", 2), ("mrc-8p", 2),
                                   ("mrc-8p", 3), ("big", 2)])
def test_k_coverage_is_achieved_with_far_fewer_probes(ref, k):
    f = fabric(ref)
    c = C.choose(f, k)
    counts: dict[str, int] = {}
    for p in (*c.loops, *c.forward):
        for e in C.elements(f, p):
            counts[e] = counts.get(e, 0) + 1
    assert set(counts) == C.universe(f)  # nothing left out
    assert min(counts.values()) == c.achieved >= k and not c.short
    assert c.probes <= c.exhaustive_probes / 2
    kinds = {e.split(":")[0] for e in counts}
    assert kinds == {"route", "sid", "answer"}


def test_the_large_fabric_goes_from_half_a_million_probes_to_under_ten_thousand():
    c = C.choose(fabric("big"), 2)
    assert c.exhaustive_probes == 501_760
    assert len(c.loops) == 8_704 and c.probes < 10_000


def test_elements_of_a_cross_rack_probe_are_both_ways():
    f = fabric("mrc-4p")
    p = P.route(f, f.node("r0h0"), f.node("r1h1"), 2, 1)
    got = set(C.elements(f, p))
    assert {"route:r0h0>t0-p2-r0", "route:t0-p2-r0>t1-p2-1", "route:t1-p2-1>t0-p2-r1",
            "route:t0-p2-r1>r1h1", "route:r1h1>t0-p2-r1", "route:t1-p2-1>t0-p2-r0",
            "sid:t1-p2-1", "sid:r1h1/2", "sid:r0h0/2", "answer:r1h1/2",
            "answer:r0h0/2"} <= got


def test_the_choice_for_mrc_4p_is_stable():
    c = C.choose(fabric("mrc-4p"), 2)
    golden("coverage-mrc-4p-k2.txt", "\n".join(p.label for p in (*c.loops, *c.forward)) + "\n")


@pytest.mark.parametrize("ref", ["mrc-4p", "mrc-8p"])
def test_a_dead_link_is_still_named_from_the_coverage_probes_alone(ref):
    """Each fabric link dead in turn: the probes that cross it fail, the rest pass, and
    the report's suspect links are exactly that link."""
    f = fabric(ref)
    c = C.choose(f, 2)
    chosen = [*c.loops, *c.forward]
    reverse = {path_key(p): P.reverse(f, p) for p in chosen if p.src != p.dst}
    for dead in [lk.id for lk in f.links if lk.kind == "fabric"]:
        report = VerifyReport(f.name, "sim", [], reverse=reverse)
        for p in chosen:
            fails = dead in p.links
            back_fails = p.src != p.dst and dead in reverse[path_key(p)].links
            r = ProbeResult(p, forward=not fails, reply=not (fails or back_fails))
            (report.loops if p.src == p.dst else report.paths).append(r)
        assert report.suspect_links() == [dead], dead
