"""Drill reports: `twin drill run --report DIR` writes three files from a run's results.

    report.html   one self-contained page (inline CSS and SVG: no script, no network),
                  readable from disk: the verdict table; mrc against each baseline where
                  a drill was run with --compare; then per run its faults, goodput per
                  plane in 1 ms bins with the faults marked, EV states, a per-link load
                  heatmap with the CE marks and trims of its switch ports, and the event
                  timeline
    report.json   the results as given, pretty-printed (lists of numbers kept on a few lines)
    junit.xml     one testsuite per run (`drill.<name>.<mode>`), one testcase per expectation

The runs are twin.chaos.results.DrillRun; report.json is what `twin drill run --json`
prints (results.document), and a saved one is read back once (`load`):

    {"drills": [{"name", "description", "lab", "mode", "baseline_of", "seed",
                 "verdict": "pass" | "fail" | "reported" (a baseline without
                            baseline_expect: shown, not judged),
                 "outcome": "byte-exact" | "RoCE QP failed: ... at 302 ms" | ...,
                 "failed_qps": [{"src", "dst", "why", "at_ms"}], "shaped": bool,
                 "expectations": [{"what", "want", "got", "ok", "judged" (false: shown
                                   only)}],
                 "faults": [{"kind", "target", "at_ns", "at_uncertainty_us", "origin",
                             "origin_ns", "detection_us", "repair_us", "packets_lost",
                             "localized", "localized_us", "crossed", "crossed_from",
                             "met"}],
                 "clock": {"kind": "local" | "nodes", "machine", "offset": {"offset_us",
                           "error_us"}, ...}   (twin.runtime.clock: what the times are on)
                 "goodput_retained", "exact", "wall_s", "t0_ns",
                 "goodput": {"bin_ns", "planes": {"0": [bytes per bin, ...]}},
                 "ev_states": {"bin_ns", "series": {"good": [...], ...}},
                 "timeline": [{"t_ns", "source", "kind", "target", "detail"}],
                 "link_load": [{"link", "plane", "kind", "bytes", "ce_marked", "trimmed",
                                "ports": [{"port", "ce_marked", "trimmed", "dropped"}]
                                (these three where the run read the switch ports' queues)}],
                 "metrics": {"dip_depth", "dip_ms", "back_to_90_ms", "completion_s",
                             "goodput_gbps"}}]}

A run of a drill with --compare shares the drill's name; its `baseline_of` names the mrc
run. The comparison does not rank a row it cannot (`unranked`): a fault's figures where
the baseline never met it, completion where a QP failed, goodput on an unshaped fabric.
Any field may be missing or null (a drill that failed early has no bins): the page
says what is missing and draws the rest. Times on the page are ms after the run's first
write. matplotlib is imported only when a page is drawn (twin.chaos.plots).
"""

from __future__ import annotations

import json
import math
from html import escape
from pathlib import Path

from twin.chaos.results import DrillRun, Judged, LinkLoad, PortSignals, document, parse
from twin.junit import Suite
from twin.junit import document as junit_document

MARKS_KEY = ("Dashed red: a fault applied; dotted green: reverted; dash-dot purple: "
             "the prober named it.")
TIMELINE_ROWS = 400  # events shown per run; report.json has them all
FILES = {"html": "report.html", "json": "report.json", "junit": "junit.xml"}


def write(runs: list[DrillRun], out_dir: Path) -> dict[str, Path]:
    """Write report.html, report.json and junit.xml into out_dir (made if missing)."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = {key: out_dir / name for key, name in FILES.items()}
    paths["json"].write_text(to_json(document(runs)) + "\n")
    paths["junit"].write_text(junit(runs))
    paths["html"].write_text(html(runs))
    return paths


def load(path: Path) -> list[DrillRun]:
    """The runs of a results file (report.json, `twin drill run --json`'s output), read
    once into types. Raises ValueError if it is not JSON."""
    return parse(json.loads(Path(path).read_text()))


def suite_name(run: DrillRun) -> str:
    return f"drill.{run.name or 'unnamed'}.{_slug(run)}"


def comparisons(all_runs: list[DrillRun]) -> list[list[DrillRun]]:
    """[mrc run, baseline, ...] for every run of a drill that has baselines: runs of the
    same drill whose `baseline_of` is its mode."""
    groups = []
    for primary in all_runs:
        if primary.baseline_of:
            continue
        # a baseline run names the main run's mode (runner.run_all), and shares its drill
        bases = [r for r in all_runs if r is not primary and r.baseline_of
                 and r.name == primary.name
                 and r.baseline_of in (primary.mode or "mrc", primary.name)]
        if bases:
            groups.append([primary, *bases])
    return groups


# -- junit.xml -------------------------------------------------------------------


def junit(runs: list[DrillRun]) -> str:
    """One suite per run, one case per expectation; a run with no expectations gets one
    case, `verdict`, so that a drill that failed before any check still fails in CI."""
    suites = []
    for run in runs:
        cases = [(str(e.what), _failure(e)) for e in run.expectations or []]
        if not cases:
            verdict = run.verdict
            cases = [("verdict", None if verdict in ("pass", "reported")
                      else f"verdict {verdict}")]
        suites.append(Suite(
            suite_name(run), cases, time=_number(run.wall_s, "{:.3f}", "0"),
            properties={k: str(getattr(run, k)) for k in ("lab", "mode", "seed", "baseline_of",
                                                  "verdict") if getattr(run, k) is not None}))
    return junit_document("twin drill", suites)


def _failure(e: Judged) -> str | None:
    return e.failure() if e.failed else None  # not judged: a reported baseline's row


# -- report.json -----------------------------------------------------------------


def to_json(value, level: int = 0, width: int = 100) -> str:
    """Indented JSON whose lists of numbers and strings fill lines (a 60 s run has 60000
    bins a plane: one a line would be most of the file). json.loads gives `value` back."""
    pad, inner = "  " * level, "  " * (level + 1)
    if isinstance(value, dict) and value:
        items = [f"{inner}{json.dumps(str(k))}: {to_json(v, level + 1, width)}"
                 for k, v in value.items()]
        return "{\n" + ",\n".join(items) + f"\n{pad}}}"
    if isinstance(value, list | tuple) and value:
        if any(isinstance(v, dict | list | tuple) and v for v in value):
            items = [inner + to_json(v, level + 1, width) for v in value]
            return "[\n" + ",\n".join(items) + f"\n{pad}]"
        words = [json.dumps(v, ensure_ascii=False) for v in value]
        if sum(len(w) + 2 for w in words) + len(pad) < width:
            return "[" + ", ".join(words) + "]"
        lines, line = [], ""
        for w in words:
            if line and len(inner) + len(line) + len(w) + 3 > width:  # ", " and ","
                lines.append(line)
                line = ""
            line += (", " if line else "") + w
        lines.append(line)
        return "[\n" + ",\n".join(inner + ln for ln in lines) + f"\n{pad}]"
    return json.dumps(value, ensure_ascii=False)


# -- report.html -----------------------------------------------------------------


def html(all_runs: list[DrillRun]) -> str:
    from twin.chaos import plots

    groups = comparisons(all_runs)
    figures = _Figures()
    body = [_header(all_runs, groups), _verdicts(all_runs)]
    if groups:
        body.append(_compare_section(groups, plots, figures))
    body += [_run_section(run, plots, figures) for run in all_runs]
    return PAGE.format(title=escape(_title(all_runs)), css=CSS, body="\n".join(body))


class _Figures:
    """Numbers each inline SVG: matplotlib's ids (clip paths) are scoped by figure, so
    two figures in one page never share one."""

    def __init__(self) -> None:
        self.count = 0

    def figure(self, svg: str | None, caption: str, missing: str) -> str:
        if not svg:
            return f'<p class="empty">{escape(missing)}</p>'
        self.count += 1
        prefix = f"f{self.count}-"
        svg = svg.replace(' id="', f' id="{prefix}').replace("url(#", f"url(#{prefix}") \
            .replace('href="#', f'href="#{prefix}')
        return f"<figure>{svg}<figcaption>{escape(caption)}</figcaption></figure>"


def _title(all_runs: list[DrillRun]) -> str:
    labs = sorted({str(r.lab) for r in all_runs if r.lab})
    return "twin drill report" + (f": {', '.join(labs)}" if labs else "")


def _header(all_runs: list[DrillRun], groups: list[list[DrillRun]]) -> str:
    failed = [r for r in all_runs if r.verdict not in ("pass", "reported")]
    reported = [r for r in all_runs if r.verdict == "reported"]
    verdict = "pass" if all_runs and not failed else "fail"
    summary = f"{len(all_runs)} run{'s' if len(all_runs) != 1 else ''}: " \
        f"{len(all_runs) - len(failed) - len(reported)} pass, {len(failed)} fail" \
        + (f", {len(reported)} baseline{'s' * (len(reported) != 1)} reported (not judged)"
           if reported else "") if all_runs else "no drill runs in these results"
    nav = ['<a href="#verdicts">verdicts</a>']
    if groups:
        nav.append('<a href="#compare">mrc vs baseline</a>')
    nav += [f'<a href="#{_anchor(r)}">{escape(_run_title(r))}</a>' for r in all_runs]
    return (f'<header><h1>{escape(_title(all_runs))} {_badge(verdict)}</h1>'
            f'<p>{escape(summary)}</p><nav>{" · ".join(nav)}</nav></header>')


def _verdicts(all_runs: list[DrillRun]) -> str:
    rows = []
    for run in all_runs:
        exps = run.expectations or [None]
        for i, e in enumerate(exps):
            cells = ""
            if i == 0:
                span = f' rowspan="{len(exps)}"' if len(exps) > 1 else ""
                cells = (f'<td{span}><a href="#{_anchor(run)}">{escape(str(run.name))}'
                         f'</a></td><td{span}>{escape(_variant(run))}</td>'
                         f'<td{span}>{_badge(run.verdict)}</td>')
            if e is None:
                rows.append(f'<tr>{cells}<td colspan="4" class="empty">no expectations '
                            'were checked</td></tr>')
                continue
            ok = bool(e.ok)
            judged = e.judged
            style, mark = ("ok", "✓") if ok else ("bad", "✗ fail") if judged \
                else ("shown", "reported")
            rows.append(f'<tr class="{style}">{cells}'
                        f'<td>{_text(e.what)}</td><td>{_text(e.want)}</td>'
                        f'<td>{_text(e.got)}</td><td class="mark">'
                        f'{mark}</td></tr>')
    table = ('<table class="verdicts"><thead><tr><th>drill</th><th>mode</th><th>verdict</th>'
             '<th>expectation</th><th>want</th><th>got</th><th>ok</th></tr></thead><tbody>'
             + "".join(rows) + "</tbody></table>") if rows else \
        '<p class="empty">No drill runs in these results.</p>'
    return f'<section id="verdicts"><h2>Verdicts</h2>{table}</section>'


COMPARE_ROWS = [  # label, how to get it from a run, format, lower is better?
    ("completion", lambda r: _metric(r, "completion_s"), "{:.3f} s", True),
    ("goodput", lambda r: _metric(r, "goodput_gbps"), "{:.3f} Gbit/s", False),
    ("goodput retained", lambda r: r.goodput_retained, "{:.3f}", False),
    ("repair, worst fault", lambda r: _worst(r, "repair_us", 1e-3), "{:.2f} ms", True),
    ("detection, worst fault", lambda r: _worst(r, "detection_us", 1), "{:.0f} µs", True),
    ("packets lost", lambda r: _total(r, "packets_lost"), "{:.0f}", True),
    ("dip depth", lambda r: _metric(r, "dip_depth"), "{:.0%}", True),
    ("back to 90%", lambda r: _metric(r, "back_to_90_ms"), "{:.1f} ms", True),
    ("byte-exact", lambda r: r.exact, "{}", None),
]
# The rows that are goodput (an unshaped fabric's are the CPU's), and those that are a
# fault's effect (nothing to compare where the baseline never met the fault)
GOODPUT_ROWS = {"completion", "goodput", "goodput retained", "dip depth", "back to 90%"}
FAULT_ROWS = {"goodput retained", "repair, worst fault", "detection, worst fault",
              "packets lost", "dip depth", "back to 90%"}
FINISH_ROWS = {"completion", "goodput"}


def unranked(primary: DrillRun, base: DrillRun, label: str) -> str | None:
    """Why a row of the comparison of `primary` with `base` is not ranked, or None: a
    QP of either failed (it never completed, nor repaired), the baseline never met a
    fault (no path its packets took crossed one, or its traffic was over before), or
    the fabric has no rates (then the CPU, not the fabric, sets goodput: one path
    costs less CPU than spraying)."""
    if label in FAULT_ROWS | FINISH_ROWS and (primary.failed_qps
                                              or base.failed_qps):
        return "a QP failed"
    if label in FAULT_ROWS and _never_met(base):
        return "baseline never met the fault"
    if label in GOODPUT_ROWS and (primary.shaped is False or
                                  base.shaped is False):
        return "CPU-bound (unshaped fabric)"
    return None


def _never_met(run: DrillRun) -> bool:
    faults = run.faults or []
    return bool(faults) and all(f.met is False for f in faults)


def unranked_note(group: list[DrillRun]) -> str | None:
    """The sentence under a comparison saying what it does not rank, and why."""
    reasons = []
    for r in group:
        if r.failed_qps:
            reasons.append(f"{_variant(r)}: {r.outcome}")
    for base in group[1:]:
        if _never_met(base) and not base.failed_qps:
            how = "no path its packets took crossed it" \
                if all(f.crossed is False for f in base.faults) \
                else "its traffic was not under it long enough"
            reasons.append(f"{_variant(base)} never met the fault ({how}): its failover "
                           "figures are not comparable")
    if any(r.shaped is False for r in group):
        reasons.append("the fabric is unshaped, so the run was CPU-bound: goodput is what "
                       "two cores allow (one path costs less CPU than spraying), not what "
                       "the transport achieves, and is not ranked; a goodput comparison "
                       "needs a shaped fabric (mrc-4p-shaped, mrc-8p-shaped)")
    return "Not ranked: " + "; ".join(dict.fromkeys(reasons)) + "." if reasons else None


def _variant(run: DrillRun) -> str:
    """A run's label: its mode, and its QPs per flow when a baseline set them."""
    return str(run.variant or run.mode or "mrc")


def _compare_section(groups: list[list[DrillRun]], plots, figures: _Figures) -> str:
    parts = ['<section id="compare"><h2>mrc vs baseline</h2>']
    for group in groups:
        primary = group[0]
        head = "".join(f"<th>{escape(_variant(r))}</th>" for r in group)
        ratio_head = "".join(f"<th>{escape(_variant(primary))} vs "
                             f"{escape(_variant(r))}</th>" for r in group[1:])
        rows = []
        outcomes = "".join(f"<td>{_text(r.outcome)}</td>" for r in group)
        rows.append(f"<tr><th>outcome</th>{outcomes}{'<td></td>' * (len(group) - 1)}</tr>")
        for label, get, fmt, lower in COMPARE_ROWS:
            values = [get(r) for r in group]
            cells = "".join(f"<td>{_number(v, fmt)}</td>" for v in values)
            ratios = "".join(
                f"<td>{escape(why)}</td>" if (why := unranked(primary, r, label))
                else f"<td>{_ratio(values[0], v, lower)}</td>"
                for r, v in zip(group[1:], values[1:], strict=True))
            rows.append(f"<tr><th>{escape(label)}</th>{cells}{ratios}</tr>")
        note = unranked_note(group)
        bases = ", ".join(_variant(r) for r in group[1:])
        parts.append(
            f'<div class="compare"><h3>{escape(str(primary.name))}: '
            f'{escape(str(primary.mode))} against {escape(bases)}</h3>'
            f'<table class="compare"><thead><tr><th></th>{head}{ratio_head}</tr></thead>'
            f'<tbody>{"".join(rows)}</tbody></table>'
            + (f'<p class="unranked">{escape(note)}</p>' if note else "")
            + figures.figure(plots.compare(group),
                             "Total goodput of each mode over time (5 ms means), the marks "
                             f"from the {primary.mode} run. " + MARKS_KEY,
                             "No goodput bins to overlay.")
            + "</div>")
    parts.append("</section>")
    return "".join(parts)


def _run_section(run: DrillRun, plots, figures: _Figures) -> str:
    facts = [("lab", run.lab), ("mode", run.mode),
             ("QPs per flow", run.qps if (run.qps or 1) > 1 else None),
             ("seed", run.seed),
             ("baseline of", run.baseline_of),
             ("wall time", _number(run.wall_s, "{:.2f} s", None)),
             ("byte-exact", run.exact),
             ("goodput retained", _number(run.goodput_retained, "{:.3f}", None))]
    for label, key, fmt in (("completion", "completion_s", "{:.3f} s"),
                            ("goodput", "goodput_gbps", "{:.3f} Gbit/s"),
                            ("dip depth", "dip_depth", "{:.0%}"),
                            ("dip length", "dip_ms", "{:.1f} ms"),
                            ("back to 90%", "back_to_90_ms", "{:.1f} ms")):
        facts.append((label, _number(_metric(run, key), fmt, None)))
    facts.append(("clock", _clock(run.clock)))
    dl = "".join(f"<div><dt>{escape(k)}</dt><dd>{_text(v)}</dd></div>"
                 for k, v in facts if v is not None)
    sig = plots.signals(run)
    signals = '<div class="signals"><h3>Congestion signals</h3>' + figures.figure(
        sig, "Trims the senders resent per 10 ms (a switch's queue full: the packet cut to "
        "its headers, NAKed and resent at once on another EV); the totals above it. "
        + MARKS_KEY, "") + "</div>" if sig else ""
    per_flow = plots.flows(run)  # a single flow has its goodput above already
    flows = '<div class="flows"><h3>Goodput per flow</h3>' + figures.figure(
        per_flow, "Each flow's acked bytes per 10 ms as Mbit/s. " + MARKS_KEY, "") \
        + "</div>" if per_flow else ""
    return (
        f'<section class="run" id="{_anchor(run)}">'
        f'<h2>{escape(_run_title(run))} {_badge(run.verdict)}</h2>'
        + (f'<p class="desc">{escape(str(run.description))}</p>'
           if run.description else "")
        + f"<dl>{dl}</dl>"
        + f'<div class="faults"><h3>Faults</h3>{_faults(run)}</div>'
        + _prober(run)
        + '<div class="goodput"><h3>Goodput</h3>'
        + figures.figure(plots.goodput(run),
                         "Acked bytes per 1 ms bin as Gbit/s: all planes, then each plane. "
                         "The strip on top marks every event of the timeline. " + MARKS_KEY,
                         "No goodput bins in this run's results.") + "</div>"
        + flows + signals
        + '<div class="ev-states"><h3>EV states</h3>'
        + figures.figure(plots.ev_states(run), "EVs in each state, per bin. " + MARKS_KEY,
                         "No EV state series in this run's results.") + "</div>"
        + '<div class="link-load"><h3>Link load</h3>'
        + figures.figure(plots.link_load(run),
                         "Bytes each link carried over the run, by plane: host links (NIC "
                         "port to T0) and fabric links (T0 to T1).",
                         "No per-link load in this run's results.")
        + _link_signals(run) + "</div>"
        + f'<div class="timeline"><h3>Event timeline</h3>{_timeline(run)}</div>'
        + "</section>")


def _faults(run: DrillRun) -> str:
    faults = run.faults or []
    if not faults:
        return '<p class="empty">No faults recorded.</p>'
    t0 = _origin(run)
    rows = []
    for f in faults:
        at = f.at_ns
        rows.append(
            "<tr>" + "".join(f"<td>{c}</td>" for c in (
                _text(f.kind), _text(f.target),
                _number((at - t0) / 1e6 if isinstance(at, int) and t0 is not None else None,
                        "{:.1f}"),
                _number(f.at_uncertainty_us, "± {:.0f}"),
                _text(f.origin),
                _number(f.detection_us, "{:.0f}"),
                _number(f.repair_us, "{:.0f}"),
                _number(f.packets_lost, "{:.0f}"),
                _yes_no(f.localized),
                _number(f.localized_us, "{:.1f}", scale=1e-3))) + "</tr>")
    return ('<table><thead><tr><th>kind</th><th>target</th><th>at (ms)</th><th>± (µs)</th>'
            '<th>counted from</th><th>detection (µs)</th><th>repair (µs)</th><th>packets lost</th>'
            '<th>localized</th><th>localized (ms)</th></tr></thead><tbody>'
            + "".join(rows) + "</tbody></table>")


PROBER_ROWS = 24
LINK_SIGNAL_ROWS = 24


def _link_signals(run: DrillRun) -> str:
    """Beside each link's bytes, the CE marks, trims and drops each of its switch ports
    made over the run, where the run read their queues: the ports that marked, trimmed
    or dropped, the most first. A run from before ports were kept has its links' sums,
    one row a link ("both ends"). Nothing where no port was read (an unshaped fabric)."""
    read = [lk for lk in run.link_load or () if isinstance(lk, LinkLoad)
            and (lk.ce_marked is not None or lk.trimmed is not None)]
    if not read:
        return ""
    rows = [(lk, p.port, p.ce_marked, p.trimmed, p.dropped) for lk in read for p in lk.ports
            if isinstance(p, PortSignals)]
    rows += [(lk, "both ends", lk.ce_marked, lk.trimmed, None) for lk in read
             if not lk.ports]
    busy = sorted((r for r in rows if r[2] or r[3] or r[4]),
                  key=lambda r: (-((r[2] or 0) + (r[3] or 0) + (r[4] or 0)), str(r[0].link),
                                 str(r[1])))
    if not busy:
        return (f'<p class="empty">No switch port marked or trimmed ({len(read)} links '
                "read).</p>")
    shown = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in (
        _text(lk.link), _text(port), _number(lk.bytes, "{:,.0f}"), _number(ce, "{:,.0f}"),
        _number(trimmed, "{:,.0f}"), _number(dropped, "{:,.0f}"))) + "</tr>"
        for lk, port, ce, trimmed, dropped in busy[:LINK_SIGNAL_ROWS])
    more = len(busy) - LINK_SIGNAL_ROWS
    return ('<table class="link-signals"><thead><tr><th>link</th><th>port</th>'
            '<th>link bytes</th><th>CE marked</th><th>trimmed</th><th>dropped</th></tr>'
            '</thead><tbody>' + shown + "</tbody></table>"
            + (f'<p class="empty">and {more} more in report.json</p>' if more > 0 else ""))


def _prober(run: DrillRun) -> str:
    """The continuous prober's verdict on each link, beside the deepest its queue got
    (twin.chaos.queues): a congested link is deep and "congested", never "faulty"."""
    p = run.prober
    if not isinstance(p, dict):
        return ""
    rows = []
    for v in (p.get("verdicts") or [])[:PROBER_ROWS]:
        verdict = str(v.get("verdict"))
        rows.append(f'<tr class="verdict-{escape(verdict)}">' + "".join(
            f"<td>{c}</td>" for c in (
                _text(v.get("link")), _text(verdict),
                _number(v.get("max_queue_bytes"), "{:,.0f}"),
                _number(v.get("ce_marked"), "{:,.0f}"), _number(v.get("trimmed"), "{:,.0f}"),
                _number(v.get("dropped"), "{:,.0f}"))) + "</tr>")
    more = len(p.get("verdicts") or []) - PROBER_ROWS
    table = ('<table><thead><tr><th>link</th><th>prober</th><th>deepest queue (bytes)</th>'
             '<th>CE marked</th><th>trimmed</th><th>dropped</th></tr></thead><tbody>'
             + "".join(rows) + "</tbody></table>"
             + (f'<p class="empty">and {more} more in report.json</p>' if more > 0 else "")) \
        if rows else '<p class="empty">No queue held anything and the prober named nothing.</p>'
    return ('<div class="prober"><h3>Prober verdicts and queues</h3>'
            f'<p>named faulty {_text(p.get("named_faulty"))}, congested '
            f'{_text(p.get("named_congested"))} (probes come back CE-marked: a queue past its '
            'ecn_min, not a fault); queues read '
            f'{_text(p.get("queue_samples"))} times, each link at its deeper end.</p>'
            + table + "</div>")


def _clock(clock) -> str | None:
    """What the run's times are on, in a line (None: an older run says nothing)."""
    if not isinstance(clock, dict):
        return None
    if clock.get("kind") != "nodes":
        return "this machine's CLOCK_MONOTONIC (twin's, the nodes', the endpoints')"
    off = clock.get("offset") or {}
    return (f"the nodes' CLOCK_MONOTONIC ({clock.get('machine')}): faults stamped in the "
            f"nodes ({clock.get('stamped_changes', 0)} changes; "
            f"{clock.get('unstamped_changes', 0)} timed by twin), twin's times converted at "
            f"{off.get('offset_us', 0):.0f} ± {off.get('error_us', 0):.0f} µs")


def _timeline(run: DrillRun) -> str:
    events = [e for e in run.timeline or [] if isinstance(e, dict)]
    if not events:
        return '<p class="empty">No events recorded.</p>'
    t0 = _origin(run)
    events.sort(key=lambda e: e.get("t_ns") if isinstance(e.get("t_ns"), int) else 0)
    rows = []
    for e in events[:TIMELINE_ROWS]:
        t = e.get("t_ns")
        source = str(e.get("source") or "")
        ms = (t - t0) / 1e6 if isinstance(t, int) and t0 is not None else None
        rows.append(
            f'<tr class="src-{escape(source)}"><td class="num">{_number(ms, "{:.3f}")}</td>'
            f'<td><span class="tag">{escape(source or "—")}</span></td>'
            f'<td>{_text(e.get("kind"))}</td><td>{_text(e.get("target"))}</td>'
            f'<td>{_text(e.get("detail"))}</td></tr>')
    more = len(events) - TIMELINE_ROWS
    note = f'<p class="empty">{more} more events in report.json.</p>' if more > 0 else ""
    return ('<table class="events"><thead><tr><th>t (ms)</th><th>source</th><th>kind</th>'
            '<th>target</th><th>detail</th></tr></thead><tbody>' + "".join(rows)
            + "</tbody></table>" + note)


# -- small pieces ----------------------------------------------------------------


def _origin(run: DrillRun) -> int | None:
    from twin.chaos.plots import origin_ns

    return origin_ns(run)


def _metric(run: DrillRun, key: str):
    return (run.metrics or {}).get(key)


def _worst(run: DrillRun, key: str, scale: float):
    values = [getattr(f, key) for f in run.faults or []]
    values = [v for v in values if isinstance(v, int | float)]
    return max(values) * scale if values else None


def _total(run: DrillRun, key: str):
    values = [getattr(f, key) for f in run.faults or []]
    values = [v for v in values if isinstance(v, int | float)]
    return sum(values) if values else None


def _ratio(ours, theirs, lower_is_better) -> str:
    if lower_is_better is None or not _finite(ours) or not _finite(theirs) \
            or not ours or not theirs:
        return "—"
    r = theirs / ours if lower_is_better else ours / theirs
    word = "better" if r > 1.005 else "worse" if r < 0.995 else "same"
    return f"{r:.2f}× ({word})" if word != "same" else "same"


def _finite(v) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)


def _number(v, fmt: str, missing: str | None = "—", scale: float = 1.0):
    if isinstance(v, bool):
        return _yes_no(v)
    if not _finite(v):
        return missing if v is None or missing is None else escape(str(v))
    return escape(fmt.format(v * scale))


def _yes_no(v) -> str:
    return "—" if v is None else "yes" if v else "no"


def _text(v) -> str:
    if isinstance(v, bool):
        return _yes_no(v)
    return "—" if v is None or v == "" else escape(str(v))


def _badge(verdict) -> str:
    v = str(verdict or "unknown")
    style = v if v in ("pass", "reported") else "fail"
    return f'<span class="badge {style}">{escape(v)}</span>'


def _run_title(run: DrillRun) -> str:
    return f"{run.name or 'unnamed'} · {run.variant or run.mode or 'mrc'}"


def _slug(run: DrillRun) -> str:
    """The run's mode, and its QPs when a baseline set them: `single-path-x16-QPs`."""
    raw = str(run.variant or run.mode or "mrc").replace(" ", "-")
    return "".join(c if c.isalnum() or c in "-_" else "-" for c in raw)


def _anchor(run: DrillRun) -> str:
    raw = f"run-{run.name or 'unnamed'}-{_slug(run)}"
    return "".join(c if c.isalnum() or c in "-_" else "-" for c in raw)


PAGE = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title}</title>
<style>{css}</style>
</head>
<body>
{body}
</body>
</html>
"""

CSS = """
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", "DejaVu Sans", sans-serif;
       color: #1f2328; background: #fff; margin: 0 auto; padding: 16px 24px 48px;
       max-width: 1240px; }
h1 { font-size: 22px; margin: 8px 0 4px; }
h2 { font-size: 18px; margin: 32px 0 8px; padding-top: 8px; border-top: 2px solid #d0d7de; }
h3 { font-size: 15px; margin: 20px 0 6px; }
nav a { color: #0969da; text-decoration: none; }
table { border-collapse: collapse; margin: 4px 0 8px; font-size: 13px; }
th, td { border: 1px solid #d0d7de; padding: 3px 8px; text-align: left; vertical-align: top; }
thead th { background: #f6f8fa; }
table.verdicts { width: 100%; }
tr.ok td { background: #f0fff4; }
tr.bad td { background: #ffebe9; color: #82071e; font-weight: 600; }
td.mark { white-space: nowrap; }
table.compare td, table.compare th { text-align: right; }
table.compare tbody th { text-align: left; background: #f6f8fa; }
table.events { width: 100%; }
table.events td.num { text-align: right; font-variant-numeric: tabular-nums;
                        white-space: nowrap; }
.tag { display: inline-block; padding: 0 6px; border-radius: 8px; font-size: 12px;
       color: #fff; background: #57606a; }
tr.src-fault .tag { background: #cf222e; }
tr.src-endpoint .tag { background: #0969da; }
tr.src-probe .tag { background: #8250df; }
tr.src-fault td { background: #fff8f8; }
.badge { display: inline-block; padding: 1px 10px; border-radius: 10px; font-size: 13px;
         font-weight: 600; vertical-align: middle; }
.badge.pass { background: #dafbe1; color: #116329; border: 1px solid #4ac26b; }
.badge.fail { background: #ffebe9; color: #a40e26; border: 1px solid #ff8182; }
.badge.reported { background: #f6f8fa; color: #57606a; border: 1px solid #d0d7de; }
tr.shown td { background: #f6f8fa; color: #57606a; }
p.unranked { font-size: 13px; color: #57606a; }
dl { display: flex; flex-wrap: wrap; gap: 4px 24px; margin: 8px 0; }
dl div { display: flex; gap: 6px; }
dt { color: #57606a; }
dd { margin: 0; font-weight: 600; }
p.desc { margin: 4px 0; color: #424a53; }
.empty { color: #57606a; font-style: italic; }
figure { margin: 4px 0 12px; }
figure svg { display: block; width: 100%; height: auto; }
figcaption { font-size: 12px; color: #57606a; }
"""
