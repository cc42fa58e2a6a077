"""Send source-routed probes through a running lab and collect the answers.

One process holds, in every host's network namespace, a raw socket
(IPPROTO_RAW: it writes whole IPv6-in-IPv6 packets) and a UDP socket on the
host's NIC address. A request leaves the source host's namespace on the
path's uSID program, is decapsulated by the destination port's End.DT6 and
lands on the destination's UDP socket; the answer is sent from the
destination's own namespace on the reverse path. Loopback probes go out
and come back to the sender, so they need no responder.

`HostSockets` is that: the sockets, one send and one receive. `Prober` is
one-shot verify on top of it: probes are sent in chunks with the sockets
drained in between, and those without an answer are retried a bounded
number of times. The continuous prober (twin.verify.continuous) shares the
same sockets and packets.

The same classes run inside a host node of a remote fabric (twin.remote.agent):
there the process holds only its own host's sockets, in the namespace it runs
in (netns path None), knows the other hosts as `peers` (NIC address and UDP
port of a socket another agent holds), sends only its own probes and answers
the requests addressed to it (`Prober.run_ids`).
"""

from __future__ import annotations

import os
import random
import select
import socket
import sys
import time
from contextlib import nullcontext
from dataclasses import dataclass, replace

from twin import nsenter
from twin.fabric.paths import Path, flow_label
from twin.verify import packets

CHUNK = 64
RCVBUF = 4 << 20
SO_RCVBUFFORCE = 33
IPV6_RECVTCLASS, IPV6_TCLASS = 66, 67  # linux/in6.h
TC_PRIO_INTERACTIVE = 6  # SO_PRIORITY: band 0 of a shaped port's pfifo_fast, no privilege
ECN_CE = 0b11


@dataclass
class ProbeResult:
    path: Path
    forward: bool = False  # the request reached the destination (a loop: came back)
    reply: bool = False  # the answer came back to the source
    rtt_us: float | None = None
    attempts: int = 0

    @property
    def ok(self) -> bool:
        return self.forward and self.reply

    @property
    def failure(self) -> str:
        if self.ok:
            return ""
        if self.path.kind.startswith("loop"):
            return "did not come back"
        return "request lost" if not self.forward else "request arrived, reply lost"


@dataclass
class _Host:
    name: str
    nic: str
    raw: socket.socket
    udp: socket.socket

    @property
    def port(self) -> int:
        return self.udp.getsockname()[1]


def probe_hosts(runtime, plan) -> dict[str, tuple[str, str]]:
    """What the sockets need of a running lab: host name -> (netns path, NIC address)."""
    return {h.name: (runtime.netns_path(h.name), str(plan.nic_address(h.name)))
            for h in plan.fabric.hosts}


class HostSockets:
    """A raw socket and a UDP socket in every host's namespace, held by this process:
    send a probe on a path, and read what came back. One-shot verify (`Prober`)
    and the continuous prober (twin.verify.continuous) both stand on this."""

    def __init__(self, hosts: dict[str, tuple[str | None, str]],
                 peers: dict[str, tuple[str, int]] | None = None):
        """hosts: name -> (netns path, or None for this process's own; NIC address).
        peers: hosts whose sockets another process holds: name -> (NIC address, port)."""
        self.hosts: dict[str, _Host] = {}
        self.peers = dict(peers or {})
        self._by_fd: dict[int, _Host] = {}
        try:
            for name, (path, nic) in hosts.items():
                with nsenter.inside(path) if path else nullcontext():
                    raw = socket.socket(socket.AF_INET6, socket.SOCK_RAW, socket.IPPROTO_RAW)
                    udp = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
                # the probe class at the host's own shaped port too (the switches' queue
                # programs decide it there); and each answer's traffic class, for CE
                raw.setsockopt(socket.SOL_SOCKET, socket.SO_PRIORITY, TC_PRIO_INTERACTIVE)
                udp.setsockopt(socket.IPPROTO_IPV6, IPV6_RECVTCLASS, 1)
                udp.setblocking(False)
                try:
                    udp.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, RCVBUF)
                except OSError:
                    udp.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, RCVBUF)
                udp.bind((nic, 0))
                h = _Host(name, nic, raw, udp)
                self.hosts[name] = h
                self._by_fd[udp.fileno()] = h
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        for h in self.hosts.values():
            h.raw.close()
            h.udp.close()
        self.hosts.clear()
        self._by_fd.clear()

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def send(self, src: str, dst: str, path: Path, probe: packets.ProbeBody) -> None:
        """One probe from host `src` on `path`, addressed (inside) to host `dst`."""
        s = self.hosts[src]
        d_nic, d_port = self.address(dst)
        pkt = packets.encapsulated(s.nic, path.address, flow_label(path.ev), s.nic, d_nic,
                                   s.port, d_port, packets.probe_payload(probe))
        try:
            s.raw.sendto(pkt, (path.address, 0))
        except OSError:
            pass  # e.g. ENETUNREACH when the first hop's route is gone: counts as lost

    def address(self, name: str) -> tuple[str, int]:
        """(NIC address, UDP port) of a host's probe socket, ours or a peer's."""
        h = self.hosts.get(name)
        return (h.nic, h.port) if h else self.peers[name]

    def receive(self, timeout: float, limit: int = 4096) -> list[tuple[str, packets.ProbeBody]]:
        """Every probe waiting on any host's socket, (receiving host, body); waits up
        to `timeout` s for the first. Foreign datagrams are skipped; at most `limit`."""
        socks = [h.udp for h in self.hosts.values()]
        got: list[tuple[str, packets.ProbeBody]] = []
        ready, _, _ = select.select(socks, [], [], timeout)
        while ready and len(got) < limit:
            for sock in ready:
                host = self._by_fd[sock.fileno()]
                for _ in range(256):
                    try:
                        data, anc, _, _ = sock.recvmsg(2048, TCLASS_SPACE)
                    except BlockingIOError:
                        break
                    p = packets.parse_payload(data)
                    if p is not None:
                        got.append((host.name, replace(p, ce=True)
                                    if _tclass(anc) & ECN_CE == ECN_CE else p))
            ready, _, _ = select.select(socks, [], [], 0)
        return got


class Prober(HostSockets):
    """One-shot probing for `twin verify`: every path, retried a bounded number of
    times, requests answered from the destination's namespace."""

    def run(self, forward: list[Path], reverse: dict[int, Path], *, attempts: int = 3,
            wait: float = 0.3, progress=None, rate_pps: float | None = None
            ) -> list[ProbeResult]:
        """Probe every path. `reverse[i]` is the answer path of forward[i] (not for loops).
        With `rate_pps`, requests are paced: chunks of 2 ms of the rate, no faster."""
        results = self.run_ids(dict(enumerate(forward)), reverse, attempts=attempts,
                               wait=wait, progress=progress, rate_pps=rate_pps)
        return [results[i] for i in range(len(forward))]

    def run_ids(self, probes: dict[int, Path], answers: dict[int, Path], *,
                run_id: int | None = None, attempts: int = 3, wait: float = 0.3,
                progress=None, rate_pps: float | None = None) -> dict[int, ProbeResult]:
        """Send `probes` (probe id -> path, from hosts whose sockets we hold) and answer
        the requests that arrive for `answers` (probe id -> the answer's path, from the
        request's destination). One process holding every host does both for every
        probe; an agent in one host does them for its own (twin.remote.agent)."""
        self.run_id = random.getrandbits(32) if run_id is None else run_id
        self.arrived: set[int] = set()  # requests that reached us (and were answered)
        results = {i: ProbeResult(p) for i, p in probes.items()}
        chunk = CHUNK if rate_pps is None else max(1, min(CHUNK, int(rate_pps * 0.002)))
        for attempt in range(attempts):
            pending = [i for i, r in results.items() if not r.ok]
            if not pending:
                break
            for start in range(0, len(pending), chunk):
                began = time.monotonic()
                for i in pending[start:start + chunk]:
                    path = probes[i]
                    kind = packets.LOOP if path.src == path.dst else packets.REQUEST
                    results[i].attempts += 1
                    self.send(path.src, path.dst, path,
                              packets.ProbeBody(kind, self.run_id, i, time.monotonic_ns()))
                self.drain(results, answers, 0.0)
                if rate_pps is not None:  # the chunk's share of time, spent draining
                    until = began + len(pending[start:start + chunk]) / rate_pps
                    while time.monotonic() < until:
                        self.drain(results, answers, max(0.0, until - time.monotonic()))
                if progress:
                    progress(min(start + chunk, len(pending)), len(pending), attempt)
            deadline = time.monotonic() + wait * (attempt + 1)
            while time.monotonic() < deadline and not all(results[i].ok for i in pending):
                self.drain(results, answers, 0.02)
        return results

    def drain(self, results: dict[int, ProbeResult], answers: dict[int, Path],
              timeout: float) -> None:
        """What came in: requests answered on their answer path, answers recorded."""
        for host, p in self.receive(timeout):
            if p.run != self.run_id:
                continue
            if p.kind == packets.REQUEST:
                back = answers.get(p.probe)
                if back is None or back.src != host:  # not for us, or to the wrong host
                    continue
                self.arrived.add(p.probe)
                if p.probe in results:
                    results[p.probe].forward = True
                self.send(host, back.dst, back,
                          packets.ProbeBody(packets.REPLY, self.run_id, p.probe, p.sent_ns))
            elif p.kind in (packets.REPLY, packets.LOOP):
                res = results.get(p.probe)
                if res is None or host != res.path.src:
                    continue
                res.forward = res.reply = True
                if res.rtt_us is None:
                    res.rtt_us = (time.monotonic_ns() - p.sent_ns) / 1000


TCLASS_SPACE = socket.CMSG_SPACE(4)


def _tclass(ancillary) -> int:
    """The traffic class a datagram arrived with (IPV6_TCLASS, an int), 0 if not given."""
    for level, kind, data in ancillary:
        if level == socket.IPPROTO_IPV6 and kind == IPV6_TCLASS and len(data) >= 4:
            return int.from_bytes(data[:4], sys.byteorder)
    return 0


def probing_supported() -> str | None:
    if os.geteuid() != 0:
        return "data-plane probes need root (raw sockets in lab namespaces)"
    return None
