"""Spec validation: shipped fabrics load; each kind of mistake has a golden message."""

from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.helpers import GOLDEN, golden
from twin.cli import main
from twin.errors import SpecError
from twin.fabric.spec import load_spec, parse_spec

ROOT = Path(__file__).resolve().parents[2]
ERROR_CASES = sorted(p.stem for p in (GOLDEN / "errors").glob("*.yml"))


@pytest.fixture(autouse=True)
def at_repo_root(monkeypatch):
    monkeypatch.chdir(ROOT)  # error texts name the spec by its relative path


def test_shipped_fabrics_load():
    four = load_spec(ROOT / "lab/fabrics/mrc-4p.yml")
    assert (four.planes, four.racks, four.hosts_per_rack, four.t1_per_plane) == (4, 2, 2, 2)
    assert four.nic_ports == 4 and four.mtu == 9000
    assert str(four.block) == "fcbb:bb00::/32"
    eight = load_spec(ROOT / "lab/fabrics/mrc-8p.yml")
    assert (eight.planes, eight.racks, eight.hosts_per_rack, eight.t1_per_plane) == (8, 4, 4, 4)


@pytest.mark.parametrize("case", ERROR_CASES)
def test_error_messages_are_golden(case):
    with pytest.raises(SpecError) as info:
        load_spec(f"tests/golden/errors/{case}.yml")
    golden(f"errors/{case}.err", info.value.render() + "\n")


@pytest.mark.parametrize("case", ERROR_CASES)
def test_cli_reports_spec_errors_with_exit_2_and_no_traceback(case):
    result = CliRunner().invoke(main, ["plan", f"tests/golden/errors/{case}.yml"])
    assert result.exit_code == 2
    assert "Traceback" not in result.output
    assert "problem" in result.output
    assert len(result.output.splitlines()) <= 25  # one screen


def test_all_problems_are_collected_not_just_the_first():
    with pytest.raises(SpecError) as info:
        load_spec("tests/golden/errors/wrong-types.yml")
    paths = [p.path for p in info.value.problems]
    assert paths == ["name", "planes", "hosts_per_rack", "t1_per_plane", "mtu", "rate"]


def test_rates_accept_tc_units_and_split_by_tier():
    base = "name: r\nplanes: 2\nracks: 1\nhosts_per_rack: 1\nt1_per_plane: 1\n"
    one = parse_spec(base + "rate: 2.5gbit\n")
    assert one.host_rate_bps == one.fabric_rate_bps == 2_500_000_000
    two = parse_spec(base + "rate: {host: 100mbit, fabric: 1gbit}\n")
    assert (two.host_rate_bps, two.fabric_rate_bps) == (100_000_000, 1_000_000_000)


def test_largest_fabric_that_fits_the_usid_layout_is_accepted():
    spec = parse_spec("name: max\nplanes: 16\nracks: 16\nhosts_per_rack: 16\n"
                      "t1_per_plane: 256\n")
    assert spec.hosts == 256


def test_missing_file_names_the_shipped_fabrics():
    result = CliRunner().invoke(main, ["plan", "no-such-fabric"])
    assert result.exit_code == 2
    assert "mrc-4p" in result.output and "mrc-8p" in result.output


def test_every_golden_error_has_its_spec_and_every_spec_its_error():
    errs = sorted(p.stem for p in (GOLDEN / "errors").glob("*.err"))
    assert errs == ERROR_CASES, "an .err without its .yml (or the reverse) goes untested"


def test_the_json_error_counts_its_problems_as_the_text_does():
    """--json said '1 problems in the fabric spec' where the text said '1 problem'."""
    from twin.errors import Problem

    one = SpecError("mine.yml", [Problem("planes", "must be 2 to 8", "")])
    assert one.to_dict()["error"] == "mine.yml: 1 problem in the fabric spec"
    assert one.render().splitlines()[0] == one.to_dict()["error"]
    many = SpecError("mine.yml", [Problem("planes", "x", "")] * 2, omitted=1000)
    assert many.to_dict()["error"] == "mine.yml: 1,002 problems in the fabric spec"
