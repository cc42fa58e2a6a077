"""twin.traffic's comparison of both ends, with endpoints that answer from a table."""

import threading

from twin.traffic import Flow, _compare


class Hashes:
    """An endpoint's control client that knows each of its QPs' sha256."""

    def __init__(self, digests: dict[int, str]):
        self.digests = digests
        self.asked: list[int] = []
        self.threads: set[str] = set()

    def call(self, op: str, **args) -> dict:
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
