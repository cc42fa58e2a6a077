"""Exec in a node: the one abstraction both remote transports share.

A transport finds a lab's nodes (`find`), and says how to run a command inside
one (`argv`): argv lists built here, run by `run`/`popen`, parsed by pure
functions, so tests check the argv and the parsing without an engine.

    DockerHost(url)     docker -H URL ps | exec       (DOCKER_HOST syntax: unix://,
                                                      tcp://, ssh://user@host)
        a node is the container containerlab deployed: labels containerlab=<topology>,
        clab-node-name=<node> (twin's docker runtimes label theirs the same way)
    Kubectl(namespace)  kubectl get pods | exec       (clabernetes launcher pods)
        a node is the pod labelled clabernetes/topologyOwner=<topology>,
        clabernetes/topologyNode=<node>; in the pod, the launcher's own Docker runs
        the node as a container named <node>, so a command goes through
        `docker exec <node>` inside the pod

The exit status of the command in the node is the transport's: `docker exec`
returns it, and `kubectl exec` returns it too (printing "command terminated with
exit code N" on stderr). A transport that fails itself (no binary, no engine,
no pod) is told apart by `failure`, which reads the transport's own error text.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import ClassVar
from urllib.parse import urlparse

from twin.errors import CommandFailed, LabError, RuntimeMissing, UsageError

DOCKER_SCHEMES = ("unix", "tcp", "ssh", "http", "https")
CLAB_LAB, CLAB_NODE = "containerlab", "clab-node-name"
C9S_OWNER, C9S_NODE = "clabernetes/topologyOwner", "clabernetes/topologyNode"
LIST_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class NodeRef:
    """Where one node of the lab is, as the transport names it."""

    node: str
    target: str  # the container (docker), or the pod (kubectl)
    state: str  # running | exited | Pending | ...
    image: str = "-"
    container: str = ""  # kubectl: the pod's container the command runs in
    labels: tuple[tuple[str, str], ...] = ()
    machine: str = ""  # whose kernel (and clock) it runs on: the engine, the pod's nodeName

    @property
    def running(self) -> bool:
        return self.state.lower() == "running"

    def label(self, key: str) -> str:
        return dict(self.labels).get(key, "")

    def to_dict(self) -> dict:
        return {"node": self.node, "target": self.target, "state": self.state,
                "image": self.image, "container": self.container, "machine": self.machine}

    @classmethod
    def from_dict(cls, d: dict) -> NodeRef:
        return cls(d["node"], d["target"], d.get("state", "?"), d.get("image", "-"),
                   d.get("container", ""), machine=d.get("machine", ""))


class Transport(ABC):
    kind: ClassVar[str]
    binary: ClassVar[str]

    @abstractmethod
    def list_argv(self, topology: str) -> list[str]:
        """The command that lists the topology's nodes."""

    @abstractmethod
    def parse_list(self, text: str) -> list[NodeRef]:
        """Its output (pure)."""

    @abstractmethod
    def argv(self, ref: NodeRef, argv: list[str], *, stdin: bool = False) -> list[str]:
        """The command that runs argv inside the node (stdin: pass ours on)."""

    @abstractmethod
    def where(self) -> str:
        """One line: where the nodes are (for messages and `twin status`)."""

    @abstractmethod
    def to_dict(self) -> dict: ...

    def missing(self) -> str | None:
        if shutil.which(self.binary) is None:
            return f"the {self.binary} binary is not on PATH"
        return None

    def find(self, topology: str) -> list[NodeRef]:
        """The topology's nodes, as the transport lists them now."""
        proc = run(self, self.list_argv(topology), timeout=LIST_TIMEOUT_S)
        if proc.returncode != 0:
            raise LabError(f"{self.where()}: cannot list nodes: {first_line(proc.stderr)}")
        return self.parse_list(proc.stdout)

    def failure(self, proc: subprocess.CompletedProcess) -> str | None:
        """The transport's own failure (not the command's), from its stderr, or None."""
        return None


# -- docker -H URL ---------------------------------------------------------------------


def parse_docker_url(url: str) -> str:
    """A Docker engine URL as `docker -H` takes it; friendly errors for the rest."""
    parsed = urlparse(url)
    if parsed.scheme not in DOCKER_SCHEMES:
        raise UsageError(f"--docker-host {url!r}: give an engine URL as DOCKER_HOST does: "
                         "unix:///var/run/docker.sock, tcp://HOST:2376 or ssh://USER@HOST")
    if parsed.scheme == "unix" and not parsed.path:
        raise UsageError(f"--docker-host {url!r}: a unix URL names a socket path, "
                         "e.g. unix:///var/run/docker.sock")
    if parsed.scheme != "unix" and not parsed.hostname:
        raise UsageError(f"--docker-host {url!r}: no host in the URL")
    return url


# `docker ps --format`: one line per container, tab-separated; labels by name (the
# `.Labels` field joins them with commas, which a label value may hold).
PS_FIELDS = ("{{.Names}}", '{{.Label "clab-node-name"}}', "{{.State}}", "{{.Image}}",
             '{{.Label "mrc-twin.run-dir"}}', '{{.Label "mrc-twin.lab-id"}}')


@dataclass(frozen=True)
class DockerHost(Transport):
    url: str
    kind: ClassVar[str] = "docker"
    binary: ClassVar[str] = "docker"

    def _base(self) -> list[str]:
        return [self.binary, "-H", self.url]

    def list_argv(self, topology: str) -> list[str]:
        return [*self._base(), "ps", "-a", "--no-trunc", "--filter",
                f"label={CLAB_LAB}={topology}", "--format", "\t".join(PS_FIELDS)]

    def parse_list(self, text: str) -> list[NodeRef]:
        refs = []
        for line in text.splitlines():
            if not line.strip():
                continue
            name, node, state, image, run_dir, lab_id = (line.split("\t") + [""] * 6)[:6]
            if node:
                refs.append(NodeRef(node, name, state, image, labels=(
                    ("mrc-twin.run-dir", run_dir), ("mrc-twin.lab-id", lab_id)),
                    machine=self.url))  # one engine's containers share its kernel
        return refs

    def argv(self, ref: NodeRef, argv: list[str], *, stdin: bool = False) -> list[str]:
        return [*self._base(), "exec", *(["-i"] if stdin else []), ref.target, *argv]

    def where(self) -> str:
        return f"docker -H {self.url}"

    def to_dict(self) -> dict:
        return {"kind": self.kind, "url": self.url}

    def failure(self, proc: subprocess.CompletedProcess) -> str | None:
        # The CLI's own errors: the daemon refused, or could not be reached.
        text = proc.stderr or ""
        for mark in ("Error response from daemon", "Cannot connect to the Docker daemon",
                     "error during connect"):
            if mark in text:
                return first_line(text[text.index(mark):])
        return None


# -- kubectl (clabernetes) -----------------------------------------------------------------


@dataclass(frozen=True)
class Kubectl(Transport):
    namespace: str
    context: str = ""
    kubeconfig: str = ""
    launcher: bool = True  # the node runs inside the pod's Docker (clabernetes' default)
    kind: ClassVar[str] = "kubectl"
    binary: ClassVar[str] = "kubectl"

    def _base(self) -> list[str]:
        argv = [self.binary]
        if self.kubeconfig:
            argv += ["--kubeconfig", self.kubeconfig]
        if self.context:
            argv += ["--context", self.context]
        return argv

    def list_argv(self, topology: str) -> list[str]:
        return [*self._base(), "get", "pods", "-n", self.namespace, "-l",
                f"{C9S_OWNER}={topology}", "-o", "json"]

    def parse_list(self, text: str) -> list[NodeRef]:
        try:
            items = json.loads(text or "{}").get("items") or []
        except (ValueError, AttributeError):
            raise LabError(f"{self.where()}: `kubectl get pods -o json` printed no "
                           "pod list") from None
        refs = []
        for pod in items:
            meta = pod.get("metadata") or {}
            node = (meta.get("labels") or {}).get(C9S_NODE)
            if not node or meta.get("deletionTimestamp"):
                continue  # a pod on its way out is not the node any more
            status = pod.get("status") or {}
            containers = [c.get("name", "") for c in (pod.get("spec") or {}).get(
                "containers") or []]
            container = node if node in containers else (containers[0] if containers else "")
            image = next((c.get("image", "-") for c in (pod.get("spec") or {}).get(
                "containers") or [] if c.get("name") == container), "-")
            refs.append(NodeRef(node, meta.get("name", ""), status.get("phase", "?"), image,
                                container, machine=(pod.get("spec") or {}).get("nodeName")
                                or ""))
        return refs

    def argv(self, ref: NodeRef, argv: list[str], *, stdin: bool = False) -> list[str]:
        i = ["-i"] if stdin else []
        inner = ["docker", "exec", *i, ref.node, *argv] if self.launcher else argv
        return [*self._base(), "exec", "-n", self.namespace, ref.target,
                *(["-c", ref.container] if ref.container else []), *i, "--", *inner]

    def where(self) -> str:
        return (f"kubectl -n {self.namespace}" + (f" --context {self.context}"
                                                  if self.context else ""))

    def to_dict(self) -> dict:
        return {"kind": self.kind, "namespace": self.namespace, "context": self.context,
                "kubeconfig": self.kubeconfig, "launcher": self.launcher}

    def failure(self, proc: subprocess.CompletedProcess) -> str | None:
        text = proc.stderr or ""
        if "command terminated with exit code" in text:
            return None  # the command's own status, passed on
        for mark in ("Error from server", "error: ", "Unable to connect to the server"):
            if mark in text:
                return first_line(text[text.index(mark):])
        return None


def from_dict(d: dict) -> Transport:
    if d.get("kind") == DockerHost.kind:
        return DockerHost(d["url"])
    if d.get("kind") == Kubectl.kind:
        return Kubectl(d["namespace"], d.get("context", ""), d.get("kubeconfig", ""),
                       bool(d.get("launcher", True)))
    raise LabError(f"unknown remote transport {d!r} in the lab's remote.json")


# -- running what the transports build -------------------------------------------------------


def first_line(text: str) -> str:
    lines = [x.strip() for x in (text or "").splitlines() if x.strip()]
    return lines[0] if lines else "(no output)"


def run(transport: Transport, argv: list[str], *, input: str | None = None,
        timeout: float = 60) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(argv, input=input, capture_output=True, text=True,
                              timeout=timeout)
    except FileNotFoundError:
        raise RuntimeMissing(f"{transport.where()}: {transport.missing()}") from None
    except subprocess.TimeoutExpired:
        raise LabError(f"{transport.where()}: `{' '.join(argv[:8])} ...` gave no answer "
                       f"in {timeout:.0f}s") from None


def exec_in(transport: Transport, ref: NodeRef, argv: list[str], *, input: str | None = None,
            check: bool = True, timeout: float = 60) -> subprocess.CompletedProcess:
    """Run argv in the node; CommandFailed if check and it failed, naming the node."""
    proc = run(transport, transport.argv(ref, argv, stdin=input is not None), input=input,
               timeout=timeout)
    broken = transport.failure(proc) if proc.returncode != 0 else None
    if broken:
        raise LabError(f"{ref.node}: {transport.where()} exec: {broken}")
    if check and proc.returncode != 0:
        raise CommandFailed([f"{ref.node}:", *argv], proc.returncode, proc.stderr or proc.stdout)
    return proc


def popen(transport: Transport, ref: NodeRef, argv: list[str], **kw) -> subprocess.Popen:
    """A long-running command in the node, its stdin ours to write (agents, relays)."""
    try:
        return subprocess.Popen(transport.argv(ref, argv, stdin=True), **kw)
    except FileNotFoundError:
        raise RuntimeMissing(f"{transport.where()}: {transport.missing()}") from None


def end(proc: subprocess.Popen, timeout: float = 5) -> None:
    """End a command whose stdin we hold: close it (the command's cue to finish), wait,
    and kill it if it does not."""
    try:
        proc.stdin.close()
    except OSError:
        pass
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
