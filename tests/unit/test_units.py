"""Sizes and rates as people type them (twin.units), and the CLI's words for bad ones."""

import pytest
from click.testing import CliRunner

from twin.cli import main
from twin.cli.traffic import SIZE
from twin.errors import UsageError
from twin.units import parse_rate, parse_size, show_bytes, show_count, show_rate


@pytest.mark.parametrize("text,value", [
    ("4096", 4096), ("64K", 64 << 10), ("256M", 256 << 20), ("1G", 1 << 30),
    ("256m", 256 << 20), ("256MB", 256 << 20), ("256MiB", 256 << 20), ("1.5K", 1536),
    (" 8M ", 8 << 20), ("0", 0), ("-4M", -(4 << 20)), ("1e3", 1000),
    ("1000000G", 1_000_000 << 30),
])
def test_sizes(text, value):
    assert parse_size(text) == value


@pytest.mark.parametrize("text", ["", "M", "lots", "12Q", "nan", "inf", "-inf", "1e999G",
                                  "4 M B x"])
def test_not_sizes(text):
    assert parse_size(text) is None


@pytest.mark.parametrize("text,value", [
    ("100mbit", 10**8), ("10gbit", 10**10), ("1.5Gbit", 1_500_000_000), ("64 kbit", 64_000),
    ("1tbit", 10**12), ("1bit", 1),
])
def test_rates(text, value):
    assert parse_rate(text) == value


@pytest.mark.parametrize("text", ["0gbit", "10G", "fast", "-1mbit", "nanmbit", "10 gbps"])
def test_not_rates(text):
    assert parse_rate(text) is None


HINT = " (K, M and G are powers of 1024)"


@pytest.mark.parametrize("text,message", [
    ("lots", "--size: must be bytes or K/M/G, e.g. 256M (got 'lots')" + HINT),
    ("inf", "--size: must be bytes or K/M/G, e.g. 256M (got 'inf')" + HINT),
    ("0", "--size: must be at least 1 (got 0)" + HINT),
    ("-1M", "--size: must be at least 1 (got -1M)" + HINT),
])
def test_the_cli_names_the_option(text, message):
    """`twin traffic --size` is checked by its validator (twin.validate), at the option."""
    with pytest.raises(UsageError) as info:
        SIZE.check(text, "--size")
    assert str(info.value) == message


def test_traffic_with_a_bad_size_is_exit_2_without_a_traceback(att):
    result = CliRunner().invoke(main, ["traffic", "bulk", "--src", "r0h0", "--dst",
                                       "r1h0", "--size", "inf"])
    assert result.exit_code == 2 and "--size: must be bytes or K/M/G" in result.output
    assert "Traceback" not in result.output


@pytest.mark.parametrize("n,shown", [
    (0, "0 B"), (512, "512 B"), (1023, "1023 B"), (1024, "1 KiB"), (1536, "1.5 KiB"),
    (64 << 20, "64 MiB"), (67_108_864 + 9_000_000, "72.6 MiB"), (1000 << 20, "0.977 GiB"),
    (4_294_967_295, "4 GiB"), (1 << 70, "1,048,576 PiB"),
])
def test_bytes_for_people(n, shown):
    assert show_bytes(n) == shown


@pytest.mark.parametrize("bps,shown", [
    (0, "0 bit/s"), (999, "999 bit/s"), (100e6, "100 Mbit/s"), (2.4e9, "2.4 Gbit/s"),
    (2.456e9, "2.46 Gbit/s"), (40e12, "40 Tbit/s"),
])
def test_rates_for_people(bps, shown):
    assert show_rate(bps) == shown


@pytest.mark.parametrize("n,shown", [
    (0, "0"), (999, "999"), (1000, "1 k"), (12_345, "12.3 k"), (999_499, "999 k"),
    (999_500, "1 M"), (4_294_967_295, "4.29 G"), (10**18, "1,000 P"),
])
def test_counts_for_people(n, shown):
    assert show_count(n) == shown
