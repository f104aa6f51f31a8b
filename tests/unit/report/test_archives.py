"""``chaos report`` over several archives, from paths and URIs, with the findings of ``chaos explore``.

Two shard archives of one exploration (``shard-1``, ``shard-2``: ``explore.json``, runs, ``findings/``) and
one archive holding the same four runs (``single``). The discover, findings and refusal tests need no Spark;
two small reports are built on the session's SparkSession (``spark`` in tests/conftest.py): the two shards
merged (``shard-2`` given as a ``file:///`` URI forced through Hadoop's FileSystem, as an ``hdfs:`` or ``s3a:``
archive is read) and ``single`` given as a ``file:`` URI (read as its path). The error tests of URIs use the
same session.
"""

from __future__ import annotations

import html
import json
import shutil
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from click.testing import CliRunner

from chaos.errors import UsageError
from chaos.history import HISTORY_FILE
from chaos.report import archive as report_archive
from chaos.report.archive import Archive, RunFiles, _scan, _wanted, archive_roots, discover, read_archives
from tests.recheck_archive import _History

pytest.importorskip("pyspark")

EXPERIMENT = "matrix-explore"
NIGHT = "2027-01-15"
#: plan index -> (shard, lose a record: the run goes red)
RUNS = {0: ("1/2", False), 1: ("2/2", True), 2: ("1/2", True), 3: ("2/2", False)}
SIG_BOTH, SIG_ONE = "aaaa1111", "bbbb2222"


def _run(results: Path, index: int) -> Path:
    """Run ``index`` of the plan, judged, in ``results/<EXPERIMENT>/run-<index>-seed-<seed>/``."""
    from chaos.checkers.judge import judge_run

    h = _History(f"plan-{index}")
    h.lines[0] = {**h.lines[0], "run_id": f"explore-{index}", "seed": 100 + index}
    h.send(0, 0, 1, 2)
    h.send(1, 0)
    h.consume(0, 0, 0, 1, *(() if RUNS[index][1] else (2,)))
    h.consume(1, 1, 0)
    h.commit(0, 0, 3)
    h.commit(1, 1, 1)
    h.finish()
    run_dir = results / EXPERIMENT / f"run-{index:03d}-seed-{100 + index}"
    run_dir.mkdir(parents=True)
    (run_dir / HISTORY_FILE).write_text("".join(json.dumps(line) + "\n" for line in h.lines))
    judge_run(run_dir)
    return run_dir


def _finding(signature: str, *, shard: str | None, first_run: str, hits: int, found_after_s: float,
             **fields: Any) -> dict[str, Any]:
    return {"signature": signature, "checkers": ["delivery"], "fault_kinds": ["pause"], "finding_class": "under_faults",
            "workload": "matrix", "first_run": first_run, "seed": 7, "shard": shard,
            "replay": {"valid": "false", "failed": ["delivery"]}, "minimal": "minimal.yaml", "minimal_failed_runs": 2,
            "minimal_runs": 3, "found_after_s": found_after_s, "hits": hits,
            "explanation": f"Under pause the group breaks delivery ({shard}).", **fields}


def _file_finding(archive: Path, finding: dict[str, Any], red_run: Path | None) -> Path:
    """``archive/findings/<signature>/`` as chaos explore files it: finding.json, the red run's copy, a shrink run."""
    where = archive / "findings" / finding["signature"]
    where.mkdir(parents=True)
    (where / "finding.json").write_text(json.dumps(finding, indent=1))
    (where / "minimal.yaml").write_text("name: minimal\n")
    if red_run is not None:
        shutil.copytree(red_run, where / "run")
        shutil.copytree(red_run, where / "shrink" / "runs" / "candidate-001")
    return where


def _explore(archive: Path, shard: str | None, runs: list[int], findings: list[str]) -> None:
    (archive / "explore.json").write_text(json.dumps({
        "workload": "matrix", "seed": 7, "shard": shard, "runs": len(runs),
        "verdicts": {"true": sum(not RUNS[i][1] for i in runs), "false": sum(RUNS[i][1] for i in runs),
                     "unknown": 0, "error": 0},
        "findings": findings}))


@pytest.fixture(scope="module")
def archives(tmp_path_factory) -> dict[str, Path]:
    """``shard-1``, ``shard-2`` (explore archives of one plan, shard K/2) and ``single`` (their four runs)."""
    base = tmp_path_factory.mktemp("archives")
    shards = {"1/2": base / "shard-1", "2/2": base / "shard-2"}
    runs = {i: _run(shards[shard], i) for i, (shard, _) in RUNS.items()}
    rel = lambda i: str(runs[i].relative_to(runs[i].parents[1]))  # noqa: E731 - archive-relative
    # the same finding in both shards (shard 2 found it first, twice); one only shard 1 found
    _file_finding(shards["1/2"], _finding(SIG_BOTH, shard="1/2", first_run=rel(2), hits=1, found_after_s=80.0),
                  runs[2])
    _file_finding(shards["2/2"], _finding(SIG_BOTH, shard="2/2", first_run=rel(1), hits=2, found_after_s=35.5),
                  runs[1])
    _file_finding(shards["1/2"], _finding(SIG_ONE, shard="1/2", first_run=rel(2), hits=1, found_after_s=120.0,
                                          checkers=["record-anomalies"], minimal=None, minimal_failed_runs=0,
                                          minimal_runs=0, finding_class="not_shrunk"), runs[2])
    # an investigation interrupted before its finding.json: its runs are not counted either
    shutil.copytree(runs[1], shards["2/2"] / "findings" / "pending-001" / "shrink" / "runs" / "replay")
    _explore(shards["1/2"], "1/2", [0, 2], [SIG_BOTH, SIG_ONE])
    _explore(shards["2/2"], "2/2", [1, 3], [SIG_BOTH])
    single = base / "single"
    for run_dir in runs.values():
        shutil.copytree(run_dir, single / EXPERIMENT / run_dir.name)
    _explore(single, None, list(RUNS), [])
    return {"shard-1": shards["1/2"], "shard-2": shards["2/2"], "single": single, "base": base}


@pytest.fixture
def hadoop_file_uris(monkeypatch):
    """``file:`` URIs read through Hadoop's FileSystem (staged), as ``hdfs:`` and ``s3a:`` archives are."""
    monkeypatch.setattr(report_archive, "_LOCAL_SCHEMES", frozenset())


@pytest.fixture(scope="module")
def merged(spark, archives) -> tuple[Path, dict[str, Any]]:
    """(report dir, summary) of the report over ``shard-1`` (a path) and ``shard-2`` (a file:/// URI, staged)."""
    from chaos.report.job import build_report

    out = archives["base"] / "merged"
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(report_archive, "_LOCAL_SCHEMES", frozenset())
        summary = build_report([str(archives["shard-1"]), archives["shard-2"].as_uri()], out, timelines=0,
                               progress=lambda msg: None)
    return out, summary


@pytest.fixture(scope="module")
def single(spark, archives) -> tuple[Path, list[RunFiles]]:
    """(tables dir, runs) of ``single`` given as a file: URI (read as its path): its Parquet tables only, the part
    of the report that the run keys and the runs table come from (the whole report would add half a minute)."""
    from chaos.report.tables import build_tables

    given = archives["single"].as_uri()
    runs = read_archives([Archive(given, root) for root in archive_roots([given]) if root is not None]).runs
    out = archives["base"] / "single-tables"
    build_tables(spark, runs, out, lambda msg: None)
    return out / "tables", runs


# --------------------------------------------------------------------------- discovery, without Spark

def test_runs_below_findings_are_not_counted(archives):
    # shard 1's findings/ holds the red run's copy and a shrink run of each finding: not runs of the exploration
    assert sorted(rf.run_dir.run for rf in discover(archives["shard-1"])) == [
        f"{NIGHT}/{EXPERIMENT}/run-000-seed-100", f"{NIGHT}/{EXPERIMENT}/run-002-seed-102"]
    contents = read_archives([Archive(str(archives["shard-2"]), archives["shard-2"])])
    assert len(contents.runs) == 2 and [f.rel for f in contents.findings] == [("findings", SIG_BOTH)]  # no pending-*


def test_a_directory_of_shard_archives_skips_each_ones_findings(archives, tmp_path):
    parent = tmp_path / "night"
    for name in ("shard-1", "shard-2"):
        shutil.copytree(archives[name], parent / name)
    contents = read_archives([Archive(str(parent), parent)])
    assert len(contents.runs) == 4
    assert sorted(f.rel for f in contents.findings) == [("shard-1", "findings", SIG_BOTH),
                                                        ("shard-1", "findings", SIG_ONE),
                                                        ("shard-2", "findings", SIG_BOTH)]
    assert sorted(e.rel for e in contents.explorations) == [("shard-1",), ("shard-2",)]
    # what a staged copy holds (_wanted, over a listing) is what the local scan reads
    listing = {p.relative_to(parent).parts for p in parent.rglob("*") if p.is_file()}
    histories, explores, findings = _scan(parent)
    wanted = set(_wanted(listing))
    assert {p.relative_to(parent).parts for p in histories + explores + findings} <= wanted
    assert {f for f in wanted if f[-1] == HISTORY_FILE} == {p.relative_to(parent).parts for p in histories}
    assert not any("findings" in f[:-1] and f[-1] != "finding.json" for f in wanted)
    assert not any(f[-1] == "minimal.yaml" for f in wanted)


def test_archive_arguments(tmp_path):
    a = tmp_path / "a b"
    (a / "inner").mkdir(parents=True)
    assert archive_roots([a.as_uri()]) == [a]                                # percent-encoded: "a%20b"
    assert archive_roots([f"file://localhost{a}/inner", "s3a://b/x"]) == [a / "inner", None]
    with pytest.raises(UsageError, match="a file: URI names a path on this machine"):
        archive_roots(["file://elsewhere/data"])
    with pytest.raises(UsageError, match="no such results directory"):
        archive_roots([(tmp_path / "missing").as_uri()])
    with pytest.raises(UsageError, match="the same archive given twice"):
        archive_roots([str(a), a.as_uri()])
    with pytest.raises(UsageError, match=r"inner is inside .*a b: its runs would be read twice"):
        archive_roots([str(a), str(a / "inner")])
    with pytest.raises(UsageError, match="given twice"):
        archive_roots(["s3a://b/x/", "s3a://b/x"])


@pytest.mark.parametrize(("edit", "expected"), [
    (lambda f: "{not json", "not valid JSON"),
    (lambda f: json.dumps([f]), "not a finding of chaos explore (a JSON object)"),
    (lambda f: json.dumps({k: v for k, v in f.items() if k != "hits"}), "(no 'hits')"),
    (lambda f: json.dumps({**f, "hits": "3"}), "('hits' is '3', expected a whole number >= 1)"),
    (lambda f: json.dumps({**f, "checkers": "delivery"}), "('checkers' is 'delivery', expected a list"),
])
def test_a_malformed_finding_is_one_line_naming_it(archives, tmp_path, edit, expected):
    archive = tmp_path / "shard"
    shutil.copytree(archives["shard-1"], archive)
    path = archive / "findings" / SIG_ONE / "finding.json"
    path.write_text(edit(json.loads(path.read_text())))
    with pytest.raises(UsageError) as exc:
        read_archives([Archive(str(archive), archive)])
    message = str(exc.value)
    assert message.startswith(f"{path}: ") and expected in message and "\n" not in message


def test_the_same_run_in_two_archives_is_refused(archives, tmp_path):
    from chaos.cli import main

    other = tmp_path / "other"
    copy = other / EXPERIMENT / "run-000-seed-100"
    shutil.copytree(archives["shard-1"] / EXPERIMENT / "run-000-seed-100", copy)
    out = tmp_path / "new" / "report"
    res = CliRunner().invoke(main, ["report", str(archives["shard-1"]), str(other), "--out", str(out)])
    assert res.exit_code == 2, res.output
    line = res.stderr.strip().splitlines()[-1]  # after the progress lines
    assert "Traceback" not in res.output
    assert line == (f"chaos: error: {archives['shard-1'] / EXPERIMENT / 'run-000-seed-100'} and {copy} hold the same "
                    f"run (header run_id explore-0, seed 100, Kafka 3.9.1, the same versions): both map to the run key "
                    f"{NIGHT}/{EXPERIMENT}/run-000-seed-100; the archives {archives['shard-1']} and {other} both hold "
                    "it: leave one of them out, or move the copy out of one")
    assert not (tmp_path / "new").exists()


def test_a_findings_section_only_for_explore_archives():
    from chaos.report.job import _findings_csv, _findings_section

    assert _findings_section([], []) == ""
    none = _findings_section([], [{"archive": "a", "workload": "w", "seed": 1, "shard": None, "runs": 3,
                                   "passed": 3, "failed": 0, "unknown": 0, "error": 0, "findings": 0}])
    assert "No findings were recorded in the 1 exploration(s)" in none and 'id="explorations"' in none
    assert list(_findings_csv([]).columns) == report_archive.FINDINGS_COLUMNS  # findings.csv: its header


# --------------------------------------------------------------------------- reports, with Spark

RUN_COLUMNS = ["run", "experiment", "run_name", "valid", "events", "send_ok", "lost", "duplicate_deliveries",
               "rebalances", "failed_checkers"]


def test_archives_merged_equal_one_archive_holding_their_runs(merged, single, archives):
    (out, summary), (tables, runs) = merged, single
    runs_m, runs_s = (pd.read_parquet(t / "runs", columns=RUN_COLUMNS).sort_values("run").reset_index(drop=True)
                      .astype(str) for t in (out / "tables", tables))
    assert list(runs_m["run"]) == [f"{NIGHT}/{EXPERIMENT}/run-{i:03d}-seed-{100 + i}" for i in sorted(RUNS)]
    pd.testing.assert_frame_equal(runs_m, runs_s)
    # the summary's counts are those of the one archive's runs: none below findings/ counted
    valid = pd.read_parquet(tables / "runs", columns=["valid", "events"])
    assert (summary["runs"], summary["passed"], summary["failed"], summary["inconclusive"], summary["events"]) == (
        len(runs), (valid["valid"] == "true").sum(), (valid["valid"] == "false").sum(),
        (valid["valid"] == "unknown").sum(), valid["events"].sum())
    assert (summary["runs"], summary["failed"]) == (4, 2) and summary["recheck"]["agree"]
    violations = pd.read_parquet(tables / "violations", columns=["violation"])
    assert summary["violations"] == int(violations["violation"].sum())
    # read as its path: the runs' directories are local (linked from a report), the file: URI is not kept
    assert {rf.run_dir.location for rf in runs} == {str(archives["single"] / EXPERIMENT / f"run-{i:03d}-seed-{100 + i}")
                                                    for i in RUNS}


def test_a_staged_archive_is_named_by_its_uri_and_leaves_nothing(merged, archives):
    out, summary = merged
    uri = archives["shard-2"].as_uri()
    assert summary["archives"] == [str(archives["shard-1"]), uri] and summary["results_dir"] is None
    runs = pd.read_parquet(out / "tables" / "runs", columns=["run_name", "run_dir"]).set_index("run_name")["run_dir"]
    # read from the staged copy (the Hadoop path), named by the URI it came from
    assert runs["run-001-seed-101"] == f"{uri}/{EXPERIMENT}/run-001-seed-101"
    assert runs["run-000-seed-100"] == str(archives["shard-1"] / EXPERIMENT / "run-000-seed-100")
    assert sorted(p.name for p in out.iterdir() if p.name.startswith(".")) == []
    staged = {v["run_dir"] for v in summary["violations_list"]}
    assert f"{uri}/{EXPERIMENT}/run-001-seed-101" in staged


def test_findings_are_one_row_per_signature_across_archives(merged, archives):
    out, summary = merged
    uri = archives["shard-2"].as_uri()
    rows = {r["signature"]: r for r in summary["findings"]}
    assert list(rows) == [SIG_BOTH, SIG_ONE]  # in the order found
    both = rows[SIG_BOTH]
    assert both["hits"] == 3 and both["shards"] == ["1/2", "2/2"]
    assert both["archives"] == [str(archives["shard-1"]), uri]
    # the copy found first is shard 2's (35.5 s): its directory, run, minimal experiment and explanation
    assert both["found_after_s"] == 35.5 and both["finding_dir"] == f"{uri}/findings/{SIG_BOTH}"
    assert both["first_run"] == f"{uri}/{EXPERIMENT}/run-001-seed-101"
    assert both["minimal"] == f"{uri}/findings/{SIG_BOTH}/minimal.yaml"
    assert (both["minimal_failed_runs"], both["minimal_runs"]) == (2, 3) and "(2/2)" in both["explanation"]
    one = rows[SIG_ONE]
    assert (one["hits"], one["shards"], one["checkers"], one["minimal"]) == (1, ["1/2"], ["record-anomalies"], None)
    assert one["finding_dir"] == str(archives["shard-1"] / "findings" / SIG_ONE)
    csv = pd.read_csv(out / "findings.csv", keep_default_na=False).set_index("signature")
    assert csv.loc[SIG_BOTH, "shards"] == "1/2 2/2" and csv.loc[SIG_BOTH, "hits"] == 3
    assert csv.loc[SIG_BOTH, "archives"] == f"{archives['shard-1']}; {uri}"
    assert [e["shard"] for e in summary["explorations"]] == ["1/2", "2/2"]
    page = (out / "report.html").read_text()
    section = page.split('<h2 id="findings">', 1)[1].split("<h2", 1)[0]
    assert all(f">{sig}</td>" in section for sig in rows) and f">{html.escape(both['finding_dir'])}</td>" in section
    assert 'id="explorations"' in section and ">findings<b>2</b>" in page


@pytest.mark.parametrize(("uri", "expected"), [
    ("nosuchfs://x/y", "chaos: error: nosuchfs://x/y: Spark has no filesystem for scheme nosuchfs (Hadoop "),
    ("s3a://b/x", "chaos: error: s3a://b/x: Spark has no filesystem for scheme s3a (its FileSystem class "
                  "org.apache.hadoop.fs.s3a.S3AFileSystem is not on the classpath); add its Hadoop connector to the "
                  "Spark session (spark-submit --packages org.apache.hadoop:hadoop-aws:"),
])
def test_a_scheme_spark_cannot_read_is_one_line(spark, archives, tmp_path, uri, expected):
    from chaos.cli import main

    out = tmp_path / "new" / "report"
    res = CliRunner().invoke(main, ["report", str(archives["shard-1"]), uri, "--out", str(out)])
    assert res.exit_code == 2, (res.output, res.exception)
    lines = res.stderr.strip().splitlines()
    assert lines[-1].startswith(expected) and all(line.startswith("[report ") for line in lines[:-1])
    assert "Traceback" not in res.output and not (tmp_path / "new").exists()


def test_staging_is_removed_on_an_error_and_on_ctrl_c(spark, archives, tmp_path, hadoop_file_uris, monkeypatch):
    from chaos.cli import main
    from chaos.report import job

    broken = tmp_path / "broken"
    shutil.copytree(archives["shard-2"], broken)
    (broken / "explore.json").write_text("{not json")
    mine = tmp_path / "mine"
    mine.mkdir()
    res = CliRunner().invoke(main, ["report", broken.as_uri(), "--out", str(mine)])
    assert res.exit_code == 2 and res.stderr.strip().splitlines()[-1] == (
        f"chaos: error: {broken.as_uri()}/explore.json: not valid JSON (unexpected character, expected a string "
        "key); restore the summary chaos explore wrote, or delete it")
    assert list(mine.iterdir()) == []  # an --out that existed is kept, and only what it held

    seen: list[Path] = []

    def interrupted(staged: list[Archive]):
        seen.extend(a.root for a in staged if a.uri is not None)
        assert all((root / "explore.json").is_file() for root in seen)  # staged: the copy is there
        raise KeyboardInterrupt

    monkeypatch.setattr(job, "read_archives", interrupted)
    res = CliRunner().invoke(main, ["report", archives["shard-2"].as_uri(), "--out", str(tmp_path / "new" / "out")])
    assert res.exit_code == 130 and len(seen) == 1  # chaos: interrupted
    assert not seen[0].exists() and not (tmp_path / "new").exists()
