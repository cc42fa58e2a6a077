"""Faults: twin fault KIND TARGET ... (one command per fault kind, as the kinds in
twin.faults.kinds say: a kind registered later has its command too) | link-up | list
| log | clear."""

from __future__ import annotations

import inspect
import time

import click

from twin import faults as F
from twin import lab as L
from twin.chaos import blind as B
from twin.cli.base import emit_json, err, lab_attrs, lab_option, main, out, sigterm_as_interrupt
from twin.errors import UnknownName
from twin.faults.kinds import FaultType
from twin.faults.registry import KINDS

# -- faults -------------------------------------------------------------------


class FaultGroup(click.Group):
    """`twin fault`'s own commands, and one per registered fault kind, built when asked."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *map(str, KINDS)})

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        command = super().get_command(ctx, name)
        if command is None and name in KINDS:
            return kind_command(KINDS[name])
        return command

    def resolve_command(self, ctx: click.Context, args: list[str]):
        """A name that is neither a kind nor a command of its own is the registry's miss
        (UnknownName), listing both, not click's bare "No such command"."""
        if args and not args[0].startswith("-") and not ctx.resilient_parsing \
                and self.get_command(ctx, args[0]) is None:
            raise UnknownName("fault kind or command", args[0], self.list_commands(ctx),
                              KINDS.hint)
        return super().resolve_command(ctx, args)


def kind_command(kind: FaultType) -> click.Command:
    """`twin fault KIND TARGET [ARGUMENTS] [OPTIONS] [--lab LAB]`, from the kind's params."""
    params: list[click.Parameter] = [click.Argument(["target"], metavar=kind.target_metavar())]
    for p in kind.params:
        if p.argument:
            params.append(click.Argument([p.name], type=p.cli_type, metavar=p.metavar))
        elif p.flag:
            params.append(click.Option([f"--{p.name}"], is_flag=True, help=p.help))
        else:
            params.append(click.Option([f"--{p.name}"], type=p.cli_type, default=p.default,
                                       required=p.default is None, show_default=True,
                                       metavar=p.metavar, help=p.help))
    params.append(click.Option(["--lab"], **lab_attrs()))

    def run(target: str, lab: str | None, **values) -> None:
        if kind.blocking:  # Ctrl-C and SIGTERM unwind it: the fault is reverted
            sigterm_as_interrupt()
        values = kind.prepare(kind.values(values))  # a bad value is refused before the lab
        att = L.attach(lab)
        fault = kind.begin(att, target, values,
                           progress=lambda i, n: err.print(f"{kind.step_word} {i}/{n}"))
        out.print(kind.said(att, fault, values))

    # a numeric argument may be negative (link-loss PERCENT -5): refused by the kind, not
    # taken for an option
    numeric = any(p.argument and p.cli_type in (int, float) for p in kind.params)
    return click.Command(str(kind.name), callback=run, params=params,
                         help=inspect.cleandoc(kind.help),
                         context_settings={"ignore_unknown_options": True} if numeric else {})


@main.group(cls=FaultGroup)
def fault():
    """Inject and revert faults. Every fault is recorded before it is applied,
    so `twin fault clear` (or `twin down`) undoes it even after a crash."""


@fault.command("link-up")
@click.argument("endpoint")
@click.option("--force", is_flag=True,
              help="Heal a link with no fault recorded (set down by hand): both ends up, "
                   "both re-programmed.")
@lab_option()
def fault_link_up(endpoint, force, lab):
    """Revert a fault on a link: bring it back up and re-program both ends, or
    remove its loss rule."""
    att = L.attach(lab)
    f = F.link_up(att, endpoint, force)
    link = att.fabric.link_at(F.parse_endpoint(att, endpoint))
    out.print(f"link {link.id} up" + ("" if f else " (no fault was recorded; healed)"))


@fault.command("log")
@lab_option()
@click.option("--json", "as_json", is_flag=True)
def fault_log(lab, as_json):
    """Every fault applied and reverted in this lab, with wall time and
    CLOCK_MONOTONIC ns (the clock the endpoints' event logs use)."""
    att = L.attach(lab)
    entries = F.events(att)
    if F.hidden_in_force(att):  # a blind drill's fault: when, not what
        entries = [_masked(e) if e.get("hidden") else e for e in entries]
    if as_json:
        emit_json(entries)
        return
    if not entries:
        out.print("no fault applied yet")
    for e in entries:
        stamp = time.strftime("%H:%M:%S", time.localtime(e["t_wall"]))
        out.print(f"{stamp}.{int(e['t_wall'] * 1000) % 1000:03d}  mono {e['t_mono_ns']:>20,} ns  "
                  f"{e['event']:<6} {e.get('kind', 'hidden fault')} {e.get('target', '')}")


def _masked(entry: dict) -> dict:
    return {k: v for k, v in entry.items() if k not in ("kind", "target", "ends")}


@fault.command("list")
@lab_option()
@click.option("--json", "as_json", is_flag=True)
def fault_list(lab, as_json):
    """Show the faults in force."""
    att = L.attach(lab)
    inforce = F.active(att)
    faults = [f for f in inforce if not f.hidden]
    hidden = len(inforce) - len(faults)
    if as_json:  # with a hidden fault (a blind drill's), an object: how many, not which
        shown = [f.to_dict() for f in faults]
        emit_json({"hidden": hidden, "faults": shown} if hidden else shown)
        return
    if not faults and not hidden:
        out.print("no faults in force")
    if hidden:
        out.print(f"{hidden} hidden fault{'s' if hidden != 1 else ''} in force")
    for f in faults:
        n = len(f.links)
        held = f" ({n} link{'s' if n != 1 else ''})" if f.links else ""
        extra = f", {f.detail}" if f.detail else ""
        out.print(f"{f.kind} {f.target}{held} (at: {', '.join(f.end_names())}{extra})")


@fault.command("clear")
@click.argument("target", required=False)
@lab_option()
def fault_clear(target, lab):
    """Revert every fault in force, or only the one on TARGET (as `fault list`
    names it: NODE:IF, NODE, HOST:PLANE or a plane). Clearing all ends a blind
    drill as given up."""
    att = L.attach(lab)
    ended = B.give_up(att, "fault clear") if target is None and B.running(att) else None
    reverted = [*F.clear(att, target), *([ended] if ended else [])]
    out.print(f"reverted {len(reverted)} fault{'s' if len(reverted) != 1 else ''}")
    if ended:
        out.print(f"blind drill given up: the fault was {ended.kind} {ended.target}")
