"""Bounded waiting in integration tests that run processes of their own."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, Protocol

import pytest


class Watched(Protocol):
    """A process a test waits on: if it exits meanwhile, the wait fails at once with its output's tail."""

    proc: subprocess.Popen
    log_path: Path


def wait_for(what: str, fn: Callable[[], Any], timeout: float = 60, watched: Iterable[Watched] = (),
             name: Callable[[Any], str] = lambda w: getattr(w, "name", "a process")) -> Any:
    """``fn()``'s first truthy value, polled every 0.3 s for at most ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = fn()
        if value:
            return value
        for w in watched:
            if w.proc.poll() is not None:
                pytest.fail(f"{name(w)} exited {w.proc.returncode} while waiting for {what}: "
                            f"{w.log_path.read_text()[-3000:]}")
        time.sleep(0.3)
    pytest.fail(f"timed out waiting for {what}")


def process_gone(pid: int, timeout: float = 5.0, poll_s: float = 0.05) -> bool:
    """Has the process ended (gone, or a zombie its parent has not reaped yet) within ``timeout`` s?"""
    import psutil

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        time.sleep(poll_s)
    return False


def live_events(run_dir: Path, member: str, kind: str) -> list[dict]:
    """``member``'s events of ``kind`` recorded so far in a running run (a line being written is skipped)."""
    import orjson

    path = run_dir / "events" / f"{member}.jsonl"
    if not path.exists():
        return []
    out = []
    for line in path.read_bytes().splitlines():
        try:
            e = orjson.loads(line)
        except orjson.JSONDecodeError:  # a line being written
            continue
        if e.get("kind") == kind:
            out.append(e)
    return out
