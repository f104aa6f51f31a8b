"""Session fixtures of the report tests: one archive, one SparkSession, one report per session.

The archive is ``fixtures/archive/build_archive.py``'s: the five histories recorded from
real runs (flat layout) and every hand-made history (nightly layout, two nights), each
judged by the real checkers. Building the report is the expensive part (a Spark job of about a
minute), so it runs once and the tests read its outputs: the unit report tests, and the standalone-master
test (``tests/integration/test_spark_cluster.py``), which compares its report with this one. The re-check
tests' small archive (``tests/recheck_archive.py``) gets its report the same way, after it.

The job is started as soon as the session knows a test will need it, in a thread of its own, and the
tests that read it run last among the unit tests: the other unit tests (one core of Python) run while
Spark builds the report (mostly the driver's scheduling latency). The fixtures wait for it; what they
return is the same archive, session and report as when they were built in line. A session that ends
early (``-x``, Ctrl-C) cancels the job and stops its session; its directory is removed.
"""

from __future__ import annotations

import importlib.util
import shutil
import tempfile
import threading
import time
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: the fixtures the background build serves
_REPORT_FIXTURES = frozenset({"archive", "spark", "report", "recheck_report"})


def _builder():
    spec = importlib.util.spec_from_file_location("build_archive", ROOT / "fixtures" / "archive" / "build_archive.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _import_in_this_thread() -> None:
    """Import every module of the chaos package (and the re-check archive's builder) before the build's thread
    starts, so that thread imports none of them.

    pytest rewrites the asserts of every module of a distribution that registers a plugin (chaos is one), with
    ``ast.parse``, as each is first imported. CPython 3.11 keeps the AST constructor's recursion depth in the
    interpreter's AST state, shared by its threads (``Python-ast.c``, ``state->recursion_depth``), and checks it
    after each parse: two threads building ASTs at once can fail that check, "SystemError: AST constructor
    recursion depth mismatch" (reported in pytest-dev/pytest#10763, CPython gh-106905). Seen once in a busy
    fresh-clone run (fc30): the build thread importing ``chaos.report.job`` while a unit test parsed. About 1 s,
    once a session.
    """
    import pkgutil

    import chaos

    for module in pkgutil.walk_packages(chaos.__path__, "chaos."):
        importlib.import_module(module.name)
    importlib.import_module("tests.recheck_archive")


class _ReportBuild:
    """The session's archive, SparkSession and report, built in a thread started after collection."""

    def __init__(self, needed: set[str]) -> None:
        #: what the selected tests read: the fixture archive (and its report), the re-check archive's report
        self.with_report = bool({"archive", "report"} & needed)
        self.with_recheck = "recheck_report" in needed
        self.dir = Path(tempfile.mkdtemp(prefix="kafka-chaos-test-report-"))
        self.archive: Future[Path] = Future()
        self.spark: Future[Any] = Future()
        self.report: Future[tuple[Path, dict[str, Any]]] = Future()
        self.recheck: Future[tuple[Path, dict[str, Any]]] = Future()
        self._cancelled = threading.Event()
        _import_in_this_thread()
        self._thread = threading.Thread(target=self._run, name="report-build", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        futures = (self.archive, self.spark, self.report, self.recheck)
        try:
            if self.with_report:
                self.archive.set_result(_builder().build(self.dir / "results"))
                self._go_on()
            from chaos.report.session import spark_session

            self.spark.set_result(spark_session("local[2]"))
            if self.with_report:
                self._go_on()
                self.report.set_result(_fixture_report(self.archive.result(), self.dir / "out"))
            if self.with_recheck:
                self._go_on()
                self.recheck.set_result(_recheck_report(self.dir / "recheck"))
        except BaseException as exc:  # noqa: BLE001 - handed to every fixture still waiting
            for f in futures:
                if not f.done():
                    f.set_exception(exc)

    def _go_on(self) -> None:
        if self._cancelled.is_set():
            raise RuntimeError("the session ended before the report was built")

    def _session(self) -> Any | None:
        return self.spark.result() if self.spark.done() and self.spark.exception() is None else None

    def close(self) -> None:
        """Stop a build still running (no next step; its Spark jobs cancelled), wait for the thread, stop the
        session, remove the directory."""
        self._cancelled.set()
        deadline = time.monotonic() + 120
        while self._thread.is_alive() and time.monotonic() < deadline:
            session = self._session()
            if session is not None:
                session.sparkContext.setLogLevel("OFF")  # a cancelled write logs its aborted tasks as errors
                session.sparkContext.cancelAllJobs()
            self._thread.join(timeout=0.5)
        session = self._session()
        if session is not None:
            session.stop()
        shutil.rmtree(self.dir, ignore_errors=True)


def _fixture_report(archive: Path, out: Path) -> tuple[Path, dict[str, Any]]:
    """(report dir, summary) of the report over the fixture archive."""
    from chaos.report.job import build_report

    return out, build_report(archive, out, timelines=4, progress=lambda msg: None)


def _recheck_report(base: Path) -> tuple[Path, dict[str, Any]]:
    """(report dir, summary) of the report over ``tests/recheck_archive.py``'s small archive."""
    from chaos.report.job import build_report
    from tests import recheck_archive

    out = base / "out"
    return out, build_report(recheck_archive.build(base / "results"), out, timelines=0, progress=lambda msg: None)


_build: _ReportBuild | None = None


def _needs_report(item: pytest.Item) -> bool:
    return bool(_REPORT_FIXTURES & set(getattr(item, "fixturenames", ()))) and item.get_closest_marker("skip") is None


@pytest.hookimpl(trylast=True)  # after the plugin's slow-skips: a skipped test needs no report
def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    global _build
    if config.option.collectonly or not any(_needs_report(i) for i in items):
        return
    if importlib.util.find_spec("pyspark") is None:
        return
    # the unit tests that read the report last among the unit tests (the integration tests keep their place)
    unit = [i for i in items if "tests/unit/" in i.nodeid]
    if unit:
        end = items.index(unit[-1]) + 1
        head = items[:end]
        items[:end] = [i for i in head if not _needs_report(i)] + [i for i in head if _needs_report(i)]
    _build = _ReportBuild({f for i in items if _needs_report(i) for f in _REPORT_FIXTURES & set(i.fixturenames)})


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    global _build
    if _build is not None:
        _build.close()
        _build = None


@pytest.fixture(scope="session")
def archive_builder():
    return _builder()


@pytest.fixture(scope="session")
def archive(tmp_path_factory, archive_builder) -> Path:
    if _build is not None and _build.with_report:
        return _build.archive.result()
    return archive_builder.build(tmp_path_factory.mktemp("report") / "results")


@pytest.fixture(scope="session")
def spark():
    if _build is not None:
        yield _build.spark.result()  # stopped with the build, at the session's end
        return
    from chaos.report.session import spark_session

    session = spark_session("local[2]")
    yield session
    session.stop()


@pytest.fixture(scope="session")
def report(archive, spark, tmp_path_factory):
    """(report dir, summary) of the report over the fixture archive."""
    if _build is not None and _build.with_report:
        return _build.report.result()
    return _fixture_report(archive, tmp_path_factory.mktemp("report") / "out")


@pytest.fixture(scope="session")
def recheck_report(spark, tmp_path_factory) -> tuple[Path, dict[str, Any]]:
    """(report dir, summary) of the report over the re-check tests' small archive."""
    if _build is not None and _build.with_recheck:
        return _build.recheck.result()
    return _recheck_report(tmp_path_factory.mktemp("recheck"))
