"""Loss detection that does not wait for queueing (issue 35): RACK's window from the
reordering seen, not the queueing delay; per-path detection; RACK passing over PSNs
beyond the SACK bitmap; the tail probe. Each test fails when its rule is taken out.
Both implementations: the compiled core is held to the same decisions by the traces
(tests/traces: slow_path_nak passes over, stall_tail_probe probes) and, here, run too."""

import pytest

from twin.fabric.paths import ev_fields
from twin.mrc.core import compiled
from twin.mrc.evset import EvSet
from twin.mrc.sim import PathModel, SimFabric, run_transfer
from twin.mrc.transport import SackReport, Sender, SenderConfig

MiB = 1 << 20
KiB = 1 << 10

IMPLS = [pytest.param(Sender, id="reference")]


def _sender_classes() -> list:
    try:
        _fastpath = compiled()
    except ImportError:
        return IMPLS
    return [*IMPLS, pytest.param(_fastpath.Sender, id="compiled")]


SENDERS = _sender_classes()


def _all_paths(delay_ns: int):
    def event(fabric: SimFabric) -> None:
        fabric.default = PathModel(delay_ns=delay_ns, jitter_ns=5_000)
    return event


@pytest.mark.parametrize("cls", SENDERS)
def test_a_queue_every_path_shares_does_not_widen_racks_window(cls):
    """Every path 20 µs, then 600 µs (a queue the whole QP waits in): RTT above the base
    is 580 µs, but no packet trails one sent after it by more than the jitter. The
    window stays near its floor (it was ~580 µs: `reordering_ns` was RTT - base)."""
    windows = []
    r = run_transfer(4 * MiB, SimFabric(seed=2), events=[(300_000, _all_paths(600_000))],
                     checkpoint=(64, lambda s, _r: windows.append(
                         (s.rtt_samples, s.srtt, s.reorder_window_ns()))),
                     sender_class=cls)
    assert r.ok and r.exact
    queued = [w for n, srtt, w in windows if n >= 64 and srtt > 300_000]
    assert queued, windows  # the queue was measured while learned
    assert max(queued) <= 150_000, queued
    assert r.sender.stats.spurious == 0


@pytest.mark.parametrize("cls", SENDERS)
def test_paths_that_overtake_each_other_widen_the_window_by_as_much(cls):
    """Every path's delay varies by 150 µs (packets overtake each other by up to that):
    the reordering measured from deliveries out of send order grows to cover it, and
    hardly a packet is declared lost."""
    seen = []
    r = run_transfer(4 * MiB, SimFabric(PathModel(jitter_ns=150_000), seed=4),
                     checkpoint=(64, lambda s, _r: seen.append(s.reordering_ns)),
                     sender_class=cls)
    assert r.ok and r.exact
    assert 100_000 <= max(seen) <= 200_000, seen
    assert r.sender.stats.spurious <= 4


def _one_path_sender(cls, size: int = 4, **cfg) -> tuple:
    """A sender whose every EV is on one path (one plane, one T1), `size` EVs."""
    s = cls(EvSet([0], 1, size=size, backup=4, seed=5), 0,
            SenderConfig(init_window=64, mtu=1024, **cfg))
    s.post(64 * 1024)
    return s, memoryview(bytes(64 * 1024))


@pytest.mark.parametrize("cls", SENDERS)
def test_a_later_packet_on_a_sibling_ev_of_the_same_path_shows_a_loss_at_once(cls):
    """PSNs 0 and 1 leave together on two EVs of one path; PSN 1's ack proves PSN 0 lost
    (a path keeps its order), with no wait for RACK's window: nothing was sent a window
    after PSN 0, and no later packet on PSN 0's own EV was acked."""
    s, src = _one_path_sender(cls)
    sent = s.poll(0, src, budget=2)
    assert [p.psn for p in sent] == [0, 1] and sent[0].ev != sent[1].ev
    s.on_sack(SackReport(cum=0, bitmap=1, ev=sent[1].ev, psn=1, tries=0), 30_000)
    assert s.stats.lost_per_ev == 1 and s.stats.lost_rack == 0
    assert [(e.kind, e.psn, e.detail) for e in s.log if e.kind == "loss"] == \
        [("loss", 0, "per_path")]


@pytest.mark.parametrize("cls", SENDERS)
def test_no_loss_is_declared_on_another_paths_word_inside_the_window(cls):
    """Two planes: PSN 1 (plane 1) acked says nothing of PSN 0 (plane 0) within RACK's
    window: a different path may be slower."""
    s = cls(EvSet([0, 1], 1, size=4, backup=4, seed=5), 0,
            SenderConfig(init_window=64, mtu=1024))
    s.post(8 * 1024)
    sent = s.poll(0, memoryview(bytes(8 * 1024)), budget=2)
    s.on_sack(SackReport(cum=0, bitmap=1, ev=sent[1].ev, psn=1, tries=0), 30_000)
    assert s.stats.lost_per_ev == s.stats.lost_rack == 0


@pytest.mark.parametrize("cls", SENDERS)
def test_rack_passes_over_a_psn_beyond_the_bitmap_to_judge_what_was_sent_after_it(cls):
    """PSN 0's resend (plane 1) is lost too. In front of it in send order wait PSNs 65..99,
    beyond what a SACK with cum 0 speaks for. RACK used to stop at the first of them,
    leaving the resend to the 10 ms timer; it passes over them now, and a packet on
    plane 0 sent well after the resend being acked shows the resend lost."""
    s = cls(EvSet([0, 1], 1, size=8, backup=4, seed=5), 0,
            SenderConfig(init_window=100, mtu=1024))
    s.post(300 * 1024)
    src = memoryview(bytes(300 * 1024))
    first = s.poll(0, src, budget=100)
    assert [p.psn for p in first] == list(range(100))
    # PSNs 1..64 arrived; PSN 0 did not: a later packet on its path proves it lost
    s.on_sack(SackReport(cum=0, bitmap=(1 << 64) - 1, ev=first[64].ev, psn=64, tries=0),
              500_000)
    assert [e.psn for e in s.log if e.kind == "loss"] == [0]
    resend = s.poll(1_000_000, src, budget=1)[0]
    assert resend.psn == 0 and resend.tries == 1
    later = [p for p in s.poll(2_000_000, src, budget=8)
             if ev_fields(p.ev)[0] != ev_fields(resend.ev)[0]]
    s.on_sack(SackReport(cum=0, bitmap=(1 << 64) - 1, ev=later[0].ev, psn=later[0].psn,
                         tries=0), 2_200_000)
    losses = [(e.psn, e.detail) for e in s.log if e.kind == "loss"]
    assert losses == [(0, "per_path"), (0, "rack")], losses


@pytest.mark.parametrize("cls", SENDERS)
def test_a_stall_costs_tail_probes_not_losses(cls):
    """Every path 3 ms slow for 4 ms (a stalled receiver, or SACKs that died on a cut
    path): the oldest first copy goes again as a tail probe after srtt + 4 rttvar, not
    after the RTO's 10 ms, and nothing is declared lost or blamed."""
    events = [(400_000, _all_paths(3_000_000)), (4_400_000, _all_paths(20_000))]
    r = run_transfer(1 * MiB, SimFabric(seed=19), events=events, sender_class=cls,
                     config=SenderConfig(mtu=KiB))
    assert r.ok and r.exact
    st = r.sender.stats
    assert st.tail_probes >= 1 and st.lost_timeout == 0
    probed = [e for e in r.sender.log if e.kind == "retransmit"]
    assert len(probed) >= st.tail_probes  # each probe is a resend, and no loss:
    assert not [e for e in r.sender.log if e.kind == "loss" and e.detail == "timeout"]


@pytest.mark.parametrize("cls", SENDERS)
def test_single_path_sends_no_tail_probe(cls):
    events = [(400_000, _all_paths(3_000_000)), (4_400_000, _all_paths(20_000))]
    r = run_transfer(1 * MiB, SimFabric(seed=19), events=events, sender_class=cls,
                     mode="single-path", config=SenderConfig(mtu=KiB))
    assert r.ok and r.sender.stats.tail_probes == 0



def _nic_down(sender, fabric: SimFabric, now: int) -> None:
    """Our NIC goes down on every plane: the port-state bitmap says so (netlink, in the
    endpoint), and nothing sent arrives."""
    fabric.default = PathModel(dead=True)
    sender.set_local_ports(0, now)


@pytest.mark.parametrize("cls", SENDERS)
def test_a_roce_qp_whose_port_goes_down_fails_at_its_retry_limit(cls):
    """RoCE knows one path: with its port down the NIC sends into it all the same and
    the QP dies at its retry limit. It was held instead (no usable EV), nothing was in
    flight for a timer to expire, and the QP hung until the port came back."""
    r = run_transfer(4 * MiB, SimFabric(seed=3), mode="single-path", sender_class=cls,
                     actions=[(200_000, _nic_down)], limit_ns=5_000_000_000)
    assert not r.ok and "retry limit" in (r.failed or ""), r.failed


def _first_loss_on_a_congested_path(cls) -> tuple:
    """Two planes of two T1s; PSN 0 goes out, every other EV on its path is SKIPped
    (congested: the rotation passes over them), PSN 1 on another path, sent well after,
    is acked: RACK declares PSN 0 lost, its path's first loss."""
    evs = EvSet([0, 1], 2, size=16, backup=8, seed=7)
    s = cls(evs, 0, SenderConfig(init_window=64, mtu=1024))
    s.post(64 * 1024)
    src = memoryview(bytes(64 * 1024))
    first = s.poll(0, src, budget=1)[0]
    path = evs.path_of(evs.find(first.ev))
    later = s.poll(5_000_000, src, budget=1)[0]
    assert evs.path_of(evs.find(later.ev)) != path
    for ev in evs.active:
        if evs.path_of(ev) == path and ev.value != first.ev:
            evs.congested(ev)
    s.on_sack(SackReport(cum=0, bitmap=1, ev=later.ev, psn=1, tries=0), 5_200_000)
    assert [(e.kind, e.psn) for e in s.log if e.kind == "loss"] == [("loss", 0)]
    return s, evs, src, path


@pytest.mark.parametrize("cls", SENDERS)
def test_the_next_new_packet_checks_a_path_that_has_just_lost_one(cls):
    """After a path's first loss the next new packet goes on a sibling of it, SKIPped or
    not, rather than wherever the rotation is (on a slow QP with its siblings SKIPped
    that was 77 ms later on the lab). The resend of the lost PSN does not take the risk:
    it goes on another plane."""
    s, evs, src, path = _first_loss_on_a_congested_path(cls)
    out = s.poll(5_300_000, src, budget=3)
    assert out[0].psn == 0 and evs.path_of(evs.find(out[0].ev))[0] != path[0]
    assert out[1].psn == 2 and evs.path_of(evs.find(out[1].ev)) == path
    assert evs.path_checks == 1 and not evs.suspects
    assert evs.path_of(evs.find(out[2].ev)) != path  # then the rotation goes on


@pytest.mark.parametrize("cls", SENDERS)
def test_a_lost_check_shows_the_path_dead_and_a_delivered_one_clears_it(cls):
    s, evs, src, path = _first_loss_on_a_congested_path(cls)
    out = s.poll(5_300_000, src, budget=3)
    check = out[1]
    on_path = [ev for ev in evs.active if evs.path_of(ev) == path]
    # the check arrives: the first loss was random, the path keeps its EVs
    s.on_sack(SackReport(cum=0, bitmap=0b10, ev=check.ev, psn=2, tries=0), 5_500_000)
    assert evs.dead_paths == 0
    assert all(ev.state.value == "skip" for ev in on_path)

    s, evs, src, path = _first_loss_on_a_congested_path(cls)
    out = s.poll(5_300_000, src, budget=3)
    later = s.poll(10_000_000, src, budget=1)[0]
    assert evs.path_of(evs.find(later.ev)) != path
    # the check is lost: a packet sent well after it is acked, and the path is dead
    s.on_sack(SackReport(cum=0, bitmap=0b1001, ev=later.ev, psn=later.psn, tries=0),
              10_200_000)
    assert evs.dead_paths == 1, [(e.kind, e.psn, e.detail) for e in s.log]
    assert not [ev for ev in evs.active if evs.path_of(ev) == path
                and ev.state.value in ("good", "skip")]


def _tail_probed(cls) -> tuple:
    """40 packets acked in order (the probe time is learned from their RTTs), then PSN 40
    is never acked: the timer sends it again as a tail probe, on another EV."""
    evs = EvSet([0, 1], 2, size=16, backup=8, seed=7)
    s = cls(evs, 0, SenderConfig(init_window=64, mtu=1024))
    s.post(41 * 1024)
    src = memoryview(bytes(41 * 1024))
    t = 0
    for psn in range(40):
        p = s.poll(t, src, budget=1)[0]
        s.on_sack(SackReport(cum=psn + 1, bitmap=0, ev=p.ev, psn=psn, tries=0), t + 50_000)
        t += 100_000
    first = s.poll(t, src, budget=1)[0]
    s.on_timer(t + 2_000_000)
    assert s.stats.tail_probes == 1 and s.stats.lost_timeout == 0
    probe = s.poll(t + 2_000_000, src, budget=1)[0]
    assert probe.psn == 40 and probe.tries == 1 and probe.ev != first.ev
    return s, evs, first, probe, t + 2_000_000


@pytest.mark.parametrize("cls", SENDERS)
def test_a_tail_probes_copy_arriving_alone_shows_the_first_copy_lost(cls):
    """The SACK echoes the probe's copy and does not call it a duplicate: the first copy
    never arrived, and its EV is blamed (and its path checked) as RACK would have done.
    On a shaped fabric the probe time is shorter than RACK's window, and a dead path's
    every loss was probed around, unblamed, for 57 ms."""
    s, evs, first, probe, t = _tail_probed(cls)
    s.on_sack(SackReport(cum=41, bitmap=0, ev=probe.ev, psn=40, tries=1), t + 500_000)
    assert s.stats.lost_probe == 1
    assert [(e.kind, e.psn, e.detail) for e in s.log if e.kind == "loss"] == \
        [("loss", 40, "probe")]
    # the loss, then the probe's copy as its repair: what a drill's repair figure reads
    assert [e.kind for e in s.log if e.psn == 40 and e.kind in ("loss", "repaired")] == \
        ["loss", "repaired"]
    assert evs.retired.get(first.ev) is not None  # the first copy's EV retired
    assert evs.suspects  # and its path is checked by the next new packet
    # the first copy turns up after all: a duplicate, and the retirement is undone
    s.on_sack(SackReport(cum=41, bitmap=0, ev=first.ev, psn=40, tries=0, dup=True),
              t + 1_000_000)
    assert s.stats.spurious == 1 and evs.retired.get(first.ev) is None


@pytest.mark.parametrize("cls", SENDERS)
def test_a_tail_probe_that_arrives_second_blames_nothing(cls):
    """The first copy was only slow: the receiver calls the probe's copy a duplicate."""
    s, evs, first, probe, t = _tail_probed(cls)
    s.on_sack(SackReport(cum=41, bitmap=0, ev=probe.ev, psn=40, tries=1, dup=True),
              t + 500_000)
    assert s.stats.lost_probe == 0 and not [e for e in s.log if e.kind == "loss"]
    assert evs.retirements == 0
