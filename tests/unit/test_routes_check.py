"""`twin routes check` and `diff` (pure): the shipped examples against their golden findings,
one mistake of each kind the check names, the walk's rules, and the CLI's exit codes."""

from __future__ import annotations

import gc
import itertools
import json
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from xml.etree import ElementTree as ET

import pytest

from tests.helpers import cli, golden
from twin.fabric import paths as P
from twin.fabric.plan import DECAP, UN, LocalSid, Route, nic_address
from twin.lab.compile import compile_spec
from twin.routes import check as C
from twin.routes import diff as D
from twin.routes import formats
from twin.routes import tables as T
from twin.routes import walk as W

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "lab" / "routes"
BROKEN = ["missing-t1-route", "loop-t0-t1", "wrong-usid", "missing-decap"]


@pytest.fixture(scope="module")
def mrc4p():
    return compile_spec("mrc-4p")


def findings_text(report: C.CheckReport, differences: D.DiffReport) -> str:
    """What the check and diff find, without the timing: the golden files' form."""
    lines = [f"{'PASS' if report.ok else 'FAIL'} {report.outcomes()}"]
    lines += [f"{o} x{len(rs)} {c}" for c, o, rs in report.causes()]
    lines += [f"{f.severity}: {f.text()}" for f in report.findings]
    lines += ["diff:"] + [f"  {d.node}: {d.text()} -> {d.effect()}"
                          for d in differences.differences]
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("example", sorted(p.name for p in EXAMPLES.iterdir() if p.is_dir()))
def test_each_shipped_example_is_found_as_its_golden_file_says(mrc4p, example):
    tables = formats.load_dir(EXAMPLES / example, mrc4p.fabric)
    report = C.check(mrc4p.plan, tables)
    assert report.ok == (example not in BROKEN)
    golden(f"routes/{example}.txt", findings_text(report, D.diff(mrc4p.plan, tables, report)))


@pytest.mark.parametrize("example,node,item", [
    ("missing-t1-route", "t0-p0-r0", "planned: route fcbb:bb00:201::/48 via fe80::201 dev eth4"),
    ("loop-t0-t1", "t0-p0-r0", "route fcbb:bb00:100::/48 via fe80::200 dev eth3 "
                               "(t0-p0-r0.batch line 7)"),
    ("wrong-usid", "t1-p1-0", "planned: SID fcbb:bb00:1200::/48 uN"),
    ("missing-decap", "r1h0", "planned: SID fcbb:bb00:2302::/48 decap"),
])
def test_every_shipped_mistake_is_named_by_node_and_route(mrc4p, example, node, item):
    report = C.check(mrc4p.plan, formats.load_dir(EXAMPLES / example, mrc4p.fabric))
    ((cause, _, paths),) = report.causes()
    assert cause.startswith(f"{node}: ") and item in cause, cause
    assert all(p.node == node for p in paths)


@pytest.mark.parametrize("spec", ["mrc-4p", "mrc-8p", "mrc-4p-shaped"])
def test_twins_own_plan_passes_with_nothing_unused(spec):
    c = compile_spec(spec)
    report = C.check(c.plan, T.from_plan(c.plan))
    assert report.ok and report.findings == [] and report.paths > 0


# -- one mistake of each kind ---------------------------------------------------------


def edited(c, node: str, routes=None, sids=None) -> T.Tables:
    base = T.from_plan(c.plan)
    t = base.nodes[node]
    nodes = {**base.nodes, node: replace(t, routes=tuple(routes if routes is not None
                                                         else t.routes),
                                         sids=tuple(sids if sids is not None else t.sids))}
    return T.Tables("edited", "plan", nodes)


def swap_route(c, node: str, dst: str, new: Route | None) -> T.Tables:
    rest = [r for r in c.plan[node].routes if r.dst != dst]
    return edited(c, node, routes=rest + ([new] if new else []))


def kinds(report: C.CheckReport) -> set[str]:
    return {f.kind for f in report.findings if f.severity == C.ERROR}


def test_a_next_hop_no_neighbour_owns_blackholes_and_is_named(mrc4p):
    t = swap_route(mrc4p, "t0-p0-r0", "fcbb:bb00:201::/48",
                   Route("fcbb:bb00:201::/48", "eth4", "fe80::200"))
    report = C.check(mrc4p.plan, t)
    assert kinds(report) == {"next-hop"}
    assert {r.outcome for r in report.failing} == {W.BLACKHOLE}
    assert "next hop fe80::200 does not answer on eth4: the neighbour there is t1-p0-1" in \
        report.failing[0].reason


def test_a_route_out_of_a_missing_device_is_an_error(mrc4p):
    t = swap_route(mrc4p, "t0-p0-r0", "fcbb:bb00:201::/48",
                   Route("fcbb:bb00:201::/48", "eth9", "fe80::201"))
    report = C.check(mrc4p.plan, t)
    assert "device-missing" in kinds(report)
    assert "does not have (the kernel refuses the route)" in report.failing[0].reason
    assert T.refusals(t, mrc4p.plan, "seg6local")  # and `up --routes` refuses it


def test_a_route_without_a_next_hop_blackholes(mrc4p):
    t = swap_route(mrc4p, "t0-p0-r0", "fcbb:bb00:201::/48",
                   Route("fcbb:bb00:201::/48", "eth4", None))
    assert kinds(C.check(mrc4p.plan, t)) == {"no-next-hop"}


def test_the_wrong_port_to_a_host_reaches_the_wrong_host(mrc4p):
    t = swap_route(mrc4p, "t0-p0-r1", "fcbb:bb00:302::/48",
                   Route("fcbb:bb00:302::/48", "eth2", "fe80::303"))
    report = C.check(mrc4p.plan, t)
    bad = [r for r in report.failing if r.outcome == W.WRONG_HOST]
    assert bad and all(r.path.dst == "r1h0" and r.nodes[-1] == "r1h1" for r in bad)
    assert bad[0].node == "t0-p0-r1" and bad[0].item == \
        "route fcbb:bb00:302::/48 via fe80::303 dev eth2"
    assert "sends fcbb:bb00:302:: out of eth2 (wrong-host at r1h1: arrives at host r1h1, " \
        "not its destination" in bad[0].reason


def test_a_path_over_another_t1_is_misrouted_and_the_plane_narrows(mrc4p):
    """t1-p0-0 answers t1-p0-1's uSID too, and t0-p0-r0 sends that uSID to it: every
    packet arrives, but plane 0's paths from rack 0 all cross one T1."""
    t = swap_route(mrc4p, "t0-p0-r0", "fcbb:bb00:201::/48",
                   Route("fcbb:bb00:201::/48", "eth3", "fe80::200"))
    t1 = t.nodes["t1-p0-0"]
    t.nodes["t1-p0-0"] = replace(t1, sids=(*t1.sids, LocalSid("fcbb:bb00:201::/48", UN)))
    report = C.check(mrc4p.plan, t)
    assert {r.outcome for r in report.failing} == {C.MISROUTED}
    assert all(r.node == "t0-p0-r0" for r in report.failing)
    assert report.undelivered() == set()  # verify would see them all arrive
    assert {"sid-foreign", "sid-duplicated"} <= kinds(report)


def test_a_sid_outside_the_block_and_of_another_format_are_named(mrc4p):
    t = edited(mrc4p, "t1-p0-0", sids=[LocalSid("fd00:1:200::/48", UN),
                                       LocalSid("fcbb:bb00:200::/48", UN, usid_len=32)])
    report = C.check(mrc4p.plan, t)
    assert {"sid-outside-block", "sid-format"} <= kinds(report)


def test_a_route_and_a_sid_of_one_prefix_are_named(mrc4p):
    own = mrc4p.plan["t0-p0-r0"].sids[0].prefix
    t = edited(mrc4p, "t0-p0-r0", routes=[*mrc4p.plan["t0-p0-r0"].routes,
                                          Route(own, "eth3", "fe80::200")])
    assert "shadowed" in kinds(C.check(mrc4p.plan, t))


def test_a_dropping_sid_stops_its_packets_with_the_reason(mrc4p):
    host = mrc4p.plan["r0h0"]
    sid = host.sids[0]
    t = edited(mrc4p, "r0h0", sids=host.sids[1:])
    t.nodes["r0h0"] = replace(t.nodes["r0h0"], dropping=(T.Dropping(
        sid.prefix, "seg6local action End.DT6 table main", "table main holds no NIC address"),))
    report = C.check(mrc4p.plan, t)
    assert report.failing and all("table main holds no NIC address" in r.reason
                                  for r in report.failing if r.path.dst == "r0h0")
    assert "sid-behaviour" in kinds(report)


# -- the walk's rules --------------------------------------------------------------


def test_un_shifts_one_usid_and_ends_with_nothing_left():
    block = 0xFCBBBB00 << 96
    addr = block | 0x0100 << 80 | 0x0201 << 64 | 0x0302 << 48
    assert W.shift(addr, 32, 16) == block | 0x0201 << 80 | 0x0302 << 64
    assert W.shift(block | 0x0100 << 80, 32, 16) is None


def test_a_longer_prefix_wins_and_a_sid_wins_a_tie():
    r48 = Route("fcbb:bb00:100::/48", "eth1", "fe80::1")
    r64 = Route("fcbb:bb00:100:1::/64", "eth2", "fe80::2")
    sid = LocalSid("fcbb:bb00:100::/48", UN)
    fib = W._Fib([r48, r64], [sid], [])
    addr = lambda text: int(__import__("ipaddress").IPv6Address(text))  # noqa: E731
    assert fib.lookup(addr("fcbb:bb00:100:1::5"), None) is r64
    assert fib.lookup(addr("fcbb:bb00:100:2::"), None) is sid


def test_a_decap_sid_acts_on_its_own_port_only():
    sid = LocalSid("fcbb:bb00:300::/48", DECAP, "eth1")
    fib = W._Fib([], [sid], [])
    addr = 0xFCBBBB00 << 96 | 0x0300 << 80
    assert fib.lookup(addr, "eth1") is sid and fib.lookup(addr, "eth2") is None


class Recording(W.Walker):
    """The walker, checking each path the check asks it about against the next of
    `expected` as it is asked: the first that differs is kept (its number, what was
    asked, what was expected), and no list of half a million."""

    expected: Iterator[tuple] = iter(())
    asked = 0
    wrong: list[tuple[int, tuple, tuple | None]] = []
    collecting: set[bool] = set()  # gc.isenabled() as each path was asked

    def arrives(self, src, address, inner, nodes):
        got, want = (src, address, inner, nodes), next(Recording.expected, None)
        if got != want and not Recording.wrong:
            Recording.wrong.append((Recording.asked, got, want))
        Recording.asked += 1
        Recording.collecting.add(gc.isenabled())
        return super().arrives(src, address, inner, nodes)


def recording(monkeypatch, fabric) -> None:
    """The check's walkers made Recording ones, expecting the paths of `fabric` that
    fabric.paths defines (every_path, the whole Path: its address as an integer, the
    destination's NIC address, the nodes it names, the source first)."""
    nic = {h.name: int(nic_address(fabric, h)) for h in fabric.hosts}
    monkeypatch.setattr(Recording, "expected", (
        (p.src, p.program, nic[p.dst], (p.src, *p.hops, p.dst)) for p in P.every_path(fabric)))
    monkeypatch.setattr(Recording, "asked", 0)
    monkeypatch.setattr(Recording, "wrong", [])
    monkeypatch.setattr(Recording, "collecting", set())
    monkeypatch.setattr(W, "Walker", Recording)


@pytest.mark.parametrize("spec", sorted(p.stem for p in (ROOT / "lab" / "fabrics").glob("*.yml")))
def test_the_check_walks_the_paths_fabric_paths_defines(monkeypatch, spec):
    """The paths verify probes (fabric.paths), each once and in verify's order (loopbacks
    first), the check deriving none of its own; every built-in fabric whole, mrc-8p-256's
    501,760 paths included, each compared as it is asked (their time is the benchmark's:
    bench/bench_routes.py and bench/bench_routes_check.py)."""
    c = compile_spec(spec)
    recording(monkeypatch, c.fabric)
    report = C.check(c.plan, T.from_plan(c.plan))
    assert report.ok
    assert Recording.wrong == [], "path number {}: asked {}, expected {}".format(
        *Recording.wrong[0])
    assert next(Recording.expected, None) is None, "a path fabric.paths defines not asked"
    assert report.paths == Recording.asked
    assert spec != "mrc-8p-256" or report.paths == 501_760


def test_a_path_asked_otherwise_than_fabric_paths_defines_is_caught(monkeypatch, mrc4p):
    """The recording above catches a check that walks another path, or one too few."""
    recording(monkeypatch, mrc4p.fabric)
    Recording.expected = iter([next(Recording.expected), ("r0h0", 1, 2, ())])
    C.check(mrc4p.plan, T.from_plan(mrc4p.plan))
    assert Recording.wrong[0][0] == 1 and Recording.wrong[0][2] == ("r0h0", 1, 2, ())
    recording(monkeypatch, mrc4p.fabric)
    Recording.expected = itertools.chain(Recording.expected, [("r0h0", 1, 2, ())])
    C.check(mrc4p.plan, T.from_plan(mrc4p.plan))
    assert Recording.wrong == [] and next(Recording.expected, None) == ("r0h0", 1, 2, ())


def test_the_collector_is_paused_while_the_paths_are_walked(monkeypatch, mrc4p):
    """Python's cyclic GC is off during the walk (a third of mrc-8p-256's time went to
    scans of the remembered ways) and as it was after, on or off."""
    recording(monkeypatch, mrc4p.fabric)
    assert gc.isenabled()
    C.check(mrc4p.plan, T.from_plan(mrc4p.plan))
    assert Recording.collecting == {False} and gc.isenabled()
    gc.disable()
    try:
        C.check(mrc4p.plan, T.from_plan(mrc4p.plan))
        assert not gc.isenabled()
    finally:
        gc.enable()


# -- reports and the CLI -----------------------------------------------------------


def test_junit_names_every_broken_path_under_its_host_pair(mrc4p):
    report = C.check(mrc4p.plan, formats.load_dir(EXAMPLES / "missing-decap", mrc4p.fabric))
    root = ET.fromstring(report.junit())
    failed = {c.get("name"): c.find("failure").text for s in root for c in s
              if c.find("failure") is not None}
    assert failed["r0h0 -> r1h0"].startswith("r0h0 -> r1h0 plane 2 via t1-0 (cross-rack): "
                                             "blackhole at r1h0: no matching route")
    assert "r1h0" in failed  # the tables case of the node
    suites = {s.get("name"): int(s.get("failures")) for s in root}
    assert suites == {"mrc-4p.routes.tables": 1, "mrc-4p.routes.paths": 4}


def test_diff_says_what_each_difference_breaks(mrc4p):
    tables = formats.load_dir(EXAMPLES / "wrong-usid", mrc4p.fabric)
    d = D.diff(mrc4p.plan, tables, C.check(mrc4p.plan, tables))
    got = {(x.change, x.planned or x.loaded): len(x.paths) for x in d.differences}
    assert got == {("missing", "SID fcbb:bb00:1200::/48 uN (F3216)"): 12,
                   ("extra", "SID fcbb:bb00:1201::/48 uN (F3216)"): 0}


def test_cli_exit_codes_and_json(tmp_path):
    assert cli("routes", "check", "mrc-4p", str(EXAMPLES / "good")).exit_code == 0
    bad = cli("routes", "check", "mrc-4p", str(EXAMPLES / "wrong-usid"), "--json")
    assert bad.exit_code == 1
    data = json.loads(bad.output)
    assert data["ok"] is False and data["paths"]["blackhole"] == 12
    assert {f["kind"] for f in data["findings"]} >= {"sid-missing", "sid-duplicated"}
    junit = tmp_path / "check.xml"
    cli("routes", "check", "mrc-4p", str(EXAMPLES / "wrong-usid"), "--junit", str(junit))
    assert ET.parse(junit).getroot().tag == "testsuites"
    assert cli("routes", "diff", "mrc-4p", str(EXAMPLES / "sonic-good")).exit_code == 0
    assert cli("routes", "diff", "mrc-4p", str(EXAMPLES / "good")).exit_code == 1
    (tmp_path / "t0-p0-r0.batch").write_text("route replace nonsense\n")
    unreadable = cli("routes", "check", "mrc-4p", str(tmp_path))
    assert unreadable.exit_code == 2 and "Traceback" not in unreadable.output
    assert "t0-p0-r0.batch line 1" in unreadable.output
    assert "missing: no tables for node t0-p0-r1" in unreadable.output


def test_export_then_check_and_diff_pass_in_every_format(tmp_path):
    for fmt in formats.FORMATS:
        out = tmp_path / fmt
        assert cli("routes", "export", "mrc-4p", str(out), "--format", fmt).exit_code == 0
        assert cli("routes", "check", "mrc-4p", str(out)).exit_code == 0, fmt
        assert cli("routes", "diff", "mrc-4p", str(out)).exit_code == 0, fmt


@pytest.mark.parametrize(("example", "last"), [
    ("good", "PASS: 128/128 paths arrive on their switches; no problem in the tables; "
             "0 warnings"),
    ("missing-t1-route", "FAIL: 122/128 paths arrive on their switches; 6 fail (blackhole "
                         "6); no other problem in the tables; 0 warnings"),
    ("wrong-usid", "FAIL: 116/128 paths arrive on their switches; 12 fail (blackhole 12); "
                   "5 other problems in the tables; 3 warnings"),
])
def test_the_last_line_says_nothing_the_rest_contradicts(example, last):
    """It read "FAIL: 122/128 paths arrive ..., 0 problems" over six failing paths: the
    paths that fail are counted as such, and "problems" are the tables' other findings."""
    got = cli("routes", "check", "mrc-4p", str(ROOT / "lab" / "routes" / example))
    assert got.output.rstrip().splitlines()[-1] == last


def test_a_default_route_that_drops_is_a_guard_not_unused(mrc4p):
    """`blackhole ::/0` catches what no other route matches: no path is meant to use it,
    so it is never "unused" (the shipped `good` tables gave 16 such warnings). A default
    route that forwards, and a narrower blackhole, no path uses are still named."""
    plan = mrc4p.plan
    tables = T.from_plan(plan)
    t0 = "t0-p0-r0"
    t = tables.nodes[t0]
    extra = (Route("::/0", "", type="blackhole"), Route("fd99::/16", "", type="blackhole"),
             Route("::/0", "eth1", via="fe80::99"))
    for i, route in enumerate(extra):
        routes = tuple(r for r in t.routes if r.dst != "::/0") + (route,)
        nodes = {**tables.nodes, t0: replace(t, routes=routes)}
        report = C.check(plan, T.Tables("x", "plan", nodes))
        unused = [f for f in report.findings if f.kind == "unused" and f.node == t0]
        assert bool(unused) == (i > 0), (route, unused)
