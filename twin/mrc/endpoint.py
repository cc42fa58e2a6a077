"""The MRC endpoint daemon: one per GPU host, inside the host's network namespace.

    python -m twin.mrc.endpoint --config endpoint.json --control endpoint.sock

Three parts, one thread:

    loop      twin.mrc.loop      the packet loop: the host's sockets, its QPs, the data
                                 path (send, receive, ACKs, timers, probes, port state)
    server    twin.mrc.server    the control server: a unix socket, newline-delimited
                                 JSON, one reply per request, in the loop's selector
    counters  twin.mrc.counters  what the loop counts, read out as twin.mrc.stats records
                                 and Prometheus text

Control requests:

    hello                          who am I: host, NIC, planes
    recv_qp   {size, seed}         register a receive buffer: {qpn, rkey}
    send_qp   {peer, peer_qpn, rkey, size, mode, evs, seed}   a sending QP: {qpn}
    connect   {qpn, peer, peer_qpn}   tell a receiving QP its sender (ACKs go there)
    deny      {qpn, evs}           put EVs on the QP's denylist
    write     {qpn, size, offset, imm}   post an RDMA WRITE (WRITE_IMM with imm)
    wait      {qpn}                reply when the QP is idle or failed
    digest    {qpn, size, offset}  sha256 of a QP's buffer (source or destination)
    guards                         whether every buffer's guard bytes are intact
    events    {qpn}                a sending QP's event log (CLOCK_MONOTONIC ns and us)
                                   and its acked bytes per 1 ms bin and plane
    stats                          every QP's counters, as JSON (schema: twin.mrc.stats)
    metrics                        the same in Prometheus text format
    close     {qpn}

Imports only the standard library, PyYAML and twin's pure modules, so it runs with
the bind-mounted code inside a host container (`python3 -m twin.mrc.endpoint`).
"""

from __future__ import annotations

import argparse
import faulthandler
import gc
import json
import os
import signal
from pathlib import Path

from twin.errors import UsageError
from twin.mrc.loop import PacketLoop
from twin.mrc.server import ControlServer


def _stopped_by_signal(signum, frame) -> None:
    """Say in the log how the endpoint ended, then end as the signal would."""
    print(f"mrc endpoint: stopped by {signal.Signals(signum).name}", flush=True)
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--config", required=True, help="endpoint.json rendered for this host")
    ap.add_argument("--control", required=True, help="unix socket path for the control API")
    args = ap.parse_args(argv)
    faulthandler.enable()  # a crash leaves its traceback in endpoint.log (stderr)
    signal.signal(signal.SIGTERM, _stopped_by_signal)
    config = json.loads(Path(args.config).read_text())
    try:
        loop = PacketLoop(config)
    except UsageError as e:
        raise SystemExit(f"mrc endpoint: {e}") from None
    ControlServer(loop, args.control)  # joins the loop's selector
    gc.freeze()  # long-lived setup objects leave the collector's generations
    print(f"mrc endpoint {loop.host} ({loop.nic}) up, control {args.control}, "
          f"data path {loop.datapath}, ICRC by {loop.icrc}", flush=True)
    try:
        loop.run()
    except KeyboardInterrupt:
        print("mrc endpoint: stopped by SIGINT", flush=True)


if __name__ == "__main__":
    main()
