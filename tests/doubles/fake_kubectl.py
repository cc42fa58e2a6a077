"""A test double for `kubectl` against a clabernetes deployment, on the local engine.

No Kubernetes cluster is reachable here. This double plays one that runs a
containerlab lab the way clabernetes does, with the local Docker engine's
containers standing in for the nodes, and holds twin to kubectl's contract:

  * global flags before or after the verb: -n/--namespace, --context, --kubeconfig
    (the last two are accepted and ignored);
  * `get pods -n NS -l K=V[,K=V] -o json` prints a v1 List of pods, as kubectl does.
    Every container labelled containerlab=<lab>, clab-node-name=<node> is a
    clabernetes launcher pod in namespace $FAKE_KUBECTL_NAMESPACE (default mrc-twin):
    named <lab>-<node>-<10 chars>-<5 chars> (a Deployment's pod), labelled
    clabernetes/app, clabernetes/name, clabernetes/topologyOwner=<lab>,
    clabernetes/topologyNode=<node>, one container named <node>, phase Running when
    the container runs, scheduled (spec.nodeName) on one of the Kubernetes nodes named
    in $FAKE_KUBECTL_MACHINES (comma-separated; default fake-worker-0), chosen by a
    hash of the node's name. Other namespaces hold no pods (an empty List, and kubectl's
    "No resources found" on stderr). Only -o json is printed;
  * `exec [-n NS] POD [-c C] [-i] [-t] [-q] -- COMMAND...`: the `--` is required, as
    kubectl requires it; an unknown pod is `Error from server (NotFound): pods "P"
    not found` and exit 1; an unknown container, `Error from server (BadRequest):
    container C is not valid for pod P` and exit 1; a command that exits N != 0
    prints `command terminated with exit code N` on stderr and exits N; stdin is
    passed on only with -i.
  * In a launcher pod, the node runs in the launcher's own Docker as a container
    named <node>: `docker exec [-i] [-t] <node> ARGS` in the pod runs ARGS in the
    node's container (here: `docker exec clab-<lab>-<node>`). With
    $FAKE_KUBECTL_NATIVE=1 the pod's container is the node itself (clabernetes'
    native mode) and COMMAND runs in it directly.
What it does not do: a launcher's other commands (this double has no launcher
filesystem: it says so and exits 126), and every other kubectl verb.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys

NS_ENV, NATIVE_ENV = "FAKE_KUBECTL_NAMESPACE", "FAKE_KUBECTL_NATIVE"
MACHINES_ENV = "FAKE_KUBECTL_MACHINES"
OWNER, NODE = "clabernetes/topologyOwner", "clabernetes/topologyNode"


def fail(msg: str, code: int = 1) -> None:
    print(msg, file=sys.stderr)
    sys.exit(code)


def _namespace() -> str:
    return os.environ.get(NS_ENV, "mrc-twin")


def _containers() -> list[dict]:
    fmt = '{{.Names}}\t{{.Label "containerlab"}}\t{{.Label "clab-node-name"}}\t{{.State}}\t{{.ID}}'
    out = subprocess.run(["docker", "ps", "-a", "--no-trunc", "--filter", "label=containerlab",
                          "--format", fmt], capture_output=True, text=True)
    if out.returncode != 0:
        fail("Unable to connect to the server: the double's Docker engine does not answer")
    found = []
    for line in out.stdout.splitlines():
        name, lab, node, state, cid = line.split("\t")
        if lab and node:
            found.append({"container": name, "lab": lab, "node": node, "state": state,
                          "id": cid})
    return found


def _pod(c: dict) -> dict:
    h = hashlib.sha256(c["id"].encode()).hexdigest()
    name = f"{c['lab']}-{c['node']}-{h[:10]}-{h[10:15]}"
    running = c["state"] == "running"
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": _namespace(), "labels": {
            "app.kubernetes.io/name": f"{c['lab']}-{c['node']}",
            "clabernetes/app": "clabernetes", "clabernetes/name": f"{c['lab']}-{c['node']}",
            OWNER: c["lab"], NODE: c["node"], "pod-template-hash": h[:10]}},
        "spec": {"containers": [{"name": c["node"],
                                 "image": "ghcr.io/srl-labs/clabernetes/clabernetes-launcher"}],
                 "nodeName": _machine(c["node"])},
        "status": {"phase": "Running" if running else "Pending", "containerStatuses": [
            {"name": c["node"], "ready": running, "started": running}]},
        "_container": c["container"],
    }


def _machine(node: str) -> str:
    machines = [m for m in os.environ.get(MACHINES_ENV, "fake-worker-0").split(",") if m]
    return machines[int(hashlib.sha256(node.encode()).hexdigest(), 16) % len(machines)]


def pods(namespace: str) -> list[dict]:
    return [_pod(c) for c in _containers()] if namespace == _namespace() else []


def _selects(pod: dict, selector: str) -> bool:
    labels = pod["metadata"]["labels"]
    for term in filter(None, selector.split(",")):
        key, sep, value = term.partition("=")
        if not sep or labels.get(key) != value.lstrip("="):
            return False
    return True


def get(args: list[str], namespace: str) -> None:
    if args[:1] not in (["pods"], ["pod"], ["po"]):
        fail(f'error: the server doesn\'t have a resource type "{args[0] if args else ""}"')
    selector, output, rest = "", "", args[1:]
    while rest:
        a = rest.pop(0)
        if a in ("-l", "--selector"):
            selector = rest.pop(0)
        elif a.startswith("--selector="):
            selector = a.split("=", 1)[1]
        elif a in ("-o", "--output"):
            output = rest.pop(0)
        elif a.startswith("-o") and len(a) > 2:
            output = a[2:].lstrip("=")
        else:
            fail(f"error: this double knows no `get pods` argument {a!r}")
    if output != "json":
        fail("error: this double prints pods only with -o json")
    found = [p for p in pods(namespace) if _selects(p, selector)]
    if not found:
        print(f"No resources found in {namespace} namespace.", file=sys.stderr)
    items = [{k: v for k, v in p.items() if not k.startswith("_")} for p in found]
    print(json.dumps({"apiVersion": "v1", "items": items, "kind": "List",
                      "metadata": {"resourceVersion": ""}}, indent=4))


def exec_(args: list[str], namespace: str) -> None:
    if "--" not in args:
        fail("error: exec [POD] [COMMAND] is not supported anymore. "
             "Use exec [POD] -- [COMMAND] instead")
    cut = args.index("--")
    flags, command = args[:cut], args[cut + 1:]
    pod_name, container, stdin = None, None, False
    while flags:
        a = flags.pop(0)
        if a in ("-c", "--container"):
            container = flags.pop(0)
        elif a in ("-i", "--stdin"):
            stdin = True
        elif a in ("-t", "--tty", "-q", "--quiet", "-it", "-ti"):
            stdin = stdin or a in ("-it", "-ti")
        elif a.startswith("-"):
            fail(f"error: unknown flag: {a}")
        elif pod_name is None:
            pod_name = a
        else:
            fail("error: exec takes one pod; the command goes after --")
    if not pod_name or not command:
        fail("error: expected 'exec (POD | TYPE/NAME) [-c CONTAINER] [flags] -- COMMAND "
             "[args...]'.")
    pod = next((p for p in pods(namespace) if p["metadata"]["name"] == pod_name), None)
    if pod is None:
        fail(f'Error from server (NotFound): pods "{pod_name}" not found')
    node = pod["metadata"]["labels"][NODE]
    if container is not None and container != node:
        fail(f"Error from server (BadRequest): container {container} is not valid for pod "
             f"{pod_name}")
    if os.environ.get(NATIVE_ENV) == "1":
        rc = _docker_exec(pod["_container"], command, stdin)
    else:
        rc = _launcher(pod, node, command, stdin)
    if rc != 0:
        print(f"command terminated with exit code {rc}", file=sys.stderr)
    sys.exit(rc)


def _launcher(pod: dict, node: str, command: list[str], stdin: bool) -> int:
    """The launcher's shell: its Docker holds one container, the node, named <node>."""
    if command[:2] != ["docker", "exec"]:
        print(f"fake launcher: only `docker exec {node} ...` runs here (the double has no "
              "launcher filesystem)", file=sys.stderr)
        return 126
    rest = command[2:]
    inner_stdin = False
    while rest and rest[0].startswith("-"):
        flag = rest.pop(0)
        if flag in ("-i", "--interactive", "-it", "-ti"):
            inner_stdin = True
        elif flag not in ("-t", "--tty"):
            print(f"unknown flag: {flag}", file=sys.stderr)
            return 125
    if not rest:
        print('"docker exec" requires at least 2 arguments.', file=sys.stderr)
        return 1
    if rest[0] != node:
        print(f"Error response from daemon: No such container: {rest[0]}", file=sys.stderr)
        return 1
    return _docker_exec(pod["_container"], rest[1:], stdin and inner_stdin)


def _docker_exec(container: str, argv: list[str], stdin: bool) -> int:
    return subprocess.run(["docker", "exec", *(["-i"] if stdin else []), container, *argv],
                          stdin=None if stdin else subprocess.DEVNULL).returncode


def main(argv: list[str]) -> None:
    namespace, rest, args = "default", [], list(argv)
    while args:
        a = args.pop(0)
        if a == "--":
            rest += ["--", *args]
            break
        if a in ("-n", "--namespace"):
            namespace = args.pop(0)
        elif a.startswith("--namespace="):
            namespace = a.split("=", 1)[1]
        elif a in ("--context", "--kubeconfig"):
            args.pop(0)
        elif a.startswith(("--context=", "--kubeconfig=")):
            pass
        else:
            rest.append(a)
    if not rest:
        fail("kubectl controls the Kubernetes cluster manager (this is mrc-twin's test double)")
    verb, args = rest[0], rest[1:]
    if verb == "version":
        print("Client Version: v0.0.0-fake (mrc-twin test double)")
    elif verb == "get":
        get(args, namespace)
    elif verb == "exec":
        exec_(args, namespace)
    else:
        fail(f'error: unknown command "{verb}" for "kubectl"')


if __name__ == "__main__":
    main(sys.argv[1:])
