"""The `twin` group, its error boundary and its output helpers.

The one command-line interface owns all output.

People get tables and progress bars (progress on stderr); machines get
`--json` on every read command. Errors from twin print as one message and
an exit code (2: bad input, 1: a failed operation or check); `--debug`
shows the traceback too.
"""

from __future__ import annotations

import functools
import importlib
import json
import shlex
import signal
import sys
from gettext import gettext as _

import click
from rich.console import Console
from rich.markup import escape

from twin.cli.commands import COMMANDS
from twin.errors import SeveralLabs, SpecError, TwinError
from twin.progress import Steps

# emoji=False: rich would print fcbb:bb00:100:: with a 💯 in it
out = Console(highlight=False, soft_wrap=True, emoji=False)
err = Console(stderr=True, highlight=False, soft_wrap=True, emoji=False)  # one line

PRINTED = 100  # problems of a SpecError printed; the rest counted (and in --json where it has them)

DATAPLANE_CHOICES = ["auto", "seg6local", "ebpf"]  # twin.dataplane: auto, then its backends


def __getattr__(name: str):
    """RUNTIME_CHOICES, computed when a command module that builds a --runtime option
    imports it: the runtimes' registry (twin.runtime) costs a third of a second, which
    `twin --help`, `twin size` and `twin status` do not pay (issue 40)."""
    if name == "RUNTIME_CHOICES":
        from twin.runtime import RUNTIMES

        # `twin up` creates nodes: runtimes that only attach (docker-remote, kubectl)
        # are `twin attach`'s
        return ["auto", *[n for n in sorted(RUNTIMES)
                          if n != "fake" and not RUNTIMES[n].attaches]]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class RichSteps(Steps):
    """Progress bars on stderr, one line per phase: done of total, time so far, and the
    ETA of the phase (a 320-node `twin up` runs for tens of seconds a phase)."""

    def __init__(self) -> None:
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        self.progress = Progress(TextColumn("{task.description:<28}"), BarColumn(),
                                 MofNCompleteColumn(), TimeElapsedColumn(),
                                 TextColumn("eta"), TimeRemainingColumn(), console=err,
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


def emit_json(data) -> None:
    click.echo(json.dumps(data, indent=2, sort_keys=False))


def sigterm_as_interrupt() -> None:
    """Let SIGTERM unwind like Ctrl-C, so `twin up` rolls back on either."""
    def handler(signum, frame):
        raise KeyboardInterrupt
    signal.signal(signal.SIGTERM, handler)


LAB_HELP = "The lab to act on (default: the one lab that is up)."


def lab_option(*, positional: bool = False, help: str = LAB_HELP):
    """`--lab NAME`: how every command that acts on one lab is told which, so that one
    spelling works everywhere (and in every hint twin prints). positional=True also
    takes the lab as the argument LAB, the older spelling of a few commands (verify,
    status, down, telemetry ...), kept: the callback gets one `lab` either way, and the
    two naming different labs is a usage error."""
    def decorate(f):
        if positional:
            f = _lab_argument(f)
        return click.option("--lab", **lab_attrs(help + (" Also taken as the argument "
                                                          "LAB." if positional else "")))(f)
    return decorate


def lab_attrs(help: str = LAB_HELP) -> dict:
    """The --lab option's attributes, for a command built without decorators."""
    return {"metavar": "NAME", "default": None, "help": help}


def _lab_argument(f):
    @functools.wraps(f)
    def one_lab(*args, lab_argument: str | None = None, lab: str | None = None, **kwargs):
        if lab_argument and lab and lab_argument != lab:
            raise click.UsageError(f"LAB {lab_argument} and --lab {lab} name two labs; "
                                   "give one")
        return f(*args, lab=lab or lab_argument, **kwargs)
    return click.argument("lab_argument", metavar="[LAB]", required=False)(one_lab)


# Commands not recorded as a blind drill's trainee's: the drill's own start and end
UNRECORDED = ("twin drill blind", "twin drill answer", "twin drill reveal")


def command_words(group: click.Group, ctx: click.Context,
                  argv: list[str]) -> tuple[list[str], list[str]]:
    """argv split into the command's path (`twin fault link-down`) and what follows it;
    the group's own options (--debug) dropped."""
    words, cmd, rest = ["twin"], group, list(argv)
    while rest and rest[0].startswith("-"):  # --debug
        rest.pop(0)
    while isinstance(cmd, click.Group) and rest:
        sub = cmd.get_command(ctx, rest[0])
        if sub is None:
            break
        words.append(rest.pop(0))
        cmd = sub
    return words, rest


def with_lab(group: click.Group, ctx: click.Context, argv: list[str], lab: str) -> str:
    """The command line argv with `--lab LAB` right after the command's path, where every
    command that takes it parses it (before a `--` and what exec runs)."""
    words, rest = command_words(group, ctx, argv)
    return shlex.join([*words, "--lab", lab, *rest])


def record_for_drills(group: click.Group, ctx: click.Context, argv: list[str]) -> None:
    """Append the command path to a running blind drill's state (twin.chaos.blind), so
    its score says which tools the trainee used. Never fails the command."""
    try:
        words, rest = command_words(group, ctx, argv)
        path = " ".join(words)
        if len(words) > 1 and path not in UNRECORDED:  # `twin nosuch`: no command ran
            from twin.chaos import record

            record.record_command(rest, path)
    except Exception:  # a record is worth less than the command
        pass


class TwinGroup(click.Group):
    """The root group. Its commands load lazily (click's lazy group): the names and
    short helps come from twin.cli.commands.COMMANDS, and a command's modules are
    imported when it is asked for, where they register it on this group."""

    def list_commands(self, ctx):
        return sorted({*COMMANDS, *self.commands})

    def get_command(self, ctx, cmd_name):
        if cmd_name not in self.commands and cmd_name in COMMANDS:
            for module in COMMANDS[cmd_name][0]:
                importlib.import_module(module)
        return self.commands.get(cmd_name)

    def resolve_command(self, ctx, args):
        """click suggests the loaded commands only: suggest from the table."""
        try:
            return super().resolve_command(ctx, args)
        except click.exceptions.NoSuchCommand as e:
            raise click.exceptions.NoSuchCommand(
                e.command_name, possibilities=self.list_commands(ctx), ctx=e.ctx) from None

    def format_commands(self, ctx, formatter):
        """`twin --help`'s list from the table, without importing a command (click's
        own text: each help shortened by click as for the command itself)."""
        def stub(name):
            if name in self.commands:
                return self.commands[name]
            return click.Command(name, help=COMMANDS[name][1])

        rows = [(name, stub(name)) for name in self.list_commands(ctx)]
        rows = [(n, c) for n, c in rows if not c.hidden]
        if rows:
            limit = formatter.width - 6 - max(len(n) for n, _ in rows)
            with formatter.section(_("Commands")):
                formatter.write_dl([(n, c.get_short_help_str(limit)) for n, c in rows])

    def main(self, *args, **kwargs):
        """Bad arguments (an unknown option, a misspelled choice) get one line too."""
        given = kwargs.get("args", args[0] if args else None)
        self.argv = list(sys.argv[1:] if given is None else given)
        try:
            return super().main(*args, **{**kwargs, "standalone_mode": False})
        except click.exceptions.NoArgsIsHelpError as e:  # `twin`, `twin fault`: the help
            click.echo(e.ctx.get_help() if e.ctx else str(e))
            sys.exit(0)
        except click.UsageError as e:
            where = e.ctx.command_path if e.ctx else "twin"
            err.print(f"[red]error:[/red] {e.format_message()} (see `{where} --help`)",
                      highlight=False)
            sys.exit(e.exit_code)
        except click.ClickException as e:
            err.print(f"[red]error:[/red] {e.format_message()}", highlight=False)
            sys.exit(e.exit_code)
        except click.Abort:
            err.print("[yellow]aborted[/yellow]")
            sys.exit(1)

    def invoke(self, ctx):
        record_for_drills(self, ctx, getattr(self, "argv", []))
        try:
            return super().invoke(ctx)
        except SpecError as e:  # the text may quote a file: never read as markup
            err.print(f"[red]error:[/red] {escape(e.render(PRINTED))}", highlight=False)
            if ctx.obj and ctx.obj.get("debug"):
                raise
            sys.exit(e.exit_code)
        except TwinError as e:
            text = str(e)
            if isinstance(e, SeveralLabs):  # the command as given, the lab named
                text += f", as in `{with_lab(self, ctx, getattr(self, 'argv', []), e.labs[0])}`"
            err.print(f"[red]error:[/red] {escape(text)}", highlight=False)
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
    (mrc-4p). A command that acts on a lab takes --lab NAME, by default the
    one lab that is up (twin up --name NAME runs a second one).
    """
    ctx.ensure_object(dict)
    ctx.obj["debug"] = debug
