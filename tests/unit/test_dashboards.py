"""The generated Grafana dashboards: golden files, the fields Grafana needs, the JSON read
back by grafana-foundation-sdk's own types, every query's names against what the
exporter serves, and every query run by Prometheus's own evaluator (promtool) over
series shaped like the exporter's, for a lab with traffic and a link down."""

import enum
import json
import re
import shutil
import subprocess
import sys
import types
import typing
from pathlib import Path

import pytest
import yaml

from tests.doubles.fake_grafana import frontend_problems
from tests.helpers import golden
from tests.unit.test_telemetry import sample
from twin.lab import compile_spec
from twin.node.ebpf import COUNTERS
from twin.telemetry import dashboards as D
from twin.telemetry.exporter import families
from twin.telemetry.names import EV_STATES, METRICS, PORT_SIGNALS

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


def test_a_fabric_with_signals_matches_its_golden_file():
    golden("dashboards/mrc-4p-shaped-overview.json", D.to_json(overview("mrc-4p-shaped")))


def test_importing_the_module_loads_no_sdk():
    """The SDK is imported by the functions that build a dashboard, not by the module:
    twin.telemetry.grafana imports this one, and a command that draws nothing must not
    pay for it (tests/unit/test_cli_lazy.py)."""
    out = subprocess.run(
        [sys.executable, "-c", "import sys, twin.telemetry.dashboards; "
         "print(sorted(m for m in sys.modules if m.startswith('grafana_foundation_sdk')))"],
        capture_output=True, text=True, check=True).stdout.strip()
    assert out == "[]"


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
    (faults,) = [a for a in board["annotations"]["list"] if a["name"] == "Faults"]
    assert faults["target"]["tags"] == ["drill-d"]
    # Grafana adds its built-in "Annotations & Alerts" to a dashboard that has none; one
    # written here without `builtIn` (the SDK has no such field) would be a second
    assert [a["name"] for a in board["annotations"]["list"]] == ["Faults"]


@pytest.mark.parametrize("name,queries", [
    ("mrc-4p", 12),  # eleven panels, goodput with a second line for all planes
    ("mrc-4p-shaped", 18)])  # and six of the fabric signals: queues, CE, trims, drops
def test_every_query_names_the_lab_literally_and_a_5s_window(name, queries):
    exprs = D.panel_exprs(overview(name))
    assert len(exprs) == queries
    for expr in exprs:
        for selector in re.findall(r"\{[^}]*\}", expr):
            assert f'lab="{name}"' in selector, expr
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


def test_the_signal_panels_are_drawn_for_a_fabric_with_signals_only():
    def titles(name):
        return [p["title"] for p in overview(name)["panels"]]

    signals = ["Port queue depth", "Port queue high water", "CE marks per port",
               "Trims per port", "Queue drops per port", "Signals at host ports (RFC 6040)"]
    dataplane = ["Data plane: packets handled", "Data plane: packets dropped"]
    assert compile_spec("mrc-4p-shaped").fabric.spec.signals
    assert titles("mrc-4p-shaped")[-8:] == signals + dataplane
    assert not compile_spec("mrc-4p").fabric.spec.signals
    assert titles("mrc-4p")[-2:] == dataplane and not set(signals) & set(titles("mrc-4p"))
    # the panels every fabric has keep their places; the new ones come after them
    assert titles("mrc-4p")[:9] == titles("mrc-4p-shaped")[:9]


def test_the_panels_cover_every_signal_and_data_plane_counter():
    """A `signal` or `counter` the programs gain is drawn, or this fails."""
    switch = {signal for signal, _, _ in D.SWITCH_SIGNAL_PANELS}
    assert switch | set(D.HOST_SIGNALS) == set(PORT_SIGNALS) - {"packets"}
    assert not switch & set(D.HOST_SIGNALS)
    assert sorted(D.DATAPLANE_HANDLED + D.DATAPLANE_DROPPED) == sorted(COUNTERS)


# -- every name a query uses, the exporter serves ----------------------------------------

SELECTOR = re.compile(r"\b(twin_\w+)\{([^}]*)\}")
MATCHER = re.compile(r'(\w+)(=~|!~|!=|=)"((?:[^"\\]|\\.)*)"')


def served() -> dict[str, set[str]]:
    """What the exporter serves for a recorded sample with every kind of series (links,
    ports, the data plane, faults): metric name -> the label names of its samples."""
    out: dict[str, set[str]] = {}
    for family in families(sample(1.0, 4096, 9000, faults=[("link-down", "a--b")])):
        for s in family.samples:
            out.setdefault(s.name, set()).update(s.labels)
    return out


# label values a query may match literally, by label: what the exporter writes there
LABEL_VALUES = {"signal": set(PORT_SIGNALS), "counter": set(COUNTERS),
                "tier": {"host", "fabric"}, "direction": {"tx", "rx"}}


@pytest.mark.parametrize("name", FABRICS)
def test_every_query_reads_only_series_and_labels_the_exporter_serves(name):
    serves = served()
    assert {"twin_port_queue_bytes", "twin_port_signals_total",
            "twin_dataplane_packets_total"} <= set(serves)  # the sample has them all
    for expr in D.panel_exprs(drill(name)):
        selectors = SELECTOR.findall(expr)
        assert selectors, expr
        labels = {"direction"} if "label_replace" in expr else set()  # one it writes
        for metric, matchers in selectors:
            assert metric in serves, f"{metric}: the exporter serves no such series ({expr})"
            labels |= serves[metric]
            for key, op, value in MATCHER.findall(matchers):
                assert key in serves[metric], f"{metric} has no label {key} ({expr})"
                if op == "=" and key in LABEL_VALUES:
                    assert value in LABEL_VALUES[key], f"{key}={value!r} ({expr})"
                if op == "=~" and key in LABEL_VALUES:
                    assert set(value.split("|")) <= LABEL_VALUES[key], f"{key}=~{value!r}"
        for by in re.findall(r"\bby \(([^)]*)\)", expr):
            assert {x.strip() for x in by.split(",")} <= labels, expr
        for legend_label in re.findall(r"\{\{(\w+)\}\}", " ".join(
                t["legendFormat"] for p in drill(name)["panels"] for t in p["targets"]
                if t["expr"] == expr)):
            assert legend_label in labels, (legend_label, expr)


def test_the_names_check_catches_a_series_the_exporter_does_not_serve(monkeypatch):
    real = D._Queries.sel
    monkeypatch.setattr(D._Queries, "sel", lambda self, metric, **m: real(
        self, metric.replace("twin_port_queue_bytes", "twin_port_queue_depth_bytes"), **m))
    with pytest.raises(AssertionError, match="twin_port_queue_depth_bytes"):
        test_every_query_reads_only_series_and_labels_the_exporter_serves("mrc-4p-shaped")


# -- read back by the SDK's own types -----------------------------------------------------


def sdk_problems(obj, path: str) -> list[str]:
    """Every attribute of an SDK model object, and of the models in it, whose value is not
    of the type the SDK declares for it."""
    return [p for attr, hint in typing.get_type_hints(type(obj)).items()
            for p in _type_problems(getattr(obj, attr), hint, f"{path}.{attr}")]


def _is_model(value) -> bool:
    return type(value).__module__.startswith("grafana_foundation_sdk.")


def _type_problems(value, hint, path: str) -> list[str]:
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint in (object, typing.Any):  # a plugin's options or custom config: a model if known
        return sdk_problems(value, path) if _is_model(value) else []
    if origin in (typing.Union, types.UnionType):
        tried = [_type_problems(value, a, path) for a in args]
        return [] if [] in tried else min(tried, key=len)
    if origin is typing.Literal:
        return [] if value in args else [f"{path}: {value!r} is not one of {args}"]
    if origin is list:
        if not isinstance(value, list):
            return [f"{path}: {value!r} is not a list"]
        return [p for i, v in enumerate(value) for p in _type_problems(v, args[0], f"{path}[{i}]")]
    if origin is dict:
        if not isinstance(value, dict):
            return [f"{path}: {value!r} is not a mapping"]
        return [p for k, v in value.items() for p in _type_problems(v, args[1], f"{path}[{k!r}]")]
    if hint is type(None):
        return [] if value is None else [f"{path}: {value!r} is not null"]
    if isinstance(hint, type) and issubclass(hint, enum.Enum):  # from_json keeps the raw value
        ok = not isinstance(value, bool) and value in {m.value for m in hint}
        return [] if ok else [f"{path}: {value!r} is not a {hint.__name__}"]
    if hint in (int, float):
        numbers = (int,) if hint is int else (int, float)
        ok = isinstance(value, numbers) and not isinstance(value, bool)
        return [] if ok else [f"{path}: {value!r} is not {hint.__name__}"]
    if hint in (str, bool):
        return [] if isinstance(value, hint) else [f"{path}: {value!r} is not {hint.__name__}"]
    if isinstance(hint, type):
        if not isinstance(value, hint):
            return [f"{path}: {type(value).__name__} where a {hint.__name__} belongs"]
        return sdk_problems(value, path)
    return [f"{path}: a type this check cannot read: {hint!r}"]


def read_back(board: dict) -> list[str]:
    """The dashboard parsed by the SDK's Dashboard.from_json (every core panel's and data
    source's own types registered): what is not of its declared type, and what the
    parse lost or changed (encoded again, it must be the same JSON)."""
    from grafana_foundation_sdk.cog.encoder import JSONEncoder
    from grafana_foundation_sdk.cog.plugins import register_default_plugins
    from grafana_foundation_sdk.models.dashboard import Dashboard

    register_default_plugins()
    model = Dashboard.from_json(json.loads(json.dumps(board)))
    problems = sdk_problems(model, "dashboard")
    if json.loads(json.dumps(model, cls=JSONEncoder)) != board:
        problems.append("encoded again, the dashboard differs: a field the SDK does not know")
    return problems


@pytest.mark.parametrize("name", FABRICS)
@pytest.mark.parametrize("make", [overview, drill])
def test_the_sdk_reads_every_dashboard_back_as_it_was_written(name, make):
    from grafana_foundation_sdk.cog.plugins import register_default_plugins
    from grafana_foundation_sdk.models.dashboard import Dashboard, Panel

    board = make(name)
    assert read_back(board) == []
    register_default_plugins()
    model = Dashboard.from_json(board)
    # typed all the way down: each panel's options and custom field config are the
    # panel plugin's own models, each query the Prometheus data source's
    for p in model.panels:
        assert isinstance(p, Panel) and _is_model(p.options), p.type_val
        assert type(p.targets[0]).__module__.endswith(".prometheus"), p.type_val


HAND_EDITS = {
    "a width as text": (lambda b: b["panels"][0]["gridPos"].update(w="10"), "grid_pos.w"),
    "a minimum as text": (lambda b: b["panels"][0]["fieldConfig"]["defaults"].update(min="0"),
                          "defaults.min"),
    "a legend shown as 'yes'": (
        lambda b: b["panels"][0]["options"]["legend"].update(showLegend="yes"), "show_legend"),
    "a draw style Grafana lacks": (
        lambda b: b["panels"][0]["fieldConfig"]["defaults"]["custom"].update(drawStyle="area"),
        "draw_style"),
    "a refresh as a number": (lambda b: b.update(refresh=5), "refresh"),
    "a panel field misspelt": (lambda b: b["panels"][0].update(maxDatapoints=150),
                               "a field the SDK does not know"),
}


@pytest.mark.parametrize("edit", HAND_EDITS)
def test_a_hand_edited_field_of_the_wrong_type_fails_the_read_back(edit):
    change, where = HAND_EDITS[edit]
    board = overview()
    change(board)
    problems = read_back(board)
    assert any(where in p for p in problems), problems


# -- every query, evaluated by Prometheus ---------------------------------------------------


def _series(fabric, lab, down_link_id):
    """The exporter's series for `lab` under traffic, with one fabric link down:
    counters as promtool's expanding notation over 90 s at 1 s."""
    rows = []
    hosts = {h.name for h in fabric.hosts}

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
            if fabric.spec.signals:  # as the exporter: ports of nodes with signals only
                _port_series(add, end.node not in hosts, dead, labels)
    for node in {end.node for link in fabric.links for end in (link.a, link.b)} - hosts:
        for counter in COUNTERS:  # the ebpf data plane's SID programs
            add("twin_dataplane_packets_total", DATAPLANE_RATES.get(counter, "0x90"),
                node=node, counter=counter)
    add("twin_fault_active", "1x90", kind="link-down", target=down_link_id)
    add("twin_verify_paths_failed", "4x90")
    return rows


# per second: each switch port marks 10 packets, trims 2, drops 1; each host port passes
# 10 CE marks and 2 trims up; each switch's SID programs shift 50
SWITCH_RATES = {"packets": "0+100x90", "ce_marked": "0+10x90", "trimmed": "0+2x90",
                "dropped": "0+1x90"}
HOST_RATES = {"ce_to_inner": "0+10x90", "trim_to_inner": "0+2x90"}
DATAPLANE_RATES = {"shifted": "0+50x90"}


def _port_series(add, switch: bool, dead: bool, labels: dict) -> None:
    """One port's fabric signals, as the exporter serves them: every signal counter on
    every port, the queue on a shaped switch port (a host port's ingress has no rate)."""
    if switch:
        add("twin_port_queue_bytes", "0x90" if dead else "3000x90", **labels)
        add("twin_port_queue_high_water_bytes", "90000x90", **labels)
    rates = SWITCH_RATES if switch else HOST_RATES
    for signal in PORT_SIGNALS:
        add("twin_port_signals_total", rates.get(signal, "0x90"), signal=signal, **labels)


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
    switches = {e.node for lk in f.links for e in (lk.a, lk.b)} - {h.name for h in f.hosts}
    handled, dropped = (next(e for e in exprs if f'counter=~"{counters[0]}' in e)
                        for counters in (D.DATAPLANE_HANDLED, D.DATAPLANE_DROPPED))
    checks += [
        {"expr": handled, "eval_time": "60s",  # summed over the switches, by counter
         "exp_samples": [{"labels": f'{{counter="{c}"}}', "value": 50 * len(switches)
                          if c == "shifted" else 0} for c in D.DATAPLANE_HANDLED]},
        {"expr": f"count({dropped})", "eval_time": "60s",  # by switch and reason
         "exp_samples": [{"labels": "{}",
                          "value": len(switches) * len(D.DATAPLANE_DROPPED)}]},
    ]
    if f.spec.signals:
        ce = next(e for e in exprs if 'signal="ce_marked"' in e)
        at_hosts = next(e for e in exprs if "ce_to_inner" in e)
        host_links = [lk for lk in f.links if lk.kind == "host"]
        checks += [
            {"expr": f"count({ce})", "eval_time": "60s",  # each switch port, no host's
             "exp_samples": [{"labels": "{}", "value": 2 * len(fabric_links) + len(host_links)}]},
            {"expr": f"count({exprs[exprs.index(ce) - 1]})", "eval_time": "60s",  # high water
             "exp_samples": [{"labels": "{}", "value": 2 * len(fabric_links) + len(host_links)}]},
            {"expr": at_hosts, "eval_time": "60s",  # summed over the host ports, by signal
             "exp_samples": [{"labels": f'{{signal="{sig}"}}', "value": rate * len(host_links)}
                             for sig, rate in (("ce_to_inner", 10), ("trim_to_inner", 2),
                                               ("drop_ce_not_ect", 0))]},
        ]
    result = _promtool_test(tmp_path, [
        {"interval": "1s", "input_series": _series(f, name, down), "promql_expr_test": checks}])
    assert result.returncode == 0, result.stdout + result.stderr


@needs_promtool
@pytest.mark.parametrize("name", ["mrc-4p", "mrc-4p-shaped"])
def test_no_query_answers_for_another_lab(tmp_path, name):
    f = fabric(name)
    down = next(lk for lk in f.links if lk.kind == "fabric").id
    checks = [{"expr": e, "eval_time": "60s", "exp_samples": []}
              for e in D.panel_exprs(D.overview(f, name, DS))]
    result = _promtool_test(tmp_path, [
        {"interval": "1s", "input_series": _series(f, "other-lab", down),
         "promql_expr_test": checks}])
    assert result.returncode == 0, result.stdout + result.stderr
