"""The endpoint's stats schema (twin.mrc.stats): typed on both ends, the JSON unchanged."""

import json
from dataclasses import fields

from tests.helpers import send_qp_stats
from twin.mrc import stats as S
from twin.mrc.transport import ReceiverStats, SenderStats

RECV = {"qpn": 2, "bad_rkey": 0, "cum": 256, "completed": [[0, 42]], "reverse_evs": [5, 9],
        "packets": 256, "bytes": 1 << 20, "duplicates": 1, "out_of_order": 3, "acks": 200,
        "nacks": 0, "completions": 1, "out_of_window": 0, "cnps_sent": 0, "ce_marked": 0,
        "trimmed": 0, "nacks_trimmed": 0, "transport": "python"}
DROPS = {"truncated": 1, "malformed": 0, "bad_icrc": 3, "unknown_qp": 2, "bad_rkey": 0,
         "out_of_bounds": 0, "psn_window": 0, "duplicate": 1, "ack_unsent": 0,
         "sack_bits_unsent": 2, "nack_stale": 0, "trim_stale": 4, "probe_unknown": 1,
         "cnp_limited": 5}


def endpoint_wire() -> dict:
    return {"host": "r0h0", "ports": 0b1111, "bad_packets": 4, "unknown_qp": 2,
            "totals": {"bytes_sent": 1 << 20, "bytes_placed": 0, "retransmits": 0,
                       "ev_retirements": 0,
                       "tx_bytes_per_plane": {"0": 1 << 18, "1": 1 << 18, "2": 1 << 18,
                                              "3": 1 << 18},
                       "rx_bytes_per_plane": {"0": 0, "1": 0, "2": 0, "3": 0},
                       "signals": {"ce_marked_rx": 3, "ecn_marks_tx": 0}},
            "send_qps": [send_qp_stats(transport="compiled").to_dict()], "recv_qps": [dict(RECV)],
            "drops": DROPS,
            "datapath": "compiled", "transport": "compiled"}


def test_a_reply_parses_and_serialises_back_byte_for_byte():
    wire = endpoint_wire()
    text = json.dumps(wire)
    parsed = S.EndpointStats.from_dict(json.loads(text))
    assert json.dumps(parsed.to_dict()) == text  # same keys, same order, same numbers


def test_drops_from_before_the_hostile_counters_read_as_zero():
    older = endpoint_wire()
    older["drops"] = {k: n for k, n in DROPS.items() if k not in S.EndpointDrops._LATER}
    drops = S.EndpointStats.from_dict(older).drops
    assert drops.trim_stale == drops.cnp_limited == 0 and drops.bad_icrc == 3
    assert S.EndpointStats.from_dict(endpoint_wire()).drops.cnp_limited == 5


def test_typed_values_are_typed():
    ep = S.EndpointStats.from_dict(endpoint_wire())
    qp = ep.send_qp(1)
    assert qp.sender.per_plane_packets == {0: 64, 1: 64, 2: 64, 3: 64}  # planes are ints
    assert qp.planes_in_use == (0, 1, 2, 3) and qp.completions[0].msn == 0
    assert ep.recv_qp(2).completed == ((0, 42),) and ep.send_qp(99) is None


def test_per_plane_totals_are_typed_and_an_older_endpoint_reads_as_none():
    ep = S.EndpointStats.from_dict(endpoint_wire())
    assert ep.totals.tx_bytes_per_plane == {0: 1 << 18, 1: 1 << 18, 2: 1 << 18, 3: 1 << 18}
    older = endpoint_wire()
    del older["totals"]["tx_bytes_per_plane"], older["totals"]["rx_bytes_per_plane"]
    assert S.EndpointStats.from_dict(older).totals.rx_bytes_per_plane == {}


def test_unknown_keys_are_ignored_and_a_missing_one_is_an_error():
    wire = endpoint_wire()
    wire["id"] = 7  # the control reply's own
    assert S.EndpointStats.from_dict(wire).host == "r0h0"
    del wire["totals"]["retransmits"]
    try:
        S.EndpointStats.from_dict(wire)
    except KeyError as e:
        assert "retransmits" in str(e)
    else:
        raise AssertionError("a reply without totals.retransmits parsed")


def test_the_schema_keeps_in_step_with_the_transport_counters():
    assert [f.name for f in fields(S.SenderCounters)] == [f.name for f in fields(SenderStats)]
    recv = [f.name for f in fields(S.RecvQpStats)]
    assert recv[-len(fields(ReceiverStats)):] == [f.name for f in fields(ReceiverStats)]


def test_a_reply_from_an_endpoint_before_the_drop_counters_still_parses():
    """A lab kept up across an upgrade: its endpoints send no drops yet; they read as 0."""
    d = send_qp_stats().to_dict()
    del d["sender"]["acks_unsent"]
    reply = {"host": "r0h0", "ports": 15, "bad_packets": 0, "unknown_qp": 0,
             "totals": {"bytes_sent": 1, "bytes_placed": 2, "retransmits": 0,
                        "ev_retirements": 0},
             "send_qps": [d], "recv_qps": []}
    stats = S.EndpointStats.from_dict(reply)
    assert stats.drops.bad_icrc == 0 and stats.send_qps[0].sender.acks_unsent == 0


def test_an_older_endpoint_without_the_congestion_counters_reads_as_zero():
    older = endpoint_wire()
    for key in ("ce_marked", "trimmed", "nacks_trimmed"):
        del older["recv_qps"][0][key]
    q = older["send_qps"][0]
    for key in ("ev_skips_by", "cc", "signals"):
        del q[key]
    for key in S.SenderCounters._SIGNALS:
        del q["sender"][key]
    del older["totals"]["signals"]
    ep = S.EndpointStats.from_dict(older)
    assert (ep.recv_qp(2).ce_marked, ep.recv_qp(2).nacks_trimmed) == (0, 0)
    qp = ep.send_qp(1)
    assert (qp.cc, qp.signals, dict(qp.ev_skips_by)) == ("", (), {})
    assert (qp.sender.ecn_marks, qp.sender.nacks_trimmed) == (0, 0)
    assert ep.totals.signals == {}
    assert S.EndpointStats.from_dict(endpoint_wire()).totals.signals["ce_marked_rx"] == 3


def test_each_qp_names_its_transport_and_an_older_endpoints_run_its_own():
    ep = S.EndpointStats.from_dict(endpoint_wire())
    assert (ep.send_qp(1).transport, ep.recv_qp(2).transport) == ("compiled", "python")
    older = endpoint_wire()
    older["transport"] = "python: asked for"
    del older["send_qps"][0]["transport"], older["recv_qps"][0]["transport"]
    ep = S.EndpointStats.from_dict(older)
    assert (ep.send_qp(1).transport, ep.recv_qp(2).transport) == ("python", "python")
    assert S.SendQpStats.from_dict(older["send_qps"][0]).transport == ""  # a lone `wait`
    assert list(S.EndpointStats.from_dict(endpoint_wire()).to_dict()["recv_qps"][0])[-1] \
        == "transport"  # a key added after the others goes last


def test_the_stats_table_names_qps_that_run_another_transport():
    from twin.cli.traffic import transport_cell

    ep = S.EndpointStats.from_dict(endpoint_wire())  # compiled, its receiving QP python
    assert transport_cell(ep) == "compiled, 1 QP python"
    one = endpoint_wire()
    one["recv_qps"][0]["transport"] = "compiled"
    assert transport_cell(S.EndpointStats.from_dict(one)) == "compiled"
