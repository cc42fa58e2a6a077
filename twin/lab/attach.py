"""A running lab, found again from its state on disk: `attach(lab)`.

Every command after `twin up` starts here. The plan comes from the copy of
the spec taken at `up` (and of the operator's tables, for a lab brought up
`--routes`), so editing either later does not change what a running lab is
checked against.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from twin import dataplane, endpoints
from twin.errors import LabError, SeveralLabs, UsageError
from twin.fabric.model import Fabric, Node
from twin.fabric.plan import Plan
from twin.fabric.spec import parse_spec, with_routing
from twin.lab.compile import ROUTES, Compiled, compile_loaded, require_node, with_tables
from twin.routes import tables
from twin.rundir import read_json, run_root
from twin.runtime import Runtime, get_runtime
from twin.state import LabState, known_labs


@dataclass
class Attached:
    state: LabState
    compiled: Compiled
    runtime: Runtime
    spec_name: str = ""  # the spec's own name, as its file says ("": the lab's)

    @property
    def lab(self) -> str:
        return self.state.lab

    @property
    def fabric_name(self) -> str:
        """The fabric the lab runs, by its spec's own name: the lab's name may be another
        (`twin up mrc-4p --name other`), and the compiled spec carries the lab's."""
        return self.spec_name or self.fabric.spec.name

    @property
    def plan(self) -> Plan:
        return self.compiled.plan

    @property
    def fabric(self) -> Fabric:
        return self.compiled.fabric

    @property
    def dataplane(self) -> dataplane.Dataplane:
        """The data plane the lab's nodes run their local SIDs on (twin.dataplane)."""
        return dataplane.get(self.state.dataplane)

    def node(self, name: str) -> Node:
        return require_node(self.fabric, name)

    def require_whole(self, nodes: list[str] | None = None) -> None:
        """Refuse to work on a lab that is not (or no longer) all there: one still
        coming up, or whose nodes (these, or all) are partly gone."""
        if self.state.phase != "up":
            raise UsageError(f"lab {self.lab} is {self.state.phase}, not up; wait for its "
                             f"`twin up`, or `twin down --lab {self.lab}`")
        wanted = nodes or list(self.plan.nodes)
        present = set(self.runtime.existing(wanted))
        missing = [n for n in wanted if n not in present]
        if missing:
            raise UsageError(f"lab {self.lab} is half down: {len(missing)} of {len(wanted)} "
                             f"nodes are missing ({', '.join(missing[:4])}"
                             f"{' ...' if len(missing) > 4 else ''}); see `twin status "
                             f"--lab {self.lab}`, and `twin down --lab {self.lab}` to remove "
                             "the rest")


    def require_local(self, what: str, why: str) -> None:
        """Refuse, in one line, what needs the nodes on this machine on a lab twin
        reaches only through exec (`twin attach`): what, and why."""
        if self.runtime.attaches:
            raise UsageError(f"{what}: lab {self.lab} is attached ({self.runtime.name}, "
                             f"reached only through exec), and {why}; on it, verify, fault, "
                             "stats, traffic and exec work")


def resolve_lab(lab: str | None) -> str:
    labs = known_labs()
    if lab:
        if lab not in labs:
            hint = f"labs up: {', '.join(labs)}" if labs else "no lab is up"
            raise UsageError(f"lab {lab} is not up ({hint})")
        return lab
    if not labs:
        raise UsageError("no lab is up; start one with `twin up mrc-4p`")
    if len(labs) > 1:
        raise SeveralLabs(labs)
    return labs[0]


def attach(lab: str | None) -> Attached:
    """The running lab's state, its plan (from the spec copy taken at `up`), its runtime."""
    name = resolve_lab(lab)
    state = LabState.load(name)
    if state is None:
        raise LabError(f"lab {name}: state file is unreadable under {run_root() / name}")
    spec_copy = state.dir / "spec.yml"
    spec = parse_spec(spec_copy.read_text(), state.spec_path)
    if state.routing:  # `twin up --routing`: the mode it runs, not the file's
        spec = with_routing(spec, state.routing)
    own = spec.name
    compiled = compile_loaded(state.spec_path, spec, name)  # name: --name
    if state.routes:  # brought up from an operator's tables: they are its plan
        saved = read_json(state.dir / ROUTES, None)
        if saved is None:
            raise LabError(f"lab {name}: {state.dir / ROUTES} (its route tables) is "
                           f"unreadable; `twin down --lab {name}` it and `twin up` again")
        compiled = with_tables(compiled, tables.from_dict(saved))
    return Attached(state, compiled,
                    get_runtime(state.runtime, name, state.build_dir, state.owner), own)


def status(lab: str | None = None) -> list[dict]:
    labs = [resolve_lab(lab)] if lab else known_labs()
    out = []
    for name in labs:
        state = LabState.load(name)
        if state is None:
            continue
        rt = get_runtime(state.runtime, name, state.build_dir, state.owner)
        facts = rt.describe(state.nodes)
        out.append({
            "lab": name,
            "runtime": state.runtime,
            "phase": state.phase,
            "spec": state.spec_path,
            "build_dir": state.build_dir,
            "id": state.id,
            "dataplane": {"name": state.dataplane, "why": state.dataplane_why},
            "routes": state.routes or None,
            "run_dir": state.owner.run_dir,
            "age_s": round(time.time() - state.created, 1),
            "nodes": [{"node": n, **facts[n],
                       "endpoint": endpoints.liveness(rt, n)  # once endpoints started
                       if state.phase == "up" and facts[n].get("state") == "running"
                       else None}
                      for n in state.nodes],
        })
    return out
