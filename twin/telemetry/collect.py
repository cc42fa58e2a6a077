"""One pass over a running lab: what the exporter serves and `twin top` shows.

    Collector(att).sample() -> Sample
        endpoints   every host's endpoint, through its control socket (`stats`)
        links       every link end's kernel counters and oper state, read with pyroute2
                    in the node's own namespace (one RTM_GETLINK dump per node)
        faults      the faults in force (faults.json); a blind drill's stays hidden
        verify      paths failed in the last `twin verify` or `twin probe` round
        dataplane   on the ebpf data plane, each node's SID programs' counters: read in
                    this process by map id (a few bpf() calls a node), the id found once
                    per node by a command in it (python3 -m twin.node.ebpf counters)
        ports       on a fabric with signals (either data plane), each shaped switch
                    port's virtual queue and signal counters, and each host port's
                    RFC 6040 counts: the node's port map, found and read the same way

A Collector keeps one control connection per endpoint across samples, and opens a
netlink socket in each node's namespace for one dump, then closes it: a scrape of
mrc-8p is a few hundred syscalls, not a few dozen process starts. It does not keep
those sockets: a socket holds its namespace alive, so one held across a node's
reboot (`twin restart`, a switch-reboot fault) would keep the dead namespace and
its veths, and the rewiring of the rebooted node would find its peers' ends still
there ("File exists").

Every sample runs on the Collector's one thread, whoever asks (the exporter's HTTP
server answers each scrape on a new thread): whatever a sample holds is only ever
used from that thread. (pyroute2's IPRoute, tried first, opens its netlink socket
per thread: used from another thread than the one that entered the node's
namespace, it silently read the host's interfaces instead.)

Nothing here raises for a node or endpoint that does not answer: a switch being
rebooted has no interfaces for a moment, and an endpoint may be busy. Such a
node's links are left out of that sample and an endpoint reads as down
(twin_endpoint_up 0), which is what a dashboard should show.
"""

from __future__ import annotations

import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from twin import faults as F
from twin.endpoints import EndpointClient, control_path
from twin.errors import LabError
from twin.mrc.exposition import EndpointSample
from twin.mrc.stats import EndpointStats
from twin.node.ebpf import bpf, read_map, read_ports
from twin.rundir import read_json, write_json
from twin.telemetry.linkstats import LinkStats

CONTROL_TIMEOUT_S = 2.0  # an endpoint that takes longer is left out of this sample


@dataclass(frozen=True)
class LinkSample:
    node: str
    ifname: str
    peer: str  # NODE:IF at the other end
    plane: int
    tier: str  # host (NIC port to T0) or fabric (T0 to T1)
    tx_bytes: int
    rx_bytes: int
    tx_drops: int
    rx_drops: int
    up: bool  # operationally up (carrier and admin)
    t: float = 0.0  # time.monotonic() when its node's dump came (0: unknown)


@dataclass(frozen=True)
class FaultSample:
    kind: str
    target: str


@dataclass(frozen=True)
class DataplaneSample:
    node: str
    counters: dict[str, int]  # twin.node.ebpf.COUNTERS -> packets


@dataclass(frozen=True)
class PortSample:
    """One port's fabric signals (twin.node.ebpf.PORT_FIELDS, and queue_bytes_now)."""

    node: str
    ifname: str
    peer: str
    plane: int
    tier: str
    values: dict[str, int]
    t: float = 0.0  # time.monotonic() when its node's map was read (0: unknown)


@dataclass(frozen=True)
class Sample:
    lab: str
    t_wall: float
    endpoints: tuple[EndpointSample, ...]
    links: tuple[LinkSample, ...]
    faults: tuple[FaultSample, ...]
    verify_paths_failed: int | None  # None: no verify or probe has run on this lab
    seconds: float  # how long collecting took
    dataplane: tuple[DataplaneSample, ...] = ()  # the ebpf data plane's counters
    ports: tuple[PortSample, ...] = ()  # the fabric signals, per port
    probe_named: tuple[tuple[str, str], ...] = ()  # `twin probe`'s (verdict, target) now


def record_verify(lab_dir, failed: int, source: str,
                  named: list[tuple[str, str]] | None = None) -> None:
    """Remember how many paths the last verify or probe round failed, for
    twin_verify_paths_failed (called by `twin verify` and `twin probe`), and what
    `twin probe` names now, as (verdict, target): faulty or congested, for
    twin_probe_named."""
    write_json(lab_dir / "verify.json", {"paths_failed": failed, "source": source,
                                         "named": [list(n) for n in named or ()],
                                         "t_wall": time.time()})


class Collector:
    """Samples one lab, again and again; thread-safe (one sample at a time)."""

    def __init__(self, att) -> None:
        self.att = att
        self.lab = att.lab
        self._lock = threading.Lock()
        self._thread = ThreadPoolExecutor(1, thread_name_prefix=f"collect-{att.lab}")
        self._ctl: dict[str, object] = {}  # host -> EndpointClient
        # link ends by node: ifname -> (peer, plane, tier)
        self._ends: dict[str, dict[str, tuple[str, int, str]]] = {}
        for lk in att.fabric.links:
            tier = lk.kind  # a link's kind (host, fabric) is its tier label
            self._ends.setdefault(lk.a.node, {})[lk.a.ifname] = (str(lk.b), lk.plane, tier)
            self._ends.setdefault(lk.b.node, {})[lk.b.ifname] = (str(lk.a), lk.plane, tier)
        self.hosts = [h.name for h in att.fabric.hosts]
        self._maps: dict[str, int] = {}  # node -> the id of its SID programs' counters map
        # node -> (the id of its port map, {slot: ifname}); nodes with fabric signals only
        self._port_maps: dict[str, tuple[int, dict[int, str]]] = {}
        self._signalled = [n for n, p in att.plan.nodes.items() if p.queues or p.signals]

    def sample(self) -> Sample:
        with self._lock:
            return self._thread.submit(self._sample).result()

    def _sample(self) -> Sample:
        t0 = time.monotonic()
        # Finding a node's maps runs a command in it (seconds for a lab, the first time):
        # done before any counter is read, so the counters of one sample are read within
        # milliseconds of each other, and each carries the time it was read (a rate is
        # the difference of two counters over the difference of *their* times).
        for node in self._ends:
            self._map_id(node)
        for node in self._signalled:
            self._port_map(node)
        endpoints = tuple(self._endpoint(h) for h in self.hosts)
        links: list[LinkSample] = []
        for node in self._ends:
            links.extend(self._links(node))
        dataplane = tuple(d for d in map(self._dataplane, self._ends) if d is not None)
        ports = tuple(p for n in self._signalled for p in self._ports(n))
        return Sample(self.lab, time.time(), endpoints, tuple(links), self._faults(),
                      self._verify(), time.monotonic() - t0, dataplane, ports,
                      self._probe_named())

    def close(self) -> None:
        with self._lock:
            self._thread.submit(self._close).result()
            self._thread.shutdown()

    def _close(self) -> None:
        for c in self._ctl.values():
            c.close()
        self._ctl.clear()

    # -- endpoints ------------------------------------------------------------------

    def _endpoint(self, host: str) -> EndpointSample:
        try:
            reply = self._client(host).stats(timeout=CONTROL_TIMEOUT_S)
            t = time.monotonic()
            st = EndpointStats.from_dict(reply)
        except (LabError, OSError, KeyError, ValueError):
            c = self._ctl.pop(host, None)
            if c is not None:
                c.close()
            return EndpointSample(host, up=False)
        return EndpointSample.of(st, self.att.fabric.nic_planes, host=host, t=t)

    def _client(self, host: str):
        c = self._ctl.get(host)
        if c is None:
            c = EndpointClient(control_path(self.att.runtime, host), timeout=CONTROL_TIMEOUT_S)
            self._ctl[host] = c
        return c

    # -- links ----------------------------------------------------------------------

    def _links(self, node: str) -> list[LinkSample]:
        try:
            reader = LinkStats.open_in(self.att.runtime.netns_path(node))
        except (OSError, LabError):  # the node is gone or restarting: not in this sample
            return []
        try:
            dump = reader.read()
            t = time.monotonic()
        except OSError:
            return []
        finally:
            reader.close()  # held, it would keep a rebooted node's old namespace alive
        out = []
        for ifname, (peer, plane, tier) in self._ends[node].items():
            c = dump.get(ifname)
            if c is None:  # a link being wired again after a restart
                continue
            out.append(LinkSample(node, ifname, peer, plane, tier, tx_bytes=c.tx_bytes,
                                  rx_bytes=c.rx_bytes, tx_drops=c.tx_dropped,
                                  rx_drops=c.rx_dropped, up=c.oper_up, t=t))
        return out

    # -- the data plane -----------------------------------------------------------------

    def _map_id(self, node: str) -> int | None:
        """The id of the node's SID programs' counters map: found once by asking the
        node (a command in it), asked again once the map is gone (the node restarted).
        None on seg6local, or while the node has none (being re-programmed)."""
        if not self.att.dataplane.keeps_counters:
            return None
        if node not in self._maps:
            try:
                found = self.att.dataplane.counters(self.att.runtime, node)
            except (LabError, OSError, ValueError):
                return None
            if not found or found.get("map_id") is None:
                return None
            self._maps[node] = found["map_id"]
        return self._maps[node]

    def _dataplane(self, node: str) -> DataplaneSample | None:
        """The node's counters, read by the id of their map."""
        map_id = self._map_id(node)
        if map_id is None:
            return None
        try:
            fd = bpf.map_fd_by_id(map_id)
        except OSError:
            self._maps.pop(node)
            return None
        try:
            return DataplaneSample(node, read_map(fd))
        except OSError:
            return None
        finally:
            os.close(fd)

    def _port_map(self, node: str) -> tuple[int, dict[int, str]] | None:
        """The id of the node's port map and its {slot: ifname}: found once by asking
        the node, asked again once the map is gone (the node restarted)."""
        if node not in self._port_maps:
            try:
                found = self.att.dataplane.signals(self.att.runtime, node)
            except (LabError, OSError, ValueError):
                return None
            if not found:
                return None
            self._port_maps[node] = (found["ports_map_id"],
                                     {slot: dev for dev, slot in found["slots"].items()})
        return self._port_maps[node]

    def _ports(self, node: str) -> list[PortSample]:
        """The node's ports' fabric signals, read by the id of its port map."""
        known = self._port_map(node)
        if known is None:
            return []
        map_id, devs = known
        try:
            fd = bpf.map_fd_by_id(map_id)
        except OSError:
            self._port_maps.pop(node)
            return []
        try:
            by_slot = read_ports(fd, sorted(devs))
            t = time.monotonic()
        except OSError:
            return []
        finally:
            os.close(fd)
        out = []
        for slot, values in by_slot.items():
            ifname = devs[slot]
            peer, plane, tier = self._ends[node].get(ifname, ("", -1, ""))
            out.append(PortSample(node, ifname, peer, plane, tier, values, t))
        return out

    # -- faults and verify ------------------------------------------------------------

    def _faults(self) -> tuple[FaultSample, ...]:
        try:
            inforce = F.active(self.att)
        except Exception:  # a faults.json being rewritten: none this sample
            return ()
        return tuple(FaultSample("hidden", "hidden") if f.hidden
                     else FaultSample(f.kind.value, f.target) for f in inforce)

    def _verify(self) -> int | None:
        got = read_json(self.att.state.dir / "verify.json", None)
        return got.get("paths_failed") if isinstance(got, dict) else None

    def _probe_named(self) -> tuple[tuple[str, str], ...]:
        got = read_json(self.att.state.dir / "verify.json", None)
        named = got.get("named") if isinstance(got, dict) else None
        if not isinstance(named, list):
            return ()
        return tuple((str(n[0]), str(n[1])) for n in named[:1000]
                     if isinstance(n, list) and len(n) == 2)
