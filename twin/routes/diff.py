"""`twin routes diff`: loaded tables against twin's plan, node by node (pure).

Per node, every route and local SID that is missing (planned, not loaded), extra
(loaded, not planned) or different (the same prefix, another next hop, device,
type or behaviour), each with the paths it breaks: the failing paths
`twin routes check` blames on that node and that item, or on the planned item
the node lacks. A difference no failing path is blamed on is shown as "no path
affected" (an extra route nothing reaches, a second way to the same place).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from twin.fabric.plan import LocalSid, Plan, Route
from twin.routes.check import CheckReport, WalkResult
from twin.routes.tables import Dropping, NodeTables, Tables, from_plan, key

MISSING, EXTRA, DIFFERENT = "missing", "extra", "different"


@dataclass(frozen=True)
class Difference:
    node: str
    change: str  # MISSING | EXTRA | DIFFERENT
    planned: str  # tables.key of the plan's item ("" for extra)
    loaded: str  # tables.key of the loaded item ("" for missing)
    origin: str = ""  # where the loaded item was read
    paths: tuple[WalkResult, ...] = ()  # the failing paths blamed on it

    def text(self) -> str:
        where = f" ({self.origin})" if self.origin else ""
        what = {MISSING: f"missing {self.planned}",
                EXTRA: f"extra {self.loaded}{where}",
                DIFFERENT: f"different {self.loaded}{where}, planned {self.planned}"}
        return what[self.change]

    def effect(self) -> str:
        if not self.paths:
            return "no path affected"
        first = self.paths[0]
        more = f" and {len(self.paths) - 1} more" if len(self.paths) > 1 else ""
        return f"breaks {len(self.paths)} path{'s' if len(self.paths) != 1 else ''}: " \
               f"{first.path.label} {first.outcome}{more}"

    def to_dict(self) -> dict:
        return {"node": self.node, "change": self.change, "planned": self.planned,
                "loaded": self.loaded, "origin": self.origin, "effect": self.effect(),
                "paths": [p.path.label for p in self.paths]}


@dataclass
class DiffReport:
    fabric: str
    source: str
    differences: list[Difference] = field(default_factory=list)

    @property
    def same(self) -> bool:
        return not self.differences

    def by_node(self) -> dict[str, list[Difference]]:
        out: dict[str, list[Difference]] = {}
        for d in self.differences:
            out.setdefault(d.node, []).append(d)
        return out

    def to_dict(self) -> dict:
        return {"fabric": self.fabric, "source": self.source, "same": self.same,
                "nodes": {n: [d.to_dict() for d in ds] for n, ds in self.by_node().items()}}


def _items(t: NodeTables) -> dict[str, Route | LocalSid | Dropping]:
    """A node's items by the prefix they act on (a route and a SID of one prefix: both)."""
    out: dict[str, Route | LocalSid | Dropping] = {}
    for r in t.routes:
        out[f"route {r.dst}"] = r
    for s in [*t.sids, *t.dropping]:
        out[f"sid {s.prefix}"] = s
    return out


def _same(a, b) -> bool:
    return type(a) is type(b) and key(a) == key(b)


def diff(plan: Plan, tables: Tables, report: CheckReport) -> DiffReport:
    """Every difference of `tables` from `plan`, with the failing paths of `report`
    (the check of those tables) blamed on each."""
    planned_tables = from_plan(plan)
    blamed: dict[tuple[str, str], list[WalkResult]] = {}
    for r in report.failing:
        for item in {r.item, *r.planned} - {""}:
            blamed.setdefault((r.node, item), []).append(r)
    out = DiffReport(plan.fabric.name, tables.source)
    for name in plan.nodes:
        want, got, t = _items(planned_tables[name]), _items(tables[name]), tables[name]
        for slot in sorted(set(want) | set(got)):
            a, b = want.get(slot), got.get(slot)
            if a is not None and b is not None and _same(a, b):
                continue
            change = MISSING if b is None else EXTRA if a is None else DIFFERENT
            ka, kb = (key(a) if a else ""), (key(b) if b else "")
            paths = {id(p): p for k in (ka, kb) if k for p in blamed.get((name, k), ())}
            out.differences.append(Difference(name, change, ka, kb, str(t.origin(b) or "")
                                              if b else "", tuple(paths.values())))
    return out
