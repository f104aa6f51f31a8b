"""Benchmark: the report's aggregation on local Spark against the same aggregation in pandas.

    .venv/bin/python bench/report.py                       # 1,000 runs x 10,000 events (~10M events)
    .venv/bin/python bench/report.py --runs 100 --events-per-run 2000 --sizes 10,50,100

Generates a synthetic archive in the nightly layout
(``<dir>/<YYYY-MM-DD>/<experiment>/run-<k>-seed-<s>/history.jsonl``) from
``chaos.checkers.simulation`` (valid eager-group histories with kills and pauses),
then, for each size (a prefix of the runs), times in separate processes:

- **spark**: ``chaos.report.tables.parse_events`` (the report's own parser: text ->
  ``from_json`` with the explicit schema) and the aggregation below in Spark SQL, on
  ``local[2]``;
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
    from chaos.checkers.simulation import SimulationSpec, simulate
    from chaos.history import HISTORY_FILE, write_history

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

_SPARK_AGG = """
WITH produced AS (SELECT DISTINCT run, topic, partition, record_offset AS o FROM events WHERE kind = 'send_ok'),
seen AS (SELECT run, topic, partition, explode(consumed_offsets) AS o FROM events WHERE kind = 'consumed'
         UNION ALL
         SELECT run, topic, r.partition, r.offset FROM
           (SELECT run, topic, explode(final_records) AS r FROM events WHERE kind = 'final_read')),
lost AS (SELECT p.run, count(*) AS lost FROM produced p LEFT ANTI JOIN seen s
           ON p.run = s.run AND p.topic = s.topic AND p.partition = s.partition AND p.o = s.o GROUP BY p.run),
cons AS (SELECT run, count(*) AS consumed, count(DISTINCT group_id, topic, partition, o) AS uniq
         FROM (SELECT run, group_id, topic, partition, explode(consumed_offsets) AS o FROM events
               WHERE kind = 'consumed') GROUP BY run),
prep AS (SELECT run, group_id, generation, mono_ns FROM events
         WHERE kind = 'broker_log' AND log_event = 'preparing_rebalance'),
asg AS (SELECT run, group_id, generation, mono_ns FROM events WHERE kind = 'assigned' AND generation IS NOT NULL),
reb AS (SELECT p.run, p.mono_ns, (min(a.mono_ns) - p.mono_ns) / 1e9 AS duration_s FROM prep p
        LEFT JOIN asg a ON a.run = p.run AND a.group_id = p.group_id AND a.generation = p.generation + 1
                       AND a.mono_ns >= p.mono_ns
        GROUP BY p.run, p.mono_ns),
per_run AS (SELECT run, first(date) AS date, first(experiment) AS experiment, count(*) AS events,
                   sum(CASE WHEN kind = 'send_ok' THEN 1 ELSE 0 END) AS send_ok FROM events GROUP BY run)
SELECT r.date, r.experiment, count(*) AS runs, sum(r.events) AS events, sum(r.send_ok) AS send_ok,
       sum(coalesce(c.consumed, 0) - coalesce(c.uniq, 0)) AS duplicates, sum(coalesce(l.lost, 0)) AS lost,
       sum(coalesce(rb.n, 0)) AS rebalances,
       sum(coalesce(c.consumed, 0) - coalesce(c.uniq, 0)) / sum(r.send_ok) AS duplicate_rate
FROM per_run r LEFT JOIN cons c USING (run) LEFT JOIN lost l USING (run)
     LEFT JOIN (SELECT run, count(*) AS n FROM reb GROUP BY run) rb USING (run)
GROUP BY r.date, r.experiment
"""
_SPARK_REB = """
SELECT e.date, e.experiment, percentile(duration_s, 0.5) AS reb_p50_s, percentile(duration_s, 0.9) AS reb_p90_s
FROM (SELECT p.run, p.mono_ns, (min(a.mono_ns) - p.mono_ns) / 1e9 AS duration_s
      FROM (SELECT run, group_id, generation, mono_ns FROM events
            WHERE kind = 'broker_log' AND log_event = 'preparing_rebalance') p
      JOIN (SELECT run, group_id, generation, mono_ns FROM events WHERE kind = 'assigned') a
        ON a.run = p.run AND a.group_id = p.group_id AND a.generation = p.generation + 1 AND a.mono_ns >= p.mono_ns
      GROUP BY p.run, p.mono_ns) d
JOIN (SELECT DISTINCT run, date, experiment FROM events) e USING (run)
GROUP BY e.date, e.experiment
"""


def spark_engine(root: Path, n: int) -> tuple[dict, dict]:
    from chaos.report.archive import discover
    from chaos.report.session import spark_session
    from chaos.report.tables import parse_events

    t0 = time.perf_counter()
    spark = spark_session("local[2]", shuffle_partitions=8)
    spark.range(1).count()
    t_start = time.perf_counter() - t0
    wanted = {str(p) for p in run_dirs(root, n)}
    t0 = time.perf_counter()
    runs = [r for r in discover(root) if str(r.run_dir.path) in wanted]
    events, _ = parse_events(spark, runs)
    events = events.select("run", "date", "experiment", "kind", "group_id", "topic", "partition", "record_offset",
                           "generation", "mono_ns", "consumed_offsets", "final_records", "log_event")
    events.cache().count()
    t_parse = time.perf_counter() - t0
    events.createOrReplaceTempView("events")
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

def _child(engine: str, root: Path, n: int) -> None:
    fn = spark_engine if engine == "spark" else pandas_engine
    times, result = fn(root, n)
    print(json.dumps({"times": times, "result": result}))


def measure(engine: str, root: Path, n: int) -> dict:
    import psutil

    proc = subprocess.Popen([sys.executable, __file__, "--child", engine, "--archive", str(root), "--runs", str(n)],
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
    ap.add_argument("--child", choices=("spark", "pandas"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        _child(args.child, args.archive, args.runs)
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
    for n in sizes:
        s = measure("spark", args.archive, n)
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
    print(f"(Spark JVM start not included: {rows[0]['spark']['times']['startup_s']:.1f}s; "
          f"agg = aggregation only, parse = JSON lines -> table; results of both engines identical)")
    print(json.dumps({"cpu_count": os.cpu_count(), "rows": [{k: v for k, v in r.items() if k not in ("spark", "pandas")}
                                                         | {"spark_times": r["spark"]["times"],
                                                            "pandas_times": r["pandas"]["times"],
                                                            "spark_peak_mb": r["spark"]["peak_rss_mb"],
                                                            "pandas_peak_mb": r["pandas"]["peak_rss_mb"]}
                                                         for r in rows]}))


if __name__ == "__main__":
    main()
