"""The paths a sending QP's packets went on (counters.paths_used, SendQpStats.paths_used):
what a drill decides from whether a fault met the QP's traffic. Both transports count
Ev.sent, so both report the same paths."""

import pytest

from tests.helpers import send_qp_stats
from twin.mrc import core
from twin.mrc.counters import paths_used
from twin.mrc.evset import EvSet
from twin.mrc.sim import PathModel, SimFabric, run_transfer
from twin.mrc.stats import SendQpStats

MiB = 1 << 20


def _senders():
    out = [pytest.param(core.load_transport("python").sender, id="python")]
    try:
        compiled = core.load_transport("compiled")
        why = None if compiled.compiled else compiled.name
    except Exception as e:  # noqa: BLE001 - the reason is the skip's
        compiled, why = None, str(e)
    out.append(pytest.param(compiled.sender if why is None else None, id="compiled",
                            marks=[pytest.mark.skip(reason=f"no compiled core: {why}")]
                            if why else []))
    return out


def test_only_evs_that_carried_a_packet_count_and_retired_ones_are_kept():
    evs = EvSet([0, 1, 2, 3], 2, size=16, backup=8, seed=3)
    a, b = evs.active[0], evs.active[1]
    a.sent, b.sent = 5, 2
    evs.lost(b)  # b retires to the pool: its packets still went on its path
    got = {(p, t): n for p, t, n in paths_used(evs)}
    assert got[evs.path_of(a)] >= 5 and got[evs.path_of(b)] >= 2
    assert sum(got.values()) == 7  # no EV that sent nothing, none counted twice


@pytest.mark.parametrize("sender_class", _senders())
def test_single_path_names_its_one_path_and_mrc_every_path(sender_class):
    r = run_transfer(MiB, SimFabric(seed=4), mode="single-path", sender_class=sender_class)
    single = r.sender.single_ev
    assert [(p, t) for p, t, _ in paths_used(r.sender.evs)] == \
        [r.sender.evs.path_of(single)]
    r = run_transfer(MiB, SimFabric(seed=4), sender_class=sender_class)
    assert {(p, t) for p, t, _ in paths_used(r.sender.evs)} == \
        {(p, t) for p in range(4) for t in range(2)}


@pytest.mark.parametrize("sender_class", _senders())
def test_a_dead_path_a_qp_tried_is_among_its_paths(sender_class):
    dead = {(1, 0): PathModel(dead=True)}
    r = run_transfer(MiB, SimFabric(paths=dead, seed=2), sender_class=sender_class)
    assert r.exact
    assert (1, 0) in {(p, t) for p, t, _ in paths_used(r.sender.evs)}


def test_paths_used_round_trips_and_reads_as_none_from_an_older_endpoint():
    qp = send_qp_stats(paths_used=[[1, 0, 40], [2, 1, 3]])
    d = qp.to_dict()
    assert d["paths_used"] == [[1, 0, 40], [2, 1, 3]]
    assert SendQpStats.from_dict(d) == qp
    del d["paths_used"]
    assert SendQpStats.from_dict(d).paths_used == ()
