"""The compiled Receiver (twin/mrc/_receiver.c) beside the reference, beyond the recorded
traces: random arrival orders, the window's edge, placement into a buffer, its refusals."""

from __future__ import annotations

import random
import zlib

import pytest

from twin.mrc import core
from twin.mrc import transport as T

pytest.importorskip("twin.mrc._fastpath")
_fastpath = core.compiled()  # bound to what its C uses
if not hasattr(_fastpath, "Receiver"):
    pytest.fail("twin.mrc._fastpath was built without the Receiver: pip install -e .",
                pytrace=False)
Compiled = _fastpath.Receiver


def _pair(span=T.RECV_WINDOW, ack_every=2, size=1 << 20):
    """The reference and the compiled receiver, each placing into its own buffer (the
    compiled one by memcpy), with the same port bitmap."""
    ports = [0xFFFF]
    ref_buf, c_buf = bytearray(size), bytearray(size)

    def place(va, payload):
        ref_buf[va:va + len(payload)] = payload

    ref = T.Receiver(place, ack_every=ack_every, port_state=lambda: ports[0], span=span)
    fast = Compiled(memoryview(c_buf), ack_every=ack_every, port_state=lambda: ports[0],
                    span=span)
    return ref, fast, ref_buf, c_buf, ports


def _state(r):
    return (r.cum, r.owes_ack, r.stats, list(r.completions), list(r.nacks))


def _drive(ref, fast, packets, ports, rng):
    """Feed both the same packets; every answer and state must be the same."""
    for n, (op, pkt) in enumerate(packets):
        ports[0] = rng.getrandbits(8)
        if op == "data":
            a, b = ref.on_data(pkt), fast.on_data(pkt)
        elif op == "trim":
            a, b = ref.on_trimmed(pkt), fast.on_trimmed(pkt)
        else:
            a, b = ref.flush(pkt), fast.flush(pkt)
        assert a == b, f"packet {n} ({op} psn {pkt.psn if pkt else None})"
        assert _state(ref) == _state(fast), f"after packet {n}"
        ref.nacks.clear()
        fast.nacks.clear()


def _packets(rng, count, mtu=256, spread=200, msg=7):
    """PSNs 0..count-1, sent once or twice, delivered in a random order within `spread`,
    some CE-marked, some trimmed, every `msg`-th one a WRITE_IMM."""
    order = sorted(range(count), key=lambda p: p + rng.uniform(0, spread))
    out = []
    for psn in order:
        for _ in range(1 + (rng.random() < 0.05)):
            trimmed = rng.random() < 0.03
            imm = psn if psn % msg == msg - 1 else None
            pkt = T.RxPacket(psn, psn * mtu, b"" if trimmed else rng.randbytes(mtu),
                             imm, rng.getrandbits(20), rng.getrandbits(7),
                             rng.random() < 0.1, rng.random() < 0.05)
            out.append(("trim" if trimmed else "data", pkt))
            if trimmed:  # its resend
                out.append(("data", T.RxPacket(psn, psn * mtu, rng.randbytes(mtu), imm,
                                               pkt.ev, pkt.tries + 1)))
            if rng.random() < 0.02:
                out.append(("flush", pkt if rng.random() < 0.9 else None))
    return out


@pytest.mark.parametrize("seed", range(6))
def test_random_orders_give_the_references_answers(seed):
    rng = random.Random(seed)
    ref, fast, ref_buf, c_buf, ports = _pair(ack_every=1 + seed % 3)
    _drive(ref, fast, _packets(rng, 3000, spread=10 + 60 * seed), ports, rng)
    assert ref.cum == fast.cum == 3000
    assert zlib.crc32(ref_buf) == zlib.crc32(c_buf)


def test_the_window_edge_and_out_of_window_packets():
    rng = random.Random(7)
    ref, fast, *_, ports = _pair(span=100)
    pkts = [("data", T.RxPacket(p, 0, b"x", None, 1, 0)) for p in (99, 100, 101, 250, 1, 0)]
    pkts += [("trim", T.RxPacket(p, 0, b"", None, 1, 0)) for p in (150, 2, 1)]
    _drive(ref, fast, pkts, ports, rng)
    assert fast.stats.out_of_window == 4 and fast.cum == 2  # 100, 101, 250; trimmed 150


def test_a_hole_far_behind_the_newest_is_nakd_once():
    rng = random.Random(1)
    ref, fast, *_, ports = _pair()
    pkts = [("data", T.RxPacket(p, 0, b"y", None, 2, 0)) for p in range(1, 200)]
    ref_nacks, fast_nacks = [], []
    for _, pkt in pkts:
        assert ref.on_data(pkt) == fast.on_data(pkt)
        ref_nacks += ref.nacks
        fast_nacks += fast.nacks
        ref.nacks.clear()
        fast.nacks.clear()
    assert fast_nacks == ref_nacks == [0]
    _drive(ref, fast, [("data", T.RxPacket(0, 0, b"y", None, 2, 0))], ports, rng)
    assert fast.cum == 200


def test_it_places_through_a_callable_as_the_reference_does():
    placed = []
    r = Compiled(lambda va, payload: placed.append((va, bytes(payload))))
    sack = r.on_data(T.RxPacket(0, 64, b"abc", 5, 9, 1, True))
    assert placed == [(64, b"abc")]
    assert isinstance(sack, T.SackReport) and sack.cum == 1 and sack.ev == 9
    assert list(r.completions) == [(0, 5)] and r.stats.completions == 1


def test_a_payload_that_would_overflow_the_buffer_is_refused_and_nothing_is_written():
    buf = bytearray(16)
    r = Compiled(memoryview(buf))
    for va in (14, -1, 1 << 62):
        with pytest.raises(ValueError, match="overflows"):
            r.on_data(T.RxPacket(0, va, b"abcd", None, 1, 0))
    assert buf == bytearray(16) and r.stats.packets == 0 and r.cum == 0
    r.on_data(T.RxPacket(0, 12, b"abcd", None, 1, 0))
    assert buf[12:] == b"abcd"


def test_bad_arguments_are_refused_with_what_was_wanted():
    with pytest.raises(TypeError, match="writable buffer"):
        Compiled(b"read-only")
    with pytest.raises(TypeError, match="port_state"):
        Compiled(bytearray(8), port_state=3)
    with pytest.raises(ValueError, match="span"):
        Compiled(bytearray(8), span=0)


def test_completions_and_state_stay_bounded_over_a_million_psns():
    r = Compiled(lambda va, payload: None, ack_every=64)
    pkt = T.RxPacket(0, 0, b"", None, 1, 0)
    for psn in range(1_000_000):  # in pairs, swapped: every other one out of order
        pkt.psn = psn ^ 1
        pkt.imm = psn if psn % 16 == 15 else None
        r.on_data(pkt)
    assert r.cum == 1_000_000
    assert len(r.completions) == T.MESSAGES_KEPT
    assert r.stats.completions == 1_000_000 // 16
    assert r.stats.out_of_order == 500_000
