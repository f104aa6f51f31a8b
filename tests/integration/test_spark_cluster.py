"""The report on a real Spark standalone cluster: a master and one worker from the installed pyspark.

The test starts ``org.apache.spark.deploy.master.Master`` and ``...worker.Worker`` with
``spark-class`` (bound to 127.0.0.1, free ports, web UIs on loopback), runs
``chaos report --spark-master spark://127.0.0.1:PORT`` against it on the re-check archive, and compares
the report with the session's one built on ``local[2]`` (``tests/conftest.py``, shared with the unit
report tests). ``spark-submit reports/build_report.py`` of the larger fixture archive against the same
master, compared with its local report, is in ``make test-all``. The master's own JSON status
says the applications ran there, on the worker's executors. Both JVMs are started in their own process
groups and stopped by their recorded pids.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

pyspark = pytest.importorskip("pyspark")
pd = pytest.importorskip("pandas")

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
SPARK_HOME = Path(pyspark.__file__).parent
START_TIMEOUT_S = 60
REPORT_TIMEOUT_S = 240
#: the CSVs and summary fields that must be the same whatever master ran the job
COMPARED_CSVS = ("nightly.csv", "by_invariant.csv", "ttr_by_fault.csv", "liveness.csv", "by_versions.csv", "share.csv",
                 "trend.csv", "recheck.csv", "violations.csv", "runs.csv")
COMPARED_SUMMARY = ("runs", "experiments", "nights", "events", "torn_lines_dropped", "passed", "failed",
                    "inconclusive", "violations", "recheck")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _env(tmp: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update(SPARK_HOME=str(SPARK_HOME), SPARK_LOCAL_IP="127.0.0.1", SPARK_LOCAL_DIRS=str(tmp / "local"),
               SPARK_WORKER_DIR=str(tmp / "work"), SPARK_LOG_DIR=str(tmp / "logs"),
               PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable)
    if not env.get("JAVA_HOME") and Path("/usr/lib/jvm/java-17-openjdk-amd64").is_dir():
        env["JAVA_HOME"] = "/usr/lib/jvm/java-17-openjdk-amd64"
    return env


def _wait_for(what: str, check, log: Path, timeout_s: float = START_TIMEOUT_S):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        got = check()
        if got:
            return got
        time.sleep(0.5)
    tail = log.read_text(errors="replace")[-3000:] if log.exists() else "(no log)"
    raise AssertionError(f"{what} not ready within {timeout_s}s; log tail:\n{tail}")


class _Cluster:
    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.env = _env(tmp)
        self.port = _free_port()
        self.url = f"spark://127.0.0.1:{self.port}"
        self.procs: list[subprocess.Popen] = []
        self.ui_port: int | None = None

    def _start(self, name: str, args: list[str]) -> Path:
        log = self.tmp / f"{name}.log"
        with log.open("wb") as out:
            # own session (process group = the recorded pid): stop() ends the JVM and any executor it started
            self.procs.append(subprocess.Popen([str(SPARK_HOME / "bin" / "spark-class"), *args], env=self.env,
                                               stdout=out, stderr=subprocess.STDOUT, start_new_session=True))
        return log

    def start(self) -> None:
        for d in ("local", "work", "logs"):
            (self.tmp / d).mkdir()
        mlog = self._start("master", ["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                                      "--port", str(self.port), "--webui-port", "0"])

        def master_ui() -> int | None:
            m = re.search(r"MasterWebUI.* at http://127\.0\.0\.1:(\d+)|Bound MasterWebUI to 127\.0\.0\.1, and "
                          r"started at http://[^:]+:(\d+)", mlog.read_text(errors="replace"))
            return int(m.group(1) or m.group(2)) if m else None

        self.ui_port = _wait_for("Spark master", master_ui, mlog)
        wlog = self._start("worker", ["org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1", "--port", "0",
                                      "--webui-port", "0", "--cores", "2", "--memory", "2g", self.url])
        _wait_for("Spark worker", lambda: [w for w in self.status()["workers"] if w["state"] == "ALIVE"], wlog)

    def status(self) -> dict:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.ui_port}/json/", timeout=5) as r:
            return json.load(r)

    def stop(self) -> None:
        for p in reversed(self.procs):  # the worker (and its executors) first, then the master
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait(timeout=10)
        for p in self.procs:  # executors the worker started live in the worker's process group
            try:
                os.killpg(p.pid, 0)
            except ProcessLookupError:
                continue
            os.killpg(p.pid, signal.SIGKILL)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory) -> Iterator[_Cluster]:
    c = _Cluster(tmp_path_factory.mktemp("spark-standalone"))
    try:
        c.start()
        yield c
    finally:
        c.stop()


def _run(cmd: list[str], env: dict[str, str], code: int = 0) -> subprocess.CompletedProcess:
    res = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=REPORT_TIMEOUT_S, cwd=ROOT)
    assert res.returncode == code, f"{cmd[:2]} exit {res.returncode}:\n{res.stderr[-3000:]}"
    return res


def _same_report(got: Path, want: Path) -> None:
    g, w = json.loads((got / "summary.json").read_text()), json.loads((want / "summary.json").read_text())
    for key in COMPARED_SUMMARY:
        assert g[key] == w[key], key
    for name in COMPARED_CSVS:
        a, b = pd.read_csv(got / name), pd.read_csv(want / name)
        assert list(a.columns) == list(b.columns), name
        cols = list(a.columns)
        a = a.sort_values(cols).reset_index(drop=True)
        b = b.sort_values(cols).reset_index(drop=True)
        pd.testing.assert_frame_equal(a, b, check_exact=False, rtol=1e-9, obj=name)
    ev_g, ev_w = pd.read_parquet(got / "tables" / "events"), pd.read_parquet(want / "tables" / "events")
    assert len(ev_g) == len(ev_w) == g["events"]
    key = ["run", "seq"]
    assert ev_g.sort_values(key)[key + ["kind", "mono_ns"]].reset_index(drop=True).equals(
        ev_w.sort_values(key)[key + ["kind", "mono_ns"]].reset_index(drop=True))


#: the session report's (tests/conftest.py): the compared outputs do not depend on it, the timelines do
TIMELINES = "4"


def _on_master(cluster: _Cluster, out: Path, local: Path) -> None:
    summary = json.loads((out / "summary.json").read_text())
    assert summary["spark"]["master"] == cluster.url, out
    _same_report(out, local)
    assert json.loads((local / "summary.json").read_text())["spark"]["master"] == "local[2]"
    # the master ran the application, on the one worker's executors
    status = cluster.status()
    apps = status["completedapps"] + status["activeapps"]
    assert [a for a in apps if a["name"] == "kafka-chaos-report"], apps
    assert [w["state"] for w in status["workers"]] == ["ALIVE"]
    assert list((cluster.tmp / "work").iterdir()), "no executor ran on the worker"


def test_report_on_a_standalone_cluster_equals_local(recheck_report, cluster, tmp_path):
    """``chaos report --spark-master`` on the re-check archive (tests/recheck_archive.py: every re-checked invariant
    bad, near miss and disagreeing) equals the session's local[2] report of it. The job's cost is its ~120 Spark
    jobs, not its data: 17 small runs take ~60 s on the master against ~85 s for the 114-run fixture archive, which
    the spark-submit test below runs there in make test-all."""
    local, _ = recheck_report
    results = local.parent / "results"  # tests/conftest.py _recheck_report: the archive beside its report
    on_cluster = tmp_path / "cluster"
    res = _run([str(BIN / "chaos"), "report", str(results), "--out", str(on_cluster), "--timelines", "0",
                "--spark-master", cluster.url], cluster.env, code=1)
    assert "re-check DISAGREES" in res.stdout, res.stdout  # the archive's edited checks.json: exit 1 (command.py)
    _on_master(cluster, on_cluster, local)
    # stderr is the report's progress and nothing of the driver JVM (chaos.report.session._launch_driver_jvm)
    assert [line for line in res.stderr.splitlines() if not line.startswith("[report ")] == [], res.stderr[-3000:]


@pytest.mark.slow
def test_spark_submit_on_a_standalone_cluster_equals_local(archive, report, cluster, tmp_path):
    submitted = tmp_path / "submitted"
    _run([str(SPARK_HOME / "bin" / "spark-submit"), "--master", cluster.url,
          "--conf", "spark.driver.host=127.0.0.1", "--conf", "spark.driver.bindAddress=127.0.0.1",
          "--conf", "spark.ui.enabled=false", "--conf", "spark.executor.memory=1g",
          str(ROOT / "reports" / "build_report.py"), str(archive), "--out", str(submitted), "--timelines", TIMELINES],
         cluster.env)
    _on_master(cluster, submitted, report[0])


def test_a_master_that_does_not_answer_is_one_line_exit_2(archive, tmp_path):
    port = _free_port()  # nothing listens there
    t0 = time.monotonic()
    res = subprocess.run([str(BIN / "chaos"), "report", str(archive), "--out", str(tmp_path / "o"),
                          "--spark-master", f"spark://127.0.0.1:{port}"], env=_env(tmp_path), capture_output=True,
                         text=True, timeout=120)
    assert res.returncode == 2, res.stderr[-2000:]
    errors = [line for line in res.stderr.splitlines() if not line.startswith("[report ")]  # progress lines
    assert len(errors) == 1 and errors[0].startswith("chaos: error: ") and "does not answer" in errors[0], res.stderr
    assert time.monotonic() - t0 < 60


def test_a_corrupt_history_line_is_one_error_line_and_no_jvm_output(tmp_path):
    """``chaos report`` on a corrupt history: its progress lines and one error line naming the file and line,
    nothing of the Spark JVM (its start-up lines, a failed task's stack trace: 134 lines before they went to the
    JVM's own file and the failed-task loggers were turned off, chaos.report.session)."""
    history = ROOT / "fixtures" / "histories" / "delivery-lost-record.jsonl"
    run = tmp_path / "results" / "2026-11-23" / "baseline" / "run-000-seed-1"
    run.mkdir(parents=True)
    lines = history.read_text().splitlines()
    (run / "history.jsonl").write_text("\n".join([*lines[:5], "{not json", *lines[5:]]) + "\n")
    res = subprocess.run([str(BIN / "chaos"), "report", str(tmp_path / "results"), "--out", str(tmp_path / "out")],
                         env=_env(tmp_path), capture_output=True, text=True, timeout=REPORT_TIMEOUT_S)
    assert res.returncode == 2, res.stderr[-3000:]
    others = [line for line in res.stderr.splitlines() if not line.startswith("[report ")]
    assert len(others) == 1 and others[0].startswith(f"chaos: error: {run}/history.jsonl:6: "), res.stderr[-3000:]
    assert "the history is corrupt" in others[0]
    assert not (tmp_path / "out").exists()
