"""Hostile packets for an MRC endpoint: built as data, then sent by a thin runner.

    twin fuzz [--host r1h0] [--seed 4791] [--budget 3] [--lab LAB]

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
The runner (`run`), given control clients of the target and of a peer and the
target's network namespace (twin.endpoints.fuzz finds them in a lab), registers a
receiving QP (connected to an idle sending QP on the peer, so SACKs for the accepted
and duplicate packets have somewhere to go) and an idle sending QP on the target
host, sends the plan from inside the target's own network namespace to its NIC
address (nothing leaves the lab), for a bounded time,
then reads back the endpoint's drop counters (and, as `nacked`, the receiving QP's
NAK(TRIMMED)s) and its `guards` report.
"""

from __future__ import annotations

import random
import socket
import time
from collections import Counter
from dataclasses import dataclass

from twin import nsenter
from twin.mrc import wire
from twin.mrc.control import EndpointClient
from twin.mrc.transport import RECV_WINDOW

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
        budget_s: float = 3.0, per_kind: int = 32, settle_s: float = 5.0) -> dict:
    """Fuzz the endpoint that `target` is connected to, with the help of another host's
    (`peer`); `netns` is the file naming the target host's network namespace, where the
    packets are sent from. A report as a dict: the packets sent per kind, the counts
    expected and counted per drop, the guards. (twin.endpoints.fuzz finds all three
    for a host of a lab.)"""
    host, nic = (hello := target.hello())["host"], hello["nic"]
    peer_host = peer.hello()["host"]
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
    guards = target.guards()
    for client, qpn in ((target, r["qpn"]), (target, s["qpn"]), (peer, idle_at_peer["qpn"]),
                        (peer, rx["qpn"])):
        client.close_qp(qpn)
    return {"seed": seed, "planned": len(packets), "sent": len(sent),
            "sent_by_kind": dict(sent_by_kind(sent)), "expected": dict(want),
            "counted": got, "guards": guards}
