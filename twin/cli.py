"""`twin`: the one command-line interface. It owns all output.

People get tables and progress bars (progress on stderr); machines get
`--json` on every read command. Errors from twin print as one message and
an exit code (2: bad input, 1: a failed operation or check); `--debug`
shows the traceback too.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path

import click
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from twin import faults as F
from twin import lab as L
from twin import paths as P
from twin import size as S
from twin.errors import SpecError, TwinError, UsageError
from twin.progress import Steps
from twin.runtime import AUTO_ORDER, RUNTIMES
from twin.state import run_root
from twin.verify import run_verify

out = Console(highlight=False, soft_wrap=True)
err = Console(stderr=True, highlight=False)

RUNTIME_CHOICES = ["auto", *[n for n in sorted(RUNTIMES) if n != "fake"]]


class RichSteps(Steps):
    """Progress bars on stderr, one line per phase."""

    def __init__(self) -> None:
        self.progress = Progress(TextColumn("{task.description:<28}"), BarColumn(),
                                 MofNCompleteColumn(), TimeElapsedColumn(), console=err,
                                 transient=False, disable=not err.is_terminal)
        self.task = None
        self.progress.start()

    def start(self, label: str, total: int | None = None) -> None:
        self._finish()
        if not err.is_terminal:
            err.print(f"[dim]- {label}[/dim]")
        self.task = self.progress.add_task(label, total=total or 1)

    def advance(self, n: int = 1) -> None:
        if self.task is not None:
            self.progress.advance(self.task, n)

    def update(self, done: int, total: int, attempt: int = 0) -> None:
        if self.task is not None:
            desc = None if attempt == 0 else f"probing (retry {attempt})"
            self.progress.update(self.task, completed=done, total=total,
                                 **({"description": desc} if desc else {}))

    def note(self, text: str) -> None:
        self.progress.console.print(f"[cyan]{text}[/cyan]")

    def _finish(self) -> None:
        if self.task is not None:
            t = self.progress.tasks[-1]
            self.progress.update(self.task, completed=t.total)

    def done(self) -> None:
        self._finish()
        self.progress.stop()


def _emit_json(data) -> None:
    click.echo(json.dumps(data, indent=2, sort_keys=False))


def _sigterm_as_interrupt() -> None:
    """Let SIGTERM unwind like Ctrl-C, so `twin up` rolls back on either."""
    def handler(signum, frame):
        raise KeyboardInterrupt
    signal.signal(signal.SIGTERM, handler)


class TwinGroup(click.Group):
    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except SpecError as e:
            err.print(f"[red]error:[/red] {e.render()}", markup=True, highlight=False)
            if ctx.obj and ctx.obj.get("debug"):
                raise
            sys.exit(e.exit_code)
        except TwinError as e:
            err.print(f"[red]error:[/red] {e}", highlight=False)
            if ctx.obj and ctx.obj.get("debug"):
                raise
            sys.exit(e.exit_code)
        except KeyboardInterrupt:
            err.print("[yellow]interrupted[/yellow]")
            sys.exit(130)


@click.group(cls=TwinGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--debug", is_flag=True, help="Show tracebacks for errors.")
@click.pass_context
def main(ctx, debug):
    """mrc-twin: a digital twin of MRC multi-plane SRv6 AI-training fabrics.

    \b
    Typical session:
      twin plan mrc-4p              what every router and host will hold
      twin up mrc-4p                build the lab (namespaces, veths, routes)
      twin verify                   prove every route and every path
      twin fault link-down t0-p0-r0:eth3
      twin verify                   fails exactly the paths over that link
      twin fault link-up t0-p0-r0:eth3
      twin down --all               remove every lab of this run directory (TWIN_RUN_DIR)

    SPEC is a file (lab/fabrics/mrc-4p.yml) or a shipped fabric's name
    (mrc-4p). LAB defaults to the one lab that is up.
    """
    ctx.ensure_object(dict)
    ctx.obj["debug"] = debug


# -- pure commands (no root) --------------------------------------------------


@main.command()
@click.argument("spec")
@click.option("--node", "nodes", multiple=True, help="Only these nodes (repeatable).")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def plan(spec, nodes, as_json):
    """Print the route plan: every node's static routes and local SIDs.

    Nothing is created; this needs no root. The plan is exactly what
    `twin up` programs and `twin verify` checks.
    """
    c = L.compile_spec(spec)
    chosen = list(nodes) or list(c.plan.nodes)
    for n in chosen:
        if n not in c.plan.nodes:
            raise UsageError(f"no node {n!r} in {c.spec.name}")
    if as_json:
        _emit_json({"lab": c.spec.name, "nodes": [c.plan[n].to_dict() for n in chosen]})
        return
    f = c.fabric
    out.print(f"[bold]{c.spec.name}[/bold]: {c.spec.planes} planes x {c.spec.racks} racks x "
              f"{c.spec.hosts_per_rack} hosts/rack, {c.spec.t1_per_plane} T1/plane: "
              f"{len(f.switches)} routers, {len(f.hosts)} hosts, {len(f.links)} links, "
              f"block {c.spec.block}")
    for n in chosen:
        np_ = c.plan[n]
        sid = f", uSID {np_.sid}" if np_.sid else f", NIC {np_.loopback[0]}"
        out.print(f"\n[bold]{n}[/bold] ({np_.tier}{sid})")
        for r in np_.routes:
            out.print(f"  {r.describe():<64} [dim]{r.note}[/dim]")


@main.command()
@click.argument("spec")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def render(spec, as_json):
    """Write the containerlab topology and per-node configs under lab/build/<lab>/.

    \b
    lab/build/<lab>/<lab>.clab.yml           containerlab topology (kind: linux)
    lab/build/<lab>/config/<node>/node.json  the node's full plan
    lab/build/<lab>/config/<node>/routes.batch   the same, as `ip -batch` input
    lab/build/<lab>/config/<node>/sysctl.conf
    """
    c = L.compile_spec(spec)
    build_dir = L.render_lab(c)
    files = sorted(str(p.relative_to(build_dir)) for p in build_dir.rglob("*") if p.is_file())
    if as_json:
        _emit_json({"lab": c.spec.name, "build_dir": str(build_dir), "files": files})
        return
    out.print(f"rendered {len(files)} files for {c.spec.name} in {build_dir}")
    out.print(f"  topology: {build_dir / (c.spec.name + '.clab.yml')}")
    out.print(f"  configs:  {build_dir / 'config'}/<node>/")


@main.command()
@click.argument("spec")
@click.argument("src")
@click.argument("dst")
@click.option("--ev", type=str, default=None, help="Show the path of this EV (decimal or 0x..).")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def paths(spec, src, dst, ev, as_json):
    """List the source-routed paths from host SRC to host DST.

    With --ev, apply the EV -> path formula to one entropy value.
    """
    c = L.compile_spec(spec)
    f = c.fabric
    for h in (src, dst):
        if not f.has_node(h) or f.node(h).is_switch:
            raise UsageError(f"{h!r} is not a host of {c.spec.name} (hosts: "
                             f"{', '.join(x.name for x in f.hosts)})")
    s, d = f.node(src), f.node(dst)
    try:
        if ev is not None:
            found = [P.path_for_ev(f, s, d, int(ev, 0))]
        else:
            found = [p for p in P.host_pairs_paths(f) if p.src == src and p.dst == dst]
    except ValueError as e:
        raise UsageError(str(e)) from None
    if as_json:
        _emit_json([{"plane": p.plane, "t1": p.t1, "ev": p.ev, "address": p.address,
                     "hops": list(p.hops), "links": list(p.links)} for p in found])
        return
    for p in found:
        out.print(f"{p.address:<34} plane {p.plane} "
                  f"{'t1 ' + str(p.t1) if p.t1 is not None else 'same rack':<10} "
                  f"ev {p.ev:#010x}  {' > '.join(p.hops)}")


@main.command()
@click.option("--radix", type=int, required=True, help="Switch ports at plane speed (512).")
@click.option("--planes", type=int, required=True, help="Planes = ports per NIC (8).")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def size(radix, planes, as_json):
    """Full-scale calculator: two-tier multi-plane vs single-plane three-tier.

    For a 51.2T switch as 512 x 100G and an 800G NIC as 8 x 100G:

        twin size --radix 512 --planes 8
    """
    mp, tt = S.compare(radix, planes)
    if as_json:
        _emit_json({"radix": radix, "planes": planes,
                    "multi_plane": mp.to_dict(), "three_tier": tt.to_dict()})
        return
    t = Table(title=f"radix {radix}, {planes} planes")
    t.add_column("")
    t.add_column(mp.name, justify="right")
    t.add_column(tt.name, justify="right")

    def pct(fr):
        return f"1/{fr.denominator} ({float(fr) * 100:.1f}%)" if fr.numerator == 1 else \
            f"{float(fr) * 100:.1f}%"

    t.add_row("NICs", f"{mp.nics:,}", f"{tt.nics:,}")
    t.add_row("switch tiers", str(mp.tiers), str(tt.tiers))
    t.add_row("switches", f"{mp.total_switches:,} (" + ", ".join(
        f"{k} {v:,}" for k, v in mp.switches.items()) + ")",
        f"{tt.total_switches:,} (" + ", ".join(f"{k} {v:,}" for k, v in tt.switches.items())
        + ")")
    t.add_row("capacity lost per leaf uplink", pct(mp.loss_per_uplink), pct(tt.loss_per_uplink))
    t.add_row("capacity lost per NIC port", pct(mp.loss_per_nic_port),
              pct(tt.loss_per_nic_port))
    t.add_row("max switches on a path", str(mp.max_switch_hops), str(tt.max_switch_hops))
    out.print(t)


# -- lab lifecycle (root) -----------------------------------------------------


@main.command()
@click.argument("spec")
@click.option("--runtime", type=click.Choice(RUNTIME_CHOICES), default="auto", show_default=True,
              help=f"Where nodes run. auto tries: {', '.join(AUTO_ORDER)}.")
@click.option("--json", "as_json", is_flag=True, help="Print the lab's state as JSON.")
def up(spec, runtime, as_json):
    """Build a lab: create nodes, wire links, program every route.

    A failure or Ctrl-C part way removes what was created. Run
    `twin verify` next to prove the result.
    """
    _sigterm_as_interrupt()
    steps = RichSteps()
    try:
        state = L.up(spec, runtime, steps)
    finally:
        steps.done()
    if as_json:
        _emit_json(L.status(state.lab)[0])
        return
    out.print(f"[green]lab {state.lab} is up[/green]: {len(state.nodes)} nodes on runtime "
              f"{state.runtime}")
    _print_next_steps(state.lab)


def _print_next_steps(lab: str) -> None:
    att = L.attach(lab)
    host = att.fabric.hosts[0].name
    t0 = att.fabric.nodes[0].name
    out.print(f"  build files: {att.state.build_dir}")
    out.print(f"  verify:      twin verify {lab}")
    out.print(f"  look inside: twin exec {t0} -- ip -6 route")
    out.print(f"               twin exec {host} -- ip -6 addr show dev lo")
    out.print(f"  break it:    twin fault link-down {t0}:{att.fabric.t0_uplink(0)}")
    out.print(f"  remove:      twin down {lab}")


@main.command()
@click.argument("lab", required=False)
@click.option("--all", "all_", is_flag=True,
              help="Every lab of this run directory, and what its crashes left; other run "
                   "directories' labs are named, never touched.")
def down(lab, all_):
    """Remove a lab: its nodes, links, processes, faults and state."""
    if all_:
        removed = L.down_all()
        if not removed:
            out.print("nothing to remove")
        for name, nodes in removed.items():
            out.print(f"removed {name}: {len(nodes)} nodes")
        others = L.foreign_namespaces()
        if others:
            out.print(f"left alone: {len(others)} twin-* namespaces that no lab of this run "
                      f"directory ({run_root()}) owns, e.g. {others[0]}; `twin down` them "
                      "from their own run directory")
        return
    name = L.resolve_lab(lab)
    nodes = L.down(name)
    out.print(f"removed {name}: {len(nodes)} nodes")


@main.command()
@click.argument("lab", required=False)
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def status(lab, as_json):
    """Show the labs that are up and the state of their nodes."""
    labs = L.status(lab)
    if as_json:
        _emit_json(labs)
        return
    if not labs:
        out.print("no lab is up (start one with `twin up mrc-4p`)")
        return
    for s in labs:
        running = sum(n["state"] == "running" for n in s["nodes"])
        out.print(f"[bold]{s['lab']}[/bold]  runtime {s['runtime']}  phase {s['phase']}  "
                  f"{running}/{len(s['nodes'])} nodes running  spec {s['spec']}")
        t = Table(show_edge=False, box=None, pad_edge=False)
        for col in ("node", "runtime", "state", "image"):
            t.add_column(col)
        for n in s["nodes"]:
            state = n["state"] if n["state"] == "running" else f"[red]{n['state']}[/red]"
            t.add_row(n["node"], s["runtime"], state, n.get("image", "-"))
        out.print(t)
        att = L.attach(s["lab"])
        for fault in F.active(att):
            out.print(f"  [yellow]fault:[/yellow] {fault.kind} {fault.link} "
                      f"(ends down: {', '.join(fault.ends)})")


@main.command(name="exec", context_settings={"ignore_unknown_options": True})
@click.argument("node")
@click.argument("argv", nargs=-1, required=True, type=click.UNPROCESSED)
@click.option("--lab", default=None, help="Lab (default: the one that is up).")
def exec_(node, argv, lab):
    """Run a command inside a node:  twin exec r0h0 -- ip -6 route"""
    att = L.attach(lab)
    if not att.fabric.has_node(node):
        raise UsageError(f"no node {node!r} in lab {att.state.lab}")
    full = att.runtime.shell_argv(node, list(argv))
    os.execvp(full[0], full)


@main.command()
@click.argument("node")
@click.option("--lab", default=None, help="Lab (default: the one that is up).")
def restart(node, lab):
    """Reboot one node, as a switch reboot: it comes back with no links and no
    routes, so twin wires its links again and re-programs it and its peers.
    Faults in force on its links are applied again."""
    att = L.attach(lab)
    touched = L.restart(att, node)
    again = F.reapply(att, node)
    out.print(f"restarted {node}; re-programmed {', '.join(touched)}"
              + (f"; faults applied again: {', '.join(again)}" if again else ""))


@main.command()
@click.argument("lab", required=False)
@click.option("--json", "as_json", is_flag=True, help="Machine-readable report.")
@click.option("--junit", type=click.Path(dir_okay=False, writable=True), default=None,
              help="Also write JUnit XML (one test case per node and per path).")
@click.option("--no-dataplane", is_flag=True, help="Only compare routes; send no probes.")
def verify(lab, as_json, junit, no_dataplane):
    """Prove the running lab matches its plan; exit 0 only if all passes.

    \b
    (a) routes: every node's routes and interfaces, read back with
        `ip -j -6 route show`, equal the plan
    (b) paths: a source-routed IPv6-in-IPv6 probe through every path
        between every ordered host pair (each plane, each T1) is answered
    (c) loopbacks: from each host port, host>T0>host and host>T0>T1>T0>host
    Failed probes are cross-checked to name the suspect links.
    """
    att = L.attach(lab)
    steps = RichSteps() if not as_json else Steps()
    try:
        report = run_verify(att.runtime, att.plan, dataplane=not no_dataplane, steps=steps)
    finally:
        steps.done()
    if junit:
        Path(junit).write_text(report.junit())
    if as_json:
        _emit_json(report.to_dict())
    else:
        _print_report(report)
    if not report.ok:
        sys.exit(1)


def _print_report(report) -> None:
    summary = report.summary()
    t = Table(title=f"twin verify {report.lab} ({report.runtime}, {report.seconds:.1f}s)")
    t.add_column("check")
    t.add_column("total", justify="right")
    t.add_column("passed", justify="right")
    t.add_column("failed", justify="right")
    for name, label in (("routes", "routes (per node)"), ("paths", "host-to-host paths"),
                        ("loopbacks", "loopback probes")):
        s = summary[name]
        failed = f"[red]{s['failed']}[/red]" if s["failed"] else "0"
        t.add_row(label, str(s["total"]), str(s["passed"]), failed)
    out.print(t)
    if report.dataplane_skipped:
        out.print(f"[yellow]data plane not probed: {report.dataplane_skipped}[/yellow]")
    for n in report.nodes:
        for problem in n.problems()[:10]:
            out.print(f"  [red]{n.node}[/red]: {problem}")
    failed = [r for r in [*report.paths, *report.loops] if not r.ok]
    for r in failed[:20]:
        out.print(f"  [red]FAIL[/red] {r.path.label}: {r.failure} ({r.path.address})")
    if len(failed) > 20:
        out.print(f"  ... and {len(failed) - 20} more (use --json for all)")
    suspects = report.suspect_links()
    if suspects:
        out.print("[bold red]suspect links[/bold red] (on every failed path, on no passing one):")
        for s in suspects:
            out.print(f"  {s}")
    out.print("[green]PASS[/green]" if report.ok else "[red]FAIL[/red]")


# -- traffic ----------------------------------------------------------------------


def _size(text: str) -> int:
    units = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    t = text.strip().upper().removesuffix("B").removesuffix("I")
    num, unit = (t[:-1], t[-1]) if t and t[-1] in units else (t, "")
    try:
        value = int(float(num) * units[unit])
    except ValueError:
        raise UsageError(f"--size {text!r}: use bytes or K/M/G, e.g. 256M") from None
    if value <= 0:
        raise UsageError("--size must be positive")
    return value


@main.command()
@click.argument("pattern", type=click.Choice(["bulk", "incast", "all-to-all", "ring"]))
@click.option("--src", default=None, help="Source host (bulk).")
@click.option("--dst", default=None, help="Destination host (bulk, incast).")
@click.option("--size", default="64M", show_default=True, help="Bytes per flow (K/M/G).")
@click.option("--mode", type=click.Choice(["mrc", "single-path", "spray-static"]),
              default="mrc", show_default=True,
              help="mrc sprays and adapts; single-path is RoCE over ECMP; spray-static sprays "
                   "but never adapts.")
@click.option("--evs", default=128, show_default=True, help="EVs per QP.")
@click.option("--cut", "cut", default=None, metavar="NODE:IF",
              help="Take this link down mid-transfer (brought back up when the run ends).")
@click.option("--cut-at", default=0.5, show_default=True, metavar="SECONDS",
              help="When --cut happens, in seconds after the first write.")
@click.option("--lab", default=None)
@click.option("--json", "as_json", is_flag=True)
def traffic(pattern, src, dst, size, mode, evs, cut, cut_at, lab, as_json):
    """Move verified bytes through the hosts' MRC endpoints.

    \b
      twin traffic bulk --src r0h0 --dst r1h0 --size 256M
      twin traffic bulk --src r0h0 --dst r1h0 --mode single-path
      twin traffic bulk --src r0h0 --dst r1h0 --size 256M --cut t0-p0-r0:eth3
      twin traffic incast --dst r0h0 --size 16M
    Every destination buffer is checked against its source (sha256). When the
    transports lost packets, retired EVs or saw a port change, a failover line
    says when it was detected and repaired (µs after the fault); --json holds
    the event logs themselves.
    """
    from twin import faults as F
    from twin import traffic as T

    att = L.attach(lab)
    hosts = [h.name for h in att.fabric.hosts]
    for h in (src, dst):
        if h is not None and h not in hosts:
            raise UsageError(f"{h!r} is not a host of {att.state.lab} ({', '.join(hosts)})")
    flows = T.flows_for(pattern, hosts, _size(size), src, dst)
    scheduled, applied = [], []
    if cut:
        link = att.fabric.link_at(F.parse_endpoint(att, cut))  # bad NODE:IF: fail now
        if any(f.link == link.id for f in F.active(att)):  # its fault is not ours to undo
            raise UsageError(f"link {link.id} is already down; `twin fault link-up {cut}` "
                             "first, or cut another link")
        if cut_at < 0:
            raise UsageError("--cut-at must be >= 0 seconds")

        def cut_link():
            applied.append(cut)  # before: a half-applied cut is still undone
            F.link_down(att, cut)
            return f"link-down {cut}"

        scheduled.append((cut_at, cut_link))

    shown = [0.0]

    def progress(acked, total, t):
        """A live line on a terminal; a line a second otherwise (logs stay short)."""
        if as_json or (not err.is_terminal and t - shown[0] < 1.0):
            return
        shown[0] = t
        rate = acked * 8 / t / 1e9 if t > 0 else 0
        line = (f"{pattern} {mode}: {acked / total:6.1%} of {total / 2**20:.0f} MiB, "
                f"{rate:5.2f} Gbit/s, {t:5.1f}s")
        err.print(f"\r{line}" if err.is_terminal else line, end="" if err.is_terminal else "\n")

    try:
        result = T.run(att.runtime, pattern, flows, mode, evs=evs, progress=progress,
                       faults=scheduled)
    finally:
        if applied:
            F.link_up(att, cut)
    if as_json:
        _emit_json(result.to_dict())
    else:
        if err.is_terminal:
            err.print()
        t = Table(title=f"{pattern}, mode {mode}, {result.elapsed_s:.2f}s")
        for col in ("flow", "bytes", "Gbit/s", "retx", "EV retirements", "planes", "exact"):
            t.add_column(col)
        for f in result.flows:
            r = f.result
            t.add_row(f"{f.src} -> {f.dst}", f"{f.size:,}", f"{r.get('goodput_gbps', 0):.2f}",
                      str(r.get("sender", {}).get("retransmits")),
                      str(r.get("ev_retirements_total")),
                      ",".join(map(str, r.get("planes_in_use", []))),
                      "[green]yes[/green]" if f.exact else f"[red]NO {r.get('failed') or ''}[/red]")
        out.print(t)
        for episode in result.failover():
            if episode.eventful or episode.fault:
                out.print(episode.line())
    if not result.ok:
        sys.exit(1)


@main.command()
@click.argument("host", required=False)
@click.option("--lab", default=None)
@click.option("--prometheus", is_flag=True, help="Prometheus text exposition instead.")
@click.option("--json", "as_json", is_flag=True)
def stats(host, lab, prometheus, as_json):
    """Counters of the hosts' MRC endpoints (all hosts, or HOST)."""
    from twin import endpoints

    att = L.attach(lab)
    hosts = [host] if host else [h.name for h in att.fabric.hosts]
    data = {}
    for h in hosts:
        with endpoints.client(att.runtime, h) as c:
            data[h] = c.call("metrics")["text"] if prometheus else c.call("stats")
    if prometheus:
        click.echo("".join(data.values()), nl=False)
        return
    if as_json:
        _emit_json(data)
        return
    t = Table(title=f"endpoints of {att.state.lab}")
    for col in ("host", "ports up", "send QPs", "recv QPs", "bytes sent", "bytes placed",
                "retx", "bad packets"):
        t.add_column(col)
    for h, d in data.items():
        tot = d["totals"]
        t.add_row(h, f"{d['ports']:#06b}", str(len(d["send_qps"])), str(len(d["recv_qps"])),
                  f"{tot['bytes_sent']:,}", f"{tot['bytes_placed']:,}",
                  str(tot["retransmits"]), str(d["bad_packets"]))
    out.print(t)


# -- engine and images --------------------------------------------------------


@main.group()
def engine():
    """The Docker engine the container runtimes use. twin starts one only when
    none answers, always as `dockerd --bridge=none --iptables=false`."""


@engine.command("start")
def engine_start():
    """Install docker.io if missing and start dockerd (idempotent)."""
    from twin import dockerd as E

    steps = RichSteps()
    try:
        what, _ = E.start(steps)
    finally:
        steps.done()
    out.print(f"docker engine: {what}")


@engine.command("stop")
def engine_stop():
    """Stop the dockerd twin started (never one it did not)."""
    from twin import dockerd as E

    out.print(E.stop())


@engine.command("status")
@click.option("--json", "as_json", is_flag=True)
def engine_status(as_json):
    """Does an engine answer, and which version."""
    from twin import dockerd as E

    c = E.client(timeout=5)
    info = {"running": c is not None}
    if c is not None:
        v = c.version()
        info.update(version=v.get("Version"), api=v.get("ApiVersion"))
    if as_json:
        _emit_json(info)
    else:
        out.print(f"docker engine {info['version']} (API {info['api']})" if c else
                  "no docker engine answers (twin engine start)")


@main.group()
def images():
    """Node images: mrc-twin/router and mrc-twin/host."""


@images.command("build")
@click.option("--force", is_flag=True, help="Rebuild even if the inputs are unchanged.")
@click.option("--base", default=None, help="Build on this base image (e.g. debian:bookworm-slim "
              "from your registry) instead of the offline debootstrap base.")
def images_build(force, base):
    """Build the images (offline by default: a debootstrap base from apt's mirror)."""
    from twin import dockerd as E
    from twin import images as I

    c = E.client()
    if c is None:
        raise UsageError("no docker engine answers; run `twin engine start` first")
    steps = RichSteps()
    try:
        results = I.build_images(c, steps, force=force, base=base)
    finally:
        steps.done()
    for image, what, seconds in results:
        out.print(f"{image}: {what} ({seconds:.1f}s)")


@images.command("status")
@click.option("--json", "as_json", is_flag=True)
def images_status(as_json):
    """Which images exist and whether they match their inputs."""
    from twin import dockerd as E
    from twin import images as I

    c = E.client(timeout=5)
    if c is None:
        raise UsageError("no docker engine answers; run `twin engine start` first")
    rows = I.image_status(c)
    if as_json:
        _emit_json(rows)
        return
    for r in rows:
        state = "current" if r.get("current") else ("stale" if r.get("present") else "missing")
        out.print(f"{r['image']:<28} {state}")


# -- faults -------------------------------------------------------------------


@main.group()
def fault():
    """Inject and revert faults. Every fault is recorded before it is applied,
    so `twin fault clear` (or `twin down`) undoes it even after a crash."""


@fault.command("link-down")
@click.argument("endpoint")
@click.option("--both", is_flag=True, help="Set both ends down (default: only this end; the "
              "other end then loses carrier).")
@click.option("--lab", default=None)
def fault_link_down(endpoint, both, lab):
    """Take a link down at NODE:IFNAME, e.g. t0-p0-r0:eth3."""
    att = L.attach(lab)
    f = F.link_down(att, endpoint, both)
    out.print(f"link {f.link} down (set down: {', '.join(f.ends)})")


@fault.command("link-loss")
@click.argument("endpoint")
@click.argument("percent", type=float)
@click.option("--lab", default=None)
def fault_link_loss(endpoint, percent, lab):
    """Drop PERCENT% of the packets on a link, both directions (nftables numgen
    random at the switch end). Revert with `twin fault link-up NODE:IF`."""
    att = L.attach(lab)
    f = F.link_loss(att, endpoint, percent)
    out.print(f"link {f.link}: {f.percent:g}% loss (nftables at {f.ends[0]})")


@fault.command("link-up")
@click.argument("endpoint")
@click.option("--lab", default=None)
def fault_link_up(endpoint, lab):
    """Revert a fault on a link: bring it back up and re-program both ends, or
    remove its loss rule."""
    att = L.attach(lab)
    f = F.link_up(att, endpoint)
    link = att.fabric.link_at(F.parse_endpoint(att, endpoint))
    out.print(f"link {link.id} up" + ("" if f else " (no fault was recorded; healed anyway)"))


@fault.command("list")
@click.option("--lab", default=None)
@click.option("--json", "as_json", is_flag=True)
def fault_list(lab, as_json):
    """Show the faults in force."""
    att = L.attach(lab)
    faults = F.active(att)
    if as_json:
        _emit_json([f.to_dict() for f in faults])
        return
    if not faults:
        out.print("no faults in force")
    for f in faults:
        out.print(f"{f.kind} {f.link} (ends down: {', '.join(f.ends)})")


@fault.command("clear")
@click.option("--lab", default=None)
def fault_clear(lab):
    """Revert every fault in force."""
    att = L.attach(lab)
    reverted = F.clear(att)
    out.print(f"reverted {len(reverted)} fault{'s' if len(reverted) != 1 else ''}")


if __name__ == "__main__":
    main()
