"""Failover figures from faults and event logs (twin.failover), and a run's goodput
recovery time (twin.traffic.Run): pure, no lab."""

from tests.helpers import send_qp_stats
from twin.failover import Episode, episodes
from twin.traffic import Flow, Run

# t_us: in force by (the apply returned); the change began applied_us before: 1.0 s, 1.5 s
CUT = {"t_s": 0.5, "t_us": 1_008_600, "applied_us": 8_600, "what": "cut t0-p0-r0:eth3"}
HEAL = {"t_s": 1.0, "t_us": 1_508_100, "applied_us": 8_100, "what": "restore t0-p0-r0:eth3"}


def ev(t_us, kind, flow=0, **kw):
    return {"t_us": t_us, "kind": kind, "flow": flow, "ev": 0, "psn": -1, "detail": "", **kw}


def test_a_cut_is_detected_at_the_first_loss_and_repaired_at_the_last_resent_ack():
    log = [ev(1_000_900, "loss", psn=7), ev(1_000_900, "retire", psn=7),
           ev(1_000_950, "retransmit", psn=7),
           ev(1_001_200, "loss", flow=1, psn=7), ev(1_001_250, "retransmit", flow=1, psn=7),
           ev(1_004_000, "repaired", psn=7), ev(1_020_000, "repaired", flow=1, psn=7)]
    [ep] = episodes([CUT], log)
    assert (ep.fault, ep.t_us) == ("cut t0-p0-r0:eth3", 1_000_000)
    assert (ep.detection_us, ep.repair_us) == (900, 20_000)
    assert (ep.losses, ep.retirements, ep.retransmits) == (2, 1, 2)
    assert ep.flows == [0, 1]
    assert ep.line() == ("failover after cut t0-p0-r0:eth3: detected in 900 µs, repaired in "
                         "20,000 µs (1 EV retirements, 2 retransmits)")


def test_a_loss_found_while_the_change_was_being_applied_is_the_faults():
    """`ip link set down` took 8.6 ms: the link went down during it, and the loss found
    2 ms in is this cut's detection, counted from when the change began (it was counted
    from the apply's return, and fell before the fault: no episode had it)."""
    [ep] = episodes([CUT], [ev(1_002_000, "loss", psn=3), ev(1_002_000, "retire", psn=3),
                            ev(1_003_000, "repaired", psn=3)])
    assert ep.fault == "cut t0-p0-r0:eth3"
    assert (ep.detection_us, ep.repair_us) == (2_000, 3_000)


def test_the_failover_ends_when_its_losses_are_repaired_and_calm_follows():
    """Losses after a quiet spell are the run's noise: counted, not part of repair_us.
    A copy declared lost that arrives after all (spurious) needs no repair."""
    log = [ev(1_001_000, "loss", psn=1), ev(1_001_000, "loss", psn=2),
           ev(1_002_000, "repaired", psn=1), ev(1_003_000, "loss", psn=3),
           ev(1_004_000, "spurious", psn=2), ev(1_005_000, "repaired", psn=3),
           ev(1_200_000, "loss", psn=90), ev(1_200_500, "repaired", psn=90)]
    [ep] = episodes([CUT], log)
    assert (ep.detection_us, ep.repair_us, ep.losses, ep.spurious) == (1_000, 5_000, 4, 1)
    [never] = episodes([CUT], log[:2])
    assert never.repair_us is None


def test_events_before_any_fault_are_the_noise_floor_and_later_faults_split_the_log():
    log = [ev(10, "loss"), ev(20, "spurious"),  # a clean run's noise, before the cut
           ev(1_002_000, "port", detail="plane 0 down (peer)"),
           ev(1_600_000, "revive"), ev(1_600_100, "port")]
    noise, cut, heal = episodes([HEAL, CUT], log)  # any order: sorted by time
    assert noise.fault is None and (noise.losses, noise.spurious) == (1, 1)
    assert noise.t_us == 10 and noise.detection_us == 0
    assert cut.port_changes == 1 and cut.detection_us == 2_000
    assert heal.fault.startswith("restore") and heal.revivals == 1 and heal.port_changes == 1
    assert "1 revived" in heal.line() and "1 port changes" in heal.line()


def test_a_quiet_fault_says_nothing_detected_and_an_unrepaired_one_says_so():
    [quiet] = episodes([CUT], [])
    assert not quiet.eventful and quiet.detection_us is None
    assert quiet.line() == "failover after cut t0-p0-r0:eth3: nothing detected"
    [open_] = episodes([CUT], [ev(1_000_500, "loss"), ev(1_000_600, "retransmit")])
    assert open_.repair_us is None and open_.unrepaired == 1
    assert open_.line().endswith(": detected in 500 µs, 1 lost packet never shown repaired "
                                 "(0 EV retirements, 1 retransmits)")
    [lost_only] = episodes([CUT], [ev(1_000_500, "loss"), ev(1_000_501, "loss", psn=2)])
    assert "2 lost packets never shown repaired" in lost_only.line()


def test_retransmits_with_no_loss_and_no_fault_are_tail_probes_not_a_failed_repair():
    """Seen on a clean lab: 'repair after loss, no fault in force: not repaired (0 EV
    retirements, 68 retransmits)' for a byte-exact transfer. With no loss declared,
    every copy sent again was a tail probe: nothing was lost, nothing waits."""
    [noise] = episodes([], [ev(10, "retransmit"), ev(900, "retransmit", psn=2)])
    assert noise.fault is None and noise.losses == 0 and noise.unrepaired == 0
    assert noise.line() == ("no fault in force, no loss declared: every retransmit a tail "
                            "probe (0 EV retirements, 2 retransmits)")


def test_a_run_reports_its_faults_events_and_failover_in_json():
    flow = Flow("r0h0", "r1h0", 1 << 20, exact=True,
                result=send_qp_stats(ev_retirements_total=1, sender={
                    "retransmits": 1, "per_plane_packets": {"0": 256}}))
    run = Run("bulk", "mrc", [flow], faults=[CUT],
              events=[ev(1_000_700, "loss", psn=3), ev(1_000_700, "retire", psn=3),
                      ev(1_000_800, "retransmit", psn=3), ev(1_002_000, "repaired", psn=3)])
    out = run.to_dict()
    assert out["faults"] == [CUT] and len(out["events"]) == 4
    assert out["failover"] == [Episode("cut t0-p0-r0:eth3", 1_000_000, 700, 2_000, 1, 1, 1,
                                       flows=[0]).to_dict()]
    f = out["flows"][0]
    assert f["ev_retirements_total"] == 1 and f["per_plane_packets"] == {"0": 256}


def test_recovery_time_reads_the_goodput_series():
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
    never = Run("bulk", "mrc", [], samples=[(i * 0.02, min(i, 50) * 20_000_000)
                                            for i in range(100)])
    assert never.recovery_s(1.0) is None


# -- the faults in force when the run began (`twin fault` before `twin traffic`) ------

LOSS = "link-loss 1% t0-p0-r0:eth3--t1-p0-0:eth1"


def recorded_events(name="loss_1pct", start_ns=5_000_000_000):
    """A QP's event log as the endpoint hands it over (EventLog, Event.to_dict), from a
    recorded trace replayed through the reference sender, shifted to `start_ns`."""
    from twin.mrc import trace as TR

    trace = TR.load(TR.TRACES_DIR / f"{name}.json.gz")
    out = []
    for d in TR.replay(trace):
        for t_ns, kind, ev_, psn, detail in d.get("events", []):
            t = start_ns + t_ns
            out.append({"t_us": t // 1000, "t_ns": t, "kind": kind, "ev": ev_, "psn": psn,
                        "detail": detail, "flow": 0})
    return out


def test_a_fault_in_force_before_the_run_is_the_one_its_failover_line_answers():
    """`twin fault link-loss ... 1` then `twin traffic`: the line read 'failover with no
    fault: ... repaired in 206,406 µs (19 EV retirements)', under a 1% loss."""
    log = recorded_events()
    assert {"loss", "retire", "retransmit", "repaired"} <= {e["kind"] for e in log}
    run = Run("bulk", "mrc", [], events=log, in_force=[LOSS], start_us=5_000_000)
    [ep] = run.failover()
    assert ep.fault == LOSS and ep.before_run and ep.t_us == 5_000_000
    assert ep.detection_us is not None and ep.detection_us >= 0
    line = ep.line()
    assert line.startswith(f"failover under {LOSS} (in force before the run): detected ")
    assert " µs into the run, " in line and "no fault" not in line
    assert f"{ep.retirements} EV retirements, {ep.retransmits} retransmits" in line
    assert run.to_dict()["in_force"] == [LOSS]


def test_only_with_no_fault_in_force_does_the_line_say_there_was_none():
    log = recorded_events()
    [noise] = Run("bulk", "mrc", [], events=log, start_us=5_000_000).failover()
    assert noise.fault is None and not noise.before_run
    line = noise.line()
    assert line.startswith("repair after loss, no fault in force: ")
    assert "detected" not in line  # counted from its own first loss: nothing to time
    if noise.repair_us is not None:
        assert f"repaired {noise.repair_us:,} µs after the first loss" in line


def test_a_cut_under_a_fault_in_force_names_both_and_a_quiet_one_is_still_answered():
    log = [ev(1_000_900, "loss", psn=7), ev(1_000_950, "retransmit", psn=7),
           ev(1_004_000, "repaired", psn=7)]
    under, cut = episodes([CUT], log, in_force=[LOSS], start_us=900_000)
    assert under.line() == f"failover under {LOSS} (in force before the run): nothing detected"
    assert cut.line() == (f"failover after cut t0-p0-r0:eth3 ({LOSS} in force since before "
                          "the run): detected in 900 µs, repaired in 4,000 µs "
                          "(0 EV retirements, 1 retransmits)")


def test_a_faults_phrase_names_kind_percent_and_target_and_hides_a_hidden_one():
    from twin.fabric.model import Endpoint
    from twin.faults.record import Fault

    loss = Fault("link-loss", "t0-p0-r0:eth3--t1-p0-0:eth1", (Endpoint("t0-p0-r0", "eth3"),),
                 0.0, percent=1.0)
    assert loss.describe() == LOSS
    assert Fault("blackhole", "t1-p0-0", (Endpoint("t1-p0-0", ""),), 0.0,
                 hidden=True).describe() == "a hidden fault"


def test_twin_traffic_takes_the_faults_in_force_from_the_labs_record(att, monkeypatch):
    """The fault was applied by `twin fault`, apart from `twin traffic`: only the lab's
    record (faults.json) knows it; the traffic knew only its own --cut."""
    from click.testing import CliRunner

    from twin import faults as F
    from twin import traffic as T
    from twin.cli import main

    F.link_loss(att, "t0-p0-r0:eth3", 1)
    asked = {}

    def run(rt, pattern, flows, mode="mrc", **kw):
        asked.update(kw)
        return Run(pattern, mode, [], events=recorded_events(), in_force=kw["in_force"],
                   start_us=5_000_000)

    monkeypatch.setattr(T, "run", run)
    res = CliRunner().invoke(main, ["traffic", "bulk", "--src", "r0h0", "--dst", "r1h0"])
    assert res.exit_code == 0, res.output
    assert asked["in_force"] == [LOSS]
    assert f"failover under {LOSS} (in force before the run): detected" in res.output
    assert "no fault" not in res.output


# -- what "spurious" counts ----------------------------------------------------------

def test_spurious_is_said_as_losses_proven_late_not_as_retransmits():
    """The line read '2395 retransmits, 2395 spurious' over a run with no fault: the
    number counts losses a late copy disproved (the sender's `spurious` events), not
    retransmissions, so it is said as that. From a recorded trace whose reordering
    makes every loss spurious."""
    log = recorded_events("reorder")
    [ep] = Run("bulk", "mrc", [], events=log, start_us=5_000_000).failover()
    assert (ep.losses, ep.retransmits, ep.spurious) == (6, 6, 6)
    line = ep.line()
    assert line.endswith(f"({ep.retirements} EV retirements, 6 retransmits, "
                         "6 losses proven only late)")
    assert " spurious" not in line


def _sender_impls():
    from twin.mrc import core
    from twin.mrc.transport import Sender

    impls = [("reference", Sender)]
    try:
        impls.append(("_fastpath", core.compiled().Sender))  # bound: it makes Senders
    except (ImportError, AttributeError):
        pass
    return impls


def test_every_spurious_loss_in_the_recorded_traces_was_proven_by_a_second_copy():
    """A `spurious` event is a loss undone only on proof: the receiver saw two copies
    (duplicate) or acked a copy earlier than the last one sent. Either way a later copy
    of that PSN had gone out (a retransmit), so the loss it undoes cost one: the count
    never names a loss nothing disproved. Both implementations, every trace."""
    from twin.mrc import trace as TR

    seen, impls = 0, _sender_impls()
    for label, impl in impls:
        for path in TR.stored():
            trace = TR.load(path)
            if trace.kind != "sender":
                continue
            lost, resent = {}, {}  # psn -> events seen so far
            for d in TR.replay(trace, impl):
                for _, kind, _, psn, _ in d.get("events", []):
                    if kind == "loss":
                        lost[psn] = lost.get(psn, 0) + 1
                    elif kind == "retransmit":
                        resent[psn] = resent.get(psn, 0) + 1
                    elif kind == "spurious":
                        seen += 1
                        assert lost.get(psn) and resent.get(psn), (label, path.name, psn)
    assert seen == 24 * len(impls)  # reorder, probes_revive, burst_loss, delay_cc, ecn_marks
