"""One way to name a lab (issue 37): every command that acts on one lab takes `--lab NAME`,
and every command twin prints as a hint works as printed, two labs up or one.

A hint's command is run through the real CLI with the functions that find a lab
(`twin.lab.attach`, `resolve_lab`, `status`) replaced by a spy that stops there: an
option the command does not have fails the parse, and the spy says which lab it
would have acted on. No root: labs are up on the in-memory runtime.
"""

from __future__ import annotations

import re
import shlex
import signal

import click
import pytest
from click.testing import CliRunner

from twin import faults as F
from twin import lab as L
from twin import validate as V
from twin.cli import blind as cli_blind
from twin.cli import lab as cli_lab
from twin.cli import main
from twin.errors import UsageError
from twin.faults.registry import KINDS
from twin.runtime import fake

# Commands that act on no running lab, and why; every other command takes --lab
NO_LAB = {
    "twin plan": "a spec's plan, no lab",
    "twin render": "a spec's files, no lab",
    "twin paths": "a spec's paths, no lab",
    "twin size": "a calculator",
    "twin up": "makes a lab (--name NAME names it)",
    "twin attach": "makes a lab of a deployed fabric (--name NAME names it)",
    "twin ci": "brings up a lab of its own (--name NAME names it)",
    "twin routes check": "an operator's tables, no lab",
    "twin routes diff": "an operator's tables, no lab",
    "twin routes export": "a spec's tables, no lab",
    "twin engine start": "the Docker engine",
    "twin engine stop": "the Docker engine",
    "twin engine status": "the Docker engine",
    "twin images build": "node images",
    "twin images status": "node images",
    "twin drill list": "the shipped drill files",
    "twin drill all": "many labs: each drill on the lab of its fabric (--suffix S names them)",
}


def commands(group: click.Group = main, path: str = "twin"):
    """Every command of the CLI, (path, command), the fault kinds' built ones too."""
    ctx = click.Context(group)
    for name in group.list_commands(ctx):
        cmd = group.get_command(ctx, name)
        if isinstance(cmd, click.Group):
            yield from commands(cmd, f"{path} {name}")
        else:
            yield f"{path} {name}", cmd


def takes_a_lab(cmd: click.Command) -> bool:
    return any(p.name in ("lab", "lab_argument") for p in cmd.params)


def lab_option(cmd: click.Command) -> click.Option | None:
    return next((p for p in cmd.params if isinstance(p, click.Option) and "--lab" in p.opts),
                None)


def test_every_command_that_acts_on_a_lab_offers_dash_dash_lab():
    seen = dict(commands())
    assert set(NO_LAB) <= set(seen), set(NO_LAB) - set(seen)
    for path, cmd in seen.items():
        if path in NO_LAB:
            assert not takes_a_lab(cmd), f"{path} takes a lab: not in NO_LAB then"
            continue
        assert takes_a_lab(cmd), f"{path}: takes no lab; give it --lab (lab_option) or " \
                                 "say in NO_LAB why it acts on none"
        option = lab_option(cmd)
        assert option is not None, f"{path}: a lab, but no --lab"
        assert option.help and option.metavar == "NAME", path
        assert "--lab NAME" in cmd.get_help(click.Context(cmd, info_name=path)), path


# -- the spy ----------------------------------------------------------------------------


class Reached(Exception):
    def __init__(self, lab):
        self.lab = lab


@pytest.fixture
def spy(monkeypatch):
    """Run a command line up to where it finds its lab: the lab it asks for (None: the
    default). A command line that does not get there (a usage error) fails the test."""
    def stop(lab=None, *args, **kwargs):
        raise Reached(lab)

    sigterm = signal.getsignal(signal.SIGTERM)  # the commands that roll back set it

    def run(argv: list[str]):
        with monkeypatch.context() as m:
            for name in ("attach", "resolve_lab", "status"):
                m.setattr(L, name, stop)
            result = CliRunner().invoke(main, argv)
        signal.signal(signal.SIGTERM, sigterm)
        if isinstance(result.exception, Reached):
            return result.exception.lab
        raise AssertionError(f"`{shlex.join(['twin', *argv])}` did not reach a lab "
                             f"(exit {result.exit_code}): {result.output}")
    return run


def run_hint(spy, command: str):
    """The lab a printed `twin ...` command acts on."""
    words = shlex.split(command)
    assert words[0] == "twin", command
    return spy(words[1:])


# A command line for each command that acts on a lab: its other arguments; --lab is added
ARGS = {
    "twin verify": [], "twin status": [], "twin down": [],
    "twin exec": ["r0h0", "--", "ip", "-6", "route"], "twin restart": ["r0h0"],
    "twin traffic": ["bulk", "--src", "r0h0", "--dst", "r1h0"], "twin stats": [],
    "twin fuzz": [], "twin probe": ["--once"], "twin top": ["--once"],
    "twin telemetry up": [], "twin telemetry down": [], "twin telemetry status": [],
    "twin grafana push": ["--url", "http://127.0.0.1:1", "--token", "t"],
    "twin grafana dashboards": [],
    "twin drill run": ["t1-blackhole"], "twin drill blind": [],
    "twin drill answer": ["t1-p0-0"], "twin drill reveal": [], "twin drill scores": [],
    "twin fault link-up": ["t0-p0-r0:eth3"], "twin fault list": [], "twin fault log": [],
    "twin fault clear": [],
}


def kind_args(kind) -> list[str]:
    """A fault kind's command line: a target, then a value for each argument and
    required option that its check takes (values are checked before the lab is looked
    for; the target, after)."""
    args = ["t0-p0-r0:eth3"]
    for p in kind.params:
        value = "1mbit" if isinstance(p.check, V.Rate) else "1"
        if p.argument:
            args.append(value)
        elif not p.flag and p.default is None:
            args += [f"--{p.name}", value]
    return args


def command_args(path: str) -> list[str]:
    kind = path.removeprefix("twin fault ")
    if kind in KINDS:
        return kind_args(KINDS[kind])
    return ARGS[path]


def test_every_lab_command_acts_on_the_lab_dash_dash_lab_names(spy, monkeypatch):
    monkeypatch.setattr("twin.cli.grafana.known_labs", lambda: ["X"])  # X is up
    for path, _ in commands():
        if path in NO_LAB:
            continue
        words = path.split()[1:]
        args = command_args(path)
        assert spy([*words, "--lab", "X", *args]) == "X", path
        if "--" not in args:  # after it, exec's command: its own --lab
            assert spy([*words, *args, "--lab=X"]) == "X", path


POSITIONAL = ["verify", "status", "down", "telemetry up", "telemetry down",
              "telemetry status", "grafana dashboards"]


def test_the_positional_lab_is_still_taken_where_it_was(spy, monkeypatch):
    monkeypatch.setattr("twin.cli.grafana.known_labs", lambda: ["X"])
    had = sorted(p.removeprefix("twin ") for p, cmd in commands()
                 if any(a.name == "lab_argument" for a in cmd.params))
    assert had == sorted(POSITIONAL)
    for path in POSITIONAL:
        assert spy([*path.split(), "X"]) == "X", path
        assert spy([*path.split(), "X", "--lab", "X"]) == "X", path  # the same lab twice


@pytest.mark.parametrize("path", POSITIONAL)
def test_a_positional_lab_and_dash_dash_lab_that_differ_are_refused(path):
    result = CliRunner().invoke(main, [*path.split(), "mine", "--lab", "mrc-4p"])
    assert result.exit_code == 2
    assert "LAB mine and --lab mrc-4p name two labs; give one" in result.output


def test_verify_and_status_take_dash_dash_lab(spy):
    assert spy(["verify", "--lab", "X"]) == "X"
    assert spy(["status", "--lab", "X"]) == "X"
    assert spy(["verify", "X"]) == "X"
    assert spy(["verify"]) is None  # the one lab up


# -- hints, two labs up -----------------------------------------------------------------


@pytest.fixture
def two_labs(clean_world):
    """mrc-4p (as `make lab-up` brings it up) and a second one named mine."""
    L.up("mrc-4p", "fake")
    L.up("mrc-4p", "fake", name="mine")
    return L.attach("mine")


def in_backquotes(text: str) -> list[str]:
    return re.findall(r"`(twin [^`]+)`", text)


def printed_commands(text: str) -> list[str]:
    """The commands of printed lines `  label:  twin ...   (a note)`."""
    return [line[line.index("twin "):].split("   (")[0].strip()
            for line in text.splitlines() if "twin " in line]


def test_up_s_next_steps_work_as_printed_with_two_labs_up(two_labs, capsys, spy):
    cli_lab._print_next_steps("mine")
    printed = printed_commands(capsys.readouterr().out)
    assert printed == [c for _, c, _ in cli_lab.next_steps(two_labs)]
    assert len(printed) == 5
    for command in printed:
        assert run_hint(spy, command) == "mine", command


def test_attach_s_next_steps_work_as_printed(capsys, spy):
    cli_lab._print_steps(cli_lab.attached_steps("mine"))
    printed = printed_commands(capsys.readouterr().out)
    assert printed == ["twin verify --lab mine", "twin down --lab mine"]
    for command in printed:
        assert run_hint(spy, command) == "mine"


@pytest.mark.parametrize("argv,hint", [
    ("verify", "twin verify --lab mine"),
    ("fault list", "twin fault list --lab mine"),
    ("exec r0h0 -- ip -6 route", "twin exec --lab mine r0h0 -- ip -6 route"),
    ("fault link-down t0-p0-r0:eth3", "twin fault link-down --lab mine t0-p0-r0:eth3"),
    ("--debug fault link-loss t0-p0-r0:eth3 5",
     "twin fault link-loss --lab mine t0-p0-r0:eth3 5"),
    ("drill reveal", "twin drill reveal --lab mine"),
])
def test_several_labs_up_names_the_command_with_dash_dash_lab(two_labs, spy, argv, hint):
    result = CliRunner().invoke(main, argv.split())
    assert result.exit_code == 2 or isinstance(result.exception, UsageError)  # --debug
    assert (f"error: several labs are up (mine, mrc-4p); name one with --lab, as in "
            f"`{hint}`") in result.output
    assert run_hint(spy, hint) == "mine"


def test_the_blind_drill_s_mission_works_as_printed(spy):
    hints = [line.strip().split("  ")[0] for line in cli_blind.mission("mine").splitlines()
             if line.strip().startswith("twin ")]
    assert len(hints) == len(cli_blind.TOOLS) + len(cli_blind.ANSWERS)
    for command in hints:
        assert run_hint(spy, command) == "mine", command


def test_hints_in_errors_work_as_printed(two_labs, spy):
    att = two_labs
    said = []

    def refused(call, *args):
        with pytest.raises(UsageError) as e:
            call(*args)
        said.append(str(e.value))

    F.switch_down(att, "t1-p0-0")
    refused(F.link_up, att, "t0-p0-r0:eth3")  # `twin fault clear --lab mine t1-p0-0`
    refused(F.link_down, att, "t0-p0-r0:eth3")  # held by the switch-down: the same
    F.clear(att)
    F.link_down(att, "t0-p0-r0:eth3")
    refused(F.link_loss, att, "t0-p0-r0:eth3", 5)  # `twin fault link-up --lab mine ...`
    F.clear(att)
    del fake.WORLD["mine"]["r0h0"]
    refused(att.require_whole)  # `twin status --lab mine`, `twin down --lab mine`
    att.state.phase = "creating"
    refused(att.require_whole)  # `twin down --lab mine`
    hints = [h for text in said for h in in_backquotes(text) if h != "twin up"]  # `its twin up`
    assert len(hints) == 6, said
    for command in hints:
        assert run_hint(spy, command) == "mine", command
