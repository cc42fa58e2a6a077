"""The drill report's figures, drawn with matplotlib and returned as inline SVG text.

    goodput     per plane and in total, Gbit/s from 1 ms bins, with an event strip
                (fault / endpoint / probe / drill) above and every fault a vertical line
    ev_states   how many EVs are in each state, per bin
    link_load   bytes per link as two heatmaps (host links, fabric links): one column per
                plane, one row per place in a plane (`r0h0-t0-r0`, `t0-r0-t1-0`)
    compare     total goodput of a run and its baselines, overlaid

Every function takes one run of the results (a DrillRun, twin.chaos.results: its series
stay JSON values) and returns None when the run has nothing to draw: a failed drill may
have no bins.
Time is ms after the traffic's first write (`t0_ns`). Long runs are cut down to at most
MAX_POINTS points a curve (the mean of k bins, the total's min..max as a band), so a 60 s
drill is a few hundred kB of SVG, not 60000 points a line.

matplotlib is used through `Figure` alone (no pyplot): no display, no global state.
Text stays text (svg.fonttype none): smaller, selectable, drawn in the browser's font.
"""

from __future__ import annotations

import io
import re
from dataclasses import dataclass

import numpy as np
from matplotlib import rc_context
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.colors import LinearSegmentedColormap
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, MaxNLocator
from matplotlib.transforms import blended_transform_factory

from twin.chaos.results import DrillRun, LinkLoad
from twin.mrc.modes import Mode

MAX_POINTS = 1000  # about one a pixel of a plot's width
SECONDS_FROM_MS = 5000  # a longer run's time axis is labelled in s
WIDTH_IN = 12.0
SOURCES = ("drill", "fault", "endpoint", "probe")  # event strip rows, top to bottom
SOURCE_COLOURS = {"drill": "#57606a", "fault": "#cf222e", "endpoint": "#0969da",
                  "probe": "#8250df"}
MODE_COLOURS = {Mode.MRC: "#0969da", Mode.SINGLE_PATH: "#cf222e",
                Mode.SPRAY_STATIC: "#bf8700"}
RECOVERY_KINDS = {"link-up", "clear", "revert", "reverted", "nic-up", "plane-up"}
LOCALIZED_KINDS = {"named", "localized", "localization"}  # a probe event naming a fault
STATE_COLOURS = {"good": "#1a7f37", "assumed_bad": "#cf222e", "skip": "#bf8700",
                 "denied": "#57606a"}
RC = {"svg.fonttype": "none", "svg.hashsalt": "mrc-twin", "font.size": 9,
      "font.family": "sans-serif", "font.sans-serif": ["DejaVu Sans"],
      "axes.spines.top": False, "axes.spines.right": False, "axes.grid": True,
      "grid.color": "#d0d7de", "grid.linewidth": 0.5, "legend.fontsize": 8,
      "legend.frameon": False}
LOAD_CMAP = LinearSegmentedColormap.from_list("load", ["#f6f8fa", "#54aeff", "#0a3069"])


@dataclass(frozen=True)
class Curve:
    """A series cut down to at most MAX_POINTS: point i covers bins [i*k, i*k + k)."""

    ms: np.ndarray  # each point's time: the middle of its bins
    mean: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    k: int  # bins per point


def downsample(values, bin_ms: float, max_points: int = MAX_POINTS) -> Curve:
    v = np.asarray([0 if x is None else x for x in values], dtype=float)
    k = max(1, -(-len(v) // max_points))
    n = -(-len(v) // k)
    padded = np.full(n * k, np.nan)
    padded[:len(v)] = v
    groups = padded.reshape(n, k)
    ms = (np.arange(n) * k + np.minimum(k, len(v) - np.arange(n) * k) / 2) * bin_ms
    return Curve(ms, np.nanmean(groups, axis=1), np.nanmin(groups, axis=1),
                 np.nanmax(groups, axis=1), k)


@dataclass(frozen=True)
class Mark:
    """A vertical line on the time axis: a fault applied, a fault reverted, or a fault
    named by the prober. Labelled with its kind, and its target where that changes."""

    ms: float
    kind: str
    target: str | None
    style: str  # "fault" | "recovery" | "localized"


MARK_STYLES = {"fault": ("#cf222e", "--"), "recovery": ("#1a7f37", ":"),
               "localized": ("#8250df", "-.")}


def origin_ns(run: DrillRun) -> int | None:
    """t0_ns, or failing that the earliest fault or event: the runs' time zero."""
    if isinstance(run.t0_ns, int):
        return run.t0_ns
    times = [f.at_ns for f in run.faults or []] + \
        [e.get("t_ns") for e in run.timeline or []]
    times = [t for t in times if isinstance(t, int)]
    return min(times) if times else None


def fault_marks(run: DrillRun) -> list[Mark]:
    """The timeline's fault events (every down and up of a flap) and the prober's
    localizations; from `faults`, a start or a localization the timeline lacks."""
    t0 = origin_ns(run)
    if t0 is None:
        return []
    marks = []
    for e in run.timeline or []:
        if not isinstance(e.get("t_ns"), int):
            continue
        kind, ms = str(e.get("kind") or "fault"), (e["t_ns"] - t0) / 1e6
        if e.get("source") == "fault":
            style = "recovery" if kind in RECOVERY_KINDS or kind.endswith("-up") else "fault"
            marks.append(Mark(ms, kind, e.get("target"), style))
        elif e.get("source") == "probe" and kind in LOCALIZED_KINDS:
            marks.append(Mark(ms, "named", e.get("target"), "localized"))
    for f in run.faults or []:
        at = f.at_ns
        if not isinstance(at, int):
            continue
        if not _near(marks, (at - t0) / 1e6, ("fault",)):
            marks.append(Mark((at - t0) / 1e6, str(f.kind or "fault"), f.target,
                              "fault"))
        named = f.localized_us
        if f.localized and isinstance(named, int | float) and \
                not any(m.style == "localized" for m in marks):
            marks.append(Mark((at - t0) / 1e6 + named / 1e3, "named", f.target,
                              "localized"))
    return sorted(marks, key=lambda m: m.ms)


def within(marks: list[Mark], span_ms: float) -> list[Mark]:
    """Marks on an axis from 0 to span_ms: one before the first write (a job that starts
    on a broken fabric) or after the last bin sits on the edge, its time in its label.
    Drawn where it happened, its label would push the plot aside or off the figure."""
    out = []
    for m in marks:
        if 0 <= m.ms <= span_ms:
            out.append(m)
            continue
        edge = 0.0 if m.ms < 0 else span_ms
        out.append(Mark(edge, f"{m.kind} (at {m.ms:.0f} ms)", m.target, m.style))
    return out


def _near(marks: list[Mark], ms: float, styles) -> bool:
    return any(abs(m.ms - ms) < 0.01 and m.style in styles for m in marks)


def mark_labels(marks: list[Mark]) -> list[str]:
    """`link-down t0-p0-r0:eth3`, then `link-up`, `link-down`, ... while the target holds
    (faults and localizations each keep their own last target)."""
    labels, last = [], {}
    for m in marks:
        group = "localized" if m.style == "localized" else "fault"
        same = m.target is None or last.get(group) == m.target
        labels.append(m.kind if same else f"{m.kind} {m.target}")
        last[group] = m.target
    return labels


def goodput_planes(run: DrillRun) -> tuple[dict[str, list], float] | None:
    g = run.goodput or {}
    planes = {str(p): v for p, v in (g.get("planes") or {}).items() if v}
    if not planes:
        return None
    return dict(sorted(planes.items(), key=lambda kv: _plane_key(kv[0]))), \
        (g.get("bin_ns") or 10**6) / 1e6


def total_gbps(planes: dict[str, list], bin_ms: float) -> np.ndarray:
    n = max(len(v) for v in planes.values())
    total = np.zeros(n)
    for v in planes.values():
        total[:len(v)] += np.asarray([0 if x is None else x for x in v], dtype=float)
    return total * 8 / (bin_ms * 1e6)  # bytes per bin -> Gbit/s


def goodput(run: DrillRun) -> str | None:
    """The event strip, the total, then one small row per plane (one shared y scale):
    four noisy 1 ms lines drawn over each other hide the plane that dipped."""
    got = goodput_planes(run)
    if got is None:
        return None
    planes, bin_ms = got
    span = max(len(v) for v in planes.values()) * bin_ms
    with rc_context(RC):
        fig = _figure(3.3 + 0.62 * len(planes))
        axes = fig.subplots(2 + len(planes), 1, sharex=True,
                            gridspec_kw={"height_ratios": [0.9, 1.6] + [0.62] * len(planes)})
        strip, top, rows = axes[0], axes[1], axes[2:]
        _event_strip(strip, run, span)
        total = downsample(total_gbps(planes, bin_ms), bin_ms)
        if total.k > 1:
            top.fill_between(total.ms, total.lo, total.hi, color="#0969da", alpha=0.18,
                             linewidth=0, label="min..max")
        top.plot(total.ms, total.mean, color="#0969da", linewidth=1.0, label="all planes")
        top.set_ylabel("all planes\nGbit/s")
        top.set_ylim(0, _headroom(total.hi))
        peak = 0.0
        for i, (ax, (plane, v)) in enumerate(zip(rows, planes.items(), strict=True)):
            c = downsample(np.asarray([0 if x is None else x for x in v], dtype=float)
                           * 8 / (bin_ms * 1e6), bin_ms)
            peak = max(peak, float(np.nanmax(c.hi)) if len(c.hi) else 0.0)
            if c.k > 1:  # the mean of many bins hides a short dip: the band shows it
                ax.fill_between(c.ms, c.lo, c.hi, color=f"C{i % 10}", alpha=0.2, linewidth=0)
            ax.plot(c.ms, c.mean, color=f"C{i % 10}", linewidth=0.9)
            ax.set_ylabel(f"plane {plane}", rotation=0, ha="right", va="center")
            ax.yaxis.set_major_locator(MaxNLocator(2))
        for ax in rows:
            ax.set_ylim(0, _headroom([peak]))
        rows[0].set_title("per plane, Gbit/s", fontsize=8, loc="left", pad=2)
        _time_axis(rows[-1], span, total.k, bin_ms)
        marks = within(fault_marks(run), span)
        for ax in axes:
            _fault_lines(ax, marks)
        _fault_labels(fig, strip, marks)
        if total.k > 1:
            top.legend(loc="upper left", bbox_to_anchor=(1.005, 1))
        return _svg(fig)


def flows(run: DrillRun) -> str | None:
    """Each flow's goodput over time (10 ms bins), one line a flow: whether flows share
    alike (a permutation, an incast) shows as lines together or apart."""
    g = run.flow_goodput or {}
    series = [s for s in g.get("series") or [] if any(s.get("bytes") or [])]
    if len(series) < 2:
        return None
    bin_ms = (g.get("bin_ns") or 10**7) / 1e6
    span = max(len(s["bytes"]) for s in series) * bin_ms
    with rc_context(RC):
        fig = _figure(3.0)
        ax = fig.subplots()
        top = 0.0
        for i, s in enumerate(series):
            mbps = np.asarray(s["bytes"], dtype=float) * 8 / (bin_ms * 1e3)
            c = downsample(mbps, bin_ms)
            top = max(top, float(np.nanmax(c.mean)))
            ax.plot(c.ms, c.mean, linewidth=0.9, color=f"C{i % 10}",
                    label=f"{s['src']} -> {s['dst']}" if len(series) <= 16 else None)
        ax.set_ylabel("per flow\nMbit/s")
        ax.set_ylim(0, _headroom([top]))
        _time_axis(ax, span, 1, bin_ms)
        marks = within(fault_marks(run), span)
        _fault_lines(ax, marks)
        _fault_labels(fig, ax, marks)
        if len(series) <= 16:
            ax.legend(loc="upper left", bbox_to_anchor=(1.005, 1), fontsize=6, ncol=1)
        return _svg(fig)


def signals(run: DrillRun) -> str | None:
    """Trims resent per 10 ms over the run, with the run's CE and trim totals in the
    title: where the fabric's queues overflowed, and when."""
    sig = run.signals or {}
    trims = sig.get("trims") or []
    if not any(trims):
        return None
    bin_ms = (sig.get("bin_ns") or 10**7) / 1e6
    with rc_context(RC):
        fig = _figure(2.2)
        ax = fig.subplots()
        ms = np.arange(len(trims)) * bin_ms
        ax.bar(ms, trims, width=bin_ms, align="edge", color="#cf222e", linewidth=0)
        ax.set_ylabel(f"trims\nper {bin_ms:g} ms")
        ax.set_ylim(0, _headroom([max(trims)]))
        ax.set_title(f"CE marks echoed {sig.get('ce_echoed', 0):,}, EVs skipped for them "
                     f"{sig.get('ev_skips_ecn', 0):,}, trims resent "
                     f"{sig.get('trims_resent', 0):,}", fontsize=8, loc="left")
        _time_axis(ax, len(trims) * bin_ms, 1, bin_ms)
        marks = within(fault_marks(run), len(trims) * bin_ms)
        _fault_lines(ax, marks)
        return _svg(fig)


def ev_states(run: DrillRun) -> str | None:
    ev = run.ev_states or {}
    series = {s: v for s, v in (ev.get("series") or {}).items() if v}
    if not series:
        return None
    bin_ms = (ev.get("bin_ns") or 10**6) / 1e6
    span = max(len(v) for v in series.values()) * bin_ms
    with rc_context(RC):
        fig = _figure(2.9)
        ax = fig.subplots()
        k, top = 1, 1.0
        for i, (state, v) in enumerate(series.items()):
            c = downsample(v, bin_ms)
            k, top = c.k, max(top, float(np.nanmax(c.hi)))
            colour = STATE_COLOURS.get(state, f"C{(i + 4) % 10}")
            if c.k > 1:
                ax.fill_between(c.ms, c.lo, c.hi, color=colour, alpha=0.15, linewidth=0)
            ax.step(c.ms, c.mean, where="mid", color=colour, linewidth=1.0,
                    label=state.replace("_", " "))
        ax.set_ylabel("EVs")
        ax.set_ylim(0, _headroom([top]))
        _time_axis(ax, span, k, bin_ms)
        marks = within(fault_marks(run), span)
        _fault_lines(ax, marks)
        _fault_labels(fig, ax, marks)
        ax.legend(loc="upper left", bbox_to_anchor=(1.005, 1))
        return _svg(fig)


SMOOTH_MS = 5  # the compare overlay: 5 ms means (as the dip figures use), not 1 ms noise


def compare(runs: list[DrillRun]) -> str | None:
    """Total goodput of each run (the mrc run first), overlaid; faults from the first."""
    curves = []
    for run in runs:
        got = goodput_planes(run)
        if got:
            curves.append((run, got[1], total_gbps(*got)))
    if len(curves) < 2:
        return None
    span = max(len(t) * bin_ms for _, bin_ms, t in curves)
    with rc_context(RC):
        fig = _figure(3.2)
        ax = fig.subplots()
        k, top = 1, 0.0
        for i, (run, bin_ms, total) in enumerate(curves):
            w = max(1, round(SMOOTH_MS / bin_ms))
            smooth = np.convolve(total, np.ones(w) / w, mode="same") if len(total) > w \
                else total
            c = downsample(smooth, bin_ms)
            k, top = c.k, max(top, float(np.nanmax(c.mean)))
            mode, label = str(run.mode), str(run.variant or run.mode)
            colour = MODE_COLOURS.get(mode, f"C{i + 2}") if label == mode else f"C{i + 2}"
            ax.plot(c.ms, c.mean, linewidth=1.3, color=colour,
                    label=f"{label}: done at {len(total) * bin_ms:.0f} ms")
        ax.set_ylabel("total Gbit/s\n(5 ms mean)")
        ax.set_ylim(0, _headroom([top]))
        _time_axis(ax, span, k, curves[0][1])
        marks = fault_marks(curves[0][0])
        _fault_lines(ax, marks)
        _fault_labels(fig, ax, marks)
        ax.legend(loc="upper left", bbox_to_anchor=(1.005, 1))
        return _svg(fig)


@dataclass(frozen=True)
class LoadGrid:
    """One heatmap: rows are places in a plane, columns planes, cells bytes (nan: none)."""

    kind: str
    rows: list[str]
    planes: list[int]
    bytes: np.ndarray


_PLANE_RE = re.compile(r"-p(\d+)(?=-|$)")


def link_place(link_id: str) -> str:
    """Where a link sits in its plane, the same in every plane:
    `r0h0:eth1--t0-p0-r0:eth1` -> `r0h0-t0-r0`, `t0-p0-r0:eth3--t1-p0-0:eth1` -> `t0-r0-t1-0`."""
    ends = link_id.split("--")
    if len(ends) != 2:
        return link_id
    return "-".join(_PLANE_RE.sub("", e.split(":")[0]) for e in ends)


def load_grids(link_load: list[LinkLoad]) -> list[LoadGrid]:
    grids = []
    for kind in ("host", "fabric"):
        cells: dict[tuple[str, int], float] = {}
        for entry in link_load:
            link = str(entry.link or "")
            plane = entry.plane
            if plane is None:
                m = _PLANE_RE.search(link)
                plane = int(m.group(1)) if m else 0
            if (entry.kind or _guess_kind(link)) != kind:
                continue
            key = (link_place(link), int(plane))
            cells[key] = cells.get(key, 0.0) + float(entry.bytes or 0)
        if not cells:
            continue
        rows = sorted({r for r, _ in cells}, key=_natural)
        planes = sorted({p for _, p in cells})
        grid = np.full((len(rows), len(planes)), np.nan)
        for (r, p), b in cells.items():
            grid[rows.index(r), planes.index(p)] = b
        grids.append(LoadGrid(kind, rows, planes, grid))
    return grids


def link_load(run: DrillRun) -> str | None:
    grids = load_grids(run.link_load or [])
    if not grids:
        return None
    rows = max(len(g.rows) for g in grids)
    peak = max(float(np.nanmax(g.bytes)) for g in grids) or 1.0
    with rc_context(RC | {"axes.grid": False}):
        fig = _figure(1.3 + 0.3 * rows)
        axes = fig.subplots(1, len(grids), squeeze=False)[0]
        image = None
        for ax, g in zip(axes, grids, strict=True):
            image = ax.imshow(g.bytes / 2**20, cmap=LOAD_CMAP, vmin=0, vmax=peak / 2**20,
                              aspect="auto", interpolation="nearest")
            ax.set_xticks(range(len(g.planes)), [f"plane {p}" for p in g.planes])
            ax.set_yticks(range(len(g.rows)), g.rows)
            ax.tick_params(length=0)
            ax.set_title(f"{g.kind} links (MiB)", fontsize=9, loc="left")
            for spine in ax.spines.values():
                spine.set_visible(False)
            fine = len(g.rows) * len(g.planes) <= 400
            for (r, p), b in np.ndenumerate(g.bytes):
                if fine and not np.isnan(b):
                    ax.text(p, r, _mib(b), ha="center", va="center", fontsize=7.5,
                            color="white" if b > 0.55 * peak else "#1f2328")
        fig.colorbar(image, ax=list(axes), label="MiB carried", shrink=0.9, pad=0.01)
        return _svg(fig)


# -- pieces ----------------------------------------------------------------------


def _event_strip(ax, run: DrillRun, span: float) -> None:
    t0 = origin_ns(run)
    events = [e for e in run.timeline or [] if isinstance(e.get("t_ns"), int)]
    rows = {s: i for i, s in enumerate(reversed(SOURCES))}
    for source in SOURCES:
        xs = [(e["t_ns"] - t0) / 1e6 for e in events if e.get("source") == source]
        xs = [x for x in xs if 0 <= x <= span]
        if xs:
            ax.scatter(xs, [rows[source]] * len(xs), s=40, marker="|", linewidths=1.6,
                       color=SOURCE_COLOURS[source], zorder=3)
    ax.set_yticks(list(rows.values()), list(rows))
    ax.set_ylim(-0.6, len(rows) - 0.4)
    ax.tick_params(axis="y", length=0)
    ax.grid(axis="y", visible=False)


def _fault_lines(ax, marks: list[Mark]) -> None:
    for m in marks:
        colour, dash = MARK_STYLES[m.style]
        ax.axvline(m.ms, color=colour, linestyle=dash, linewidth=0.9, alpha=0.85, zorder=1)


LABEL_ROWS = 3


def _fault_labels(fig: Figure, ax, marks: list[Mark]) -> None:
    """Labels above `ax`, centred on their lines, in up to LABEL_ROWS rows: each goes
    into the lowest row where it overlaps no other (measured after layout); a label
    with no room is left out (its line stays, and the timeline table lists it)."""
    if not marks:
        return
    trans = blended_transform_factory(ax.transData, ax.transAxes)
    texts = [ax.annotate(text, xy=(m.ms, 1.0), xycoords=trans, xytext=(0, 3),
                         textcoords="offset points", ha="center", va="bottom", fontsize=7.5,
                         color=MARK_STYLES[m.style][0], annotation_clip=False)
             for m, text in zip(marks, mark_labels(marks), strict=True)]
    fig.draw_without_rendering()
    renderer = fig.canvas.get_renderer()
    ends = [-np.inf] * LABEL_ROWS  # where each row's last label ends (display x)
    for t in texts:
        box = t.get_window_extent(renderer)
        slack = 0.08 * box.width + box.height / 2  # a browser's text runs a little wider
        row = next((r for r in range(LABEL_ROWS) if box.x0 - slack > ends[r]), None)
        if row is None:
            t.set_visible(False)
            continue
        ends[row] = box.x1 + slack
        t.xyann = (0, 3 + 10 * row)


def _figure(height_in: float) -> Figure:
    """A figure on an Agg canvas (no display): labels are measured with its renderer."""
    fig = Figure(figsize=(WIDTH_IN, height_in), layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def _headroom(values) -> float:
    top = max((float(v) for v in values if np.isfinite(v)), default=0.0)
    return top * 1.08 if top > 0 else 1.0


def _time_axis(ax, span_ms: float, k: int, bin_ms: float) -> None:
    """x from 0 to the run's end; in ms, or in s past SECONDS_FROM_MS (data stays in ms)."""
    ax.set_xlim(0, span_ms)
    unit = "ms"
    if span_ms > SECONDS_FROM_MS:
        unit = "s"
        ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: f"{x / 1000:g}"))
    bins = f"{bin_ms:g} ms bins" + ("" if k == 1 else f", {k} to a point: mean, min..max")
    ax.set_xlabel(f"{unit} after the first write ({bins})")


def _mib(b: float) -> str:
    mib = b / 2**20
    return f"{mib:.0f}" if mib >= 10 else f"{mib:.1f}" if mib >= 0.05 else "·"


def _guess_kind(link_id: str) -> str:
    return "fabric" if link_id.startswith("t0-") else "host"


def _plane_key(plane: str):
    return (0, int(plane), "") if plane.isdigit() else (1, 0, plane)


def _natural(text: str):
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", text)]


def _svg(fig: Figure) -> str:
    """The figure as an <svg> element to go inline in HTML: no XML prolog, no RDF
    metadata, no namespace declarations (HTML's parser knows svg and xlink:href), so
    the page names no URL at all."""
    buf = io.StringIO()
    fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": None})
    text = buf.getvalue()
    text = text[text.index("<svg"):]
    text = re.sub(r"\s*<metadata>.*?</metadata>", "", text, count=1, flags=re.DOTALL)
    return re.sub(r'\s+xmlns(:\w+)?="[^"]*"', "", text[:text.index(">") + 1]) \
        + text[text.index(">") + 1:]
