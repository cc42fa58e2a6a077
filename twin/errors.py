"""The exception tree. The CLI turns each into a message and an exit code.

    TwinError                 anything twin reports without a traceback
    +-- SpecError             a spec or drill file is wrong (exit 2); carries every problem found
    +-- UsageError            a command was asked for something that cannot be (exit 2)
    |   +-- SeveralLabs       no lab named, and more than one is up; carries their names
    |   +-- UnknownName       a registry (twin.registry) has no entry by that name; carries
    |                         the valid names, which the message lists
    +-- LabError              a lab operation failed (exit 1)
    |   +-- RuntimeMissing    the chosen runtime cannot run here (root, binary, engine)
    |   +-- CommandFailed     a kernel-facing command failed; carries argv and stderr
    |   +-- GrafanaError      a Grafana refused or did not answer; one line: URL, status, why
"""

from __future__ import annotations

from dataclasses import dataclass


class TwinError(Exception):
    exit_code = 1


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a spec: where (a key path), what, and how to fix it."""

    path: str
    message: str
    hint: str = ""

    def render(self) -> str:
        text = f"  {self.path}: {self.message}"
        if self.hint:
            text += f"\n    hint: {self.hint}"
        return text


class SpecError(TwinError):
    """Every problem found in a file. `omitted` counts more that were found and not kept
    (a garbage file has one per line); `more` says where the kept ones are shown in full
    (`--json ...`), for the line that ends a render cut short."""

    exit_code = 2

    def __init__(self, source: str, problems: list[Problem], what: str = "fabric spec",
                 omitted: int = 0):
        self.source = source
        self.problems = problems
        self.what = what  # the kind of file: "fabric spec", "drill file"
        self.omitted = omitted
        self.more = ""
        super().__init__(source)

    def __str__(self) -> str:  # rendered when shown: a garbage file raises one per line
        return self.render()

    @property
    def total(self) -> int:
        return len(self.problems) + self.omitted

    def head(self) -> str:
        n = self.total
        return f"{self.source}: {n:,} problem{'s' if n != 1 else ''} in the {self.what}"

    def render(self, limit: int | None = None) -> str:
        """The head line and the problems, the first `limit` of them (None: all kept)."""
        head = self.head()
        n = self.total
        shown = self.problems if limit is None else self.problems[:limit]
        lines = [head, *(p.render() for p in shown)]
        if n > len(shown):
            lines.append(f"  and {n - len(shown):,} more" + (f"; {self.more}" if self.more
                                                             else ""))
        return "\n".join(lines)

    def to_dict(self) -> dict:
        """The error as --json prints it: every problem kept, and how many were not."""
        return {"ok": False, "error": self.head(), "source": self.source,
                "problems": [{"path": p.path, "message": p.message, "hint": p.hint}
                             for p in self.problems],
                "problems_total": self.total, "problems_omitted": self.omitted}


class UsageError(TwinError):
    exit_code = 2


class SeveralLabs(UsageError):
    """No lab named, and several are up: the CLI adds the command as given with
    `--lab` the first of `labs`."""

    def __init__(self, labs: list[str]):
        self.labs = labs
        super().__init__(f"several labs are up ({', '.join(labs)}); name one with --lab")


class UnknownName(UsageError):
    """A name no entry of a registry (twin.registry.Registry) has: a runtime, a data plane,
    a fault kind, a route-table format, a congestion control. The message names what was
    looked up and lists every valid name: "unknown runtime 'x'; one of: auto, docker,
    netns" (and a hint, where the registry has one)."""

    def __init__(self, what: str, name: object, names: list[str] | tuple[str, ...],
                 hint: str = ""):
        self.what = what  # "runtime", "data plane", "fault kind", ...
        self.name = name
        self.names = tuple(names)
        self.hint = hint
        text = f"unknown {what} {name!r}; one of: {', '.join(self.names) or '(none)'}"
        super().__init__(text + (f" ({hint})" if hint else ""))

    @property
    def listed(self) -> str:
        """'a, b, c': the valid names, for a message of a caller's own."""
        return ", ".join(self.names)


class LabError(TwinError):
    exit_code = 1


class RuntimeMissing(LabError):
    pass


class CommandFailed(LabError):
    def __init__(self, argv: list[str], returncode: int, stderr: str):
        self.argv = argv
        self.returncode = returncode
        self.stderr = stderr.strip()
        super().__init__(f"`{' '.join(argv)}` exited {returncode}: {self.stderr or '(no output)'}")


class GrafanaError(LabError):
    """A Grafana (twin.telemetry.grafana) refused a request or could not be reached. The
    message is one line naming the URL and the HTTP status, or `unreachable: <reason>`."""

    def __init__(self, url: str, message: str, status: int | None = None):
        self.url = url
        self.status = status
        super().__init__(f"grafana {url}: {message}")
