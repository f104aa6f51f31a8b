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

A library that prints its log itself from its own threads (librdkafka without a ``logger``) is
captured from the process's file descriptor 2 (:meth:`ClientLog.capture_stderr`): its lines arrive
whatever the member's own thread is doing, blocked in a call or not.
"""

from __future__ import annotations

import fcntl
import logging
import os
import sys
import threading
import time
from collections.abc import Callable
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
        #: while :meth:`capture_stderr` holds fd 2: the original stderr (dup'ed) and the thread draining the pipe
        self._saved_stderr: int | None = None
        self._drainer: threading.Thread | None = None

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

    def capture_stderr(self, translate: Callable[[str], str]) -> None:
        """From now on, what anything in this process writes to file descriptor 2 becomes lines of this log,
        each passed through ``translate``; Python's own ``sys.stderr`` keeps the original stderr (the worker's
        output file). Idempotent; :meth:`close` gives fd 2 back.

        Why: librdkafka without a ``logger`` prints its log lines itself, from the thread that logs, with its
        own time; through confluent-kafka's ``logger`` they wait on a queue served by ``poll``, and a member
        blocked in ``commit()`` records nothing of what librdkafka does meanwhile (docs/known-gaps.md).
        A pipe, drained by a daemon thread, rather than fd 2 on the file itself: the log counts its lines
        for ``log_ref`` and stays capped. The pipe is enlarged (``F_SETPIPE_SZ``, 1 MiB where allowed), so a
        drainer held back by a busy interpreter does not stall a librdkafka thread on a full pipe.
        """
        if self._saved_stderr is not None:
            return
        sys.stderr.flush()
        saved = os.dup(2)
        sys.stderr = open(saved, "w", encoding="utf-8", errors="backslashreplace", buffering=1)  # noqa: SIM115
        read, write = os.pipe()
        try:
            fcntl.fcntl(write, fcntl.F_SETPIPE_SZ, 1 << 20)
        except OSError:  # above /proc/sys/fs/pipe-max-size for an unprivileged process: the default 64 KiB
            pass
        os.dup2(write, 2)
        os.close(write)
        self._saved_stderr = saved
        self._drainer = threading.Thread(target=self._drain, args=(read, translate), daemon=True,
                                         name="client-log-stderr")
        self._drainer.start()

    def _drain(self, fd: int, translate: Callable[[str], str]) -> None:
        with open(fd, "rb") as pipe:  # until every write end is closed (close() gives fd 2 back)
            for raw in pipe:
                line = raw.decode("utf-8", errors="replace").rstrip("\n")
                try:
                    self.write(translate(line))
                except Exception:  # noqa: BLE001 - a line it cannot parse is kept as printed
                    self.write(line)

    def handler(self) -> logging.Handler:
        """A ``logging`` handler writing here, one line per record with its wall time (UTC, ms)."""
        return _Handler(self)

    def close(self) -> None:
        if self._saved_stderr is not None:
            sys.stderr.flush()
            os.dup2(self._saved_stderr, 2)  # closes the pipe's last write end: the drainer reads to its end
            self._saved_stderr = None
            if self._drainer is not None:
                self._drainer.join(timeout=5.0)
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
