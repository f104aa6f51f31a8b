"""Merging per-source event files into the run's ``history.jsonl``.

CLOCK_MONOTONIC is shared by every process on the machine, so sorting by
``(mono_ns, source, local seq)`` orders events across processes; ties between
sources are broken by name so a merge is deterministic. The per-source files
are kept (never lose data); the merged file is written atomically.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import orjson

from chaos.errors import UsageError
from chaos.history.event import SchemaError, from_dict, header_from_dict, header_to_dict

HEADER_FILE = "header.json"
EVENTS_DIR = "events"
HISTORY_FILE = "history.jsonl"


def _read_source(path: Path, notes: list[str]) -> list[dict[str, Any]]:
    data = path.read_bytes()
    if not data:
        return []  # a source that wrote nothing yet
    lines = data.split(b"\n")
    torn = not data.endswith(b"\n")
    if not torn:
        lines.pop()
    out = []
    prev = 0
    for i, raw in enumerate(lines):
        where = f"{path.parent.name}/{path.name}:{i + 1}"
        try:
            obj = orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            if i == len(lines) - 1 and torn:
                notes.append(f"{where}: dropped a torn last line ({len(raw)} bytes): the writer stopped mid-event")
                break
            raise UsageError(f"{where}: not valid JSON ({exc.msg})") from None
        try:
            ev = from_dict(obj)
        except SchemaError as exc:
            raise UsageError(f"{where}: {exc}") from None
        if ev.seq <= prev:
            raise UsageError(f"{where}: local seq {ev.seq} does not increase (previous {prev})")
        prev = ev.seq
        out.append(obj)
    return out


def merge_run(run_dir: str | os.PathLike[str]) -> Path:
    """Merge ``RUN/header.json`` and ``RUN/events/*.jsonl`` into ``RUN/history.jsonl``.

    Returns the path written. Events get a run-global ``seq`` 1..N in
    ``(mono_ns, source, local seq)`` order. Torn last lines of per-source
    files are dropped and noted in the header's ``notes``.
    """
    run = Path(run_dir)
    if not run.is_dir():
        raise UsageError(f"{run}: no such run directory")
    header_path = run / HEADER_FILE
    try:
        header_obj = orjson.loads(header_path.read_bytes())
    except FileNotFoundError:
        raise UsageError(f"{header_path}: missing; the runner writes it when the run starts") from None
    except orjson.JSONDecodeError as exc:
        raise UsageError(f"{header_path}: not valid JSON ({exc.msg})") from None
    if isinstance(header_obj, dict):
        header_obj = {"header": True, **header_obj}
    try:
        header = header_from_dict(header_obj)
    except SchemaError as exc:
        raise UsageError(f"{header_path}: {exc}") from None
    events_dir = run / EVENTS_DIR
    if not events_dir.is_dir():
        raise UsageError(f"{events_dir}: missing; nothing to merge")
    notes = list(header.notes)
    keyed: list[tuple[int, str, int, dict[str, Any]]] = []
    for path in sorted(events_dir.glob("*.jsonl")):
        for obj in _read_source(path, notes):
            keyed.append((obj["mono_ns"], obj["source"], obj["seq"], obj))
    keyed.sort(key=lambda k: k[:3])
    out_obj = header_to_dict(header)
    if notes:
        out_obj["notes"] = notes
    target = run / HISTORY_FILE
    tmp = run / (HISTORY_FILE + ".tmp")
    dumps = orjson.dumps
    with open(tmp, "wb") as f:
        f.write(dumps(out_obj) + b"\n")
        chunk: list[bytes] = []
        for n, (_, _, _, obj) in enumerate(keyed, 1):
            obj["seq"] = n
            chunk.append(dumps(obj))
            if len(chunk) >= 10000:
                f.write(b"\n".join(chunk) + b"\n")
                chunk.clear()
        if chunk:
            f.write(b"\n".join(chunk) + b"\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, target)
    return target
