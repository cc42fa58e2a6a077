"""A differential fuzzer of the transport: hostile but well-formed call sequences for a
Sender and a Receiver, replayed into the reference (twin.mrc.transport) and the compiled
core (twin.mrc._fastpath), which must decide alike and must not crash
(docs/transport-core.md, "How the two are held equal").

    python -m twin.mrc.difffuzz --seconds 60 --seed 1 [--out DIR] [--without MOVE,...]
    python -m twin.mrc.difffuzz --seed 1 --case 17          # one case again
    python -m twin.mrc.difffuzz --list-moves

Naming
    case      one simulated transfer with an adversary mixed in, named by (seed, index):
              everything in it is drawn from random.Random(f"difffuzz:{seed}:{index}:..."),
              so the two numbers make it again, call for call
    move      one thing the adversary does; adversary.MOVES lists them with their
              weights, and the value menus they draw from are the knobs at the top of
              adversary.py. A case uses a drawn subset of the moves
    finding   what judging a case found (judge.KINDS): the two decided differently, one
              raised something other than QpFailed, the send order outgrew its bound,
              the replay itself failed, or the process replaying the compiled core died
              (crash) or stopped answering (hang)

The parts, in the order a case goes through them
    adversary   plan_case(seed, index) draws a case's shape; make_case runs it live
                against the reference and returns its two traces (twin.mrc.trace):
                pure, the reference alone
    judge       replays a trace into the reference and the compiled core and names
                what differs: pure, in this process
    runner      judges each compiled replay in a forked child (a crash is a finding
                naming its call), shrinks a finding's trace and saves it, runs cases for
                a time: the only part that forks and writes files
    __main__    the command line: the only part that prints

A finding saved in tests/traces/fuzz is a trace test (tests/unit/test_difffuzz.py).
"""

from twin.mrc.difffuzz.adversary import (
    MOVES,
    CaseSpec,
    FuzzCase,
    Move,
    make_case,
    plan_case,
    select_moves,
)
from twin.mrc.difffuzz.judge import (
    KINDS,
    REFERENCE,
    SIDES,
    BufferedReceiver,
    Finding,
    Impl,
    compiled_impls,
    judge_case,
    judge_trace,
    order_bound,
)
from twin.mrc.difffuzz.runner import (
    FUZZ_TRACES,
    FuzzReport,
    check_trace,
    fuzz,
    save_finding,
    shrink,
)

__all__ = ["FUZZ_TRACES", "KINDS", "MOVES", "REFERENCE", "SIDES", "BufferedReceiver",
           "CaseSpec", "Finding", "FuzzCase", "FuzzReport", "Impl", "Move", "check_trace",
           "compiled_impls", "fuzz", "judge_case", "judge_trace", "make_case", "order_bound",
           "plan_case", "save_finding", "select_moves", "shrink"]
