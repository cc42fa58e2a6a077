"""The hostile packets (twin.mrc.fuzz), the guarded buffers, and the checks they exercise:
the fuzzer's oracle agrees with the real decoder and transport, without a lab."""

import json
import socket
from dataclasses import fields

import pytest

from twin.mrc import control as C
from twin.mrc import fuzz as F
from twin.mrc import loop as L
from twin.mrc import wire
from twin.mrc.buffer import GUARD_BYTES, GuardedBuffer
from twin.mrc.core import compiled
from twin.mrc.counters import ENDPOINT_DROPS
from twin.mrc.evset import EvSet
from twin.mrc.stats import EndpointDrops, EndpointStats
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
    with pytest.raises(ValueError, match="^size must be"):
        C.parse(C.OPS["recv_qp"], {"size": value}, None)


def test_argument_defaults_and_limits():
    """recv_qp's arguments, checked by its op's Record (twin.validate): defaults filled in,
    a missing one named, a NaN tunable and a seed that is a mapping refused."""
    assert C.parse(C.OPS["recv_qp"], {"size": 10}, None) == {"size": 10, "seed": 0}
    with pytest.raises(ValueError, match="^missing argument 'size'$"):
        C.parse(C.OPS["recv_qp"], {}, None)
    assert 0 < C.buffer_limit() <= C.MAX_BUFFER
    with pytest.raises(ValueError, match="not 'nan'"):
        C.OPS["send_qp"].record.fields["target_ns"].check(float("nan"), "target_ns")
    with pytest.raises(ValueError, match="^seed must be"):
        C.parse(C.OPS["recv_qp"], {"size": 10, "seed": {"a": 1}}, None)


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


# -- the live attack: its packets, its oracle, and the real transports under it -----------------

LIVE = F.LiveTarget("fd00::2", mrc_qpn=5, dcqcn_qpn=6, cum=100, ports=0xF,
                    planes=frozenset({0, 1, 2, 3}), window=1)
PACKED = socket.inet_pton(socket.AF_INET6, LIVE.nic)


def decoded(h: F.Hostile):
    """A live packet as the endpoint reads it, by both of its decoders: the Python data
    path's (ICRC checked), and the compiled one's control path (ICRC checked in C)."""
    pkt = wire.decode(h.payload, PACKED, PACKED, LIVE.sport, 0)
    assert wire.decode_checked(h.payload, h.payload[0]) == pkt
    return pkt


def named_psns(cum: int, bitmap: int) -> set[int]:
    return {cum + 1 + i for i in range(64) if bitmap >> i & 1}


def test_the_live_packets_decode_to_what_they_claim():
    packets = F.live_round(LIVE, F.LiveShape(), seed=3, round_no=2)
    shape = F.LiveShape()
    by_kind = F.sent_by_kind(packets)
    assert by_kind == {"forged_sack": shape.sacks, "trim_replay": shape.trim_replays,
                       "nack_stale": shape.nacks, "probe_unknown": 2 * shape.probes,
                       "cnp_ignored": shape.cnps_mrc, "cnp_flood": shape.cnp_flood}
    order = list(dict.fromkeys(h.kind for h in packets))  # SACKs first, NAKs after them
    assert order == ["forged_sack", "trim_replay", "nack_stale", "probe_unknown",
                     "cnp_ignored", "cnp_flood"]
    trims = set()
    for h in packets:
        pkt = decoded(h)
        if h.kind == "forged_sack":
            assert isinstance(pkt, wire.Ack) and h.expect == "sack_bits_unsent"
            s = pkt.sack
            assert (pkt.dest_qp, pkt.psn, s.cum) == (5, 99, 100)  # echoes an acked PSN
            assert named_psns(s.cum, s.bitmap) == set(range(150, 165))  # never sent yet
            assert (s.congestion, s.dup, s.port_state) == (0, False, 0xF)
        elif h.kind in ("trim_replay", "nack_stale"):
            assert isinstance(pkt, wire.Nack) and pkt.dest_qp == 5
            if h.kind == "trim_replay":
                assert (pkt.code, pkt.psn, h.expect) == (wire.NAK_TRIMMED, 99, "trim_stale")
                trims.add(h.payload)
            else:  # acked for sure: the forged SACKs before it said cum 100
                assert (pkt.code, pkt.psn, h.expect) == (wire.NAK_PSN_SEQUENCE_ERROR, 99,
                                                         "nack_stale")
        elif h.kind == "probe_unknown":
            assert isinstance(pkt, wire.Probe) and pkt.reply and pkt.dest_qp in (5, 6)
            assert pkt.ev & 0xF not in LIVE.planes and h.expect == "probe_unknown"
        else:
            assert isinstance(pkt, wire.Cnp)
            assert pkt.dest_qp == (5 if h.kind == "cnp_ignored" else 6)
        if isinstance(pkt, (wire.Ack, wire.Nack)):
            assert pkt.sack.ev & 0xF not in LIVE.planes  # a ghost: no copy went on it
    assert len(trims) == 1  # one notice, replayed


def test_the_live_rounds_are_seeded_and_follow_the_cum():
    shape = F.LiveShape()
    assert F.live_round(LIVE, shape, 3, 2) == F.live_round(LIVE, shape, 3, 2)
    assert F.live_round(LIVE, shape, 3, 2) != F.live_round(LIVE, shape, 4, 2)
    assert F.live_round(LIVE, shape, 3, 2) != F.live_round(LIVE, shape, 3, 3)
    kinds = lambda cum: set(F.sent_by_kind(F.live_round(  # noqa: E731
        F.LiveTarget(**{**LIVE.__dict__, "cum": cum}), shape)))
    assert kinds(0) == {"probe_unknown", "cnp_ignored", "cnp_flood"}  # nothing acked yet
    assert kinds(1) == set(F.LIVE_KINDS)
    no_sacks = F.LiveShape(sacks=0)  # a stale NAK relies on a forged SACK's cum before it
    assert "nack_stale" not in F.sent_by_kind(F.live_round(LIVE, no_sacks))
    with pytest.raises(ValueError, match="2\\*\\*24"):
        F.LiveTarget(**{**LIVE.__dict__, "cum": 1 << 24})


def test_a_ghost_ev_is_on_no_plane_of_the_fabric():
    import random

    rng = random.Random(1)
    assert all(F.ghost_ev(rng, LIVE.planes) & 0xF >= 4 for _ in range(500))
    every = frozenset(range(16))
    assert 0 <= F.ghost_ev(rng, every) < 1 << 32  # none to pick: any EV


def perfect(sent, real_to_mrc=0, real_to_dcqcn=0, believed=3) -> dict:
    """What an endpoint that counts every live packet where it must counts."""
    counted = {f"drops.{f.name}": 0 for f in fields(EndpointDrops)}
    flood = sent.get("cnp_flood", 0) + real_to_dcqcn
    counted.update({
        "drops.sack_bits_unsent": sent["forged_sack"], "mrc.sack_bits_unsent": sent["forged_sack"],
        "drops.trim_stale": sent["trim_replay"], "mrc.trims_stale": sent["trim_replay"],
        "mrc.trims_ignored": sent["trim_replay"], "drops.nack_stale": sent["nack_stale"],
        "mrc.nacks_stale": sent["nack_stale"], "drops.probe_unknown": sent["probe_unknown"],
        "mrc.cnps_ignored": sent["cnp_ignored"] + real_to_mrc,
        "dcqcn.cnps_received": believed, "dcqcn.cnps_limited": flood - believed,
        "drops.cnp_limited": flood - believed, "peer.cnps_to_mrc": real_to_mrc,
        "peer.cnps_to_dcqcn": real_to_dcqcn, "mrc.acks_unsent": 0, "dcqcn.acks_unsent": 0})
    return counted


SENT = {"forged_sack": 40, "trim_replay": 40, "nack_stale": 18, "probe_unknown": 40,
        "cnp_ignored": 40, "cnp_flood": 320}


def failing(checks) -> list[str]:
    return [c.what for c in checks if not c.ok]


def test_the_live_oracle_passes_a_perfect_count_and_names_each_wrong_one():
    assert failing(F.live_oracle(SENT, perfect(SENT))) == []
    assert failing(F.live_oracle(SENT, perfect(SENT, real_to_mrc=2, real_to_dcqcn=5))) == []
    for key, want in [("drops.sack_bits_unsent", ["drops.sack_bits_unsent"]),
                      ("mrc.trims_stale", ["mrc.trims_stale"]),
                      ("drops.nack_stale", ["drops.nack_stale"]),
                      ("drops.probe_unknown", ["drops.probe_unknown"]),
                      ("mrc.cnps_ignored", ["mrc.cnps_ignored"]),
                      ("drops.ack_unsent", ["drops.ack_unsent"]),
                      ("drops.unknown_qp", ["drops.unknown_qp"]),
                      ("mrc.acks_unsent", ["mrc.acks_unsent"])]:
        off = perfect(SENT)
        off[key] += 1
        assert failing(F.live_oracle(SENT, off)) == want, key
    lost = perfect(SENT)
    lost["dcqcn.cnps_limited"] -= 1  # a CNP neither believed nor limited
    assert failing(F.live_oracle(SENT, lost)) == ["dcqcn.cnps_received + dcqcn.cnps_limited",
                                                  "drops.cnp_limited"]
    assert failing(F.live_oracle(SENT, perfect(SENT, believed=160))) == ["dcqcn.cnps_limited"]
    assert failing(F.live_oracle(SENT, perfect(SENT, believed=159))) == []  # 161 of 320


def test_forged_sacks_not_proven_over_unsent_psns_may_count_or_not_and_no_more():
    short = perfect(SENT)
    for k in ("drops.sack_bits_unsent", "mrc.sack_bits_unsent"):
        short[k] -= 3  # 3 of 4 SACKs of one round read after the sender passed c+64
    assert failing(F.live_oracle(SENT, short)) == ["drops.sack_bits_unsent",
                                                   "mrc.sack_bits_unsent"]
    assert failing(F.live_oracle(SENT, short, sacks_unsure=4)) == []
    assert failing(F.live_oracle(SENT, perfect(SENT), sacks_unsure=4)) == []
    over = perfect(SENT)
    over["drops.sack_bits_unsent"] += 1
    checks = F.live_oracle(SENT, over, sacks_unsure=4)
    assert [c.problem() for c in checks if not c.ok] == [
        "drops.sack_bits_unsent counted 41, expected 36..40 (forged SACKs over unsent PSNs: "
        "bits masked)"]


def test_a_live_report_says_what_failed_one_line_each():
    ok = F.Transfer("mrc", 5, 2, 1 << 20, True, None, "ab" * 32, "ab" * 32)
    rep = F.LiveReport("python", rounds=9, rounds_mid_transfer=8,
                       checks=F.live_oracle(SENT, perfect(SENT)), transfers=[ok])
    assert rep.problems == [] and rep.to_dict()["ok"]
    off = perfect(SENT)
    off["drops.trim_stale"] = 0
    bad = F.Transfer("dcqcn", 6, 3, 1 << 20, False, "PSN 7 lost 8 times (retry limit)",
                     "ab" * 32, "cd" * 32)
    rep = F.LiveReport("python", rounds=9, rounds_mid_transfer=0,
                       checks=F.live_oracle(SENT, off), transfers=[ok, bad])
    assert rep.problems == [
        "live python: no round found a transfer in flight: nothing was attacked "
        "mid-transfer (a larger write, LiveShape.mrc_bytes)",
        "live python: drops.trim_stale counted 0, expected 40 (replayed NAK(TRIMMED) for an "
        "acked PSN on a ghost EV: ignored)",
        "live python: the dcqcn QP 6 failed: PSN 7 lost 8 times (retry limit)",
        "live python: the dcqcn transfer is not byte-exact: source abababababababab != "
        "destination cdcdcdcdcdcdcdcd"]
    d = rep.to_dict()
    assert not d["ok"] and d["expected"]["drops.trim_stale"] == 40
    assert d["counted"]["drops.trim_stale"] == 0 and not d["transfers"][1]["exact"]


def test_a_fuzz_report_is_typed_and_prints_the_json_it_always_printed():
    ok = F.Transfer("mrc", 5, 2, 1 << 20, True, None, "ab" * 32, "ab" * 32)
    live = F.LiveReport("python", rounds=9, rounds_mid_transfer=8,
                        checks=F.live_oracle(SENT, perfect(SENT)), transfers=[ok])
    rep = F.FuzzReport(7, 10, 10, {"bad_icrc": 10}, {"drops.bad_icrc": 10},
                       {"drops.bad_icrc": 10}, {"intact": True, "buffers": 2, "broken": []},
                       {"python": live}, {"r0h0": True, "r0h1": True}, [])
    assert rep.ok
    out = rep.to_json()
    assert list(out) == ["seed", "planned", "sent", "sent_by_kind", "expected", "counted",
                         "guards", "live", "alive", "ok", "problems"]
    assert out["ok"] is True and out["live"] == {"python": live.to_dict()}
    json.dumps(out)  # all of it JSON
    rep.problems.append("r0h1: its endpoint no longer answers hello")
    assert not rep.ok and rep.to_json()["ok"] is False


def test_what_the_live_attack_counted_is_read_from_typed_stats():
    from tests.helpers import send_qp_stats
    from tests.unit.test_endpoint_stats import RECV, endpoint_wire

    def endpoint(drops: dict, qps: list, recv: list) -> EndpointStats:
        w = endpoint_wire()
        w["drops"] = {**w["drops"], **drops}
        w["send_qps"], w["recv_qps"] = qps, recv
        return EndpointStats.from_dict(w)

    before = endpoint({"trim_stale": 4, "cnp_limited": 1}, [], [])
    mrc = send_qp_stats(qpn=5, sender={"sack_bits_unsent": 7, "trims_stale": 3,
                                       "trims_ignored": 3},
                        dcqcn={"cnps_ignored": 2}).to_dict()
    dcqcn = send_qp_stats(qpn=6, cc="dcqcn", sender={"cnps_limited": 9},
                          dcqcn={"cnps_received": 2, "rate_bps": 1e8}).to_dict()
    after = endpoint({"trim_stale": 7, "cnp_limited": 10}, [mrc, dcqcn], [])
    peer = endpoint({}, [], [{**RECV, "qpn": 2, "cnps_sent": 1}, {**RECV, "qpn": 3}])
    got = F.live_counted(before, after, peer, F.LiveQps(5, 6, 2, 3))
    assert got["drops.trim_stale"] == 3 and got["drops.cnp_limited"] == 9
    assert got["drops.truncated"] == 0  # a delta: the endpoint's earlier drops do not count
    assert (got["mrc.sack_bits_unsent"], got["mrc.trims_stale"], got["mrc.cnps_ignored"]) \
        == (7, 3, 2)
    assert (got["dcqcn.cnps_received"], got["dcqcn.cnps_limited"]) == (2, 9)
    assert (got["peer.cnps_to_mrc"], got["peer.cnps_to_dcqcn"]) == (1, 0)
    with pytest.raises(ValueError, match="gone"):
        F.live_counted(before, after, peer, F.LiveQps(5, 99, 2, 3))


IMPLS = {"python": (Sender, Receiver)}
try:
    _fastpath = compiled()  # the module, bound to what its C uses

    IMPLS["compiled"] = (_fastpath.Sender, _fastpath.Receiver)
except ImportError:  # the compiled core is not built: the reference alone
    pass


@pytest.mark.parametrize("impl", sorted(IMPLS))
def test_the_live_rounds_land_where_the_oracle_says_in_a_real_transport(impl):
    """A simulated transfer (twin.mrc.sim) on each transport, with the window of the live
    attack's mrc QP, and every 200 us a round of live_round built from its receiver's cum,
    decoded and handed to the Sender as PacketLoop does (its 24-bit PSNs unwrapped near
    the sender's cum); the dcqcn QP's CNPs to a dcqcn Sender of its own, 1 us apart. Each
    kind lands in its counter exactly; the write completes byte-exact."""
    from twin.mrc.sim import SimFabric, run_transfer
    from twin.mrc.transport import SenderConfig

    sender_class, receiver_class = IMPLS[impl]
    shape = F.LiveShape()
    cfg = SenderConfig(init_window=shape.window, max_window=shape.window)
    receivers = []
    dcqcn = sender_class(EvSet([0], 1, size=4, seed=2), 0,
                         SenderConfig(mode="single-path", cc="dcqcn"))
    sent: list[F.Hostile] = []

    def build_receiver(*args, **kw):
        receivers.append(receiver_class(*args, **kw))
        return receivers[-1]

    def attack(sender, fabric, now):
        t = F.LiveTarget(**{**LIVE.__dict__, "cum": receivers[0].cum})
        packets = F.live_round(t, shape, seed=impl, round_no=now)
        sent.extend(packets)
        for k, h in enumerate(packets):
            pkt = decoded(h)
            if isinstance(pkt, wire.Ack):
                cum = L._unwrap24(pkt.sack.cum, sender.cum)
                sender.on_sack(SackReport(cum, pkt.sack.bitmap, pkt.sack.ev,
                                          L._unwrap24(pkt.psn, cum), pkt.sack.tries,
                                          pkt.sack.port_state), now)
            elif isinstance(pkt, wire.Nack):
                sender.on_nack(L._unwrap24(pkt.psn, sender.cum), now,
                               pkt.code == wire.NAK_TRIMMED, pkt.sack.ev, pkt.sack.tries)
            elif isinstance(pkt, wire.Cnp):
                (sender if pkt.dest_qp == t.mrc_qpn else dcqcn).on_cnp(now + k * 1_000)

    actions = [(t, attack) for t in range(200_000, 2_000_000_000, 200_000)]
    r = run_transfer(1 << 20, SimFabric(seed=5), config=cfg, actions=actions,
                     sender_class=sender_class, receiver_class=build_receiver)
    assert r.ok and r.exact
    n = F.sent_by_kind(sent)
    st = r.sender.stats
    assert n["forged_sack"] > 200 and n["cnp_flood"] > 1000  # the whole transfer long
    assert (st.sack_bits_unsent, st.trims_stale, st.nacks_stale) == (
        n["forged_sack"], n["trim_replay"], n["nack_stale"])
    assert (st.acks_unsent, st.nacks_trimmed, st.lost_nack) == (0, 0, 0)
    assert r.sender.cnps_ignored == n["cnp_ignored"]
    believed, limited = dcqcn.rp.cnps, dcqcn.stats.cnps_limited
    assert believed + limited == n["cnp_flood"] and limited > n["cnp_flood"] // 2


@pytest.mark.parametrize(("log", "said"), [
    ("up\nTraceback (most recent call last):\n  File \"x\", line 1\n"
     "AttributeError: 'NoneType' object has no attribute 'plane'\n",
     "AttributeError: 'NoneType' object has no attribute 'plane'"),
    ("up\nFatal Python error: Segmentation fault\n\nCurrent thread:\n  File \"loop.py\"\n\n"
     "Extension modules: yaml._yaml, twin.mrc._fastpath (total: 2)\n",
     "Fatal Python error: Segmentation fault"),
    ("up\nmrc endpoint: stopped by SIGTERM\n", "mrc endpoint: stopped by SIGTERM")])
def test_a_dead_endpoints_problem_line_names_what_ended_it(tmp_path, log, said):
    from twin.endpoints import _last_words

    (tmp_path / "endpoint.log").write_text(log)
    assert _last_words(tmp_path / "endpoint.log") == said


def test_an_endpoint_that_ignores_the_transport_asked_for_is_named_not_attacked():
    """An endpoint from before per-QP transports takes `transport` and ignores it: its
    QPs run its own, so the attack would judge the wrong one twice. Said, not run; every
    QP it opened closed."""
    from tests.helpers import send_qp_stats
    from tests.unit.test_endpoint_stats import endpoint_wire
    from twin.progress import Steps

    class Older:
        def __init__(self):
            self.qpn, self.closed, self.written = 0, [], []

        def _open(self, **kw):
            self.qpn += 1
            return {"qpn": self.qpn, "rkey": 7}

        recv_qp = send_qp = _open

        def connect(self, **kw):
            return {}

        def stats(self):
            w = endpoint_wire()
            w["send_qps"] = [{k: v for k, v in send_qp_stats(qpn=q).to_dict().items()
                              if k != "transport"} for q in range(1, self.qpn + 1)]
            return w  # "transport": "compiled", the endpoint's

        def write(self, **kw):
            self.written.append(kw)

        def close_qp(self, qpn):
            self.closed.append(qpn)

    target, peer = Older(), Older()
    ends = F._Ends("r1h0", "fd00::2", "r0h0", 0xF, frozenset({0, 1, 2, 3}))
    with socket.socket(socket.AF_INET6, socket.SOCK_DGRAM) as sock:
        rep = F._live(target, peer, sock, ends, "python", F.LiveShape(), 1, 0.1, Steps())
    assert rep.problems == ["live python: its QPs run compiled, not python: is the "
                            "endpoint older than twin? rebuild the images: twin images build"]
    assert not target.written and sorted(target.closed) == [1, 2]
    assert sorted(peer.closed) == [1, 2]
