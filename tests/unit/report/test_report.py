"""The report job over the fixture archive: tables, re-check, HTML, bad input.

One Spark job builds the report (session fixture ``report``); the tests read its
Parquet tables (with pandas, as a user would), its JSON summary and its HTML.
"""

from __future__ import annotations

import html
import json
import shutil
import subprocess
import tempfile
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner

from chaos.errors import UsageError
from chaos.history import HISTORY_FILE

ROOT = Path(__file__).resolve().parents[3]
RECORDED_EXPERIMENTS = {json.loads(p.open().readline())["experiment"]["name"]
                        for p in (ROOT / "fixtures" / "histories" / "recorded").glob("*.jsonl")}
# Fixtures whose histories violate one of the three re-checked invariants (and how).
SPARK_MUST_FIND = {
    "run-delivery-lost-record": "delivery",
    "run-delivery-auto-commit-killed": "delivery",
    "run-generations-member-backwards": "generations",
    "run-ownership-generation-duplicate": "ownership-generation",
}


def table(out: Path, name: str) -> pd.DataFrame:
    return pd.read_parquet(out / "tables" / name)


def run_dirs(archive: Path) -> list[Path]:
    return sorted(p.parent for p in archive.rglob(HISTORY_FILE))


def test_runs_table_has_one_row_per_run_with_night_and_experiment(archive, report):
    out, summary = report
    runs = table(out, "runs")
    dirs = run_dirs(archive)
    assert len(runs) == len(dirs) == summary["runs"]
    assert set(runs["experiment"]) == RECORDED_EXPERIMENTS | {"fixtures"}
    # nightly layout: the night is the directory; flat layout: the first event's UTC date
    nightly = runs[runs["experiment"] == "fixtures"]
    assert set(nightly["date"]) == {"2026-11-20", "2026-11-21"} and nightly["date_from_layout"].all()
    recorded = runs[runs["experiment"] != "fixtures"]
    assert not recorded["date_from_layout"].any() and set(recorded["date"]) >= {"2026-11-22"}
    baseline = runs[runs["experiment"] == "baseline"].iloc[0]
    assert baseline["valid"] == "true" and baseline["send_ok"] > 1000


def test_events_table_has_every_history_line(archive, report):
    out, _ = report
    events = table(out, "events")
    per_run = events.groupby("run").size()
    runs = table(out, "runs").set_index("run_dir")
    for d in run_dirs(archive):
        lines = sum(1 for line in (d / HISTORY_FILE).open("rb") if line.strip()) - 1  # minus the header
        assert per_run[runs.loc[str(d), "run"]] == lines, d
    assert len(events) == sum(per_run)
    # typed columns: a consumed batch has its offsets, a commit its (topic, partition, offset) triples
    consumed = events[events["kind"] == "consumed"].iloc[0]
    assert len(consumed["consumed_offsets"]) >= 1
    commit = events[(events["kind"] == "commit") & events["commit_offsets"].notna()].iloc[0]
    assert {"topic", "partition", "offset"} <= set(commit["commit_offsets"][0])


def test_violations_table_holds_the_failing_runs_findings(report):
    out, _ = report
    v = table(out, "violations")
    lost = v[(v["run"] == "2026-11-20/fixtures/run-delivery-lost-record") & v["violation"]]
    # the same lost record, judged by delivery and by record-anomalies (which says delivery fails for it too)
    assert sorted(lost["checker"]) == ["delivery", "record-anomalies"]
    by_delivery = lost[lost["checker"] == "delivery"].iloc[0]
    assert "t-1@2" in by_delivery["description"] and len(by_delivery["evidence"]) == 1
    skip = v[v["experiment"] == "wrong-skip-records"]
    assert set(skip["checker"]) <= {"delivery", "record-anomalies"}
    assert (skip[skip["checker"] == "delivery"]["violation"]).any()
    baseline = v[(v["experiment"] == "baseline") & v["violation"]]
    assert baseline.empty


def test_derived_tables(report):
    out, summary = report
    faults = table(out, "faults")
    assert {"pause", "kill"} <= set(faults["fault_type"])
    assert faults["ttr_s"].dropna().ge(0).all()
    reb = table(out, "rebalances")
    assert (reb["new_generation"] == reb["old_generation"] + 1).all()
    assert reb["duration_s"].dropna().between(0, 120).all() and reb["duration_s"].notna().any()
    ivs = table(out, "ownership_intervals")
    assert (ivs["end_ns"] >= ivs["start_ns"]).all()
    base = ivs[ivs["experiment"] == "baseline"]  # the recorded baseline run
    assert base["partition"].nunique() == 12  # the baseline workload has 12 partitions
    un = table(out, "partition_unavailability")
    assert (un["unowned_s"] <= un["window_s"] + 1e-9).all()
    nightly = pd.read_csv(out / "nightly.csv")
    fx = nightly[(nightly["experiment"] == "fixtures") & (nightly["date"] == "2026-11-21")].iloc[0]
    assert fx["runs"] == 4 and fx["pass_rate"] == pytest.approx(fx["passed"] / 4)
    trend = pd.read_csv(out / "trend.csv")
    assert trend[(trend["experiment"] == "fixtures") & (trend["date"] == "2026-11-21")]["previous_date"].iloc[0] \
        == "2026-11-20"


def test_spark_recheck_agrees_with_the_checkers_on_every_fixture(report):
    out, summary = report
    rc = pd.read_csv(out / "recheck.csv")
    assert summary["recheck"]["agree"], summary["recheck"]["disagreements"]
    runs = table(out, "runs")
    assert len(rc) == 3 * len(runs)
    compared = rc[rc["compared"]]
    # every (run, invariant) is compared, except where the checker answered unknown (nothing to agree
    # with) and ownership in cooperative and KIP-848 runs (both incremental: the eager rule does not apply)
    unknown = {(r, c) for r, cs in zip(runs["run"], runs["unknown_checkers"], strict=False) for c in cs}
    for r in rc[~rc["compared"]].itertuples():
        assert (r.run, r.invariant) in unknown or (
            r.invariant == "ownership-generation" and ("cooperative" in r.run or "kip848" in r.run)), \
            (r.run, r.invariant, r.note)
    classic = ~rc["run"].str.contains("kip848")  # KIP-848 fixtures: incremental, and many unknown by design
    assert len(compared[classic[rc["compared"]]]) >= 0.9 * classic.sum()
    assert compared["agree"].all()
    # the re-check is not vacuous: it finds the known-bad fixtures' violations itself
    found = compared[compared["spark_violations"] > 0]
    got = {(r.split("/")[-1], inv) for r, inv in zip(found["run"], found["invariant"], strict=False)}
    assert set(SPARK_MUST_FIND.items()) <= got
    clean = {r.split("/")[-1] for r in runs[runs["valid"] == "true"]["run"]}
    assert not {run for run, _ in got} & clean  # nothing found in runs every checker passed


def test_recheck_reports_a_disagreement(report, spark):
    """A checks.json that missed a lost record (here: edited) is reported, not averaged away."""
    from pyspark.sql import functions as F

    from chaos.report.recheck import recheck

    out, _ = report
    events = spark.read.parquet(str(out / "tables" / "events"))
    runs = spark.read.parquet(str(out / "tables" / "runs"))
    violations = spark.read.parquet(str(out / "tables" / "violations"))
    bad_run = "2026-11-20/fixtures/run-delivery-lost-record"
    runs = runs.withColumn("lost", F.when(F.col("run") == bad_run, F.lit(0.0)).otherwise(F.col("lost")))
    rows, _ = recheck(spark, events.where(F.col("run") == bad_run), runs.where(F.col("run") == bad_run),
                      violations.where(F.col("run") == bad_run))
    by_inv = {r["invariant"]: r for r in rows}
    assert by_inv["delivery"]["agree"] is False and by_inv["delivery"]["spark_violations"] == 1
    assert by_inv["generations"]["agree"] is True


def test_summary_json_and_csv(report):
    out, summary = report
    on_disk = json.loads((out / "summary.json").read_text())
    assert on_disk["runs"] == summary["runs"] and on_disk["recheck"]["agree"]
    for name in ("nightly.csv", "by_invariant.csv", "ttr_by_fault.csv", "liveness.csv", "trend.csv", "recheck.csv",
                 "violations.csv", "runs.csv"):
        assert (out / name).stat().st_size > 0, name
    lost = [v for v in on_disk["violations_list"] if v["run"].endswith("run-delivery-lost-record")]
    assert lost and '"kind":"send_ok"' in lost[0]["evidence_lines"][0]


def test_liveness_distribution_per_experiment_and_kafka_version(report):
    """rebalance-liveness figures from each run's checks.json, aggregated per experiment and Kafka version."""
    out, summary = report
    runs = table(out, "runs")
    judged = runs[runs["longest_rebalance_s"].notna()]
    assert len(judged) and (judged["unavailable_max_s"] >= 0).all()
    ghost = runs[runs["run"].str.endswith("run-liveness-ghost-blocked")]
    assert len(ghost) and set(ghost["liveness_valid"]) == {"false"} and (ghost["longest_rebalance_s"] > 39).all()
    live = pd.read_csv(out / "liveness.csv")
    assert {"experiment", "kafka_version", "runs", "longest_rebalance_p50_s", "longest_rebalance_p90_s",
            "longest_rebalance_max_s", "unavailable_p90_s", "phases_over_bound", "runs_failed"} <= set(live.columns)
    assert set(live["kafka_version"]) >= {"3.9.1", "4.1.0"}
    assert int(live["runs"].sum()) == summary["runs"]
    assert int(live["runs_failed"].sum()) == int((runs["liveness_valid"] == "false").sum())
    assert summary["liveness"] and "Rebalance liveness" in (out / "report.html").read_text()


def test_html_shows_the_violation_with_its_evidence(archive, report):
    out, _ = report
    page = (out / "report.html").read_text()
    assert "record t-1@2 was acknowledged (send_ok) but never processed nor seen by the final read" in page
    events = table(out, "events")
    ev = events[(events["run"] == "2026-11-20/fixtures/run-delivery-lost-record") & (events["kind"] == "send_ok")
                & (events["partition"] == 1) & (events["record_offset"] == 2)]
    # the evidence is the history line as written, read from the run's file by its seq
    history = archive / "2026-11-20" / "fixtures" / "run-delivery-lost-record" / HISTORY_FILE
    line = next(raw for raw in history.read_text().splitlines()[1:] if json.loads(raw)["seq"] == ev.iloc[0]["seq"])
    assert html.escape(line) in page
    assert page.count("data:image/png;base64,") >= 2 + 4  # distribution plots + 4 timelines


@pytest.mark.skipif(shutil.which("chromium") is None,
                    reason="chromium not installed (apt-get install -y chromium): cannot screenshot the report")
def test_html_renders_in_headless_chromium(report, tmp_path):
    out, _ = report
    shot = tmp_path / "report.png"
    profile = tempfile.mkdtemp(prefix="chromium-profile-")
    try:
        res = subprocess.run(
            ["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
             "--disable-component-update", "--disable-sync", "--no-first-run", f"--user-data-dir={profile}",
             f"--screenshot={shot}", "--window-size=1400,2000", (out / "report.html").resolve().as_uri()],
            capture_output=True, text=True, timeout=120)
    finally:
        shutil.rmtree(profile, ignore_errors=True)
    assert shot.exists(), res.stderr[-2000:]
    assert shot.stat().st_size > 50_000  # a blank page is a few kB
    from PIL import Image

    with Image.open(shot) as img:
        assert img.size == (1400, 2000)
        colours = img.convert("RGB").resize((140, 200)).getcolors(maxcolors=100_000)
        assert colours is not None and len(colours) > 50  # tables, badges, text: not an empty page


def test_bad_input_is_one_usage_error(tmp_path):
    from chaos.report.archive import discover

    with pytest.raises(UsageError, match="no such results directory"):
        discover(tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(UsageError, match="no runs found"):
        discover(tmp_path / "empty")
    run = tmp_path / "bad" / "exp" / "run-000-seed-1"
    run.mkdir(parents=True)
    (run / HISTORY_FILE).write_text('{"seq": 1}\n')
    with pytest.raises(UsageError, match="not a history header"):
        discover(tmp_path / "bad")


def test_cli_exit_2_on_missing_dir(tmp_path):
    from chaos.report.command import report as report_cmd

    res = CliRunner(mix_stderr=False).invoke(report_cmd, [str(tmp_path / "nope"), "--out", str(tmp_path / "o")])
    assert res.exit_code == 2
    assert res.stderr.strip().splitlines()[-1].startswith("chaos: error: ")
    assert "no such results directory" in res.stderr


def test_corrupt_history_names_the_line_and_a_torn_tail_is_tolerated(archive, spark, tmp_path):
    from chaos.report.archive import discover
    from chaos.report.tables import history_errors, parse_events

    src = archive / "2026-11-20" / "fixtures" / "run-delivery-lost-record" / HISTORY_FILE
    lines = src.read_text().splitlines()
    torn = tmp_path / "torn" / "exp" / "run-000-seed-0"
    torn.mkdir(parents=True)
    (torn / HISTORY_FILE).write_text("\n".join(lines) + '\n{"seq": 99, "ts": 1.0, "mono')
    runs = discover(tmp_path / "torn")
    events, dropped = parse_events(spark, runs)
    with history_errors(runs):
        assert dropped == 1 and events.count() == len(lines) - 1

    for name, bad in [("not-json", "{not json"), ("wrong-type", lines[5].replace('"seq":', '"seq":"x",  "_":', 1)),
                      ("unknown-kind", '{"seq": 5, "ts": 1.0, "mono_ns": 1, "source": "x", "kind": "nope"}')]:
        corrupt = tmp_path / name / "exp" / "run-000-seed-0"
        corrupt.mkdir(parents=True)
        (corrupt / HISTORY_FILE).write_text("\n".join(lines[:5] + [bad] + lines[5:]) + "\n")
        runs = discover(tmp_path / name)
        events, _ = parse_events(spark, runs)
        with pytest.raises(UsageError, match=rf"{corrupt}/history.jsonl:6: .*the history is corrupt"):
            with history_errors(runs):
                events.count()


def test_spark_submit_entry_script_has_the_same_command():
    import sys

    root = Path(__file__).resolve().parents[3]
    res = subprocess.run([sys.executable, str(root / "reports" / "build_report.py"), "--help"],
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 0 and "--spark-master" in res.stdout and "--out" in res.stdout


def test_a_damaged_parquet_table_is_one_usage_error(report, spark, tmp_path):
    from chaos.report.tables import parquet_errors

    out, _ = report
    tables = tmp_path / "tables"
    shutil.copytree(out / "tables" / "runs", tables / "runs")
    for f in (tables / "runs").rglob("*.parquet"):
        f.write_bytes(b"not a parquet file")
    with pytest.raises(UsageError, match="a Parquet table cannot be read"):
        with parquet_errors(tables):
            spark.read.parquet(str(tables / "runs")).collect()
