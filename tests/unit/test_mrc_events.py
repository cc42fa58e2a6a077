"""A sending QP's event log and acked-bytes bins (twin.mrc.transport), and the
`twin stats --events` rendering of them: pure, simulated clock."""

from tests.helpers import send_qp_stats
from twin.cli.traffic import event_header, event_rows, event_view
from twin.fabric.paths import ev_encode
from twin.mrc.evset import EvSet, EvState
from twin.mrc.sim import PathModel, SimFabric, run_transfer
from twin.mrc.stats import SendQpStats
from twin.mrc.transport import (
    BIN_NS,
    EVENT_KINDS,
    AckedBins,
    Event,
    SackReport,
    Sender,
    SenderConfig,
)

MiB = 1 << 20


def kinds(sender, kind):
    return [e for e in sender.log if e.kind == kind]


def test_every_event_carries_ns_and_us_of_the_same_instant():
    d = Event(123_456_789, "loss", 5, 7, "rack").to_dict()
    assert d == {"t_us": 123_456, "t_ns": 123_456_789, "kind": "loss", "ev": 5, "psn": 7,
                 "detail": "rack"}


def test_the_first_loss_on_an_ev_is_logged_once():
    sender = Sender(EvSet([0], 2, size=2, seed=1), 0,
                    SenderConfig(init_window=8, rto_min_ns=1_000_000))
    sender.post(8 * 4096)
    sent = sender.poll(0, memoryview(bytes(8 * 4096)))
    assert len(sent) > len({p.ev for p in sent})  # several packets on an EV
    sender.on_timer(2_000_000)  # all of them time out
    first = kinds(sender, "first_loss")
    assert len(kinds(sender, "loss")) == len(sent)
    assert sorted(e.ev for e in first) == sorted({p.ev for p in sent})
    assert all(e.t_ns == 2_000_000 and e.detail == "timeout" for e in first)


def test_ev_state_changes_are_logged_with_their_reason():
    r = run_transfer(4 * MiB, SimFabric(paths={(1, 0): PathModel(dead=True)}, seed=2))
    states = [e.detail for e in kinds(r.sender, "ev_state")]
    assert any(d.startswith("good->assumed_bad: rack loss of PSN") for d in states)
    assert any(d.startswith("good->assumed_bad: path dead") for d in states)
    ins = [d for d in states if d.startswith(("spare->good: replaces", "new->good: replaces"))]
    assert len(ins) == r.sender.evs.retirements  # every retired slot got its replacement
    # a state change is stamped with the time of the call that caused it
    retire = kinds(r.sender, "retire")[0]
    assert any(e.t_ns == retire.t_ns and e.ev == retire.ev for e in kinds(r.sender, "ev_state"))


def test_deny_and_a_spurious_undo_are_state_changes_too():
    evs = EvSet([0, 1], 2, size=8, seed=3)
    sender = Sender(evs, 0)
    victim = evs.active[2]
    sender.deny([victim.value], now=77)
    deny = [e for e in kinds(sender, "ev_state") if e.ev == victim.value]
    assert deny[0].detail == "good->denied: on the denylist" and deny[0].t_ns == 77
    other = evs.active[3]
    evs.lost(other)
    assert evs.unretire(other.value)
    undo = [e.detail for e in kinds(sender, "ev_state") if e.ev == other.value]
    assert undo[-1] == "assumed_bad->spare: the copy declared lost arrived late"


def test_skip_is_counted_not_logged():
    evs = EvSet([0], 2, size=4, seed=1)
    sender = Sender(evs, 0)
    evs.congested(evs.active[0])
    assert evs.active[0].state is EvState.SKIP and evs.skips == 1
    assert not kinds(sender, "ev_state")


def test_probe_answers_are_logged_every_ok_and_a_lost_only_when_it_changes():
    evs = EvSet([0, 1], 2, size=8, seed=4, resurrect_after=3)
    sender = Sender(evs, 0)
    ev = evs.active[0]
    evs.lost(ev)
    for t, ok in enumerate([False, False, False, True, False, True, True, True]):
        sender.probe_result(ev.value, ok, t)
    probes = [(e.t_ns, e.detail) for e in kinds(sender, "probe")]
    assert probes == [(0, "lost"), (3, "ok"), (4, "lost"), (5, "ok"), (6, "ok"), (7, "ok")]
    assert [e.t_ns for e in kinds(sender, "revive")] == [7]
    assert "probe" in EVENT_KINDS and "first_loss" in EVENT_KINDS and "ev_state" in EVENT_KINDS


def test_every_port_change_is_logged_saying_whose_even_when_the_plane_stays_out():
    sender = Sender(EvSet([0, 1, 2, 3], 2, size=16, seed=1), 0)
    sender.post(4096)
    first = sender.poll(0, memoryview(bytes(4096)))
    sender.set_local_ports(0b1101, 5)  # our plane 1 port goes down
    sack = SackReport(1, 0, first[0].ev, 0, 0, port_state=0b1101)  # the peer's too
    sender.on_sack(sack, 10)
    sender.set_local_ports(0b1111, 20)  # ours comes back; the peer's is still down
    ports = [(e.t_ns, e.detail) for e in kinds(sender, "port")]
    assert ports == [(5, "plane 1 down (local)"), (10, "plane 1 down (peer)"),
                     (20, "plane 1 up (local)")]
    assert 1 not in sender.planes_in_use()


def test_acked_bytes_are_binned_per_ms_and_plane_from_the_first_write():
    size = 8 * MiB
    r = run_transfer(size, SimFabric(seed=5))
    bins = r.sender.acked_bins.to_dict()
    assert bins["bin_ns"] == BIN_NS == 1_000_000 and bins["t0_ns"] == 0
    assert bins["first_write_ns"] == 0 and bins["dropped_bins"] == 0
    planes = bins["planes"]
    assert sorted(planes) == ["0", "1", "2", "3"]
    assert len({len(v) for v in planes.values()}) == 1  # one time axis for every plane
    assert sum(map(sum, planes.values())) == size  # every byte once, retransmitted or not
    assert len(planes["0"]) == r.elapsed_ns // BIN_NS + 1
    for p, per_bin in planes.items():  # and on the plane that carried it
        assert sum(per_bin) == r.sender.stats.per_plane_packets[int(p)] * 4096


def test_acked_bins_count_gaps_as_zeros_and_start_at_the_first_write():
    bins = AckedBins([0, 1], bin_ns=10)
    bins.start(1000)
    bins.at(1005)[0] += 7
    bins.at(1039)[1] += 3  # three bins later
    bins.at(1041)[1] += 1
    d = bins.to_dict()
    assert d["t0_ns"] == 1000 and d["planes"] == {"0": [7, 0, 0, 0, 0], "1": [0, 0, 0, 3, 1]}


def test_acked_bins_are_bounded_and_say_what_fell_out():
    bins = AckedBins([0, 3], bin_ns=1, max_bins=64)
    bins.start(0)
    for t in range(1000):
        bins.at(t)[3] += 2
        bins.at(t)[0] += 1
    d = bins.to_dict()
    kept = len(d["planes"]["0"])
    assert 64 <= kept <= 64 + 64 // 8 + 1
    assert d["dropped_bins"] + kept == 1000 and d["t0_ns"] == d["dropped_bins"]
    assert d["dropped_bytes"] == {"0": d["dropped_bins"], "3": 2 * d["dropped_bins"]}
    assert sum(d["planes"]["3"]) + d["dropped_bytes"]["3"] == 2000
    bins.at(10**9)[0] += 5  # a long idle gap: everything before it falls out at once
    d = bins.to_dict()
    assert len(d["planes"]["0"]) == 1 and d["planes"]["0"] == [5]
    assert d["t0_ns"] == 10**9 and d["dropped_bins"] == 10**9
    assert d["dropped_bytes"]["0"] == 1000


# -- twin stats --events ------------------------------------------------------------


def reply():
    ev = ev_encode(2, 1, 0x123)
    return {"events": [
        {"t_us": 1_000_500, "t_ns": 1_000_500_000, "kind": "loss", "ev": ev, "psn": 9,
         "detail": "rack"},
        {"t_us": 1_000_600, "t_ns": 1_000_600_000, "kind": "port", "ev": 0, "psn": -1,
         "detail": "plane 1 down (peer)"}],
        "dropped": 12, "total": 4108, "kinds": EVENT_KINDS, "id": 4,
        "acked_bins": {"t0_ns": 1_000_000_000, "first_write_ns": 1_000_000_000,
                       "bin_ns": 1_000_000, "planes": {}, "dropped_bins": 0,
                       "dropped_bytes": {}},
        "qpn": 3, "peer": "r1h0", "mode": "mrc"}


def test_the_events_view_filters_by_kind_and_keeps_the_bound_figures():
    view = event_view(reply(), {"port"})
    assert [e["kind"] for e in view["events"]] == ["port"] and view["shown"] == 1
    assert view["dropped"] == 12 and view["total"] == 4108 and "acked_bins" in view
    assert "kinds" not in view and "id" not in view  # the control reply's, not the log's
    assert event_view(reply(), set())["shown"] == 2


def test_the_events_table_says_what_the_bound_dropped_and_names_each_evs_path():
    view = event_view(reply(), set())
    assert event_header("r0h0", view) == (
        "r0h0 QP 3 -> r1h0 (mrc): 4,108 events logged, 12 dropped by the log's bound "
        "(its first and latest events are kept); 2 shown")
    rows = event_rows(view)
    assert rows[0] == ("0.500", "loss", "0x00123012 p2 t1-1", "9", "rack")
    assert rows[1] == ("0.600", "port", "-", "-", "plane 1 down (peer)")
    view["dropped"] = 0
    assert "none dropped" in event_header("r0h0", view)


# -- stats schema --------------------------------------------------------------------


def test_the_new_ev_counters_round_trip_and_read_as_0_from_an_older_endpoint():
    qp = send_qp_stats(ev_skips_total=5, dead_paths_total=1)
    d = qp.to_dict()
    assert (d["ev_skips_total"], d["dead_paths_total"]) == (5, 1)
    assert SendQpStats.from_dict(d) == qp
    del d["ev_skips_total"], d["dead_paths_total"]
    old = SendQpStats.from_dict(d)
    assert (old.ev_skips_total, old.dead_paths_total) == (0, 0)


def test_a_sender_is_freed_by_refcount_alone_not_left_for_the_cyclic_gc():
    """Its packets are views of the QP's buffer: a sender kept by a cycle keeps it too."""
    import gc
    import weakref

    from twin.mrc.evset import EvSet
    from twin.mrc.transport import Sender

    gc.disable()
    try:
        sender = Sender(EvSet([0, 1], 2, size=8, seed=1), remote_va=0)
        ref = weakref.ref(sender)
        del sender
        assert ref() is None
    finally:
        gc.enable()
