"""`twin routes check` benchmark: every path of each shipped fabric walked through its tables,
the remembered walk (twin.routes.walk.Walker) against walking every path afresh, side by side.

    remembered   the Walker as `twin routes check` runs it: a packet's way from each switch
                 onward is walked once per (node, destination, inner) and reused
    afresh       the same Walker with its memory off: every path walked hop by hop

For each fabric the two take turns, REPS times each (min and median), on twin's own tables
(every path arrives) and on a broken copy (mrc-4p's `missing-t1-route` mistake made on the
fabric's first T0: a plane's paths through one T1 blackholed). The ratio afresh / remembered is
what remembering buys; per path is the whole check's time over the paths walked. mrc-8p-256
walks 501,760 paths; afresh runs there once (it takes a minute).

    .venv/bin/python bench/bench_routes.py [--reps 3]
"""

from __future__ import annotations

import argparse
import statistics
import time
from dataclasses import replace

from twin.lab.compile import compile_spec
from twin.routes import check as C
from twin.routes import tables as T
from twin.routes import walk as W


class Afresh(W.Walker):
    """The Walker with its memory off: every path walked from its source, hop by hop."""

    def _from(self, node, ingress, addr, inner, seen):
        return self._step(node, ingress, addr, inner, seen)


def broken(plan) -> T.Tables:
    """Twin's tables with the first T0's route to its plane's T1 number 1 left out."""
    tables = T.from_plan(plan)
    t0 = next(n for n in plan.nodes.values() if n.tier == "t0")
    t = tables.nodes[t0.name]
    nodes = {**tables.nodes, t0.name: replace(t, routes=tuple(
        r for r in t.routes if r.note != f"to t1-p{t0.name.split('-')[1][1:]}-1"))}
    return T.Tables("broken", "plan", nodes)


def timed(plan, tables, walker_class, reps: int) -> tuple[list[float], C.CheckReport]:
    keep = W.Walker
    out, report = [], None
    try:
        C.W.Walker = walker_class  # check() builds its walkers through the module
        for _ in range(reps):
            t = time.perf_counter()
            report = C.check(plan, tables)
            out.append(time.perf_counter() - t)
    finally:
        C.W.Walker = keep
    return out, report


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=3)
    args = ap.parse_args()
    print(f"{'fabric':<12} {'tables':<7} {'paths':>8} {'failing':>8} {'remembered s':>13} "
          f"{'afresh s':>9} {'afresh/rem':>10} {'us/path':>8}")
    for spec in ("mrc-4p", "mrc-8p", "mrc-8p-256"):
        plan = compile_spec(spec).plan
        for label, tables in (("own", T.from_plan(plan)), ("broken", broken(plan))):
            reps = args.reps if spec != "mrc-8p-256" else 1
            rem, fresh = [], []
            for _ in range(reps):  # turns: one of each per round
                r, report = timed(plan, tables, W.Walker, 1)
                f, again = timed(plan, tables, Afresh, 1)
                assert again.outcomes() == report.outcomes()  # the memory changes no answer
                rem += r
                fresh += f
            med_r, med_f = statistics.median(rem), statistics.median(fresh)
            print(f"{spec:<12} {label:<7} {report.paths:>8} {len(report.failing):>8} "
                  f"{min(rem):>6.3f}/{med_r:<6.3f} {med_f:>9.3f} {med_f / med_r:>10.2f} "
                  f"{med_r / report.paths * 1e6:>8.1f}")


if __name__ == "__main__":
    main()
