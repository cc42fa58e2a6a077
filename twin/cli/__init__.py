"""`twin`: the one command-line interface. It owns all output.

One module per command group; each registers its commands on `main`:

    base      the group, the error boundary, progress bars and --json output
    commands  the table of commands: name, modules, short help (what `twin --help`
              lists; a command's modules are imported when it runs: issue 40)
    fabric    plan, render, paths, size        (pure: no root)
    lab       up, down, attach, exec, restart, verify
    status    status
    traffic   traffic, stats, fuzz
    fault     fault KIND ... (one per fault kind of twin.faults.KINDS: link-down,
              link-loss, switch-down, blackhole, bgp-reset, ...) | link-up | clear |
              list | log
    engine    engine start | stop | status, images build | status
    drill     drill list | run | all
    blind     drill blind | answer | reveal | scores   (on the drill group)
    probe     probe                            (continuous localization, root)
    routes    routes check | diff | export     (an operator's own tables; no root)
    telemetry telemetry up | down | status, top (live metrics, Prometheus; root)
    grafana   grafana dashboards | push        (dashboards generated from the fabric)
    ci        ci                               (a CI job: routes check, up, verify, drills,
                                                down, reports; root)

Importing twin.cli imports none of the command modules: the root group lists them
from twin.cli.commands and imports one when its command is asked for.
"""

from twin.cli.base import main

__all__ = ["main"]
