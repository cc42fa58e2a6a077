"""`twin ci`: one command for a CI job (root): twin.ci's stages, a table, the exit code."""

from __future__ import annotations

import sys
from pathlib import Path

import click
from rich.table import Table
from rich.text import Text

from twin import ci as CI
from twin.cli.base import (
    DATAPLANE_CHOICES,
    RUNTIME_CHOICES,
    RichSteps,
    emit_json,
    main,
    out,
    sigterm_as_interrupt,
)
from twin.routes.formats import FORMATS as ROUTE_FORMATS

COLOUR = {CI.PASSED: "green", CI.FAILED: "red", CI.SKIPPED: "yellow"}


@main.command(name="ci")
@click.argument("spec")
@click.option("--routes", metavar="DIR", default=None,
              help="An operator's route tables (one file per node, `twin routes --help`): "
                   "checked without a lab, then the lab is programmed from them and verify "
                   "is held to what the check said.")
@click.option("--routes-format", type=click.Choice(sorted(ROUTE_FORMATS)), default=None,
              help="The --routes tables' format (default: told from the files).")
@click.option("--follow-symlinks", is_flag=True,
              help="Read --routes files that are symlinks leading out of DIR (refused by "
                   "default, as `twin routes check`).")
@click.option("--drills", default="", metavar="NAME,...",
              help="Drills to run on the lab, comma-separated (names or files), or `all`: "
                   "the shipped drills written for SPEC's fabric. Default: none.")
@click.option("--out", "out_dir", default="out", show_default=True, metavar="DIR",
              type=click.Path(file_okay=False),
              help="Where the reports go (new, empty, or a previous twin ci's).")
@click.option("--runtime", type=click.Choice(RUNTIME_CHOICES), default="auto",
              show_default=True, help="Where the lab's nodes run (as `twin up`).")
@click.option("--dataplane", type=click.Choice(DATAPLANE_CHOICES), default=None,
              help="seg6local, ebpf or auto (as `twin up`; default: the spec's, else auto).")
@click.option("--name", default=None,
              help="The lab's name (default: <spec>-ci-<6 hex>, new every run, so no "
                   "lab of anyone else's is in the way).")
@click.option("--json", "as_json", is_flag=True, help="Print summary.json.")
def ci(spec, routes, routes_format, follow_symlinks, drills, out_dir, runtime, dataplane, name,
       as_json):
    """Check, build, verify, drill and remove a lab in one go, with reports for a CI job.

    \b
      1. routes check   with --routes: the tables walked without a lab
      2. up             a lab of its own, from the tables when given
      3. verify         every route read back, every path and loopback probed
      4. agreement      with --routes: the paths the check says are lost are
                        exactly the probes verify lost on their way out
      5. drills         each one's report in DIR/drills/NAME/
      6. down           always (also on failure, Ctrl-C, SIGTERM): faults
                        reverted, the lab removed, nothing of it left
    A failing stage does not stop the next ones (a lab that did not come up
    skips what needs it). DIR gets junit.xml (every suite), summary.json,
    index.html, routes-check.{xml,json}, verify.{xml,json}, agreement.json.

    \b
    Exit 0: every stage passed; 1: one failed; 2: bad input (spec, tables,
    drills, options), found before anything is created; 130: interrupted
    (the lab is removed and DIR written all the same).

    \b
      twin ci mrc-4p --runtime netns --drills t1-blackhole --out out
      twin ci mrc-4p --routes configs/ --drills all
    """
    sigterm_as_interrupt()
    opts = CI.Options(spec, routes=routes, routes_format=routes_format,
                      follow_symlinks=follow_symlinks,
                      drills=tuple(d.strip() for d in drills.split(",") if d.strip()),
                      out=Path(out_dir), runtime=runtime, dataplane=dataplane, name=name)
    steps = RichSteps()
    try:
        result = CI.run(opts, steps)
    finally:
        steps.done()
    if as_json:
        emit_json(result.to_dict())
    else:
        _show(result)
    sys.exit(result.exit_code)


def _show(result: CI.Result) -> None:
    t = Table(title=f"twin ci {result.spec}: lab {result.lab}"
              + (f" ({result.runtime}, {result.dataplane})" if result.runtime else ""))
    for col in ("stage", "verdict", "time", "what"):
        t.add_column(col, justify="right" if col == "time" else "left")
    for s in result.stages:
        c = COLOUR[s.status]
        t.add_row(s.name, f"[{c}]{s.status}[/{c}]", f"{s.seconds:.1f}s",
                  Text(s.said or next(iter(s.first_lines(1)), "")))  # no markup in it
    out.print(t)
    for s in result.stages:
        if s.status == CI.FAILED:
            lines = s.failure.splitlines()
            out.print(f"[bold red]{s.name} failed[/bold red]:")
            for line in lines[:5]:  # as Text: an address's ":100:" is no emoji code
                out.print(Text(f"  {line}"))
            if len(lines) > 5:
                out.print(f"  ... and {len(lines) - 5} more ({result.out / CI.SUMMARY})")
    verdict = "[bold yellow]INTERRUPTED[/bold yellow]" if result.interrupted else \
        "[bold green]PASS[/bold green]" if result.ok else "[bold red]FAIL[/bold red]"
    out.print(f"{verdict} in {result.seconds:.1f}s; reports: {result.out / CI.INDEX}, "
              f"{result.out / CI.JUNIT}, {result.out / CI.SUMMARY}")
