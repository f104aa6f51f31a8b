"""The share groups of a history as the share checkers read them (issue 36; KIP-932, "Queues for Kafka").

In a share group every record is handed to one member at a time: the share-partition leader
(``kafka.server.share.SharePartition``) moves it from Available to Acquired for that member, increments its
delivery count and starts an acquisition lock (``group.share.record.lock.duration.ms``, 30 s by default; KIP-1222
lets the broker say the timeout per fetch). The acquisition ends when the member acknowledges the record (accept
or reject: terminal; release: Available again), when the lock expires (Available again), or, at the delivery count
limit (``group.share.delivery.count.limit``, 5 by default), with the record archived instead of made Available
(``SharePartition.InFlightState.tryUpdateState``). KIP-932, "In-flight records".

This module derives, once per history, every *hold*: one acquisition of one offset by one member (a
``share_acquired`` event, one per offset), the acknowledgements of that offset that member sent while it held it,
and when the member stopped. Times are intervals, as the history records them (docs/share-groups.md, "Time"):

- the broker acquired the record at some moment in [``start_lo``, ``start_hi``]: ``start_lo`` is the event's
  ``fetched_ns`` (None: nothing bounds it from below, the client may fetch ahead of the application), ``start_hi``
  its ``mono_ns + ts_uncertain_ns``;
- the lock runs out at ``start + lock`` (an acknowledgement of type renew answered ok restarts it from the moment
  it was applied, KIP-1222), so in [``deadline_lo``, ``deadline_hi``];
- the holder certainly still held the record until ``end_lo``: the earliest of its lock's lower deadline, the
  first acknowledgement that may have ended the acquisition (accept, release or reject not refused), and the last
  event the member recorded before it stopped (a killed process's locks run until they expire, but nothing says
  it did not close first). None when the lock's start is not bounded from below.

Checkers compare these across members with the clock slack (:class:`chaos.checkers.bounds.CheckerBounds`,
``clock_slack_s``), so a comparison within the slack never fires. The group's lock duration and delivery count
limit are the ones its samples report, else the run's configs (``group.share.record.lock.duration.ms`` /
``share.record.lock.duration.ms``, ``group.share.delivery.count.limit`` / ``share.delivery.count.limit``), else
Kafka's defaults (``ShareGroupConfig``).

*Broker faults.* A fault that takes a node out (trait ``takes_target_out``) on a node that is not a member is a
possible change of share-partition leader. The leader keeps an acquisition in memory only: it writes the share
state to the share coordinator (``WriteShareGroupState``) when records are acknowledged, released or their lock
expires, not when they are acquired, so a new leader knows nothing of acquisitions made since and hands those
records out again with the same delivery count. Checkers report what such a fault may explain as notes.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import cast

from chaos.checkers.bounds import config_max
from chaos.checkers.index import HistoryIndex, index_of
from chaos.checkers.result import Result, Validity
from chaos.history import (
    Event,
    FaultEnd,
    FaultStart,
    History,
    MemberStart,
    MemberStop,
    ShareAcknowledged,
    ShareAckType,
    ShareAcquired,
    ShareGroupStateSample,
    ShareLockExpired,
    ShareProcessed,
)
from chaos.model.checker_name import CheckerName
from chaos.model.fault_traits import FaultTrait
from chaos.outcome import Outcome

#: ``ShareGroupConfig``: the broker's defaults
KAFKA_DEFAULT_LOCK_MS = 30_000  # group.share.record.lock.duration.ms
KAFKA_DEFAULT_DELIVERY_COUNT_LIMIT = 5  # group.share.delivery.count.limit
KAFKA_DEFAULT_SHARE_SESSION_TIMEOUT_MS = 45_000  # group.share.session.timeout.ms
LOCK_KEYS = ("group.share.record.lock.duration.ms", "share.record.lock.duration.ms")
LIMIT_KEYS = ("group.share.delivery.count.limit", "share.delivery.count.limit")
SESSION_KEYS = ("group.share.session.timeout.ms", "share.session.timeout.ms")

SHARE_TYPES: tuple[type[Event], ...] = (ShareAcquired, ShareAcknowledged, ShareLockExpired, ShareProcessed,
                                        ShareGroupStateSample)
#: (group, topic, partition, offset)
RecordKey = tuple[str, str, int, int]
_ENDING = frozenset({ShareAckType.ACCEPT, ShareAckType.RELEASE, ShareAckType.REJECT})
TERMINAL = frozenset({ShareAckType.ACCEPT, ShareAckType.REJECT})


def nothing_to_judge(name: CheckerName) -> Result:
    """The answer of a share checker on a history without share groups: nothing its invariant speaks about."""
    return Result(name, Validity.TRUE, "no share group in the history: nothing to judge", {"share_groups": 0})


def unacquired(view: ShareView, name: CheckerName, what: str, metric: str) -> Result | None:
    """The answer of a checker that reads acquisitions when none was recorded although share groups ran:
    unknown (``what`` was not judged), never true."""
    if view.holds:
        return None
    return Result(name, Validity.UNKNOWN, f"share group(s) {', '.join(view.groups)} in the history, but no member "
                  f"recorded an acquisition (share_acquired): {what} not judged", {metric: 0})


#: a lock's latest end when a renewal without an answer may have restarted it at any moment (past every history)
UNBOUNDED_NS = 2**63 - 1


def answered(ack: ShareAcknowledged) -> int:
    """The latest moment the acknowledgement may have been applied: its answer (or its stamp, when answered at
    once or never)."""
    return max(ack.answered_ns or 0, ack.mono_ns + (ack.ts_uncertain_ns or 0))


@dataclass(slots=True)
class Hold:
    """One acquisition of one record by one member, what the member acknowledged of it, and when it stopped."""

    acquired: ShareAcquired
    offset: int
    lock_ns: int
    acks: list[ShareAcknowledged] = field(default_factory=list)
    #: the member's processing of the record while this was its latest acquisition of it (``share_processed``)
    processed: list[ShareProcessed] = field(default_factory=list)
    #: the member's first ``member_stop`` after the acquisition, and the last share event it recorded before it
    stop: MemberStop | None = None
    stop_floor_ns: int | None = None

    @property
    def key(self) -> RecordKey:
        a = self.acquired
        return (a.group, a.topic, a.partition, self.offset)

    @property
    def source(self) -> str:
        return self.acquired.source

    @property
    def count(self) -> int | None:
        return self.acquired.delivery_count

    @property
    def seq(self) -> int:
        return self.acquired.seq

    @property
    def start_lo(self) -> int | None:
        return self.acquired.fetched_ns

    @property
    def start_hi(self) -> int:
        return self.acquired.mono_ns + (self.acquired.ts_uncertain_ns or 0)

    def deadline_hi(self, before: ShareAcknowledged | None = None) -> int:
        """The latest the lock can have run out, counting the renewals recorded before ``before``: one answered ok
        restarts it at its answer; one without an answer (``unknown``) may have been applied at any later moment,
        so the lock's end is not bounded (:data:`UNBOUNDED_NS`) and nothing after it is certainly past the lock."""
        deadline = self.start_hi + self.lock_ns
        for ack in self.acks:
            if ack is before:
                break
            if ack.ack_type is ShareAckType.RENEW and ack.outcome is Outcome.OK:
                deadline = max(deadline, answered(ack) + self.lock_ns)
            elif ack.ack_type is ShareAckType.RENEW and ack.outcome is Outcome.UNKNOWN:
                return UNBOUNDED_NS
        return deadline

    def deadline_lo(self) -> int | None:
        """The earliest the lock can have run out (None: its start is not bounded from below)."""
        deadline = None if self.start_lo is None else self.start_lo + self.lock_ns
        for ack in self.acks:
            if ack.ack_type is ShareAckType.RENEW and ack.outcome is Outcome.OK:
                deadline = max(deadline or 0, ack.mono_ns + self.lock_ns)
        return deadline

    def ending_ack(self) -> ShareAcknowledged | None:
        """The first acknowledgement that may have ended the acquisition (accept, release, reject; not refused)."""
        for ack in self.acks:
            if ack.ack_type in _ENDING and ack.outcome is not Outcome.FAIL:
                return ack
        return None

    def terminal_ack(self) -> ShareAcknowledged | None:
        """The first accept or reject the broker answered ok: the record is Acknowledged / Archived."""
        for ack in self.acks:
            if ack.ack_type in TERMINAL and ack.outcome is Outcome.OK:
                return ack
        return None

    def end_lo(self) -> int | None:
        """Until when the member certainly held the record (None: its lock may have run out at any time)."""
        deadline = self.deadline_lo()
        if deadline is None:
            return None
        ends = [deadline]
        ack = self.ending_ack()
        if ack is not None:
            ends.append(ack.mono_ns)
        if self.stop_floor_ns is not None:
            ends.append(self.stop_floor_ns)
        return min(ends)

    def describe(self) -> str:
        count = "?" if self.count is None else str(self.count)
        return f"{self.source} (delivery {count}, seq {self.seq})"


@dataclass(frozen=True, slots=True)
class FaultSpan:
    """A fault in effect from ``start_ns`` to ``end_ns`` (the run's end when it never healed): on a broker (a
    possible change of share-partition leader) or on a member."""

    seq: int
    fault_id: str
    start_ns: int
    end_ns: int


class ShareView:
    """The share groups of one history (cached per history: :func:`share_view`)."""

    def __init__(self, history: History) -> None:
        idx = index_of(history)
        self.idx = idx
        self.samples: dict[str, list[ShareGroupStateSample]] = {}
        for s in idx.of(ShareGroupStateSample):
            self.samples.setdefault(s.group, []).append(s)
        acquisitions = idx.of(ShareAcquired)
        acks = idx.of(ShareAcknowledged)
        expiries = idx.of(ShareLockExpired)
        processed = idx.of(ShareProcessed)
        own_events: list[ShareAcquired | ShareAcknowledged | ShareLockExpired | ShareProcessed] = [
            *acquisitions, *acks, *expiries, *processed]
        self.groups: list[str] = sorted({e.group for e in own_events} | set(self.samples))
        self.members: set[str] = {e.source for e in own_events}
        #: groups whose members record their processing (kafka-chaos's own loop does, for every member alike)
        self.processing_groups: set[str] = {e.group for e in processed}
        self._lock_ms = {g: self._group_setting(history, g, "record_lock_duration_ms", LOCK_KEYS,
                                                KAFKA_DEFAULT_LOCK_MS) for g in self.groups}
        self._limit = {g: self._group_setting(history, g, "delivery_count_limit", LIMIT_KEYS,
                                              KAFKA_DEFAULT_DELIVERY_COUNT_LIMIT) for g in self.groups}
        session = max((v for k in SESSION_KEYS if (v := config_max(history.header.configs, k)) is not None),
                      default=KAFKA_DEFAULT_SHARE_SESSION_TIMEOUT_MS)
        self.session_ns = session * 1_000_000

        # holds, in history order per record; each acknowledgement goes to its member's latest acquisition of it
        self.holds: dict[RecordKey, list[Hold]] = {}
        self.unheld_acks: list[tuple[ShareAcknowledged, int]] = []
        self.expiries: dict[tuple[RecordKey, str], list[ShareLockExpired]] = {}
        self.unheld_processing: list[tuple[ShareProcessed, int]] = []
        latest: dict[tuple[RecordKey, str], Hold] = {}
        stream = cast("list[ShareAcquired | ShareAcknowledged | ShareLockExpired | ShareProcessed]",
                      idx.stream((ShareAcquired, ShareAcknowledged, ShareLockExpired, ShareProcessed)))
        for e in stream:
            for offset in e.offsets:
                key = (e.group, e.topic, e.partition, offset)
                if type(e) is ShareAcquired:
                    lock_ms = e.lock_duration_ms if e.lock_duration_ms is not None else self._lock_ms[e.group]
                    hold = Hold(e, offset, lock_ms * 1_000_000)
                    self.holds.setdefault(key, []).append(hold)
                    latest[(key, e.source)] = hold
                elif type(e) is ShareAcknowledged:
                    got = latest.get((key, e.source))
                    if got is None:
                        self.unheld_acks.append((e, offset))
                    else:
                        got.acks.append(e)
                elif type(e) is ShareProcessed:
                    got = latest.get((key, e.source))
                    if got is None:
                        self.unheld_processing.append((e, offset))
                    else:
                        got.processed.append(e)
                else:
                    self.expiries.setdefault((key, e.source), []).append(e)

        # when each member stopped, and the last share event it recorded before
        own: dict[str, list[int]] = {}
        for e in stream:
            own.setdefault(e.source, []).append(e.mono_ns)
        stops: dict[str, list[MemberStop]] = {}
        for stopped in idx.of(MemberStop):
            if stopped.source in self.members:
                stops.setdefault(stopped.source, []).append(stopped)
        for holds in self.holds.values():
            for h in holds:
                stop = next((s for s in stops.get(h.source, ()) if s.seq > h.seq), None)
                if stop is not None:
                    h.stop = stop
                    before = [ns for ns in own.get(h.source, ()) if ns <= stop.mono_ns]
                    h.stop_floor_ns = max(before) if before else stop.mono_ns

        self.broker_faults = _broker_faults(idx, self.members)
        self.member_faults = _member_faults(idx, self.members)

    @staticmethod
    def _group_setting(history: History, group: str, name: str, keys: Iterable[str], default: int) -> int:
        said: list[int] = [getattr(s, name) for s in index_of(history).of(ShareGroupStateSample)
                           if s.group == group and getattr(s, name) is not None]
        if said:
            return max(said)
        # the group's own config, as the run set it before its members joined (header ``configs.group``), over
        # the brokers' defaults for groups without one
        own = history.header.configs.get("group") if isinstance(history.header.configs, Mapping) else None
        if isinstance(own, Mapping):
            found = [int(v) for k in keys if isinstance(v := own.get(k), int | str) and str(v).isdigit()]
            if found:
                return max(found)
        found = [v for k in keys if (v := config_max(history.header.configs, k)) is not None]
        return max(found) if found else default

    def lock_ms(self, group: str) -> int:
        return self._lock_ms[group]

    def limit(self, group: str) -> int:
        return self._limit[group]

    def broker_fault_in(self, lo: int | None, hi: int) -> FaultSpan | None:
        """A broker fault in effect at some moment of [lo, hi] (lo None: any time up to hi)."""
        for f in self.broker_faults:
            if f.start_ns <= hi and (lo is None or f.end_ns >= lo):
                return f
        return None

    def member_fault_in(self, member: str, lo: int, hi: int) -> FaultSpan | None:
        """A fault on ``member`` itself (its process, its links) in effect at some moment of [lo, hi]."""
        for f in self.member_faults.get(member, ()):
            if f.start_ns <= hi and f.end_ns >= lo:
                return f
        return None

    def holds_of(self, group: str) -> Iterable[tuple[RecordKey, list[Hold]]]:
        return ((k, hs) for k, hs in self.holds.items() if k[0] == group)


def _broker_faults(idx: HistoryIndex, members: set[str]) -> list[FaultSpan]:
    consumers = members | {s.source for s in idx.of(MemberStart)}
    ends = {e.fault_id: e.mono_ns for e in idx.of(FaultEnd)}
    out = []
    for f in idx.of(FaultStart):
        if FaultTrait.TAKES_TARGET_OUT in f.effects and any(n not in consumers for n in f.nodes):
            out.append(FaultSpan(f.seq, f.fault_id, f.mono_ns, ends.get(f.fault_id, idx.last_ns)))
    return out


def _member_faults(idx: HistoryIndex, members: set[str]) -> dict[str, list[FaultSpan]]:
    ends = {e.fault_id: e.mono_ns for e in idx.of(FaultEnd)}
    out: dict[str, list[FaultSpan]] = {}
    for f in idx.of(FaultStart):
        for n in set(f.nodes) & members:
            out.setdefault(n, []).append(FaultSpan(f.seq, f.fault_id, f.mono_ns, ends.get(f.fault_id, idx.last_ns)))
    return out


def later(x: Hold, y: Hold, slack_ns: int) -> bool:
    """Whether the broker certainly acquired ``y`` after ``x``: by delivery count (the leader counts up on every
    acquisition), or by time (``y``'s fetch was sent after ``x`` had been received)."""
    if x.count is not None and y.count is not None and y.count > x.count:
        return True
    return y.start_lo is not None and y.start_lo > x.start_hi + slack_ns


_CACHE: weakref.WeakKeyDictionary[History, ShareView] = weakref.WeakKeyDictionary()


def share_view(history: History) -> ShareView:
    got = _CACHE.get(history)
    if got is None:
        got = _CACHE[history] = ShareView(history)
    return got


def seconds(view: ShareView, ns: int) -> str:
    return f"{view.idx.seconds(ns):.3f}s"


def fmt_key(key: RecordKey) -> str:
    return f"{key[1]}-{key[2]}@{key[3]}"

