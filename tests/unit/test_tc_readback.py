"""`tc -j filter show` read back once (twin.node.ebpf.tc), by the SID check, the fabric signals'
check and the node's own counters: tc's answers as iproute2 prints them, and as a newer
or broken one might (keys missing, other types, another top level), none a traceback."""

from __future__ import annotations

import json
import subprocess
from dataclasses import asdict

import pytest

from twin import dataplane
from twin.lab.compile import compile_spec
from twin.node import ebpf
from twin.node.ebpf import tc

UN_NAME = "mrc-un fcbb:bb00:200::/48"


def head(pref=100):
    """The chain's head entry `filter show` lists before the filter (no options)."""
    return {"protocol": "all", "pref": pref, "kind": "bpf", "chain": 0}


def bpf(name=UN_NAME, tag="a04f5eef06a7f555", prog_id=7, pref=100, **options):
    """A bpf filter entry as tc 6.1 prints it (captured from a lab's t1-p0-0)."""
    return {"protocol": "all", "pref": pref, "kind": "bpf", "chain": 0, "options": {
        "handle": "0x1", "bpf_name": name, "direct-action": True, "not_in_hw": True,
        "prog": {"id": prog_id, "name": "mrc_un", "tag": tag, "jited": 1}, **options}}


# -- parse_show: one answer ----------------------------------------------------------


def test_tc_6_1s_answer_is_one_typed_record_per_filter():
    [f] = tc.parse_show(json.dumps([head(), bpf()]), "eth1", tc.INGRESS)
    assert f == tc.BpfFilter("eth1", "ingress", 100, "0x1", UN_NAME, 7, "mrc_un",
                             "a04f5eef06a7f555")


def test_no_clsact_or_no_filter_is_an_empty_list():
    assert tc.parse_show("[]", "lo", tc.INGRESS) == []  # `tc -j filter show dev lo ingress`
    assert tc.parse_show(json.dumps([head()]), "eth1", tc.EGRESS) == []


@pytest.mark.parametrize("entry", [
    "bpf", 7, None, ["kind", "bpf"],  # not an object
    {"pref": 100, "kind": "u32", "options": {"handle": "800::800"}},  # another kind
    {"pref": 100, "kind": ["bpf"], "options": {}},  # kind of another type
    {"pref": 100, "kind": "bpf", "options": ["bpf_name", UN_NAME]},  # options a list
    {"pref": 100, "kind": "bpf", "options": None},
])
def test_entries_of_another_shape_are_passed_over(entry):
    assert tc.parse_show(json.dumps([entry, bpf()]), "eth1", tc.INGRESS)[0].name == UN_NAME
    assert len(tc.parse_show(json.dumps([entry]), "eth1", tc.INGRESS)) == 0


@pytest.mark.parametrize("change,field,value", [
    (lambda e: e["options"].pop("prog"), "prog_id", None),  # an older tc: no prog info
    (lambda e: e["options"].update(prog=[7, "tag"]), "tag", None),
    (lambda e: e["options"]["prog"].pop("tag"), "tag", None),
    (lambda e: e["options"]["prog"].update(id="7"), "prog_id", None),
    (lambda e: e["options"]["prog"].update(tag=0xA04F), "tag", None),
    (lambda e: e.update(pref="100"), "prio", None),
    (lambda e: e.update(pref=True), "prio", None),
    (lambda e: e.pop("pref"), "prio", None),
    (lambda e: e["options"].update(handle=1), "handle", "0x1"),  # a number, not text
    (lambda e: e["options"].pop("bpf_name"), "name", None),
    (lambda e: e["options"].update(bpf_name={"name": UN_NAME}), "name", None),
    (lambda e: e["options"]["prog"].update(jited="yes", xlated=True), "prog_id", 7),  # new keys
])
def test_a_field_missing_or_of_another_type_is_none(change, field, value):
    entry = bpf()
    change(entry)
    [f] = tc.parse_show(json.dumps([entry]), "eth1", tc.INGRESS)
    assert getattr(f, field) == value


@pytest.mark.parametrize("text,says", [
    ("Cannot find device \"eth9\"", "not JSON"),
    ("", "not JSON"),
    ('[{"kind": "bpf"', "not JSON"),
    (json.dumps({"filters": [bpf()]}), "a JSON dict, not a list of filters"),
    ("null", "a JSON NoneType, not a list of filters"),
    ("7", "a JSON int, not a list of filters"),
])
def test_an_answer_that_is_not_a_list_of_filters_is_a_clear_error(text, says):
    with pytest.raises(tc.TcOutputError, match=says):
        tc.parse_show(text, "eth1", tc.INGRESS)


# -- read_batch: one answer per hook ---------------------------------------------------


HOOKS = [("eth1", tc.INGRESS), ("eth2", tc.EGRESS)]


def test_a_batch_pairs_each_hook_with_its_line():
    text = json.dumps([head(), bpf()]) + "\n\n" + json.dumps([]) + "\n"
    one, two = tc.read_batch(text, HOOKS)
    assert (one.dev, one.direction, one.error, one.at(100).prog_id) == ("eth1", "ingress", "", 7)
    assert (two.dev, two.direction, two.filters, two.error) == ("eth2", "egress", (), "")
    assert two.at(100) is None and one.at(49152) is None


@pytest.mark.parametrize("text", ["", None, json.dumps([bpf()])])
def test_a_hook_without_its_line_says_tc_printed_no_answer(text):
    shown = tc.read_batch(text, HOOKS)
    assert "tc printed no answer for it" in shown[-1].error and not shown[-1].filters


def test_a_bad_line_spoils_its_own_hook_only():
    one, two = tc.read_batch('{"oops": 1}\n' + json.dumps([bpf()]), HOOKS)
    assert "a JSON dict" in one.error and two.error == "" and two.at(100).name == UN_NAME


# -- the checks that read back through it ----------------------------------------------


class Node:
    """A runtime whose node answers `tc -j -batch -` with `answer(devs)`."""

    def __init__(self, answer):
        self.answer = answer
        self.calls = 0

    def exec(self, node, argv, *, input=None, check=True, timeout=60):
        assert argv == ["tc", "-j", "-batch", "-"] and not check
        self.calls += 1
        hooks = [(line.split()[3], line.split()[4]) for line in input.splitlines()]
        return type("Done", (), {"stdout": self.answer(hooks)})()


def lines(per_hook) -> callable:
    return lambda hooks: "\n".join(json.dumps(per_hook(dev, d)) for dev, d in hooks) + "\n"


@pytest.fixture(scope="module")
def shaped():
    return compile_spec("mrc-4p-shaped").plan


def queues(node):
    """Each planned queue's filter, as its port's egress shows it when all is well."""
    return {q.dev: bpf(ebpf.queue_name(asdict(q)), sorted(ebpf.queue_tags(asdict(q)))[0])
            for q in node.queues}


def test_check_signals_reads_every_port_back_in_one_tc_call(shaped):
    node, backend = shaped["t1-p0-0"], dataplane.get("seg6local")
    good = queues(node)
    rt = Node(lines(lambda dev, d: [head(), good[dev]] if d == "egress" else []))
    assert backend.check_signals(rt, node) == [] and rt.calls == 1
    rt = Node(lines(lambda dev, d: [head(), good[dev]] if dev != "eth2" else [head()]))
    assert backend.check_signals(rt, node) == [
        f"missing queue program at eth2 egress ({node.queues[1].rate_bps} bit/s)"]
    rt = Node(lines(lambda dev, d: [bpf("mrc-q eth9", "0123456789abcdef", prog_id=9)]))
    problems = backend.check_signals(rt, node)
    assert len(problems) == 2 and problems[0].startswith(
        "queue program at eth1 egress (") and "attached is 'mrc-q eth9' (program 9, tag " \
        "0123456789abcdef), planned " in problems[0]


@pytest.mark.parametrize("answer,says", [
    (lambda hooks: "Error: Cannot find device \"eth1\".\n", "not JSON"),
    (lambda hooks: json.dumps({"eth1": []}) + "\n", "a JSON dict"),
    (lambda hooks: "", "tc printed no answer"),
])
def test_check_signals_says_what_it_could_not_read(shaped, answer, says):
    node = shaped["t1-p0-0"]
    problems = dataplane.get("seg6local").check_signals(Node(answer), node)
    assert problems and all(": could not read its filters back (" in p for p in problems)
    assert says in problems[0]


def test_check_signals_on_an_ecn_port_with_a_filter_of_another_shape(shaped):
    node = shaped["r0h0"]
    rt = Node(lines(lambda dev, d: [{"kind": "bpf", "pref": 100, "options": {"bpf_name": 7}}]))
    problems = dataplane.get("seg6local").check_signals(rt, node)
    assert problems[0].startswith("RFC 6040 program ") and "attached is None (program None, " \
        "tag None)" in problems[0]


def test_check_sids_reads_back_through_the_same_records():
    node = compile_spec("mrc-4p").plan["t1-p0-0"]
    tags = sorted(ebpf.expected_tags("uN", "fcbb:bb00:200::/48"))
    tag = tags[0]
    backend = dataplane.get("ebpf")
    rt = Node(lines(lambda dev, d: [head(), bpf(tag=tag)]))
    assert backend.check_sids(rt, node, []) == [] and rt.calls == 1
    no_prog = bpf(tag=tag)
    del no_prog["options"]["prog"]
    [problem, _] = backend.check_sids(Node(lines(lambda dev, d: [no_prog])), node, [])
    assert problem == (f"eBPF uN fcbb:bb00:200::/48 at eth1 ingress: attached is {UN_NAME!r} "
                       f"(program None, tag None), planned tag {' or '.join(tags)}")
    [problem, _] = backend.check_sids(Node(lambda hooks: "[]\n"), node, [])
    assert problem == "missing eBPF uN fcbb:bb00:200::/48 at eth1 ingress (no program attached)"
    [_, problem] = backend.check_sids(Node(lambda hooks: "[]\n"), node, [])
    assert problem.startswith("eBPF uN fcbb:bb00:200::/48 at eth2 ingress: could not read "
                              "its filters back (tc printed no answer for it")


# -- the node's own readback (its counters) ---------------------------------------------


def run(stdout, returncode=0):
    return lambda argv, **kw: subprocess.CompletedProcess(argv, returncode, stdout, "")


def test_the_node_lists_its_own_filters_from_the_same_records(monkeypatch):
    other = bpf("cilium_from_netdev", "1111111111111111", prog_id=3, pref=1)
    no_id = bpf("mrc-decap x")
    no_id["options"]["prog"].pop("id")
    monkeypatch.setattr(subprocess, "run", run(json.dumps([head(), bpf(), other, no_id])))
    assert ebpf.filters("eth1") == [{"name": UN_NAME, "prog_id": 7, "tag": "a04f5eef06a7f555"}]
    monkeypatch.setattr(subprocess, "run", run("", returncode=1))  # no clsact
    assert ebpf.filters("eth1", egress=True) == []
    monkeypatch.setattr(subprocess, "run", run('{"filters": []}'))
    with pytest.raises(tc.TcOutputError, match="a JSON dict, not a list of filters"):
        ebpf.filters("eth1")
