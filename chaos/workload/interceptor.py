"""The kafka-chaos ``ConsumerInterceptor`` for JVM applications (issue 14, black box): its jar and its lines.

A Java (or any JVM) consumer that kafka-chaos does not run itself is observed through
``io.kafkachaos.interceptor.RecordingConsumerInterceptor`` (sources in ``java/interceptor/``), enabled
with the client's own ``interceptor.classes`` (KIP-42) and the jar on the application's classpath. The
interceptor appends one JSON line per callback to the file named by ``kafka.chaos.events.path`` in the
consumer config, else by the environment variable ``KAFKA_CHAOS_EVENTS``:

* ``start`` — ``configure``: client id, group id, group instance id, whether auto-commit is on, the
  kafka-clients version it loaded into;
* ``consumed`` — ``onConsume``: per partition, the offsets of the records ``poll`` is about to return
  (called for non-empty batches only, just before ``poll`` returns them);
* ``commit`` — ``onCommit``: the offsets of a commit the coordinator **accepted**. Kafka calls onCommit
  on success only (``ConsumerCoordinator.commitOffsetsSync`` / ``doCommitOffsetsAsync``, 2.8–3.9;
  ``CommitRequestManager`` via ``OffsetCommitCallbackInvoker``, 4.x), so a failed commit leaves no line;
* ``close`` — the consumer closed.

Each line carries ``wall_ms`` (``System.currentTimeMillis()``), ``nano`` (``System.nanoTime()``), its
stream (pid-instance) and its number ``n`` in the stream. On Linux, HotSpot's ``System.nanoTime()`` is
``clock_gettime(CLOCK_MONOTONIC)`` (``os::javaTimeNanos``, src/hotspot/os/posix/os_posix.cpp, JDK 17+;
os_linux.cpp before) — the history's own clock (docs/architecture.md, "The history"). The translator
does not take that on faith: a stream's ``nano`` is used as ``mono_ns`` only if its start line's
``wall_ms - nano`` agrees with this process's CLOCK_REALTIME - CLOCK_MONOTONIC within
:data:`CLOCK_AGREEMENT_NS`; otherwise ``wall_ms`` is mapped (:func:`chaos.workload.clients.java.jvm_clock`,
1 ms resolution).

What the events say, and what they cannot:

* ``consumed``: group, topic, partition, offsets, stamped when ``poll`` returned them — "processed"
  here means *returned to the application*; when the application processed them is not seen.
* ``commit``: outcome ``ok`` always (onCommit is success only); ``answered_ns`` is when onCommit ran
  (after the answer arrived; on 4.x possibly later, when the application thread ran the invocation).
  When it was *sent* is not seen: ``mono_ns`` is a lower bound and ``ts_uncertain_ns`` reaches to the
  answer. The lower bound is the consumer's start, raised — when ``commits_follow_polls`` (the default) —
  to the first ``poll`` that returned, for every committed partition, a record at or beyond offset N-1
  for a commit of next offset N: an application commits offsets of records ``poll`` gave it (commitSync /
  commitAsync after processing or before it; the classic client's auto-commit sends the positions of
  the previous poll at the start of the next one, ``ConsumerCoordinator.maybeAutoCommitOffsetsAsync``).
  ``auto`` is whether auto-commit was on (the interceptor cannot tell an auto-commit from the
  application's own).
* ``generation`` and ``member_id`` are null on every event: the interceptor API passes neither and the
  interceptor holds no reference to the consumer (``KafkaConsumer.groupMetadata()``).
* A lost line (the interceptor could not write; numbers skip) becomes an ``error`` event (not fatal)
  spanning the gap, so a reader knows the evidence is incomplete.

Only :class:`chaos.history.writer.EventWriter` writes events; this module defines no event field.
One consumer at a time per events file: two consumers of one group open at once in one process would be
one member in the history, and are refused; a process that replaces a killed one may append to its file.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, PositiveInt, TypeAdapter, ValidationError

from chaos.cluster.runtime import Progress
from chaos.errors import UsageError
from chaos.history.event import Kind
from chaos.history.writer import EventWriter
from chaos.outcome import Outcome
from chaos.workload.clients.java import jvm_clock
from chaos.workload.maven_build import ensure_jar, project_dir, quiet

INTERCEPTOR_CLASS = "io.kafkachaos.interceptor.RecordingConsumerInterceptor"
#: the consumer config naming the events file (RecordingConsumerInterceptor.PATH_CONFIG)
PATH_CONFIG = "kafka.chaos.events.path"
#: the environment variable naming it when the config does not (RecordingConsumerInterceptor.PATH_ENV)
PATH_ENV = "KAFKA_CHAOS_EVENTS"
#: the line format the translator reads (RecordingConsumerInterceptor.FORMAT)
FORMAT = 1
JAR_NAME = "kafka-chaos-interceptor.jar"
#: how far a stream's ``wall_ms - nano`` may be from our CLOCK_REALTIME - CLOCK_MONOTONIC for ``nano`` to be
#: taken as CLOCK_MONOTONIC: wall_ms has 1 ms resolution and NTP slews the offset by at most 0.5 ms/s
CLOCK_AGREEMENT_NS = 1_000_000_000



# ----------------------------------------------------------------------------------------- the jar


def sources_dir() -> Path:
    """``java/interceptor/`` of this checkout (the package's sources sit beside it)."""
    return project_dir("interceptor")


def ensure_interceptor(progress: Progress = quiet) -> Path:
    """The interceptor jar, built on first use into ``<cache>/interceptor/<source hash>/`` (no-op after;
    :func:`chaos.workload.maven_build.ensure_jar`)."""
    return ensure_jar("interceptor", JAR_NAME, "kafka-chaos consumer interceptor", progress)


def consumer_config(events_path: str | os.PathLike[str]) -> dict[str, str]:
    """The consumer configs that enable the interceptor and name its events file."""
    return {"interceptor.classes": INTERCEPTOR_CLASS, PATH_CONFIG: str(events_path)}


def properties_lines(events_path: str | os.PathLike[str]) -> list[str]:
    """:func:`consumer_config` as lines of a Java ``.properties`` file (backslashes escaped, java.util.Properties)."""
    return [f"{k}={v.replace(chr(92), chr(92) * 2)}" for k, v in consumer_config(events_path).items()]


# ----------------------------------------------------------------------------------------- the lines


class _Strict(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class _Line(_Strict):
    v: Literal[1]
    stream: str = Field(min_length=1)
    n: PositiveInt
    wall_ms: int
    nano: int
    client_id: str | None
    group_id: str | None
    group_instance_id: str | None


class StartLine(_Line):
    event: Literal["start"]
    auto_commit: bool
    kafka_clients: str | None
    pid: int


class PartitionOffsets(_Strict):
    topic: str = Field(min_length=1)
    partition: int = Field(ge=0)
    offsets: tuple[int, ...]


class ConsumedLine(_Line):
    event: Literal["consumed"]
    partitions: tuple[PartitionOffsets, ...]


class CommittedOffset(_Strict):
    topic: str = Field(min_length=1)
    partition: int = Field(ge=0)
    offset: int = Field(ge=0)


class CommitLine(_Line):
    event: Literal["commit"]
    offsets: tuple[CommittedOffset, ...]


class CloseLine(_Line):
    event: Literal["close"]


InterceptorLine = Annotated[StartLine | ConsumedLine | CommitLine | CloseLine, Field(discriminator="event")]
_LINE: TypeAdapter[StartLine | ConsumedLine | CommitLine | CloseLine] = TypeAdapter(InterceptorLine)


class TornLine(UsageError):
    """A line that is not JSON at all: the rest of it was never written (its process was killed)."""


def parse_line(raw: str | bytes, where: str) -> StartLine | ConsumedLine | CommitLine | CloseLine:
    """One interceptor line; JSON that is not one is a UsageError naming ``where``, a line that is not JSON
    a :class:`TornLine`."""
    try:
        return _LINE.validate_json(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        if first["type"] == "json_invalid":
            raise TornLine(f"{where}: a torn line (not JSON)") from None
        loc = ".".join(str(p) for p in first["loc"]) or "line"
        raise UsageError(f"{where}: not a kafka-chaos interceptor line ({loc}: {first['msg']})") from None


@dataclass(frozen=True, slots=True)
class Stamp:
    """When a line's callback ran, on the history's clocks."""

    mono_ns: int
    ts: float


@dataclass
class _Stream:
    """One interceptor instance (one consumer), as read so far."""

    start: StartLine | None
    group: str | None
    auto: bool
    #: ``nano`` is CLOCK_MONOTONIC (checked against the start line), else wall_ms is mapped
    nano_trusted: bool
    last_n: int
    last: Stamp | None = None
    closed: bool = False
    #: when the consumer was configured (its start line), or the first line seen of a stream without one
    start_stamp: Stamp | None = None
    #: per partition: (highest offset returned so far, when first returned) each time the highest rose;
    #: both columns increase, so the first poll that returned an offset >= x is a bisection away
    high: dict[tuple[str, int], list[tuple[int, Stamp]]] = field(default_factory=dict)


@dataclass
class Translator:
    """Interceptor lines -> ``consumed`` / ``commit`` (/ ``error`` for lost lines) events through ``events``.

    Feed complete lines in file order (:meth:`feed`), then :meth:`finish`. Lines of several streams may
    interleave (consumers made one after another, or several processes sharing a file).
    """

    events: EventWriter
    #: raise a commit's "sent" lower bound to the polls that returned what it commits (see module docstring)
    commits_follow_polls: bool = True
    #: JVM wall ms -> CLOCK_MONOTONIC ns, for streams whose ``nano`` is not CLOCK_MONOTONIC
    wall_clock: Callable[[int], int] | None = None
    #: CLOCK_REALTIME - CLOCK_MONOTONIC of this process, ns (a parameter so tests can fix it)
    clock_offset_ns: int | None = None
    #: CLOCK_MONOTONIC now, ns: a stamp is never later than when its line was read
    now_ns: Callable[[], int] = time.monotonic_ns
    #: what the history should know about the evidence (streams without a start or a close, skipped lines)
    notes: list[str] = field(default_factory=list)
    lines: int = 0
    streams: dict[str, _Stream] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.clock_offset_ns is None:
            self.clock_offset_ns = time.time_ns() - time.monotonic_ns()
        if self.wall_clock is None:
            self.wall_clock = jvm_clock()

    # ------------------------------------------------------------------ input
    def feed(self, raw: str | bytes, where: str = "interceptor line") -> None:
        if not raw.strip():
            return
        try:
            line = parse_line(raw, where)
        except TornLine:
            # a process killed mid-line; the next one to open the file ended the line (endTornLine)
            self.notes.append(f"{where}: torn line left out (a process was killed while writing it)")
            return
        self.lines += 1
        stream = self._stream(line)
        at = self._stamp(stream, line)
        if line.n != stream.last_n + 1 and stream.last_n > 0:
            self._gap(stream, line, at)
        stream.last_n = line.n
        stream.last = at
        if stream.start_stamp is None:
            # the start line; or, when it was lost, the first line seen: the best bound before a commit
            stream.start_stamp = at
        if type(line) is ConsumedLine:
            self._consumed(stream, line, at)
        elif type(line) is CommitLine:
            self._commit(stream, line, at)
        elif type(line) is CloseLine:
            stream.closed = True

    def finish(self) -> None:
        for name, s in self.streams.items():
            if not s.closed:
                self.notes.append(f"interceptor stream {name} ({s.start.client_id if s.start else '?'}) has no close "
                                  "line: the consumer was not closed (killed, or still running)")

    # ------------------------------------------------------------------ streams and clocks
    def _stream(self, line: StartLine | ConsumedLine | CommitLine | CloseLine) -> _Stream:
        s = self.streams.get(line.stream)
        if s is not None:
            if type(line) is StartLine:
                raise UsageError(f"interceptor stream {line.stream} started twice: one events file per process run")
            return s
        if type(line) is StartLine:
            if line.group_id is not None:
                # the same process: two consumers at once (a killed process's stream never closes, and its
                # replacement may append to the same file: another pid)
                for name, other in self.streams.items():
                    if (not other.closed and other.group == line.group_id and other.start is not None
                            and other.start.pid == line.pid):
                        raise UsageError(f"two consumers of group {line.group_id} ({name}, {line.stream}) write one events "
                                         f"file: give each consumer its own {PATH_CONFIG}")
            assert self.clock_offset_ns is not None
            trusted = abs((line.wall_ms * 1_000_000 - line.nano) - self.clock_offset_ns) <= CLOCK_AGREEMENT_NS
            if not trusted:
                self.notes.append(f"interceptor stream {line.stream}: System.nanoTime() is not this machine's "
                                  "CLOCK_MONOTONIC; events are stamped from wall_ms (1 ms resolution)")
            s = _Stream(start=line, group=line.group_id, auto=line.auto_commit, nano_trusted=trusted, last_n=0)
            if line.group_id is None:
                self.notes.append(f"interceptor stream {line.stream}: consumer without group.id; its lines are not events")
        else:
            # the file began inside a stream (its start line was not written): wall_ms stamps, no commit bound
            self.notes.append(f"interceptor stream {line.stream}: no start line; events stamped from wall_ms")
            s = _Stream(start=None, group=line.group_id, auto=True, nano_trusted=False, last_n=line.n - 1)
        self.streams[line.stream] = s
        return s

    def _stamp(self, stream: _Stream, line: StartLine | ConsumedLine | CommitLine | CloseLine) -> Stamp:
        if stream.nano_trusted:
            ns = line.nano
        else:
            assert self.wall_clock is not None
            ns = self.wall_clock(line.wall_ms)
        ns = min(ns, self.now_ns())  # made before it was read
        if stream.last is not None and ns < stream.last.mono_ns:
            ns = stream.last.mono_ns  # one stream's lines are written in callback order (the interceptor's lock)
        return Stamp(ns, line.wall_ms / 1000)

    # ------------------------------------------------------------------ events
    def _gap(self, stream: _Stream, line: StartLine | ConsumedLine | CommitLine | CloseLine, at: Stamp) -> None:
        missing = f"{stream.last_n + 1}" if line.n == stream.last_n + 2 else f"{stream.last_n + 1}..{line.n - 1}"
        if line.n <= stream.last_n:
            raise UsageError(f"interceptor stream {line.stream}: line {line.n} after line {stream.last_n}: "
                             "the file is not in the order it was written")
        self.notes.append(f"interceptor stream {line.stream}: lines {missing} missing")
        before = stream.last or at
        self.events.emit(Kind.ERROR, mono_ns=before.mono_ns, ts=before.ts,
                         ts_uncertain_ns=(at.mono_ns - before.mono_ns) or None,
                         message=f"kafka-chaos interceptor lines {missing} of stream {line.stream} were not written: "
                                 "consumed/commit evidence is incomplete in that interval",
                         error_code=None, error_name=None, fatal=False)

    def _consumed(self, stream: _Stream, line: ConsumedLine, at: Stamp) -> None:
        if stream.group is None:
            return
        for p in line.partitions:
            if not p.offsets:
                continue
            tp = (p.topic, p.partition)
            top = max(p.offsets)
            high = stream.high.setdefault(tp, [])
            if not high or top > high[-1][0]:
                high.append((top, at))
            self.events.emit(Kind.CONSUMED, mono_ns=at.mono_ns, ts=at.ts, group=stream.group, topic=p.topic,
                             partition=p.partition, offsets=list(p.offsets), generation=None, member_id=None)

    def _sent_after(self, stream: _Stream, line: CommitLine, answered: Stamp) -> Stamp:
        """The latest moment known to precede the commit's sending (module docstring)."""
        floor = stream.start_stamp
        if self.commits_follow_polls:
            for o in line.offsets:
                polled = _first_at_or_beyond(stream.high.get((o.topic, o.partition), []), o.offset - 1)
                if polled is not None and (floor is None or polled.mono_ns > floor.mono_ns):
                    floor = polled
        if floor is None or floor.mono_ns > answered.mono_ns:
            return answered
        return floor

    def _commit(self, stream: _Stream, line: CommitLine, at: Stamp) -> None:
        if stream.group is None or not line.offsets:
            return  # nothing was sent (AsyncKafkaConsumer.close calls onCommit with no offsets, 4.x)
        sent = self._sent_after(stream, line, at)
        uncertain = at.mono_ns - sent.mono_ns
        self.events.emit(Kind.COMMIT, mono_ns=sent.mono_ns, ts=sent.ts, group=stream.group,
                         offsets=[[o.topic, o.partition, o.offset] for o in line.offsets],
                         generation=None, member_id=None, outcome=Outcome.OK.value, error_code=None, error_name=None,
                         auto=stream.auto, answered_ns=at.mono_ns, ts_uncertain_ns=uncertain or None)


def _first_at_or_beyond(high: list[tuple[int, Stamp]], offset: int) -> Stamp | None:
    """When a poll first returned an offset >= ``offset`` (``high`` ascends in both columns); None if never."""
    lo, hi = 0, len(high)
    while lo < hi:
        mid = (lo + hi) // 2
        if high[mid][0] >= offset:
            hi = mid
        else:
            lo = mid + 1
    return high[lo][1] if lo < len(high) else None


def complete_lines(path: Path) -> Iterator[tuple[int, bytes]]:
    """(line number, line) of every complete line; a torn last line (the JVM killed mid-write) is left out."""
    data = path.read_bytes()
    cut = data.rfind(b"\n") + 1
    yield from enumerate(data[:cut].splitlines(), 1)


def translate_file(path: str | os.PathLike[str], events: EventWriter, *, commits_follow_polls: bool = True) -> Translator:
    """Translate a whole interceptor file into ``events``; the translator (notes, counts) is returned."""
    p = Path(path)
    if not p.is_file():
        raise UsageError(f"{p}: no interceptor events file: was the consumer started with {PATH_CONFIG} or {PATH_ENV}?")
    t = Translator(events, commits_follow_polls=commits_follow_polls)
    for i, raw in complete_lines(p):
        t.feed(raw, f"{p}:{i}")
    if not p.read_bytes().endswith(b"\n") and p.stat().st_size:
        t.notes.append(f"{p}: torn last line left out (the process was killed while writing it)")
    t.finish()
    return t
