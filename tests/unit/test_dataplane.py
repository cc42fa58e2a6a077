"""The data-plane seam without root: choosing one, the programs each backend writes,
reading them back, and a lab on the fake runtime's kernel model."""

import json

import pytest

from twin import dataplane
from twin import lab as L
from twin.dataplane.program import NodeProgram
from twin.errors import SpecError, UsageError
from twin.fabric.spec import parse_spec
from twin.lab.compile import compile_spec
from twin.runtime import fake
from twin.state import LabState

BOTH = {"seg6local": None, "ebpf": None}
NO_SEG6 = {"seg6local": "lwt encapsulation type not supported (CONFIG_IPV6_SEG6_LWTUNNEL)",
           "ebpf": None}


pytestmark = pytest.mark.usefixtures("clean_world")


def test_auto_prefers_the_kernels_own_srv6():
    assert dataplane.pick("auto", BOTH) == ("seg6local", "auto: the kernel has seg6local")


def test_auto_falls_back_to_ebpf_and_says_why():
    name, why = dataplane.pick("auto", NO_SEG6)
    assert name == "ebpf"
    assert why == ("auto: no seg6local (lwt encapsulation type not supported "
                   "(CONFIG_IPV6_SEG6_LWTUNNEL))")


def test_neither_is_one_error_naming_the_kernel_options():
    with pytest.raises(UsageError) as e:
        dataplane.pick("auto", {"seg6local": "no", "ebpf": "no bpf() system call"})
    text = str(e.value)
    assert e.value.exit_code == 2
    for option in ("CONFIG_IPV6_SEG6_LWTUNNEL", "CONFIG_NET_CLS_BPF", "CONFIG_NET_SCH_INGRESS"):
        assert option in text


def test_an_explicit_choice_the_kernel_lacks_is_refused():
    with pytest.raises(UsageError, match="data plane seg6local cannot run here: lwt"):
        dataplane.pick("seg6local", NO_SEG6)
    assert dataplane.pick("ebpf", NO_SEG6) == ("ebpf", "asked for")
    with pytest.raises(UsageError, match="unknown data plane .vpp.; one of: auto, ebpf, seg6local"):
        dataplane.pick("vpp", BOTH)


def test_the_spec_names_a_data_plane_or_gets_a_hint():
    spec = "name: x\nplanes: 1\nracks: 1\nhosts_per_rack: 1\nt1_per_plane: 1\n"
    assert parse_spec(spec).dataplane == "auto"
    assert parse_spec(spec + "srv6: {dataplane: ebpf}\n").dataplane == "ebpf"
    assert parse_spec(spec + "srv6: {dataplane: ebpf}\n").to_dict()["srv6"]["dataplane"] == "ebpf"
    with pytest.raises(SpecError) as e:
        parse_spec(spec + "srv6: {dataplane: vpp}\n", "x.yml")
    assert "srv6.dataplane: unknown data plane 'vpp'" in str(e.value)
    assert "CONFIG_NET_CLS_BPF" in str(e.value)


def test_a_program_round_trips_through_its_json():
    node = compile_spec("mrc-4p").plan["r1h0"]
    for backend in dataplane.DATAPLANES.values():
        program = backend.program(node)
        assert NodeProgram.from_dict(json.loads(program.to_json())) == program


def test_ebpf_reads_back_tc_json_and_names_what_differs():
    """`tc -j -batch` output as tc 6.1 prints it, one array per `filter show`."""
    from twin.node import ebpf

    node = compile_spec("mrc-4p").plan["t1-p0-0"]
    tag = sorted(ebpf.expected_tags("uN", "fcbb:bb00:200::/48"))[0]

    def filters(name, tag):
        return [{"protocol": "all", "pref": 100, "kind": "bpf", "chain": 0},
                {"protocol": "all", "pref": 100, "kind": "bpf", "chain": 0, "options": {
                    "handle": "0x1", "bpf_name": name, "direct-action": True,
                    "not_in_hw": True, "prog": {"id": 7, "name": "mrc_un", "tag": tag,
                                                "jited": 1}}}]

    class Node:
        def __init__(self, per_dev):
            self.per_dev = per_dev

        def exec(self, node, argv, *, input=None, check=True, timeout=60):
            assert argv == ["tc", "-j", "-batch", "-"]
            devs = [line.split()[3] for line in input.splitlines()]
            out = "\n".join(json.dumps(self.per_dev.get(d, [])) for d in devs)
            return type("Done", (), {"stdout": out + "\n"})()

    good = filters("mrc-un fcbb:bb00:200::/48", tag)
    backend = dataplane.get("ebpf")
    assert backend.check_sids(Node({"eth1": good, "eth2": good}), node, []) == []
    problems = backend.check_sids(Node({"eth1": good}), node, [])
    assert problems == ["missing eBPF uN fcbb:bb00:200::/48 at eth2 ingress "
                        "(no program attached)"]
    wrong = filters("mrc-un fcbb:bb00:201::/48", "0123456789abcdef")
    [problem] = backend.check_sids(Node({"eth1": good, "eth2": wrong}), node, [])
    assert problem.startswith("eBPF uN fcbb:bb00:200::/48 at eth2 ingress: attached is "
                              "'mrc-un fcbb:bb00:201::/48' (program 7, tag 0123456789abcdef)")


@pytest.mark.parametrize("kernel,expected", [(BOTH, "seg6local"), (NO_SEG6, "ebpf")])
def test_a_lab_records_its_data_plane_and_renders_its_programs(kernel, expected):
    fake.FakeRuntime.unavailable_dataplanes = {k: v for k, v in kernel.items() if v}
    up = L.up("mrc-4p", "fake")
    assert (up.state.dataplane, LabState.load("mrc-4p").dataplane) == (expected, expected)
    assert up.state.dataplane_why.startswith("auto: ")
    [status] = L.status("mrc-4p")
    assert status["dataplane"] == {"name": expected, "why": up.state.dataplane_why}
    att = L.attach("mrc-4p")
    assert att.dataplane.name == expected
    program = json.loads((att.compiled.build_dir() / "config/t0-p0-r0/program.json").read_text())
    assert program["dataplane"] == expected
    assert bool(program["bpf"]) == (expected == "ebpf")


def test_no_data_plane_refuses_the_lab_before_anything_exists():
    fake.FakeRuntime.unavailable_dataplanes = {"seg6local": "no", "ebpf": "no clsact"}
    with pytest.raises(UsageError, match="no SRv6 data plane can run on this kernel"):
        L.up("mrc-4p", "fake")
    assert fake.WORLD == {} and fake.FakeRuntime.calls == []
    assert LabState.load("mrc-4p") is None
