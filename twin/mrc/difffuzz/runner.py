"""The runner: each compiled replay judged in a forked child, findings shrunk and saved,
cases run for a time. The only part of the fuzzer that forks, waits and writes files.

A child answers in JSON on a pipe and writes the index of the call it is about to make
into shared memory (trace.replay's `progress`): when it dies, by a signal or a
sanitizer's abort, the finding names that call and keeps what the sanitizer or
faulthandler printed (the child's stderr), and the run goes on. A finding's trace is
shrunk (the calls after the failing one cut, then chunks removed while it still fails)
and saved with trace.save as <out>/fuzz-<seed>-<index>-<side>.json.gz.
"""

from __future__ import annotations

import dataclasses
import faulthandler
import json
import math
import mmap
import os
import select
import signal
import struct
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from twin.mrc import trace
from twin.mrc.difffuzz.adversary import FuzzCase, make_case, plan_case
from twin.mrc.difffuzz.judge import (
    REFERENCE,
    SIDES,
    Finding,
    Impl,
    Replayed,
    compiled_impls,
    findings_of,
    judge_impl,
    op_of,
    replay_into,
)

FUZZ_TRACES = trace.TRACES_DIR / "fuzz"  # findings kept as trace tests
_PROGRESS = struct.Struct("<q")  # the call the child is at
STDERR_KEPT = 6000  # characters of a dead child's stderr kept in its finding
HANG_S = 300.0  # a child replaying one trace for longer has hung (ASan is 2-3x slower)


def _read_all(fd: int, deadline: float) -> tuple[bytes, bool]:
    """Everything the child writes to `fd` until it closes it; False if the deadline
    passed first."""
    chunks = []
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return b"".join(chunks), False
        ready, _, _ = select.select([fd], [], [], min(left, 1.0))
        if not ready:
            continue
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            return b"".join(chunks), True
        chunks.append(chunk)


def _excerpt(text: str) -> str:
    """A dead child's stderr, the sanitizer's report first where there is one."""
    for mark in ("==ERROR: AddressSanitizer", "runtime error:", "Fatal Python error"):
        at = text.find(mark)
        if at >= 0:
            start = text.rfind("\n", 0, max(0, at - 200)) + 1
            return text[start:start + STDERR_KEPT]
    return text[-STDERR_KEPT:]


def check_trace(t: trace.Trace, impls: Iterable[Impl], seed: int = -1, index: int = -1,
                timeout_s: float = HANG_S) -> list[Finding]:
    """judge_trace, each compiled implementation replayed in a forked child of its own,
    so that a crash (a signal, a sanitizer's abort) or a hang in compiled code is a
    finding naming the call it happened in, and the other implementations are judged
    all the same. The reference (pure Python) is replayed here."""
    ref_impl = REFERENCE[t.kind]
    ref = replay_into(t, ref_impl, None)
    out = findings_of(t, ref_impl, ref, seed, index)
    for impl in impls:
        if impl.side == t.kind:
            out += _isolated(t, impl, ref, seed, index, timeout_s)
    return out


def _isolated(t: trace.Trace, impl: Impl, ref: Replayed, seed: int, index: int,
              timeout_s: float) -> list[Finding]:
    """judge_impl in a forked child, which answers in JSON on a pipe and says which
    call it is at in shared memory."""
    shared = mmap.mmap(-1, _PROGRESS.size)
    _PROGRESS.pack_into(shared, 0, -1)
    read_fd, write_fd = os.pipe()
    with tempfile.TemporaryFile() as err:
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:  # the child: judge, answer, never return
            code = 70
            try:
                os.close(read_fd)
                os.dup2(err.fileno(), 2)  # what a sanitizer prints goes to fd 2
                sys.stderr = open(2, "w", closefd=False)  # not a test runner's capture
                faulthandler.enable(sys.stderr)
                found = judge_impl(t, impl, ref, seed, index,
                                   lambda i: _PROGRESS.pack_into(shared, 0, i))
                data = json.dumps([dataclasses.asdict(f) for f in found]).encode()
                for at in range(0, len(data), 1 << 16):
                    os.write(write_fd, data[at:at + (1 << 16)])
                code = 0
            except BaseException:  # a fuzzer bug: its traceback, exit status 70
                import traceback

                traceback.print_exc()
                sys.stderr.flush()
            finally:
                os._exit(code)
        os.close(write_fd)
        try:
            data, finished = _read_all(read_fd, time.monotonic() + timeout_s)
        finally:
            os.close(read_fd)
        if not finished:
            os.kill(pid, signal.SIGKILL)
        _, status = os.waitpid(pid, 0)
        err.seek(0)
        stderr = err.read().decode(errors="replace")
    (i,) = _PROGRESS.unpack_from(shared, 0)
    shared.close()
    if finished and os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0:
        return [Finding(**d) for d in json.loads(data)]
    if not finished:
        how, kind = f"no answer in {timeout_s:.0f} s", "hang"
    elif os.WIFSIGNALED(status):
        how, kind = f"killed by {signal.Signals(os.WTERMSIG(status)).name}", "crash"
    else:
        how, kind = f"exit status {os.WEXITSTATUS(status)}", "crash"
    call = trace._short(t.calls[i], 300) if 0 <= i < len(t.calls) else "?"
    return [Finding(seed, index, t.kind, impl.name, kind, i, op_of(t, i),
                    f"{how} in {impl.name} at call {i} {call}\n{_excerpt(stderr)}")]


def shrink(t: trace.Trace, fails: Callable[[trace.Trace], bool], call: int = -1,
           seconds: float = 30.0, checks: int = 300) -> trace.Trace:
    """A smaller trace that still `fails`: the calls after `call` cut, then chunks of
    calls removed while it still fails (a few dozen checks, a few seconds, at most).
    Removing calls keeps every one well-formed and `now` never going back."""
    deadline = time.monotonic() + seconds
    calls = t.calls
    if 0 <= call < len(calls) - 1 and fails(dataclasses.replace(t, calls=calls[:call + 1])):
        calls = calls[:call + 1]
    n, used = 2, 0
    while len(calls) > 1 and used < checks and time.monotonic() < deadline:
        size = math.ceil(len(calls) / n)
        for start in range(0, len(calls), size):
            if used >= checks or time.monotonic() >= deadline:
                break
            trial = calls[:start] + calls[start + size:]
            used += 1
            if trial and fails(dataclasses.replace(t, calls=trial)):
                calls, n = trial, max(2, n - 1)
                break
        else:
            if size == 1:
                break
            n = min(len(calls), 2 * n)
    return dataclasses.replace(t, calls=calls)


def save_finding(t: trace.Trace, f: Finding, out: Path, calls_found: int) -> Path:
    """Write a finding's trace where trace tests read it (tests/traces/fuzz)."""
    out.mkdir(parents=True, exist_ok=True)
    name = f"fuzz-{f.seed}-{f.index}-{f.side}"
    first = f.detail.splitlines()[0] if f.detail else ""
    saved = dataclasses.replace(
        t, name=name, decisions=None,
        about=f"{f.kind} in {f.impl}, found by python -m twin.mrc.difffuzz --seed {f.seed} "
              f"--case {f.index} at call {f.call} of {calls_found} (kept: {len(t.calls)} "
              f"calls that still show it): {first}",
        facts={"seed": f.seed, "index": f.index, "side": f.side, "impl": f.impl,
               "kind": f.kind, "call": f.call, "op": f.op, "detail": f.detail[:4000],
               "calls_found": calls_found})
    path = out / f"{name}.json.gz"
    trace.save(saved, path)
    return path


@dataclass
class FuzzReport:
    seed: int
    first: int  # the first case's index
    cases: int = 0
    calls: int = 0
    seconds: float = 0.0
    findings: list[Finding] = field(default_factory=list)  # one per signature
    saved: list[Path] = field(default_factory=list)
    moves: Counter = field(default_factory=Counter)  # moves made, over every case


def fuzz(seed: int, seconds: float, *, first: int = 0, cases: int | None = None,
         moves: tuple[str, ...] | None = None, out: Path | None = None,
         max_findings: int = 3, impls: list[Impl] | None = None, shrink_s: float = 30.0,
         sides: tuple[str, ...] = SIDES,
         on_case: Callable[[FuzzCase, list[Finding]], None] | None = None) -> FuzzReport:
    """Cases first, first + 1, ... of `seed` (at most `cases`), their `sides` traces each
    judged in child processes, until `seconds` pass or `max_findings` distinct findings
    are in. A finding's trace is shrunk (for `shrink_s` at most, and no longer than the
    run has left) and saved in `out` (None: not saved)."""
    impls = impls if impls is not None else compiled_impls()
    report = FuzzReport(seed, first)
    start = time.monotonic()
    seen: set[tuple] = set()
    saved: set[str] = set()
    limit = cases if cases is not None else 1 << 62
    for index in range(first, first + limit):
        if time.monotonic() - start >= seconds or len(report.findings) >= max_findings:
            break
        case = make_case(plan_case(seed, index, moves))
        report.cases += 1
        report.calls += case.calls
        report.moves.update(case.moves_made)
        found = []
        for t in (case.sender, case.receiver):
            if t.kind not in sides:
                continue
            for f in check_trace(t, impls, seed, index):
                found.append(f)
                if f.signature() in seen:
                    continue
                seen.add(f.signature())
                report.findings.append(f)
                if out is not None and t.name not in saved:  # one file per trace
                    saved.add(t.name)
                    left = seconds - (time.monotonic() - start)  # the run's time bounds it
                    small = shrink(t, _still(f, impls), f.call, max(2.0, min(shrink_s, left)))
                    report.saved.append(save_finding(small, f, out, len(t.calls)))
        if on_case is not None:
            on_case(case, found)
    report.seconds = time.monotonic() - start
    return report


def _still(f: Finding, impls: list[Impl]) -> Callable[[trace.Trace], bool]:
    """Whether a trace still shows finding `f` (its kind, in its implementation; only
    that implementation is replayed, besides the reference)."""
    mine = [i for i in impls if i.name == f.impl]

    def fails(t: trace.Trace) -> bool:
        return any(g.kind == f.kind and g.impl == f.impl
                   for g in check_trace(t, mine, f.seed, f.index))
    return fails
