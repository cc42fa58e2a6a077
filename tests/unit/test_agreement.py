"""verify against `twin routes check`: the agreement line counts what verify listed."""

from types import SimpleNamespace as NS

from twin.cli.lab import agreement_counts
from twin.verify.agreement import compare


def _path(src: str, address: str) -> NS:
    return NS(src=src, address=address, label=f"{src} {address}")


def _probe(src: str, address: str, forward: bool, reply: bool) -> NS:
    return NS(path=_path(src, address), forward=forward, ok=forward and reply)


def test_failed_probes_that_lost_only_their_reply_are_counted_not_hidden():
    """verify listed 10 failed probes and the line said "6 paths lost in both": 4 had
    lost only their reply, which the comparison (requests) does not count. It says so."""
    lost = {("r0h0", f"a{i}") for i in range(6)}
    probes = [_probe(s, a, forward=False, reply=False) for s, a in sorted(lost)]
    probes += [_probe("r1h0", f"b{i}", forward=True, reply=False) for i in range(4)]
    probes += [_probe("r1h1", f"c{i}", forward=True, reply=True) for i in range(8)]
    checked = NS(undelivered=lambda: set(lost),
                 failing=[NS(path=_path(s, a)) for s, a in lost])
    report = NS(loops=[], paths=probes, coverage=None)
    agreed = compare(checked, report)
    assert agreed.ok and agreed.verify_lost == 6 and agreed.reply_lost == 4
    assert agreed.to_dict()["reply_lost"] == 4
    line = agreement_counts(agreed)
    assert line.startswith("6 paths lost in both; 4 more failed probes lost only the reply")
    # 6 + 4: the failed probes verify listed
    assert agreed.verify_lost + agreed.reply_lost == sum(not p.ok for p in probes)


def test_with_every_reply_back_the_line_is_as_short_as_before():
    checked = NS(undelivered=lambda: {("r0h0", "a")}, failing=[NS(path=_path("r0h0", "a"))])
    report = NS(loops=[], paths=[_probe("r0h0", "a", False, False)], coverage=None)
    assert agreement_counts(compare(checked, report)) == "1 path lost in both"
