"""Whose lab/build/<lab>/ is, and its removal with the lab.

A lab's build directory (twin.lab.compile.render_lab: its topology, every node's
files; then what runtimes and telemetry put there) is named after the lab alone,
so two run directories sharing a checkout, or a `twin fabric render` without a
lab, can hold the same one. It becomes a lab's when that lab claims its state
(twin.state), which writes its owner (twin.owner) into it:

    lab/build/<lab>/owner.json   run_dir, lab, lab_id of the lab that renders here

`twin down`, `down --all`, a failed `up` rolled back and `twin ci`'s teardown
remove it only when that file names the lab being removed: a directory another
lab (another run directory's, or a newer one of the same name) has taken over,
or one from before owners, is kept and said so. What other commands wrote there
for the user outlives the lab, and stays:

    reports/                   drill reports (`twin drill --all`, `make chaos`)
    <lab>.clabernetes.yml      `twin render --target clabernetes`: what
                               `kubectl delete -f` removes the deployed lab with
"""

from __future__ import annotations

import json
import shutil
from dataclasses import asdict, dataclass
from pathlib import Path

from twin.lab.compile import build_root
from twin.owner import Owner
from twin.rundir import write_json

OWNER_FILE = "owner.json"


@dataclass(frozen=True)
class BuildRemoved:
    """What became of a removed lab's build directory: `removed` when its build files
    are gone; `why` says why they are not, or what of the directory stays."""

    path: str
    removed: bool
    why: str = ""


def own(build_dir: Path, owner: Owner) -> None:
    """Make the build directory `owner`'s lab's (once its state is claimed)."""
    write_json(Path(build_dir) / OWNER_FILE, asdict(owner))


def held_by_another(build_dir: Path) -> Owner | None:
    """The live lab of another run directory whose build directory this is (rendering
    into it would change the files its nodes and commands read), or None."""
    found = owner_of(build_dir)
    if found is None or found.mine or found.stray_because() is not None:
        return None
    return found


def owner_of(build_dir: Path) -> Owner | None:
    try:
        data = json.loads((Path(build_dir) / OWNER_FILE).read_text())
        return Owner(data["run_dir"], data["lab"], data["lab_id"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def remove(build_dir: str | Path, owner: Owner) -> BuildRemoved:
    """Remove the build directory of the lab `owner` names, if it is that lab's; never
    raises (the lab is gone all the same: what stays is said)."""
    path = Path(build_dir)
    if not path.is_dir():
        return BuildRemoved(str(path), True)
    found = owner_of(path)
    if path.name != owner.lab or found is None:
        return BuildRemoved(str(path), False, "no owner.json names this lab in it (a twin "
                                              "from before owners rendered it, or no lab)")
    if found != owner:
        return BuildRemoved(str(path), False, f"it is {found}'s now")
    try:
        for entry in sorted(path.iterdir()):
            if entry.name in kept_names(owner.lab) or entry.name == OWNER_FILE:
                continue
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry)
            else:
                entry.unlink()
        (path / OWNER_FILE).unlink()  # last: a removal cut short can be done again
        kept = sorted(e.name for e in path.iterdir())
        if not kept:
            path.rmdir()
    except OSError as e:
        return BuildRemoved(str(path), False, f"cannot remove it: {e}")
    return BuildRemoved(str(path), True, f"kept in it: {', '.join(kept)}" if kept else "")


def kept_names(lab: str) -> tuple[str, ...]:
    """What a removed lab leaves of its build directory (the module's docstring)."""
    return ("reports", f"{lab}.clabernetes.yml")


def leftovers() -> list[tuple[Path, Owner]]:
    """Build directories this run directory's labs claimed that no lab of it knows any
    more (a lab.json lost, a `twin up` killed before it could roll back)."""
    root = build_root()
    if not root.is_dir():
        return []
    found = []
    for path in sorted(root.iterdir()):
        owner = owner_of(path) if path.is_dir() else None
        if owner is not None and owner.mine and owner.stray_because():
            found.append((path, owner))
    return found
