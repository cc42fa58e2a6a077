"""The contract every route-table format keeps, and the registry of them.

A format module (iproute2, sonic, ...) subclasses `Format` (an ABC: `file_for`,
`parse`, `render` and `node_of` are each format's own) and decorates it with
`@register` (FORMATS is a twin.registry.Registry: a name it has not is an UnknownName
listing the formats); the package (twin.routes.formats) imports each one so it registers.
The contract lives here, not in the package, so a format imports it without
importing the package that imports the format (tests/unit/test_layers.py: no cycle).
"""

from __future__ import annotations

import ipaddress
from abc import ABC, abstractmethod
from typing import ClassVar

from twin.fabric import usid
from twin.fabric.model import Fabric, Tier
from twin.registry import Registry
from twin.routes.tables import NodeTables

WHAT = "route tables"


class Format(ABC):
    """One way tables are written. Subclasses register themselves in FORMATS."""

    name: ClassVar[str]
    summary: ClassVar[str]  # one line for --help

    @abstractmethod
    def file_for(self, node: str) -> str:
        """The node's file, relative to the tables' directory."""

    @abstractmethod
    def parse(self, text: str, node: str, file: str, fabric: Fabric) -> NodeTables:
        """One node's tables. Raises SpecError(file, problems, WHAT) naming every
        entry it cannot read: where (line, entry or key) and a hint."""

    def beside(self, node: str) -> tuple[str, ...]:
        """Files the node's tables may refer to, beside its own (iproute2: nexthop
        objects and rules), read when present and handed to `parse_beside`."""
        return ()

    def parse_beside(self, text: str, beside: dict[str, str], node: str, file: str,
                     fabric: Fabric) -> NodeTables:
        """`parse`, with the texts of the files of `beside` that are present, by name."""
        return self.parse(text, node, file, fabric)

    @abstractmethod
    def render(self, tables: NodeTables, fabric: Fabric) -> str:
        """One node's file, which `parse` reads back to the same routes and SIDs."""

    @abstractmethod
    def node_of(self, rel: str) -> str | None:
        """The node a file of this format is for (None: not a file of this format)."""


class FileInNodeDir(Format):
    """A format whose node file is `<node>/<file>` (a switch's config in a directory
    named after it: SONiC's config_db.json, FRR's frr.conf, NVUE's startup.yaml)."""

    file: ClassVar[str]

    def file_for(self, node: str) -> str:
        return f"{node}/{self.file}"

    def node_of(self, rel: str) -> str | None:
        parts = rel.split("/")
        return parts[0] if len(parts) == 2 and parts[1] == self.file else None


def decap_port(prefix: ipaddress.IPv6Network, node: str, fabric: Fabric | None) -> str:
    """The port of host `node` whose uSID owns `prefix` (where a decap SID written without
    a port, as config formats write it, belongs); "" when none does."""
    if fabric is None or not fabric.has_node(node) or fabric.node(node).tier is not Tier.HOST:
        return ""
    host = fabric.node(node)
    for p in fabric.nic_planes:
        if prefix == usid.locator(fabric.spec.block, usid.port(p, host.index)):
            return fabric.host_port(p)
    return ""


# Every format by name, as its one instance, in the order they register.
FORMATS: Registry[Format] = Registry("route-table format", make=lambda cls: cls(),
                                     sort=False)
register = FORMATS.register
get = FORMATS.get  # a miss: UnknownName (a UsageError) listing the formats
