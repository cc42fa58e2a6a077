"""The MRC endpoint daemon: one per GPU host, inside the host's network namespace.

    python -m twin.mrc.endpoint --config endpoint.json --control endpoint.sock

Three parts, one thread:

    loop      twin.mrc.loop      the packet loop: the host's sockets, its QPs, the data
                                 path (send, receive, ACKs, timers, probes, port state)
    server    twin.mrc.server    the control server: a unix socket, newline-delimited
                                 JSON, one reply per request, in the loop's selector;
                                 requests checked and dispatched by twin.mrc.control.OPS
    counters  twin.mrc.counters  what the loop counts, read out as twin.mrc.stats records
                                 and Prometheus text

The control protocol's ops, their arguments and replies are one table,
twin.mrc.control.OPS; twin.mrc.control.EndpointClient is its client.

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
          f"data path {loop.datapath}, ICRC by {loop.icrc}, transport {loop.transport}",
          flush=True)
    try:
        loop.run()
    except KeyboardInterrupt:
        print("mrc endpoint: stopped by SIGINT", flush=True)


if __name__ == "__main__":
    main()
