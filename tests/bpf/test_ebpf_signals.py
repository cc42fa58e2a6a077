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
tests, never with the code under test. What a queue does past `trim` with MRC's own
frames is checked on the frames the endpoint sends, made by its encoder
(twin.mrc.wire, as twin/mrc/loop.py frames them), and judged by what the receiving
host makes of them: its port's decap program, then the endpoint's decoder, ICRC and
all. A test run takes at most a page minus the skb's head and tail room, so the "big"
MRC packets here carry 2 KiB, not 4.
"""

from __future__ import annotations

import ipaddress
import os
import struct
import time

import pytest

from twin.mrc import wire
from twin.node import ebpf
from twin.node.ebpf import bpf, programs
from twin.verify import packets

TC_ACT_OK, TC_ACT_SHOT = 0, 2
NOT_ECT, ECT1, ECT0, CE = 0, 1, 2, 3
PORT_SID = "fcbb:bb00:1100::/48"
DST_MAC, SRC_MAC = bytes.fromhex("020000000002"), bytes.fromhex("020000000001")
SLOT = 3
# thresholds in bytes, far apart so that a depth can sit clearly between them
Q = {"dev": "eth3", "slot": SLOT, "rate_bps": 1, "ecn_min": 20_000, "ecn_max": 40_000,
     "mark": True, "trim": 60_000, "drop": 80_000}

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


# --- past trim, MRC's real frames: data is trimmed, control passes whole ------------

NIC_A, NIC_B = "fd00:4d52:43::1", "fd00:4d52:43:1::1"  # the sending and receiving NIC
LAST_HOP = "fcbb:bb00:1100::"  # a path at its last switch: the receiving port's SID
EV, QP, RKEY = 0x8123_4567, 0x000011, 0x1234
SACK = wire.Sack(cum=41, bitmap=0b1011, ev=EV, tries=2,
                 congestion=wire.CONGESTION_ECHO_CE | 3, port_state=0xFE)
CONTROL = {
    "ack": wire.Ack(QP, 42, 41, SACK),
    "nak-seq": wire.Nack(QP, 41, 41, wire.NAK_PSN_SEQUENCE_ERROR, SACK),
    "nak-trimmed": wire.Nack(QP, 44, 41, wire.NAK_TRIMMED, SACK),
    "probe": wire.Probe(QP, EV, 7, 1_234_567_890, 0x4321_0003, 0xFF),
    "probe-reply": wire.Probe(QP, EV, 7, 1_234_567_890, 0x4321_0003, 0xFF).as_reply(),
    "cnp": wire.Cnp(QP),
}
# depths, with the thresholds of Q: 60,000 trim, 80,000 drop
BELOW_TRIM, PAST_TRIM, OVER_DROP = 10_000, 70_000, 79_950


def ethernet(packet: bytes) -> bytes:
    return DST_MAC + SRC_MAC + b"\x86\xdd" + packet


def control(name: str) -> bytes:
    """A control frame as the endpoint sends it (loop.py `_send_sack`: the reverse EV's
    Framer), with the Ethernet header its port adds."""
    return ethernet(wire.Framer(NIC_B, LAST_HOP, NIC_B, NIC_A, EV).frame(CONTROL[name].encode()))


def data(n: int, imm: int | None = None) -> bytes:
    """An MRC data frame of n payload bytes as the sender builds it (a DataTemplate)."""
    template = wire.DataTemplate(NIC_A, LAST_HOP, NIC_A, NIC_B, EV, QP, RKEY)
    return ethernet(template.build(0x42, 0x10_0000, bytes(range(256)) * (n // 256)
                                   + bytes(n % 256), tries=1, imm=imm))


@pytest.fixture
def receiver():
    """The receiving host's port: its decap program, with maps of its own."""
    counters, ports = ebpf.counters_map(None), ebpf.ports_map([], 8)
    fd, _ = ebpf.load("decap", PORT_SID, counters, SLOT, ports)
    yield fd
    for each in (fd, counters, ports):
        os.close(each)


def arrived(receiver: int, frame: bytes) -> bytes:
    """The frame as the receiving host's port leaves it: decapsulated (the outer trim
    DSCP and CE copied inward, RFC 6040)."""
    run = bpf.test_run(receiver, frame)
    assert run.retval == TC_ACT_OK and len(run.data_out) == len(frame) - 40
    return run.data_out


def decoded(receiver: int, frame: bytes) -> wire.Packet:
    """What the endpoint makes of a frame the queue let through: decapsulated, then
    decoded from what its socket reports (the inner addresses, UDP source port and flow
    info), the ICRC checked unless it is a trimmed data packet."""
    inner = arrived(receiver, frame)[14:]
    word0, _, _, _, src, dst = wire.IP6.unpack_from(inner)
    sport = wire.UDP.unpack_from(inner, wire.IP6.size)[0]
    return wire.decode(inner[wire.HEADROOM - wire.IP6.size:], src, dst, sport,
                       word0 & 0x0FFFFFFF)


@pytest.mark.parametrize("depth", [BELOW_TRIM, PAST_TRIM], ids=["below-trim", "past-trim"])
@pytest.mark.parametrize("name", CONTROL)
def test_a_control_frame_passes_whole_up_to_drop(queue, ports, receiver, name, depth):
    """ACK, NAK, probes and CNP are longer than a trim: cut to 130 bytes they would lose
    their ICRC, and the signals they carry back would be lost with them."""
    frame = control(name)
    assert len(frame) > programs.TRIM_FRAME_LEN  # 142 bytes, a CNP 134
    set_depth(ports, depth)
    run = bpf.test_run(queue, frame)
    assert run.retval == TC_ACT_OK and run.data_out == frame  # Not-ECT: never marked
    assert decoded(receiver, run.data_out) == CONTROL[name]
    got = port(ports)
    assert "trimmed" not in got and "dropped" not in got
    assert depth + len(frame) - 1 <= got["queue_bytes"] <= depth + len(frame)


@pytest.mark.parametrize("name", CONTROL)
def test_a_control_frame_over_drop_is_dropped(queue, ports, name):
    set_depth(ports, OVER_DROP)
    assert bpf.test_run(queue, control(name)).retval == TC_ACT_SHOT
    got = port(ports)
    assert got["dropped"] == 1 and "trimmed" not in got


DATA = [(0, None), (64, None), (1000, None), (2048, None), (0, 7), (1000, 7), (2048, 7)]
DATA_IDS = [f"write{'-imm' if imm is not None else ''}-{n}" for n, imm in DATA]


@pytest.mark.parametrize("n, imm", DATA, ids=DATA_IDS)
def test_a_data_frame_below_trim_passes_whole(queue, ports, receiver, n, imm):
    frame = data(n, imm)
    set_depth(ports, BELOW_TRIM)
    run = bpf.test_run(queue, frame)
    assert run.retval == TC_ACT_OK and run.data_out == frame
    got = decoded(receiver, run.data_out)
    assert isinstance(got, wire.DataPacket) and (got.psn, got.imm) == (0x42, imm)
    assert bytes(got.payload) == frame[-4 - n:-4]


@pytest.mark.parametrize("n, imm", DATA, ids=DATA_IDS)
def test_a_data_frame_past_trim_is_trimmed_to_its_headers(queue, ports, receiver, n, imm):
    frame = data(n, imm)
    set_depth(ports, PAST_TRIM)  # past ecn_max too: the trimmed header is also CE
    run = bpf.test_run(queue, frame)
    assert run.retval == TC_ACT_OK and len(run.data_out) == programs.TRIM_FRAME_LEN == 130
    assert dscp(run.data_out) == wire.TRIM_DSCP and ecn(run.data_out) == CE
    # the receiving host sees what wire.trim says a trimming switch leaves
    assert arrived(receiver, run.data_out)[14:] == wire.trim(frame[14:], ecn=CE)[40:]
    opcode = wire.RDMA_WRITE_ONLY if imm is None else wire.RDMA_WRITE_ONLY_WITH_IMMEDIATE
    assert decoded(receiver, run.data_out) == wire.Trimmed(
        QP, 0x42, 0x10_0000, RKEY, n, EV, 1, opcode, wire.TRIM_DSCP << 2 | CE)
    got = port(ports)
    assert got["trimmed"] == 1 and "dropped" not in got
    assert PAST_TRIM + 129 <= got["queue_bytes"] <= PAST_TRIM + 130  # in at its new size


def test_a_data_frame_over_drop_is_dropped(queue, ports):
    set_depth(ports, OVER_DROP)
    assert bpf.test_run(queue, data(1000)).retval == TC_ACT_SHOT
    got = port(ports)
    assert got["dropped"] == 1 and "trimmed" not in got


def test_a_data_frame_trimmed_upstream_passes_as_it_is(queue, ports, receiver):
    """A data frame no longer than a trim (one an earlier switch trimmed) is not cut
    again, and not counted again."""
    frame = ethernet(wire.trim(data(1000)[14:]))
    set_depth(ports, PAST_TRIM)
    run = bpf.test_run(queue, frame)
    assert run.retval == TC_ACT_OK and len(run.data_out) == len(frame) == 130
    assert isinstance(decoded(receiver, run.data_out), wire.Trimmed)
    assert "trimmed" not in port(ports)


@pytest.mark.parametrize("opcode", range(0x04, 0x0E), ids=lambda op: f"{op:#04x}")
def test_only_the_rc_write_opcodes_are_trimmed(queue, ports, opcode):
    """RC RDMA WRITE FIRST .. ONLY with Immediate (0x06 .. 0x0B) are RoCE data, as a
    standard RoCEv2 sender sends them (MRC uses ONLY and ONLY with Immediate); the
    opcodes on either side (SEND, RDMA READ request) pass whole. A 1,000-byte body
    after the BTH, framed by the endpoint's encoder, ICRC included."""
    body = wire.BTH.pack(opcode, 0, wire.PKEY, QP, 0x42) + bytes(1000)
    frame = ethernet(wire.Framer(NIC_A, LAST_HOP, NIC_A, NIC_B, EV, wire.ECT0).frame(body))
    set_depth(ports, PAST_TRIM)
    run = bpf.test_run(queue, frame)
    assert run.retval == TC_ACT_OK
    if 0x06 <= opcode <= 0x0B:
        assert len(run.data_out) == 130 and run.data_out[102] == opcode
        assert port(ports)["trimmed"] == 1
    else:
        assert len(run.data_out) == len(frame) and "trimmed" not in port(ports)


# --- past trim, ICMPv6 neighbour discovery passes whole -----------------------------

ROUTER, NEIGHBOUR = "fe80::100", "fe80::200"
SOLICITED = "ff02::1:ff00:200"  # NEIGHBOUR's solicited-node multicast group


def icmpv6_checksum(src: str, dst: str, message: bytes) -> int:
    """RFC 4443 2.3: the ones' complement sum over the pseudo-header (RFC 8200 8.1) and
    the message."""
    data = ipaddress.IPv6Address(src).packed + ipaddress.IPv6Address(dst).packed \
        + struct.pack("!I3xB", len(message), 58) + message
    data += bytes(len(data) % 2)
    total = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


def neighbour_solicitation(hop_limit: int = 255, icmp_type: int = 135) -> bytes:
    """A switch asking for its next hop's MAC (RFC 4861 4.3): type 135, the target, and
    its own link-layer address as an option; hop limit 255, as ND is always sent."""
    message = struct.pack("!BBHI16s", icmp_type, 0, 0, 0,
                          ipaddress.IPv6Address(NEIGHBOUR).packed) \
        + struct.pack("!BB6s", 1, 1, SRC_MAC)
    message = message[:2] + struct.pack("!H", icmpv6_checksum(ROUTER, SOLICITED, message)) \
        + message[4:]
    packet = struct.pack("!IHBB", 6 << 28, len(message), 58, hop_limit) \
        + ipaddress.IPv6Address(ROUTER).packed + ipaddress.IPv6Address(SOLICITED).packed \
        + message
    return bytes.fromhex("3333ff000200") + SRC_MAC + b"\x86\xdd" + packet


def test_the_neighbour_solicitation_is_what_scapy_builds():
    scapy = pytest.importorskip("scapy.all")
    ours = neighbour_solicitation()
    theirs = scapy.Ether(ours)
    assert theirs[scapy.ICMPv6ND_NS].tgt == NEIGHBOUR
    checksum = theirs[scapy.ICMPv6ND_NS].cksum
    del theirs[scapy.ICMPv6ND_NS].cksum  # scapy computes it anew
    assert scapy.Ether(bytes(theirs))[scapy.ICMPv6ND_NS].cksum == checksum
    assert bytes(theirs) == ours


@pytest.mark.parametrize("depth, verdict", [(PAST_TRIM, TC_ACT_OK), (OVER_DROP, TC_ACT_SHOT)],
                         ids=["past-trim", "over-drop"])
def test_a_neighbour_solicitation_passes_whole_up_to_drop(queue, ports, depth, verdict):
    """Dropped past trim, a long incast could fail the next hop's neighbour entry."""
    frame = neighbour_solicitation()
    set_depth(ports, depth)
    run = bpf.test_run(queue, frame)
    assert run.retval == verdict
    got = port(ports)
    if verdict == TC_ACT_OK:
        assert run.data_out == frame and "dropped" not in got
        assert depth + len(frame) - 1 <= got["queue_bytes"] <= depth + len(frame)
    else:
        assert got["dropped"] == 1


@pytest.mark.parametrize("frame", [
    neighbour_solicitation(icmp_type=128),  # an echo request: not ND
    neighbour_solicitation(icmp_type=138),  # the first type after the ND range
    neighbour_solicitation(hop_limit=254),  # forwarded: not from this link
], ids=["echo-request", "type-138", "forwarded"])
def test_other_icmpv6_past_trim_is_dropped(queue, ports, frame):
    set_depth(ports, PAST_TRIM)
    assert bpf.test_run(queue, frame).retval == TC_ACT_SHOT
    assert port(ports)["dropped"] == 1


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


# --- the probe class -----------------------------------------------------------

def skb(priority: int = 0) -> bytes:
    """A struct __sk_buff for a test run, with skb->priority (offset 32) as given."""
    ctx = bytearray(192)
    struct.pack_into("=I", ctx, programs.SKB_PRIORITY, priority)
    return bytes(ctx)


def priority(run) -> int:
    return struct.unpack_from("=I", run.ctx_out, programs.SKB_PRIORITY)[0]


def loop_probe(tc: int = packets.PROBE_TC) -> bytes:
    """A loopback probe as the prober sends it (twin.verify.packets), on its first hop."""
    body = packets.probe_payload(packets.ProbeBody(packets.LOOP, 7, 42, 123456789))
    return ethernet(packets.encapsulated(NIC_A, LAST_HOP, EV, NIC_A, NIC_A, 40000, 40000,
                                         body, tc=tc))


def test_a_probe_leaves_in_the_probe_class():
    frame = loop_probe()
    assert dscp(frame) == dscp(frame, 54) == programs.PROBE_DSCP == 48
    assert ecn(frame) == ecn(frame, 54) == ECT0
    assert len(frame) <= programs.PROBE_FRAME_MAX


@pytest.mark.parametrize("depth", [BELOW_TRIM, PAST_TRIM, OVER_DROP,
                                   Q["drop"] + programs.PROBE_ROOM - 200],
                         ids=["below-trim", "past-trim", "over-drop", "in-its-room"])
def test_a_probe_is_served_ahead_whole_up_to_its_room_past_drop(queue, ports, depth):
    """Past trim, where any other UDP is dropped, and past drop, where every other frame
    is (a RoCE incast holds its queue at drop), a probe passes whole, in band 0 of the
    port's pfifo_fast (TC_PRIO_CONTROL): it does not wait behind the data."""
    frame = loop_probe()
    set_depth(ports, depth)
    run = bpf.test_run(queue, frame, ctx=skb())
    assert run.retval == TC_ACT_OK and len(run.data_out) == len(frame)
    assert priority(run) == programs.TC_PRIO_CONTROL
    assert run.data_out[16:] == frame[16:]  # at most the traffic class changed
    assert "dropped" not in port(ports) and "trimmed" not in port(ports)


def test_a_probe_past_its_room_is_dropped(queue, ports):
    """The class is bounded: what a sender puts in CS6 gets PROBE_ROOM past drop, no more."""
    set_depth(ports, Q["drop"] + programs.PROBE_ROOM - 100)
    assert bpf.test_run(queue, loop_probe(), ctx=skb()).retval == TC_ACT_SHOT
    assert port(ports)["dropped"] == 1
    set_depth(ports, OVER_DROP)  # where a control frame is dropped
    assert bpf.test_run(queue, control("ack")).retval == TC_ACT_SHOT


@pytest.mark.parametrize("mark", [True, False], ids=["marking-port", "last-hop"])
@pytest.mark.parametrize("depth,ce", [(Q["ecn_min"] - 2_000, False), (Q["ecn_min"] + 2_000, True),
                                      (PAST_TRIM, True)])
def test_a_probe_is_ce_from_ecn_min_on_every_port(ports, mark, depth, ce):
    """The prober's congestion signal: CE whenever the data queue is at ecn_min or over,
    drawn from nothing (no RED), and on the last hop too, which never marks data."""
    fd = load_queue(ports, mark=mark)
    try:
        frame = loop_probe()
        set_depth(ports, depth)
        run = bpf.test_run(fd, frame, ctx=skb())
        assert run.retval == TC_ACT_OK
        assert ecn(run.data_out) == (CE if ce else ECT0)
        assert ecn(run.data_out, 54) == ECT0 and dscp(run.data_out) == programs.PROBE_DSCP
        assert "ce_marked" not in port(ports)  # data's counter
    finally:
        os.close(fd)


def test_a_not_ect_probe_is_never_marked(queue, ports):
    frame = loop_probe(tc=programs.PROBE_DSCP << 2)
    set_depth(ports, PAST_TRIM)
    run = bpf.test_run(queue, frame, ctx=skb())
    assert run.retval == TC_ACT_OK and run.data_out == frame


def test_a_probes_ce_comes_back_inward_at_decap(queue, ports, receiver):
    set_depth(ports, PAST_TRIM)
    out = bpf.test_run(queue, loop_probe(), ctx=skb()).data_out
    inner = arrived(receiver, out)
    assert ecn(inner) == CE and dscp(inner) == programs.PROBE_DSCP


def test_a_big_frame_in_the_probe_dscp_is_not_in_the_probe_class(queue, ports):
    """The class is for probes: a data frame sent in CS6 is trimmed like data, at the
    data priority; a sender cannot buy its way ahead with a DSCP."""
    frame = bytearray(data(2048))
    word = struct.unpack_from("!I", frame, 14)[0] & ~(0xFF << 20)
    struct.pack_into("!I", frame, 14, word | (programs.PROBE_DSCP << 2 | ECT0) << 20)
    set_depth(ports, PAST_TRIM)
    run = bpf.test_run(queue, bytes(frame), ctx=skb(priority=6))
    assert run.retval == TC_ACT_OK and len(run.data_out) == programs.TRIM_FRAME_LEN
    assert priority(run) == 0


@pytest.mark.parametrize("frame", [lambda: mrc(1000), lambda: control("ack"),
                                   neighbour_solicitation],
                         ids=["data", "ack", "neighbour-solicitation"])
def test_every_other_frame_leaves_at_priority_0(queue, ports, frame):
    """What a sender put in skb->priority (SO_PRIORITY) does not put it in band 0; ND
    past trim takes its own way (whole up to drop), not the probe class's."""
    set_depth(ports, PAST_TRIM)
    run = bpf.test_run(queue, frame(), ctx=skb(priority=programs.TC_PRIO_CONTROL))
    assert run.retval == TC_ACT_OK and priority(run) == 0
