"""The congestion controls a sending QP can run: `Cc`, the one definition of their names.

`SenderConfig.cc` (twin.mrc.transport), the endpoint's `send_qp` op (`cc`, checked
against Cc by twin.mrc.control), `twin traffic --cc` and a drill file's
`traffic: {cc: ...}` all take their choices from here; a new algorithm adds a member
to Cc (and its modes to MODES_OF, if it is not for every mode), a window strategy to
the reference Sender (twin.mrc.transport) and an entry to the compiled Sender's table.
Like twin.mrc.modes.Mode, a member equals the string that travels (a control request,
a drill file, a trace) and carries its one-line help. `CCS` is the enum as a
twin.registry.Registry: a name none has is the UnknownName every registry's miss is.

    nscc    the MRC window, NSCC's shape (docs/congestion.md): queueing delay, echoed
            ECN marks and trims together, in four quadrants, QuickAdapt after trims
    delay   the window steered by queueing delay alone, cut once per RTT on loss:
            what every mode ran before the fabric marked and trimmed (for comparison)
    dcqcn   RoCEv2's DCQCN (twin.mrc.dcqcn): the QP's packets are paced at a rate that
            CNPs cut and a timer and a byte counter raise again; the window is a fixed
            in-flight cap (SenderConfig.max_window)

`default_for(mode)`: what a QP runs when no cc is named. The endpoint's own default
(an omitted `cc`) is SenderConfig's, nscc, for every mode; twin traffic and drills
(the user-facing side) run single-path with dcqcn, the RoCE baseline: RoCE over ECMP,
one hashed path, go-back-N, DCQCN (docs/roce-baseline.md).
"""

from __future__ import annotations

from twin.mrc.modes import Choice, Mode
from twin.registry import Registry


class Cc(Choice):
    NSCC = "nscc", "the MRC window, NSCC's shape: delay, ECN marks and trims together"
    DELAY = "delay", "the MRC window steered by queueing delay alone (before ECN and trims)"
    DCQCN = "dcqcn", "RoCEv2's DCQCN: a paced rate, cut by CNPs (the RoCE baseline)"


# Cc as a twin.registry.Registry, the lookup every other named choice of twin has: a
# miss is an UnknownName whose message lists the members ("unknown congestion control
# 'x'; one of: nscc, delay, dcqcn"), and `CCS.describe()` is Cc.described().
CCS: Registry[Cc] = Registry.over(Cc, "congestion control")

# The modes each cc is valid with (absent: every mode). DCQCN paces a QP whatever its
# EVs, so it runs with spraying too, though only single-path is the RoCE baseline.
MODES_OF: dict[Cc, tuple[Mode, ...]] = {}
DEFAULT = Cc.NSCC.value
DEFAULT_OF_MODE = {Mode.SINGLE_PATH: Cc.DCQCN.value}


def default_for(mode: str) -> str:
    """The cc a QP of `mode` runs when the user names none (twin traffic, drills)."""
    return DEFAULT_OF_MODE.get(mode, DEFAULT)


def problem(cc: str, mode: str) -> str | None:
    """Why `cc` cannot run with `mode` (None: it can)."""
    if cc not in CCS:
        return str(CCS.miss(cc))
    modes = MODES_OF.get(cc)
    if modes is not None and mode not in modes:
        return f"cc {cc} runs with mode {' or '.join(modes)} only, not {mode}"
    return None
