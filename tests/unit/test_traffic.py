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
    for i, f in enumerate(ring):
        f.send_qpn, f.recv_qpn = 10 + i, 20 + i
    clients = {"a": Hashes({10: "x", 22: "z"}), "b": Hashes({11: "y", 20: "x"}),
               "c": Hashes({12: "z", 21: "y?"})}  # b -> c arrived corrupted
    _compare(clients, ring)
    assert [f.exact for f in ring] == [True, False, True]
    assert clients["a"].asked == [10, 22] and clients["b"].asked == [20, 11]
    assert clients["c"].asked == [21, 12]
    assert all(len(c.threads) == 1 for c in clients.values())  # one caller per client
