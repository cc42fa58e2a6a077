"""The lab: a fabric spec brought to life on a runtime, and everything done to it.

    compile   spec -> model -> plan -> render          (pure; twin.lab.compile)
    pipeline  up, restart_node: the phases in order     (twin.lab.pipeline)
    phases    create, wire, configure, carrier, endpoints, verify
    attach    a running lab found again from its state on disk
    adopt     `twin attach`: a fabric another orchestrator deployed, taken on as a lab

`from twin import lab as L` gives the whole surface: L.up, L.attach, L.restart_node ...
Restarting a node with its faults, and removing a lab, join the lab with faults and
telemetry: they are one layer up, in twin.lifecycle.
"""

from twin.lab import sweep
from twin.lab.adopt import adopt
from twin.lab.attach import Attached, attach, resolve_lab, status
from twin.lab.compile import (
    Compiled,
    build_root,
    compile_loaded,
    compile_spec,
    fabrics_dir,
    project_root,
    render_lab,
    require_node,
)
from twin.lab.phases import Phase, Restarted
from twin.lab.pipeline import Up, restart_node, up

__all__ = [
    "Attached", "Compiled", "Phase", "Restarted", "Up", "adopt", "attach", "build_root",
    "compile_loaded", "compile_spec", "fabrics_dir", "project_root", "render_lab",
    "require_node", "resolve_lab", "restart_node", "status", "sweep", "up",
]
