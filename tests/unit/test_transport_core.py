"""Which transport an endpoint runs (twin.mrc.core): the compiled core where it is
built, the Python reference where asked for or where the module does not load."""

import pytest

from twin.errors import UsageError
from twin.mrc import core, transport


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
