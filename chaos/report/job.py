"""The report job: archive -> Parquet tables -> aggregates and re-check -> HTML, CSV and JSON.

``build_report`` is what ``chaos report`` and ``reports/build_report.py``
(``spark-submit``) run, over one archive or several (local paths or URIs; their runs merged into one report,
:mod:`chaos.report.archive`). Outputs under ``REPORT``:

- ``tables/<name>/date=.../experiment=.../`` Parquet (see :mod:`chaos.report.tables`);
- ``report.html`` (self-contained), ``summary.json`` (everything below, machine-readable);
- ``nightly.csv``, ``by_invariant.csv``, ``ttr_by_fault.csv``, ``liveness.csv`` (per experiment and Kafka
  version: longest rebalance and unavailability distributions), ``by_versions.csv`` (verdicts and figures per
  experiment x Kafka version x client versions), ``share.csv`` (share groups per experiment and Kafka version:
  redeliveries per 1000 records, time to reacquire a dead member's records), ``trend.csv``, ``recheck.csv``,
  ``violations.csv``, ``runs.csv``, ``findings.csv`` (the findings of ``chaos explore`` archives, one row per
  signature over all archives: :func:`chaos.report.archive.group_findings`; only the header when none).

``summary.json``'s ``archives`` lists the archives as given; ``results_dir`` is the archive when there is one
(null with several); ``findings`` and ``explorations`` (one entry per ``explore.json``) are the findings
section's rows.
"""

from __future__ import annotations

import datetime as dt
import html
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import orjson

from chaos.errors import UsageError
from chaos.report import metrics as report_metrics
from chaos.report import render
from chaos.report.archive import (
    EXPLORATIONS_COLUMNS,
    FINDINGS_COLUMNS,
    Archive,
    Contents,
    RunFiles,
    archive_roots,
    exploration_rows,
    group_findings,
    hadoop_filesystem,
    read_archives,
    stage,
    staging_dir,
)
from chaos.report.recheck import recheck
from chaos.report.render import EvidenceLine
from chaos.report.session import spark_session
from chaos.report.tables import build_tables, parquet_errors

REPORT_FILE = "report.html"
SUMMARY_FILE = "summary.json"
SMALL_ARCHIVE_BYTES = 256 << 20


def stderr_progress() -> Callable[[str], None]:
    t0 = time.monotonic()

    def progress(msg: str) -> None:
        print(f"[report {time.monotonic() - t0:6.1f}s] {msg}", file=sys.stderr, flush=True)

    return progress


def _check_out(out: Path, results: Path) -> None:
    if out.exists() and not out.is_dir():
        raise UsageError(f"{out}: exists and is not a directory; give --out a directory for the report")
    try:
        out.resolve().relative_to(results.resolve())
        raise UsageError(f"{out}: inside the results directory {results}; write the report elsewhere")
    except ValueError:
        pass
    if out.is_dir() and any(out.iterdir()) and not (out / SUMMARY_FILE).exists():
        raise UsageError(f"{out}: not empty and not a previous report; give an empty or new directory")


def _records(df) -> list[dict[str, Any]]:
    return json.loads(df.to_json(orient="records", date_format="iso")) if len(df) else []


def _evidence_lines(runs: list[RunFiles], wanted: list[tuple[str, int]]) -> dict[tuple[str, int], EvidenceLine]:
    """The history lines (as written, with their 1-based line numbers) of the evidence events shown, read
    from the few runs that have them.

    Read here rather than kept in the events table: a copy of every line in Parquet would double what the
    job writes for the few hundred lines the report shows.
    """
    seqs: dict[str, set[int]] = {}
    for run, wanted_seq in wanted:
        seqs.setdefault(run, set()).add(wanted_seq)
    out: dict[tuple[str, int], EvidenceLine] = {}
    for rf in runs:
        want = seqs.get(rf.run_dir.run)
        if not want:
            continue
        with rf.run_dir.history.open("rb") as f:
            next(f, None)  # the header (line 1)
            for line_no, raw in enumerate(f, start=2):
                seq: Any
                # the writer puts seq first ({"seq":N,...}); other lines (hand-made) are parsed
                if raw.startswith(b'{"seq":'):
                    digits = raw[7:27].split(b",", 1)[0].strip()
                    seq = int(digits) if digits.isdigit() else None
                else:
                    try:
                        obj = orjson.loads(raw)
                    except orjson.JSONDecodeError:
                        continue  # a torn last line
                    seq = obj.get("seq") if isinstance(obj, dict) else None
                if seq in want:
                    out[(rf.run_dir.run, seq)] = EvidenceLine(
                        line_no, raw.decode("utf-8", errors="replace").rstrip("\n"))
    return out


def _line_text(ev: EvidenceLine | None) -> str | None:
    return ev.text if ev is not None else None


def _line_no(ev: EvidenceLine | None) -> int | None:
    return ev.line_no if ev is not None else None


def build_report(results: str | os.PathLike[str] | Sequence[str | os.PathLike[str]], out: Path, *,
                 master: str | None = None, timelines: int = 30, max_violations: int = 300,
                 progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Build the report over one archive or several (``results``: paths or URIs, :mod:`chaos.report.archive`);
    returns the summary written to ``summary.json``. Bad input raises ``UsageError``.

    The order is what each step needs: local archives are checked and ``out`` refused before Spark starts (a
    typo costs no JVM start); an archive given as a URI Hadoop reads needs the Spark session first (its
    FileSystem lives in the session's JVM), so the session starts, every such URI's filesystem is resolved
    before anything is written, and each is copied into a staging directory in ``out``, removed when the
    report ends, however it ends.
    """
    try:
        import matplotlib  # noqa: F401 - fail before the Spark job, not after it
        import pandas  # noqa: F401
        import pyspark  # noqa: F401
    except ImportError as exc:
        raise UsageError(f"the report needs {exc.name}: pip install 'kafka-chaos[report]'") from None

    progress = progress or stderr_progress()
    givens = [os.fspath(results)] if isinstance(results, str | os.PathLike) else [os.fspath(r) for r in results]
    if not givens:
        raise UsageError("give at least one results archive")
    out = Path(out)
    roots = archive_roots(givens)
    for root in roots:
        if root is not None:
            _check_out(out, root)
    remote = [g for g, root in zip(givens, roots, strict=True) if root is None]
    spark = None
    staged: Path | None = None
    with ExitStack() as cleanup:
        archives: list[Archive] = []
        if remote:
            progress(f"starting Spark to read {', '.join(remote)}")
            spark = spark_session(master)
            for uri in remote:
                hadoop_filesystem(spark, uri)  # a scheme Spark cannot read: refused before anything is written
            staged = cleanup.enter_context(staging_dir(out))
        for given, root in zip(givens, roots, strict=True):
            if root is None:
                assert spark is not None and staged is not None
                progress(f"copying {given} (the files the report reads) to {staged}")
                # a directory each: two URIs may end in the same name
                archives.append(stage(spark, given, Path(tempfile.mkdtemp(dir=staged))))
            else:
                archives.append(Archive(given, root))
        progress(f"scanning {', '.join(givens)}")
        contents = read_archives(archives)
        runs = contents.runs
        out.mkdir(parents=True, exist_ok=True)
        nights = sorted({r.run_dir.date for r in runs})
        experiments = sorted({r.run_dir.experiment for r in runs})
        progress(f"{len(runs)} runs, {len(experiments)} experiments, {len(nights)} nights"
                 f"{'' if spark is not None else '; starting Spark'}")
        # a session of its own over the shared SparkContext: the report's temp views ("events", "run_bounds", ...)
        # and settings are its own. Two reports built at once in one process shared them and read each other's
        # events (the test session's background build beside a test's own report: its re-check disagreed)
        spark = (spark or spark_session(master)).newSession()
        size = sum(r.run_dir.history.stat().st_size for r in runs)
        if size < SMALL_ARCHIVE_BYTES:
            # Small archives: the job's ~40 queries cost their planning and scheduling, not their data. Compiling
            # whole-stage code for each costs more than it saves; adaptive execution runs each shuffle stage as a
            # job of its own (20-30 per re-check query); one shuffle partition is one task per stage. Together
            # the test archive (114 runs, 8.8 MB): 68 s -> 57 s on local[2] (docs/testing.md, "Spark on small archives").
            spark.conf.set("spark.sql.codegen.wholeStage", "false")
            spark.conf.set("spark.sql.adaptive.enabled", "false")
            spark.conf.set("spark.sql.shuffle.partitions", "1")
        with parquet_errors(out / "tables"):
            return _build(spark, contents, givens, out, nights, experiments, timelines, max_violations, progress)
    raise AssertionError("unreachable")  # pragma: no cover - the block returns or raises


def _build(spark, contents: Contents, givens: list[str], out: Path, nights: list[str], experiments: list[str],
           timelines: int, max_violations: int, progress: Callable[[str], None]) -> dict[str, Any]:
    from pyspark.sql import functions as F

    runs = contents.runs
    t0 = time.monotonic()
    tables = build_tables(spark, runs, out, progress)
    t_tables = time.monotonic() - t0

    progress("aggregates per night and experiment")
    agg = report_metrics.compute(spark, tables)
    progress("re-checking the core invariants with Spark SQL")
    rows, spark_findings = recheck(spark, tables["events"], tables["runs"], tables["violations"],
                                   bounds={rf.run_dir.run: (rf.checks or {}).get("bounds") for rf in runs})
    import pandas as pd

    rc = pd.DataFrame(rows)
    disagreements = rc[rc["agree"] == False] if len(rc) else rc  # noqa: E712 - pandas mask
    t_agg = time.monotonic() - t0 - t_tables

    progress("collecting violations, evidence and timelines")
    violations = (tables["violations"].where(F.col("violation"))
                  .orderBy("date", "experiment", "run", "checker", "finding").toPandas())
    zombies = tables["violations"].where(F.col("zombie_window_s").isNotNull()).select("zombie_window_s").toPandas()
    faults = tables["faults"].toPandas()
    rebalances = tables["rebalances"].select("run", "duration_s").toPandas()
    unavail = tables["partition_unavailability"].select("run", "unowned_s").toPandas()
    runs_pd = tables["runs"].orderBy("date", "experiment", "run").toPandas()
    shown = violations.head(max_violations)
    wanted = [(r["run"], int(s)) for r in shown.to_dict("records") for s in list(r["evidence"])]
    evidence = _evidence_lines(runs, wanted)

    # timelines: failing runs first (the longest histories first: real runs before hand-made ones), then the others
    order = runs_pd.assign(_bad=runs_pd["valid"] != "true").sort_values(["_bad", "events", "run"],
                                                                         ascending=[False, False, True])
    chosen = list(order["run"].head(max(timelines, 0)))
    blocks = []
    if chosen:
        ivs = tables["ownership_intervals"].where(F.col("run").isin(chosen)).select(
            "run", "topic", "partition", "member", "start_t_s", "end_t_s").toPandas()
        for i, run in enumerate(chosen):
            if i % 10 == 0:
                progress(f"timeline {i + 1}/{len(chosen)}")
            blocks.append(f"<h3>{html.escape(run)}</h3>" + render.timeline(
                run, ivs[ivs["run"] == run], faults[faults["run"] == run], violations[violations["run"] == run]))
    if len(runs_pd) > len(chosen):
        blocks.append(f'<p class="note">{len(chosen)} of {len(runs_pd)} runs drawn (failing runs first); '
                      "raise --timelines to draw more</p>")

    progress("writing CSV, JSON and HTML")
    nightly, trend = agg["nightly"], agg["trend"]
    rates = report_metrics.pass_rates(runs_pd)
    # links go to run directories that stay where they are: not to a staged copy (removed after the report)
    run_dirs = {r.run_dir.run: str(r.run_dir.path) for r in runs if r.run_dir.origin is None}
    locations = {r.run_dir.run: r.run_dir.location for r in runs}
    findings = group_findings(contents.findings)
    explorations = exploration_rows(contents.explorations)
    csvs = {"nightly.csv": nightly, "by_invariant.csv": agg["by_invariant"], "ttr_by_fault.csv": agg["ttr_by_fault"],
            "liveness.csv": agg["liveness"], "by_versions.csv": agg["by_versions"], "share.csv": agg["share"],
            "pass_rates.csv": rates,
            "trend.csv": trend, "recheck.csv": rc, "violations.csv": violations,
            "runs.csv": runs_pd.drop(columns=["failed_checkers", "unknown_checkers"]).assign(
                failed_checkers=runs_pd["failed_checkers"].map(lambda v: " ".join(v) if v is not None else "")),
            "findings.csv": _findings_csv(findings)}
    for name, df in csvs.items():
        df.to_csv(out / name, index=False)
    spark_found = spark_findings.groupBy("invariant").count().collect()
    summary: dict[str, Any] = {
        "results_dir": givens[0] if len(givens) == 1 else None, "archives": givens, "report_dir": str(out),
        "generated_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "spark": {"master": spark.sparkContext.master, "version": spark.version},
        "runs": len(runs), "experiments": experiments, "nights": nights,
        "events": int(runs_pd["events"].sum()), "torn_lines_dropped": tables["_torn_lines"],
        "passed": int((runs_pd["valid"] == "true").sum()), "failed": int((runs_pd["valid"] == "false").sum()),
        "inconclusive": int((runs_pd["valid"] == "unknown").sum()),
        "violations": int(len(violations)),
        "nightly": _records(nightly), "trend": _records(trend), "by_invariant": _records(agg["by_invariant"]),
        "ttr_by_fault": _records(agg["ttr_by_fault"]), "liveness": _records(agg["liveness"]),
        "by_versions": _records(agg["by_versions"]), "share": _records(agg["share"]),
        "findings": findings, "explorations": explorations,
        "pass_rates": _records(rates), "flaky": int(rates["flaky"].sum()) if len(rates) else 0,
        "recheck": {"compared": int(rc["compared"].sum()) if len(rc) else 0,
                    "agree": bool(len(disagreements) == 0),
                    "spark_findings": {r["invariant"]: r["count"] for r in spark_found},
                    "disagreements": _records(disagreements)},
        "violations_list": [
            {**{k: v for k, v in r.items() if k != "evidence"}, "evidence": [int(s) for s in r["evidence"]],
             "evidence_lines": [_line_text(evidence.get((r["run"], int(s)))) for s in r["evidence"]],
             "evidence_line_numbers": [_line_no(evidence.get((r["run"], int(s)))) for s in r["evidence"]],
             "run_dir": locations.get(r["run"])}
            for r in json.loads(shown.to_json(orient="records"))],
        "timings_s": {"tables": round(t_tables, 2), "aggregates_and_recheck": round(t_agg, 2)},
        "tables": {name: str(out / "tables" / name) for name in tables if not name.startswith("_")},
        "files": {"html": str(out / REPORT_FILE), **{n: str(out / n) for n in csvs}},
    }
    (out / SUMMARY_FILE).write_text(json.dumps(summary, indent=1, default=str))

    failing = lambda r: "fail" if r.get("valid") == "false" else ("warn" if r.get("valid") != "true" else "")  # noqa: E731
    rc_view = rc[(rc["agree"] == False) | (rc["spark_violations"] > 0) | (rc["checker_findings"] > 0)] if len(rc) else rc  # noqa: E712
    agree_line = ("<p><span class='badge ok'>agree</span> the Spark re-check agrees with the per-run checkers on "
                  f"all {summary['recheck']['compared']} compared (run, invariant) pairs.</p>"
                  if summary["recheck"]["agree"] else
                  f"<p><span class='badge bad'>{len(disagreements)} disagreement(s)</span> between the Spark "
                  "re-check and the per-run checkers (below): a checker bug or a stale checks.json.</p>")
    not_compared = rc[~rc["compared"]] if len(rc) else rc
    page = render.page(
        meta=html.escape(f"{', '.join(givens)} - {len(runs)} runs, {summary['events']:,} events, nights "
                         f"{nights[0]} .. {nights[-1]} - generated {summary['generated_at']} with Spark "
                         f"{spark.version} ({spark.sparkContext.master})"),
        cards="".join(f'<div class="card">{k}<b>{v}</b></div>' for k, v in [
            ("runs", len(runs)), ("passed", summary["passed"]), ("failed", summary["failed"]),
            ("inconclusive", summary["inconclusive"]), ("violations", summary["violations"]),
            ("flaky", summary["flaky"]),
            ("re-check", "agrees" if summary["recheck"]["agree"] else "DISAGREES"),
            *([("findings", len(findings))] if findings or explorations else [])]),
        findings=_findings_section(findings, explorations),
        summary_table=render.table(nightly, ["date", "experiment", "runs", "passed", "failed", "inconclusive",
                                             "pass_rate", "events", "duplicate_rate", "rebalances",
                                             "rebalance_p90_s", "faults", "fault_ttr_p50_s", "fault_ttr_p90_s",
                                             "run_ttr_max_s", "zombie_windows", "zombie_max_s", "unowned_mean_s",
                                             "unowned_max_s"], left=["date", "experiment"],
                                   row_class=lambda r: "fail" if r["failed"] else "")
        + _pass_rate_section(rates),
        recheck=agree_line + render.table(rc_view, ["run", "invariant", "spark_violations", "checker_findings",
                                                    "agree", "spark_example", "checker_example", "note"],
                                          left=["run", "invariant", "spark_example", "checker_example", "note"],
                                          row_class=lambda r: "fail" if r["agree"] is False else "")
        + (f'<p class="note">not compared: {len(not_compared)} (run, invariant) pairs: '
           f'{html.escape("; ".join(sorted(set(not_compared["note"].dropna()))))}</p>' if len(not_compared) else ""),
        by_invariant=render.table(agg["by_invariant"], left=["date", "experiment", "invariant"]),
        ttr_table=render.table(agg["ttr_by_fault"], left=["date", "experiment", "fault_type"]),
        liveness_table=render.table(agg["liveness"], left=["experiment", "kafka_version"]),
        share_table=(render.table(agg["share"], left=["experiment", "kafka_version"]) if len(agg["share"]) else
                     '<p class="note">no share-group runs</p>'),
        versions_table=_versions_section(agg["by_versions"]),
        plots=render.distribution_plots(faults, rebalances, zombies, unavail, nightly),
        trend_table=render.table(trend, left=["date", "experiment", "previous_date"],
                                 row_class=lambda r: "fail" if (r.get("pass_rate_change") or 0) < 0 else ""),
        violations=render.violation_blocks(violations, evidence, max_violations, run_dirs, out),
        timelines="\n".join(blocks),
        runs_table=render.table(runs_pd, ["run", "valid", "kafka_version", "client_versions", "failed_checkers",
                                          "events", "send_ok", "lost",
                                          "duplicate_deliveries", "rebalances", "fault_count", "time_to_recover_s",
                                          "zombie_window_max_s", "duration_s"],
                                left=["run", "valid", "kafka_version", "client_versions", "failed_checkers"],
                                row_class=failing),
        files="<ul>" + "".join(f"<li><code>{html.escape(str(p))}</code></li>"
                               for p in [out / SUMMARY_FILE, *[out / n for n in csvs],
                                         *[Path(p) for p in summary["tables"].values()]]) + "</ul>",
    )
    (out / REPORT_FILE).write_text(page)
    progress(f"done: {out / REPORT_FILE}")
    return summary


def _pass_rate_section(rates) -> str:
    """Pass rate per experiment x Kafka version x client with its 95% Wilson interval; flaky groups marked."""
    view = rates.assign(
        interval95=[f"{lo:.2f} .. {hi:.2f}" if lo is not None and hi is not None else ""
                    for lo, hi in zip(rates["pass_rate_low95"], rates["pass_rate_high95"], strict=True)],
        flaky=["FLAKY" if f else "" for f in rates["flaky"]],
        kafka_version=rates["kafka_version"].fillna("unknown"), client=rates["client"].fillna("unknown"),
    ) if len(rates) else rates
    return ('<h3 id="pass-rates">Pass rate per experiment, Kafka version and client</h3>'
            '<p class="note">Passed runs / all runs with the 95% Wilson score interval. FLAKY: the same experiment, '
            "Kafka version and client both passed and failed on the same kafka-chaos commit (runs with no recorded "
            "commit are never grouped together).</p>"
            + render.table(view, ["experiment", "kafka_version", "client", "runs", "passed", "failed",
                                  "inconclusive", "pass_rate", "interval95", "commits", "flaky", "flaky_commits"],
                           left=["experiment", "kafka_version", "client", "interval95", "flaky", "flaky_commits"],
                           row_class=lambda r: "warn" if r["flaky"] else ("fail" if r["failed"] else "")))


#: the columns of the per-version table, as shown
VERSIONS_COLUMNS = ["experiment", "kafka_version", "client_versions", "runs", "passed", "failed", "inconclusive",
                    "unjudged", "pass_rate", "lost", "duplicate_deliveries", "duplicate_rate", "ttr_p50_s",
                    "ttr_p90_s", "ttr_max_s", "longest_rebalance_p90_s", "unavailable_max_s", "zombie_windows"]


def _versions_section(by_versions) -> str:
    """Verdicts and the main figures per experiment x Kafka version x client versions (``by_versions.csv``);
    a row with a failed run is marked as failing, one with an inconclusive run as a warning."""
    return render.table(by_versions, VERSIONS_COLUMNS, left=["experiment", "kafka_version", "client_versions"],
                        row_class=lambda r: "fail" if r["failed"] else ("warn" if r["inconclusive"] else ""))


def _findings_csv(findings: list[dict[str, Any]]):
    """``findings.csv``: one row per signature (:func:`chaos.report.archive.group_findings`); lists of names
    space-separated (as ``runs.csv``'s ``failed_checkers``), the archives ``; ``-separated (paths may hold
    spaces). Only the header when there are none."""
    import pandas as pd

    joined = {"checkers": " ", "fault_kinds": " ", "shards": " ", "archives": "; "}
    return pd.DataFrame([{**f, **{k: sep.join(f[k]) for k, sep in joined.items()}} for f in findings],
                        columns=FINDINGS_COLUMNS)


def _findings_section(findings: list[dict[str, Any]], explorations: list[dict[str, Any]]) -> str:
    """The findings of ``chaos explore`` over every archive (``findings.csv``) and the explorations they came from
    (each ``explore.json``); a finding reproduced as a failure (under or without faults) is marked as failing,
    one not reproduced or not shrunk as a warning. Empty when no archive is an explore archive and none holds a
    finding; a sentence when the explorations recorded none."""
    import pandas as pd

    if not findings and not explorations:
        return ""
    head = ('<h2 id="findings">Findings of chaos explore</h2>\n<p class="note">One row per finding signature (the '
            "checkers that failed, the fault kinds, the class) over every archive: the same finding in several shards "
            "is one row, its hits summed and its archives and shards listed; found after, the finding directory, the "
            "first run, the minimal experiment and its failure rate and the explanation are those of the copy found "
            "earliest. Runs below <code>findings/</code> (the red run's copy, its replay, the shrink's runs) are not "
            "counted among the runs.</p>\n")
    if findings:
        view = pd.DataFrame(findings, columns=FINDINGS_COLUMNS).assign(
            minimal_failure_rate=[f"{f['minimal_failed_runs']} of {f['minimal_runs']}" if f["minimal_runs"] else ""
                                  for f in findings])
        body = render.table(view, ["signature", "finding_class", "checkers", "fault_kinds", "workload", "hits",
                                   "shards", "found_after_s", "minimal_failure_rate", "finding_dir", "archives",
                                   "explanation"],
                            left=["signature", "finding_class", "checkers", "fault_kinds", "workload", "shards",
                                  "finding_dir", "archives", "explanation"],
                            row_class=lambda r: "fail" if r["finding_class"] in ("under_faults", "without_faults")
                            else "warn")
    else:
        body = (f'<p class="note">No findings were recorded in the {len(explorations)} exploration(s) below.</p>')
    explored = ('<h3 id="explorations">Explorations</h3>'
                + render.table(pd.DataFrame(explorations, columns=EXPLORATIONS_COLUMNS), EXPLORATIONS_COLUMNS,
                               left=["archive", "workload", "shard"]) if explorations else "")
    return head + body + explored
