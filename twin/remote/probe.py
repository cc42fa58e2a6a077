"""`twin verify`'s probes on a remote fabric: one agent per host, all at once.

Every host answers the requests the others send it, so every host's agent runs for
the whole round (they are started a few at a time, STARTERS, and at most MAX_AGENTS
hosts are probed this way). In order:

    start    each host: exec `python3 -c BOOT twin.remote.agent`, the code on stdin,
             then {"host", "nic"}; it binds its sockets and says its UDP port
    job      each host: the peers' ports, the probes it sends, the answer paths of
             the requests addressed to it
    sent     each reports when its own probes are done (or out of attempts), and
             keeps answering; progress lines in between feed the progress bar
    stop     once all are done: each sends its results and exits

A probe's request reached its destination if that host's agent says it arrived; it
was answered if its sender got the reply. The merged results are the list local
verify's Prober returns, in the same order, for the same report.
"""

from __future__ import annotations

import json
import queue
import random
import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from twin.errors import LabError
from twin.fabric.paths import Path
from twin.remote import ship, transport
from twin.remote.agent import path_to_dict
from twin.verify.prober import ProbeResult

AGENT = "twin.remote.agent"
STARTERS = 8  # agents starting at once (each is a docker/kubectl exec)
MAX_AGENTS = 256  # hosts probed by agents in one verify; past that, say so
READY_S = 60.0  # from start to every agent's sockets bound
ATTEMPTS, WAIT_S = 3, 0.3  # as local verify's Prober
STOP_S = 30.0  # from `stop` to every agent's results


class _Agent:
    """One agent process and the thread that reads its JSON lines into a queue."""

    def __init__(self, host: str, proc: subprocess.Popen, inbox: queue.Queue):
        self.host, self.proc = host, proc
        self.port: int | None = None
        self.stderr: list[str] = []
        threading.Thread(target=self._read, args=(inbox,), daemon=True).start()
        threading.Thread(target=self._read_err, daemon=True).start()

    def _read(self, inbox: queue.Queue) -> None:
        for line in self.proc.stdout:
            try:
                inbox.put((self.host, json.loads(line)))
            except ValueError:
                self.stderr.append(line.decode(errors="replace").strip())
        inbox.put((self.host, None))  # it ended

    def _read_err(self) -> None:
        for line in self.proc.stderr:
            self.stderr.append(line.decode(errors="replace").rstrip())

    def say(self, **msg) -> None:
        try:
            self.proc.stdin.write(json.dumps(msg, separators=(",", ":")).encode() + b"\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            pass  # it ended: its reader says so

    def why(self) -> str:
        tail = [x for x in self.stderr if x.strip()][-3:]
        return " | ".join(tail) if tail else f"it exited {self.proc.poll()}"

    def end(self) -> None:
        transport.end(self.proc)


def jobs(paths: list[Path], reverse: dict[int, Path]) -> dict[str, dict[str, dict]]:
    """Per host: the probes it sends and the answers it gives, by probe id (pure)."""
    out: dict[str, dict[str, dict]] = {}
    for i, p in enumerate(paths):
        out.setdefault(p.src, {"probes": {}, "answers": {}})["probes"][str(i)] = path_to_dict(p)
        back = reverse.get(i)
        if back is not None:
            out.setdefault(back.src, {"probes": {}, "answers": {}})["answers"][str(i)] = \
                path_to_dict(back)
    return out


def merge(paths: list[Path], results: dict[str, dict], arrived: dict[str, list]
          ) -> list[ProbeResult]:
    """The agents' reports as local verify's list of results (pure)."""
    merged = [ProbeResult(p) for p in paths]
    for got in results.values():
        for i, (forward, reply, rtt, attempts) in got.items():
            r = merged[int(i)]
            r.forward, r.reply, r.rtt_us, r.attempts = bool(forward), bool(reply), rtt, attempts
    for ids in arrived.values():
        for i in ids:
            merged[int(i)].forward = True
    return merged


def probe_paths(rt, plan, paths: list[Path], reverse: dict[int, Path], progress=None
                ) -> list[ProbeResult]:
    hosts = {h.name: str(plan.nic_address(h.name)) for h in plan.fabric.hosts}
    if len(hosts) > MAX_AGENTS:
        raise LabError(f"lab {rt.lab}: {len(hosts)} hosts, and remote verify runs one agent "
                       f"per host, all at once, up to {MAX_AGENTS}; use --no-dataplane")
    work = jobs(paths, reverse)
    inbox: queue.Queue = queue.Queue()
    agents: dict[str, _Agent] = {}
    lock = threading.Lock()

    def start(host: str) -> None:
        proc = transport.popen(rt.transport, rt.ref(host), ship.boot_argv(AGENT),
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE)
        agent = _Agent(host, proc, inbox)
        with lock:
            agents[host] = agent
        proc.stdin.write(ship.preamble(AGENT))
        agent.say(host=host, nic=hosts[host])

    try:
        with ThreadPoolExecutor(STARTERS) as pool:
            for f in [pool.submit(start, h) for h in hosts]:
                f.result()
        _until(inbox, agents, "ready", READY_S, lambda host, msg: setattr(
            agents[host], "port", int(msg["ready"])))
        peers = {h: [hosts[h], a.port] for h, a in agents.items()}
        run_id = random.getrandbits(32)
        for host, agent in agents.items():
            mine = work.get(host, {"probes": {}, "answers": {}})
            agent.say(run=run_id, peers=peers, attempts=ATTEMPTS, wait=WAIT_S, **mine)
        seen: dict[str, tuple[int, int, int]] = {}

        def on_progress(host: str, msg: dict) -> None:
            seen[host] = tuple(msg["progress"])
            if progress:
                done = sum(d if a == 0 else t for d, t, a in seen.values())
                progress(min(done, len(paths)), len(paths), max(a for _, _, a in seen.values()))

        budget = READY_S + ATTEMPTS * (WAIT_S * ATTEMPTS + 1) + len(paths) * 0.002
        _until(inbox, agents, "sent", budget, None, on_progress)
        for agent in agents.values():
            agent.say(stop=True)
        results: dict[str, dict] = {}
        arrived: dict[str, list] = {}

        def on_results(host: str, msg: dict) -> None:
            results[host] = msg["results"]
            arrived[host] = msg.get("arrived", [])

        _until(inbox, agents, "results", STOP_S, on_results, on_progress)
        return merge(paths, results, arrived)
    finally:
        with ThreadPoolExecutor(STARTERS) as pool:
            list(pool.map(_Agent.end, list(agents.values())))


def _until(inbox: queue.Queue, agents: dict[str, _Agent], key: str, seconds: float,
           on_key, on_progress=None) -> None:
    """Read agents' messages until every one has sent `key`; an agent that fails or
    ends first, or time running out, is a LabError naming the host."""
    waiting = set(agents)
    deadline = time.monotonic() + seconds
    while waiting:
        try:
            host, msg = inbox.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            first = sorted(waiting)[0]
            raise LabError(f"{first}: its probe agent sent no {key!r} in {seconds:.0f}s "
                           f"({len(waiting)} of {len(agents)} agents waiting)") from None
        if msg is None:
            if host in waiting:
                raise LabError(f"{host}: its probe agent ended early: {agents[host].why()}")
            continue
        if "error" in msg:
            raise LabError(f"{host}: {msg['error']}")
        if key in msg and host in waiting:
            waiting.discard(host)
            if on_key:
                on_key(host, msg)
        elif "progress" in msg and on_progress:
            on_progress(host, msg)
