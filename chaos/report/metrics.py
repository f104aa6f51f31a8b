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
- *trend*: each night's figures against the previous night of the same experiment;
- *share groups*: redeliveries per 1000 records and the time to reacquire a dead member's records, per
  experiment and Kafka version (share-delivery's and share-progress's figures);
- *by versions*: verdict counts, pass rate, lost and duplicate deliveries, run time to recover, longest
  rebalance, unavailability and zombie windows per experiment x Kafka version x client versions (the runs
  table's ``client_versions``: every ``"<client> <version>"`` the run's members started on).
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

#: Share groups (KIP-932, issue 36) per experiment and Kafka version, over the runs whose share-delivery judged
#: deliveries: redeliveries per 1000 records (a record acquired again after a release, a lock that ran out or a
#: member's death, over all records delivered), and the time from a member's death to the reacquisition of the
#: records it held (share-progress's longest per run; p50/p90/max over the runs where one came back).
_SHARE = """
SELECT experiment, coalesce(kafka_version, 'unknown') AS kafka_version, count(*) AS runs,
       sum(CASE WHEN valid = 'true' THEN 1 ELSE 0 END) AS passed,
       sum(share_records) AS records, sum(share_redeliveries) AS redeliveries,
       CASE WHEN sum(share_records) > 0 THEN 1000 * sum(share_redeliveries) / sum(share_records) END
           AS redeliveries_per_1000,
       coalesce(sum(share_reacquired), 0) AS reacquired_after_death,
       percentile(share_reacquire_max_s, 0.5) AS reacquire_p50_s,
       percentile(share_reacquire_max_s, 0.9) AS reacquire_p90_s, max(share_reacquire_max_s) AS reacquire_max_s
FROM runs WHERE share_records IS NOT NULL
GROUP BY experiment, coalesce(kafka_version, 'unknown') ORDER BY experiment, kafka_version
"""

#: Verdicts and the main figures per experiment x Kafka version x client versions (issue 34: a version matrix):
#: the runs of one experiment on each (Kafka version, members' client versions) side by side.
_BY_VERSIONS = """
SELECT experiment, coalesce(kafka_version, 'unknown') AS kafka_version,
       coalesce(client_versions, 'unknown') AS client_versions, count(*) AS runs,
       sum(CASE WHEN valid = 'true' THEN 1 ELSE 0 END) AS passed,
       sum(CASE WHEN valid = 'false' THEN 1 ELSE 0 END) AS failed,
       sum(CASE WHEN valid = 'unknown' THEN 1 ELSE 0 END) AS inconclusive,
       sum(CASE WHEN NOT judged THEN 1 ELSE 0 END) AS unjudged,
       sum(CASE WHEN valid = 'true' THEN 1 ELSE 0 END) / count(*) AS pass_rate,
       sum(lost) AS lost, sum(duplicate_deliveries) AS duplicate_deliveries,
       CASE WHEN sum(send_ok) > 0 THEN sum(duplicate_deliveries) / sum(send_ok) END AS duplicate_rate,
       percentile(time_to_recover_s, 0.5) AS ttr_p50_s, percentile(time_to_recover_s, 0.9) AS ttr_p90_s,
       max(time_to_recover_s) AS ttr_max_s, percentile(longest_rebalance_s, 0.9) AS longest_rebalance_p90_s,
       max(unavailable_max_s) AS unavailable_max_s, coalesce(sum(zombie_windows), 0) AS zombie_windows
FROM runs GROUP BY experiment, coalesce(kafka_version, 'unknown'), coalesce(client_versions, 'unknown')
ORDER BY experiment, kafka_version, client_versions
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
        "by_versions": spark.sql(_BY_VERSIONS).toPandas(),
        "share": spark.sql(_SHARE).toPandas(),
    }
    for name in ("nightly", "trend"):
        out[name]["date"] = out[name]["date"].astype(str)
    return out


# ---------------------------------------------------------------------------- pass rate with an interval

#: z for a two-sided 95% interval
Z95 = 1.959963984540054


def wilson_interval(passed: int, runs: int, z: float = Z95) -> tuple[float, float] | None:
    """The Wilson score interval of a pass rate ``passed / runs`` (95% by default); None when ``runs == 0``.

    Wilson (1927), "Probable inference, the law of succession, and statistical inference", JASA 22:
    unlike the normal approximation it stays within [0, 1] and is not zero-width at 0/n or n/n,
    which is the common case here (a handful of runs per experiment, all passing).
    """
    if runs < 0 or passed < 0 or passed > runs:
        raise ValueError(f"passed={passed}, runs={runs}: need 0 <= passed <= runs")
    if runs == 0:
        return None
    p = passed / runs
    z2 = z * z
    centre = (p + z2 / (2 * runs)) / (1 + z2 / runs)
    half = z * ((p * (1 - p) / runs + z2 / (4 * runs * runs)) ** 0.5) / (1 + z2 / runs)
    # clamp the rounding noise at the ends (0/n, n/n): the exact bounds are 0 and 1
    return max(0.0, centre - half), min(1.0, centre + half)


def _commit(v: Any) -> str | None:
    """A recorded kafka-chaos commit, or None when unknown (absent in older runs, null outside a git checkout)."""
    return v if isinstance(v, str) and v else None


def flaky_commits(runs: Any) -> set[tuple[str, str | None, str | None, str]]:
    """(experiment, kafka_version, client, commit) groups whose runs both passed and failed.

    "Flaky": the same experiment, with the same Kafka version and client, on the same kafka-chaos commit
    (header ``versions["kafka-chaos-commit"]``) has a passing run and a failing run. Inconclusive runs
    (``unknown``) count for neither side. Runs with no recorded commit are never grouped as "the same commit"
    (two unknowns may be different code). A ``+dirty`` commit is its own commit: uncommitted changes may differ.
    """
    seen: dict[tuple[str, str | None, str | None, str], set[str]] = {}
    for rec in runs.to_dict("records") if len(runs) else []:
        commit = _commit(rec.get("kafka_chaos_commit"))
        if commit is None or rec.get("valid") not in ("true", "false"):
            continue
        key = (rec["experiment"], _opt(rec.get("kafka_version")), _opt(rec.get("client")), commit)
        seen.setdefault(key, set()).add(rec["valid"])
    return {k for k, v in seen.items() if v == {"true", "false"}}


def _opt(v: Any) -> str | None:
    """A group key cell: None for a missing value (pandas gives NaN for a null string column)."""
    return v if isinstance(v, str) and v else None


PASS_RATE_COLUMNS = ["experiment", "kafka_version", "client", "runs", "passed", "failed", "inconclusive",
                     "pass_rate", "pass_rate_low95", "pass_rate_high95", "commits", "flaky", "flaky_commits"]


def pass_rates(runs: Any) -> Any:
    """Pass rate per experiment x Kafka version x client, with its 95% Wilson interval and the flaky mark.

    ``runs`` is the runs table as pandas (columns ``experiment``, ``kafka_version``, ``client``, ``valid``,
    ``kafka_chaos_commit``). The rate is the module's: ``valid == "true"`` over all runs (inconclusive and
    unjudged runs count as not passed). ``flaky`` is true when one of the group's commits both passed and
    failed (:func:`flaky_commits`); ``commits`` counts the distinct known commits the group ran on.
    """
    import pandas as pd

    if not len(runs):
        return pd.DataFrame(columns=PASS_RATE_COLUMNS)
    flaky = flaky_commits(runs)
    groups: dict[tuple[str, str | None, str | None], list[dict[str, Any]]] = {}
    for rec in runs.to_dict("records"):
        groups.setdefault((rec["experiment"], _opt(rec.get("kafka_version")), _opt(rec.get("client"))),
                          []).append(rec)
    rows = []
    for (exp, version, client), recs in sorted(groups.items(), key=lambda kv: tuple(str(k) for k in kv[0])):
        n = len(recs)
        passed = sum(r.get("valid") == "true" for r in recs)
        failed = sum(r.get("valid") == "false" for r in recs)
        low, high = wilson_interval(passed, n) or (None, None)
        commits = sorted({c for r in recs if (c := _commit(r.get("kafka_chaos_commit"))) is not None})
        bad = [c for c in commits if (exp, version, client, c) in flaky]
        rows.append({"experiment": exp, "kafka_version": version, "client": client, "runs": n, "passed": passed,
                     "failed": failed, "inconclusive": n - passed - failed, "pass_rate": passed / n,
                     "pass_rate_low95": low, "pass_rate_high95": high, "commits": len(commits),
                     "flaky": bool(bad), "flaky_commits": " ".join(_short(c) for c in bad)})
    return pd.DataFrame(rows, columns=PASS_RATE_COLUMNS)


def _short(commit: str) -> str:
    """A commit as shown: 12 hex digits, keeping the ``+dirty`` mark."""
    return commit[:12] + ("+dirty" if commit.endswith("+dirty") else "")
