"""What is running, recorded on disk before it is created.

    $TWIN_RUN_DIR (default /run/twin)/
        <lab>/lab.json      lab name, its random id (the owner every resource of
                            it carries: twin.owner), runtime, spec path, build
                            dir, node names, phase (creating | up), what each
                            phase of `up` did; created exclusively *before* the
                            first namespace or container exists, so two racing
                            `twin up` of one lab cannot both proceed, and `twin
                            down` can remove a lab whose `twin up` crashed
        <lab>/faults.json   faults in force, written before each is applied, so
                            every one can be reverted after a crash
        <lab>/spec.yml      the spec as it was at `up`
        <lab>/routes.json   the operator's tables it was brought up from (`--routes`),
                            as loaded: later edits to them change nothing

/run is a tmpfs: after a reboot the namespaces are gone and so is the state.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from twin.owner import Owner
from twin.rundir import atomic_write, run_root


@dataclass
class LabState:
    lab: str
    runtime: str
    spec_path: str
    build_dir: str
    nodes: list[str]
    phase: str = "creating"
    phases: list[dict] = field(default_factory=list)  # what `up` did: phase, count, seconds
    created: float = field(default_factory=time.time)
    pid: int = field(default_factory=os.getpid)
    id: str = ""  # the lab's owner id (twin.owner); "" in a lab.json from before owners
    dataplane: str = "seg6local"  # twin.dataplane's backend; a lab.json from before: seg6local
    dataplane_why: str = ""  # why it was chosen (`auto`'s probe, or "asked for")
    routes: str = ""  # the directory of an operator's tables it runs (`--routes`), "" the plan's
    routing: str = ""  # `twin up --routing`: the spec's routing mode overridden ("" not)

    @property
    def owner(self) -> Owner:
        return Owner.here(self.lab, self.id)

    @property
    def dir(self) -> Path:
        return run_root() / self.lab

    def claim(self) -> bool:
        """Create lab.json if no other `twin up` has: False if one has (or a lab is up)."""
        self.dir.mkdir(parents=True, exist_ok=True)
        try:
            fd = os.open(self.dir / "lab.json", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            return False
        with os.fdopen(fd, "w") as f:
            f.write(json.dumps(asdict(self), indent=2, sort_keys=True) + "\n")
        return True

    def save(self) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        atomic_write(self.dir / "lab.json", asdict(self))

    @classmethod
    def load(cls, lab: str) -> LabState | None:
        path = run_root() / lab / "lab.json"
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            return None
        known = {k: data[k] for k in cls.__dataclass_fields__ if k in data}
        return cls(**known)

    def remove(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)


def known_labs() -> list[str]:
    root = run_root()
    if not root.is_dir():
        return []
    return sorted(p.name for p in root.iterdir() if (p / "lab.json").exists())
