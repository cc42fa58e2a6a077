"""Interface counters of one network namespace, by one netlink dump (rtnetlink).

    LinkStats.open_in(netns_path) -> LinkStats     a socket bound to that namespace
    LinkStats.read() -> {ifname: Counters}          one RTM_GETLINK dump

pyroute2 parses every attribute of every interface into Python objects: 2 ms per
node, 350 ms for a scrape of mrc-8p. A scrape needs three attributes (IFLA_IFNAME,
IFLA_OPERSTATE, IFLA_STATS64), so this walks the attributes and unpacks only those:
a tenth of the time. The socket is opened inside the namespace and stays bound to
it, whatever thread reads it later.
"""

from __future__ import annotations

import socket
import struct
from dataclasses import dataclass

from twin import nsenter

NETLINK_ROUTE = 0
RTM_NEWLINK, RTM_GETLINK = 16, 18
NLMSG_ERROR, NLMSG_DONE = 2, 3
NLM_F_REQUEST, NLM_F_DUMP = 0x1, 0x300
IFLA_IFNAME, IFLA_OPERSTATE, IFLA_STATS64 = 3, 16, 23
IF_OPER_UP = 6
NLA_TYPE_MASK = 0x3FFF
_NLMSGHDR = struct.Struct("=LHHLL")
_IFINFOMSG = struct.Struct("=BxHiII")
_RTATTR = struct.Struct("=HH")
_STATS = struct.Struct("=8Q")  # rx/tx packets, rx/tx bytes, rx/tx errors, rx/tx dropped


@dataclass(frozen=True)
class Counters:
    rx_bytes: int
    tx_bytes: int
    rx_dropped: int
    tx_dropped: int
    oper_up: bool


class LinkStats:
    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.seq = 0

    @classmethod
    def open_in(cls, netns_path: str) -> LinkStats:
        with nsenter.inside(netns_path):
            sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW | socket.SOCK_CLOEXEC,
                                 NETLINK_ROUTE)
        sock.bind((0, 0))
        sock.settimeout(2.0)
        return cls(sock)

    def close(self) -> None:
        self.sock.close()

    def read(self) -> dict[str, Counters]:
        self.seq += 1
        body = _IFINFOMSG.pack(socket.AF_UNSPEC, 0, 0, 0, 0)
        self.sock.send(_NLMSGHDR.pack(_NLMSGHDR.size + len(body), RTM_GETLINK,
                                      NLM_F_REQUEST | NLM_F_DUMP, self.seq, 0) + body)
        out: dict[str, Counters] = {}
        while True:
            buf = self.sock.recv(1 << 16)
            off = 0
            while off + _NLMSGHDR.size <= len(buf):
                length, kind, _, seq, _ = _NLMSGHDR.unpack_from(buf, off)
                if length < _NLMSGHDR.size:
                    raise OSError("netlink: a message shorter than its header")
                if seq == self.seq:
                    if kind == NLMSG_DONE:
                        return out
                    if kind == NLMSG_ERROR:
                        code = struct.unpack_from("=i", buf, off + _NLMSGHDR.size)[0]
                        raise OSError(-code, "netlink: RTM_GETLINK dump failed")
                    if kind == RTM_NEWLINK:
                        name, counters = parse_link(buf, off + _NLMSGHDR.size, off + length)
                        if name is not None:
                            out[name] = counters
                off += (length + 3) & ~3


def parse_link(buf: bytes, start: int, end: int) -> tuple[str | None, Counters]:
    """One RTM_NEWLINK body (ifinfomsg, then attributes): name, counters (pure)."""
    off = start + _IFINFOMSG.size
    name, oper_up, stats = None, False, (0,) * 8
    while off + _RTATTR.size <= end:
        alen, atype = _RTATTR.unpack_from(buf, off)
        if alen < _RTATTR.size:
            break
        atype &= NLA_TYPE_MASK
        data = off + _RTATTR.size
        if atype == IFLA_IFNAME:
            name = buf[data:off + alen].split(b"\0", 1)[0].decode()
        elif atype == IFLA_OPERSTATE:
            oper_up = buf[data] == IF_OPER_UP
        elif atype == IFLA_STATS64 and alen - _RTATTR.size >= _STATS.size:
            stats = _STATS.unpack_from(buf, data)
        off += (alen + 3) & ~3
    return name, Counters(rx_bytes=stats[2], tx_bytes=stats[3], rx_dropped=stats[6],
                          tx_dropped=stats[7], oper_up=oper_up)
