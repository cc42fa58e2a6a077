"""The kernel's own SRv6 selftests as route tables (twin.routes.formats.iproute2, batch).

tools/testing/selftests/net/srv6_*_l3vpn_test.sh set up four routers with `ip -6 route`
and `ip -6 rule` commands; tests/data/routes/kernel-selftests/ holds those commands for
three routers, transcribed as `ip -6 -batch` lines (SOURCES.md: script, commit, lines).
They are no MRC fabric, so each file's parse is pinned, not a path walk: their SIDs sit
in table 90 behind `ip -6 rule add to <locator> lookup 90` (issue 36), and each loads
or is refused for its reason.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from twin.errors import SpecError
from twin.fabric.plan import UN, LocalSid, Route
from twin.routes import formats
from twin.routes.tables import NodeTables

DATA = Path(__file__).resolve().parents[1] / "data" / "routes" / "kernel-selftests"
BATCH = formats.get("iproute2-batch")
END, END_X = "srv6_end_next_csid_l3vpn", "srv6_end_x_next_csid_l3vpn"


def parse(fabric, test: str, node: str, rules: bool = True, text: str | None = None
          ) -> NodeTables:
    beside = {f"{node}.rules": (DATA / test / f"{node}.rules").read_text()} if rules else {}
    text = (DATA / test / f"{node}.batch").read_text() if text is None else text
    return BATCH.parse_beside(text, beside, node, f"{test}/{node}.batch", fabric)


def problems(fabric, test: str, node: str, rules: bool = True) -> list:
    with pytest.raises(SpecError) as e:
        parse(fabric, test, node, rules)
    return e.value.problems


def refused(fabric, test: str, node: str, rules: bool = True) -> list[str]:
    return [f"{p.path.removeprefix(f'{test}/{node}.batch ')}: {p.message}"
            for p in problems(fabric, test, node, rules)]


def test_a_transit_router_of_the_end_next_csid_test_loads_behind_its_rules(fabric):
    """rt-3: six routes to its neighbours' locators and C-SIDs and its own End with
    next-csid (uN, lblen 32 nflen 16), all in table 90, reached by the two rules."""
    t = parse(fabric, END, "rt-3")
    assert t.sids == (LocalSid("fcbb:0:300::/48", UN, "", 32, 16),)
    assert t.routes == (
        Route("fcff:1::/32", "veth-rt-3-1", "fcf0:0:1:3::1"),
        Route("fcbb:0:100::/48", "veth-rt-3-1", "fcf0:0:1:3::1"),
        Route("fcff:2::/32", "veth-rt-3-2", "fcf0:0:2:3::2"),
        Route("fcbb:0:200::/48", "veth-rt-3-2", "fcf0:0:2:3::2"),
        Route("fcff:4::/32", "veth-rt-3-4", "fcf0:0:3:4::4"),
        Route("fcbb:0:400::/48", "veth-rt-3-4", "fcf0:0:3:4::4"))
    assert t.dropping == ()
    assert str(t.origin(t.sids[0])) == f"{END}/rt-3.batch line 12"


@pytest.mark.parametrize("test,entries", [(END, 7), (END_X, 6)])  # END_X: its uA is refused
def test_without_its_rules_every_entry_of_table_90_is_refused_naming_the_table(fabric, test,
                                                                              entries):
    """The layout issue 36 names: without the rules, table 90's routes and SIDs are not
    skipped (the check would then call the SIDs missing) but refused, each with its table."""
    found = [p for p in problems(fabric, test, "rt-3", rules=False)
             if "is in table 90, and no rules say which lookups reach that table" in p.message]
    assert len(found) == entries
    assert all("rt-3.rules" in p.hint for p in found)


def test_the_end_x_next_csid_router_is_refused_for_its_ua(fabric):
    """rt-3 of the End.X test: its own C-SID is End.X next-csid toward rt-4, a uA,
    which twin does not hold; its routes are fine behind the rules."""
    assert refused(fabric, END_X, "rt-3") == [
        "line 14: fcbb:0:300::/48 is uA (End.X flavors next-csid): not supported"]


def test_the_vpn_endpoint_of_the_end_next_csid_test_is_refused_for_its_vrf_lines(fabric):
    """rt-1 is a VPN's ingress and egress: a default unreachable route and an H.Encaps.Red
    route (encap seg6) in VRF vrf-100. `vrf NAME` (a route in the VRF's table, which the
    kernel knows from the link) is not a word twin reads; both lines are refused by it,
    before the encap seg6 is looked at."""
    assert refused(fabric, END, "rt-1") == [
        "line 6: unknown words 'vrf', 'vrf-100'", "line 16: unknown words 'vrf', 'vrf-100'"]


def test_the_rest_of_the_vpn_endpoint_loads_its_end_dt46_decaps_as_dropping(fabric):
    """Without the two VRF lines rt-1 loads: its uN, six routes, and its two End.DT46
    decaps (compressed and not) as Dropping: the kernel takes End.DT46 with vrftable only,
    and the VRF's table holds no NIC address."""
    text = "".join("#\n" if "vrf" in line.split("#")[0].split() else line
                   for line in (DATA / END / "rt-1.batch").read_text().splitlines(True))
    t = parse(fabric, END, "rt-1", text=text)
    assert t.sids == (LocalSid("fcbb:0:100::/48", UN, "", 32, 16),)
    assert len(t.routes) == 6
    assert [(d.prefix, d.what) for d in t.dropping] == [
        ("fcbb:0:100:d46::/128", "seg6local action End.DT46 vrftable 100 dev vrf-100"),
        ("fcff:1::d46/128", "seg6local action End.DT46 vrftable 100 dev vrf-100")]
    assert all("vrftable only" in d.why for d in t.dropping)
    assert [str(t.origin(d)).rsplit(" ", 1)[1] for d in t.dropping] == ["18", "21"]


def test_every_corpus_file_is_pinned_and_named_in_sources():
    pinned = {f"{END}/rt-1.batch", f"{END}/rt-1.rules", f"{END}/rt-3.batch",
              f"{END}/rt-3.rules", f"{END_X}/rt-3.batch", f"{END_X}/rt-3.rules"}
    assert {str(p.relative_to(DATA)) for p in DATA.glob("*/*")} == pinned
    sources = (DATA / "SOURCES.md").read_text()
    assert all(name in sources for name in pinned)
