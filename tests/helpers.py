"""Shared test helpers."""

from __future__ import annotations

import os
from pathlib import Path

GOLDEN = Path(__file__).resolve().parent / "golden"


def golden(name: str, actual: str) -> None:
    """Compare with tests/golden/<name>; rewrite it when UPDATE_GOLDEN=1."""
    path = GOLDEN / name
    if os.environ.get("UPDATE_GOLDEN") == "1":
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(actual)
        return
    assert path.exists(), f"missing golden file {path}; run with UPDATE_GOLDEN=1"
    expected = path.read_text()
    assert actual == expected, f"output differs from {path} (UPDATE_GOLDEN=1 to accept)"
