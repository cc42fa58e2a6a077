"""Whose is it: every resource twin creates carries its owner.

An owner is a run directory (TWIN_RUN_DIR, default /run/twin) and one lab in
it, with the random id that lab got at `twin up`. Two checkouts, a test run
and a colleague each have their own run directory, so each can clean up what
is theirs and see, never touch, what is not.

    container   labels mrc-twin.run-dir, mrc-twin.lab, mrc-twin.lab-id
    namespace   a record /run/mrc-twin/netns/<namespace>.json, written before
                the namespace exists (a namespace file cannot carry a label)
    veth        its ifalias, set when its node is programmed (`ip -d link`)
    nft table   its comment (`nft list table ip6 <name>`)
    process     MRC_TWIN_OWNER in its environment (the MRC endpoints)

The last three carry the owner as one text tag, `Owner.tag`:

    mrc-twin lab=mrc-4p id=5c0f3e2a91b4 run-dir=/run/twin

A resource is *stray* when its owner's run directory is gone, or no longer
knows a lab of that name with that id (see `Owner.stray_because`); a
resource with no owner at all (made by a twin before owners existed) is
stray too. `twin down --stray` removes exactly those.
"""

from __future__ import annotations

import json
import os
import re
import secrets
from dataclasses import asdict, dataclass
from pathlib import Path

from twin.rundir import run_root

NETNS_RECORDS = Path("/run/mrc-twin/netns")  # machine-wide: every run dir looks here
ENV = "MRC_TWIN_OWNER"
_TAG_RE = re.compile(r"^mrc-twin lab=(?P<lab>\S+) id=(?P<lab_id>\S*) run-dir=(?P<run_dir>.+)$")


def new_lab_id() -> str:
    return secrets.token_hex(6)


def this_run_dir() -> str:
    return str(run_root().resolve())


@dataclass(frozen=True)
class Owner:
    run_dir: str  # resolved path
    lab: str
    lab_id: str

    @classmethod
    def here(cls, lab: str, lab_id: str) -> Owner:
        """An owner in this process's run directory."""
        return cls(this_run_dir(), lab, lab_id)

    @property
    def tag(self) -> str:
        return f"mrc-twin lab={self.lab} id={self.lab_id} run-dir={self.run_dir}"

    @classmethod
    def from_tag(cls, text: str | None) -> Owner | None:
        m = _TAG_RE.match((text or "").strip())
        return cls(m["run_dir"], m["lab"], m["lab_id"]) if m else None

    @classmethod
    def from_labels(cls, labels: dict) -> Owner | None:
        run_dir, lab = labels.get("mrc-twin.run-dir"), labels.get("mrc-twin.lab")
        if not run_dir or not lab:
            return None
        return cls(run_dir, lab, labels.get("mrc-twin.lab-id", ""))

    def labels(self) -> dict[str, str]:
        return {"mrc-twin.run-dir": self.run_dir, "mrc-twin.lab": self.lab,
                "mrc-twin.lab-id": self.lab_id}

    @property
    def mine(self) -> bool:
        """Owned by this process's run directory."""
        return self.run_dir == this_run_dir()

    def stray_because(self) -> str | None:
        """Why nobody owns this any more, or None while its run directory knows it."""
        run_dir = Path(self.run_dir)
        if not run_dir.is_dir():
            return f"its run directory {run_dir} no longer exists"
        try:
            known = json.loads((run_dir / self.lab / "lab.json").read_text())
        except (OSError, ValueError):
            return f"run directory {run_dir} knows no lab {self.lab}"
        if known.get("id", "") != self.lab_id:
            return (f"run directory {run_dir} knows lab {self.lab} under another id "
                    f"({known.get('id') or 'none'}, not {self.lab_id or 'none'})")
        return None

    def __str__(self) -> str:
        return f"lab {self.lab} of {self.run_dir}"


# -- namespace owner records ----------------------------------------------------


def record_namespaces(owner: Owner, namespaces: list[str]) -> None:
    """Write each namespace's owner record (before the namespace is created)."""
    NETNS_RECORDS.mkdir(parents=True, exist_ok=True)
    body = json.dumps(asdict(owner), sort_keys=True) + "\n"
    for ns in namespaces:
        tmp = NETNS_RECORDS / f".{ns}.tmp"
        tmp.write_text(body)
        os.replace(tmp, NETNS_RECORDS / f"{ns}.json")


def namespace_owner(ns: str) -> Owner | None:
    try:
        data = json.loads((NETNS_RECORDS / f"{ns}.json").read_text())
        return Owner(data["run_dir"], data["lab"], data["lab_id"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def forget_namespaces(namespaces: list[str]) -> None:
    for ns in namespaces:
        try:
            os.unlink(NETNS_RECORDS / f"{ns}.json")
        except FileNotFoundError:
            pass


def recorded_namespaces() -> list[str]:
    try:
        return sorted(p.name[:-5] for p in NETNS_RECORDS.iterdir()
                      if p.name.endswith(".json") and not p.name.startswith("."))
    except FileNotFoundError:
        return []


# -- processes --------------------------------------------------------------------


def owned_processes() -> dict[int, Owner]:
    """Every process on the machine that carries an owner in its environment."""
    found = {}
    needle = f"{ENV}=".encode()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as f:
                env = f.read()
        except OSError:
            continue
        if needle not in env:
            continue
        for var in env.split(b"\0"):
            if var.startswith(needle):
                owner = Owner.from_tag(var[len(needle):].decode(errors="replace"))
                if owner is not None:
                    found[int(entry)] = owner
    return found
