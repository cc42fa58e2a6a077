"""Image inputs with no engine and no root: package lists, apt's mirror, the inputs hash."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
import yaml

from twin import images as I
from twin.errors import LabError
from twin.fabric.render import HOST_IMAGE, ROUTER_IMAGE, render
from twin.lab import compile_spec

ROOT = Path(__file__).resolve().parents[2]
INSTALL = I.INSTALL_SCRIPT
MIRROR = I.Mirror("http://mirror.example/debian", "bookworm")


def sources(tmp_path: Path, main: str | None = None, **files: str) -> Path:
    """An /etc/apt look-alike: `main` is sources.list, keywords are sources.list.d/ files."""
    d = tmp_path / "apt"
    (d / "sources.list.d").mkdir(parents=True)
    if main is not None:
        (d / "sources.list").write_text(main)
    for name, text in files.items():
        (d / "sources.list.d" / name.replace("__", ".")).write_text(text)
    return d


# --- package lists -----------------------------------------------------------------------


def test_parse_package_list_skips_comments_and_blanks():
    text = "# header\n\niproute2   # ip, tc\n  nftables\tiptables\n#python3\n\nnftables\n"
    assert I.parse_package_list(text) == ["iproute2", "nftables", "iptables"]


def test_shipped_lists_parse_and_host_includes_router():
    router = I.packages("router", ROOT / "images")
    host = I.packages("host", ROOT / "images")
    assert {"iproute2", "nftables", "iptables", "python3", "procps", "iputils-ping",
            "tcpdump", "ethtool", "kmod", "ca-certificates"} <= set(router)
    assert "python3-yaml" in host
    assert set(router) <= set(host)
    assert set(I.packages("base", ROOT / "images")) == set(host)
    for name in router + host:
        assert name.islower() and " " not in name and "#" not in name


def test_the_images_built_are_the_images_a_rendered_topology_names():
    compiled = compile_spec("mrc-4p")
    topo = yaml.safe_load(render(compiled.plan, "ebpf", "../..")[f"{compiled.lab}.clab.yml"])
    named = {n["image"] for n in topo["topology"]["nodes"].values()}
    assert named == set(I.IMAGES) == {ROUTER_IMAGE, HOST_IMAGE}
    by_role = {(compiled.fabric.node(name).is_switch, n["image"])
               for name, n in topo["topology"]["nodes"].items()}
    assert by_role == {(True, ROUTER_IMAGE), (False, HOST_IMAGE)}


@pytest.mark.parametrize("name", ["router", "host"])
def test_dockerfiles_take_base_and_inputs_and_stay_alive(name):
    text = (ROOT / "images" / name / "Dockerfile").read_text()
    lines = [line for line in text.splitlines() if line and not line.startswith("#")]
    assert lines[0] == "ARG BASE=debian:bookworm-slim"
    assert lines[1] == "FROM ${BASE}"
    assert "ARG INPUTS" in text and 'mrc-twin.inputs="${INPUTS}"' in text
    assert "org.opencontainers.image.title" in text
    assert lines[-1] == 'CMD ["mrc-twin-boot"]'  # stays up; configures itself if asked
    assert "COPY mrc-twin-boot /usr/local/bin/mrc-twin-boot" in text
    ignore = (ROOT / "images" / ".dockerignore").read_text()
    assert "!mrc-twin-boot" in ignore  # in the build context
    for f in I.IMAGES[getattr(I, f"{name.upper()}_IMAGE")][2]:
        assert f"packages/{f}" in text


def test_the_boot_script_is_in_every_node_image_s_inputs(tmp_path):
    import shutil

    images = tmp_path / "images"
    shutil.copytree(ROOT / "images", images)
    before = I.inputs_hash("router", base="debian:bookworm-slim", images=images)
    (images / "mrc-twin-boot").write_text("#!/bin/sh\nexec sleep infinity\n")
    assert I.inputs_hash("router", base="debian:bookworm-slim", images=images) != before


# --- apt's mirror ------------------------------------------------------------------------


def test_mirror_from_deb822(tmp_path):
    d = sources(tmp_path, debian__sources=(
        "Types: deb\n"
        "# http://snapshot.debian.org/archive/debian/20250520T000000Z\n"
        "URIs: http://mirror.example/debian/\n"
        "Suites: bookworm bookworm-updates\n"
        "Components: main\n"
        "Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg\n"
        "\n"
        "Types: deb\n"
        "URIs: http://mirror.example/debian-security\n"
        "Suites: bookworm-security\n"
        "Components: main\n"))
    assert I.apt_mirror(d) == ("http://mirror.example/debian", "bookworm")


def test_mirror_from_one_line_sources_list(tmp_path):
    d = sources(tmp_path, main=(
        "# deb http://commented.example/debian bookworm main\n"
        "deb-src http://src.example/debian bookworm main\n"
        "deb http://security.debian.org/debian-security bookworm-security main\n"
        "deb http://security.debian.org/debian-security bookworm main\n"  # odd, still skipped
        "deb [arch=amd64 signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] "
        "http://ftp.example.org/debian bookworm main contrib\n"))
    assert I.apt_mirror(d) == ("http://ftp.example.org/debian", "bookworm")


def test_mirror_skips_disabled_files_and_third_party_repos(tmp_path):
    d = sources(
        tmp_path,
        main="deb [signed-by=/usr/share/keyrings/vendor.gpg] http://vendor.example/apt "
             "bookworm main\n"
             "deb http://deb.nodesource.example/node_18.x bookworm main\n",
        a__list__disabled="deb http://disabled.example/debian bookworm main\n",
        aa__disabled__sources=("Types: deb\nURIs: http://disabled3.example/debian\n"
                               "Suites: bookworm\nComponents: main\n"),
        b__sources__disabled_by_farm=("Types: deb\nURIs: http://disabled2.example/debian\n"
                                      "Suites: bookworm\nComponents: main\n"),
        c__sources=("Types: deb\nURIs: https://vendor2.example/node\nSuites: nodistro\n"
                    "Components: main\n\n"
                    "Enabled: no\nTypes: deb\nURIs: http://off.example/debian\n"
                    "Suites: bookworm\nComponents: main\n\n"
                    "Types: deb\nURIs: http://other.example/debian\nSuites: bookworm\n"
                    "Components: contrib\n"),
        d__sources=("Types: deb deb-src\nURIs: http://mirror.example/debian\n"
                    "Suites: bookworm bookworm-updates\nComponents: main non-free\n"))
    assert I.apt_mirror(d) == ("http://mirror.example/debian", "bookworm")


def test_mirror_prefers_sources_list_then_files_by_name(tmp_path):
    d = sources(tmp_path, main="deb http://first.example/debian bookworm main\n",
                a__sources="Types: deb\nURIs: http://second.example/debian\n"
                           "Suites: bookworm\nComponents: main\n")
    assert I.apt_mirror(d).uri == "http://first.example/debian"


def test_mirror_commented_stanza_lines_are_ignored(tmp_path):
    d = sources(tmp_path, debian__sources=(
        "Types: deb\n"
        "#URIs: http://commented.example/debian\n"
        "URIs: http://mirror.example/debian\n"
        "Suites: bookworm\n"
        "Components: main\n"))
    assert I.apt_mirror(d).uri == "http://mirror.example/debian"


def test_no_mirror_is_a_clear_error(tmp_path):
    d = sources(tmp_path, main="deb http://security.debian.org/debian-security "
                               "bookworm-security main\n",
                x__sources="Types: deb\nURIs: http://mirror.example/debian\n"
                           "Suites: trixie\nComponents: main\n")
    with pytest.raises(LabError, match="no Debian bookworm mirror") as e:
        I.apt_mirror(d)
    assert "hint:" in str(e.value)


def test_missing_sources_dir_is_a_clear_error(tmp_path):
    with pytest.raises(LabError, match="hint:"):
        I.apt_mirror(tmp_path / "nothing")


# --- inputs hash -------------------------------------------------------------------------


@pytest.fixture
def images(tmp_path):
    d = tmp_path / "images"
    shutil.copytree(ROOT / "images", d)
    return d


def hashes(images: Path, mirror: I.Mirror = MIRROR) -> dict[str, str]:
    return {n: I.inputs_hash(n, mirror=mirror, images=images) for n in ("base", "router", "host")}


def test_hash_is_short_hex_and_stable(images):
    first = hashes(images)
    assert first == hashes(images)
    assert len(set(first.values())) == 3
    for h in first.values():
        assert re.fullmatch(r"[0-9a-f]{16}", h), h


def test_hash_of_shipped_images_does_not_depend_on_where_they_are(images):
    assert hashes(images) == hashes(ROOT / "images")


def test_host_list_change_rebuilds_host_and_base_only(images):
    before = hashes(images)
    with open(images / "packages" / "host.txt", "a") as f:
        f.write("jq\n")
    after = hashes(images)
    assert after["host"] != before["host"]
    assert after["base"] != before["base"]  # the base holds the union
    assert after["router"] != before["router"]  # ... and router is built on the base
    assert I.inputs_hash("router", base="debian:bookworm-slim", images=images) == \
        I.inputs_hash("router", base="debian:bookworm-slim", images=ROOT / "images")


def test_router_list_change_changes_both_node_images(images):
    before = {n: I.inputs_hash(n, base="debian:bookworm-slim", images=images)
              for n in ("router", "host")}
    with open(images / "packages" / "router.txt", "a") as f:
        f.write("mtr-tiny\n")
    for n in ("router", "host"):
        assert I.inputs_hash(n, base="debian:bookworm-slim", images=images) != before[n]


def test_comment_only_change_keeps_base_but_rebuilds_node_images(images):
    before = hashes(images)
    with open(images / "packages" / "host.txt", "a") as f:
        f.write("# a note\n")
    after = hashes(images)
    assert after["base"] == before["base"]  # same package set, same root file system
    assert after["host"] != before["host"]  # the file docker copies changed


def test_hash_depends_on_dockerfile_script_mirror_and_base(images):
    before = hashes(images)
    assert hashes(images, I.Mirror("http://other.example/debian", "bookworm")) != before
    (images / INSTALL).write_text((images / INSTALL).read_text() + "\n# changed\n")
    after = hashes(images)
    assert after["base"] == before["base"]
    assert after["router"] != before["router"] and after["host"] != before["host"]
    slim = I.inputs_hash("router", base="debian:bookworm-slim", images=images)
    assert slim != I.inputs_hash("router", base="debian:trixie-slim", images=images)
    assert slim != after["router"]


def test_unknown_image_name():
    with pytest.raises(ValueError, match="unknown image"):
        I.inputs_hash("switch", base="x")
