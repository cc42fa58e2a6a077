"""`twin status`: the labs that are up and their nodes.

Its own module, light, because a trainee runs it often (issue 40): twin.lab and
twin.faults (the runtimes, pyroute2) are imported only when a lab is up to describe.
"""

from __future__ import annotations

import click

from twin.cli import tables
from twin.cli.base import emit_json, lab_option, main, out
from twin.cli.tables import Col
from twin.state import known_labs


@main.command()
@lab_option(positional=True, help="Only this lab (default: every lab that is up).")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def status(lab, as_json):
    """Show the labs that are up and the state of their nodes."""
    if lab is None and not known_labs():  # what L.status(None) finds, without the lab's cost
        labs = []
    else:
        from twin import lab as L

        labs = L.status(lab)
    if as_json:
        emit_json(labs)
        return
    if not labs:
        out.print("no lab is up (start one with `twin up mrc-4p`)")
        return
    out.print(f"[dim]run directory {labs[0]['run_dir']}[/dim]")
    for s in labs:
        running = sum(n["state"] == "running" for n in s["nodes"])
        # wrapped at words by the console's width (80 columns keep every word whole)
        out.print(f"[bold]{s['lab']}[/bold]  id {s['id'] or '-'}  runtime {s['runtime']}  "
                  f"phase {s['phase']}  {running}/{len(s['nodes'])} nodes running",
                  soft_wrap=False)
        out.print(f"  spec {s['spec']}", soft_wrap=False)
        out.print(f"  data plane {s['dataplane']['name']} ({s['dataplane']['why']})",
                  soft_wrap=False)
        cols = [Col("node"), Col("runtime"), Col("state"), Col("endpoint", wrap=True),
                Col("image")]
        rows = [[n["node"], s["runtime"],
                 n["state"] if n["state"] == "running" else f"[red]{n['state']}[/red]",
                 _endpoint_cell(n["endpoint"]), n.get("image", "-")] for n in s["nodes"]]
        # narrow: the runtime goes first (the lab's line above names it), then the image
        tables.show(out, cols, rows, drop=("runtime", "image"), show_edge=False, box=None,
                    pad_edge=False)
        for n in s["nodes"]:
            if (n["endpoint"] or {}).get("state") == "ended":
                out.print(f"  [red]endpoint ended:[/red] {n['node']} (its log: "
                          f"{n['endpoint']['log']}; `twin restart {n['node']} --lab "
                          f"{s['lab']}` starts it again)")
        from twin import faults as F

        att = L.attach(s["lab"])
        inforce = F.active(att)
        hidden = sum(f.hidden for f in inforce)
        if hidden:  # a blind drill's: that it is there, not where
            out.print(f"  [yellow]fault:[/yellow] {hidden} hidden fault in force")
        for fault in (f for f in inforce if not f.hidden):
            out.print(f"  [yellow]fault:[/yellow] {fault.kind} {fault.target} "
                      f"(ends down: {', '.join(map(str, fault.ends))})")


def _endpoint_cell(ep: dict | None) -> str:
    """A host's MRC endpoint in `twin status`: up (its data path), or ended."""
    if ep is None:
        return "-"
    if ep["state"] != "up":
        return f"[red]{ep['state']}[/red]"
    core = "transport " + (ep.get("transport") or "python").split(":")[0]
    if ep.get("datapath") == "compiled":
        return f"up (compiled, ICRC {ep.get('icrc') or '?'}, {core})"
    return f"up (python, {core})"
