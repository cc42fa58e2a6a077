"""The compiled Sender (twin/mrc/_sender.c) beyond the recorded traces: whole simulated
transfers decide exactly as the reference does, it fails and refuses as the reference
does, and what it keeps stays bounded."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from twin.mrc import core
from twin.mrc import transport as T
from twin.mrc.evset import EvSet
from twin.mrc.sim import PathModel, SimFabric, run_transfer

pytest.importorskip("twin.mrc._fastpath")
_fastpath = core.compiled()  # bound to what its C uses
if not hasattr(_fastpath, "Sender"):
    pytest.fail("twin.mrc._fastpath was built without the Sender: pip install -e .",
                pytrace=False)
COMPILED = {"sender_class": _fastpath.Sender, "receiver_class": _fastpath.Receiver}
MiB = 1 << 20


def _outcome(r) -> dict:
    s = r.sender
    return {"ok": r.ok, "exact": r.exact, "failed": r.failed, "elapsed": r.elapsed_ns,
            "window": s.window, "srtt": s.srtt, "cum": s.cum, "stats": s.stats,
            "retirements": s.evs.retirements, "events": [(e.t_ns, e.kind, e.ev, e.psn,
                                                          e.detail) for e in s.log],
            "rx": r.receiver.stats, "completions": list(r.receiver.completions)}


FABRICS = {
    "loss_1pct": lambda: SimFabric(PathModel(loss=0.01), seed=3),
    "bursts": lambda: SimFabric(PathModel(burst_loss=0.005, burst_len=30), seed=3),
    "dup_jitter": lambda: SimFabric(PathModel(duplicate=0.05, jitter_ns=60_000), seed=3),
    "lossy_path": lambda: SimFabric(paths={(1, 0): PathModel(loss=0.2)}, seed=5),
    "dead_plane": lambda: SimFabric(paths={(0, 0): PathModel(dead=True),
                                           (0, 1): PathModel(dead=True)}),
}


@pytest.mark.parametrize("mode", ["mrc", "spray-static", "single-path"])
@pytest.mark.parametrize("fabric", sorted(FABRICS))
def test_a_whole_transfer_goes_as_the_references_does(mode, fabric):
    """The same seeded transfer, end to end (the sim feeds each side what the other
    decided): the same outcome, counters, window, events, bytes."""
    ref = run_transfer(2 * MiB, FABRICS[fabric](), mode=mode)
    fast = run_transfer(2 * MiB, FABRICS[fabric](), mode=mode, **COMPILED)
    assert _outcome(fast) == _outcome(ref)
    if ref.ok:
        assert fast.exact and fast.receiver.stats.bytes == 2 * MiB


def test_a_path_dying_mid_transfer_is_survived_as_the_reference_survives_it():
    def kill(f):
        f.paths[(2, 1)] = PathModel(dead=True)
    runs = [run_transfer(4 * MiB, SimFabric(seed=2), events=[(200_000, kill)], **kw)
            for kw in ({}, COMPILED)]
    assert _outcome(runs[1]) == _outcome(runs[0])
    assert runs[1].ok and runs[1].exact and runs[1].sender.evs.dead_paths >= 1


def test_silence_fails_the_qp_with_the_references_words():
    stall = [(100_000, lambda f: setattr(f.default, "dead", True))]
    for mode, words in (("mrc", "timed out 8 times in a row"), ("single-path", "retry limit")):
        ref = run_transfer(1 * MiB, SimFabric(seed=8), mode=mode, events=stall,
                           limit_ns=60_000_000_000)
        fast = run_transfer(1 * MiB, SimFabric(seed=8), mode=mode, events=stall,
                            limit_ns=60_000_000_000, **COMPILED)
        assert not fast.ok and words in fast.failed and fast.failed == ref.failed
        # a failed QP stays failed: it sends nothing more, and acks change nothing
        assert fast.sender.poll(10**12, memoryview(b"")) == []
        before = fast.sender.stats
        fast.sender.on_sack(T.SackReport(0, 0, 0, 0, 0), 10**12)
        assert fast.sender.stats == before and fast.sender.failed == ref.failed


@pytest.mark.parametrize("bad, words", [({"mode": "fast"}, "mode must be one of"),
                                        ({"cc": "cubic"}, "unknown congestion control"),
                                        ({"mtu": 0}, "mtu 0")])
def test_bad_configs_are_refused_as_the_reference_refuses_them(bad, words):
    def make(cls):
        return cls(EvSet([0, 1], 2, seed=1), 0, T.SenderConfig(**bad))
    with pytest.raises((ValueError, ZeroDivisionError)) as ref:
        make(T.Sender).post(1)
    with pytest.raises(ValueError, match=words) as fast:
        make(_fastpath.Sender)
    if words != "mtu 0":
        assert str(fast.value) == str(ref.value)


def test_it_has_what_the_endpoint_reads():
    s = _fastpath.Sender(EvSet([0, 1, 2, 3], 2, seed=1), 0, T.SenderConfig(cc="dcqcn",
                                                                          line_rate_bps=10**9))
    ref = T.Sender(EvSet([0, 1, 2, 3], 2, seed=1), 0, T.SenderConfig(cc="dcqcn",
                                                                    line_rate_bps=10**9))
    for name in ("idle", "failed", "cum", "window", "srtt", "single_ev", "posted_bytes",
                 "messages_completed", "cnps_ignored"):
        assert getattr(s, name) == getattr(ref, name), name
    assert s.cfg == ref.cfg and type(s.stats) is T.SenderStats and s.stats == ref.stats
    assert s.rp is not None and s.pacer is not None and s.planes_in_use() == [0, 1, 2, 3]
    src = memoryview(bytes(range(256)) * 40)
    assert s.post(10_000, now=5) == ref.post(10_000, now=5) == 0
    assert s.posted_bytes == 10_000 and not s.idle
    pkts, ref_pkts = [], []
    for now in range(5, 10**9, 10**6):  # paced: a frame at a time at 1 Gbit/s
        pkts += s.poll(now, src, 64)
        ref_pkts += ref.poll(now, src, 64)
        if len(pkts) == 3:
            break
    assert [(p.psn, p.ev, p.va, bytes(p.payload), p.tries, p.ack_req, p.imm) for p in pkts] \
        == [(p.psn, p.ev, p.va, bytes(p.payload), p.tries, p.ack_req, p.imm) for p in ref_pkts]
    assert pkts[-1].ack_req and len(pkts[2].payload) == 10_000 - 2 * 4096
    assert s.next_send_ns(now) == ref.next_send_ns(now)
    assert s.reorder_window_ns() == ref.reorder_window_ns()


LONG_RUN = textwrap.dedent("""
    import json, sys
    from twin.mrc.core import compiled
    from twin.mrc.sim import SimFabric, PathModel, run_transfer
    from twin.mrc.transport import SenderConfig

    _fastpath = compiled()

    def rss_kib():
        with open("/proc/self/status") as f:
            return next(int(line.split()[1]) for line in f if line.startswith("VmRSS"))

    marks = []
    def check(s, receiver):
        marks.append([s.stats.packets, rss_kib(), s.records, s.record_slots,
                      s.per_path_queues, s.send_order_len, len(s.evs.retired), len(s.log)])

    packets = int(sys.argv[1])
    mtu = 256
    lossy = {(0, 0): PathModel(loss=0.02), (0, 1): PathModel(loss=0.02)}
    r = run_transfer(256 * mtu, SimFabric(paths=lossy, seed=9), repeat=packets // 256,
                     limit_ns=10**13, config=SenderConfig(mtu=mtu),
                     checkpoint=(packets // 10, check), sender_class=_fastpath.Sender,
                     receiver_class=_fastpath.Receiver)
    print(json.dumps({"ok": r.ok, "exact": r.exact, "packets": r.sender.stats.packets,
                      "retirements": r.sender.evs.retirements, "marks": marks}))
""")


def test_persistent_loss_for_300k_packets_in_flat_memory():
    """2% loss on every path of plane 0 the whole run, in a fresh interpreter: RSS after
    the first 20% stays flat, and the records, their ring, the per-EV send orders and
    the send order are as small at the end as early on."""
    out = subprocess.run([sys.executable, "-c", LONG_RUN, str(300_000)], capture_output=True,
                         text=True, timeout=600, check=True)
    res = json.loads(out.stdout)
    assert res["ok"] and res["exact"] and res["packets"] >= 300_000
    assert res["retirements"] > 100  # the loss really was persistent
    marks = res["marks"][2:]
    rss = [m[1] for m in marks]
    assert max(rss) - min(rss) < 8 * 1024, marks  # KiB
    for col in range(2, 8):
        assert max(m[col] for m in marks) <= max(4096 + 2048, 2 * marks[0][col] + 256), marks
