"""Blind drills: a trainee finds one hidden fault in a fabric under traffic.

`twin drill blind` starts background traffic, draws one fault from the
catalog (twin.faults) with a seed and applies it hidden; the trainee looks
with status, verify, stats, probe and exec, and answers with `twin drill
answer NODE:IF|NODE`. The answer is scored, the fault revealed and reverted,
the traffic stopped, the score kept.

    draw      one fault by level and seed (pure): easy ones show in port state
              (link-down, nic-down, switch-down), hard ones are silent
              (blackhole, sid-loss, route-corrupt, link-loss, link-rate)
    score     an answer against the fault (pure): right, partial or wrong
    state     <run dir>/<lab>/blind.jsonl while a drill runs: the drill (first
              line), its traffic process, the fault as applied, then one line
              per twin command run during it (appended by the CLI's hook,
              twin.chaos.record); it goes with the lab at `twin down`
    history   <run dir>/<lab>/drill-scores.jsonl: one line per drill ended
    traffic   a detached process that loops bounded all-to-all transfers (mrc
              mode) until it is stopped, the drill ends, or the lab goes; it
              carries the lab's owner (twin.owner), so `twin down` stops it

Scoring. The fault is either in a whole switch (switch-down, sid-loss,
route-corrupt, blackhole NODE) or on one link (link-down, link-loss,
link-rate, nic-down HOST:PLANE, blackhole NODE:IF). An answer names a node,
a link end NODE:IF, a link id A:IF--B:IF, or a NIC port HOST:PLANE:

    switch fault   the switch: right; a link of the switch: partial (the box,
                   not all of it); anything else: wrong
    link fault     the link, by either end, its id or (a host's) its NIC port:
                   right; a node at either end of the link (e.g. the switch
                   whose port drops or shapes it): partial (the box, not the
                   port); anything else: wrong

Points: right 1, partial 0.5, wrong and giving up 0.

The fault's record (faults.json) is written before it is applied and carries
the hidden flag, so `twin fault clear` and `twin down` revert it as any
other; `fault clear` ends the drill as given up.
"""

from __future__ import annotations

import json
import os
import random
import secrets
import signal
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from twin import faults as F
from twin import lab as L
from twin import traffic as T
from twin.chaos.record import STATE, record_command  # noqa: F401  (the hook, kept as B.record_command)
from twin.errors import LabError, TwinError, UsageError
from twin.fabric.model import Endpoint, Fabric
from twin.faults import Fault
from twin.faults.catalog import LOSS_PERCENTS, RATES
from twin.faults.kinds import LEVELS
from twin.faults.registry import KINDS, kind_named
from twin.owner import ENV as OWNER_ENV
from twin.state import LabState

# LEVELS: level -> the fault kinds drawn at it, as the kinds say (twin.faults.kinds);
# LOSS_PERCENTS and RATES: what link-loss and link-rate draw (twin.faults.catalog).
__all__ = ["LEVELS", "LOSS_PERCENTS", "RATES"]
POINTS = {"right": 1.0, "partial": 0.5, "wrong": 0.0, "gave up": 0.0}

HISTORY = "drill-scores.jsonl"
TRAFFIC_LOG = "blind-traffic.log"

# the background traffic: small rounds with a pause, so the trainee's tools get CPU
TRAFFIC_SIZE = 1 << 20  # bytes per flow, all-to-all
TRAFFIC_PAUSE_S = 1.0
TRAFFIC_ROUND_TIMEOUT_S = 60.0
TRAFFIC_MAX_S = 3600.0  # then it stops by itself; the drill can still be answered
TRAFFIC_MAX_ROUNDS = 10_000
TRAFFIC_READY_S = 20.0
STOP_GRACE_S = 5.0  # a round's QPs are closed on SIGTERM; then SIGKILL


# -- the draw ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Draw:
    """One fault to apply: the fault command's arguments."""

    kind: str  # a fault kind's name (twin.faults.kinds.KINDS)
    target: str  # as `twin fault KIND` takes it: NODE, NODE:IF or HOST:PLANE
    arg: str = ""  # its argument after the target, if any: link-loss's percent, link-rate's rate

    @property
    def command(self) -> str:
        words = ["twin fault", str(self.kind), self.target]
        return " ".join([*words, self.arg] if self.arg else words)

    def apply(self, lab) -> Fault:
        """Apply it as a hidden fault (recorded, hidden, before it is applied)."""
        kind = KINDS[self.kind]
        with F.hidden():
            return kind.start(lab, self.target,
                              kind.values_from_args([self.arg] if self.arg else []))


def draw(fabric: Fabric, level: str, seed: int) -> Draw:
    """One fault of `level`, the same for the same fabric, level and seed."""
    if level not in LEVELS:
        raise UsageError(f"unknown level {level!r}; levels: {', '.join(LEVELS)}")
    rng = random.Random(seed)
    kind = rng.choice(LEVELS[level])
    target, arg = KINDS[kind].draw(fabric, rng)
    return Draw(kind, target, arg)


# -- answers and scores ------------------------------------------------------------------


@dataclass(frozen=True)
class Answer:
    """What the trainee named: a node, or a link (by any of its names)."""

    text: str
    node: str | None = None
    link: str | None = None  # link id


def parse_answer(fabric: Fabric, text: str) -> Answer:
    """NODE, NODE:IF, HOST:PLANE or a link id, checked against the lab's fabric."""
    text = text.strip()
    lab = fabric.name
    if "--" in text:
        ids = {lk.id for lk in fabric.links}
        if text not in ids:
            raise UsageError(f"no link {text!r} in lab {lab}; name a link by an end "
                             "(NODE:IF) or its id as `twin paths` shows it")
        return Answer(text, link=text)
    node, sep, port = text.partition(":")
    if not fabric.has_node(node):
        names = sorted(n.name for n in fabric.nodes)
        raise UsageError(f"no node {node!r} in lab {lab} (nodes: {', '.join(names[:6])} ...); "
                         "answer NODE:IF or NODE")
    if not sep:
        return Answer(text, node=node)
    if port.isdigit() and not fabric.node(node).is_switch:
        links = [lk for lk in fabric.links_of(node) if lk.plane == int(port)]
        if not links:
            raise UsageError(f"{node} has no NIC port on plane {port}")
        return Answer(text, link=links[0].id)
    try:
        return Answer(text, link=fabric.link_at(Endpoint(node, port)).id)
    except KeyError:
        ports = sorted((lk.end(node).ifname for lk in fabric.links_of(node)),
                       key=lambda n: int(n.removeprefix("eth")))
        raise UsageError(f"{node} has no link on {port!r}; its links are on "
                         f"{', '.join(ports)}") from None


def faulted_switch(fault: Fault) -> str | None:
    """The switch a whole-switch fault is in; None for a fault on one link."""
    return KINDS[fault.kind].in_switch(fault)


def score(fabric: Fabric, fault: Fault, answer: Answer) -> tuple[str, str]:
    """(verdict, why): right, partial or wrong, by the rules in the module docstring."""
    switch = faulted_switch(fault)
    if switch is not None:
        if answer.node == switch:
            return "right", f"the fault is in switch {switch}"
        if answer.link is not None and switch in _ends(fabric, answer.link):
            return "partial", (f"{answer.link} is a link of {switch}, but the fault is in "
                               "the whole switch")
        return "wrong", f"the fault is in switch {switch}"
    (link,) = fault.all_links
    if answer.link == link:
        return "right", f"the fault is on link {link}"
    if answer.node is not None and answer.node in _ends(fabric, link):
        return "partial", (f"{answer.node} is an end of link {link}, but the fault is on "
                           "that link, not the whole node")
    return "wrong", f"the fault is on link {link}"


def _ends(fabric: Fabric, link_id: str) -> set[str]:
    link = next(lk for lk in fabric.links if lk.id == link_id)
    return {link.a.node, link.b.node}


# -- the drill on disk -------------------------------------------------------------------


@dataclass
class Drill:
    id: str
    lab: str
    lab_id: str
    seed: int
    level: str
    draw: Draw
    started: float  # wall time
    started_ns: int  # CLOCK_MONOTONIC
    traffic_pid: int | None = None
    traffic_start: str = ""  # the process's start time (/proc/PID/stat), against pid reuse
    fault: dict | None = None  # as applied (Fault.to_dict)
    commands: list[dict] = field(default_factory=list)  # {"cmd", "args", "t"}

    def to_line(self) -> dict:
        d = {k: v for k, v in asdict(self).items() if k not in ("commands", "fault")}
        d["draw"] = {"kind": str(self.draw.kind), "target": self.draw.target,
                     "arg": self.draw.arg}
        return {"drill": d}


def _state_path(lab_dir: Path) -> Path:
    return lab_dir / STATE


def running(att) -> Drill | None:
    """The blind drill running in this lab, read from its state file (None: none)."""
    try:
        lines = _state_path(att.state.dir).read_text().splitlines()
    except FileNotFoundError:
        return None
    return _parse_state(lines, str(_state_path(att.state.dir)))


def _parse_state(lines: list[str], where: str) -> Drill:
    records = []
    for line in lines:
        try:
            records.append(json.loads(line))
        except ValueError:
            continue  # a line cut short by a crash: the rest still counts
    if not records or "drill" not in records[0]:
        raise LabError(f"{where}: not a blind drill's state; remove it, or `twin fault clear`")
    d = dict(records[0]["drill"])
    dr = d.pop("draw")
    drawn = kind_named(dr.get("kind"))
    if drawn is None:
        raise LabError(f"{where}: a blind drill of an unknown fault kind {dr.get('kind')!r}; "
                       "remove it, or `twin fault clear`")
    drill = Drill(**{k: v for k, v in d.items() if k in Drill.__dataclass_fields__},
                  draw=Draw(drawn.name, dr["target"], dr.get("arg", "")))
    for r in records[1:]:
        if "traffic" in r:
            drill.traffic_pid, drill.traffic_start = r["traffic"]["pid"], r["traffic"]["start"]
        elif "fault" in r:
            drill.fault = r["fault"]
        elif "cmd" in r:
            drill.commands.append(r)
    return drill


def _append(att, record: dict) -> None:
    with open(_state_path(att.state.dir), "a") as f:
        f.write(json.dumps(record) + "\n")


# -- start, answer, give up --------------------------------------------------------------


def start(att, seed: int | None = None, level: str = "easy", traffic: bool = True) -> Drill:
    """Start background traffic and apply one hidden fault; the drill is on disk first."""
    if level not in LEVELS:
        raise UsageError(f"unknown level {level!r}; levels: {', '.join(LEVELS)}")
    other = running(att)
    if other is not None:
        since = time.strftime("%H:%M:%S", time.localtime(other.started))
        raise UsageError(f"a blind drill is already running in lab {att.lab} (since {since}); "
                         f"answer it with `twin drill answer --lab {att.lab} NODE:IF|NODE`, "
                         f"or give up with `twin drill reveal --lab {att.lab}`")
    inforce = F.active(att)
    if inforce:
        names = ", ".join(f"{f.kind} {f.target}" for f in inforce if not f.hidden) or "hidden"
        raise UsageError(f"lab {att.lab} has {len(inforce)} fault"
                         f"{'s' if len(inforce) != 1 else ''} in force ({names}); a blind "
                         f"drill starts from a healthy fabric: `twin fault clear --lab "
                         f"{att.lab}` first")
    att.require_whole()
    seed = secrets.randbelow(2**31) if seed is None else seed
    drill = Drill(secrets.token_hex(4), att.lab, att.state.id, seed, level,
                  draw(att.fabric, level, seed), time.time(), time.monotonic_ns())
    path = _state_path(att.state.dir)
    try:  # exclusive: of two racing `drill blind`, one proceeds
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        raise UsageError(f"a blind drill is already starting in lab {att.lab}") from None
    with os.fdopen(fd, "w") as f:
        f.write(json.dumps(drill.to_line()) + "\n")
    try:
        if traffic:
            drill.traffic_pid, drill.traffic_start = start_traffic(att, drill)
            _append(att, {"traffic": {"pid": drill.traffic_pid, "start": drill.traffic_start}})
        fault = drill.draw.apply(att)
        drill.fault = fault.to_dict()
        _append(att, {"fault": drill.fault})
    except BaseException:
        stop_traffic(drill)
        F.clear_hidden(att)
        path.unlink(missing_ok=True)
        raise
    return drill


@dataclass(frozen=True)
class Score:
    """One ended drill: a line of the lab's score history."""

    t_wall: float
    lab: str
    seed: int
    level: str
    kind: str
    target: str
    detail: str
    answer: str | None
    verdict: str  # right | partial | wrong | gave up
    why: str
    points: float
    seconds: float
    commands: list[str]
    ended_by: str  # answer | reveal | fault clear

    def to_dict(self) -> dict:
        return asdict(self)

    @property
    def replay(self) -> str:
        return f"twin drill blind --seed {self.seed} --level {self.level}"


def require_running(att) -> Drill:
    drill = running(att)
    if drill is None:
        raise UsageError(f"no blind drill is running in lab {att.lab}; start one with "
                         f"`twin drill blind --lab {att.lab}`")
    return drill


def answer(att, text: str) -> Score:
    """Score an answer, then reveal and revert the fault, stop the traffic, keep the score.
    An answer naming nothing in the lab is refused and changes nothing."""
    drill = require_running(att)
    named = parse_answer(att.fabric, text)
    fault = _the_fault(att, drill)
    if fault is None:
        raise LabError(f"lab {att.lab}: the blind drill's fault was never applied (its "
                       f"`twin drill blind` was killed); `twin drill reveal --lab "
                       f"{att.lab}` ends it")
    verdict, why = score(att.fabric, fault, named)
    return _end(att, drill, fault, named.text, verdict, why, "answer")


def give_up(att, ended_by: str = "reveal") -> Score:
    drill = require_running(att)
    fault = _the_fault(att, drill)
    if fault is None:  # its `drill blind` was killed before: what it would have been
        fault = Fault(drill.draw.kind, drill.draw.target, (), drill.started, detail="not applied")
    return _end(att, drill, fault, None, "gave up", f"the fault was {fault.kind} {fault.target}",
                ended_by)


def _the_fault(att, drill: Drill) -> Fault | None:
    """The hidden fault in force; if it is gone already (cleared after a crash), the
    fault as it was applied; None if it never was."""
    hidden = F.hidden_in_force(att)
    if hidden:
        return hidden[0]
    return Fault.from_dict(drill.fault) if drill.fault is not None else None


def _end(att, drill: Drill, fault: Fault, text: str | None, verdict: str, why: str,
         ended_by: str) -> Score:
    stop_traffic(drill)
    F.clear_hidden(att)
    result = Score(time.time(), att.lab, drill.seed, drill.level, str(fault.kind), fault.target,
                   KINDS[fault.kind].reveal(fault), text,
                   verdict, why, POINTS[verdict],
                   round((time.monotonic_ns() - drill.started_ns) / 1e9, 1),
                   [c["cmd"] for c in drill.commands], ended_by)
    with open(att.state.dir / HISTORY, "a") as f:
        f.write(json.dumps(result.to_dict()) + "\n")
    _state_path(att.state.dir).unlink(missing_ok=True)
    return result


def history(att) -> list[Score]:
    try:
        lines = (att.state.dir / HISTORY).read_text().splitlines()
    except FileNotFoundError:
        return []
    out = []
    for line in lines:
        try:
            d = json.loads(line)
            out.append(Score(**{k: d[k] for k in Score.__dataclass_fields__}))
        except (ValueError, KeyError, TypeError):
            continue  # a line cut short by a crash
    return out


def summary(scores: list[Score]) -> dict:
    """Totals over a history: drills, points, each verdict, median seconds to a right answer."""
    counts = {v: sum(s.verdict == v for s in scores) for v in POINTS}
    right = sorted(s.seconds for s in scores if s.verdict == "right")
    median = right[len(right) // 2] if right else None
    return {"drills": len(scores), "points": sum(s.points for s in scores), **counts,
            "median_right_s": median}


# -- the background traffic ----------------------------------------------------------------


def _proc_start(pid: int) -> str:
    """A process's start time (clock ticks since boot): with the pid, who it is."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return ""


def start_traffic(att, drill: Drill) -> tuple[int, str]:
    """A detached process looping transfers, tagged with the lab's owner; wait until it
    is attached to the lab (its log says so), or fail with its log."""
    log_path = att.state.dir / TRAFFIC_LOG
    code_root = str(Path(__file__).resolve().parents[2])
    env = {**os.environ, OWNER_ENV: att.runtime.owner.tag,
           "PYTHONPATH": os.pathsep.join(p for p in (code_root, os.environ.get("PYTHONPATH"))
                                         if p)}
    argv = [sys.executable, "-c", "from twin.chaos.blind import traffic_main; traffic_main()",
            att.lab, drill.id]
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                env=env, start_new_session=True, cwd="/")
    started = _proc_start(proc.pid)
    try:
        deadline = time.monotonic() + TRAFFIC_READY_S
        while time.monotonic() < deadline and proc.poll() is None:
            if f"drill {drill.id}: traffic running" in log_path.read_text(errors="replace"):
                return proc.pid, started
            time.sleep(0.05)
        tail = log_path.read_text(errors="replace")[-800:]
        raise LabError(f"the blind drill's traffic did not start within "
                       f"{TRAFFIC_READY_S:.0f}s; its log {log_path} ends:\n{tail}")
    except BaseException:
        _kill(proc.pid, started)
        raise


def stop_traffic(drill: Drill) -> None:
    if drill.traffic_pid:
        _kill(drill.traffic_pid, drill.traffic_start)


def _kill(pid: int, started: str) -> None:
    """SIGTERM (the round in flight closes its QPs), then SIGKILL after a grace; only
    the process that was started (same pid, same start time)."""
    if not started or _proc_start(pid) != started:
        return
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + STOP_GRACE_S
    while time.monotonic() < deadline:
        try:
            if os.waitpid(pid, os.WNOHANG)[0] == pid:  # our child (a test's, in-process)
                return
        except ChildProcessError:
            pass
        if _proc_start(pid) != started or _zombie(pid):
            return
        time.sleep(0.02)
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


class _Stopped(Exception):
    """Raised at a safe point of a round (between two polls: no control call in flight)."""


def traffic_main() -> None:
    """The traffic process: `traffic_main LAB DRILL_ID` (see start_traffic). SIGTERM
    and SIGINT only set a flag: an exception raised inside a control call would leave
    its reply unread, and the round's closing calls would read the wrong replies."""
    lab, drill_id = sys.argv[1], sys.argv[2]
    asked = []
    signal.signal(signal.SIGTERM, lambda signum, frame: asked.append(signum))
    signal.signal(signal.SIGINT, lambda signum, frame: asked.append(signum))
    code = traffic_loop(lab, drill_id, lambda: bool(asked))
    if asked:
        _log(f"drill {drill_id}: traffic stopped")
    sys.exit(code)


def traffic_loop(lab: str, drill_id: str, stopping=lambda: False) -> int:
    """Bounded all-to-all rounds while the drill and its lab are there, until `stopping()`."""
    try:
        att = L.attach(lab)
    except TwinError as e:
        _log(f"drill {drill_id}: cannot attach lab {lab}: {e}")
        return 1
    lab_id = att.state.id
    hosts = [h.name for h in att.fabric.hosts]
    _log(f"drill {drill_id}: traffic running (pid {os.getpid()}, all-to-all of "
         f"{TRAFFIC_SIZE >> 20} MiB per flow between {len(hosts)} hosts)")

    def progress(acked, total, t):
        if stopping():
            raise _Stopped  # traffic.run's cleanup closes the round's QPs

    began = time.monotonic()
    for n in range(TRAFFIC_MAX_ROUNDS):
        if time.monotonic() - began > TRAFFIC_MAX_S:
            _log(f"drill {drill_id}: traffic stops after {TRAFFIC_MAX_S:.0f}s")
            return 0
        if not _still_on(lab, lab_id, drill_id):
            _log(f"drill {drill_id}: the drill or its lab is gone: traffic stops")
            return 0
        flows = T.flows_for("all-to-all", hosts, TRAFFIC_SIZE)
        try:
            result = T.run(att.runtime, "all-to-all", flows, "mrc", progress=progress,
                           timeout_s=TRAFFIC_ROUND_TIMEOUT_S)
            _log(json.dumps({"round": n, "ok": result.ok,
                             "elapsed_s": round(result.elapsed_s, 3)}))
        except _Stopped:
            return 0
        except (TwinError, OSError) as e:
            _log(json.dumps({"round": n, "ok": False, "error": str(e)[:300]}))
        pause_until = time.monotonic() + TRAFFIC_PAUSE_S
        while not stopping() and time.monotonic() < pause_until:
            time.sleep(0.05)
        if stopping():
            return 0
    return 0


def _log(text: str) -> None:
    """A line of the traffic process's log (its stdout is the log file)."""
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def _still_on(lab: str, lab_id: str, drill_id: str) -> bool:
    state = LabState.load(lab)
    if state is None or state.id != lab_id:
        return False
    try:
        with open(_state_path(state.dir)) as f:
            first = json.loads(f.readline())
    except (OSError, ValueError):
        return False
    return first.get("drill", {}).get("id") == drill_id
