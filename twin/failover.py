"""Failover figures from a transfer's event log: how long the transport took to
notice a fault, and how long until every packet it cost was delivered again.

Pure: the inputs are the faults a run applied and the events its QPs logged,
both stamped with CLOCK_MONOTONIC (µs), which every namespace and container on
the machine shares. An episode runs from a fault until the next fault (or the
end of the run):

    detection_us  first loss, retirement or port change after the fault
    repair_us     when the failover was over: every packet lost since the fault
                  was acknowledged again, and no new loss followed within QUIET_US
                  (None while a lost packet was never repaired). Later losses
                  are the run's noise, counted but not part of the figure.

Faults already in force when the run began (`twin fault link-loss ...` before
`twin traffic`: the lab's record, twin.faults) are named too: the events before
the run's first own fault form their episode, counted from the run's start
(`before_run`), and a later fault's episode says they were still in force.
Only with none of them do the events before the first fault (a clean run that
lost packets anyway) form an episode with fault None: the noise floor, said as
"repair after loss, no fault in force".
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

DETECTING = ("loss", "retire", "port")
QUIET_US = 50_000  # a failover is over once its repairs are followed by this much calm


@dataclass
class Episode:
    fault: str | None  # what was done, None for events before any fault, with none in force
    t_us: int  # the fault's time (the run's start for faults in force before it; with no
    #            fault, the first event's)
    detection_us: int | None = None
    repair_us: int | None = None
    losses: int = 0
    retirements: int = 0
    retransmits: int = 0
    spurious: int = 0  # losses a late copy disproved (the sender's `spurious` events)
    port_changes: int = 0
    revivals: int = 0
    unrepaired: int = 0  # packets declared lost that the log never shows repaired
    flows: list[int] = field(default_factory=list)  # flows that saw events
    before_run: bool = False  # `fault` was in force when the run began
    also_in_force: list[str] = field(default_factory=list)  # since before the run, too

    def to_dict(self) -> dict:
        return asdict(self)

    @property
    def eventful(self) -> bool:
        return bool(self.losses or self.retirements or self.retransmits or self.port_changes
                    or self.revivals or self.spurious)

    def line(self) -> str:
        """One sentence that names the fault it answers; with none in force, it says so."""
        if self.fault is None and not self.losses:
            what = "no fault in force, no loss declared"
        elif self.fault is None:
            what = "repair after loss, no fault in force"
        elif self.before_run:
            what = f"failover under {self.fault} (in force before the run)"
        else:
            also = f" ({', '.join(self.also_in_force)} in force since before the run)" \
                if self.also_in_force else ""
            what = f"failover after {self.fault}{also}"
        if not self.eventful:
            return f"{what}: nothing detected"
        into = " into the run" if self.before_run else ""
        if self.fault is None:  # counted from the first event: no detection to time
            detect = []
        elif self.detection_us is not None:
            detect = [f"detected {self.detection_us:,} µs{into}" if into
                      else f"detected in {self.detection_us:,} µs"]
        else:
            detect = ["never detected"]
        if self.repair_us is not None:
            repair = (f"repaired {self.repair_us:,} µs after the first loss"
                      if self.fault is None else
                      f"repaired {self.repair_us:,} µs{into}" if into
                      else f"repaired in {self.repair_us:,} µs")
        elif self.unrepaired:
            repair = (f"{self.unrepaired:,} lost packet{'s' if self.unrepaired > 1 else ''}"
                      " never shown repaired")
        elif self.losses:
            repair = "not repaired"
        elif self.retransmits:  # with no loss, every copy sent again was a tail probe
            repair = "every retransmit a tail probe"
        else:
            repair = "nothing to repair"
        counts = [f"{self.retirements} EV retirements", f"{self.retransmits} retransmits"]
        if self.spurious:  # losses, not retransmits: each a copy declared lost that a
            # receiver's duplicate, or the ack of an earlier copy, showed had arrived
            counts.append(f"{self.spurious} losses proven only late")
        if self.port_changes:
            counts.append(f"{self.port_changes} port changes")
        if self.revivals:
            counts.append(f"{self.revivals} revived")
        return f"{what}: {', '.join([*detect, repair])} ({', '.join(counts)})"


_COUNTED = {"loss": "losses", "retire": "retirements", "retransmit": "retransmits",
            "spurious": "spurious", "port": "port_changes", "revive": "revivals"}


def episodes(faults: list[dict], events: list[dict], in_force: list[str] | None = None,
             start_us: int | None = None) -> list[Episode]:
    """`faults`: {"t_us", "what"}, and "applied_us" (how long applying took, when
    known); `events`: {"t_us", "kind", "flow", ...}. A fault's episode starts when its
    change began (t_us - applied_us): `ip link set down` can take ms on a loaded
    machine, the link may be down from its first µs, and a loss found meanwhile is
    this fault's, not the one before's (nor lost between the two).

    `in_force`: what each fault in force when the run began is (the lab's record);
    `start_us`: the run's start, from which their episode counts (default: its first
    event)."""
    faults = sorted(faults, key=_began)
    events = sorted(events, key=lambda e: e["t_us"])
    in_force = list(in_force or [])
    out: list[Episode] = []
    before = [e for e in events if not faults or e["t_us"] < _began(faults[0])]
    if in_force:
        t0 = start_us if start_us is not None else before[0]["t_us"] if before else 0
        ep = _episode(", ".join(in_force), t0, before)
        ep.before_run = True
        out.append(ep)
    elif before:
        out.append(_episode(None, before[0]["t_us"], before))
    for i, f in enumerate(faults):
        start = _began(f)
        end = _began(faults[i + 1]) if i + 1 < len(faults) else None
        mine = [e for e in events if e["t_us"] >= start and (end is None or e["t_us"] < end)]
        ep = _episode(f["what"], start, mine)
        ep.also_in_force = list(in_force)
        out.append(ep)
    return out


def _began(fault: dict) -> int:
    return fault["t_us"] - (fault.get("applied_us") or 0)


def _episode(fault: str | None, t0: int, events: list[dict]) -> Episode:
    ep = Episode(fault, t0)
    outstanding: set[tuple[int | None, int]] = set()  # (flow, PSN) lost, not yet repaired
    repaired_at = None  # when `outstanding` last emptied
    for e in events:
        kind = e["kind"]
        attr = _COUNTED.get(kind)
        if attr:
            setattr(ep, attr, getattr(ep, attr) + 1)
        if kind in DETECTING and ep.detection_us is None:
            ep.detection_us = e["t_us"] - t0
        key = (e.get("flow"), e.get("psn", -1))
        if kind == "loss":
            if ep.repair_us is None and repaired_at is not None \
                    and e["t_us"] - repaired_at >= QUIET_US:
                ep.repair_us = repaired_at - t0  # over; this loss is later noise
            outstanding.add(key)
        elif kind in ("repaired", "spurious") and key in outstanding:
            outstanding.discard(key)
            if not outstanding:
                repaired_at = e["t_us"]
        if e.get("flow") is not None and e["flow"] not in ep.flows:
            ep.flows.append(e["flow"])
    if ep.repair_us is None and repaired_at is not None and not outstanding:
        ep.repair_us = repaired_at - t0
    ep.unrepaired = len(outstanding) if ep.repair_us is None else 0
    return ep
