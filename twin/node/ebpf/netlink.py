"""rtnetlink with a stdlib AF_NETLINK socket: clsact, cls_bpf filters, lwt routes.

Everything acts on the network namespace of the calling thread. Messages are
built first, as bytes, by pure functions (`clsact_msg`, `filter_msg`,
`route_msg`), and only then sent by `request`, which asks for an ack
(NLM_F_ACK) and turns an error into NetlinkError with the errno and the
kernel's extended-ack text (NLMSGERR_ATTR_MSG) when it gives one.

    ensure_clsact(dev)                          a clsact qdisc (EEXIST is fine)
    replace_filter(dev, prog_fd, name, egress)  our cls_bpf filter, direct-action,
                                                pref 100 handle 1, protocol all
    delete_filter(dev, egress)                  ours only; a missing one is fine
    replace_route(dst, dev, prog_fd, name)      dst/128 encap bpf xmit (+ headroom)
    delete_route(dst, dev)                      a missing one is fine

Constants are from include/uapi/linux/{netlink,rtnetlink,pkt_sched,pkt_cls,
lwtunnel}.h.
"""

from __future__ import annotations

import errno
import ipaddress
import itertools
import os
import socket
import struct

# netlink
NLMSG_ERROR = 2
NLM_F_REQUEST, NLM_F_ACK, NLM_F_EXCL, NLM_F_CREATE, NLM_F_REPLACE = 0x1, 0x4, 0x200, 0x400, 0x100
NLM_F_ACK_TLVS = 0x200  # in an error message: extended-ack attributes follow
NLA_F_NESTED = 0x8000
SOL_NETLINK, NETLINK_CAP_ACK, NETLINK_EXT_ACK = 270, 10, 11
NLMSGERR_ATTR_MSG = 1
# rtnetlink
RTM_NEWROUTE, RTM_DELROUTE, RTM_NEWQDISC, RTM_NEWTFILTER, RTM_DELTFILTER = 24, 25, 36, 44, 45
RTA_DST, RTA_OIF, RTA_ENCAP_TYPE, RTA_ENCAP = 1, 4, 21, 22
RT_TABLE_MAIN, RTPROT_STATIC, RT_SCOPE_UNIVERSE, RTN_UNICAST = 254, 4, 0, 1
LWTUNNEL_ENCAP_BPF = 6
LWT_BPF_XMIT, LWT_BPF_XMIT_HEADROOM = 3, 4
LWT_BPF_PROG_FD, LWT_BPF_PROG_NAME = 1, 2
# tc
TCA_KIND, TCA_OPTIONS = 1, 2
TCA_BPF_FD, TCA_BPF_NAME, TCA_BPF_FLAGS = 6, 7, 8
TCA_BPF_FLAG_ACT_DIRECT = 1
TC_H_CLSACT = 0xFFFFFFF1
TC_H_INGRESS_PARENT, TC_H_EGRESS_PARENT = 0xFFFFFFF2, 0xFFFFFFF3  # clsact's two hooks
CLSACT_HANDLE = 0xFFFF0000
ETH_P_ALL = 0x0003
PREF, HANDLE = 100, 1  # where our filter sits: one per hook, replaced in place

TIMEOUT_S = 5.0
_seq = itertools.count(1)


class NetlinkError(OSError):
    """The kernel refused a request: errno plus its extended-ack text."""

    def __str__(self) -> str:  # the message names the errno's meaning already
        return str(self.strerror)


def ifindex(dev: str) -> int:
    try:
        return socket.if_nametoindex(dev)
    except OSError as e:
        raise NetlinkError(errno.ENODEV, f"no interface {dev!r} in this network namespace") from e


def _attr(kind: int, payload: bytes) -> bytes:
    raw = struct.pack("=HH", 4 + len(payload), kind) + payload
    return raw + b"\0" * (-len(raw) % 4)


def _nest(kind: int, *attrs: bytes) -> bytes:
    return _attr(kind | NLA_F_NESTED, b"".join(attrs))


def _u32(kind: int, value: int) -> bytes:
    return _attr(kind, struct.pack("=I", value))


def _str(kind: int, value: str) -> bytes:
    return _attr(kind, value.encode() + b"\0")


def _message(kind: int, flags: int, body: bytes, seq: int = 0) -> bytes:
    return struct.pack("=IHHII", 16 + len(body), kind, NLM_F_REQUEST | NLM_F_ACK | flags,
                       seq, 0) + body


def _tcmsg(index: int, handle: int, parent: int, info: int) -> bytes:
    return struct.pack("=BxxxiIII", socket.AF_UNSPEC, index, handle, parent, info)


def _filter_info() -> int:
    # tcm_info: the pref in the high half, the protocol (network order) low
    return PREF << 16 | socket.htons(ETH_P_ALL)


def clsact_msg(index: int) -> bytes:
    return _message(RTM_NEWQDISC, NLM_F_CREATE | NLM_F_EXCL,
                    _tcmsg(index, CLSACT_HANDLE, TC_H_CLSACT, 0) + _str(TCA_KIND, "clsact"))


def filter_msg(index: int, prog_fd: int | None, name: str = "", egress: bool = False) -> bytes:
    """RTM_NEWTFILTER for our cls_bpf filter, or RTM_DELTFILTER when prog_fd
    is None."""
    parent = TC_H_EGRESS_PARENT if egress else TC_H_INGRESS_PARENT
    head = _tcmsg(index, HANDLE, parent, _filter_info()) + _str(TCA_KIND, "bpf")
    if prog_fd is None:
        return _message(RTM_DELTFILTER, 0, head)
    options = _nest(TCA_OPTIONS, _u32(TCA_BPF_FD, prog_fd), _str(TCA_BPF_NAME, name),
                    _u32(TCA_BPF_FLAGS, TCA_BPF_FLAG_ACT_DIRECT))
    return _message(RTM_NEWTFILTER, NLM_F_CREATE | NLM_F_REPLACE, head + options)


def route_msg(dst: str, index: int, prog_fd: int | None = None, name: str = "",
              headroom: int = 40) -> bytes:
    """RTM_NEWROUTE `dst/128 dev X proto static encap bpf xmit fd N name NAME
    headroom H`, or RTM_DELROUTE for dst/128 on X when prog_fd is None.

    The headroom is the encap's size: the kernel takes it off the route's
    MTU, so what TCP sends still fits the link once encapsulated."""
    address = ipaddress.IPv6Address(dst).packed
    rtm = struct.pack("=BBBBBBBBI", socket.AF_INET6, 128, 0, 0, RT_TABLE_MAIN, RTPROT_STATIC,
                      RT_SCOPE_UNIVERSE, RTN_UNICAST, 0)
    head = rtm + _attr(RTA_DST, address) + _u32(RTA_OIF, index)
    if prog_fd is None:
        return _message(RTM_DELROUTE, 0, head)
    xmit = _nest(LWT_BPF_XMIT, _u32(LWT_BPF_PROG_FD, prog_fd), _str(LWT_BPF_PROG_NAME, name))
    encap = _nest(RTA_ENCAP, xmit, _u32(LWT_BPF_XMIT_HEADROOM, headroom))
    return _message(RTM_NEWROUTE, NLM_F_CREATE | NLM_F_REPLACE,
                    head + _attr(RTA_ENCAP_TYPE, struct.pack("=H", LWTUNNEL_ENCAP_BPF)) + encap)


def _extack(msg: bytes, flags: int) -> str:
    """NLMSGERR_ATTR_MSG from an error message (NETLINK_CAP_ACK: only the
    request's header is echoed, so the attributes start at 16 + 4 + 16)."""
    if not flags & NLM_F_ACK_TLVS:
        return ""
    offset = 36
    while offset + 4 <= len(msg):
        length, kind = struct.unpack_from("=HH", msg, offset)
        if length < 4:
            break
        if kind & 0x3FFF == NLMSGERR_ATTR_MSG:
            return msg[offset + 4: offset + length].split(b"\0", 1)[0].decode(errors="replace")
        offset += (length + 3) & ~3
    return ""


def request(message: bytes, what: str) -> None:
    """Send one request and wait for its ack; raise NetlinkError on a refusal."""
    seq = next(_seq)
    message = message[:8] + struct.pack("=I", seq) + message[12:]
    with socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, socket.NETLINK_ROUTE) as sock:
        sock.setsockopt(SOL_NETLINK, NETLINK_CAP_ACK, 1)
        sock.setsockopt(SOL_NETLINK, NETLINK_EXT_ACK, 1)
        sock.settimeout(TIMEOUT_S)
        sock.bind((0, 0))
        sock.send(message)
        for _ in range(64):  # an ack comes first; bound the loop anyway
            data = sock.recv(65536)
            offset = 0
            while offset + 16 <= len(data):
                length, kind, flags, got_seq, _ = struct.unpack_from("=IHHII", data, offset)
                if length < 16:
                    break
                msg = data[offset: offset + length]
                offset += (length + 3) & ~3
                if kind != NLMSG_ERROR or got_seq != seq:
                    continue
                (error,) = struct.unpack_from("=i", msg, 16)
                if error == 0:
                    return
                text = _extack(msg, flags)
                raise NetlinkError(-error, f"{what}: {os.strerror(-error)}"
                                   + (f" ({text})" if text else ""))
    raise NetlinkError(errno.ETIMEDOUT, f"{what}: no ack from the kernel")


def ensure_clsact(dev: str) -> None:
    try:
        request(clsact_msg(ifindex(dev)), f"add clsact qdisc on {dev}")
    except NetlinkError as e:
        if e.errno != errno.EEXIST:
            raise


def replace_filter(dev: str, prog_fd: int, name: str, egress: bool = False) -> None:
    hook = "egress" if egress else "ingress"
    request(filter_msg(ifindex(dev), prog_fd, name, egress),
            f"replace bpf filter {name!r} on {dev} {hook}")


def delete_filter(dev: str, egress: bool = False) -> bool:
    """Remove our filter (pref 100, handle 1); False if there was none (or
    no clsact at all)."""
    hook = "egress" if egress else "ingress"
    try:
        request(filter_msg(ifindex(dev), None, egress=egress), f"delete bpf filter on {dev} {hook}")
    except NetlinkError as e:
        if e.errno in (errno.ENOENT, errno.EINVAL):  # no filter; no qdisc to hold one
            return False
        raise
    return True


def replace_route(dst: str, dev: str, prog_fd: int, name: str, headroom: int = 40) -> None:
    request(route_msg(dst, ifindex(dev), prog_fd, name, headroom),
            f"replace route {dst}/128 dev {dev} encap bpf xmit {name!r}")


def delete_route(dst: str, dev: str) -> bool:
    """Remove dst/128 on dev; False if there was none."""
    try:
        request(route_msg(dst, ifindex(dev)), f"delete route {dst}/128 dev {dev}")
    except NetlinkError as e:
        if e.errno == errno.ESRCH:
            return False
        raise
    return True
