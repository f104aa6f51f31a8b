"""Reading histories: the merged ``history.jsonl`` and live per-source files.

A process that is killed mid-write leaves a torn last line (no trailing
newline, not parseable). That line is the in-flight event the process lost
(docs/architecture.md, "The history"): the reader drops it and records a note. A malformed line
anywhere else means the file was damaged or hand-edited, and it is rejected
with ``UsageError("history.jsonl:LINE: what is wrong")``.
"""

from __future__ import annotations

import gc
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
    lines = data.split(b"\n")
    notes: list[str] = []
    torn_tail = not data.endswith(b"\n")
    if not torn_tail:
        lines.pop()  # the empty string after the final newline
    if not lines or not lines[0].strip():
        raise UsageError(f"{name}:1: missing header line (the first line must be the run header)")
    try:
        header = header_from_dict(orjson.loads(lines[0]))
    except orjson.JSONDecodeError as exc:
        raise UsageError(f"{name}:1: header is not valid JSON ({exc.msg})") from None
    except SchemaError as exc:
        raise UsageError(f"{name}:1: {exc}") from None
    events: list[Event] = []
    # Parsing allocates millions of acyclic objects; the cyclic GC would re-scan them all
    # repeatedly (quadratic on large histories), so it is paused while parsing.
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        return _parse_events(name, header, lines, torn_tail, notes, events)
    finally:
        if was_enabled:
            gc.enable()


def _parse_events(name: str, header: Header, lines: list[bytes], torn_tail: bool, notes: list[str],
                  events: list[Event]) -> History:
    append = events.append
    loads = orjson.loads
    last = len(lines) - 1
    prev_seq = 0
    prev_mono = -1
    for i in range(1, len(lines)):
        raw = lines[i]
        try:
            obj = loads(raw)
        except orjson.JSONDecodeError as exc:
            if i == last and torn_tail:
                notes.append(f"{name}:{i + 1}: dropped a torn last line ({len(raw)} bytes): "
                             "the writer stopped mid-event")
                break
            if not raw.strip():
                raise UsageError(f"{name}:{i + 1}: empty line") from None
            raise UsageError(f"{name}:{i + 1}: not valid JSON ({exc.msg})") from None
        try:
            ev = from_dict(obj)
        except SchemaError as exc:
            raise UsageError(f"{name}:{i + 1}: {exc}") from None
        if ev.seq <= prev_seq:
            raise UsageError(f"{name}:{i + 1}: seq {ev.seq} does not increase (previous {prev_seq})")
        if ev.mono_ns < prev_mono:
            raise UsageError(f"{name}:{i + 1}: mono_ns goes backwards (run `chaos check` on the run "
                             "directory to re-merge events/)")
        prev_seq = ev.seq
        prev_mono = ev.mono_ns
        append(ev)
    return History(header=header, events=tuple(events), notes=tuple(header.notes) + tuple(notes))


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
