"""Hostile packets for an MRC endpoint: built as data, then sent by a thin runner.

    twin fuzz [--host r1h0] [--seed 4791] [--budget 3] [--live compiled|python] [--lab LAB]

`plan(target, seed)` returns a list of `Hostile` packets, each the UDP payload a
RoCEv2 socket on port 4791 would receive, with the `EndpointDrops` counter it must
land in (its oracle, from how it was built, not from the decoder). The kinds:

    truncated      every truncation length of a valid data packet (as cut in flight,
                   so its ICRC no longer matches, and resealed with a valid ICRC, so
                   the header checks behind the ICRC are reached), plus random ones
    unknown_qp     data, ACKs, NAKs, probes and probe replies for QPs not there
    bad_icrc       a valid packet with one bit flipped, or its ICRC replaced
    bad_rkey       the right QP and address, another rkey
    out_of_bounds  the right rkey, VA + length outside the buffer: past its end, VA
                   near 2**64 (where a C va + len would wrap), a payload longer than it
    psn_window     a PSN RECV_WINDOW or more ahead of the receiver's cum (a PSN
                   "behind" 0 wraps to 2**24 - k: far ahead too)
    duplicate      a valid packet (accepted: it is placed), then replays of it, and
                   PSNs behind cum
    ack_unsent     ACKs and NAKs to a sending QP that has sent nothing
    probe_unknown  EV probe replies to that QP: it has no probe in flight
    malformed      a valid ICRC over an unknown opcode, an ACK with an unknown
                   syndrome or of the wrong size, a RETH DMA length that lies, a
                   payload over 4096; and a datagram too large for the endpoint's
                   receive buffer (cut by the socket: its ICRC fails)
    random         random bytes of random length
    trimmed        forged trimmed packets (traffic class DSCP 7: BTH and RETH only, no
                   ICRC, so nothing authenticates them): too short, for no QP, another
                   rkey, outside the buffer, a PSN too far ahead or behind cum, and
                   ones that pass every check: those are NAKed (NAK_TRIMMED, oracle
                   NACKED), never placed, and the peer's sender, which never sent the
                   PSN, ignores the NAK. A forged trim costs a NAK, at most one resend.

Everything is seeded: the same seed and target give the same packets, byte for byte.

The live attack (`live_round`) aims at senders mid-transfer, where the transport's
checks against its own state matter (a QP that has sent nothing refuses any ACK
trivially). For each transport in turn (compiled core, Python reference: the QPs ask
for theirs), the target host opens an mrc QP with a window of one packet and a
single-path dcqcn QP, each writing to a receiving QP on the peer. While the writes are
in flight, each round reads the mrc receiver's cum c (the peer's stats: every PSN
below it arrived) and sends, built with twin.mrc.wire's encoders:

    kind           what                                                counted in
    forged_sack    SACKs with cum c, the bitmap only PSNs c+50..c+64:  sack_bits_unsent
                   not sent yet (a window of 1; proven per round)
    trim_replay    one NAK(TRIMMED) for PSN c-1 on an EV of no plane,  trim_stale
                   replayed
    nack_stale     NAK(PSN sequence error) for c-1, which the SACKs    nack_stale
                   before it acked
    probe_unknown  probe replies for EVs nobody probed, to both QPs    probe_unknown
    cnp_ignored    CNPs to the mrc QP (it runs no dcqcn)               dcqcn.cnps_ignored
    cnp_flood      CNPs back to back to the dcqcn QP                   cnps_received or
                                                                       cnp_limited

The oracle (`live_oracle`) is exact per kind, every other drop reason stays still, and
most of the flood is limited; each transfer must end byte-exact (digests at both ends)
and no QP may fail. docs/endpoint-stats.md, "Hostile packets: where each is counted",
is the table of both.

The runner (`run`), given control clients of the target and of a peer and the
target's network namespace (twin.endpoints.fuzz finds them in a lab), registers a
receiving QP (connected to an idle sending QP on the peer, so SACKs for the accepted
and duplicate packets have somewhere to go) and an idle sending QP on the target
host, sends the plan from inside the target's own network namespace to its NIC
address (nothing leaves the lab), for a bounded time, then reads back the endpoint's
drop counters (and, as `nacked`, the receiving QP's NAK(TRIMMED)s); then runs the live
attack per transport from the same socket, every loop bounded in rounds and time; then
reads the `guards` report and asks both endpoints hello. Its report ends in a verdict:
`ok`, and `problems`, one line each.
"""

from __future__ import annotations

import random
import socket
import time
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field

from twin import nsenter
from twin.errors import LabError
from twin.fabric.paths import PLANE_BITS
from twin.mrc import wire
from twin.mrc.cc import Cc
from twin.mrc.control import EndpointClient
from twin.mrc.modes import Mode
from twin.mrc.stats import EndpointStats
from twin.mrc.transport import BITMAP_BITS, RECV_WINDOW, TRY_MASK
from twin.progress import Steps

ACCEPTED = "accepted"  # the oracle of a valid packet: placed, counted as no drop
NACKED = "nacked"  # a trimmed packet that passes the checks: NAKed, not placed, no drop
KINDS = ("truncated", "unknown_qp", "bad_icrc", "bad_rkey", "out_of_bounds", "psn_window",
         "duplicate", "ack_unsent", "probe_unknown", "malformed", "random", "trimmed")
TRIMMED_TC = wire.TRIM_DSCP << 2 | wire.ECT0  # what a trimming switch leaves
DEFAULT_SEED = 4791
_ICRC_MASKED = 4  # BTH byte 4 (FECN, BECN, reserved) is ones in the ICRC: flips go unseen
_KNOWN_OPCODES = {wire.RDMA_WRITE_ONLY, wire.RDMA_WRITE_ONLY_WITH_IMMEDIATE, wire.ACKNOWLEDGE,
                  wire.EV_PROBE, wire.EV_PROBE_REPLY, wire.CNP}
_RECV_BUF = wire.MTU + 256  # the endpoint's recvmsg size: longer datagrams are cut
_DMA_END = wire.BTH.size + wire.RETH.size  # a data body's RETH DMA length ends here (28)


@dataclass(frozen=True)
class Target:
    """What the packets aim at: one endpoint's NIC and the QPs registered there."""

    src: str  # the inner source address the packets claim (the ICRC covers it)
    dst: str  # the endpoint's NIC address
    recv_qpn: int  # a receiving QP
    rkey: int  # its rkey
    size: int  # its buffer's size: keep it under 4096, so a payload can be longer
    send_qpn: int  # a sending QP that has sent nothing: any ACK names an unsent PSN
    known_qpns: frozenset[int] = frozenset()  # every QP of the endpoint: not "unknown"
    cum: int = 0  # the receiving QP's cum now
    ev: int = 0x5A5A5A5A  # the sender's EV: the UDP source port carries its top bits

    @property
    def sport(self) -> int:
        return wire.udp_sport(self.ev)


@dataclass(frozen=True)
class Hostile:
    kind: str  # one of KINDS: what it tries
    expect: str  # the EndpointDrops field it must be counted in, ACCEPTED or NACKED
    payload: bytes  # the UDP payload
    tclass: int = 0  # the IPv6 traffic class it is sent with (IPV6_TCLASS)


def seal(t: Target, body: bytes) -> bytes:
    """body + its RoCEv2 ICRC, as the UDP payload from t.src:t.sport to t.dst."""
    return wire.roce(t.src, t.dst, t.ev, body)[wire.IP6.size + wire.UDP.size:]


def _short_or(n: int, header: int, otherwise: str) -> str:
    """What a packet of n bytes (ICRC included) with a valid ICRC counts as."""
    return "truncated" if n < 16 or n < header else otherwise


class _Planner:
    """The plan's state as it is built: the receiver's cum moves with each accepted
    packet, so the PSNs after it are chosen against the cum the endpoint will have."""

    def __init__(self, t: Target, seed):
        self.t, self.rng, self.cum = t, random.Random(seed), t.cum
        self.out: list[Hostile] = []

    def add(self, kind: str, expect: str, payload: bytes, tclass: int = 0) -> None:
        self.out.append(Hostile(kind, expect, payload, tclass))

    def payload(self, most: int | None = None) -> bytes:
        return self.rng.randbytes(self.rng.randint(1, most or min(self.t.size, 256)))

    def data(self, psn: int | None = None, va: int | None = None, rkey: int | None = None,
             payload: bytes | None = None, qpn: int | None = None, imm: int | None = None,
             ) -> bytes:
        """A data packet's body, valid for the receiving QP unless told otherwise."""
        t, rng = self.t, self.rng
        payload = self.payload() if payload is None else payload
        if va is None:
            va = rng.randint(0, max(0, t.size - len(payload)))
        return wire.encode_data(t.recv_qpn if qpn is None else qpn,
                                (self.cum if psn is None else psn) & wire.PSN_MASK, va,
                                t.rkey if rkey is None else rkey, payload, imm=imm)

    def unknown_qpn(self) -> int:
        while True:
            qpn = self.rng.randrange(1 << 24)
            if qpn not in self.t.known_qpns:
                return qpn

    def sack(self) -> wire.Sack:
        rng = self.rng
        return wire.Sack(rng.randrange(1 << 24), rng.getrandbits(64), rng.getrandbits(32),
                         rng.randrange(128), 0, rng.randrange(1 << 16), rng.random() < 0.5)


def _truncated(p: _Planner, n: int) -> None:
    t, rng = p.t, p.rng
    for imm in (None, rng.getrandbits(32)):
        body = p.data(payload=rng.randbytes(32), imm=imm)
        whole = seal(t, body)
        head = wire.DATA_OVERHEAD if imm is None else wire.DATA_IMM_OVERHEAD
        for k in range(len(whole)):  # cut in flight: the ICRC is the last 4 bytes no more
            p.add("truncated", "truncated" if k < 16 else "bad_icrc", whole[:k])
        for k in range(len(body)):  # cut, then resealed: the checks behind the ICRC
            p.add("truncated", _short_or(k + 4, head, "malformed"), seal(t, body[:k]))
    for _ in range(n):
        whole = seal(t, p.data())
        k = rng.randrange(len(whole))
        p.add("truncated", "truncated" if k < 16 else "bad_icrc", whole[:k])
        ack = wire.encode_ack(t.send_qpn, 0, 0, p.sack())
        k = rng.randrange(len(ack))
        p.add("truncated", _short_or(k + 4, wire.ACK_SIZE, "malformed"), seal(t, ack[:k]))


def _unknown_qp(p: _Planner, n: int) -> None:
    t, rng = p.t, p.rng
    fixed = [q for q in (0, wire.PSN_MASK) if q not in t.known_qpns]
    for i in range(n):
        qpn = fixed[i] if i < len(fixed) else p.unknown_qpn()
        shape = i % 7
        if shape in (0, 1):  # data to no QP, or to a sending QP (it has no buffer)
            body = p.data(qpn=qpn if shape == 0 else t.send_qpn)
        elif shape in (2, 3):  # an ACK to no QP, or to a receiving QP (it sent nothing)
            body = wire.encode_ack(qpn if shape == 2 else t.recv_qpn, rng.randrange(1 << 24),
                                   rng.randrange(1 << 24), p.sack())
        elif shape == 4:
            body = wire.encode_nack(qpn, rng.randrange(1 << 24), rng.randrange(1 << 24),
                                    rng.choice(wire.NAK_CODES), p.sack())
        else:
            body = wire.encode_probe(qpn, rng.getrandbits(32), rng.getrandbits(32),
                                     rng.getrandbits(64), rng.getrandbits(32),
                                     rng.randrange(1 << 16), reply=shape == 6)
        p.add("unknown_qp", "unknown_qp", seal(p.t, body))


def _bad_icrc(p: _Planner, n: int) -> None:
    rng = p.rng
    for i in range(n):
        good = bytearray(seal(p.t, p.data()))
        if i % 4 == 3:  # another ICRC altogether
            good[-4:] = bytes(b ^ 0xFF for b in good[-4:])
        else:
            at = rng.choice([k for k in range(len(good)) if k != _ICRC_MASKED])
            good[at] ^= 1 << rng.randrange(8)
        p.add("bad_icrc", "bad_icrc", bytes(good))


def _bad_rkey(p: _Planner, n: int) -> None:
    for _ in range(n):
        rkey = p.rng.getrandbits(32)
        if rkey != p.t.rkey:
            p.add("bad_rkey", "bad_rkey", seal(p.t, p.data(rkey=rkey)))


def _out_of_bounds(p: _Planner, n: int) -> None:
    t, rng = p.t, p.rng
    top = 1 << 64
    cases = []
    for length in (1, 64, wire.MTU):
        cases += [(t.size, length), (top - 1, length), (top - length, length), (1 << 63, length),
                  (t.size - length + 1, length)]
    cases.append((0, min(wire.MTU, t.size + 1)))  # longer than the whole buffer
    while len(cases) < n:
        length = rng.randint(1, wire.MTU)
        cases.append((rng.randint(max(0, t.size - length + 1), top - 1), length))
    for va, length in cases:
        if va + length > t.size and 0 <= va < top:
            p.add("out_of_bounds", "out_of_bounds",
                  seal(t, p.data(va=va, payload=rng.randbytes(length))))


def _psn_window(p: _Planner, n: int) -> None:
    for i in range(n):
        ahead = RECV_WINDOW + (0 if i == 0 else p.rng.randrange((1 << 23) - RECV_WINDOW))
        p.add("psn_window", "psn_window", seal(p.t, p.data(psn=p.cum + ahead)))
    if p.cum < 1 << 22:  # "behind" PSN 0 is 2**24 - k: no PSN is negative, so far ahead
        p.add("psn_window", "psn_window", seal(p.t, p.data(psn=p.cum - (1 << 22))))


def _duplicate(p: _Planner, n: int) -> None:
    rng = p.rng
    for _ in range(max(1, n // 4)):
        first = seal(p.t, p.data())
        p.add("duplicate", ACCEPTED, first)
        p.cum += 1
        for _ in range(3):  # the same bytes again: a replay
            p.add("duplicate", "duplicate", first)
        behind = rng.choice((1, rng.randint(1, p.cum)))  # arrived before: at or after 0
        p.add("duplicate", "duplicate", seal(p.t, p.data(psn=p.cum - behind)))


def _ack_unsent(p: _Planner, n: int) -> None:
    t, rng = p.t, p.rng
    for i in range(n):
        if i % 3 == 2:
            body = wire.encode_nack(t.send_qpn, rng.randrange(1 << 24), rng.randrange(1 << 24),
                                    rng.choice(wire.NAK_CODES), p.sack())
        else:
            body = wire.encode_ack(t.send_qpn, rng.randrange(1 << 24), rng.randrange(1 << 24),
                                   p.sack())
        p.add("ack_unsent", "ack_unsent", seal(t, body))


def _probe_unknown(p: _Planner, n: int) -> None:
    """Probe replies to the idle sending QP: it has probed nothing, so none is for a probe
    in flight, whatever its EV."""
    t, rng = p.t, p.rng
    for _ in range(max(1, n // 4)):
        body = wire.encode_probe(t.send_qpn, rng.getrandbits(32), rng.getrandbits(32),
                                 rng.getrandbits(64), rng.getrandbits(32),
                                 rng.randrange(1 << 16), reply=True)
        p.add("probe_unknown", "probe_unknown", seal(t, body))


def _malformed(p: _Planner, n: int) -> None:
    t, rng = p.t, p.rng
    ack = wire.encode_ack(t.send_qpn, 0, 0, p.sack())
    data = p.data()
    carried = len(data) - _DMA_END
    for i in range(n):
        shape = i % 5
        if shape == 0:
            opcode = rng.choice([o for o in range(256) if o not in _KNOWN_OPCODES])
            body = bytes([opcode]) + rng.randbytes(rng.randint(11, 200))
        elif shape == 1:
            syndrome = rng.choice([s for s in range(256)
                                   if s != wire.SYNDROME_ACK and s not in wire.NAK_CODES])
            body = ack[:12] + bytes([syndrome]) + ack[13:]
        elif shape == 2:
            body = ack + rng.randbytes(rng.randint(1, 64))  # an ACK too long
        elif shape == 3:
            lie = rng.choice((0, 0xFFFFFFFF, carried + 1, rng.getrandbits(32)))
            if lie == carried:
                continue
            body = _with_dma_length(data, lie)
        else:  # the DMA length is what it carries, but that is over 4096
            body = _oversized(p, wire.MTU + 1 + rng.randrange(64))
        p.add("malformed", "malformed", seal(t, body))
    big = seal(t, _oversized(p, 8000))
    p.add("malformed", "bad_icrc" if len(big) > _RECV_BUF else "malformed", big)


def _with_dma_length(body: bytes, length: int) -> bytes:
    """A data packet's body with its RETH DMA length replaced."""
    return body[:_DMA_END - 4] + length.to_bytes(4, "big") + body[_DMA_END:]


def _oversized(p: _Planner, n: int) -> bytes:
    """A WRITE Only body carrying n > 4096 bytes, its DMA length saying so (encode_data
    refuses to build one)."""
    head = wire.encode_data(p.t.recv_qpn, p.cum & wire.PSN_MASK, 0, p.t.rkey, b"")
    return _with_dma_length(head, n) + p.rng.randbytes(n)


def _random(p: _Planner, n: int) -> None:
    for _ in range(n):
        junk = p.rng.randbytes(p.rng.choice((p.rng.randrange(16), p.rng.randrange(1500))))
        p.add("random", "truncated" if len(junk) < 16 else "bad_icrc", junk)


def _trimmed(p: _Planner, n: int) -> None:
    t, rng = p.t, p.rng

    def cut(length: int | None = None, **kw) -> bytes:
        """A data packet's BTH and RETH, its DMA length what was cut off; inside the
        buffer unless `va` says otherwise (so only the check it aims at can refuse it)."""
        length = rng.randint(1, 256) if length is None else length
        kw.setdefault("va", rng.randint(0, max(0, t.size - length)))
        return _with_dma_length(p.data(payload=b"", **kw), length)

    def add(expect: str, body: bytes) -> None:
        p.add("trimmed", expect, body, TRIMMED_TC)

    for k in range(wire.TRIMMED_SIZE):
        add("truncated", cut()[:k])
    add("unknown_qp", cut(qpn=p.unknown_qpn()))
    add("unknown_qp", cut(qpn=t.send_qpn))
    add("bad_rkey", cut(rkey=t.rkey ^ 1))
    add("out_of_bounds", cut(t.size + 1, va=0))
    add("out_of_bounds", cut(64, va=t.size - 63))
    add("out_of_bounds", cut(64, va=(1 << 64) - 32))
    add("out_of_bounds", cut(wire.MTU + 1, va=0))
    add("psn_window", cut(psn=p.cum + RECV_WINDOW))
    if p.cum:
        add("duplicate", cut(psn=p.cum - 1))
    for _ in range(n):  # past every check: NAKed, never placed
        length = rng.randint(1, 256)
        add(NACKED, cut(length, psn=p.cum + rng.randrange(1, 64),
                        va=rng.randint(0, t.size - length)))


_BUILDERS = {"truncated": _truncated, "unknown_qp": _unknown_qp, "bad_icrc": _bad_icrc,
             "bad_rkey": _bad_rkey, "out_of_bounds": _out_of_bounds,
             "psn_window": _psn_window, "duplicate": _duplicate, "ack_unsent": _ack_unsent,
             "probe_unknown": _probe_unknown, "malformed": _malformed, "random": _random,
             "trimmed": _trimmed}


def plan(t: Target, seed=DEFAULT_SEED, per_kind: int = 32) -> list[Hostile]:
    """The hostile packets for `t`, in the order to send them (the PSNs of accepted
    packets assume it). `per_kind` bounds the random packets of each kind."""
    p = _Planner(t, seed)
    for kind in KINDS:
        _BUILDERS[kind](p, per_kind)
    return p.out


def expected(packets: list[Hostile]) -> Counter:
    """How many of `packets` each drop counter (or ACCEPTED) must count."""
    return Counter(h.expect for h in packets)


def sent_by_kind(packets: list[Hostile]) -> Counter:
    return Counter(h.kind for h in packets)


# --- the live attack: a sender mid-transfer, planned ------------------------------------------

LIVE_KINDS = ("forged_sack", "trim_replay", "nack_stale", "probe_unknown", "cnp_ignored",
              "cnp_flood")
LIVE_TRANSPORTS = ("compiled", "python")  # twin.mrc.core: each attacked in turn
# A forged SACK's bitmap names PSNs cum + SACK_FIRST_UNSENT .. cum + 64 (bit i names PSN
# cum + 1 + i): PSN cum + 64 is not sent yet while the sender is under 64 PSNs past the
# cum the runner read (its window is 1 packet: some 60 round trips; see live_round)
SACK_FIRST_UNSENT = 50
UNSENT_BITS = ((1 << BITMAP_BITS) - 1) ^ ((1 << (SACK_FIRST_UNSENT - 1)) - 1)
BELIEVED_OR_LIMITED = "cnps_received|cnp_limited"  # a flooded CNP's oracle: either


@dataclass(frozen=True)
class LiveShape:
    """One live attack's size: what each round sends, the transfers it sends it into,
    and its bounds. The defaults take under half a second per transport on mrc-4p
    (about 100 rounds: the rounds last as long as the writes)."""

    sacks: int = 4  # forged SACKs over unsent PSNs, to the mrc QP
    trim_replays: int = 4  # one forged NAK(TRIMMED), sent this many times, to the mrc QP
    nacks: int = 2  # NAK(PSN sequence error) for an acked PSN, to the mrc QP
    probes: int = 2  # probe replies for no probe in flight, to each sending QP
    cnps_mrc: int = 4  # CNPs to the mrc QP (it runs no dcqcn: each counted, ignored)
    cnp_flood: int = 64  # CNPs back to back to the dcqcn QP
    window: int = 1  # the mrc QP's init_window and max_window, packets
    mrc_bytes: int = 1 << 20  # the mrc QP's write: 256 PSNs, a delayed ACK (~1 ms) each
    dcqcn_bytes: int = 1 << 20  # the dcqcn QP's write
    max_rounds: int = 512  # rounds at most (each reads the receiver's cum, then sends)


@dataclass(frozen=True)
class LiveTarget:
    """What one round aims at: the target endpoint's NIC, its two sending QPs (mid-
    transfer), and what the peer's receiving QP reported just before."""

    nic: str  # the target's NIC address: the packets claim it as their source too
    mrc_qpn: int  # mode mrc, a window of `window` packets
    dcqcn_qpn: int  # mode single-path, cc dcqcn: the CNP target
    cum: int  # the mrc QP's receiver's cum now: every PSN below it has arrived
    ports: int  # the receiver's NIC port state (all up): what a real SACK carries
    planes: frozenset[int]  # the fabric's planes: no EV on another is ever in an EV set
    window: int = 1  # the mrc QP's window (max_window), packets
    ev: int = 0x5A5A5A5A  # the UDP source port's EV (as Target's)

    def __post_init__(self):
        if not 0 <= self.cum < 1 << 24:  # the endpoint unwraps 24-bit PSNs near its cum
            raise ValueError(f"cum {self.cum} outside 0..2**24-1: a few MiB per transfer")

    @property
    def src(self) -> str:
        return self.nic

    @property
    def dst(self) -> str:
        return self.nic

    @property
    def sport(self) -> int:
        return wire.udp_sport(self.ev)


def ghost_ev(rng: random.Random, planes: frozenset[int]) -> int:
    """A random EV on a plane the fabric does not have (its low PLANE_BITS bits): no EV
    set draws one, so no copy in flight was sent on it and no probe asked about it.
    (A fabric with every plane there is has none: then any random EV, 1 in 2**32 apart.)"""
    ev = rng.getrandbits(32)
    free = [p for p in range(1 << PLANE_BITS) if p not in planes]
    return ev & ~((1 << PLANE_BITS) - 1) | rng.choice(free) if free else ev


def live_round(t: LiveTarget, shape: LiveShape, seed=DEFAULT_SEED, round_no: int = 0
               ) -> list[Hostile]:
    """One round's hostile control packets for `t`, each sealed (a valid ICRC) and with
    the counter it must land in. Seeded by (seed, round_no); the PSNs follow t.cum = c.

      forged_sack    cum c, echoing PSN c-1 (acked: believing it costs nothing), no
                     congestion, the real port state, bitmap only PSNs c+50..c+64:
                     never sent while the sender is under 64 PSNs past c (with a window
                     of 1 that is some 60 round trips after the runner read c; the
                     SACKs go first in the round) -> sack_bits_unsent (bits masked).
                     The runner proves it per round (LiveReport.sacks_unsure)
      trim_replay    one NAK(TRIMMED) for PSN c-1 on a ghost EV (ghost_ev) and a random
                     transmission number, replayed: names no copy in flight -> trim_stale
      nack_stale     NAK(PSN sequence error) for PSN c-1, after the forged SACKs: the
                     first of them moved the sender's cum to c (its cum is true), so
                     c-1 is acked and can never be in flight again -> nack_stale
      probe_unknown  EV probe replies, ghost EVs, to both sending QPs: nothing probed
                     them -> probe_unknown
      cnp_ignored    CNPs to the mrc QP: it runs no dcqcn -> its dcqcn.cnps_ignored
      cnp_flood      CNPs back to back to the dcqcn QP: the first may be believed, the
                     rest come sooner than any notification point sends one -> each
                     dcqcn.cnps_received or cnp_limited (BELIEVED_OR_LIMITED)

    Nothing names a PSN before PSN 0 is acked (c = 0: only probe replies and CNPs), and
    the stale NAKs only follow forged SACKs (shape.sacks > 0).
    """
    rng = random.Random(f"{seed}/live/{round_no}")
    c, m = t.cum, wire.PSN_MASK
    out: list[Hostile] = []

    def add(kind: str, expect: str, body: bytes) -> None:
        out.append(Hostile(kind, expect, seal(t, body)))

    def sack(bitmap: int = 0, tries: int = 0) -> wire.Sack:
        return wire.Sack(c & m, bitmap, ghost_ev(rng, t.planes), tries, 0, t.ports)

    if c >= 1:
        for _ in range(shape.sacks):
            add("forged_sack", "sack_bits_unsent",
                wire.encode_ack(t.mrc_qpn, (c - 1) & m, rng.randrange(1 << 24),
                                sack(UNSENT_BITS)))
        trim = wire.encode_nack(t.mrc_qpn, (c - 1) & m, rng.randrange(1 << 24),
                                wire.NAK_TRIMMED, sack(tries=rng.randrange(TRY_MASK + 1)))
        for _ in range(shape.trim_replays):
            add("trim_replay", "trim_stale", trim)
        for _ in range(shape.nacks if shape.sacks else 0):
            add("nack_stale", "nack_stale",
                wire.encode_nack(t.mrc_qpn, (c - 1) & m, rng.randrange(1 << 24),
                                 wire.NAK_PSN_SEQUENCE_ERROR, sack()))
    for qpn in (t.mrc_qpn, t.dcqcn_qpn):
        for _ in range(shape.probes):
            add("probe_unknown", "probe_unknown",
                wire.encode_probe(qpn, ghost_ev(rng, t.planes), rng.getrandbits(32),
                                  rng.getrandbits(64), ghost_ev(rng, t.planes), t.ports,
                                  reply=True))
    for _ in range(shape.cnps_mrc):
        add("cnp_ignored", "cnps_ignored", wire.encode_cnp(t.mrc_qpn))
    for _ in range(shape.cnp_flood):
        add("cnp_flood", BELIEVED_OR_LIMITED, wire.encode_cnp(t.dcqcn_qpn))
    return out


@dataclass(frozen=True)
class LiveQps:
    """The QPs of one live attack: two sending QPs on the target, their receiving QPs on
    the peer."""

    mrc: int
    dcqcn: int
    rx_mrc: int
    rx_dcqcn: int


# The drop reasons the live attack aims at; every other must stay where it was
_LIVE_DROPS = ("sack_bits_unsent", "trim_stale", "nack_stale", "probe_unknown", "cnp_limited")


def live_counted(before: EndpointStats, after: EndpointStats, peer: EndpointStats,
                 qps: LiveQps) -> dict[str, int]:
    """What the target counted between `before` and `after` (its stats), keyed as the
    oracle reads them: `drops.<reason>` (EndpointDrops, deltas), `mrc.<counter>` and
    `dcqcn.<counter>` (the sending QPs', opened for the attack: from 0), and
    `peer.cnps_to_<qp>`: the CNPs the real receivers sent (`peer`: the peer's stats now)."""
    b, a = before.drops.to_dict(), after.drops.to_dict()
    out = {f"drops.{k}": a[k] - b[k] for k in a}
    m, d = after.send_qp(qps.mrc), after.send_qp(qps.dcqcn)
    rm, rd = peer.recv_qp(qps.rx_mrc), peer.recv_qp(qps.rx_dcqcn)
    if m is None or d is None or rm is None or rd is None:
        raise ValueError("a QP of the live attack is gone from its endpoint's stats")
    for name, q in (("mrc", m), ("dcqcn", d)):
        for k in ("sack_bits_unsent", "trims_stale", "trims_ignored", "nacks_stale",
                  "acks_unsent", "cnps_limited"):
            out[f"{name}.{k}"] = getattr(q.sender, k)
        dc = q.dcqcn or {}
        out[f"{name}.cnps_ignored"] = dc.get("cnps_ignored", 0)
        out[f"{name}.cnps_received"] = dc.get("cnps_received", 0)
    out["peer.cnps_to_mrc"], out["peer.cnps_to_dcqcn"] = rm.cnps_sent, rd.cnps_sent
    return out


@dataclass(frozen=True)
class Check:
    """One line of an oracle: the counter (or sum) it reads, what it must be, what it was.
    Exact unless `spread` says how much more it may count (None: any more)."""

    what: str  # keys of live_counted, `a + b` for a sum
    expected: int
    counted: int
    of: str  # the packets it counts, for the reader
    spread: int | None = 0

    @property
    def ok(self) -> bool:
        return self.expected <= self.counted and (
            self.spread is None or self.counted <= self.expected + self.spread)

    def problem(self) -> str:
        want = (f"at least {self.expected}" if self.spread is None else
                f"{self.expected}..{self.expected + self.spread}" if self.spread else
                str(self.expected))
        return f"{self.what} counted {self.counted}, expected {want} ({self.of})"

    def to_dict(self) -> dict:
        return {"what": self.what, "expected": self.expected, "spread": self.spread,
                "counted": self.counted, "of": self.of, "ok": self.ok}


def live_oracle(sent: Mapping[str, int], counted: Mapping[str, int],
                sacks_unsure: int = 0) -> list[Check]:
    """Where each kind the attack sent (`sent`: packets by kind) must be counted, checked
    against `counted` (live_counted). Exact, but for two things the wire's timing decides:
    how many CNPs of a flood a notification point's interval lets through (that most are
    limited does not depend on it), and `sacks_unsure` forged SACKs the runner could not
    prove were read before the sender reached c+64 (each counted or not: 0 in practice)."""
    n = Counter(sent)
    c = Counter(counted)
    sure = n["forged_sack"] - sacks_unsure
    flood, real_d = n["cnp_flood"], c["peer.cnps_to_dcqcn"]
    believed = c["dcqcn.cnps_received"] + c["dcqcn.cnps_limited"]
    checks = [
        Check("drops.sack_bits_unsent", sure, c["drops.sack_bits_unsent"],
              "forged SACKs over unsent PSNs: bits masked", sacks_unsure),
        Check("mrc.sack_bits_unsent", sure, c["mrc.sack_bits_unsent"],
              "the same, on the QP they named", sacks_unsure),
        Check("drops.trim_stale", n["trim_replay"], c["drops.trim_stale"],
              "replayed NAK(TRIMMED) for an acked PSN on a ghost EV: ignored"),
        Check("mrc.trims_stale", n["trim_replay"], c["mrc.trims_stale"],
              "the same, on the QP they named"),
        Check("drops.nack_stale", n["nack_stale"], c["drops.nack_stale"],
              "NAK(PSN sequence error) for an acked PSN: ignored"),
        Check("mrc.nacks_stale", n["nack_stale"], c["mrc.nacks_stale"],
              "the same, on the QP they named"),
        Check("drops.probe_unknown", n["probe_unknown"], c["drops.probe_unknown"],
              "probe replies for no probe in flight: ignored"),
        Check("mrc.cnps_ignored", n["cnp_ignored"] + c["peer.cnps_to_mrc"],
              c["mrc.cnps_ignored"], "CNPs to a QP without dcqcn (and any real ones)"),
        Check("dcqcn.cnps_received + dcqcn.cnps_limited", flood + real_d, believed,
              "the CNP flood (and any real CNPs): each believed or limited"),
        Check("drops.cnp_limited", c["dcqcn.cnps_limited"], c["drops.cnp_limited"],
              "every CNP limited is the dcqcn QP's"),
        Check("dcqcn.cnps_limited", flood // 2 + 1 if flood else 0, c["dcqcn.cnps_limited"],
              "most of the flood limited", None),
    ]
    others = sorted(k for k in c if k.startswith("drops.") and k[6:] not in _LIVE_DROPS)
    checks += [Check(k, 0, c[k], "no other drop") for k in others]
    checks += [Check(f"{q}.acks_unsent", 0, c[f"{q}.acks_unsent"],
                     "no forged packet refused whole: each names PSNs that were sent")
               for q in ("mrc", "dcqcn")]
    return checks


@dataclass(frozen=True)
class Transfer:
    """One write of the live attack, as it ended: its QPs and both ends' digests."""

    name: str  # mrc or dcqcn
    qpn: int  # the sending QP, on the target
    peer_qpn: int  # the receiving QP, on the peer
    size: int
    idle: bool  # every byte acknowledged
    failed: str | None  # why the sending QP failed, else None
    src_sha256: str
    dst_sha256: str

    @property
    def exact(self) -> bool:
        return self.src_sha256 == self.dst_sha256

    def problems(self) -> list[str]:
        out = []
        if self.failed:
            out.append(f"the {self.name} QP {self.qpn} failed: {self.failed}")
        elif not self.idle:
            out.append(f"the {self.name} QP {self.qpn} did not finish its write in time")
        if not self.exact:
            out.append(f"the {self.name} transfer is not byte-exact: source "
                       f"{self.src_sha256[:16]} != destination {self.dst_sha256[:16]}")
        return out

    def to_dict(self) -> dict:
        return {"name": self.name, "qpn": self.qpn, "peer_qpn": self.peer_qpn,
                "size": self.size, "idle": self.idle, "failed": self.failed,
                "exact": self.exact, "src_sha256": self.src_sha256,
                "dst_sha256": self.dst_sha256}


@dataclass
class LiveReport:
    """One transport's live attack, as it went: filled in by the runner, judged by
    `problems`, written out by `to_dict`."""

    transport: str
    rounds: int = 0
    rounds_mid_transfer: int = 0  # rounds that found a transfer still in flight
    # The most the mrc receiver's cum moved from one round's read to the next: about as
    # far as the sender got while a round's forged SACKs were on their way, against the
    # 64 PSNs it may go before one of them names a PSN sent (the margin, measured)
    max_cum_step: int = 0
    # Forged SACKs that may have been read after the sender had sent PSN c+64 (the
    # runner reads, after each round, how many packets the QP had sent by then: more
    # than c+64 leaves that round's SACKs unsure); the oracle lets each count or not
    sacks_unsure: int = 0
    stopped: str = ""  # why the rounds ended: writes done, a bound, or a stall
    seconds: float = 0.0
    sent_by_kind: dict[str, int] = field(default_factory=dict)
    checks: list[Check] = field(default_factory=list)
    transfers: list[Transfer] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)  # what kept the attack from running
    guards: dict[str, bool] = field(default_factory=dict)  # host -> every buffer's intact

    @property
    def problems(self) -> list[str]:
        """What failed, one line each (empty: passed)."""
        out = list(self.errors)
        if not self.errors and not self.rounds_mid_transfer:
            out.append("no round found a transfer in flight: nothing was attacked "
                       "mid-transfer (a larger write, LiveShape.mrc_bytes)")
        out += [c.problem() for c in self.checks if not c.ok]
        for t in self.transfers:
            out += t.problems()
        out += [f"{h}: guard bytes broken around a buffer" for h, ok in self.guards.items()
                if not ok]
        return [f"live {self.transport}: {p}" for p in out]

    def to_dict(self) -> dict:
        return {"transport": self.transport, "ok": not self.problems, "rounds": self.rounds,
                "rounds_mid_transfer": self.rounds_mid_transfer,
                "max_cum_step": self.max_cum_step, "sacks_unsure": self.sacks_unsure,
                "stopped": self.stopped,
                "seconds": round(self.seconds, 3),
                "sent_by_kind": dict(self.sent_by_kind),
                "expected": {c.what: c.expected for c in self.checks},
                "counted": {c.what: c.counted for c in self.checks},
                "checks": [c.to_dict() for c in self.checks],
                "transfers": [t.to_dict() for t in self.transfers],
                "guards": dict(self.guards), "problems": self.problems}


# --- the runner: sockets and endpoints ---------------------------------------------------------


def send(sock: socket.socket, dst: str, packets: list[Hostile], budget_s: float,
         batch: int = 32, pause_s: float = 0.002) -> list[Hostile]:
    """Send packets in order until done or `budget_s` is up; the ones sent. A pause
    after each batch keeps the endpoint's receive queue from overflowing, so every
    packet sent is a packet judged."""
    deadline = time.monotonic() + budget_s
    sent = []
    for i, h in enumerate(packets):
        if time.monotonic() >= deadline:
            break
        if h.tclass:  # a trimmed packet's DSCP, on this datagram only
            sock.sendmsg([h.payload], [(socket.IPPROTO_IPV6, socket.IPV6_TCLASS,
                                        h.tclass.to_bytes(4, "little"))],
                          0, (dst, wire.ROCE_PORT))
        else:
            sock.sendto(h.payload, (dst, wire.ROCE_PORT))
        sent.append(h)
        if i % batch == batch - 1:
            time.sleep(pause_s)
    return sent


def run(target: EndpointClient, peer: EndpointClient, netns: str, seed=DEFAULT_SEED,
        budget_s: float = 3.0, per_kind: int = 32, settle_s: float = 5.0,
        live: tuple[str, ...] = LIVE_TRANSPORTS, shape: LiveShape | None = None,
        steps: Steps | None = None) -> FuzzReport:
    """Fuzz the endpoint that `target` is connected to, with the help of another host's
    (`peer`); `netns` is the file naming the target host's network namespace, where the
    packets are sent from. First the plan (`plan`), then the live attack on each
    transport in `live` (`live_round`; none: the plan only). A FuzzReport: the
    plan's packets sent per kind, expected and counted per drop counter, the guards;
    `live`: each transport's attack (LiveReport); `alive`: both endpoints answered
    after; `ok` and `problems` (one line each): the verdict. (twin.endpoints.fuzz finds
    the clients and the namespace for a host of a lab.) `steps` hears the progress."""
    steps = steps or Steps()
    host, nic = (hello := target.hello())["host"], hello["nic"]
    peer_hello = peer.hello()
    peer_host = peer_hello["host"]
    r = target.recv_qp(size=2048, seed=seed)
    idle_at_peer = peer.send_qp(peer=host, peer_qpn=r["qpn"], rkey=r["rkey"], size=4096,
                                seed=seed)
    target.connect(qpn=r["qpn"], peer=peer_host, peer_qpn=idle_at_peer["qpn"])
    rx = peer.recv_qp(size=4096)
    s = target.send_qp(peer=peer_host, peer_qpn=rx["qpn"], rkey=rx["rkey"], size=4096)
    before = target.stats()
    known = {q["qpn"] for q in before["send_qps"] + before["recv_qps"]}
    cum = next(q["cum"] for q in before["recv_qps"] if q["qpn"] == r["qpn"])
    t = Target(nic, nic, r["qpn"], r["rkey"], 2048, s["qpn"], frozenset(known), cum)
    packets = plan(t, seed, per_kind)
    with nsenter.inside(netns):
        sock = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
        sock.bind((nic, t.sport))
    with sock:
        steps.start(f"plan: {len(packets)} packets")
        sent = send(sock, nic, packets, budget_s)
        want = expected(sent)
        deadline = time.monotonic() + settle_s
        while True:
            after = target.stats()
            got = {k: after["drops"][k] - before["drops"][k] for k in after["drops"]}
            # trimmed packets that passed every check: the receiving QP's NAK(TRIMMED)s
            got[NACKED] = next((q.get("nacks_trimmed", 0) for q in after["recv_qps"]
                                if q["qpn"] == r["qpn"]), 0)
            if all(got[k] >= n for k, n in want.items() if k != ACCEPTED) \
                    or time.monotonic() >= deadline:
                break
            time.sleep(0.05)
        guards = target.guards()  # while the plan's buffers are still registered
        for client, qpn in ((target, r["qpn"]), (target, s["qpn"]),
                            (peer, idle_at_peer["qpn"]), (peer, rx["qpn"])):
            client.close_qp(qpn)
        ends = _Ends(host, nic, peer_host, peer_hello["ports"],
                     frozenset(peer_hello["planes"]))
        lives = [_live(target, peer, sock, ends, transport, shape or LiveShape(), seed,
                       settle_s, steps) for transport in live]
    steps.done()
    alive = {h: _answers(c, h) for h, c in ((host, target), (peer_host, peer))}
    # the worst first: an endpoint gone explains every problem after it
    problems = [f"{h}: its endpoint no longer answers hello" for h, ok in alive.items()
                if not ok]
    if not guards["intact"]:
        problems.append(f"guard bytes broken around the buffers of QPs {guards['broken']}")
    problems += [f"plan: {k} counted {got.get(k, 0)}, expected {want.get(k, 0)}"
                 for k in sorted((set(want) | set(got)) - {ACCEPTED})
                 if got.get(k, 0) != want.get(k, 0)]
    problems += [p for lr in lives for p in lr.problems]
    return FuzzReport(seed, len(packets), len(sent), dict(sent_by_kind(sent)), dict(want),
                      got, guards, {lr.transport: lr for lr in lives}, alive, problems)


@dataclass
class FuzzReport:
    """A fuzz run's report: the plan's packets, planned and sent (by kind); the drop
    counters, expected and counted; the endpoint's guards answer; each transport's live
    attack; whether both endpoints still answered; and the verdict, a line per problem
    (`ok`: none). `to_json()` is what `twin traffic fuzz --json` prints."""

    seed: int
    planned: int
    sent: int
    sent_by_kind: dict[str, int]
    expected: dict[str, int]
    counted: dict[str, int]
    guards: dict  # the target endpoint's `guards` answer (intact, buffers, broken)
    live: dict[str, LiveReport]  # transport -> its attack
    alive: dict[str, bool]  # host -> its endpoint answered hello after
    problems: list[str]

    @property
    def ok(self) -> bool:
        return not self.problems

    def to_json(self) -> dict:
        return {"seed": self.seed, "planned": self.planned, "sent": self.sent,
                "sent_by_kind": self.sent_by_kind, "expected": self.expected,
                "counted": self.counted, "guards": self.guards,
                "live": {t: lr.to_dict() for t, lr in self.live.items()},
                "alive": self.alive, "ok": self.ok, "problems": self.problems}


@dataclass(frozen=True)
class _Ends:
    """Who the live attack runs between: the target host and its NIC, the peer host, the
    peer's port state and the fabric's planes (from the peer's hello)."""

    host: str
    nic: str
    peer: str
    ports: int
    planes: frozenset[int]


# What a control call raises when the endpoint is gone (it ended mid-attack): an error
# reply or no answer (LabError), or the connection broken under it (OSError)
_GONE = (LabError, OSError)


def _answers(client: EndpointClient, host: str) -> bool:
    try:
        return client.hello(timeout=10)["host"] == host
    except _GONE:
        return False


def _live(target: EndpointClient, peer: EndpointClient, sock: socket.socket, ends: _Ends,
          transport: str, shape: LiveShape, seed, settle_s: float, steps: Steps,
          wait_s: float = 60.0, budget_s: float = 10.0, stall_s: float = 1.0,
          confirm_s: float = 2.0) -> LiveReport:
    """One transport's live attack: open the QPs (on `transport`, both ends), post the
    writes, then rounds of live_round from `sock` (bound in the target's namespace)
    while they are in flight, at most shape.max_rounds and `budget_s`, and no longer
    than `stall_s` without a byte placed; wait for the writes (`wait_s` each), let the
    counters settle, judge (live_oracle), close."""
    rep = LiveReport(transport)
    t0 = time.monotonic()
    opened: list[tuple[EndpointClient, int]] = []
    try:
        qps = _open_live(target, peer, ends, transport, shape, seed, opened)
    except _GONE as e:
        rep.errors.append(f"could not open its QPs: {_why(e)}")
        _close(opened)
        return rep
    try:
        before = EndpointStats.from_dict(target.stats())
        runs = {q.transport for q in before.send_qps if q.qpn in (qps.mrc, qps.dcqcn)}
        if runs != {transport}:  # an endpoint from before per-QP transports ignores it
            rep.errors.append(f"its QPs run {', '.join(sorted(runs)) or '?'}, not "
                              f"{transport}: is the endpoint older than twin? rebuild the "
                              "images: twin images build")
            return rep
        target.write(qpn=qps.mrc, size=shape.mrc_bytes)
        target.write(qpn=qps.dcqcn, size=shape.dcqcn_bytes)
        sent: list[Hostile] = []
        steps.start(f"live attack: {transport}", shape.max_rounds)
        deadline = time.monotonic() + budget_s
        last_cum, placed, moved, probes = None, -1, time.monotonic(), 0
        rep.stopped = f"{shape.max_rounds} rounds"
        for round_no in range(shape.max_rounds):
            left = deadline - time.monotonic()
            if left <= 0:
                rep.stopped = f"{budget_s:g} s"
                break
            now = EndpointStats.from_dict(peer.stats())
            rm, rd = now.recv_qp(qps.rx_mrc), now.recv_qp(qps.rx_dcqcn)
            mid = rm.bytes < shape.mrc_bytes or rd.bytes < shape.dcqcn_bytes
            if rm.bytes + rd.bytes != placed:
                placed, moved = rm.bytes + rd.bytes, time.monotonic()
            elif time.monotonic() - moved > stall_s:  # a QP failed, or the target ended
                rep.stopped = f"no byte placed for {stall_s:g} s"
                break
            if last_cum is not None:
                rep.max_cum_step = max(rep.max_cum_step, rm.cum - last_cum)
            last_cum = rm.cum
            aim = LiveTarget(ends.nic, qps.mrc, qps.dcqcn, rm.cum, ends.ports, ends.planes,
                             shape.window)
            packets = live_round(aim, shape, seed, round_no)
            # one round, back to back: no pause inside the CNP flood (a round is small
            # for the endpoint's receive queue; reading the stats between rounds paces)
            sent += send(sock, ends.nic, packets, left, batch=len(packets))
            probes += sum(h.kind == "probe_unknown" for h in packets)
            sacks = sum(h.kind == "forged_sack" for h in packets)
            if sacks:  # proven over unsent PSNs, or not: the oracle's spread
                had_sent = _sent_when_read(target, before, qps.mrc, probes, confirm_s)
                if had_sent is None or had_sent > aim.cum + BITMAP_BITS:
                    rep.sacks_unsure += sacks
            rep.rounds += 1
            rep.rounds_mid_transfer += mid
            steps.advance()
            if not mid:  # both done: this round hit them idle, the last one
                rep.stopped = "writes done"
                break
        rep.sent_by_kind = dict(Counter(h.kind for h in sent))
        done = {}
        for q in (qps.mrc, qps.dcqcn):
            try:
                done[q] = target.wait(qpn=q, timeout=wait_s)
            except LabError as e:  # no answer in time (a broken connection ends the attack)
                rep.errors.append(f"QP {q}: no end to its write: {e}")
        settle = time.monotonic() + settle_s
        while True:  # the counters of what was sent: poll until they agree, bounded
            counted = live_counted(before, EndpointStats.from_dict(target.stats()),
                                   EndpointStats.from_dict(peer.stats()), qps)
            rep.checks = live_oracle(rep.sent_by_kind, counted, rep.sacks_unsure)
            if all(c.ok for c in rep.checks) or time.monotonic() >= settle:
                break
            time.sleep(0.05)
        for name, q, rq, size in (("mrc", qps.mrc, qps.rx_mrc, shape.mrc_bytes),
                                  ("dcqcn", qps.dcqcn, qps.rx_dcqcn, shape.dcqcn_bytes)):
            end = done.get(q, {})
            rep.transfers.append(Transfer(
                name, q, rq, size, bool(end.get("idle")), end.get("failed"),
                target.digest(qpn=q)["sha256"], peer.digest(qpn=rq)["sha256"]))
        rep.guards = {ends.host: target.guards()["intact"], ends.peer: peer.guards()["intact"]}
    except _GONE as e:
        rep.errors.append(f"the attack stopped: {_why(e)}")
    finally:
        _close(opened)
        rep.seconds = time.monotonic() - t0
    return rep


def _sent_when_read(target: EndpointClient, before: EndpointStats, qpn: int, probes: int,
                    within_s: float) -> int | None:
    """How many data packets QP `qpn` had sent once the target had read every packet of
    the attack so far, or None if it had not within `within_s`. Read means: its
    `probe_unknown` drops reached `probes`, the probe replies sent; a round's forged SACKs
    went before its probe replies, on the same socket, so they were read before too.
    Every PSN up to the highest sent went at least once, so that PSN is below the count:
    a SACK naming PSN c+64 names one never sent when the count is at most c+64."""
    deadline = time.monotonic() + within_s
    while True:
        now = EndpointStats.from_dict(target.stats())
        read = now.drops.probe_unknown - before.drops.probe_unknown >= probes
        qp = now.send_qp(qpn)
        if read and qp is not None:
            return qp.sender.packets
        if time.monotonic() >= deadline:
            return None
        time.sleep(0.001)


def _open_live(target: EndpointClient, peer: EndpointClient, ends: _Ends, transport: str,
               shape: LiveShape, seed, opened: list) -> LiveQps:
    """The live attack's QPs, each end on `transport`: an mrc QP with a window of
    shape.window packets and a single-path dcqcn QP on the target, writing to receiving
    QPs on the peer (connected, so SACKs flow back). Each QP opened joins `opened`."""
    got = {}
    for name, size, kw in (("mrc", shape.mrc_bytes,
                            {"init_window": shape.window, "max_window": shape.window}),
                           ("dcqcn", shape.dcqcn_bytes, {"mode": Mode.SINGLE_PATH.value,
                                                               "cc": Cc.DCQCN.value})):
        rx = peer.recv_qp(size=size, seed=seed, transport=transport)
        opened.append((peer, rx["qpn"]))
        tx = target.send_qp(peer=ends.peer, peer_qpn=rx["qpn"], rkey=rx["rkey"], size=size,
                            seed=seed, transport=transport, **kw)
        opened.append((target, tx["qpn"]))
        peer.connect(qpn=rx["qpn"], peer=ends.host, peer_qpn=tx["qpn"])
        got[name] = (tx["qpn"], rx["qpn"])
    return LiveQps(got["mrc"][0], got["dcqcn"][0], got["mrc"][1], got["dcqcn"][1])


def _why(e: Exception) -> str:
    """An error as one line: a broken control connection says the endpoint went away."""
    if isinstance(e, OSError):
        return f"its control connection broke ({e.strerror or e}): did the endpoint end?"
    return str(e)


def _close(opened: list[tuple[EndpointClient, int]]) -> None:
    for client, qpn in opened:
        try:
            client.close_qp(qpn)
        except _GONE:
            pass  # its endpoint is gone: the report says so
