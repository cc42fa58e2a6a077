"""A drill's clock on an attached fabric: offsets, brackets, one machine, merged rounds,
and the command stream (run here against a local python3, as a node runs it)."""

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from twin.errors import UsageError
from twin.remote import clock as C
from twin.remote import ship
from twin.remote.continuous import AGENT as LOOP_AGENT
from twin.remote.continuous import merge_round
from twin.remote.stream import NodeStream
from twin.remote.transport import DockerHost, Kubectl, NodeRef, Transport
from twin.runtime.clock import LocalClock
from twin.verify.localize import Outcome


def test_offset_takes_the_least_delayed_sample_and_half_its_trip():
    samples = [C.Sample(1_000, 6_000, 3_000),  # 2 µs trip: offset 4 µs ± 1
               C.Sample(10_000, 19_000, 10_400),  # 400 ns trip: offset 8.8 µs ± 200 ns
               C.Sample(20_000, 0, 19_000)]  # a negative trip is no sample
    m = C.offset_from(samples)
    assert (m.offset_ns, m.error_ns, m.samples) == (8_800, 200, 2)
    assert m.to_remote(1_000) == 9_800 and m.to_local(9_800) == 1_000
    with pytest.raises(ValueError):
        C.offset_from([])


def test_a_drills_map_covers_both_readings():
    m = C.widen(C.ClockMap(1_000, 100, 8), C.ClockMap(1_600, 300, 8))
    assert (m.offset_ns, m.error_ns, m.samples) == (1_300, 600, 16)
    assert m.to_dict() == {"offset_us": 1.3, "error_us": 0.6, "samples": 16}


def test_bracket_stamped_in_the_node_or_timed_by_twin():
    stamps = [C.Stamp(5_000, 5_600), C.Stamp(7_000, 9_000)]
    assert C.bracket(stamps, 0, 99_999, C.ClockMap(10**9, 10**6)) == (5_000, 9_000, 600)
    # no stamp: twin's span, converted, uncertain by all of it plus the offset's error
    assert C.bracket([], 1_000, 4_000, C.ClockMap(100, 50)) == (1_100, 4_100, 3_050)


def test_one_machine_or_a_refusal_naming_them():
    assert C.require_one_machine("x", "lab", [("a", "m1"), ("b", "m1")]) == "m1"
    with pytest.raises(UsageError, match=r"^twin drill run: lab far runs on 2 machines "
                       r"\(kind-w1 \(1 nodes: b\), kind-w2 \(2 nodes: a, c\)\)"):
        C.require_one_machine("twin drill run", "far",
                              [("a", "kind-w2"), ("b", "kind-w1"), ("c", "kind-w2")])


def test_machines_parsed_from_the_transports():
    pod = {"metadata": {"name": "p", "labels": {"clabernetes/topologyNode": "r0h0"}},
           "spec": {"containers": [{"name": "r0h0"}], "nodeName": "worker-3"},
           "status": {"phase": "Running"}}
    refs = Kubectl("ns").parse_list(json.dumps({"items": [pod]}))
    assert refs[0].machine == "worker-3"
    assert NodeRef.from_dict(refs[0].to_dict()).machine == "worker-3"
    refs = DockerHost("ssh://lab@fab1").parse_list("clab-x-r0h0\tr0h0\trunning\timg\t\t\n")
    assert refs[0].machine == "ssh://lab@fab1"  # one engine, one kernel


def test_rounds_of_every_host_merge_into_one():
    mine = {"a": [0, 2], "b": [1, 3]}
    outcomes, now = merge_round(mine, {"a": {"t": 50, "lost": [[1, 44]]},
                                       "b": {"t": 70, "lost": []}}, 4)
    assert now == 70
    assert outcomes == [Outcome(True, 70), Outcome(True, 70), Outcome(False, 44),
                        Outcome(True, 70)]


def test_merging_keeps_each_agents_ce_marked_probes():
    mine = {"a": [2, 3], "b": [0, 1]}
    outcomes, _ = merge_round(mine, {"a": {"t": 50, "lost": [], "ce": [[0, 9_000]]},
                                     "b": {"t": 70, "lost": [[0, 40]]}}, 4)
    assert outcomes[2] == Outcome(True, 70, ce=True, rtt_ns=9_000)
    assert outcomes[0] == Outcome(False, 40)
    assert [o.ce for o in outcomes] == [False, False, True, False]


def test_local_clock_counts_from_the_faults_own_change():
    class F:
        changed_ns = time.monotonic_ns()

    result, began, done, uncertainty = LocalClock().change(lambda: F)
    assert result is F and began == F.changed_ns and done >= began
    assert uncertainty == done - began


class _Here(Transport):
    """A transport whose 'node' is this machine: the command runs as given."""

    kind, binary = "here", sys.executable

    def list_argv(self, topology):
        return []

    def parse_list(self, text):
        return []

    def argv(self, ref, argv, *, stdin=False):
        return [sys.executable if argv[0] == "python3" else argv[0], *argv[1:]]

    def where(self):
        return "here"

    def to_dict(self):
        return {}


def test_stream_runs_and_stamps_commands_on_the_nodes_clock():
    s = NodeStream(_Here(), NodeRef("n", "n", "running"))
    try:
        before = time.monotonic_ns()
        proc, stamp = s.run(["sh", "-c", "cat; exit 3"], input="hi")
        after = time.monotonic_ns()
        assert (proc.returncode, proc.stdout) == (3, "hi")
        assert before <= stamp.before_ns <= stamp.after_ns <= after  # one machine: one clock
        proc, stamp = s.set_link("no-such-if0", False)  # refused by the kernel, harmless
        assert proc.returncode == 1 and "no-such-if0" in proc.stderr
        m = C.offset_from(s.samples(8))
        assert abs(m.offset_ns) <= m.error_ns + 1_000  # the same clock, within its bound
    finally:
        s.close()
    assert not s.alive


def test_loop_agent_boots_from_its_zip_and_refuses_no_paths(tmp_path):
    hello = {"host": "h", "nic": "::1", "paths": [], "period_ms": 20, "rate_pps": 100}
    proc = subprocess.run([sys.executable, "-I", "-c", ship.BOOT, LOOP_AGENT],
                          input=ship.preamble(LOOP_AGENT) + json.dumps(hello).encode() + b"\n",
                          capture_output=True, timeout=30, cwd=tmp_path)
    assert proc.returncode == 1, proc.stderr.decode()
    assert "no loopback paths" in json.loads(proc.stdout)["error"]


def _prober(**kw):
    from types import SimpleNamespace

    from twin.fabric.model import build_fabric
    from twin.fabric.plan import build_plan
    from twin.fabric.spec import load_spec
    from twin.remote.continuous import RemoteContinuousProber
    from twin.verify.continuous import ContinuousProber

    root = Path(__file__).resolve().parents[2]
    fabric = build_fabric(load_spec(root / "lab/fabrics/mrc-4p.yml"))
    att = SimpleNamespace(lab="far", fabric=fabric, plan=build_plan(fabric),
                          runtime=SimpleNamespace(attaches=True, netns_path=lambda n: "/x"))
    return RemoteContinuousProber(att, **kw), ContinuousProber(att)


def test_merged_rounds_localize_and_snapshot_as_the_local_prober():
    changes = []
    cp, local = _prober(on_change=changes.append)
    link = "t0-p0-r0:eth3--t1-p0-0:eth1"
    for k, t in ((1, 1_000), (2, 2_000)):
        reports = {h: {"round": k, "t": t, "started": t - 500, "sent": 12 * k, "late": 0,
                       "lost": [[j, t - 400] for j, i in enumerate(cp.mine[h])
                                if link in cp.paths[i].links]} for h in cp.hosts}
        cp._observe(reports)
    snap = cp.snapshot()
    assert snap.keys() == local.snapshot().keys()  # `twin probe --json` reads either
    assert [d["target"] for d in snap["named"]] == [link] == [c.localization.target
                                                              for c in changes]
    assert (snap["probes_sent"], snap["rounds"], snap["last_round"]["started_ns"]) == \
        (96, 2, 1_500)


def test_once_takes_a_path_lost_only_if_lost_in_every_round():
    from twin.remote.continuous import once_outcomes

    first = [Outcome(False, 10), Outcome(False, 11), Outcome(True, 50)]
    second = [Outcome(True, 90), Outcome(False, 61), Outcome(False, 62)]
    assert once_outcomes([(first, 50), (second, 90)]) == [
        Outcome(True, 90), Outcome(False, 11), Outcome(True, 50)]
