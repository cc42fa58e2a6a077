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

from dataclasses import dataclass, field, replace

from twin.fabric.plan import LocalSid, Plan, Route


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
