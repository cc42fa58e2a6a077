"""The node images on a real engine: built (or found cached), labelled, runnable offline.

Needs a Docker engine; the first run on a machine also needs root, debootstrap
and the Debian mirror from apt's sources (about a minute for the base).
"""

from __future__ import annotations

import time

import pytest

from twin import images as I
from twin.progress import Recorder

docker = pytest.importorskip("docker")

pytestmark = pytest.mark.docker


@pytest.fixture(scope="module")
def client():
    c = docker.from_env(timeout=300)
    yield c
    c.close()


@pytest.fixture(scope="module")
def built(client):
    """build_images once for the module (a no-op when the images are current)."""
    return I.build_images(client, Recorder())


def test_build_reports_every_image(built):
    assert [image for image, _, _ in built] == [I.BASE_IMAGE, I.ROUTER_IMAGE, I.HOST_IMAGE]
    assert {what for _, what, _ in built} <= {"built", "up to date"}


def test_a_second_build_finds_every_image_up_to_date(client, built):
    again = I.build_images(client, Recorder())
    assert [(image, what) for image, what, _ in again] == [
        (I.BASE_IMAGE, "up to date"), (I.ROUTER_IMAGE, "up to date"), (I.HOST_IMAGE, "up to date")]


def test_images_exist_with_the_current_inputs_label(client, built):
    rows = {r["image"]: r for r in I.image_status(client)}
    assert set(rows) == {I.BASE_IMAGE, I.ROUTER_IMAGE, I.HOST_IMAGE}
    for image, row in rows.items():
        assert row["present"] and row["current"], row
        assert row["size_mb"] > 0
        labels = client.images.get(image).labels
        name = "base" if image == I.BASE_IMAGE else image.split("/")[1].split(":")[0]
        assert labels[I.LABEL] == I.inputs_hash(name)
        assert labels[I.TITLE].startswith("mrc-twin")
    assert I.missing_images(client) == []


def test_second_build_is_up_to_date(client, built):
    steps = Recorder()
    again = I.build_images(client, steps)
    assert [(image, what) for image, what, _ in again] == [
        (I.BASE_IMAGE, "up to date"), (I.ROUTER_IMAGE, "up to date"),
        (I.HOST_IMAGE, "up to date")]
    assert not any("building" in label for label in steps.labels)


def run(client, image: str, command: list[str]) -> str:
    """Run a command in a fresh container with no network; its output (raises on failure).

    remove=True (the SDK removes the container after reading its exit status),
    not auto_remove: with the engine removing a fast command's container itself,
    the SDK's wait() races it and fails with 404 "No such container".
    """
    out = client.containers.run(image, command, network_mode="none", remove=True,
                                stdout=True, stderr=True)
    return out.decode()


@pytest.mark.parametrize("image", [I.ROUTER_IMAGE, I.HOST_IMAGE])
def test_node_images_have_their_tools(client, built, image):
    assert "iproute2" in run(client, image, ["ip", "-V"])
    tools = ("tc", "nft", "iptables", "sysctl", "ping", "tcpdump", "ethtool", "modprobe",
             "python3")
    found = run(client, image, ["sh", "-c", " && ".join(f"command -v {t}" for t in tools)])
    assert len(found.split()) == len(tools)


def test_host_image_imports_yaml(client, built):
    assert run(client, I.HOST_IMAGE, ["python3", "-c", "import yaml; print('ok')"]).strip() == "ok"


@pytest.mark.parametrize("image", [I.ROUTER_IMAGE, I.HOST_IMAGE])
def test_node_images_stay_up_with_no_command(client, built, image):
    c = client.containers.run(image, detach=True, network_mode="none", auto_remove=True)
    try:
        c.reload()
        assert c.status == "running"
        assert c.attrs["Config"]["Cmd"] == ["mrc-twin-boot"]  # without MRC_TWIN_BOOT: stays up
    finally:
        try:
            c.remove(force=True)  # auto_remove may already be removing it
        except docker.errors.APIError:
            pass


@pytest.mark.parametrize("image", [I.ROUTER_IMAGE, I.HOST_IMAGE])
def test_a_node_asked_to_boot_without_its_config_says_why_and_stays_up(client, built, image,
                                                                       tmp_path):
    """MRC_TWIN_BOOT=1 and nothing at /etc/mrc-twin: the reason in boot-failed, the node up
    (an orchestrator's restart loop would hide the reason)."""
    c = client.containers.run(image, detach=True, network_mode="none", auto_remove=True,
                              environment={"MRC_TWIN_BOOT": "1"},
                              volumes={str(tmp_path): {"bind": "/run/mrc-twin", "mode": "rw"}})
    try:
        failed = tmp_path / "boot-failed"
        deadline = time.monotonic() + 20
        while not failed.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert "no /etc/mrc-twin/node.json" in failed.read_text()
        c.reload()
        assert c.status == "running" and not (tmp_path / "booted").exists()
    finally:
        try:
            c.remove(force=True)
        except docker.errors.APIError:
            pass
