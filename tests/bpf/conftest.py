"""The `bpf` tier: tests that load programs and maps into the kernel with the bpf()
system call (BPF_PROG_LOAD, BPF_PROG_TEST_RUN, live filters and routes in scratch
namespaces). Every test under tests/bpf/ is in it by living here: this conftest marks
it `bpf` and, where this process cannot load eBPF, skips it with the one reason
`missing()` gives. What needs no syscall (assembling programs, checking their bytes,
the netlink messages) stays in tests/unit.

The kernel is asked once per session, for a one-entry map: root alone is not enough
(a kernel without CONFIG_BPF_SYSCALL, or a container's seccomp profile, refuses).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from twin.node import ebpf
from twin.node.ebpf import bpf

HERE = Path(__file__).resolve().parent


def missing() -> str | None:
    """Why this process cannot load eBPF here, or None: it asks the kernel for a
    one-entry map."""
    if os.geteuid() != 0:
        why = f"this process is not root (euid {os.geteuid()})"
    else:
        try:
            os.close(bpf.map_create("mrc_probe", bpf.MAP_TYPE_PERCPU_ARRAY, 4, 8, 1))
            return None
        except OSError as e:
            why = f"bpf() refused: {e}"
    return f"needs root and the bpf() syscall: {why}"


def in_tier(item: pytest.Item) -> bool:
    return HERE in Path(item.path).resolve().parents


# tryfirst: the marker is on every item before `-m bpf` / `-m "not bpf"` selects
@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    mine = [item for item in items if in_tier(item)]
    if not mine:
        return
    reason = missing()
    for item in mine:
        item.add_marker(pytest.mark.bpf)
        if reason:
            item.add_marker(pytest.mark.skip(reason=reason))


@pytest.fixture
def counters():
    """A fresh counters map (twin.node.ebpf.counters_map), closed after the test."""
    fd = ebpf.counters_map(None)
    yield fd
    os.close(fd)
