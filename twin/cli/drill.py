"""Failure drills: twin drill list | run | blind | answer | reveal."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import click
from rich.table import Table

from twin import lab as L
from twin.chaos.drill import MODES
from twin.cli.base import (
    RUNTIME_CHOICES,
    RichSteps,
    emit_json,
    err,
    main,
    out,
    sigterm_as_interrupt,
)
from twin.errors import UsageError


@main.group()
def drill():
    """Timed fault scenarios with expectations, and trainee drills.

    A drill (lab/drills/*.yml) states a steady state, a timeline of faults under
    traffic, and what must hold; `twin drill run` checks it and always rolls back."""


@drill.command("list")
@click.option("--json", "as_json", is_flag=True)
def drill_list(as_json):
    """The shipped drills (lab/drills/*.yml): name, fabric, faults, what they check."""
    from twin.chaos import drill as D

    rows = []
    for path in D.shipped():
        d = D.load_drill(path)
        rows.append({"name": d.name, "fabric": d.fabric, "description": d.description,
                     "mode": d.traffic.mode, "compare": [v.label for v in d.compare],
                     "faults": [s.fault.value for s in d.timeline],
                     "expect": [e.what for e in d.expect], "file": str(path)})
    if as_json:
        emit_json({"drills": rows})
        return
    t = Table(title=f"{len(rows)} drills in {D.DRILL_DIR}")
    for col in ("drill", "fabric", "faults", "what it shows"):
        t.add_column(col, no_wrap=col != "what it shows")
    for r in rows:
        t.add_row(r["name"], r["fabric"] or "any", ", ".join(r["faults"]) or "-",
                  r["description"])
    out.print(t)
    out.print("run one: twin drill run NAME [--compare single-path] [--report DIR]")


def _lab_for(d, lab: str | None) -> str | None:
    """--lab, else the one lab up, else the lab named after the drill's fabric."""
    from twin.state import known_labs

    up = known_labs()
    if lab is None and len(up) > 1 and d.fabric in up:
        return d.fabric
    return lab


@drill.command("run")
@click.argument("ref", metavar="NAME|FILE")
@click.option("--lab", default=None, help="The lab to run it on (default: the one lab up).")
@click.option("--mode", type=click.Choice(list(MODES)), default=None,
              help="The transport (default: the drill's).")
@click.option("--compare", type=click.Choice(list(MODES)), default=None,
              help="Run it again on this baseline, same faults, and show both.")
@click.option("--seed", default=1, show_default=True, help="Draws random targets.")
@click.option("--json", "as_json", is_flag=True, help="The results as JSON on stdout.")
@click.option("--junit", "junit", default=None, metavar="FILE", help="JUnit XML of the verdicts.")
@click.option("--report", "report_dir", default=None, metavar="DIR",
              help="Write report.html, report.json and junit.xml into DIR.")
@click.option("--grafana-url", default=None, metavar="URL",
              help="Post each fault to this Grafana as it happens: an annotation region "
                   "from apply to revert (docs/grafana.md).")
@click.option("--grafana-token", default=None, envvar="GRAFANA_TOKEN", metavar="T",
              help="With --grafana-url: a service account token (or $GRAFANA_TOKEN).")
@click.option("--grafana-user", default=None, metavar="U",
              help="With --grafana-url: basic auth instead of a token.")
@click.option("--grafana-password", default=None, envvar="GRAFANA_PASSWORD", metavar="P")
def drill_run(ref, lab, mode, compare, seed, as_json, junit, report_dir, grafana_url,
              grafana_token, grafana_user, grafana_password):
    """Run a drill: steady state, faults on a timeline under traffic, the verdict.

    \b
      twin drill run t1-blackhole
      twin drill run t0-t1-flap --compare single-path --report /tmp/flap
      twin drill run lab/drills/my-drill.yml --seed 7 --json
    The rollback (every fault reverted, then verify) always runs, also on
    Ctrl-C. Exit 0 only if every expectation holds.
    """
    from twin.chaos import drill as D
    from twin.chaos import runner

    sigterm_as_interrupt()
    path = D.find(ref)
    d = D.load_drill(path)
    att = L.attach(_lab_for(d, lab))
    att.require_whole()
    started = time.monotonic()

    def note(text):
        if not as_json:
            err.print(f"[dim]{d.name}[/dim] {text}")

    elsewhere = runner.written_for(att, d)
    if elsewhere:
        note(elsewhere)

    annotator = _annotator(att, d.name, grafana_url, grafana_token, grafana_user,
                           grafana_password)  # before the drill: a bad URL changes nothing
    began_ms = int(time.time() * 1000)
    try:
        runs = runner.run_all(att, d, mode=mode, compare=compare, seed=seed, progress=note)
    finally:
        if annotator:
            note(_close_annotator(*annotator))
    if annotator:
        note(_push_drill_dashboard(att, d.name, annotator[0].grafana, began_ms))
    results = runner.results(runs)
    if report_dir:
        from twin.chaos import report

        written = report.write(results, Path(report_dir))
        note(f"report: {', '.join(str(p) for p in written.values())}")
    if junit:
        from twin.chaos import report

        Path(junit).write_text(report.junit(results))
    if as_json:
        emit_json(results)
    else:
        _show(runs, time.monotonic() - started)
    if not all(r.ok for r in runs):
        sys.exit(1)


def _annotator(att, drill_name: str, url, token, user, password):
    """A LiveAnnotator fed by the lab's fault log as the drill writes it, or None."""
    if not url:
        if token and token != os.environ.get("GRAFANA_TOKEN") or user:
            raise UsageError("--grafana-token and --grafana-user go with --grafana-url")
        return None
    from twin.chaos.live import FaultLogFollower
    from twin.telemetry import grafana as G

    live = G.LiveAnnotator(G.connect(url, token, user, password), att.lab,
                           tags=["drill", drill_name])
    follower = FaultLogFollower(att.state.dir / "events.jsonl", live.event)
    follower.start()
    return live, follower, url


def _close_annotator(live, follower, url) -> str:
    follower.close()
    live.close()
    if live.error:
        return f"grafana {url}: annotations stopped: {live.error}"
    return f"grafana {url}: {live.posted} annotations posted, {live.patched} made regions"


def _push_drill_dashboard(att, name: str, grafana, began_ms: int) -> str:
    """The drill's own dashboard, over its time range (a second either side), with its
    faults as the annotation regions just posted. One line: its URL, or why not."""
    from twin.errors import LabError
    from twin.telemetry import dashboards as D
    from twin.telemetry import provision as P
    from twin.telemetry.grafana import recorded_prometheus_url

    prom = recorded_prometheus_url(att.state.dir) or P.DEFAULT_PROMETHEUS_URL
    try:
        ds = grafana.ensure_datasource(P.datasource_name(att.lab), prom,
                                       P.datasource_uid(att.lab))
        folder = grafana.ensure_folder(P.FOLDER)
        board = grafana.push_dashboard(
            D.drill(att.fabric, att.lab, ds["uid"], began_ms - 1000,
                    int(time.time() * 1000) + 1000, name), folder)
    except LabError as e:
        return f"drill dashboard not pushed: {e}"
    return f"drill dashboard: {board['url']}"


def _show(runs, wall_s: float) -> None:
    for r in runs:
        data = r.data
        colour = "green" if data["verdict"] == "pass" else "red"
        t = Table(title=f"{data['name']} on {data['lab']}, mode {data['mode']}, seed "
                  f"{data['seed']}: [{colour}]{data['verdict']}[/{colour}]")
        for col in ("expectation", "want", "got", ""):
            t.add_column(col)
        for e in data["expectations"]:
            t.add_row(e["what"], e["want"], e["got"], "[green]ok[/green]" if e["ok"]
                      else "[red]FAIL[/red]")
        out.print(t)
        if data["faults"]:
            f = Table(show_header=True, box=None)
            for col in ("fault", "target", "at ms", "± µs", "detection µs", "repair µs", "lost",
                        "localized", "named after ms"):
                f.add_column(col)
            t0 = data["t0_ns"]
            for x in data["faults"]:
                f.add_row(x["kind"], x["target"], f"{(x['at_ns'] - t0) / 1e6:.1f}" if t0 else "-",
                          _n(x.get("at_uncertainty_us")), _n(x["detection_us"]),
                          _n(x["repair_us"]), str(x["packets_lost"]),
                          x["localized_as"] or "-",
                          _n(x["localized_us"], 1000))
            out.print(f)
        clock = data.get("clock") or {}
        if clock.get("kind") == "nodes":
            off = clock["offset"]
            out.print(f"clock: the nodes' ({clock['machine']}); faults stamped in the nodes "
                      f"({clock['stamped_changes']} changes, {clock['unstamped_changes']} "
                      f"timed by twin); twin's times converted, offset {off['offset_us']:.0f} "
                      f"± {off['error_us']:.0f} µs")
        m = data["metrics"]
        out.print(f"goodput {_n(m['goodput_gbps'])} Gbit/s, completion {_n(m['completion_s'])} s,"
                  f" retained {_n(data['goodput_retained'])}, dip {_n(m['dip_depth'])} for "
                  f"{_n(m['dip_ms'])} ms, back to 90% in {_n(m['back_to_90_ms'])} ms; "
                  f"wall {data['wall_s']:.1f} s")
    if len(runs) > 1:
        a, b = runs[0].data["metrics"], runs[1].data["metrics"]
        if a["completion_s"] and b["completion_s"]:
            out.print(f"{runs[0].mode} vs {runs[1].mode}: completion {a['completion_s']:.3f} s "
                      f"vs {b['completion_s']:.3f} s ({b['completion_s'] / a['completion_s']:.2f}"
                      f"x); {wall_s:.1f} s in all")


def _n(value, scale: float = 1) -> str:
    if value is None:
        return "-"
    v = value / scale
    return f"{v:,.0f}" if abs(v) >= 100 else f"{v:.3g}"


@drill.command("all")
@click.option("--compare", type=click.Choice(list(MODES)), default="single-path",
              show_default=True, help="The baseline each drill also runs on ('mrc': none).")
@click.option("--runtime", type=click.Choice(RUNTIME_CHOICES), default="auto",
              show_default=True, help="For labs that are not up yet.")
@click.option("--only", multiple=True, metavar="NAME", help="Just these drills (repeatable).")
@click.option("--seed", default=1, show_default=True)
@click.option("--report-root", default=None, metavar="DIR",
              help="Reports go to DIR/<lab>/reports/<timestamp>/ (default: the build "
                   "directory, lab/build).")
@click.option("--json", "as_json", is_flag=True)
def drill_all(compare, runtime, only, seed, report_root, as_json):
    """Every shipped drill on the lab of its fabric (brought up when it is not), each
    also on the baseline; one report per lab. What `make chaos` runs.

    Exit 0 only if every verdict is pass."""
    from twin.chaos import drill as D
    from twin.chaos import report, runner
    from twin.lab.compile import build_root
    from twin.state import known_labs

    sigterm_as_interrupt()
    drills = [D.load_drill(p) for p in D.shipped()]
    if only:
        unknown = sorted(set(only) - {d.name for d in drills})
        if unknown:
            raise UsageError(f"no shipped drill {', '.join(unknown)} (see `twin drill list`)")
        drills = [d for d in drills if d.name in only]
    stamp = time.strftime("%Y%m%d-%H%M%S")
    by_lab: dict[str, list] = {}
    for d in drills:
        lab = d.fabric or "mrc-4p"
        if lab not in known_labs():
            err.print(f"lab {lab} is not up: bringing it up ({runtime})")
            steps = RichSteps()
            try:
                L.up(lab, runtime, steps)
            finally:
                steps.done()
        att = L.attach(lab)
        att.require_whole()
        err.print(f"[bold]{d.name}[/bold] on {lab}")
        runs = runner.run_all(att, d, compare=None if compare == d.traffic.mode or d.compare
                              else compare,
                              seed=seed, progress=lambda text, n=d.name:
                              None if as_json else err.print(f"[dim]{n}[/dim] {text}"))
        by_lab.setdefault(lab, []).extend(runs)
    summary = []
    for lab, runs in by_lab.items():
        root = Path(report_root) if report_root else build_root()
        where = root / lab / "reports" / stamp
        written = report.write(runner.results(runs), where)
        summary.append({"lab": lab, "report": str(written["html"]),
                        "drills": [{"name": r.data["name"], "mode": r.mode,
                                    "verdict": r.data["verdict"]} for r in runs]})
    if as_json:
        emit_json({"labs": summary})
    else:
        t = Table(title="chaos run")
        for col in ("drill", "mode", "lab", "verdict"):
            t.add_column(col)
        for s in summary:
            for r in s["drills"]:
                colour = "green" if r["verdict"] == "pass" else "red"
                t.add_row(r["name"], r["mode"], s["lab"], f"[{colour}]{r['verdict']}[/{colour}]")
        out.print(t)
        for s in summary:
            out.print(f"report: {s['report']}")
    if not all(r["verdict"] == "pass" for s in summary for r in s["drills"]):
        sys.exit(1)
