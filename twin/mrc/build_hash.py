"""The sources of the compiled module twin.mrc._fastpath, and the one hash of them.

setup.py builds the extension from SOURCES (compiled) and HEADERS (depended on) and
passes sources_hash() to the compiler (-DMRC_SOURCES_HASH), so the module carries the
hash of what it was built from as `_fastpath.SOURCES_HASH`. twin.mrc.core compares it
with the hash of the sources beside the module when an endpoint starts: a module built
from other sources than the tree's (an edit since the last `make venv`, a build that
failed and left the old one) is stale, and is not run as if it were current.

The hash is SHA-256 over each file in the order named here (its name, its length, its
bytes), cut to HASH_DIGITS hex digits. This module imports only the standard library:
setup.py loads it by path, before the package is installed.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

# the units, lowest first (twin/mrc/fp_util.h): the utility unit, the transport core, the
# data path, and the module unit that registers them
SOURCES = ("_util.c", "_sender.c", "_receiver.c", "_datapath.c", "_module.c")
HEADERS = ("fp_util.h", "fp_sender.h", "fp_receiver.h", "fp_datapath.h")
HASH_DIGITS = 16
HERE = Path(__file__).resolve().parent  # twin/mrc: where the sources and the module are


def sources_hash(directory: Path = HERE) -> str | None:
    """The hash of the module's sources in `directory`; None where any is missing (a
    wheel without sources: nothing to compare with)."""
    h = hashlib.sha256()
    for name in SOURCES + HEADERS:
        try:
            data = (directory / name).read_bytes()
        except FileNotFoundError:
            return None
        h.update(b"%s\0%d\0" % (name.encode(), len(data)))
        h.update(data)
    return h.hexdigest()[:HASH_DIGITS]
