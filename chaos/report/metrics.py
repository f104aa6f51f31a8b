"""Aggregates per experiment and night, computed with Spark SQL over the tables.

Each function returns a small pandas DataFrame (one row per night x experiment
or finer); the report renders them and writes them as CSV/JSON.

Definitions:

- *pass rate*: runs whose merged verdict is ``true`` / all runs (``unknown`` and
  unjudged runs count as not passed);
- *violations by invariant*: violation findings in ``checks.json`` per checker,
  and the number of runs that checker failed;
- *time to recover*: per fault, fault end -> first ``Stable`` group sample
  (``faults.ttr_s``); per run, the convergence checker's ``time_to_recover_s``;
- *rebalance duration*: "Preparing to rebalance" -> first assignment of the new
  generation (``rebalances.duration_s``);
- *zombie window*: the ownership-time checker's windows (explained or not);
- *duplicate rate*: consumed offsets seen more than once within a group / ``send_ok``;
- *unavailability*: per partition, seconds without an owner after the group's first
  assignment (``partition_unavailability.unowned_s``);
- *trend*: each night's figures against the previous night of the same experiment.
"""

from __future__ import annotations

from typing import Any

_NIGHTLY = """
WITH r AS (
  SELECT date, experiment, count(*) AS runs,
         sum(CASE WHEN valid = 'true' THEN 1 ELSE 0 END) AS passed,
         sum(CASE WHEN valid = 'false' THEN 1 ELSE 0 END) AS failed,
         sum(CASE WHEN valid = 'unknown' THEN 1 ELSE 0 END) AS inconclusive,
         sum(CASE WHEN NOT judged THEN 1 ELSE 0 END) AS unjudged,
         sum(events) AS events, sum(send_ok) AS send_ok, sum(duplicate_deliveries) AS duplicate_deliveries,
         sum(rebalances) AS rebalances,
         percentile(time_to_recover_s, 0.5) AS run_ttr_p50_s, percentile(time_to_recover_s, 0.9) AS run_ttr_p90_s,
         max(time_to_recover_s) AS run_ttr_max_s
  FROM runs GROUP BY date, experiment),
rb AS (
  SELECT date, experiment, percentile(duration_s, 0.5) AS rebalance_p50_s,
         percentile(duration_s, 0.9) AS rebalance_p90_s, max(duration_s) AS rebalance_max_s
  FROM rebalances GROUP BY date, experiment),
z AS (
  SELECT date, experiment, count(*) AS zombie_windows, percentile(zombie_window_s, 0.5) AS zombie_p50_s,
         max(zombie_window_s) AS zombie_max_s
  FROM violations WHERE checker = 'ownership-time' AND zombie_window_s IS NOT NULL GROUP BY date, experiment),
u AS (
  SELECT date, experiment, avg(unowned_s) AS unowned_mean_s, max(unowned_s) AS unowned_max_s,
         avg(unowned_s / nullif(window_s, 0)) AS unowned_fraction
  FROM partition_unavailability GROUP BY date, experiment),
f AS (
  SELECT date, experiment, count(*) AS faults, percentile(ttr_s, 0.5) AS fault_ttr_p50_s,
         percentile(ttr_s, 0.9) AS fault_ttr_p90_s, max(ttr_s) AS fault_ttr_max_s
  FROM faults GROUP BY date, experiment)
SELECT r.*, r.passed / r.runs AS pass_rate,
       CASE WHEN r.send_ok > 0 THEN r.duplicate_deliveries / r.send_ok END AS duplicate_rate,
       rb.rebalance_p50_s, rb.rebalance_p90_s, rb.rebalance_max_s,
       coalesce(z.zombie_windows, 0) AS zombie_windows, z.zombie_p50_s, z.zombie_max_s,
       u.unowned_mean_s, u.unowned_max_s, u.unowned_fraction,
       coalesce(f.faults, 0) AS faults, f.fault_ttr_p50_s, f.fault_ttr_p90_s, f.fault_ttr_max_s
FROM r LEFT JOIN rb USING (date, experiment) LEFT JOIN z USING (date, experiment)
       LEFT JOIN u USING (date, experiment) LEFT JOIN f USING (date, experiment)
"""

_TREND = """
SELECT date, experiment, pass_rate,
       lag(date) OVER w AS previous_date,
       pass_rate - lag(pass_rate) OVER w AS pass_rate_change,
       fault_ttr_p90_s - lag(fault_ttr_p90_s) OVER w AS fault_ttr_p90_change_s,
       rebalance_p90_s - lag(rebalance_p90_s) OVER w AS rebalance_p90_change_s,
       duplicate_rate - lag(duplicate_rate) OVER w AS duplicate_rate_change
FROM nightly WINDOW w AS (PARTITION BY experiment ORDER BY date)
"""

_BY_INVARIANT = """
WITH v AS (
  SELECT date, experiment, checker, count(*) AS violations, count(DISTINCT run) AS runs_with_findings
  FROM violations WHERE violation GROUP BY date, experiment, checker),
f AS (
  SELECT date, experiment, checker, count(*) AS runs_failed
  FROM (SELECT date, experiment, explode(failed_checkers) AS checker FROM runs) GROUP BY date, experiment, checker)
SELECT coalesce(v.date, f.date) AS date, coalesce(v.experiment, f.experiment) AS experiment,
       coalesce(v.checker, f.checker) AS invariant, coalesce(v.violations, 0) AS violations,
       coalesce(f.runs_failed, 0) AS runs_failed
FROM v FULL JOIN f ON v.date = f.date AND v.experiment = f.experiment AND v.checker = f.checker
ORDER BY date, experiment, invariant
"""

_TTR_BY_FAULT = """
SELECT date, experiment, coalesce(fault_type, 'unknown') AS fault_type, count(*) AS faults,
       count(ttr_s) AS recovered, percentile(ttr_s, 0.5) AS ttr_p50_s, percentile(ttr_s, 0.9) AS ttr_p90_s,
       max(ttr_s) AS ttr_max_s, avg(CASE WHEN landed THEN 1.0 WHEN landed = false THEN 0.0 END) AS landed_rate,
       percentile(trigger_to_effect_ms, 0.5) AS trigger_to_effect_p50_ms
FROM faults GROUP BY date, experiment, coalesce(fault_type, 'unknown') ORDER BY date, experiment, fault_type
"""

#: Rebalance liveness (issue 17) per experiment and Kafka version: the distribution over runs of the longest
#: rebalance and of the longest time a partition had no consuming owner (``rebalance-liveness`` figures in
#: each run's checks.json), and how many rebalance phases went over their protocol bound.
_LIVENESS = """
SELECT experiment, coalesce(kafka_version, 'unknown') AS kafka_version, count(*) AS runs,
       count(longest_rebalance_s) AS judged_runs,
       sum(CASE WHEN liveness_valid = 'false' THEN 1 ELSE 0 END) AS runs_failed,
       percentile(longest_rebalance_s, 0.5) AS longest_rebalance_p50_s,
       percentile(longest_rebalance_s, 0.9) AS longest_rebalance_p90_s,
       max(longest_rebalance_s) AS longest_rebalance_max_s,
       percentile(unavailable_max_s, 0.5) AS unavailable_p50_s,
       percentile(unavailable_max_s, 0.9) AS unavailable_p90_s,
       max(unavailable_max_s) AS unavailable_max_s,
       coalesce(sum(phases_over_bound), 0) AS phases_over_bound,
       coalesce(sum(phases_over_bound_explained), 0) AS phases_over_bound_explained
FROM runs GROUP BY experiment, coalesce(kafka_version, 'unknown') ORDER BY experiment, kafka_version
"""


def register(spark, tables: dict[str, Any]) -> None:
    for name, df in tables.items():
        if not name.startswith("_"):
            df.createOrReplaceTempView(name)


def compute(spark, tables: dict[str, Any]) -> dict[str, Any]:
    """The report's aggregates as pandas DataFrames, keyed by name."""
    register(spark, tables)
    nightly = spark.sql(_NIGHTLY).orderBy("date", "experiment")
    nightly.createOrReplaceTempView("nightly")
    out = {
        "nightly": nightly.toPandas(),
        "trend": spark.sql(_TREND).orderBy("experiment", "date").toPandas(),
        "by_invariant": spark.sql(_BY_INVARIANT).toPandas(),
        "ttr_by_fault": spark.sql(_TTR_BY_FAULT).toPandas(),
        "liveness": spark.sql(_LIVENESS).toPandas(),
    }
    for name in ("nightly", "trend"):
        out[name]["date"] = out[name]["date"].astype(str)
    return out
