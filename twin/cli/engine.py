"""The Docker engine and the node images: twin engine ..., twin images ..."""

from __future__ import annotations

import click

from twin.cli.base import RichSteps, emit_json, main, out
from twin.errors import UsageError

# -- engine and images --------------------------------------------------------


@main.group()
def engine():
    """The Docker engine the container runtimes use. twin starts one only when
    none answers, always as `dockerd --bridge=none --iptables=false`."""


@engine.command("start")
def engine_start():
    """Install docker.io if missing and start dockerd (idempotent)."""
    from twin import dockerd as E

    steps = RichSteps()
    try:
        what, _ = E.start(steps)
    finally:
        steps.done()
    out.print(f"docker engine: {what}")


@engine.command("stop")
def engine_stop():
    """Stop the dockerd twin started (never one it did not)."""
    from twin import dockerd as E

    out.print(E.stop())


@engine.command("status")
@click.option("--json", "as_json", is_flag=True)
def engine_status(as_json):
    """Does an engine answer, and which version."""
    from twin import dockerd as E

    c = E.client(timeout=5)
    info = {"running": c is not None}
    if c is not None:
        v = c.version()
        info.update(version=v.get("Version"), api=v.get("ApiVersion"))
    if as_json:
        emit_json(info)
    else:
        out.print(f"docker engine {info['version']} (API {info['api']})" if c else
                  "no docker engine answers (twin engine start)")


@main.group()
def images():
    """Node images: mrc-twin/router and mrc-twin/host."""


@images.command("build")
@click.option("--force", is_flag=True, help="Rebuild even if the inputs are unchanged.")
@click.option("--base", default=None, help="Build on this base image (e.g. debian:bookworm-slim "
              "from your registry) instead of the offline debootstrap base.")
def images_build(force, base):
    """Build the images (offline by default: a debootstrap base from apt's mirror)."""
    from twin import dockerd as E
    from twin import images as I

    c = E.client()
    if c is None:
        raise UsageError("no docker engine answers; run `twin engine start` first")
    steps = RichSteps()
    try:
        results = I.build_images(c, steps, force=force, base=base)
    finally:
        steps.done()
    for image, what, seconds in results:
        out.print(f"{image}: {what} ({seconds:.1f}s)")


@images.command("status")
@click.option("--json", "as_json", is_flag=True)
def images_status(as_json):
    """Which images exist and whether they match their inputs."""
    from twin import dockerd as E
    from twin import images as I

    c = E.client(timeout=5)
    if c is None:
        raise UsageError("no docker engine answers; run `twin engine start` first")
    rows = I.image_status(c)
    if as_json:
        emit_json(rows)
        return
    for r in rows:
        state = "current" if r.get("current") else ("stale" if r.get("present") else "missing")
        out.print(f"{r['image']:<28} {state}")
