"""twin.validate: each validator accepts what it names and refuses the rest with one error
shape, `path: message (hint)`; and each site that checks through it (the fabric spec, drill
files, the endpoint's control requests, CLI options) refuses a bad value at its key path."""

import ipaddress
import math

import pytest
from click.testing import CliRunner

from twin import validate as V
from twin.chaos.drill import parse_drill
from twin.errors import Problem, SpecError, UsageError
from twin.fabric.spec import parse_spec
from twin.mrc import control as C
from twin.registry import Registry

# -- the error ---------------------------------------------------------------------------


def test_an_invalid_reads_path_message_hint_and_is_a_usage_error_and_a_value_error():
    e = V.Invalid("must be at most 64 (got 65)", "QPs per flow", "--qps")
    assert str(e) == "--qps: must be at most 64 (got 65) (QPs per flow)"
    assert isinstance(e, UsageError) and isinstance(e, ValueError) and e.exit_code == 2
    assert str(V.Invalid("is required")) == "is required"
    assert e.problem() == Problem("--qps", "must be at most 64 (got 65)", "QPs per flow")
    assert V.Invalid("x").problem().path == "(top level)"


def refused(v: V.Validator, value, path="k", ctx=None) -> str:
    with pytest.raises(V.Invalid) as info:
        v.check(value, path, ctx)
    assert info.value.path.startswith(path)
    return str(info.value)


# -- each validator: accepts, refuses -------------------------------------------------------


def test_int():
    v = V.Int(1, 16, hint="planes")
    assert v(1) == 1 and v(16) == 16
    assert refused(v, 0) == "k: must be at least 1 (got 0) (planes)"
    assert refused(v, 17) == "k: must be at most 16 (got 17) (planes)"
    assert refused(v, True) == "k: must be an integer (got true) (planes)"
    assert refused(v, "4") == "k: must be an integer (got '4') (planes)"
    assert refused(v, 4.0) == "k: must be an integer (got 4.0) (planes)"
    assert refused(V.Int(1, 64, words=V.SPAN), 65) == "k: must be an integer 1 to 64 (got 65)"


def test_an_integer_as_text_reads_decimal_and_prefixed_and_is_checked_as_one():
    v = V.Int(0, 0xFFFF, text=True, words=V.SPAN, what="an EV")
    assert v("0x12") == 18 and v(" 7 ") == 7 and v("0b101") == 5 and v(9) == 9
    assert refused(v, "zz") == "k: must be an EV 0 to 65535 (got 'zz')"
    assert refused(v, "0x10000") == "k: must be an EV 0 to 65535 (got 65536)"
    assert refused(v, "-1") == "k: must be an EV 0 to 65535 (got -1)"
    assert refused(v, "1.5") == "k: must be an EV 0 to 65535 (got '1.5')"
    assert refused(V.Int(0, 9), "7") == "k: must be an integer (got '7')"  # text: opt-in


def test_an_exclusive_lower_bound_refuses_the_bound_itself():
    v = V.Int(0, 9, above=True)
    assert v(1) == 1 and v(9) == 9
    assert refused(v, 0) == "k: must be more than 0 (got 0)"
    assert refused(v, -1) == "k: must be more than 0 (got -1)"
    f = V.Float(0, 100, above=True, words=V.SPAN, hint="%")
    assert f(1e-9) == 1e-9 and f(100) == 100
    assert refused(f, 0) == "k: must be a number more than 0, at most 100 (got 0) (%)"
    assert refused(f, 101) == "k: must be a number more than 0, at most 100 (got 101) (%)"
    assert refused(f, "x") == "k: must be a number more than 0, at most 100 (got 'x') (%)"
    one = V.Float(0, 100, above=True, words=V.ONE, what="a percentage in (0, 100]")
    assert refused(one, 0.0) == "k: must be a percentage in (0, 100] (got 0.0)"
    assert refused(one, math.nan) == "k: must be a percentage in (0, 100] (got nan)"


def test_int_bounds_may_be_computed_from_the_fields_checked_before():
    v = V.Int(0, lambda got: got["size"])
    assert v(5, "k", {"size": 5}) == 5
    assert refused(v, 6, ctx={"size": 5}) == "k: must be at most 5 (got 6)"


def test_float():
    v = V.Float(0.1, 60)
    assert v(0.1) == 0.1 and v(60) == 60
    for bad, got in ((math.nan, "nan"), (math.inf, "inf"), (True, "true"), ("1", "'1'")):
        assert refused(v, bad) == f"k: must be a number (got {got})"
    assert refused(v, 0.05) == "k: must be at least 0.1 (got 0.05)"
    assert refused(v, 61) == "k: must be at most 60 (got 61)"


def test_str():
    assert V.Str()("") == "" and V.Str(r"^[a-z]+$")("abc") == "abc"
    assert refused(V.Str(), 3) == "k: must be a string (got 3)"
    assert refused(V.Str(empty=False), "") == "k: must be a string (got '')"
    assert refused(V.Str(r"^[a-z]+$"), "A1") == "k: must be a string (got 'A1')"
    assert refused(V.Str(max_len=2), "abc") == "k: must be a string (got 'abc')"


def test_choice_of_names_or_of_a_registry():
    v = V.Choice(("bulk", "incast"))
    assert v("incast") == "incast"
    assert refused(v, "ring") == "k: must be one of bulk, incast (got 'ring')"
    assert refused(v, ["bulk"]) == "k: must be one of bulk, incast (got list)"
    reg: Registry = Registry("toy", also=("auto",))
    reg.add("b", object())
    reg.add("a", object())
    assert V.Choice(reg).names == ("auto", "a", "b") and V.Choice(reg)("auto") == "auto"
    assert refused(V.Choice(reg), "c") == "k: must be one of auto, a, b (got 'c')"


def test_bool():
    assert V.Bool()(False) is False
    assert refused(V.Bool(), "yes") == "k: must be true or false (got 'yes')"
    assert refused(V.Bool(), 1) == "k: must be true or false (got 1)"


def test_size():
    v = V.Size(1, 1 << 32)
    assert v("64M") == 64 << 20 and v("1GiB") == 1 << 30 and v(4096) == 4096
    hint = " (K, M and G are powers of 1024)"
    assert refused(v, "lots") == "k: must be a size in bytes such as 80KB or 81920 " \
        "(got 'lots')" + hint
    assert refused(v, True).startswith("k: must be a size in bytes")
    assert refused(v, "0") == "k: must be at least 1 (got 0)" + hint
    assert refused(v, "5G") == f"k: must be at most {1 << 32} (got 5G)" + hint
    assert refused(V.Size(words=V.ONE), -1) == \
        "k: must be a size in bytes such as 80KB or 81920 (got -1)" + hint
    assert refused(V.Size(numbers=False), 4096).startswith("k: must be a size")


def test_rate_and_duration():
    assert V.Rate()("10gbit") == 10**10
    assert refused(V.Rate(), "fast") == "k: must be a rate such as 100mbit or 10gbit " \
        "(got 'fast') (units are tc's: bit, kbit, mbit, gbit, tbit)"
    d = V.Duration(10**9, hi_hint="short")
    assert d("300ms") == 300_000_000
    assert refused(d, "300") == "k: must be a duration such as 300ms (got '300') " \
        "(units: us, ms, s)"
    assert refused(d, "2s") == "k: must be at most 1s (got 2s) (short)"
    lo = V.Duration(lo=10_000_000, lo_hint="each flap runs `ip`")
    assert lo("10ms") == 10_000_000
    assert refused(lo, "5ms") == "k: must be at least 10ms (got 5ms) (each flap runs `ip`)"


def test_ipv6_prefix():
    v = V.IPv6Prefix(48, "fd00::/8", hint="h")
    assert v("fd00:1::/48") == ipaddress.IPv6Network("fd00:1::/48")
    assert refused(v, "fd00:1::/64") == "k: must be a /48 (got /64) (h)"
    assert refused(v, "2001:db8::/48") == "k: must lie within fd00::/8 (got 2001:db8::/48) (h)"
    assert refused(v, "fd00::1/48").startswith("k: must be an IPv6 prefix (")


def test_list_of():
    v = V.ListOf(V.Int(0, 9), max_len=2, noun="EVs")
    assert v([1, 2]) == [1, 2] and v([]) == []
    assert refused(v, "ab") == "k: must be a list (got 'ab')"
    assert refused(v, [1, 2, 3]) == "k: has 3 EVs; at most 2"
    with pytest.raises(V.Invalid) as info:
        v([1, 10], "evs")
    assert str(info.value) == "evs[1]: must be at most 9 (got 10)"


def test_optional():
    assert V.Optional(V.Int(0, 1))(None) is None and V.Optional(V.Int(0, 1))(1) == 1
    assert refused(V.Optional(V.Int(0, 1)), 2) == "k: must be at most 1 (got 2)"


def test_record_checks_known_keys_required_ones_and_each_field_in_order():
    r = V.Record({"a": V.Int(0, 9), "b": V.Int(0, lambda got: got["a"]), "c": V.Bool()},
                 defaults={"c": False}, optional=("b",))
    assert r({"a": 3}) == {"a": 3, "c": False}
    assert r({"a": 3, "b": 2, "c": True}) == {"a": 3, "b": 2, "c": True}
    assert refused(r, {"a": 3, "b": 4}, "x") == "x.b: must be at most 3 (got 4)"
    assert refused(r, {"b": 1}, "x") == "x.a: is required"
    assert refused(r, {"a": 1, "bb": 1}, "x") == "x.bb: unknown key (did you mean 'b'?)"
    assert refused(r, [], "x") == "x: must be a mapping (got list)"
    assert V.Record({"a": V.Int()}, extra="ignore")({"a": 1, "z": 2}) == {"a": 1}


def test_record_collect_reports_every_problem_not_only_the_first():
    r = V.Record({"a": V.Int(0, 9), "b": V.Bool()})
    p = V.Problems()
    assert r.collect({"a": 10, "b": "no", "q": 1}, "x", p) == {}
    assert [(q.path, q.message) for q in p.problems] == [
        ("x.q", "unknown key"), ("x.a", "must be at most 9 (got 10)"),
        ("x.b", "must be true or false (got 'no')")]


def test_problems_collects_refusals_at_their_key_paths():
    p = V.Problems()
    assert p.check(V.Int(0, 1), {"n": 5}, "n", "bgp.timers") is None
    assert p.check(V.Int(0, 1), {}, "n") is None  # missing: not this check's business
    assert p.check(V.Int(0, 9), {"n": 5}, "n") == 5
    assert p.mapping(3, "srv6", {"block"}, "e.g. srv6: {}") == {}
    p.keys({"blok": 1}, ["block"], "srv6")
    assert [str(q.render()) for q in p.problems] == [
        "  bgp.timers.n: must be at most 1 (got 5)",
        "  srv6: must be a mapping (got 3)\n    hint: e.g. srv6: {}",
        "  srv6.blok: unknown key\n    hint: did you mean 'block'?"]
    assert len(p) == 3 and p


# -- each site refuses a bad value at its key path, through its validator -------------------

SPEC = "name: s\nplanes: 2\nracks: 2\nhosts_per_rack: 2\nt1_per_plane: 2\n"


@pytest.mark.parametrize("extra,path,message", [
    ("mtu: 70000", "mtu", "must be at most 65535 (got 70000)"),
    ("rate: {host: 1gbit}\ncongestion: {trim: 0}", "congestion.trim",
     "must be a size in bytes such as 80KB or 81920 (got 0)"),
    ("rate: 1gbit\ncongestion: {ecn: {last_hop: 1}}", "congestion.ecn.last_hop",
     "must be true or false (got 1)"),
    ("srv6: {dataplane: vpp}", "srv6.dataplane", "unknown data plane 'vpp'"),
    ("nic_prefix: fd00::/40", "nic_prefix", "must be a /48 (got /40)"),
    ("routing: bgp\nbgp: {timers: {keepalive: 0}}", "bgp.timers.keepalive",
     "must be at least 1 (got 0)"),
])
def test_the_spec_refuses_a_bad_value_at_its_key_path(extra, path, message):
    with pytest.raises(SpecError) as info:
        parse_spec(SPEC + extra)
    assert (path, message) in [(p.path, p.message) for p in info.value.problems]


DRILL = "name: d\nmethod:\n  traffic: {pattern: bulk, src: r0h0, dst: r1h0, %s}\n"


@pytest.mark.parametrize("field,path,message", [
    ("qps: 65", "method.traffic.qps", "must be an integer 1 to 64 (got 65)"),
    ("evs: 0", "method.traffic.evs", "must be an integer 1 to 4096 (got 0)"),
    ("size: 8G", "method.traffic.size", "must be a size such as 64M, at most 4G (got '8G')"),
    ("ecn: maybe", "method.traffic.ecn", "must be true or false (got 'maybe')"),
    ("for: 11m", "method.traffic.for", "must be a duration such as 300ms (got '11m')"),
    ("for: 700s", "method.traffic.for", "must be at most 600s (got 700s)"),
    ("pattern: ring2", "method.traffic.pattern", "must be one of"),
    ("senders: [r0h0, 3]", "method.traffic.senders[1]", "must be a string (got 3)"),
])
def test_a_drill_refuses_a_bad_value_at_its_key_path(field, path, message):
    with pytest.raises(SpecError) as info:
        parse_drill(DRILL % field)
    got = {p.path: p.message for p in info.value.problems}
    assert path in got and got[path].startswith(message), got


def test_each_control_op_is_one_record_of_its_arguments_in_the_protocols_words():
    for op in C.OPS.values():
        assert isinstance(op.record, V.Record)
        assert list(op.record.fields) == [a.name for a in op.args]
    record = C.OPS["recv_qp"].record
    assert record.words is C.WIRE
    with pytest.raises(V.Invalid) as info:
        record.check({"op": "recv_qp", "size": -1}, "", None)
    assert (info.value.path, info.value.message) == ("size", f"must be in 1..{C.buffer_limit()}, "
                                                               "got -1")


@pytest.mark.parametrize("argv,message", [
    (["traffic", "bulk", "--qps", "65"],
     "--qps: must be an integer 1 to 64 (got 65) (QPs per flow)"),
    (["traffic", "bulk", "--evs", "5000"],
     "--evs: must be an integer 1 to 4096 (got 5000) (entropy values per QP)"),
    (["traffic", "bulk", "--size", "0"], "--size: must be at least 1 (got 0)"),
    (["traffic", "bulk", "--cut-at", "-1"], "--cut-at: must be at least 0 (got -1.0)"),
    (["top", "--period", "0"], "--period: must be a number 0.1 to 60 (got 0.0) (seconds)"),
    (["probe", "--duration", "0"],
     "--duration: must be a number more than 0, at most 86400 (got 0.0) (seconds)"),
    (["probe", "--duration", "nan"],
     "--duration: must be a number more than 0, at most 86400 (got nan) (seconds)"),
    (["probe", "--period", "0"],
     "--period: must be a number 1 to 60000 (got 0.0) (milliseconds)"),
    (["stats", "--events", "--kind", "retire", "--kind", "nope"],
     "--kind: must be one of loss, first_loss"),
    (["size", "--radix", "511", "--planes", "8"],
     "--radix: must be an even number of ports, at least 4 (got 511)"),
    (["size", "--radix", "2", "--planes", "8"],
     "--radix: must be an even number of ports, at least 4 (got 2)"),
    (["size", "--radix", "512", "--planes", "17"], "--planes: must be an integer 1 to 16 (got 17)"),
    (["probe", "--rate", "60000"],
     "--rate: must be a number 1 to 50000 (got 60000.0) (probes per second)"),
])
def test_cli_options_are_refused_at_the_option_with_exit_2(tmp_path, monkeypatch, argv,
                                                           message):
    from twin.cli import main
    monkeypatch.setenv("TWIN_RUN_DIR", str(tmp_path))  # no lab: the option fails first
    result = CliRunner().invoke(main, argv)
    assert result.exit_code == 2, result.output
    assert message in " ".join(result.output.split()) and "Traceback" not in result.output


STEP = "name: d\nmethod:\n  traffic: {pattern: incast}\n  timeline:\n    - {at: 3ms, %s}\n"
LINK = "target: t0-p0-r0:eth3, fault:"


@pytest.mark.parametrize("step,key,message", [
    (f"{LINK} link-loss, percent: 0", "percent", "must be a percentage in (0, 100] (got 0)"),
    (f"{LINK} link-loss, percent: 101", "percent",
     "must be a percentage in (0, 100] (got 101)"),
    (f"{LINK} link-loss, percent: .nan", "percent",
     "must be a percentage in (0, 100] (got nan)"),
    (f"{LINK} link-loss", "percent", "is required for link-loss"),
    ("target: 0, fault: plane-loss, percent: '5'", "percent",
     "must be a percentage in (0, 100] (got '5')"),
    (f"{LINK} link-rate, rate: fast", "rate", "must be a rate such as 100mbit or 10gbit"),
    (f"{LINK} link-rate", "rate", "is required for link-rate"),
    (f"{LINK} link-flap, count: 0, period: 100ms", "count",
     "must be an integer 1 to 1000 (got 0)"),
    (f"{LINK} link-flap, count: 2", "period", "is required for link-flap"),
    (f"{LINK} link-flap, count: 2, period: 5ms", "period", "must be at least 10ms (got 5ms)"),
    (f"{LINK} link-flap, count: 2, period: 700s", "period", "must be at most 600s (got 700s)"),
    (f"{LINK} link-flap, count: 2, period: 1", "period", "must be a duration such as 300ms"),
])
def test_a_drill_steps_fault_params_are_refused_at_their_key_path(step, key, message):
    with pytest.raises(SpecError) as info:
        parse_drill(STEP % step)
    got = {p.path: p.message for p in info.value.problems}
    path = f"method.timeline[0].{key}"
    assert path in got and got[path].startswith(message), got


def test_a_fault_kinds_params_are_data_each_checked_by_a_validator():
    from twin.faults.registry import KINDS

    for kind in KINDS.values():
        for p in kind.params:
            assert p.flag or isinstance(p.check, V.Validator), (kind.name, p.name)
            assert p.drill is False or p.in_drill is not None, (kind.name, p.name)


@pytest.mark.parametrize("argv,message", [
    (["fault", "link-loss", "t0-p0-r0:eth3", "0"],
     "PERCENT: must be a percentage in (0, 100] (got 0.0)"),
    (["fault", "link-loss", "t0-p0-r0:eth3", "-5"],
     "PERCENT: must be a percentage in (0, 100] (got -5.0)"),
    (["fault", "plane-loss", "0", "nan"], "PERCENT: must be a percentage in (0, 100] (got nan)"),
    (["fault", "link-rate", "t0-p0-r0:eth3", "fast"],
     "RATE: must be a rate such as 100mbit or 10gbit (got 'fast')"),
    (["fault", "link-flap", "t0-p0-r0:eth3", "--count", "0"],
     "--count: must be an integer 1 to 10000 (got 0) (flaps)"),
    (["fault", "link-flap", "t0-p0-r0:eth3", "--period", "0"],
     "--period: must be a number 0.01 to 3600 (got 0.0) (seconds)"),
])
def test_a_fault_commands_values_are_refused_by_its_params_validators(tmp_path, monkeypatch,
                                                                      argv, message):
    test_cli_options_are_refused_at_the_option_with_exit_2(tmp_path, monkeypatch, argv,
                                                           message)
