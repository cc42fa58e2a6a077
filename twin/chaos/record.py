"""The CLI's hook into a running blind drill (twin.chaos.blind): each twin command run
during one is appended to its state, so the score says which tools the trainee used.

Its own module, light (the standard library and twin.rundir only), because every
`twin` command calls it: importing twin.chaos.blind would cost each of them the lab,
the faults and the traffic (issue 40).
"""

from __future__ import annotations

import json
import os
import time

from twin.rundir import run_root

STATE = "blind.jsonl"  # <run dir>/<lab>/blind.jsonl while a blind drill runs
ARG_MAX = 20  # a recorded command keeps at most this many arguments, each cut at 100


def record_command(argv: list[str], path: str) -> None:
    """The CLI's hook: append one twin command to the state of each blind drill it is
    for (the lab it names with --lab or as an argument; naming none, every running
    one). Cheap when no drill runs: one directory listing."""
    root = run_root()
    labs = [p.parent.name for p in root.glob(f"*/{STATE}")]
    if not labs:
        return
    named = None
    for i, a in enumerate(argv):
        if a == "--lab" and i + 1 < len(argv):
            named = argv[i + 1]
        elif a.startswith("--lab="):
            named = a.split("=", 1)[1]
    if named is None:
        named = next((a for a in argv if a in labs), None)
    line = json.dumps({"cmd": path, "args": [a[:100] for a in argv[:ARG_MAX]],
                       "t": time.time()}) + "\n"
    for lab in [named] if named else labs:
        try:
            fd = os.open(root / lab / STATE, os.O_WRONLY | os.O_APPEND)  # never creates
        except OSError:
            continue
        try:
            os.write(fd, line.encode())
        finally:
            os.close(fd)
