"""Chaos soak: all-to-all traffic through the MRC endpoints while link faults come and go.

It brings up its own netns lab (a shipped fabric, default mrc-4p, renamed
`soak-<6 hex>`) with its own run and build directories (TWIN_RUN_DIR,
TWIN_BUILD_DIR in a fresh temp dir), so no other lab is seen or touched. Then,
until --minutes pass:

    rounds    one all-to-all transfer after another (twin.traffic, --size per flow);
              every flow must be byte-exact (Run.ok: sha256 of both buffers equal,
              the QP not failed); a timeout or a non-exact flow fails the soak
    chaos     a thread applies a random fault from CATALOG every --fault-every
              seconds (seeded: --seed) and reverts it 0.5-1.5 fault periods later;
              at most --max-faults in force, never all of a host's links
    nft       after every revert, `nft list tables` in every node: a twin loss (or
              blackhole) table must exist exactly where a link-loss (blackhole)
              fault is in force
    endpoints after every round, each endpoint daemon's VmRSS and open fds (pid from
              the control `hello`); RSS must not grow by more than 50% or 64 MiB,
              fds by more than FD_SLACK, over the sample after WARMUP_ROUNDS rounds

At the end (also after Ctrl-C, SIGTERM or an error) the faults are cleared and the
lab is taken down, and then nothing may be left: no `twin-<lab>-*` namespace, no
endpoint process, no state under the run directory, no new veth in the root
namespace. Exit 0 only if everything held; 1 if a check failed; 130/143 when
interrupted. --json prints the summary as JSON (progress then goes to stderr).

Usage: .venv/bin/python bench/soak.py [--minutes 10] [--size 4M] [--seed N] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import yaml

MiB = 1 << 20
WARMUP_ROUNDS = 2  # RSS and fds are judged against the sample after this many rounds
RSS_GROWTH_FRACTION, RSS_GROWTH_BYTES = 0.5, 64 * MiB
FD_SLACK = 8
SETTLE_S = 5.0  # how long leftovers may take to disappear after `down` (polled)
PATTERN = "all-to-all"
# what a failure names of each flow that was not byte-exact (a row of `twin traffic --json`)
BAD_FLOW_FIELDS = ("src", "dst", "bytes", "exact", "failed", "retransmits", "evs",
                   "ev_retirements_total", "planes_in_use")


# -- the fault catalog ------------------------------------------------------------------


@dataclass(frozen=True)
class Chaos:
    """One kind of fault the soak throws: `apply` it at a link end (the soak picks the
    end, keeping the safety rules) and get the recorded Fault; `revert` that Fault.
    A new kind is one more entry in CATALOG."""

    name: str
    apply: Callable  # (Attached, Endpoint, random.Random) -> twin.faults.Fault
    revert: Callable  # (Attached, Fault) -> None
    whole_switch: bool = False  # thrown at a switch (the end's node is unused), all its links


def _link_up(att, fault) -> None:
    from twin import faults as F

    F.link_up(att, str(fault.ends[0]))


def _link_down(att, end, rng):
    from twin import faults as F

    return F.link_down(att, str(end))


def _link_loss(att, end, rng):
    from twin import faults as F

    return F.link_loss(att, str(end), round(rng.uniform(1, 30), 1))


def _switch_down(att, end, rng):
    from twin import faults as F

    return F.switch_down(att, end.node)


def _blackhole(att, end, rng):
    from twin import faults as F

    return F.blackhole(att, end.node)


def _clear(att, fault) -> None:
    from twin import faults as F

    F.clear(att, fault.target)


CATALOG: list[Chaos] = [
    Chaos("link-down", _link_down, _link_up),
    Chaos("link-loss", _link_loss, _link_up),
    Chaos("switch-down", _switch_down, _clear, whole_switch=True),
    Chaos("blackhole", _blackhole, _clear, whole_switch=True),  # silent: no port goes down
]


# -- checks -------------------------------------------------------------------------------


class SoakFailed(Exception):
    """A check did not hold; the message says which and with what."""


class Interrupted(BaseException):
    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def nft_tables(att) -> dict[str, set[str]]:
    """Every node's nftables tables, as 'family name'."""
    out = {}
    for node in att.plan.nodes:
        text = att.runtime.exec(node, ["nft", "list", "tables"], timeout=20).stdout
        out[node] = {line.split(None, 1)[1] for line in text.splitlines()
                     if line.startswith("table ")}
    return out


def check_loss_tables(att, tables: dict[str, set[str]] | None = None) -> None:
    """A twin loss table exists exactly where a link-loss fault is in force."""
    from twin import faults as F

    want = {(f.ends[0].node, f"ip6 {F.loss_table(f.on.id)}") for f in F.active(att)
            if f.kind is F.FaultKind.LINK_LOSS}
    have = {(node, t) for node, ts in (tables or nft_tables(att)).items() for t in ts
            if t.split()[-1].startswith("twin_loss_")}
    if have != want:
        raise SoakFailed(f"nft: loss tables left without a fault: {sorted(have - want)}; "
                         f"faults without their table: {sorted(want - have)}")


def check_blackhole_tables(att, tables: dict[str, set[str]] | None = None) -> None:
    """A twin blackhole table exists exactly where a blackhole fault is in force."""
    from twin import faults as F

    want = {(f.ends[0].node, f"ip6 {F.blackhole_table(f.ends[0].ifname)}")
            for f in F.active(att) if f.kind is F.FaultKind.BLACKHOLE}
    have = {(node, t) for node, ts in (tables or nft_tables(att)).items() for t in ts
            if t.split()[-1].startswith("twin_blackhole")}
    if have != want:
        raise SoakFailed(f"nft: blackhole tables left without a fault: {sorted(have - want)}; "
                         f"faults without their table: {sorted(want - have)}")


def proc_sample(pid: int) -> tuple[int, int]:
    """(VmRSS bytes, open fds) of a process."""
    rss = 0
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            rss = int(line.split()[1]) * 1024
    return rss, len(os.listdir(f"/proc/{pid}/fd"))


def is_endpoint(pid: int) -> bool:
    """Alive (not a zombie) and still the endpoint daemon (not a reused pid)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
    return state != "Z" and b"twin.mrc.endpoint" in cmdline


def root_veths() -> set[str]:
    text = subprocess.run(["ip", "-j", "link", "show", "type", "veth"], capture_output=True,
                          text=True, timeout=20).stdout
    return {d["ifname"] for d in json.loads(text or "[]")}


# -- the chaos thread ---------------------------------------------------------------------


@dataclass
class InForce:
    chaos: Chaos
    fault: object  # twin.faults.Fault
    revert_at: float
    log_id: int  # its "apply" entry in ChaosThread.log


@dataclass
class ChaosThread:
    att: object
    rng: random.Random
    every_s: float
    max_in_force: int
    until: float  # a hard stop (monotonic), even if nobody calls stop()
    catalog: list[Chaos] = field(default_factory=lambda: list(CATALOG))
    applied: Counter = field(default_factory=Counter)
    reverted: Counter = field(default_factory=Counter)
    skipped: int = 0  # ticks with no fault thrown (max in force, or no safe end)
    nft_checks: int = 0
    log: list[dict] = field(default_factory=list)
    error: str | None = None

    def __post_init__(self) -> None:
        self.in_force: list[InForce] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="chaos", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout: float = 120) -> None:
        self._stop.set()
        self._thread.join(timeout)
        if self._thread.is_alive():
            raise SoakFailed(f"the chaos thread did not stop within {timeout:.0f}s")

    def faults_between(self, t0: float, t1: float) -> list[dict]:
        """The faults in force at some time in [t0, t1]: what, applied at t, reverted at."""
        gone = {e["id"]: e["t"] for e in self.log if e["op"] == "revert"}
        return [{"what": e["what"], "t": e["t"], "until": gone.get(e["id"])}
                for e in self.log if e["op"] == "apply" and e["t"] <= t1
                and gone.get(e["id"], t1) >= t0]

    def _run(self) -> None:
        try:
            next_at = time.monotonic() + self.every_s
            while not self._stop.wait(0.05) and time.monotonic() < self.until:
                now = time.monotonic()
                for item in [i for i in self.in_force if i.revert_at <= now]:
                    self._revert(item)
                if now >= next_at:
                    next_at = now + self.every_s
                    self._throw()
            for item in list(self.in_force):
                self._revert(item)
        except SoakFailed as e:
            self.error = str(e)
        except Exception:
            self.error = traceback.format_exc()

    def _throw(self) -> None:
        if len(self.in_force) >= self.max_in_force:
            self.skipped += 1
            return
        chaos = self.rng.choice(self.catalog)
        ends = self._safe_switches() if chaos.whole_switch else self._safe_ends()
        if not ends:
            self.skipped += 1
            return
        end = self.rng.choice(ends)
        fault = chaos.apply(self.att, end, self.rng)
        hold = self.rng.uniform(0.5, 1.5) * self.every_s
        self.in_force.append(InForce(chaos, fault, time.monotonic() + hold, len(self.log)))
        self.applied[chaos.name] += 1
        where = end.node if chaos.whole_switch else str(end)
        what = f"{chaos.name} {where}" + (f" {fault.percent}%" if fault.percent else "")
        self.log.append({"t": time.monotonic(), "op": "apply", "id": len(self.log),
                         "what": what})

    def _revert(self, item: InForce) -> None:
        item.chaos.revert(self.att, item.fault)
        self.in_force.remove(item)
        self.reverted[item.chaos.name] += 1
        self.log.append({"t": time.monotonic(), "op": "revert", "id": item.log_id,
                         "what": f"{item.chaos.name} {item.fault.target}"})
        self.nft_checks += 1
        tables = nft_tables(self.att)
        check_loss_tables(self.att, tables)
        check_blackhole_tables(self.att, tables)

    def _busy(self) -> set[str]:
        return {lk for i in self.in_force for lk in i.fault.all_links}

    def _safe(self, busy: set[str], links: set[str]) -> bool:
        """`links` are free, and with them taken every host keeps a link without a fault."""
        fabric = self.att.fabric
        after = busy | links
        return not (busy & links) and not any(
            all(x.id in after for x in fabric.links_of(h.name)) for h in fabric.hosts)

    def _safe_ends(self) -> list:
        """Link ends that may take a fault now: their link has none, and every host
        keeps at least one link without one."""
        busy = self._busy()
        return [e for lk in self.att.fabric.links if self._safe(busy, {lk.id})
                for e in (lk.a, lk.b)]

    def _safe_switches(self) -> list:
        """One end per switch whose every link may take a fault now (the end names it)."""
        fabric, busy = self.att.fabric, self._busy()
        out = []
        for sw in fabric.switches:
            links = fabric.links_of(sw.name)
            if self._safe(busy, {lk.id for lk in links}):
                out.append(links[0].end(sw.name))
        return out


# -- the soak -----------------------------------------------------------------------------


@dataclass
class Soak:
    lab: str
    seed: int
    minutes: float
    size: int
    rounds: int = 0
    flows: int = 0
    bytes_moved: int = 0
    bytes_lost: int = 0
    elapsed_s: float = 0.0
    pids: dict[str, int] = field(default_factory=dict)
    rss: dict[str, list[int]] = field(default_factory=dict)
    fds: dict[str, list[int]] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)
    leftovers: dict[str, list[str]] = field(default_factory=dict)
    chaos: ChaosThread | None = None
    interrupted: str | None = None

    def sample(self, att) -> None:
        from twin import endpoints

        for host in self.pids:
            with endpoints.client(att.runtime, host, timeout=10) as c:
                pid = c.hello()["pid"]
            if pid != self.pids[host]:
                raise SoakFailed(f"endpoint on {host} restarted: pid {self.pids[host]} -> {pid}")
            rss, fds = proc_sample(pid)
            self.rss[host].append(rss)
            self.fds[host].append(fds)

    def check_growth(self) -> None:
        for host in self.pids:
            rss, fds = self.rss[host], self.fds[host]
            if not rss:
                continue
            base = min(WARMUP_ROUNDS, len(rss)) - 1
            grew = rss[-1] - rss[base]
            if grew > RSS_GROWTH_BYTES or grew > RSS_GROWTH_FRACTION * rss[base]:
                self.failures.append(f"endpoint {host}: RSS grew {grew / MiB:+.1f} MiB "
                                     f"({rss[base] / MiB:.1f} -> {rss[-1] / MiB:.1f} MiB)")
            if fds[-1] - fds[base] > FD_SLACK:
                self.failures.append(f"endpoint {host}: open fds grew {fds[base]} -> "
                                     f"{fds[-1]} (samples {fds})")

    def summary(self) -> dict:
        c = self.chaos
        hosts = {}
        for h in self.pids:
            rss, fds = self.rss[h], self.fds[h]
            base = min(WARMUP_ROUNDS, len(rss)) - 1 if rss else 0
            hosts[h] = {"pid": self.pids[h],
                        "rss_mib": _firsts(rss, MiB), "fds": _firsts(fds, 1),
                        "rss_growth_mib": round((rss[-1] - rss[base]) / MiB, 1) if rss else None}
        return {
            "lab": self.lab, "seed": self.seed, "minutes": self.minutes,
            "soak_minutes": round(self.elapsed_s / 60, 2), "size_per_flow": self.size,
            "rounds": self.rounds, "transfers": self.flows,
            "faults": dict(c.applied) if c else {},
            "faults_total": sum(c.applied.values()) if c else 0,
            "faults_reverted": dict(c.reverted) if c else {},
            "fault_ticks_skipped": c.skipped if c else 0,
            "bytes_moved": self.bytes_moved, "bytes_lost": self.bytes_lost,
            "hosts": hosts,
            "nft_checks": c.nft_checks if c else 0,
            "leftovers": self.leftovers,
            "leftovers_total": sum(len(v) for v in self.leftovers.values()),
            "interrupted": self.interrupted,
            "failures": self.failures,
            "ok": not self.failures and not self.interrupted,
        }


def _firsts(xs: list[int], unit: int) -> dict | None:
    if not xs:
        return None
    r = (lambda v: round(v / unit, 1)) if unit > 1 else (lambda v: v)
    return {"first": r(xs[0]), "last": r(xs[-1]), "max": r(max(xs))}


def own_spec(fabric: str, lab: str, where: Path) -> str:
    """The fabric (a shipped name or a spec file) under the soak's own lab name."""
    from twin import lab as L

    path = Path(fabric)
    if not path.exists():
        path = L.fabrics_dir() / f"{fabric}.yml"
    data = yaml.safe_load(path.read_text())
    data["name"] = lab
    out = where / f"{lab}.yml"
    out.write_text(yaml.safe_dump(data, sort_keys=False))
    return str(out)


def run_rounds(soak: Soak, att, args, deadline: float, say) -> None:
    from twin import traffic as T
    from twin.errors import LabError

    hosts = [h.name for h in att.fabric.hosts]
    started = time.monotonic()
    max_rounds = int(args.minutes * 60 / 0.1) + 1  # a bound; time ends the loop first
    while time.monotonic() < deadline and soak.rounds < max_rounds:
        if soak.chaos.error:
            raise SoakFailed(f"the chaos thread failed: {soak.chaos.error}")
        flows = T.flows_for(PATTERN, hosts, soak.size)
        t0 = time.monotonic()
        try:
            run = T.run(att.runtime, PATTERN, flows, args.mode, timeout_s=args.round_timeout)
        except LabError as e:
            run = None
            why = str(e)
        soak.rounds += 1
        soak.flows += len(flows)
        exact = [f for f in flows if run is not None and f.exact and
                 not (f.result is not None and f.result.failed)]
        soak.bytes_moved += sum(f.size for f in exact)
        soak.bytes_lost += sum(f.size for f in flows if f not in exact)
        if run is None or not run.ok:
            during = soak.chaos.faults_between(t0, time.monotonic())
            bad = [{**{k: row[k] for k in BAD_FLOW_FIELDS}, **losses_of(run, i, flows[i])}
                   for i, row in enumerate(f.to_dict() for f in flows) if flows[i] not in exact]
            raise SoakFailed("\n  ".join([
                f"round {soak.rounds}: {len(bad)} of {len(flows)} flows not byte-exact"
                + (f" ({why})" if run is None else ""),
                "faults in force during the round (s after its start): " + json.dumps(
                    [{"what": e["what"], "t": round(e["t"] - t0, 3),
                      "until": e["until"] and round(e["until"] - t0, 3)} for e in during]),
                *map(json.dumps, bad)]))
        soak.sample(att)
        c = soak.chaos
        max_rss = max(v[-1] for v in soak.rss.values())
        say(f"round {soak.rounds:3d}  {time.monotonic() - started:6.1f}s  "
            f"{run.elapsed_s:5.2f}s/round  faults {sum(c.applied.values())} "
            f"({', '.join(f'{k} {v}' for k, v in sorted(c.applied.items())) or 'none'}; "
            f"{len(c.in_force)} in force)  moved {soak.bytes_moved / MiB:,.0f} MiB  "
            f"max RSS {max_rss / MiB:.1f} MiB")


def losses_of(run, index: int, flow) -> dict:
    """How a failed flow's fatal PSN was lost, each time: ms after the first write, how, EV."""
    if run is None or flow.result is None or not flow.result.failed:
        return {}
    psn = int(flow.result.failed.split()[1]) if flow.result.failed.startswith("PSN ") else None
    return {"psn_losses": [f"{(e['t_us'] - run.start_us) / 1000:.1f}ms {e['detail']} "
                           f"ev {e['ev']:#x}" for e in run.events
                           if e["flow"] == index and e["kind"] == "loss" and e["psn"] == psn]}


def teardown(soak: Soak, att, veths_before: set[str], say) -> bool:
    """Faults cleared, lab down, leftovers counted; True if the lab went down."""
    from twin import faults as F
    from twin import lifecycle
    from twin.rundir import run_root
    from twin.runtime.netns import leftover_namespaces
    from twin.state import known_labs

    if soak.chaos is not None:
        try:
            soak.chaos.stop()
        except SoakFailed as e:
            soak.failures.append(str(e))
        if soak.chaos.error and not any(soak.chaos.error in f for f in soak.failures):
            soak.failures.append(f"the chaos thread failed: {soak.chaos.error}")
    if att is not None:
        try:
            left = F.clear(att)
            if left:
                say(f"cleared {len(left)} faults still in force")
            if soak.chaos is not None:
                soak.chaos.nft_checks += 1
            tables = nft_tables(att)
            check_loss_tables(att, tables)
            check_blackhole_tables(att, tables)
        except Exception as e:  # noqa: BLE001 - the lab must still go down
            soak.failures.append(f"clearing faults: {e}")
    if soak.lab not in known_labs():
        return True  # up never finished (it rolled itself back) or never started
    try:
        lifecycle.down(soak.lab)
    except Exception as e:  # noqa: BLE001
        soak.failures.append(f"down: {e}")
        return False
    deadline = time.monotonic() + SETTLE_S
    while True:  # poll: the kernel and the daemons finish asynchronously
        soak.leftovers = {
            "namespaces": [n for n in leftover_namespaces() if n.startswith(f"twin-{soak.lab}-")],
            "endpoint_pids": [str(p) for p in soak.pids.values() if is_endpoint(p)],
            "run_dir": [str(p) for p in [run_root() / soak.lab] if p.exists()],
            "root_veths": sorted(root_veths() - veths_before),
        }
        if not any(soak.leftovers.values()) or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    for what, items in soak.leftovers.items():
        if items:
            soak.failures.append(f"left after down: {what}: {', '.join(items)}")
    return True


def report(s: dict) -> str:
    def table(head, body):
        rows = [head, ["---"] * len(head), *body]
        return "\n".join("| " + " | ".join(map(str, r)) + " |" for r in rows)

    kinds = ", ".join(f"{k} {v}" for k, v in sorted(s["faults"].items())) or "none"
    main = table(["soak", "value"], [
        ["lab / seed", f"{s['lab']} / {s['seed']}"],
        ["soak minutes", s["soak_minutes"]],
        ["rounds (transfers)", f"{s['rounds']} ({s['transfers']} flows of "
                               f"{s['size_per_flow'] / MiB:g} MiB)"],
        ["faults survived", f"{s['faults_total']} ({kinds}); "
                            f"{s['fault_ticks_skipped']} ticks skipped"],
        ["bytes moved", f"{s['bytes_moved']:,} ({s['bytes_moved'] / MiB:,.0f} MiB)"],
        ["bytes lost", f"{s['bytes_lost']:,}"],
        ["nft-table checks", s["nft_checks"]],
        ["leftovers after down", s["leftovers_total"]],
    ])
    hosts = table(
        ["host", "pid", "RSS MiB first / last / max", "RSS growth MiB", "fds first / last / max"],
        [[h, d["pid"], "{first} / {last} / {max}".format(**d["rss_mib"]) if d["rss_mib"] else "-",
          d["rss_growth_mib"], "{first} / {last} / {max}".format(**d["fds"]) if d["fds"] else "-"]
         for h, d in s["hosts"].items()])
    verdict = "PASS" if s["ok"] else "FAIL" + (f" (interrupted: {s['interrupted']})"
                                                if s["interrupted"] else "")
    return "\n\n".join([main, hosts, *(f"FAILED: {f}" for f in s["failures"]), verdict])


def main(argv: list[str] | None = None) -> int:
    from twin import units

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--minutes", type=float, default=10.0, help="how long (default 10; 0.5 ok)")
    ap.add_argument("--fabric", default="mrc-4p", help="shipped fabric or spec file (mrc-4p)")
    ap.add_argument("--size", default="4M", help="bytes per flow, all-to-all (default 4M)")
    ap.add_argument("--mode", default="mrc", help="transport mode (default mrc)")
    ap.add_argument("--seed", type=int, default=None, help="fault rng seed (default: random)")
    ap.add_argument("--fault-every", type=float, default=3.0, metavar="S",
                    help="a fault every S seconds, held 0.5-1.5 S (default 3)")
    ap.add_argument("--max-faults", type=int, default=2, help="in force at once (default 2)")
    ap.add_argument("--round-timeout", type=float, default=120.0, metavar="S",
                    help="a round not done in S seconds fails the soak (default 120)")
    ap.add_argument("--json", action="store_true", help="print the summary as JSON")
    args = ap.parse_args(argv)
    if not 0 < args.minutes <= 24 * 60 or args.fault_every <= 0 or args.max_faults < 1:
        ap.error("--minutes in (0, 1440], --fault-every > 0, --max-faults >= 1")
    size = units.parse_size(args.size)
    if size is None or size <= 0:
        ap.error(f"--size {args.size!r}: a positive size, e.g. 2M, 512K, 4194304")
    seed = args.seed if args.seed is not None else int.from_bytes(os.urandom(4), "big")
    lab = f"soak-{os.urandom(3).hex()}"
    out = sys.stderr if args.json else sys.stdout

    def say(text: str) -> None:
        print(text, file=out, flush=True)

    tmp = Path(tempfile.mkdtemp(prefix="twin-soak-"))
    os.environ["TWIN_RUN_DIR"] = str(tmp / "run")  # before twin.lab touches anything
    os.environ["TWIN_BUILD_DIR"] = str(tmp / "build")
    from twin import endpoints
    from twin import lab as L

    def on_signal(signum, frame):
        raise Interrupted(signum)

    old = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    soak = Soak(lab, seed, args.minutes, size)
    att, veths_before, went_down, rc = None, root_veths(), False, 1
    say(f"soak {lab}: {args.fabric}, {args.minutes:g} min, {PATTERN} {size / MiB:g} MiB/flow, "
        f"mode {args.mode}, a fault every {args.fault_every:g}s (max {args.max_faults}), "
        f"seed {seed}, run dir {tmp}")
    try:
        try:
            spec = own_spec(args.fabric, lab, tmp)
            L.up(spec, "netns")
            att = L.attach(lab)
            for h in att.fabric.hosts:
                with endpoints.client(att.runtime, h.name, timeout=10) as c:
                    soak.pids[h.name] = c.hello()["pid"]
                soak.rss[h.name], soak.fds[h.name] = [], []
            start = time.monotonic()
            deadline = start + args.minutes * 60
            soak.chaos = ChaosThread(att, random.Random(seed), args.fault_every,
                                     args.max_faults, until=deadline + args.round_timeout + 60)
            soak.chaos.start()
            run_rounds(soak, att, args, deadline, say)
            soak.elapsed_s = time.monotonic() - start
        except SoakFailed as e:
            soak.failures.append(str(e))
        except Interrupted as e:
            soak.interrupted = str(e)
            rc = 128 + e.signum
        except Exception:  # noqa: BLE001 - reported, and the lab still goes down
            soak.failures.append(f"error:\n{traceback.format_exc()}")
        finally:
            for s in old:  # teardown is bounded; a second Ctrl-C must not cut it short
                signal.signal(s, signal.SIG_IGN)
            if soak.chaos is not None and not soak.elapsed_s:
                soak.elapsed_s = time.monotonic() - start
            went_down = teardown(soak, att, veths_before, say)
    finally:
        for s, h in old.items():
            signal.signal(s, h)
        if went_down:
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            say(f"the lab may still be up: TWIN_RUN_DIR={tmp / 'run'} "
                f"TWIN_BUILD_DIR={tmp / 'build'} twin down {lab}")
    soak.check_growth()
    s = soak.summary()
    print(json.dumps(s, indent=2) if args.json else report(s), flush=True)
    if soak.interrupted:
        return rc
    return 0 if s["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
