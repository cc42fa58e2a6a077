"""The table of `twin`'s commands: each name, the modules that define it and its short
help, so that `twin --help`, `twin size` and a mistyped command import only what they
use (issue 40). The root group (twin.cli.base.TwinGroup) lists the commands from here
and imports a command's modules the first time it is asked for it.

A module registers its commands on the root group as before (`@main.command()`); a
new command is added here too, or tests/unit/test_cli_lazy.py fails. HELP is the
first paragraph of the command's docstring: `twin --help` shortens it exactly as
click shortens the command's own.
"""

from __future__ import annotations

# name: (modules to import, in order; the first paragraph of its help)
COMMANDS: dict[str, tuple[tuple[str, ...], str]] = {
    "attach": (("twin.cli.lab",),
               "Take on a fabric deployed elsewhere, to verify it and break it."),
    "ci": (("twin.cli.ci",),
           "Check, build, verify, drill and remove a lab in one go, with reports for a CI "
           "job."),
    "down": (("twin.cli.lab",), "Remove a lab: its nodes, links, processes, faults and state."),
    # `twin drill blind | answer | reveal | scores` are twin.cli.blind's, on this group
    "drill": (("twin.cli.drill", "twin.cli.blind"),
              "Timed fault scenarios with expectations, and trainee drills."),
    "engine": (("twin.cli.engine",),
               "The Docker engine the container runtimes use. twin starts one only when "
               "none answers, always as `dockerd --bridge=none --iptables=false`."),
    "exec": (("twin.cli.lab",), "Run a command inside a node: twin exec r0h0 -- ip -6 route"),
    "fault": (("twin.cli.fault",),
              "Inject and revert faults. Every fault is recorded before it is applied, so "
              "`twin fault clear` (or `twin down`) undoes it even after a crash."),
    "fuzz": (("twin.cli.traffic",),
             "Send a host's MRC endpoint hostile packets; a JSON verdict."),
    "grafana": (("twin.cli.grafana",),
                "Grafana dashboards for a lab, generated from its fabric: nobody edits them."),
    "images": (("twin.cli.engine",), "Node images: mrc-twin/router and mrc-twin/host."),
    "paths": (("twin.cli.fabric",), "List the source-routed paths from host SRC to host DST."),
    "plan": (("twin.cli.fabric",),
             "Print the route plan: every node's static routes and local SIDs."),
    "probe": (("twin.cli.probe",),
              "Localize faults as MRC's Clustermapper does: loopback probes from every host "
              "port (host>T0>host, and host>T0>T1>T0>host for each T1), over and over, and "
              "name the failed link or switch, silent ones too (blackhole, sid-loss, "
              "route-corrupt)."),
    "render": (("twin.cli.fabric",),
               "Write the containerlab topology and per-node configs under lab/build/<lab>/."),
    "restart": (("twin.cli.lab",),
                "Reboot one node, as a switch reboot: it comes back with no links and no "
                "routes, so twin wires its links again and re-programs it and its peers. "
                "Faults in force on its links are applied again."),
    "routes": (("twin.cli.routes",),
               "Check an operator's own SRv6 route tables against a fabric, without a lab."),
    "size": (("twin.cli.fabric",),
             "Full-scale calculator: two-tier multi-plane vs single-plane three-tier."),
    "stats": (("twin.cli.traffic",),
              "Counters of the hosts' MRC endpoints (all hosts, or HOST)."),
    "status": (("twin.cli.status",),
               "Show the labs that are up and the state of their nodes."),
    "telemetry": (("twin.cli.telemetry",), "Live metrics of a lab in a real Prometheus."),
    "top": (("twin.cli.telemetry",),
            "A live view of the lab for people without Grafana: goodput per plane, the "
            "busiest links (on a shaped fabric with their virtual queues, CE marks, trims "
            "and drops per second), EV states per host, faults in force. Ctrl-C quits."),
    "traffic": (("twin.cli.traffic",),
                "Move verified bytes through the hosts' MRC endpoints."),
    "up": (("twin.cli.lab",),
           "Build a lab: create nodes, wire links, program every route and local SID, start "
           "the hosts' MRC endpoints."),
    "verify": (("twin.cli.lab",),
               "Prove the running lab matches its plan; exit 0 only if all passes."),
}
