"""The report over a version matrix (issue 34): runs of one experiment and seed on several Kafka versions and
client versions.

``discover`` keys runs by their header, not only their directory name (``<experiment>/4.1.1/run-000-seed-500``
and ``<experiment>/4.1.2/run-000-seed-500`` are two runs of ``<experiment>``; two copies of one run are refused),
and the report breaks verdicts and figures down by Kafka version x client versions (the runs table's
``client_versions``, from the members' ``member_start`` events). The discover tests need no Spark; the
breakdown is one small report built on the session's SparkSession (``spark`` in tests/conftest.py).
"""

from __future__ import annotations

import html
import json
import shutil
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from chaos.errors import UsageError
from chaos.history import HISTORY_FILE
from chaos.report.archive import RunDir, RunFiles, _keyed, discover, header_client_versions
from tests.recheck_archive import GROUP, _History

#: 2027-01-15 UTC, the night of the flat layout's runs (the date of their first event)
TS0 = 1_800_000_000.0
NIGHT = "2027-01-15"


def _header(run_id: str = "r1", seed: int | None = 500, kafka: str | None = "4.1.1", **versions: Any) -> dict:
    return {"header": True, "schema_version": 1, "run_id": run_id, "seed": seed,
            "experiment": {"name": "baseline"}, "versions": {"kafka": kafka, **versions}, "configs": {}}


def _write(run_dir: Path, header: dict) -> Path:
    run_dir.mkdir(parents=True)
    event = {"seq": 1, "ts": TS0, "mono_ns": 1, "source": "runner", "kind": "phase", "name": "setup"}
    (run_dir / HISTORY_FILE).write_text(json.dumps(header) + "\n" + json.dumps(event) + "\n")
    return run_dir


def _keys(results: Path) -> dict[str, tuple[str, str]]:
    """run dir (relative) -> (run key, experiment)."""
    return {str(rf.run_dir.path.relative_to(results)): (rf.run_dir.run, rf.run_dir.experiment)
            for rf in discover(results)}


def test_two_kafka_versions_of_one_run_name_get_distinct_keys(tmp_path):
    results = tmp_path / "results"
    _write(results / "baseline" / "4.1.1" / "run-000-seed-500", _header("a1", kafka="4.1.1"))
    _write(results / "baseline" / "4.1.2" / "run-000-seed-500", _header("a2", kafka="4.1.2"))
    _write(results / "baseline" / "4.1.2" / "run-001-seed-501", _header("a3", seed=501, kafka="4.1.2"))
    assert _keys(results) == {
        # the Kafka version tells them apart (their run ids differ too: the first dimension that does is enough)
        "baseline/4.1.1/run-000-seed-500": (f"{NIGHT}/baseline/run-000-seed-500[kafka=4.1.1]", "baseline"),
        "baseline/4.1.2/run-000-seed-500": (f"{NIGHT}/baseline/run-000-seed-500[kafka=4.1.2]", "baseline"),
        # a name no other run has keeps the plain key
        "baseline/4.1.2/run-001-seed-501": (f"{NIGHT}/baseline/run-001-seed-501", "baseline"),
    }


def test_version_directories_are_not_experiments(tmp_path):
    results = tmp_path / "results"
    # nightly layout with a version level; a "kafka-" spelled level; a version level right under RESULTS (the
    # experiment is then the header's); a level named after the header's Kafka version that is no version pattern
    _write(results / "2027-01-20" / "nightly-exp" / "3.9.1" / "run-000-seed-1", _header(kafka="3.9.1"))
    _write(results / "other" / "kafka-4.1.1" / "run-000-seed-1", _header(kafka="4.1.1"))
    _write(results / "4.1.1" / "run-000-seed-2", _header(kafka="4.1.1"))
    _write(results / "trunk-exp" / "trunk" / "run-000-seed-3", _header(kafka="trunk"))
    keys = _keys(results)
    assert keys["2027-01-20/nightly-exp/3.9.1/run-000-seed-1"] == ("2027-01-20/nightly-exp/run-000-seed-1",
                                                                    "nightly-exp")
    assert keys["other/kafka-4.1.1/run-000-seed-1"][1] == "other"
    assert keys["4.1.1/run-000-seed-2"][1] == "baseline"
    assert keys["trunk-exp/trunk/run-000-seed-3"][1] == "trunk-exp"


def test_other_header_dimensions_tell_runs_apart(tmp_path):
    results = tmp_path / "results"
    # same Kafka version: a client library version differs, then only the seed, then only the run id
    _write(results / "e1" / "1.0" / "run-0", _header("same", **{"confluent-kafka": "2.12.0"}))
    _write(results / "e1" / "2.0" / "run-0", _header("same", **{"confluent-kafka": "2.16.1"}))
    _write(results / "e2" / "1.0" / "run-0", _header("same", seed=1))
    _write(results / "e2" / "2.0" / "run-0", _header("same", seed=2))
    _write(results / "e3" / "1.0" / "run-0", _header("r-1"))
    _write(results / "e3" / "2.0" / "run-0", _header("r-2"))
    assert sorted(k for k, _ in _keys(results).values()) == [
        f"{NIGHT}/e1/run-0[confluent-kafka=2.12.0]", f"{NIGHT}/e1/run-0[confluent-kafka=2.16.1]",
        f"{NIGHT}/e2/run-0[seed=1]", f"{NIGHT}/e2/run-0[seed=2]",
        f"{NIGHT}/e3/run-0[run_id=r-1]", f"{NIGHT}/e3/run-0[run_id=r-2]"]


def test_the_members_client_versions_tell_runs_apart():
    """``header["member_clients"]`` (the versions each member was started on): a null ``client_version`` is the
    default pinned library, named by ``library``."""
    members_a = {"consumer-1": {"client": "confluent-kafka", "client_version": "2.12.0",
                                "library": {"confluent-kafka": "2.12.0", "librdkafka": "2.12.0"}},
                 "consumer-2": {"client": "java", "client_version": "4.1.0", "library": {"kafka-clients": "4.1.0"}}}
    members_b = {"consumer-1": {"client": "confluent-kafka", "client_version": None,
                                "library": {"confluent-kafka": "2.16.1", "librdkafka": "2.16.1"}},
                 "consumer-2": {"client": "java", "client_version": "4.1.0", "library": {"kafka-clients": "4.1.0"}}}
    assert header_client_versions({"member_clients": members_a}) == "confluent-kafka 2.12.0+java 4.1.0"
    assert header_client_versions({"member_clients": members_b}) == "confluent-kafka 2.16.1+java 4.1.0"
    assert header_client_versions(_header()) is None  # runs older than the field
    assert header_client_versions({"member_clients": {
        "consumer-1": {"client": "java", "client_version": None, "library": {"kafka-clients": "4.4.0"}},
        "consumer-2": {"client": "command", "client_version": None, "library": {}}}}) == "command default+java 4.4.0"

    def run(where: str, members: dict) -> RunFiles:
        return RunFiles(RunDir(Path(where), NIGHT, "baseline", "run-000-seed-500", False),
                        {**_header(), "member_clients": members}, TS0, None, None, ())

    keyed = _keyed([run("/a", members_a), run("/b", members_b)], Path("/results"))
    assert [rf.run_dir.run for rf in keyed] == [
        f"{NIGHT}/baseline/run-000-seed-500[clients=confluent-kafka 2.12.0+java 4.1.0]",
        f"{NIGHT}/baseline/run-000-seed-500[clients=confluent-kafka 2.16.1+java 4.1.0]"]


def test_two_copies_of_one_run_are_refused_in_one_line(tmp_path):
    results = tmp_path / "results"
    first = _write(results / "baseline" / "4.1.1" / "run-000-seed-500", _header("a1", kafka="4.1.1"))
    _write(results / "baseline" / "4.1.2" / "run-000-seed-500", _header("a2", kafka="4.1.2"))
    shutil.copytree(first, results / "baseline" / "4.1.1-copy" / "run-000-seed-500")
    with pytest.raises(UsageError) as exc:
        discover(results)
    message = str(exc.value)
    assert "\n" not in message
    assert "hold the same run (header run_id a1, seed 500, Kafka 4.1.1, the same versions)" in message
    assert f"run key {NIGHT}/baseline/run-000-seed-500[kafka=4.1.1]" in message
    assert "move the copy out of" in message and "or give each run its own directory name" in message


# --------------------------------------------------------------------------- the breakdown, with Spark

#: per run: (Kafka version, member_start events as (member, client, client_version), a record lost?)
MATRIX: dict[str, tuple[str, list[tuple[int, str, str]], bool]] = {
    "4.1.1": ("4.1.1", [(0, "confluent-kafka", "2.16.1 (librdkafka 2.16.1)"), (1, "java", "4.1.0")], False),
    # consumer-0 upgraded mid-run: both its versions count
    "4.1.2": ("4.1.2", [(0, "confluent-kafka", "2.12.0 (librdkafka 2.12.0)"), (1, "java", "4.1.0"),
                        (0, "confluent-kafka", "2.16.1 (librdkafka 2.16.1)")], True),
    "4.1.2-cmd": ("4.1.2", [(0, "command", "declared"), (1, "kafka-python", "3.0.12")], False),
}
CLIENT_VERSIONS = {
    "4.1.1": "confluent-kafka 2.16.1+java 4.1.0",
    "4.1.2": "confluent-kafka 2.12.0+confluent-kafka 2.16.1+java 4.1.0",
    "4.1.2-cmd": "command declared+kafka-python 3.0.12",
}


def _matrix_run(level: str) -> _History:
    kafka, starts, lose = MATRIX[level]
    h = _History("matrix")
    h.lines[0] = {**h.lines[0], "run_id": f"matrix-{level}", "seed": 500, "experiment": {"name": "matrix"},
                  "versions": {"kafka": kafka, "confluent-kafka": "2.16.1"}}
    if level == "4.1.1":  # the header's member_clients as runs write it: Spark reads the header with the event schema
        h.lines[0]["member_clients"] = {
            "consumer-0": {"client": "confluent-kafka", "client_version": None,
                           "library": {"confluent-kafka": "2.16.1", "librdkafka": "2.16.1"}},
            "consumer-1": {"client": "java", "client_version": "4.1.0", "library": {"kafka-clients": "4.1.0"}}}
    first_starts = [line for line in h.lines if line.get("kind") == "member_start"]
    for line, (member, client, version) in zip(first_starts, starts, strict=False):
        assert line["source"] == f"consumer-{member}"
        line.update(client=client, client_version=version)
    for member, client, version in starts[len(first_starts):]:  # a restart on another version
        h.add(f"consumer-{member}", "member_start", group=GROUP, client=client, client_version=version,
              instance_id=None, assignor="roundrobin", protocol="eager", commit_mode="sync",
              session_timeout_ms=10000, max_poll_interval_ms=30000, auto_commit_interval_ms=None, wrong_mode=None)
        h.add(f"consumer-{member}", "assigned", group=GROUP, partitions=[["t", member]], generation=1,
              member_id=f"m{member}", incremental=False)
    h.send(0, 0, 1, 2)
    h.send(1, 0)
    h.consume(0, 0, 0, 1, *(() if lose else (2,)))
    h.consume(1, 1, 0)
    h.commit(0, 0, 3)
    h.commit(1, 1, 1)
    h.finish()
    return h


@pytest.fixture(scope="module")
def matrix_report(spark, tmp_path_factory) -> tuple[Path, dict[str, Any]]:
    """(report dir, summary) of the report over three judged runs of ``matrix`` named alike, one per level."""
    from chaos.checkers.judge import judge_run
    from chaos.report.job import build_report

    base = tmp_path_factory.mktemp("matrix")
    for level in MATRIX:
        run_dir = base / "results" / "matrix" / level / "run-000-seed-500"
        run_dir.mkdir(parents=True)
        (run_dir / HISTORY_FILE).write_text("".join(json.dumps(line) + "\n" for line in _matrix_run(level).lines))
        judge_run(run_dir)
    return base / "out", build_report(base / "results", base / "out", timelines=0, progress=lambda msg: None)


def test_runs_table_has_the_members_client_versions(matrix_report):
    out, summary = matrix_report
    runs = pd.read_parquet(out / "tables" / "runs").set_index("run_dir")
    assert summary["experiments"] == ["matrix"] and len(runs) == 3
    for level, versions in CLIENT_VERSIONS.items():
        row = runs.loc[str(out.parent / "results" / "matrix" / level / "run-000-seed-500")]
        assert row["client_versions"] == versions, level
        assert row["experiment"] == "matrix" and row["run_name"] == "run-000-seed-500"
    # the two 4.1.2 runs then differ in their run id (their headers have no "member_clients"; the clients are in events)
    assert sorted(runs["run"]) == [
        "2027-01-15/matrix/run-000-seed-500[kafka=4.1.1]",
        "2027-01-15/matrix/run-000-seed-500[kafka=4.1.2,run_id=matrix-4.1.2-cmd]",
        "2027-01-15/matrix/run-000-seed-500[kafka=4.1.2,run_id=matrix-4.1.2]"]
    assert sorted(runs["client"]) == ["command+kafka-python", "confluent-kafka+java", "confluent-kafka+java"]
    events = pd.read_parquet(out / "tables" / "events", columns=["kind", "client_version"])
    assert "2.12.0 (librdkafka 2.12.0)" in set(events[events["kind"] == "member_start"]["client_version"])


def test_verdicts_and_figures_per_kafka_version_and_client_versions(matrix_report):
    out, summary = matrix_report
    runs = pd.read_parquet(out / "tables" / "runs")
    by = pd.read_csv(out / "by_versions.csv")
    assert list(zip(by["kafka_version"], by["client_versions"], strict=True)) == [
        ("4.1.1", CLIENT_VERSIONS["4.1.1"]), ("4.1.2", CLIENT_VERSIONS["4.1.2-cmd"]), ("4.1.2", CLIENT_VERSIONS["4.1.2"])]
    assert (by["runs"] == 1).all() and summary["by_versions"] == json.loads(by.to_json(orient="records"))
    for rec in by.to_dict("records"):
        run = runs[(runs["kafka_version"] == rec["kafka_version"]) & (runs["client_versions"] == rec["client_versions"])]
        assert len(run) == 1
        valid = run.iloc[0]["valid"]
        assert (rec["passed"], rec["failed"], rec["inconclusive"]) == (valid == "true", valid == "false",
                                                                         valid == "unknown")
        assert rec["duplicate_deliveries"] == run.iloc[0]["duplicate_deliveries"]
    lost = by[by["client_versions"] == CLIENT_VERSIONS["4.1.2"]].iloc[0]
    assert lost["failed"] == 1 and lost["lost"] == 1  # the run that lost t-0@2
    assert by[by["client_versions"] == CLIENT_VERSIONS["4.1.1"]].iloc[0]["lost"] == 0
    page = (out / "report.html").read_text()
    assert ">Verdicts per Kafka version and client versions</h2>" in page
    section = page.split('id="versions"', 1)[1].split("<h2", 1)[0]
    assert all(f">{html.escape(v)}</td>" in section for v in CLIENT_VERSIONS.values())
