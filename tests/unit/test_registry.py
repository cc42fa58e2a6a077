"""twin.registry.Registry, and the five registries built on it (runtimes, data planes,
fault kinds, route-table formats, congestion controls): each registers by name, refuses a
name twice, and answers a miss with one error, UnknownName (a UsageError, exit 2), whose
message lists the valid names, through its real entry point as well."""

from __future__ import annotations

import enum
from pathlib import Path

import pytest

from tests.helpers import cli as twin
from twin import dataplane, runtime
from twin.errors import SpecError, UnknownName, UsageError
from twin.faults.registry import KINDS
from twin.mrc import cc as CC
from twin.registry import Registry
from twin.routes import formats

ROOT = Path(__file__).resolve().parents[2]
SPEC = str(ROOT / "lab" / "fabrics" / "mrc-4p.yml")

# -- the class -----------------------------------------------------------------------------


def toys() -> Registry:
    reg: Registry = Registry("toy", make=lambda cls: cls(), also=("auto",),
                             hint="see `twin toy --help`")

    @reg.register
    class Top:
        """Spins on its point. A second line no help shows."""
        name = "top"

    @reg.register
    class Ball:
        name = "ball"
        summary = "bounces"

    @reg.register
    class Kite:
        name = "kite"

    return reg


def test_register_holds_what_make_makes_by_name():
    reg = toys()
    assert reg.names() == ("ball", "kite", "top")  # sorted by default
    assert list(reg) == ["ball", "kite", "top"] and len(reg) == 3
    assert "top" in reg and "auto" not in reg and 3 not in reg
    assert type(reg.get("top")).__name__ == "Top" and reg["ball"] is reg.get("ball")
    assert [n for n, _ in reg.items()] == list(reg.names()) and len(reg.values()) == 3
    assert reg.valid() == ("auto", "ball", "kite", "top")


def test_the_class_itself_is_the_entry_without_make():
    reg: Registry = Registry("thing")

    @reg.register
    class Thing:
        name = "thing"

    assert reg.get("thing") is Thing


def test_a_name_registered_twice_is_refused():
    reg = toys()

    class Other:
        name = "top"

    with pytest.raises(ValueError, match="toy 'top' is registered already"):
        reg.register(Other)
    with pytest.raises(ValueError, match="registered already"):
        reg.add("ball", object())
    reg.unregister("ball")
    reg.add("ball", "again")  # gone, the name is free
    reg.unregister("nothing")  # absent is fine


def test_a_miss_lists_the_valid_names_in_one_error_type():
    reg = toys()
    with pytest.raises(UnknownName) as e:
        reg.get("yoyo")
    assert str(e.value) == ("unknown toy 'yoyo'; one of: auto, ball, kite, top "
                            "(see `twin toy --help`)")
    assert isinstance(e.value, UsageError) and e.value.exit_code == 2
    assert e.value.names == ("auto", "ball", "kite", "top") and e.value.name == "yoyo"
    assert e.value.listed == "auto, ball, kite, top"
    with pytest.raises(UnknownName, match="unknown toy 3; one of"):
        reg[3]
    assert reg.find("yoyo") is None and reg.find(["a list"]) is None
    assert str(reg.miss("yoyo")) == str(e.value)
    assert str(Registry("x").miss("y")) == "unknown x 'y'; one of: (none)"


def test_help_text_is_drawn_from_each_entry():
    reg = toys()
    assert reg.describe() == "ball: bounces; kite; top: Spins on its point. A second line " \
        "no help shows."
    assert reg.describe(sep="\n").splitlines()[0] == "ball: bounces"
    assert reg.listed() == "auto, ball, kite, top"


def test_a_registry_over_an_enum_keeps_its_order_and_help():
    class Colour(enum.StrEnum):
        RED = "red"
        BLUE = "blue"

    reg = Registry.over(Colour, "colour")
    assert reg.names() == ("red", "blue") and reg.get("blue") is Colour.BLUE
    with pytest.raises(UnknownName, match="unknown colour 'green'; one of: red, blue$"):
        reg.get("green")
    assert CC.CCS.names() == CC.Cc.names() and CC.CCS.describe() == CC.Cc.described()


# -- the five, through their entry points ------------------------------------------------------


def test_the_five_registries_are_one_class():
    for reg in (runtime.RUNTIMES, dataplane.DATAPLANES, KINDS, formats.FORMATS, CC.CCS):
        assert isinstance(reg, Registry)
        with pytest.raises(UnknownName, match=f"unknown {reg.what} 'nope'; one of: "
                                              f"{reg.listed()}"):
            reg.get("nope")


def test_runtime_miss_lists_the_runtimes():
    with pytest.raises(UnknownName) as e:
        runtime.get_runtime("nope", "lab")
    assert e.value.names[0] == "auto" and {"netns", "docker"} <= set(e.value.names)
    with pytest.raises(UnknownName, match="unknown runtime 'nope'; one of: auto, "):
        runtime.pick_runtime("nope")
    res = twin("up", SPEC, "--runtime", "nope")
    assert res.exit_code == 2 and "'nope' is not one of 'auto'" in res.output
    assert "'netns'" in res.output and "Traceback" not in res.output


def test_dataplane_miss_lists_the_data_planes():
    with pytest.raises(UnknownName, match="unknown data plane 'nope'; one of: auto, ebpf, "
                                          "seg6local"):
        dataplane.get("nope")
    text = Path(SPEC).read_text() + "srv6: {dataplane: nope}\n"
    from twin.fabric.spec import DATAPLANES, parse_spec
    with pytest.raises(SpecError) as e:
        parse_spec(text, "spec.yml")
    assert "srv6.dataplane: unknown data plane 'nope'" in str(e.value)
    assert "one of auto, seg6local, ebpf" in str(e.value)
    assert set(DATAPLANES) == set(dataplane.DATAPLANES.valid())  # the spec's own copy
    from twin.cli.base import DATAPLANE_CHOICES  # the CLI's, kept light to import
    assert set(DATAPLANE_CHOICES) == set(dataplane.DATAPLANES.valid())
    res = twin("up", SPEC, "--dataplane", "nope")
    assert res.exit_code == 2 and "'auto', 'seg6local', 'ebpf'" in res.output


def test_fault_miss_lists_the_kinds():
    res = twin("fault", "nope", "t1-p0-1")
    assert res.exit_code == 2, res.output
    assert "unknown fault kind or command 'nope'; one of: " in res.output
    assert all(name in res.output for name in ("link-down", "switch-down", "clear", "list"))
    from twin.chaos.drill import parse_drill
    with pytest.raises(SpecError) as e:
        parse_drill("name: d\nmethod:\n  traffic: {pattern: bulk, src: r0h0, dst: r1h0}\n"
                    "  timeline: [{at: 100ms, fault: nope, target: a:b}]\n")
    assert "fault: unknown fault 'nope'" in str(e.value)
    assert f"one of: {KINDS.listed()}" in str(e.value)


def test_routes_format_miss_lists_the_formats(tmp_path):
    with pytest.raises(UnknownName) as e:
        formats.load_dir(tmp_path, None, "nope")
    assert str(e.value) == f"unknown route-table format 'nope'; one of: {formats.FORMATS.listed()}"
    assert {"iproute2-json", "iproute2-batch", "sonic", "frr", "nvue"} <= set(e.value.names)
    with pytest.raises(UnknownName, match="one of: .*iproute2-json"):
        formats.write_dir(tmp_path, None, None, "nope")
    res = twin("routes", "check", SPEC, str(tmp_path), "--format", "nope")
    assert res.exit_code == 2 and "'frr', 'iproute2-batch', 'iproute2-json'" in res.output


def test_a_format_is_an_abc():
    with pytest.raises(TypeError, match="abstract"):
        formats.Format()

    class Half(formats.Format):
        name = "half"

        def file_for(self, node: str) -> str:
            return node

    with pytest.raises(TypeError, match="abstract"):
        Half()


def test_cc_miss_lists_the_congestion_controls():
    assert CC.problem("nope", "mrc") == \
        "unknown congestion control 'nope'; one of: nscc, delay, dcqcn"
    res = twin("traffic", "--cc", "nope")
    assert res.exit_code == 2 and "'nscc', 'delay', 'dcqcn'" in res.output
    from twin.chaos.drill import parse_drill
    with pytest.raises(SpecError) as e:
        parse_drill("name: d\nmethod:\n  traffic: {pattern: bulk, src: r0h0, dst: r1h0, "
                    "cc: nope}\n")
    assert "method.traffic.cc: unknown congestion control 'nope'; one of: nscc" in str(e.value)
