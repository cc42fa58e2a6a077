"""The fuzzer's command line: python -m twin.mrc.difffuzz (see the package's docstring).
Exit status 0: nothing found; 1: findings (their traces saved); 2: bad arguments, or no
compiled core to judge."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from twin.mrc.difffuzz import MOVES, SIDES, Finding, FuzzCase, compiled_impls, fuzz, select_moves
from twin.mrc.difffuzz.runner import FUZZ_TRACES


def _names(text: str) -> list[str]:
    return [n for n in text.split(",") if n]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m twin.mrc.difffuzz",
                                description=__doc__.split("\n")[0])
    p.add_argument("--seconds", type=float, default=60.0, help="run this long (default 60)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--first", type=int, default=0, help="the first case's index")
    p.add_argument("--cases", type=int, help="at most this many cases")
    p.add_argument("--case", type=int, help="only this case (--first CASE --cases 1)")
    p.add_argument("--out", type=Path, default=FUZZ_TRACES,
                   help="where a finding's trace is written (default tests/traces/fuzz)")
    p.add_argument("--no-save", action="store_true", help="write no trace")
    p.add_argument("--only", type=_names, help="only these moves (comma-separated)")
    p.add_argument("--without", type=_names, default=[], help="not these moves")
    p.add_argument("--side", choices=SIDES, help="judge only this side's traces")
    p.add_argument("--max-findings", type=int, default=3,
                   help="stop after this many distinct findings (default 3)")
    p.add_argument("--list-moves", action="store_true", help="list the moves and stop")
    p.add_argument("--verbose", "-v", action="store_true", help="a line per case")
    args = p.parse_args(argv)
    out = sys.stdout
    if args.list_moves:
        for name, m in MOVES.items():
            out.write(f"{name:16} {m.weight:>3}  {m.about}\n")
        return 0
    try:
        moves = select_moves(args.only, args.without)
        impls = compiled_impls()
    except (ValueError, RuntimeError) as e:
        sys.stderr.write(f"difffuzz: {e}\n")
        return 2
    first, cases = (args.case, 1) if args.case is not None else (args.first, args.cases)
    from twin.mrc import _fastpath

    out.write(f"difffuzz: seed {args.seed}, cases from {first}, {args.seconds:g} s at most; "
              f"compiled core {_fastpath.__file__}\n")
    if set(moves) != set(MOVES):
        out.write(f"  moves: {', '.join(moves)}\n")
    out.flush()

    def on_case(case: FuzzCase, found: list[Finding]) -> None:
        if args.verbose or found:
            s = case.spec
            names = "all" if set(s.moves) == set(MOVES) else ",".join(s.moves) or "-"
            out.write(f"case {s.index}: {case.calls} calls, {s.config['mode']}/"
                      f"{s.config['cc']}, moves {names}"
                      f"{': ' + str(len(found)) + ' finding(s)' if found else ''}\n")
        for f in found:
            out.write(f"  {f.headline()}\n")
        out.flush()

    report = fuzz(args.seed, args.seconds, first=first, cases=cases, moves=moves,
                  out=None if args.no_save else args.out, max_findings=args.max_findings,
                  impls=impls, sides=(args.side,) if args.side else SIDES, on_case=on_case)
    out.write(f"difffuzz: {report.cases} cases ({report.calls} calls) of seed {args.seed} "
              f"in {report.seconds:.1f} s: {len(report.findings)} distinct finding(s)\n")
    for f in report.findings:
        out.write(f"\n{f.headline()}\n{f.detail}\n")
    for path in report.saved:
        out.write(f"saved {path}\n")
    return 1 if report.findings else 0


if __name__ == "__main__":
    raise SystemExit(main())
