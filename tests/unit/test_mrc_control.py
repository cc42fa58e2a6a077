"""The endpoint's control protocol (twin.mrc.control): its one table of ops, the
server's handlers and the typed client kept in step with it, and the argument checks
the table drives, with the error messages the endpoint has always replied. No
daemon, no root: a fake loop for the checks, a socketpair for the client."""

import inspect
import json
import math
import socket
from pathlib import Path
from types import SimpleNamespace

import pytest

from twin.errors import LabError
from twin.fabric.model import build_fabric
from twin.fabric.spec import load_spec
from twin.mrc import control as C
from twin.mrc.server import ControlServer

ROOT = Path(__file__).resolve().parents[2]
SEND, RECV = 1, 2  # the fake loop's QPs, each with a 4096-byte buffer
METHOD = {"close": "close_qp"}  # close() closes the connection


@pytest.fixture(scope="module")
def loop():
    fabric = build_fabric(load_spec(ROOT / "lab/fabrics/mrc-4p.yml"))
    qp = lambda qpn: SimpleNamespace(qpn=qpn, buffer=memoryview(bytearray(4096)))  # noqa: E731
    return SimpleNamespace(fabric=fabric, send_qps={SEND: qp(SEND)}, recv_qps={RECV: qp(RECV)})


def check(loop, req: dict) -> dict:
    return C.parse(C.op_of(req), req, loop)


# -- one table, one handler per op, one client method per op --------------------------------


def test_every_op_has_a_handler_and_every_handler_an_op():
    handlers = {n.removeprefix("op_") for n in dir(ControlServer) if n.startswith("op_")}
    assert handlers == set(C.OPS)


def test_the_client_has_one_method_per_op_with_the_tables_arguments():
    for name, op in C.OPS.items():
        params = inspect.signature(getattr(C.EndpointClient, METHOD.get(name, name))).parameters
        assert list(params)[0] == "self"
        assert params["timeout"].kind is inspect.Parameter.KEYWORD_ONLY, name
        assert set(params) - {"self", "timeout"} == {a.name for a in op.args}, name
        for a in op.args:  # required in the table: required by the method, and no other
            required = params[a.name].default is inspect.Parameter.empty
            assert required == (a.default is C.REQUIRED), (name, a.name)


def test_every_arg_has_a_known_kind_and_ordered_bounds():
    for op in C.OPS.values():
        assert len({a.name for a in op.args}) == len(op.args), op.name
        for a in op.args:
            assert a.kind in ("int", "number", "seed", "choice", "bool", "host", "send_qp",
                              "recv_qp", "qp", "evs"), (op.name, a.name)
            if a.kind in ("int", "number") and not isinstance(a.hi, C.Limit):
                assert a.lo <= a.hi, (op.name, a.name)


# -- the client sends what the table describes ------------------------------------------------

CALLS = [  # (method, args, kwargs, the request's arguments, in the table's order)
    ("hello", (), {}, {}),
    ("recv_qp", (4096,), {}, {"size": 4096}),
    ("recv_qp", (), {"size": 8, "seed": "s"}, {"size": 8, "seed": "s"}),
    ("recv_qp", (8,), {"transport": "python"}, {"size": 8, "transport": "python"}),
    ("send_qp", ("r1h0", 3, 0xABC, 4096), {"mode": "single-path", "seed": 7, "target_ns": 5e4},
     {"peer": "r1h0", "mode": "single-path", "size": 4096, "peer_qpn": 3, "rkey": 0xABC,
      "seed": 7, "target_ns": 5e4}),
    ("connect", (), {"qpn": 2, "peer": "r0h0", "peer_qpn": 1},
     {"qpn": 2, "peer_qpn": 1, "peer": "r0h0"}),
    ("deny", (1, [5, 6]), {}, {"qpn": 1, "evs": [5, 6]}),
    ("write", (1, 100), {"imm": 0}, {"qpn": 1, "size": 100, "imm": 0}),
    ("write", (1, 100, 8), {}, {"qpn": 1, "size": 100, "offset": 8}),
    ("wait", (1,), {"timeout": 5}, {"qpn": 1}),
    ("digest", (2,), {"offset": 16}, {"qpn": 2, "offset": 16}),
    ("guards", (), {}, {}),
    ("events", (1,), {}, {"qpn": 1}),
    ("stats", (), {"timeout": 3}, {}),
    ("metrics", (), {}, {}),
    ("close_qp", (1,), {}, {"qpn": 1}),
]


def test_the_client_sends_exactly_the_request_the_table_describes():
    ours, theirs = socket.socketpair()
    with ours, theirs, C.EndpointClient("fake", timeout=5, sock=ours) as client:
        theirs.settimeout(5)
        for n, (method, args, kwargs, want) in enumerate(CALLS, 1):
            op = "close" if method == "close_qp" else method
            reply = {"id": n, **{k: method for k in C.OPS[op].reply}}  # the table's shape
            theirs.sendall(json.dumps(reply).encode() + b"\n")  # ahead
            assert getattr(client, method)(*args, **kwargs) == reply
            line = b""
            while not line.endswith(b"\n"):
                chunk = theirs.recv(65536)
                assert chunk, method
                line += chunk
            req = json.loads(line)
            op = req.pop("op")
            assert op == ("close" if method == "close_qp" else method)
            assert req.pop("id") == n
            assert req == want and list(req) == list(want), (method, req)
            assert list(req) == [a.name for a in C.OPS[op].args if a.name in req]  # order


def test_the_client_raises_the_error_a_reply_carries_and_skips_stale_replies():
    ours, theirs = socket.socketpair()
    with ours, theirs, C.EndpointClient("fake", timeout=5, sock=ours) as client:
        theirs.sendall(b'{"id": 1, "error": "ValueError: no sending QP 9"}\n')
        with pytest.raises(LabError, match="fake: wait: ValueError: no sending QP 9"):
            client.wait(9)
        hello = {"id": 2, **dict.fromkeys(C.OPS["hello"].reply, 0), "host": "r0h0"}
        theirs.sendall(b'{"id": 1, "late": true}\n' + json.dumps(hello).encode() + b"\n")
        assert client.hello() == hello


def test_a_reply_lacking_a_key_of_the_table_is_an_error_naming_them():
    """An endpoint of another version (a node image built before a change) is told apart
    from one that answered: the reply must carry every key its op names."""
    ours, theirs = socket.socketpair()
    with ours, theirs, C.EndpointClient("fake", timeout=5, sock=ours) as client:
        theirs.sendall(b'{"id": 1, "qpn": 4}\n')
        with pytest.raises(LabError, match=r"fake: recv_qp: the reply lacks rkey \(its keys: "
                                           r"id, qpn\).*twin images build"):
            client.recv_qp(4096)
        extra = {"id": 2, **dict.fromkeys(C.OPS["metrics"].reply, ""), "more": 1}
        theirs.sendall(json.dumps(extra).encode() + b"\n")
        assert client.metrics() == extra  # keys the table does not name are fine


def test_call_raw_sends_anything():
    ours, theirs = socket.socketpair()
    with ours, theirs, C.EndpointClient("fake", timeout=5, sock=ours) as client:
        theirs.sendall(b'{"id": 1, "error": "ValueError: unknown op \'nope\'"}\n')
        with pytest.raises(LabError):
            client.call_raw("nope", size="abc")
        assert json.loads(theirs.recv(65536)) == {"op": "nope", "id": 1, "size": "abc"}


# -- the checks the table drives: the endpoint's error messages, word for word ---------------

HOSTILE = [  # (request, the error message the endpoint replies, as it always has)
    ({"op": "no-such-op"}, "unknown op 'no-such-op'"),
    ({}, "unknown op 'None'"),
    ({"op": [1]}, "unknown op '[1]'"),
    ({"op": "recv_qp"}, "missing argument 'size'"),
    ({"op": "recv_qp", "size": "abc"}, "size must be an integer, not 'abc'"),
    ({"op": "recv_qp", "size": True}, "size must be an integer, not 'True'"),
    ({"op": "recv_qp", "size": 1e30}, "size must be an integer, not '1e+30'"),
    ({"op": "recv_qp", "size": 4096, "seed": {"a": 1}},
     "seed must be an integer or a short string, not \"{'a': 1}\""),
    ({"op": "recv_qp", "size": 4096, "seed": None},
     "seed must be an integer or a short string, not 'None'"),
    ({"op": "recv_qp", "size": 4096, "seed": "x" * 257},
     f"seed must be an integer or a short string, not {'x' * 40!r}"),
    ({"op": "send_qp", "peer": "t1-p0-0", "peer_qpn": 1, "rkey": 1, "size": 4096},
     "peer must name a host of mrc-4p, not 't1-p0-0'"),
    ({"op": "send_qp", "peer_qpn": 1, "rkey": 1, "size": 4096},
     "peer must name a host of mrc-4p, not 'None'"),
    ({"op": "send_qp", "peer": "r0h0", "mode": "fast", "size": 4096},
     "mode must be one of mrc, spray-static, single-path"),
    ({"op": "send_qp", "peer": "r0h0", "peer_qpn": 1, "rkey": -1, "size": 4096},
     "rkey must be in 0..4294967295, got -1"),
    ({"op": "send_qp", "peer": "r0h0", "peer_qpn": 16777216, "rkey": 1, "size": 4096},
     "peer_qpn must be in 0..16777215, got 16777216"),
    ({"op": "send_qp", "peer": "r0h0", "peer_qpn": 1, "rkey": 1, "size": 4096,
      "evs": 100000000}, "evs must be in 1..4096, got 100000000"),
    ({"op": "send_qp", "peer": "r0h0", "peer_qpn": 1, "rkey": 1, "size": 4096,
      "target_ns": 0}, "target_ns must be a number in 1..60000000000, not '0'"),
    ({"op": "send_qp", "peer": "r0h0", "peer_qpn": 1, "rkey": 1, "size": 4096,
      "init_window": math.nan}, "init_window must be a number in 1..65536, not 'nan'"),
    ({"op": "send_qp", "peer": "r0h0", "peer_qpn": 1, "rkey": 1, "size": 4096,
      "cc": "cubic"}, "cc must be one of nscc, delay, dcqcn"),
    ({"op": "send_qp", "peer": "r0h0", "peer_qpn": 1, "rkey": 1, "size": 4096,
      "ecn": "yes"}, "ecn must be true or false, not 'yes'"),
    ({"op": "send_qp", "peer": "r0h0", "peer_qpn": 1, "rkey": 1, "size": 4096,
      "trim": 1}, "trim must be true or false, not '1'"),
    ({"op": "send_qp", "peer": "r0h0", "peer_qpn": 1, "rkey": 1, "size": 4096,
      "transport": "auto"}, "transport must be one of compiled, python"),
    ({"op": "recv_qp", "size": 4096, "transport": None},
     "transport must be one of compiled, python"),
    ({"op": "connect", "qpn": SEND, "peer": "r0h0", "peer_qpn": 1}, "no receiving QP 1"),
    ({"op": "connect", "qpn": RECV, "peer": "r0h0"}, "missing argument 'peer_qpn'"),
    ({"op": "write", "qpn": "x", "size": 1}, "qpn must be an integer, not 'x'"),
    ({"op": "write", "qpn": 999999, "size": 1}, "no sending QP 999999"),
    ({"op": "write", "qpn": RECV, "size": 1}, "no sending QP 2"),
    ({"op": "write", "qpn": -1, "size": 1}, f"qpn must be in 0..{1 << 62}, got -1"),
    ({"op": "write", "qpn": SEND, "size": 4097}, "size must be in 1..4096, got 4097"),
    ({"op": "write", "qpn": SEND, "size": 1, "offset": 4096},
     "offset must be in 0..4095, got 4096"),
    ({"op": "write", "qpn": SEND, "size": 1, "offset": -1}, "offset must be in 0..4095, got -1"),
    ({"op": "write", "qpn": SEND, "size": 1, "offset": None},
     "offset must be an integer, not 'None'"),
    ({"op": "write", "qpn": SEND, "size": 10, "imm": 1 << 32},
     "imm must be in 0..4294967295, got 4294967296"),
    ({"op": "digest", "qpn": 999999}, "no receiving QP 999999"),
    ({"op": "digest", "qpn": RECV, "offset": 4097}, "offset must be in 0..4096, got 4097"),
    ({"op": "digest", "qpn": RECV, "offset": 96, "size": 4001},
     "size must be in 0..4000, got 4001"),
    ({"op": "close", "qpn": [1]}, "qpn must be an integer, not '[1]'"),
    ({"op": "deny", "qpn": SEND, "evs": "abc"}, "evs must be a list of at most 65536 EVs"),
    ({"op": "deny", "qpn": SEND, "evs": [0] * 65537}, "evs must be a list of at most 65536 EVs"),
    ({"op": "deny", "qpn": SEND, "evs": [1, -1]}, "ev must be in 0..4294967295, got -1"),
    ({"op": "deny", "qpn": SEND, "evs": [True]}, "ev must be an integer, not 'True'"),
    ({"op": "wait"}, "missing argument 'qpn'"),
    ({"op": "events", "qpn": RECV}, "no sending QP 2"),
]


@pytest.mark.parametrize(("req", "message"), HOSTILE, ids=lambda x: str(x)[:60])
def test_a_bad_request_is_refused_with_the_endpoints_own_message(loop, req, message):
    with pytest.raises(ValueError) as e:
        check(loop, req)
    assert str(e.value) == message


@pytest.mark.parametrize("size", [-1, 0, 1 << 70])
def test_a_buffer_is_capped_by_the_memory_there_is(loop, size):
    with pytest.raises(ValueError, match=rf"^size must be in 1\.\.\d+, got {size}$"):
        check(loop, {"op": "recv_qp", "size": size})
    assert 0 < C.buffer_limit() <= C.MAX_BUFFER


def test_defaults_are_filled_in_and_qp_numbers_become_their_qps(loop):
    a = check(loop, {"op": "write", "qpn": SEND, "size": 10})
    assert a == {"qpn": loop.send_qps[SEND], "size": 10, "offset": 0, "imm": None}
    assert check(loop, {"op": "write", "qpn": SEND, "size": 10, "imm": None})["imm"] is None
    assert check(loop, {"op": "digest", "qpn": RECV})["size"] == 4096
    assert check(loop, {"op": "digest", "qpn": RECV, "offset": 96})["size"] == 4000
    assert check(loop, {"op": "digest", "qpn": SEND})["qpn"] is loop.send_qps[SEND]
    a = check(loop, {"op": "send_qp", "peer": "r1h0", "peer_qpn": 3, "rkey": 4, "size": 64,
                     "max_window": 32, "extra": "ignored"})
    assert a == {"peer": loop.fabric.node("r1h0"), "mode": "mrc", "size": 64, "peer_qpn": 3,
                 "rkey": 4, "evs": 128, "seed": 0, "max_window": 32}
    assert check(loop, {"op": "deny", "qpn": SEND, "evs": [1, 2]})["evs"] == [1, 2]
    assert check(loop, {"op": "close", "qpn": 77}) == {"qpn": 77}  # any number: no lookup


def test_send_qp_takes_the_congestion_control_and_its_signals(loop):
    got = check(loop, {"op": "send_qp", "peer": "r0h0", "peer_qpn": 1, "rkey": 1,
                       "size": 4096, "cc": "delay", "ecn": False, "trim": True})
    assert (got["cc"], got["ecn"], got["trim"]) == ("delay", False, True)
    got = check(loop, {"op": "send_qp", "peer": "r0h0", "peer_qpn": 1, "rkey": 1,
                       "size": 4096})
    assert not {"cc", "ecn", "trim"} & set(got)  # omitted: SenderConfig's defaults


def test_a_qp_may_ask_for_either_transport_and_omitted_runs_the_endpoints(loop):
    got = check(loop, {"op": "send_qp", "peer": "r0h0", "peer_qpn": 1, "rkey": 1,
                       "size": 4096, "transport": "python"})
    assert got["transport"] == "python"
    assert check(loop, {"op": "recv_qp", "size": 64, "transport": "compiled"})["transport"] \
        == "compiled"
    assert "transport" not in check(loop, {"op": "recv_qp", "size": 64})


def test_a_connection_that_breaks_is_an_error_naming_the_op_not_an_oserror():
    """An endpoint that ends mid-conversation: LabError, which the CLI prints (click
    swallows a bare EPIPE and exits 1 without a word)."""
    ours, theirs = socket.socketpair()
    theirs.close()
    with ours, C.EndpointClient("fake", timeout=5, sock=ours) as client:
        with pytest.raises(LabError, match=r"^endpoint fake: the connection broke during "
                                           r"hello \(Broken pipe\): did the endpoint end\?$"):
            client.hello()
