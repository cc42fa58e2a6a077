"""The reliability and EV engine over a simulated lossy, reordering, duplicating
fabric (no root, simulated clock)."""

import pytest

from twin.mrc.evset import EvSet, EvState, NoUsableEv
from twin.mrc.sim import Fabric, PathModel, run_transfer
from twin.mrc.transport import FLAG_LAST, Receiver, RxPacket, Sack, Sender, SenderConfig
from twin.paths import ev_fields

MiB = 1 << 20


def exactly_once(result, size):
    """All bytes arrived, into the right place, each packet placed once."""
    assert result.ok and result.exact, result.failed
    rx = result.receiver.stats
    assert rx.bytes == size  # duplicates are dropped before placement
    assert result.receiver.completions == [(0, 0xC0FFEE)]


@pytest.mark.parametrize("mode", ["mrc", "spray-static", "single-path"])
@pytest.mark.parametrize("model", [
    PathModel(loss=0.01),
    PathModel(loss=0.10),
    PathModel(burst_loss=0.005, burst_len=30),
    PathModel(duplicate=0.05, jitter_ns=60_000),
], ids=["1%", "10%", "bursty", "dup+reorder"])
def test_every_byte_arrives_exactly_once(mode, model):
    size = 4 * MiB
    exactly_once(run_transfer(size, Fabric(default=model, seed=3), mode=mode), size)


def test_clean_fabric_needs_no_retransmission_and_splits_planes_equally():
    r = run_transfer(8 * MiB, Fabric(), planes=4)
    exactly_once(r, 8 * MiB)
    st = r.sender.stats
    assert st.retransmits == 0
    counts = [st.per_plane_packets[p] for p in range(4)]
    assert max(counts) - min(counts) <= 0.05 * (sum(counts) / 4)


def test_a_lossy_path_gets_its_evs_retired_and_mrc_recovers_fast():
    lossy = {(1, 0): PathModel(loss=0.2)}
    mrc = run_transfer(8 * MiB, Fabric(paths=dict(lossy), seed=5), mode="mrc")
    static = run_transfer(8 * MiB, Fabric(paths=dict(lossy), seed=5), mode="spray-static")
    exactly_once(mrc, 8 * MiB)
    exactly_once(static, 8 * MiB)
    retired = mrc.sender.evs.retired
    assert retired and all(ev_fields(e.value)[:2] == (1, 0) for e in retired)
    assert mrc.sender.evs.counts()["assumed_bad"] == len(retired)
    assert mrc.sender.stats.retransmits < static.sender.stats.retransmits


def kill_path(key):
    def event(fabric):
        fabric.paths[key] = PathModel(dead=True)
    return event


def test_a_path_dying_mid_transfer_costs_mrc_little():
    size = 16 * MiB
    ev0 = EvSet([0, 1, 2, 3], 2, seed=7).next().value  # single-path's EV, same seed
    key = ev_fields(ev0)[:2]
    mrc = run_transfer(size, Fabric(seed=2), mode="mrc", events=[(200_000, kill_path(key))])
    exactly_once(mrc, size)
    single = run_transfer(size, Fabric(seed=2), mode="single-path",
                          events=[(200_000, kill_path(key))], limit_ns=2_000_000_000)
    assert not single.ok and "retry limit" in single.failed


def test_port_state_bitmap_stops_a_plane_and_it_resumes():
    evs = EvSet([0, 1, 2, 3], 2, size=16, seed=1)
    sender = Sender(evs, 0, SenderConfig(init_window=64))
    sender.post(64 * 4096)
    src = memoryview(bytes(64 * 4096))
    first = sender.poll(0, src, budget=8)
    sender.on_sack(Sack(0, 0, first[0].ev, first[0].ts_ns, port_state=0b1101), 10)
    later = sender.poll(20, src, budget=8)
    assert later and all(ev_fields(p.ev)[0] != 1 for p in later)
    sender.on_sack(Sack(0, 0, first[0].ev, first[0].ts_ns, port_state=0b1111), 30)
    assert {ev_fields(p.ev)[0] for p in sender.poll(40, src, budget=16)} >= {1}


def test_ev_set_is_split_over_planes_and_replaces_from_the_same_plane():
    evs = EvSet([0, 1, 2, 3], 4, size=128, seed=9)
    assert len(evs.active) == 128
    assert {p: sum(e.plane == p for e in evs.active) for p in range(4)} == {
        0: 32, 1: 32, 2: 32, 3: 32}
    victim = evs.active[5]
    fresh = evs.lost(victim)
    assert fresh.plane == victim.plane and victim.state is EvState.ASSUMED_BAD
    assert not evs.probe_result(victim.value, True)
    evs.probe_result(victim.value, True)
    assert evs.probe_result(victim.value, True)  # third good probe resurrects it
    assert victim.state is EvState.GOOD and victim in evs.spare[victim.plane]


def test_skip_lasts_one_rotation_and_denied_evs_are_never_used():
    evs = EvSet([0], 1, size=4, backup=4, seed=2)
    a = evs.active[0]
    evs.congested(a)
    first = [evs.next().value for _ in range(3)]
    assert a.value not in first
    evs.deny(evs.active[1].value)
    used = {evs.next().value for _ in range(20)}
    assert a.value in used and not used & evs.denylist


def test_all_planes_down_is_reported_not_spun_on():
    evs = EvSet([0, 1], 1, size=4, seed=2)
    evs.set_plane(0, False)
    evs.set_plane(1, False)
    with pytest.raises(NoUsableEv):
        evs.next()


def test_receiver_completes_write_imm_in_order_even_when_packets_reorder():
    buf = bytearray(3 * 8)
    rx = Receiver(lambda va, data: buf.__setitem__(slice(va, va + len(data)), data))
    pk = [RxPacket(0, 0, b"A" * 8, 0, FLAG_LAST, 11, 1, 0),
          RxPacket(1, 8, b"B" * 8, 1, 0, None, 2, 0),
          RxPacket(2, 16, b"C" * 8, 1, FLAG_LAST, 22, 3, 0)]
    rx.on_data(pk[2])
    rx.on_data(pk[1])
    assert rx.completions == []  # message 0 not yet here, message 1 must wait
    sack = rx.on_data(pk[0])
    assert rx.completions == [(0, 11), (1, 22)]
    assert bytes(buf) == b"A" * 8 + b"B" * 8 + b"C" * 8
    assert sack.cum == 3
    assert rx.on_data(pk[1]).cum == 3 and rx.stats.duplicates == 1


def test_recovery_time_reads_the_goodput_series():
    from twin.traffic import Run

    run = Run("bulk", "mrc", [])
    # 1 GB/s until 1.0 s, nothing until 1.3 s, then 1 GB/s again
    t, b = 0.0, 0
    while t < 2.0:
        run.samples.append((round(t, 2), b))
        t += 0.02
        if not 1.0 <= t < 1.3:
            b += 20_000_000
    assert 0.3 <= run.recovery_s(1.0) <= 0.45
    steady = Run("bulk", "mrc", [], samples=[(i * 0.02, i * 20_000_000) for i in range(100)])
    assert steady.recovery_s(1.0) == 0.0


def test_a_hole_beyond_the_bitmap_is_naked_and_resent_at_once():
    rx = Receiver(lambda va, data: None)
    for psn in range(1, 66):
        rx.on_data(RxPacket(psn, psn * 8, b"x" * 8, 0, 0, None, 1, 0))
    assert rx.nacks == [0] and rx.stats.nacks == 1  # once per hole, not per packet

    sender = Sender(EvSet([0, 1], 1, size=8, seed=3), 0, SenderConfig(init_window=8))
    sender.post(8 * 4096)
    src = memoryview(bytes(8 * 4096))
    first = sender.poll(0, src)
    sender.on_nack(0, 10)  # too soon after sending: could be in flight still
    assert sender.stats.lost_nack == 0
    sender.on_nack(0, 1_000_000)
    assert sender.stats.lost_nack == 1
    again = sender.poll(1_000_001, src)
    assert [p.psn for p in again][:1] == [0] and again[0].ev != first[0].ev


def test_a_plane_cut_off_entirely_is_abandoned_not_refilled_forever():
    dead = {(0, 0): PathModel(dead=True), (0, 1): PathModel(dead=True)}
    r = run_transfer(16 * MiB, Fabric(paths=dead), mode="mrc")
    exactly_once(r, 16 * MiB)
    sent_on_dead = r.sender.stats.per_plane_packets[0]
    assert sent_on_dead < 0.1 * r.sender.stats.per_plane_packets[1]
    assert r.sender.evs.counts()["assumed_bad"] == r.sender.evs.retirements
