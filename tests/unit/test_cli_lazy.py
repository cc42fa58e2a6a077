"""A CLI that starts at once (issue 40): `twin` imports a command's modules only when
that command runs. Behaviour here, not timing (that is bench/bench_cli.py's):

    the table     twin.cli.commands.COMMANDS names every command the modules define,
                  in the module that defines it, with its help: a new command cannot
                  be left out of `twin --help`
    the help      `twin --help` lists every command of the table, as click would with
                  every module loaded
    the imports   a fresh `import twin.cli` loads no command module and none of the heavy
                  libraries; `twin size`'s and `twin status`'s modules none either
    the typo      a mistyped command gets click's "No such command" and its suggestion
"""

from __future__ import annotations

import ast
import importlib
import os
import pkgutil
import subprocess
import sys

import click
import pytest

import twin.cli
from twin import validate as V
from twin.cli.base import main
from twin.cli.commands import COMMANDS

LAUNCH = "import sys; sys.argv[0] = 'twin'; from twin.cli import main; main()"
# `twin --help` as click prints it with every command loaded in a plain group
EAGER_HELP = """
import importlib, pkgutil, click, twin.cli
from twin.cli.base import main
for m in pkgutil.iter_modules(twin.cli.__path__):
    importlib.import_module(f"twin.cli.{m.name}")
click.Group("twin", commands=main.commands, help=main.help, params=main.params,
            context_settings=main.context_settings).main(["--help"], prog_name="twin")
"""
HEAVY = ("pyroute2", "grafana_client", "grafana_foundation_sdk", "niquests", "matplotlib",
         "twin.chaos.blind", "twin.chaos.runner", "twin.mrc.loop", "twin.runtime", "twin.lab",
         "twin.faults")


def all_modules() -> list[str]:
    return [f"twin.cli.{m.name}" for m in pkgutil.iter_modules(twin.cli.__path__)]


def loaded_everything() -> dict[str, click.Command]:
    for m in all_modules():
        importlib.import_module(m)
    return dict(main.commands)


def fresh(code: str) -> str:
    """What a new interpreter prints running code (no module of this one carried over)."""
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True).stdout.strip()


def test_the_table_names_every_command_in_its_module_with_its_help():
    commands = loaded_everything()
    assert sorted(commands) == sorted(COMMANDS)
    for name, cmd in commands.items():
        modules, help_ = COMMANDS[name]
        assert cmd.callback.__module__ == modules[0], name
        stub = click.Command(name, help=help_)
        for limit in (20, 45, 60, 80, 120, 1000):  # shortened as click shortens the command's
            assert stub.get_short_help_str(limit) == cmd.get_short_help_str(limit), (name, limit)
        assert not cmd.hidden and not cmd.deprecated and not cmd.short_help, name


def test_a_group_loads_every_module_that_adds_to_it():
    """`twin drill` with its blind-drill commands (twin.cli.blind adds them)."""
    out = fresh("import twin.cli as c; from twin.cli.base import main; "
                "d = main.get_command(None, 'drill'); print(sorted(d.commands))")
    assert set(ast.literal_eval(out)) >= {"list", "run", "all", "blind", "answer", "reveal",
                                          "scores"}
    for name, (modules, _) in COMMANDS.items():  # every module named is a command module
        assert set(modules) <= set(all_modules()), name


def test_help_lists_every_command_as_click_would(tmp_path):
    """`twin --help` in a fresh process (nothing loaded) is, byte for byte, what click
    prints for a plain group holding every command."""
    run = subprocess.run([sys.executable, "-c", LAUNCH, "--help"], capture_output=True,
                         text=True, env={**os.environ, "COLUMNS": "100",
                                         "TWIN_RUN_DIR": str(tmp_path)})
    assert run.returncode == 0 and run.stderr == ""
    listed = run.stdout.split("Commands:\n", 1)[1].splitlines()
    assert [line.split()[0] for line in listed if line.startswith("  ") and
            not line.startswith("   ")] == sorted(COMMANDS)
    eager = subprocess.run([sys.executable, "-c", EAGER_HELP], capture_output=True,
                           text=True, env={**os.environ, "COLUMNS": "100"})
    assert eager.stdout == run.stdout


def test_import_twin_cli_loads_no_command_and_no_heavy_library():
    out = fresh("import twin.cli, sys; print(sorted(m for m in sys.modules if "
                f"m.startswith({HEAVY!r}) or m.startswith('twin.cli.')))")
    assert ast.literal_eval(out) == ["twin.cli.base", "twin.cli.commands"]


def test_size_and_status_load_no_heavy_library():
    out = fresh("import twin.cli, sys; from twin.cli.base import main; "
                "[main.get_command(None, n) for n in ('size', 'status')]; "
                f"print(sorted(m for m in sys.modules if m.startswith({HEAVY!r})))")
    assert ast.literal_eval(out) == []


def test_a_typo_gets_no_such_command_and_a_suggestion(tmp_path):
    run = subprocess.run([sys.executable, "-c", LAUNCH, "sizee"], capture_output=True,
                         text=True, env={**os.environ, "TWIN_RUN_DIR": str(tmp_path),
                                         "COLUMNS": "100"})
    assert run.returncode == 2
    assert run.stdout == ""
    assert run.stderr == ("error: No such command 'sizee'. Did you mean 'size'? "
                          "(see `twin --help`)\n")


def test_render_namespace_help_is_clabernetes_default():
    from twin.cli import fabric
    from twin.fabric import clabernetes

    assert fabric.NAMESPACE == clabernetes.DEFAULT_NAMESPACE


def test_paths_ev_option_takes_exactly_the_evs_the_path_formula_reads():
    from twin.cli import fabric
    from twin.fabric import paths

    top = (1 << (paths.ENTROPY_SHIFT + 20)) - 1
    assert fabric.EV.check(top) == top and paths.ev_fields(top)
    with pytest.raises(ValueError):
        paths.ev_fields(top + 1)
    with pytest.raises(V.Invalid):
        fabric.EV.check(top + 1)
