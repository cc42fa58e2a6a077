"""`twin routes`: an operator's own route tables, checked without a lab (no root).

    check    walk every path through the tables; findings name node, item and file
    diff     the tables against twin's plan, with the paths each difference breaks
    export   twin's plan written as tables, in any format (a starting point)
"""

from __future__ import annotations

import sys
from pathlib import Path

import click
from rich.markup import escape
from rich.table import Table

from twin import lab as L
from twin.cli.base import emit_json, main, out
from twin.errors import SpecError, UsageError
from twin.fabric.routing import ROUTING_MODES
from twin.routes import check as C
from twin.routes import diff as D
from twin.routes import formats as F
from twin.routes import tables as T

_FILES = "; ".join(f"{name}: {fmt.file_for('<node>')}" for name, fmt in F.FORMATS.items())
FORMAT_HELP = f"The tables' format (default: told from the files): {_FILES}"
EXPORT_FORMAT_HELP = f"The format to write: {_FILES}"


def _nodes(n: int) -> str:
    return f"{n} node{'s' if n != 1 else ''}"


@main.group()
def routes():
    """Check an operator's own SRv6 route tables against a fabric, without a lab.

    \b
    A directory holds one file per node, named after it:
      <node>.json              `ip -j -6 route show` of the node (iproute2-json)
      <node>.batch             `ip -6 route show` lines or `ip -batch` lines
      <node>/config_db.json    SONiC: SRV6_MY_LOCATORS, SRV6_MY_SIDS, STATIC_ROUTE
      <node>/frr.conf          FRR 10 (or show running-config): segment-routing
                               srv6 locators and static-sids, ipv6 route statics
      <node>/startup.yaml      Cumulus Linux NVUE (nv config show -o yaml): srv6
                               locators, static srv6-sids, vrf default static routes
    Interface names and addresses are the addressing plan's (README, "Addressing"):
    next hops are the neighbours' link-locals, fe80::<uSID>.

    \b
      twin routes export mrc-4p /tmp/tables          # twin's own tables, to start from
      twin routes check mrc-4p lab/routes/missing-t1-route
      twin routes diff mrc-4p lab/routes/missing-t1-route
      twin up mrc-4p --routes /tmp/tables && twin verify   # the same, proved with packets
    """


FOLLOW_HELP = ("Read node files and directories that are symlinks leading out of DIRECTORY "
               "(refused by default: the check often runs as root on a CI workspace). Only "
               "regular files are read either way.")
follow_symlinks_option = click.option("--follow-symlinks", is_flag=True, help=FOLLOW_HELP)


def _load(spec: str, directory: str, fmt: str | None, follow_symlinks: bool, as_json: bool):
    """The spec compiled and the tables loaded. Tables that cannot be read: with --json,
    every problem kept (twin.routes.formats.Limits.problems) on stdout, exit 2; else
    the SpecError, whose printed form ends by saying where the rest are."""
    c = L.compile_spec(spec)
    try:
        return c, F.load_dir(directory, c.fabric, fmt, follow_symlinks=follow_symlinks)
    except SpecError as e:
        if as_json:
            emit_json(e.to_dict())
            sys.exit(e.exit_code)
        e.more = ("--json has them all" if not e.omitted else
                  f"--json has the first {len(e.problems):,}")
        raise


@routes.command("check")
@click.argument("spec")
@click.argument("directory", type=click.Path(file_okay=False))
@click.option("--format", "fmt", type=click.Choice(sorted(F.FORMATS)), default=None,
              help=FORMAT_HELP)
@follow_symlinks_option
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.option("--junit", type=click.Path(dir_okay=False), default=None,
              help="Also write JUnit XML: a case per node (its findings) and per host pair "
                   "(its broken paths).")
@click.option("--warnings/--no-warnings", default=True, show_default=True,
              help="Show warnings (routes and SIDs no path uses, uSIDs the plan does not "
                   "know). They never fail the check.")
def check_cmd(spec, directory, fmt, follow_symlinks, as_json, junit, warnings):
    """Walk every path through the tables; exit 0 only if every path arrives.

    \b
    Every ordered host pair x plane x T1, and every host port's loopbacks (the
    paths `twin verify` probes), hop by hop as the kernel forwards: longest-prefix
    match, uN shift, decapsulation, next hops resolved against the neighbours'
    addresses. Each path that loops, blackholes, leaves its switches (exits on
    the wrong port) or reaches the wrong host is named with the node and the
    route or SID responsible, the file and line it came from, and what twin's
    plan has there. Also: local SIDs missing, duplicated, of another node or
    outside the block; routes out of missing devices or to next hops no
    neighbour owns; a plane whose paths all cross one T1.

    Files cannot hurt the check: a node file (or directory) that is a symlink out of
    DIRECTORY is refused unless --follow-symlinks, only regular files are read, and
    a file over 8 MiB (TWIN_ROUTES_MAX_BYTES), a node of over 50,000 entries
    (TWIN_ROUTES_MAX_ENTRIES), JSON nested past 64 levels, a number of over 40
    digits or a key written twice is refused, naming the file. The first 100
    problems are printed; --json has up to 10,000.

    Exit 0: all paths arrive on their switches, no errors; 1: something fails;
    2: the tables (or the spec) cannot be read.
    """
    c, tables = _load(spec, directory, fmt, follow_symlinks, as_json)
    report = C.check(c.plan, tables)
    if junit:
        try:
            Path(junit).write_text(report.junit())
        except OSError as e:
            raise UsageError(f"--junit {junit}: {e.strerror}") from None
    if as_json:
        emit_json(report.to_dict())
    else:
        print_check(report, warnings)
    if not report.ok:
        sys.exit(1)


def print_check(report: C.CheckReport, warnings: bool = True) -> None:
    counts = report.outcomes()
    bad = report.paths - counts[C.OK]
    head = f"twin routes check {report.fabric}: {report.source} ({report.format}), " \
           f"{report.paths} paths walked in {report.seconds:.2f}s"
    out.print(f"[bold]{escape(head)}[/bold]")
    t = Table(show_header=True)
    for col in ("outcome", "paths"):
        t.add_column(col, justify="right" if col == "paths" else "left")
    for outcome, n in counts.items():
        t.add_row(outcome, f"[red]{n}[/red]" if n and outcome != C.OK else str(n))
    out.print(t)
    if bad:
        out.print(f"[bold red]{bad} paths fail[/bold red], by cause:")
        for cause, outcome, paths in report.causes():
            out.print(f"  [red]{outcome}[/red] x{len(paths)}  {escape(cause)}")
            out.print(f"      e.g. {paths[0].path.label} {paths[0].path.address}: "
                      f"{escape(paths[0].reason)}")
    errors = [f for f in report.findings if f.severity == C.ERROR]
    warns = [f for f in report.findings if f.severity == C.WARNING]
    if errors:
        out.print(f"[bold red]{_n(len(errors), 'problem')} in the tables[/bold red]:")
        for f in errors:
            out.print(f"  {escape(f.text())}")
    if warns and warnings:
        out.print(f"[yellow]{_n(len(warns), 'warning')}[/yellow]:")
        for f in warns:
            out.print(f"  {escape(f.text())}")
    verdict = "[bold green]PASS[/bold green]" if report.ok else "[bold red]FAIL[/bold red]"
    out.print(f"{verdict}: {report.verdict_line()}")


def _n(count: int, what: str) -> str:
    return f"{count} {what}{'' if count == 1 else 's'}"


@routes.command("diff")
@click.argument("spec")
@click.argument("directory", type=click.Path(file_okay=False))
@click.option("--format", "fmt", type=click.Choice(sorted(F.FORMATS)), default=None,
              help=FORMAT_HELP)
@follow_symlinks_option
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def diff_cmd(spec, directory, fmt, follow_symlinks, as_json):
    """Diff the tables against twin's plan, node by node; exit 0 only if the same.

    Each route or local SID missing, extra or different is shown with the paths it
    breaks (those `twin routes check` blames on it), or "no path affected".
    """
    c, tables = _load(spec, directory, fmt, follow_symlinks, as_json)
    report = D.diff(c.plan, tables, C.check(c.plan, tables))
    if as_json:
        emit_json(report.to_dict())
    else:
        out.print(f"[bold]twin routes diff {report.fabric}[/bold]: {escape(report.source)} against "
                  "twin's plan")
        for node, diffs in report.by_node().items():
            out.print(f"\n[bold]{node}[/bold]")
            for d in diffs:
                colour = "red" if d.paths else "yellow"
                out.print(f"  [{colour}]{escape(d.text())}[/{colour}]\n"
                          f"      {escape(d.effect())}")
        n = len(report.differences)
        out.print("\nno differences" if report.same else
                  f"\n{n} difference{'s' if n != 1 else ''} on {_nodes(len(report.by_node()))}")
    if not report.same:
        sys.exit(1)


@routes.command("export")
@click.argument("spec")
@click.argument("directory", type=click.Path(file_okay=False))
@click.option("--format", "fmt", type=click.Choice(sorted(F.FORMATS)),
              default=None, help=EXPORT_FORMAT_HELP + " [default: iproute2-batch; frr "
              "for a routing: bgp fabric]")
@click.option("--routing", type=click.Choice(ROUTING_MODES), default=None,
              help="The spec in this routing mode (bgp: each router's frr.conf).")
def export_cmd(spec, directory, fmt, routing):
    """Write twin's plan as route tables, one file per node.

    The tables `twin up` installs, in an operator's format: a starting point for
    one's own, and what `twin routes check` and `diff` pass unchanged. A
    DIRECTORY that cannot be written (a file, a path below one, read-only) is
    refused with exit 2; no file is written through a symlink. A routing: bgp
    fabric's routes come from BGP: its export is each router's frr.conf, as
    `twin up` hands it to FRR (`--format frr`).
    """
    c = L.compile_spec(spec, routing=routing)
    if c.spec.bgp is not None:
        if fmt not in (None, "frr"):
            raise UsageError(f"--format {fmt}: fabric {c.fabric.name} runs routing: bgp, "
                             "whose routes come from BGP, not tables; its export is each "
                             "router's frr.conf: --format frr")
        from twin.fabric import frr as frr_conf

        routers = {n: p for n, p in c.plan.nodes.items() if p.bgp is not None}
        written = F.write_files(directory, {
            f"{n}/frr.conf": lambda p=p: frr_conf.frr_conf(c.fabric.name, p, c.spec.bgp)
            for n, p in routers.items()})
        out.print(f"wrote {len(written)} files (frr, routing: bgp) to {escape(directory)}")
        return
    fmt = fmt or "iproute2-batch"
    written = F.write_dir(directory, T.from_plan(c.plan), c.fabric, fmt)
    out.print(f"wrote {len(written)} files ({fmt}) to {escape(directory)}")
