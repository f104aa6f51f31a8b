"""A member process an integration test starts by itself (not through a run): its events file, its output in a
file, stopped by SIGTERM as a run's teardown stops a member, or killed."""

from __future__ import annotations

import signal
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from chaos.history.reader import parse_line


class MemberProcess:
    def __init__(self, argv: Sequence[str], events_path: Path, log_path: Path,
                 env: Mapping[str, str] | None = None) -> None:
        self.path = events_path
        self.log_path = log_path
        self.log = open(log_path, "wb")
        self.proc = subprocess.Popen(list(argv), env=None if env is None else dict(env), stdout=self.log,
                                     stderr=subprocess.STDOUT)

    def events(self, cls: type | None = None) -> list[Any]:
        """The events the member wrote so far (of type ``cls``), each line validated by the history reader."""
        if not self.path.exists():
            return []
        out = [parse_line(line, f"{self.path}:{i}") for i, line in enumerate(self.path.read_bytes().splitlines(), 1)]
        return [e for e in out if cls is None or isinstance(e, cls)]

    def stop(self, timeout: float = 60) -> int:
        """SIGTERM (unless it has ended), then its exit code within ``timeout`` seconds."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        finally:
            self.log.close()

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.log.close()
