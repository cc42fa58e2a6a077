"""Follow a lab's fault log while a drill runs: each new line of events.jsonl to a
callback, as it is written (the drill's `--grafana-url` posts them as annotations).

Following the log, not the runner, catches every line with the stamp the fault module
wrote: applies, reverts, each flap's down and up, and the rollback's reverts, so a
later `twin grafana push` recognises these annotations and adds none twice.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from pathlib import Path

POLL_S = 0.05


class FaultLogFollower(threading.Thread):
    def __init__(self, path: Path, on_entry: Callable[[dict], None]) -> None:
        super().__init__(name="fault-log-follower", daemon=True)
        self.path = path
        self.on_entry = on_entry
        self.offset = path.stat().st_size if path.exists() else 0  # only what comes next
        self._halt = threading.Event()  # not _stop: threading.Thread has a method of that name
        self._partial = b""

    def run(self) -> None:
        while not self._halt.wait(POLL_S):
            self._read()

    def close(self) -> None:
        """Stop, after one last read: the rollback's reverts are in the log by now."""
        self._halt.set()
        if self.is_alive():
            self.join(timeout=5)
        self._read()

    def _read(self) -> None:
        try:
            with open(self.path, "rb") as f:
                f.seek(self.offset)
                chunk = f.read()
        except FileNotFoundError:
            return
        self.offset += len(chunk)
        lines = (self._partial + chunk).split(b"\n")
        self._partial = lines.pop()  # a line still being written
        for line in lines:
            if line.strip():
                try:
                    self.on_entry(json.loads(line))
                except ValueError:
                    continue
