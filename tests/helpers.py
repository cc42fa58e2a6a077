"""Shared test helpers."""

from __future__ import annotations

import os
from pathlib import Path

GOLDEN = Path(__file__).resolve().parent / "golden"


def golden(name: str, actual: str) -> None:
    """Compare with tests/golden/<name>; rewrite it when UPDATE_GOLDEN=1."""
    path = GOLDEN / name
    if os.environ.get("UPDATE_GOLDEN") == "1":
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(actual)
        return
    assert path.exists(), f"missing golden file {path}; run with UPDATE_GOLDEN=1"
    expected = path.read_text()
    assert actual == expected, f"output differs from {path} (UPDATE_GOLDEN=1 to accept)"


# The keys containerlab's topology schema defines (containerlab.dev/manual/topo-def-file,
# /manual/nodes; its JSON schema sets additionalProperties false for nodes). A rendered
# topology may use these and nothing else, or a user's `containerlab deploy` rejects it.
CLAB_TOP_KEYS = {"name", "prefix", "mgmt", "topology", "settings"}
CLAB_TOPOLOGY_KEYS = {"nodes", "links", "kinds", "defaults", "groups"}
CLAB_NODE_KEYS = {
    "kind", "image", "image-pull-policy", "license", "type", "group", "startup-config",
    "startup-delay", "enforce-startup-config", "auto-remove", "exec", "binds", "ports", "env",
    "user", "entrypoint", "cmd", "publish", "labels", "runtime", "mgmt-ipv4", "mgmt-ipv6",
    "network-mode", "cpu", "memory", "cpu-set", "extras", "config", "stages", "dns",
    "certificate", "healthcheck",
}
CLAB_BRIEF_LINK_KEYS = {"endpoints", "vars"}
