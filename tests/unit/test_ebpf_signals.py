"""The fabric signals in the kernel, on golden packets, with BPF_PROG_TEST_RUN: a
shaped port's queue program (CE marks, trimming, drops, counters) and RFC 6040's
decapsulation rules (the ebpf decap program and seg6local's ecn_in). Needs root
(bpf()); nothing is attached and no packet goes anywhere.

The queue's state is set through its map before each run, so no test depends on
the clock: a program built for 1 bit/s drains 1 byte in 8 seconds, and a queue
`depth` bytes deep is `busy_until = now + depth x 8 s` (the test run reads the
clock a few microseconds later, which leaves the depth the program sees one byte
short at most: no threshold is within a byte of a depth used here).

Expected packets are built here with struct, from the lengths written out in the
tests, never with the code under test. A test run takes at most a page minus the
skb's head and tail room, so the "big" MRC packets here carry 2 KiB, not 4.
"""

from __future__ import annotations

import ipaddress
import os
import struct
import time

import pytest

from tests.helpers import bpf_refused
from twin.node import ebpf
from twin.node.ebpf import bpf, programs

TC_ACT_OK, TC_ACT_SHOT = 0, 2
NOT_ECT, ECT1, ECT0, CE = 0, 1, 2, 3
PORT_SID = "fcbb:bb00:1100::/48"
DST_MAC, SRC_MAC = bytes.fromhex("020000000002"), bytes.fromhex("020000000001")
SLOT = 3
# thresholds in bytes, far apart so that a depth can sit clearly between them
Q = {"dev": "eth3", "slot": SLOT, "rate_bps": 1, "ecn_min": 20_000, "ecn_max": 40_000,
     "mark": True, "trim": 60_000, "drop": 80_000}

REFUSED = bpf_refused("bpf()")
pytestmark = pytest.mark.skipif(bool(REFUSED), reason=REFUSED or "")


# --- golden packets ----------------------------------------------------------

def ipv6(src: str, dst: str, next_header: int, payload: bytes, tclass: int = 0,
         flow_label: int = 0) -> bytes:
    return struct.pack("!IHBB", 6 << 28 | tclass << 20 | flow_label, len(payload),
                       next_header, 64) + ipaddress.IPv6Address(src).packed \
        + ipaddress.IPv6Address(dst).packed + payload


def mrc(payload_len: int = 4096, dport: int = 4791, outer_tc: int = ECT0,
        inner_tc: int = ECT0, da: str = "fcbb:bb00:200:1100::") -> bytes:
    """An RDMA WRITE as MRC sends it: Ethernet, outer IPv6 (next header 41, flow label
    the EV), inner IPv6, UDP (checksum 0), BTH, RETH (DMA length = the payload),
    payload, ICRC."""
    bth = struct.pack("!BBHII", 0x0A, 0x40, 0xFFFF, 0x000011, 0x80000042)  # WRITE_ONLY
    reth = struct.pack("!QII", 0x1000, 0x1234, payload_len)
    body = bth + reth + bytes(range(256)) * (payload_len // 256) + bytes(payload_len % 256)
    body += b"ICRC"
    udp = struct.pack("!HHHH", 0xC123, dport, 8 + len(body), 0) + body
    inner = ipv6("fd00:4d52:43::1", "fd00:4d52:43:1::1", 17, udp, tclass=inner_tc,
                 flow_label=0x12345)
    return DST_MAC + SRC_MAC + b"\x86\xdd" + ipv6("fd00:4d52:43::1", da, 41, inner,
                                                  tclass=outer_tc, flow_label=0xABCDE)


def tclass(frame: bytes, at: int = 14) -> int:
    return (struct.unpack_from("!I", frame, at)[0] >> 20) & 0xFF


def ecn(frame: bytes, at: int = 14) -> int:
    return tclass(frame, at) & 0x3


def dscp(frame: bytes, at: int = 14) -> int:
    return tclass(frame, at) >> 2


# --- the queue program ---------------------------------------------------------

@pytest.fixture
def ports():
    fd = ebpf.ports_map([], 8)
    yield fd
    os.close(fd)


def load_queue(ports: int, **changes) -> int:
    fd, _ = ebpf.load_queue({**Q, **changes}, ports)
    return fd


@pytest.fixture
def queue(ports):
    fd = load_queue(ports)
    yield fd
    os.close(fd)


def set_depth(ports: int, depth: int, rate_bps: int = 1, slot: int = SLOT) -> None:
    """The port's queue `depth` bytes deep now (counters zeroed)."""
    busy = time.monotonic_ns() + depth * 8 * 10**9 // rate_bps
    bpf.update(ports, slot, struct.pack(f"={len(programs.PORT_FIELDS)}Q", busy,
                                        *[0] * (len(programs.PORT_FIELDS) - 1)))


def port(ports: int, slot: int = SLOT) -> dict:
    got = ebpf.read_ports(ports, [slot])[slot]
    return {k: v for k, v in got.items() if v and k not in ("busy_until_ns", "rate_bps",
                                                             "queue_bytes_now")}


def test_an_ect_packet_below_min_is_not_marked(queue, ports):
    packet = mrc(1000)
    set_depth(ports, 10_000)
    run = bpf.test_run(queue, packet)
    assert run.retval == TC_ACT_OK and run.data_out == packet
    got = port(ports)
    assert got.pop("packets") == 1
    assert 10_000 + len(packet) - 1 <= got.pop("queue_bytes") <= 10_000 + len(packet)
    assert got.pop("high_water_bytes") > 10_000
    assert got == {}


@pytest.mark.parametrize("mark", [ECT0, ECT1])
def test_an_ect_packet_above_max_is_marked_ce(queue, ports, mark):
    packet = mrc(1000, outer_tc=mark)
    set_depth(ports, 50_000)
    run = bpf.test_run(queue, packet)
    assert run.retval == TC_ACT_OK
    assert ecn(run.data_out) == CE and dscp(run.data_out) == 0
    # only the traffic class changed: the rest of the frame, inner ECN included, is as sent
    assert run.data_out[:14] + run.data_out[16:] == packet[:14] + packet[16:]
    assert ecn(run.data_out, 54) == ECT0
    assert port(ports)["ce_marked"] == 1


def test_not_ect_is_never_marked(queue, ports):
    packet = mrc(1000, outer_tc=NOT_ECT)
    set_depth(ports, 50_000)
    run = bpf.test_run(queue, packet)
    assert run.retval == TC_ACT_OK and run.data_out == packet
    assert "ce_marked" not in port(ports)


def test_a_host_facing_port_never_marks(ports):
    fd = load_queue(ports, mark=False)
    try:
        packet = mrc(1000)
        set_depth(ports, 50_000)
        run = bpf.test_run(fd, packet)
        assert run.retval == TC_ACT_OK and run.data_out == packet
        assert "ce_marked" not in port(ports)
    finally:
        os.close(fd)


def test_marking_rises_linearly_between_min_and_max(queue, ports):
    """At 3/4 of the way from min to max, 3 packets of 4 are marked (loosely: 200 draws)."""
    marked = 0
    for _ in range(200):
        set_depth(ports, 35_000)
        marked += ecn(bpf.test_run(queue, mrc(200)).data_out) == CE
    assert 110 <= marked <= 190, marked


def trimmed_frame(packet: bytes, outer_ecn: int) -> bytes:
    """What trimming leaves of `packet`, written out: its first 130 bytes with the
    outer payload length 76, DSCP 7 and the ECN bits given, inner payload length 36,
    UDP length 36 (checksum still 0); BTH and RETH (DMA length too) as they were."""
    out = bytearray(packet[:130])
    word = struct.unpack_from("!I", out, 14)[0] & ~(0xFF << 20)
    struct.pack_into("!I", out, 14, word | (7 << 2 | outer_ecn) << 20)
    struct.pack_into("!H", out, 18, 76)
    struct.pack_into("!H", out, 58, 36)
    struct.pack_into("!H", out, 98, 36)
    return bytes(out)


def test_a_big_mrc_packet_over_trim_comes_out_130_bytes(ports):
    fd = load_queue(ports, mark=False)  # the last hop: the ECN bits stay as they were
    try:
        packet = mrc(2048)
        set_depth(ports, 58_000)  # 58,000 + 2,182 > 60,000: trimmed
        run = bpf.test_run(fd, packet)
        assert run.retval == TC_ACT_OK
        assert len(run.data_out) == 130
        assert run.data_out == trimmed_frame(packet, ECT0)
        assert struct.unpack_from("!HH", run.data_out, 94 + 2) == (4791, 36)
        assert struct.unpack_from("!H", run.data_out, 94 + 6) == (0,)  # UDP checksum
        assert struct.unpack_from("!I", run.data_out, 94 + 8 + 12 + 12) == (2048,)  # DMA len
        got = port(ports)
        assert got["trimmed"] == 1 and "dropped" not in got
        assert 58_000 + 129 <= got["queue_bytes"] <= 58_000 + 130  # in at its new size
    finally:
        os.close(fd)


def test_a_trimmed_packet_on_a_marking_port_is_also_ce(queue, ports):
    packet = mrc(2048)
    set_depth(ports, 58_000)
    run = bpf.test_run(queue, packet)
    assert run.data_out == trimmed_frame(packet, CE)
    assert {k: port(ports)[k] for k in ("trimmed", "ce_marked")} == {"trimmed": 1,
                                                                      "ce_marked": 1}


def test_over_the_drop_limit_even_a_trimmed_packet_is_dropped(queue, ports):
    set_depth(ports, 79_950)  # 79,950 + 130 > 80,000
    assert bpf.test_run(queue, mrc(2048)).retval == TC_ACT_SHOT
    got = port(ports)
    assert got["dropped"] == 1 and "trimmed" not in got


@pytest.mark.parametrize("packet", [
    mrc(2048, dport=9999),  # UDP, not RoCEv2
    mrc(2048)[:14 + 6] + bytes([17]) + mrc(2048)[21:],  # outer next header UDP, not 6in6
], ids=["not-4791", "not-6in6"])
def test_a_non_mrc_packet_over_trim_is_dropped(queue, ports, packet):
    set_depth(ports, 58_000)
    assert bpf.test_run(queue, packet).retval == TC_ACT_SHOT
    assert port(ports)["dropped"] == 1


def test_a_short_mrc_packet_over_trim_passes_below_the_drop_limit(queue, ports):
    ack = mrc(0)[:14 + 40 + 40 + 8 + 12] + b"ACKS"  # 118 bytes, shorter than a trim
    set_depth(ports, 70_000)
    run = bpf.test_run(queue, ack)
    assert run.retval == TC_ACT_OK and len(run.data_out) == len(ack)
    assert "trimmed" not in port(ports)


def test_the_queue_drains_at_the_ports_rate(ports):
    fd = load_queue(ports, rate_bps=8 * 10**9)  # a byte a nanosecond
    try:
        set_depth(ports, 50_000, rate_bps=8 * 10**9)  # drained 50 us from now
        time.sleep(0.01)
        run = bpf.test_run(fd, mrc(1000))
        assert run.retval == TC_ACT_OK and ecn(run.data_out) == ECT0  # empty again
        assert port(ports)["queue_bytes"] == len(mrc(1000))
    finally:
        os.close(fd)


def test_each_packet_deepens_the_queue_until_it_trims(queue, ports):
    """No drain at 1 bit/s: 2,192-byte packets into an empty queue, one after another:
    27 fit under trim (59,184 bytes), then they come out trimmed."""
    size = len(mrc(2048))
    assert size == 14 + 40 + 40 + 8 + 12 + 16 + 2048 + 4 == 2182
    set_depth(ports, 0)
    verdicts = []
    for _ in range(40):
        run = bpf.test_run(queue, mrc(2048))
        verdicts.append(len(run.data_out) if run.retval == TC_ACT_OK else "drop")
    full = 60_000 // size
    assert verdicts[:full] == [size] * full
    assert verdicts[full:] == [130] * (40 - full)
    got = port(ports)
    assert got["packets"] == 40 and got["trimmed"] == 40 - full
    assert got["high_water_bytes"] == got["queue_bytes"]


def test_other_ethertypes_pass_unqueued(queue, ports):
    arp = DST_MAC + SRC_MAC + b"\x08\x06" + bytes(28)
    set_depth(ports, 79_999)
    assert bpf.test_run(queue, arp + bytes(40)).retval == TC_ACT_OK
    assert port(ports) == {}


def test_the_queue_tag_is_the_one_we_compute(ports):
    fd = load_queue(ports)
    try:
        assert bpf.prog_info(fd).tag in ebpf.queue_tags(Q)
        assert bpf.prog_info(fd).map_ids == (bpf.map_info(ports).id,)
    finally:
        os.close(fd)


# --- RFC 6040 at decapsulation ----------------------------------------------------

@pytest.fixture
def counters():
    fd = ebpf.counters_map(None)
    yield fd
    os.close(fd)


@pytest.fixture(params=["decap", "ecn"])
def decapsulating(request, counters, ports):
    """The ebpf decap program, or seg6local's ecn_in (which leaves the decap to the
    kernel): (kind, fd)."""
    fd, _ = ebpf.load(request.param, PORT_SID, counters, SLOT, ports)
    yield request.param, fd
    os.close(fd)


# outer ECN, inner ECN -> inner ECN after decap (None: dropped), RFC 6040 section 4.2
# for the signals the fabric adds (CE); the other outer codepoints leave the inner alone
RFC6040 = [(o, i, {CE: (None if i == NOT_ECT else CE)}.get(o, i))
           for o in (NOT_ECT, ECT1, ECT0, CE) for i in (NOT_ECT, ECT1, ECT0, CE)]


@pytest.mark.parametrize("outer, inner, after", RFC6040)
def test_rfc6040_ecn_at_decap(decapsulating, ports, outer, inner, after):
    kind, fd = decapsulating
    packet = mrc(200, outer_tc=outer, inner_tc=inner, da="fcbb:bb00:1100::")
    run = bpf.test_run(fd, packet)
    got = port(ports)
    if after is None:
        assert run.retval == TC_ACT_SHOT
        assert got == {"drop_ce_not_ect": 1}
        return
    assert run.retval == TC_ACT_OK
    at = 14 if kind == "decap" else 54  # the inner header, decapsulated or not yet
    assert ecn(run.data_out, at) == after and dscp(run.data_out, at) == 0
    rest = packet[54 + 2:] if kind == "decap" else packet[56:]
    assert run.data_out[at + 2:] == rest  # nothing else changed
    assert got == ({"ce_to_inner": 1} if after != inner else {})


@pytest.mark.parametrize("outer, inner", [(ECT0, ECT0), (CE, ECT0), (ECT0, NOT_ECT)])
def test_the_trim_dscp_is_copied_inward_keeping_the_inner_ecn(decapsulating, ports, outer,
                                                              inner):
    kind, fd = decapsulating
    packet = bytearray(mrc(2048, inner_tc=inner, da="fcbb:bb00:1100::")[:130])
    struct.pack_into("!I", packet, 14, 6 << 28 | (7 << 2 | outer) << 20 | 0xABCDE)
    run = bpf.test_run(fd, bytes(packet))
    assert run.retval == TC_ACT_OK
    at = 14 if kind == "decap" else 54
    assert dscp(run.data_out, at) == programs.TRIM_DSCP == 7
    assert ecn(run.data_out, at) == (CE if outer == CE else inner)
    assert struct.unpack_from("!I", run.data_out, at)[0] & 0xFFFFF == 0x12345  # flow label
    got = port(ports)
    assert got.pop("trim_to_inner") == 1
    assert got == ({"ce_to_inner": 1} if outer == CE else {})


def test_other_dscps_are_not_copied(decapsulating, ports):
    kind, fd = decapsulating
    packet = bytearray(mrc(200, da="fcbb:bb00:1100::"))
    struct.pack_into("!I", packet, 14, 6 << 28 | (46 << 2 | ECT0) << 20)  # EF
    run = bpf.test_run(fd, bytes(packet))
    assert dscp(run.data_out, 14 if kind == "decap" else 54) == 0
    assert port(ports) == {}


def test_decap_with_the_copy_still_decapsulates(counters, ports):
    fd, _ = ebpf.load("decap", PORT_SID, counters, SLOT, ports)
    try:
        packet = mrc(200, outer_tc=CE, da="fcbb:bb00:1100::")
        run = bpf.test_run(fd, packet)
        assert len(run.data_out) == len(packet) - 40
        assert ebpf.read_map(counters)["decapsulated"] == 1
    finally:
        os.close(fd)


def test_ecn_in_leaves_other_destinations_alone(counters, ports):
    fd, _ = ebpf.load("ecn", PORT_SID, counters, SLOT, ports)
    try:
        packet = mrc(200, outer_tc=CE, inner_tc=NOT_ECT, da="fcbb:bb00:1200::")
        run = bpf.test_run(fd, packet)
        assert run.retval == TC_ACT_OK and run.data_out == packet
    finally:
        os.close(fd)


def gso(segs: int, size: int) -> bytes:
    """A struct __sk_buff for a test run: gso_segs (offset 164) and gso_size (176)."""
    ctx = bytearray(192)
    struct.pack_into("=I", ctx, 164, segs)
    struct.pack_into("=I", ctx, 176, size)
    return bytes(ctx)


def test_a_gso_skb_is_checked_by_one_segment_and_queued_whole(queue, ports):
    """Kernel TCP crosses the veths as GSO super-packets: one of 4 segments is admitted
    where a single packet of its whole length would be trimmed, and enters whole."""
    packet = mrc(2048)  # 2,182 bytes: 4 segments of 545 as the program counts them
    set_depth(ports, 59_000)
    run = bpf.test_run(queue, packet, ctx=gso(4, 532))
    assert run.retval == TC_ACT_OK and len(run.data_out) == len(packet)
    assert ecn(run.data_out) == CE  # past ecn_max: every segment will carry the mark
    assert run.data_out[16:] == packet[16:]
    got = port(ports)
    assert "trimmed" not in got
    assert 59_000 + len(packet) - 1 <= got["queue_bytes"] <= 59_000 + len(packet)


def test_a_gso_skb_over_trim_is_dropped_not_trimmed(queue, ports):
    set_depth(ports, 59_600)  # 59,600 + 545 > 60,000
    assert bpf.test_run(queue, mrc(2048), ctx=gso(4, 532)).retval == TC_ACT_SHOT
    got = port(ports)
    assert got["dropped"] == 1 and "trimmed" not in got
