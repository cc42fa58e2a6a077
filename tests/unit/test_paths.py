"""EV -> path formula, its inverse, and the verify matrix."""

import ipaddress
import random
from pathlib import Path

import pytest

from twin.fabric import paths as P
from twin.fabric.model import build_fabric
from twin.fabric.spec import load_spec

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def f8():
    return build_fabric(load_spec(ROOT / "lab/fabrics/mrc-8p.yml"))


def test_ev_fields_round_trip():
    for plane, t1, ent in [(0, 0, 0), (15, 255, (1 << 20) - 1), (3, 7, 12345)]:
        assert P.ev_fields(P.ev_encode(plane, t1, ent)) == (plane, t1, ent)


def test_path_for_ev_and_its_inverse_agree(f8):
    rng = random.Random(7)
    hosts = f8.hosts
    for _ in range(500):
        src, dst = rng.sample(hosts, 2)
        plane, t1 = rng.randrange(8), rng.randrange(4)
        ev = P.ev_encode(plane, t1, rng.getrandbits(20))
        path = P.path_for_ev(f8, src, dst, ev)
        got_plane, got_t1, got_dst = P.parse_path(f8, path.address)
        assert (got_plane, got_dst.name) == (plane, dst.name)
        assert got_t1 == (None if src.rack == dst.rack else t1)


def test_entropy_bits_do_not_change_the_path(f8):
    src, dst = f8.node("r0h0"), f8.node("r3h3")
    a = P.path_for_ev(f8, src, dst, P.ev_encode(5, 2, 1))
    b = P.path_for_ev(f8, src, dst, P.ev_encode(5, 2, 99999))
    assert a == b


def test_cross_rack_path_crosses_three_switches_in_one_plane(f4):
    path = P.route(f4, f4.node("r0h0"), f4.node("r1h1"), 2, 1)
    assert path.address == "fcbb:bb00:2100:2201:2101:2303::"
    assert path.hops == ("t0-p2-r0", "t1-p2-1", "t0-p2-r1")
    assert path.links == ("r0h0:eth3--t0-p2-r0:eth1", "t0-p2-r0:eth4--t1-p2-1:eth1",
                          "t0-p2-r1:eth4--t1-p2-1:eth2", "r1h1:eth3--t0-p2-r1:eth2")


def test_same_rack_path_stays_on_the_t0(f4):
    path = P.path_for_ev(f4, f4.node("r0h0"), f4.node("r0h1"), P.ev_encode(1, 1))
    assert path.address == "fcbb:bb00:1100:1301::" and path.hops == ("t0-p1-r0",)


def test_verify_matrix_sizes(f4, f8):
    # mrc-4p: 4 hosts x (1 same-rack peer x 4 planes + 2 cross-rack peers x 4 planes x 2 T1s)
    assert len(P.host_pairs_paths(f4)) == 4 * (1 * 4 + 2 * 4 * 2)
    assert len(P.loopback_paths(f4)) == 4 * 4 * (1 + 2)
    assert len(P.host_pairs_paths(f8)) == 16 * (3 * 8 + 12 * 8 * 4)
    assert len({(p.src, p.address) for p in P.host_pairs_paths(f8)}) == 6528


def test_loopbacks_probe_every_link(f8):
    probed = {lk for p in P.loopback_paths(f8) for lk in p.links}
    assert probed == {lk.id for lk in f8.links}


def test_reverse_path_returns_on_the_same_plane_and_t1(f4):
    fwd = P.route(f4, f4.node("r0h0"), f4.node("r1h0"), 3, 1)
    back = P.reverse(f4, fwd)
    assert (back.src, back.dst, back.plane, back.t1) == ("r1h0", "r0h0", 3, 1)
    assert set(back.links) == set(fwd.links)


def test_bad_evs_are_rejected(f4):
    with pytest.raises(ValueError):
        P.path_for_ev(f4, f4.node("r0h0"), f4.node("r1h0"), P.ev_encode(9))
    with pytest.raises(ValueError):
        P.parse_path(f4, "fcbb:bb00:100::")


def test_every_path_is_verifys_order_loopbacks_then_host_pairs(f4, f8):
    for f in (f4, f8):
        assert list(P.every_path(f)) == P.loopback_paths(f) + P.host_pairs_paths(f)


def verify_order(f):
    """(src, dst, plane, T1 or None) of every path verify probes, in its order, written
    out here: each host's loopbacks (off its T0, then off each T1 of the plane), then
    every ordered host pair x plane (x T1 across racks)."""
    t1s = range(f.spec.t1_per_plane)
    for h in f.hosts:
        for plane in f.nic_planes:
            yield h, h, plane, None
            yield from ((h, h, plane, t) for t in t1s)
    for src in f.hosts:
        for dst in f.hosts:
            if src is dst:
                continue
            for plane in f.nic_planes:
                if src.rack == dst.rack:
                    yield src, dst, plane, None
                else:
                    yield from ((src, dst, plane, t) for t in t1s)


def test_the_briefs_are_the_formula_for_each_path_in_verifys_order(f4, f8):
    """Paths.briefs writes Paths.brief out over tables of the parts: the same briefs."""
    for f in (f4, f8):
        paths = P.Paths(f)
        assert list(paths.briefs()) == [paths.brief(*path) for path in verify_order(f)]


def test_a_brief_is_its_whole_path_in_brief(f4, f8):
    """What a walk compares (the program as an integer, the nodes from source to
    destination) is the Path's, and the Path made of a brief is the formula's route."""
    for f in (f4, f8):
        paths = P.Paths(f)
        for brief, path, (src, dst, plane, t1) in zip(paths.briefs(), P.every_path(f),
                                                      verify_order(f), strict=True):
            assert brief == (path.src, path.dst, path.plane, path.t1, path.program,
                             (path.src, *path.hops, path.dst))
            assert path == paths.path(brief) == P.route(f, src, dst, plane, t1)
    same_rack_via_t1 = P.route(f4, f4.node("r0h0"), f4.node("r0h1"), 0, 1)
    assert same_rack_via_t1.kind == "same-rack" and len(same_rack_via_t1.links) == 4


def test_every_address_is_written_as_ipaddress_writes_it_and_parses_back(f8):
    for p in P.every_path(f8):
        assert p.address == str(ipaddress.IPv6Address(p.program))
        plane, t1, dst = P.parse_path(f8, p.address)
        assert (plane, t1, dst.name) == (p.plane, p.t1, p.dst)


@pytest.mark.parametrize("text", ["::ffff:102:304", "::102:304", "::1", "::",
                                  "fcbb:bb00:100:1301::", "fd00:0:101:301::", "1:0:0:1::1"])
def test_address_text_is_ipaddress_own_where_the_c_library_writes_ipv4(text):
    """inet_ntop writes ::ffff:1.2.3.4 and ::1.2.3.4 (glibc); ipaddress does not."""
    assert P._text(int(ipaddress.IPv6Address(text))) == str(ipaddress.IPv6Address(text))
