"""FRR on a lab's routers (routing: bgp): one instance per router, inside its node.

    ensure_installed(note)          Debian's frr, installed with no service started
    start(rt, node, daemons)        zebra, bgpd (and bfdd) inside the node
    configure(rt, node)             the node's rendered frr.conf, through vtysh -b
    show(rt, node, command) -> obj  a `show ... json` command's answer, parsed
    run_commands(rt, node, cmds)    vtysh commands in one session (a fault's change)

Every instance keeps its sockets, pid files and logs in the node's own run directory
(`<run dir>/<lab>/nodes/<node>/frr/` on netns; the bind-mounted /run/mrc-twin/frr in a
container), never in the machine's /var/run/frr or /etc/frr: two labs, two checkouts
and the machine's own FRR never share a socket. The daemons start with no
configuration (`-f /dev/null`) and get the node's frr.conf (config/<node>/frr.conf,
twin.fabric.frr, copied beside them) from vtysh -b, which hands each daemon its part: given whole to
bgpd, a `bfd` block ends its parse (FRR 8.4 reads a daemon's file alone). They die
with their node: the netns runtime stops every process in a namespace before it
deletes it, a container's die with it.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from twin import apt
from twin.errors import CommandFailed, LabError

SBIN = Path("/usr/lib/frr")  # Debian's
DIR = "frr"  # the instance's directory in the node's run directory
# The daemons keep root (-u root) and run with the VTY group (-g frrvty, which FRR
# requires its user to be in; Debian's package creates it): dropped to user frr, they
# could not reach a run directory under a 0700 parent (pytest's, a user's home).
USER, GROUP = "root", "frrvty"
REPLY_MAX = 16 << 20  # a `show ... json` answer bigger than this is refused unread
SHOW_TIMEOUT_S = 20.0


def _in_node(rt, node: str, argv: list[str], timeout: float) -> str:
    """argv inside the node as a person's `twin exec` runs it (Runtime.shell_argv): in
    a container, with its filesystem and processes too, so the image's FRR runs there
    and dies with it (`exec`, the network namespace alone, would run this machine's
    FRR, on this machine's paths, outliving the container). Its stdout."""
    import subprocess

    full = rt.shell_argv(node, argv)
    try:
        proc = subprocess.run(full, capture_output=True, text=True, timeout=timeout,
                              stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        raise CommandFailed(argv, -1, f"no answer within {timeout:g}s") from None
    except OSError as e:
        raise CommandFailed(argv, -1, e.strerror or str(e)) from None
    if proc.returncode != 0:
        raise CommandFailed(argv, proc.returncode, proc.stderr or proc.stdout)
    return proc.stdout


def missing() -> str | None:
    """Why this machine cannot run FRR's daemons, or None."""
    absent = [d for d in ("zebra", "bgpd", "bfdd") if not (SBIN / d).exists()]
    if absent:
        return f"no {', '.join(absent)} in {SBIN} (Debian's frr package)"
    if not shutil.which("vtysh"):
        return "no vtysh on PATH (Debian's frr package)"
    return None


def ensure_installed(note=None) -> None:
    apt.install("frr", lambda: None if missing() else str(SBIN / "bgpd"),
                "routing: bgp runs FRR on every router", note)


def run_dir(rt, node: str) -> tuple[str, Path]:
    """The instance's directory as the node sees it, and as this process opens it."""
    view = rt.node_view(node)
    inside = f"{view.run_dir}/{DIR}"
    return inside, Path(view.from_host(inside))


def daemon_argv(daemon: str, inside: str) -> list[str]:
    """How one daemon starts in the node: detached, its sockets and files in `inside`,
    no TCP VTY (-P 0: vtysh talks over the unix sockets); zebra with a netlink buffer
    big enough for a large lab's route bursts."""
    extra = ["-s", "90000000"] if daemon == "zebra" else []
    return [str(SBIN / daemon), "-d", "-u", USER, "-g", GROUP, "-P", "0",
            "-z", f"{inside}/zserv.api",
            "--vty_socket", inside, "-i", f"{inside}/{daemon}.pid", "-f", "/dev/null",
            "--log", f"file:{inside}/{daemon}.log", *extra]


def daemons(bfd: bool) -> tuple[str, ...]:
    """What a router runs: zebra first (the others connect to it), bgpd, bfdd with BFD."""
    return ("zebra", "bgpd", *(("bfdd",) if bfd else ()))


def start(rt, node: str, daemons: tuple[str, ...]) -> None:
    """Start `daemons` (zebra first: the others connect to it) inside the node."""
    inside, here = run_dir(rt, node)
    here.mkdir(parents=True, exist_ok=True)
    here.chmod(0o750)
    for stale in [*here.glob("*.pid"), *here.glob("*.vty"), here / "zserv.api"]:
        stale.unlink(missing_ok=True)  # a rebooted node's daemons died with it
    for daemon in daemons:
        try:
            _in_node(rt, node, daemon_argv(daemon, inside), 30)
        except CommandFailed as e:
            raise LabError(f"{node}: FRR's {daemon} did not start: {e}; its log: "
                           f"{here / (daemon + '.log')}") from None


def configure(rt, node: str) -> None:
    """Hand the node's frr.conf to its daemons: copied into the instance's directory
    first (vtysh -b takes a lock beside the file, and a container's config mount is
    read-only), then read from there by vtysh -b."""
    inside, here = run_dir(rt, node)
    view = rt.node_view(node)
    source = Path(view.from_host(f"{view.config_dir}/frr.conf"))
    try:
        (here / "frr.conf").write_bytes(source.read_bytes())
    except OSError as e:
        raise LabError(f"{node}: cannot read its FRR configuration {source}: "
                       f"{e.strerror}") from None
    try:
        _in_node(rt, node, ["vtysh", "--vty_socket", inside, "--config_dir", inside, "-b"],
                 60)
    except CommandFailed as e:
        raise LabError(f"{node}: FRR refused its configuration ({source}): {e}") from None


def show(rt, node: str, command: str) -> object:
    """`command` (a vtysh `show ... json`) in the node's FRR, parsed; LabError naming the
    node when FRR does not answer or answers with something that is not JSON."""
    inside, _ = run_dir(rt, node)
    try:
        out = _in_node(rt, node, ["vtysh", "--vty_socket", inside, "-c", command],
                       SHOW_TIMEOUT_S)
    except CommandFailed as e:
        raise LabError(f"{node}: FRR did not answer `{command}`: {e}") from None
    if len(out) > REPLY_MAX:
        raise LabError(f"{node}: `{command}` answered {len(out):,} bytes (over "
                       f"{REPLY_MAX:,}); not read")
    try:
        return json.loads(out)
    except ValueError:
        first = out.strip().splitlines()[0][:120] if out.strip() else "nothing"
        raise LabError(f"{node}: `{command}` did not answer JSON: {first!r}") from None


def run_commands(rt, node: str, commands: list[str]) -> None:
    """`commands` in one vtysh session in the node (configure terminal ... carries over
    from one to the next); LabError naming the node and what FRR said."""
    inside, _ = run_dir(rt, node)
    argv = ["vtysh", "--vty_socket", inside]
    for c in commands:
        argv += ["-c", c]
    try:
        out = _in_node(rt, node, argv, SHOW_TIMEOUT_S)
    except CommandFailed as e:
        raise LabError(f"{node}: FRR refused `{'; '.join(commands)}`: {e.stderr}") from None
    if "% " in out:  # vtysh says what it refused on stdout, with status 0
        said = next(line for line in out.splitlines() if "% " in line)
        raise LabError(f"{node}: FRR refused `{'; '.join(commands)}`: {said.strip()}")
