"""Judging a recorded run directory: the library entry the runner and ``chaos check`` call.

``judge_run`` reads ``RUN/history.jsonl`` (merging ``RUN/events/`` first when the
merged file is missing), runs the checkers and writes ``RUN/checks.json``
beside the history. Bad input raises :class:`chaos.errors.UsageError`.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import orjson

from chaos.checkers import incidents
from chaos.checkers.bounds import CheckerBounds
from chaos.checkers.registry import run_checkers
from chaos.checkers.result import Result, Verdict
from chaos.errors import UsageError
from chaos.history import HISTORY_FILE, History, merge_run, read_history
from chaos.model.checker_name import CheckerName

CHECKS_FILE = "checks.json"


def load_run(run_dir: str | os.PathLike[str]) -> History:
    """The run's history, merging per-source event files if ``history.jsonl`` is missing."""
    run = Path(run_dir)
    if not run.is_dir():
        raise UsageError(f"{run}: no such run directory")
    path = run / HISTORY_FILE
    if not path.exists():
        if not (run / "events").is_dir():
            raise UsageError(f"{run}: neither {HISTORY_FILE} nor events/ found; is this a run directory?")
        merge_run(run)
    return read_history(path)


def judge_run(run_dir: str | os.PathLike[str], names: Iterable[CheckerName | str] | None = None,
              bounds: CheckerBounds | None = None) -> Verdict:
    """Judge one run directory and write ``checks.json``; returns the verdict."""
    history = load_run(run_dir)
    verdict = run_checkers(history, names, bounds)
    write_checks(Path(run_dir) / CHECKS_FILE, history, verdict, bounds or CheckerBounds())
    return verdict


def finding_time(history: History, evidence: tuple[int, ...]) -> float | None:
    """Seconds from the first event to the latest evidence event."""
    if not history.events or not evidence:
        return None
    first = history.events[0].mono_ns
    try:
        return max(history.event(s).mono_ns for s in evidence) / 1e9 - first / 1e9
    except KeyError:
        return None


def result_dict(history: History, r: Result) -> dict[str, Any]:
    return {
        "checker": r.checker.value,
        "valid": r.valid.value,
        "summary": r.summary,
        "metrics": dict(r.metrics),
        "findings": [{"description": f.description, "violation": f.violation, "evidence": list(f.evidence),
                      "at_s": finding_time(history, f.evidence)} for f in r.findings],
    }


def verdict_dict(history: History, verdict: Verdict, bounds: CheckerBounds,
                 run_dir: str | os.PathLike[str] | None = None) -> dict[str, Any]:
    """The JSON form of a verdict: what happened to the run (``incidents``, :mod:`chaos.checkers.incidents`)
    comes before the invariants (``results``). With ``run_dir`` incidents name the workers' traceback files."""
    found = incidents.collect(history, incidents.traceback_files(run_dir) if run_dir is not None else None)
    return {
        "run_id": history.header.run_id,
        "valid": verdict.valid.value,
        "judged_at": time.time(),
        "events": len(history.events),
        "history_notes": list(history.notes),
        "bounds": dataclasses.asdict(bounds),
        "incidents": [incidents.incident_dict(i) for i in found],
        "results": [result_dict(history, r) for r in verdict.results],
    }


def write_checks(path: Path, history: History, verdict: Verdict, bounds: CheckerBounds) -> None:
    """Write the verdict to ``path`` (in the run directory: incidents name its traceback files)."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(orjson.dumps(verdict_dict(history, verdict, bounds, path.parent), option=orjson.OPT_INDENT_2))
    os.replace(tmp, path)
