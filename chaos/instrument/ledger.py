"""What an instrumented consumer handed the application and when the application finished with it.

The delivery checker (:mod:`chaos.checkers.delivery`, invariant 4) counts a record as *processed*
when a ``consumed`` event of its group names it, and judges an ``ok`` commit of next offset N by the
``consumed`` events ordered before it (merged history order, i.e. ``mono_ns``). An application's own
loop does not tell us when it finished a record, so the ledger decides, in one of two modes:

* **next poll** (default): a record returned by ``poll``/``consume`` is processed once the application
  polls again (or closes). It is recorded then — the application has provably let go of the record —
  stamped with the moment it was handed over (``mono_ns``, the last moment known to precede the end
  of its processing) and ``ts_uncertain_ns`` up to the moment it was recorded: processing ended
  somewhere in that interval (docs/architecture.md, "The history", "Stamped where it happened").
  So the usual loop *poll → process → commit → poll* orders the batch's ``consumed`` before its
  commit, while a member killed between commit and its next poll never records the batch: a commit
  ahead of processing, which delivery reports (the at-most-once hole of commit-before-process).
* **explicit**: the application calls :func:`chaos.instrument.processed` on a record when it is done;
  that records a ``consumed`` event at once, stamped at the call. The first call switches its
  consumer to this mode for good; records of the current batch not marked are never recorded as
  processed (an application that drops them loses them, which is what delivery must see).

Each record keeps the generation (or KIP-848 member epoch) and member id the client reported when it
returned the record, as the issue asks; the event carries those. Pure bookkeeping (no client, no
clock): callers pass times in, :class:`chaos.instrument.recorder.Recorder` turns batches into events.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum

#: records handed out but not yet marked, kept per consumer in explicit mode; beyond it the oldest are
#: forgotten (never recorded as processed), so an application that never marks cannot grow memory
MAX_UNMARKED = 100_000

TPO = tuple[str, int, int]


class ProcessedMode(StrEnum):
    NEXT_POLL = "next_poll"
    EXPLICIT = "explicit"


@dataclass(frozen=True, slots=True)
class Handover:
    """One poll's records as returned to the application, with the client's view at that moment."""

    records: tuple[TPO, ...]
    generation: int | None
    member_id: str | None
    mono_ns: int
    ts: float


@dataclass(frozen=True, slots=True)
class ProcessedBatch:
    """Records of one partition to record as ``consumed`` (offsets in the order they were handed)."""

    topic: str
    partition: int
    offsets: tuple[int, ...]
    generation: int | None
    member_id: str | None
    mono_ns: int
    ts: float
    #: None: processed exactly at mono_ns (explicit mark); else processing ended within
    #: [mono_ns, mono_ns + ts_uncertain_ns]
    ts_uncertain_ns: int | None


class ProcessedLedger:
    """Records handed out and not yet processed, for one consumer (see the module docstring).

    Not thread-safe by itself: :class:`~chaos.instrument.recorder.Recorder` holds a lock around it,
    since :func:`chaos.instrument.processed` may be called from the application's worker threads.
    """

    def __init__(self, max_unmarked: int = MAX_UNMARKED) -> None:
        self.mode = ProcessedMode.NEXT_POLL
        self._max_unmarked = max_unmarked
        self._waiting: list[Handover] = []   # next-poll mode: handed since the last poll
        self._unmarked: dict[TPO, Handover] = {}  # explicit mode: insertion order = age

    def hand_over(self, handover: Handover) -> None:
        """The client returned ``handover.records`` to the application."""
        if not handover.records:
            return
        if self.mode is ProcessedMode.NEXT_POLL:
            self._waiting.append(handover)
            return
        self._keep_unmarked(handover.records, handover)

    def settle(self, now_ns: int) -> list[ProcessedBatch]:
        """The application polls again (or closes) at ``now_ns``: in next-poll mode everything handed
        since the last poll is processed now, one batch per partition and handover; explicit mode
        records only marks, so nothing."""
        if not self._waiting:
            return []
        waiting, self._waiting = self._waiting, []
        out: list[ProcessedBatch] = []
        for h in waiting:
            per_tp: dict[tuple[str, int], list[int]] = {}
            for topic, partition, offset in h.records:
                per_tp.setdefault((topic, partition), []).append(offset)
            out.extend(ProcessedBatch(topic, partition, tuple(offsets), h.generation, h.member_id, h.mono_ns, h.ts,
                                      max(0, now_ns - h.mono_ns))
                       for (topic, partition), offsets in per_tp.items())
        return out

    def mark(self, record: TPO, now_ns: int, now_ts: float) -> ProcessedBatch | None:
        """The application says ``record`` is processed (switching to explicit mode). None when this
        consumer did not hand it out, or it was marked already."""
        if self.mode is ProcessedMode.NEXT_POLL:
            self.mode = ProcessedMode.EXPLICIT
            waiting, self._waiting = self._waiting, []
            for h in waiting:
                self._keep_unmarked(h.records, h)
        if record not in self._unmarked:
            return None
        h = self._unmarked.pop(record)
        return ProcessedBatch(record[0], record[1], (record[2],), h.generation, h.member_id, now_ns, now_ts, None)

    def holds(self, record: TPO) -> bool:
        """Whether ``record`` was handed out by this consumer and awaits processing."""
        if self.mode is ProcessedMode.EXPLICIT:
            return record in self._unmarked
        return any(record in h.records for h in self._waiting)

    def _keep_unmarked(self, records: Iterable[TPO], handover: Handover) -> None:
        for r in records:
            self._unmarked.pop(r, None)  # handed again (a rewind): its latest handover counts
            self._unmarked[r] = handover
        excess = len(self._unmarked) - self._max_unmarked
        if excess > 0:
            for r in list(self._unmarked)[:excess]:
                del self._unmarked[r]


def coalesce(batches: Iterable[ProcessedBatch]) -> list[ProcessedBatch]:
    """Consecutive batches of the same partition, generation and member as one batch: the offsets in
    order, stamped with the first one's start and an interval reaching the last one's end, so each
    record's processing still ended inside the event's interval (a per-record ``poll()`` loop would
    otherwise write one event per record). Exact stamps (explicit marks) are kept apart."""
    out: list[ProcessedBatch] = []
    for b in batches:
        last = out[-1] if out else None
        if (last is None or b.ts_uncertain_ns is None or last.ts_uncertain_ns is None
                or (last.topic, last.partition, last.generation, last.member_id)
                != (b.topic, b.partition, b.generation, b.member_id)):
            out.append(b)
            continue
        end = max(last.mono_ns + last.ts_uncertain_ns, b.mono_ns + b.ts_uncertain_ns)
        out[-1] = ProcessedBatch(last.topic, last.partition, last.offsets + b.offsets, last.generation,
                                 last.member_id, last.mono_ns, last.ts, end - last.mono_ns)
    return out
