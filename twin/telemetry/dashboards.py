"""Grafana dashboards generated from the fabric (pure): nobody edits them by hand.

Two dashboards, one set of panels:

    overview(fabric, lab, ds)            "<lab>: fabric overview", the last 15 minutes,
                                         refreshed every 5 s
    drill(fabric, lab, ds, start, end)   "<lab>: drill <name>", the drill's fixed time
                                         range, no refresh

Each is built with grafana-foundation-sdk, Grafana's own types for dashboards, panels
and Prometheus queries, and encoded by its JSONEncoder; what leaves here is that JSON
as a mapping. The SDK is imported by the functions that build, never by the module.

The panels, top to bottom (24 grid columns):

    goodput per plane          | faults in force            | endpoints answering
    fabric link load: one row per T0-T1 link, the busier direction, over time
    EV states, stacked         | retransmits per host
    smoothed RTT per host      | link ends down by tier     | drops by tier
  on a fabric with signals (shaped, `congestion` not off; fabric.spec.signals):
    port queue depth, per switch port | port queue high water, a bar per switch port
    CE marks per port          | trims per port             | queue drops per port
    host ports' RFC 6040 counts | data plane: handled       | data plane: dropped
  else:
    data plane: packets handled             | data plane: packets dropped

The data-plane panels are on every dashboard: `twin up --dataplane` picks the data plane,
not the fabric, and on seg6local they stay empty (its SIDs keep no counters).

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
# twin_port_signals_total's `signal` values (names.PORT_SIGNALS): a panel each at switch
# ports, one panel for the three a host port counts at decapsulation
SWITCH_SIGNAL_PANELS = (("ce_marked", "CE marks per port", "CE-marked at egress"),
                        ("trimmed", "Trims per port", "trimmed to its header at egress"),
                        ("dropped", "Queue drops per port", "dropped at egress, its queue full"))
SWITCHES = "~(t0|t1)-.*"  # a node matcher: the T0s and T1s (fabric.model's names), not hosts
HOST_SIGNALS = ("ce_to_inner", "trim_to_inner", "drop_ce_not_ect")
# twin_dataplane_packets_total's `counter` values (twin.node.ebpf.COUNTERS), in two panels
DATAPLANE_HANDLED = ("shifted", "decapsulated", "encapsulated")
DATAPLANE_DROPPED = ("drop_malformed", "drop_end_of_carrier", "drop_not_ipv6_in_ipv6",
                     "hop_limit_expired")

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


# The panels are the SDK's builders (grafana-foundation-sdk, Grafana's own types), which
# the functions below import when they run: importing this module stays cheap, and a
# `twin` command that draws no dashboard never loads the SDK.


class _Board:
    """One dashboard's panels, as SDK builders: placed on the grid and numbered in the
    order they are added, each naming the lab's Prometheus on itself and its queries."""

    def __init__(self, lab: str, datasource_uid: str):
        from grafana_foundation_sdk.models.dashboard import DataSourceRef

        self.q = _Queries(lab)
        self.grid = _Grid()
        self.ds = DataSourceRef(type_val="prometheus", uid=datasource_uid)
        self.panels: list = []

    def add(self, panel, title: str, w: int, h: int, description: str,
            targets: list[tuple[str, str]]) -> None:
        from grafana_foundation_sdk.builders.prometheus import Dataquery
        from grafana_foundation_sdk.models.dashboard import GridPos
        from grafana_foundation_sdk.models.prometheus import QueryEditorMode

        pid, pos = self.grid.place(w, h)
        panel.id(pid).title(title).description(description).datasource(self.ds) \
            .grid_pos(GridPos(**pos))
        for i, (expr, legend) in enumerate(targets):
            panel.with_target(Dataquery().datasource(self.ds).editor_mode(QueryEditorMode.CODE)
                              .expr(expr).legend_format(legend).range()
                              .ref_id(chr(ord("A") + i)))
        self.panels.append(panel)


def _legend(show: bool):
    from grafana_foundation_sdk.builders.common import VizLegendOptions
    from grafana_foundation_sdk.models.common import LegendDisplayMode, LegendPlacement

    return VizLegendOptions().display_mode(LegendDisplayMode.LIST) \
        .placement(LegendPlacement.BOTTOM).show_legend(show)


def _tooltip(multi: bool):
    from grafana_foundation_sdk.builders.common import VizTooltipOptions
    from grafana_foundation_sdk.models.common import SortOrder, TooltipDisplayMode

    if multi:
        return VizTooltipOptions().mode(TooltipDisplayMode.MULTI).sort(SortOrder.DESCENDING)
    return VizTooltipOptions().mode(TooltipDisplayMode.SINGLE).sort(SortOrder.NONE)


def _color(mode: str):
    from grafana_foundation_sdk.builders.dashboard import FieldColor
    from grafana_foundation_sdk.models.dashboard import FieldColorModeId

    return FieldColor().mode(FieldColorModeId(mode))


def _steps(*steps: tuple[str, float | None]):
    """Absolute thresholds: (color, from value), the first from None (-infinity)."""
    from grafana_foundation_sdk.builders.dashboard import ThresholdsConfig
    from grafana_foundation_sdk.models.dashboard import Threshold, ThresholdsMode

    return ThresholdsConfig().mode(ThresholdsMode.ABSOLUTE).steps(
        [Threshold(value=value, color=color) for color, value in steps])


def _timeseries(unit: str, stacked: bool = False, fill: int = 10, legend: bool = True):
    from grafana_foundation_sdk.builders import timeseries
    from grafana_foundation_sdk.builders.common import StackingConfig
    from grafana_foundation_sdk.models.common import GraphDrawStyle, StackingMode, VisibilityMode

    return (timeseries.Panel().unit(unit).min(0).color_scheme(_color("palette-classic"))
            .draw_style(GraphDrawStyle.LINE).line_width(1).fill_opacity(fill)
            .show_points(VisibilityMode.NEVER).span_nulls(False)
            .stacking(StackingConfig().group("A")
                      .mode(StackingMode.NORMAL if stacked else StackingMode.NONE))
            .legend(_legend(legend)).tooltip(_tooltip(multi=True)))


def _fixed_color(color: str) -> list:
    """An override's properties: the series drawn in one named color."""
    from grafana_foundation_sdk.models.dashboard import DynamicConfigValue

    return [DynamicConfigValue(id_val="color", value={"mode": "fixed", "fixedColor": color})]


def _load_rows(links: int) -> int:
    """Grid rows for the link-load panel: about two thirds of a row (20 px) per link."""
    return max(8, min(40, 3 + math.ceil(links * 2 / 3)))


def _alternation(values: Sequence[str]) -> str:
    """A regex matcher value (sel's '~') for exactly these label values."""
    return "~" + "|".join(re.escape(v) for v in values)


def _panels(fabric: Fabric, lab: str, datasource_uid: str) -> list:
    board = _Board(lab, datasource_uid)
    _fabric_panels(board, fabric)
    if fabric.spec.signals:
        _port_panels(board)
    _dataplane_panels(board, 8 if fabric.spec.signals else 12)  # beside host ports
    return board.panels


def _fabric_panels(board: _Board, fabric: Fabric) -> None:
    """The panels every fabric has: goodput, faults, endpoints, link load, EVs,
    retransmits, RTT, links down, kernel drops."""
    from grafana_foundation_sdk.builders import stat, statetimeline, statushistory
    from grafana_foundation_sdk.builders.common import ReduceDataOptions
    from grafana_foundation_sdk.models.common import (
        BigValueColorMode,
        BigValueGraphMode,
        BigValueJustifyMode,
        BigValueTextMode,
        TimelineValueAlignment,
        VisibilityMode,
        VizOrientation,
    )
    from grafana_foundation_sdk.models.dashboard import ValueMap, ValueMappingResult

    q = board.q
    hosts = len(fabric.hosts)
    fabric_links = [lk for lk in fabric.links if lk.kind == "fabric"]
    rate_bps = fabric.spec.fabric_rate_bps
    rx = q.rate(q.sel("twin_endpoint_rx_bytes_total"))

    board.add(
        _timeseries("bps"), "Goodput per plane", 10, 8,
        "Payload the endpoints placed, by the plane its data packets arrived on "
        "(duplicates excluded), in bits/s. A plane that loses a link carries less; MRC "
        "moves its share to the others.",
        [(f"sum by (plane) ({rx}) * 8", "plane {{plane}}"), (f"sum({rx}) * 8", "all planes")])

    board.add(
        statetimeline.Panel().color_scheme(_color("thresholds"))
        .thresholds(_steps(("transparent", None), ("red", 1)))
        .mappings([ValueMap(options={"1": ValueMappingResult(text="in force", index=0)})])
        .fill_opacity(80).line_width(0).merge_values(True).show_value(VisibilityMode.NEVER)
        .align_value(TimelineValueAlignment.LEFT).row_height(0.9)
        .legend(_legend(False)).tooltip(_tooltip(multi=False)),
        "Faults in force", 10, 8,
        "One row per fault in force, as the lab's fault records say (a blind drill's "
        "hidden fault shows as 'hidden'). Every panel shows the same faults as red "
        "regions: Grafana annotations tagged mrc-twin and the lab.",
        [(q.sel("twin_fault_active"), "{{kind}} {{target}}")])

    board.add(
        stat.Panel().unit("none").min(0).max(hosts).color_scheme(_color("thresholds"))
        .thresholds(_steps(("red", None), ("green", hosts)))
        .reduce_options(ReduceDataOptions().calcs(["lastNotNull"]).fields("").values(False))
        .color_mode(BigValueColorMode.BACKGROUND).graph_mode(BigValueGraphMode.NONE)
        .text_mode(BigValueTextMode.VALUE).justify_mode(BigValueJustifyMode.AUTO)
        .orientation(VizOrientation.AUTO),
        "Endpoints answering", 4, 8,
        f"Hosts whose MRC endpoint answered the last scrape, of {hosts}.",
        [(f"sum({q.sel('twin_endpoint_up')})", "answering")])

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
    load = (statushistory.Panel().unit(unit).min(0).color_scheme(_color("continuous-GrYlRd"))
            .fill_opacity(90).line_width(0).show_value(VisibilityMode.NEVER).row_height(0.9)
            .col_width(0.95).legend(_legend(False)).tooltip(_tooltip(multi=False))
            .max_data_points(150))
    if top is not None:
        load.max(top)
    board.add(
        load, "Fabric link load (T0-T1)", 24, _load_rows(len(fabric_links)),
        f"One row per T0-T1 link ({len(fabric_links)}), named NODE:IF--PEER from its T0 "
        f"end: the busier of its two directions, {what}. A link that is down goes dark; "
        "its plane's other links take its load.",
        [(expr, "{{node}}:{{ifname}}--{{peer}}")])

    evs = _timeseries("none", stacked=True, fill=60)
    for state, color in EV_COLORS.items():
        evs.override_by_name(state, _fixed_color(color))
    board.add(
        evs, "EV states (all hosts, stacked)", 12, 8,
        "Entropy values in the open sending QPs' EV sets, by state: good (in use), skip "
        "(sent around for now), assumed_bad (retired after losses), denied (never to "
        "be used). A fault moves EVs out of good; repair moves them back.",
        [(f"sum by (state) ({q.sel('twin_endpoint_evs')})", "{{state}}")])

    board.add(
        _timeseries("pps"), "Retransmits per host", 12, 8,
        "Data packets each host's endpoint sent again, per second.",
        [(f"sum by (host) ({q.rate(q.sel('twin_endpoint_retransmits_total'))})", "{{host}}")])

    board.add(
        _timeseries("s"), "Smoothed RTT (largest QP per host)", 8, 8,
        "The largest smoothed round-trip time over each host's open sending QPs.",
        [(f"max by (host) ({q.sel('twin_endpoint_srtt_seconds')})", "{{host}}")])

    board.add(
        _timeseries("none"), "Link ends down", 8, 8,
        "Link ends that are not operationally up, by tier (host: NIC port to T0; "
        "fabric: T0 to T1). A link down counts its two ends once carrier is lost.",
        [(f"sum by (tier) (1 - {q.sel('twin_link_up')})", "{{tier}}")])

    board.add(
        _timeseries("pps"), "Link drops", 8, 8,
        "Packets the kernel dropped at link ends, by tier and direction, per second. "
        "A link-loss fault drops in nftables, which these counters do not see: its "
        "losses show as retransmits.",
        [(f"sum by (tier, direction) ({q.rate(q.sel('twin_link_drops_total'))})",
          "{{tier}} {{direction}}")])


def _port_panels(board: _Board) -> None:
    """A fabric with signals (shaped, congestion not off): each shaped switch port's
    virtual queue and what it did to packets (docs/congestion.md). One series per port,
    named NODE:IF; too many for a legend, so the tooltip lists them, deepest first."""
    from grafana_foundation_sdk.builders import bargauge
    from grafana_foundation_sdk.builders.common import ReduceDataOptions
    from grafana_foundation_sdk.models.common import BarGaugeDisplayMode, VizOrientation

    q = board.q
    port = "{{node}}:{{ifname}}"
    board.add(
        _timeseries("bytes", legend=False), "Port queue depth", 12, 9,
        "The virtual queue at each shaped switch port's egress, in bytes: the depth at "
        "the scrape, drained at the port's rate since its last packet. Past the port's "
        "ECN threshold packets leave CE-marked, past trim MRC packets are trimmed to "
        "their header, past drop they are dropped.",
        [(q.sel("twin_port_queue_bytes"), port)])

    board.add(
        bargauge.Panel().unit("bytes").min(0).color_scheme(_color("continuous-GrYlRd"))
        .display_mode(BarGaugeDisplayMode.GRADIENT).orientation(VizOrientation.HORIZONTAL)
        .reduce_options(ReduceDataOptions().calcs(["lastNotNull"]).fields("").values(False))
        .show_unfilled(True).min_viz_height(10),
        "Port queue high water", 12, 9,
        "The deepest each shaped switch port's queue has been since it was programmed "
        "(at `twin up`, or when the port's queue was set again), one bar per port.",
        [(q.sel("twin_port_queue_high_water_bytes"), port)])

    for signal, title, what in SWITCH_SIGNAL_PANELS:
        board.add(
            _timeseries("pps", legend=False), title, 8, 8,
            f"Packets each shaped switch port {what}, per second, by port.",
            [(q.rate(q.sel("twin_port_signals_total", node=SWITCHES, signal=signal)), port)])

    board.add(
        _timeseries("pps"), "Signals at host ports (RFC 6040)", 8, 8,
        "What the hosts' ports did at decapsulation, per second, summed over hosts: "
        "ce_to_inner (a CE mark copied to the inner header, for the endpoint to "
        "echo), trim_to_inner (a trimmed packet passed up as one), drop_ce_not_ect "
        "(CE on a packet whose inner header is not ECN-capable: dropped).",
        [(f"sum by (signal) "
          f"({q.rate(q.sel('twin_port_signals_total', signal=_alternation(HOST_SIGNALS)))})",
          "{{signal}}")])


def _dataplane_panels(board: _Board, w: int) -> None:
    """The eBPF data plane's SID programs, per second by counter (absent on seg6local:
    the kernel counts nothing per SID), two panels `w` columns wide."""
    q = board.q
    packets = "twin_dataplane_packets_total"
    board.add(
        _timeseries("pps"), "Data plane: packets handled", w, 8,
        "Packets the nodes' eBPF SID programs handled, per second, summed over nodes: "
        "shifted (uN: the next uSID), decapsulated, encapsulated. Empty on the seg6local "
        "data plane, whose kernel SIDs keep no counters.",
        [(f"sum by (counter) ({q.rate(q.sel(packets, counter=_alternation(DATAPLANE_HANDLED)))})",
          "{{counter}}")])
    board.add(
        _timeseries("pps"), "Data plane: packets dropped", w, 8,
        "Packets the nodes' eBPF SID programs dropped, per second, by node and reason: "
        "drop_malformed, drop_end_of_carrier, drop_not_ipv6_in_ipv6, and hop_limit_expired "
        "(shifted, then dropped by the kernel with ICMPv6 time exceeded).",
        [(f"sum by (node, counter) "
          f"({q.rate(q.sel(packets, counter=_alternation(DATAPLANE_DROPPED)))})",
          "{{node}} {{counter}}")])


# -- dashboards -------------------------------------------------------------------------


def _dashboard(uid: str, title: str, description: str, tags: list[str], time: tuple[str, str],
               refresh: str, panels: list, annotation_tags: Sequence[str]) -> dict:
    """The dashboard built by the SDK and encoded by its JSONEncoder, as a JSON mapping.

    Grafana adds its built-in "Annotations & Alerts" query to a dashboard that has none
    (the SDK's AnnotationQuery has no `builtIn`), so only the faults' is written here."""
    from grafana_foundation_sdk.builders.dashboard import (
        AnnotationQuery,
        AnnotationTarget,
        Dashboard,
        TimePicker,
    )
    from grafana_foundation_sdk.cog.encoder import JSONEncoder
    from grafana_foundation_sdk.models.dashboard import DashboardCursorSync, DataSourceRef

    faults = (AnnotationQuery().name("Faults").datasource(
                  DataSourceRef(type_val=GRAFANA_DS["type"], uid=GRAFANA_DS["uid"]))
              .enable(True).hide(False).icon_color("red")
              .target(AnnotationTarget().type("tags").tags(list(annotation_tags))
                      .match_any(False).limit(500)))
    board = (Dashboard(title).uid(uid).description(description).tags(tags)
             .readonly()  # generated: change twin.telemetry.dashboards instead
             .tooltip(DashboardCursorSync.CROSSHAIR)  # a moment lines up across panels
             .timezone("browser").time(*time).refresh(refresh)
             .timepicker(TimePicker().refresh_intervals(["5s", "10s", "30s", "1m", "5m"]))
             .annotation(faults).variables([]).links([]))
    for panel in panels:
        board.with_panel(panel)  # placed already: with_panel keeps a gridPos it is given
    model = board.build()
    model.schema_version = SCHEMA_VERSION  # no builder method sets it; the model's is 36
    return json.loads(json.dumps(model, cls=JSONEncoder))


def overview(fabric: Fabric, lab: str, datasource_uid: str) -> dict:
    """The lab's "fabric overview" dashboard: the last 15 minutes, live."""
    spec = fabric.spec
    return _dashboard(
        overview_uid(lab), f"{lab}: fabric overview",
        f"mrc-twin lab {lab}: {spec.planes} planes x {spec.racks} racks x "
        f"{spec.hosts_per_rack} hosts, {spec.t1_per_plane} T1s per plane. Generated by "
        "twin from the fabric; edits are overwritten.",
        [MRC_TAG, lab], ("now-15m", "now"), REFRESH,
        _panels(fabric, lab, datasource_uid), (MRC_TAG, lab))


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
    return _dashboard(
        drill_uid(lab, name), f"{lab}: drill {name}",
        f"mrc-twin drill {name} on lab {lab}, {_iso(start_ms)} to {_iso(end_ms)}. "
        "Generated by twin; edits are overwritten.",
        [MRC_TAG, lab, "drill"], (_iso(start_ms), _iso(end_ms)), "",
        _panels(fabric, lab, datasource_uid),
        tuple(annotations) if annotations else (MRC_TAG, lab))


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
