"""An MRC endpoint under a hostile network and hostile control clients, on mrc-4p.

The fuzz packets go from inside the target host's own namespace to its own NIC
address: nothing leaves the lab. Seeded (TWIN_FUZZ_SEED overrides; the seed is in
every failure message), bounded in count and in time."""

import json
import os
import socket
import stat
import time

import pytest

from twin import endpoints
from twin import traffic as T
from twin.mrc import fuzz as F

pytestmark = pytest.mark.netns
SEED = int(os.environ.get("TWIN_FUZZ_SEED", F.DEFAULT_SEED))
HOST, PEER = "r1h0", "r0h0"


def still_serves(att, host=HOST):
    """The endpoint answers hello and still moves a write byte for byte."""
    with endpoints.client(att.runtime, host, timeout=10) as c:
        assert c.hello()["host"] == host
    peer = PEER if host == HOST else HOST
    run = T.run(att.runtime, "bulk", T.flows_for("bulk", [], 4 << 20, peer, host), "mrc",
                timeout_s=60)
    assert run.ok, run.to_dict()  # traffic.run checks the digests of both ends


def test_fuzzed_packets_are_each_dropped_and_counted_and_nothing_leaks(lab4):
    """The plan, then the live attack on a sender mid-transfer on both transports: every
    packet counted where docs/endpoint-stats.md says, both writes byte-exact, no QP
    failed, both endpoints alive, the guards intact."""
    print(f"fuzz seed {SEED} (TWIN_FUZZ_SEED to change)")
    report = endpoints.fuzz(lab4.runtime, HOST, PEER, seed=SEED, budget_s=4.0, per_kind=32)
    out = report.to_json()
    print(json.dumps({k: out[k] for k in ("sent", "sent_by_kind", "expected", "counted",
                                          "problems")}))
    where = f"seed {SEED}: {out}"
    assert report.sent == report.planned, where  # the whole plan within the budget
    for counter, n in report.expected.items():
        if counter != F.ACCEPTED:
            assert report.counted[counter] == n, f"{counter}: {where}"
    assert report.guards["intact"] and report.guards["buffers"] >= 2, where
    assert set(report.live) == {"compiled", "python"}, where
    for transport, live in report.live.items():
        print(transport, json.dumps({k: live.to_dict()[k] for k in (
            "rounds", "rounds_mid_transfer", "max_cum_step", "sacks_unsure", "stopped",
            "seconds", "sent_by_kind")}))
        assert live.rounds_mid_transfer >= 10, f"{transport}: {where}"
        assert set(live.sent_by_kind) == set(F.LIVE_KINDS), f"{transport}: {where}"
        assert all(c.ok for c in live.checks), f"{transport}: {live.problems}"
        assert [t.exact and t.idle and not t.failed for t in live.transfers] \
            == [True, True], f"{transport}: {live.to_dict()['transfers']}"
    assert report.alive == {HOST: True, PEER: True}, where
    assert report.ok and report.problems == [] and out["ok"], where
    with endpoints.client(lab4.runtime, HOST) as c:  # every QP of the attack closed
        assert not c.stats()["send_qps"]
    still_serves(lab4)


def test_the_verdict_fails_naming_a_counter_that_did_not_move(lab4, monkeypatch):
    """The verdict is only as good as its failures: forged SACKs whose bitmap names
    nothing are counted nowhere, as if the endpoint's guard were gone; the verdict must
    fail and name both counters, while the writes still end byte-exact."""
    monkeypatch.setattr(F, "UNSENT_BITS", 0)  # a SACK naming no PSN at all: nothing masked
    report = endpoints.fuzz(lab4.runtime, HOST, PEER, seed=SEED, budget_s=4.0, per_kind=4,
                            live=("python",), shape=F.LiveShape(max_rounds=8))
    live = report.live["python"]
    sacks = live.sent_by_kind["forged_sack"]
    assert sacks > 0 and not report.ok and not report.to_json()["ok"], report
    assert report.problems == [
        f"live python: drops.sack_bits_unsent counted 0, expected {sacks} (forged SACKs over "
        "unsent PSNs: bits masked)",
        f"live python: mrc.sack_bits_unsent counted 0, expected {sacks} (the same, on the QP "
        "they named)"], report
    assert all(t.exact for t in live.transfers), live.to_dict()["transfers"]


def test_the_control_socket_is_root_only(lab4):
    for host in (HOST, PEER):
        mode = os.stat(endpoints.control_path(lab4.runtime, host)).st_mode
        assert stat.S_ISSOCK(mode) and stat.S_IMODE(mode) == 0o600, oct(mode)


def raw_client(att, host=HOST, timeout=5.0) -> socket.socket:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(timeout)
    s.connect(endpoints.control_path(att.runtime, host))
    return s


def ask(s: socket.socket, line: bytes) -> dict:
    """Send one raw line, read one reply line (bounded by the socket's timeout)."""
    s.sendall(line)
    buf = b""
    while b"\n" not in buf:
        chunk = s.recv(65536)
        assert chunk, f"closed without a reply to {line[:60]!r}"
        buf += chunk
    return json.loads(buf.split(b"\n", 1)[0])


HOSTILE_REQUESTS = [
    b"not json\n", b"[1]\n", b'"x"\n', b"null\n", b"{\n", b"\xff\xfe\n", b"[" * 100_000 + b"\n",
    b'{"op": "no-such-op", "id": 1}\n', b'{"id": 2}\n',
    b'{"op": "recv_qp"}\n', b'{"op": "recv_qp", "size": -1}\n',
    b'{"op": "recv_qp", "size": "abc"}\n', b'{"op": "recv_qp", "size": 1e30}\n',
    b'{"op": "recv_qp", "size": 1099511627776000}\n', b'{"op": "recv_qp", "size": true}\n',
    b'{"op": "recv_qp", "size": 4096, "seed": {"a": 1}}\n',
    b'{"op": "send_qp", "peer": "r0h0", "peer_qpn": 1, "rkey": -1, "size": 4096}\n',
    b'{"op": "send_qp", "peer": "r0h0", "peer_qpn": 16777216, "rkey": 1, "size": 4096}\n',
    b'{"op": "send_qp", "peer": "t1-p0-0", "peer_qpn": 1, "rkey": 1, "size": 4096}\n',
    b'{"op": "send_qp", "peer": "r0h0", "peer_qpn": 1, "rkey": 1, "size": 4096, '
    b'"target_ns": 0}\n',
    b'{"op": "send_qp", "peer": "r0h0", "peer_qpn": 1, "rkey": 1, "size": 4096, '
    b'"evs": 100000000}\n',
    b'{"op": "write", "qpn": "x", "size": 1}\n', b'{"op": "write", "qpn": 999999, "size": 1}\n',
    b'{"op": "digest", "qpn": 999999}\n', b'{"op": "close", "qpn": [1]}\n',
    b'{"op": "deny", "qpn": 1, "evs": "abc"}\n', b'{"op": "wait"}\n',
]


def test_hostile_requests_get_an_error_reply_and_the_daemon_serves_on(lab4):
    with raw_client(lab4) as s:
        for line in HOSTILE_REQUESTS:
            reply = ask(s, line)
            assert "error" in reply, (line[:80], reply)
        assert ask(s, b'{"op": "hello", "id": 9}\n')["id"] == 9  # the same connection
    with endpoints.client(lab4.runtime, HOST) as c:
        assert not c.stats()["send_qps"], "a refused send_qp registered a QP"


def test_a_write_outside_its_source_buffer_is_refused(lab4):
    with endpoints.client(lab4.runtime, PEER) as rx, endpoints.client(lab4.runtime, HOST) as c:
        r = rx.recv_qp(size=4096)
        s = c.send_qp(peer=PEER, peer_qpn=r["qpn"], rkey=r["rkey"], size=4096)
        with raw_client(lab4) as raw:
            for args in ({"size": 4097}, {"size": 1, "offset": 4096}, {"size": 1, "offset": -1},
                         {"size": 10, "imm": 1 << 32}):
                reply = ask(raw, json.dumps({"op": "write", "qpn": s["qpn"], **args}).encode()
                            + b"\n")
                assert "error" in reply, (args, reply)
        c.close_qp(s["qpn"])
        rx.close_qp(r["qpn"])


def test_a_ten_megabyte_line_is_cut_off_not_buffered(lab4):
    with raw_client(lab4, timeout=10) as s:
        chunk = b"x" * (1 << 20)
        got = b""
        try:
            for _ in range(10):
                s.sendall(chunk)
        except (BrokenPipeError, ConnectionResetError):
            pass  # it hung up on us: that is the point
        try:
            while len(got) < 1 << 16:
                data = s.recv(65536)
                if not data:
                    break
                got += data
        except ConnectionResetError:
            pass
    if got:
        assert "longer than" in json.loads(got.split(b"\n", 1)[0])["error"]
    still_serves(lab4)


def test_clients_that_vanish_mid_request_or_mid_reply_cost_nothing(lab4):
    # mid-request: half a request, then gone
    with raw_client(lab4) as s:
        s.sendall(b'{"op":"stats"')
    # mid-reply: a wait on a busy QP, then gone before the reply
    size = 64 << 20
    with endpoints.client(lab4.runtime, PEER) as rx, endpoints.client(lab4.runtime, HOST) as tx:
        r = rx.recv_qp(size=size)
        s = tx.send_qp(peer=PEER, peer_qpn=r["qpn"], rkey=r["rkey"], size=size)
        rx.connect(qpn=r["qpn"], peer=HOST, peer_qpn=s["qpn"])
        tx.write(qpn=s["qpn"], size=size, imm=1)
        with raw_client(lab4) as w:
            w.sendall(json.dumps({"op": "wait", "qpn": s["qpn"]}).encode() + b"\n")
        # a client that asks for a lot and never reads: it must not stall the endpoint
        lazy = raw_client(lab4)
        lazy.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        lazy.sendall(b'{"op": "stats"}\n' * 2000)
        t0 = time.monotonic()
        done = tx.wait(qpn=s["qpn"], timeout=60)
        assert done["idle"] and not done["failed"], done
        assert time.monotonic() - t0 < 30
        assert tx.hello()["host"] == HOST
        lazy.close()
        a, b = (tx.digest(qpn=s["qpn"])["sha256"],
                rx.digest(qpn=r["qpn"])["sha256"])
        assert a == b
        tx.close_qp(s["qpn"])
        rx.close_qp(r["qpn"])
    with endpoints.client(lab4.runtime, HOST) as c:
        assert c.guards()["intact"]
