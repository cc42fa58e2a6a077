"""The compiled module is built from the tree's sources, and knows it: `make venv`
rebuilds it when any of them changes, it carries their hash (twin/mrc/build_hash.py),
and an endpoint runs a stale one neither under auto (the reference, and why) nor under
compiled (a UsageError that says the same)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from twin.errors import UsageError
from twin.mrc import build_hash, core, transport
from twin.mrc.loop import load_datapath

ROOT = Path(__file__).resolve().parents[2]
MRC = ROOT / "twin" / "mrc"
fastpath = pytest.importorskip("twin.mrc._fastpath")
OTHER = "0123456789abcdef"  # a hash no tree has


def test_the_hash_covers_every_c_source_and_header_beside_the_module():
    on_disk = sorted(p.name for p in MRC.iterdir() if p.suffix in (".c", ".h"))
    assert sorted(build_hash.SOURCES + build_hash.HEADERS) == on_disk


def test_the_built_module_is_built_from_the_trees_sources():
    assert core.tree_hash() == build_hash.sources_hash(MRC)
    assert fastpath.SOURCES_HASH == core.tree_hash(), \
        "twin.mrc._fastpath is stale: `make venv` (or pip install -e .) rebuilds it"


def test_the_hash_is_of_every_file_in_full(tmp_path: Path):
    for name in build_hash.SOURCES + build_hash.HEADERS:
        shutil.copy(MRC / name, tmp_path / name)
    same = build_hash.sources_hash(tmp_path)
    assert same == build_hash.sources_hash(MRC) and len(same) == build_hash.HASH_DIGITS
    for name in build_hash.SOURCES + build_hash.HEADERS:  # each unit and header counts
        data = (tmp_path / name).read_bytes()
        (tmp_path / name).write_bytes(data + b"\n")
        assert build_hash.sources_hash(tmp_path) != same, f"{name}: a byte more, the same hash"
        (tmp_path / name).write_bytes(data)
    assert build_hash.sources_hash(tmp_path) == same
    (tmp_path / "_receiver.c").unlink()
    assert build_hash.sources_hash(tmp_path) is None  # nothing to compare with


@pytest.fixture
def stale(monkeypatch: pytest.MonkeyPatch) -> str:
    """The module says it was built from other sources: what an endpoint says of it."""
    monkeypatch.setattr(fastpath, "SOURCES_HASH", OTHER)
    return (f"the compiled module is stale (built from sources {OTHER}, the tree has "
            f"{core.tree_hash()}; `make venv` rebuilds it)")


def test_auto_runs_the_reference_where_the_module_is_stale_and_says_why(stale: str):
    t = core.load_transport("auto")
    assert (t.sender, t.receiver, t.name) == (transport.Sender, transport.Receiver,
                                              f"python: {stale}")
    assert load_datapath("auto") == (None, f"python: {stale}")


def test_compiled_refuses_a_stale_module(stale: str):
    with pytest.raises(UsageError) as e:
        core.load_transport("compiled")
    assert str(e.value) == f"MRC_TWIN_TRANSPORT=compiled, but {stale}"
    with pytest.raises(UsageError) as e:
        load_datapath("compiled")
    assert str(e.value) == f"MRC_TWIN_DATAPATH=compiled, but {stale}"


def test_without_its_sources_beside_it_the_module_is_trusted(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(fastpath, "SOURCES_HASH", OTHER)
    monkeypatch.setattr(core, "tree_hash", lambda: None)  # a wheel: no .c files
    assert core.load_transport("compiled").name == "compiled"
    assert load_datapath("compiled") == (fastpath, "compiled")


def test_make_venv_rebuilds_the_module_when_any_of_its_sources_changes(tmp_path: Path):
    """`make -n -W FILE`: what make would run were FILE changed, against a stamp newer
    than every file (so that nothing else makes it rebuild)."""
    make = shutil.which("make")
    if make is None:
        pytest.skip("no make")
    stamp = tmp_path / ".installed"
    stamp.touch()
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")}

    def rebuilds(*changed: Path) -> bool:
        argv = [make, "-n", "-C", str(ROOT), f"STAMP={stamp}", "venv"]
        for path in changed:
            argv += ["-W", str(path.relative_to(ROOT))]
        run = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=60,
                             check=True)
        return "pip install -q -e" in run.stdout

    assert not rebuilds()
    sources = sorted(MRC.glob("*.c")) + sorted(MRC.glob("*.h"))
    assert len(sources) == len(build_hash.SOURCES + build_hash.HEADERS)
    for path in [*sources, MRC / "build_hash.py", ROOT / "setup.py"]:
        assert rebuilds(path), f"{path.name} changed, and `make venv` would not rebuild"
