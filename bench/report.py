"""Benchmark: the report's aggregation on local Spark against the same aggregation in pandas.

    .venv/bin/python bench/report.py                       # 1,000 runs x 10,000 events (~10M events)
    .venv/bin/python bench/report.py --runs 100 --events-per-run 2000 --sizes 10,50,100

Generates a synthetic archive in the nightly layout
(``<dir>/<YYYY-MM-DD>/<experiment>/run-<k>-seed-<s>/history.jsonl``) from
``tests.simulation`` (valid eager-group histories with kills and pauses),
then, for each size (a prefix of the runs), times in separate processes:

- **spark**: ``chaos.report.tables.parse_events`` (the report's own parser: Spark's JSON
  reader with the explicit schema derived from ``chaos/history/event.py``, each line parsed
  once, only the columns used converted) into a Parquet table in a temporary directory, as the
  report writes its events table, and the aggregation below in Spark SQL over it (lost and
  duplicate offsets in one shuffle keyed by an integer run id), on ``local[2]``;
- **pandas**: the same histories parsed line by line with orjson into one DataFrame,
  and the same aggregation with pandas.

The aggregation (the event-derived part of the report): per run, events, ``send_ok``,
consumed offsets, duplicate deliveries, records lost (``send_ok`` not consumed nor
finally read: an anti-join), rebalances and their duration (preparing_rebalance ->
first ``assigned`` of the next generation); then per night and experiment: runs,
events, duplicate rate, lost, rebalances, p50/p90 rebalance duration. Both engines'
results are compared (they must match) before any time is reported.

Peak memory is the peak RSS of the measuring process and all its children (for Spark:
the JVM), sampled every 100 ms.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from multiprocessing import Pool
from pathlib import Path

NIGHTS = ("2026-11-17", "2026-11-18", "2026-11-19", "2026-11-20", "2026-11-21")
EXPERIMENTS = ("kill-member", "pause-member", "static-restart", "baseline")


# ----------------------------------------------------------------------------- archive

def _write_run(args: tuple[str, int, int]) -> int:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository root: tests.simulation
    from chaos.history import HISTORY_FILE, write_history
    from tests.simulation import SimulationSpec, simulate

    root, k, events = args
    night = NIGHTS[k % len(NIGHTS)]
    exp = EXPERIMENTS[(k // len(NIGHTS)) % len(EXPERIMENTS)]
    spec = SimulationSpec(seed=k, events=events, members=3, partitions=12, static=exp == "static-restart",
                          faults=exp != "baseline")
    run = Path(root) / night / exp / f"run-{k:04d}-seed-{k}"
    run.mkdir(parents=True, exist_ok=True)
    h = simulate(spec)
    write_history(run / HISTORY_FILE, h)
    return len(h.events)


def generate(root: Path, runs: int, events: int) -> int:
    stamp = root / "ARCHIVE.json"
    want = {"runs": runs, "events_per_run": events}
    if stamp.exists() and json.loads(stamp.read_text()).get("spec") == want:
        return json.loads(stamp.read_text())["events"]
    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    with Pool(2) as pool:
        total = sum(pool.imap_unordered(_write_run, [(str(root), k, events) for k in range(runs)], chunksize=4))
    stamp.write_text(json.dumps({"spec": want, "events": total}))
    return total


def run_dirs(root: Path, n: int) -> list[Path]:
    dirs = sorted(p.parent for p in root.rglob("history.jsonl"))
    return sorted(dirs, key=lambda p: int(p.name.split("-")[1]))[:n]


# ----------------------------------------------------------------------------- engines

#: Records lost and duplicate deliveries in ONE shuffle: every produced, consumed and finally read offset
#: becomes a row keyed by (run, topic, partition, offset), and one aggregation per key says whether it was
#: lost (produced, never consumed nor read back) and how many of its deliveries repeat a group's earlier one
#: (count(DISTINCT group_id, ...) and an anti-join would shuffle the same ~2 rows per event three times).
#: The rows are distributed by offset first, so the per-(offset, group) and the per-offset aggregation run in
#: the stage that reads the shuffle, both as plain hash aggregates: a map-side partial aggregation cannot
#: merge anything here (an offset's send_ok, consumed and final rows come from different scans of the union),
#: and ``collect_set`` of the groups made it an object hash aggregate (``--profile`` at 10M events: the
#: query's task CPU fell from 46.4 s to 32.5 s, its map stage's from 25.6 s to 9.0 s).
#: A delivery's group is a key of the first aggregation (NULL is a group, as in pandas' drop_duplicates).
_SPARK_AGG = """
WITH offs AS (
  SELECT run_id, topic, partition, record_offset AS o, 0 AS tag, CAST(NULL AS STRING) AS group_id
  FROM events WHERE kind = 'send_ok'
  UNION ALL
  SELECT run_id, topic, partition, o, 1 AS tag, group_id
  FROM events LATERAL VIEW explode(consumed_offsets) x AS o WHERE kind = 'consumed'
  UNION ALL
  SELECT run_id, topic, r.partition, r.offset, 2 AS tag, CAST(NULL AS STRING)
  FROM events LATERAL VIEW explode(final_records) x AS r WHERE kind = 'final_read'),
per_group AS (
  SELECT run_id, topic, partition, o, greatest(count_if(tag = 1) - 1, 0) AS d, min(tag) AS lo, max(tag) AS hi
  FROM (SELECT * FROM offs DISTRIBUTE BY run_id, topic, partition, o) GROUP BY run_id, topic, partition, o, group_id),
per_offset AS (
  SELECT run_id, sum(d) AS dups, min(lo) = 0 AND max(hi) = 0 AS lost
  FROM per_group GROUP BY run_id, topic, partition, o),
per_run_offsets AS (
  SELECT run_id, sum(dups) AS duplicates, count_if(lost) AS lost FROM per_offset GROUP BY run_id),
prep AS (SELECT run_id, group_id, generation, mono_ns FROM events
         WHERE kind = 'broker_log' AND log_event = 'preparing_rebalance'),
per_run AS (SELECT run_id, first(date) AS date, first(experiment) AS experiment, count(*) AS events,
                   count_if(kind = 'send_ok') AS send_ok FROM events GROUP BY run_id),
reb AS (SELECT run_id, count(DISTINCT mono_ns) AS n FROM prep GROUP BY run_id)
SELECT r.date, r.experiment, count(*) AS runs, sum(r.events) AS events, sum(r.send_ok) AS send_ok,
       sum(coalesce(o.duplicates, 0)) AS duplicates, sum(coalesce(o.lost, 0)) AS lost,
       sum(coalesce(rb.n, 0)) AS rebalances,
       sum(coalesce(o.duplicates, 0)) / sum(r.send_ok) AS duplicate_rate
FROM per_run r LEFT JOIN per_run_offsets o USING (run_id) LEFT JOIN reb rb USING (run_id)
GROUP BY r.date, r.experiment
"""
_SPARK_REB = """
SELECT e.date, e.experiment, percentile(duration_s, 0.5) AS reb_p50_s, percentile(duration_s, 0.9) AS reb_p90_s
FROM (SELECT p.run_id, p.mono_ns, (min(a.mono_ns) - p.mono_ns) / 1e9 AS duration_s
      FROM (SELECT run_id, group_id, generation, mono_ns FROM events
            WHERE kind = 'broker_log' AND log_event = 'preparing_rebalance') p
      JOIN (SELECT run_id, group_id, generation, mono_ns FROM events WHERE kind = 'assigned') a
        ON a.run_id = p.run_id AND a.group_id = p.group_id AND a.generation = p.generation + 1
       AND a.mono_ns >= p.mono_ns
      GROUP BY p.run_id, p.mono_ns) d
JOIN runs e USING (run_id)
GROUP BY e.date, e.experiment
"""


def spark_engine(root: Path, n: int) -> tuple[dict, dict]:
    from pyspark.sql import functions as F

    from chaos.report.archive import discover
    from chaos.report.session import spark_session
    from chaos.report.tables import history_errors, parse_events

    t0 = time.perf_counter()
    spark = spark_session("local[2]", shuffle_partitions=8)
    spark.range(1).count()
    t_start = time.perf_counter() - t0
    wanted = {str(p) for p in run_dirs(root, n)}
    t0 = time.perf_counter()
    runs = [r for r in discover(root) if str(r.run_dir.path) in wanted]
    events, _ = parse_events(spark, runs)
    # a small integer per run: what the aggregation shuffles on (the run key is a ~40-character path)
    ids = spark.createDataFrame([(r.run_dir.run, i) for i, r in enumerate(runs)], "run STRING, run_id INT")
    events = events.join(F.broadcast(ids), "run").select(
        "run_id", "date", "experiment", "kind", "group_id", "topic", "partition", "record_offset", "generation",
        "mono_ns", "consumed_offsets", "final_records", "log_event")
    # As the report does (chaos/report/tables.py): the parsed events written to Parquet and the queries read
    # their columns back, not a cached table: building the cache cost more than the write (10M events,
    # interleaved runs of this half: parse + agg 62-82 s via Parquet in four, 76-83 s via the cache in three).
    with tempfile.TemporaryDirectory(prefix="kc-bench-events-") as table:
        with history_errors(runs):
            events.write.mode("overwrite").parquet(table)
        events = spark.read.parquet(table)
        t_parse = time.perf_counter() - t0
        events.createOrReplaceTempView("events")
        spark.createDataFrame([(i, r.run_dir.date, r.run_dir.experiment) for i, r in enumerate(runs)],
                              "run_id INT, date STRING, experiment STRING").createOrReplaceTempView("runs")
        t0 = time.perf_counter()
        agg = spark.sql(_SPARK_AGG).toPandas()
        reb = spark.sql(_SPARK_REB).toPandas()
        t_agg = time.perf_counter() - t0
        spark.stop()
    out = agg.merge(reb, on=["date", "experiment"], how="left")
    return {"startup_s": t_start, "parse_s": t_parse, "aggregate_s": t_agg}, _canon(out)


def pandas_engine(root: Path, n: int) -> tuple[dict, dict]:
    import orjson
    import pandas as pd

    t0 = time.perf_counter()
    cols = {k: [] for k in ("run", "date", "experiment", "kind", "group_id", "topic", "partition", "record_offset",
                            "generation", "mono_ns", "offsets", "log_event")}
    final_rows = []
    for d in run_dirs(root, n):
        run, exp, date = str(d), d.parent.name, d.parent.parent.name
        with (d / "history.jsonl").open("rb") as f:
            f.readline()
            for line in f:
                e = orjson.loads(line)
                kind = e["kind"]
                cols["run"].append(run)
                cols["date"].append(date)
                cols["experiment"].append(exp)
                cols["kind"].append(kind)
                cols["group_id"].append(e.get("group"))
                cols["topic"].append(e.get("topic"))
                cols["partition"].append(e.get("partition"))
                cols["record_offset"].append(e.get("offset"))
                cols["generation"].append(e.get("generation"))
                cols["mono_ns"].append(e["mono_ns"])
                cols["offsets"].append(e.get("offsets") if kind == "consumed" else None)
                cols["log_event"].append(e.get("event"))
                if kind == "final_read":
                    final_rows.extend((run, e["topic"], p, o) for p, o in e["records"])
    ev = pd.DataFrame(cols)
    t_parse = time.perf_counter() - t0
    t0 = time.perf_counter()
    per_run = ev.groupby("run").agg(date=("date", "first"), experiment=("experiment", "first"),
                                    events=("kind", "size"), send_ok=("kind", lambda k: int((k == "send_ok").sum())))
    cons = ev[ev["kind"] == "consumed"][["run", "group_id", "topic", "partition", "offsets"]].explode("offsets")
    cons = cons.rename(columns={"offsets": "o"})
    dup = (cons.groupby("run").size() - cons.drop_duplicates().groupby("run").size()).rename("duplicates")
    produced = ev[ev["kind"] == "send_ok"][["run", "topic", "partition", "record_offset"]].drop_duplicates()
    produced = produced.rename(columns={"record_offset": "o"})
    fin = pd.DataFrame(final_rows, columns=["run", "topic", "partition", "o"])
    seen = pd.concat([cons[["run", "topic", "partition", "o"]], fin]).drop_duplicates()
    seen["o"] = seen["o"].astype("int64")
    m = produced.merge(seen, on=["run", "topic", "partition", "o"], how="left", indicator=True)
    lost = m[m["_merge"] == "left_only"].groupby("run").size().rename("lost")
    prep = ev[(ev["kind"] == "broker_log") & (ev["log_event"] == "preparing_rebalance")][
        ["run", "group_id", "generation", "mono_ns"]]
    asg = ev[(ev["kind"] == "assigned") & ev["generation"].notna()][["run", "group_id", "generation", "mono_ns"]]
    asg = asg.assign(generation=asg["generation"] - 1)
    j = prep.merge(asg, on=["run", "group_id", "generation"], how="left", suffixes=("", "_a"))
    first = j[j["mono_ns_a"] >= j["mono_ns"]].groupby(["run", "mono_ns"], as_index=False)["mono_ns_a"].min()
    reb = prep[["run", "mono_ns"]].drop_duplicates().merge(first, on=["run", "mono_ns"], how="left")
    reb["duration_s"] = (reb["mono_ns_a"] - reb["mono_ns"]) / 1e9
    n_reb = reb.groupby("run").size().rename("rebalances")
    r = per_run.join(dup).join(lost).join(n_reb).fillna({"duplicates": 0, "lost": 0, "rebalances": 0})
    out = r.groupby(["date", "experiment"]).agg(runs=("events", "size"), events=("events", "sum"),
                                                send_ok=("send_ok", "sum"), duplicates=("duplicates", "sum"),
                                                lost=("lost", "sum"), rebalances=("rebalances", "sum")).reset_index()
    out["duplicate_rate"] = out["duplicates"] / out["send_ok"]
    rb = reb.merge(per_run[["date", "experiment"]], left_on="run", right_index=True).groupby(["date", "experiment"])
    q = rb["duration_s"].quantile([0.5, 0.9]).unstack().rename(columns={0.5: "reb_p50_s", 0.9: "reb_p90_s"})
    out = out.merge(q.reset_index(), on=["date", "experiment"], how="left")
    t_agg = time.perf_counter() - t0
    return {"startup_s": 0.0, "parse_s": t_parse, "aggregate_s": t_agg}, _canon(out)


def _canon(df) -> dict:
    df = df.sort_values(["date", "experiment"])
    return {f"{r['date']}/{r['experiment']}": {k: round(float(r[k]), 6) for k in
                                               ("runs", "events", "send_ok", "duplicates", "lost", "rebalances",
                                                "duplicate_rate", "reb_p50_s", "reb_p90_s")}
            for r in df.to_dict("records")}


# ----------------------------------------------------------------------------- measuring

def _child(engine: str, root: Path, n: int, profile: Path | None) -> None:
    if profile is not None and engine == "spark":
        # Spark's own event log: every job, stage and task with its times and metrics, read back by _profile
        profile.mkdir(parents=True, exist_ok=True)
        os.environ["PYSPARK_SUBMIT_ARGS"] = (f"--conf spark.eventLog.enabled=true --conf spark.eventLog.dir={profile}"
                                             " --conf spark.eventLog.compress=false pyspark-shell")
    fn = spark_engine if engine == "spark" else pandas_engine
    times, result = fn(root, n)
    print(json.dumps({"times": times, "result": result}))


def _profile(log_dir: Path) -> list[str]:
    """Where the Spark job's time goes, from its event log: per SQL query (the parse's cache, the two
    aggregations) its wall time, the time inside its stages (task run time summed over both cores) and
    the wall time no stage covers (planning, code generation, scheduling: what a small archive pays
    whatever its size)."""
    # Spark 4 writes a rolling log by default: a directory eventlog_v2_<app>/ of events_<n>_<app> files
    logs = sorted((p for p in log_dir.rglob("*") if p.is_file() and p.name.startswith("events_")),
                  key=lambda p: [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", p.name)])
    if not logs:
        return ["(no Spark event log written)"]
    queries: dict[int, dict] = {}
    stage_exec: dict[int, int] = {}
    stage_ms: dict[int, tuple[int, int, str, int]] = {}
    job_stages: dict[int, list[int]] = {}
    job_query: dict[int, int] = {}
    for line in (ln for p in logs for ln in p.read_text(errors="replace").splitlines() if ln.strip()):
        ev = json.loads(line)
        kind = ev.get("Event", "")
        if kind.endswith("SparkListenerSQLExecutionStart"):
            queries[ev["executionId"]] = {"desc": ev.get("description", ""), "start": ev["time"], "end": None}
        elif kind.endswith("SparkListenerSQLExecutionEnd") and ev["executionId"] in queries:
            queries[ev["executionId"]]["end"] = ev["time"]
        elif kind == "SparkListenerJobStart":
            job_stages[ev["Job ID"]] = ev.get("Stage IDs", [])
            qid = (ev.get("Properties") or {}).get("spark.sql.execution.id")
            if qid is not None:
                job_query[ev["Job ID"]] = int(qid)
        elif kind == "SparkListenerTaskEnd":
            m = ev.get("Task Metrics") or {}
            sid = ev["Stage ID"]
            # CPU time (ns), not run time: what the work costs, whatever else the machine is doing
            stage_exec[sid] = stage_exec.get(sid, 0) + int(m.get("Executor CPU Time", 0)) // 1_000_000
        elif kind == "SparkListenerStageCompleted":
            si = ev["Stage Info"]
            if "Submission Time" in si and "Completion Time" in si:
                stage_ms[si["Stage ID"]] = (si["Submission Time"], si["Completion Time"], si["Stage Name"],
                                            si["Number of Tasks"])
    out = [f"{'query':>5} {'wall s':>7} {'in stages s':>11} {'outside s':>9} {'task CPU s':>10} {'stages':>6}  "
           "first stage"]
    for qid, q in sorted(queries.items()):
        if q["end"] is None:
            continue
        sids = sorted({s for j, ss in job_stages.items() if job_query.get(j) == qid for s in ss if s in stage_ms})
        spans = sorted((stage_ms[s][0], stage_ms[s][1]) for s in sids)
        covered, cur_s, cur_e = 0, None, None
        for a, b in spans:  # the union of the stages' intervals (stages of one query can overlap)
            if cur_e is None or a > cur_e:
                covered += (cur_e - cur_s) if cur_e is not None else 0
                cur_s, cur_e = a, b
            else:
                cur_e = max(cur_e, b)
        covered += (cur_e - cur_s) if cur_e is not None else 0
        wall = q["end"] - q["start"]
        if wall < 50:
            continue
        first = stage_ms[sids[0]][2].split(" at ")[0] if sids else "-"
        out.append(f"{qid:>5} {wall / 1e3:>7.2f} {covered / 1e3:>11.2f} {(wall - covered) / 1e3:>9.2f} "
                   f"{sum(stage_exec.get(s, 0) for s in sids) / 1e3:>10.2f} {len(sids):>6}  {first}")
        out += [f"{'':>5}   stage {s:>3}: {(stage_ms[s][1] - stage_ms[s][0]) / 1e3:>6.2f} s wall, "
                f"{stage_exec.get(s, 0) / 1e3:>6.2f} CPU s in {stage_ms[s][3]} task(s)" for s in sids
                if stage_ms[s][1] - stage_ms[s][0] >= 200]
    return out


def measure(engine: str, root: Path, n: int, profile: Path | None = None) -> dict:
    import psutil

    extra = ["--profile-dir", str(profile)] if profile is not None else []
    proc = subprocess.Popen([sys.executable, __file__, "--child", engine, "--archive", str(root), "--runs", str(n),
                             *extra],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    peak = 0
    done = threading.Event()

    def sample() -> None:
        nonlocal peak
        p = psutil.Process(proc.pid)
        while not done.is_set():
            try:
                rss = p.memory_info().rss + sum(c.memory_info().rss for c in p.children(recursive=True))
                peak = max(peak, rss)
            except psutil.Error:
                pass
            time.sleep(0.1)

    t = threading.Thread(target=sample, daemon=True)
    t.start()
    t0 = time.perf_counter()
    out, _ = proc.communicate()
    wall = time.perf_counter() - t0
    done.set()
    t.join()
    if proc.returncode != 0:
        raise SystemExit(f"{engine} run failed (exit {proc.returncode})")
    doc = json.loads(out.strip().splitlines()[-1])
    doc.update(wall_s=wall, peak_rss_mb=peak / 2**20)
    return doc


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=1000, help="runs in the archive (default 1000)")
    ap.add_argument("--events-per-run", type=int, default=10_000, help="approximate events per run (default 10000)")
    ap.add_argument("--sizes", default=None, help="comma-separated run counts to time (default: 10%%, 50%%, 100%%)")
    ap.add_argument("--archive", type=Path, default=Path(tempfile.gettempdir()) / "kafka-chaos-bench-report")
    ap.add_argument("--profile", action="store_true",
                    help="also print where the Spark job's time goes (from Spark's event log), per size")
    ap.add_argument("--child", choices=("spark", "pandas"), help=argparse.SUPPRESS)
    ap.add_argument("--profile-dir", dest="profile_dir", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        _child(args.child, args.archive, args.runs, args.profile_dir)
        return
    t0 = time.perf_counter()
    total = generate(args.archive, args.runs, args.events_per_run)
    print(f"archive: {args.runs} runs, {total:,} events, "
          f"{sum(p.stat().st_size for p in args.archive.rglob('history.jsonl')) / 2**20:.0f} MiB at {args.archive} "
          f"(generated or reused in {time.perf_counter() - t0:.0f}s)", flush=True)
    sizes = ([int(s) for s in args.sizes.split(",")] if args.sizes
             else sorted({max(1, args.runs // 10), max(1, args.runs // 2), args.runs}))
    print(f"{'runs':>6} {'events':>11} | {'spark parse':>11} {'agg':>7} {'total':>7} {'peak MB':>8} | "
          f"{'pandas parse':>12} {'agg':>7} {'total':>7} {'peak MB':>8} | {'spark/pandas':>12}", flush=True)
    rows = []
    profiles: list[str] = []
    for n in sizes:
        with tempfile.TemporaryDirectory(prefix="kc-bench-sparklog-") as logs:
            s = measure("spark", args.archive, n, Path(logs) if args.profile else None)
            if args.profile:
                profiles += [f"-- Spark profile at {n} runs (event log; task s = summed over cores):",
                             *_profile(Path(logs))]
        p = measure("pandas", args.archive, n)
        if s["result"] != p["result"]:
            raise SystemExit(f"engines disagree at {n} runs:\nspark  {s['result']}\npandas {p['result']}")
        events = sum(v["events"] for v in s["result"].values())
        st = s["times"]["parse_s"] + s["times"]["aggregate_s"]
        pt = p["times"]["parse_s"] + p["times"]["aggregate_s"]
        rows.append({"runs": n, "events": events, "spark": s, "pandas": p, "ratio": st / pt})
        print(f"{n:>6} {int(events):>11,} | {s['times']['parse_s']:>10.1f}s {s['times']['aggregate_s']:>6.1f}s "
              f"{st:>6.1f}s {s['peak_rss_mb']:>8.0f} | {p['times']['parse_s']:>11.1f}s {p['times']['aggregate_s']:>6.1f}s "
              f"{pt:>6.1f}s {p['peak_rss_mb']:>8.0f} | {st / pt:>12.2f}", flush=True)
    print(*profiles, sep="\n")
    print(f"(Spark JVM start not included: {rows[0]['spark']['times']['startup_s']:.1f}s; "
          f"agg = aggregation only, parse = JSON lines -> table (Spark: a Parquet table); "
          "results of both engines identical)")
    print(json.dumps({"cpu_count": os.cpu_count(), "rows": [{k: v for k, v in r.items() if k not in ("spark", "pandas")}
                                                         | {"spark_times": r["spark"]["times"],
                                                            "pandas_times": r["pandas"]["times"],
                                                            "spark_peak_mb": r["spark"]["peak_rss_mb"],
                                                            "pandas_peak_mb": r["pandas"]["peak_rss_mb"]}
                                                         for r in rows]}))


if __name__ == "__main__":
    main()
