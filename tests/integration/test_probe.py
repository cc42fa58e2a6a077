"""Continuous localization on one mrc-4p lab on netns: each fault kind is thrown a few
times while a ContinuousProber runs; it must name the fault's target within a bound,
name nothing else, and clear it after `twin fault clear`. The time from the fault's
own stamp (its `apply` line on the lab's timeline) to the naming is measured; run
with -rP to see the medians."""

import json
import os
import random
import signal
import statistics
import subprocess
import sys
import time

import pytest
from click.testing import CliRunner

from tests.helpers import poll
from tests.integration.conftest import lab_name
from twin import faults as F
from twin.cli import main
from twin.fabric.model import Endpoint
from twin.verify import run_verify
from twin.verify.continuous import ContinuousProber

pytestmark = pytest.mark.netns
PERIOD_MS = 20
REPEATS = 5
NAMED_WITHIN_S = 2.0  # a bound for the test, far above what is measured (tens of ms)
CLEARED_WITHIN_S = 5.0  # a revert re-programs nodes: hundreds of ms
LAB = lab_name("probe-4p-")


def corrupt_link(att, node):
    """The link route-corrupt breaks: the one its corrupted route should leave by."""
    good, _ = F.corruption(att.plan[node])
    return att.fabric.link_at(Endpoint(node, good.dev)).id


FAULTS = {
    # kind: (apply, the target it is localized as)
    "link-down": (lambda att: F.link_down(att, "t0-p0-r0:eth3"),
                  lambda att: "t0-p0-r0:eth3--t1-p0-0:eth1"),
    "blackhole": (lambda att: F.blackhole(att, "t1-p0-0"), lambda att: "t1-p0-0"),
    "sid-loss": (lambda att: F.sid_loss(att, "t1-p1-0"), lambda att: "t1-p1-0"),
    "route-corrupt": (lambda att: F.route_corrupt(att, "t0-p3-r1"),
                      lambda att: corrupt_link(att, "t0-p3-r1")),
    "switch-down": (lambda att: F.switch_down(att, "t1-p2-1"), lambda att: "t1-p2-1"),
}


def wait_for(what, within_s):
    return poll(what, within_s, every_s=0.005)  # a localization's time is read off it


def applied_ns(att) -> int:
    return next(e["t_mono_ns"] for e in reversed(F.events(att)) if e["event"] == "apply")


@pytest.mark.parametrize("kind", FAULTS)
def test_the_prober_names_each_fault_and_clears_it(lab, kind):
    apply, expected = FAULTS[kind]
    target = expected(lab)
    times_ms, first_lost_ms = [], []
    with ContinuousProber(lab, period_ms=PERIOD_MS) as cp:
        assert cp.wait_rounds(3, 5), cp.snapshot()["error"]
        assert cp.named() == [], cp.snapshot()["named"]
        rng = random.Random(kind)
        for _ in range(REPEATS):
            time.sleep(rng.uniform(0, PERIOD_MS / 1000))  # a fault lands anywhere in a round
            apply(lab)
            fault_ns = applied_ns(lab)
            named = wait_for(lambda since=fault_ns: [loc for loc in cp.named()
                                                     if loc.named_ns > since], NAMED_WITHIN_S)
            assert [loc.target for loc in named] == [target], cp.snapshot()
            loc = named[0]
            # a probe sent just before the stamp may still be in a queue when the
            # switch goes: lost to the fault, not before it. One sent a whole
            # timeout earlier would have been counted before the fault was made
            in_flight_ns = cp.snapshot()["timeout_max_ms"] * 1e6
            assert loc.first_failed_ns > fault_ns - in_flight_ns, cp.snapshot()
            times_ms.append((loc.named_ns - fault_ns) / 1e6)
            first_lost_ms.append((loc.first_failed_ns - fault_ns) / 1e6)
            result = CliRunner().invoke(main, ["fault", "clear", "--lab", lab.lab])
            assert result.exit_code == 0, result.output
            assert wait_for(lambda: not cp.named(), CLEARED_WITHIN_S), cp.snapshot()["named"]
            since = [loc for loc in cp.localizations() if loc.named_ns > fault_ns]
            assert [(loc.target, loc.cleared_ns is not None) for loc in since] == \
                [(target, True)], "something else was named, or it did not clear"
        snap = cp.snapshot()
    assert snap["error"] is None and snap["probe_pps"] <= snap["rate_cap_pps"]
    print(f"{kind}: named {target} in {statistics.median(times_ms):.1f} ms median "
          f"({', '.join(f'{t:.1f}' for t in times_ms)} ms; first lost probe sent "
          f"{statistics.median(first_lost_ms):.1f} ms after the fault's stamp; period "
          f"{PERIOD_MS} ms, {snap['probe_pps']:.0f} pps)")


def test_probe_once_names_a_blackhole_and_passes_when_healthy(lab):
    runner = CliRunner()
    healthy = runner.invoke(main, ["probe", "--lab", lab.lab, "--once", "--json"])
    assert healthy.exit_code == 0, healthy.output
    assert json.loads(healthy.output)["ok"] is True
    F.blackhole(lab, "t1-p3-1")
    try:
        broken = runner.invoke(main, ["probe", "--lab", lab.lab, "--once", "--json"])
        text = runner.invoke(main, ["probe", "--lab", lab.lab, "--once"])
    finally:
        F.clear(lab)
    assert broken.exit_code == 1, broken.output
    named = json.loads(broken.output)["named"]
    assert [(d["target"], d["kind"]) for d in named] == [("t1-p3-1", "switch")]
    assert text.exit_code == 1 and "named switch t1-p3-1" in text.output
    assert run_verify(lab.runtime, lab.plan).ok


def test_probe_live_prints_a_line_per_change_and_stops_on_sigterm(lab):
    proc = subprocess.Popen([sys.executable, "-m", "twin", "probe", "--lab", lab.lab,
                             "--period", "10", "--json"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=dict(os.environ))
    try:
        time.sleep(1.0)  # the interpreter starts, the prober runs a few rounds
        F.link_down(lab, "t0-p1-r1:eth4")
        time.sleep(0.5)
        proc.send_signal(signal.SIGTERM)
        stdout, stderr = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
        F.clear(lab)
    lines = [json.loads(line) for line in stdout.splitlines()]
    assert proc.returncode == 1, stderr  # something is named at the end
    assert [(d["event"], d["target"]) for d in lines[:-1]] == \
        [("named", "t0-p1-r1:eth4--t1-p1-1:eth2")]
    end = lines[-1]
    assert end["event"] == "end" and end["rounds"] > 10 and end["error"] is None
    assert [d["target"] for d in end["named"]] == ["t0-p1-r1:eth4--t1-p1-1:eth2"]


def test_probe_refuses_bad_input_before_probing(lab):
    runner = CliRunner()
    for argv, message in ((["--period", "0"], "--period: must be"),
                          (["--rate", "0"], "--rate: must be"),
                          (["--once", "--duration", "1"], "--once is one round"),
                          (["--duration", "-1"], "--duration: must be")):
        result = runner.invoke(main, ["probe", "--lab", lab.lab, *argv])
        assert result.exit_code == 2 and message in result.output, (argv, result.output)
