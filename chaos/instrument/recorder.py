"""Turning what an instrumented consumer sees into events of the run's one schema.

A :class:`Recorder` is one member's writer: it emits ``member_start``, ``assigned`` / ``revoked`` /
``lost``, ``consumed`` (through a :class:`~chaos.instrument.ledger.ProcessedLedger`), ``commit``,
``error`` and ``member_stop`` to the member's events file with :class:`chaos.history.writer.EventWriter`
(the schema is :mod:`chaos.history.event`; nothing here defines a field). It is client-agnostic: the
consumer classes give it a ``view`` function answering (generation or member epoch, member id) as
their library reports it at that moment, the same values our own members record
(:mod:`chaos.workload.clients.confluent`, :mod:`chaos.workload.clients.kafka_python`).

Cost (``bench/instrument.py``): reading the client's view is a round trip to librdkafka's group
thread, so handovers reuse one for up to :data:`VIEW_REUSE_NS`; and records processed in next-poll
mode are written in batches (:data:`BUFFER_RECORDS`, :data:`BUFFER_NS`,
:func:`chaos.instrument.ledger.coalesce`), always before any commit is stamped, an ownership change
or the stop — so a member killed with records in the buffer had committed none of them, and they are
judged as never processed (redelivered or read by the final read), never as a commit ahead of them.

One recorder per events file at a time: the file has one writer (docs/architecture.md, "The
history"), so a second consumer of the group opened in the same process while the first is open
is not recorded, and the first's file says so in an ``error`` event. Recorders still open when the
interpreter exits (the application never closed its consumer) record ``member_stop`` clean=false:
the library then destroys the client without leaving the group.
"""

from __future__ import annotations

import atexit
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from chaos.errors import UsageError
from chaos.history.event import Kind
from chaos.history.writer import EventWriter
from chaos.instrument.destination import Destination
from chaos.instrument.ledger import TPO, Handover, ProcessedBatch, ProcessedLedger, coalesce
from chaos.outcome import Operation, Outcome, classify

View = tuple[int | None, str | None]
TP = tuple[str, int]

#: longest error text kept in an event (as our own members do)
MAX_MESSAGE = 1000
#: how long the view read for one handover is reused for the next ones. Reading it costs a round trip
#: to librdkafka's group thread (``rd_kafka_consumer_group_metadata``, ~50 us: 20 times a bare
#: ``poll()`` that returns one record); every rebalance callback and error drops it, so a reused view
#: is at most this old and never older than the last assignment change. Commits and ownership events
#: always read it fresh.
VIEW_REUSE_NS = 1_000_000
#: records processed (next-poll mode) written together, at most this many or this long after the first
#: was handed over; the buffer is always written first when a commit is sent, the assignment changes or
#: the member stops, so a commit never covers a processed record that is not in the file yet
BUFFER_RECORDS = 1000
BUFFER_NS = 100_000_000


@dataclass(frozen=True, slots=True)
class Sent:
    """When a commit was sent and the client's view then: a commit event is stamped when sent."""

    mono_ns: int
    ts: float
    generation: int | None
    member_id: str | None


@dataclass(frozen=True, slots=True)
class CommitAnswer:
    """What one commit's answer says for some of its partitions."""

    offsets: tuple[TPO, ...]
    outcome: Outcome
    error_code: int | None = None
    error_name: str | None = None


def commit_answer(offsets: Iterable[TPO], code: int | None, name: str | None) -> CommitAnswer:
    """The outcome of a commit answered with this error (None/None: no error), from :mod:`chaos.outcome`."""
    if code is None and name is None:
        return CommitAnswer(tuple(offsets), Outcome.OK)
    return CommitAnswer(tuple(offsets), classify(Operation.COMMIT, code, name), code, name)


class Recorder:
    """One member's events (see the module docstring); thread-safe."""

    _lock = threading.Lock()
    _open: dict[str, Recorder] = {}  # events path -> the recorder writing it

    def __init__(self, destination: Destination, group: str, view: Callable[[], View], writer: EventWriter,
                 buffered: bool = True) -> None:
        self.destination = destination
        #: False under auto-commit: the library commits on its own thread, with no chance to write first
        self.buffered = buffered
        self._unwritten: list[ProcessedBatch] = []
        self._unwritten_records = 0
        self.group = group
        self._view = view
        self._writer = writer
        self._ledger = ProcessedLedger()
        self._ledger_lock = threading.Lock()
        self._recent: tuple[int, View] | None = None  # (read at, view) for handovers, see VIEW_REUSE_NS
        self.stopped = False

    # ------------------------------------------------------------------ opening and closing
    @classmethod
    def open(cls, destination: Destination, group: str, view: Callable[[], View],
             buffered: bool = True) -> Recorder | None:
        """The recorder of a new consumer of ``group``, or None when it is not to be recorded (another
        group than the one under test, or the file already has an open recorder)."""
        if not destination.records(group):
            return None
        key = str(destination.events)
        with cls._lock:
            current = cls._open.get(key)
            if current is None:
                current = cls._open[key] = cls(destination, group, view,
                                               EventWriter(destination.events, destination.member), buffered)
                return current
        current.error(f"a second consumer of group {group} opened in this process while the first is open is "
                      "not recorded (one member per events file)", None, None, False)
        return None

    @classmethod
    def active(cls) -> list[Recorder]:
        with cls._lock:
            return list(cls._open.values())

    def stop(self, clean: bool) -> None:
        """``member_stop`` and close the file; later calls do nothing."""
        self.flush()  # processed before the stop: the application polled again after them
        with Recorder._lock:
            if self.stopped:
                return
            self.stopped = True
            Recorder._open.pop(str(self.destination.events), None)
        self._writer.emit(Kind.MEMBER_STOP, group=self.group, clean=clean, signal=None)
        self._writer.close()

    def _emit(self, kind: Kind, **fields: Any) -> None:
        """Append one event; after ``member_stop`` nothing more is recorded (a callback the library
        runs late must not fail the application)."""
        if self.stopped:
            return
        try:
            self._writer.emit(kind, **fields)
        except UsageError:
            if not self.stopped:  # the writer closed under us by stop(): the event came too late
                raise

    # ------------------------------------------------------------------ events
    def view(self) -> View:
        return self._view()

    def start(self, **fields: Any) -> None:
        """``member_start`` with the member's configuration as it will join (fields of MemberStart)."""
        self._emit(Kind.MEMBER_START, group=self.group, **fields)

    def ownership(self, kind: Kind, partitions: Iterable[TP], incremental: bool) -> None:
        """``assigned`` / ``revoked`` / ``lost`` of ``partitions``, stamped now, with the view now."""
        self.flush()
        self._recent = None  # the assignment changed: the next handover reads the view again
        generation, member = self._view()
        self._emit(kind, group=self.group, partitions=[[t, p] for t, p in partitions],
                          incremental=incremental, generation=generation, member_id=member)

    def hand_over(self, records: Iterable[TPO]) -> None:
        """The client returned ``records`` to the application now."""
        recs = tuple(records)
        if not recs:
            return
        now = time.monotonic_ns()
        recent = self._recent
        if recent is None or now - recent[0] > VIEW_REUSE_NS:
            recent = self._recent = (now, self._view())
        generation, member = recent[1]
        h = Handover(recs, generation, member, now, time.time())
        with self._ledger_lock:
            self._ledger.hand_over(h)

    def settle(self) -> None:
        """The application polls again or closes: record what the ledger now counts as processed."""
        now = time.monotonic_ns()
        with self._ledger_lock:
            batches = self._ledger.settle(now)
            self._unwritten.extend(batches)
            self._unwritten_records += sum(len(b.offsets) for b in batches)
            if not self._unwritten:
                return
            # an idle loop (polls returning nothing) writes what waits once it is BUFFER_NS old
            if (self.buffered and self._unwritten_records < BUFFER_RECORDS
                    and now - self._unwritten[0].mono_ns < BUFFER_NS):
                return
            out = self._take()
        for b in out:
            self._consumed(b)

    def flush(self) -> None:
        """Write the processed records still buffered (see BUFFER_RECORDS)."""
        with self._ledger_lock:
            out = self._take()
        for b in out:
            self._consumed(b)

    def _take(self) -> list[ProcessedBatch]:
        out = coalesce(self._unwritten)
        self._unwritten = []
        self._unwritten_records = 0
        return out

    def mark(self, record: TPO) -> bool:
        """:func:`chaos.instrument.processed` on ``record``; False when this member did not hand it out."""
        with self._ledger_lock:
            if not self._ledger.holds(record):
                return False
            batch = self._ledger.mark(record, time.monotonic_ns(), time.time())
        if batch is not None:
            self._consumed(batch)
        return True

    def _consumed(self, b: ProcessedBatch) -> None:
        extra = {} if b.ts_uncertain_ns is None else {"ts_uncertain_ns": b.ts_uncertain_ns}
        self._emit(Kind.CONSUMED, mono_ns=b.mono_ns, ts=b.ts, group=self.group, topic=b.topic,
                          partition=b.partition, offsets=list(b.offsets), generation=b.generation,
                          member_id=b.member_id, **extra)

    def sent(self) -> Sent:
        """Stamp a commit being sent now, with the client's view now (first writing what was processed
        before it, so the commit is never judged against a file that lacks them)."""
        self.flush()
        generation, member = self._view()
        return Sent(time.monotonic_ns(), time.time(), generation, member)

    def commit(self, answer: CommitAnswer, sent: Sent | None, *, auto: bool = False,
               answered: bool = True) -> None:
        """A ``commit`` of ``answer.offsets``. ``sent`` None: stamped now with the view now (auto
        commits, which the client reports only when answered); ``answered`` False: the outcome never
        arrived (``unknown``, ``answered_ns`` null)."""
        if not answer.offsets:
            return
        now = time.monotonic_ns()
        if sent is None:
            sent = self.sent()
        extra: dict[str, Any] = {"answered_ns": now} if answered and now != sent.mono_ns else {}
        self._emit(Kind.COMMIT, mono_ns=sent.mono_ns, ts=sent.ts, group=self.group,
                          offsets=[[t, p, o] for t, p, o in answer.offsets], generation=sent.generation,
                          member_id=sent.member_id, outcome=answer.outcome.value, error_code=answer.error_code,
                          error_name=answer.error_name, auto=auto, **extra)

    def closing(self, close: Callable[[], None], unanswered: Callable[[], Iterable[tuple[tuple[TPO, ...], Sent, bool]]]
                ) -> None:
        """The application closes its consumer: what it was handed counts as processed (closing is
        polling again), then the library's ``close`` runs (revocations and the last auto commit are
        recorded in there); the commits ``unanswered`` then names — (offsets, sent, auto) — are
        ``unknown``, never assumed; ``member_stop`` clean when ``close`` returned, not when it raised."""
        self.settle()
        clean = False
        try:
            close()
            clean = True
        finally:
            for offsets, sent, auto in unanswered():
                self.commit(CommitAnswer(offsets, Outcome.UNKNOWN, None, "_NO_COMMIT_CALLBACK"), sent, auto=auto,
                            answered=False)
            self.stop(clean)

    def closing_of(self, consumer: Any, close: Callable[[], None]) -> None:
        """:meth:`closing` for an instrumented consumer (its ``_chaos_unanswered`` names the commits left
        unanswered), which is detached from this recorder afterwards (``_chaos`` = None), even when
        ``close`` raised: a second ``close()`` is the library's alone."""
        try:
            self.closing(close, consumer._chaos_unanswered)
        finally:
            consumer._chaos = None

    def error(self, message: str, code: int | None, name: str | None, fatal: bool) -> None:
        self._recent = None  # an error may come with a reset of the member (fenced, unknown member id)
        self._emit(Kind.ERROR, message=message[:MAX_MESSAGE], error_code=code, error_name=name, fatal=fatal)


def processed(msg: Any) -> bool:
    """Mark ``msg`` (a record an instrumented consumer returned: a confluent-kafka ``Message`` or a
    kafka-python ``ConsumerRecord``) as processed now, and switch its consumer to explicit mode
    (:mod:`chaos.instrument.ledger`). Returns whether a recording consumer had handed it out; without
    instrumentation it does nothing and returns False, so applications may call it unconditionally."""
    recorders = Recorder.active()
    if not recorders:
        return False
    topic, partition, offset = msg.topic, msg.partition, msg.offset
    if callable(topic):  # confluent-kafka's Message has methods, kafka-python's ConsumerRecord fields
        topic, partition, offset = topic(), partition(), offset()
    record = (topic, partition, offset)
    return any(r.mark(record) for r in recorders)


@atexit.register
def _stop_unclosed() -> None:
    for r in Recorder.active():
        # not settled: the application never polled again, so its last batch is not known processed
        r.stop(clean=False)
