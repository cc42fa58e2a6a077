"""`twin`: the one command-line interface. It owns all output.

One module per command group; each registers its commands on `main`:

    base      the group, the error boundary, progress bars and --json output
    fabric    plan, render, paths, size        (pure: no root)
    lab       up, down, status, exec, restart, verify
    traffic   traffic, stats, fuzz
    fault     fault link-down | link-loss | link-up | switch-down | nic-down | plane-down |
              list | clear
    engine    engine start | stop | status, images build | status
    drill     drill list | run
    blind     drill blind | answer | reveal | scores   (on the drill group)
    probe     probe                            (continuous localization, root)
    routes    routes check | diff | export     (an operator's own tables; no root)
    telemetry telemetry up | down | status, top (live metrics, Prometheus; root)
    grafana   grafana dashboards | push        (dashboards generated from the fabric)
    ci        ci                               (a CI job: routes check, up, verify, drills,
                                                down, reports; root)
"""

from twin.cli import (  # noqa: F401
    blind,
    ci,
    drill,
    engine,
    fabric,
    fault,
    grafana,
    lab,
    probe,
    routes,
    telemetry,
    traffic,
)
from twin.cli.base import main

__all__ = ["main"]
