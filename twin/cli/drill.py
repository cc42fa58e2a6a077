"""Failure drills: twin drill list | run | blind | answer | reveal."""

from __future__ import annotations

from twin.cli.base import main


@main.group()
def drill():
    """Timed fault scenarios with expectations, and trainee drills.

    A drill (lab/drills/*.yml) states a steady state, a timeline of faults under
    traffic, and what must hold; `twin drill run` checks it and always rolls back."""
