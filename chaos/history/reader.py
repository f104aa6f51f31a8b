"""Reading histories: the merged ``history.jsonl`` and live per-source files.

A process that is killed mid-write leaves a torn last line (no trailing
newline, not parseable). That line is the in-flight event the process lost
(docs/architecture.md, "The history"): the reader drops it and records a note. A malformed line
anywhere else means the file was damaged or hand-edited, and it is rejected
with ``UsageError("history.jsonl:LINE: what is wrong")``.
"""

from __future__ import annotations

import gc
import operator
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import orjson

from chaos.errors import UsageError
from chaos.history.event import (
    Event,
    Header,
    SchemaError,
    decode_events,
    from_dict,
    header_from_dict,
    header_to_json,
    to_json,
)


@dataclass(frozen=True, slots=True, eq=False, weakref_slot=True)
class History:
    """A run's header and its events in ``seq`` order (which is ``mono_ns`` order).

    Identity-hashed (``eq=False``) so derived indexes can be cached per history.
    """

    header: Header
    events: tuple[Event, ...]
    notes: tuple[str, ...] = field(default=())

    def event(self, seq: int) -> Event:
        """The event with this ``seq`` (histories are numbered 1..N after a merge)."""
        events = self.events
        if 0 < seq <= len(events) and events[seq - 1].seq == seq:
            return events[seq - 1]
        for e in events:
            if e.seq == seq:
                return e
        raise KeyError(seq)


def parse_line(raw: bytes, where: str) -> Event:
    """Parse one event line; ``where`` (``file:LINE``) prefixes the error."""
    try:
        obj = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise UsageError(f"{where}: not valid JSON ({exc.msg})") from None
    try:
        return from_dict(obj)
    except SchemaError as exc:
        raise UsageError(f"{where}: {exc}") from None


def parse_header_line(head: bytes, where: str) -> Header:
    """The run header from a history's first line, or :class:`UsageError` saying what is wrong with it.

    The one judge of header lines (an unknown ``schema_version`` above all): ``chaos check`` (through
    :func:`read_history`), replay and shrink (before any cluster starts) and the report's archive scan
    refuse a history alike. ``where`` prefixes the message (``history.jsonl:1``, or a path).
    """
    if not head.strip():
        raise UsageError(f"{where}: missing header line (the first line must be the run header)")
    try:
        return header_from_dict(orjson.loads(head))
    except orjson.JSONDecodeError as exc:
        raise UsageError(f"{where}: header is not valid JSON ({exc.msg})") from None
    except SchemaError as exc:
        raise UsageError(f"{where}: {exc}") from None


def read_history(path: str | os.PathLike[str]) -> History:
    """Read and validate a merged history file.

    Requires a header line first, then events with strictly increasing ``seq``
    and non-decreasing ``mono_ns`` (checkers rely on file order being time
    order). A torn last line is dropped with a note; anything else malformed
    raises :class:`UsageError` naming the line.
    """
    p = Path(path)
    name = p.name
    try:
        data = p.read_bytes()
    except FileNotFoundError:
        raise UsageError(f"{p}: no such history file") from None
    except IsADirectoryError:
        raise UsageError(f"{p}: is a directory, expected a history.jsonl file") from None
    notes: list[str] = []
    torn_tail = not data.endswith(b"\n")
    first_end = data.find(b"\n")
    header = parse_header_line(data if first_end < 0 else data[:first_end], f"{name}:1")
    body = len(data) if first_end < 0 else first_end + 1
    # complete lines end at the last newline; after it comes a torn last line (no newline), if any
    complete = max(data.rfind(b"\n") + 1, body) if torn_tail else len(data)
    events: list[Event] = []
    # Parsing allocates millions of acyclic objects; the cyclic GC would re-scan them all
    # repeatedly (quadratic on large histories), so it is paused while parsing.
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        # The typed fast decoder reads a chunk of whole lines at a time (bounded extra memory); a chunk it
        # refuses, or whose order is wrong, is read line by line by the reference path, which raises the
        # first bad line's error. A torn last line is always left to the reference path (dropped with a note).
        pos, line_no = body, 2
        while pos < complete:
            end = data.find(b"\n", min(pos + _CHUNK_BYTES, complete - 1)) + 1
            lines = data.count(b"\n", pos, end)
            got = decode_events(data, pos, end, lines)
            if got is not None and _in_order(got, events):
                events.extend(got)
            else:
                _parse_events(name, data[pos:end].split(b"\n")[:-1], line_no, False, notes, events)
            line_no += lines
            pos = end
        if complete < len(data):
            _parse_events(name, [data[complete:]], line_no, True, notes, events)
    finally:
        if was_enabled:
            # The millions of objects allocated while the collector was off would all be traced by the
            # first young collection after it is back on (~1 s per 10^6 events, measured) and again as they
            # age. Freezing then unfreezing moves every tracked object into the oldest generation without a
            # scan (docs.python.org/3/library/gc.html#gc.freeze): a cycle is still collected, at the next
            # full collection.
            gc.freeze()
            gc.unfreeze()
            gc.enable()
    return History(header=header, events=tuple(events), notes=tuple(header.notes) + tuple(notes))


#: bytes per fast-decoded chunk (~250k events): bounds the intermediate wire records to ~100 MB; much
#: smaller chunks are slower (1.5x at 16k lines on 10^6 events), as the allocator hands freed arenas
#: back to the system and faults fresh pages in for every chunk
_CHUNK_BYTES = 1 << 26


_SEQ = operator.attrgetter("seq")
_MONO = operator.attrgetter("mono_ns")


def _in_order(got: list[Event], events: list[Event]) -> bool:
    """``seq`` strictly increases and ``mono_ns`` never decreases, from the last event read through ``got``."""
    seqs = list(map(_SEQ, got))
    monos = list(map(_MONO, got))
    prev_seq, prev_mono = (events[-1].seq, events[-1].mono_ns) if events else (0, -1)
    return seqs[0] > prev_seq and monos[0] >= prev_mono and all(map(operator.lt, seqs, seqs[1:])) \
        and all(map(operator.le, monos, monos[1:]))


def _parse_events(name: str, lines: list[bytes], first_no: int, torn_last: bool, notes: list[str],
                  events: list[Event]) -> None:
    """The reference path: ``lines`` (numbered from ``first_no`` in the file) one by one with orjson +
    :func:`from_dict`, appended to ``events``; the first bad line raises its one-line error. With
    ``torn_last`` the last line is the writer's torn tail: dropped with a note when it is not JSON."""
    append = events.append
    loads = orjson.loads
    last = len(lines) - 1
    prev_seq = events[-1].seq if events else 0
    prev_mono = events[-1].mono_ns if events else -1
    for i, raw in enumerate(lines):
        no = first_no + i
        try:
            obj = loads(raw)
        except orjson.JSONDecodeError as exc:
            if i == last and torn_last:
                notes.append(f"{name}:{no}: dropped a torn last line ({len(raw)} bytes): "
                             "the writer stopped mid-event")
                break
            if not raw.strip():
                raise UsageError(f"{name}:{no}: empty line") from None
            raise UsageError(f"{name}:{no}: not valid JSON ({exc.msg})") from None
        try:
            ev = from_dict(obj)
        except SchemaError as exc:
            raise UsageError(f"{name}:{no}: {exc}") from None
        if ev.seq <= prev_seq:
            raise UsageError(f"{name}:{no}: seq {ev.seq} does not increase (previous {prev_seq})")
        if ev.mono_ns < prev_mono:
            raise UsageError(f"{name}:{no}: mono_ns goes backwards (run `chaos check` on the run "
                             "directory to re-merge events/)")
        prev_seq = ev.seq
        prev_mono = ev.mono_ns
        append(ev)


def write_history(path: str | os.PathLike[str], history: History) -> None:
    """Write a history file atomically (temporary file, fsync, rename)."""
    p = Path(path)
    tmp = p.with_name(p.name + ".tmp")
    with open(tmp, "wb") as f:
        f.write(header_to_json(history.header) + b"\n")
        f.write(b"".join(to_json(e) + b"\n" for e in history.events))
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, p)


class EventTail:
    """Follows one per-source event file as it grows.

    :meth:`poll` returns the complete events appended since the last call; a
    partial last line is kept until its newline arrives. A file that does not
    exist yet reads as empty. Used by state-based fault triggers (docs/architecture.md,
    "Faults: schedule, triggers, evidence") to follow the live stream.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._offset = 0
        self._partial = b""
        self._line = 0

    def poll(self) -> list[Event]:
        try:
            with open(self.path, "rb") as f:
                f.seek(self._offset)
                chunk = f.read()
        except FileNotFoundError:
            return []
        if not chunk:
            return []
        self._offset += len(chunk)
        data = self._partial + chunk
        *complete, self._partial = data.split(b"\n")
        out = []
        for raw in complete:
            self._line += 1
            if raw.strip():
                out.append(parse_line(raw, f"{self.path.name}:{self._line}"))
        return out

    def __iter__(self) -> Iterator[Event]:
        return iter(self.poll())


class EventsDirTail:
    """Follows every ``*.jsonl`` file of a run's ``events/`` directory, new files included.

    Each :meth:`poll` returns the new events of all sources, ordered by
    ``(mono_ns, source, seq)`` within the batch.
    """

    def __init__(self, events_dir: str | os.PathLike[str], pattern: str = "*.jsonl") -> None:
        self.events_dir = Path(events_dir)
        self.pattern = pattern
        self._tails: dict[str, EventTail] = {}

    def poll(self) -> list[Event]:
        if self.events_dir.is_dir():
            for p in sorted(self.events_dir.glob(self.pattern)):
                if p.name not in self._tails:
                    self._tails[p.name] = EventTail(p)
        out: list[Event] = []
        for tail in self._tails.values():
            out.extend(tail.poll())
        out.sort(key=lambda e: (e.mono_ns, e.source, e.seq))
        return out
