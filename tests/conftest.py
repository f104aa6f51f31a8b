"""Session fixtures of the report tests: one archive, one SparkSession, one report per session.

The archive is ``fixtures/archive/build_archive.py``'s: the five histories recorded from
real runs (flat layout) and every hand-made history (nightly layout, two nights), each
judged by the real checkers. Building the report is the expensive part (a Spark job),
so it runs once and the tests read its outputs: the unit report tests, and the standalone-master
test (``tests/integration/test_spark_cluster.py``), which compares its report with this one.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _builder():
    spec = importlib.util.spec_from_file_location("build_archive", ROOT / "fixtures" / "archive" / "build_archive.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="session")
def archive_builder():
    return _builder()


@pytest.fixture(scope="session")
def archive(tmp_path_factory, archive_builder) -> Path:
    return archive_builder.build(tmp_path_factory.mktemp("report") / "results")


@pytest.fixture(scope="session")
def spark():
    from chaos.report.session import spark_session

    session = spark_session("local[2]")
    yield session
    session.stop()


@pytest.fixture(scope="session")
def report(archive, spark, tmp_path_factory):
    """(report dir, summary) of the report over the fixture archive."""
    from chaos.report.job import build_report

    out = tmp_path_factory.mktemp("report") / "out"
    summary = build_report(archive, out, timelines=4, progress=lambda msg: None)
    return out, summary
