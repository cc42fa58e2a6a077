"""Hostile input on every command of a running lab: each case gets a one-line
error and exit 2, and changes nothing, compared before and after: the lab's
state and build files, every node's links (admin and carrier), every
switch's nft tables and the faults in force."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.integration.conftest import LAB4, lab_name, set_env
from twin import faults as F
from twin import lab as L
from twin import lifecycle
from twin.cli import main
from twin.state import known_labs

pytestmark = pytest.mark.netns
L4 = ["--lab", LAB4]
BULK = ["traffic", "bulk", "--src", "r0h0", "--dst", "r1h0", *L4]

# (what it is, argv, a phrase the error must contain)
CASES = [
    # an unknown lab, node or interface
    ("unknown lab: status", ["status", "no-such-lab"], "lab no-such-lab is not up"),
    ("unknown lab: down", ["down", "no-such-lab"], "lab no-such-lab is not up"),
    ("unknown lab: verify", ["verify", "no-such-lab"], "lab no-such-lab is not up"),
    ("unknown lab: fault list", ["fault", "list", "--lab", "nolab"], "lab nolab is not up"),
    ("unknown lab: fault clear", ["fault", "clear", "--lab", "nolab"], "lab nolab is not up"),
    ("unknown lab: stats", ["stats", "--lab", "nolab"], "lab nolab is not up"),
    ("unknown lab: traffic", ["traffic", "incast", "--lab", "nolab"], "lab nolab is not up"),
    ("unknown node: exec", ["exec", "nonode", *L4, "--", "true"], "no node 'nonode'"),
    ("unknown node: restart", ["restart", "nonode", *L4], "no node 'nonode'"),
    ("unknown node: link-down", ["fault", "link-down", "nonode:eth1", *L4], "no node 'nonode'"),
    ("unknown node: plan", ["plan", "mrc-4p", "--node", "nonode"], "no node 'nonode'"),
    ("unknown host: stats", ["stats", "nohost", *L4], "no host 'nohost'"),
    ("unknown host: traffic", ["traffic", "bulk", "--src", "r0h0", "--dst", "r9h9", *L4],
     "'r9h9' is not a host"),
    ("unknown host: paths", ["paths", "mrc-4p", "r0h0", "nohost"], "'nohost' is not a host"),
    ("a switch is no host: paths", ["paths", "mrc-4p", "r0h0", "t0-p0-r0"], "is not a host"),
    ("unknown interface", ["fault", "link-down", "t0-p0-r0:eth99", *L4], "has no link on eth99"),
    ("no NODE:IF", ["fault", "link-down", "t0-p0-r0", *L4], "NODE:IF"),
    # an interface that exists but is not a fabric link
    ("lo is no fabric link", ["fault", "link-down", "t0-p0-r0:lo", *L4], "has no link on lo"),
    ("a host's lo", ["fault", "link-loss", "r0h0:lo", "5", *L4], "has no link on lo"),
    ("--cut on lo", [*BULK, "--cut", "r0h0:lo"], "has no link on lo"),
    # a loss outside 0-100, or NaN
    ("loss 101", ["fault", "link-loss", "t0-p0-r0:eth3", "101", *L4], "(0, 100]"),
    ("loss 0", ["fault", "link-loss", "t0-p0-r0:eth3", "0", *L4], "(0, 100]"),
    ("loss -5", ["fault", "link-loss", "t0-p0-r0:eth3", "-5", *L4], "(0, 100]"),
    ("loss nan", ["fault", "link-loss", "t0-p0-r0:eth3", "nan", *L4], "got nan"),
    ("loss inf", ["fault", "link-loss", "t0-p0-r0:eth3", "inf", *L4], "got inf"),
    ("loss abc", ["fault", "link-loss", "t0-p0-r0:eth3", "abc", *L4], "'abc'"),
    # sizes that are 0, negative, unparseable or beyond memory
    ("size 0", [*BULK, "--size", "0"], "--size: must be at least 1"),
    ("size -1M", [*BULK, "--size", "-1M"], "--size: must be at least 1"),
    ("size abc", [*BULK, "--size", "abc"], "--size: must be bytes or K/M/G"),
    ("size 1.2.3M", [*BULK, "--size", "1.2.3M"], "--size: must be bytes or K/M/G"),
    ("size inf", [*BULK, "--size", "inf"], "--size: must be bytes or K/M/G"),
    ("size beyond memory", [*BULK, "--size", "99999G"], "the hosts can register"),
    ("all-to-all beyond memory", ["traffic", "all-to-all", "--size", "4G", *L4],
     "the hosts can register"),
    # a misspelled mode (and other bad traffic options)
    ("misspelled mode", [*BULK, "--mode", "mcr"], "'mcr' is not one of"),
    ("misspelled pattern", ["traffic", "bulkk", *L4], "'bulkk' is not one of"),
    ("evs 0", [*BULK, "--evs", "0"], "--evs: must be an integer 1 to"),
    ("evs huge", [*BULK, "--evs", "999999"], "--evs: must be an integer 1 to"),
    ("same host", ["traffic", "bulk", "--src", "r0h0", "--dst", "r0h0", *L4],
     "two different hosts"),
    ("cut-at negative", [*BULK, "--cut", "t0-p0-r0:eth3", "--cut-at", "-1"], "--cut-at"),
    ("paths to itself", ["paths", "mrc-4p", "r0h0", "r0h0"], "two different hosts"),
    ("paths --ev zz", ["paths", "mrc-4p", "r0h0", "r1h0", "--ev", "zz"],
     "--ev: must be an entropy value 0 to 4294967295 (got 'zz')"),
    ("paths --ev 2^32", ["paths", "mrc-4p", "r0h0", "r1h0", "--ev", "0x100000000"],
     "--ev: must be an entropy value 0 to 4294967295 (got 4294967296)"),
    # link-up on a link that is not down
    ("link-up, no fault", ["fault", "link-up", "t0-p0-r1:eth3", *L4], "has no fault in force"),
    # other commands
    ("verify --junit into no dir", ["verify", LAB4, "--junit", "/nonexistent-dir/x.xml"],
     "does not exist"),
    ("up of a lab that is up", ["up", "SPEC4", "--runtime", "netns"], "is already up"),
    ("up --name bad", ["up", "mrc-4p", "--name", "Bad_Name"], "--name: must be lowercase"),
    ("up, unknown runtime", ["up", "mrc-4p", "--runtime", "vmware"], "'vmware' is not one of"),
    ("down LAB --all", ["down", LAB4, "--all"], "give one of"),
    ("down --yes alone", ["down", "--yes"], "go with --stray"),
    ("exec without a command", ["exec", "r0h0", *L4], "Missing argument"),
    ("unknown command", ["fault", "link-melt", "t0-p0-r0:eth3", *L4],
     "unknown fault kind or command 'link-melt'; one of: "),
    ("size --radix 0", ["size", "--radix", "0", "--planes", "8"], "--radix"),
    ("engine, unknown verb", ["engine", "restart"], "No such command"),
    ("images, unknown verb", ["images", "push"], "No such command"),
    ("render --json typo", ["render", "mrc-4p", "--jsn"], "No such option"),
]
# a fault on a link already faulted: each with the fault that is already there
FAULTED = [
    ("link-down on a down link", ["fault", "link-down", "t0-p0-r0:eth3", *L4]),
    ("link-down on its other end", ["fault", "link-down", "t1-p0-0:eth1", *L4]),
    ("link-loss on a down link", ["fault", "link-loss", "t0-p0-r0:eth3", "5", *L4]),
    ("--cut of a down link", [*BULK, "--cut", "t0-p0-r0:eth3"]),
]


def _files(root: Path) -> dict[str, str]:
    if not root.is_dir():
        return {}
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*"))
            if p.is_file() and p.suffix not in (".log", ".sock")}


def snapshot(att) -> dict:
    """Everything a command could change of a lab."""
    links, tables = {}, {}
    for node in att.plan.nodes:
        shown = json.loads(att.runtime.exec(node, ["ip", "-j", "link", "show"]).stdout)
        links[node] = sorted((i["ifname"], tuple(sorted(i["flags"]))) for i in shown)
        if node.startswith("t"):
            tables[node] = att.runtime.exec(node, ["nft", "list", "ruleset"]).stdout
    return {"state": _files(att.state.dir), "build": _files(Path(att.state.build_dir)),
            "links": links, "nft": tables, "faults": [f.to_dict() for f in F.active(att)]}


def run_cli(argv: list[str]):
    result = CliRunner().invoke(main, argv)
    lines = result.stderr.strip().splitlines()
    return result, lines


def check_refused(att, argv, phrase=None) -> None:
    before = snapshot(att)
    result, lines = run_cli(argv)
    assert result.exit_code == 2, (argv, result.output)
    assert not isinstance(result.exception, Exception) or isinstance(result.exception,
                                                                   SystemExit), result.exception
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    if phrase:
        assert phrase in lines[0], lines[0]
    assert snapshot(att) == before


@pytest.mark.parametrize("what,argv,phrase", CASES, ids=[c[0] for c in CASES])
def test_hostile_input_gets_one_line_exit_2_and_changes_nothing(lab4, what, argv, phrase):
    argv = [str(Path(lab4.state.dir) / "spec.yml") if a == "SPEC4" else a for a in argv]
    check_refused(lab4, argv, phrase)


@pytest.mark.parametrize("what,argv", FAULTED, ids=[c[0] for c in FAULTED])
def test_a_fault_on_a_link_already_faulted_is_refused(lab4, what, argv):
    F.link_down(lab4, "t0-p0-r0:eth3")
    try:
        check_refused(lab4, argv, "t0-p0-r0:eth3--t1-p0-0:eth1")
    finally:
        F.clear(lab4)


def test_link_loss_on_a_lossy_link_is_refused(lab4):
    F.link_loss(lab4, "t0-p0-r0:eth3", 2)
    try:
        check_refused(lab4, ["fault", "link-loss", "t0-p0-r0:eth3", "5", *L4], "already")
    finally:
        F.clear(lab4)


def test_the_lab_still_works_after_all_of_it(lab4):
    from twin.verify import run_verify

    assert F.active(lab4) == []
    assert run_verify(lab4.runtime, lab4.plan).ok


# -- the lab itself in a bad way ------------------------------------------------------

TINY = "planes: 2\nracks: 2\nhosts_per_rack: 1\nt1_per_plane: 1\n"


def _tiny(session_dirs, prefix: str) -> str:
    name = lab_name(prefix)
    spec = Path(session_dirs) / f"{name}.yml"
    spec.write_text(f"name: {name}\n{TINY}")
    return str(spec)


def test_traffic_and_stats_on_a_lab_half_down_are_refused(session_dirs):
    set_env(session_dirs)
    att = L.attach(L.up(_tiny(session_dirs, "half"), "netns").lab)
    try:
        att.runtime.destroy(["r1h0", "t1-p1-0"])  # gone underneath twin, as a crash would
        files = _files(att.state.dir)
        for argv in (["traffic", "bulk", "--src", "r0h0", "--dst", "r1h0", "--lab", att.lab],
                     ["traffic", "all-to-all", "--size", "1M", "--lab", att.lab],
                     ["stats", "r1h0", "--lab", att.lab]):
            result, lines = run_cli(argv)
            assert result.exit_code == 2 and len(lines) == 1, result.output
            assert "is half down" in lines[0] and "r1h0" in lines[0]
        assert _files(att.state.dir) == files
    finally:
        lifecycle.down(att.lab)


def test_two_racing_ups_of_one_lab_one_wins_the_other_changes_nothing(session_dirs):
    set_env(session_dirs)
    spec = _tiny(session_dirs, "race")
    argv = [sys.executable, "-m", "twin", "up", spec, "--runtime", "netns"]
    procs = [subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(2)]
    results = [(p.wait(timeout=120), *p.communicate()) for p in procs]
    lab = Path(spec).stem
    try:
        codes = sorted(rc for rc, _, _ in results)
        assert codes == [0, 2], results
        loser = next(err for rc, _, err in results if rc == 2)
        last = loser.strip().splitlines()[-1]
        assert last.startswith("error: lab ") and "already" in last
        att = L.attach(lab)
        assert att.state.phase == "up"
        from twin.verify import run_verify

        assert run_verify(att.runtime, att.plan).ok
    finally:
        if lab in known_labs():
            lifecycle.down(lab)
