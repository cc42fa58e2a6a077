"""The three programs in the kernel, on golden packets, with BPF_PROG_TEST_RUN:
verifier-accepted, byte-exact outputs, the right verdicts and counters, and
the kernel's own tag equal to `programs.tag`. Needs root (bpf()); nothing is
attached and no packet goes anywhere.

Every expected packet is built here with `struct` and `ipaddress` from the
addresses written out in the test (`frame`, `ipv6`, `udp` below), never with
the code under test; where scapy is importable one case is also checked
against scapy's own encoding.

The encap program is not test-run: bpf_lwt_push_encap on the lwt xmit path
reads the skb's route (skb_dst) to size the headroom, and a test run has
none: kernels without a fix dereference NULL there. It is checked live,
through a real route, in test_ebpf_live.py.
"""

from __future__ import annotations

import ipaddress
import os
import struct

import pytest

from twin.node import ebpf
from twin.node.ebpf import asm, bpf, programs

TC_ACT_OK, TC_ACT_SHOT = 0, 2
MY_SID = "fcbb:bb00:100::/48"
PORT_SID = "fcbb:bb00:1100::/48"
DST_MAC, SRC_MAC = bytes.fromhex("020000000002"), bytes.fromhex("020000000001")


# --- golden packets, built independently ---------------------------------

def frame(payload: bytes, ethertype: int = 0x86DD) -> bytes:
    return DST_MAC + SRC_MAC + struct.pack("!H", ethertype) + payload


def ipv6(src: str, dst: str, next_header: int, payload: bytes, hop_limit: int = 64,
         flow_label: int = 0, version: int = 6) -> bytes:
    return struct.pack("!IHBB", version << 28 | flow_label, len(payload), next_header,
                       hop_limit) + ipaddress.IPv6Address(src).packed \
        + ipaddress.IPv6Address(dst).packed + payload


def udp(payload: bytes, sport: int = 49152, dport: int = 4791) -> bytes:
    return struct.pack("!HHHH", sport, dport, 8 + len(payload), 0) + payload


# an IPv4 header (192.0.2.1 -> 192.0.2.2, documentation addresses, no payload)
IPV4 = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20, 1, 0, 64, 0, 0, bytes([192, 0, 2, 1]),
                   bytes([192, 0, 2, 2]))
INNER = ipv6("fd00::1", "fd00::2", 17, udp(b"RoCEv2 payload"), flow_label=0x12345)


def carrier(da: str, hop_limit: int = 64) -> bytes:
    """Ethernet + outer IPv6 (fd00::1 -> da, next header 41) + INNER."""
    return frame(ipv6("fd00::1", da, 41, INNER, hop_limit=hop_limit, flow_label=0xABCDE))


# --- fixtures: the programs, per test (one counters map: the tier's `counters`)

@pytest.fixture
def un(counters):
    fd, _ = ebpf.load("uN", MY_SID, counters)
    yield fd
    os.close(fd)


@pytest.fixture
def ports():
    fd = ebpf.ports_map([], 2)
    yield fd
    os.close(fd)


@pytest.fixture
def decap(counters, ports):
    fd, _ = ebpf.load("decap", PORT_SID, counters, 1, ports)
    yield fd
    os.close(fd)


def counts(map_fd: int) -> dict[str, int]:
    got = ebpf.read_map(map_fd)
    return {name: value for name, value in got.items() if value}


# --- uN --------------------------------------------------------------------

def test_un_shifts_the_next_usid_in(un, counters):
    run = bpf.test_run(un, carrier("fcbb:bb00:100:200:300::"))
    assert run.retval == TC_ACT_OK
    # the same frame with DA fcbb:bb00:200:300:: (uSID 0100 consumed, zero
    # fill), hop limit still 64: the kernel's forwarding decrements it
    assert run.data_out == carrier("fcbb:bb00:200:300::")
    assert counts(counters) == {"shifted": 1}


def test_un_output_matches_scapy(un):
    scapy = pytest.importorskip("scapy.all")
    packet = (scapy.Ether(dst="02:00:00:00:00:02", src="02:00:00:00:00:01")
              / scapy.IPv6(src="fd00::1", dst="fcbb:bb00:100:200:300::", nh=41, fl=0xABCDE)
              / scapy.IPv6(src="fd00::1", dst="fd00::2", fl=0x12345)
              / scapy.UDP(sport=49152, dport=4791, chksum=0) / b"RoCEv2 payload")
    expected = packet.copy()
    expected[scapy.IPv6].dst = "fcbb:bb00:200:300::"
    assert bpf.test_run(un, bytes(packet)).data_out == bytes(expected)


def test_un_six_usid_carrier_shifts_to_zero_fill(un, counters):
    run = bpf.test_run(un, carrier("fcbb:bb00:100:200:300:400:500:600"))
    assert run.retval == TC_ACT_OK
    assert run.data_out == carrier("fcbb:bb00:200:300:400:500:600:0")
    assert counts(counters) == {"shifted": 1}


def test_un_drops_the_last_usid(un, counters):
    # DA = my SID and nothing after: End would need an SRH; MRC has none
    run = bpf.test_run(un, carrier("fcbb:bb00:100::"))
    assert run.retval == TC_ACT_SHOT
    assert counts(counters) == {"drop_end_of_carrier": 1}


@pytest.mark.parametrize("da", ["fcbb:bb00:200:100::", "fcbb:bb01:100:200::", "fd00::2",
                                "fcbb:bb00:101:200::"])
def test_un_passes_what_is_not_its_sid(un, counters, da):
    packet = carrier(da)
    run = bpf.test_run(un, packet)
    assert (run.retval, run.data_out) == (TC_ACT_OK, packet)
    assert counts(counters) == {}


def test_un_shifts_and_passes_hop_limit_one(un, counters):
    run = bpf.test_run(un, carrier("fcbb:bb00:100:200::", hop_limit=1))
    assert run.retval == TC_ACT_OK  # ip6_forward drops it, with ICMPv6 time exceeded
    assert run.data_out == carrier("fcbb:bb00:200::", hop_limit=1)
    assert counts(counters) == {"shifted": 1, "hop_limit_expired": 1}


@pytest.mark.parametrize("packet", [
    # ARP request (ethertype 0x0806), 28 bytes: 42-byte frame
    frame(bytes.fromhex("0001080006040001020000000001c0000201000000000000c0000202"), 0x0806),
    # IPv4 to an address whose bytes look like the SID: not IPv6, not ours
    frame(IPV4, 0x0800),
    # NDP neighbour solicitation to a solicited-node multicast address
    frame(ipv6("fe80::1", "ff02::1:ff00:2", 58, bytes([135, 0, 0, 0]) + b"\0" * 4
               + ipaddress.IPv6Address("fcbb:bb00:100::").packed, hop_limit=255)),
])
def test_un_passes_other_traffic_untouched(un, counters, packet):
    run = bpf.test_run(un, packet)
    assert (run.retval, run.data_out) == (TC_ACT_OK, packet)
    assert counts(counters) == {}


def srh(segments: list[str], segments_left: int) -> bytes:
    """A Segment Routing Header (RFC 8754, routing type 4) before INNER: next header 41,
    the segment list as given (reduced: the active segment is the DA)."""
    return struct.pack("!BBBBBBH", 41, 2 * len(segments), 4, segments_left,
                       len(segments) - 1, 0, 0) \
        + b"".join(ipaddress.IPv6Address(s).packed for s in segments) + INNER


def srh_carrier(da: str, segments_left: int = 1) -> bytes:
    return frame(ipv6("fd00::1", da, 43, srh(["fcbb:bb00:200:1100::"], segments_left),
                      flow_label=0xABCDE))


def test_un_shifts_a_carrier_with_an_srh_without_reading_it(un, counters):
    """uN reads the DA only: with a next uSID it shifts, and the SRH stays as it was.
    So does the kernel's End with next-csid (end_next_csid_core: the SRH is looked at
    only at the end of the carrier)."""
    run = bpf.test_run(un, srh_carrier("fcbb:bb00:100:300::"))
    assert run.retval == TC_ACT_OK
    assert run.data_out == srh_carrier("fcbb:bb00:300::")
    assert counts(counters) == {"shifted": 1}


def test_un_drops_the_end_of_a_carrier_even_with_segments_left(un, counters):
    """At the end of the carrier the kernel's End would take the SRH's next segment
    (segments left 1 -> 0, DA = fcbb:bb00:200:1100::); uN does no SRH processing and
    drops, as it does without an SRH. MRC never sends one (docs/ebpf.md)."""
    run = bpf.test_run(un, srh_carrier("fcbb:bb00:100::", segments_left=1))
    assert run.retval == TC_ACT_SHOT
    assert counts(counters) == {"drop_end_of_carrier": 1}


@pytest.mark.parametrize("version", [4, 0, 15])
def test_un_drops_malformed_ipv6(un, counters, version):
    # a test run refuses an IPv6 frame shorter than 14 + 40 bytes (EINVAL),
    # so a cut header is checked live (test_ebpf_live.py); here, a bad version
    packet = frame(ipv6("fd00::1", "fcbb:bb00:100:200::", 41, INNER, version=version))
    assert bpf.test_run(un, packet).retval == TC_ACT_SHOT
    assert counts(counters) == {"drop_malformed": 1}


def test_a_test_run_refuses_a_cut_ipv6_header(un):
    with pytest.raises(bpf.BpfError, match="Invalid argument"):
        bpf.test_run(un, carrier("fcbb:bb00:100:200::")[:14 + 39])


# --- decap -----------------------------------------------------------------

def test_decap_leaves_the_ethernet_header_and_the_inner_packet(decap, counters):
    run = bpf.test_run(decap, carrier("fcbb:bb00:1100::"))
    assert run.retval == TC_ACT_OK
    assert run.data_out == DST_MAC + SRC_MAC + b"\x86\xdd" + INNER
    assert counts(counters) == {"decapsulated": 1}


@pytest.mark.parametrize("next_header, payload", [
    (4, IPV4),  # IPv4-in-IPv6
    (17, udp(b"not encapsulated")),  # UDP straight to the SID
])
def test_decap_drops_what_is_not_ipv6_in_ipv6(decap, counters, next_header, payload):
    packet = frame(ipv6("fd00::1", "fcbb:bb00:1100::", next_header, payload))
    assert bpf.test_run(decap, packet).retval == TC_ACT_SHOT
    assert counts(counters) == {"drop_not_ipv6_in_ipv6": 1}


@pytest.mark.parametrize("packet", [
    carrier("fcbb:bb00:1100::")[:14 + 40 + 20],  # the inner header cut at 20 bytes
    carrier("fcbb:bb00:1100::")[:14 + 40],  # no inner header at all
    frame(ipv6("fd00::1", "fcbb:bb00:1100::", 41, INNER, version=5)),
])
def test_decap_drops_truncated_packets(decap, counters, packet):
    assert bpf.test_run(decap, packet).retval == TC_ACT_SHOT
    assert counts(counters) == {"drop_malformed": 1}


@pytest.mark.parametrize("packet", [
    carrier("fcbb:bb00:1200::"),  # another port's SID
    carrier("fcbb:bb00:100:1100::"),  # a carrier still in transit
    frame(b"\0" * 46, 0x0800),
])
def test_decap_passes_everything_else(decap, counters, packet):
    run = bpf.test_run(decap, packet)
    assert (run.retval, run.data_out) == (TC_ACT_OK, packet)
    assert counts(counters) == {}


# --- counters, the tag, the verifier ----------------------------------------

def test_one_map_counts_for_every_program_of_a_node(un, decap, counters):
    for _ in range(3):
        bpf.test_run(un, carrier("fcbb:bb00:100:1100::"))
    bpf.test_run(un, carrier("fcbb:bb00:100::"))
    bpf.test_run(decap, carrier("fcbb:bb00:1100::"))
    assert counts(counters) == {"shifted": 3, "drop_end_of_carrier": 1, "decapsulated": 1}
    # read back through a program, as `counters` does for an attached one
    assert ebpf.read_counters(bpf.prog_info(un).id) == ebpf.read_map(counters)
    # re-programming a node reuses its map, so its counts survive
    again = ebpf.counters_map(bpf.prog_info(un).id)
    try:
        assert bpf.map_info(again).id == bpf.map_info(counters).id
        assert bpf.map_info(again).name == "mrc_srv6_ctr"
    finally:
        os.close(again)


def test_a_vanished_program_gets_a_new_map(counters):
    fd, _ = ebpf.load("uN", MY_SID, counters)
    gone = bpf.prog_info(fd).id
    os.close(fd)
    fresh = ebpf.counters_map(gone)  # freed with its last fd, so: a new map
    try:
        assert bpf.map_info(fresh).id != bpf.map_info(counters).id
    finally:
        os.close(fresh)


@pytest.mark.parametrize("kind, build, prog_type", [
    ("uN", lambda fd, _: programs.un(MY_SID, fd), programs.PROG_TYPE_SCHED_CLS),
    ("decap", lambda fd, ports: programs.decap(PORT_SID, fd, 1, ports),
     programs.PROG_TYPE_SCHED_CLS),
    ("encap", lambda fd, _: programs.encap("fd00::1", "fcbb:bb00:100:1100::", 0x12345, fd),
     programs.PROG_TYPE_LWT_XMIT),
])
def test_the_kernel_tag_is_the_one_we_compute(counters, ports, kind, build, prog_type):
    insns = build(counters, ports)
    fd = bpf.prog_load(prog_type, insns, programs.NAMES[kind])
    try:
        info = bpf.prog_info(fd)
        assert info.tag == programs.tag(insns)
        assert info.tag == programs.tag(build(999, 998))  # whatever the map fds
        assert info.name == programs.NAMES[kind]
        maps = {bpf.map_info(counters).id} | ({bpf.map_info(ports).id} if kind == "decap"
                                              else set())
        assert set(info.map_ids) == maps
    finally:
        os.close(fd)


def test_the_verifier_log_comes_with_a_refusal():
    with pytest.raises(bpf.BpfError) as refused:
        bpf.prog_load(programs.PROG_TYPE_SCHED_CLS, asm.assemble([asm.exit_()]), "mrc_bad")
    assert "prog_load mrc_bad" in str(refused.value)
    assert "R0 !read_ok" in str(refused.value)  # the verifier's words


def test_programs_run_fast_enough(un):
    # a sanity bound, not a benchmark: a shift is a few hundred ns in the JIT
    run = bpf.test_run(un, carrier("fcbb:bb00:100:200::"), repeat=1000)
    assert run.retval == TC_ACT_OK and run.duration_ns < 100_000
