"""A stand-in for `twin drill run --json`: drill results shaped as the runner prints them
(contracts: twin/chaos/report.py's docstring), made up but plausible for mrc-4p on netns.

    t0-t1-flap    mrc, compared against single-path: t0-p0-r0:eth3 flaps 3 times;
                  plane 0 dips for a few ms per flap while single-path stalls 50 ms each
    t1-blackhole  mrc: t1-p1-0 drops what it forwards; the EVs map it out, the prober
                  names it 140 ms in, and `localized_ms <= 100` fails

tests/golden/drill-results.json is `drill_results()`; regenerate with
    UPDATE_GOLDEN=1 .venv/bin/pytest tests/unit/test_drill_report.py
`long_run(60)` is the 60 s run the size test uses (60000 bins a plane).
"""

from __future__ import annotations

import random
from pathlib import Path

from twin.fabric.model import build_fabric
from twin.fabric.spec import load_spec

ROOT = Path(__file__).resolve().parents[2]

MS = 10**6
T0_NS = 912_345_678_901  # CLOCK_MONOTONIC of the traffic's first write
SIZE = 64 << 20
PKT = 4096
PLANES = 4
EVS = 128
FLAP = "t0-p0-r0:eth3"
FLAP_LINK = "t0-p0-r0:eth3--t1-p0-0:eth1"
HOLE = "t1-p1-0"


def drill_results(seconds: float = 0.6) -> dict:
    """Three runs: t0-t1-flap (mrc and its single-path baseline) and t1-blackhole.
    `seconds` stretches the transfers (and so the bins) to about that long."""
    size = int(SIZE * seconds / 0.6)
    return {"drills": [_flap_mrc(size), _flap_single_path(size), _blackhole(size)]}


def long_run(seconds: float) -> dict:
    """t0-t1-flap's mrc run alone, its transfer stretched to about `seconds`."""
    return {"drills": [_flap_mrc(int(SIZE * seconds / 0.6))]}


def _links() -> list:
    return list(build_fabric(load_spec(ROOT / "lab/fabrics/mrc-4p.yml")).links)


def _bins(rng: random.Random, size: int, rate_for) -> dict[str, list[int]]:
    """Bytes acked per 1 ms bin and plane until `size` bytes are acked: rate_for(ms,
    plane) is a plane's share of one endpoint's ~0.9 Gbit/s, with packet noise."""
    planes: dict[str, list[int]] = {str(p): [] for p in range(PLANES)}
    acked, ms = 0, 0
    while acked < size:
        for p in range(PLANES):
            want = rate_for(ms, p) * rng.uniform(0.92, 1.08)
            got = max(0, min(size - acked, int(want) // PKT * PKT))
            planes[str(p)].append(got)
            acked += got
        ms += 1
    return planes


def _load(rng: random.Random, heavy: dict[str, float]) -> list[dict]:
    """Bytes per link: `heavy` link ids carry that many bytes, the rest only probes."""
    return [{"link": lk.id, "plane": lk.plane, "kind": lk.kind,
             "bytes": int(heavy.get(lk.id, 0) * rng.uniform(0.99, 1.01))
             + rng.randrange(40_000, 60_000)} for lk in _links()]


def _ev(t_ms: float, source: str, kind: str, target: str | None, detail: str) -> dict:
    return {"t_ns": T0_NS + int(t_ms * MS), "source": source, "kind": kind,
            "target": target, "detail": detail}


def _steady(wall_ms: float) -> list[dict]:
    return [_ev(-wall_ms, "drill", "steady-state", None, "verify: 96 paths, 16 loopbacks ok"),
            _ev(-35.5, "drill", "steady-state", None, "goodput 0.91 Gbit/s >= floor 0.10"),
            _ev(0, "drill", "traffic", "r0h0", "bulk 64 MiB r0h0 -> r1h0, 1 QP")]


def _end(done_ms: float) -> list[dict]:
    return [_ev(done_ms, "drill", "traffic", "r0h0", "done: 64 MiB acked, byte-exact"),
            _ev(done_ms + 12.4, "drill", "rollback", None, "faults cleared"),
            _ev(done_ms + 391.0, "drill", "rollback", None, "verify: 96 paths ok")]


def _ev_states(n_bins: int, bad_at) -> dict:
    good, bad, skip = [], [], []
    for ms in range(n_bins):
        b = bad_at(ms)
        good.append(EVS)  # a retired EV is replaced at once, from the same plane
        bad.append(b)
        skip.append(1 if ms % 37 == 0 else 0)
    return {"bin_ns": MS, "series": {"good": good, "assumed_bad": bad, "skip": skip}}


def _flap_mrc(size: int) -> dict:
    rng = random.Random(7)
    per_plane = 0.9e9 / 8 / 1000 / PLANES  # bytes per ms per plane
    downs = [150, 250, 350]

    def rate(ms, p):
        for d in downs:
            if p == 0 and d <= ms < d + 3:  # in-flight on the dead path lost, EVs retired
                return per_plane * (0.35, 0.6, 0.85)[ms - d]
            if p and d <= ms < d + 3:  # the other planes take a little more
                return per_plane * 1.06
        return per_plane

    planes = _bins(rng, size, rate)
    n = len(planes["0"])

    def bad(ms):
        for d in downs:
            if d <= ms < d + 50:
                return min(16, 4 * (ms - d + 1))
            if d + 50 <= ms < d + 70:  # background probes resurrect them
                return max(0, 16 - (ms - d - 50))
        return 0

    timeline = _steady(412.0)
    for i, d in enumerate(downs, 1):
        timeline += [
            _ev(d, "fault", "link-down", FLAP, f"flap {i}/3"),
            _ev(d + 0.21, "endpoint", "first_loss", "r0h0", "qp 1 ev 0x0003a1c0 plane 0 t1 0"),
            _ev(d + 0.38, "endpoint", "ev_state", "r0h0",
                "qp 1 ev 0x0003a1c0 good->assumed_bad: loss of psn 4411 (16 EVs share the link)"),
            _ev(d + 0.52, "endpoint", "retransmit", "r0h0", "qp 1: 9 packets on plane 1-3"),
            _ev(d + 1.87, "endpoint", "repaired", "r0h0", "qp 1: 9 packets acked elsewhere"),
            _ev(d + 21.3, "probe", "named", FLAP_LINK, "3 failed probes (host->T0->T1->T0)"),
            _ev(d + 50, "fault", "link-up", FLAP, f"flap {i}/3"),
            _ev(d + 66.0, "probe", "cleared", FLAP_LINK, "probes ok again"),
            _ev(d + 69.5, "endpoint", "ev_state", "r0h0",
                "qp 1: 16 EVs assumed_bad->good: background probes ok"),
        ]
    timeline += _end(n + 0.4)
    links = {lk.id: 0.0 for lk in _links()}
    for lk in _links():
        if lk.kind == "host" and lk.a.node in ("r0h0", "r1h0"):
            links[lk.id] = size / PLANES
        elif lk.kind == "fabric" and lk.a.node.startswith("t0-"):
            links[lk.id] = size / PLANES / 2
    links[FLAP_LINK] *= 0.74  # down 150 of its ~600 ms
    links["t0-p0-r1:eth3--t1-p0-0:eth2"] *= 0.74
    return {
        "name": "t0-t1-flap",
        "description": "Several flaps of one T0-T1 link during a transfer: byte-exact, and "
                       "the goodput cost stays near the lost share of capacity.",
        "lab": "mrc-4p", "mode": "mrc", "baseline_of": None, "seed": 7, "verdict": "pass",
        "expectations": [
            {"what": "exact", "want": "true", "got": "true", "ok": True},
            {"what": "repair_ms", "want": "<= 5", "got": "1.87", "ok": True},
            {"what": "goodput_retained", "want": ">= 0.9625 (1 - lost_share - 0.025)",
             "got": "0.984", "ok": True},
            {"what": "localized", "want": "target", "got": FLAP_LINK, "ok": True},
        ],
        "faults": [{"kind": "link-flap", "target": FLAP, "at_ns": T0_NS + downs[0] * MS,
                    "detection_us": 380, "repair_us": 1870, "packets_lost": 9,
                    "localized": True, "localized_us": 21300}],
        "goodput_retained": 0.984, "exact": True, "wall_s": 1.42 + n / 1000,
        "t0_ns": T0_NS,
        "goodput": {"bin_ns": MS, "planes": planes},
        "ev_states": _ev_states(n, bad),
        "timeline": timeline,
        "link_load": _load(rng, links),
        "metrics": {"dip_depth": 0.16, "dip_ms": 3.0, "back_to_90_ms": 2.0,
                    "completion_s": n / 1000, "goodput_gbps": round(size * 8 / n / 1e6, 3)},
    }


def _flap_single_path(size: int) -> dict:
    """Single-path: one EV, on plane 0 through t1-p0-0, so across the flapping link."""
    rng = random.Random(8)
    rate_all = 0.85e9 / 8 / 1000
    downs = [150, 250, 350]

    def stalled(ms):  # down for 50 ms; RC's timeout retransmits 4 ms after it is up
        return any(d <= ms < d + 54 for d in downs)

    planes = _bins(rng, size, lambda ms, p: 0 if p or stalled(ms) else rate_all)
    n = len(planes["0"])
    timeline = _steady(405.0)
    for i, d in enumerate(downs, 1):
        timeline += [
            _ev(d, "fault", "link-down", FLAP, f"flap {i}/3"),
            _ev(d + 0.24, "endpoint", "first_loss", "r0h0", "qp 1 ev 0x00000001 plane 0 t1 0"),
            _ev(d + 50, "fault", "link-up", FLAP, f"flap {i}/3"),
            _ev(d + 54.1, "endpoint", "retransmit", "r0h0", "qp 1: timeout, 38 packets"),
            _ev(d + 55.9, "endpoint", "repaired", "r0h0", "qp 1: 38 packets acked"),
        ]
    timeline += _end(n + 0.3)
    path = ["r0h0:eth1--t0-p0-r0:eth1", FLAP_LINK, "t0-p0-r1:eth3--t1-p0-0:eth2",
            "r1h0:eth1--t0-p0-r1:eth1"]
    ev = _ev_states(n, lambda ms: 0)
    ev["series"] = {"good": [0 if stalled(ms) else 1 for ms in range(n)],
                    "assumed_bad": [1 if stalled(ms) else 0 for ms in range(n)]}
    return {
        "name": "t0-t1-flap",
        "description": "Several flaps of one T0-T1 link during a transfer: byte-exact, and "
                       "the goodput cost stays near the lost share of capacity.",
        "lab": "mrc-4p", "mode": "single-path", "baseline_of": "mrc", "seed": 7,
        "verdict": "pass",
        "expectations": [{"what": "exact", "want": "true", "got": "true", "ok": True}],
        "faults": [{"kind": "link-flap", "target": FLAP, "at_ns": T0_NS + downs[0] * MS,
                    "detection_us": None, "repair_us": 55900, "packets_lost": 38,
                    "localized": True, "localized_us": 21800}],
        "goodput_retained": 0.71, "exact": True, "wall_s": 1.40 + n / 1000,
        "t0_ns": T0_NS,
        "goodput": {"bin_ns": MS, "planes": planes},
        "ev_states": ev,
        "timeline": timeline,
        "link_load": _load(rng, {lk: size * 1.002 for lk in path}),
        "metrics": {"dip_depth": 1.0, "dip_ms": 54.0, "back_to_90_ms": 55.0,
                    "completion_s": n / 1000, "goodput_gbps": round(size * 8 / n / 1e6, 3)},
    }


def _blackhole(size: int) -> dict:
    rng = random.Random(9)
    per_plane = 0.9e9 / 8 / 1000 / PLANES
    at = 250

    def rate(ms, p):
        if p == 1 and at <= ms < at + 4:  # half of plane 1's EVs silently dead
            return per_plane * (0.5, 0.55, 0.8, 0.95)[ms - at]
        return per_plane

    planes = _bins(rng, size, rate)
    n = len(planes["0"])
    hole = [lk.id for lk in _links() if lk.b.node == HOLE]
    timeline = _steady(398.0) + [
        _ev(at, "fault", "blackhole", HOLE, "nft drop in t1-p1-0: links and carrier stay up"),
        _ev(at + 0.33, "endpoint", "first_loss", "r0h0", "qp 1 ev 0x0005c002 plane 1 t1 0"),
        _ev(at + 0.41, "endpoint", "ev_state", "r0h0",
            "qp 1 ev 0x0005c002 good->assumed_bad: loss of psn 8120 (16 EVs cross t1-p1-0)"),
        _ev(at + 0.6, "endpoint", "retransmit", "r0h0", "qp 1: 11 packets on planes 0,2,3"),
        _ev(at + 2.1, "endpoint", "repaired", "r0h0", "qp 1: 11 packets acked elsewhere"),
        _ev(at + 22.0, "endpoint", "probe", "r0h0", "ev 0x0005c002: lost"),
        _ev(at + 140.2, "probe", "named", HOLE, "12 failed probes via t1-p1-0, 0 via t1-p1-1"),
        _ev(at + 250, "fault", "clear", HOLE, "blackhole removed"),
        _ev(at + 262.0, "endpoint", "probe", "r0h0", "ev 0x0005c002: ok"),
        _ev(at + 270.5, "endpoint", "ev_state", "r0h0",
            "qp 1: 16 EVs assumed_bad->good: background probes ok"),
        _ev(at + 281.0, "probe", "cleared", HOLE, "probes ok again"),
    ] + _end(n + 0.5)
    links = {}
    for lk in _links():
        if lk.kind == "host" and lk.a.node in ("r0h0", "r1h0"):
            links[lk.id] = size / PLANES
        elif lk.kind == "fabric":
            links[lk.id] = size / PLANES / 2
    for lk in hole:
        links[lk] *= 0.45  # carried nothing from 250 ms until the EVs came back
    return {
        "name": "t1-blackhole",
        "description": "A T1 drops what it forwards while its links and carrier stay up: "
                       "the EVs map it out with no control plane, and the prober names it.",
        "lab": "mrc-4p", "mode": "mrc", "baseline_of": None, "seed": 11, "verdict": "fail",
        "expectations": [
            {"what": "exact", "want": "true", "got": "true", "ok": True},
            {"what": "repair_ms", "want": "<= 50", "got": "2.1", "ok": True},
            {"what": "goodput_retained", "want": ">= 0.675 (1 - lost_share - 0.2)",
             "got": "0.991", "ok": True},
            {"what": "localized", "want": "target", "got": HOLE, "ok": True},
            {"what": "localized_ms", "want": "<= 100", "got": "140.2", "ok": False},
        ],
        "faults": [{"kind": "blackhole", "target": HOLE, "at_ns": T0_NS + at * MS,
                    "detection_us": 410, "repair_us": 2100, "packets_lost": 11,
                    "localized": True, "localized_us": 140200}],
        "goodput_retained": 0.991, "exact": True, "wall_s": 1.51 + n / 1000,
        "t0_ns": T0_NS,
        "goodput": {"bin_ns": MS, "planes": planes},
        "ev_states": _ev_states(n, lambda ms: 16 if at <= ms < at + 270 else 0),
        "timeline": timeline,
        "link_load": _load(rng, links),
        "metrics": {"dip_depth": 0.12, "dip_ms": 4.0, "back_to_90_ms": 2.0,
                    "completion_s": n / 1000, "goodput_gbps": round(size * 8 / n / 1e6, 3)},
    }
