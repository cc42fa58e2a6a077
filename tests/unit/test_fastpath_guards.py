"""The compiled module's types defend themselves (docs/transport-core.md, DESIGN 7).

- An object whose __init__ did not run (T.__new__(T)) or failed part-way refuses every
  method, getter and setter with a RuntimeError; before, the first call divided by a
  zero MTU (SIGFPE) or followed a NULL (SIGSEGV). A failed __init__ may be retried; a
  second one on a ready object is refused. TxPacket cannot be made from Python at all.
- parse takes a contiguous buffer; a strided view is refused, not read past its end.
- TxBatch.post holds each TxPacket while the template-miss callback runs, and takes a
  slot only after the Python it calls: a callback that empties the list, or fills the
  batch, cannot make it use freed memory or write past the batch.
- A Python object whose truth raises gives its error, as in the reference, instead of
  being taken as true (and a SystemError later).

What could crash runs in a child interpreter, so that a crash fails the test instead of
killing pytest.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from twin.mrc import core, wire
from twin.mrc import transport as T
from twin.mrc.evset import EvSet

pytest.importorskip("twin.mrc._fastpath")
fp = core.compiled()  # bound to what its C uses
ROOT = Path(__file__).resolve().parents[2]


def _child(script: str) -> list[str]:
    """Run `script` in a fresh interpreter; its stdout lines. A crash (a signal) or an
    uncaught exception fails the test with what it printed so far."""
    run = subprocess.run([sys.executable, "-c", textwrap.dedent(script)], cwd=ROOT,
                         capture_output=True, text=True, timeout=120)
    out = run.stdout.splitlines()
    assert run.returncode == 0, (f"the child exited {run.returncode} (negative: killed by "
                                 f"that signal) after:\n" + "\n".join(out[-15:])
                                 + "\n" + run.stderr[-2000:])
    return out


# For every type: (the arguments of a good __init__, the __init__s that fail and where,
# plausible arguments for each method, a look at a ready one). A method this table does
# not name fails the test: a new one must say how it is called.
PROBE = """
import gc
import sys
from twin.mrc import transport as T, wire
from twin.mrc.core import compiled
fp = compiled()
from twin.mrc.evset import EvSet

SRC, DST = "fd00:4d52:43::1", "fd00:4d52:43:1::1"
tpl = wire.DataTemplate(SRC, "fcbb:bb00:100::", SRC, DST, 0x10, 9, 3)
head, seed = tpl.head(1, False)

def evset():
    return EvSet([0, 1], 2, seed=1)

def no_paths():  # mrc divides the first window by the paths: 0 of them
    e = evset()
    e.paths_per_plane = 0
    return e

def all_down():  # single-path draws its EV last: none is usable
    e = evset()
    e.planes_down.update(e.planes)
    return e

ev = evset().active[0]

def ring_args(cap=2):
    e = evset()
    return ((e.active, e.planes_down, e.paths, {p: set() for p in e.planes}, cap), {})
placed = bytearray(64)  # a failed Receiver must not keep it exported (unresizable)
sack = T.SackReport(cum=0, bitmap=0, ev=ev.value, psn=0, tries=0)
pkt = T.RxPacket(psn=0, va=0, payload=b"x", imm=None, ev=1, tries=0)
txp = T.TxPacket(0, 0x10, 0, memoryview(b"x"), 0, True, None)

TYPES = {
    "Sender": (
        lambda: ((evset(), 0), {}),
        {"bad mode": lambda: ((evset(), 0, T.SenderConfig(mode="x")), {}),
         "mtu 0, after the config": lambda: ((evset(), 0, T.SenderConfig(mtu=0)), {}),
         "not an EV set, after the config": lambda: ((object(), 0), {}),
         "no paths, after the log, bins and EV set's handler": lambda: ((no_paths(), 0), {}),
         "no usable EV, at the very end": lambda: (
             (all_down(), 0, T.SenderConfig(mode="single-path")), {})},
        {"post": (100,), "poll": (0, memoryview(bytearray(4096))), "on_sack": (sack, 0),
         "on_nack": (0, 0), "on_timer": (0,), "on_cnp": (0,), "wants_to_send": (),
         "next_send_ns": (0,), "set_local_ports": (0xFFFE,), "probe_result": (1, True, 0),
         "deny": ([1], 0), "planes_in_use": (), "reorder_window_ns": (), "tail_probe_ns": (),
         "ev_changed": (ev, "GOOD", "BAD", "why")},
        lambda s: s.cum == 0 and s.poll(0, memoryview(bytes(8))) == []),
    "Receiver": (
        lambda: ((bytearray(64),), {}),
        {"span 0": lambda: ((bytearray(64),), {"span": 0}),
         "port_state, after the buffer": lambda: ((placed,), {"port_state": 7}),
         "port_state, after the placer": lambda: ((lambda va, p: None,), {"port_state": 7}),
         "read-only buffer": lambda: ((b"x",), {})},
        {"on_data": (pkt,), "on_trimmed": (pkt,), "flush": (pkt,)},
        lambda r: r.cum == 0 and r.span > 0),
    "TxBatch": (
        lambda: ((-1, 4), {}),
        {"capacity 0": lambda: ((-1, 0), {})},
        {"post": ([txp], {}, lambda e: tpl, "tag"),
         "data": (head, seed, 0, 0, 3, b"x", None, "tag"), "flush": (),
         "post_sender": (fp.Sender(evset(), 0), 0, memoryview(b"x"), 4, {},
                         lambda e: tpl, "tag")},
        lambda q: q.queued == 0 and q.flush() == []),
    "EvRing": (
        ring_args,
        {"cap not a number, after the slots": lambda: ring_args("x")},
        {"next": (), "end_of_rotation": (), "sent_unproven": (ev,), "gone": (ev,),
         "delivered": (ev, 0), "update_proving": (), "capped": ()},
        lambda r: r.cursor == 0 and r.next() is not None),
    "RxRing": (
        lambda: ((-1, bytes(16)), {}),
        {"local of 3 bytes": lambda: ((-1, b"abc"), {}),
         "slots 0": lambda: ((-1, bytes(16)), {"slots": 0})},
        {"recv": (), "bind": (3, fp.Receiver(bytearray(64)), 7), "unbind": (3,), "last": (3,),
         "wait": (-1, 0, 0), "acks": (-1, None, 0xFFF), "flush_sacks": (),
         "bind_sender": (1, fp.Sender(evset(), 0)), "unbind_sender": (1,)},
        lambda r: r.counters == (0, 0)),
}

def probe(name, state, obj, calls, settable):
    for attr in sorted(dir(type(obj))):
        if attr.startswith("__"):
            continue
        where = f"{name}.{attr} ({state})"
        kind = type(getattr(type(obj), attr)).__name__
        try:
            if kind in ("method_descriptor", "builtin_function_or_method"):
                if attr not in calls:
                    print("MISSING", where, "has no plausible arguments in PROBE", flush=True)
                    continue
                print("call", where, flush=True)
                got = getattr(obj, attr)(*calls[attr])
            else:
                print("get", where, flush=True)
                got = getattr(obj, attr)
        except RuntimeError as e:
            ok = "not initialised" in str(e) and name in str(e)
            print("ok" if ok else "BAD", where, e, flush=True)
        except BaseException as e:
            print("BAD", where, "raised", repr(e), flush=True)
        else:
            print("BAD", where, "gave", repr(got)[:80], flush=True)
        if attr in settable:
            try:
                setattr(obj, attr, 1.0)
            except RuntimeError as e:
                print("ok set", where, e, flush=True)
            except BaseException as e:
                print("BAD set", where, "raised", repr(e), flush=True)
            else:
                print("BAD set", where, "took it", flush=True)

for name, (good_args, failing, calls, works) in TYPES.items():
    cls = getattr(fp, name)
    a, kw = good_args()
    good = cls(*a, **kw)
    settable = set()
    for attr in dir(cls):  # what a ready object lets be set: set to what it holds
        if not attr.startswith("__") and type(getattr(cls, attr)).__name__ == "getset_descriptor":
            try:
                setattr(good, attr, getattr(good, attr))
                settable.add(attr)
            except AttributeError:
                pass
    print("settable", name, sorted(settable), flush=True)
    probe(name, "blank", cls.__new__(cls), calls, settable)
    for why, args in failing.items():
        obj = cls.__new__(cls)
        a, kw = args()
        try:
            obj.__init__(*a, **kw)
        except Exception as e:
            print("init failed", name, why, type(e).__name__, flush=True)
        else:
            print("BAD init took", name, why, flush=True)
        # what it had taken is released (the GC types say what they hold)
        print("holds", len(gc.get_referents(obj)), name, why, flush=True)
        try:
            placed.append(0)  # a buffer still exported cannot be resized
            print("ok not exported", name, why, flush=True)
        except BufferError as e:
            print("BAD still exported", name, why, e, flush=True)
        probe(name, f"failed: {why}", obj, calls, settable)
        # a failed __init__ leaves it blank: it may run again, and then it is ready
        a, kw = good_args()
        obj.__init__(*a, **kw)
        print("retried" if works(obj) else "BAD retried", name, why, flush=True)
    a, kw = good_args()
    try:
        good.__init__(*a, **kw)
    except (RuntimeError, TypeError) as e:
        print("ok once", name, e, flush=True)
    else:
        print("BAD once", name, "took a second __init__", flush=True)

for make in (lambda: fp.TxPacket(), lambda: fp.TxPacket.__new__(fp.TxPacket)):
    try:
        p = make()
    except TypeError as e:
        print("ok TxPacket cannot be made:", e, flush=True)
    else:
        print("BAD TxPacket made", flush=True)
        probe("TxPacket", "made", p, {}, set())
print("done", flush=True)
"""


def test_an_object_that_is_not_ready_refuses_every_method_getter_and_setter():
    out = _child(PROBE)
    assert out[-1] == "done"
    bad = [line for line in out if line.startswith(("BAD", "MISSING"))]
    assert not bad, "\n".join(bad)
    checked = [line for line in out if line.startswith("ok")]
    for name, attrs in (("Sender", ("post", "poll", "on_sack", "window", "cfg", "stats")),
                        ("Receiver", ("on_data", "span", "nacks", "place", "stats")),
                        ("TxBatch", ("post", "data", "flush", "queued", "plane_bytes")),
                        ("RxRing", ("recv", "counters", "bind", "unbind", "bound", "last", "wait",
                                    "plane_bytes", "acks", "flush_sacks", "port_bitmap",
                                    "ack_counters")),
                        ("EvRing", ("next", "delivered", "cursor", "proving", "unproven_cap"))):
        for attr in attrs:
            assert any(f" {name}.{attr} (blank)" in line for line in checked), (name, attr)
            assert any(f" {name}.{attr} (failed:" in line for line in checked), (name, attr)
    assert "settable Sender ['base_rtt', 'delay_ns', 'reordering_ns', 'rttvar', 'srtt', " \
        "'window']" in out
    assert sum(line.startswith("ok set Sender.window") for line in out) == 6
    # each failing __init__ failed where it was meant to, and could be run again
    for line in ("init failed Sender bad mode ValueError",
                 "init failed Sender mtu 0, after the config ValueError",
                 "init failed Sender not an EV set, after the config AttributeError",
                 "init failed Sender no paths, after the log, bins and EV set's handler "
                 "ZeroDivisionError",
                 "init failed Sender no usable EV, at the very end NoUsableEv",
                 "init failed Receiver span 0 ValueError",
                 "init failed Receiver port_state, after the buffer TypeError",
                 "init failed Receiver read-only buffer TypeError",
                 "init failed TxBatch capacity 0 ValueError",
                 "init failed RxRing local of 3 bytes ValueError",
                 "init failed RxRing slots 0 ValueError",
                 "init failed EvRing cap not a number, after the slots TypeError",
                 "retried EvRing cap not a number, after the slots",
                 "retried Sender no usable EV, at the very end",
                 "init failed Receiver port_state, after the placer TypeError",
                 "retried Receiver port_state, after the buffer"):
        assert line in out
    holding = [line for line in out if line.startswith("holds") and line[6:8] != "0 "]
    assert not holding, holding
    assert sum(line.startswith(("holds 0 Sender", "holds 0 Receiver")) for line in out) == 9
    assert sum(line.startswith("ok once") for line in out) == 5
    assert sum(line.startswith("ok set EvRing.") for line in out) == 4  # cap, on_alive
    assert sum(line.startswith("ok TxPacket cannot be made") for line in out) == 2


def test_parse_refuses_a_strided_buffer_and_slices_in_bytes():
    tpl = wire.DataTemplate("::1", "::1", "fd00::1", "fd00::2", 0x10, 9, 3)
    frame = tpl.build(5, 1 << 20, bytes(range(64)), 0, False, None)
    _, _, _, _, src, dst = wire.IP6.unpack_from(frame, wire.IP6.size)  # the inner header
    flow = wire.IP6.unpack_from(frame, wire.IP6.size)[0] & wire.FLOW_MASK
    data, sport = frame[wire.HEADROOM:], wire.UDP.unpack_from(frame, 80)[0]
    whole = fp.parse(data, src, dst, sport, flow)
    assert whole[0] == 1 and bytes(whole[5]) == bytes(range(64))
    backwards = data[::-1]
    for strided in (memoryview(data)[::2], memoryview(backwards)[::-1],
                    memoryview(bytearray(data * 2))[::2]):
        with pytest.raises((BufferError, TypeError)):
            fp.parse(strided, src, dst, sport, flow)
    # a contiguous view of another item size: the payload is still its bytes
    assert len(data) % 2 == 0
    wide = fp.parse(memoryview(data).cast("H"), src, dst, sport, flow)
    assert bytes(wide[5]) == bytes(range(64)) and wide[:5] == whole[:5]


POST_MUTATED = """
from twin.mrc import transport as T, wire
from twin.mrc.core import compiled
fp = compiled()

log = []
tpl = wire.DataTemplate("::1", "::1", "fd00::1", "fd00::2", 0x10, 9, 3)

class Tx:
    '''A TxPacket that says when it is read and when it goes.'''
    def __init__(self, psn):
        self.psn, self.ev, self.va, self.tries = psn, 0x10, 0, 0
        self.ack_req, self.imm = False, None
        self._payload = memoryview(bytes(8))
    @property
    def payload(self):
        log.append(("read", self.psn))
        return self._payload
    def __del__(self):
        log.append(("gone", self.psn))

txs = [Tx(1), Tx(2)]

def miss(ev):  # the template-miss callback empties the window it came from
    txs.clear()
    for _ in range(1000):  # reuse the memory of what it freed
        [object() for _ in range(8)]
    return tpl

q = fp.TxBatch(-1, 4)  # fd -1: nothing goes out; the kernel refuses every packet
print("refused", q.post(txs, {}, miss, "t"), flush=True)
print("log", log, flush=True)

# a callback that fills this very batch: the packet being built finds no slot left
q, filler = fp.TxBatch(-1, 2), [T.TxPacket(0, 0x10, 0, memoryview(b"x"), 0, True, None)]
head, seed = tpl.head(1, False)
def fill(ev):
    while q.queued < 2:
        q.data(head, seed, 0, 0, 3, b"x", None, "filled")
    return tpl
try:
    q.post(filler, {}, fill, "posted")
except RuntimeError as e:
    print("refused the fill:", e, flush=True)
print("queued", q.queued, "flushed", q.flush(), flush=True)
print("done", flush=True)
"""


def test_post_survives_a_miss_callback_that_empties_or_fills_its_window():
    out = _child(POST_MUTATED)
    assert out[-1] == "done"
    # The callback emptied the list (the second packet went at once); the first, held,
    # was read after that and went only when post was done with it.
    assert "log [('gone', 2), ('read', 1), ('gone', 1)]" in out, out
    assert "refused ['t']" in out  # fd -1: the kernel refuses it, its tag comes back
    assert any(line.startswith("refused the fill: TxBatch.post: the batch was filled")
               for line in out), out
    assert "queued 0 flushed []" in out or "queued 2 flushed ['filled', 'filled']" in out


class _Raises:
    """A value whose truth cannot be told."""

    def __bool__(self) -> bool:
        raise ValueError("no truth here")


@pytest.mark.parametrize("sender_class", [T.Sender, fp.Sender], ids=["reference", "compiled"])
def test_a_truth_that_raises_is_an_error_not_true(sender_class):
    evs = EvSet([0, 1], 2, seed=1)
    s = sender_class(evs, 0)
    for path in evs.paths.values():
        path.proven = _Raises()  # every path unproven, as far as next() can tell
    s.post(4096 * 4)
    with pytest.raises(ValueError, match="no truth here"):
        s.poll(0, memoryview(bytes(4096 * 4)))
    s = sender_class(EvSet([0, 1], 2, seed=1), 0)
    s.evs.probe_result = lambda value, ok: _Raises()
    with pytest.raises(ValueError, match="no truth here"):
        s.probe_result(1, True, 0)
