"""An operator's route tables, loaded: what each node holds, as twin's plan says it.

A directory of tables (one file per node, in one of twin.routes.formats) loads
into `Tables`: per node, its static routes and its local SIDs in the plan's own
terms (twin.fabric.plan's `Route` and `LocalSid`), so the lab installs them
the way it installs a plan, and the check walks them the way a packet would.

Each item remembers where it came from (`Origin`: file and line, entry or key),
so every finding names the file a person edits. What a table holds that twin
cannot install, but a kernel or a switch would (a classic End, End.DX6, End.DT6
into the main table), is kept as `Dropping`: the check walks packets into it
and says why they die there, and `twin up --routes` refuses it.

Interfaces, addresses and sysctls are not in an operator's tables: they are the
addressing plan's (README, "Addressing"), and `apply` keeps them.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace

from twin.fabric.plan import DECAP, UN, UNICAST, LocalSid, Plan, Route


@dataclass(frozen=True)
class Origin:
    """Where an item was read: a file (relative to the tables' directory) and a place
    in it ("line 12", "entry 3", "SRV6_MY_SIDS|loc1|fcbb:bb00:100::/48")."""

    file: str
    where: str

    def __str__(self) -> str:
        return f"{self.file} {self.where}" if self.where else self.file


@dataclass(frozen=True)
class Dropping:
    """A local SID twin reads and walks, but does not install: packets matching it die.

    `what` is how the table wrote it; `why` says why a packet of this fabric dies
    there (the fabric carries uSIDs in the destination and no SRH)."""

    prefix: str
    what: str
    why: str


@dataclass(frozen=True)
class NodeTables:
    node: str
    routes: tuple[Route, ...] = ()
    sids: tuple[LocalSid, ...] = ()
    dropping: tuple[Dropping, ...] = ()
    origins: dict[str, Origin] = field(default_factory=dict, compare=False, hash=False)

    def origin(self, item: Route | LocalSid | Dropping) -> Origin | None:
        return self.origins.get(key(item))


def key(item: Route | LocalSid | Dropping) -> str:
    """How an item is named in `origins`, findings and diffs."""
    if isinstance(item, Route):
        return f"route {item.describe()}"
    if isinstance(item, LocalSid):
        return f"SID {item.describe()}"
    return f"SID {item.prefix} {item.what}"


@dataclass(frozen=True)
class Tables:
    source: str  # the directory, as given
    format: str  # twin.routes.formats' name
    nodes: dict[str, NodeTables]

    def __getitem__(self, node: str) -> NodeTables:
        return self.nodes[node]

    def installable_problems(self) -> list[str]:
        """What `twin up --routes` cannot install, one line each (empty: all of it)."""
        out = []
        for t in self.nodes.values():
            for d in t.dropping:
                out.append(f"{t.node}: {d.prefix} {d.what} ({t.origin(d)}): twin installs "
                           "uN and End.DT6 table local only")
        return out


def from_plan(plan: Plan, source: str = "plan", fmt: str = "plan") -> Tables:
    """The plan's own tables: what twin would have written (the reference)."""
    return Tables(source, fmt, {name: NodeTables(name, n.routes, n.sids)
                                for name, n in plan.nodes.items()})


def apply(plan: Plan, tables: Tables) -> Plan:
    """The plan with every node's routes and local SIDs replaced by the loaded ones.
    Interfaces, addresses and sysctls stay the addressing plan's."""
    nodes = {}
    for name, node in plan.nodes.items():
        t = tables.nodes.get(name)
        nodes[name] = node if t is None else replace(node, routes=t.routes, sids=t.sids)
    return Plan(plan.fabric, nodes)


def to_dict(tables: Tables) -> dict:
    """The tables as JSON data (a lab keeps the ones it was brought up from)."""
    return {"source": tables.source, "format": tables.format, "nodes": {
        name: {"routes": [asdict(r) for r in t.routes], "sids": [asdict(s) for s in t.sids],
               "dropping": [asdict(d) for d in t.dropping],
               "origins": {k: [o.file, o.where] for k, o in t.origins.items()}}
        for name, t in tables.nodes.items()}}


def from_dict(data: dict) -> Tables:
    return Tables(data["source"], data["format"], {
        name: NodeTables(name, tuple(Route(**r) for r in t["routes"]),
                         tuple(LocalSid(**s) for s in t["sids"]),
                         tuple(Dropping(**d) for d in t["dropping"]),
                         {k: Origin(*o) for k, o in t["origins"].items()})
        for name, t in data["nodes"].items()})


def refusals(tables: Tables, plan: Plan, dataplane: str) -> list[str]:
    """Why a lab cannot be programmed from these tables, one line each (empty: it can):
    what twin does not install, routes the kernel refuses, SIDs the data plane cannot
    hold. Everything else, however wrong, is installed as written, for `twin verify`
    and the drills to show what it does."""
    out = tables.installable_problems()
    for name, t in tables.nodes.items():
        devs = {i.name for i in plan.nodes[name].interfaces}
        for r in t.routes:
            if r.type == UNICAST and r.dev not in devs:
                out.append(f"{name}: {key(r)} ({t.origin(r)}): {name} has no device {r.dev} "
                           "(the kernel refuses the route)")
        for s in t.sids:
            if s.behavior == DECAP and s.dev and s.dev not in devs:
                out.append(f"{name}: {key(s)} ({t.origin(s)}): {name} has no device {s.dev}")
            if dataplane == "ebpf" and (not s.prefix.endswith("/48") or (
                    s.behavior == UN and (s.block_len, s.usid_len) != (32, 16))):
                out.append(f"{name}: {key(s)} ({t.origin(s)}): the ebpf data plane holds "
                           "F3216 uSIDs on /48 prefixes only; use --dataplane seg6local")
    return out
