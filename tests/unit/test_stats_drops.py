"""`twin stats --drops`: each endpoint's dropped and refused packets, by reason, readable
at 80 columns (the hostile-input counters among them)."""

import io

from rich.console import Console

from tests.unit.test_endpoint_stats import endpoint_wire
from twin.cli import traffic as cli
from twin.mrc import stats as S


def test_every_reason_counted_is_a_row_with_what_it_means(monkeypatch):
    screen = io.StringIO()
    monkeypatch.setattr(cli, "out", Console(file=screen, width=80))
    busy = S.EndpointStats.from_dict(endpoint_wire())
    quiet = S.EndpointStats.from_dict({**endpoint_wire(), "host": "r1h0", "drops": {}})
    cli._drops_table("mrc-4p", {"r0h0": busy, "r1h0": quiet})
    text = screen.getvalue()
    for reason, n in busy.drops.to_dict().items():
        if n:
            assert f"{reason}" in text and S.EndpointDrops.MEANING[reason] in text, reason
    assert "trim_stale" in text and "nack_stale" not in text  # zeros are left out
    assert "nothing dropped" in text
    assert max(len(line) for line in text.splitlines()) <= 80


def test_every_drop_reason_has_a_meaning():
    assert set(S.EndpointDrops.MEANING) == set(S.EndpointDrops.from_dict({}).to_dict())
