"""The continuous prober's agent: one host's loopback rounds, inside that host node.

A loopback probe leaves a host and comes back to it (host>T0>host,
host>T0>T1>T0>host), so each host probes its own paths with no one's help. On a
remote fabric twin starts this in every host (`python3 -c BOOT twin.remote.loop_agent`
over exec, twin.remote.ship) and localizes what they report together
(twin.remote.continuous). The rounds, the pacing, the sockets and the packets are
twin.verify.continuous's LoopRounds, unchanged.

    twin -> agent   {"host": H, "nic": ADDR, "paths": [path, ...], "period_ms": P,
                     "rate_pps": R, "timeout_ms": T|null}
    agent -> twin   {"ready": N, "t": NS}                 N paths; the node's clock
    agent -> twin   {"round": K, "t": NS, "started": NS, "sent": n, "late": n,
                     "lost": [[i, sent_ns], ...],      every round; sent, late: so far
                     "ce": [[i, rtt_ns], ...]}         came back CE-marked (congested)
    twin -> agent   stdin closes (or {"stop": true})
    agent -> twin   {"stopped": {"sent": n, "lost": n, "late": n}}

Times are the node's CLOCK_MONOTONIC, the endpoints' clock. A problem is one line
{"error": "..."} and exit status 1.
"""

from __future__ import annotations

import json
import sys
import threading
import time

from twin.errors import TwinError
from twin.remote.agent import path_from_dict
from twin.verify.continuous import LoopRounds, pace
from twin.verify.localize import Outcome


class _Reporting(LoopRounds):
    # twin merges the agents' rounds by number, one from each: every round whole, sent
    # at once, its lost probes judged at the given (or default) timeout
    fast_confirm = False
    measure_timeout = False
    spread = False

    def __init__(self, out, *args):
        super().__init__(*args)
        self.out = out
        self.number = 0
        self.write = threading.Lock()

    def round_judged(self, outcomes: list[Outcome], now_ns: int, *, partial: bool = False
                     ) -> list:
        self.number += 1
        lost = [[i, o.sent_ns] for i, o in enumerate(outcomes) if not o.ok]
        ce = [[i, o.rtt_ns] for i, o in enumerate(outcomes) if o.ok and o.ce]
        _say(self.out, self.write, round=self.number, t=now_ns,
             started=min(o.sent_ns for o in outcomes), sent=self.probes_sent,
             late=self.rounds_late, lost=lost, ce=ce)
        return []


def _say(out, lock: threading.Lock, **msg) -> None:
    with lock:
        out.write(json.dumps(msg, separators=(",", ":")) + "\n")
        out.flush()


def serve(stdin, out) -> int:
    line = stdin.readline()
    if not line.strip():
        return 0
    hello = json.loads(line)
    host, nic = hello["host"], hello["nic"]
    paths = [path_from_dict(d) for d in hello["paths"]]
    try:
        p = pace(len(paths), float(hello["period_ms"]), float(hello["rate_pps"]),
                 hello.get("timeout_ms"))
    except TwinError as e:
        _say(out, threading.Lock(), error=f"{host}: {e}")
        return 1
    rounds = _Reporting(out, host, paths, {host: (None, nic)}, p)
    try:
        rounds.start()
    except OSError as e:
        _say(out, rounds.write, error=f"{host}: cannot open probe sockets on {nic}: "
             f"{e.strerror}")
        return 1
    _say(out, rounds.write, ready=len(paths), t=time.monotonic_ns())
    try:
        while True:  # until twin closes stdin or says stop
            line = stdin.readline()
            if not line or (line.strip() and json.loads(line).get("stop")):
                break
    finally:
        rounds.stop()
    _say(out, rounds.write, stopped={"sent": rounds.probes_sent, "lost": rounds.probes_lost,
                                     "late": rounds.rounds_late, "error": rounds.error})
    return 0


def main() -> int:
    try:
        return serve(sys.stdin.buffer, sys.stdout)
    except (ValueError, KeyError) as e:
        sys.stdout.write(json.dumps({"error": f"loop agent: bad request from twin: {e}"}) + "\n")
        return 1


if __name__ == "__main__":
    sys.exit(main())
