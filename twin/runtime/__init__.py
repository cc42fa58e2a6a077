"""Runtimes that run a lab's nodes. Importing this package registers them."""

from twin.runtime import (  # noqa: F401  (registration)
    containerlab,
    docker,
    docker_boot,
    fake,
    netns,
    remote,
)
from twin.runtime.base import AUTO_ORDER, RUNTIMES, Runtime, get_runtime, pick_runtime

__all__ = ["AUTO_ORDER", "RUNTIMES", "Runtime", "get_runtime", "pick_runtime"]
