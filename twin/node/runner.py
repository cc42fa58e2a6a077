"""The one runner of a node program (twin.dataplane.program): it makes the node it
runs in what its plan says, and is safe to run again on top.

    python3 -m twin.node.runner PROGRAM.json [--owner TAG] [--wait SECONDS]
    python3 -m twin.node.runner -            (the program on stdin)

It runs inside the node's network namespace: in twin's own process, on a thread
moved into the node's namespace (a node on this machine; the commands it starts
are born there too), in the node's own boot (images/mrc-twin-boot), or over
`exec` on a fabric twin attached to. So it needs nothing but the standard
library, iproute2 and the kernel: the node images have no pip packages.

The steps, in order (each replaces what is there, so running again mends):

    1. node sysctls                    forwarding, no DAD, no RA
    2. wait for every planned interface (--wait: at boot, links are wired after start)
    3. interface sysctls
    4. the SID anchor (seg6local only: dummy, else ifb)
    5. `ip -batch`: addresses, MTUs, static routes (and seg6local's local SIDs)
    6. every link's alias: the lab's owner tag (twin.owner), when given
    7. `tc -batch`: shaping
    8. eBPF programs at TC ingress (the ebpf data plane's local SIDs, twin.node.ebpf;
       on seg6local, RFC 6040's copy at host ports) and at TC egress (the virtual
       queues of shaped switch ports: the fabric signals)

A failed step raises `StepFailed` naming the step and what the command said;
as a program, the runner prints that one line and exits 1.
"""

from __future__ import annotations

import argparse
import json
import socket
import subprocess
import sys
import time

from twin.node import ebpf


class StepFailed(Exception):
    """One step of a node program failed: which, and what the kernel or command said."""


def run(program: dict, owner: str = "", wait_s: float = 0.0) -> None:
    """Run a node program (the dict of program.json) in this network namespace."""
    write_sysctls(program["node_sysctls"], "node sysctls")
    if wait_s > 0:
        wait_for(program["interfaces"], wait_s)
    write_sysctls(program["interface_sysctls"], "interface sysctls")
    if program.get("anchor"):
        ensure_anchor(program["anchor"])
    lines = list(program["ip"])
    if owner:
        lines += [f'link set dev {i} alias "{owner}"' for i in program["interfaces"]]
    command(["ip", "-batch", "-"], lines, "ip -batch (addresses, routes)")
    if program["tc"]:
        command(["tc", "-batch", "-"], program["tc"], "tc -batch (shaping)")
    queues = program.get("queues") or []
    if program.get("bpf") or queues:
        what = "eBPF local SIDs" + (" and fabric signals" if queues else "")
        try:
            if queues:
                ebpf.install(program.get("bpf", []), queues=queues)
            else:
                ebpf.install(program["bpf"])
        except (OSError, ValueError) as e:  # the kernel refused; a program we cannot build
            raise StepFailed(f"{what}: {e}") from None


def write_sysctls(pairs: list, what: str) -> None:
    for key, value in pairs:
        path = "/proc/sys/" + key.replace(".", "/")
        try:
            with open(path, "w") as f:
                f.write(str(value))
        except FileNotFoundError:
            raise StepFailed(f"{what}: {key} does not exist here (an interface not "
                             "wired yet, or a kernel without it)") from None
        except OSError as e:
            raise StepFailed(f"{what}: {key}: {e.strerror}") from None


def exists(dev: str) -> bool:
    """Whether this network namespace has `dev` (asked of the kernel through a socket of
    this thread's namespace: /sys/class/net shows the namespace sysfs was mounted in)."""
    try:
        socket.if_nametoindex(dev)
        return True
    except OSError:
        return False


def wait_for(interfaces: list[str], wait_s: float) -> None:
    deadline = time.monotonic() + wait_s
    while True:
        missing = [i for i in interfaces if not exists(i)]
        if not missing:
            return
        if time.monotonic() > deadline:
            raise StepFailed(f"interfaces never appeared within {wait_s:.0f}s: "
                             f"{' '.join(missing)}")
        time.sleep(0.1)


def ensure_anchor(name: str) -> None:
    """An always-up device: dummy where the kernel has it, else ifb."""
    if not exists(name):
        for kind in ("dummy", "ifb"):
            if subprocess.run(["ip", "link", "add", name, "type", kind],
                              capture_output=True).returncode == 0:
                break
        else:
            raise StepFailed(f"cannot create SID anchor {name}: the kernel has neither "
                             "dummy nor ifb")
    command(["ip", "link", "set", name, "up"], [], f"SID anchor {name}")


def command(argv: list[str], lines: list[str], what: str) -> None:
    text = "".join(line + "\n" for line in lines) if lines else None
    proc = subprocess.run(argv, input=text, capture_output=True, text=True)
    if proc.returncode != 0:
        said = " ".join((proc.stderr or proc.stdout).split())[:400]
        raise StepFailed(f"{what}: `{' '.join(argv)}` exited {proc.returncode}: {said}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python3 -m twin.node.runner",
                                 description="Make this node what its program says.")
    ap.add_argument("program", help="program.json, or - for standard input")
    ap.add_argument("--owner", default="", help="the lab's owner tag, set as every link's alias")
    ap.add_argument("--wait", type=float, default=0.0,
                    help="seconds to wait for the planned interfaces (at boot)")
    args = ap.parse_args(argv)
    try:
        text = sys.stdin.read() if args.program == "-" else open(args.program).read()
        program = json.loads(text)
    except (OSError, ValueError) as e:
        print(f"runner: cannot read the program: {e}", file=sys.stderr)
        return 2
    try:
        run(program, args.owner, args.wait)
    except StepFailed as e:
        print(f"runner: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
