"""Processed-record reports of black-box members: the output topic (issue 14, "an application may report").

A ``command:`` member whose spec says ``reports_processed: true`` is told an output topic in
``$KAFKA_CHAOS_OUTPUT_TOPIC`` (``<run topic>-processed``, one partition, created with the run's topic). For
every record it has processed it produces one record there:

* key: its ``$KAFKA_CLIENT_ID`` (the member's name, ``consumer-N``) — who processed it;
* value: JSON ``{"partition": P, "offset": O}`` — which record of ``$KAFKA_TOPIC`` (``"topic"`` may be given and
  must then be that topic);
* timestamp: the producer's own (``CreateTime``, the default of the topic kafka-chaos creates), set when the
  application calls produce — after it processed the record.

When the run ends (its members stopped, so nothing more is coming), kafka-chaos reads the topic from its start to
its high watermark and writes each report as a ``consumed`` event of that member (``events/<member>.processed.jsonl``).
What such an event can say, and what it cannot:

* *what* was processed, and by which member: as reported. kafka-chaos cannot see the processing; the application's
  report is the evidence, and the delivery checker judges it as a member's own ``consumed``.
* *when*: an interval. The record was processed no later than its report's timestamp (1 ms resolution, mapped from
  CLOCK_REALTIME to the history's CLOCK_MONOTONIC with this process's offset between the two — both clocks of one
  machine) and no earlier than the member process that reported it was started (the latest start of that member
  at or before the report: a bounced member is started again). ``mono_ns`` is that start, ``ts_uncertain_ns``
  reaches to the report (docs/architecture.md, "The history"): a checker that orders the event against others
  takes the interval, never the point.
* *generation* and *member id*: null — the report does not carry them, so ownership checkers stay ``unknown``.

A report kafka-chaos cannot read (not JSON, missing or extra fields, another topic) is
not guessed at: when its key names a reporting member it becomes a non-fatal ``error`` event of that member (its
evidence is incomplete), and every unreadable or unattributable report is listed in
``workers/processed-reports-notes.txt``. Only :class:`chaos.history.writer.EventWriter` writes events.
"""

from __future__ import annotations

import bisect
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, KafkaException, TopicPartition
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from chaos.history.event import REPORTS_INCOMPLETE, Kind
from chaos.history.writer import EventWriter

#: the environment variable naming the output topic (chaos.model.workload.MEMBER_ENV)
OUTPUT_TOPIC_ENV = "KAFKA_CHAOS_OUTPUT_TOPIC"
NOTES_FILE = "processed-reports-notes.txt"


def output_topic(topic: str) -> str:
    """The output topic of a run whose records go to ``topic``."""
    return f"{topic}-processed"


class _ReportValue(BaseModel):
    """One report's value (the JSON object an application produces)."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    partition: int = Field(ge=0)
    offset: int = Field(ge=0)
    topic: str | None = None


@dataclass(frozen=True, slots=True)
class RawReport:
    """A record of the output topic as read: where it sits there, its key, value and timestamp (ms, wall clock)."""

    position: int
    key: bytes | None
    value: bytes | None
    timestamp_ms: int


@dataclass(frozen=True, slots=True)
class Translation:
    """What the reports say: per member, ``consumed`` event fields (time-ordered), its ``error`` fields, and notes."""

    consumed: Mapping[str, list[dict[str, Any]]]
    errors: Mapping[str, list[dict[str, Any]]]
    notes: list[str]


def translate(reports: Sequence[RawReport], *, members: Mapping[str, Sequence[int]], group: str, topic: str,
              wall_minus_mono_ns: int) -> Translation:
    """Turn reports into event fields (module docstring). Pure: no Kafka, no files.

    ``members``: each reporting member's process start times (CLOCK_MONOTONIC ns, ascending);
    ``wall_minus_mono_ns``: CLOCK_REALTIME - CLOCK_MONOTONIC of this machine, to place a report's timestamp.
    """
    consumed: dict[str, list[dict[str, Any]]] = {m: [] for m in members}
    errors: dict[str, list[dict[str, Any]]] = {m: [] for m in members}
    notes: list[str] = []
    for r in reports:
        where = f"{output_topic(topic)}@{r.position}"
        name = r.key.decode("utf-8", "replace") if r.key is not None else None
        if name is None or name not in members:
            notes.append(f"{where}: key {name!r} names no member that reports processed records "
                         f"({', '.join(sorted(members)) or 'none'}); ignored")
            continue
        when = _interval(members[name], r.timestamp_ms * 1_000_000 - wall_minus_mono_ns)
        try:
            value = _ReportValue.model_validate_json(r.value or b"")
            if value.topic not in (None, topic):
                raise ValueError(f"topic {value.topic!r} is not the run's topic {topic}")
        except (ValidationError, ValueError) as exc:
            reason = _reason(exc)
            notes.append(f"{where} ({name}): unreadable report ({reason}); not counted as processed")
            errors[name].append(when | {
                "message": f"a processed-record report on the output topic could not be read ({where}: {reason}): "
                           "what this member processed is known only in part",
                "error_code": None, "error_name": "_UNREADABLE_REPORT", "fatal": False})
            continue
        consumed[name].append(when | {
            "group": group, "topic": topic, "partition": value.partition, "offsets": [value.offset],
            "generation": None, "member_id": None})
    for events in (*consumed.values(), *errors.values()):
        events.sort(key=lambda e: e["mono_ns"])
    return Translation(consumed, errors, notes)


def _interval(starts: Sequence[int], upper_ns: int) -> dict[str, Any]:
    """``mono_ns``/``ts``/``ts_uncertain_ns`` of something that happened between the member's latest start at or
    before ``upper_ns`` (its first start, for a report stamped before any: a producer clock cannot be trusted
    further) and ``upper_ns`` + 1 ms (the timestamp's resolution)."""
    i = bisect.bisect_right(starts, upper_ns)
    lower = starts[i - 1] if i else starts[0]
    upper = max(upper_ns + 1_000_000, lower)
    return {"mono_ns": lower, "ts_uncertain_ns": upper - lower}


def _reason(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        err = exc.errors()[0]
        loc = ".".join(str(p) for p in err["loc"])
        return f"{loc}: {err['msg']}" if loc else str(err["msg"])
    return str(exc)


def read(bootstrap: str, topic: str, group: str, timeout_s: float = 30.0) -> tuple[list[RawReport], bool]:
    """Every record of partition 0 of ``topic``, from its start to its high watermark (bounded by ``timeout_s``),
    and whether the read reached that watermark.

    Read without a group (``assign``), nothing committed: ``group`` only names the reader's client.
    """
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
                  "auto.offset.reset": "earliest", "log_level": 0})
    out: list[RawReport] = []
    try:
        try:
            high = c.get_watermark_offsets(TopicPartition(topic, 0), timeout=min(10.0, timeout_s))[1]
        except KafkaException:
            return out, False
        if high <= 0:
            return out, True
        c.assign([TopicPartition(topic, 0, 0)])
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            for msg in c.consume(1000, 0.5):
                offset = msg.offset()
                if msg.error() is not None or offset is None:
                    continue
                out.append(RawReport(offset, msg.key(), msg.value(), msg.timestamp()[1]))
                if offset + 1 >= high:
                    return out, True
    finally:
        c.close()
    return out, False


def record(run_dir: Path, reports: Sequence[RawReport], *, members: Mapping[str, Sequence[int]], group: str,
           topic: str, read_complete: bool) -> Translation:
    """Translate ``reports`` and write them as the members' events (``events/<member>.processed.jsonl``), with the
    notes in ``workers/`` (also when the topic could not be read to its end: ``read_complete`` False)."""
    wall_minus_mono = time.time_ns() - time.monotonic_ns()
    tr = translate(reports, members=members, group=group, topic=topic, wall_minus_mono_ns=wall_minus_mono)
    if not read_complete:
        # every reporting member's account is incomplete: the delivery checker does not judge the coordinator's
        # committed offsets against it (chaos/checkers/delivery.py)
        upper = time.monotonic_ns()
        for name, starts in members.items():
            tr.errors[name].append(_interval(starts, upper) | {
                "message": f"the output topic {output_topic(topic)} could not be read to its end: what this member "
                           "reported processed is known only in part",
                "error_code": None, "error_name": REPORTS_INCOMPLETE, "fatal": False})
    for name in members:
        if not tr.consumed[name] and not tr.errors[name]:
            continue
        writer = EventWriter(run_dir / "events" / f"{name}.processed.jsonl", name)
        try:
            for kind, items in ((Kind.CONSUMED, tr.consumed[name]), (Kind.ERROR, tr.errors[name])):
                for fields in items:
                    mono = fields.pop("mono_ns")
                    writer.emit(kind, mono_ns=mono, ts=(mono + wall_minus_mono) / 1e9, **fields)
        finally:
            writer.close()
    notes = list(tr.notes)
    if not read_complete:
        notes.insert(0, f"the output topic {output_topic(topic)} could not be read to its end: reports after "
                        f"position {reports[-1].position if reports else 0} are missing")
    if notes:
        (run_dir / "workers").mkdir(exist_ok=True)
        (run_dir / "workers" / NOTES_FILE).write_text("\n".join(notes) + "\n")
    return tr
