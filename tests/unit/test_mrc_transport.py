"""The reliability and EV engine over a simulated lossy, reordering, duplicating
fabric (no root, simulated clock)."""

import collections
import json
import subprocess
import sys
import textwrap

import pytest

from twin.fabric.paths import ev_fields
from twin.mrc.evset import EvSet, EvState
from twin.mrc.sim import PathModel, SimFabric, run_transfer
from twin.mrc.transport import (
    BUILD_CHUNK,
    Event,
    EventLog,
    Receiver,
    RxPacket,
    SackReport,
    Sender,
    SenderConfig,
    queueing_target_ns,
)

MiB = 1 << 20


def exactly_once(result, size):
    """All bytes arrived, into the right place, each packet placed once."""
    assert result.ok and result.exact, result.failed
    rx = result.receiver.stats
    assert rx.bytes == size  # duplicates are dropped before placement
    assert list(result.receiver.completions) == [(0, 0xC0FFEE)]


@pytest.mark.parametrize("mode", ["mrc", "spray-static", "single-path"])
@pytest.mark.parametrize("model", [
    PathModel(loss=0.01),
    PathModel(loss=0.10),
    PathModel(burst_loss=0.005, burst_len=30),
    PathModel(duplicate=0.05, jitter_ns=60_000),
], ids=["1%", "10%", "bursty", "dup+reorder"])
def test_every_byte_arrives_exactly_once(mode, model):
    size = 4 * MiB
    exactly_once(run_transfer(size, SimFabric(default=model, seed=3), mode=mode), size)


def test_clean_fabric_needs_no_retransmission_and_splits_planes_equally():
    r = run_transfer(8 * MiB, SimFabric(), planes=4)
    exactly_once(r, 8 * MiB)
    st = r.sender.stats
    assert st.retransmits == 0 and r.sender.evs.retirements == 0
    counts = [st.per_plane_packets[p] for p in range(4)]
    assert max(counts) - min(counts) <= 0.05 * (sum(counts) / 4)


@pytest.mark.parametrize("jitter_ns", [5_000, 20_000, 100_000])
def test_reordering_alone_retires_nothing(jitter_ns):
    """Item 5: sprayed bursts reorder deeply (64 packets leave at once, paths differ by
    up to the jitter); neither RACK, the per-EV check nor the receiver's NAK may call
    that loss. At most one spurious retirement, and it must be undone."""
    r = run_transfer(32 * MiB, SimFabric(default=PathModel(jitter_ns=jitter_ns), seed=4))
    exactly_once(r, 32 * MiB)
    evs = r.sender.evs
    assert evs.retirements <= 1 and evs.retirements == evs.undone
    assert evs.counts()["assumed_bad"] == 0


def test_a_lossy_path_gets_its_evs_retired_and_mrc_recovers_fast():
    lossy = {(1, 0): PathModel(loss=0.2)}
    mrc = run_transfer(8 * MiB, SimFabric(paths=dict(lossy), seed=5), mode="mrc")
    static = run_transfer(8 * MiB, SimFabric(paths=dict(lossy), seed=5), mode="spray-static")
    exactly_once(mrc, 8 * MiB)
    exactly_once(static, 8 * MiB)
    retired = list(mrc.sender.evs.retired.values())
    assert retired and all(ev_fields(e.value)[:2] == (1, 0) for e in retired)
    assert mrc.sender.stats.retransmits < static.sender.stats.retransmits


def kill_path(key):
    def event(fabric):
        fabric.paths[key] = PathModel(dead=True)
    return event


def set_delay(delay_ns):
    def event(fabric):
        fabric.default = PathModel(delay_ns=delay_ns)
    return event


def test_a_path_dying_mid_transfer_costs_mrc_little_and_is_in_the_event_log():
    size = 16 * MiB
    ev0 = EvSet([0, 1, 2, 3], 2, seed=7).hashed().value  # single-path's EV, same seed
    key = ev_fields(ev0)[:2]
    mrc = run_transfer(size, SimFabric(seed=2), mode="mrc", events=[(200_000, kill_path(key))])
    exactly_once(mrc, size)
    # The cost, against the same transfer on a healthy fabric (simulated time, so the
    # bound is about behaviour, not this machine): one of 8 paths died, so at most a
    # little over an eighth more time, and only the packets in flight on it sent again.
    clean = run_transfer(size, SimFabric(seed=2), mode="mrc")
    exactly_once(clean, size)
    assert clean.sender.stats.retransmits == 0
    assert mrc.elapsed_ns < 1.25 * clean.elapsed_ns, (mrc.elapsed_ns, clean.elapsed_ns)
    assert 0 < mrc.sender.stats.retransmits <= mrc.sender.cfg.max_window
    assert mrc.sender.stats.packets - clean.sender.stats.packets == mrc.sender.stats.retransmits
    kinds = [e.kind for e in mrc.sender.log]
    assert {"loss", "retire", "retransmit", "repaired"} <= set(kinds)
    first_loss = next(e for e in mrc.sender.log if e.kind == "loss")
    assert first_loss.t_ns >= 200_000 and ev_fields(first_loss.ev)[:2] == key
    retired = [e for e in mrc.sender.log if e.kind == "retire"]
    assert len(retired) == mrc.sender.evs.retirements
    assert all(ev_fields(e.ev)[:2] == key for e in retired)
    # Two losses show the path dead; the rest of what was in flight on it is resent
    # then, not found one RACK window at a time: repaired 160 µs after the death (in
    # simulated time), where RACK alone took 250.
    hows = [e.detail for e in mrc.sender.log if e.kind == "loss"]
    assert hows[:2] == ["rack", "rack"] and set(hows[2:]) == {"dead_path"}, hows
    assert mrc.sender.stats.lost_dead_path == len(hows) - 2
    repaired = max(e.t_ns for e in mrc.sender.log if e.kind == "repaired")
    assert repaired - 200_000 < 200_000
    single = run_transfer(size, SimFabric(seed=2), mode="single-path",
                          events=[(200_000, kill_path(key))], limit_ns=2_000_000_000)
    assert not single.ok and "retry limit" in single.failed


def test_replacements_leave_a_dead_path_so_it_retires_only_its_own_evs():
    """Item 4: retirements are events, EVs are EVs. With one path dead, each of its EVs
    retires once; replacements land on the plane's other T1, never back on the dead one."""
    r = run_transfer(16 * MiB, SimFabric(paths={(2, 1): PathModel(dead=True)}, seed=8))
    exactly_once(r, 16 * MiB)
    evs = r.sender.evs
    retired = [e.ev for e in r.sender.log if e.kind == "retire"]
    assert len(retired) == len(set(retired)) == evs.retirements  # one event per EV
    assert all(ev_fields(v)[:2] == (2, 1) for v in retired)
    assert not [e for e in evs.active if e.plane == 2 and e.t1 == 1 and
                e.state is EvState.GOOD]
    assert sum(evs.counts().values()) == evs.size == 128


def test_port_state_bitmap_stops_a_plane_and_it_resumes():
    evs = EvSet([0, 1, 2, 3], 2, size=16, seed=1)
    sender = Sender(evs, 0, SenderConfig(init_window=64))
    sender.post(64 * 4096)
    src = memoryview(bytes(64 * 4096))
    first = sender.poll(0, src, budget=8)
    sender.on_sack(SackReport(0, 0, first[0].ev, first[0].psn, 0, port_state=0b1101), 10)
    later = sender.poll(20, src, budget=8)
    assert later and all(ev_fields(p.ev)[0] != 1 for p in later)
    assert 1 not in sender.planes_in_use()
    ports = [e for e in sender.log if e.kind == "port"]
    assert ports and "plane 1 down (peer)" in ports[0].detail
    sender.on_sack(SackReport(0, 0, first[0].ev, first[0].psn, 0, port_state=0b1111), 30)
    assert {ev_fields(p.ev)[0] for p in sender.poll(40, src, budget=16)} >= {1}
    sender.set_local_ports(0b0111, 50)
    assert "plane 3 down (local)" in list(sender.log)[-1].detail


def test_ev_set_is_split_over_planes_and_replaces_from_the_same_plane():
    evs = EvSet([0, 1, 2, 3], 4, size=128, seed=9)
    assert len(evs.active) == 128
    assert {p: sum(e.plane == p for e in evs.active) for p in range(4)} == {
        0: 32, 1: 32, 2: 32, 3: 32}
    victim = evs.active[5]
    retired, fresh = evs.lost(victim)
    assert retired and fresh.plane == victim.plane and fresh.t1 != victim.t1
    assert victim.state is EvState.ASSUMED_BAD and evs.active[5] is fresh
    assert not evs.probe_result(victim.value, True)
    evs.probe_result(victim.value, True)
    assert evs.probe_result(victim.value, True)  # third good probe resurrects it
    assert victim.state is EvState.GOOD and victim.value not in evs.retired
    assert evs.retirements == 1 and evs.revivals == 1


def test_skip_lasts_one_rotation():
    evs = EvSet([0], 1, size=4, backup=4, seed=2)
    a = evs.active[0]
    evs.congested(a)
    assert a.value not in [evs.next().value for _ in range(3)]
    assert a.value in {evs.next().value for _ in range(8)}


def test_deny_replaces_the_ev_and_counts_no_loss():
    """Item 9: a denied EV leaves its slot at once; the plane is not blamed."""
    evs = EvSet([0, 1], 2, size=8, backup=8, seed=2)
    victim = evs.active[3]
    evs.deny(victim.value)
    assert victim.value not in {e.value for e in evs.active}
    assert evs.active[3].state is EvState.GOOD and evs.active[3].plane == victim.plane
    assert evs.retirements == 0 and not evs.ring.failed[victim.plane]
    assert victim.value not in {evs.next().value for _ in range(50)}
    assert evs.counts()["good"] == 8


def test_the_denylist_holds_for_fresh_draws_and_the_initial_set():
    """Item 16: fresh draws never return a denied EV, and a seeded set is reproducible."""
    plain = [e.value for e in EvSet([0, 1], 2, size=16, seed=42).active]
    assert plain == [e.value for e in EvSet([0, 1], 2, size=16, seed=42).active]
    assert plain != [e.value for e in EvSet([0, 1], 2, size=16, seed=43).active]
    denied = EvSet([0, 1], 2, size=16, seed=42, denylist=set(plain))
    assert not {e.value for e in denied.active} & set(plain)
    for _ in range(200):  # churn on one T1 of each plane (losing every path would
        ev = denied.next()  # abandon the planes): replacements are fresh draws or spares
        assert ev.value not in set(plain)
        if ev.t1 == 0:
            denied.lost(ev)
    assert not {e.value for e in denied.active} & set(plain)


def test_seeded_transfers_are_reproducible():
    model = PathModel(loss=0.02, jitter_ns=30_000)
    a, b = (run_transfer(4 * MiB, SimFabric(default=model, seed=6), seed=11) for _ in range(2))
    assert a.sender.stats == b.sender.stats
    assert [e.to_dict() for e in a.sender.log] == [e.to_dict() for e in b.sender.log]


def test_repeated_losses_on_one_ev_retire_it_once_and_do_not_condemn_its_plane():
    """Item 10: many packets in flight on one dead EV are one failed EV, not many."""
    evs = EvSet([0], 2, size=8, seed=3)
    dead = evs.active[0]
    results = [evs.lost(dead) for _ in range(10)]
    assert results[0][0] and not any(r[0] for r in results[1:])
    assert evs.retirements == 1 and dead.lost == 10
    assert evs.counts()["good"] == 8  # replaced; the plane still works
    assert evs.planes_in_use() == [0]


def test_a_plane_whose_every_path_failed_is_abandoned_until_probes_revive_one():
    evs = EvSet([0, 1], 2, size=8, backup=8, seed=5)
    on0 = [e for e in evs.active if e.plane == 0]
    t1s = {}
    for e in on0:
        t1s.setdefault(e.t1, e)
    for e in t1s.values():  # one loss on each of plane 0's paths, none delivered since
        evs.lost(e)
    if len(t1s) < 2:  # the seed put every slot of plane 0 on one T1: fail the other too
        other = evs._replacement(on0[0])
        evs.lost(other)
    retired, repl = evs.lost(next(e for e in evs.active if e.plane == 0 and
                                  e.state is EvState.GOOD))
    assert retired and repl is None  # not replaced: the plane is broken here
    assert all(e.plane == 1 for e in (evs.next() for _ in range(20))) or \
        any(e.plane == 0 and e.state is EvState.GOOD for e in evs.active)


def test_a_plane_cut_off_entirely_is_abandoned_not_refilled_forever():
    dead = {(0, 0): PathModel(dead=True), (0, 1): PathModel(dead=True)}
    r = run_transfer(16 * MiB, SimFabric(paths=dead), mode="mrc")
    exactly_once(r, 16 * MiB)
    sent_on_dead = r.sender.stats.per_plane_packets[0]
    assert sent_on_dead < 0.1 * r.sender.stats.per_plane_packets[1]
    assert r.sender.evs.retirements <= r.sender.evs.size // 4 + 4


def test_probes_go_round_robin_so_none_starves():
    """Item 13: EVs that stay bad do not block later retirees from being probed."""
    evs = EvSet([0, 1], 2, size=32, backup=32, seed=7)
    for ev in list(evs.active)[:20]:
        evs.lost(ev)
    assert len(evs.retired) == 20
    probed = [e.value for _ in range(3) for e in evs.probe_candidates(8)]
    assert set(probed) == set(evs.retired)


def test_everything_the_ev_set_keeps_is_bounded():
    """Item 11: 1000 losses do not make 1000 retired entries."""
    evs = EvSet([0, 1], 2, size=8, backup=8, seed=1)
    for _ in range(1000):
        ev = evs.next()
        evs.lost(ev)
        evs.delivered(evs.active[(ev.slot + 1) % evs.size])  # the plane keeps working
    assert len(evs.retired) <= evs.retired_max == 16
    assert len(evs._seen) <= 4 * evs.retired_max
    assert sum(len(p) for p in evs.spare.values()) <= 8
    assert all(evs.active[i].slot == i for i in range(evs.size))  # slots stay consistent
    assert sum(evs.counts().values()) == evs.size


def test_a_stalled_receiver_costs_resends_but_retires_no_ev():
    """Item 5: on a busy machine the receiver can stall past the RTO; every outstanding
    packet then times out at once. That is no evidence against any path."""
    r = run_transfer(8 * MiB, SimFabric(seed=3), config=SenderConfig(rto_min_ns=1_000_000),
                     events=[(300_000, set_delay(2_500_000)), (400_000, set_delay(20_000))])
    exactly_once(r, 8 * MiB)
    assert r.sender.stats.lost_timeout > 0 and r.sender.evs.retirements == 0


def test_an_ack_names_the_copy_it_acknowledges():
    """Item 12: (PSN, transmission number) identifies a copy; no timestamp can collide.
    A late ack of the first copy after a resend undoes the loss, and takes no RTT
    sample from the wrong copy."""
    sender = Sender(EvSet([0, 1], 2, size=8, seed=4), 0,
                    SenderConfig(init_window=4, rto_min_ns=1_000_000))
    sender.post(4 * 4096)
    src = memoryview(bytes(4 * 4096))
    first = sender.poll(0, src)
    assert [p.tries for p in first] == [0, 0, 0, 0]
    sender.on_timer(2_000_000)  # all four time out
    resent = sender.poll(2_000_001, src)
    assert [p.tries for p in resent] == [1, 1, 1, 1]
    # A timeout names no path (a stalled receiver looks the same): no EV is blamed.
    assert sender.evs.retirements == 0
    lost_on = {p.psn: p.ev for p in first}
    assert all(p.ev != lost_on[p.psn] for p in resent)  # each resent on another EV
    # The first copy of PSN 0 arrives after all: its ack echoes try 0.
    sender.on_sack(SackReport(1, 0, first[0].ev, 0, 0), 2_500_000)
    assert sender.stats.spurious == 1 and sender.evs.undone == 0
    assert sender.srtt == 0  # no sample: the copy it would time was not the one acked
    # The resent copy of PSN 1 is acked: an RTT sample from its own send time.
    sender.on_sack(SackReport(2, 0, resent[1].ev, 1, 1), 2_000_501)
    assert sender.srtt == 500
    events = [e.kind for e in sender.log]
    assert events.count("spurious") == 1 and events.count("repaired") == 2


def test_the_sack_window_is_o1_and_matches_a_naive_model():
    """Item 14: the receiver's window is an integer bitmap; check it against sets."""
    import random
    rng = random.Random(5)
    rx = Receiver(lambda va, data: None, ack_every=1)
    got: set[int] = set()
    order = list(range(2000))
    for i in range(0, 2000, 50):  # shuffle within windows of 50
        chunk = order[i:i + 50]
        rng.shuffle(chunk)
        order[i:i + 50] = chunk
    for psn in order + order[:100]:  # and some duplicates
        sack = rx.on_data(RxPacket(psn, 0, b"", None, 1, 0))
        dup = psn in got
        got.add(psn)
        cum = 0
        while cum in got:
            cum += 1
        bitmap = sum(1 << i for i in range(64) if cum + 1 + i in got)
        assert (sack.cum, sack.bitmap, sack.dup, sack.psn) == (cum, bitmap, dup, psn)


def test_receiver_completes_write_imm_in_order_even_when_packets_reorder():
    buf = bytearray(3 * 8)
    rx = Receiver(lambda va, data: buf.__setitem__(slice(va, va + len(data)), data))
    pk = [RxPacket(0, 0, b"A" * 8, 11, 1, 0),
          RxPacket(1, 8, b"B" * 8, None, 2, 0),
          RxPacket(2, 16, b"C" * 8, 22, 3, 0)]
    rx.on_data(pk[2])
    rx.on_data(pk[1])
    assert list(rx.completions) == []  # message 0 not yet here, message 1 must wait
    sack = rx.on_data(pk[0])
    assert list(rx.completions) == [(0, 11), (1, 22)]
    assert bytes(buf) == b"A" * 8 + b"B" * 8 + b"C" * 8
    assert sack.cum == 3 and sack.congestion == 0
    dup = rx.on_data(pk[1])
    assert dup.cum == 3 and dup.dup and rx.stats.duplicates == 1


def test_without_marks_the_congestion_byte_is_0_and_rtt_still_skips():
    """Item 15: RTT stays a congestion signal beside ECN and trims (docs/congestion.md):
    an EV whose own RTT runs far above the base is SKIPped, counted as an rtt skip."""
    evs = EvSet([0], 1, size=4, seed=1)
    sender = Sender(evs, 0, SenderConfig(init_window=8, target_ns=100_000))
    sender.post(8 * 4096)
    src = memoryview(bytes(8 * 4096))
    pkts = sender.poll(0, src)
    sender.on_sack(SackReport(1, 0, pkts[0].ev, 0, 0), 20_000)  # base RTT 20 µs
    slow = pkts[1]
    sender.on_sack(SackReport(2, 0, slow.ev, 1, 0), 2_000_000)  # 2 ms on this EV
    assert next(e for e in evs.active if e.value == slow.ev).state is EvState.SKIP
    assert evs.skips_by == {"ecn": 0, "trim": 0, "rtt": 1}


def test_single_path_reports_its_one_plane():
    """Item 7: planes_in_use is the single path's plane, not every plane of the set."""
    sender = Sender(EvSet([0, 1, 2, 3], 2, size=16, seed=3), 0,
                    SenderConfig(mode="single-path"))
    sender.post(4096 * 8)
    planes = {ev_fields(p.ev)[0] for p in sender.poll(0, memoryview(bytes(4096 * 8)))}
    assert sender.planes_in_use() == sorted(planes) == [sender.single_ev.plane]


def test_a_hole_beyond_the_bitmap_is_naked_and_resent_once_newer_packets_arrived():
    rx = Receiver(lambda va, data: None)
    for psn in range(1, 66):
        rx.on_data(RxPacket(psn, psn * 8, b"x" * 8, None, 1, 0))
    assert rx.nacks == [0] and rx.stats.nacks == 1  # once per hole, not per packet

    sender = Sender(EvSet([0, 1], 1, size=8, seed=3), 0, SenderConfig(init_window=8))
    sender.post(8 * 4096)
    src = memoryview(bytes(8 * 4096))
    first = sender.poll(0, src)
    sender.on_nack(0, 10)  # nothing sent after it is known to have arrived: in flight
    assert sender.stats.lost_nack == 0
    more = sender.poll(1_000_000, src)  # nothing: the window is full
    assert more == []
    # PSN 7, sent with it, arrives; a NAK for 0 is then still within the reorder window
    sender.on_sack(SackReport(0, 1 << 6, first[7].ev, 7, 0), 1_000_000)
    sender.on_nack(0, 1_000_001)
    assert sender.stats.lost_nack == 0


def test_a_posted_write_builds_its_packet_records_as_the_window_reaches_them():
    """Posting 1 GiB builds nothing (it was a second of the event loop, before the first
    packet); the records are built BUILD_CHUNK at a time, and a transfer of several
    chunks and two writes, with loss and resends across chunk edges, is still exact."""
    s = Sender(EvSet([0, 1, 2, 3], 2, seed=1), 0, SenderConfig(mtu=4096))
    s.post(1 << 30)
    assert len(s._txs) == 0 and not s.idle and s.wants_to_send()
    sent = s.poll(0, memoryview(bytearray(1 << 20)))  # the first packets' bytes
    assert sent and len(s._txs) == BUILD_CHUNK and sent[0].psn == 0

    mtu, packets = 256, 5 * BUILD_CHUNK + 7
    seen = []
    lossy = {(0, 0): PathModel(loss=0.05), (1, 1): PathModel(loss=0.05)}
    r = run_transfer(packets * mtu, SimFabric(paths=lossy, seed=5), repeat=2,
                     config=SenderConfig(mtu=mtu), limit_ns=10**12,
                     checkpoint=(BUILD_CHUNK // 2, lambda tx, rx: seen.append(len(tx._txs))))
    assert r.ok and r.exact and r.sender.stats.retransmits > 0
    assert r.sender.messages_completed == 2 and r.sender.idle
    assert max(seen) <= BUILD_CHUNK + int(r.sender.cfg.max_window), seen


def test_event_log_keeps_its_head_and_tail():
    log = EventLog(head=3, tail=2)
    for i in range(10):
        log.append(Event(i, "loss"))
    assert [e.t_ns for e in log] == [0, 1, 2, 8, 9]
    assert log.total == 10 and log.dropped == 5 and len(log) == 5


def test_sender_structures_are_bounded_under_persistent_loss():
    """Item 11: per-EV queues, completed messages and the lost-PSN memory stay small."""
    r = run_transfer(1 * MiB, SimFabric(paths={(0, 0): PathModel(loss=0.3),
                                            (0, 1): PathModel(loss=0.3)}, seed=3),
                     repeat=64)
    assert r.ok and r.exact
    s = r.sender
    assert s.messages_completed == 64 and len(s.completed) <= 64
    assert len(s._per_path) <= s.evs.size and len(s._lost) <= 1024
    assert len(s._txs) == 0 and len(s._order) <= 2 * int(s.cfg.max_window)
    assert len(r.receiver.completions) <= 64 and r.receiver.stats.completions == 64


LONG_RUN = textwrap.dedent("""
    import json, sys
    from twin.mrc.sim import SimFabric, PathModel, run_transfer
    from twin.mrc.transport import SenderConfig

    def rss_kib():
        with open("/proc/self/status") as f:
            return next(int(line.split()[1]) for line in f if line.startswith("VmRSS"))

    marks = []
    def check(sender, receiver):
        marks.append([sender.stats.packets, rss_kib(), len(sender._txs),
                      len(sender._per_path), len(sender.evs.retired), len(sender.log)])

    packets = int(sys.argv[1])
    mtu = 256
    size = 256 * mtu  # 256 packets a write, the same bytes written over and over
    lossy = {(0, 0): PathModel(loss=0.02), (0, 1): PathModel(loss=0.02)}
    r = run_transfer(size, SimFabric(paths=lossy, seed=9), repeat=packets // 256,
                     limit_ns=10**13, config=SenderConfig(mtu=mtu),
                     checkpoint=(packets // 10, check))
    print(json.dumps({"ok": r.ok, "exact": r.exact, "packets": r.sender.stats.packets,
                      "retirements": r.sender.evs.retirements, "marks": marks}))
""")


def test_a_million_packets_with_persistent_loss_on_one_plane_in_flat_memory():
    """Items 11 and 16 together: 10^6 packets, 2% loss on every path of plane 0 for the
    whole run. The process's RSS after the first 20% stays within a few MiB, and every
    structure the engine keeps is as small at the end as it was early on. A fresh
    interpreter, so other tests' allocations do not hide growth."""
    out = subprocess.run([sys.executable, "-c", LONG_RUN, str(10**6)], capture_output=True,
                         text=True, timeout=600, check=True)
    res = json.loads(out.stdout)
    assert res["ok"] and res["exact"] and res["packets"] >= 10**6
    assert res["retirements"] > 500  # the loss really was persistent
    marks = res["marks"][2:]  # from 20% on
    rss = [m[1] for m in marks]
    assert max(rss) - min(rss) < 8 * 1024, marks  # KiB: flat, not per-packet growth
    for col in range(2, 6):  # txs, per-EV queues, retired pool, event log: bounded
        assert max(m[col] for m in marks) <= max(4096 + 2048, 2 * marks[0][col] + 256), marks


def _stall(fabric, dead: bool) -> None:
    fabric.default.dead = dead


@pytest.mark.parametrize("mode", ["mrc", "spray-static"])
def test_a_half_second_of_silence_backs_the_timer_off_and_the_qp_survives(mode):
    """A stalled machine (or receiver) answers nothing for 500 ms: eight 10 ms timeouts
    in a row would end the QP; doubling each PSN's timer spans the stall instead."""
    events = [(100_000, lambda f: _stall(f, True)), (500_100_000, lambda f: _stall(f, False))]
    r = run_transfer(4 * MiB, SimFabric(seed=8), mode=mode, events=events)
    exactly_once(r, 4 * MiB)
    assert r.sender.stats.lost_timeout > 0


def test_silence_past_the_backed_off_retries_fails_the_qp_saying_so():
    events = [(100_000, lambda f: _stall(f, True))]
    r = run_transfer(1 * MiB, SimFabric(seed=8), mode="mrc", events=events,
                     limit_ns=60_000_000_000)
    assert not r.ok and "timed out 8 times in a row" in r.failed


def test_single_path_still_gives_up_after_its_retry_limit_of_losses():
    events = [(100_000, lambda f: _stall(f, True)), (500_100_000, lambda f: _stall(f, False))]
    r = run_transfer(4 * MiB, SimFabric(seed=8), mode="single-path", events=events)
    assert not r.ok and "retry limit" in r.failed


# -- paths: an EV is its path; a dead path retires all its EVs at once ---------------


def fabric4():
    from pathlib import Path

    from twin.fabric.model import build_fabric
    from twin.fabric.spec import parse_spec

    spec = Path(__file__).parents[2] / "lab" / "fabrics" / "mrc-4p.yml"
    return build_fabric(parse_spec(spec.read_text(), str(spec)))


def on_path(evs, plane, t1):
    return [e for e in evs.active if e.plane == plane and e.t1 == t1]


def test_a_replacement_avoids_both_t0_t1_links_the_retired_ev_crossed():
    """Issue 10: the replacement of a retired EV crosses neither the source-side nor the
    destination-side T0-T1 link of the retired one (while the plane has another T1)."""
    from twin.fabric.paths import path_for_ev

    fab = fabric4()
    src, dst = fab.node("r0h0"), fab.node("r1h0")
    fabric_links = {link.id for link in fab.links if link.a.node.startswith("t")}
    evs = EvSet(list(fab.nic_planes), fab.spec.t1_per_plane, seed=12)
    for slot in range(0, 128, 9):
        victim = evs.active[slot]
        if victim.state is not EvState.GOOD:
            continue
        retired, repl = evs.lost(victim)
        assert retired and repl is not None
        gone = set(path_for_ev(fab, src, dst, victim.value).links) & fabric_links
        new = set(path_for_ev(fab, src, dst, repl.value).links) & fabric_links
        assert len(gone) == 2 and len(new) == 2  # a T0-T1 link on each side
        assert not gone & new, (hex(victim.value), hex(repl.value))
        evs._restore(victim, "test: the next victim starts from a clean set")


def test_a_replacement_never_lands_on_a_dead_path_even_when_every_t1_has_retired_evs():
    """The old rule avoided every T1 with a retired EV, and when every T1 had one (a
    spurious retirement on the healthy T1, say) drew anywhere: half the time back onto
    the dead path. Now: the live T1 with the fewest retired EVs."""
    evs = EvSet([0], 2, size=32, backup=8, seed=6)
    healthy = on_path(evs, 0, 1)[0]
    evs.lost(healthy)  # one retirement on T1 1 (spurious, say)
    dead = on_path(evs, 0, 0)
    evs.lost(dead[0])
    evs.path_lost(dead[0], 10)
    evs.lost(dead[1])
    assert evs.path_lost(dead[1], 20)  # T1 0 is dead now
    evs.delivered(on_path(evs, 0, 1)[0], 30)  # the plane works on T1 1
    for _ in range(40):  # replacements from the spares, then fresh draws
        victim = next(e for e in evs.active if e.state is EvState.GOOD)
        _, repl = evs.lost(victim)
        assert repl is not None and repl.t1 == 1, hex(repl.value)
        evs.delivered(repl, 10**6)  # the plane keeps working


def test_two_losses_on_a_path_that_delivered_nothing_since_retire_every_ev_on_it():
    evs = EvSet([0, 1], 2, size=32, backup=16, seed=8)
    dead = on_path(evs, 1, 0)
    assert len(dead) >= 4
    evs.lost(dead[0])
    assert evs.path_lost(dead[0], 100) == []  # one loss: random loss looks the same
    evs.lost(dead[1])
    victims = evs.path_lost(dead[1], 200)
    assert {v.value for v, _ in victims} == {e.value for e in dead[2:]}
    assert all(e.state is EvState.ASSUMED_BAD for e in dead)
    assert all(r is not None and r.plane == 1 and r.t1 == 1 for _, r in victims)
    assert not on_path(evs, 1, 0) and evs.dead_paths == 1
    assert evs.retirements == len(dead) and len(evs.active) == 32


def test_a_delivery_between_the_losses_retires_no_sibling():
    evs = EvSet([0, 1], 2, size=32, backup=16, seed=8)
    path = on_path(evs, 1, 0)
    evs.lost(path[0])
    evs.path_lost(path[0], 100)
    evs.delivered(path[2], 150)  # a packet sent after the first loss got through
    evs.lost(path[1])
    assert evs.path_lost(path[1], 200) == []
    # ... and one sent before it proves nothing about later: then the path is dead
    evs2 = EvSet([0, 1], 2, size=32, backup=16, seed=8)
    path2 = on_path(evs2, 1, 0)
    evs2.lost(path2[0])
    evs2.path_lost(path2[0], 100)
    evs2.delivered(path2[2], 50)
    evs2.lost(path2[1])
    assert evs2.path_lost(path2[1], 200)


def test_a_path_that_delivers_after_its_death_began_gets_its_evs_back_in_their_slots():
    evs = EvSet([0, 1], 2, size=32, backup=16, seed=8)
    path = on_path(evs, 1, 0)
    slots = {e.value: e.slot for e in path[2:]}
    evs.lost(path[0])
    evs.path_lost(path[0], 100)
    evs.lost(path[1])
    victims = evs.path_lost(path[1], 200)
    repls = [r for _, r in victims]
    evs.delivered(path[3], 80)  # sent before the first loss: no proof
    assert all(e.state is EvState.ASSUMED_BAD for e in path[2:])
    evs.delivered(path[3], 150)  # sent after it: the path lives
    assert all(e.state is EvState.GOOD and e.slot == slots[e.value] for e in path[2:])
    assert all(r.slot == -1 for r in repls)  # the replacements went back to the spares
    assert evs.undone == len(victims) and evs.paths_back == 1
    assert sum(len(p) for p in evs.spare.values()) <= 16
    assert all(evs.active[i].slot == i for i in range(evs.size))


def test_probes_reviving_an_ev_of_a_dead_path_bring_the_whole_path_back():
    evs = EvSet([0, 1], 2, size=32, backup=16, seed=8, resurrect_after=2)
    path = on_path(evs, 1, 0)
    evs.lost(path[0])
    evs.path_lost(path[0], 100)
    evs.lost(path[1])
    evs.path_lost(path[1], 200)
    evs.probe_result(path[0].value, True)
    assert evs.probe_result(path[0].value, True)
    assert all(e.state is EvState.GOOD for e in path[2:]) and evs.paths_back == 1
    assert not evs.paths[(1, 0)].proven  # held to a few packets until it delivers


@pytest.mark.parametrize("t1", [0, 1])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_path_dead_from_the_start_costs_a_qp_two_packets(t1, seed):
    """startup-dead-link: a job starts with a dead T0-T1 link. Before, each of the ~16
    EVs on it lost a packet before it retired; now a path not yet heard from carries
    two packets at a time, and their loss retires all of its EVs."""
    slow = PathModel(delay_ns=150_000, jitter_ns=50_000)  # the netns lab's RTT
    r = run_transfer(16 * MiB, SimFabric(default=slow, paths={(0, t1): PathModel(dead=True)},
                                         seed=seed), seed=seed)
    exactly_once(r, 16 * MiB)
    losses = [e for e in r.sender.log if e.kind == "loss"]
    assert len(losses) <= 2 and all(ev_fields(e.ev)[:2] == (0, t1) for e in losses)
    assert r.sender.evs.dead_paths == 1 and not on_path(r.sender.evs, 0, t1)


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_random_loss_shows_no_path_dead(seed):
    """1% loss on every path: a second loss on one path with nothing delivered since the
    first is as rare as the loss itself; nothing is retired as a path."""
    r = run_transfer(16 * MiB, SimFabric(default=PathModel(loss=0.01), seed=seed), seed=seed)
    exactly_once(r, 16 * MiB)
    st = r.sender.stats
    assert st.lost_per_ev + st.lost_rack + st.lost_nack > 20  # losses enough
    assert r.sender.evs.dead_paths == 0
    assert r.sender.evs.retirements <= r.sender.stats.lost_rack + r.sender.stats.lost_nack \
        + r.sender.stats.lost_per_ev


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_one_path_dropping_20_percent_never_shows_another_path_dead(seed):
    r = run_transfer(16 * MiB, SimFabric(paths={(1, 0): PathModel(loss=0.2)}, seed=seed),
                     seed=seed)
    exactly_once(r, 16 * MiB)
    dead = {k for k, p in r.sender.evs.paths.items() if p.dead_since is not None}
    assert dead <= {(1, 0)}
    assert all(ev_fields(e.ev)[:2] == (1, 0) for e in r.sender.log if e.kind == "retire")


def test_an_unproven_path_carries_few_packets_and_a_healthy_start_still_uses_every_path():
    evs = EvSet([0, 1, 2, 3], 2, size=128, seed=3)
    sender = Sender(evs, 0, SenderConfig(init_window=16))
    sender.post(64 * 4096)
    first = sender.poll(0, memoryview(bytes(64 * 4096)))
    assert len(first) == 16  # the whole first window goes
    per_path = collections.Counter(ev_fields(p.ev)[:2] for p in first)
    assert len(per_path) == 8 and max(per_path.values()) == 2
    assert not sender.poll(1, memoryview(bytes(64 * 4096)))  # window full anyway
    one = first[0]
    sender.on_sack(SackReport(0, 0, one.ev, one.psn, 0), 100_000)  # its path delivers
    assert evs.paths[ev_fields(one.ev)[:2]].proven


def test_a_sender_with_no_usable_ev_waits_for_an_ack_instead_of_spinning():
    evs = EvSet([0, 1], 2, size=8, seed=3)
    sender = Sender(evs, 0, SenderConfig(init_window=64))
    evs.set_unproven_cap(2)
    sender.post(64 * 4096)
    src = memoryview(bytes(64 * 4096))
    first = sender.poll(0, src)
    assert len(first) == 8  # 4 paths x 2 unproven packets each: then nothing takes one
    assert not sender.wants_to_send()  # the endpoint sleeps until an ack or its timer
    sender.on_sack(SackReport(1, 0, first[0].ev, first[0].psn, 0), 100_000)
    assert sender.wants_to_send() and sender.poll(100_001, src)


def test_the_delay_target_allows_two_frames_queued_on_the_slowest_link():
    assert queueing_target_ns(4220, None) == 400_000  # unshaped: the floor
    assert queueing_target_ns(4220, 10**10) == 400_000  # fast links: the floor
    assert queueing_target_ns(4220, 25_000_000) == 2 * 4220 * 8 * 40  # 2.7 ms at 25 Mbit/s


def test_a_target_below_a_packets_time_leaves_a_slow_link_half_empty():
    """On 25 Mbit/s paths one frame takes 1.35 ms: with the 400 µs floor as target,
    one packet queued behind another reads as congestion and the window starves the
    links; the rate's target fills them."""
    rate = 25_000_000

    def filled(target_ns: int) -> float:
        fabric = SimFabric(default=PathModel(rate_bps=rate, delay_ns=100_000, jitter_ns=20_000))
        r = run_transfer(4 * MiB, fabric, config=SenderConfig(target_ns=target_ns))
        exactly_once(r, 4 * MiB)
        return 4 * MiB * 8 / (r.elapsed_ns / 1e9) / (8 * rate)  # of 8 paths' capacity

    floor, from_rate = filled(400_000), filled(queueing_target_ns(4220, rate))
    assert floor < 0.65 and from_rate > 0.8, (floor, from_rate)


def test_single_path_qps_hash_onto_every_plane_and_t1():
    """A RoCE QP's hash picks its NIC port and its ECMP path once: over many QPs every
    one of the 8 paths is taken (the rotation's first EV was always plane 0's)."""
    singles = [Sender(EvSet([0, 1, 2, 3], 2, seed=f"r0h0/send/{qpn}/1"), 0,
                      SenderConfig(mode="single-path")).single_ev for qpn in range(64)]
    paths = collections.Counter((ev.plane, ev.t1) for ev in singles)
    assert set(paths) == {(p, t) for p in range(4) for t in range(2)}, paths
