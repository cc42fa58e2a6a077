"""nsenter, in Python: enter a network namespace from this thread, and run
commands inside one.

`inside(path)` moves the calling thread (only it: setns on a thread) into a
network namespace and back. Sockets opened inside stay bound to that
namespace after we leave, which is how one process holds a raw socket in
every host of a lab. Python 3.11 has no os.setns, hence ctypes.

`run(path, argv)` runs a command in a namespace with nsenter, which works
the same for `ip netns` namespaces (/run/netns/NAME) and for containers
(/proc/PID/ns/net).

`set_admin(path, ifname, up)` sets one interface admin up or down from this
process (SIOCSIFFLAGS): tens of microseconds, where starting `ip` takes
milliseconds. A fault on a drill's timeline is stamped by when it begins,
so the change must land right after the stamp, not somewhere in a fork.
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import os
import socket
import struct
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager

from twin.errors import CommandFailed

CLONE_NEWNET = 0x40000000
SIOCGIFFLAGS, SIOCSIFFLAGS = 0x8913, 0x8914  # <linux/sockios.h>
IFF_UP = 0x1
_IFREQ = "16sH22x"  # struct ifreq: the name, then ifr_flags in the union (40 bytes)
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


def set_admin(path: str, ifname: str, up: bool) -> None:
    """Set ifname admin up or down inside the namespace at path; CommandFailed (as
    `ip link set` would fail) when the namespace has no such interface."""
    name = ifname.encode()
    argv = ["ip", "link", "set", "dev", ifname, "up" if up else "down"]
    if not 0 < len(name) < 16:
        raise CommandFailed(argv, 1, f'"{ifname}" is not a valid interface name')
    with inside(path):
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)  # bound to this namespace
    with sock:
        try:
            got = fcntl.ioctl(sock, SIOCGIFFLAGS, struct.pack(_IFREQ, name, 0))
            flags = struct.unpack(_IFREQ, got)[1]
            want = flags | IFF_UP if up else flags & ~IFF_UP
            if want != flags:
                fcntl.ioctl(sock, SIOCSIFFLAGS, struct.pack(_IFREQ, name, want))
        except OSError as e:
            why = f'Cannot find device "{ifname}"' if e.errno == errno.ENODEV else e.strerror
            raise CommandFailed(argv, 1, why) from None
