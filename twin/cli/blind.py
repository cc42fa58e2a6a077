"""Trainee drills: twin drill blind | answer | reveal | scores (twin.chaos.blind)."""

from __future__ import annotations

from collections import Counter

import click
from rich.table import Table

from twin import lab as L
from twin.chaos import blind as B
from twin.cli.base import emit_json, lab_option, out, sigterm_as_interrupt
from twin.cli.drill import drill

# What the trainee is told: the tools, not the fault.
TOOLS = (
    ("twin status --lab {lab}", "nodes and their state"),
    ("twin verify --lab {lab}", "routes against the plan; every path probed"),
    ("twin stats --lab {lab}", "the endpoints' counters (retransmits, ports up)"),
    ("twin probe --lab {lab} --once", "loopback probes over every link"),
    ("twin exec --lab {lab} NODE -- CMD", "inside a node: ip -6 route, ip -s link, "
                                          "nft list ruleset, tc -s qdisc ..."),
)
ANSWERS = (
    ("twin drill answer --lab {lab} NODE:IF", "a link, by either end (or its id "
                                              "A:IF--B:IF, or a NIC port HOST:PLANE)"),
    ("twin drill answer --lab {lab} NODE", "a switch"),
    ("twin drill reveal --lab {lab}", "give up: see what it was"),
)


def mission(lab: str) -> str:
    rows = [(c.format(lab=lab), what) for c, what in (*TOOLS, *ANSWERS)]
    width = max(len(c) for c, _ in rows) + 2
    lines = [f"  {c:<{width}}{what}" for c, what in rows]
    return "\n".join(["[bold]Something is wrong with the fabric; find it.[/bold]", "",
                      "Tools:", *lines[:len(TOOLS)], "Answer:", *lines[len(TOOLS):],
                      "The clock is running, and the twin commands you run are recorded."])

STYLE = {"right": "green", "partial": "yellow", "wrong": "red", "gave up": "red"}


class Levels(click.Choice):
    """The blind-drill levels as the fault kinds registered now say (B.LEVELS)."""

    def __init__(self) -> None:
        super().__init__([])

    @property
    def choices(self):
        return tuple(B.LEVELS)

    @choices.setter
    def choices(self, value) -> None:
        pass  # always the registry's


@drill.command("blind")
@lab_option()
@click.option("--seed", type=int, default=None,
              help="Draw the fault with this seed (default: a random one, shown at the end).")
@click.option("--level", type=Levels(), default="easy", show_default=True,
              help="easy: the fault shows in port state (link-down, nic-down, switch-down); "
                   "hard: it is silent (blackhole, sid-loss, route-corrupt, link-loss, "
                   "link-rate).")
def drill_blind(lab, seed, level):
    """A blind drill: background traffic, one hidden fault, find it.

    `twin fault list` says only that a hidden fault is in force. Answer with
    `twin drill answer NODE:IF|NODE`; `twin drill reveal` gives up; `twin fault
    clear` and `twin down` revert the fault too (the drill is then given up)."""
    sigterm_as_interrupt()  # a start cut short takes back its traffic and fault
    att = L.attach(lab)
    d = B.start(att, seed, level)
    traffic = (f"background traffic: all-to-all through the MRC endpoints (pid "
               f"{d.traffic_pid})" if d.traffic_pid else "no background traffic")
    out.print(f"blind drill started in lab {att.lab}, level {level}; {traffic}\n")
    out.print(mission(att.lab))


@drill.command("answer")
@click.argument("target", metavar="NODE:IF|NODE")
@lab_option()
@click.option("--json", "as_json", is_flag=True)
def drill_answer(target, lab, as_json):
    """Answer the blind drill: name the faulted link (NODE:IF, its id, or HOST:PLANE)
    or switch (NODE). It is scored, then the fault is revealed and reverted."""
    score = B.answer(L.attach(lab), target)
    if as_json:
        emit_json(score.to_dict())
    else:
        _print_end(score)


@drill.command("reveal")
@lab_option()
@click.option("--json", "as_json", is_flag=True)
def drill_reveal(lab, as_json):
    """Give up the blind drill: reveal the fault and revert it."""
    score = B.give_up(L.attach(lab), "reveal")
    if as_json:
        emit_json(score.to_dict())
    else:
        _print_end(score)


@drill.command("scores")
@lab_option()
@click.option("--json", "as_json", is_flag=True)
def drill_scores(lab, as_json):
    """The lab's blind drills so far: each answer, its verdict and time."""
    att = L.attach(lab)
    scores = B.history(att)
    total = B.summary(scores)
    if as_json:
        emit_json({"lab": att.lab, "summary": total, "scores": [s.to_dict() for s in scores]})
        return
    if not scores:
        out.print(f"no blind drill ended in lab {att.lab} yet (`twin drill blind`)")
        return
    t = Table(title=f"blind drills in {att.lab}")
    for col in ("ended", "level", "fault", "answer", "verdict", "time", "commands"):
        t.add_column(col)
    for s in scores:
        verdict = f"[{STYLE[s.verdict]}]{s.verdict}[/{STYLE[s.verdict]}]"
        t.add_row(_clock(s.t_wall), s.level, f"{s.kind} {s.target}", s.answer or "-", verdict,
                  _duration(s.seconds), str(len(s.commands)))
    out.print(t)
    median = total["median_right_s"]
    n, points = total["drills"], total["points"]
    out.print(f"{n} drill{'s' if n != 1 else ''}, {points:g} point{'s' if points != 1 else ''}: "
              f"{total['right']} right, {total['partial']} partial, {total['wrong']} wrong, "
              f"{total['gave up']} given up"
              + (f"; median time to a right answer {_duration(median)}" if median else ""))


def _print_end(s: B.Score) -> None:
    color = STYLE[s.verdict]
    head = s.verdict.upper() if s.answer else "GAVE UP"
    out.print(f"[bold {color}]{head}[/bold {color}]: {s.why}" if s.answer
              else f"[bold {color}]{head}[/bold {color}]")
    detail = f" ({s.detail})" if s.detail else ""
    out.print(f"  the fault:  {s.kind} {s.target}{detail}")
    if s.answer:
        out.print(f"  you named:  {s.answer}")
    used = Counter(s.commands)
    listed = ", ".join(f"{c}" + (f" x{n}" if n > 1 else "") for c, n in used.items()) or "none"
    out.print(f"  time:       {_duration(s.seconds)}; twin commands used: {len(s.commands)} "
              f"({listed})")
    out.print(f"  replay:     {s.replay}")
    out.print("reverted; background traffic stopped; score kept (`twin drill scores`)")


def _duration(seconds: float) -> str:
    m, s = divmod(int(round(seconds)), 60)
    return f"{m}m {s:02d}s" if m else f"{seconds:.1f}s"


def _clock(t: float) -> str:
    import time

    return time.strftime("%m-%d %H:%M", time.localtime(t))
