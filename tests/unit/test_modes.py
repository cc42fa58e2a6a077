"""Mode and Cc are defined once (twin.mrc.modes, twin.mrc.cc), and that one definition
is what the transport (both Senders), twin traffic, drills, the control protocol and
the CLI accept; an unknown name is refused with the valid ones listed."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import click
import pytest

from twin.chaos import drill as D
from twin.cli import main
from twin.errors import SpecError, UsageError
from twin.mrc import cc as CC
from twin.mrc import control, core
from twin.mrc import transport as T
from twin.mrc.cc import Cc
from twin.mrc.evset import EvSet
from twin.mrc.modes import Mode

ROOT = Path(__file__).resolve().parents[2]
_fastpath = core.compiled()  # bound: a compiled Sender is made from it
SENDERS = (T.Sender, _fastpath.Sender)


def test_members_are_the_strings_that_travel_and_carry_their_help():
    assert Mode.names() == ("mrc", "spray-static", "single-path")
    assert Cc.names() == ("nscc", "delay", "dcqcn")
    for member in (*Mode, *Cc):
        assert member == member.value and type(member.value) is str and member.help
        assert json.loads(json.dumps({"m": member})) == {"m": member.value}
        assert f"{member}" == member.value and type(member).of(member.value) is member
    # what a drill file or a request may hold instead of a name: refused, not raised on
    for junk in (None, 3, ["mrc"], {"mode": "mrc"}, "MRC", "fast"):
        assert Mode.of(junk) is None and Cc.of(junk) is None


def test_the_reference_sender_has_rules_for_every_mode_and_a_window_for_every_cc():
    assert set(T.MODE_RULES) == set(Mode) and set(T.WINDOWS) == set(Cc)
    # single-path alone keeps one EV, backs off no timer, sends no tail probe
    assert [m for m, r in T.MODE_RULES.items() if not r.tail_probes or not r.backoff] == \
        [Mode.SINGLE_PATH]


@pytest.mark.parametrize("sender", SENDERS, ids=("python", "compiled"))
@pytest.mark.parametrize("mode", list(Mode))
@pytest.mark.parametrize("cc", list(Cc))
def test_both_senders_take_every_mode_and_cc_as_name_or_member(sender, mode, cc):
    for m, c in ((mode, cc), (mode.value, cc.value)):
        s = sender(EvSet([0, 1, 2, 3], 2, seed=1), 0, T.SenderConfig(mode=m, cc=c))
        assert (s.single_ev is not None) == (mode is Mode.SINGLE_PATH)
        assert (s.pacer is not None) == (cc is Cc.DCQCN)


@pytest.mark.parametrize("sender", SENDERS, ids=("python", "compiled"))
def test_an_unknown_mode_or_cc_lists_the_valid_names(sender):
    def make(**kw):
        return sender(EvSet([0, 1], 2, seed=1), 0, T.SenderConfig(**kw))
    for bad in ("fast", 3, None):
        with pytest.raises(ValueError) as e:
            make(mode=bad)
        assert str(e.value) == f"mode must be one of {Mode.listed()}"
    with pytest.raises(ValueError) as e:
        make(cc="cubic")
    assert str(e.value) == f"unknown congestion control 'cubic'; one of: {Cc.listed()}"


def test_a_compiled_sender_refuses_a_mode_it_does_not_number():
    """The compiled Sender numbers the members by name: a Mode with a member more (the
    Python Sender would run it) is an error when the module is bound to it, not a QP
    that runs some other mode."""
    code = """
import enum
from twin.mrc import core, modes
modes.Mode = enum.StrEnum("Mode", [  # what core binds the compiled module to
    ("MRC", "mrc"), ("SPRAY_STATIC", "spray-static"), ("SINGLE_PATH", "single-path"),
    ("FLOOD", "flood")])
try:
    core.compiled()
except RuntimeError as e:
    print(e)
"""
    got = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60, cwd=ROOT)
    assert got.stdout.strip() == "Mode has 4 members; the compiled Sender knows 3", got.stderr


def test_the_compiled_sender_asks_a_table_of_mode_rules_not_the_modes_number():
    """_sender.c mirrors transport.MODE_RULES as MODE_RULES (one entry a mode, picked once
    by Sender_init): `grep 's->mode =='` finds nothing, a mode's number is named only in
    the enum and as the table's index, each entry's flags are its Python rules', and an
    entry overrides the base's (rules_*) function where its Python class overrides the
    method. (The bind refuses a mode with no entry: tables_complete.)"""
    src = (ROOT / "twin/mrc/_sender.c").read_text()
    assert not re.search(r"s->mode\s*[!=]=", src)
    enum = re.search(r"enum \{ (MODE_\w+(?:, MODE_\w+)*), MODE_COUNT \};", src)
    numbers = enum.group(1).split(", ")
    names = re.search(r"MODE_NAMES\[MODE_COUNT\] = \{(.*?)\};", src).group(1)
    members = [Mode[n] for n in re.findall(r'"(\w+)"', names)]
    table = re.search(r"MODE_RULES\[MODE_COUNT\] = \{(.*?)\n\};", src, re.S).group(1)
    entries = re.split(r"\[(MODE_\w+)\] = \{", table)[1:]
    assert entries[::2] == numbers and len(members) == len(numbers) == len(Mode)
    rest = src.replace(enum.group(0), "").replace(table, "")
    assert not re.search(rf"\b({'|'.join(numbers)})\b", rest)  # no branch on a number
    methods = [m for m in vars(T.ModeRules) if callable(getattr(T.ModeRules, m))
               and not m.startswith("_")]
    assert len(methods) == 8
    for member, entry in zip(members, entries[1::2], strict=True):
        rules = T.MODE_RULES[member]
        fields = dict(re.findall(r"\.(\w+) = (\w+)", entry))
        assert set(fields) == {"tail_probes", "backoff", *methods}
        assert (fields["tail_probes"], fields["backoff"]) == \
            (str(int(rules.tail_probes)), str(int(rules.backoff))), member
        overrides = {m for m in methods if m in vars(type(rules)) and type(rules) is not
                     T.ModeRules}
        assert {m for m in methods if fields[m] != f"rules_{m}"} == overrides, member


def test_the_control_protocol_takes_its_choices_from_the_types():
    args = {a.name: a for a in control.OPS["send_qp"].args}
    assert args["mode"].choices == Mode.names() and args["mode"].default == Mode.MRC
    assert args["cc"].choices == Cc.names()
    for member in (*Mode, *Cc):  # the docs a person reads name each with its help
        arg = args["mode" if isinstance(member, Mode) else "cc"]
        assert f"{member.value}: {member.help}" in arg.doc


def _choices(command: click.Command, option: str) -> tuple[str, ...]:
    param = next(p for p in command.params if p.name == option)
    return tuple(param.type.choices)


def test_the_cli_offers_exactly_the_types_members():
    traffic = main.commands["traffic"]
    assert _choices(traffic, "mode") == Mode.names()
    assert _choices(traffic, "cc") == Cc.names()
    drill = main.commands["drill"]
    assert _choices(drill.commands["run"], "mode") == Mode.names()
    for cmd in (drill.commands["run"], drill.commands["all"]):
        assert _choices(cmd, "compare")[:len(Mode)] == Mode.names()
    helps = next(p for p in traffic.params if p.name == "mode").help
    assert all(m.help in helps for m in Mode)


def test_traffic_and_drills_refuse_an_unknown_mode_listing_the_valid_ones():
    from twin import traffic as TR

    with pytest.raises(UsageError, match=f"modes: {Mode.listed()}$"):
        TR.run(None, "bulk", [], "rocev3")
    with pytest.raises(SpecError) as e:
        D.parse_drill("name: d\nmethod: {traffic: {pattern: bulk, src: a, dst: b, "
                      "mode: rocev3, cc: cubic}}", "x.yml")
    got = {p.path: p.message for p in e.value.problems}
    assert got["method.traffic.mode"] == f"must be one of {Mode.listed()} (got 'rocev3')"
    assert Cc.listed() in got["method.traffic.cc"]
    for name in Mode.names():  # and accept every one
        d = D.parse_drill(f"name: d\nmethod: {{traffic: {{pattern: bulk, src: a, dst: b, "
                          f"mode: {name}}}}}\ncompare: [{name}]\n", "x.yml")
        assert d.traffic.mode == name and type(d.traffic.mode) is str
    assert CC.default_for(Mode.SINGLE_PATH) == Cc.DCQCN and CC.default_for("mrc") == "nscc"


def test_the_names_are_spelled_once():
    """`grep '"spray-static"\\|"single-path"' twin/`: the definition alone (a person
    reads the names elsewhere in docstrings and help, never in a comparison)."""
    hits = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "twin").rglob("*")
                  if p.suffix in (".py", ".c", ".h")
                  and ('"spray-static"' in p.read_text() or '"single-path"' in p.read_text()))
    assert hits == ["twin/mrc/modes.py"]
