"""The probe agent: twin verify's sender and responder, running inside one host node.

twin starts it with `python3 -c BOOT twin.remote.agent` over the transport's exec
(twin.remote.ship pipes it this module's code first) and talks to it in JSON
lines, one agent per host, all at once: each answers the others' requests.

    twin -> agent   {"host": H, "nic": ADDR}            bind H's probe sockets
    agent -> twin   {"ready": PORT}                     its UDP port
    twin -> agent   {"run": ID, "peers": {host: [nic, port]}, "probes": {id: path},
                     "answers": {id: path}, "attempts": N, "wait": S}
                    probes: the paths H sends on; answers: the path back of each
                    request addressed to H
    agent -> twin   {"progress": [done, total, attempt]} ... then {"sent": n}
                    (its own probes are done; it keeps answering others)
    twin -> agent   {"stop": true}  (or stdin closes)
    agent -> twin   {"results": {id: [forward, reply, rtt_us, attempts]},
                     "arrived": [ids of requests that reached H]}

A problem is one line {"error": "..."} and exit status 1. The packets and the
sockets are twin.verify.prober's and twin.verify.packets', unchanged: a probe
sent by an agent is byte for byte the one local verify sends.
"""

from __future__ import annotations

import json
import select
import sys
import time

from twin.fabric.paths import Path
from twin.verify.prober import Prober

PROGRESS_EVERY_S = 0.2


def path_to_dict(p: Path) -> dict:
    return {"kind": p.kind, "src": p.src, "dst": p.dst, "plane": p.plane, "t1": p.t1,
            "address": p.address}


def path_from_dict(d: dict) -> Path:
    """A path as the agent needs it: ends, plane and T1 (its EV), its address."""
    return Path(d["kind"], d["src"], d["dst"], d["plane"], d["t1"], d["address"], (), ())


def _say(out, **msg) -> None:
    out.write(json.dumps(msg, separators=(",", ":")) + "\n")
    out.flush()


def _read(stdin) -> dict | None:
    line = stdin.readline()
    return json.loads(line) if line.strip() else None


def serve(stdin, out) -> int:
    hello = _read(stdin)
    if not hello:
        return 0
    host, nic = hello["host"], hello["nic"]
    try:
        prober = Prober({host: (None, nic)})
    except OSError as e:
        _say(out, error=f"{host}: cannot open probe sockets on {nic}: {e.strerror}")
        return 1
    with prober:
        _say(out, ready=prober.address(host)[1])
        job = _read(stdin)
        if not job:
            return 0
        prober.peers = {h: (a, int(p)) for h, (a, p) in job["peers"].items()}
        probes = {int(i): path_from_dict(d) for i, d in job["probes"].items()}
        answers = {int(i): path_from_dict(d) for i, d in job["answers"].items()}
        last = [0.0]

        def progress(done: int, total: int, attempt: int) -> None:
            now = time.monotonic()
            if now - last[0] >= PROGRESS_EVERY_S or done == total:
                last[0] = now
                _say(out, progress=[done, total, attempt])

        results = prober.run_ids(probes, answers, run_id=int(job["run"]),
                                 attempts=int(job.get("attempts", 3)),
                                 wait=float(job.get("wait", 0.3)), progress=progress)
        _say(out, sent=len(probes))
        while True:  # answer the other hosts' requests until twin says stop
            prober.drain(results, answers, 0.02)
            ready, _, _ = select.select([stdin], [], [], 0)
            if ready:
                msg = _read(stdin)
                if msg is None or msg.get("stop"):
                    break
        _say(out, results={str(i): [r.forward, r.reply, r.rtt_us, r.attempts]
                           for i, r in results.items()},
             arrived=sorted(prober.arrived))
    return 0


def main() -> int:
    try:
        return serve(sys.stdin.buffer, sys.stdout)
    except (ValueError, KeyError) as e:
        _say(sys.stdout, error=f"agent: bad request from twin: {e}")
        return 1


if __name__ == "__main__":
    sys.exit(main())
