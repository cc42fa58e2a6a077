"""`twin ci`: one command for someone else's CI job. Read `run` first.

    preflight     spec, tables, drills, runtime, data plane and the out directory, read
                  and checked: bad input is an error before anything exists (exit 2)
    routes check  the tables walked without a lab (twin.routes.check)     [--routes]
    up            a lab of its own, `<spec>-ci-<hex>`, from the tables when given
    verify        every route read back, every path and loopback probed
    agreement     the paths the check says are not delivered are exactly the probes
                  verify lost on their way out                            [--routes]
    drill NAME    each drill, its report in out/drills/NAME/ (twin.chaos)
    down          always, also after a failure, Ctrl-C or SIGTERM: the faults in force
                  reverted, the lab removed, and nothing carrying its owner left

A failing stage does not stop the next (a failing check still gets its lab, a failing
verify its drills); only a lab that did not come up skips what needs one. Each stage
ends as a `Stage`: passed, failed or skipped, its seconds, the files it wrote and,
when it failed, what failed, first lines first. out/ then holds junit.xml (every
stage's suites, and one case per stage), summary.json and index.html.

Suite names carry the spec's name, not the lab's, so that a CI server's test history
sees the same tests from run to run. twin.ci.report draws out/'s own files.
"""

from __future__ import annotations

import json
import secrets
import time
import traceback
from dataclasses import dataclass, replace
from pathlib import Path

from twin import faults as F
from twin import lab as L
from twin import lifecycle
from twin.chaos import drill as D
from twin.chaos import report as drill_report
from twin.chaos import runner
from twin.ci.report import (
    FAILED,
    INDEX,
    JUNIT,
    PASSED,
    SKIPPED,
    SUMMARY,
    TOOL,
    Result,
    Stage,
    suite,
    write,
)
from twin.errors import TwinError, UsageError
from twin.fabric.spec import MAX_NAME, name_problem
from twin.lab import build
from twin.lab.pipeline import pick_dataplane
from twin.progress import Steps
from twin.routes import check as C
from twin.routes import formats
from twin.routes.tables import Tables
from twin.runtime import pick_runtime
from twin.state import LabState
from twin.verify import AUTO, VerifyReport, agreement, run_verify


@dataclass(frozen=True)
class Options:
    spec: str
    routes: str | None = None
    routes_format: str | None = None
    follow_symlinks: bool = False  # the --routes files may be symlinks out of it
    drills: tuple[str, ...] = ()  # names or files; ("all",): the shipped drills for this fabric
    out: Path = Path("out")
    runtime: str = "auto"
    dataplane: str | None = None
    name: str | None = None  # the lab's name (default: lab_name(spec))


@dataclass(frozen=True)
class Ready:
    """What preflight read: nothing of it exists on the machine yet."""

    opts: Options
    compiled: L.Compiled  # twin's own plan, under the spec's name (the check's reference)
    lab: str
    tables: Tables | None
    drills: tuple[D.Drill, ...]


def lab_name(spec_name: str) -> str:
    """A lab name of this run's own, within twin's rules: `<spec>-ci-<6 hex>`, the
    spec's part cut short to fit."""
    tail = f"-ci-{secrets.token_hex(3)}"
    return spec_name[:MAX_NAME - len(tail)].rstrip("-") + tail


def run(opts: Options, steps: Steps | None = None) -> Result:
    """The whole job. Bad input raises UsageError or SpecError before anything exists.
    Past that it always returns, the lab down and out/ written: also when Ctrl-C or
    SIGTERM (as KeyboardInterrupt) cut it short, which the result says (`interrupted`)."""
    ready = preflight(opts)
    job = _Job(ready, steps or Steps())
    started = time.monotonic()
    _clear_previous(opts.out)
    try:
        job.stages()
    except KeyboardInterrupt:
        job.result.interrupted = True
        job.skip_rest("interrupted")
    finally:
        with runner.uninterrupted():  # a second Ctrl-C must not cut the teardown short
            job.stage("down", job.down)
            job.result.seconds = time.monotonic() - started
            write(job.result)
    return job.result


def preflight(opts: Options) -> Ready:
    if opts.routes_format and not opts.routes:
        raise UsageError("--routes-format goes with --routes DIR")
    if opts.name is not None and (problem := name_problem(opts.name)):
        raise UsageError(f"--name: {problem[0]}; {problem[1]}")
    compiled = L.compile_spec(opts.spec)
    lab = opts.name or lab_name(compiled.spec.name)
    if LabState.load(lab) is not None:
        raise UsageError(f"lab {lab} is up already; twin ci brings up a lab of its own: "
                         "leave out --name, or name another")
    rt, _ = pick_runtime(opts.runtime)
    pick_dataplane(rt, opts.dataplane or compiled.spec.dataplane)  # the kernel can run one
    loaded = formats.load_dir(opts.routes, compiled.fabric, opts.routes_format,
                              follow_symlinks=opts.follow_symlinks) if opts.routes else None
    drills = _drills(opts.drills, compiled.spec.name)
    _check_out(opts.out)
    return Ready(opts, compiled, lab, loaded, drills)


def _drills(refs: tuple[str, ...], fabric: str) -> tuple[D.Drill, ...]:
    if list(refs) == ["all"]:
        found = [d for d in map(D.load_drill, D.shipped()) if d.fabric in (None, fabric)]
        if not found:
            raise UsageError(f"--drills all: no shipped drill is written for fabric {fabric} "
                             "(`twin drill list`); name the drills to run")
        return tuple(found)
    by_name: dict[str, D.Drill] = {}
    for ref in refs:
        d = D.load_drill(D.find(ref))
        other = by_name.setdefault(d.name, d)
        if other.source != d.source:
            raise UsageError(f"--drills: two drills are named {d.name} ({other.source}, "
                             f"{d.source}); their reports would share out/drills/{d.name}")
    return tuple(by_name.values())


def _check_out(out: Path) -> None:
    """An out directory that does not exist, is empty, or holds a previous run's."""
    if out.exists() and not out.is_dir():
        raise UsageError(f"--out {out}: not a directory")
    if out.is_dir() and any(out.iterdir()) and _previous(out) is None:
        raise UsageError(f"--out {out}: not empty, and not a previous twin ci's (no "
                         f"{SUMMARY}); give a new or empty directory")
    parent = out if out.is_dir() else out.resolve().parent
    if not parent.is_dir():
        raise UsageError(f"--out {out}: directory {parent} does not exist")


def _previous(out: Path) -> dict | None:
    try:
        data = json.loads((out / SUMMARY).read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and data.get("tool") == TOOL else None


def _clear_previous(out: Path) -> None:
    """A previous run's files go, so that no report of it passes for this run's."""
    before = _previous(out) if out.is_dir() else None
    out.mkdir(parents=True, exist_ok=True)
    if before is None:
        return
    for rel in [SUMMARY, JUNIT, INDEX, *(f for s in before.get("stages", [])
                                         for f in s.get("files", []))]:
        path = out / rel
        if out.resolve() not in path.resolve().parents:  # only ever inside out/
            continue
        path.unlink(missing_ok=True)
        for parent in path.parents:  # drills/NAME, then drills, once empty
            if parent == out or not parent.is_dir() or any(parent.iterdir()):
                break
            parent.rmdir()


class _Job:
    """The stages of one run, in order, each appending its Stage to the result."""

    def __init__(self, ready: Ready, steps: Steps):
        self.ready, self.opts, self.out = ready, ready.opts, ready.opts.out
        self.steps = _Held(steps)
        self.prefix = ready.compiled.spec.name  # suite names: the same from run to run
        self.result = Result(self.prefix, ready.compiled.source, ready.lab, self.out,
                             self.opts.routes)
        self.checked: C.CheckReport | None = None
        self.verified: VerifyReport | None = None
        self.lab_id = ""

    def planned(self) -> list[str]:
        routes = self.ready.tables is not None
        return [*(["routes check"] if routes else []), "up", "verify",
                *(["agreement"] if routes else []), *(f"drill {d.name}" for d in self.ready.drills)]

    def stages(self) -> None:
        if self.ready.tables is not None:
            self.stage("routes check", self.routes_check)
        if not self.stage("up", self.up).passed:
            self.skip_rest("the lab did not come up")
            return
        self.stage("verify", self.verify)
        if self.ready.tables is not None:
            if self.verified is None:
                self.skip("agreement", "verify did not finish")
            else:
                self.stage("agreement", self.agreement)
        for d in self.ready.drills:
            self.stage(f"drill {d.name}", lambda d=d: self.drill(d))

    def stage(self, name: str, do) -> Stage:
        """Run one stage; whatever it raises fails it (a bug too: the report and the
        teardown matter more), and Ctrl-C fails it and goes on up."""
        self.steps.note(f"== {name}")
        started = time.monotonic()
        stage = Stage(name)
        try:
            stage = do()
        except KeyboardInterrupt:
            stage.failure = "interrupted (Ctrl-C or SIGTERM)"
            raise
        except TwinError as e:
            stage.failure = str(e)
        except Exception as e:
            stage.failure = f"{type(e).__name__}: {e}\n" + "".join(traceback.format_exception(e))
        finally:
            stage.seconds = time.monotonic() - started
            self.result.stages.append(stage)
            self.steps.note(f"{name}: {stage.status}" + (f" ({stage.said})" if stage.said
                                                         else ""))
        return stage

    def skip(self, name: str, why: str) -> None:
        self.result.stages.append(Stage(name, SKIPPED, said=why))

    def skip_rest(self, why: str) -> None:
        done = {s.name for s in self.result.stages}
        for name in self.planned():
            if name not in done:
                self.skip(name, why)

    def _write(self, rel: str, text: str) -> str:
        path = self.out / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        return rel

    # -- the stages ---------------------------------------------------------------

    def routes_check(self) -> Stage:
        self.steps.start(f"routes check: {self.opts.routes}")
        report = self.checked = C.check(self.ready.compiled.plan, self.ready.tables)
        junit = report.junit()
        files = [self._write("routes-check.xml", junit),
                 self._write("routes-check.json", json.dumps(report.to_dict(), indent=2))]
        errors = [f.text() for f in report.findings if f.severity == C.ERROR]
        said = report.verdict_line()  # it read "122/128 paths arrive, 0 problems", failed
        failure = [f"{o} x{len(ps)}: {cause}" for cause, o, ps in report.causes()] + errors
        return Stage("routes check", PASSED if report.ok else FAILED, files=files, said=said,
                     failure="\n".join(failure), suites=[junit])

    def up(self) -> Stage:
        o = self.opts
        state = L.up(o.spec, o.runtime, self.steps, name=self.ready.lab,
                     dataplane=o.dataplane, routes=o.routes, routes_format=o.routes_format,
                     follow_symlinks=o.follow_symlinks).state
        self.lab_id = state.id
        r = self.result
        r.runtime, r.dataplane, r.dataplane_why = state.runtime, state.dataplane, \
            state.dataplane_why
        return Stage("up", PASSED, said=f"lab {state.lab}: {len(state.nodes)} nodes on "
                     f"{state.runtime}, data plane {state.dataplane}"
                     + (f", routes from {o.routes}" if o.routes else ""))

    def verify(self) -> Stage:
        att = L.attach(self.ready.lab)
        report = self.verified = run_verify(att.runtime, att.plan, steps=self.steps,
                                            coverage=AUTO)  # exhaustive while not too many
        junit = replace(report, lab=self.prefix).junit()
        files = [self._write("verify.xml", junit),
                 self._write("verify.json", json.dumps(
                     {**report.to_dict(), "routes": att.state.routes or None}, indent=2))]
        s = report.summary()
        said = ", ".join(f"{k} {s[k]['passed']}/{s[k]['total']}"
                         for k in ("routes", "paths", "loopbacks"))
        if report.coverage:
            said += f" (coverage {report.coverage['achieved']}, not exhaustive)"
        failure = [f"{n.node}: {p}" for n in report.nodes for p in n.problems()]
        failure += [f"{r.path.label}: {r.failure} ({r.path.address})"
                    for r in [*report.paths, *report.loops] if not r.ok]
        if report.suspect_links():
            failure.insert(0, f"suspect links: {', '.join(report.suspect_links())}")
        return Stage("verify", PASSED if report.ok else FAILED, files=files, said=said,
                     failure="\n".join(failure), suites=[junit])

    def agreement(self) -> Stage:
        """Every path the check says is not delivered is a probe verify lost on its way
        out, and every probe lost on its way out is such a path."""
        agreed = agreement.compare(self.checked, self.verified)
        wrong = agreed.disagreements
        said = f"{agreed.compared} paths compared, {len(wrong)} disagree"
        if not agreed.exhaustive:
            said += (f"; coverage verify: the probed paths only ({agreed.not_probed} "
                     "undelivered paths not probed)")
        data = agreed.to_dict()
        cases = agreed.cases
        files = [self._write("agreement.json", json.dumps(data, indent=2))]
        return Stage("agreement", FAILED if wrong else PASSED, files=files, said=said,
                     failure="\n".join(f"{c}: {t}" for c, t in cases if t),
                     suites=[suite(f"{self.prefix}.agreement", cases)])

    def drill(self, d: D.Drill) -> Stage:
        att = L.attach(self.ready.lab)
        att.require_whole()
        name = f"drill {d.name}"

        def note(text: str) -> None:
            self.steps.note(f"{d.name}: {text}")

        elsewhere = runner.written_for(att, d)
        if elsewhere:
            note(elsewhere)
        runs = runner.run_all(att, d, progress=note)
        results = runner.results(runs)
        written = drill_report.write(results, self.out / "drills" / d.name)
        files = [str(p.relative_to(self.out)) for p in written.values()]
        failure = [f"{r.run.name} ({r.mode}): {e.failure()}"
                   for r in runs for e in r.run.failed_rows()]  # not a reported row
        said = ", ".join(f"{r.mode} {r.run.verdict}" for r in runs)
        return Stage(name, PASSED if all(r.ok for r in runs) else FAILED, files=files,
                     said=said, failure="\n".join(failure),
                     suites=[drill_report.junit(results)])

    def down(self) -> Stage:
        """The lab removed and nothing of it left: its faults reverted first (a drill's
        rollback does that; this is for one cut short), then lifecycle.down (its build
        directory with it), then every resource on the machine carrying its owner, which
        must be none."""
        lab, said, failure = self.ready.lab, [], []
        state = LabState.load(lab)
        if state is not None:
            self.steps.start(f"removing lab {lab}")
            self.lab_id = state.id
            try:
                att = L.attach(lab)
                if F.active(att):
                    said.append(f"{len(F.clear(att))} faults reverted")
            except TwinError as e:  # the nodes go all the same, and their faults with them
                said.append(f"faults not reverted ({e})")
            try:
                said.append(f"{len(lifecycle.down(lab).nodes)} nodes removed")
            except TwinError as e:
                failure.append(f"twin down --lab {lab}: {e}")
        left = [r for r in L.sweep.inventory() if r.owner and r.owner.mine
                and r.owner.lab == lab and (not self.lab_id or r.owner.lab_id == self.lab_id)]
        if left:
            L.sweep.remove(left)
            failure += [f"left behind, removed now: {r.kind} {r.name}" for r in left]
        files = L.build_root() / lab
        owner = build.owner_of(files)
        if owner and owner.mine and owner.lab == lab and owner.lab_id == self.lab_id:
            gone = build.remove(files, owner)
            failure.append(f"left behind, {'removed now' if gone.removed else 'still there'}"
                           f": build directory {files}{f' ({gone.why})' if gone.why else ''}")
        if LabState.load(lab) is not None:
            failure.append(f"its state is still there: {LabState.load(lab).dir}")
        return Stage("down", FAILED if failure else PASSED, failure="\n".join(failure),
                     said="; ".join(said) or "nothing to remove (the lab never came up)")


class _Held(Steps):
    """The CLI's Steps for the whole run: the library functions twin ci calls each end
    theirs with done(), which here only ends a phase; the caller ends the run's."""

    def __init__(self, inner: Steps):
        self.inner = inner

    def start(self, label: str, total: int | None = None) -> None:
        self.inner.start(label, total)

    def advance(self, n: int = 1) -> None:
        self.inner.advance(n)

    def update(self, done: int, total: int, attempt: int = 0) -> None:
        self.inner.update(done, total, attempt)

    def note(self, text: str) -> None:
        self.inner.note(text)


__all__ = ["FAILED", "INDEX", "JUNIT", "PASSED", "SKIPPED", "SUMMARY", "Options",
           "Result", "Stage", "lab_name", "preflight", "run"]
