"""Which transport an endpoint runs: the compiled core, or the Python reference.

Two implementations of one behaviour (docs/transport-core.md):
    compiled   twin.mrc._fastpath.Sender and .Receiver, in C (_sender.c, _receiver.c),
               built with the data path by `pip install -e .`: per-packet records,
               the SACK walk, loss detection, the window; the EV set, the event log
               and the stats objects stay the Python ones. The default where built.
    python     twin.mrc.transport.Sender and .Receiver: the readable specification.
               Where the compiled module does not load, or with
               MRC_TWIN_TRANSPORT=python.

The compiled core imports nothing of twin itself: what it uses of the reference (its
classes, functions and constants) is handed to it by `bindings()` through the module's
bind(), once (`compiled()`, the one way to the module for whatever makes its Sender or
Receiver), so that its Python dependencies are written here, where the layer test
(tests/unit/test_layers.py) reads them.

An endpoint runs one of them for its QPs; a QP may ask for the other (the `transport`
argument of the `send_qp` and `recv_qp` control ops), so both can run side by side in
one lab (`twin fuzz` attacks a sender of each). Each QP's stats name the one it runs.

The two are held equal by tests/unit/test_transport_differential.py: the same recorded
inputs (twin.mrc.trace) must give the same decisions, packet for packet.

A compiled module built from other sources than those beside it is stale
(`stale_build`: the hash it carries against the tree's, twin.mrc.build_hash): `auto`
then runs the reference and says why, `compiled` refuses to start. The same holds for
the data path (twin.mrc.loop.load_datapath): one module holds both.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass
from types import ModuleType

from twin.errors import UsageError
from twin.mrc import build_hash, cc, dcqcn, evset, modes, transport

TRANSPORTS = ("auto", "compiled", "python")
TRANSPORT_ENV = "MRC_TWIN_TRANSPORT"


@dataclass(frozen=True)
class Transport:
    """The Sender and Receiver classes an endpoint builds its QPs with, and what to
    call them in `hello`, `twin stats` and the endpoint's log."""

    sender: type
    receiver: type
    name: str  # "compiled", or "python: why"

    @property
    def compiled(self) -> bool:
        return self.name == "compiled"


REFERENCE = Transport(transport.Sender, transport.Receiver, "python: asked for")
LOAD_HINT = "; `pip install -e .` builds it with gcc"


@functools.cache
def tree_hash() -> str | None:
    """The hash of the module's sources beside it (None: they are not there), read once
    per process: an endpoint starts once, a test process asks many times."""
    return build_hash.sources_hash()


def stale_build(module: ModuleType) -> str | None:
    """Why the compiled `module` (twin.mrc._fastpath) must not run: it was built from
    other sources than the tree's. None where it is current, or where the sources are
    not there to compare with (a wheel without them: the module is trusted)."""
    tree = tree_hash()
    built = getattr(module, "SOURCES_HASH", "unknown")  # a module from before the hash
    if tree is None or built == tree:
        return None
    return (f"the compiled module is stale (built from sources {built}, the tree has "
            f"{tree}; `make venv` rebuilds it)")


def short_name(name: str) -> str:
    """A transport's name without its why: "compiled" or "python" (what a QP reports)."""
    return name.split(":")[0]


def load_transport(asked: str | None = None, named: str = TRANSPORT_ENV) -> Transport:
    """The transport `asked` for (None: what MRC_TWIN_TRANSPORT asks for): auto (compiled
    where it is built and current), compiled (refuse to run without it), python (the
    reference). `named` is where the choice came from, for the error: the variable, or a
    control request's `transport` argument (a QP of its own, twin.mrc.loop)."""
    asked = asked or os.environ.get(TRANSPORT_ENV, "auto")
    if asked not in TRANSPORTS:
        raise UsageError(f"{named}={asked!r}: want one of {', '.join(TRANSPORTS)}")
    if asked == "python":
        return REFERENCE
    why, hint = None, LOAD_HINT
    try:
        from twin.mrc import _fastpath
    except ImportError as e:
        why = f"the compiled module does not load ({e})"
    else:
        if why := stale_build(_fastpath):
            hint = ""  # the reason says how to rebuild it
        elif not all(hasattr(_fastpath, n) for n in ("Sender", "Receiver", "bind")):
            why = "the compiled module was built without the transport core"
    if why is None:
        module = compiled()
        return Transport(module.Sender, module.Receiver, "compiled")
    if asked == "compiled":
        raise UsageError(f"{named}=compiled, but {why}{hint}")
    return Transport(transport.Sender, transport.Receiver, f"python: {why}")


def bindings() -> dict[str, object]:
    """What the compiled core uses from Python, by the name its C takes it by: every
    class, function and constant of twin that twin.mrc._fastpath depends on, and nothing
    else (its C imports no twin module). Each is written module.name, so that
    tests/unit/test_layers.py reads from here which modules the compiled module depends
    on, and holds them to the layers as it does an import."""
    return {
        # the Sender's
        "Event": transport.Event, "EventLog": transport.EventLog,
        "SenderStats": transport.SenderStats, "SenderConfig": transport.SenderConfig,
        "Msg": transport.Msg, "QpFailed": transport.QpFailed, "weakly": transport.weakly,
        "AckedBins": transport.AckedBins, "Mode": modes.Mode, "Cc": cc.Cc,
        "NoUsableEv": evset.NoUsableEv, "Ev": evset.Ev, "PathState": evset.PathState,
        "EvSet": evset.EvSet, "EvState": evset.EvState,
        "for_sender": dcqcn.for_sender, "wire_bytes": dcqcn.wire_bytes,
        "FRAME_OVERHEAD": dcqcn.FRAME_OVERHEAD,
        "BUILD_CHUNK": transport.BUILD_CHUNK, "LOST_REMEMBERED": transport.LOST_REMEMBERED,
        "REORDER_STEPS_MAX": transport.REORDER_STEPS_MAX,
        "REORDERING_LEARNED": transport.REORDERING_LEARNED,
        "REORDERING_DECAY": transport.REORDERING_DECAY, "TRY_MASK": transport.TRY_MASK,
        "BITMAP_BITS": transport.BITMAP_BITS, "COMPACT_AFTER": transport.COMPACT_AFTER,
        "CNP_SPACING": transport.CNP_SPACING,
        # the Receiver's
        "SackReport": transport.SackReport, "ReceiverStats": transport.ReceiverStats,
        "RECV_WINDOW": transport.RECV_WINDOW, "NACK_DISTANCE": transport.NACK_DISTANCE,
        # both's
        "MESSAGES_KEPT": transport.MESSAGES_KEPT,
        "CONGESTION_ECHO_CE": transport.CONGESTION_ECHO_CE,
        "CONGESTION_COUNT": transport.CONGESTION_COUNT,
    }


def compiled() -> ModuleType:
    """twin.mrc._fastpath, bound (its bind(), with bindings(), the first time): the one
    way to the compiled module for whatever makes a Sender or a Receiver of it, which
    refuses to be made before the bind. ImportError where the module does not load; a
    stale one (stale_build) is the caller's to refuse."""
    from twin.mrc import _fastpath
    if not _fastpath.bound():
        _fastpath.bind(**bindings())
    return _fastpath
