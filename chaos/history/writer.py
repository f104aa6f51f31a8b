"""Writing events: one append-only file per process.

Each process (worker, observer, nemesis, runner) owns ``RUN/events/<source>.jsonl``
and appends one line per event with a single ``write`` on an unbuffered
``O_APPEND`` descriptor, so a killed process loses at most the event it was
writing (the torn last line the readers tolerate) and never corrupts earlier
lines. ``seq`` here is local to the file (1, 2, ...); :func:`chaos.history.merge.merge_run`
renumbers events run-wide.

The runner writes ``member_stop`` for a member it killed by opening the
member's own file with the member's source name after the process is gone;
the writer then continues that file's local ``seq`` and first moves a torn
tail aside (to ``<file>.torn``) so that no line in the middle is malformed.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any

import orjson

from chaos.errors import UsageError
from chaos.history.event import EVENT_CLASS, Event, Kind, SchemaError, from_dict, to_json


class EventWriter:
    """Appends events of one ``source`` to ``path``; thread-safe (client callbacks)."""

    def __init__(self, path: str | os.PathLike[str], source: str) -> None:
        if not source or "/" in source:
            raise UsageError(f"event source {source!r}: use a plain name such as consumer-2")
        self.path = Path(path)
        self.source = source
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._seq = self._resume()
        self._lock = threading.Lock()
        self._fd: int | None = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    @classmethod
    def for_run(cls, run_dir: str | os.PathLike[str], source: str) -> EventWriter:
        """The writer of ``RUN/events/<source>.jsonl``."""
        return cls(Path(run_dir) / "events" / f"{source}.jsonl", source)

    def _resume(self) -> int:
        """Last local seq in an existing file; a torn tail is moved to ``.torn``."""
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return 0
        if data and not data.endswith(b"\n"):
            cut = data.rfind(b"\n") + 1
            with open(self.path.with_name(self.path.name + ".torn"), "ab") as torn:
                torn.write(data[cut:] + b"\n")
            with open(self.path, "r+b") as f:
                f.truncate(cut)
            data = data[:cut]
        lines = data.rstrip(b"\n").split(b"\n") if data else []
        if not lines:
            return 0
        try:
            return int(orjson.loads(lines[-1])["seq"])
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
            raise UsageError(f"{self.path}: last line is not an event; move the file aside") from None

    def emit(self, kind: Kind | type[Event], *, mono_ns: int | None = None, ts: float | None = None,
             **fields: Any) -> Event:
        """Validate, number and append one event; returns it.

        ``fields`` are the kind-specific fields (e.g. ``topic=``, ``partition=``);
        ``seq``, ``source``, ``ts`` and ``mono_ns`` are filled in here.
        """
        kind = kind if isinstance(kind, Kind) else kind.kind
        with self._lock:
            if self._fd is None:
                raise UsageError(f"{self.path}: writer is closed")
            seq = self._seq + 1
            raw = {"seq": seq,
                   "ts": time.time() if ts is None else ts,
                   "mono_ns": time.monotonic_ns() if mono_ns is None else mono_ns,
                   "source": self.source, "kind": kind.value, **fields}
            try:
                # Fast path: fields already in JSON types (lists, str, int) validate as they are
                # and are written as given.
                event = from_dict(raw)
                line = orjson.dumps(raw)
            except SchemaError:
                try:
                    # Round-trip through JSON types so tuples/enums validate as they will be read.
                    event = from_dict(orjson.loads(orjson.dumps(raw)))
                except SchemaError as exc:
                    raise ValueError(f"{EVENT_CLASS[kind].__name__}: {exc}") from None
                line = to_json(event)
            os.write(self._fd, line + b"\n")
            self._seq = seq
            return event

    @property
    def closed(self) -> bool:
        return self._fd is None

    def close(self, *, fsync: bool = True) -> None:
        with self._lock:
            if self._fd is not None:
                if fsync:
                    os.fsync(self._fd)
                os.close(self._fd)
                self._fd = None

    def __enter__(self) -> EventWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
