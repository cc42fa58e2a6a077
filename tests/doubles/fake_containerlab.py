"""A test double for the `containerlab` binary, which cannot be installed here.

It holds twin to containerlab's contract, strictly:
  * `deploy -t FILE` accepts only the keys containerlab's topology schema
    defines (tests.helpers.CLAB_*), `kind: linux` nodes, and brief-form links
    whose endpoints name defined nodes, each interface once; anything else
    exits 1 with containerlab-like errors, as the real schema check would;
  * it names containers `<prefix>-<lab>-<node>` (prefix `clab` by default),
    labels them the way containerlab does (containerlab, clab-node-name,
    clab-node-kind, clab-node-group, clab-topo-file, plus the node's labels),
    resolves binds relative to the topology file, honours `network-mode`;
  * it creates every link as a veth pair with containerlab's default MTU 9500
    (twin sets the planned MTU itself);
  * `destroy -t FILE [--cleanup]` removes the lab's containers; `version` prints one.
What it does not do is everything containerlab does for other kinds.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import docker
import yaml

from tests.helpers import CLAB_BRIEF_LINK_KEYS, CLAB_NODE_KEYS, CLAB_TOP_KEYS, CLAB_TOPOLOGY_KEYS

DEFAULT_MTU = 9500


def fail(msg: str) -> None:
    print(f"Error: {msg}", file=sys.stderr)
    sys.exit(1)


def validate(topo: dict) -> None:
    for key in topo:
        if key not in CLAB_TOP_KEYS:
            fail(f"topology file: additional property {key!r} is not allowed")
    if not isinstance(topo.get("name"), str):
        fail("topology file: 'name' is required")
    body = topo.get("topology") or {}
    for key in body:
        if key not in CLAB_TOPOLOGY_KEYS:
            fail(f"topology: additional property {key!r} is not allowed")
    nodes = body.get("nodes") or {}
    for name, node in nodes.items():
        for key in node or {}:
            if key not in CLAB_NODE_KEYS:
                fail(f"nodes.{name}: additional property {key!r} is not allowed")
        if (node or {}).get("kind") != "linux":
            fail(f"nodes.{name}: this double only knows kind linux")
    seen = set()
    for i, link in enumerate(body.get("links") or []):
        for key in link:
            if key not in CLAB_BRIEF_LINK_KEYS:
                fail(f"links[{i}]: additional property {key!r} is not allowed")
        eps = link.get("endpoints") or []
        if len(eps) != 2:
            fail(f"links[{i}]: a veth link has two endpoints")
        for ep in eps:
            node, sep, ifname = ep.partition(":")
            if not sep or node not in nodes or not ifname:
                fail(f"links[{i}]: endpoint {ep!r} does not name a node:interface")
            if ep in seen:
                fail(f"links[{i}]: endpoint {ep!r} is used twice")
            seen.add(ep)


def deploy(path: Path) -> None:
    topo = yaml.safe_load(path.read_text())
    validate(topo)
    lab, prefix = topo["name"], topo.get("prefix", "clab")
    client = docker.from_env()
    pids = {}
    for name, node in topo["topology"]["nodes"].items():
        volumes = {}
        for bind in node.get("binds", []):
            src, dst, *mode = bind.split(":")
            full = (path.parent / src).resolve() if not src.startswith("/") else Path(src)
            volumes[str(full)] = {"bind": dst, "mode": mode[0] if mode else "rw"}
        labels = {str(k): str(v) for k, v in (node.get("labels") or {}).items()}
        labels.update({"containerlab": lab, "clab-node-name": name, "clab-node-kind": "linux",
                       "clab-node-group": node.get("group", ""),
                       "clab-topo-file": str(path.resolve())})
        c = client.containers.run(node["image"], name=f"{prefix}-{lab}-{name}", hostname=name,
                                  labels=labels, network_mode=node.get("network-mode", "bridge"),
                                  volumes=volumes, detach=True, init=True,
                                  sysctls={"net.ipv6.conf.all.disable_ipv6": "0"})
        c.reload()
        pids[name] = c.attrs["State"]["Pid"]
    lines = []
    for link in topo["topology"].get("links") or []:
        (an, ai), (bn, bi) = (ep.split(":") for ep in link["endpoints"])
        lines.append(f"link add {ai} netns {pids[an]} mtu {DEFAULT_MTU} type veth "
                     f"peer name {bi} netns {pids[bn]} mtu {DEFAULT_MTU}")
    if lines:
        subprocess.run(["ip", "-batch", "-"], input="\n".join(lines) + "\n", text=True,
                       check=True)
    print(f"deployed {len(pids)} nodes of lab {lab}")


def destroy(path: Path) -> None:
    lab = yaml.safe_load(path.read_text())["name"]
    client = docker.from_env()
    for c in client.containers.list(all=True, filters={"label": f"containerlab={lab}"}):
        c.remove(force=True)
    print(f"destroyed lab {lab}")


def main(argv: list[str]) -> None:
    if argv[:1] == ["version"]:
        print("version: 0.0.0-fake (mrc-twin test double)")
        return
    if len(argv) < 3 or argv[0] not in ("deploy", "destroy") or "-t" not in argv:
        fail("usage: containerlab deploy|destroy -t FILE")
    path = Path(argv[argv.index("-t") + 1])
    (deploy if argv[0] == "deploy" else destroy)(path)


if __name__ == "__main__":
    main(sys.argv[1:])
