"""Commands that compile a spec and print what it means (no root): plan, render,
paths, size.

`twin size` is a calculator a trainee runs often: the compiler (twin.lab, the
clabernetes and render modules) is imported by the commands that compile (issue 40).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click
from rich.table import Table

from twin import validate as V
from twin.cli.base import DATAPLANE_CHOICES, emit_json, main, out
from twin.errors import UsageError
from twin.fabric import size as S
from twin.fabric.routing import ROUTING_MODES, STATIC_SRV6

if TYPE_CHECKING:
    from twin.lab import Compiled

RENDER_AUTO = "ebpf"  # `twin render`'s auto: the data plane every deployment's kernel runs
# twin.fabric.clabernetes.DEFAULT_NAMESPACE, for --namespace's help without importing it
# (tests/unit/test_cli_lazy.py holds them equal)
NAMESPACE = "mrc-twin"
# An EV as a user gives one (`twin paths --ev`), 32 bits as twin.fabric.paths lays them
# out; here, so that `twin size` need not import the path compiler
EV = V.Int(0, (1 << 32) - 1, text=True, words=V.SPAN, what="an entropy value",
           hint="32 bits in decimal or 0x..: plane (3..0), T1 (11..4), free entropy")

# -- pure commands (no root) --------------------------------------------------


def _routing_summary(spec) -> str:
    """The header's routing part: nothing for static-srv6 (its text is unchanged)."""
    if spec.routing == STATIC_SRV6:
        return ""
    b = spec.bgp
    bfd = f"BFD {b.bfd.interval_ms} ms x{b.bfd.multiplier}" if b.bfd else "no BFD"
    return (f"\nrouting {spec.routing}: host links {b.link_prefix}, timers "
            f"{b.keepalive}/{b.hold} s, {bfd}, maximum-paths {b.maximum_paths}")


@main.command()
@click.argument("spec")
@click.option("--node", "nodes", multiple=True, help="Only these nodes (repeatable).")
@click.option("--routing", type=click.Choice(ROUTING_MODES), default=None,
              help="Plan the fabric under this routing mode (default: the spec's routing:, "
                   "itself static-srv6 unless set); bgp: the eBGP/ECMP baseline on FRR.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def plan(spec, nodes, routing, as_json):
    """Print the route plan: every node's static routes and local SIDs.

    Nothing is created; this needs no root. The plan is exactly what
    `twin up` programs and `twin verify` checks.
    """
    from twin import lab as L
    from twin.fabric.plan import plan_lines

    c = L.compile_spec(spec, routing=routing)
    chosen = list(nodes) or list(c.plan.nodes)
    for n in chosen:
        L.require_node(c.fabric, n)
    if as_json:
        emit_json({"lab": c.spec.name, "nodes": [c.plan[n].to_dict() for n in chosen]})
        return
    f = c.fabric
    out.print(f"[bold]{c.spec.name}[/bold]: {c.spec.planes} planes x {c.spec.racks} racks x "
              f"{c.spec.hosts_per_rack} hosts/rack, {c.spec.t1_per_plane} T1/plane: "
              f"{len(f.switches)} routers, {len(f.hosts)} hosts, {len(f.links)} links, "
              f"block {c.spec.block}" + _routing_summary(c.spec))
    for n in chosen:
        np_ = c.plan[n]
        sid = f", uSID {np_.sid}" if np_.sid else f", NIC {np_.loopback[0]}"
        out.print(f"\n[bold]{n}[/bold] ({np_.tier}{sid})")
        for what, note in plan_lines(np_):
            out.print(f"  {what:<64} [dim]{note}[/dim]")
        for q in np_.queues:  # the fabric signals (docs/ebpf.md), after the routes
            what = (f"{q.dev} queue {q.rate_bps / 1e6:g}"
                    f" Mbit/s: CE {q.ecn_min}-{q.ecn_max}, trim {q.trim}, drop {q.drop}")
            note = "egress; no CE: the last hop" if not q.mark else "egress"
            out.print(f"  {what:<64} [dim]{note}[/dim]")


@main.command()
@click.argument("spec")
@click.option("--target", type=click.Choice(["lab", "clabernetes"]), default="lab",
              show_default=True,
              help="lab: the build directory every runtime deploys. clabernetes: one file of "
                   "Kubernetes objects that runs the lab across a cluster.")
@click.option("--namespace", default=None,
              help=f"Kubernetes namespace of the objects (--target clabernetes; default "
                   f"{NAMESPACE}).")
@click.option("--dataplane", type=click.Choice(DATAPLANE_CHOICES), default=None,
              help="How the nodes install their local SIDs: seg6local or ebpf. Default: the "
                   f"spec's srv6.dataplane; auto renders {RENDER_AUTO}, which runs on any "
                   "kernel with cls_bpf, wherever the topology is deployed.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def render(spec, target, namespace, dataplane, as_json):
    """Write the containerlab topology and per-node configs under lab/build/<lab>/.

    \b
    lab/build/<lab>/<lab>.clab.yml           containerlab topology (kind: linux)
    lab/build/<lab>/config/<node>/node.json  the node's full plan
    lab/build/<lab>/config/<node>/routes.batch   the same, as `ip -batch` input
    lab/build/<lab>/config/<node>/sysctl.conf

    With --target clabernetes, write lab/build/<lab>/<lab>.clabernetes.yml instead: a
    clabernetes Topology that embeds the topology, and ConfigMaps with every node's
    files and the twin code hosts run (docs/scale-out.md).
    """
    if namespace is not None and target != "clabernetes":
        raise UsageError("--namespace: only for --target clabernetes")
    from twin import lab as L

    c = L.compile_spec(spec)
    chosen = dataplane or c.spec.dataplane
    dp = RENDER_AUTO if chosen == "auto" else chosen
    if target == "clabernetes":
        _render_clabernetes(c, dp, namespace or NAMESPACE, as_json)
        return
    build_dir = L.render_lab(c, dp)
    files = sorted(str(p.relative_to(build_dir)) for p in build_dir.rglob("*") if p.is_file())
    if as_json:
        emit_json({"lab": c.spec.name, "target": target, "build_dir": str(build_dir),
                   "dataplane": dp, "files": files})
        return
    out.print(f"rendered {len(files)} files for {c.spec.name} in {build_dir} "
              f"(data plane {dp}{'; auto renders the portable one' if chosen == 'auto' else ''})")
    out.print(f"  topology: {build_dir / (c.spec.name + '.clab.yml')}")
    out.print(f"  configs:  {build_dir / 'config'}/<node>/")


def _render_clabernetes(c: Compiled, dataplane: str, namespace: str, as_json: bool) -> None:
    """The topology as a launcher pod sees it (code under code/), the code nodes run, one
    YAML stream next to the lab's containerlab topology."""
    import twin
    from twin.fabric import clabernetes as K
    from twin.fabric import render as R

    files = R.render(c.plan, dataplane, K.CODE_DIR)
    code = K.read_code(Path(twin.__file__).resolve().parent)
    objects = K.topology_resource(c.plan, files, namespace, code)
    build_dir = c.build_dir()
    name = f"{c.spec.name}.clabernetes.yml"
    R.write_build({name: K.to_yaml(objects)}, build_dir)
    path = build_dir / name
    if as_json:
        emit_json({"lab": c.spec.name, "target": "clabernetes", "build_dir": str(build_dir),
                   "files": [name], "namespace": namespace,
                   "objects": [{"kind": o["kind"], "name": o["metadata"]["name"]}
                               for o in objects]})
        return
    maps = sum(o["kind"] == "ConfigMap" for o in objects)
    out.print(f"rendered a clabernetes Topology and {maps} ConfigMaps for {c.spec.name}: {path}")
    out.print(f"  kubectl create namespace {namespace}   # once")
    out.print(f"  kubectl apply --server-side -f {path}")
    out.print(f"  kubectl -n {namespace} get topology {c.spec.name}")


@main.command()
@click.argument("spec")
@click.argument("src")
@click.argument("dst")
@click.option("--ev", type=str, default=None, callback=V.option(EV), metavar="EV",
              help="Show the path of this EV (32 bits, decimal or 0x..).")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def paths(spec, src, dst, ev, as_json):
    """List the source-routed paths from host SRC to host DST.

    With --ev, apply the EV -> path formula to one entropy value.
    """
    from twin import lab as L
    from twin.fabric import paths as P

    c = L.compile_spec(spec)
    f = c.fabric
    for h in (src, dst):
        if not f.has_node(h) or f.node(h).is_switch:
            raise UsageError(f"{h!r} is not a host of {c.spec.name} (hosts: "
                             f"{', '.join(x.name for x in f.hosts)})")
    if src == dst:
        raise UsageError(f"{src} to itself is no path: SRC and DST must be two different hosts")
    s, d = f.node(src), f.node(dst)
    try:
        if ev is not None:
            found = [P.path_for_ev(f, s, d, ev)]
        else:
            found = [p for p in P.host_pairs_paths(f) if p.src == src and p.dst == dst]
    except ValueError as e:
        raise UsageError(str(e)) from None
    if as_json:
        emit_json([{"plane": p.plane, "t1": p.t1, "ev": p.ev, "address": p.address,
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
        emit_json({"radix": radix, "planes": planes,
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
