"""Which transport an endpoint runs (twin.mrc.core): the compiled core where it is
built, the Python reference where asked for or where the module does not load."""

import subprocess
import sys
from pathlib import Path

import pytest

from twin.errors import UsageError
from twin.mrc import core, transport

ROOT = Path(__file__).resolve().parents[2]


def test_python_is_the_reference_and_says_it_was_asked_for(monkeypatch):
    monkeypatch.setenv(core.TRANSPORT_ENV, "python")
    t = core.load_transport()
    assert (t.sender, t.receiver, t.name) == (transport.Sender, transport.Receiver,
                                              "python: asked for")
    assert not t.compiled


def test_a_bad_value_names_the_variable_and_the_choices(monkeypatch):
    monkeypatch.setenv(core.TRANSPORT_ENV, "fast")
    with pytest.raises(UsageError, match=r"MRC_TWIN_TRANSPORT='fast': want one of auto, "
                                         r"compiled, python"):
        core.load_transport()


def test_auto_runs_the_compiled_core_where_it_is_built(monkeypatch):
    monkeypatch.delenv(core.TRANSPORT_ENV, raising=False)
    from twin.mrc import _fastpath  # CI builds it: `pip install -e .`
    t = core.load_transport()
    assert t.name == "compiled" and t.compiled
    assert (t.sender, t.receiver) == (_fastpath.Sender, _fastpath.Receiver)


def test_where_the_module_does_not_load_auto_falls_back_and_compiled_refuses(monkeypatch):
    import sys

    import twin.mrc
    monkeypatch.setitem(sys.modules, "twin.mrc._fastpath", None)  # import fails
    monkeypatch.delattr(twin.mrc, "_fastpath", raising=False)
    t = core.load_transport("auto")
    assert t.sender is transport.Sender
    assert t.name.startswith("python: the compiled module does not load")
    with pytest.raises(UsageError, match="MRC_TWIN_TRANSPORT=compiled, but the compiled "
                                         "module does not load"):
        core.load_transport("compiled")


def test_a_qp_asking_for_a_missing_compiled_core_is_told_which_argument_and_why(monkeypatch):
    """The control ops' `transport` argument: an error reply naming it, not the variable."""
    import sys

    import twin.mrc
    monkeypatch.setitem(sys.modules, "twin.mrc._fastpath", None)
    monkeypatch.delattr(twin.mrc, "_fastpath", raising=False)
    with pytest.raises(UsageError, match=r"^transport=compiled, but the compiled module does "
                                         r"not load .*`pip install -e \.` builds it"):
        core.load_transport("compiled", named="transport")
    assert core.short_name("python: asked for") == "python"


# -- one chooser (core.choose) for the transport core and the data path -----------------


@pytest.fixture
def no_module(monkeypatch):
    """The compiled module does not load; the ImportError's words, as they will be said."""
    import twin.mrc
    monkeypatch.setitem(sys.modules, "twin.mrc._fastpath", None)  # import fails
    monkeypatch.delattr(twin.mrc, "_fastpath", raising=False)
    try:
        from twin.mrc import _fastpath  # noqa: F401
    except ImportError as e:
        return str(e)
    raise AssertionError("the module still loads")


def test_where_the_module_is_built_both_choose_it_and_bind_it_once(monkeypatch):
    from twin.mrc import _fastpath
    from twin.mrc.loop import load_datapath
    for env in (core.TRANSPORT_ENV, "MRC_TWIN_DATAPATH"):
        monkeypatch.delenv(env, raising=False)
    assert core.choose(core.TRANSPORT) == core.Choice(_fastpath, "compiled")
    assert load_datapath() == (_fastpath, "compiled") == load_datapath("compiled")
    assert core.load_transport().name == "compiled" and _fastpath.bound()


def test_python_forced_by_each_variable_or_argument_runs_the_reference(monkeypatch):
    from twin.mrc.loop import load_datapath
    monkeypatch.setenv("MRC_TWIN_DATAPATH", "python")
    monkeypatch.setenv(core.TRANSPORT_ENV, "compiled")
    assert load_datapath() == (None, "python: asked for")
    assert core.load_transport().name == "compiled"  # each part reads its own variable
    monkeypatch.setenv("MRC_TWIN_DATAPATH", "compiled")
    monkeypatch.setenv(core.TRANSPORT_ENV, "python")
    assert core.load_transport() == core.REFERENCE
    assert load_datapath("python") == (None, "python: asked for")  # the argument first
    assert core.choose(core.TRANSPORT, "python") == core.Choice(None, "python: asked for")
    with pytest.raises(UsageError, match=r"^MRC_TWIN_DATAPATH='fast': want one of auto, "
                                         r"compiled, python$"):
        load_datapath("fast")


def test_where_the_module_is_missing_each_says_so_in_its_own_words(no_module):
    from twin.mrc.loop import load_datapath
    hint = "; `pip install -e .` builds it with gcc"
    assert load_datapath("auto") == (None, f"python: the compiled data path does not load "
                                           f"({no_module})")
    with pytest.raises(UsageError) as e:
        load_datapath("compiled")
    assert str(e.value) == (f"MRC_TWIN_DATAPATH=compiled, but twin.mrc._fastpath does not "
                            f"load ({no_module}){hint}")
    assert core.load_transport("auto").name == (f"python: the compiled module does not load "
                                                f"({no_module})")
    with pytest.raises(UsageError) as e:
        core.load_transport("compiled")
    assert str(e.value) == (f"MRC_TWIN_TRANSPORT=compiled, but the compiled module does not "
                            f"load ({no_module}){hint}")


def test_a_module_without_what_the_part_needs_is_not_chosen():
    part = core.Compiled("MRC_TWIN_NOTHING", "gone ({})", "gone ({})", ("NoSuchCore",),
                         "the compiled module was built without it")
    assert core.choose(part, "auto") == core.Choice(
        None, "python: the compiled module was built without it")
    with pytest.raises(UsageError, match=r"^MRC_TWIN_NOTHING=compiled, but the compiled "
                                         r"module was built without it; `pip install"):
        core.choose(part, "compiled")


def test_a_caller_the_module_cannot_serve_is_refused_with_its_own_hint():
    part = core.Compiled("MRC_TWIN_NOTHING", "gone ({})", "gone ({})")
    assert core.choose(part, "auto", unfit=("no", "; hint: ask for auto")) == core.Choice(
        None, "python: no")
    with pytest.raises(UsageError) as e:
        core.choose(part, "compiled", named="transport", unfit=("no", "; hint: ask for auto"))
    assert str(e.value) == "transport=compiled, but no; hint: ask for auto"


# -- the bind: the compiled core's Python dependencies, handed over by core.compiled() -----

BIND = """
from twin.mrc import _fastpath as fp  # straight, unbound: what core.compiled() saves us from
from twin.mrc import core
from twin.mrc.evset import EvSet


def attempt(what, call):
    try:
        call()
    except Exception as e:
        print(what, type(e).__name__, e, flush=True)
    else:
        print(what, "ok", flush=True)


def make():
    fp.Sender(EvSet([0, 1, 2, 3], 2, seed=1), 0)
    fp.Receiver(lambda va, payload: None)


print("bound", fp.bound(), flush=True)
attempt("unbound", make)
attempt("datapath", lambda: fp.build(bytes(fp.HEAD_BYTES), 0, 0, 0, 0, b"", None))
given = core.bindings()
attempt("positional", lambda: fp.bind(given))
attempt("missing", lambda: fp.bind(**{k: v for k, v in given.items() if k != "SackReport"}))
attempt("after missing", make)
attempt("extra", lambda: fp.bind(**given, Stranger=1))
attempt("wrong type", lambda: fp.bind(**{**given, "BUILD_CHUNK": "many"}))
print("bound", fp.bound(), flush=True)
attempt("bind", lambda: fp.bind(**given))
print("bound", fp.bound(), flush=True)
attempt("made", make)
attempt("again", lambda: fp.bind(**given))
print("compiled", core.compiled() is fp, flush=True)
"""


def test_the_compiled_core_is_made_only_once_bound_and_binds_exactly_what_core_hands_it():
    """In a fresh interpreter: a Sender or Receiver of the unbound module is a
    RuntimeError (not a crash), the data path needs nothing bound; bind takes keywords
    only, refuses a name missing, a name no part takes and a constant of the wrong type
    (and stays unbound), takes core.bindings() whole, and runs once."""
    pytest.importorskip("twin.mrc._fastpath")
    run = subprocess.run([sys.executable, "-c", BIND], cwd=ROOT, capture_output=True,
                         text=True, timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr[-2000:]
    lines = run.stdout.splitlines()
    unbound = ("RuntimeError twin.mrc._fastpath.Sender: twin.mrc._fastpath is not bound yet: "
               "twin.mrc.core.compiled() binds it (bind(...)) before any Sender or Receiver "
               "is made")
    assert lines == [
        "bound False",
        f"unbound {unbound}",
        "datapath ok",
        "positional TypeError bind() takes keyword arguments only",
        "missing TypeError bind() missing the keyword argument 'SackReport'",
        f"after missing {unbound}",
        "extra TypeError bind() got keyword arguments no part takes: ['Stranger']",
        "wrong type TypeError 'str' object cannot be interpreted as an integer",
        "bound False",
        "bind ok",
        "bound True",
        "made ok",
        "again RuntimeError twin.mrc._fastpath is bound already (bind() runs once: "
        "twin.mrc.core.compiled())",
        "compiled True",
    ]


def test_a_receiver_of_the_unbound_module_refuses_too():
    pytest.importorskip("twin.mrc._fastpath")
    script = ("from twin.mrc import _fastpath as fp\n"
              "try:\n    fp.Receiver(lambda va, payload: None)\n"
              "except RuntimeError as e:\n    print(e)\n")
    run = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True,
                         text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.startswith("twin.mrc._fastpath.Receiver: twin.mrc._fastpath is not "
                                 "bound yet")


def test_compiled_hands_over_the_module_bound():
    fp = pytest.importorskip("twin.mrc._fastpath")
    assert core.compiled() is fp and fp.bound()
    assert core.load_transport("compiled").sender is fp.Sender
