"""The live stream state triggers follow: coordinator log lines and members' events.

A :class:`LiveWatch` thread reads every broker's log (every ``interval``,
default 5 ms) and the run's ``events/`` directory, and turns what it sees into
:class:`Signal` s — "the group entered PreparingRebalance", "generation 4
completed its join (CompletingRebalance)", "generation 4 is Stable (a member
got its assignment)", "consumer-2 was revoked" — each stamped with when it
*happened* (the log line's own timestamp; the event's ``mono_ns``) and when it
was *seen*. Fault threads block in :meth:`wait_for` until a matching signal
newer than their start appears. See :class:`chaos.experiment.Trigger` for the
Kafka log lines each state relies on.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from chaos.history.event import Assigned, BrokerLogEvent, Revoked
from chaos.history.reader import EventsDirTail
from chaos.workload.observer import CoordinatorLog


@dataclass(frozen=True, slots=True)
class Signal:
    kind: str                 # PreparingRebalance | CompletingRebalance | Stable | revoked | leader
    generation: int | None
    happened_ns: int          # CLOCK_MONOTONIC of the underlying event
    seen_ns: int              # when the watch saw it
    broker: int | None = None
    member: str | None = None  # worker name (revoked) or member id (leader)
    line: str = ""


class LiveWatch:
    def __init__(self, group: str, broker_logs: dict[int, Path], events_dir: Path, interval: float = 0.005):
        self.group = group
        # from the start of the logs: the group's coordinator and leader chosen during warm-up are
        # needed to resolve roles at the first fault (older groups' lines are filtered by name)
        self.log = CoordinatorLog(group, broker_logs)
        # members' events only: the producer's send_ok stream is large and carries no group state
        self.events = EventsDirTail(events_dir, pattern="consumer-*.jsonl")
        #: broker id that logged the group's most recent coordinator line
        self.coordinator: int | None = None
        self.interval = interval
        self.signals: list[Signal] = []
        self.member_ids: dict[str, str] = {}   # member id -> worker name
        self.group_leader: str | None = None    # member id of the latest leader
        self._stable_seen: set[int] = set()
        self._cond = threading.Condition()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="live-watch", daemon=True)

    def start(self) -> LiveWatch:
        self.poll_once()  # catch up on warm-up before the first trigger can fire
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)

    def _add(self, sig: Signal) -> None:
        with self._cond:
            self.signals.append(sig)
            self._cond.notify_all()

    def _run(self) -> None:
        while not self._stop.is_set():
            self.poll_once()
            self._stop.wait(self.interval)

    def poll_once(self) -> None:
        now = time.monotonic_ns()
        for bid, line, parsed, clock in self.log.read():
            happened = min(clock[1], now) if clock else now
            if parsed.event is not BrokerLogEvent.UNLOADING:
                self.coordinator = bid
            if parsed.event is BrokerLogEvent.PREPARING_REBALANCE:
                self._add(Signal("PreparingRebalance", parsed.generation, happened, now, bid, line=line))
            elif parsed.event is BrokerLogEvent.STABILIZED:
                self._add(Signal("CompletingRebalance", parsed.generation, happened, now, bid, line=line))
            elif parsed.event is BrokerLogEvent.OTHER and parsed.member_id and "Assignment received" in line:
                self.group_leader = parsed.member_id
                self._add(Signal("leader", parsed.generation, happened, now, bid, parsed.member_id, line))
        for ev in self.events.poll():
            if type(ev) is Assigned:
                if ev.member_id:
                    self.member_ids[ev.member_id] = ev.source
                if ev.generation is not None and ev.generation not in self._stable_seen:
                    self._stable_seen.add(ev.generation)
                    self._add(Signal("Stable", ev.generation, ev.mono_ns, now, member=ev.source))
            elif type(ev) is Revoked:
                self._add(Signal("revoked", ev.generation, ev.mono_ns, now, member=ev.source))

    def wait_for(self, match: Callable[[Signal], bool], since_ns: int, deadline: float,
                 cancelled: threading.Event) -> Signal | None:
        """The first signal after ``since_ns`` that ``match`` accepts; None on deadline or cancel."""
        with self._cond:
            start = 0
            while True:
                for sig in self.signals[start:]:
                    if sig.happened_ns >= since_ns and match(sig):
                        return sig
                start = len(self.signals)
                if cancelled.is_set() or time.monotonic() >= deadline:
                    return None
                self._cond.wait(min(0.05, max(0.0, deadline - time.monotonic())))

    def leader_name(self) -> str | None:
        return self.member_ids.get(self.group_leader) if self.group_leader else None

    def since(self, since_ns: int) -> list[Signal]:
        with self._cond:
            return [s for s in self.signals if s.happened_ns >= since_ns]
