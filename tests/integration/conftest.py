"""Integration tiers share one run directory per session (never the default
/run/twin), so a module can keep one lab up across its tests. Every lab a
test brings up, it takes down; every lab name is the test's own: a prefix
and a random suffix, so a user's lab, another checkout's test run and ours
never meet (namespace and container names are machine-wide)."""

import os
import secrets
import signal
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import pytest

from twin.runtime.netns import leftover_namespaces

FABRICS = Path(__file__).resolve().parents[2] / "lab" / "fabrics"
# The built-in fabrics under the tests' own lab names: a user's mrc-4p (`make lab-up`)
# is never in the way of `make test`, and never touched by it. The suffix is random per
# session (TWIN_TEST_SUFFIX fixes it, to find a run's leftovers by name).
SUFFIX = os.environ.get("TWIN_TEST_SUFFIX") or f"-{secrets.token_hex(3)}"
LAB4, LAB8 = f"test-mrc-4p{SUFFIX}", f"test-mrc-8p{SUFFIX}"
BUILTIN = {LAB4: "mrc-4p", LAB8: "mrc-8p"}


def lab_name(prefix: str) -> str:
    """A lab name of this test session's own."""
    return f"{prefix}{SUFFIX}"


def own_spec(where: Path, lab: str, builtin: str | None = None) -> str:
    """Write the built-in fabric behind test lab `lab` (or `builtin`) into `where`,
    renamed to `lab`; its path."""
    builtin = builtin or BUILTIN[lab]
    path = Path(where) / f"{lab}.yml"
    path.write_text((FABRICS / f"{builtin}.yml").read_text().replace(
        f"name: {builtin}\n", f"name: {lab}\n", 1))
    return str(path)


def needs_dataplane(dataplane: str) -> None:
    """Skip, saying why, where this kernel cannot run `dataplane` (seg6local or ebpf)."""
    from twin.dataplane.probe import probe

    why = probe()[dataplane]
    if why:
        pytest.skip(f"this kernel has no {dataplane}: {why}")


def pytest_collection_modifyitems(config, items):
    """`first` tests run before every other, `last` after (test_users_lab.py)."""
    rank = {"first": 0, "last": 2}
    items.sort(key=lambda item: min((rank[m.name] for m in item.iter_markers()
                                     if m.name in rank), default=1))


class Bystander:
    """The user's lab test_users_lab.py watches: its hosts' endpoint sockets, checked
    after every module, so that a failure names the first module after which they
    stopped answering."""
    sockets: list[str] = []
    broken_after: str | None = None


def _answers(sock: str) -> bool:
    from twin.endpoints import EndpointClient
    from twin.errors import LabError

    try:
        with EndpointClient(sock, timeout=5) as c:
            c.hello()
        return True
    except (LabError, OSError, ValueError):
        return False


@pytest.fixture(autouse=True, scope="module")
def bystander_watch(request):
    yield
    if Bystander.sockets and Bystander.broken_after is None:
        dead = [s for s in Bystander.sockets if not _answers(s)]
        if dead:
            from twin.endpoints import log_tail

            logs = "\n".join(f"{s}: its log ends\n  {log_tail(Path(s).with_name('endpoint.log'))}"
                              for s in dead)
            Bystander.broken_after = f"{request.module.__name__}:\n{logs}"


@pytest.fixture(scope="session")
def session_dirs(tmp_path_factory):
    base = tmp_path_factory.mktemp("twin")
    return base


@pytest.fixture(autouse=True)
def private_dirs(session_dirs, monkeypatch):
    monkeypatch.setenv("TWIN_RUN_DIR", str(session_dirs / "run"))
    monkeypatch.setenv("TWIN_BUILD_DIR", str(session_dirs / "build"))
    return session_dirs


@pytest.fixture(autouse=True)
def faults_reverted(request, private_dirs):
    """A test that fails midway can leave its fault in force on its module's lab:
    whatever is still on the record after a test is reverted, so one failure stays one
    and the module's next test starts from a whole fabric (the record is the truth
    of what is in force, as for `twin fault clear`)."""
    yield
    from twin import faults as F

    for name in ("lab", "lab4"):
        att = request.node.funcargs.get(name)
        if att is not None and att.state.dir.exists() and F.active(att):
            set_env(private_dirs)  # a test may have moved the environment
            F.clear(att)


@contextmanager
def running_lab(session_dirs, spec: str, runtime: str, dataplane: str | None = None,
                routes: str | None = None):
    """A lab for the length of a module (`routes`: from an operator's tables); taken down
    whatever the tests did."""
    from twin import lab as L
    from twin import lifecycle

    set_env(session_dirs)
    if spec in (LAB4, LAB8):
        spec = own_spec(session_dirs, spec)
    state = L.up(spec, runtime, dataplane=dataplane, routes=routes).state
    try:
        yield L.attach(state.lab)
    finally:
        set_env(session_dirs)  # a test may have moved the environment
        lifecycle.down(state.lab)


@pytest.fixture(scope="module")
def lab4(session_dirs):
    """The session's mrc-4p (LAB4) on the netns runtime, for one module; once down, not
    one of its namespaces is left."""
    with running_lab(session_dirs, LAB4, "netns") as att:
        yield att
    assert namespaces_of(LAB4) == []


def pytest_generate_tests(metafunc):
    """A module that names `DATAPLANES` runs each test that uses `lab` once per data
    plane, on a lab of that data plane (see `lab`)."""
    dataplanes = getattr(metafunc.module, "DATAPLANES", None)
    if dataplanes and "lab" in metafunc.fixturenames:
        metafunc.parametrize("lab", dataplanes, indirect=True, scope="module")


@pytest.fixture(scope="module")
def lab(session_dirs, request):
    """A module's own lab on the netns runtime, for the module's tests, under the
    module's `LAB` name (so a module that breaks its lab breaks no other's); once down,
    not one of its namespaces is left. The module's names say which lab:

        LAB         its name (lab_name(prefix))
        FABRIC      the built-in fabric behind it (default mrc-4p), or
        SPEC        a spec's text, `{name}` where the lab's name goes
        DATAPLANES  one lab per data plane, `LAB-seg` and `LAB-ebp`, each skipped
                    saying why where this kernel does not run it (default: one lab,
                    on the data plane `auto` picks)
    """
    module = request.module
    dataplane = getattr(request, "param", None)
    name = module.LAB
    if dataplane is not None:
        needs_dataplane(dataplane)
        name = f"{name}-{dataplane[:3]}"
    if hasattr(module, "SPEC"):
        spec = Path(session_dirs) / f"{name}.yml"
        spec.write_text(module.SPEC.format(name=name))
    else:
        spec = own_spec(session_dirs, name, getattr(module, "FABRIC", "mrc-4p"))
    with running_lab(session_dirs, str(spec), "netns", dataplane=dataplane) as att:
        yield att
    assert namespaces_of(name) == []


def namespaces_of(lab: str) -> list[str]:
    return [n for n in leftover_namespaces() if n.startswith(f"twin-{lab}-")]


def set_env(session_dirs):
    os.environ["TWIN_RUN_DIR"] = str(session_dirs / "run")
    os.environ["TWIN_BUILD_DIR"] = str(session_dirs / "build")


def kill_up_midway(run_dir, build_dir, runtime: str, created, enough: int,
                   limit_s: float = 60) -> subprocess.CompletedProcess:
    """Start `twin up` of LAB8 in a child, SIGKILL it once `created()` counts `enough`
    nodes, then run `twin down --all`; return that command's result."""
    env = dict(os.environ, TWIN_RUN_DIR=str(run_dir), TWIN_BUILD_DIR=str(build_dir))
    spec = own_spec(Path(run_dir).parent, LAB8)
    proc = subprocess.Popen([sys.executable, "-m", "twin", "up", spec, "--runtime", runtime],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + limit_s
    while len(created()) < enough and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.01)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=10)
    assert created(), "the up was killed before it created anything"
    assert (run_dir / LAB8 / "lab.json").exists()  # state was on disk first
    return subprocess.run([sys.executable, "-m", "twin", "down", "--all"], env=env,
                          capture_output=True, text=True, timeout=300)
