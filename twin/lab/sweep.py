"""What twin made on this machine, and whose it is: the inventory behind
`twin down --all` (this run directory's) and `twin down --stray` (nobody's).

    inventory   every runtime's resources (namespaces, containers) plus every
                process carrying an owner (the MRC endpoints), each with the
                owner it carries (twin.owner)
    leftovers   resources this run directory owns that no lab of it knows
                (a `twin up` killed before it could roll back, a lost lab.json)
    stray       resources whose owner is gone: its run directory no longer
                exists or does not know the lab's id
    ownerless   resources that carry no owner (a twin from before owners, or
                not twin's): removed only when asked for by name of the option
    others      the live labs of other run directories: listed, never touched
"""

from __future__ import annotations

from dataclasses import dataclass

from twin.owner import owned_processes
from twin.runtime import RUNTIMES
from twin.runtime.base import Resource
from twin.runtime.netns import kill_all


@dataclass(frozen=True)
class Stray:
    resource: Resource
    why: str

    def to_dict(self) -> dict:
        return {**self.resource.to_dict(), "why": self.why}


def inventory() -> list[Resource]:
    found = []
    for _, cls in sorted(RUNTIMES.items()):
        if cls.unavailable_for_cleanup() is None:
            found.extend(cls.inventory())
    found.extend(Resource("host", "process", str(pid), owner)
                 for pid, owner in sorted(owned_processes().items()))
    return found


def leftovers(found: list[Resource] | None = None) -> list[Resource]:
    return [r for r in (inventory() if found is None else found)
            if r.owner is not None and r.owner.mine and r.owner.stray_because()]


def stray(found: list[Resource] | None = None, ownerless: bool = False) -> list[Stray]:
    """Resources whose owner is gone; with `ownerless`, also those that carry none
    (a twin from before owners made them, or not twin: only on request)."""
    out = []
    for r in inventory() if found is None else found:
        if r.owner is None:
            if ownerless:
                out.append(Stray(r, "carries no owner (made by a twin from before owners, "
                                    "or not by twin)"))
        elif why := r.owner.stray_because():
            out.append(Stray(r, why))
    return out


def ownerless(found: list[Resource] | None = None) -> list[Resource]:
    return [r for r in (inventory() if found is None else found) if r.owner is None]


def others(found: list[Resource] | None = None) -> list[Resource]:
    return [r for r in (inventory() if found is None else found)
            if r.owner is not None and not r.owner.mine and r.owner.stray_because() is None]


def remove(resources: list[Resource]) -> None:
    """Processes first (so nothing respawns into a namespace), then each runtime's."""
    kill_all([int(r.name) for r in resources if r.kind == "process"])
    by_runtime: dict[str, list[Resource]] = {}
    for r in resources:
        if r.kind != "process":
            by_runtime.setdefault(r.runtime, []).append(r)
    for name, group in sorted(by_runtime.items()):
        RUNTIMES[name].remove_resources(group)
