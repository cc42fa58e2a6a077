"""The recorded traces of the transport's differential test, as seeds and settings.

`python -m twin.mrc.trace record [NAME...]` runs each spec below through the simulated
fabric (twin.mrc.sim.run_transfer), records every call into its Sender (and, where
`receiver` names one, its Receiver) and writes tests/traces/<name>.json.gz. The same
specs give the same files: every random draw is seeded.

Sizes are small on purpose (128 to 512 packets of 1 KiB): the files stay a few tens
of KB, and the test replays every one in well under a second.
"""

from __future__ import annotations

from collections.abc import Callable

from twin.mrc.sim import PathModel, SimFabric
from twin.mrc.trace import TraceSpec

KIB = 1024
MTU = {"mtu": KIB}


def fabric(seed: int = 1, paths: dict | None = None, **default) -> Callable[[], SimFabric]:
    """A SimFabric maker: `default` PathModel fields for every path, `paths` per path."""
    return lambda: SimFabric(PathModel(**default),
                             {k: PathModel(**v) for k, v in (paths or {}).items()}, seed=seed)


def at(t_ns: int, fn) -> tuple:
    return (t_ns, fn)


def _cut(plane: int, t1: int):
    def cut(f: SimFabric) -> None:
        f.paths[(plane, t1)] = PathModel(dead=True)
    return cut


def _heal(plane: int, t1: int):
    def heal(f: SimFabric) -> None:
        f.paths.pop((plane, t1), None)
    return heal


def _slow(plane: int, t1: int):
    def slow(f: SimFabric) -> None:
        f.paths[(plane, t1)] = PathModel(delay_ns=300_000, jitter_ns=100_000)
    return slow


def _ports(bitmap: int):
    def ports(s, f, now: int) -> None:
        s.set_local_ports(bitmap, now)
    return ports


def _peer_ports(bitmap: int):
    def peer(f: SimFabric) -> None:
        f.peer_ports = bitmap
    return peer


def _deny(n: int):
    def deny(s, f, now: int) -> None:  # the first n EVs in the slots now
        s.deny([ev.value for ev in s.evs.active[:n]], now)
    return deny


def _probe_round(s, f, now: int) -> None:
    """The endpoint's background probe round: a few retired EVs, each over the fabric."""
    for ev in s.evs.probe_candidates(4):
        s.probe_result(ev.value, bool(f.arrivals(ev.value, now)), now)


def _delay_all(delay_ns: int):
    def delay(f: SimFabric) -> None:
        f.default.delay_ns = delay_ns
    return delay


def _all_dead(f: SimFabric) -> None:
    f.default.dead = True
    f.paths.clear()


RATED = {"rate_bps": 1_000_000_000, "delay_ns": 20_000, "jitter_ns": 2_000}

SPECS = [
    TraceSpec("clean", "no loss, little jitter: the plain spray", 128 * KIB, fabric(),
              config=MTU),
    TraceSpec("loss_1pct", "1% random loss on every path: per-EV, RACK, retirements",
              384 * KIB, fabric(seed=3, loss=0.01), config=MTU),
    TraceSpec("loss_0_1pct", "0.1% random loss: rare retirements", 512 * KIB,
              fabric(seed=5, loss=0.001), config=MTU),
    TraceSpec("burst_loss", "loss bursts of 8 packets: dead paths, retirements", 384 * KIB,
              fabric(seed=2, burst_loss=0.01, burst_len=8), config=MTU),
    TraceSpec("reorder", "jitter 5x the path delay, one path 15x slower from 100 us: "
              "RACK's window widens, spurious losses undone", 256 * KIB,
              fabric(seed=4, jitter_ns=100_000), config=MTU, receiver="rx_reorder",
              run={"events": [at(100_000, _slow(1, 1))]}),
    TraceSpec("duplicates", "20% of packets arrive twice: duplicate SACKs", 256 * KIB,
              fabric(seed=6, duplicate=0.2), config=MTU),
    TraceSpec("link_cut", "plane 1 T1 0 dies at 150 us: its EVs retire, in-flight resent",
              384 * KIB, fabric(seed=7), config=MTU, run={"events": [at(150_000, _cut(1, 0))]}),
    TraceSpec("port_down_up", "our plane-1 port down then up; the peer's plane-2 port too",
              384 * KIB, fabric(seed=8), config=MTU,
              run={"actions": [at(100_000, _ports(0b1101)), at(400_000, _ports(0b1111))],
                   "events": [at(250_000, _peer_ports(0b1011)),
                              at(600_000, _peer_ports(0b1111))]}),
    TraceSpec("ecn_marks", "rated paths marking CE above 4 KiB queued: ECN skips, nscc",
              384 * KIB, fabric(seed=9, mark_bytes=4 * KIB, **RATED),
              config={**MTU, "init_window": 64}),
    TraceSpec("trims", "rated paths trimming above 6 KiB queued: NACK(TRIMMED), QuickAdapt",
              384 * KIB, fabric(seed=10, queue_bytes=6 * KIB, trim=True, **RATED),
              config={**MTU, "init_window": 64}),
    TraceSpec("stall_tail_probe", "every path 3 ms slow for 4 ms (a stalled receiver): the "
              "oldest first copy goes again as a tail probe, one a tick, no loss declared",
              512 * KIB, fabric(seed=19), config=MTU,
              run={"events": [at(400_000, _delay_all(3_000_000)),
                              at(4_400_000, _delay_all(20_000))]}),
    TraceSpec("denylist", "three EVs in the slots denied mid-transfer", 256 * KIB,
              fabric(seed=11), config=MTU, run={"actions": [at(60_000, _deny(3))]}),
    TraceSpec("probes_revive", "a path cut then healed: background probes revive its EVs",
              512 * KIB, fabric(seed=12, rate_bps=200_000_000), config=MTU,
              run={"events": [at(100_000, _cut(0, 1)), at(900_000, _heal(0, 1))],
                   "actions": [at(t, _probe_round) for t in range(200_000, 20_000_000,
                                                                   100_000)]}),
    TraceSpec("single_path_fail", "RoCE: go-back-N under 2% loss, then the fabric dies: "
              "QpFailed at the retry limit", 256 * KIB, fabric(seed=13, loss=0.02),
              config={**MTU, "retry_limit": 3},
              run={"mode": "single-path", "events": [at(300_000, _all_dead)]}),
    TraceSpec("spray_static", "spray-static under 1% loss: resends, no retirements",
              384 * KIB, fabric(seed=14, loss=0.01), config=MTU,
              run={"mode": "spray-static"}),
    TraceSpec("dcqcn_cnp", "RoCE with DCQCN on a slower, marking link: CNPs cut the rate "
              "(its NP sends every 50 µs, the unscaled N: those sooner than half the "
              "sender's N are limited)",
              96 * KIB, fabric(seed=15, mark_bytes=4 * KIB, **{**RATED, "rate_bps": 300_000_000}),
              config={**MTU, "cc": "dcqcn", "line_rate_bps": 1_000_000_000},
              run={"mode": "single-path", "cnp_ns": 50_000}),
    TraceSpec("delay_cc", "the delay-only window on rated, queueing paths", 384 * KIB,
              fabric(seed=16, rate_bps=300_000_000), config={**MTU, "cc": "delay"}),
    TraceSpec("slow_path_nak", "one path 1 ms slow under a deep window: NAKs of deep holes",
              512 * KIB, fabric(seed=17, paths={(3, 0): {"delay_ns": 1_000_000,
                                                         "burst_loss": 0.01}}),
              config={**MTU, "init_window": 128}, receiver="rx_deep_holes"),
    TraceSpec("dup_ce_trim", "duplicates, CE marks and trims at once", 256 * KIB,
              fabric(seed=18, duplicate=0.2, mark_bytes=3 * KIB, queue_bytes=8 * KIB, trim=True,
                     **RATED),
              config={**MTU, "init_window": 64}, receiver="rx_dup_ce_trim", sender=False),
]
