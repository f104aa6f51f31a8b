"""``chaos report --out``: a report that fails leaves ``--out`` as it found it (no Spark needed: the session is
refused here as a Spark that would not start refuses it)."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from chaos.cli import main
from chaos.errors import UsageError

HISTORY = Path(__file__).resolve().parents[2] / "fixtures" / "histories" / "delivery-lost-record.jsonl"

pytest.importorskip("pyspark")


@pytest.fixture
def results(tmp_path) -> Path:
    run = tmp_path / "results" / "2026-11-23" / "baseline" / "run-000-seed-1"
    run.mkdir(parents=True)
    (run / "history.jsonl").write_bytes(HISTORY.read_bytes())
    return tmp_path / "results"


@pytest.fixture
def spark_refused(monkeypatch):
    import chaos.report.job

    def refuse(master):
        raise UsageError("Spark would not start: java not found")

    monkeypatch.setattr(chaos.report.job, "spark_session", refuse)


def _report(results: Path, out: Path) -> str:
    res = CliRunner().invoke(main, ["report", str(results), "--out", str(out)])
    assert res.exit_code == 2, (res.output, res.exception)
    return res.output.strip().splitlines()[-1]


def test_a_failed_report_removes_the_directories_it_created(results, tmp_path, spark_refused):
    line = _report(results, tmp_path / "new" / "report")
    assert line == "chaos: error: Spark would not start: java not found"
    assert not (tmp_path / "new").exists()                          # not even the parent it made


def test_a_failed_report_keeps_an_out_that_existed(results, tmp_path, spark_refused):
    out = tmp_path / "mine"
    out.mkdir()
    _report(results, out)
    assert out.is_dir() and list(out.iterdir()) == []
    _report(results, out / "deeper")                                # what it created below it goes again
    assert list(out.iterdir()) == []
