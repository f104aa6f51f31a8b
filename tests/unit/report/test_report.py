"""The report job over the fixture archive: tables, re-check, HTML, bad input.

One Spark job builds the report (session fixture ``report``); the tests read its
Parquet tables (with pandas, as a user would), its JSON summary and its HTML.
"""

from __future__ import annotations

import html
import json
import re
import shutil
import subprocess
import tempfile
import urllib.parse
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner

from chaos.errors import UsageError
from chaos.history import HISTORY_FILE
from chaos.report.recheck import CHECKER_OF, INVARIANTS

ROOT = Path(__file__).resolve().parents[3]
RECORDED_EXPERIMENTS = {json.loads(p.open().readline())["experiment"]["name"]
                        for p in (ROOT / "fixtures" / "histories" / "recorded").glob("*.jsonl")}
# Fixtures whose histories violate one of the re-checked invariants (and how).
SPARK_MUST_FIND = {
    "run-delivery-lost-record": "delivery",
    "run-delivery-auto-commit-killed": "delivery",
    "run-generations-member-backwards": "generations",
    "run-ownership-generation-duplicate": "ownership-generation",
    "run-ownership-time-unexplained": "ownership-time",
    "run-ownership-time-zombie-commit": "ownership-time",
    "run-delivery-commit-before-process": "delivery-commits",
    "run-committed-offsets-rollback": "committed-offsets",
    "run-fencing-stale-generation": "fencing",
}
#: why a (run, invariant) may be left uncompared besides an unknown checker (chaos/report/recheck.py's notes)
NOT_COMPARED = {
    "ownership-generation": ("cooperative rebalancing",),
    "fencing": ("KIP-848 group", "ts_uncertain_ns"),
    "committed-offsets": ("ts_uncertain_ns", "trailing-read rule"),
    "ownership-time": ("ts_uncertain_ns",),
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
    assert len(rc) == len(INVARIANTS) * len(runs)
    compared = rc[rc["compared"]]
    # every (run, invariant) is compared, except where the checker answered unknown (nothing to agree
    # with), ownership in cooperative and KIP-848 runs (both incremental: the eager rule does not apply),
    # fencing in KIP-848 groups, runs whose commits may carry uncertain stamps, and the trailing-read rule
    unknown = {(r, c) for r, cs in zip(runs["run"], runs["unknown_checkers"], strict=False) for c in cs}
    for r in rc[~rc["compared"]].itertuples():
        excused = any(why in str(r.note) for why in NOT_COMPARED.get(r.invariant, ()))
        assert (r.run, CHECKER_OF.get(r.invariant, r.invariant)) in unknown or excused or (
            r.invariant == "ownership-generation" and "kip848" in r.run), (r.run, r.invariant, r.note)
    trailing = rc[rc["note"].fillna("").str.contains("trailing-read rule")]
    assert set(trailing["run"].str.split("/").str[-1]) <= {"run-committed-offsets-new-coordinator-trailing-read",
                                                           "run-committed-offsets-read-behind-the-store"}
    classic = ~rc["run"].str.contains("kip848")  # KIP-848 fixtures: incremental, and many unknown by design
    assert len(compared[classic[rc["compared"]]]) >= 0.9 * classic.sum()
    assert compared["agree"].all()
    # the re-check is not vacuous: it finds the known-bad fixtures' violations itself
    found = compared[compared["spark_violations"] > 0]
    got = {(r.split("/")[-1], inv) for r, inv in zip(found["run"], found["invariant"], strict=False)}
    assert set(SPARK_MUST_FIND.items()) <= got
    clean = {r.split("/")[-1] for r in runs[runs["valid"] == "true"]["run"]}
    assert not {run for run, _ in got} & clean  # nothing found in runs every checker passed


@pytest.mark.slow
def test_recheck_reports_a_disagreement(report, spark):
    """A checks.json that missed a lost record (here: edited) is reported, not averaged away.

    make test-all only: a re-check of its own is a Spark job of 15 s; make test shows the same disagreement (a
    checks.json whose lost count was edited to 0) in test_recheck_more's archive, judged in that module's one job."""
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
    for name in ("nightly.csv", "by_invariant.csv", "ttr_by_fault.csv", "liveness.csv", "share.csv", "trend.csv",
                 "recheck.csv", "violations.csv", "runs.csv"):
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


def test_share_group_figures_per_experiment_and_kafka_version(report):
    """share-delivery's and share-progress's figures from each share run's checks.json (issue 36): redeliveries per
    1000 records, the time to reacquire a dead member's records; consumer-group runs stay out of the section."""
    out, summary = report
    runs = table(out, "runs")
    share_runs = runs[runs["share_records"].notna()]
    assert len(share_runs) and share_runs["run"].str.contains("/run-share-").all()
    assert runs[runs["run"].str.endswith("run-delivery-lost-record")]["share_records"].isna().all()
    # the near miss where a dead member's records came back in time: its reacquisition is a figure
    back = runs[runs["run"].str.endswith("run-share-member-killed-reacquired-ok")]
    assert len(back) and (back["share_reacquired"] == 2).all() and (back["share_reacquire_max_s"] > 5).all()
    share = pd.read_csv(out / "share.csv")
    row = share[share["experiment"] == "fixtures"].iloc[0]
    assert row["runs"] == len(share_runs[share_runs["experiment"] == "fixtures"])
    assert row["records"] == share_runs["share_records"].sum()
    assert row["redeliveries_per_1000"] == pytest.approx(1000 * share_runs["share_redeliveries"].sum()
                                                         / share_runs["share_records"].sum())
    assert row["reacquire_max_s"] == pytest.approx(share_runs["share_reacquire_max_s"].max())
    assert summary["share"] and "Share groups per experiment" in (out / "report.html").read_text()


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


def test_violations_link_to_run_dirs_and_evidence_lines(archive, report):
    out, summary = report
    page = (out / "report.html").read_text()
    hrefs = set(re.findall(r'<div class="violation">.*?<a href="([^"]+)"', page))
    assert hrefs
    for href in hrefs:
        run_dir = (out / urllib.parse.unquote(href)).resolve()
        assert (run_dir / HISTORY_FILE).is_file(), href  # a relative link that lands on the run directory
    v = next(v for v in summary["violations_list"] if v["run"] == "2026-11-20/fixtures/run-delivery-lost-record")
    lines = (archive / "2026-11-20" / "fixtures" / "run-delivery-lost-record" / HISTORY_FILE).read_text().splitlines()
    for seq, no in zip(v["evidence"], v["evidence_line_numbers"], strict=True):
        assert json.loads(lines[no - 1])["seq"] == seq  # the line number named is the evidence event's line
        assert f"line {no} (seq {seq})" in page


def test_pass_rates_per_experiment_version_client(report):
    out, summary = report
    rates = pd.read_csv(out / "pass_rates.csv")
    assert int(rates["runs"].sum()) == summary["runs"] and int(rates["passed"].sum()) == summary["passed"]
    assert ((rates["pass_rate_low95"] <= rates["pass_rate"]) & (rates["pass_rate"] <= rates["pass_rate_high95"])).all()
    assert set(rates["kafka_version"].dropna()) >= {"3.9.1", "4.1.0"}
    assert "Pass rate per experiment, Kafka version and client" in (out / "report.html").read_text()


#: desktop and phone viewports the report must be readable at
VIEWPORTS = {"desktop": (1280, 900), "narrow": (390, 844)}
#: The page is shown in an iframe of the viewport's size: headless Chromium will not make a window narrower than
#: 500 px, an iframe is any width. The host page writes the framed page's width into its own DOM on load, so
#: --dump-dom tells whether the body overflows the viewport (no devtools protocol needed; reading the frame
#: needs --allow-file-access-from-files, file: URLs being opaque origins otherwise).
_HOST = """<!DOCTYPE html><html><body style="margin:0">
<iframe id="f" src="report.html" style="border:0;display:block;width:{w}px;height:{h}px"></iframe>
<script>document.getElementById("f").addEventListener("load", function () {{
  var d = this.contentDocument, e = document.createElement("div");
  e.id = "kc-probe";
  e.setAttribute("data-scroll-width", String(d.documentElement.scrollWidth));
  e.setAttribute("data-inner-width", String(this.contentWindow.innerWidth));
  e.textContent = d.documentElement.outerHTML;
  document.body.appendChild(e);
}});</script></body></html>"""


def _chromium(args: list[str], url: str) -> subprocess.CompletedProcess[str]:
    profile = tempfile.mkdtemp(prefix="chromium-profile-")
    try:
        return subprocess.run(
            ["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
             "--disable-component-update", "--disable-sync", "--no-first-run", "--hide-scrollbars",
             "--allow-file-access-from-files",
             f"--user-data-dir={profile}", *args, url],
            capture_output=True, text=True, timeout=120)
    finally:
        shutil.rmtree(profile, ignore_errors=True)


@pytest.mark.skipif(shutil.which("chromium") is None,
                    reason="chromium not installed (make setup-browser): cannot screenshot the report")
@pytest.mark.parametrize("viewport", sorted(VIEWPORTS))
def test_html_renders_in_headless_chromium(report, tmp_path, viewport):
    """The page at desktop and phone width: a real picture (not blank), the sections there, no Python
    leftovers (Traceback, nan, None) in its text, and at phone width no horizontal overflow of the body."""
    from PIL import Image

    out, _ = report
    width, height = VIEWPORTS[viewport]
    shot = tmp_path / f"report-{viewport}.png"
    host = out / f".viewport-{viewport}.html"  # beside report.html, which it frames
    host.write_text(_HOST.format(w=width, h=height))
    try:
        res = _chromium([f"--screenshot={shot}", f"--window-size={width},{height}"], host.as_uri())
        probe = _chromium([f"--window-size={width},{height}", "--dump-dom"], host.as_uri()).stdout
    finally:
        host.unlink()
    assert shot.exists(), res.stderr[-2000:]
    shots = Path("/tmp/report-shots")  # for a person to look at
    shots.mkdir(exist_ok=True)
    shutil.copy(shot, shots / shot.name)
    with Image.open(shot) as img:
        assert img.size == (width, height)
        small = img.convert("RGB").resize((width // 10, height // 10))
        colours = small.getcolors(maxcolors=100_000)
        assert colours is not None and len(colours) > 30  # text, tables, badges: not an empty page
        top = max(n for n, _ in colours)
        assert top < 0.97 * small.width * small.height  # not nearly one colour (blank, or an error page)

    m = re.search(r'id="kc-probe" data-scroll-width="(\d+)" data-inner-width="(\d+)">(.*)</div>', probe, re.S)
    assert m, "the probe script did not run: " + probe[-500:]
    scroll, inner = int(m.group(1)), int(m.group(2))
    dom = html.unescape(m.group(3))  # the framed report's DOM after layout, as the browser built it
    for heading in ("Summary per night and experiment", "Pass rate per experiment, Kafka version and client",
                    "Violations and their evidence", "Ownership timelines", "Runs"):
        assert f">{heading}</h" in dom, heading
    assert dom.count("<table") >= 5
    assert "Traceback" not in dom
    # a Python leftover is a cell or a figure that is just None / nan (checkers' descriptions may quote a
    # Python value, e.g. "key None": that is the finding's text, not a rendering slip)
    cells = re.findall(r"<(?:td|b)\b[^>]*>([^<]*)</(?:td|b)>", dom)
    assert len(cells) > 100
    leftovers = [c for c in cells if c.strip() in {"None", "nan", "NaN", "null", "undefined"}]
    assert not leftovers, leftovers[:5]
    assert inner == width
    assert scroll <= inner, f"the page is {scroll}px wide at a {inner}px viewport: something does not wrap or scroll"


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
    with pytest.raises(UsageError, match="history.jsonl:1: the first line must be the header"):
        discover(tmp_path / "bad")


def test_cli_exit_2_on_missing_dir(tmp_path):
    from chaos.report.command import report as report_cmd

    res = CliRunner().invoke(report_cmd, [str(tmp_path / "nope"), "--out", str(tmp_path / "o")])
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
