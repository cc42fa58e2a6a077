"""The hostile packets (twin.mrc.fuzz), the guarded buffers, and the checks they exercise:
the fuzzer's oracle agrees with the real decoder and transport, without a lab."""

import socket

import pytest

from twin.mrc import control as C
from twin.mrc import fuzz as F
from twin.mrc import loop as L
from twin.mrc import wire
from twin.mrc.buffer import GUARD_BYTES, GuardedBuffer
from twin.mrc.counters import ENDPOINT_DROPS
from twin.mrc.evset import EvSet
from twin.mrc.transport import RECV_WINDOW, Receiver, RxPacket, SackReport, Sender

SRC, DST = "fd00::1", "fd00::2"
TARGET = F.Target(SRC, DST, recv_qpn=3, rkey=0x1234ABCD, size=2048, send_qpn=4,
                  known_qpns=frozenset({3, 4}))


def judge(packets, t=TARGET):
    """What the endpoint does with each packet, in its order of checks, with the real
    decoder, Receiver and Sender behind them: the drop counter (or accepted) per packet."""
    buf = GuardedBuffer(t.size)
    rx = Receiver(lambda va, data: buf.view.__setitem__(slice(va, va + len(data)), data))
    tx = Sender(EvSet([0, 1], 2, size=8, seed=1), 0)  # has sent nothing
    src, dst = socket.inet_pton(socket.AF_INET6, t.src), socket.inet_pton(socket.AF_INET6, t.dst)
    verdicts = []
    for h in packets:
        data = h.payload[:F._RECV_BUF]  # the endpoint's recvmsg cuts longer datagrams
        try:
            pkt = wire.decode(data, src, dst, t.sport, h.tclass << wire.TC_SHIFT)
        except wire.BadPacket as e:
            verdicts.append(L._DROP_OF_REASON[e.reason])
            continue
        if isinstance(pkt, wire.DataPacket):
            if pkt.dest_qp != t.recv_qpn:
                verdicts.append("unknown_qp")
            elif pkt.rkey != t.rkey:
                verdicts.append("bad_rkey")
            elif pkt.va + len(pkt.payload) > t.size:
                verdicts.append("out_of_bounds")
            else:
                st = rx.stats
                before = (st.duplicates, st.out_of_window)
                rx.on_data(RxPacket(L._unwrap24(pkt.psn, rx.cum), pkt.va, pkt.payload, None,
                                    0, 0))
                verdicts.append("duplicate" if st.duplicates > before[0] else
                                "psn_window" if st.out_of_window > before[1] else F.ACCEPTED)
        elif isinstance(pkt, wire.Trimmed):  # as PacketLoop._on_trimmed judges it
            if pkt.dest_qp != t.recv_qpn:
                verdicts.append("unknown_qp")
            elif pkt.rkey != t.rkey:
                verdicts.append("bad_rkey")
            elif pkt.va + pkt.dma_len > t.size or pkt.dma_len > wire.MTU:
                verdicts.append("out_of_bounds")
            else:
                st = rx.stats
                before = (st.duplicates, st.out_of_window, st.bytes)
                _, nack = rx.on_trimmed(RxPacket(L._unwrap24(pkt.psn, rx.cum), pkt.va, b"",
                                                 None, pkt.ev, pkt.tries))
                assert st.bytes == before[2]  # never placed
                verdicts.append("duplicate" if st.duplicates > before[0] else
                                "psn_window" if st.out_of_window > before[1] else
                                F.NACKED if nack else "?")
                if nack:  # the NAK reaches a sender that never sent the PSN
                    n = tx.stats.acks_unsent
                    tx.on_nack(L._unwrap24(pkt.psn, tx.cum), 0, True, pkt.ev, pkt.tries)
                    assert tx.stats.acks_unsent == n + 1 and not tx.wants_to_send()
        elif isinstance(pkt, (wire.Ack, wire.Nack)):
            if pkt.dest_qp != t.send_qpn:
                verdicts.append("unknown_qp")
                continue
            n = tx.stats.acks_unsent
            if isinstance(pkt, wire.Ack):
                cum = L._unwrap24(pkt.sack.cum, tx.cum)
                tx.on_sack(SackReport(cum, pkt.sack.bitmap, pkt.sack.ev,
                                      L._unwrap24(pkt.psn, cum), pkt.sack.tries,
                                      pkt.sack.port_state), 0)
            else:
                tx.on_nack(L._unwrap24(pkt.psn, tx.cum), 0)
            verdicts.append("ack_unsent" if tx.stats.acks_unsent > n else "believed")
        elif isinstance(pkt, wire.Probe) and pkt.reply and pkt.dest_qp == t.send_qpn:
            verdicts.append("probe_unknown")  # the idle sending QP has probed nothing
        else:
            verdicts.append("unknown_qp" if pkt.dest_qp not in t.known_qpns else "probe")
    assert buf.intact()
    return verdicts, tx


def test_every_packet_lands_where_its_oracle_says():
    packets = F.plan(TARGET, seed=7)
    verdicts, tx = judge(packets)
    wrong = [(h.kind, h.expect, v, h.payload[:16].hex())
             for h, v in zip(packets, verdicts, strict=True) if h.expect != v]
    assert not wrong, wrong[:5]
    assert tx.remote_ports == 0xFFFF  # no forged ACK's port state was believed


def test_the_oracle_holds_whatever_the_seed():
    """TWIN_FUZZ_SEED may be any seed: a trimmed packet aimed at one check (PSN window,
    duplicate) once drew an address past the buffer's end in 39 seeds of 300, and was
    refused by the bounds check first."""
    for seed in range(64):
        packets = F.plan(TARGET, seed=seed)
        verdicts, _ = judge(packets)
        wrong = [(h.kind, h.expect, v) for h, v in zip(packets, verdicts, strict=True)
                 if h.expect != v]
        assert not wrong, (seed, wrong[:3])


def test_every_kind_and_every_counter_is_exercised():
    packets = F.plan(TARGET, seed=7)
    assert set(F.sent_by_kind(packets)) == set(F.KINDS)
    assert set(F.expected(packets)) - {F.ACCEPTED, F.NACKED} == set(ENDPOINT_DROPS) | {
        "truncated", "malformed", "bad_icrc", "psn_window", "duplicate", "ack_unsent"}


def test_every_truncation_length_of_a_data_packet_is_there():
    body = wire.encode_data(3, 0, 0, TARGET.rkey, bytes(32))
    whole = len(F.seal(TARGET, body))
    cut = [h for h in F.plan(TARGET, seed=1) if h.kind == "truncated"]
    lengths = {len(h.payload) for h in cut if h.expect in ("truncated", "bad_icrc")}
    assert set(range(whole)) <= lengths


def test_the_plan_is_seeded():
    assert F.plan(TARGET, seed=5) == F.plan(TARGET, seed=5)
    assert F.plan(TARGET, seed=5) != F.plan(TARGET, seed=6)


def test_out_of_bounds_covers_the_top_of_the_address_space():
    vas = set()
    for h in F.plan(TARGET, seed=2):
        if h.kind == "out_of_bounds":
            vas.add(wire.RETH.unpack_from(h.payload, wire.BTH.size)[0])
    assert (1 << 64) - 1 in vas and (1 << 64) - 64 in vas and TARGET.size in vas


def test_a_guarded_buffer_is_its_view_and_notices_a_stray_write():
    g = GuardedBuffer(100)
    assert len(g.view) == 100 and g.intact()
    g.view[0:100] = bytes(range(100))
    assert g.intact() and bytes(g.view[:3]) == b"\x00\x01\x02"
    with pytest.raises(ValueError):  # a slice of the view cannot reach past its end
        g.view[95:105] = bytes(10)
    g._raw[GUARD_BYTES + 100] ^= 1  # what a bounds bug in C would do
    assert not g.intact()


def test_a_guarded_source_holds_the_same_bytes_as_before():
    """Placement and digests must not move: the fill is the old _pattern, byte for byte,
    in a send buffer (an mmap, filled once) as in a zeroed one."""
    import hashlib
    import random

    block = random.Random(3).randbytes(1 << 16)
    digests = set()
    zeroed = GuardedBuffer(200_000)
    zeroed.fill(3)
    for g in (GuardedBuffer.filled(200_000, 3), zeroed):
        assert bytes(g.view[:1 << 16]) == block and bytes(g.view[1 << 16:2 << 16]) == block
        assert g.intact() and len(g.view) == 200_000
        digests.add(hashlib.sha256(g.view).hexdigest())
        g.view[199_999] ^= 1
        assert g.intact()
        g._raw[GUARD_BYTES + 200_000] ^= 1  # a stray write just past the end
        assert not g.intact()
    assert len(digests) == 1


def test_a_receiver_drops_a_psn_too_far_ahead_without_placing_it():
    placed = []
    rx = Receiver(lambda va, data: placed.append(va))
    assert rx.on_data(RxPacket(RECV_WINDOW, 0, b"x", None, 0, 0)) is None
    assert rx.stats.out_of_window == 1 and not placed and rx._window == 0
    rx.on_data(RxPacket(RECV_WINDOW - 1, 0, b"x", None, 0, 0))  # just inside: placed
    assert placed == [0] and rx.stats.out_of_order == 1


def test_a_sender_ignores_acks_and_naks_for_psns_never_sent():
    tx = Sender(EvSet([0, 1], 2, size=8, seed=1), 0)
    tx.post(4096 * 4)
    tx.poll(0, memoryview(bytes(4096 * 4)))  # PSNs 0..3 sent
    tx.on_sack(SackReport(1 << 20, 0, 0, 2, 0, port_state=0), 1)  # cum far beyond
    tx.on_sack(SackReport(0, 0, 0, 9, 0, port_state=0), 1)  # echoes PSN 9
    tx.on_nack(50, 1)
    assert tx.stats.acks_unsent == 3 and tx.cum == 0 and tx.remote_ports == 0xFFFF
    tx.on_sack(SackReport(4, 0, 0, 3, 0), 2)  # the real one
    assert tx.idle and tx.stats.acks_unsent == 3


@pytest.mark.parametrize("value", [-1, "abc", 1e30, 1.5, True, None, [1], 1 << 70])
def test_a_size_argument_is_an_integer_in_range(value):
    with pytest.raises(ValueError):
        C.int_arg({"size": value}, "size", 1, C.buffer_limit())


def test_argument_defaults_and_limits():
    assert C.int_arg({}, "offset", 0, 10, default=0) == 0
    with pytest.raises(ValueError, match="missing"):
        C.int_arg({}, "size", 1, 10)
    assert 0 < C.buffer_limit() <= C.MAX_BUFFER
    with pytest.raises(ValueError):
        C.num_arg({"target_ns": float("nan")}, "target_ns", 1, 10)
    with pytest.raises(ValueError):
        C.seed_arg({"seed": {"a": 1}})


def _resident_pages() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1])


@pytest.mark.parametrize("older_kernel", [False, True])
def test_a_buffer_is_zeros_with_every_page_faulted_in_at_registration(older_kernel, monkeypatch):
    """Placement must never take a page fault: the pages are in before the first packet,
    by one madvise, or by one write per page where the kernel predates it (5.14)."""
    import mmap

    from twin.mrc import buffer

    if older_kernel:
        monkeypatch.setattr(buffer, "MADV_POPULATE_WRITE", -1)  # EINVAL, as before 5.14
    ways = []
    real = buffer.prefault
    monkeypatch.setattr(buffer, "prefault", lambda raw: ways.append(real(raw)) or ways[-1])
    n = 64 << 20
    before = _resident_pages()
    g = GuardedBuffer(n)
    grew = _resident_pages() - before
    assert ways == ["touch" if older_kernel else "populate"]
    assert grew >= n // mmap.PAGESIZE, grew  # every page resident, none left to fault
    assert g.intact() and bytes(g.view) == bytes(n)
