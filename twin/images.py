"""The node container images, and how they are built with no image registry.

    mrc-twin/router:latest   every switch (T0, T1): iproute2, nftables, tcpdump, ...
    mrc-twin/host:latest     every GPU host: the router's packages plus python3-yaml and
                             libisal2 (the endpoint's ICRC)
    mrc-twin/base:bookworm   the offline base both are built on (when no registry base)

What goes into each image is written down once, in images/packages/*.txt
(router.txt; host.txt adds to it). Both build paths read those lists:

- Registry base (`base="debian:bookworm-slim"`, for users whose engine can
  pull): `docker build` runs images/install-packages.sh, which apt-get
  installs the listed packages from the Debian mirror.
- Offline base (`base=None`, the default; no registry needed): debootstrap
  builds a minbase bookworm root file system that already holds the union of
  both lists, from the mirror named in the machine's own apt sources, and it
  is `docker import`ed as mrc-twin/base:bookworm. The same Dockerfiles then
  build on it; the install script finds every package present (dpkg-query)
  and touches no network.

The project's code is never copied into an image: runtimes bind-mount it.

Caching: every image carries a label `mrc-twin.inputs`, a short sha256 over
what it was built from (its Dockerfile, the install script, its package lists
and its base; for the offline base, the package union, the mirror and the
suite). An image whose label equals the current hash is up to date and not
rebuilt; edit a package list and exactly the images that use it are rebuilt.

Progress goes to an optional `steps` (see twin.progress); nothing prints.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import tempfile
import time
from collections import deque
from pathlib import Path
from typing import NamedTuple

from twin.errors import LabError
from twin.fabric.render import HOST_IMAGE, ROUTER_IMAGE
from twin.progress import Steps

BASE_IMAGE = "mrc-twin/base:bookworm"
SUITE = "bookworm"
LABEL = "mrc-twin.inputs"
TITLE = "org.opencontainers.image.title"
INSTALL_SCRIPT = "install-packages.sh"
BOOT_SCRIPT = "mrc-twin-boot"  # every node's command (images/mrc-twin-boot)
ROOTFS_PARENT = Path("/var/tmp")
TAIL_LINES = 25
BUILD_HINT = ("check the names in images/packages/*.txt; a registry base (debian:...) "
              "needs its Debian mirror to answer")
# How the offline base is made; part of its inputs hash, so a change here rebuilds it.
DEBOOTSTRAP_RECIPE = "debootstrap --variant=minbase; apt lists, caches and docs removed; v2"

# image -> (name used by inputs_hash/packages, Dockerfile, package lists it installs)
IMAGES: dict[str, tuple[str, str, tuple[str, ...]]] = {
    ROUTER_IMAGE: ("router", "router/Dockerfile", ("router.txt",)),
    HOST_IMAGE: ("host", "host/Dockerfile", ("router.txt", "host.txt")),
}


class Mirror(NamedTuple):
    uri: str
    suite: str


# --- where things are --------------------------------------------------------------------


def images_dir() -> Path:
    """images/ of the checkout twin runs from (TWIN_HOME overrides, as for lab/)."""
    env = os.environ.get("TWIN_HOME")
    root = Path(env) if env else Path(__file__).resolve().parent.parent
    return root / "images"


def _spec(name: str) -> tuple[str, str, tuple[str, ...]]:
    for image, (n, dockerfile, lists) in IMAGES.items():
        if n == name:
            return image, dockerfile, lists
    raise ValueError(f"unknown image {name!r} (known: router, host, base)")


# --- package lists -----------------------------------------------------------------------


def parse_package_list(text: str) -> list[str]:
    """Package names in a list file: blank-separated, `#` to the end of a line is a comment."""
    names: list[str] = []
    for line in text.splitlines():
        for word in line.split("#", 1)[0].split():
            if word not in names:
                names.append(word)
    return names


def packages(name: str, images: Path | None = None) -> list[str]:
    """The packages image `name` ("router", "host" or "base") holds, in list order."""
    images = images or images_dir()
    if name == "base":
        lists = list(dict.fromkeys(f for _, _, fs in IMAGES.values() for f in fs))
    else:
        lists = list(_spec(name)[2])
    out: list[str] = []
    for f in lists:
        out += [p for p in parse_package_list((images / "packages" / f).read_text())
                if p not in out]
    return out


# --- the Debian mirror, from apt's own sources -------------------------------------------


class _Source(NamedTuple):
    types: list[str]
    uris: list[str]
    suites: list[str]
    components: list[str]
    signed_by: str
    enabled: bool


def _one_line_sources(text: str) -> list[_Source]:
    """`deb [opt=val ...] URI SUITE COMPONENT...` lines (sources.list, *.list)."""
    out = []
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        opts = ""
        m = re.match(r"^(\S+)\s+\[([^\]]*)\]\s*(.*)$", line)
        if m:
            kind, opts, rest = m.groups()
            words = [kind, *rest.split()]
        else:
            words = line.split()
        if len(words) < 3:
            continue
        signed = re.search(r"signed-by=(\S+)", opts)
        out.append(_Source([words[0]], [words[1]], [words[2]], words[3:],
                           signed.group(1) if signed else "", True))
    return out


def _deb822_sources(text: str) -> list[_Source]:
    """deb822 stanzas (*.sources): `Field: value`, continuation lines, `#` comment lines."""
    out = []
    for stanza in re.split(r"\n\s*\n", text):
        fields: dict[str, str] = {}
        key = None
        for line in stanza.splitlines():
            if line.lstrip().startswith("#") or not line.strip():
                continue
            if line[0] in " \t" and key:
                fields[key] += " " + line.strip()
                continue
            key, _, value = line.partition(":")
            key = key.strip().lower()
            fields[key] = value.strip()
        if not fields:
            continue
        out.append(_Source(fields.get("types", "").split(), fields.get("uris", "").split(),
                           fields.get("suites", "").split(),
                           fields.get("components", "").split(), fields.get("signed-by", ""),
                           fields.get("enabled", "yes").lower() not in ("no", "false", "0")))
    return out


def _source_files(sources_dir: Path) -> list[Path]:
    """In apt's order: sources.list, then sources.list.d/ by name; `*.disabled*` skipped."""
    files = [sources_dir / "sources.list"]
    d = sources_dir / "sources.list.d"
    if d.is_dir():
        files += sorted(p for p in d.iterdir()
                        if p.suffix in (".list", ".sources") and ".disabled" not in p.name)
    return [f for f in files if f.is_file()]


def _is_debian(uri: str, signed_by: str) -> bool:
    """Debian's archive (any mirror), not a third-party repository or the security archive."""
    if "security" in uri:
        return False
    if signed_by:
        # An inline key block or a keyring path: Debian's is named debian-archive-keyring.
        return "debian-archive-keyring" in signed_by
    host_and_path = re.sub(r"^[a-z+]+://", "", uri).rstrip("/")
    host, _, path = host_and_path.partition("/")
    return host.split(":")[0].endswith("debian.org") or "debian" in path.split("/")


def apt_mirror(sources_dir: Path = Path("/etc/apt")) -> Mirror:
    """The Debian mirror this machine's apt uses for bookworm main: the first such URI."""
    for f in _source_files(sources_dir):
        text = f.read_text(errors="replace")
        parse = _deb822_sources if f.suffix == ".sources" else _one_line_sources
        for src in parse(text):
            if not src.enabled or "deb" not in src.types:
                continue
            if SUITE not in src.suites or "main" not in src.components:
                continue
            for uri in src.uris:
                if _is_debian(uri, src.signed_by):
                    return Mirror(uri.rstrip("/"), SUITE)
    raise LabError(
        f"no Debian {SUITE} mirror found in apt's sources under {sources_dir}\n"
        f"  hint: add one, e.g. a line `deb <your Debian mirror> {SUITE} main` to "
        f"{sources_dir / 'sources.list'}, or build on a registry image (base=...)")


# --- inputs hash -------------------------------------------------------------------------


def inputs_hash(name: str, *, base: str | None = None, mirror: Mirror | None = None,
                images: Path | None = None) -> str:
    """16 hex digits of sha256 over everything image `name` is built from.

    router/host: their Dockerfile, the install script, their package lists and
    their base (the offline base's own hash when `base` is None, else the
    reference given). base: the package union, the mirror, the suite and the
    debootstrap recipe. `mirror` defaults to apt_mirror().
    """
    images = images or images_dir()
    h = hashlib.sha256()

    def add(tag: str, data: bytes | str) -> None:
        data = data.encode() if isinstance(data, str) else data
        h.update(f"{tag}\0{len(data)}\0".encode())
        h.update(data)

    if name == "base":
        mirror = mirror or apt_mirror()
        add("packages", ",".join(sorted(packages("base", images))))
        add("mirror", mirror.uri)
        add("suite", mirror.suite)
        add("recipe", DEBOOTSTRAP_RECIPE)
    else:
        _, dockerfile, lists = _spec(name)
        add("Dockerfile", (images / dockerfile).read_bytes())
        add(INSTALL_SCRIPT, (images / INSTALL_SCRIPT).read_bytes())
        add(BOOT_SCRIPT, (images / BOOT_SCRIPT).read_bytes())
        for f in lists:
            add(f, (images / "packages" / f).read_bytes())
        if base is None:
            add("base", f"{BASE_IMAGE}@{inputs_hash('base', mirror=mirror, images=images)}")
        else:
            add("base", base)
    return h.hexdigest()[:16]


# --- what the engine holds ---------------------------------------------------------------


def _image(client, ref: str):
    import docker.errors

    try:
        return client.images.get(ref)
    except docker.errors.ImageNotFound:
        return None


def _label(image) -> str | None:
    return (image.labels or {}).get(LABEL) if image is not None else None


def _wanted(base: str | None) -> list[tuple[str, str]]:
    """(image, name) to check: the offline base only when it is the base in use."""
    rows = [(BASE_IMAGE, "base")] if base is None else []
    return rows + [(image, name) for image, (name, _, _) in IMAGES.items()]


def image_status(client, base: str | None = None) -> list[dict]:
    """One row per image: image, present, current (label = inputs hash), id, size_mb.

    `base` as for build_images; with None (the offline base) the hashes need
    apt's Debian mirror, so this raises LabError where apt names none.
    """
    rows = []
    for image, name in _wanted(base):
        img = _image(client, image)
        rows.append({
            "image": image,
            "present": img is not None,
            "current": img is not None and _label(img) == inputs_hash(name, base=base),
            "id": img.short_id.removeprefix("sha256:") if img is not None else None,
            "size_mb": round(img.attrs.get("Size", 0) / 1e6, 1) if img is not None else None,
        })
    return rows


def missing_images(client, base: str | None = None) -> list[str]:
    """Node images (router, host) that are absent or built from other inputs."""
    return [r["image"] for r in image_status(client, base)
            if not r["current"] and r["image"] != BASE_IMAGE]


# --- the offline base --------------------------------------------------------------------


def _tail(text: str, n: int = TAIL_LINES) -> str:
    """The last n non-blank lines, indented, without terminal colour codes."""
    text = re.sub(r"\x1b\[[0-9;]*m", "", text)
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return "\n".join("    " + line for line in lines[-n:])


def _mounts_under(root: Path) -> list[str]:
    prefix = str(root.resolve()).rstrip("/") + "/"
    with open("/proc/self/mounts") as f:
        points = [line.split()[1].replace("\\040", " ") for line in f]
    return sorted((p for p in points if p.startswith(prefix)), reverse=True)


def _remove_rootfs(root: Path) -> None:
    """Remove a debootstrap target, unmounting first whatever it left mounted (proc, sys)."""
    for point in _mounts_under(root):
        subprocess.run(["umount", "-l", point], capture_output=True)
    if _mounts_under(root):
        raise LabError(f"{root} still has mounts; not removing it (umount them, then rm -r)")
    shutil.rmtree(root, ignore_errors=True)


def _debootstrap(root: Path, mirror: Mirror, pkgs: list[str]) -> None:
    argv = ["debootstrap", "--variant=minbase", f"--include={','.join(pkgs)}",
            mirror.suite, str(root), mirror.uri]
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive", LC_ALL="C")
    proc = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          env=env)
    if proc.returncode != 0:
        log = root / "debootstrap" / "debootstrap.log"
        detail = log.read_text(errors="replace") if log.is_file() else ""
        raise LabError(f"`{' '.join(argv)}` exited {proc.returncode}:\n"
                       f"{_tail(detail + proc.stdout + proc.stderr)}\n"
                       f"  hint: check the names in images/packages/*.txt, and that "
                       f"{mirror.uri} answers (`apt-get update`)")


# Like Debian's -slim images: no docs (but every copyright file), man pages or locales,
# now and for whatever is installed later (a dpkg path-exclude file).
DPKG_SLIM = """\
# mrc-twin base: keep the image small, as Debian's -slim images do.
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/info/*
path-exclude /usr/share/locale/*
"""
TRIM = ("var/lib/apt/lists/*", "var/cache/apt/*.bin", "var/cache/apt/archives/*.deb",
        "var/log/*.log", "usr/share/man/**/*", "usr/share/info/*", "usr/share/locale/**/*",
        "usr/share/doc/**/*")


def _trim_rootfs(root: Path) -> None:
    """Drop what the image should not carry: apt's lists and caches, docs, the host's DNS."""
    for pattern in TRIM:
        for p in list(root.glob(pattern)):
            if p.name == "copyright" or p.is_dir() and not p.is_symlink():
                continue
            p.unlink()
    (root / "etc/dpkg/dpkg.cfg.d").mkdir(parents=True, exist_ok=True)
    (root / "etc/dpkg/dpkg.cfg.d/mrc-twin-slim").write_text(DPKG_SLIM)
    for f in ("etc/resolv.conf", "etc/hostname"):  # the engine bind-mounts its own
        p = root / f
        if p.is_file() and not p.is_symlink():
            p.write_text("")


def _import_rootfs(client, root: Path, digest: str) -> None:
    repo, _, tag = BASE_IMAGE.rpartition(":")
    changes = [f"LABEL {LABEL}={digest}",
               f'LABEL {TITLE}="mrc-twin base (Debian {SUITE} minbase)"',
               "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
               'CMD ["sleep", "infinity"]']
    argv = ["tar", "-C", str(root), "--numeric-owner", "--xattrs",
            "--xattrs-include=security.capability", "-c", "."]
    with tempfile.TemporaryFile() as errors:
        tar = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                               stderr=errors)
        try:
            reply = client.api.import_image_from_stream(tar.stdout, repository=repo,
                                                        tag=tag, changes=changes)
        finally:
            tar.stdout.close()
            rc = tar.wait()
        errors.seek(0)
        if rc != 0:
            raise LabError(f"`{' '.join(argv)}` exited {rc}:\n"
                           f"{_tail(errors.read().decode(errors='replace'))}")
    if '"error"' in str(reply):
        raise LabError(f"docker import of {BASE_IMAGE} failed: {_tail(str(reply))}")


def _check_can_debootstrap() -> None:
    if os.geteuid() != 0:
        raise LabError("building the offline base image needs root (debootstrap)\n"
                       "  hint: run as root, or build on a registry image (base=...)")
    if shutil.which("debootstrap") is None:
        raise LabError("debootstrap is not installed\n"
                       "  hint: apt-get install debootstrap")


def _build_base(client, steps: Steps, force: bool) -> tuple[str, str, float]:
    started = time.monotonic()
    mirror = apt_mirror()
    digest = inputs_hash("base", mirror=mirror)
    old = _image(client, BASE_IMAGE)
    if not force and _label(old) == digest:
        return BASE_IMAGE, "up to date", time.monotonic() - started
    _check_can_debootstrap()
    pkgs = packages("base")
    steps.note(f"{BASE_IMAGE}: debootstrap {mirror.suite} from {mirror.uri} "
               f"with {len(pkgs)} packages")
    ROOTFS_PARENT.mkdir(parents=True, exist_ok=True)
    root = Path(tempfile.mkdtemp(prefix="mrc-twin-rootfs-", dir=ROOTFS_PARENT))
    try:
        _debootstrap(root, mirror, pkgs)
        _trim_rootfs(root)
        steps.note(f"{BASE_IMAGE}: importing the root file system")
        _import_rootfs(client, root, digest)
    finally:
        _remove_rootfs(root)
    _check_label(client, BASE_IMAGE, digest)
    _drop_replaced(client, old)
    return BASE_IMAGE, "built", time.monotonic() - started


def build_base(client, steps: Steps | None = None, force: bool = False) -> tuple[str, str, float]:
    """Make mrc-twin/base:bookworm with debootstrap (root), unless it is up to date.

    Returns (image, "built" | "up to date", seconds).
    """
    steps = steps or Steps()
    steps.start(f"base image {BASE_IMAGE}", 1)
    result = _build_base(client, steps, force)
    steps.advance()
    return result


# --- router and host ---------------------------------------------------------------------


def _dockerfile_steps(path: Path) -> int:
    """How many `Step n/N` lines the classic builder prints for a Dockerfile."""
    n = 0
    for line in path.read_text().splitlines():
        s = line.strip()
        if s and not s.startswith("#") and not line[0].isspace():
            n += 1
    return n


def _docker_build(client, steps: Steps, image: str, dockerfile: str, buildargs: dict,
                  force: bool) -> None:
    log: deque[str] = deque(maxlen=200)
    try:
        stream = client.api.build(path=str(images_dir()), dockerfile=dockerfile, tag=image,
                                  buildargs=buildargs, network_mode="host", rm=True,
                                  forcerm=True, nocache=force, pull=False, decode=True)
        for chunk in stream:
            text = chunk.get("stream", "")
            if text:
                log.extend(text.splitlines())
                if text.startswith("Step "):
                    steps.advance()
            if "error" in chunk:
                log.append(str(chunk["error"]))
                raise LabError(f"docker build of {image} failed:\n{_tail(chr(10).join(log))}\n"
                               f"  hint: {BUILD_HINT}")
    except LabError:
        raise
    except Exception as e:  # the SDK's APIError, a broken connection
        raise LabError(f"docker build of {image} failed: {e}\n{_tail(chr(10).join(log))}\n"
                       f"  hint: {BUILD_HINT}") from e


def _check_label(client, image: str, digest: str) -> None:
    got = _label(_image(client, image))
    if got != digest:
        raise LabError(f"{image} was built but carries {LABEL}={got}, expected {digest}")


def _drop_replaced(client, old) -> None:
    """Remove the image a rebuild replaced, if nothing (tag, container, child) holds it."""
    if old is None:
        return
    try:
        old.reload()
        if not old.tags:
            client.images.remove(old.id)
    except Exception:
        pass  # still used by a container or a child image: leave it


def _build_node_image(client, steps: Steps, image: str, base: str | None,
                      force: bool) -> tuple[str, str, float]:
    started = time.monotonic()
    name, dockerfile, _ = IMAGES[image]
    digest = inputs_hash(name, base=base)
    old = _image(client, image)
    if not force and _label(old) == digest:
        return image, "up to date", time.monotonic() - started
    steps.start(f"building {image}", _dockerfile_steps(images_dir() / dockerfile))
    _docker_build(client, steps, image, dockerfile,
                  {"BASE": base or BASE_IMAGE, "INPUTS": digest}, force)
    _check_label(client, image, digest)
    _drop_replaced(client, old)
    return image, "built", time.monotonic() - started


def build_images(client, steps: Steps | None = None, force: bool = False,
                 base: str | None = None) -> list[tuple[str, str, float]]:
    """Build what is not up to date: the offline base (when `base` is None), router, host.

    `base` names a registry image to build on instead (e.g. "debian:bookworm-slim").
    `force` rebuilds everything, without docker's layer cache. Returns one
    (image, "built" | "up to date", seconds) per image, in build order.
    """
    steps = steps or Steps()
    results = []
    if base is None:
        results.append(build_base(client, steps, force))
    for image in IMAGES:
        result = _build_node_image(client, steps, image, base, force)
        steps.note(f"{image}: {result[1]} ({result[2]:.1f}s)")
        results.append(result)
    return results
