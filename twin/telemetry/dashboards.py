"""Grafana dashboards generated from the fabric (pure): nobody edits them by hand.

Two dashboards, one set of panels:

    overview(fabric, lab, ds)            "<lab>: fabric overview", the last 15 minutes,
                                         refreshed every 5 s
    drill(fabric, lab, ds, start, end)   "<lab>: drill <name>", the drill's fixed time
                                         range, no refresh

The panels, top to bottom (24 grid columns):

    goodput per plane          | faults in force            | endpoints answering
    fabric link load: one row per T0-T1 link, the busier direction, over time
    EV states, stacked         | retransmits per host
    smoothed RTT per host      | link ends down by tier     | drops by tier

Every query names the lab literally (`lab="mrc-4p"`): a dashboard is one lab's, and
needs no template variable to be right. Rates are over a literal 5 s window: the
Prometheus scrape interval is 1 s, `rate()` needs two samples in its window, and five
ride over a late or missed scrape. Faults are drawn on every panel as annotation
regions, which Grafana finds by the tags `mrc-twin` and the lab (twin.telemetry.grafana
posts them from the lab's fault log, or live during a drill).

Identifiers are stable, so a dashboard pushed or provisioned again replaces itself:
the dashboard uid is `twin-<lab>` (`twin-<lab>-drill-<name>`), made to fit Grafana's
40 characters of [a-zA-Z0-9-_] by a short hash when it does not.

The metric names are twin.telemetry.names'; `panel_exprs` lists every query of a
dashboard, so a test can run them all against a real Prometheus.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Sequence
from datetime import UTC, datetime

from twin.fabric.model import Fabric

SCHEMA_VERSION = 39  # Grafana 10.4 and 11 write 39 and later; older schemas are migrated up
REFRESH = "5s"  # Grafana's default min_refresh_interval: a save asking for less is refused
RATE_WINDOW = "5s"  # five scrapes at 1 s: two samples for rate(), and room for a late one
MRC_TAG = "mrc-twin"  # on every dashboard and every annotation twin makes
UID_MAX = 40  # Grafana's limit for dashboard, folder and data source uids
GRID_COLUMNS = 24
GRAFANA_DS = {"type": "grafana", "uid": "-- Grafana --"}  # the built-in annotation store
EV_COLORS = {"good": "green", "skip": "yellow", "assumed_bad": "orange", "denied": "red"}

_UID_BAD = re.compile(r"[^a-zA-Z0-9_-]")


def short_uid(*parts: str) -> str:
    """A Grafana uid from `parts` joined by '-': as it is when it is short and clean,
    else cleaned and cut, with 8 hex digits of its hash, so different texts stay apart."""
    text = "-".join(parts)
    clean = _UID_BAD.sub("-", text)
    if clean == text and len(text) <= UID_MAX:
        return text
    digest = hashlib.sha1(text.encode()).hexdigest()[:8]
    return f"{clean[:UID_MAX - 9]}-{digest}"


def overview_uid(lab: str) -> str:
    return short_uid("twin", lab)


def drill_uid(lab: str, name: str) -> str:
    return short_uid("twin", lab, "drill", name)


# -- queries ----------------------------------------------------------------------------


def _quote(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


class _Queries:
    """The PromQL of every panel, for one lab."""

    def __init__(self, lab: str):
        self.lab = lab

    def sel(self, metric: str, **matchers: str) -> str:
        """`metric{lab="...",k="v"}`; a value starting with '~' is a regex match."""
        parts = [f"lab={_quote(self.lab)}"]
        for key, value in matchers.items():
            op, value = ("=~", value[1:]) if value.startswith("~") else ("=", value)
            parts.append(f"{key}{op}{_quote(value)}")
        return f"{metric}{{{','.join(parts)}}}"

    def rate(self, selector: str) -> str:
        return f"rate({selector}[{RATE_WINDOW}])"


# -- panels ---------------------------------------------------------------------------


class _Grid:
    """Places panels left to right, wrapping at 24 columns, and numbers them from 1."""

    def __init__(self) -> None:
        self.x = self.y = self.row_h = 0
        self.next_id = 1

    def place(self, w: int, h: int) -> tuple[int, dict]:
        if self.x + w > GRID_COLUMNS:
            self.x, self.y, self.row_h = 0, self.y + self.row_h, 0
        pos = {"h": h, "w": w, "x": self.x, "y": self.y}
        self.x += w
        self.row_h = max(self.row_h, h)
        pid, self.next_id = self.next_id, self.next_id + 1
        return pid, pos


def _target(ds: dict, ref: str, expr: str, legend: str) -> dict:
    return {"datasource": ds, "editorMode": "code", "expr": expr, "legendFormat": legend,
            "range": True, "refId": ref}


def _panel(grid: _Grid, ds: dict, kind: str, title: str, w: int, h: int, description: str,
           targets: list[tuple[str, str]], defaults: dict, options: dict,
           overrides: list[dict] | None = None, max_points: int | None = None) -> dict:
    pid, pos = grid.place(w, h)
    panel = {"id": pid, "type": kind, "title": title, "description": description,
             "gridPos": pos, "datasource": ds,
             "targets": [_target(ds, chr(ord("A") + i), expr, legend)
                         for i, (expr, legend) in enumerate(targets)],
             "fieldConfig": {"defaults": defaults, "overrides": overrides or []},
             "options": options}
    if max_points:
        panel["maxDataPoints"] = max_points
    return panel


def _timeseries(unit: str, stacked: bool = False, fill: int = 10) -> tuple[dict, dict]:
    custom = {"drawStyle": "line", "lineWidth": 1, "fillOpacity": fill, "showPoints": "never",
              "spanNulls": False,
              "stacking": {"group": "A", "mode": "normal" if stacked else "none"}}
    defaults = {"unit": unit, "min": 0, "color": {"mode": "palette-classic"}, "custom": custom}
    options = {"legend": {"displayMode": "list", "placement": "bottom", "showLegend": True},
               "tooltip": {"mode": "multi", "sort": "desc"}}
    return defaults, options


def _fixed_color(name: str, color: str) -> dict:
    return {"matcher": {"id": "byName", "options": name},
            "properties": [{"id": "color", "value": {"mode": "fixed", "fixedColor": color}}]}


def _load_rows(links: int) -> int:
    """Grid rows for the link-load panel: about two thirds of a row (20 px) per link."""
    return max(8, min(40, 3 + math.ceil(links * 2 / 3)))


def _panels(fabric: Fabric, lab: str, ds: dict) -> list[dict]:
    q = _Queries(lab)
    grid = _Grid()
    hosts = len(fabric.hosts)
    fabric_links = [lk for lk in fabric.links if lk.kind == "fabric"]
    rate_bps = fabric.spec.fabric_rate_bps
    rx = q.rate(q.sel("twin_endpoint_rx_bytes_total"))
    panels = []

    defaults, options = _timeseries("bps")
    panels.append(_panel(
        grid, ds, "timeseries", "Goodput per plane", 10, 8,
        "Payload the endpoints placed, by the plane its data packets arrived on "
        "(duplicates excluded), in bits/s. A plane that loses a link carries less; MRC "
        "moves its share to the others.",
        [(f"sum by (plane) ({rx}) * 8", "plane {{plane}}"), (f"sum({rx}) * 8", "all planes")],
        defaults, options))

    panels.append(_panel(
        grid, ds, "state-timeline", "Faults in force", 10, 8,
        "One row per fault in force, as the lab's fault records say (a blind drill's "
        "hidden fault shows as 'hidden'). Every panel shows the same faults as red "
        "regions: Grafana annotations tagged mrc-twin and the lab.",
        [(q.sel("twin_fault_active"), "{{kind}} {{target}}")],
        {"color": {"mode": "thresholds"},
         "thresholds": {"mode": "absolute",
                        "steps": [{"color": "transparent", "value": None},
                                  {"color": "red", "value": 1}]},
         "mappings": [{"type": "value", "options": {"1": {"text": "in force", "index": 0}}}],
         "custom": {"fillOpacity": 80, "lineWidth": 0}},
        {"mergeValues": True, "showValue": "never", "alignValue": "left", "rowHeight": 0.9,
         "legend": {"showLegend": False, "displayMode": "list", "placement": "bottom"},
         "tooltip": {"mode": "single", "sort": "none"}}))

    panels.append(_panel(
        grid, ds, "stat", "Endpoints answering", 4, 8,
        f"Hosts whose MRC endpoint answered the last scrape, of {hosts}.",
        [(f"sum({q.sel('twin_endpoint_up')})", "answering")],
        {"unit": "none", "min": 0, "max": hosts, "color": {"mode": "thresholds"},
         "thresholds": {"mode": "absolute",
                        "steps": [{"color": "red", "value": None},
                                  {"color": "green", "value": hosts}]}},
        {"reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False},
         "colorMode": "background", "graphMode": "none", "textMode": "value",
         "justifyMode": "auto", "orientation": "auto"}))

    # The per-link heatmap is a status-history panel, not Grafana's "heatmap": that one
    # draws the distribution of values in buckets on its y axis (a histogram over time)
    # and only names a row per series when the series are bucket bounds (`le`). Status
    # history gives each series - here each link - its own named row of cells colored by
    # value, which is what "which link is hot, and when" needs. maxDataPoints keeps a
    # cell wide enough to see over a long range.
    # Measured at the T0 end (fabric.model names T0s t0-p<plane>-r<rack>): one row per
    # link, its busier direction (tx up to the T1, rx down from it). Each direction is
    # labelled before the max: rate() drops the metric name, and tx and rx would then
    # be two series with one label set, which Prometheus refuses.
    at_t0 = {d: q.rate(q.sel(f"twin_link_{d}_bytes_total", tier="fabric", node="~t0-.*"))
             for d in ("tx", "rx")}
    both = " or ".join(f'label_replace({r}, "direction", "{d}", "", "")'
                       for d, r in at_t0.items())
    busier = f"max by (node, ifname, peer, plane) ({both}) * 8"
    if rate_bps:
        expr, unit, top = f"{busier} / {rate_bps}", "percentunit", 1
        what = f"as a share of the link's {rate_bps / 1e6:g} Mbit/s"
    else:
        expr, unit, top = busier, "bps", None
        what = "in bits/s (the spec shapes no rate: the colors scale to the busiest)"
    load_defaults = {"unit": unit, "min": 0, "color": {"mode": "continuous-GrYlRd"},
                     "custom": {"fillOpacity": 90, "lineWidth": 0}}
    if top is not None:
        load_defaults["max"] = top
    panels.append(_panel(
        grid, ds, "status-history", "Fabric link load (T0-T1)", 24,
        _load_rows(len(fabric_links)),
        f"One row per T0-T1 link ({len(fabric_links)}), named NODE:IF--PEER from its T0 "
        f"end: the busier of its two directions, {what}. A link that is down goes dark; "
        "its plane's other links take its load.",
        [(expr, "{{node}}:{{ifname}}--{{peer}}")],
        load_defaults,
        {"showValue": "never", "rowHeight": 0.9, "colWidth": 0.95,
         "legend": {"showLegend": False, "displayMode": "list", "placement": "bottom"},
         "tooltip": {"mode": "single", "sort": "none"}},
        max_points=150))

    defaults, options = _timeseries("none", stacked=True, fill=60)
    panels.append(_panel(
        grid, ds, "timeseries", "EV states (all hosts, stacked)", 12, 8,
        "Entropy values in the open sending QPs' EV sets, by state: good (in use), skip "
        "(sent around for now), assumed_bad (retired after losses), denied (never to "
        "be used). A fault moves EVs out of good; repair moves them back.",
        [(f"sum by (state) ({q.sel('twin_endpoint_evs')})", "{{state}}")],
        defaults, options,
        overrides=[_fixed_color(state, color) for state, color in EV_COLORS.items()]))

    defaults, options = _timeseries("pps")
    panels.append(_panel(
        grid, ds, "timeseries", "Retransmits per host", 12, 8,
        "Data packets each host's endpoint sent again, per second.",
        [(f"sum by (host) ({q.rate(q.sel('twin_endpoint_retransmits_total'))})", "{{host}}")],
        defaults, options))

    defaults, options = _timeseries("s")
    panels.append(_panel(
        grid, ds, "timeseries", "Smoothed RTT (largest QP per host)", 8, 8,
        "The largest smoothed round-trip time over each host's open sending QPs.",
        [(f"max by (host) ({q.sel('twin_endpoint_srtt_seconds')})", "{{host}}")],
        defaults, options))

    defaults, options = _timeseries("none")
    panels.append(_panel(
        grid, ds, "timeseries", "Link ends down", 8, 8,
        "Link ends that are not operationally up, by tier (host: NIC port to T0; "
        "fabric: T0 to T1). A link down counts its two ends once carrier is lost.",
        [(f"sum by (tier) (1 - {q.sel('twin_link_up')})", "{{tier}}")],
        defaults, options))

    defaults, options = _timeseries("pps")
    panels.append(_panel(
        grid, ds, "timeseries", "Link drops", 8, 8,
        "Packets the kernel dropped at link ends, by tier and direction, per second. "
        "A link-loss fault drops in nftables, which these counters do not see: its "
        "losses show as retransmits.",
        [(f"sum by (tier, direction) ({q.rate(q.sel('twin_link_drops_total'))})",
          "{{tier}} {{direction}}")],
        defaults, options))
    return panels


# -- dashboards -------------------------------------------------------------------------


def _annotations(tags: Sequence[str]) -> dict:
    return {"list": [
        {"builtIn": 1, "datasource": GRAFANA_DS, "enable": True, "hide": True,
         "iconColor": "rgba(0, 211, 255, 1)", "name": "Annotations & Alerts",
         "type": "dashboard"},
        {"datasource": GRAFANA_DS, "enable": True, "hide": False, "iconColor": "red",
         "name": "Faults",
         "target": {"type": "tags", "tags": list(tags), "matchAny": False, "limit": 500}},
    ]}


def _dashboard(uid: str, title: str, description: str, tags: list[str], time: dict,
               refresh: str, panels: list[dict], annotation_tags: Sequence[str]) -> dict:
    return {
        "uid": uid,
        "title": title,
        "description": description,
        "tags": tags,
        "schemaVersion": SCHEMA_VERSION,
        "editable": False,  # generated: change twin.telemetry.dashboards instead
        "graphTooltip": 1,  # a shared crosshair: a moment lines up across panels
        "timezone": "browser",
        "time": time,
        "refresh": refresh,
        "timepicker": {"refresh_intervals": ["5s", "10s", "30s", "1m", "5m"]},
        "annotations": _annotations(annotation_tags),
        "templating": {"list": []},
        "links": [],
        "panels": panels,
    }


def overview(fabric: Fabric, lab: str, datasource_uid: str) -> dict:
    """The lab's "fabric overview" dashboard: the last 15 minutes, live."""
    ds = {"type": "prometheus", "uid": datasource_uid}
    spec = fabric.spec
    return _dashboard(
        overview_uid(lab), f"{lab}: fabric overview",
        f"mrc-twin lab {lab}: {spec.planes} planes x {spec.racks} racks x "
        f"{spec.hosts_per_rack} hosts, {spec.t1_per_plane} T1s per plane. Generated by "
        "twin from the fabric; edits are overwritten.",
        [MRC_TAG, lab], {"from": "now-15m", "to": "now"}, REFRESH,
        _panels(fabric, lab, ds), (MRC_TAG, lab))


def _iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=UTC).isoformat(timespec="milliseconds") \
        .replace("+00:00", "Z")


def drill(fabric: Fabric, lab: str, datasource_uid: str, start_ms: int, end_ms: int,
          name: str, annotations: Sequence[str] | None = None) -> dict:
    """One drill's dashboard: the overview's panels over the drill's fixed time range
    (ISO 8601, UTC), not refreshed. `annotations` are the tags whose annotations it
    shows as regions (default: mrc-twin and the lab, every fault of the lab)."""
    if end_ms <= start_ms:
        raise ValueError(f"drill {name}: end {end_ms} is not after start {start_ms}")
    ds = {"type": "prometheus", "uid": datasource_uid}
    return _dashboard(
        drill_uid(lab, name), f"{lab}: drill {name}",
        f"mrc-twin drill {name} on lab {lab}, {_iso(start_ms)} to {_iso(end_ms)}. "
        "Generated by twin; edits are overwritten.",
        [MRC_TAG, lab, "drill"], {"from": _iso(start_ms), "to": _iso(end_ms)}, "",
        _panels(fabric, lab, ds), tuple(annotations) if annotations else (MRC_TAG, lab))


def panel_exprs(dashboard: dict) -> list[str]:
    """Every PromQL query of a dashboard, panel by panel (rows' nested panels too)."""
    exprs = []
    for panel in dashboard.get("panels", []):
        for p in [panel, *panel.get("panels", [])]:
            exprs.extend(t["expr"] for t in p.get("targets", []) if t.get("expr"))
    return exprs


def to_json(dashboard: dict) -> str:
    """The dashboard as a file: stable text, so a golden file and a diff can read it."""
    return json.dumps(dashboard, indent=2, ensure_ascii=False) + "\n"
