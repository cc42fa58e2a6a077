"""twin.traffic's comparison of both ends, with endpoints that answer from a table."""

import threading

import pytest

from twin.errors import LabError
from twin.mrc.control import EndpointClient
from twin.traffic import Flow, _compare, _register


class Hashes(EndpointClient):
    """An endpoint's control client that knows each of its QPs' sha256 (the typed
    client's methods, answered where a request would go on the wire)."""

    def __init__(self, digests: dict[int, str]):
        self.digests = digests
        self.asked: list[int] = []
        self.threads: set[str] = set()

    def call_raw(self, op: str, timeout=None, **args) -> dict:
        assert op == "digest"
        self.asked.append(args["qpn"])
        self.threads.add(threading.current_thread().name)
        return {"sha256": self.digests[args["qpn"]]}


def test_each_flow_is_its_source_against_its_destination_and_hosts_hash_their_own():
    ring = [Flow("a", "b", 1), Flow("b", "c", 1), Flow("c", "a", 1)]
    for i, f in enumerate(ring):  # each endpoint numbers its own QPs: both ends are 1
        f.send_qpn, f.recv_qpn = 1 + i, 1 + i
    clients = {"a": Hashes({1: "x", 3: "z"}), "b": Hashes({2: "y", 1: "x"}),
               "c": Hashes({3: "z", 2: "y?"})}  # b -> c arrived corrupted
    _compare(clients, ring)
    assert [f.exact for f in ring] == [True, False, True]
    assert clients["a"].asked == [1, 3] and clients["b"].asked == [1, 2]
    assert clients["c"].asked == [2, 3]
    assert all(len(c.threads) == 1 for c in clients.values())  # one caller per client


class Registrar(EndpointClient):
    """An endpoint's control client that makes QPs, numbering its own from 1. Its first
    recv_qp and its first send_qp wait at `meet` (when set) for another host's: two
    hosts that register one after the other never meet, and the barrier breaks."""

    def __init__(self, meet: threading.Barrier | None = None, fail: str | None = None):
        self.meet, self.fail = meet, fail
        self.calls: list[tuple] = []
        self.threads: set[str] = set()
        self.next_qpn = 1
        self.met: set[str] = set()

    def call_raw(self, op: str, timeout=None, **args) -> dict:
        self.calls.append((op, args))
        self.threads.add(threading.current_thread().name)
        if op == self.fail:
            raise LabError(f"{op} refused")
        if op == "connect":  # replies carry every key the op table names
            return {"qpn": args["qpn"]}
        if self.meet is not None and op not in self.met:
            self.met.add(op)
            self.meet.wait()
        qpn, self.next_qpn = self.next_qpn, self.next_qpn + 1
        return ({"qpn": qpn, "rkey": 0x100 + qpn} if op == "recv_qp" else
                {"qpn": qpn, "planes": [0, 1, 2, 3]})


def test_every_host_registers_its_buffers_at_once_and_each_flow_is_wired_to_its_peer():
    meet = threading.Barrier(2, timeout=10)  # the two destinations, then the two sources
    clients = {"a": Registrar(meet), "b": Registrar(meet)}
    flows = [Flow("a", "b", 10), Flow("b", "a", 20), Flow("a", "b", 30)]
    _register(clients, flows, "mrc", None)
    # each host numbers its QPs in the order it made them: receiving ones first
    assert [(f.send_qpn, f.recv_qpn) for f in flows] == [(2, 1), (3, 1), (3, 2)]
    sends = [args for op, args in clients["a"].calls if op == "send_qp"]
    assert [(s["peer_qpn"], s["rkey"], s["size"], s["seed"]) for s in sends] == \
        [(1, 0x101, 10, 1), (2, 0x102, 30, 3)]  # seeds stay the flow's place
    connects = [args for op, args in clients["b"].calls if op == "connect"]
    assert connects == [{"qpn": 1, "peer": "a", "peer_qpn": 2},
                        {"qpn": 2, "peer": "a", "peer_qpn": 3}]


def test_a_refused_registration_leaves_every_qp_made_so_far_named_for_closing():
    clients = {"a": Registrar(fail="send_qp"), "b": Registrar()}
    flows = [Flow("a", "b", 10), Flow("b", "a", 20)]
    with pytest.raises(LabError, match="send_qp refused"):
        _register(clients, flows, "mrc", None)
    # both receiving QPs, and b's sending QP, exist: run()'s finally closes them
    assert [(f.send_qpn, f.recv_qpn) for f in flows] == [(0, 1), (2, 1)]
    assert not any(op == "connect" for c in clients.values() for op, _ in c.calls)


def test_a_permutation_sends_from_every_host_to_one_other_across_racks():
    from twin.cli.traffic import traffic
    from twin.traffic import PATTERNS, flows_for

    hosts = [f"r{r}h{h}" for r in range(4) for h in range(4)]
    flows = flows_for("permutation", hosts, 1 << 20)
    assert sorted(f.src for f in flows) == sorted(f.dst for f in flows) == sorted(hosts)
    assert all(f.src[:2] != f.dst[:2] for f in flows)  # every flow crosses racks
    assert tuple(traffic.params[0].type.choices) == PATTERNS  # the CLI offers each one


def test_the_senders_signals_go_to_send_qp_and_only_when_chosen():
    clients = {"a": Registrar(), "b": Registrar()}
    _register(clients, [Flow("a", "b", 10)], "mrc", None,
              {"cc": "delay", "ecn": False, "trim": None})
    (send,) = [args for op, args in clients["a"].calls if op == "send_qp"]
    assert (send["cc"], send["ecn"]) == ("delay", False) and "trim" not in send
    clients = {"a": Registrar(), "b": Registrar()}
    _register(clients, [Flow("a", "b", 10)], "mrc", None)
    (send,) = [args for op, args in clients["a"].calls if op == "send_qp"]
    assert not {"cc", "ecn", "trim"} & set(send)  # the endpoint's defaults


def test_an_unknown_congestion_control_is_a_usage_error():
    from twin import traffic as T
    from twin.errors import UsageError

    with pytest.raises(UsageError, match="unknown congestion control 'cubic'"):
        T.run(None, "bulk", [Flow("a", "b", 1)], cc="cubic")
