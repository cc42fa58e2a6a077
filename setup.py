"""The one compiled part of mrc-twin: twin.mrc._fastpath, the MRC endpoint's data path
(_fastpath.c) and its transport's compiled core (_sender.c, _receiver.c).

`pip install -e .` (what `make venv` runs) builds it with the machine's gcc against zlib.
It is optional: where it cannot be built, the install still succeeds and the endpoint
runs its pure-Python data path, and says so when it starts.
"""

from setuptools import Extension, setup

setup(ext_modules=[Extension(
    "twin.mrc._fastpath",
    ["twin/mrc/_fastpath.c", "twin/mrc/_sender.c", "twin/mrc/_receiver.c"],
    depends=["twin/mrc/_fastpath.h"], libraries=["z"],
    # -ffp-contract=off: no fused multiply-adds, so the compiled transport's window
    # arithmetic rounds as Python's does (the differential test compares floats with ==)
    extra_compile_args=["-O2", "-Wall", "-Wextra", "-Wno-missing-field-initializers",
                        "-Wno-cast-function-type", "-ffp-contract=off"],
    optional=True)])
