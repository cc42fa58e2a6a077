"""Runtimes that run a lab's nodes. Importing this package registers them."""

from twin.runtime import containerlab, docker, fake, netns  # noqa: F401  (registration)
from twin.runtime.base import AUTO_ORDER, RUNTIMES, Runtime, get_runtime, pick_runtime

__all__ = ["AUTO_ORDER", "RUNTIMES", "Runtime", "get_runtime", "pick_runtime"]
