"""MRC packets as a standard dissector sees them: Wireshark's InfiniBand (RoCEv2) decoder.

Offline here: the packets are written, whole (outer IPv6 .. ICRC), into a classic pcap file with
linktype 101 (LINKTYPE_RAW: each record starts with an IP header) and read back with

    tshark -r FILE -V -d udp.port==4791,infiniband

Wireshark already treats UDP 4791 as RoCEv2 by default (preference infiniband.rroce.port);
the -d pins it. Needs no root, only tshark (Debian package `tshark`). The same checks on
a live capture inside a T1 are in test_mrc_endpoint.py.
"""

from __future__ import annotations

import re
import shutil
import struct
import subprocess
from pathlib import Path

import pytest

from twin.mrc import wire as W

pytestmark = pytest.mark.skipif(
    shutil.which("tshark") is None,
    reason="tshark is not on PATH (Debian: apt-get install tshark)")

NIC_A, NIC_B = "fd00:4d52:43::1", "fd00:4d52:43:1::2"
PATH, REVERSE_PATH = "fcbb:bb00:100:201:101:302::", "fcbb:bb00:301:102:201:100::"
LINKTYPE_RAW = 101
TSHARK = ["tshark", "-V", "-d", "udp.port==4791,infiniband"]

QP, RKEY, EV = 0xABCDE, 0xDEADBEEF, 0x12345678
WRITE = dict(psn=0x123456, va=0x7F00_0000_1000, payload=bytes(range(256)) * 16, tries=3,
             ack_req=True)
WRITE_IMM = dict(psn=0xFFFFFF, va=0x7F00_0000_2000, payload=b"tail" * 25, imm=0xCAFEBABE)
ACK = W.Ack(0x42, 0x123456, 3, W.Sack(0x123457, 0b1, EV, 2, 0, 0xFF))
NACK = W.Nack(0x42, 0x123457, 3, W.NAK_PSN_SEQUENCE_ERROR, W.Sack(0x123457, 0, EV, 0))


def write_pcap(path: Path, packets: list[bytes]) -> None:
    """Classic pcap, little endian, microsecond timestamps, one record per packet."""
    with path.open("wb") as f:
        f.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, LINKTYPE_RAW))
        for i, pkt in enumerate(packets):
            f.write(struct.pack("<IIII", 1, i, len(pkt), len(pkt)))
            f.write(pkt)


def template_packet(**fields) -> bytes:
    return W.DataTemplate(NIC_A, PATH, NIC_A, NIC_B, EV, QP, RKEY).build(**(fields or WRITE))


@pytest.fixture(scope="module")
def frames(tmp_path_factory) -> list[str]:
    """tshark -V text of each packet, in order."""
    packets = [
        template_packet(**WRITE),
        template_packet(**WRITE_IMM),
        W.frame(NIC_B, REVERSE_PATH, 7, NIC_B, NIC_A, ACK.encode()),
        W.frame(NIC_B, REVERSE_PATH, 7, NIC_B, NIC_A, NACK.encode()),
    ]
    pcap = tmp_path_factory.mktemp("pcap") / "mrc.pcap"
    write_pcap(pcap, packets)
    out = subprocess.run([*TSHARK, "-r", str(pcap)], capture_output=True, text=True,
                         timeout=60, check=True).stdout
    texts = re.split(r"^Frame \d+: ", out, flags=re.M)[1:]
    assert len(texts) == len(packets), out
    return texts


def field(text: str, name: str) -> str:
    """The value of the first `name: value` line of a -V dump."""
    m = re.search(rf"^\s*(?:[.01 ]+= )?{re.escape(name)}: (.*)$", text, flags=re.M)
    assert m, f"no {name!r} in:\n{text}"
    return m.group(1).strip()


def expert(text: str) -> list[str]:
    return re.findall(r"\[Expert Info \([^)]*\): (.*)\]", text)


def test_framing_is_ipv6_in_ipv6_udp_4791(frames):
    text = frames[0]
    assert "[Protocols in frame: raw:ipv6:ipv6:udp:infiniband:data]" in text
    assert f"Dst: {PATH}" in text and f"Dst: {NIC_B}" in text
    assert field(text, "Flow Label") == f"{EV & 0xFFFFF:#07x}"
    assert field(text, "Source Port") == str(0xC000 | (EV >> 18))  # the EV's top 14 bits
    assert field(text, "Destination Port") == "4791"


def test_rdma_write_only(frames):
    text = frames[0]
    assert field(text, "Opcode") == "Reliable Connection (RC) - RDMA WRITE Only (10)"
    assert field(text, "Partition Key") == "65535"
    assert field(text, "Destination Queue Pair") == f"{QP:#08x}"
    assert field(text, "Acknowledge Request") == "True"
    assert field(text, "Packet Sequence Number") == str(WRITE["psn"])
    assert field(text, "Virtual Address") == f"{WRITE['va']:#018x}"
    assert field(text, "Remote Key") == f"{RKEY:#010x}"
    # The DMA length is what follows the RETH, exactly: nothing of MRC's sits there.
    assert field(text, "DMA Length") == "4096 (0x00001000)"
    assert f"[Length: {4096}]" in text
    assert field(text, "Invariant CRC") == f"{int.from_bytes(template_packet()[-4:]):#010x}"
    assert "Malformed" not in text
    # Wireshark's one complaint: UDP checksum 0 over IPv6 (RFC 6936's tunnel exemption,
    # which the endpoint opts into with UDP_NO_CHECK6_RX; the ICRC protects the packet).
    assert expert(text) == ["Illegal checksum value (0)"]


def test_rdma_write_only_with_immediate(frames):
    text = frames[1]
    assert field(text, "Opcode") == \
        "Reliable Connection (RC) - RDMA WRITE Only with Immediate (11)"
    assert field(text, "Destination Queue Pair") == f"{QP:#08x}"
    assert field(text, "Acknowledge Request") == "False"
    assert field(text, "Packet Sequence Number") == str(0xFFFFFF)
    assert field(text, "Virtual Address") == f"{WRITE_IMM['va']:#018x}"
    assert field(text, "Remote Key") == f"{RKEY:#010x}"
    assert field(text, "DMA Length") == "100 (0x00000064)"
    assert field(text, "Immediate Data") == "cafebabe"
    assert "[Length: 100]" in text and "Malformed" not in text


def test_ack(frames):
    text = frames[2]
    assert field(text, "Opcode") == "Reliable Connection (RC) - Acknowledge (17)"
    assert field(text, "Destination Queue Pair") == "0x000042"
    assert field(text, "Packet Sequence Number") == str(ACK.psn)
    assert field(text, "Syndrome") == "0, Ack"
    assert field(text, "Message Sequence Number") == "3"
    assert "Malformed" not in text


def test_nack(frames):
    text = frames[3]
    assert field(text, "Opcode") == "Reliable Connection (RC) - Acknowledge (17)"
    assert field(text, "Packet Sequence Number") == str(NACK.psn)
    assert field(text, "Syndrome") == "96, Nak"
    assert field(text, "Error Code") == "PSN Sequence Error (0)"
