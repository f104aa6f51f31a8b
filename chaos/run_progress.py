"""Progress of a run as it happens, read from the run's own event files.

A run writes ``RUN/events/runner.jsonl`` (one ``phase`` event per phase) and
``RUN/events/nemesis.jsonl`` (``fault_start``, ``fault_end``, and
``fault_verified`` with stage ``fired`` ok=false when a trigger never came) —
see :mod:`chaos.history.writer`. :class:`RunProgress` follows those two files
from a thread of its own and reports each new line, so ``chaos run`` can say
what is happening during the 30-90 s of a run without the runner knowing about
the terminal. Following files (not hooks in the runner) keeps the history the
one source of truth: what is shown is what was recorded.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

import orjson

#: how often the event files are polled (seconds); progress is for a person, not a measurement
POLL_S = 0.5


class RunProgress:
    """Follows a run directory's phase and fault events until :meth:`stop`; calls ``say`` per event.

    The run directory is looked up by ``pattern`` (a glob under ``root``) because a nightly's lies
    under a date directory the caller does not know; it appears once the run starts.
    """

    def __init__(self, root: Path, pattern: str, say: Callable[[str], None], t0: float | None = None) -> None:
        self.root = root
        self.pattern = pattern
        self.say = say
        self.t0 = time.monotonic() if t0 is None else t0
        self._stop = threading.Event()
        self._offsets: dict[str, int] = {}
        self._thread = threading.Thread(target=self._follow, name="run-progress", daemon=True)

    def __enter__(self) -> RunProgress:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)

    def _follow(self) -> None:
        run_dir: Path | None = None
        while True:
            stopping = self._stop.wait(POLL_S)  # one last pass after stop(): the run's last events
            try:
                if run_dir is None:
                    run_dir = next(iter(sorted(self.root.glob(self.pattern))), None)
                    if run_dir is None:
                        if stopping:
                            return
                        continue
                for source in ("runner", "nemesis"):
                    for event in self._new_events(run_dir / "events" / f"{source}.jsonl"):
                        line = describe(event)
                        if line:
                            self.say(f"  {time.monotonic() - self.t0:5.1f}s {line}")
            except OSError:
                pass  # the run directory is being written or removed: try again next poll
            if stopping:
                return

    def _new_events(self, path: Path) -> list[dict]:
        """Complete lines appended to ``path`` since the last call."""
        offset = self._offsets.get(path.name, 0)
        try:
            with path.open("rb") as f:
                f.seek(offset)
                chunk = f.read()
        except FileNotFoundError:
            return []
        end = chunk.rfind(b"\n") + 1  # a half-written last line waits for the next poll
        self._offsets[path.name] = offset + end
        events = []
        for raw in chunk[:end].splitlines():
            try:
                events.append(orjson.loads(raw))
            except orjson.JSONDecodeError:
                continue
        return events


def describe(event: dict) -> str | None:
    """One progress line for a phase or fault event; None for events a person need not see live."""
    kind = event.get("kind")
    if kind == "phase":
        return f"phase {event.get('name')}"
    if kind == "fault_start":
        node = f" {event['node']}" if event.get("node") else ""
        return (f"fault {event.get('fault_id')} {event.get('fault_type')} on {event.get('target_role')}{node} "
                f"({event.get('trigger')})")
    if kind == "fault_end":
        node = f" {event['node']}" if event.get("node") else ""
        return f"fault {event.get('fault_id')} healed{node}"
    if kind == "fault_verified" and event.get("stage") == "fired" and not event.get("ok"):
        return f"fault {event.get('fault_id')} did not fire: {event.get('evidence')}"
    return None
