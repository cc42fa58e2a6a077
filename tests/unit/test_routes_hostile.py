"""Files that cannot hurt the checker (issue 36): every hostile file kind a CI workspace
could hold gives exit 2 and one problem naming the file, no traceback, nothing of what
it points to, within a bounded read (twin.routes.formats.reading).

Each test fails when its guard is taken out: the symlink check, the regular-file check,
the size limit, the JSON guards, the empty-file check, the problem cap, the quoting,
the export checks. The ones that could block or read forever (a FIFO, /dev/zero) run
the CLI in a subprocess with a timeout.
"""

from __future__ import annotations

import json
import os
import random
import shutil
from pathlib import Path

import pytest

from tests.helpers import cli, twin
from twin.errors import Problem, SpecError
from twin.routes import formats
from twin.routes.formats import reading
from twin.routes.tables import from_plan

ROOT = Path(__file__).resolve().parents[2]
GOOD = ROOT / "lab" / "routes" / "good"  # mrc-4p's tables, iproute2-batch
NODE = "t0-p0-r0"
SECRET = "root:$6$S3CRETSALT$S3CRETHASH"  # the start of what /etc/shadow holds


@pytest.fixture
def batch(tmp_path) -> Path:
    """mrc-4p's good tables as .batch files: the test replaces one node's."""
    shutil.copytree(GOOD, tmp_path / "tables")
    return tmp_path / "tables"


@pytest.fixture
def json_dir(tmp_path, compiled) -> Path:
    formats.write_dir(tmp_path / "json", from_plan(compiled.plan), compiled.fabric,
                      "iproute2-json")
    return tmp_path / "json"


def refused(directory: Path, *args: str) -> str:
    """`twin routes check mrc-4p DIR` in this process: exit 2, no traceback; its output."""
    got = cli("routes", "check", "mrc-4p", str(directory), *args)
    one_line_exit_2(got)
    return got.output


def one_line_exit_2(got) -> None:
    assert got.exit_code == 2, got.output
    assert isinstance(got.exception, SystemExit | None), got.exception
    assert "Traceback" not in got.output


def problems(output: str) -> list[str]:
    return [line.strip() for line in output.splitlines() if line.startswith("  ")
            and not line.startswith("    ")]


# -- where a file is ------------------------------------------------------------------------


def test_a_symlink_out_of_the_directory_is_refused_and_never_read(batch, tmp_path):
    (tmp_path / "shadow").write_text(f"{SECRET}:19000:0:99999:7:::\n")
    (batch / f"{NODE}.batch").unlink()
    (batch / f"{NODE}.batch").symlink_to(tmp_path / "shadow")
    for args in ((), ("--json",), ("--no-warnings",)):
        out = refused(batch, *args)
        assert "S3CRET" not in out and "root:" not in out, out
        assert f"{NODE}.batch" in out and "symlink leading out" in out
    data = json.loads(cli("routes", "check", "mrc-4p", str(batch), "--json").stdout)
    assert data["problems_total"] == 1 and "--follow-symlinks" in data["problems"][0]["hint"]
    # diff refuses it too; with --follow-symlinks it is read, and quoted only as a token
    assert "S3CRET" not in cli("routes", "diff", "mrc-4p", str(batch)).output
    followed = refused(batch, "--follow-symlinks")
    assert "leading out" not in followed and ":99999:7" not in followed


def test_a_file_beside_a_nodes_tables_is_held_to_the_same_rules(batch, tmp_path):
    """The files a node's tables refer to (iproute2's nexthop objects and rules, read
    when present) go through the same guarded read: one linked out is refused unread."""
    (tmp_path / "shadow").write_text(f"{SECRET}:19000:0:99999:7:::\n")
    (batch / f"{NODE}.nexthops").symlink_to(tmp_path / "shadow")
    out = refused(batch)
    assert "S3CRET" not in out and "root:" not in out, out
    assert f"{NODE}.nexthops" in out and "symlink leading out" in out


def test_a_symlink_that_stays_inside_is_read(batch):
    (batch / "kept").mkdir()
    (batch / f"{NODE}.batch").rename(batch / "kept" / "t0.txt")
    (batch / f"{NODE}.batch").symlink_to(Path("kept") / "t0.txt")
    assert cli("routes", "check", "mrc-4p", str(batch)).exit_code == 0


def test_a_symlinked_node_directory_is_refused(tmp_path, compiled):
    tables = tmp_path / "sonic"
    formats.write_dir(tables, from_plan(compiled.plan), compiled.fabric, "sonic")
    (tables / NODE).rename(tmp_path / "elsewhere")
    (tables / NODE).symlink_to(tmp_path / "elsewhere")
    out = refused(tables)
    assert f"{NODE}/config_db.json: is a symlink leading out" in out
    assert f"{NODE} -> {tmp_path / 'elsewhere'}" in out
    assert cli("routes", "check", "mrc-4p", str(tables), "--follow-symlinks").exit_code == 0


def test_a_symlink_loop_is_one_line(batch):
    (batch / f"{NODE}.batch").unlink()
    (batch / f"{NODE}.batch").symlink_to(f"{NODE}.batch")
    for args in ((), ("--follow-symlinks",)):
        assert problems(refused(batch, *args)) == [
            f"{NODE}.batch: cannot read it (Too many levels of symbolic links)"]


def test_a_fifo_is_refused_by_name_without_blocking(batch):
    (batch / f"{NODE}.batch").unlink()
    os.mkfifo(batch / f"{NODE}.batch")  # no writer: a read would wait for ever
    got = twin("routes", "check", "mrc-4p", str(batch), timeout=60)
    assert got.returncode == 2 and "Traceback" not in got.stderr
    assert f"{NODE}.batch: is a FIFO, not a regular file" in got.stderr


def test_dev_zero_is_refused_linked_or_followed_and_never_read(batch):
    (batch / f"{NODE}.batch").unlink()
    (batch / f"{NODE}.batch").symlink_to("/dev/zero")
    got = twin("routes", "check", "mrc-4p", str(batch), timeout=60)
    assert got.returncode == 2 and "symlink leading out" in got.stderr
    got = twin("routes", "check", "mrc-4p", str(batch), "--follow-symlinks", timeout=60)
    assert got.returncode == 2 and "Traceback" not in got.stderr
    assert f"{NODE}.batch: is a character device, not a regular file" in got.stderr


def test_the_read_stops_at_the_limit_whatever_the_stat_said(tmp_path, monkeypatch):
    """A file whose stat says 0 bytes (as /proc's do, or one that grows) is read no
    further than the limit + 1 bytes, then refused."""
    (tmp_path / "maps").symlink_to("/proc/self/maps")  # regular, size 0, tens of KB
    reads = []
    real_read = os.read
    monkeypatch.setattr(os, "read", lambda fd, n: reads.append(n) or real_read(fd, n))
    with pytest.raises(SpecError) as e:
        reading.read_file(tmp_path, "maps", reading.Limits(bytes=1000), follow_symlinks=True)
    assert "maps: is over 1,000 bytes" in str(e.value)
    assert sum(reads) <= 1001


# -- what a file holds ----------------------------------------------------------------------


def test_a_huge_garbage_file_is_refused_by_size_unread(batch, monkeypatch):
    rng = random.Random(36)
    with open(batch / f"{NODE}.batch", "w") as f:  # ~3 MB of words, as a corrupt capture
        for _ in range(20_000):
            f.write(" ".join(f"{rng.getrandbits(60):x}" for _ in range(10)) + "\n")
    monkeypatch.setenv(reading.BYTES_ENV, "100000")
    out = refused(batch)
    assert problems(out) == [f"{NODE}.batch: is over 100,000 bytes, the limit for one "
                             "node's file"]
    assert f"{reading.BYTES_ENV}=<bytes>" in out


def test_problems_printed_are_capped_and_json_is_bounded(batch):
    (batch / f"{NODE}.batch").write_text("a b\n" * 12_000)  # one problem a line
    out = refused(batch)
    assert len(problems(out)) == 101  # 100 problems and the line saying how many more
    assert out.startswith("error: ") and "12,000 problems in the route tables" in out
    assert "and 11,900 more; --json has the first 10,000" in out
    got = cli("routes", "check", "mrc-4p", str(batch), "--json")
    data = json.loads(got.stdout)
    assert got.exit_code == 2 and data["ok"] is False
    assert (len(data["problems"]), data["problems_total"], data["problems_omitted"]) == (
        10_000, 12_000, 2_000)
    (batch / f"{NODE}.batch").write_text("a b\n" * 150)
    assert "and 50 more; --json has them all" in refused(batch)


def test_entries_per_node_are_limited(batch, monkeypatch):
    monkeypatch.setenv(reading.ENTRIES_ENV, "5")
    out = refused(batch)
    assert f"{NODE}.batch: holds" in out and "over 5, the limit for one node" in out


def test_json_nested_100k_deep_is_one_line(json_dir):
    (json_dir / f"{NODE}.json").write_text("[" * 100_000)
    assert problems(refused(json_dir)) == [f"{NODE}.json: nested deeper than 64 levels"]
    (json_dir / f"{NODE}.json").write_text("[" * 100 + "]" * 100)  # within json's own reach
    assert problems(refused(json_dir)) == [f"{NODE}.json: nested deeper than 64 levels"]


def test_sonic_nested_deep_is_one_line(tmp_path, compiled):
    tables = tmp_path / "sonic"
    formats.write_dir(tables, from_plan(compiled.plan), compiled.fabric, "sonic")
    (tables / NODE / "config_db.json").write_text('{"a":' * 100_000)
    assert problems(refused(tables)) == [
        f"{NODE}/config_db.json: nested deeper than 64 levels"]


def test_a_5000_digit_number_is_one_line(json_dir):
    (json_dir / f"{NODE}.json").write_text(
        '[\n{"dst": "fcbb:bb00:200::/48", "metric": ' + "9" * 5000 + "}\n]\n")
    assert problems(refused(json_dir)) == [
        f"{NODE}.json line 2: a number of 5,000 characters, over 40"]


def test_invalid_utf8_names_the_byte_and_its_offset(batch):
    (batch / f"{NODE}.batch").write_bytes(b"# ok\nroute add \xff\xfe fcbb::/48\n")
    assert problems(refused(batch)) == [
        f"{NODE}.batch line 2: not UTF-8: byte 0xff at offset 15"]


def test_a_key_written_twice_is_named_not_last_wins(json_dir):
    (json_dir / f"{NODE}.json").write_text(
        '[{"dst": "fcbb:bb00:200::/48", "dev": "eth1", "dev": "eth9"}]')
    assert problems(refused(json_dir)) == [
        f"{NODE}.json: key 'dev' is written twice in one object; JSON keeps only the last"]


def test_an_empty_file_is_an_error_not_no_routes(batch, json_dir):
    (batch / f"{NODE}.batch").write_text("")
    assert problems(refused(batch)) == [f"{NODE}.batch: is empty"]
    (json_dir / f"{NODE}.json").write_text("\n  \n")
    assert problems(refused(json_dir)) == [f"{NODE}.json: is empty"]


def test_file_content_is_quoted_short_and_escaped(batch):
    line = "fcbb:bb00:200::/48 [/x] " + "\x1b[31m" + "A" * 500 + " [bold]" + "B" * 500
    (batch / f"{NODE}.batch").write_text(line + "\n")
    out = refused(batch)
    assert "\x1b" not in out and "A" * 41 not in out and "B" * 41 not in out
    assert "\\x1b[31mAAA" in out and "[/x]" in out  # escaped, and not read as markup
    assert max(map(len, out.splitlines())) < 250


# -- quoting, the net under every format ---------------------------------------------------


def test_token_and_safe_bound_whatever_they_are_given():
    assert reading.token("colour") == "'colour'"
    assert reading.token(["eth1", "eth2"]) == "['eth1', 'eth2']"  # as !r writes it
    assert reading.token("x" * 1000) == "'" + "x" * 35 + "...'"
    assert reading.token("a\x1bb\u202ec") == "'a\\x1bb\\u202ec'"
    assert len(reading.token(list(range(10**5)))) <= 40
    p = reading.safe(Problem("f" * 1000, "m\x07" * 1000, "h"))
    assert max(map(len, (p.path, p.message, p.hint))) <= 240 and "\x07" not in p.message


def test_load_dir_clips_whatever_a_format_says(batch, compiled, monkeypatch):
    form = formats.get("iproute2-batch")

    def loud(text, node, file, fabric):
        raise SpecError(file, [Problem(file, "echo: " + text)], "route tables")
    monkeypatch.setattr(form, "parse", loud)
    (batch / f"{NODE}.batch").write_text(SECRET + "x" * 5000 + "\n")
    with pytest.raises(SpecError) as e:
        formats.load_dir(batch, compiled.fabric)
    assert max(len(p.message) for p in e.value.problems) <= 240


# -- export --------------------------------------------------------------------------------


def test_export_below_a_file_is_one_line(tmp_path):
    (tmp_path / "afile").write_text("x")
    got = cli("routes", "export", "mrc-4p", str(tmp_path / "afile" / "sub"))
    one_line_exit_2(got)
    assert got.output.strip().splitlines() == [
        f"error: cannot export to {tmp_path / 'afile' / 'sub'}: {tmp_path / 'afile'} is not "
        "a directory"]


def test_export_never_writes_through_a_symlink(tmp_path):
    target = tmp_path / "out"
    target.mkdir()
    (tmp_path / "precious").write_text("keep me\n")
    (target / f"{NODE}.batch").symlink_to(tmp_path / "precious")
    got = cli("routes", "export", "mrc-4p", str(target))
    one_line_exit_2(got)
    assert "a symlink: refused" in got.output
    assert (tmp_path / "precious").read_text() == "keep me\n"


def test_export_where_a_node_file_is_a_directory_is_one_line(tmp_path):
    (tmp_path / "out" / f"{NODE}.batch").mkdir(parents=True)
    got = cli("routes", "export", "mrc-4p", str(tmp_path / "out"))
    one_line_exit_2(got)
    assert len(got.output.strip().splitlines()) == 1 and f"{NODE}.batch" in got.output


@pytest.mark.parametrize("command", [("routes", "check"), ("routes", "diff"), ("up",), ("ci",)])
def test_every_command_reading_a_tables_directory_takes_follow_symlinks(command):
    assert "--follow-symlinks" in cli(*command, "--help").output
