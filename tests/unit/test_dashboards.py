"""The generated Grafana dashboards: golden files, the fields Grafana needs, and every
query run by Prometheus's own evaluator (promtool) over series shaped like the
exporter's, for a lab with traffic and a link down."""

import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.doubles.fake_grafana import frontend_problems
from tests.helpers import golden
from twin.lab import compile_spec
from twin.telemetry import dashboards as D
from twin.telemetry.names import EV_STATES, METRICS

DS = "twin-prom-mrc-4p"
START_MS, END_MS = 1_700_000_000_000, 1_700_000_090_500  # a fixed drill, for the golden file
FABRICS = ["mrc-4p", "mrc-4p-shaped", "mrc-8p"]


def fabric(name="mrc-4p"):
    return compile_spec(name).fabric


def overview(name="mrc-4p"):
    return D.overview(fabric(name), name, f"twin-prom-{name}")


def drill(name="mrc-4p"):
    return D.drill(fabric(name), name, f"twin-prom-{name}", START_MS, END_MS, "link-down-t1")


# -- golden ---------------------------------------------------------------------------


def test_overview_matches_its_golden_file():
    golden("dashboards/mrc-4p-overview.json", D.to_json(overview()))


def test_drill_matches_its_golden_file():
    golden("dashboards/mrc-4p-drill.json", D.to_json(drill()))


# -- what Grafana needs -------------------------------------------------------------------


@pytest.mark.parametrize("name", FABRICS)
@pytest.mark.parametrize("make", [overview, drill])
def test_dashboards_carry_what_grafana_needs(name, make):
    board = make(name)
    assert frontend_problems(board, {f"twin-prom-{name}"}) == []
    assert board["tags"][:2] == ["mrc-twin", name]
    assert isinstance(board["schemaVersion"], int) and board["schemaVersion"] >= 36
    ids = [p["id"] for p in board["panels"]]
    assert len(ids) == len(set(ids))
    for p in board["panels"]:
        assert p["datasource"] == {"type": "prometheus", "uid": f"twin-prom-{name}"}
        assert p["gridPos"]["x"] + p["gridPos"]["w"] <= 24
        for t in p["targets"]:
            assert t["expr"] and t["refId"] and t["datasource"]["uid"] == f"twin-prom-{name}"


def test_overview_is_live_and_the_drill_is_fixed():
    live, fixed = overview(), drill()
    assert live["time"] == {"from": "now-15m", "to": "now"} and live["refresh"] == "5s"
    assert fixed["time"] == {"from": "2023-11-14T22:13:20.000Z", "to": "2023-11-14T22:14:50.500Z"}
    assert fixed["refresh"] == ""  # off
    assert fixed["uid"] != live["uid"] and "drill" in fixed["tags"]
    assert [p["title"] for p in fixed["panels"]] == [p["title"] for p in live["panels"]]
    with pytest.raises(ValueError, match="not after start"):
        D.drill(fabric(), "mrc-4p", DS, END_MS, START_MS, "backwards")


def test_a_refresh_grafana_would_refuse_is_never_asked_for():
    # Grafana refuses to save a dashboard refreshing more often than min_refresh_interval (5s)
    assert overview()["refresh"] == "5s"
    assert all(not i.endswith("ms") and i != "1s"
               for i in overview()["timepicker"]["refresh_intervals"])


def test_faults_are_annotation_regions_found_by_the_labs_tags():
    faults = [a for a in overview()["annotations"]["list"] if a["name"] == "Faults"]
    assert faults[0]["target"] == {"type": "tags", "tags": ["mrc-twin", "mrc-4p"],
                                   "matchAny": False, "limit": 500}
    assert faults[0]["datasource"]["type"] == "grafana"
    board = D.drill(fabric(), "mrc-4p", DS, START_MS, END_MS, "d", annotations=["drill-d"])
    assert board["annotations"]["list"][1]["target"]["tags"] == ["drill-d"]


def test_every_query_names_the_lab_literally_and_a_5s_window():
    exprs = D.panel_exprs(overview())
    assert len(exprs) == 10  # nine panels, goodput with a second line for all planes
    for expr in exprs:
        for selector in re.findall(r"\{[^}]*\}", expr):
            assert 'lab="mrc-4p"' in selector, expr
        assert set(re.findall(r"\[(\w+)\]", expr)) <= {"5s"}, expr
        names = set(re.findall(r"\b(twin_\w+)\b", expr))
        assert names and names <= set(METRICS), expr


def test_link_load_is_a_share_of_the_link_rate_when_the_spec_shapes_it():
    def load(name):
        return next(p for p in overview(name)["panels"] if p["type"] == "status-history")

    shaped, free = load("mrc-4p-shaped"), load("mrc-4p")
    assert shaped["fieldConfig"]["defaults"]["unit"] == "percentunit"
    assert shaped["fieldConfig"]["defaults"]["max"] == 1
    assert shaped["targets"][0]["expr"].endswith("* 8 / 50000000")
    assert free["fieldConfig"]["defaults"]["unit"] == "bps"
    assert "max" not in free["fieldConfig"]["defaults"]


@pytest.mark.parametrize("lab,name", [
    ("mrc-4p", "x"), ("a" * 24, "link-down-on-a-t1-of-plane-three"), ("l", "has spaces/slash")])
def test_uids_fit_grafana(lab, name):
    for uid in (D.overview_uid(lab), D.drill_uid(lab, name)):
        assert len(uid) <= 40 and re.fullmatch(r"[a-zA-Z0-9_-]+", uid), uid
    assert D.overview_uid("mrc-4p") == "twin-mrc-4p"
    assert D.drill_uid(lab, name) != D.drill_uid(lab, name + "2")
    assert D.short_uid("a/b") != D.short_uid("a-b")  # cleaned texts stay apart


def test_panel_exprs_reads_rows_nested_panels_too():
    board = {"panels": [{"type": "row", "panels": [{"targets": [{"expr": "up"}]}]},
                        {"targets": [{"expr": "a"}, {"refId": "B"}]}]}
    assert D.panel_exprs(board) == ["up", "a"]


# -- every query, evaluated by Prometheus ---------------------------------------------------


def _series(fabric, lab, down_link_id):
    """The exporter's series for `lab` under traffic, with one fabric link down:
    counters as promtool's expanding notation over 90 s at 1 s."""
    rows = []

    def add(name, values, **labels):
        text = ",".join(f'{k}="{v}"' for k, v in {"lab": lab, **labels}.items())
        rows.append({"series": f"{name}{{{text}}}", "values": values})

    for h in fabric.hosts:
        for p in fabric.nic_planes:
            add("twin_endpoint_tx_bytes_total", "0+125000x90", host=h.name, plane=p)
            add("twin_endpoint_rx_bytes_total", "0+125000x90", host=h.name, plane=p)
        add("twin_endpoint_retransmits_total", "0+3x90", host=h.name)
        for state in EV_STATES:
            add("twin_endpoint_evs", {"good": "120x90", "assumed_bad": "8x90"}.get(state, "0x90"),
                host=h.name, state=state)
        add("twin_endpoint_srtt_seconds", "0.0005x90", host=h.name)
        add("twin_endpoint_up", "1x90", host=h.name)
    for link in fabric.links:
        dead = link.id == down_link_id
        for end, peer in ((link.a, link.b), (link.b, link.a)):
            labels = {"node": end.node, "ifname": end.ifname, "peer": str(peer),
                      "plane": link.plane, "tier": link.kind}
            add("twin_link_tx_bytes_total", "0x90" if dead else "0+200000x90", **labels)
            add("twin_link_rx_bytes_total", "0x90" if dead else "0+100000x90", **labels)
            for direction in ("rx", "tx"):
                add("twin_link_drops_total", "0x90", direction=direction, **labels)
            add("twin_link_up", "0x90" if dead else "1x90", **labels)
    add("twin_fault_active", "1x90", kind="link-down", target=down_link_id)
    add("twin_verify_paths_failed", "4x90")
    return rows


def _promtool_test(tmp_path: Path, tests: list[dict]) -> subprocess.CompletedProcess:
    (tmp_path / "rules.yml").write_text("groups: []\n")
    (tmp_path / "test.yml").write_text(yaml.safe_dump(
        {"rule_files": ["rules.yml"], "evaluation_interval": "1s", "tests": tests}))
    return subprocess.run(["promtool", "test", "rules", "test.yml"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)


needs_promtool = pytest.mark.skipif(shutil.which("promtool") is None,
                                    reason="promtool is not installed (apt: prometheus)")


@needs_promtool
@pytest.mark.parametrize("name", ["mrc-4p", "mrc-4p-shaped"])
def test_every_query_returns_data_for_a_lab_with_traffic_and_a_link_down(tmp_path, name):
    f = fabric(name)
    down = next(lk for lk in f.links if lk.kind == "fabric").id
    exprs = D.panel_exprs(D.overview(f, name, "ds"))
    checks = [{"expr": f"clamp_max(count({e}), 1)", "eval_time": "60s",
               "exp_samples": [{"labels": "{}", "value": 1}]} for e in exprs]
    load = next(p for p in D.overview(f, name, "ds")["panels"]
                if p["type"] == "status-history")["targets"][0]["expr"]
    fabric_links = [lk for lk in f.links if lk.kind == "fabric"]
    live = next(lk for lk in fabric_links if lk.id != down)
    busier = 200000 * 8 / (f.spec.fabric_rate_bps or 1)  # tx up is the busier direction
    checks += [
        {"expr": f"count({load})", "eval_time": "60s",  # one row per T0-T1 link
         "exp_samples": [{"labels": "{}", "value": len(fabric_links)}]},
        {"expr": f"round(1000 * ({load})) and on (node, ifname) "  # one live link
                 f'twin_link_up{{node="{live.a.node}",ifname="{live.a.ifname}"}}',
         "eval_time": "60s",
         "exp_samples": [{"labels": f'{{node="{live.a.node}",ifname="{live.a.ifname}",'
                                    f'peer="{live.b}",plane="{live.plane}"}}',
                          "value": round(busier * 1000)}]},
        {"expr": f'round({exprs[0]})', "eval_time": "60s",  # goodput of each plane
         "exp_samples": [{"labels": f'{{plane="{p}"}}', "value": len(f.hosts) * 125000 * 8}
                         for p in f.nic_planes]},
        {"expr": next(e for e in exprs if "twin_link_up" in e), "eval_time": "60s",
         # link ends down: the dead link's two
         "exp_samples": [{"labels": '{tier="fabric"}', "value": 2},
                         {"labels": '{tier="host"}', "value": 0}]},
    ]
    result = _promtool_test(tmp_path, [
        {"interval": "1s", "input_series": _series(f, name, down), "promql_expr_test": checks}])
    assert result.returncode == 0, result.stdout + result.stderr


@needs_promtool
def test_no_query_answers_for_another_lab(tmp_path):
    f = fabric()
    down = next(lk for lk in f.links if lk.kind == "fabric").id
    checks = [{"expr": e, "eval_time": "60s", "exp_samples": []}
              for e in D.panel_exprs(D.overview(f, "mrc-4p", DS))]
    result = _promtool_test(tmp_path, [
        {"interval": "1s", "input_series": _series(f, "other-lab", down),
         "promql_expr_test": checks}])
    assert result.returncode == 0, result.stdout + result.stderr
