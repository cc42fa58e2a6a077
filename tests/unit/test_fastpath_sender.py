"""The compiled Sender straight into the compiled data path (issue 39), held to the path
it replaces:

- TxBatch.post_sender (the Sender's decisions written as C records, built from the EV's
  template, the payload pointing into the source buffer) sends the same bytes, counts
  the same planes and refuses the same packets as poll + TxBatch.post, for two compiled
  Senders given the same seed and the same inputs (first copies, retransmissions, an
  ImmDt, a template miss, a dcqcn pacer);
- what it refuses (a sender that is not the compiled one, a bad budget, a call from
  inside miss) it refuses before any packet is decided.
"""

from __future__ import annotations

import random

import pytest

from tests.unit.test_fastpath import DST, SRC, _raw_pair, netns, root  # noqa: F401
from twin.mrc import transport as T
from twin.mrc import wire
from twin.mrc.evset import EvSet
from twin.mrc.loop import load_datapath

fp, why = load_datapath("auto")
pytestmark = pytest.mark.skipif(fp is None or not hasattr(fp, "Sender"),
                                reason=f"the compiled data path is not built: {why}")

SIZE = 1 << 20


def _sender(mode="mrc", cc="nscc", seed="s"):
    cfg = T.SenderConfig(mode=mode, cc=cc, line_rate_bps=10**9 if cc == "dcqcn" else 0)
    s = fp.Sender(EvSet([0, 1, 2, 3], 2, size=16, seed=seed), 0, cfg)
    s.set_local_ports(0xF, 0)
    return s


def _templates():
    made, templates = [], {}

    def miss(ev):
        made.append(ev)
        tpl = templates[ev] = wire.DataTemplate("::1", "::1", SRC, DST, ev, 9, 0xC0FFEE)
        return tpl
    return templates, miss, made


def _drive(send, sender, src):
    """The same inputs for either path: writes (one with an ImmDt, one shorter than a
    packet), polls until the window is full, a SACK of part of it, then the timer long
    after (a tail probe, retransmissions). `send(t)` sends what the sender decides at t;
    returns how many packets it sent."""
    sent = 0
    sender.post(40_000, 0, None, 0)
    sender.post(5_000, 400_000, 0xABCDEF01, 0)
    sender.post(100, SIZE - 100, None, 0)
    t = 1_000
    for _ in range(4):
        sent += send(t)
        t += 1_000
    sender.on_sack(T.SackReport(5, 0b1011, 0, 7, 0), t)
    for _ in range(3):
        sent += send(t)
        t += 1_000
    t += 50_000_000
    try:
        sender.on_timer(t)
    except T.QpFailed:
        pass
    for _ in range(3):
        sent += send(t)
        t += 1_000
    return sent


def _old(q, sender, src, templates, miss):
    def send(t):
        txs = sender.poll(t, src, 64)
        assert q.post(txs, templates, miss, "qp") == []
        return len(txs)
    return send


def _new(q, sender, src, templates, miss):
    def send(t):
        polled, refused = q.post_sender(sender, t, src, 64, templates, miss, "qp")
        assert refused == []
        return polled
    return send


@root
@pytest.mark.parametrize("cc", ["nscc", "dcqcn"])
def test_post_sender_sends_what_poll_and_post_send(netns, cc):  # noqa: F811
    """Two compiled Senders, one seed, the same inputs: the same frames in the same
    order, the same planes counted, the same decisions (stats, window)."""
    src = memoryview(random.Random(7).randbytes(SIZE))
    got, counted, outcomes = [], [], []
    for path in (_old, _new):
        tx, rx = _raw_pair(netns)
        q = fp.TxBatch(tx.fileno(), 16)  # smaller than a poll's budget: two sendmmsgs
        sender = _sender(cc=cc)
        templates, miss, made = _templates()
        with tx, rx:
            n = _drive(path(q, sender, src, templates, miss), sender, src)
            got.append([rx.recv(16384) for _ in range(n)])
        counted.append((q.plane_bytes, q.counters[:2], sorted(made)))
        outcomes.append((sender.stats, sender.window, sender.inflight, sender.cum))
    assert got[0] == got[1] and len(got[0]) > 13
    assert counted[0] == counted[1]
    assert outcomes[0] == outcomes[1]
    assert any(f[40 + 8] == wire.RDMA_WRITE_ONLY_WITH_IMMEDIATE for f in got[1])
    assert outcomes[1][0].retransmits > 0


@root
def test_post_sender_returns_the_tags_of_packets_the_kernel_refuses(netns):  # noqa: F811
    """No route: every packet comes back as the tag, counted refused, no plane bytes."""
    tx, _ = _raw_pair(netns)
    q, sender, src = fp.TxBatch(tx.fileno(), 8), _sender(), memoryview(bytes(SIZE))
    templates = {}

    def miss(ev):
        tpl = templates[ev] = wire.DataTemplate("::1", "fcbb:bb00:100::", SRC, DST, ev, 2, 3)
        return tpl
    sender.post(20 * 4096, 0, None, 0)
    with tx:
        polled, refused = q.post_sender(sender, 1, src, 64, templates, miss, "qp")
    assert polled > 8 and refused == ["qp"] * polled
    assert q.counters[:2] == (0, polled) and q.plane_bytes == {}


def test_post_sender_refuses_what_it_cannot_build_from():
    q, src = fp.TxBatch(-1, 4), memoryview(bytes(SIZE))
    templates, miss, _ = _templates()
    with pytest.raises(TypeError, match="compiled Sender"):
        q.post_sender(T.Sender(EvSet([0], 1, seed=1), 0, T.SenderConfig()), 0, src, 64,
                      templates, miss, None)
    with pytest.raises(TypeError, match="want"):
        q.post_sender(_sender(), 0, src, 64, [], miss, None)
    with pytest.raises(ValueError, match="budget"):
        q.post_sender(_sender(), 0, src, -1, templates, miss, None)
    with pytest.raises(RuntimeError, match="not initialised"):
        q.post_sender(fp.Sender.__new__(fp.Sender), 0, src, 64, templates, miss, None)
    sender = _sender()
    sender.post(8192, 0, None, 0)

    def again(ev):  # a miss that calls back into the batch
        q.post_sender(sender, 0, src, 64, templates, miss, None)
    with pytest.raises(RuntimeError, match="called again"):
        q.post_sender(sender, 0, src, 64, {}, again, None)
    assert q.queued == 0


def test_post_sender_with_nothing_to_send_sends_nothing():
    q, sender, src = fp.TxBatch(-1, 4), _sender(), memoryview(bytes(SIZE))
    templates, miss, made = _templates()
    assert q.post_sender(sender, 0, src, 64, templates, miss, None) == (0, [])
    assert made == [] and q.counters == (0, 0, 0)
