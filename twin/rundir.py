"""The run directory, $TWIN_RUN_DIR (default /run/twin), and how files in it are
written: whole or not at all (a temporary file renamed over the old one).

A leaf: owners (twin.owner) name a run directory, and lab states (twin.state) live
in one, so both read it from here.
"""

from __future__ import annotations

import json
import os
from pathlib import Path


def run_root() -> Path:
    return Path(os.environ.get("TWIN_RUN_DIR") or "/run/twin")  # set but empty: the default


def atomic_write(path: Path, data) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    os.replace(tmp, path)


def read_json(path: Path, default):
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return default


def write_json(path: Path, data) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, data)
