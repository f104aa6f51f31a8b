"""A member's client log kept in the run directory: ``RUN/workers/<member>.client.log``.

Every client library logs its own view of the group protocol — librdkafka's ``cgrp``/``consumer``
debug contexts, the Java consumer's coordinator and membership loggers, kafka-python's
``kafka.coordinator`` loggers — at a level that shows joins, syncs, heartbeat errors and resets
(the client-side evidence of why a member reset and rejoined under a new id). The worker writes
those lines here itself (the Java client's arrive on the JVM's stdout, see
:mod:`chaos.workload.clients.java`), so it knows each line's number and an ``error`` event can name
the line it is told in (``log_ref``, :class:`chaos.history.ErrorEvent`).

Bounded: the file is *capped*, not rotated, at :data:`MAX_BYTES` — a rotated file would move the
lines that ``log_ref`` values point at. The first lines (setup, the first joins) are the ones a
run's evidence most often needs; past the cap one marker line says how much was dropped.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from pathlib import Path

#: the cap of one member's client log (bytes); a member at librdkafka ``cgrp`` debug writes ~50 KB/min
MAX_BYTES = 16 * 1024 * 1024


def client_log_path(run_dir: str | os.PathLike[str], name: str) -> Path:
    """Where member ``name``'s client log is kept."""
    return Path(run_dir) / "workers" / f"{name}.client.log"


class ClientLog:
    """Appends lines to one member's client log and counts them; thread-safe (client threads log too)."""

    def __init__(self, run_dir: str | os.PathLike[str], name: str, max_bytes: int = MAX_BYTES) -> None:
        self.path = client_log_path(run_dir, name)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        #: the file name relative to the run directory, as ``log_ref`` values name it
        self.relative = f"workers/{self.path.name}"
        self.max_bytes = max_bytes
        self.lines = 0
        self.size = 0
        self.dropped = 0
        self._lock = threading.Lock()
        self._file = open(self.path, "a", encoding="utf-8", errors="replace", buffering=1)  # noqa: SIM115

    def write(self, line: str) -> int | None:
        """Append one line; its 1-based line number, or None once the cap is reached (the line is dropped)."""
        text = line.rstrip("\r\n").replace("\n", " | ") + "\n"
        with self._lock:
            if self._file.closed:
                return None
            if self.size + len(text) > self.max_bytes:
                if not self.dropped:
                    self._file.write(f"[kafka-chaos: client log capped at {self.max_bytes} bytes; "
                                     "later lines dropped]\n")
                    self.lines += 1
                self.dropped += 1
                return None
            self._file.write(text)
            self.size += len(text)
            self.lines += 1
            return self.lines

    def ref(self, line: int | None = None) -> str | None:
        """``workers/<file>:<line>`` for ``line`` (default: the last line written); None before any line."""
        n = self.lines if line is None else line
        return f"{self.relative}:{n}" if n else None

    def handler(self) -> logging.Handler:
        """A ``logging`` handler writing here, one line per record with its wall time (UTC, ms)."""
        return _Handler(self)

    def close(self) -> None:
        with self._lock:
            if not self._file.closed:
                if self.dropped:
                    self._file.write(f"[kafka-chaos: {self.dropped} line(s) dropped past the cap]\n")
                self._file.close()


class _Handler(logging.Handler):
    def __init__(self, log: ClientLog) -> None:
        super().__init__(logging.DEBUG)
        self.log = log
        self.setFormatter(_UtcFormatter("%(asctime)s %(levelname)s %(name)s %(message)s"))

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self.log.write(self.format(record))
        except Exception:  # noqa: BLE001 - logging must never take the member down
            self.handleError(record)


class _UtcFormatter(logging.Formatter):
    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:  # noqa: N802 - logging API
        return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}+0000"
