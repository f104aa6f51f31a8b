"""Key placement and per-key order of a keyed workload (issue 16, item 5).

A keyed producer (``ProducerSpec.keys: N``, :mod:`chaos.workload.producer`) sends each record with one of N
keys through librdkafka's ``murmur2_random`` (or ``murmur2``) partitioner, which places a non-null key as the
Java producer does: ``toPositive(murmur2(keyBytes)) % numPartitions`` (``org.apache.kafka.common.utils.Utils``
``murmur2`` / ``toPositive``; ``BuiltInPartitioner.partitionForKey`` since Kafka 3.3, KIP-794;
``DefaultPartitioner.partition`` before). :func:`murmur2` and :func:`partition_for_key` are that function,
tested against values printed by the Java client itself (tests/unit/checkers/test_key_placement.py). The
partitioner never looks at leaders or availability for a keyed record: a key stays on its partition through
broker faults and leader changes (the record waits and is retried), which is what is judged.

Definitions, on the producers' ``send_ok`` events (acknowledged records: topic, partition, offset, key, value):

*Keyed records.* The records of the producers the run's header declares keyed
(``experiment.workload.producers[i].keys`` not null; source ``producer-<i>``). Other producers give each record
its own key under librdkafka's default partitioner (``consistent_random``) and are not judged. A history whose
header declares no keyed producer (an unkeyed workload, an older history, a hand-made fixture) answers
``true`` with "no keyed records" and ``keyed_records`` 0: there is nothing the invariant speaks about, and it
is not a missing observation. A keyed workload with no acknowledged keyed record answers ``unknown``.

*Placement.* Every acknowledged keyed record is on partition ``partition_for_key(key, N)`` for a partition count
N the producer could have used. Before any ``add_partitions`` fault began, N is the topic's initial count
(``experiment.workload.partitions``). An ``add_partitions`` fault makes its new total possible from its
``fault_start`` on: the producer notices it only at its next metadata refresh (librdkafka
``topic.metadata.refresh.interval.ms``), and partitions a record when it is produced, which is before it is
acknowledged — so a record acknowledged after the fault began may be on the old count's partition or the new
one's, and is judged against both (no more precisely: the history does not say which metadata the producer had).
The new total is read from the fault's ``effect`` evidence (``<topic>: 6 -> 12 partitions``), else from the
experiment's fault spec (``fault_id`` ``f<i>``); when neither says it, records acknowledged after that fault
began are not judged for placement (counted as ``placement_unjudged``; the summary says so).

*Per-key order.* A producer's value is ``<run_id>:<producer>:<n>`` with ``n`` counting up per producer, so the
records of one key carry increasing ``n`` in the order they were produced: ``n`` is the key's sequence number.
With idempotence (KIP-98) a producer's records to one partition are appended in the order they were produced,
so within one (producer, key, partition) the ``n`` must not go down as the offset goes up; a step down is a
violation citing both ``send_ok``. The highest ``n`` so far appearing again at a later offset is a duplicate (a
retried send appended twice, next to itself in the key's order): counted and noted, not an order violation here
(delivery and record-anomalies count duplicates). An older ``n`` appended after a newer one is a step down
whether or not it is a retry: a reader of the key sees it out of order. Order across
partitions (a key that moved after ``add_partitions``) and across producers is not defined and not judged.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from chaos.checkers.bounds import ResolvedBounds
from chaos.checkers.index import index_of
from chaos.checkers.result import FindingLog, Result, Validity
from chaos.history import History
from chaos.history.event import FaultEnd, FaultStart, FaultVerified, SendOk
from chaos.model.checker_name import CheckerName
from chaos.model.fault_traits import FaultTrait

_MASK32 = 0xFFFFFFFF
#: murmur2's constants as Kafka's Utils.murmur2 uses them (seed, multiplier, shift)
_SEED, _M, _R = 0x9747B28C, 0x5BD1E995, 24
#: an add_partitions fault's effect evidence (chaos.nemesis.kinds.topology): "<topic>: 6 -> 12 partitions"
_GROWN = re.compile(r"-> (\d+) partitions")
_FAULT_INDEX = re.compile(r"f(\d+)(?:\.\d+)?")


def murmur2(data: bytes) -> int:
    """Kafka's 32-bit murmur2 (``org.apache.kafka.common.utils.Utils.murmur2``) as a signed Java int.

    Java ints wrap at 32 bits and ``>>>`` is an unsigned shift: here every step is masked to 32 bits and
    shifts act on the unsigned value, then the result is read back as signed."""
    length = len(data)
    h = (_SEED ^ length) & _MASK32
    whole = length - length % 4
    for i in range(0, whole, 4):
        k = data[i] | (data[i + 1] << 8) | (data[i + 2] << 16) | (data[i + 3] << 24)  # little-endian
        k = (k * _M) & _MASK32
        k ^= k >> _R
        k = (k * _M) & _MASK32
        h = (h * _M) & _MASK32
        h ^= k
    rest = length % 4  # the tail, falling through from 3 to 1 as the Java switch does
    if rest == 3:
        h ^= data[whole + 2] << 16
    if rest >= 2:
        h ^= data[whole + 1] << 8
    if rest >= 1:
        h ^= data[whole]
        h = (h * _M) & _MASK32
    h ^= h >> 13
    h = (h * _M) & _MASK32
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def to_positive(number: int) -> int:
    """``Utils.toPositive``: the sign bit cleared (not the absolute value)."""
    return number & 0x7FFFFFFF


def partition_for_key(key: bytes, partitions: int) -> int:
    """The partition Kafka's producer gives a non-null key (``BuiltInPartitioner.partitionForKey``)."""
    return to_positive(murmur2(key)) % partitions


@dataclass(frozen=True, slots=True)
class _Growth:
    """An add_partitions fault: from ``start_ns`` on, ``total`` partitions are possible (None: not known)."""

    seq: int
    start_ns: int
    total: int | None


def keyed_producers(experiment: Mapping[str, Any]) -> dict[str, int]:
    """Source name -> number of keys, for the producers the header's experiment declares keyed."""
    workload = experiment.get("workload")
    producers = workload.get("producers") if isinstance(workload, Mapping) else None
    if not isinstance(producers, Sequence):
        return {}
    return {f"producer-{i}": p["keys"] for i, p in enumerate(producers)
            if isinstance(p, Mapping) and isinstance(p.get("keys"), int)}


def _growths(history: History) -> list[_Growth]:
    idx = index_of(history)
    said = {v.fault_id: int(m.group(1)) for v in idx.of(FaultVerified)
            if v.stage == "effect" and (m := _GROWN.search(v.evidence)) is not None}
    faults = history.header.experiment.get("faults")
    out = []
    for f in idx.of(FaultStart):
        if FaultTrait.CHANGES_PARTITION_COUNT not in f.effects:
            continue
        total = said.get(f.fault_id)
        m = _FAULT_INDEX.fullmatch(f.fault_id)
        if total is None and m is not None and isinstance(faults, Sequence) and int(m.group(1)) < len(faults):
            spec = faults[int(m.group(1))]
            total = spec.get("partitions") if isinstance(spec, Mapping) else None
        out.append(_Growth(f.seq, f.mono_ns, total if isinstance(total, int) and total > 0 else None))
    return out


def _sequence_number(value: str) -> int | None:
    """``n`` of a ``<run_id>:<producer>:<n>`` value (None: not a value of our producer)."""
    tail = value.rpartition(":")[2]
    return int(tail) if tail.isdigit() else None


def check(history: History, bounds: ResolvedBounds) -> Result:
    name = CheckerName.KEY_PLACEMENT
    keyed = keyed_producers(history.header.experiment)
    if not keyed:
        return Result(name, Validity.TRUE, "no keyed records: the workload is unkeyed (no producer has keys)",
                      {"keyed_records": 0})
    workload = history.header.experiment.get("workload")
    initial = workload.get("partitions") if isinstance(workload, Mapping) else None
    if not isinstance(initial, int) or initial < 1:
        return Result(name, Validity.UNKNOWN, "keyed workload, but the header gives no partition count "
                      "(experiment.workload.partitions): placement not judged", {"keyed_records": 0})
    idx = index_of(history)
    log = FindingLog(bounds.max_findings)
    records = [s for s in idx.of(SendOk) if s.source in keyed and s.key is not None]
    if not records:
        return Result(name, Validity.UNKNOWN, f"keyed workload ({', '.join(sorted(keyed))}), but no keyed record "
                      "was acknowledged: nothing to judge", {"keyed_records": 0})
    growths = _growths(history)
    in_effect = _fault_windows(history)

    placed = unjudged = after_add = during_faults = 0
    hashes: dict[str, int] = {}
    for s in records:
        grown = [g for g in growths if g.start_ns <= s.mono_ns]
        if any(g.total is None for g in grown):
            unjudged += 1
            continue
        counts = sorted({initial, *(g.total for g in grown if g.total is not None)})
        key = s.key or ""  # never empty here: records without a key were left out above
        h = hashes.get(key)
        if h is None:
            h = hashes[key] = to_positive(murmur2(key.encode()))
        allowed = {h % n: n for n in counts}  # the partition of each possible count (the last count wins a tie)
        placed += 1
        after_add += bool(grown)
        during_faults += any(a <= s.mono_ns <= b for a, b in in_effect)
        if s.partition not in allowed:
            where = " or ".join(f"{s.topic}-{p} ({n} partitions)" for p, n in allowed.items())
            log.violation(f"key {key!r} of {s.source} acknowledged on {s.topic}-{s.partition}@{s.offset}; "
                          f"murmur2 places it on {where}", s.seq, *(g.seq for g in grown))
    misplaced = log.violation_count

    runs, duplicates, unordered = _order(records, log)
    order_broken = log.violation_count - misplaced
    metrics = {"keyed_records": float(placed), "keys": float(len(hashes)), "misplaced": float(misplaced),
               "order_violations": float(order_broken), "placement_unjudged": float(unjudged),
               "records_after_add": float(after_add), "records_during_faults": float(during_faults),
               "key_partitions": float(runs), "duplicates": float(duplicates), "order_unjudged": float(unordered),
               "partitions_initial": float(initial)}
    caveat = (f"; {unjudged} acknowledged after an add_partitions of unknown size not judged for placement"
              if unjudged else "")
    ok = (f"{placed} keyed records of {len(hashes)} keys on the partitions murmur2 gives them "
          f"({during_faults} during faults, {after_add} after partitions were added); per-key order held on "
          f"{runs} key-partitions ({duplicates} duplicates){caveat}")
    bad = (f"{misplaced} keyed records on the wrong partition, {order_broken} per-key order violations "
           f"(of {placed} keyed records){caveat}")
    return log.result(name, ok, bad, metrics)


def _fault_windows(history: History) -> list[tuple[int, int]]:
    """(start, end) mono_ns of every fault that began (end: its fault_end, else the last event)."""
    idx = index_of(history)
    ends = {e.fault_id: e.mono_ns for e in idx.of(FaultEnd)}
    last = history.events[-1].mono_ns if history.events else 0
    return [(f.mono_ns, ends.get(f.fault_id, last)) for f in idx.of(FaultStart)]


def _order(records: list[SendOk], log: FindingLog) -> tuple[int, int, int]:
    """Judge per-key order within each (producer, topic, partition, key); (runs judged, duplicates, unjudged)."""
    runs: dict[tuple[str, str, int, str | None], list[tuple[int, int, SendOk]]] = {}
    unjudged = 0
    for s in records:
        n = _sequence_number(s.value)
        if n is None:
            unjudged += 1
            continue
        runs.setdefault((s.source, s.topic, s.partition, s.key), []).append((s.offset, n, s))
    duplicates = 0
    for (source, topic, partition, key), lst in runs.items():
        lst.sort(key=lambda r: (r[0], r[1]))
        top: tuple[int, int, SendOk] | None = None  # the highest sequence number so far, at the lowest offset
        prev_offset = None
        for offset, n, s in lst:
            if offset == prev_offset:
                continue  # one offset acknowledged twice: record-anomalies judges whether it is consistent
            prev_offset = offset
            if top is None or n > top[1]:
                top = (offset, n, s)
            elif n == top[1]:
                duplicates += 1
                log.note(f"key {key!r} of {source}: #{n} appended twice on {topic}-{partition} (offsets {top[0]} "
                         f"and {offset}): a duplicate, not a reordering", top[2].seq, s.seq)
            else:
                log.violation(f"per-key order broken: key {key!r} of {source} on {topic}-{partition}: #{n} at "
                              f"offset {offset} after #{top[1]} at offset {top[0]}", top[2].seq, s.seq)
    return len(runs), duplicates, unjudged
