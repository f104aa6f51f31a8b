"""The live stream state triggers follow: coordinator log lines, members' events, group samples.

A :class:`LiveWatch` thread reads every broker's log (every ``interval``,
default 5 ms) and the run's ``events/`` directory, and turns what it sees into
:class:`Signal` s — "the group entered PreparingRebalance", "generation 4
completed its join (CompletingRebalance)", "generation 4 is Stable (a member
got its assignment)", "consumer-2 was revoked" — each stamped with when it
*happened* (the log line's own timestamp; the event's ``mono_ns``) and when it
was *seen*. Fault threads block in :meth:`wait_for` until a matching signal
newer than their start appears. See :class:`chaos.model.trigger.Trigger` for the
Kafka log lines each state relies on.

KIP-848 groups (``kip848``) count time in group epochs and have no
JoinGroup/SyncGroup phases, so the same state names come from other evidence
(Kafka 4.x ``GroupMetadataManager`` INFO lines, KIP-848 "Group Epoch - Trigger a
rebalance", "Member Epoch - Reconciliation of the group"):

* "Bumped group epoch to N" -> ``PreparingRebalance`` with ``generation`` N (the
  *new* epoch; ``protocol`` "consumer"): a rebalance (reconciliation) started;
* "Computed a new target assignment for epoch N" -> ``assignment`` N: the group
  left Assigning, its members now reconcile;
* the observer's ConsumerGroupDescribe samples (``events/observer.jsonl``) ->
  ``sample`` (state, group epoch, coordinator) and, for the first sample in
  state Stable at a group epoch, ``Stable`` with that epoch: the coordinator's
  own verdict that every member reconciled (there is no INFO line for it).
  Members' ``assigned`` events do not make ``Stable`` there: one member's new
  epoch says nothing of the others'.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from chaos.history.event import Assigned, BrokerLogEvent, GroupState, GroupStateSample, GroupType, Lost, Revoked
from chaos.history.reader import EventsDirTail, EventTail
from chaos.workload.observer import CoordinatorLog

#: the observer's event file: its ConsumerGroupDescribe samples are the KIP-848 Stable evidence
OBSERVER_EVENTS = "observer.jsonl"
#: the signals that say which state the group entered
_STATES = frozenset({"PreparingRebalance", "CompletingRebalance", "Stable"})


@dataclass(frozen=True, slots=True)
class Signal:
    """One thing the group did, as the live stream showed it.

    ``kind``: PreparingRebalance | CompletingRebalance | Stable | revoked | leader (classic and
    KIP-848 alike where the protocol has it) | assignment | sample | joined (KIP-848 only). ``generation`` is
    a classic generation (the *old* one for a classic PreparingRebalance, as its line says), or for
    ``protocol`` "consumer" the group epoch.
    """

    kind: str
    generation: int | None
    happened_ns: int          # CLOCK_MONOTONIC of the underlying event
    seen_ns: int              # when the watch saw it
    broker: int | None = None
    member: str | None = None  # worker name (revoked) or member id (leader, joined)
    line: str = ""
    #: whose time ``generation`` counts: "classic" (generations) or "consumer" (KIP-848 group epochs)
    protocol: str = "classic"
    #: ``sample``: the group state the coordinator answered (Assigning, Reconciling, Stable, ...)
    state: str | None = None


class LiveWatch:
    """Follows one group's live stream; ``kip848``: the group has consumer-protocol members (see the
    module docstring for what changes)."""

    def __init__(self, group: str, broker_logs: dict[int, Path], events_dir: Path, interval: float = 0.005,
                 *, kip848: bool = False):
        self.group = group
        self.kip848 = kip848
        # from the start of the logs: the group's coordinator and leader chosen during warm-up are
        # needed to resolve roles at the first fault (older groups' lines are filtered by name)
        self.log = CoordinatorLog(group, broker_logs)
        # members' events only: the producer's send_ok stream is large and carries no group state
        self.events = EventsDirTail(events_dir, pattern="consumer-*.jsonl")
        self.samples = EventTail(Path(events_dir) / OBSERVER_EVENTS) if kip848 else None
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
            elif parsed.event is BrokerLogEvent.EPOCH_BUMPED:
                self._add(Signal("PreparingRebalance", parsed.generation, happened, now, bid, line=line,
                                 protocol="consumer"))
            elif parsed.event is BrokerLogEvent.TARGET_ASSIGNMENT:
                self._add(Signal("assignment", parsed.generation, happened, now, bid, line=line, protocol="consumer"))
            elif parsed.event is BrokerLogEvent.MEMBER_JOINED:
                # a new member's join bumps the epoch (a line of its own); a static member's replacement
                # does not, yet restarts that member's reconciliation (member epoch 0) at the same epoch
                self._add(Signal("joined", None, happened, now, bid, parsed.member_id, line, protocol="consumer"))
            elif parsed.event is BrokerLogEvent.OTHER and parsed.member_id and "Assignment received" in line:
                self.group_leader = parsed.member_id
                self._add(Signal("leader", parsed.generation, happened, now, bid, parsed.member_id, line))
        for ev in self.events.poll():
            if type(ev) is Assigned:
                if ev.member_id:
                    self.member_ids[ev.member_id] = ev.source
                # under KIP-848 a member's epoch is its own: the group is Stable by the coordinator's samples
                if not self.kip848 and ev.generation is not None and ev.generation not in self._stable_seen:
                    self._stable_seen.add(ev.generation)
                    self._add(Signal("Stable", ev.generation, ev.mono_ns, now, member=ev.source))
            elif type(ev) is Revoked or type(ev) is Lost:
                # lost (KIP-429 onPartitionsLost: fenced, or its session expired) takes the partitions away as
                # a revocation does, without the commit; found exploring 4.4.0: a member waited for by
                # on_revoked lost its partitions instead, and the fault never fired
                self._add(Signal("revoked", ev.generation, ev.mono_ns, now, member=ev.source,
                                 line=f"{ev.source} {ev.kind.value} {len(ev.partitions)} partition(s)"))
        if self.samples is not None:
            for ev in self.samples.poll():
                if type(ev) is GroupStateSample and ev.group == self.group:
                    self._sample(ev, now)

    def _sample(self, ev: GroupStateSample, now: int) -> None:
        """A ``group_state`` sample: a ``sample`` signal, and ``Stable`` the first time the coordinator
        answers Stable at a group epoch (``ConsumerGroup.maybeUpdateGroupState``: the assignment epoch
        is the group epoch and every member reached it).

        Every sample is a signal, an undescribed one (coordinator down or loading, or not described
        as a KIP-848 group) as state Unknown without an epoch: the observer asks one question at a
        time, so a sample written after another was asked after that one was written — what
        :func:`chaos.nemesis.interpreter.kip848_landing` needs to know which answers postdate a fault.
        """
        consumer = ev.group_type is GroupType.CONSUMER
        epoch = (ev.group_epoch if ev.group_epoch is not None else ev.generation) if consumer else None
        state = ev.state.value if consumer else GroupState.UNKNOWN.value
        self._add(Signal("sample", epoch, ev.mono_ns, now, ev.coordinator, protocol="consumer", state=state))
        if consumer and ev.state is GroupState.STABLE and epoch is not None and epoch not in self._stable_seen:
            self._stable_seen.add(epoch)
            line = f"group_state Stable at group epoch {epoch} (ConsumerGroupDescribe at broker-{ev.coordinator})"
            self._add(Signal("Stable", epoch, ev.mono_ns, now, ev.coordinator, line=line, protocol="consumer"))

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

    def leader_name(self, names: Iterable[str] = ()) -> str | None:
        """The member (worker name) the coordinator last named group leader, None when unknown; ``names``: the
        run's member names, whether or not they record events.

        A leader whose member id no ``assigned`` event showed yet — the leader line is read with the trigger's
        own, before the new generation's assignments, and a member that lost its partitions rejoins under a new
        id — is recognised by its id's prefix: the classic coordinator names a member ``<client.id>-<UUID>``
        (``GroupMetadata.generateMemberId``; ``<group.instance.id>-<UUID>`` for a static one) and every member's
        client id is its name. Found exploring 4.4.0: a fault on the group leader triggered by such a rebalance
        resolved to nothing. A ``command`` (black-box) member records no ``assigned`` event at all: it is
        recognised the same way, since kafka-chaos gives it its name as ``KAFKA_CLIENT_ID`` (a program that uses
        another client id stays unknown). Found exploring the black-box example: every fault on its group leader
        resolved to nothing."""
        leader = self.group_leader
        if not leader:
            return None
        name = self.member_ids.get(leader)
        if name is None:
            # the longest name first: consumer-10's ids start with "consumer-1" too, though not with "consumer-1-"
            candidates = sorted(set(self.member_ids.values()) | set(names), key=lambda n: (-len(n), n))
            name = next((n for n in candidates if leader.startswith(n + "-")), None)
        return name

    def state_at(self, at_ns: int) -> Signal | None:
        """The group-state signal (PreparingRebalance, CompletingRebalance or Stable) most recently before
        ``at_ns``: the state the group was in then, as far as the stream showed it (None: none yet)."""
        with self._cond:
            return max((s for s in self.signals if s.happened_ns <= at_ns and s.kind in _STATES),
                       key=lambda s: s.happened_ns, default=None)

    def since(self, since_ns: int) -> list[Signal]:
        with self._cond:
            return [s for s in self.signals if s.happened_ns >= since_ns]
