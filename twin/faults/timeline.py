"""A timeline of faults: each put in force, and taken out again, at its offset after the
traffic's first write, by a thread, with when each change began and was done on the
figures' clock (twin.runtime.clock). Drills (twin.chaos.runner) and `twin traffic --cut`
(twin.cli.traffic) schedule their faults on it; it is the only fault scheduler.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class AppliedFault:
    """One fault as the timeline applied it."""

    kind: str
    target: str
    at_ns: int  # its kernel change began (recorded on disk before; in force by applied_ns)
    links: frozenset[str]  # link ids it takes out
    nodes: frozenset[str] = frozenset()  # switches it takes out whole
    reverted_ns: int | None = None
    step: str = ""  # the timeline step it came from
    applied_ns: int | None = None  # the apply call returned
    uncertainty_ns: int | None = None  # at_ns is right to within this (twin.runtime.clock)
    named_by_links: bool = False  # a naming of any of its links finds it (route-corrupt)
    # the revert began (a link is up again at the start of a revert that then re-programs
    # its nodes for a while); None: as reverted_ns
    revert_began_ns: int | None = None

    @property
    def mended_ns(self) -> int | None:
        """When its revert began changing the kernel (None: never reverted)."""
        return self.reverted_ns if self.revert_began_ns is None else self.revert_began_ns

    def crosses(self, path_links, path_hops) -> bool:
        return bool(self.links.intersection(path_links) or self.nodes.intersection(path_hops))
