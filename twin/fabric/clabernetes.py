"""A rendered lab as Kubernetes objects for clabernetes (pure): one fabric, many machines.

clabernetes (github.com/srl-labs/clabernetes, API `clabernetes.containerlab.dev/v1alpha1`)
runs a containerlab topology in a Kubernetes cluster. Its controller splits the topology
into one-node sub-topologies and runs each in its own Deployment. The pod is a "launcher":
a Docker engine of its own, with containerlab deploying that one node in /clabernetes.
Every link between two pods becomes a point-to-point VXLAN tunnel between the launchers,
and the scheduler spreads the pods over the cluster's machines. This module writes what
`kubectl` applies for that, from the files `render()` writes for one machine:

    ConfigMap <lab>-code[-<i>]      the twin code nodes run, split to fit (below)
    ConfigMap <lab>-<node>-config   config/<node>/: node.json, routes.batch, sysctl.conf, ...
    Topology  <lab>                 spec.definition.containerlab: the rendered <lab>.clab.yml
                                    spec.deployment.filesFromConfigMap: node -> its files

The ConfigMaps come first in the list, so that `kubectl apply -f` creates them before the
Topology whose pods mount them. Every object carries the label `mrc-twin.lab: <lab>`.

How a node gets its files. The topology is the one `render()` writes, unchanged: clabernetes
takes a containerlab topology as it is. Its binds are relative: `config/<node>:/etc/mrc-twin:ro`
and `code/twin:/opt/mrc-twin/twin:ro`. A launcher runs containerlab in /clabernetes, so they
name /clabernetes/config/<node> and /clabernetes/code/twin inside the pod. clabernetes
mounts a ConfigMap key at a `filePath` relative to /clabernetes. So each file of
config/<node>/ is mounted at exactly the path the bind reads, and the node sees it at
/etc/mrc-twin/<file>. `topology_resource` checks that every bind of every node names files
its pod is given.

What replaces the code bind. On one machine every node bind-mounts the checkout's twin/
package, so a code change needs no image rebuild. A cluster has no checkout, and twin's
images carry no code. The code travels as ConfigMaps too:

- The topology is rendered with `code_dir=CODE_DIR` ("code"), so its bind reads
  `code/twin:...`.
- Only the modules a node runs are sent (`NODE_MODULES`). A host runs `twin.mrc.endpoint`,
  the daemon twin/endpoints.py starts, so it gets that module and every twin module the
  module imports, anywhere in its source. The imports are found by reading the import
  statements (`code_closure`): about 17 files and 200 KB today. Every node runs its node
  program at boot (twin.node.runner and, on the ebpf data plane, twin.node.ebpf: all
  standard library, about 10 files and 60 KB), so a switch gets those. The endpoint's
  compiled data path (twin/mrc/_fastpath, a build of this machine's) is not sent: the
  hosts run the pure-Python one, and their endpoint log says so.
- The files are packed into as few ConfigMaps as fit the API server's limit of 1 MiB of
  keys and values per ConfigMap (`CONFIGMAP_LIMIT`). One ConfigMap is named <lab>-code.
  When the files are split, the ConfigMaps are <lab>-code-0, <lab>-code-1, ...
- The mounts are listed once per node in the Topology, and that list is most of its size.
  A switch's short list keeps mrc-8p-256 (320 nodes) near 0.5 MB. The object must stay
  well under etcd's 1.5 MiB, because clabernetes adds every node's sub-topology to its
  status (`TOPOLOGY_LIMIT`).

A code change then needs a new render and apply, but no image build. The nodes' pods must
then be restarted, because a file mounted from one key of a ConfigMap does not follow later
changes to that ConfigMap. A ConfigMap key cannot
hold a `/`, so the key of twin/mrc/endpoint.py is `twin.mrc.endpoint.py`. Its filePath keeps
the real path: code/twin/mrc/endpoint.py.

Names. Kubernetes object names are DNS-1123: a Topology and a namespace are labels
(lowercase, digits and `-`, at most 63 characters), a ConfigMap a subdomain (at most 253).
ConfigMap keys match `[-._a-zA-Z0-9]+`. The Topology asks for `naming: prefixed`, so each
node's Deployment is <lab>-<node> whatever the cluster's global setting. Each node's tunnel
Service is <lab>-<node>-vx, which must be a DNS label, so it is checked here. Each launcher
names its end of a link `<node>-<interface>` (definitioncontainerlab.go in clabernetes).
That is a Linux interface name, 15 characters at most, and it is checked here.

The rest of the spec. Nodes have no management services (network-mode none), so nothing is
exposed and no status probe is set up. Links use VXLAN, clabernetes' default.
"""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path, PurePosixPath

import yaml

from twin.errors import UsageError
from twin.fabric.plan import Plan
from twin.fabric.render import LABEL

API_VERSION = "clabernetes.containerlab.dev/v1alpha1"
DEFAULT_NAMESPACE = "mrc-twin"
CODE_DIR = "code"  # render(plan, code_dir=CODE_DIR): the checkout, as a launcher pod sees it
# What twin runs inside a node, by tier: every node runs its node program at boot (the
# runner, and the eBPF data plane's programs and counters), a host its endpoint daemon too.
NODE_CODE = ("twin.node.runner", "twin.node.ebpf.__main__")
NODE_MODULES = {"host": ("twin.mrc.endpoint", *NODE_CODE), "t0": NODE_CODE, "t1": NODE_CODE}
BARE_PACKAGE = ("twin",)
CONFIGMAP_LIMIT = 1024 * 1024  # bytes of keys + values the API server takes in one ConfigMap
# The Topology as written, in JSON bytes: etcd stores 1.5 MiB an object (its default), and the
# controller adds every node's sub-topology to the status.
TOPOLOGY_LIMIT = 1024 * 1024
IFNAMSIZ = 15  # longest Linux interface name
LAB_LABEL = f"{LABEL}.lab"

DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
CONFIGMAP_KEY = re.compile(r"^[-._a-zA-Z0-9]+$")


# -- the objects ---------------------------------------------------------------------------


def topology_resource(plan: Plan, files: dict[str, str], namespace: str = DEFAULT_NAMESPACE,
                      code: dict[str, str] | None = None,
                      limit: int = CONFIGMAP_LIMIT) -> list[dict]:
    """The ConfigMaps and the Topology that run `plan`'s lab under clabernetes.

    `files` is `render(plan, code_dir=CODE_DIR)`; `code` is the checkout's files by path
    (`read_code`), from which the modules nodes run are taken. Raises UsageError for a
    name Kubernetes or Linux would refuse, a file too big for a ConfigMap, or a bind that
    no ConfigMap feeds.
    """
    lab = plan.fabric.name
    if not _is_label(namespace):
        raise UsageError(f"--namespace {namespace!r}: a namespace is a DNS-1123 label: "
                         "lowercase letters, digits and '-', at most 63 characters")
    if not _is_label(lab):
        raise UsageError(f"lab {lab!r} cannot name a clabernetes Topology: it must be a "
                         "DNS-1123 label (no trailing '-', at most 63 characters)")
    clab_file = f"{lab}.clab.yml"
    definition = files[clab_file]
    topology = yaml.safe_load(definition)["topology"]
    _check_link_names(lab, topology.get("links", []))

    maps: list[dict] = []
    mounts: dict[str, list[dict]] = {node: [] for node in plan.nodes}

    if code is not None:
        sent = {tier: code_closure(code, modules) for tier, modules in _tier_modules(plan)}
        path_of: dict[str, str] = {}
        for path in sorted({path for chosen in sent.values() for path in chosen}):
            if (key := _code_key(path)) in path_of:
                raise UsageError(f"{path_of[key]} and {path} would share the ConfigMap key "
                                 f"{key}")
            path_of[key] = path
        for name, data in _pack(f"{lab}-code", {k: code[p] for k, p in path_of.items()},
                                limit):
            maps.append(_config_map(name, namespace, lab, data))
            for node, node_plan in plan.nodes.items():
                mounts[node] += [_mount(f"{CODE_DIR}/{path_of[key]}", name, key)
                                 for key in data if path_of[key] in sent[node_plan.tier]]

    for node in plan.nodes:
        prefix = f"config/{node}/"
        own = {rel[len(prefix):]: text for rel, text in files.items() if rel.startswith(prefix)}
        for name, data in _pack(f"{lab}-{node}-config", own, limit):
            maps.append(_config_map(name, namespace, lab, data))
            mounts[node] += [_mount(prefix + key, name, key) for key in data]

    for node, spec in topology["nodes"].items():
        if not _is_label(f"{lab}-{node}-vx"):
            raise UsageError(f"node {node}: clabernetes would name its tunnel Service "
                             f"{lab}-{node}-vx, which is not a DNS-1123 label of at most 63 "
                             "characters")
        _check_binds(node, spec.get("binds", []), mounts.get(node, []))

    topo = {
        "apiVersion": API_VERSION,
        "kind": "Topology",
        "metadata": {"name": lab, "namespace": namespace, "labels": {LAB_LABEL: lab}},
        "spec": {
            "naming": "prefixed",
            "connectivity": "vxlan",
            "expose": {"disableExpose": True},
            "statusProbes": {"enabled": False},
            "deployment": {"filesFromConfigMap": {
                node: sorted(m, key=lambda x: x["filePath"]) for node, m in mounts.items()}},
            "definition": {"containerlab": definition},
        },
    }
    size = len(json.dumps(topo))
    if size > TOPOLOGY_LIMIT:
        raise UsageError(f"the Topology of {lab} is {size} bytes, more than {TOPOLOGY_LIMIT}: "
                         "etcd would not hold it with the sub-topologies clabernetes "
                         "adds to its status")
    return [*maps, topo]


def _config_map(name: str, namespace: str, lab: str, data: dict[str, str]) -> dict:
    if len(name) > 253 or not DNS1123_SUBDOMAIN.match(name):
        raise UsageError(f"ConfigMap name {name!r} is not a DNS-1123 subdomain")
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": namespace, "labels": {LAB_LABEL: lab}},
            "data": data}


def _mount(file_path: str, config_map: str, key: str) -> dict:
    return {"filePath": file_path, "configMapName": config_map, "configMapPath": key,
            "mode": "read"}


def _pack(base: str, data: dict[str, str], limit: int) -> list[tuple[str, dict[str, str]]]:
    """`data` in key order, cut into ConfigMaps of at most `limit` bytes of keys and values:
    [(base, data)] when it fits in one, else base-0, base-1, ..."""
    chunks: list[dict[str, str]] = []
    size = limit + 1
    for key in sorted(data):
        if not CONFIGMAP_KEY.match(key) or key.startswith(".."):
            raise UsageError(f"{key!r} cannot be a ConfigMap key (letters, digits, '-', '_', "
                             "'.'; not starting with '..')")
        entry = len(key) + len(data[key].encode())
        if entry > limit:
            raise UsageError(f"{base}: {key} is {entry} bytes, more than a ConfigMap holds "
                             f"({limit}); it cannot be delivered as a ConfigMap")
        if size + entry > limit:
            chunks.append({})
            size = 0
        chunks[-1][key] = data[key]
        size += entry
    if len(chunks) == 1:
        return [(base, chunks[0])]
    return [(f"{base}-{i}", chunk) for i, chunk in enumerate(chunks)]


def _tier_modules(plan: Plan) -> list[tuple[str, tuple[str, ...]]]:
    tiers = sorted({node.tier for node in plan.nodes.values()})
    return [(tier, NODE_MODULES.get(tier, BARE_PACKAGE)) for tier in tiers]


def _code_key(path: str) -> str:
    """twin/mrc/endpoint.py -> twin.mrc.endpoint.py (a ConfigMap key holds no '/')."""
    return path.replace("/", ".")


def _is_label(name: str) -> bool:
    return len(name) <= 63 and bool(DNS1123_LABEL.match(name))


# -- checks ------------------------------------------------------------------------------


def _check_link_names(lab: str, links: list[dict]) -> None:
    for link in links:
        for end in link.get("endpoints", []):
            node, _, ifname = end.partition(":")
            launcher_end = f"{node}-{ifname}"
            if len(launcher_end) > IFNAMSIZ:
                raise UsageError(
                    f"lab {lab}: link end {end} would be {launcher_end!r} on its clabernetes "
                    f"launcher, {len(launcher_end)} characters; Linux allows {IFNAMSIZ}. "
                    "Shorter node names would fit")


def _check_binds(node: str, binds: list[str], mounts: list[dict]) -> None:
    """Every bind's source must be a file or a directory the node's pod is given."""
    given = [m["filePath"] for m in mounts]
    for bind in binds:
        source = bind.split(":", 1)[0]
        if not any(p == source or p.startswith(source.rstrip("/") + "/") for p in given):
            raise UsageError(f"node {node}: bind {bind!r} reads {source}, which no ConfigMap "
                             f"delivers (render with code_dir={CODE_DIR!r}, and pass the code)")


# -- the code nodes run --------------------------------------------------------------------


def code_closure(code: dict[str, str], modules: tuple[str, ...]) -> dict[str, str]:
    """The files of `modules`, their packages and every module of `code` they import.

    `code` maps a path relative to the checkout (twin/mrc/endpoint.py) to its text. An
    import counts wherever it is, inside a function too. Modules not in `code` (the
    standard library, yaml) are left to the node's image.
    """
    where: dict[str, str] = {}
    for path in code:
        p = PurePosixPath(path)
        if p.suffix == ".py":
            parts = p.with_suffix("").parts
            where[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    for module in modules:
        if module not in where:
            raise UsageError(f"no module {module} in the code to send to nodes")
    seen: set[str] = set()
    todo = list(modules)
    while todo:
        module = todo.pop()
        if module in seen or module not in where:
            continue
        seen.add(module)
        if "." in module:
            todo.append(module.rpartition(".")[0])
        todo += _imports(module, where[module], code[where[module]])
    return {where[m]: code[where[m]] for m in sorted(seen)}


def _imports(module: str, path: str, text: str) -> list[str]:
    """Every module name an import statement of `module` may load."""
    package = module if path.endswith("__init__.py") else module.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(text, filename=path)):
        if isinstance(node, ast.Import):
            found += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[:len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, *([base] if base else [])])
            found.append(base)
            found += [f"{base}.{a.name}" for a in node.names]  # `from pkg import module`
    return found


def read_code(package_dir: Path) -> dict[str, str]:
    """The Python files of a package directory (twin/), by path relative to its parent."""
    root = package_dir.parent
    return {str(p.relative_to(root)): p.read_text() for p in sorted(package_dir.rglob("*.py"))
            if "__pycache__" not in p.parts}


# -- the YAML stream -----------------------------------------------------------------------


class _Dumper(yaml.SafeDumper):
    """Multi-line strings (the topology, the files) as literal blocks, readable as files."""


def _represent_str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    return dumper.represent_scalar("tag:yaml.org,2002:str", value,
                                   style="|" if "\n" in value else None)


_Dumper.add_representer(str, _represent_str)


def to_yaml(objects: list[dict]) -> str:
    """The objects as one multi-document YAML stream, for `kubectl apply -f`."""
    head = ""
    topo = next((o for o in objects if o.get("kind") == "Topology"), None)
    if topo is not None:
        meta = topo["metadata"]
        head = (f"# clabernetes Topology {meta['name']} and its ConfigMaps, rendered by "
                "mrc-twin.\n"
                f"# Apply with: kubectl apply --server-side -f <this file>   (namespace "
                f"{meta['namespace']} must exist)\n")
    return head + yaml.dump_all(objects, Dumper=_Dumper, sort_keys=False, explicit_start=True,
                                default_flow_style=False, allow_unicode=True, width=100)
