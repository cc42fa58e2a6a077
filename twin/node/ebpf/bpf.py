"""The bpf() system call through ctypes: maps, programs, their info, test runs.

Only what the data plane needs, with the standard library: no libbpf. Each
command fills a zeroed `union bpf_attr` (include/uapi/linux/bpf.h) at the
field offsets below and passes its size; the kernel accepts a shorter union
than its own and zero-fills the rest, so ATTR_SIZE only has to cover the
fields we set.

Every failure raises BpfError, an OSError whose message says which command
failed on what, and for EPERM that loading BPF needs CAP_BPF (with
CAP_NET_ADMIN) or CAP_SYS_ADMIN; a refused program carries the verifier's log.
File descriptors are plain ints that the caller owns (os.close them).
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform
import struct
from dataclasses import dataclass

SYSCALL_BPF = {"x86_64": 321, "aarch64": 280, "arm64": 280}
# commands (enum bpf_cmd)
MAP_CREATE, MAP_LOOKUP_ELEM, MAP_UPDATE_ELEM, PROG_LOAD = 0, 1, 2, 5
PROG_TEST_RUN, PROG_GET_NEXT_ID, PROG_GET_FD_BY_ID, MAP_GET_FD_BY_ID = 10, 11, 13, 14
OBJ_GET_INFO_BY_FD = 15
MAP_TYPE_ARRAY, MAP_TYPE_PERCPU_ARRAY = 2, 6
OBJ_NAME_LEN = 16
ATTR_SIZE = 128
LOG_SIZE = 1 << 20
POSSIBLE_CPUS = "/sys/devices/system/cpu/possible"

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long


class BpfError(OSError):
    """A bpf() command failed (errno, and a message that says which and why)."""

    def __str__(self) -> str:  # the message names the errno's meaning already
        return str(self.strerror)


@dataclass(frozen=True)
class ProgInfo:
    id: int
    tag: str
    name: str
    type: int
    map_ids: tuple[int, ...]


@dataclass(frozen=True)
class MapInfo:
    id: int
    name: str
    type: int
    key_size: int
    value_size: int
    max_entries: int


@dataclass(frozen=True)
class TestRun:
    retval: int
    data_out: bytes
    duration_ns: int
    ctx_out: bytes = b""  # the struct __sk_buff after the run, when a `ctx` went in


def _nr() -> int:
    machine = platform.machine()
    if machine not in SYSCALL_BPF:
        raise BpfError(errno.ENOSYS, f"bpf(): no syscall number known for {machine}")
    return SYSCALL_BPF[machine]


def _ptr(buf) -> int:
    return ctypes.addressof(buf) if buf is not None else 0


def _name(name: str) -> bytes:
    raw = name.encode()
    if len(raw) >= OBJ_NAME_LEN or not all(c.isalnum() or c in "_." for c in name):
        raise BpfError(errno.EINVAL, f"bpf object name {name!r}: at most 15 of [A-Za-z0-9_.]")
    return raw


def _call(cmd: int, attr, what: str, log=None) -> int:
    # syscall(2) is variadic: pass every argument at its full width
    ret = _libc.syscall(ctypes.c_long(_nr()), ctypes.c_long(cmd), ctypes.byref(attr),
                        ctypes.c_ulong(ctypes.sizeof(attr)))
    if ret >= 0:
        return ret
    err = ctypes.get_errno()
    message = f"bpf {what}: {os.strerror(err)}"
    if err == errno.EPERM:
        message += " (loading BPF needs CAP_BPF and CAP_NET_ADMIN, or CAP_SYS_ADMIN)"
    if log is not None and log.value:
        message += "\nverifier log:\n" + log.value.decode(errors="replace").rstrip()
    raise BpfError(err, message)


def map_create(name: str, map_type: int, key_size: int, value_size: int,
               max_entries: int) -> int:
    attr = ctypes.create_string_buffer(ATTR_SIZE)
    struct.pack_into("=IIIII", attr, 0, map_type, key_size, value_size, max_entries, 0)
    struct.pack_into("=16s", attr, 28, _name(name))
    return _call(MAP_CREATE, attr, f"map_create {name}")


def prog_load(prog_type: int, insns: bytes, name: str, license: str = "GPL") -> int:
    """Load (and verify) a program; the verifier's log is in the error if it
    refuses. License GPL: some helpers are GPL-only."""
    if not insns or len(insns) % 8:
        raise BpfError(errno.EINVAL, f"prog_load {name}: {len(insns)} bytes of instructions")
    code = ctypes.create_string_buffer(insns, len(insns))
    lic = ctypes.create_string_buffer(license.encode())
    attr = ctypes.create_string_buffer(ATTR_SIZE)
    struct.pack_into("=IIQQ", attr, 0, prog_type, len(insns) // 8, _ptr(code), _ptr(lic))
    struct.pack_into("=16s", attr, 48, _name(name))
    try:
        return _call(PROG_LOAD, attr, f"prog_load {name}")
    except BpfError as first:
        if first.errno not in (errno.EINVAL, errno.EACCES):
            raise
    # refused: load again with a log, for the message (the first try stays
    # quiet so a good program costs no log buffer)
    log = ctypes.create_string_buffer(LOG_SIZE)
    struct.pack_into("=IIQ", attr, 24, 1, LOG_SIZE, _ptr(log))
    return _call(PROG_LOAD, attr, f"prog_load {name} (refused by the verifier)", log)


def _info(fd: int, size: int, what: str, fill=None):
    info = ctypes.create_string_buffer(size)
    if fill:
        fill(info)
    attr = ctypes.create_string_buffer(ATTR_SIZE)
    struct.pack_into("=IIQ", attr, 0, fd, size, _ptr(info))
    _call(OBJ_GET_INFO_BY_FD, attr, what)
    return info


def _cstr(raw: bytes) -> str:
    return raw.split(b"\0", 1)[0].decode(errors="replace")


def prog_info(fd: int) -> ProgInfo:
    """id, tag, name, type and map ids of a loaded program."""
    ids = (ctypes.c_uint32 * 64)()

    def ask_map_ids(info):
        struct.pack_into("=IQ", info, 52, len(ids), ctypes.addressof(ids))

    info = _info(fd, 80, f"prog info of fd {fd}", ask_map_ids)
    ptype, pid, tag = struct.unpack_from("=II8s", info, 0)
    (nr_map_ids,) = struct.unpack_from("=I", info, 52)
    return ProgInfo(id=pid, tag=tag.hex(), name=_cstr(info.raw[64:80]), type=ptype,
                    map_ids=tuple(ids[: min(nr_map_ids, len(ids))]))


def map_info(fd: int) -> MapInfo:
    info = _info(fd, 40, f"map info of fd {fd}")
    mtype, mid, key_size, value_size, max_entries = struct.unpack_from("=IIIII", info, 0)
    return MapInfo(id=mid, name=_cstr(info.raw[24:40]), type=mtype, key_size=key_size,
                   value_size=value_size, max_entries=max_entries)


def prog_ids() -> list[int]:
    """The id of every program loaded on the machine (BPF_PROG_GET_NEXT_ID), whoever
    loaded it."""
    ids, start = [], 0
    while True:
        attr = ctypes.create_string_buffer(ATTR_SIZE)
        struct.pack_into("=I", attr, 0, start)
        try:
            _call(PROG_GET_NEXT_ID, attr, "prog get next id")
        except BpfError as e:
            if e.errno == errno.ENOENT:  # past the last one
                return ids
            raise
        start = struct.unpack_from("=I", attr, 4)[0]
        ids.append(start)


def prog_fd_by_id(prog_id: int) -> int:
    attr = ctypes.create_string_buffer(ATTR_SIZE)
    struct.pack_into("=I", attr, 0, prog_id)
    return _call(PROG_GET_FD_BY_ID, attr, f"prog get fd by id {prog_id}")


def map_fd_by_id(map_id: int) -> int:
    attr = ctypes.create_string_buffer(ATTR_SIZE)
    struct.pack_into("=I", attr, 0, map_id)
    return _call(MAP_GET_FD_BY_ID, attr, f"map get fd by id {map_id}")


def possible_cpus(text: str | None = None) -> int:
    """How many CPUs a per-CPU map holds a value for: the CPUs in
    /sys/devices/system/cpu/possible (`0-3`, `0,2-5`, ...)."""
    if text is None:
        with open(POSSIBLE_CPUS) as f:
            text = f.read()
    count = 0
    for part in text.strip().split(","):
        low, _, high = part.partition("-")
        count += int(high or low) - int(low) + 1
    return count


def percpu_lookup(map_fd: int, key: int, value_size: int = 8) -> list[int]:
    """The per-CPU u64 values of one u32 key of a per-CPU array."""
    if value_size != 8:
        raise BpfError(errno.EINVAL, "percpu_lookup reads u64 values only")
    cpus = possible_cpus()
    keybuf = ctypes.create_string_buffer(struct.pack("=I", key), 4)
    values = ctypes.create_string_buffer(8 * cpus)
    attr = ctypes.create_string_buffer(ATTR_SIZE)
    struct.pack_into("=IIQQ", attr, 0, map_fd, 0, _ptr(keybuf), _ptr(values))
    _call(MAP_LOOKUP_ELEM, attr, f"lookup of key {key} in map fd {map_fd}")
    return list(struct.unpack_from(f"={cpus}Q", values, 0))


def lookup(map_fd: int, key: int, value_size: int) -> bytes:
    """The value of one u32 key of a (plain) array map."""
    keybuf = ctypes.create_string_buffer(struct.pack("=I", key), 4)
    value = ctypes.create_string_buffer(value_size)
    attr = ctypes.create_string_buffer(ATTR_SIZE)
    struct.pack_into("=IIQQ", attr, 0, map_fd, 0, _ptr(keybuf), _ptr(value))
    _call(MAP_LOOKUP_ELEM, attr, f"lookup of key {key} in map fd {map_fd}")
    return value.raw


def update(map_fd: int, key: int, value: bytes) -> None:
    """Set one u32 key of an array map (BPF_ANY): tests set a port's queue this way."""
    keybuf = ctypes.create_string_buffer(struct.pack("=I", key), 4)
    valbuf = ctypes.create_string_buffer(value, len(value))
    attr = ctypes.create_string_buffer(ATTR_SIZE)
    struct.pack_into("=IIQQQ", attr, 0, map_fd, 0, _ptr(keybuf), _ptr(valbuf), 0)
    _call(MAP_UPDATE_ELEM, attr, f"update of key {key} in map fd {map_fd}")


def percpu_sum(map_fd: int, key: int) -> int:
    return sum(percpu_lookup(map_fd, key))


def test_run(prog_fd: int, data: bytes, repeat: int = 1, out_room: int = 256,
             ctx: bytes | None = None) -> TestRun:
    """BPF_PROG_TEST_RUN: run a program on one packet, in the kernel, sent
    nowhere. For TC programs `data` is an Ethernet frame, and so is the output;
    `ctx` is a struct __sk_buff to start from (the kernel takes a few of its fields:
    mark, priority, gso_segs, gso_size, ...; the rest must be zero)."""
    data_in = ctypes.create_string_buffer(data, len(data))
    data_out = ctypes.create_string_buffer(len(data) + out_room)
    attr = ctypes.create_string_buffer(ATTR_SIZE)
    struct.pack_into("=IIIIQQII", attr, 0, prog_fd, 0, len(data), len(data_out),
                     _ptr(data_in), _ptr(data_out), repeat, 0)
    ctx_in = ctx_out = None
    if ctx is not None:
        ctx_in = ctypes.create_string_buffer(ctx, len(ctx))
        ctx_out = ctypes.create_string_buffer(len(ctx))
        struct.pack_into("=IIQQ", attr, 40, len(ctx), len(ctx), _ptr(ctx_in), _ptr(ctx_out))
    _call(PROG_TEST_RUN, attr, f"test run of prog fd {prog_fd}")
    retval, _, size_out = struct.unpack_from("=III", attr, 4)
    (duration,) = struct.unpack_from("=I", attr, 36)
    (ctx_size_out,) = struct.unpack_from("=I", attr, 44)
    return TestRun(retval=retval, data_out=data_out.raw[:size_out], duration_ns=duration,
                   ctx_out=ctx_out.raw[:ctx_size_out] if ctx_out is not None else b"")
