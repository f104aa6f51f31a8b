"""What `chaos report` prints on stderr: its progress lines and, on bad input, one error line — nothing of the
Spark JVM (its start-up lines, a failed task's stack trace), which writes to a file of its own
(chaos.report.session._launch_driver_jvm) and logs no failed task (_silence_task_failures)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("pyspark")

HISTORY = Path(__file__).resolve().parents[3] / "fixtures" / "histories" / "delivery-lost-record.jsonl"
CHAOS = Path(sys.executable).parent / "chaos"


def test_a_corrupt_history_line_is_one_error_line_and_no_jvm_output(tmp_path):
    run = tmp_path / "results" / "2026-11-23" / "baseline" / "run-000-seed-1"
    run.mkdir(parents=True)
    lines = HISTORY.read_text().splitlines()
    (run / "history.jsonl").write_text("\n".join([*lines[:5], "{not json", *lines[5:]]) + "\n")
    res = subprocess.run([str(CHAOS), "report", str(tmp_path / "results"), "--out", str(tmp_path / "out")],
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 2, res.stderr[-3000:]
    others = [line for line in res.stderr.splitlines() if not line.startswith("[report ")]
    assert len(others) == 1 and others[0].startswith(f"chaos: error: {run}/history.jsonl:6: "), res.stderr[-3000:]
    assert "the history is corrupt" in others[0]
    assert not (tmp_path / "out").exists()
