"""`twin render --target clabernetes`: the Topology against clabernetes' own CRD schema, the
files each node is given, the names Kubernetes and Linux accept, and a golden copy.

The CRD is bundled under tests/schemas/clabernetes/ (source, commit and version in its
README.md). `crd_validator` turns its OpenAPI v3 schema into a JSON Schema, one rule per
Kubernetes extension, as that README explains.

The golden file is rendered with a small stand-in for the twin code. The real code would
change it with every edit to a module hosts run. The tests that need the real code
(delivery, closure, CLI) take it from the package being tested.
"""

from __future__ import annotations

import copy
import json
import re
import subprocess
import sys
from functools import cache
from pathlib import Path

import jsonschema
import pytest
import yaml
from click.testing import CliRunner

import twin
from tests.helpers import golden
from twin.cli import main
from twin.errors import UsageError
from twin.fabric import clabernetes as K
from twin.fabric.model import build_fabric
from twin.fabric.plan import build_plan
from twin.fabric.render import CODE_MOUNT, CONFIG_MOUNT, render
from twin.fabric.spec import load_spec

ROOT = Path(__file__).resolve().parents[2]
CRD = ROOT / "tests/schemas/clabernetes/clabernetes.containerlab.dev_topologies.yaml"
SERVED = "v1alpha1"

DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
CONFIGMAP_KEY = re.compile(r"^[-._a-zA-Z0-9]+$")

# Enough of the twin package to show the shape of the code ConfigMap in the golden file:
# hosts get the endpoint and what it imports, switches the bare package, nothing else goes.
STAND_IN_CODE = {
    "twin/__init__.py": '"""mrc-twin (a stand-in for the golden file)."""\n',
    "twin/errors.py": "class UsageError(Exception):\n    pass\n",
    "twin/mrc/__init__.py": "",
    "twin/mrc/endpoint.py": "from twin.errors import UsageError\n\n\ndef main():\n"
                            "    from . import wire\n    return wire, UsageError\n",
    "twin/mrc/wire.py": "PORT = 4791\n",
    "twin/cli/__init__.py": "import click\n",
    "twin/node/__init__.py": "",
    "twin/node/runner.py": "def run(program):\n    from twin.node import ebpf\n"
                           "    return ebpf\n",
    "twin/node/ebpf/__init__.py": "from . import bpf\n",
    "twin/node/ebpf/__main__.py": "from . import bpf\n",
    "twin/node/ebpf/bpf.py": "import ctypes\n",
}


# -- what is rendered ----------------------------------------------------------------------


@cache
def plan_of(name: str):
    return build_plan(build_fabric(load_spec(ROOT / f"lab/fabrics/{name}.yml")))


@cache
def files_of(name: str) -> dict[str, str]:
    return render(plan_of(name), "ebpf", K.CODE_DIR)


@cache
def real_code() -> dict[str, str]:
    return K.read_code(Path(twin.__file__).resolve().parent)


def objects_of(name: str, **kw) -> list[dict]:
    return K.topology_resource(plan_of(name), files_of(name), code=real_code(), **kw)


def topology(objects: list[dict]) -> dict:
    (topo,) = [o for o in objects if o["kind"] == "Topology"]
    return topo


def config_maps(objects: list[dict]) -> dict[str, dict[str, str]]:
    return {o["metadata"]["name"]: o["data"] for o in objects if o["kind"] == "ConfigMap"}


def node_views(objects: list[dict]) -> dict[str, dict[str, str]]:
    """What each node sees inside its container: each mounted file, through the binds of
    its topology, by path in the node, with its text."""
    topo = topology(objects)
    maps = config_maps(objects)
    nodes = yaml.safe_load(topo["spec"]["definition"]["containerlab"])["topology"]["nodes"]
    views = {}
    for node, mounts in topo["spec"]["deployment"]["filesFromConfigMap"].items():
        binds = [bind.split(":")[:2] for bind in nodes[node]["binds"]]
        seen = views[node] = {}
        for m in mounts:
            text = maps[m["configMapName"]][m["configMapPath"]]
            for source, target in binds:
                if m["filePath"].startswith(source + "/"):
                    seen[target + m["filePath"][len(source):]] = text
    return views


# -- the CRD, as JSON Schema ---------------------------------------------------------------


def as_json_schema(schema: dict) -> dict:
    """An OpenAPI v3 CRD schema node as JSON Schema (tests/schemas/clabernetes/README.md)."""
    s = dict(schema)
    if "properties" in s:
        s["properties"] = {k: as_json_schema(v) for k, v in s["properties"].items()}
    for key in ("items", "additionalProperties", "not"):
        if isinstance(s.get(key), dict):
            s[key] = as_json_schema(s[key])
    for key in ("anyOf", "allOf", "oneOf"):
        if key in s:
            s[key] = [as_json_schema(x) for x in s[key]]
    if s.pop("nullable", False):
        if "type" in s:
            s["type"] = [s["type"], "null"]
        if "enum" in s:
            s["enum"] = [*s["enum"], None]
    if s.get("x-kubernetes-int-or-string") and "type" not in s and "anyOf" not in s:
        s["anyOf"] = [{"type": "integer"}, {"type": "string"}]
    if s.get("x-kubernetes-list-type") == "set":
        s["uniqueItems"] = True
    if ("properties" in s and "additionalProperties" not in s
            and not s.get("x-kubernetes-preserve-unknown-fields")):
        s["additionalProperties"] = False  # kubectl's strict field validation
    return s


@cache
def crd_validator() -> jsonschema.Draft7Validator:
    crd = yaml.safe_load(CRD.read_text())
    assert crd["kind"] == "CustomResourceDefinition"
    assert crd["spec"]["names"]["kind"] == "Topology"
    (version,) = [v for v in crd["spec"]["versions"] if v["name"] == SERVED and v["served"]]
    assert f"{crd['spec']['group']}/{version['name']}" == K.API_VERSION
    schema = as_json_schema(version["schema"]["openAPIV3Schema"])
    jsonschema.Draft7Validator.check_schema(schema)
    return jsonschema.Draft7Validator(schema)


def crd_errors(obj: dict) -> list[str]:
    return sorted(f"{'.'.join(map(str, e.absolute_path)) or '<root>'}: {e.message}"
                  for e in crd_validator().iter_errors(obj))


# -- the Topology is valid -----------------------------------------------------------------


@pytest.mark.parametrize("lab", ["mrc-4p", "mrc-8p"])
def test_the_topology_is_valid_for_the_clabernetes_crd(lab):
    topo = topology(objects_of(lab))
    assert topo["apiVersion"] == K.API_VERSION and topo["kind"] == "Topology"
    assert crd_errors(topo) == []


def _set(path: str, value):
    def change(topo):
        *parents, last = path.split(".")
        node = topo
        for key in parents:
            node = node[key]
        node[last] = value
    return change


def _drop(path: str):
    def change(topo):
        *parents, last = path.split(".")
        node = topo
        for key in parents:
            node = node[key]
        del node[last]
    return change


def _first_mount(field: str, value):
    def change(topo):
        first = next(iter(topo["spec"]["deployment"]["filesFromConfigMap"].values()))
        first[0][field] = value
    return change


@pytest.mark.parametrize("change, complaint", [
    (_first_mount("mode", "write"), "'write' is not one of ['read', 'execute']"),
    (_first_mount("filePath", 7), "7 is not of type 'string'"),
    (_drop("spec.naming"), "'naming' is a required property"),
    (_set("spec.definition.containerlab", {"name": "x"}), "is not of type 'string'"),
    (_set("spec.statusProbes.enabled", "no"), "'no' is not of type 'boolean'"),
    (_set("spec.deployment.filesFromConfigmap", {}), "Additional properties are not allowed"),
    (_set("spec.connectivity", "gre"), "'gre' is not one of ['vxlan', 'slurpeeth']"),
], ids=["mode", "filePath", "naming", "definition", "probes", "typo", "connectivity"])
def test_the_validator_rejects_a_wrong_topology(change, complaint):
    topo = copy.deepcopy(topology(objects_of("mrc-4p")))
    change(topo)
    errors = crd_errors(topo)
    assert errors and any(complaint in e for e in errors), errors


def test_every_name_is_one_kubernetes_and_linux_accept():
    objects = objects_of("mrc-8p")
    topo = topology(objects)
    names = [o["metadata"]["name"] for o in objects]
    assert len(set(names)) == len(names)
    for o in objects:
        meta = o["metadata"]
        assert meta["namespace"] == K.DEFAULT_NAMESPACE and DNS1123_LABEL.match(meta["namespace"])
        assert len(meta["name"]) <= 253 and DNS1123_SUBDOMAIN.match(meta["name"]), meta["name"]
        for key, value in meta["labels"].items():
            assert len(value) <= 63 and LABEL_VALUE.match(value), (key, value)
    assert len(topo["metadata"]["name"]) <= 63 and DNS1123_LABEL.match(topo["metadata"]["name"])
    for name, data in config_maps(objects).items():
        assert all(CONFIGMAP_KEY.match(k) and not k.startswith("..") for k in data), name
        assert sum(len(k) + len(v.encode()) for k, v in data.items()) <= K.CONFIGMAP_LIMIT
    for node, mounts in topo["spec"]["deployment"]["filesFromConfigMap"].items():
        # clabernetes: the Deployment <lab>-<node>, its tunnel Service <lab>-<node>-vx, and
        # one pod volume per mount, named by EnforceDNSLabelConvention(SafeConcat(cm, key))
        assert DNS1123_LABEL.match(f"mrc-8p-{node}-vx") and len(f"mrc-8p-{node}-vx") <= 63
        volumes = [re.sub(r"[^a-z0-9-]", "-", f"{m['configMapName']}-{m['configMapPath']}"
                          .lower()) for m in mounts]
        assert len(set(volumes)) == len(volumes), node
    links = yaml.safe_load(topo["spec"]["definition"]["containerlab"])["topology"]["links"]
    for link in links:
        for end in link["endpoints"]:
            assert len(end.replace(":", "-")) <= 15, end  # the launcher's end of the tunnel


# -- what it carries -----------------------------------------------------------------------


@pytest.mark.parametrize("lab", ["mrc-4p", "mrc-8p"])
def test_the_embedded_topology_is_exactly_the_rendered_one(lab):
    objects = objects_of(lab)
    embedded = topology(objects)["spec"]["definition"]["containerlab"]
    assert embedded == files_of(lab)[f"{lab}.clab.yml"]
    # and the YAML stream gives back every object, every file byte for byte
    assert list(yaml.safe_load_all(K.to_yaml(objects))) == objects


@pytest.mark.parametrize("lab", ["mrc-4p", "mrc-8p"])
def test_every_node_sees_its_config_files_at_etc_mrc_twin(lab):
    objects = objects_of(lab)
    files = files_of(lab)
    mapped = topology(objects)["spec"]["deployment"]["filesFromConfigMap"]
    assert set(mapped) == set(plan_of(lab).nodes)
    views = node_views(objects)
    for node in plan_of(lab).nodes:
        prefix = f"config/{node}/"
        own = {rel[len(prefix):]: text for rel, text in files.items() if rel.startswith(prefix)}
        assert {"node.json", "routes.batch", "sysctl.conf"} <= set(own)
        seen = views[node]
        assert {f"{CONFIG_MOUNT}/{f}": t for f, t in own.items()} == {
            p: t for p, t in seen.items() if p.startswith(CONFIG_MOUNT + "/")}
        assert all(m["mode"] == "read" for m in mapped[node])


def test_hosts_get_the_endpoint_code_and_every_node_its_node_program_runner():
    objects = objects_of("mrc-4p")
    code = real_code()

    def shipped(node: str) -> dict[str, str]:
        return {p[len(CODE_MOUNT) + 1:]: t for p, t in node_views(objects)[node].items()
                if p.startswith(CODE_MOUNT)}

    host = shipped("r0h0")
    assert host == K.code_closure(code, ("twin.mrc.endpoint", *K.NODE_CODE))
    assert {"twin/__init__.py", "twin/mrc/endpoint.py", "twin/mrc/transport.py",
            "twin/errors.py", "twin/node/runner.py", "twin/node/ebpf/programs.py"} <= set(host)
    assert not any(p.startswith(("twin/cli/", "twin/lab/", "twin/runtime/")) for p in host)
    switch = shipped("t1-p0-0")
    assert switch == K.code_closure(code, K.NODE_CODE)
    assert set(switch) == {"twin/__init__.py", "twin/node/__init__.py", "twin/node/runner.py",
                           *(f"twin/node/ebpf/{m}.py" for m in (
                               "__init__", "__main__", "asm", "bpf", "netlink", "programs", "tc"))}


def test_the_code_sent_to_hosts_imports_on_its_own(tmp_path):
    for rel, text in K.code_closure(real_code(), ("twin.mrc.endpoint",)).items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    probe = ("import sys; sys.path.insert(0, sys.argv[1]); import twin.mrc.endpoint as e; "
             "assert e.__file__.startswith(sys.argv[1]), e.__file__")
    done = subprocess.run([sys.executable, "-c", probe, str(tmp_path)], cwd=tmp_path,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr


def test_the_code_sent_to_switches_runs_on_the_standard_library(tmp_path):
    """A router image has python3 and no pip packages: the node program's runner and the
    eBPF data plane import with no site-packages at all (-S)."""
    for rel, text in K.code_closure(real_code(), K.NODE_CODE).items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    probe = ("import sys; sys.path.insert(0, sys.argv[1]); import twin.node.runner as r, "
             "twin.node.ebpf.__main__ as e; from twin.node import ebpf; "
             "assert r.__file__.startswith(sys.argv[1]) and ebpf.install")
    done = subprocess.run([sys.executable, "-S", "-c", probe, str(tmp_path)], cwd=tmp_path,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr


def test_code_closure_follows_every_kind_of_import():
    got = K.code_closure(STAND_IN_CODE, ("twin.mrc.endpoint",))
    assert sorted(got) == ["twin/__init__.py", "twin/errors.py", "twin/mrc/__init__.py",
                           "twin/mrc/endpoint.py", "twin/mrc/wire.py"]  # no twin/cli
    with pytest.raises(UsageError, match="no module twin.nowhere"):
        K.code_closure(STAND_IN_CODE, ("twin.nowhere",))


def test_code_too_big_for_one_config_map_is_split():
    # a limit a few of the code's files fill (the largest must still fit in one)
    limit = max(64 * 1024, max(len(k) + len(v.encode()) for k, v in real_code().items()) + 1024)
    objects = objects_of("mrc-4p", limit=limit)
    code_maps = {n: d for n, d in config_maps(objects).items() if n.startswith("mrc-4p-code")}
    assert len(code_maps) > 1 and set(code_maps) == {f"mrc-4p-code-{i}"
                                                     for i in range(len(code_maps))}
    for data in code_maps.values():
        assert sum(len(k) + len(v.encode()) for k, v in data.items()) <= limit
    assert crd_errors(topology(objects)) == []
    assert node_views(objects) == node_views(objects_of("mrc-4p"))


# -- what it refuses -----------------------------------------------------------------------


def test_a_file_bigger_than_a_config_map_is_refused():
    with pytest.raises(UsageError, match=r"more than a ConfigMap holds \(4096\)"):
        objects_of("mrc-4p", limit=4096)


def test_a_bind_no_config_map_feeds_is_refused():
    plan = plan_of("mrc-4p")
    with pytest.raises(UsageError, match=r"bind '\.\./\.\./\.\./twin:/opt/mrc-twin/twin:ro' "
                                         r"reads \.\./\.\./\.\./twin, which no ConfigMap"):
        K.topology_resource(plan, render(plan, "ebpf"),
                            code=real_code())  # the one-machine code_dir
    with pytest.raises(UsageError, match="code/twin, which no ConfigMap delivers"):
        K.topology_resource(plan, files_of("mrc-4p"))  # no code given


def test_a_link_end_too_long_for_a_launcher_is_refused():
    files = dict(files_of("mrc-4p"))
    doc = yaml.safe_load(files["mrc-4p.clab.yml"])
    doc["topology"]["links"][0]["endpoints"][0] = "t0-p0-r0:eth100"  # 15: fits
    files["mrc-4p.clab.yml"] = yaml.safe_dump(doc)
    K.topology_resource(plan_of("mrc-4p"), files, code=STAND_IN_CODE)
    doc["topology"]["links"][0]["endpoints"][0] = "t0-p0-r0:eth1000"
    files["mrc-4p.clab.yml"] = yaml.safe_dump(doc)
    with pytest.raises(UsageError, match="'t0-p0-r0-eth1000' on its clabernetes launcher, "
                                         "16 characters; Linux allows 15"):
        K.topology_resource(plan_of("mrc-4p"), files, code=STAND_IN_CODE)


@pytest.mark.parametrize("namespace", ["Labs", "labs_1", "-labs", "x" * 64])
def test_a_namespace_kubernetes_would_refuse_is_refused(namespace):
    with pytest.raises(UsageError, match="DNS-1123 label"):
        K.topology_resource(plan_of("mrc-4p"), files_of("mrc-4p"), namespace,
                            code=STAND_IN_CODE)


# -- golden and CLI ------------------------------------------------------------------------


def test_mrc_4p_is_golden():
    objects = K.topology_resource(plan_of("mrc-4p"), files_of("mrc-4p"), code=STAND_IN_CODE)
    assert crd_errors(topology(objects)) == []
    golden("clabernetes/mrc-4p.clabernetes.yml", K.to_yaml(objects))


def test_cli_writes_the_file_next_to_the_clab_topology(tmp_path, monkeypatch):
    monkeypatch.setenv("TWIN_BUILD_DIR", str(tmp_path))
    result = CliRunner().invoke(main, ["render", "mrc-4p", "--target", "clabernetes"])
    assert result.exit_code == 0, result.output
    path = tmp_path / "mrc-4p" / "mrc-4p.clabernetes.yml"
    assert f"kubectl apply --server-side -f {path}" in result.output
    assert sorted(p.name for p in (tmp_path / "mrc-4p").iterdir()) == [path.name]
    assert path.read_text() == K.to_yaml(objects_of("mrc-4p"))

    result = CliRunner().invoke(main, ["render", "mrc-4p", "--target", "clabernetes",
                                       "--namespace", "labs", "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["target"] == "clabernetes" and report["files"] == [path.name]
    assert report["namespace"] == "labs" and report["objects"][-1] == {"kind": "Topology",
                                                                      "name": "mrc-4p"}
    assert all(o["metadata"]["namespace"] == "labs" for o in yaml.safe_load_all(
        path.read_text()))


def test_cli_lab_target_is_unchanged_and_refuses_a_namespace(tmp_path, monkeypatch):
    monkeypatch.setenv("TWIN_BUILD_DIR", str(tmp_path))
    result = CliRunner().invoke(main, ["render", "mrc-4p", "--json"])
    assert result.exit_code == 0, result.output
    assert "mrc-4p.clab.yml" in json.loads(result.output)["files"]
    result = CliRunner().invoke(main, ["render", "mrc-4p", "--namespace", "labs"])
    assert result.exit_code == 2
    assert "--namespace: only for --target clabernetes" in result.output
