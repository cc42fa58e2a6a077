"""Running twin's code inside a node that does not have it: a zip over stdin.

On one machine nodes bind-mount the checkout; a remote node may have an older copy of
the code, a part of it (clabernetes ships a host only the endpoint's modules) or none.
So twin sends what a job needs with the job, and installs nothing:

    python3 -c BOOT MODULE      reads one line, the zip's size N, then N bytes: the
                                module's closure (twin.fabric.clabernetes.code_closure:
                                the module, its packages, every twin module it imports);
                                puts the zip on sys.path (a temporary file, removed when
                                the module returns) and runs MODULE's main() on the rest
                                of stdin

The zip is built once a process, from the running twin's own files, so the agent in
a node is exactly the code twin runs. Only the standard library (and, on hosts,
python3-yaml) is taken from the node's image.
"""

from __future__ import annotations

import io
import threading
import zipfile
from functools import lru_cache
from pathlib import Path

from twin.fabric.clabernetes import code_closure, read_code

PACKAGE_DIR = Path(__file__).resolve().parents[1]  # twin/
_STAMP = (2020, 1, 1, 0, 0, 0)  # fixed file times: the same code gives the same zip

BOOT = """\
import os, sys, tempfile
b = sys.stdin.buffer
n = int(b.readline())
fd, path = tempfile.mkstemp(prefix="mrc-twin-", suffix=".zip")
try:
    with os.fdopen(fd, "wb") as f:
        f.write(b.read(n))
    sys.path.insert(0, path)
    import importlib
    code = importlib.import_module(sys.argv[1]).main()
finally:
    os.unlink(path)
sys.exit(code)
"""


# One thread builds a bundle at a time: agents start from a thread pool, and CPython
# 3.11's ast.parse run in several threads at once fails ("AST constructor recursion
# depth mismatch", CPython gh-106905).
_BUILDING = threading.Lock()


def bundle(module: str) -> bytes:
    """The zip of `module`'s closure."""
    with _BUILDING:
        return _bundle(module)


@lru_cache(maxsize=8)
def _bundle(module: str) -> bytes:
    files = code_closure(read_code(PACKAGE_DIR), (module,))
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for path, text in sorted(files.items()):
            z.writestr(zipfile.ZipInfo(path, _STAMP), text)
    return buf.getvalue()


def boot_argv(module: str, python: str = "python3") -> list[str]:
    return [python, "-c", BOOT, module]


def preamble(module: str) -> bytes:
    """What goes to the process's stdin first: the size line and the zip."""
    code = bundle(module)
    return b"%d\n" % len(code) + code
