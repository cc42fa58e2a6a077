"""The lab lifecycle (root): up, down, status, exec, restart, verify."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click
from rich.table import Table

from twin import lab as L
from twin import lifecycle
from twin.cli.base import (
    DATAPLANE_CHOICES,
    RUNTIME_CHOICES,
    RichSteps,
    emit_json,
    lab_option,
    main,
    out,
    sigterm_as_interrupt,
)
from twin.errors import UsageError
from twin.fabric.routing import ROUTING_MODES
from twin.progress import Steps
from twin.routes.check import check as check_routes
from twin.routes.formats import FORMATS as ROUTE_FORMATS
from twin.runtime import AUTO_ORDER
from twin.telemetry.collect import record_verify
from twin.verify import AUTO, run_verify
from twin.verify.agreement import Agreement, compare
from twin.verify.coverage import DEFAULT_K, EXHAUSTIVE_MAX

# -- lab lifecycle (root) -----------------------------------------------------


@main.command()
@click.argument("spec")
@click.option("--runtime", type=click.Choice(RUNTIME_CHOICES), default="auto", show_default=True,
              help=f"Where nodes run. auto tries: {', '.join(AUTO_ORDER)}.")
@click.option("--name", default=None,
              help="Lab name instead of the spec's `name:` (several labs of one spec).")
@click.option("--dataplane", type=click.Choice(DATAPLANE_CHOICES), default=None,
              help="Who runs the local SIDs (uN, decap): seg6local (the kernel's SRv6, "
                   "CONFIG_IPV6_SEG6_LWTUNNEL) or ebpf (TC programs, CONFIG_NET_CLS_BPF). "
                   "auto: seg6local where the kernel has it, else ebpf. Default: the "
                   "spec's srv6.dataplane, else auto.")
@click.option("--routes", "routes", metavar="DIR", default=None,
              help="Program the nodes from an operator's own route tables (one file per "
                   "node: see `twin routes --help`) instead of twin's plan; verify, "
                   "faults and drills then run on them.")
@click.option("--routes-format", type=click.Choice(sorted(ROUTE_FORMATS)), default=None,
              help="The --routes tables' format (default: told from the files).")
@click.option("--follow-symlinks", is_flag=True,
              help="Read --routes files that are symlinks leading out of DIR (refused by "
                   "default, as `twin routes check`).")
@click.option("--routing", type=click.Choice(ROUTING_MODES), default=None,
              help="static-srv6: MRC's fabric (static uSID tables, no routing protocol); "
                   "bgp: the same fabric as operators run it today, eBGP and ECMP on FRR "
                   "(docs/bgp-baseline.md). Default: the spec's routing:, else static-srv6.")
@click.option("--verify", "then_verify", is_flag=True,
              help="Then verify it, as `twin verify` does (a lab that fails stays up).")
@click.option("--json", "as_json", is_flag=True, help="Print the lab's state as JSON.")
def up(spec, runtime, name, dataplane, routes, routes_format, follow_symlinks, routing,
       then_verify, as_json):
    """Build a lab: create nodes, wire links, program every route and local
    SID, start the hosts' MRC endpoints.

    A failure or Ctrl-C part way removes what was created. Run
    `twin verify` next to prove the result (or pass --verify). Labs run
    side by side: `twin up mrc-4p --name lab2` is a second mrc-4p.
    With --routes DIR the nodes hold an operator's tables as written, even
    broken ones (`twin routes check` says what they break; verify proves it).
    With --routing bgp the routers run FRR (eBGP unnumbered, ECMP) instead:
    up waits until every router holds what its plan says.
    """
    sigterm_as_interrupt()
    steps = RichSteps()
    try:
        result = L.up(spec, runtime, steps, verify=then_verify, name=name,
                      dataplane=dataplane, routes=routes, routes_format=routes_format,
                      follow_symlinks=follow_symlinks, routing=routing)
    finally:
        steps.done()
    state = result.state
    if as_json:
        emit_json({**L.status(state.lab)[0], **({"verify": result.verify.to_dict()}
                                                if result.verify else {})})
    else:
        out.print(f"[green]lab {state.lab} is up[/green]: {len(state.nodes)} nodes on "
                  f"runtime {state.runtime}, data plane {state.dataplane} "
                  f"({state.dataplane_why})")
        if state.routes:
            out.print(f"routes: the tables in {state.routes}, not twin's plan")
        if result.verify:
            _print_report(result.verify)
            _print_agreement(_against_the_check(L.attach(state.lab), result.verify))
        else:
            _print_next_steps(state.lab)
    if result.verify and not result.verify.ok:
        sys.exit(1)


@main.command(name="attach")
@click.argument("spec")
@click.option("--docker-host", metavar="URL", default=None,
              help="The Docker engine that runs the nodes, as `docker -H` takes it: "
                   "ssh://USER@HOST, tcp://HOST:2376, unix:///var/run/docker.sock "
                   "(default: $DOCKER_HOST).")
@click.option("--namespace", metavar="NS", default=None,
              help="Or: the Kubernetes namespace where clabernetes runs the nodes "
                   "(reached with kubectl exec).")
@click.option("--context", default="", help="With --namespace: the kubeconfig context.")
@click.option("--kubeconfig", default="", help="With --namespace: the kubeconfig file.")
@click.option("--native", is_flag=True,
              help="With --namespace: the pod's container is the node itself (no "
                   "launcher Docker inside the pod).")
@click.option("--topology", default=None,
              help="The deployed topology's name (containerlab `name:`, clabernetes "
                   "Topology), when it is not the lab's.")
@click.option("--name", default=None, help="Lab name instead of the spec's `name:`.")
@click.option("--dataplane", type=click.Choice(DATAPLANE_CHOICES), default=None,
              help="The data plane the nodes booted with (default: the spec's "
                   "srv6.dataplane, else what a node's /etc/mrc-twin/program.json says).")
@click.option("--json", "as_json", is_flag=True, help="Print the lab's state as JSON.")
def attach(spec, docker_host, namespace, context, kubeconfig, native, topology, name,
           dataplane, as_json):
    """Take on a fabric deployed elsewhere, to verify it and break it.

    \b
    The fabric was rendered from SPEC (`twin render SPEC`, or `--target
    clabernetes`) and deployed by containerlab on another machine or by
    clabernetes; its nodes configured themselves at boot. twin reaches them
    only by running commands in them:
      twin attach mrc-4p --docker-host ssh://lab@fabric1      # docker -H URL exec
      twin attach mrc-4p --namespace mrc-twin                 # kubectl exec (clabernetes)
    Then `twin verify`, `twin fault`, `twin stats`, `twin traffic`, `twin exec`,
    `twin probe` (an agent in every host) and `twin drill run` (its times on the
    nodes' clock, each fault's with its uncertainty) work as on a local lab.
    `twin down` reverts twin's faults and forgets the lab: its nodes are left to
    their orchestrator.
    """
    from twin.remote.transport import DockerHost, Kubectl, parse_docker_url

    sigterm_as_interrupt()
    if docker_host and namespace:
        raise UsageError("give --docker-host URL or --namespace NS, not both")
    if (context or kubeconfig or native) and not namespace:
        raise UsageError("--context, --kubeconfig and --native go with --namespace")
    if namespace:
        tr = Kubectl(namespace, context, kubeconfig, launcher=not native)
    else:
        url = docker_host or os.environ.get("DOCKER_HOST")
        if not url:
            raise UsageError("say where the nodes are: --docker-host URL (or $DOCKER_HOST), "
                             "or --namespace NS for clabernetes")
        tr = DockerHost(parse_docker_url(url))
    steps = RichSteps()
    try:
        result = L.adopt(spec, tr, steps, name=name, topology=topology, dataplane=dataplane)
    finally:
        steps.done()
    state = result.state
    if as_json:
        emit_json(L.status(state.lab)[0])
        return
    out.print(f"[green]lab {state.lab} is attached[/green]: {len(state.nodes)} nodes on "
              f"runtime {state.runtime} ({tr.where()}), every one configured at boot")
    _print_steps(attached_steps(state.lab))


def next_steps(att) -> list[tuple[str, str, str]]:
    """What `twin up` suggests next: (label, command, note). Each command names the lab
    with --lab, so it works as printed however many labs are up."""
    lab = att.lab
    host = att.fabric.hosts[0].name
    t0 = att.fabric.nodes[0].name
    return [("verify", f"twin verify --lab {lab}", ""),
            ("look inside", f"twin exec --lab {lab} {t0} -- ip -6 route", ""),
            ("", f"twin exec --lab {lab} {host} -- ip -6 addr show dev lo", ""),
            ("break it", f"twin fault link-down --lab {lab} {t0}:{att.fabric.t0_uplink(0)}",
             ""),
            ("remove", f"twin down --lab {lab}", "")]


def attached_steps(lab: str) -> list[tuple[str, str, str]]:
    """What `twin attach` suggests next, as next_steps."""
    return [("verify", f"twin verify --lab {lab}", ""),
            ("forget it", f"twin down --lab {lab}", "reverts twin's faults; the nodes stay")]


def _print_steps(steps: list[tuple[str, str, str]]) -> None:
    for label, command, note in steps:
        out.print(f"  {label + ':' if label else '':<13}{command}"
                  + (f"   ({note})" if note else ""), markup=False)


def _print_next_steps(lab: str) -> None:
    att = L.attach(lab)
    out.print(f"  build files: {att.state.build_dir}", markup=False)
    _print_steps(next_steps(att))


@main.command()
@lab_option(positional=True, help="The lab to remove (default: the one lab that is up).")
@click.option("--all", "all_", is_flag=True,
              help="Every lab of this run directory (TWIN_RUN_DIR), and what its crashes "
                   "left. Other run directories' labs are named, never touched.")
@click.option("--stray", is_flag=True,
              help="What nobody owns any more: resources whose run directory is gone or "
                   "does not know their lab's id. Lists them, then asks.")
@click.option("--ownerless", is_flag=True,
              help="With --stray: also what carries no owner at all (a twin from before "
                   "owners made it, or not twin).")
@click.option("--yes", is_flag=True, help="With --stray: do not ask.")
@click.option("--dry-run", is_flag=True, help="With --stray: only list.")
@click.option("--json", "as_json", is_flag=True, help="With --stray --dry-run: list as JSON.")
def down(lab, all_, stray, ownerless, yes, dry_run, as_json):
    """Remove a lab: its nodes, links, processes, faults and state.

    \b
    Every namespace, container, veth, nft table and endpoint twin makes
    carries its owner (run directory and lab id), so:
      twin down --lab LAB  that lab (or: twin down LAB)
      twin down --all      this run directory's labs, nothing else
      twin down --stray    what is left of owners that are gone
    """
    if sum(map(bool, (lab, all_, stray))) > 1:
        raise UsageError("give one of --lab LAB, --all or --stray")
    if (yes or dry_run or as_json or ownerless) and not stray:
        raise UsageError("--yes, --dry-run, --ownerless and --json go with --stray")
    if stray:
        _down_stray(yes, dry_run, as_json, ownerless)
        return
    if all_:
        found = L.sweep.inventory()
        removed = lifecycle.down_all()
        if not removed:
            out.print("nothing to remove")
        for name, nodes in removed.items():
            what = "resources" if name.startswith("(") else "nodes"
            out.print(f"removed {name}: {len(nodes)} {what}")
        _left_alone(found)
        return
    done = lifecycle.down(L.resolve_lab(lab))
    if done.kept:
        n = done.faults_reverted
        out.print(f"forgot {done.lab}: its {len(done.kept)} nodes stay with {done.kept_with}; "
                  f"{n} fault{'s' if n != 1 else ''} reverted")
    else:
        out.print(f"removed {done.lab}: {len(done.nodes)} nodes")
    files = done.build
    if files is not None and files.why:  # said only when something of it stays
        what = "its build files removed" if files.removed else "kept"
        out.print(f"  build directory {files.path}: {what}; {files.why}")


def _left_alone(found) -> None:
    others = L.sweep.others(found)
    if others:
        labs = sorted({str(r.owner) for r in others})
        out.print(f"left alone: {len(others)} resources of {len(labs)} live labs of other run "
                  f"directories ({'; '.join(labs[:3])}{' ...' if len(labs) > 3 else ''})")
    strays = [s for s in L.sweep.stray(found, ownerless=True)
              if not (s.resource.owner and s.resource.owner.mine)]
    if strays:
        out.print(f"left alone: {len(strays)} stray resources nobody owns; see "
                  "`twin down --stray --dry-run`")


def _down_stray(yes: bool, dry_run: bool, as_json: bool, ownerless: bool) -> None:
    everything = L.sweep.inventory()
    found = L.sweep.stray(everything, ownerless)
    unowned = [] if ownerless else L.sweep.ownerless(everything)
    if unowned and not as_json:
        out.print(f"left alone: {len(unowned)} resources that carry no owner (e.g. "
                  f"{unowned[0].name}); --ownerless takes them too")
    if as_json:
        if not dry_run:
            raise UsageError("--json lists only: add --dry-run")
        emit_json([s.to_dict() for s in found])
        return
    if not found:
        out.print("nothing stray")
        return
    groups: dict[tuple[str, str], list] = {}
    for s in found:  # one line per owner: a lab's 80 namespaces are one thing to decide on
        owner = str(s.resource.owner) if s.resource.owner else "(no owner)"
        groups.setdefault((owner, s.why), []).append(s.resource)
    for (owner, why), resources in groups.items():
        kinds: dict[str, int] = {}
        for r in resources:
            kinds[r.kind] = kinds.get(r.kind, 0) + 1
        counts = ", ".join(f"{n} {k}{('es' if k.endswith('s') else 's') if n != 1 else ''}"
                           for k, n in kinds.items())
        out.print(f"[bold]{owner}[/bold]: {why}\n  {counts}: "
                  f"{', '.join(r.name for r in resources[:4])}"
                  f"{' ...' if len(resources) > 4 else ''}")
    if dry_run:
        out.print(f"{len(found)} stray resources (dry run: nothing removed)")
        return
    if not yes:
        if not sys.stdin.isatty():
            raise UsageError(f"{len(found)} stray resources listed; pass --yes to remove "
                             "them (stdin is not a terminal to ask on)")
        if not click.confirm(f"remove these {len(found)} resources?", default=False):
            out.print("nothing removed")
            return
    removed = lifecycle.down_stray(found)
    out.print(f"removed {len(removed)} stray resources")


@main.command(name="exec", context_settings={"ignore_unknown_options": True})
@click.argument("node")
@click.argument("argv", nargs=-1, required=True, type=click.UNPROCESSED)
@lab_option()
def exec_(node, argv, lab):
    """Run a command inside a node:  twin exec r0h0 -- ip -6 route"""
    att = L.attach(lab)
    att.node(node)
    full = att.runtime.shell_argv(node, list(argv))
    os.execvp(full[0], full)


@main.command()
@click.argument("node")
@lab_option()
def restart(node, lab):
    """Reboot one node, as a switch reboot: it comes back with no links and no
    routes, so twin wires its links again and re-programs it and its peers.
    Faults in force on its links are applied again."""
    done = lifecycle.restart(L.attach(lab), node)
    again = done.faults_again
    out.print(f"restarted {node}; re-programmed {', '.join(done.reprogrammed)}"
              + (f"; faults applied again: {', '.join(again)}" if again else ""))


@main.command()
@lab_option(positional=True)
@click.option("--json", "as_json", is_flag=True, help="Machine-readable report.")
@click.option("--junit", type=click.Path(dir_okay=False, writable=True), default=None,
              help="Also write JUnit XML (one test case per node and per path).")
@click.option("--no-dataplane", is_flag=True, help="Only compare routes; send no probes.")
@click.option("--coverage", "k", type=click.IntRange(1, 64), default=None, metavar="K",
              help="Send only the probes that cross every route, local SID and host "
                   "port at least K times (default past "
                   f"{EXHAUSTIVE_MAX:,} probes: K={DEFAULT_K}).")
@click.option("--exhaustive", is_flag=True,
              help="Every path of every host pair, however many.")
def verify(lab, as_json, junit, no_dataplane, k, exhaustive):
    """Prove the running lab matches its plan; exit 0 only if all passes.

    \b
    (a) routes: every node's routes and interfaces, read back with
        `ip -j -6 route show`, equal the plan
    (b) paths: a source-routed IPv6-in-IPv6 probe through every path
        between every ordered host pair (each plane, each T1) is answered
    (c) loopbacks: from each host port, host>T0>host and host>T0>T1>T0>host
    Failed probes are cross-checked to name the suspect links.
    (b) and (c) are exhaustive up to 20,000 probes; past that (or with
    --coverage K) only probes that cross every route, local SID and host
    port K times are sent, and the report gives the coverage achieved.
    """
    if k and exhaustive:
        raise UsageError("give --coverage K or --exhaustive, not both")
    att = L.attach(lab)
    if junit:
        _check_writable(junit, "--junit")  # before minutes of probing, not after
    steps = RichSteps() if not as_json else Steps()
    try:
        report = run_verify(att.runtime, att.plan, dataplane=not no_dataplane, steps=steps,
                            coverage=None if exhaustive else k or AUTO)
    finally:
        steps.done()
    if not no_dataplane:  # for twin_verify_paths_failed
        summary = report.summary()
        record_verify(att.state.dir, summary["paths"]["failed"] + summary["loopbacks"]["failed"],
                      "verify")
    if junit:
        try:
            Path(junit).write_text(report.junit())
        except OSError as e:
            raise UsageError(f"--junit {junit}: {e.strerror}") from None
    agreement = _against_the_check(att, report)
    if as_json:
        emit_json({**report.to_dict(), "routes": att.state.routes or None,
                   "agreement": agreement.to_dict() if agreement else None})
    else:
        if att.state.routes:
            out.print(f"routes: checked against the tables in {att.state.routes}")
        _print_report(report)
        _print_agreement(agreement)
    if not report.ok or (agreement and not agreement.ok):
        sys.exit(1)


def _against_the_check(att, report) -> Agreement | None:
    """On a lab brought up from an operator's tables: the paths `twin routes check` says
    are lost against those verify lost (twin.verify.agreement)."""
    routes = att.compiled.routes
    if routes is None or report.dataplane_skipped:
        return None
    return compare(check_routes(att.compiled.own_plan, routes), report)


def agreement_counts(agreed: Agreement) -> str:
    """What the agreement compared, in terms that add up to the failed probes listed
    above it: requests lost (the paths the check says are not delivered), and the
    probes that lost only their reply, which the comparison does not count."""
    said = f"{agreed.verify_lost} path{'s' * (agreed.verify_lost != 1)} lost in both"
    if agreed.reply_lost:
        said += (f"; {agreed.reply_lost} more failed probe{'s' * (agreed.reply_lost != 1)} "
                 "lost only the reply, on the way back (a path the check walks on its own)")
    return said


def _print_agreement(agreed: Agreement | None) -> None:
    if agreed is None:
        return
    scope = "" if agreed.exhaustive else " (coverage verify: on the probed paths)"
    if agreed.ok:
        out.print(f"[green]agrees with `twin routes check` path for path[/green]{scope}: "
                  f"{agreement_counts(agreed)}")
        return
    out.print(f"[bold red]disagrees with `twin routes check` on "
              f"{len(agreed.disagreements)} paths[/bold red]{scope}:")
    for line in agreed.lines()[:20]:
        out.print(f"  {line}", markup=False)


def _check_writable(path: str, option: str) -> None:
    parent = Path(path).resolve().parent
    if not parent.is_dir():
        raise UsageError(f"{option} {path}: directory {parent} does not exist")
    if not os.access(parent, os.W_OK):
        raise UsageError(f"{option} {path}: directory {parent} is not writable")


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
    if report.coverage:
        c = report.coverage
        colour = "green" if c["achieved"] >= c["k"] else "red"
        out.print(f"coverage: every route, local SID and host port crossed by at least "
                  f"[{colour}]{c['achieved']}[/{colour}] probes (asked {c['k']}): "
                  f"{c['probes']:,} probes instead of {c['exhaustive_probes']:,} "
                  "(--exhaustive for all)")
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
