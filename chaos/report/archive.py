"""Finding run directories in a results archive, and their small per-run files.

Two layouts are understood (and may be mixed in one archive):

- ``RESULTS/<experiment>/run-<k>-seed-<s>/`` (``chaos run``): the night is the
  UTC date of the run's first event;
- ``RESULTS/<YYYY-MM-DD>/<experiment>/run-<k>-seed-<s>/`` (nightly mode): the
  night is the date directory.

A run directory is any directory holding ``history.jsonl``. Its header line,
``checks.json`` (the per-run checkers' verdict), ``outcome.json`` and
``faults.json`` are small and read here with Python; the events themselves are
parsed by Spark (:mod:`chaos.report.tables`).
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from chaos.checkers.judge import CHECKS_FILE
from chaos.errors import UsageError
from chaos.history import HISTORY_FILE
from chaos.history.reader import parse_header_line

OUTCOME_FILE = "outcome.json"
FAULTS_FILE = "faults.json"
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")


@dataclass(frozen=True, slots=True)
class RunDir:
    """One run directory: where it is and what the layout says about it.

    ``run`` (``<date>/<experiment>/<run dir name>``) is the key every table joins on:
    header run ids are not unique across an archive (simulated runs reuse them).
    """

    path: Path
    date: str
    experiment: str
    name: str
    date_from_layout: bool

    @property
    def run(self) -> str:
        return f"{self.date}/{self.experiment}/{self.name}"

    @property
    def history(self) -> Path:
        return self.path / HISTORY_FILE


@dataclass(frozen=True, slots=True)
class RunFiles:
    """The small files of one run, parsed."""

    run_dir: RunDir
    header: Mapping[str, Any]
    first_ts: float | None
    checks: Mapping[str, Any] | None
    outcome: Mapping[str, Any] | None
    faults: tuple[Mapping[str, Any], ...]
    #: ``mono_ns`` of the first event (the run's smallest: a history is in ``mono_ns`` order), None if unreadable
    first_ns: int | None = None
    #: the start of a torn last line (see :func:`_torn_tail`), which the report drops as the reader does
    torn_tail: str | None = None


def _history_dirs(results: Path) -> Iterator[Path]:
    for path in sorted(results.rglob(HISTORY_FILE)):
        if path.is_file() and path.parent.name != "events":
            yield path.parent


def _read_head(history: Path) -> tuple[Mapping[str, Any], float | None, int | None]:
    """The header object and the first event's ``ts`` and ``mono_ns`` (None for a history without events)."""
    with history.open("rb") as f:
        first = f.readline()
        second = f.readline()
    parse_header_line(first, f"{history}:1")
    header = orjson.loads(first)
    ts, ns = None, None
    if second.strip():
        try:
            first = orjson.loads(second)
            ts, ns = float(first["ts"]), int(first["mono_ns"])
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
            ts, ns = None, None  # judged later by Spark, which names the line
    return header, ts, ns


#: the prefix of a torn line that the report matches it by (ASCII: Spark and Python decode it alike)
TORN_PREFIX_CHARS = 64


def _torn_tail(history: Path) -> str | None:
    """The start of the file's torn last line, or None.

    The rule of :func:`chaos.history.read_history`: a last line without a newline that is not
    valid JSON is the in-flight event of a killed writer, dropped with a note. Only the last
    64 KiB are read (an event line is far shorter).
    """
    size = history.stat().st_size
    with history.open("rb") as f:
        f.seek(max(size - (64 << 10), 0))
        tail = f.read()
    if not tail or tail.endswith(b"\n"):
        return None
    last = tail.rsplit(b"\n", 1)[-1]
    try:
        orjson.loads(last)
        return None
    except orjson.JSONDecodeError:
        pass
    text = last.decode("utf-8", errors="replace")[:TORN_PREFIX_CHARS]
    ascii_end = next((i for i, c in enumerate(text) if not c.isascii()), len(text))
    return text[:ascii_end]


def _night(ts: float | None) -> str:
    if ts is None:
        return "unknown"
    return dt.datetime.fromtimestamp(ts, dt.UTC).date().isoformat()


def _experiment_name(header: Mapping[str, Any], fallback: str) -> str:
    exp = header.get("experiment") or {}
    for key in ("name", "fixture"):
        v = exp.get(key) if isinstance(exp, dict) else None
        if isinstance(v, str) and v:
            return v
    return fallback


def _load_json(path: Path) -> Any:
    try:
        return orjson.loads(path.read_bytes())
    except FileNotFoundError:
        return None
    except orjson.JSONDecodeError as exc:
        raise UsageError(f"{path}: not valid JSON ({exc.msg}); re-run `chaos check {path.parent}` "
                         "or delete the file") from None


def discover(results: Path) -> list[RunFiles]:
    """Every run directory under ``results`` with its small files; bad input raises ``UsageError``."""
    if not results.exists():
        raise UsageError(f"{results}: no such results directory")
    if not results.is_dir():
        raise UsageError(f"{results}: not a directory; give the directory that holds the run directories")
    out: list[RunFiles] = []
    for path in _history_dirs(results):
        rel = path.relative_to(results).parts
        header, first_ts, first_ns = _read_head(path / HISTORY_FILE)
        date = next((p for p in rel[:-1] if _DATE.fullmatch(p)), None)
        from_layout = date is not None
        if date is None:
            date = _night(first_ts)
        if len(rel) >= 2 and not _DATE.fullmatch(rel[-2]):
            experiment = rel[-2]
        else:
            experiment = _experiment_name(header, results.name if not rel else "unnamed")
        name = rel[-1] if rel else path.name
        run_dir = RunDir(path, date, experiment, name, from_layout)
        checks = _load_json(path / CHECKS_FILE)
        outcome = _load_json(path / OUTCOME_FILE)
        faults = _load_json(path / FAULTS_FILE) or []
        if not isinstance(faults, list):
            raise UsageError(f"{path / FAULTS_FILE}: expected a list of fault records")
        out.append(RunFiles(run_dir, header, first_ts, checks, outcome, tuple(faults), first_ns,
                            _torn_tail(path / HISTORY_FILE)))
    if not out:
        raise UsageError(f"{results}: no runs found (no */history.jsonl below it); point at a results directory "
                         "written by `chaos run`, or run `chaos check RUN_DIR` on runs that only have events/")
    keys: dict[str, Path] = {}
    for rf in out:
        prev = keys.setdefault(rf.run_dir.run, rf.run_dir.path)
        if prev != rf.run_dir.path:
            raise UsageError(f"{prev} and {rf.run_dir.path} map to the same run key {rf.run_dir.run}; "
                             "give each run of a night and experiment its own directory name")
    return out
