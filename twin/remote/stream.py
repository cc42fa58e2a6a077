"""A persistent command stream into one node: commands run, and stamped, by the node.

A one-shot `docker -H URL exec` (or `kubectl exec`) costs tens of ms before the
command starts, and twin cannot tell when in that span the command ran. A drill on
an attached fabric opens one STREAM per node it breaks instead: a small python3
process in the node (standard library only, as in every node image), started once
over `exec -i`, that reads one JSON request a line and answers one JSON line:

    {"argv": [...], "input": TEXT|null, "timeout": S}
        -> {"rc": N, "out": TEXT, "err": TEXT, "t0": NS, "t1": NS}
           t0, t1: the node's CLOCK_MONOTONIC just before the command started and
           once it returned (twin.remote.clock.Stamp)
    {"link": IF, "up": BOOL}          IF admin up or down, as `ip link set dev IF
        -> as argv's                  up|down` does, by one ioctl (SIOCSIFFLAGS) in the
                                      stream itself: stamped around that syscall alone
                                      (µs), not around starting `ip` (ms)
    {"now": 1}  -> {"t": NS}          the node's clock (offsets: twin.remote.clock)

Every wait has a deadline (a request's timeout, plus STREAM_SLACK_S); a stream
that ends or misses one is closed and the caller told (StreamBroken), so the
runtime can fall back to a one-shot exec. The stream runs in a session of its own:
a Ctrl-C at twin's terminal does not end it before twin's rollback has used it.
"""

from __future__ import annotations

import json
import queue
import subprocess
import threading
import time

from twin.errors import LabError
from twin.remote import transport
from twin.remote.clock import Sample, Stamp

STREAM = """\
import fcntl, json, socket, struct, subprocess, sys, time
say = sys.stdout.write
def link(name, up):
    s = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
    try:
        ifr = struct.pack("16sH", name.encode(), 0)
        flags = struct.unpack("16sH", fcntl.ioctl(s, 0x8913, ifr)[:18])[1]
        flags = flags | 1 if up else flags & ~1
        t0 = time.monotonic_ns()
        fcntl.ioctl(s, 0x8914, struct.pack("16sH", name.encode(), flags))
        return 0, "", t0, time.monotonic_ns()
    except OSError as e:
        return 1, f"{name}: {e.strerror}", time.monotonic_ns(), time.monotonic_ns()
    finally:
        s.close()
for line in sys.stdin:
    if not line.strip():
        continue
    req = json.loads(line)
    if "now" in req:
        say(json.dumps({"t": time.monotonic_ns()}) + "\\n")
        sys.stdout.flush()
        continue
    if "link" in req:
        rc, err, t0, t1 = link(req["link"], req["up"])
        say(json.dumps({"rc": rc, "out": "", "err": err, "t0": t0, "t1": t1}) + "\\n")
        sys.stdout.flush()
        continue
    t0 = time.monotonic_ns()
    try:
        p = subprocess.run(req["argv"], input=req.get("input"), capture_output=True,
                           text=True, timeout=req.get("timeout"))
        rc, out, err = p.returncode, p.stdout, p.stderr
    except FileNotFoundError as e:
        rc, out, err = 127, "", str(e)
    except subprocess.TimeoutExpired:
        rc, out, err = 124, "", "timed out in the node"
    t1 = time.monotonic_ns()
    say(json.dumps({"rc": rc, "out": out, "err": err, "t0": t0, "t1": t1}) + "\\n")
    sys.stdout.flush()
"""
READY_S = 30.0  # from start to the first answer (the exec, python3 starting)
STREAM_SLACK_S = 10.0  # on top of a command's own timeout
CLOCK_SAMPLES = 16


class StreamBroken(LabError):
    """The stream ended or gave no answer in time (the node's command may not have run)."""


class NodeStream:
    """One node's stream; `run` and `now` are safe from any thread (one at a time)."""

    def __init__(self, tr: transport.Transport, ref: transport.NodeRef):
        self.node = ref.node
        self._lock = threading.Lock()
        self._inbox: queue.Queue = queue.Queue()
        self._err: list[str] = []
        self.proc = transport.popen(tr, ref, ["python3", "-c", STREAM], stdin=subprocess.PIPE,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                    start_new_session=True)
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=self._read_err, daemon=True).start()
        try:
            self.now(READY_S)  # it answers: python3 is there, the exec works
        except BaseException:
            self.close()
            raise

    def _read(self) -> None:
        for line in self.proc.stdout:
            self._inbox.put(line)
        self._inbox.put(None)

    def _read_err(self) -> None:
        for line in self.proc.stderr:
            self._err.append(line.decode(errors="replace").rstrip())

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def _ask(self, req: dict, timeout: float) -> dict:
        with self._lock:
            if not self.alive:
                raise StreamBroken(f"{self.node}: its command stream ended ({self._why()})")
            try:
                self.proc.stdin.write(json.dumps(req).encode() + b"\n")
                self.proc.stdin.flush()
                line = self._inbox.get(timeout=timeout)
            except (BrokenPipeError, OSError):
                line = None
            except queue.Empty:
                self.close()
                raise StreamBroken(f"{self.node}: its command stream gave no answer in "
                                   f"{timeout:.0f}s") from None
            if line is None:
                self.close()
                raise StreamBroken(f"{self.node}: its command stream ended ({self._why()})")
            try:
                return json.loads(line)
            except ValueError:
                self.close()
                raise StreamBroken(f"{self.node}: its command stream said "
                                   f"{line[:80]!r}") from None

    def _why(self) -> str:
        tail = [x for x in self._err if x.strip()][-2:]
        return " | ".join(tail) if tail else f"exit {self.proc.poll()}"

    def run(self, argv: list[str], *, input: str | None = None, timeout: float = 60
            ) -> tuple[subprocess.CompletedProcess, Stamp]:
        got = self._ask({"argv": argv, "input": input, "timeout": timeout},
                        timeout + STREAM_SLACK_S)
        proc = subprocess.CompletedProcess(argv, int(got["rc"]), got.get("out", ""),
                                           got.get("err", ""))
        return proc, Stamp(int(got["t0"]), int(got["t1"]))

    def set_link(self, ifname: str, up: bool, timeout: float = 10
                 ) -> tuple[subprocess.CompletedProcess, Stamp]:
        got = self._ask({"link": ifname, "up": up}, timeout + STREAM_SLACK_S)
        argv = ["ip", "link", "set", "dev", ifname, "up" if up else "down"]
        return (subprocess.CompletedProcess(argv, int(got["rc"]), "", got.get("err", "")),
                Stamp(int(got["t0"]), int(got["t1"])))

    def now(self, timeout: float = STREAM_SLACK_S) -> int:
        return int(self._ask({"now": 1}, timeout)["t"])

    def sample(self) -> Sample:
        t1 = time.monotonic_ns()
        remote = self.now()
        return Sample(t1, remote, time.monotonic_ns())

    def samples(self, n: int = CLOCK_SAMPLES) -> list[Sample]:
        return [self.sample() for _ in range(n)]

    def close(self) -> None:
        transport.end(self.proc)
