"""What this machine's kernel can run, asked once per process in a scratch namespace.

    seg6local  add a uN route (`End flavors next-csid lblen 32 nflen 16`) on lo
    ebpf       load a two-instruction TC program and attach it at lo's clsact ingress

Each answer is None (it can) or why not, with the kernel's own words and the
option that is missing. The scratch namespace (twin-dpprobe-<pid>) is removed
whatever happens; nothing else on the machine is touched.
"""

from __future__ import annotations

import functools
import os
import subprocess

from twin import nsenter
from twin.node import ebpf

SEG6LOCAL_ROUTE = ["ip", "-6", "route", "add", "fcbb:ffff:ffff::/48", "encap", "seg6local",
                   "action", "End", "flavors", "next-csid", "lblen", "32", "nflen", "16",
                   "dev", "lo"]


@functools.cache
def probe() -> dict[str, str | None]:
    """{backend: None if this kernel runs it, else why not}."""
    if os.geteuid() != 0:
        why = "probing the kernel needs root (a scratch network namespace)"
        return {"seg6local": why, "ebpf": why}
    ns = f"twin-dpprobe-{os.getpid()}"
    made = subprocess.run(["ip", "netns", "add", ns], capture_output=True, text=True)
    if made.returncode != 0:
        why = f"cannot make a scratch namespace: {made.stderr.strip()}"
        return {"seg6local": why, "ebpf": why}
    try:
        path = f"/run/netns/{ns}"
        nsenter.run(path, ["ip", "link", "set", "lo", "up"])
        return {"seg6local": _seg6local(path), "ebpf": _ebpf(path)}
    finally:
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)


def _seg6local(path: str) -> str | None:
    proc = nsenter.run(path, SEG6LOCAL_ROUTE, check=False)
    if proc.returncode == 0:
        return None
    said = " ".join((proc.stderr or proc.stdout).split()).removeprefix("Error: ")
    return f"{said.rstrip('.')} (CONFIG_IPV6_SEG6_LWTUNNEL)"


def _ebpf(path: str) -> str | None:
    with nsenter.inside(path):
        return ebpf.probe("lo")
