"""nsenter, in Python: enter a network namespace from this thread, and run
commands inside one.

`inside(path)` moves the calling thread (only it: setns on a thread) into a
network namespace and back. Sockets opened inside stay bound to that
namespace after we leave, which is how one process holds a raw socket in
every host of a lab. Python 3.11 has no os.setns, hence ctypes.

`run(path, argv)` runs a command in a namespace with nsenter, which works
the same for `ip netns` namespaces (/run/netns/NAME) and for containers
(/proc/PID/ns/net).
"""

from __future__ import annotations

import ctypes
import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager

from twin.errors import CommandFailed

CLONE_NEWNET = 0x40000000
_libc = ctypes.CDLL(None, use_errno=True)


def _setns(fd: int) -> None:
    if _libc.setns(fd, CLONE_NEWNET) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"setns: {os.strerror(err)}")


@contextmanager
def inside(path: str) -> Iterator[None]:
    home = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
    try:
        target = os.open(path, os.O_RDONLY)
        try:
            _setns(target)
        finally:
            os.close(target)
        try:
            yield
        finally:
            _setns(home)
    finally:
        os.close(home)


def run(path: str, argv: list[str], *, input: str | None = None, check: bool = True,
        timeout: float = 60) -> subprocess.CompletedProcess:
    full = ["nsenter", f"--net={path}", "--", *argv]
    proc = subprocess.run(full, input=input, capture_output=True, text=True, timeout=timeout)
    if check and proc.returncode != 0:
        raise CommandFailed(argv, proc.returncode, proc.stderr or proc.stdout)
    return proc


def write_sysctls(pairs: list[tuple[str, str]]) -> list[str]:
    """Write sysctls in the current thread's namespace; return the keys that do not exist."""
    missing = []
    for key, value in pairs:
        path = "/proc/sys/" + key.replace(".", "/")
        try:
            with open(path, "w") as f:
                f.write(value)
        except FileNotFoundError:
            missing.append(key)
    return missing
