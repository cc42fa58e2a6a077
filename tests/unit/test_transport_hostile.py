"""A Sender held to inputs a hostile peer or a pathological fabric sends, on both
transports (the reference, twin.mrc.transport, and the compiled core, _sender.c): whole
simulated transfers with forged SACKs, NAKs, trim notices and CNPs mixed into what the
real receiver sends. Each is counted where docs/endpoint-stats.md says and ignored; the
transfer completes byte-exact; memory stays flat; and both transports decide alike.

The forger sees what went on the wire (`Sniffer`: every copy a poll returned), as
anyone on a fabric link can: an ICRC is a CRC, not a MAC."""

from __future__ import annotations

import pytest

from twin.mrc import core
from twin.mrc import transport as T
from twin.mrc.evset import EvSet
from twin.mrc.sim import SimFabric, run_transfer
from twin.mrc.transport import COMPACT_AFTER, SackReport, SenderConfig

pytest.importorskip("twin.mrc._fastpath")
_fastpath = core.compiled()  # bound to what its C uses
IMPLS = {"python": (T.Sender, T.Receiver), "compiled": (_fastpath.Sender, _fastpath.Receiver)}
KiB, MiB = 1 << 10, 1 << 20


class Sniffer:
    """A Sender as the sim drives it, and what a tap on the wire saw of its packets: the
    latest copy of each PSN (its EV and transmission number) and the highest PSN sent."""

    def __init__(self, sender):
        self._s = sender
        self.copies: dict[int, tuple[int, int]] = {}  # psn -> (ev, tries) of the latest copy
        self.sent_high = -1

    def __getattr__(self, name):
        return getattr(self._s, name)

    def poll(self, now, source, budget=64):
        out = self._s.poll(now, source, budget)
        for p in out:
            self.copies[p.psn] = (p.ev, p.tries)
            self.sent_high = max(self.sent_high, p.psn)
        return out


def _transfer(impl: str, size: int, *, forge, every_ns: int = 10_000, config=None, **kw):
    """A seeded transfer on `impl`, `forge(sniffer, now)` called every `every_ns`."""
    sender_class, receiver_class = IMPLS[impl]
    made = []

    def build(*args):
        made.append(Sniffer(sender_class(*args)))
        return made[-1]

    actions = [(t, lambda s, f, now: forge(made[0], now))
               for t in range(every_ns, 2_000_000_000, every_ns)]
    r = run_transfer(size, SimFabric(seed=11), config=config, actions=actions,
                     sender_class=build, receiver_class=receiver_class, **kw)
    return r, made[0]


def _outcome(r) -> dict:
    s = r.sender
    return {"ok": r.ok, "exact": r.exact, "failed": r.failed, "now": r.elapsed_ns,
            "stats": s.stats, "window": s.window, "cum": s.cum,
            "events": [(e.t_ns, e.kind, e.ev, e.psn, e.detail) for e in s.log]}


def _entries(s) -> tuple[int, int]:
    """(entries in the send order and the per-EV send orders together, packets in flight)"""
    s = getattr(s, "_s", s)
    if isinstance(s, T.Sender):
        return len(s._order) + sum(len(q) for q in s._per_path.values()), s._inflight
    return s.send_order_len + s.per_path_entries, s.inflight


def _both(size, **kw):
    runs = {impl: _transfer(impl, size, **kw) for impl in IMPLS}
    assert _outcome(runs["compiled"][0]) == _outcome(runs["python"][0])
    return runs["python"]


def _forge_sack_over_unsent(s: Sniffer, now: int) -> None:
    """A SACK that acks what the receiver really has (cum) and claims every PSN past the
    highest sent: records built ahead of the window, never on the wire (the compiled
    core dereferenced their NULL EV; the reference raised after removing records)."""
    if s.sent_high < 0:
        return
    cum = s.cum
    unsent = max(0, s.sent_high - cum)
    if unsent >= 64:
        return
    bitmap = ((1 << 64) - 1) ^ ((1 << unsent) - 1)
    echoed = max(0, cum - 1)  # acked already: believing it costs nothing
    s.on_sack(SackReport(cum, bitmap, 0x5A5A, echoed, 0), now)


def test_a_sack_over_unsent_psns_is_masked_and_the_transfer_completes():
    small = SenderConfig(init_window=4, max_window=8)  # the bitmap reaches past sent_high
    r, s = _both(512 * KiB, forge=_forge_sack_over_unsent, config=small)
    assert r.ok and r.exact and r.receiver.stats.bytes == 512 * KiB
    assert r.sender.stats.sack_bits_unsent > 10


def test_the_masked_bits_name_only_unsent_psns():
    """cum 0, PSN 0 echoed, every bit set, 4 of 64 PSNs sent: bits for 1..3 believed."""
    for impl, (sender_class, _) in IMPLS.items():
        s = sender_class(EvSet([0, 1], 1, size=8, seed=1), 0, SenderConfig(init_window=4))
        s.post(64 * 4096)
        assert len(s.poll(1, memoryview(bytes(64 * 4096)))) == 4
        s.on_sack(SackReport(0, (1 << 64) - 1, 0, 0, 0), 2)
        assert (s.cum, s.stats.acked, s.stats.sack_bits_unsent) == (0, 4, 1), impl
        assert not s.failed and len(s.poll(3, memoryview(bytes(64 * 4096)))) > 0, impl


def _replay_trim_nack(s: Sniffer, now: int) -> None:
    """A NAK(TRIMMED) naming a copy the tap saw, replayed again and again: the first
    names the copy in flight (one resend), the replays name a copy no longer there."""
    if s.sent_high < 4:
        return
    psn = s.sent_high - (now // 10_000) % 4  # likely in flight
    ev, tries = s.copies[psn]
    for _ in range(8):
        s.on_nack(psn, now, True, ev, tries)


def test_a_replayed_trim_notice_costs_one_resend_and_the_transfer_completes():
    r, s = _both(2 * MiB, forge=_replay_trim_nack)
    st = r.sender.stats
    assert r.ok and r.exact
    assert st.trims_stale > st.nacks_trimmed > 0 and st.lost_trim == 0


def _stale_nack(s: Sniffer, now: int) -> None:
    """NAKs (PSN sequence error) for PSNs acked already."""
    if s.cum > 0:
        for back in (1, 2, 3):
            s.on_nack(max(0, s.cum - back), now)


def test_naks_for_psns_not_in_flight_are_counted_and_ignored():
    r, s = _both(2 * MiB, forge=_stale_nack)
    assert r.ok and r.exact and r.sender.stats.nacks_stale > 50
    assert r.sender.stats.lost_nack == 0


def _cnp_flood(s: Sniffer, now: int) -> None:
    for k in range(20):
        s.on_cnp(now + k * 1_000)


def test_a_cnp_flood_cuts_the_rate_no_faster_than_a_notification_point_could():
    cfg = SenderConfig(cc="dcqcn", line_rate_bps=1_000_000_000)
    r, s = _both(256 * KiB, forge=_cnp_flood, config=cfg, mode="single-path")
    st, rp = r.sender.stats, r.sender.rp
    assert r.ok and r.exact
    assert st.cnps_limited > 10 * rp.cnps  # 19 of every 20 arrive too soon
    assert rp.cnps > 0 and rp.cuts <= rp.cnps


class Trimmer(Sniffer):
    """A fabric that trims one PSN on every path it tries: each copy of it is cut as it
    leaves (never delivered) and NAKed(TRIMMED) at once, as the receiver would."""

    psn = 40

    def poll(self, now, source, budget=64):
        out = super().poll(now, source, budget)
        for p in [p for p in out if p.psn == self.psn]:
            out.remove(p)
            self._s.on_nack(p.psn, now, True, p.ev, p.tries)
        return out


def _trimmed_for_ever(impl: str, mode: str):
    sender_class, receiver_class = IMPLS[impl]
    return run_transfer(1 * MiB, SimFabric(seed=11), mode=mode, receiver_class=receiver_class,
                        sender_class=lambda *a: Trimmer(sender_class(*a)))


@pytest.mark.parametrize("mode", ["mrc", "single-path"])
def test_a_psn_trimmed_for_ever_fails_the_qp_naming_the_trims(mode):
    r = _trimmed_for_ever("python", mode)
    assert _outcome(_trimmed_for_ever("compiled", mode)) == _outcome(r)
    cfg = r.sender.cfg
    limit = cfg.retry_limit if mode == "single-path" else cfg.loss_limit
    assert not r.ok and r.failed.startswith(f"PSN 40 lost {limit + 1} times, trimmed ")
    assert r.failed.endswith("retry limit)" if mode == "single-path" else "loss limit)")
    assert r.sender.stats.lost_trim == limit + 1


@pytest.mark.parametrize("impl", sorted(IMPLS))
def test_trims_under_the_limit_on_every_psn_keep_memory_flat(impl):
    """Each PSN trimmed a few times on its way (never reaching the limit), over a long
    run: the send orders stay within their compaction bound the whole time."""
    trims: dict[int, int] = {}
    worst = [0]

    def forge(s: Sniffer, now: int) -> None:
        entries, inflight = _entries(s)
        worst[0] = max(worst[0], entries - 2 * inflight)
        for psn in range(max(0, s.cum), s.sent_high + 1):
            if psn in s.copies and trims.get(psn, 0) < 3:
                trims[psn] = trims.get(psn, 0) + 1
                ev, tries = s.copies[psn]
                s.on_nack(psn, now, True, ev, tries)

    r, s = _transfer(impl, 256 * KiB, forge=forge, every_ns=10_000, repeat=16)
    assert r.ok and r.exact and r.sender.stats.nacks_trimmed > 1000
    assert 0 < worst[0] <= 2 * COMPACT_AFTER + 2 * 256
