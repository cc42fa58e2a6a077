"""Endpoint benchmark: MRC endpoint goodput, CPU/GB and link-failure recovery, against a ceiling.

On a netns lab shaped like mrc-4p (named bench-ep), host r0h0 -> r1h0 (cross-rack):
    ceiling   a raw-socket blaster in r0h0's namespace sends one prebuilt 4 KiB-payload
              MRC data frame (UDP dport patched to a counting socket) over one path
              (plane 0, T1 0) as fast as one Python process can, bounded by count and
              time; a forked process drains the socket in r1h0's namespace. Sent and
              received pps, payload Gbit/s, loss: what the kernel path gives one core.
    goodput   twin.traffic bulk in mode mrc and single-path: Gbit/s, retransmits, elapsed.
    CPU/GB    utime+stime (/proc/<pid>/stat) of the endpoint processes in both host
              namespaces, from the first to the last goodput sample (setup, the
              256 MiB source pattern and the sha256 digests fall outside), per GB acked.
    recovery  the same bulk with the T0-T1 link on the flow's path taken down at 0.4 s:
              for mrc t0-p0-r0:eth3, for single-path the uplink of its one path. mrc
              reports the time until goodput is back above 90% of its pre-fault level
              (Run.recovery_s), retransmits and EVs retired; single-path what happened
              (retry limit, or a stall bounded at STALL_S) and the goodput it had reached.
Everything runs side by side in one run, interleaved round-robin (repetition 1 of every
measurement, then 2, ...; the two modes swap order every repetition): the 2-core machine
is noisy, and drift then hits the ceiling and both modes alike, so the ratios taken within
the run mean something. Medians and ranges are reported. Faults are cleared in a finally.

Private run/build dirs, spec generation, medians and machine facts are bench_lab's.
Usage: .venv/bin/python bench/bench_endpoint.py [--repeat N] [--quick]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import shutil
import socket
import statistics
import sys
import time
from pathlib import Path

import bench_lab as B  # first: it points TWIN_RUN_DIR / TWIN_BUILD_DIR at a private temp dir

from twin import endpoints, lab, netns
from twin import faults as F
from twin import paths as P
from twin import traffic as T
from twin.errors import LabError
from twin.mrc import wire
from twin.plan import nic_address
from twin.runtime.netns import list_netns, pids_in
from twin.state import known_labs

RESULTS = Path(__file__).resolve().parent / "results" / "endpoint.json"
NAME, SHAPE, SRC, DST = "bench-ep", (4, 2, 2, 2), "r0h0", "r1h0"
MiB, TICK = 1 << 20, os.sysconf("SC_CLK_TCK")
BLAST_PORT, RCVBUF = 4792, 32 << 20  # not 4791: the endpoint owns that one
FAULT_AT, STALL_S, SETTLE_S = 0.4, 15.0, 1.0
MODES = ("mrc", "single-path")


def cpu_s(pids: list[int]) -> float:
    """utime + stime of these processes, in seconds."""
    total = 0
    for pid in pids:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        total += int(fields[11]) + int(fields[12])  # fields 14, 15 of stat(5)
    return total / TICK


def _drain(sock: socket.socket, conn) -> None:
    """Child: count datagrams until the parent says stop and 0.2 s pass without one."""
    sock.settimeout(0.2)
    buf, n, first, last = bytearray(wire.MAX_FRAME), 0, 0.0, 0.0
    c0 = cpu_s([os.getpid()])
    conn.send("ready")
    while True:
        try:
            sock.recv_into(buf)
        except TimeoutError:
            if conn.poll():
                break
            continue
        last = time.perf_counter()
        first = first or last
        n += 1
    conn.send((n, first, last, cpu_s([os.getpid()]) - c0))


def blast(att, count: int, limit_s: float) -> dict:
    fab, rt = att.fabric, att.runtime
    src, dst = fab.node(SRC), fab.node(DST)
    s_nic, d_nic = str(nic_address(fab, src)), str(nic_address(fab, dst))
    path = P.route(fab, src, dst, 0, 0)
    body = wire.encode_data(1, 0, 0, 0, bytes(wire.MTU), 0, path.ev, 0)
    pkt = bytearray(wire.frame(s_nic, path.address, path.ev, s_nic, d_nic, body))
    pkt[2 * wire.IP6.size + 2:2 * wire.IP6.size + 4] = BLAST_PORT.to_bytes(2, "big")
    pkt, addr = bytes(pkt), (path.address, 0)
    with netns.inside(rt.netns_path(DST)):
        rx = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
        wire.allow_zero_udp_checksum(rx)
        rx.setsockopt(socket.SOL_SOCKET, 33, RCVBUF)  # SO_RCVBUFFORCE
        rx.bind((d_nic, BLAST_PORT))
    with netns.inside(rt.netns_path(SRC)):
        tx = socket.socket(socket.AF_INET6, socket.SOCK_RAW, socket.IPPROTO_RAW)
    parent, child = multiprocessing.Pipe()
    proc = multiprocessing.get_context("fork").Process(target=_drain, args=(rx, child))
    try:
        proc.start()
        parent.recv()
        sent = errors = 0
        send, me = tx.sendto, [os.getpid()]
        c0, t0 = cpu_s(me), time.perf_counter()
        deadline = t0 + limit_s
        while sent + errors < count and time.perf_counter() < deadline:
            for _ in range(min(256, count - sent - errors)):
                try:
                    send(pkt, addr)
                    sent += 1
                except OSError:
                    errors += 1
        send_s, tx_cpu = time.perf_counter() - t0, cpu_s(me) - c0
        parent.send("stop")
        got, first, last, rx_cpu = parent.recv()
    finally:
        proc.join(5)
        tx.close()
        rx.close()
    recv_s = max(last - first, 1e-9)
    return {"sent": sent, "send_errors": errors, "received": got, "send_s": send_s,
            "sent_pps": sent / send_s, "received_pps": got / recv_s,
            "gbps": got * wire.MTU * 8 / recv_s / 1e9, "loss": 1 - got / max(sent, 1),
            "tx_cpu_s_per_gb": tx_cpu / (sent * wire.MTU / 1e9),
            "rx_cpu_s_per_gb": rx_cpu / max(got * wire.MTU / 1e9, 1e-9)}


def transfer(att, pids: dict, mode: str, size: int, fault: bool = False) -> dict:
    """One bulk SRC -> DST; with `fault`, the T0-T1 link on its path goes down at FAULT_AT."""
    fab = att.fabric
    flows = T.flows_for("bulk", [], size, SRC, DST)
    marks: list[tuple[float, int, float, float]] = []  # (t, acked, sender cpu, receiver cpu)

    def mark(acked: int, _total: int, t: float) -> None:
        marks.append((t, acked, cpu_s(pids[SRC]), cpu_s(pids[DST])))

    def cut() -> str:
        plane, t1 = 0, 0
        if mode == "single-path":
            plane, t1, _ = P.parse_path(fab, flows[0].result["single_path"])
        end = f"{fab.t0_name(plane, fab.node(SRC).rack)}:{fab.t0_uplink(t1)}"
        F.link_down(att, end)
        return f"link-down {end}"

    events = [(FAULT_AT, cut)] if fault else None
    outcome = "done"
    try:
        run = T.run(att.runtime, "bulk", flows, mode, events=events, progress=mark,
                    timeout_s=STALL_S if fault and mode != "mrc" else 120.0)
        if not run.ok:
            outcome = f"failed: {flows[0].result.get('failed') or 'digest mismatch'}"
    except LabError as e:  # the stall: traffic.run gave up, so close the QPs ourselves
        outcome = f"stalled: {e}"
        run = T.Run("bulk", mode, flows, [(m[0], m[1]) for m in marks], elapsed_s=marks[-1][0])
        for host, qpn in ((SRC, flows[0].send_qpn), (DST, flows[0].recv_qpn)):
            with endpoints.client(att.runtime, host) as c:
                c.call("close", qpn=qpn)
    finally:
        if fault:
            F.clear(att)
    if fault and not run.events:  # the flow ended before FAULT_AT: nothing was measured
        outcome = "no fault: the flow ended first"
    r, (_, a0, s0, d0), (_, a1, s1, d1) = flows[0].result, marks[0], marks[-1]
    gb = max(a1 - a0, 1) / 1e9
    out = {"mode": mode, "fault": fault, "outcome": outcome, "elapsed_s": run.elapsed_s,
           "goodput_gbps": r.get("goodput_gbps"), "acked_mib": a1 / MiB,
           "retransmits": r.get("sender", {}).get("retransmits"), "evs": r.get("evs"),
           "sender_cpu_s_per_gb": (s1 - s0) / gb, "receiver_cpu_s_per_gb": (d1 - d0) / gb}
    if run.events:
        at = run.events[0][0]
        before = [g for t, g in run.goodput_series() if at - 0.3 <= t < at]
        out.update(event=run.events[0][1], fault_at=at, recovery_s=run.recovery_s(at),
                   prefault_gbps=statistics.mean(before) if before else None)
    return out


def stats(xs: list, key: str) -> dict:
    v = [x[key] for x in xs if x.get(key) is not None]
    return {"median": statistics.median(v), "min": min(v), "max": max(v)} if v else {}


def fmt(s: dict, nd: int = 2) -> str:
    if not s:
        return "-"
    m, lo, hi = (f"{s[k]:,.{nd}f}" for k in ("median", "min", "max"))
    return m if lo == hi else f"{m} ({lo}–{hi})"


def report(res: dict) -> tuple[str, dict]:
    bl, bulk, rec = res["blast"], res["bulk"], res["recovery"]
    rows = [["blaster (ceiling), sent", fmt(stats(bl, "sent_pps"), 0), "-",
             fmt(stats(bl, "tx_cpu_s_per_gb")), "-", "-"],
            ["blaster, received", fmt(stats(bl, "received_pps"), 0), fmt(stats(bl, "gbps")),
             fmt(stats(bl, "rx_cpu_s_per_gb")), f"loss {fmt(stats(bl, 'loss'), 4)}", "-"]]
    for m in MODES:
        xs = bulk[m]
        rows.append([f"endpoint {m}", "-", fmt(stats(xs, "goodput_gbps")),
                     f"{fmt(stats(xs, 'sender_cpu_s_per_gb'))} / "
                     f"{fmt(stats(xs, 'receiver_cpu_s_per_gb'))}",
                     f"retx {fmt(stats(xs, 'retransmits'), 0)}", fmt(stats(xs, "elapsed_s"))])
    t1 = B.markdown(["measurement", "pps", "Gbit/s payload", "CPU s/GB (send / recv)",
                     "loss or retransmits", "elapsed s"], rows)
    t2 = B.markdown(
        ["mode", "outcomes", "pre-fault Gbit/s", "recovery s (90%)", "retransmits",
         "EVs retired", "acked MiB", "elapsed s"],
        [[m, "; ".join(sorted({x["outcome"].split(" (")[0] for x in rec[m]})),
          fmt(stats(rec[m], "prefault_gbps")), fmt(stats(rec[m], "recovery_s")),
          fmt(stats(rec[m], "retransmits"), 0),
          fmt(stats([{"n": (x["evs"] or {}).get("assumed_bad")} for x in rec[m]], "n"), 0),
          fmt(stats(rec[m], "acked_mib"), 0), fmt(stats(rec[m], "elapsed_s"))] for m in MODES])
    med = {k: stats(v, "goodput_gbps").get("median") for k, v in bulk.items()}
    cpu = {m: {k: stats(bulk[m], f"{k}_cpu_s_per_gb").get("median")
               for k in ("sender", "receiver")} for m in MODES}
    ratios = {"mrc_vs_ceiling": med["mrc"] / stats(bl, "gbps")["median"],
              "single_vs_mrc": med["single-path"] / med["mrc"],
              "cpu_per_gb_single_vs_mrc": {k: cpu["single-path"][k] / cpu["mrc"][k]
                                           for k in cpu["mrc"]},
              "sender_cpu_per_gb_mrc_vs_blaster":
                  cpu["mrc"]["sender"] / stats(bl, "tx_cpu_s_per_gb")["median"]}
    return f"{t1}\n\n{t2}", ratios


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3, help="repetitions (default 3)")
    ap.add_argument("--quick", action="store_true", help="1 repetition, smaller sizes")
    args = ap.parse_args(argv)
    repeat = 1 if args.quick else max(1, args.repeat)
    size = (64 if args.quick else 256) * MiB
    count, limit_s = (20_000, 2.0) if args.quick else (100_000, 5.0)
    res: dict = {"blast": [], "bulk": {m: [] for m in MODES}, "recovery": {m: [] for m in MODES}}
    if any(n.startswith(f"twin-{NAME}-") for n in list_netns()):
        sys.exit(f"namespaces of lab {NAME} exist: another bench run is using it")
    before, started = B.machine(), time.perf_counter()
    try:
        lab.up(str(B.write_spec(SHAPE, B.TMP, NAME)), "netns")
        att = lab.attach(NAME)
        found = pids_in([att.runtime.netns_path(h) for h in (SRC, DST)])
        pids = {h: found[att.runtime.netns_path(h)] for h in (SRC, DST)}
        for rep in range(repeat):
            b = blast(att, count, limit_s)
            res["blast"].append(b)
            print(f"  {rep + 1}/{repeat} blaster: {b['sent_pps']:,.0f} pps sent, "
                  f"{b['gbps']:.2f} Gbit/s received, loss {b['loss']:.4f}", flush=True)
            order = MODES if rep % 2 == 0 else MODES[::-1]
            for fault in (False, True):
                for m in order:
                    x = transfer(att, pids, m, 256 * MiB if fault else size, fault)
                    res["recovery" if fault else "bulk"][m].append(x)
                    print(f"  {rep + 1}/{repeat} {m}{' + link-down' if fault else ''}: "
                          f"{x['outcome'][:60]}, {x['goodput_gbps'] or 0:.2f} Gbit/s, "
                          f"retx {x['retransmits']}, recovery {x.get('recovery_s')}", flush=True)
                    if fault:
                        time.sleep(SETTLE_S)
    finally:
        for name in known_labs():  # our private run dir only: never another lab
            if name == NAME:
                lab.down(name)
        shutil.rmtree(B.TMP, ignore_errors=True)
    text, ratios = report(res)
    print(text)
    print("ratios in this run: " + ", ".join(
        f"{k} {v:.3f}" if isinstance(v, float) else
        f"{k} " + "/".join(f"{w:.2f}" for w in v.values()) for k, v in ratios.items()))
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps({
        "machine": before, "machine_after": B.machine(), "repeat": repeat, "quick": args.quick,
        "bulk_bytes": size, "blast_count": count, "pids": pids, "fault_at_s": FAULT_AT,
        "stall_s": STALL_S, "wall_s": time.perf_counter() - started, "ratios": ratios,
        **res}, indent=2) + "\n")
    print(f"wrote {RESULTS}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
