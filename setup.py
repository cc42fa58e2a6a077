"""The one compiled part of mrc-twin: twin.mrc._fastpath, the MRC endpoint's data path
(_datapath.c) and its transport's compiled core (_sender.c, _receiver.c), with the
utility unit below them and the module unit that registers them (_util.c, _module.c).

`pip install -e .` (what `make venv` runs) builds it with the machine's gcc against zlib.
It is optional: where it cannot be built, the install still succeeds and the endpoint
runs its pure-Python data path, and says so when it starts.

The module carries the hash of the sources it is built from (twin/mrc/build_hash.py,
loaded by path: the package is not installed yet), so that an endpoint can tell a
stale build from a current one.
"""

import runpy
from pathlib import Path

from setuptools import Extension, setup

HERE = Path(__file__).resolve().parent
BUILD = runpy.run_path(str(HERE / "twin" / "mrc" / "build_hash.py"))

setup(ext_modules=[Extension(
    "twin.mrc._fastpath",
    [f"twin/mrc/{name}" for name in BUILD["SOURCES"]],
    depends=[f"twin/mrc/{name}" for name in BUILD["HEADERS"]], libraries=["z"],
    define_macros=[("MRC_SOURCES_HASH", f'"{BUILD["sources_hash"](HERE / "twin" / "mrc")}"')],
    # -ffp-contract=off: no fused multiply-adds, so the compiled transport's window
    # arithmetic rounds as Python's does (the differential test compares floats with ==)
    extra_compile_args=["-O2", "-Wall", "-Wextra", "-Wno-missing-field-initializers",
                        "-Wno-cast-function-type", "-ffp-contract=off"],
    optional=True)])
