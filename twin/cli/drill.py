"""Failure drills: twin drill list | run | blind | answer | reveal."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import click
from rich.table import Table

from twin import lab as L
from twin.cli import tables
from twin.cli.base import (
    RUNTIME_CHOICES,
    RichSteps,
    emit_json,
    err,
    lab_option,
    main,
    out,
    sigterm_as_interrupt,
)
from twin.cli.tables import Col
from twin.errors import LabError, UsageError
from twin.fabric.spec import name_problem
from twin.mrc.modes import Mode


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
    cols = [Col("drill"), Col("fabric"), Col("faults", wrap=True),
            Col("what it shows", wrap=True, least=32)]
    # narrow: the fabric goes first (`drill run` finds the lab), then the faults (the
    # description names them); the name and what it shows stay
    tables.show(out, cols, [[r["name"], r["fabric"] or "any", _faults_cell(r["faults"]),
                             r["description"]] for r in rows],
                drop=("fabric", "faults"), title=f"{len(rows)} drills in {D.DRILL_DIR}")
    out.print("run one: twin drill run NAME [--compare single-path] [--report DIR]")


def _faults_cell(faults: list[str]) -> str:
    """A drill's faults, a repeated one counted: `link-down ×6, link-up`."""
    counted = {f: faults.count(f) for f in faults}
    return ", ".join(f if n == 1 else f"{f} ×{n}" for f, n in counted.items()) or "-"


def _lab_for(d, lab: str | None) -> str | None:
    """--lab, else the one lab up, else the lab named after the drill's fabric."""
    from twin.state import known_labs

    up = known_labs()
    if lab is None and len(up) > 1 and d.fabric in up:
        return d.fabric
    return lab


@drill.command("run")
@click.argument("ref", metavar="NAME|FILE")
@lab_option(help="The lab to run it on (default: the one lab up, else the one named "
                 "after the drill's fabric).")
@click.option("--mode", type=click.Choice(Mode.names()), default=None,
              help=f"The transport (default: the drill's): {Mode.described()}.")
@click.option("--compare", type=click.Choice([*Mode.names(), "bgp", "bgp-bfd"]), default=None,
              help="Run it again on this baseline, same faults, and show both. bgp: on "
                   "the same fabric run as operators run it today (eBGP, ECMP on FRR; lab "
                   "<lab>-bgp, brought up for it), RoCE single-path and MRC over ECMP; "
                   "bgp-bfd: the same with BFD (lab <lab>-bgp-bfd).")
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
        from twin.chaos.results import document

        emit_json(document(results))
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
        found = r.run
        colour = {"pass": "green", "reported": "dim"}.get(found.verdict, "red")
        t = Table(title=f"{found.name} on {found.lab}, mode {found.label}, seed "
                  f"{found.seed}: [{colour}]{found.verdict}[/{colour}]"
                  + (" (a baseline without baseline_expect: shown, not judged)"
                     if found.verdict == "reported" else ""))
        for col in ("expectation", "want", "got", ""):
            t.add_column(col)
        for e in found.expectations:
            t.add_row(e.what, e.want, e.got, "[green]ok[/green]" if e.ok
                      else "[dim]reported[/dim]" if e.judged is False
                      else "[red]FAIL[/red]")
        out.print(t)
        if found.outcome:
            out.print(f"outcome: {found.outcome}")
        if found.faults:
            f = Table(show_header=True, box=None)
            for col in ("fault", "target", "at ms", "± µs", "from", "detection µs",
                        "repair µs", "lost", "localized", "named after ms"):
                f.add_column(col)
            t0 = found.t0_ns
            for x in found.faults:
                f.add_row(x.kind, x.target, f"{(x.at_ns - t0) / 1e6:.1f}" if t0 else "-",
                          _n(x.at_uncertainty_us), x.origin or "fault",
                          _n(x.detection_us), _n(x.repair_us), str(x.packets_lost),
                          x.localized_as or "-", _n(x.localized_us, 1000))
            out.print(f)
        clock = found.clock or {}
        if clock.get("kind") == "nodes":
            off = clock["offset"]
            out.print(f"clock: the nodes' ({clock['machine']}); faults stamped in the nodes "
                      f"({clock['stamped_changes']} changes, {clock['unstamped_changes']} "
                      f"timed by twin); twin's times converted, offset {off['offset_us']:.0f} "
                      f"± {off['error_us']:.0f} µs")
        m = found.metrics
        out.print(f"goodput {_n(m['goodput_gbps'])} Gbit/s, completion {_n(m['completion_s'])} s,"
                  f" retained {_n(found.goodput_retained)}, dip {_n(m['dip_depth'])} for "
                  f"{_n(m['dip_ms'])} ms, back to 90% in {_n(m['back_to_90_ms'])} ms; "
                  f"wall {found.wall_s:.1f} s")
    if len(runs) > 1:
        from twin.chaos import report

        group = [r.run for r in runs]
        a, b = group[0].metric("completion_s"), group[1].metric("completion_s")
        why = report.unranked(group[0], group[1], "completion")
        if a and b:
            out.print(f"{runs[0].mode} vs {runs[1].mode}: completion {a:.3f} s "
                      f"vs {b:.3f} s ("
                      + (f"not ranked: {why}" if why else f"{b / a:.2f}x")
                      + f"); {wall_s:.1f} s in all")
        note = report.unranked_note(group)
        if note:
            out.print(note)


def _n(value, scale: float = 1) -> str:
    if value is None:
        return "-"
    v = value / scale
    return f"{v:,.0f}" if abs(v) >= 100 else f"{v:.3g}"


@drill.command("all")
@click.option("--compare", type=click.Choice([*Mode.names(), "bgp", "bgp-bfd"]),
              default=Mode.SINGLE_PATH.value, show_default=True,
              help="The baseline each drill also runs on ('mrc': none; bgp, bgp-bfd: "
                   "as `drill run --compare`).")
@click.option("--runtime", type=click.Choice(RUNTIME_CHOICES), default="auto",
              show_default=True, help="For labs that are not up yet.")
@click.option("--only", multiple=True, metavar="NAME", help="Just these drills (repeatable).")
@click.option("--seed", default=1, show_default=True)
@click.option("--report-root", default=None, metavar="DIR",
              help="Reports go to DIR/<lab>/reports/<timestamp>/ (default: the build "
                   "directory, lab/build).")
@click.option("--keep", is_flag=True,
              help="Leave up the labs this brought up (default: each is taken down once "
                   "its drills are done, also after a failure or Ctrl-C).")
@click.option("--suffix", default=None, metavar="S",
              help="Run each fabric's drills on lab FABRIC-S (brought up if not up): "
                   "beside a lab of the fabric's name that another run directory owns.")
@click.option("--json", "as_json", is_flag=True)
def drill_all(compare, runtime, only, seed, report_root, keep, suffix, as_json):
    """Every shipped drill on the lab of its fabric (brought up when it is not), each
    also on the baseline; one report per lab. What `make chaos` runs.

    A baseline is judged only by its drill's baseline_expect; without one its
    outcome is reported beside the main run's. Labs this brings up are taken down
    when their drills are done (--keep: left up); labs already up are left as they
    were. Exit 0 only if every verdict holds; the summary names why any failed."""
    from twin.chaos import drill as D
    from twin.chaos import runner

    sigterm_as_interrupt()
    drills = [D.load_drill(p) for p in D.shipped()]
    if only:
        unknown = sorted(set(only) - {d.name for d in drills})
        if unknown:
            raise UsageError(f"no shipped drill {', '.join(unknown)} (see `twin drill list`)")
        drills = [d for d in drills if d.name in only]
    stamp = time.strftime("%Y%m%d-%H%M%S")
    by_lab: dict[str, list] = {}
    for d in drills:  # one lab at a time: each is up only while its drills run
        by_lab.setdefault(d.fabric or "mrc-4p", []).append(d)
    for fabric in by_lab if suffix else ():
        wrong = name_problem(f"{fabric}-{suffix}")
        if wrong:
            raise UsageError(f"--suffix {suffix!r}: lab {fabric}-{suffix} {wrong[0]}")
    rows: list[runner.SuiteRow] = []
    reports: list[dict] = []
    brought: list[str] = []
    try:
        for fabric, lab_drills in by_lab.items():
            lab = f"{fabric}-{suffix}" if suffix else fabric
            runs = _drills_on(fabric, lab, lab_drills, runtime, compare, seed, as_json,
                              brought, rows)
            if runs:
                reports.append(_write_report(lab, runs, report_root, stamp))
            if lab in brought and not keep:
                _take_down(lab, brought)
    finally:
        for lab in [] if keep else list(brought):
            _take_down(lab, brought)
    ok, said = runner.suite_verdict(rows)
    if as_json:
        emit_json({"ok": ok, "summary": said, "runs": [r.to_dict() for r in rows],
                   "reports": reports, "labs_kept": brought})
    else:
        _show_suite(rows, reports, brought, ok, said)
    if not ok:
        sys.exit(1)


def _drills_on(fabric: str, lab: str, drills: list, runtime: str, compare: str, seed: int,
               quiet: bool, brought: list[str], rows: list) -> list:
    """Run `drills` on `lab`, of `fabric` (brought up first if it is not, and added to
    `brought`):
    their runs, each drill's rows added to `rows`; a drill that cannot run is a row
    naming its error, and the next drill runs."""
    from twin.chaos import runner
    from twin.errors import TwinError
    from twin.state import known_labs

    if lab not in known_labs():
        err.print(f"lab {lab} is not up: bringing it up ({runtime})")
        steps = RichSteps()
        try:
            L.up(fabric, runtime, steps, name=None if lab == fabric else lab)
        except TwinError as e:
            rows.extend(runner.error_row(d, lab, LabError(f"lab {lab} did not come up: {e}"))
                        for d in drills)
            if lab in known_labs():
                brought.append(lab)  # half up: taken down all the same
            return []
        finally:
            steps.done()
        brought.append(lab)
    try:
        att = L.attach(lab)
        att.require_whole()
    except TwinError as e:
        rows.extend(runner.error_row(d, lab, e) for d in drills)
        return []
    runs = []
    for d in drills:
        err.print(f"[bold]{d.name}[/bold] on {lab}")
        try:
            these = runner.run_all(att, d, compare=None if compare == d.traffic.mode
                                   or d.compare else compare, seed=seed,
                                   progress=lambda text, n=d.name:
                                   None if quiet else err.print(f"[dim]{n}[/dim] {text}"))
        except TwinError as e:
            err.print(f"[red]{d.name}: {e}[/red]")
            rows.append(runner.error_row(d, lab, e))
            continue
        runs.extend(these)
        rows.extend(runner.suite_row(r) for r in these)
    return runs


def _write_report(lab: str, runs: list, report_root, stamp: str) -> dict:
    from twin.chaos import report, runner
    from twin.lab.compile import build_root

    root = Path(report_root) if report_root else build_root()
    written = report.write(runner.results(runs), root / lab / "reports" / stamp)
    return {"lab": lab, "report": str(written["html"])}


def _take_down(lab: str, brought: list[str]) -> None:
    """Remove a lab this suite brought up; a failure to is said, not raised."""
    from twin import lifecycle
    from twin.errors import TwinError

    brought.remove(lab)
    try:
        lifecycle.down(lab)
        err.print(f"lab {lab}: taken down (it was brought up for these drills)")
    except TwinError as e:
        err.print(f"[red]lab {lab}: not taken down: {e}[/red] (`twin down --lab {lab}`)")
        brought.append(lab)


def _show_suite(rows, reports: list[dict], kept: list[str], ok: bool, said: str) -> None:
    t = Table(title="chaos run")
    for col in ("drill", "mode", "lab", "verdict", "why"):
        t.add_column(col, overflow="fold")
    colours = {"pass": "green", "fail": "red", "reported": "dim"}
    for r in rows:
        c = colours.get(r.verdict, "red")
        t.add_row(r.name, r.mode, r.lab, f"[{c}]{r.verdict}[/{c}]", r.why)
    out.print(t)
    for s in reports:
        out.print(f"report: {s['report']}")
    if kept:
        out.print(f"labs left up: {', '.join(kept)} (`twin down --lab LAB` removes one)")
    colour = "green" if ok else "red"
    out.print(f"[{colour}]chaos: {said}[/{colour}]")
