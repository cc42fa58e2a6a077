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
the data path (twin.mrc.loop.load_datapath): one module holds both, and one chooser
(`choose`, given the part: its variable and its words) picks for both.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass
from types import ModuleType

from twin.errors import UsageError
from twin.mrc import build_hash, cc, dcqcn, evset, modes, transport

CHOICES = ("auto", "compiled", "python")  # what MRC_TWIN_TRANSPORT and _DATAPATH take
TRANSPORTS = CHOICES
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


@dataclass(frozen=True)
class Compiled:
    """A part the compiled module may run in place of its Python reference (the transport
    core here, the data path in twin.mrc.loop), as `choose` needs to know it: the
    variable that chooses, and what to say where the module does not serve."""

    env: str  # the variable that asks: auto, compiled or python
    not_loading: str  # why not, where the module does not load ({} is the ImportError)
    refused_not_loading: str  # the same, in the error of a `compiled` that is refused
    needs: tuple[str, ...] = ()  # names the module must have for this part
    lacking: str = ""  # why not, where it lacks one of them


@dataclass(frozen=True)
class Choice:
    module: ModuleType | None  # the compiled module, bound; None: the Python reference
    name: str  # "compiled", or "python: why"


def choose(part: Compiled, asked: str | None = None, named: str | None = None,
           unfit: tuple[str, str] | None = None) -> Choice:
    """The one chooser between the compiled module and the Python reference: `asked`
    (None: what `part.env` asks for) is auto (compiled where it loads, is current and
    has what `part` needs, else the reference, saying why), compiled (a UsageError
    naming `named`, the variable by default, where it would not run) or python.
    `unfit` is (why, hint) where the compiled module cannot serve this caller at all."""
    named = named or part.env
    asked = asked or os.environ.get(part.env, "auto")
    if asked not in CHOICES:
        raise UsageError(f"{named}={asked!r}: want one of {', '.join(CHOICES)}")
    if asked == "python":
        return Choice(None, "python: asked for")
    why_not = (unfit[0], unfit[0], unfit[1]) if unfit else _why_not(part)
    if why_not is None:
        return Choice(compiled(), "compiled")
    why, refused, hint = why_not
    if asked == "compiled":
        raise UsageError(f"{named}=compiled, but {refused}{hint}")
    return Choice(None, f"python: {why}")


def _why_not(part: Compiled) -> tuple[str, str, str] | None:
    """Why the compiled module cannot run `part` (as auto says it, as a refused `compiled`
    says it, and the hint after that), or None where it can. Read before the module is
    bound: a stale one is not bound at all."""
    try:
        from twin.mrc import _fastpath
    except ImportError as e:
        return part.not_loading.format(e), part.refused_not_loading.format(e), LOAD_HINT
    if why := stale_build(_fastpath):
        return why, why, ""  # the reason says how to rebuild it
    if not all(hasattr(_fastpath, n) for n in part.needs):
        return part.lacking, part.lacking, LOAD_HINT
    return None


TRANSPORT = Compiled(TRANSPORT_ENV, "the compiled module does not load ({})",
                     "the compiled module does not load ({})", ("Sender", "Receiver", "bind"),
                     "the compiled module was built without the transport core")


def load_transport(asked: str | None = None, named: str = TRANSPORT_ENV) -> Transport:
    """The transport `asked` for (None: what MRC_TWIN_TRANSPORT asks for): auto (compiled
    where it is built and current), compiled (refuse to run without it), python (the
    reference). `named` is where the choice came from, for the error: the variable, or a
    control request's `transport` argument (a QP of its own, twin.mrc.loop)."""
    chosen = choose(TRANSPORT, asked, named)
    if chosen.module is not None:
        return Transport(chosen.module.Sender, chosen.module.Receiver, chosen.name)
    return Transport(transport.Sender, transport.Receiver, chosen.name)


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
