"""How long-running library code reports progress without printing.

Library functions take a `Steps` and call start/advance/update/done; the CLI
passes one that draws progress bars, tests pass `Steps()` (which is silent).
"""

from __future__ import annotations


class Steps:
    def start(self, label: str, total: int | None = None) -> None:
        pass

    def advance(self, n: int = 1) -> None:
        pass

    def update(self, done: int, total: int, attempt: int = 0) -> None:
        pass

    def note(self, text: str) -> None:
        pass

    def done(self) -> None:
        pass


class Recorder(Steps):
    """Keeps the labels it was given (for tests)."""

    def __init__(self) -> None:
        self.labels: list[str] = []
        self.notes: list[str] = []

    def start(self, label: str, total: int | None = None) -> None:
        self.labels.append(label)

    def note(self, text: str) -> None:
        self.notes.append(text)
