"""Debian packages twin installs the first time a command needs them, never started.

    install(package, found, why, note) -> path   apt-get install, when `found()` is None

A package such as prometheus or frr would start its own service where the machine
runs init scripts (prometheus on 0.0.0.0:9090; frr's zebra and bgpd in the machine's
own namespace). twin runs its own instances, inside the lab, so the install denies
every service start for its length: a policy-rc.d that lives only as long as the
apt call (one the machine already has is left as it is, and already denies or
decides). No recommends are installed.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from pathlib import Path

from twin.errors import LabError, RuntimeMissing

POLICY_RC_D = Path("/usr/sbin/policy-rc.d")


def install(package: str, found: Callable[[], str | None], why: str,
            note: Callable[[str], None] | None = None) -> str:
    """What `found()` gives once `package` is installed: at once when it already is.
    `why` says in an error what needs it."""
    path = found()
    if path:
        return path
    if os.geteuid() != 0:
        raise RuntimeMissing(f"{package} is not installed ({why}) and only root can install "
                             f"it (apt-get install --no-install-recommends {package})")
    if note:
        note(f"installing {package} from Debian ({why}; no recommends, no service started)")
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    ours = not POLICY_RC_D.exists()
    if ours:  # deny the package's own service start for the length of the install
        POLICY_RC_D.write_text(f"#!/bin/sh\n# mrc-twin: during `apt-get install {package}` "
                               "only\nexit 101\n")
        POLICY_RC_D.chmod(0o755)
    try:
        for cmd in (["apt-get", "update", "-qq"],
                    ["apt-get", "install", "-y", "-qq", "--no-install-recommends", package]):
            proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
            if proc.returncode != 0:
                raise LabError(f"`{' '.join(cmd)}` failed: {proc.stderr.strip()[-500:]}")
    finally:
        if ours:
            POLICY_RC_D.unlink(missing_ok=True)
    path = found()
    if not path:
        raise LabError(f"apt-get installed {package} but {why} still finds nothing of it")
    return path
