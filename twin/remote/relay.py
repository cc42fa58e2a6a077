"""An endpoint's control socket, reached over exec: stdin and stdout, relayed.

Each host's MRC endpoint listens on a unix socket inside its node
(/run/mrc-twin/endpoint.sock, where images/mrc-twin-boot starts it) and speaks
newline JSON. On a remote fabric twin cannot open that file, so a command in the
node does: RELAY connects to the socket and copies bytes both ways until either
side closes. On twin's side the exec's stdin and stdout are one end of a socket
pair, so twin.endpoints.EndpointClient talks through the other end unchanged.

RELAY is the standard library only (python3 is in every node image); a node
whose endpoint does not answer makes it exit 1 with the reason on stderr, and
the client then reads "closed the connection".
"""

from __future__ import annotations

import socket
import subprocess

from twin.remote import transport

RELAY = """\
import os, socket, sys, threading
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
try:
    s.connect(sys.argv[1])
except OSError as e:
    sys.exit(f"relay: {sys.argv[1]}: {e.strerror}")
def up():
    while True:
        data = os.read(0, 1 << 16)
        if not data:
            break
        s.sendall(data)
    s.shutdown(socket.SHUT_WR)
threading.Thread(target=up, daemon=True).start()
while True:
    data = s.recv(1 << 16)
    if not data:
        break
    view = memoryview(data)
    while view:
        view = view[os.write(1, view):]
"""


def open_relay(tr: transport.Transport, ref: transport.NodeRef, sock_path: str
               ) -> tuple[socket.socket, subprocess.Popen]:
    """Start the relay in the node; our end of the socket pair, and the exec process."""
    ours, theirs = socket.socketpair()
    try:
        proc = transport.popen(tr, ref, ["python3", "-c", RELAY, sock_path], stdin=theirs,
                               stdout=theirs, stderr=subprocess.DEVNULL)
    finally:
        theirs.close()
    return ours, proc
