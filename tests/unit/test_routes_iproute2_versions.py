"""Route tables as every iproute2 prints them: 6.3+'s nested encap, `ip -d`, nexthop objects, rules.

Real captures (tests/data/routes/ip-6.1.0 and ip-6.19.0, README there): nexthop
objects, routes through them (`nhid`), a group, a blackhole object, a second
table behind a rule, captured on one kernel and printed by Debian 12's iproute2
6.1.0 and by 6.19.0 built from source. That kernel has no seg6local, so the
nested form of seg6local routes is *derived*: `nested` below moves a flat (6.2
and earlier) capture's encap words into the object iproute2 6.3+ prints, as
ip/iproute_lwtunnel.c's lwt_print_encap does since commit 0f32ef97.
"""

import json
from pathlib import Path

import pytest

from twin.errors import SpecError
from twin.fabric.plan import UN, LocalSid, Route
from twin.routes import check as C
from twin.routes import formats
from twin.routes.tables import from_plan

DATA = Path(__file__).resolve().parents[1] / "data" / "routes"
JSON, BATCH = formats.get("iproute2-json"), formats.get("iproute2-batch")
VERSIONS = ("6.1.0", "6.19.0")
GROUP = "fcbb:bb00:600::/48"  # nh-zoo: the route through nexthop group 3
NH_ZOO = {
    Route("fcbb:bb00:200::/48", "eth3", "fe80::200"),  # nhid 1
    Route("fcbb:bb00:300::/48", "eth1", "fe80::300"),  # nhid 2
    Route("fcbb:bb00:201::/48", "", type="blackhole"),  # nhid 4, a blackhole object
    Route("fcbb:bb00:202::/48", "", type="blackhole"),
    Route("::/0", "eth4", "fe80::1"),
    Route("fcbb:bb00:700::/48", "eth1", "fe80::7"),  # table 100, nhid 5
    Route("fcbb:bb00:701::/48", "eth2", "fe80::7"),  # table 100
}


def shown(version: str, name: str) -> str:
    return (DATA / f"ip-{version}" / name).read_text()


def pairs_json(value) -> str:
    """JSON read with object_pairs_hook=list written back, keys said twice kept."""
    if isinstance(value, list) and value and isinstance(value[0], tuple):
        return "{" + ",".join(f"{json.dumps(k)}:{pairs_json(v)}" for k, v in value) + "}"
    if isinstance(value, list):
        return "[" + ",".join(map(pairs_json, value)) + "]"
    return json.dumps(value)


def without_json(text: str, dst: str) -> str:
    entries = json.loads(text, object_pairs_hook=list)
    return pairs_json([e for e in entries if dict(e)["dst"] != dst])


def without_text(text: str, dst: str) -> str:
    """The lines less a route's, and its continuation lines (nh_info, nexthop)."""
    out, skipping = [], False
    for line in text.splitlines():
        if not line.startswith("\t"):
            skipping = dst in line.split()[:2]
        if not skipping:
            out.append(line)
    return "\n".join(out) + "\n"


def read(form, text: str, beside: dict[str, str], node: str = "nh-zoo"):
    return form.parse_beside(text, beside, node, node + form.suffix, None)


def raised(form, text: str, beside: dict[str, str], node: str = "nh-zoo") -> str:
    with pytest.raises(SpecError) as e:
        read(form, text, beside, node)
    return str(e.value)


def objects(form, version: str, node: str = "nh-zoo", rules: bool = True) -> dict[str, str]:
    """The node's nexthop objects and rules, as the files beside its routes."""
    ext, side = ("json", ".json") if form is JSON else ("txt", "")
    out = {f"{node}.nexthops{side}": shown(version, f"{node}.nexthop-show.{ext}")}
    if rules:
        out[f"{node}.rules{side}"] = shown(version, f"{node}.rule-show.{ext}")
    return out


CAPTURES = [(JSON, "route-show.json"), (JSON, "route-show-d.json"),
            (BATCH, "route-show.txt"), (BATCH, "route-show-d.txt")]


# -- the captures ----------------------------------------------------------------------------


def test_both_iproute2_versions_print_this_kernels_state_alike():
    """Nothing this kernel could hold prints differently in 6.1.0 and 6.19.0: the one
    change that matters (the nested encap) needs seg6local, derived below."""
    for f in sorted((DATA / "ip-6.1.0").iterdir()):
        assert f.read_text() == shown("6.19.0", f.name), f.name


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("form,capture", CAPTURES)
def test_nhid_routes_and_a_table_behind_a_rule_read_from_the_captures(version, form, capture):
    """`ip [-d] [-j] -6 route show table all`, with `ip [-j] -6 nexthop show` and
    `ip [-j] -6 rule show` beside it; table 100's routes are walked behind the rule
    `999: from all to fcbb:bb00:700::/47 lookup 100`."""
    text = (without_json if form is JSON else without_text)(shown(version, f"nh-zoo.{capture}"),
                                                           GROUP)
    t = read(form, text, objects(form, version))
    assert set(t.routes) == NH_ZOO and len(t.routes) == len(NH_ZOO)
    (r,) = [r for r in t.routes if r.dst == "fcbb:bb00:200::/48"]
    assert " (nhid 1: nh-zoo.nexthops" in str(t.origin(r))  # the object's line named too


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("form,capture", CAPTURES)
def test_without_objects_a_route_is_read_as_the_kernel_prints_it(version, form, capture):
    """The kernel prints a single nexthop's via and dev beside nhid; `ip -d` prints the
    object itself (nh_info)."""
    text = (without_json if form is JSON else without_text)(shown(version, f"nh-zoo.{capture}"),
                                                           GROUP)
    rules = {k: v for k, v in objects(form, version).items() if ".rules" in k}
    assert set(read(form, text, rules).routes) == NH_ZOO


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("form,capture", CAPTURES)
@pytest.mark.parametrize("given", [True, False])
def test_a_nexthop_group_is_refused_as_ecmp(version, form, capture, given):
    e = raised(form, shown(version, f"nh-zoo.{capture}"), objects(form, version) if given else {})
    assert f"{GROUP} goes through nexthop group 3: ECMP, not supported" in e
    assert "spraying over paths is the sender's choice" in e


@pytest.mark.parametrize("form,capture", CAPTURES)
def test_routes_in_another_table_without_rules_are_refused_naming_it(form, capture):
    text = (without_json if form is JSON else without_text)(shown("6.19.0", f"nh-zoo.{capture}"),
                                                           GROUP)
    e = raised(form, text, objects(form, "6.19.0", rules=False))
    assert e.count("is in table 100, and no rules say which lookups reach that table") == 2
    assert ("nh-zoo.rules.json" if form is JSON else "nh-zoo.rules") in e


@pytest.mark.parametrize("form,capture", CAPTURES)
def test_a_missing_nexthop_object_names_the_route_and_the_id(form, capture):
    """Given objects, a route's id must be among them; `ip -d` prints the route's own
    object beside it (nh_info), which then serves."""
    text = (without_json if form is JSON else without_text)(shown("6.1.0", f"nh-zoo.{capture}"),
                                                           GROUP)
    beside = objects(form, "6.1.0")
    nh = next(k for k in beside if ".nexthops" in k)
    if form is JSON:
        beside[nh] = json.dumps([o for o in json.loads(beside[nh]) if o["id"] != 2])
    else:
        beside[nh] = "".join(ln for ln in beside[nh].splitlines(True) if "id 2 " not in ln)
    if "-d" in capture:
        assert set(read(form, text, beside).routes) == NH_ZOO
        return
    e = raised(form, text, beside)
    where = "entry 6" if form is JSON else "line 6"
    assert f"nh-zoo{form.suffix} {where}: fcbb:bb00:300::/48: nhid 2 is not among the " \
           "nexthop objects given" in e


def test_mrc_4p_routes_through_nexthop_objects_read_as_the_plan(compiled):
    """ip-*/t0-p0-r0.*: mrc-4p's routes for t0-p0-r0 installed through one nexthop object
    per next hop; its SIDs (seg6local, which that kernel lacks) as the lab's lines."""
    from twin.dataplane.seg6local import route_line
    plan = compiled.plan["t0-p0-r0"]
    sids = "".join(route_line(s) + "\n" for s in plan.sids)
    for version in VERSIONS:
        for capture in ("route-show.txt", "route-show-d.txt"):
            text = shown(version, f"t0-p0-r0.{capture}") + sids
            t = read(BATCH, text, objects(BATCH, version, "t0-p0-r0"), "t0-p0-r0")
            assert (sorted(t.routes), t.sids) == (sorted(plan.routes), plan.sids)


# -- nested JSON (iproute2 6.3+), derived from the flat captures --------------------------------

ENCAP_WORDS = ("action", "srh", "table", "vrftable", "nh4", "nh6", "iif", "oif", "endpoint",
               "stats64", "flavors", "lblen", "nflen",  # print_encap_seg6local
               "mode", "segs", "hmac")  # print_encap_seg6


def nested(pairs: list[tuple]) -> list[tuple]:
    """A flat entry as iproute2 6.3+ prints it: lwt_print_encap opens the "encap" object
    before encap_type and closes it after the encap's own words, which follow it (the
    route's gateway, dev and own table come after)."""
    out, i = [], 0
    while i < len(pairs):
        k, v = pairs[i]
        i += 1
        if k != "encap":
            out.append((k, v))
            continue
        inner = [("encap_type", v)]
        while i < len(pairs) and pairs[i][0] in ENCAP_WORDS:
            inner.append(pairs[i])
            i += 1
        out.append(("encap", inner))
    return out


def detailed(pairs: list[tuple]) -> list[tuple]:
    """An entry as `ip -d -j` prints it (iproute.c, show_details): type unicast first,
    table main after dev (a route's own table follows its dev), scope global after
    protocol."""
    keys = [k for k, _ in pairs]
    own_table = "dev" in keys and "table" in keys[keys.index("dev"):]
    out = [] if "type" in keys else [("type", "unicast")]
    for k, v in pairs:
        out.append((k, v))
        if k == "dev" and not own_table:
            out.append(("table", "main"))
        if k == "protocol":
            out.append(("scope", "global"))
    return out


def zoo(convert) -> str:
    """The zoo's flat capture, less what twin refuses and table 100, converted."""
    entries = json.loads((DATA / "zoo.route-show.json").read_text(), object_pairs_hook=list)
    kept = [e for e in entries if dict(e)["dst"] not in (
        "fcbb:bb00:411::/48", "fcbb:bb00:500::/48", "fcbb:bb00:600::/48",
        "fcbb:bb00:700::/48", "fcbb:bb00:701::/48")]
    return pairs_json([convert(e) for e in kept])


def test_the_derived_nested_zoo_is_the_golden_file():
    """tests/data/routes/derived/zoo.route-show.json: the zoo as 6.3+ would print it."""
    assert zoo(nested) + "\n" == (DATA / "derived" / "zoo.route-show.json").read_text()


@pytest.mark.parametrize("convert", [nested, detailed, lambda e: detailed(nested(e))],
                         ids=["nested", "detailed", "nested-detailed"])
def test_nested_and_detailed_json_read_as_the_flat(convert):
    flat = JSON.parse(zoo(lambda e: e), "zoo", "zoo.json", None)
    t = JSON.parse(zoo(convert), "zoo", "zoo.json", None)
    assert (t.routes, t.sids, t.dropping) == (flat.routes, flat.sids, flat.dropping)
    assert LocalSid("fcbb:bb00:405::/48", UN, block_len=48) in t.sids  # lblen in the object


def test_a_nested_end_dt6_keeps_its_lookup_table_apart_from_the_routes():
    """In 6.3+ the action's `table` is inside the encap object, the route's outside."""
    entry = {"dst": "fcbb:bb00:700::/48", "encap": {"encap_type": "seg6local",
             "action": "End.DT6", "table": "local"}, "dev": "eth1", "table": "100"}
    rules = json.dumps([{"priority": 999, "src": "all", "dst": "fcbb:bb00:700::",
                         "dstlen": 47, "table": "100"},
                        {"priority": 32766, "src": "all", "table": "main"}])
    t = read(JSON, json.dumps([entry]), {"zoo.rules.json": rules}, "zoo")
    assert t.sids == (LocalSid("fcbb:bb00:700::/48", "decap", "eth1"),)
    e = raised(JSON, json.dumps([entry]), {}, "zoo")
    assert "fcbb:bb00:700::/48 is in table 100" in e


def test_an_encap_object_without_its_type_is_named():
    entry = {"dst": "fcbb:bb00:100::/48", "encap": {"action": "End"}, "dev": "sr0"}
    assert "zoo.json entry 1: an encap object without encap_type" in raised(
        JSON, json.dumps([entry]), {}, "zoo")


# -- rules ----------------------------------------------------------------------------------

MAIN_RULE = "32766:\tfrom all lookup main\n"


@pytest.mark.parametrize("rules,said", [
    ("999:\tfrom all to fcbb:bb00:700::/48 lookup 100\n" + MAIN_RULE,
     "fcbb:bb00:701::/48 is in table 100, and no rule sends lookups for it there"),
    ("999:\tfrom all to fcbb:bb00:700::/49 lookup 100\n" + MAIN_RULE,
     "fcbb:bb00:700::/48 in table 100 is wider than the rule `999: from all to "
     "fcbb:bb00:700::/49 lookup 100` (r.rules line 1)"),
    ("10:\tfrom all lookup main\n999:\tfrom all to fcbb:bb00:700::/47 lookup 100\n",
     "fcbb:bb00:700::/48 in table 100 is never reached: ::/0 in table main (r.batch line 1)"),
    ("999:\tfrom all fwmark 0x1 lookup 100\n" + MAIN_RULE, "rule word 'fwmark': not one twin"),
    ("999:\tfrom fd00::/64 lookup 100\n" + MAIN_RULE, "a rule from 'fd00::/64' selects on the"),
    ("999:\tfrom all to fcbb:bb00:700::/47 goto 1000\n" + MAIN_RULE, "rule word 'goto'"),
])
def test_rules_twin_cannot_walk_as_the_kernel_are_refused(rules, said):
    text = ("default via fe80::1 dev eth4\n"
            "fcbb:bb00:700::/48 via fe80::7 dev eth1 table 100\n"
            "fcbb:bb00:701::/48 via fe80::7 dev eth2 table 100\n")
    e = raised(BATCH, text, {"r.rules": rules}, "r")
    assert said in e, e


def test_rules_in_the_batch_and_in_json_compose_the_tables():
    text = ("route add default via fe80::1 dev eth4\n"
            "route add fcbb:bb00:700::/48 via fe80::7 dev eth1 table 100\n"
            "rule add to fcbb:bb00:700::/47 lookup 100 prio 999\n"
            "rule add to ::/0 table main prio 32766\n")
    t = read(BATCH, text, {}, "r")
    assert set(t.routes) == {Route("::/0", "eth4", "fe80::1"),
                             Route("fcbb:bb00:700::/48", "eth1", "fe80::7")}
    e = raised(JSON, "[]", {"r.rules.json": json.dumps([{"priority": 1, "src": "all",
                                                         "table": "100", "fwmark": "0x1"}])},
               "r")
    assert "r.rules.json entry 1: rule key 'fwmark': not one twin reads" in e


# -- acceptance: mrc-4p's tables as 6.3+ JSON and as nhid text pass, a mistake in each is found


def nhid_text(batch: str) -> tuple[str, str]:
    """twin's `ip -batch` lines as routes through nexthop objects: (the routes, the
    `ip -6 nexthop show` lines of their objects, one per next hop)."""
    ids: dict[tuple[str, str], int] = {}
    routes = []
    for line in batch.splitlines():
        w = line.split()
        if "via" in w and "encap" not in w:
            hop = (w[w.index("via") + 1], w[w.index("dev") + 1])
            n = ids.setdefault(hop, len(ids) + 1)
            routes.append(f"{w[2]} nhid {n} proto static metric 1024 pref medium")
        else:
            routes.append(line)
    objects = "".join(f"id {n} via {g} dev {d} scope link proto static \n"
                      for (g, d), n in ids.items())
    return "\n".join(routes) + "\n", objects


@pytest.mark.parametrize("form", ["nested", "nhid"])
def test_mrc_4p_in_each_form_passes_and_a_mistake_is_named_with_file_and_line(compiled,
                                                                                 tmp_path, form):
    fabric = compiled.plan.fabric
    tables = from_plan(compiled.plan)
    if form == "nested":
        for path in formats.write_dir(tmp_path, tables, fabric, "iproute2-json"):
            entries = json.loads(path.read_text(), object_pairs_hook=list)
            path.write_text(pairs_json([nested(e) for e in entries]))
    else:
        for path in formats.write_dir(tmp_path, tables, fabric, "iproute2-batch"):
            routes, objects_ = nhid_text(path.read_text())
            path.write_text(routes)
            path.with_suffix(".nexthops").write_text(objects_)
    assert C.check(compiled.plan, formats.load_dir(tmp_path, fabric)).ok
    if form == "nested":  # t1-p0-0's uN with a 48-bit block: it shifts the wrong uSID
        path = tmp_path / "t1-p0-0.json"
        path.write_text(path.read_text().replace('"lblen":32', '"lblen":48'))
        file, where = "t1-p0-0.json", "entry 3"
    else:  # a nexthop object with another T1's address: the route goes nowhere
        path = tmp_path / "t0-p0-r0.nexthops"
        path.write_text(path.read_text().replace("via fe80::201 ", "via fe80::301 "))
        file, where = "t0-p0-r0.batch", "line 4 (nhid 2: t0-p0-r0.nexthops line 2)"
    report = C.check(compiled.plan, formats.load_dir(tmp_path, fabric))
    assert not report.ok
    causes = [cause for cause, _, _ in report.causes()]
    assert any(f"({file} {where})" in c for c in causes), causes


# -- what a file of nexthop objects gets wrong ------------------------------------------------


@pytest.mark.parametrize("objects_,said", [
    ("id 1 via fe80::9 dev eth3 scope link proto static\n",
     "line 1: fcbb:bb00:200::/48: gateway fe80::200, but its nexthop 1 has fe80::9"),
    ("id 1 encap mpls 100 via fe80::200 dev eth3\n",
     "line 1: fcbb:bb00:200::/48 goes through nexthop 1, an encap mpls nexthop: not supported"),
    ("id 1 via fe80::200 dev eth3\nid 1 via fe80::9 dev eth3\n",
     "r.nexthops line 2: nexthop 1 again (first at r.nexthops line 1)"),
    ("id 1 via fe80::200 dev eth3 colour blue\n", "r.nexthops line 1: nexthop word 'colour'"),
    ("id 1 via fe80::200 dev eth3\nfcbb:bb00:1::/48 via fe80::1 dev eth1\n",
     "r.nexthops line 2: a route in the file of nexthop objects or rules"),
])
def test_what_nexthop_objects_get_wrong_is_named(objects_, said):
    text = "fcbb:bb00:200::/48 nhid 1 via fe80::200 dev eth3 proto static\n"
    assert said in raised(BATCH, text, {"r.nexthops": objects_}, "r")


def test_side_files_are_not_nodes():
    assert JSON.node_of("r0h0.nexthops.json") is None and JSON.node_of("r0h0.rules.json") is None
    assert JSON.node_of("r0h0.json") == "r0h0"
    assert JSON.beside("r0h0") == ("r0h0.nexthops.json", "r0h0.rules.json")
    assert BATCH.beside("r0h0") == ("r0h0.nexthops", "r0h0.rules")


def test_routes_written_by_hand_take_their_objects_next_hop_or_blackhole():
    """`route add X nhid N` as FRR's zebra installs it: the route is the object's."""
    text = ("nexthop add id 1 via fe80::200 dev eth3\nnexthop add id 4 blackhole\n"
            "route add fcbb:bb00:200::/48 nhid 1 proto static\n"
            "route add fcbb:bb00:201::/48 nhid 4 proto static\n")
    t = read(BATCH, text, {}, "r")
    assert t.routes == (Route("fcbb:bb00:200::/48", "eth3", "fe80::200"),
                        Route("fcbb:bb00:201::/48", "", type="blackhole"))
    assert str(t.origin(t.routes[1])) == "r.batch line 4 (nhid 4: r.batch line 2)"
