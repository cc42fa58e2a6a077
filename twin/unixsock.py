"""Unix sockets at paths of any length.

A sockaddr_un holds 108 bytes, and a run directory under a test's or a CI
job's temporary directory easily makes an endpoint's control socket path
longer. Past the limit, bind and connect go through the directory, opened
with O_PATH: /proc/self/fd/<fd>/<name> is short whatever the directory is.
Standard library only: the endpoint daemon imports it inside containers.
"""

from __future__ import annotations

import os
import socket

SUN_PATH_MAX = 107  # 108 bytes, with the terminating NUL


def _via_dir(sock: socket.socket, path: str, op: str) -> None:
    if len(os.fsencode(path)) <= SUN_PATH_MAX:
        getattr(sock, op)(path)
        return
    fd = os.open(os.path.dirname(path) or ".", os.O_PATH | os.O_DIRECTORY)
    try:
        getattr(sock, op)(f"/proc/self/fd/{fd}/{os.path.basename(path)}")
    finally:
        os.close(fd)


def bind(sock: socket.socket, path: str) -> None:
    _via_dir(sock, path, "bind")


def connect(sock: socket.socket, path: str) -> None:
    _via_dir(sock, path, "connect")
