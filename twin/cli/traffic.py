"""Traffic through the hosts' MRC endpoints, and their counters: traffic, stats, fuzz."""

from __future__ import annotations

import sys

import click
from rich.table import Table

from twin import faults as F
from twin import lab as L
from twin import validate as V
from twin.cli import tables
from twin.cli.base import RichSteps, emit_json, err, lab_option, main, out, sigterm_as_interrupt
from twin.cli.tables import Cell, Col, Num, count
from twin.errors import LabError, UsageError
from twin.faults import timeline as FT
from twin.mrc.cc import Cc
from twin.mrc.modes import Mode
from twin.traffic import EVS, MAX_QPS, QPS
from twin.units import show_bytes, show_count, show_rate

# -- traffic ----------------------------------------------------------------------

# The options' checks (twin.validate): a refusal names the option, "--qps: must be an
# integer 1 to 64 (got 65) (QPs per flow)", exit 2
SIZE = V.Size(what="bytes or K/M/G, e.g. 256M")
CUT_AT = V.Float(0, hint="seconds after the first write")


@main.command()
@click.argument("pattern", type=click.Choice(["bulk", "incast", "all-to-all", "ring",
                                              "permutation"]))
@click.option("--src", default=None, help="Source host (bulk).")
@click.option("--dst", default=None, help="Destination host (bulk, incast).")
@click.option("--size", default="64M", show_default=True, callback=V.option(SIZE),
              help="Bytes per flow (K/M/G).")
@click.option("--mode", type=click.Choice(Mode.names()),
              default=Mode.MRC.value, show_default=True,
              help=f"{Mode.described()}.")
@click.option("--cc", type=click.Choice(Cc.names()), default=None,
              help=f"Congestion control (twin.mrc.cc, docs/congestion.md): {Cc.described()}. "
                   "Default: dcqcn for single-path (the RoCE baseline), else nscc.")
@click.option("--qps", default=1, show_default=True, metavar="N", callback=V.option(QPS),
              help=f"QPs per flow (1-{MAX_QPS}), each with 1/N of the bytes and, in single-path, "
                   "its own hashed path.")
@click.option("--evs", default=128, show_default=True, callback=V.option(EVS),
              help="EVs per QP.")
@click.option("--ecn/--no-ecn", default=None,
              help="Use (or ignore) the CE marks the receiver echoes. Default: use.")
@click.option("--trim/--no-trim", default=None,
              help="Act on NACK(TRIMMED) (or find trimmed packets as losses). Default: act.")
@click.option("--cut", "cut", default=None, metavar="NODE:IF",
              help="Take this link down mid-transfer (brought back up when the run ends).")
@click.option("--cut-at", default=0.5, show_default=True, metavar="SECONDS",
              callback=V.option(CUT_AT),
              help="When --cut happens, in seconds after the first write.")
@lab_option()
@click.option("--json", "as_json", is_flag=True)
def traffic(pattern, src, dst, size, mode, cc, qps, evs, ecn, trim, cut, cut_at, lab,
            as_json):
    """Move verified bytes through the hosts' MRC endpoints.

    \b
      twin traffic bulk --src r0h0 --dst r1h0 --size 256M
      twin traffic bulk --src r0h0 --dst r1h0 --mode single-path
      twin traffic bulk --src r0h0 --dst r1h0 --mode single-path --cc dcqcn --qps 4
      twin traffic bulk --src r0h0 --dst r1h0 --cc delay --no-ecn --no-trim
      twin traffic bulk --src r0h0 --dst r1h0 --size 256M --cut t0-p0-r0:eth3
      twin traffic incast --dst r0h0 --size 16M
    Every destination buffer is checked against its source (sha256). When the
    transports lost packets, retired EVs or saw a port change, a failover line
    names the fault it answers (--cut, or one `twin fault` put in force before)
    and says when it was detected and repaired (µs after the fault, or into the
    run); --json holds the event logs themselves.
    """
    from twin import traffic as T

    sigterm_as_interrupt()  # a --cut is undone on SIGTERM as on Ctrl-C
    from twin.mrc import cc as CC
    cc = cc or CC.default_for(mode)
    why = CC.problem(cc, mode)
    if why:
        raise UsageError(f"--cc: {why}")
    att = L.attach(lab)
    hosts = [h.name for h in att.fabric.hosts]
    for h in (src, dst):
        if h is not None and h not in hosts:
            raise UsageError(f"{h!r} is not a host of {att.state.lab} ({', '.join(hosts)})")
    flows = T.split_qps(T.flows_for(pattern, hosts, size, src, dst), qps)
    att.require_whole()
    timeline = _cut(att, cut, cut_at) if cut else None

    shown = [0.0]

    def progress(acked, total, t):
        """A live line on a terminal; a line a second otherwise (logs stay short)."""
        if as_json or (not err.is_terminal and t - shown[0] < 1.0):
            return
        shown[0] = t
        rate = acked * 8 / t / 1e9 if t > 0 else 0
        line = (f"{pattern} {mode} {cc}: {acked / total:6.1%} of {total / 2**20:.0f} MiB, "
                f"{rate:5.2f} Gbit/s, {t:5.1f}s")
        err.print(f"\r{line}" if err.is_terminal else line, end="" if err.is_terminal else "\n")
        live[0] = err.is_terminal

    live = [False]  # a terminal's live progress line is open

    def note(text):
        """A step around the writes, on a line of its own."""
        if live[0]:
            err.print()
            live[0] = False
        err.print(text, highlight=False)

    try:
        result = T.run(att.runtime, pattern, flows, mode, evs=evs, cc=cc, ecn=ecn, trim=trim,
                       progress=progress, timeline=timeline,
                       in_force=[f.describe() for f in F.active(att)],  # `twin fault`'s
                       note=None if as_json else note)
    finally:  # also on Ctrl-C, SIGTERM or a crash: the cut is undone
        if timeline is not None:
            _uncut(att, cut, timeline)
    if as_json:
        emit_json(result.to_dict())
    else:
        if live[0]:
            err.print()
        _flows_table(f"{pattern}, mode {mode}, cc {cc}"
                     f"{f', {qps} QPs per flow' if qps > 1 else ''}, {result.elapsed_s:.2f}s",
                     result.flow_rows())  # a flow's QPs merged (twin.traffic.merge_rows)
        if cc == Cc.DCQCN:
            cnps = sum((f.result.dcqcn or {}).get("cnps_received", 0) for f in result.flows)
            cuts = sum((f.result.dcqcn or {}).get("rate_cuts", 0) for f in result.flows)
            out.print(f"dcqcn: {cnps} CNPs received, {cuts} rate cuts over "
                      f"{len(result.flows)} QPs")
        for episode in result.failover():
            if episode.eventful or episode.fault:  # a fault in force is always answered
                out.print(episode.line())
    if not result.ok:
        sys.exit(1)


def _cut(att: L.Attached, cut: str, cut_at: float) -> FT.Timeline:
    """--cut NODE:IF at --cut-at seconds, on a fault timeline: a link-down, recorded (on
    disk, before it is applied) and reverted (`_uncut`) as `twin fault` would."""
    link = att.fabric.link_at(F.parse_endpoint(att, cut))  # bad NODE:IF: fail now
    if any(link.id in f.all_links for f in F.active(att)):  # not ours to undo
        raise UsageError(f"link {link.id} is already down; `twin fault link-up --lab "
                         f"{att.lab} {cut}` first, or cut another link")
    return FT.Timeline([FT.Scheduled(
        str(F.FaultKind.LINK_DOWN), cut, lambda: F.link_down(att, cut),
        ((int(cut_at * 1e9), False),), revert=lambda fault: F.link_up(att, cut),
        links=frozenset({link.id}))], name="traffic-cut")


def _uncut(att: L.Attached, cut: str, timeline: FT.Timeline) -> None:
    """Revert the cut: the timeline's, if it holds it; else one its apply left half done
    (recorded on disk, then failed or interrupted: no fault held the link before)."""
    timeline.revert_all()
    link = att.fabric.link_at(F.parse_endpoint(att, cut))
    if any(link.id in f.all_links for f in F.active(att)):
        F.link_up(att, cut)


def _event_kinds(ctx: click.Context, param: click.Parameter, kinds: tuple[str, ...]):
    """`--kind`, each one of the endpoints' event kinds (read when a command line gives
    one: twin.mrc.transport is not for every command to import)."""
    if not kinds:
        return kinds
    from twin.mrc.transport import EVENT_KINDS

    kind = V.Choice(EVENT_KINDS)
    return tuple(kind.check(k, "--kind") for k in kinds)


@main.command()
@click.argument("host", required=False)
@lab_option()
@click.option("--prometheus", is_flag=True,
              help="Prometheus text exposition instead: the exporter's twin_endpoint_* "
                   "series, and per QP twin_endpoint_qp_* (docs/metrics.md).")
@click.option("--events", "show_events", is_flag=True,
              help="The event logs of the sending QPs instead (losses, EV states, ...).")
@click.option("--qp", "qpn", type=int, default=None, help="With --events: only this QP.")
@click.option("--kind", "kinds", multiple=True, metavar="KIND", callback=_event_kinds,
              help="With --events: only events of this kind (repeatable).")
@click.option("--dataplane", "show_dataplane", is_flag=True,
              help="The data plane's counters instead, per node (all nodes, or HOST naming "
                   "any node): what its eBPF SID programs did, and on a shaped fabric "
                   "each port's virtual queue and signals (docs/ebpf.md).")
@click.option("--drops", "show_drops", is_flag=True,
              help="The packets each endpoint dropped or refused instead, by reason "
                   "(malformed or forged ones, and control packets whose claim the QP's "
                   "state refutes); docs/endpoint-stats.md says where each is counted.")
@click.option("--json", "as_json", is_flag=True)
def stats(host, lab, prometheus, show_events, qpn, kinds, show_dataplane, show_drops,
          as_json):
    """Counters of the hosts' MRC endpoints (all hosts, or HOST).

    \b
      twin stats r0h0
      twin stats --events                    every sending QP's event log
      twin stats r0h0 --events --qp 3 --kind retire --kind ev_state
      twin stats --dataplane                 per node: packets shifted, decapsulated,
                                             dropped and why (ebpf data plane); per
                                             port: queues, CE marks, trims (shaped)
      twin stats --drops                     per endpoint: packets dropped or refused,
                                             by reason (forged ACKs, stale NAKs, ...)
    An event log is bounded: its first and its latest events are kept, and the
    header says how many fell in between. --json adds the acked bytes per 1 ms
    bin and plane (acked_bins); docs/endpoint-stats.md describes both.
    Of all hosts, one whose endpoint has ended is named after the others' counters
    or event logs (how it ended, how to start it again), and the exit status is 1.
    """
    from twin.mrc.exposition import endpoint_text
    from twin.mrc.stats import EndpointStats
    if not show_events and (qpn is not None or kinds):
        raise UsageError("--qp and --kind go with --events")
    if show_dataplane:
        if show_events or prometheus:
            raise UsageError("--dataplane is an output of its own: not with --events or "
                             "--prometheus")
        _dataplane_stats(L.attach(lab), host, as_json)
        return
    if sum(map(bool, (show_events, prometheus, show_drops))) > 1:
        raise UsageError("--events, --prometheus and --drops are different outputs: pick one")
    att = L.attach(lab)
    every = [h.name for h in att.fabric.hosts]
    if host is not None and host not in every:
        raise UsageError(f"no host {host!r} in lab {att.lab} (hosts: {', '.join(every)})")
    hosts = [host] if host else every
    att.require_whole(hosts)
    if show_events:
        def event_logs(c) -> list[dict]:
            return [{"qpn": q.qpn, "peer": q.peer, "mode": q.mode,
                     **c.events(qpn=q.qpn)}
                    for q in EndpointStats.from_dict(c.stats()).send_qps
                    if qpn is None or q.qpn == qpn]
        logs, gone = _each_endpoint(att, hosts, host is not None, event_logs)
        if qpn is not None and not gone and not any(logs.values()):
            raise UsageError(f"no sending QP {qpn} on {', '.join(hosts)}: "
                             "`twin stats` lists the QPs")
        _show_events(logs, set(kinds), as_json)
        _exit_naming(gone)
        return
    replies, gone = _each_endpoint(att, hosts, host is not None, lambda c: c.stats())
    data = {h: EndpointStats.from_dict(r) for h, r in replies.items()}
    if prometheus:
        # The exporter's names and labels (twin.mrc.exposition), every family once over
        # all the hosts: the endpoints' own `metrics` texts, joined, would repeat them
        click.echo(endpoint_text(att.lab, data.values(), att.fabric.nic_planes), nl=False)
        _exit_naming(gone)
        return
    if show_drops and as_json:
        emit_json({h: d.drops.to_dict() for h, d in data.items()})
    elif show_drops:
        _drops_table(att.state.lab, data)
    elif as_json:
        # The control reply's "id" has always led each host's object here: kept, so the
        # output stays what scripts already read.
        emit_json({h: {"id": replies[h]["id"], **d.to_dict()} for h, d in data.items()})
    else:
        _stats_table(att.state.lab, data)
    _exit_naming(gone)


@main.command()
@click.option("--host", default=None, help="The endpoint to fuzz (default: the last host).")
@click.option("--seed", type=int, default=4791, show_default=True)
@click.option("--budget", type=float, default=3.0, show_default=True,
              help="Seconds of sending the plan, at most.")
@click.option("--per-kind", type=int, default=32, show_default=True,
              help="Random packets of each kind of the plan, at most.")
@click.option("--live", "live", multiple=True, type=click.Choice(["compiled", "python"]),
              help="Attack a sender mid-transfer on this transport (repeat for both; "
                   "default: both).")
@click.option("--no-live", is_flag=True, help="The plan only: no sender mid-transfer.")
@lab_option()
def fuzz(host, seed, budget, per_kind, live, no_live, lab):
    """Send a host's MRC endpoint hostile packets; a JSON verdict.

    \b
      twin fuzz --host r1h0 --seed 7
      twin fuzz --live python            the plan, then one live attack
    Every packet goes from inside the host's own namespace to its own NIC address
    (nothing leaves the lab), as UDP to port 4791 with a valid ICRC where the
    packet needs one (twin.mrc.fuzz). Needs root and a lab whose namespaces twin
    can enter; another host's endpoint helps.

    \b
    1. The plan, at an idle sending QP and a receiving QP: truncated packets, bad
       ICRCs, unknown QPs, other rkeys, RDMA addresses outside the buffer, PSNs
       far outside the window, replays, ACKs for PSNs never sent, probe replies
       for no probe, malformed and random bytes, forged trimmed packets.
    2. The live attack, once per transport (compiled core, Python reference): an
       mrc QP (a window of 1 packet) and a single-path dcqcn QP each write 1 MiB
       to the other host; while they are in flight, each round reads the
       receiver's cum and sends forged SACKs naming PSNs never sent, replayed
       NAK(TRIMMED)s and NAKs for acked PSNs, probe replies for no probe, and a
       CNP flood. It passes if every packet is counted where it must be, both
       writes end byte-exact and no QP fails (about half a second each).

    \b
    The report: `ok` and `problems` (one line per thing that failed); for the
    plan, `expected` and `counted` per drop counter (twin stats --json "drops");
    under `live`, per transport: `sent_by_kind`, `checks` (each counter, what it
    must be and what it was: docs/endpoint-stats.md, "Hostile packets: where each
    is counted"), `transfers` (each write's source and destination sha256:
    `exact`), `rounds_mid_transfer`; the buffers' `guards`; `alive` (both
    endpoints answer). Exit status 1 when not ok.
    """
    from twin import endpoints

    if live and no_live:
        raise UsageError("--live and --no-live: pick one")
    att = L.attach(lab)
    hosts = [h.name for h in att.fabric.hosts]
    if host is not None and host not in hosts:
        raise UsageError(f"{host!r} is not a host of {att.state.lab} ({', '.join(hosts)})")
    host = host or hosts[-1]
    peer = next(h for h in hosts if h != host)
    att.require_whole([host, peer])
    transports = () if no_live else tuple(dict.fromkeys(live)) or ("compiled", "python")
    steps = RichSteps()
    try:
        report = endpoints.fuzz(att.runtime, host, peer, seed=seed, budget_s=budget,
                                per_kind=per_kind, live=transports, steps=steps)
    finally:
        steps.done()
    emit_json(report.to_json())
    if not report.ok:
        sys.exit(1)


def _dataplane_stats(att, node: str | None, as_json: bool) -> None:
    """Every node's (or one node's) data-plane counters, read in the nodes at once; and on
    a fabric with signals, each port's virtual queue and signals (either data plane)."""
    from concurrent.futures import ThreadPoolExecutor

    from twin.node.ebpf import COUNTERS

    if node is not None:
        att.node(node)
    nodes = [node] if node else list(att.plan.nodes)
    att.require_whole(nodes)
    backend = att.dataplane
    signalled = [n for n in nodes if att.plan[n].queues or att.plan[n].signals]
    if not backend.keeps_counters and not signalled:
        raise UsageError(f"lab {att.lab} runs the {backend.name} data plane, which keeps no "
                         "per-SID counters twin reads; its SIDs are routes: `twin exec "
                         f"--lab {att.lab} {nodes[0]} -- ip -6 route show`")
    with ThreadPoolExecutor(8) as pool:  # a command in each node, as verify reads them
        got = dict(zip(nodes, pool.map(lambda n: backend.counters(att.runtime, n), nodes),
                       strict=True)) if backend.keeps_counters else {}
        signals = dict(zip(signalled, pool.map(lambda n: backend.signals(att.runtime, n),
                                               signalled), strict=True))
    if as_json:
        emit_json({"lab": att.lab, "dataplane": backend.name, "nodes": got,
                   "signals": {n: (s or {}).get("ports", {}) for n, s in signals.items()}})
        return
    if got:
        cols = [Col("node"), *(Col(name.replace("_", " "), right=True) for name in COUNTERS),
                Col("programs", right=True)]
        # narrow: the program count goes first, then the kernel-TCP encapsulations, then
        # the rarer drops; what the SIDs shifted and decapsulated stays
        tables.show(out, cols, [[n, *(count(report["counters"].get(name, 0))
                                      for name in COUNTERS),
                                 str(len({p.get("prog_id")
                                          for p in report["programs"].values()}))]
                                for n, report in got.items()],
                    drop=("programs", "encapsulated", "hop limit expired",
                          "drop not ipv6 in ipv6", "drop end of carrier"),
                    title=f"{backend.name} data plane of {att.lab}: packets, per node")
    rows = [(f"{n}:{dev}", p, att.plan[n].tier == "host") for n, report in signals.items()
            for dev, p in sorted((report or {}).get("ports", {}).items())]
    queues = [(port, p) for port, p, host in rows if not host]
    if queues:
        cols = [Col("port"), *(Col(c, right=True) for c in ("rate", "queue", "high",
                                                              "packets", "CE", "trims",
                                                              "drops"))]
        # narrow: the queue now goes first (it changes by the microsecond), then the
        # rate, then the packets; the high water and the signals stay
        tables.show(out, cols, [[port, show_rate(p["rate_bps"]) if p["rate_bps"]
                                 else "-",  # no packet yet
                                 show_bytes(p["queue_bytes_now"]),
                                 show_bytes(p["high_water_bytes"]), count(p["packets"]),
                                 count(p["ce_marked"]), count(p["trimmed"]),
                                 count(p["dropped"])] for port, p in queues],
                    drop=("queue", "rate", "packets"),
                    title="virtual queues at switch ports' egress (docs/ebpf.md)")
    decaps = [(port, p) for port, p, host in rows if host]
    if decaps:
        cols = [Col("port"), *(Col(c, right=True) for c in ("CE", "trim DSCP",
                                                              "dropped (CE over Not-ECT)"))]
        tables.show(out, cols, [[port, count(p["ce_to_inner"]), count(p["trim_to_inner"]),
                                 count(p["drop_ce_not_ect"])] for port, p in decaps],
                    title="RFC 6040 at host ports' decap: copied inward")


def _flows_table(title: str, rows: list[dict]) -> None:
    """`twin traffic`'s result: one row per flow (Run.flow_rows)."""
    cols = [Col("flow"), Col("bytes", right=True), Col("goodput", right=True),
            Col("retx", right=True), Col("EVs retired", right=True), Col("planes"),
            Col("exact", wrap=True)]
    # narrow: the planes go first, then the EVs retired, then the retransmits; whether
    # each flow arrived whole, and how fast, stay
    tables.show(out, cols, [[f"{r['src']} -> {r['dst']}", show_bytes(r["bytes"]),
                             show_rate((r["goodput_gbps"] or 0) * 1e9),
                             _count(r["retransmits"]), _count(r["ev_retirements_total"]),
                             ",".join(map(str, r["planes_in_use"] or [])),
                             "[green]yes[/green]" if r["exact"]
                             else f"[red]NO {r['failed'] or ''}[/red]"] for r in rows],
                drop=("planes", "EVs retired", "retx"), title=title)


def _count(n: int | None) -> Cell:
    """A counter that a QP never polled has none: `-`."""
    return "-" if n is None else count(n)


def _each_endpoint(att, hosts: list[str], one: bool, ask) -> tuple[dict, list[str]]:
    """`ask(client)` of every host's endpoint: {host: answer}, and why each host that
    could not be asked could not. Asked of one host (`one`), its error is raised; of
    all hosts, an ended endpoint is set aside so it does not hide the others."""
    from twin import endpoints

    answers: dict = {}
    gone: list[str] = []
    for h in hosts:
        try:
            c = endpoints.client(att.runtime, h)
        except LabError as e:
            if one:
                raise
            gone.append(str(e))
            continue
        with c:
            answers[h] = ask(c)
    return answers, gone


def _exit_naming(gone: list[str]) -> None:
    """After what the others answered: each ended endpoint named (how it ended, how to
    start it again), and exit 1."""
    if gone:
        for why in gone:
            err.print(f"[red]error:[/red] {why}", highlight=False)
        sys.exit(1)


def _stats_table(lab: str, data: dict) -> None:
    """One row per endpoint that answered: what a person reads first."""
    cols = [Col("host"), Col("ports up"), Col("QPs send/recv", right=True),
            Col("bytes sent", right=True), Col("bytes placed", right=True),
            Col("retx", right=True), Col("CE rx/tx", right=True),
            Col("trims rx/tx", right=True), Col("ECN skips", right=True),
            Col("bad packets", right=True), Col("data path"), Col("transport", wrap=True)]
    rows = []
    for h, d in data.items():
        tot = d.totals
        sig = tot.signals.get  # congestion signals (docs/congestion.md); 0 from older ones
        rows.append([h, f"{d.ports:#06b}", f"{len(d.send_qps)}/{len(d.recv_qps)}",
                     show_bytes(tot.bytes_sent), show_bytes(tot.bytes_placed),
                     count(tot.retransmits),
                     _pair(sig("ce_marked_rx", 0), sig("ecn_marks_tx", 0)),
                     _pair(sig("trimmed_rx", 0), sig("nacks_trimmed_received", 0)),
                     count(sig("ev_skips_ecn", 0)), count(d.bad_packets),
                     d.datapath.split(":")[0], transport_cell(d)])
    # narrow: the congestion detail goes first, then how the endpoint runs, then the
    # ports and QPs; the bytes moved, the retransmits and the bad packets stay
    tables.show(out, cols, rows, title=f"endpoints of {lab}",
                drop=("ECN skips", "trims rx/tx", "data path", "transport", "ports up",
                      "QPs send/recv", "CE rx/tx"))


def _pair(a: int, b: int) -> Num:
    return Num(f"{a:,}/{b:,}", f"{show_count(a)} / {show_count(b)}")


def _drops_table(lab: str, data: dict) -> None:
    """One row per endpoint and reason it counted any packet for."""
    from twin.mrc.stats import EndpointDrops

    rows: list[list[Cell]] = []
    for h, d in data.items():
        counted = {k: n for k, n in d.drops.to_dict().items() if n}
        for reason, n in counted.items():
            rows.append([h, reason, count(n), EndpointDrops.MEANING.get(reason, "")])
        if not counted:
            rows.append([h, "-", "0", "nothing dropped"])
    # every column stays: what each reason means wraps (none is dropped)
    tables.show(out, [Col("host"), Col("reason"), Col("packets", right=True),
                      Col("what", wrap=True, least=16)], rows,
                title=f"packets the endpoints of {lab} dropped or refused")


def transport_cell(d) -> str:
    """The endpoint's transport, and how many of its QPs run another one (a QP may ask
    for its own: `twin fuzz` opens one of each); --json names each QP's."""
    own = d.transport.split(":")[0]
    others: dict[str, int] = {}
    for q in (*d.send_qps, *d.recv_qps):
        if q.transport and q.transport != own:
            others[q.transport] = others.get(q.transport, 0) + 1
    return own + "".join(f", {n} QP{'s' * (n > 1)} {name}" for name, n in sorted(others.items()))


# -- stats --events ---------------------------------------------------------------


def event_view(log: dict, kinds: set[str]) -> dict:
    """One QP's `events` reply as `twin stats --events --json` prints it: the events of
    `kinds` only (all when empty), `shown` counting them, the rest as it came."""
    events = [e for e in log["events"] if not kinds or e["kind"] in kinds]
    return {**{k: v for k, v in log.items() if k not in ("events", "kinds", "id")},
            "shown": len(events), "events": events}


def event_rows(view: dict) -> list[tuple[str, ...]]:
    """Table rows for people: ms since the QP's first write, kind, EV (hex, its plane and
    T1), PSN, detail."""
    from twin.fabric.paths import ev_fields

    t0 = (view.get("acked_bins") or {}).get("first_write_ns")
    if t0 is None:
        t0 = view["events"][0]["t_ns"] if view["events"] else 0
    rows = []
    for e in view["events"]:
        ev = "-"
        if e["ev"]:
            plane, t1, _ = ev_fields(e["ev"])
            ev = f"{e['ev']:#010x} p{plane} t1-{t1}"
        rows.append((f"{(e['t_ns'] - t0) / 1e6:.3f}", e["kind"], ev,
                     str(e["psn"]) if e["psn"] >= 0 else "-", e["detail"]))
    return rows


def event_header(host: str, view: dict) -> str:
    bound = (f"{view['dropped']:,} dropped by the log's bound (its first and latest events "
             "are kept)") if view["dropped"] else "none dropped"
    return (f"{host} QP {view['qpn']} -> {view['peer']} ({view['mode']}): "
            f"{view['total']:,} events logged, {bound}; {view['shown']:,} shown")


def _show_events(logs: dict[str, list[dict]], kinds: set[str], as_json: bool) -> None:
    views = {h: [event_view(log, kinds) for log in qps] for h, qps in logs.items()}
    if as_json:
        emit_json(views)
        return
    if not any(views.values()):
        out.print("no sending QPs")
    for h, qps in views.items():
        for view in qps:
            t = Table(title=event_header(h, view), title_justify="left")
            for col in ("ms", "kind", "EV", "PSN", "detail"):
                t.add_column(col, justify="right" if col in ("ms", "PSN") else "left")
            for row in event_rows(view):
                t.add_row(*row)
            out.print(t)
