"""What a `twin ci` run leaves: each stage as a `Stage`, the run as a `Result`, and
out/'s own files drawn from them (the stages write theirs as they go).

    junit.xml     a suite of the stages themselves (one case each: failed, skipped or
                  passed, with its time), then every stage's own suites, merged
    summary.json  the Result: each stage's status, seconds, files, what it found and
                  what failed; the lab, runtime and data plane, and why
    index.html    one static page: the verdict, a row per stage with its files
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from html import escape
from pathlib import Path

from twin import junit

PASSED, FAILED, SKIPPED = "passed", "failed", "skipped"
SUMMARY, JUNIT, INDEX = "summary.json", "junit.xml", "index.html"
TOOL = "twin ci"  # summary.json's mark: an out directory holding it is one twin ci may reuse


@dataclass
class Stage:
    name: str
    status: str = FAILED
    seconds: float = 0.0
    files: list[str] = field(default_factory=list)  # relative to the out directory
    said: str = ""  # one line: what it found
    failure: str = ""  # what failed, first lines first
    suites: list[str] = field(default_factory=list, repr=False)  # its JUnit documents

    @property
    def passed(self) -> bool:
        return self.status == PASSED

    def first_lines(self, n: int = 5) -> list[str]:
        return self.failure.splitlines()[:n]

    def to_dict(self) -> dict:
        return {"name": self.name, "status": self.status, "seconds": round(self.seconds, 3),
                "files": self.files, "said": self.said, "failure": self.failure}


@dataclass
class Result:
    spec: str  # the fabric's name
    source: str  # the spec file
    lab: str
    out: Path
    routes: str | None
    stages: list[Stage] = field(default_factory=list)
    runtime: str = ""
    dataplane: str = ""
    dataplane_why: str = ""
    interrupted: bool = False
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.interrupted and all(s.status != FAILED for s in self.stages)

    @property
    def exit_code(self) -> int:
        """0: every stage passed; 1: one failed; 130: interrupted (as a shell says it)."""
        return 130 if self.interrupted else 0 if self.ok else 1

    def to_dict(self) -> dict:
        return {"tool": TOOL, "spec": self.spec, "source": self.source, "lab": self.lab,
                "runtime": self.runtime, "dataplane": self.dataplane,
                "dataplane_why": self.dataplane_why, "routes": self.routes, "ok": self.ok,
                "exit_code": self.exit_code, "interrupted": self.interrupted,
                "seconds": round(self.seconds, 3), "files": {"junit": JUNIT, "index": INDEX},
                "stages": [s.to_dict() for s in self.stages]}


def suite(name: str, cases: list[tuple[str, str]]) -> str:
    """A JUnit document of one suite of (case, what failed or "") pairs."""
    return junit.document(name, [junit.Suite(name, cases)])


def junit_xml(result: Result) -> str:
    """Every stage's suites in one file, after a suite of the stages themselves."""
    stages = [junit.Case(s.name, failure=(s.failure or "failed") if s.status == FAILED
                         else "", skipped=s.said if s.status == SKIPPED else "",
                         time=f"{s.seconds:.3f}") for s in result.stages]
    return junit.document(f"{TOOL} {result.spec}", [junit.Suite(f"{result.spec}.ci", stages)],
                          [doc for s in result.stages for doc in s.suites])


def write(result: Result) -> None:
    """junit.xml, summary.json and index.html into the out directory."""
    out = result.out
    out.mkdir(parents=True, exist_ok=True)
    (out / JUNIT).write_text(junit_xml(result))
    (out / SUMMARY).write_text(json.dumps(result.to_dict(), indent=2) + "\n")
    (out / INDEX).write_text(index(result))


def index(result: Result) -> str:
    """A small static page: the verdict, and a row per stage with its files."""
    colour = {PASSED: "#1a7f37", FAILED: "#cf222e", SKIPPED: "#6e7781"}
    rows = []
    for s in result.stages:
        links = " ".join(f'<a href="{escape(f)}">{escape(f)}</a>' for f in s.files)
        failed = "".join(f"<br><code>{escape(line)}</code>" for line in s.first_lines())
        rows.append(f'<tr><td>{escape(s.name)}</td><td style="color:{colour[s.status]}">'
                    f"<b>{s.status}</b></td><td>{s.seconds:.1f} s</td>"
                    f"<td>{escape(s.said)}{failed}</td><td>{links}</td></tr>")
    verdict = "PASS" if result.ok else ("INTERRUPTED" if result.interrupted else "FAIL")
    return f"""<!doctype html>
<html><head><meta charset="utf-8"><title>{TOOL} {escape(result.spec)}: {verdict}</title>
<style>body{{font-family:sans-serif;margin:2em}}td,th{{padding:.3em .8em;text-align:left;
vertical-align:top;border-bottom:1px solid #ddd}}code{{font-size:90%}}</style></head><body>
<h1>{TOOL} {escape(result.spec)}: <span style="color:{colour[PASSED if result.ok else FAILED]}">
{verdict}</span></h1>
<p>lab {escape(result.lab)} on {escape(result.runtime or "-")}, data plane
{escape(result.dataplane or "-")}{f" ({escape(result.dataplane_why)})" if result.dataplane_why
else ""}; routes: {escape(result.routes or "twin's plan")}; {result.seconds:.1f} s.
All test cases: <a href="{JUNIT}">{JUNIT}</a>, the run: <a href="{SUMMARY}">{SUMMARY}</a>.</p>
<table><tr><th>stage</th><th>verdict</th><th>time</th><th>what</th><th>files</th></tr>
{chr(10).join(rows)}
</table></body></html>
"""
