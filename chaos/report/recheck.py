"""Re-checking three core invariants with Spark SQL over the whole archive.

The per-run checkers (``checks.json``) are the authority; this is an
independent second implementation over the ``events`` table, so a checker bug
(or a stale ``checks.json``) shows up as a *disagreement* in the report.

- ``ownership-generation`` (invariant 1 of docs/architecture.md, eager protocol): within one run,
  group and generation, no partition appears in the ``assigned`` events of two
  members (sources), unless the first member stopped or restarted in between,
  or was replaced by a member started with its ``group.instance.id``, or the
  later claim is by a member with the same ``group.instance.id`` (KIP-345
  replacement within a generation), as the checker drops such claims. Compared with the checker's
  "owned by both" findings. Runs with a cooperative (KIP-429) member are not
  compared: there the checker also judges un-revoked holdings across
  generations, which this rule does not model.
- ``delivery`` (§5.4, at-least-once part): every ``send_ok`` (topic, partition,
  offset) appears in some ``consumed`` event (any member, any group) or in a
  ``final_read``. Compared exactly with the checker's ``lost`` metric.
- ``generations`` (§5.6, per-member part, as ``chaos/checkers/generations.py``):
  per member incarnation (``member_start``/``member_stop`` start a new one),
  over ``assigned``/``revoked``/``lost``/``consumed`` and ``ok`` commits with a
  generation >= 0 in history order, no generation below an earlier one, and
  every eager ``assigned`` of a generation carries the partitions of the first
  one (the coordinator may hand the current generation out again, unchanged, to
  a rejoining follower). Compared with the checker's per-member findings (those
  not about the group).
"""

from __future__ import annotations

from typing import Any

INVARIANTS = ("ownership-generation", "delivery", "generations")

_SQL_OWNERSHIP = """
WITH claims AS (
  SELECT run, group_id, generation, source, seq, p.topic AS topic, p.partition AS partition
  FROM (SELECT run, group_id, generation, source, seq, explode(partitions) AS p
        FROM events WHERE kind = 'assigned' AND generation IS NOT NULL)),
starts AS (
  SELECT run, source, seq, instance_id FROM events WHERE kind = 'member_start'),
ends AS (  -- a member's claims end when it stops or starts again
  SELECT run, source, seq FROM events WHERE kind IN ('member_start', 'member_stop')),
claim_instance AS (  -- group.instance.id of the claiming member at the time of the claim
  SELECT c.run, c.source, c.seq, max_by(s.instance_id, s.seq) AS instance_id
  FROM (SELECT DISTINCT run, source, seq FROM claims) c
  JOIN starts s ON s.run = c.run AND s.source = c.source AND s.seq < c.seq
  GROUP BY c.run, c.source, c.seq),
pairs AS (
  SELECT a.run, a.group_id, a.generation, a.topic, a.partition, a.source AS a_source, a.seq AS a_seq,
         b.source AS b_source, b.seq AS b_seq, ci.instance_id AS a_instance, cb.instance_id AS b_instance
  FROM claims a JOIN claims b
    ON a.run = b.run AND a.group_id = b.group_id AND a.generation = b.generation AND a.topic = b.topic
   AND a.partition = b.partition AND a.source <> b.source AND a.seq < b.seq
  LEFT JOIN claim_instance ci ON ci.run = a.run AND ci.source = a.source AND ci.seq = a.seq
  LEFT JOIN claim_instance cb ON cb.run = b.run AND cb.source = b.source AND cb.seq = b.seq),
live_pairs AS (
  SELECT * FROM pairs p
  WHERE NOT EXISTS (SELECT 1 FROM ends e WHERE e.run = p.run AND e.source = p.a_source
                    AND e.seq > p.a_seq AND e.seq < p.b_seq)
    -- KIP-345: a member started with the claimer's group.instance.id replaces it
    AND NOT EXISTS (SELECT 1 FROM starts s WHERE s.run = p.run AND p.a_instance IS NOT NULL
                    AND s.instance_id = p.a_instance AND s.source <> p.a_source
                    AND s.seq > p.a_seq AND s.seq < p.b_seq)
    -- KIP-345 within a generation: the member assigned last holds its instance's partitions
    AND NOT (p.a_instance IS NOT NULL AND p.a_instance = p.b_instance))
SELECT run, group_id, generation, topic, partition, count(*) AS members, min(a_seq) AS first_seq,
       max(b_seq) AS last_seq, concat_ws(',', sort_array(collect_set(a_source) || collect_set(b_source))) AS sources
FROM live_pairs GROUP BY run, group_id, generation, topic, partition
"""

_SQL_LOST = """
WITH produced AS (
  SELECT DISTINCT run, topic, partition, record_offset AS o FROM events WHERE kind = 'send_ok'),
seen AS (
  SELECT run, topic, partition, explode(consumed_offsets) AS o FROM events WHERE kind = 'consumed'
  UNION ALL
  SELECT run, topic, r.partition AS partition, r.offset AS o
  FROM (SELECT run, topic, explode(final_records) AS r FROM events WHERE kind = 'final_read'))
SELECT p.run, p.topic, p.partition, p.o AS record_offset
FROM produced p LEFT ANTI JOIN seen s
  ON p.run = s.run AND p.topic = s.topic AND p.partition = s.partition AND p.o = s.o
"""

_SQL_GENERATIONS = """
WITH member_events AS (
  SELECT run, source, seq, kind, generation, incremental, outcome, partitions,
         sum(CASE WHEN kind IN ('member_start', 'member_stop') THEN 1 ELSE 0 END)
           OVER (PARTITION BY run, source ORDER BY seq ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS incarnation
  FROM events
  WHERE kind IN ('member_start', 'member_stop', 'assigned', 'revoked', 'lost', 'consumed', 'commit')),
observed AS (
  SELECT * FROM member_events
  WHERE kind NOT IN ('member_start', 'member_stop') AND generation IS NOT NULL AND generation >= 0
    AND (kind <> 'commit' OR outcome = 'ok')),
ranked AS (
  SELECT *, max(generation) OVER (PARTITION BY run, source, incarnation ORDER BY seq
                                  ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS high
  FROM observed)
SELECT run, source, 'backwards' AS rule, min(seq) AS seq FROM ranked WHERE generation < high GROUP BY run, source
UNION ALL
SELECT run, source, 'different eager assignments in one generation' AS rule, min(seq) AS seq
FROM (SELECT run, source, seq, pset,
             first_value(pset) OVER (PARTITION BY run, source, incarnation, generation ORDER BY seq) AS first_pset
      FROM (SELECT *, array_sort(array_distinct(transform(partitions, p -> concat(p.topic, ':', p.partition))))
                        AS pset
            FROM observed WHERE kind = 'assigned' AND NOT coalesce(incremental, false)))
WHERE pset <> first_pset
GROUP BY run, source
"""


def _checker_side(violations_df) -> dict[tuple[str, str], dict[str, Any]]:
    """Per (run, invariant): whether the per-run checker reported the sub-rule re-checked here."""
    from pyspark.sql import functions as F

    rows = (violations_df.where(F.col("violation") & F.col("checker").isin(*INVARIANTS))
            .select("run", "checker", "description").collect())
    out: dict[tuple[str, str], dict[str, Any]] = {}
    for r in rows:
        d = r["description"]
        if r["checker"] == "ownership-generation" and "owned by both" not in d:
            continue  # sample-based findings: not re-checked here
        if r["checker"] == "generations" and d.startswith("group "):
            continue  # group-level rule: not re-checked here
        if r["checker"] == "delivery" and "never processed" not in d:
            continue  # commit-ahead-of-processing: not re-checked here
        slot = out.setdefault((r["run"], r["checker"]), {"findings": 0, "example": d})
        slot["findings"] += 1
    return out


def recheck(spark, events_df, runs_df, violations_df) -> tuple[list[dict[str, Any]], Any]:
    """One row per (judged run, invariant): Spark's answer, the checker's, and whether they agree.

    Returns the rows and a DataFrame of Spark's own findings (for the report's tables).
    """
    from pyspark.sql import functions as F

    events_df.createOrReplaceTempView("events")
    own = spark.sql(_SQL_OWNERSHIP).select(
        "run", F.lit("ownership-generation").alias("invariant"),
        F.format_string("group %s generation %d: %s-%d assigned to %s", "group_id", "generation", "topic",
                        "partition", "sources").alias("detail"),
        F.array("first_seq", "last_seq").alias("evidence"))
    lost = spark.sql(_SQL_LOST).select(
        "run", F.lit("delivery").alias("invariant"),
        F.format_string("%s-%d@%d acknowledged, never consumed nor read at the end", "topic", "partition",
                        "record_offset").alias("detail"),
        F.array().cast("array<bigint>").alias("evidence"))
    gens = spark.sql(_SQL_GENERATIONS).select(
        "run", F.lit("generations").alias("invariant"),
        F.format_string("%s: %s", "source", "rule").alias("detail"), F.array("seq").alias("evidence"))
    findings = own.unionByName(lost).unionByName(gens).cache()
    spark_counts = {(r["run"], r["invariant"]): (r["n"], r["example"]) for r in
                    findings.groupBy("run", "invariant").agg(F.count("*").alias("n"),
                                                             F.first("detail").alias("example")).collect()}
    cooperative = {r["run"] for r in events_df.where((F.col("kind") == "member_start")
                                                     & (F.col("protocol") == "cooperative"))
                   .select("run").distinct().collect()}
    checker = _checker_side(violations_df)
    rows = []
    for r in runs_df.select("run", "date", "experiment", "judged", "lost", "failed_checkers",
                            "unknown_checkers").orderBy("run").collect():
        for inv in INVARIANTS:
            n, example = spark_counts.get((r["run"], inv), (0, None))
            c = checker.get((r["run"], inv))
            row = {"run": r["run"], "date": r["date"], "experiment": r["experiment"], "invariant": inv,
                   "spark_violations": n, "spark_example": example,
                   "checker_findings": c["findings"] if c else 0, "checker_example": c["example"] if c else None,
                   "compared": True, "agree": None, "note": None}
            if not r["judged"]:
                row.update(compared=False, note="no checks.json: run `chaos check` on it")
            elif inv in (r["unknown_checkers"] or []):
                row.update(compared=False, note=f"the {inv} checker answered unknown")
            elif inv == "ownership-generation" and r["run"] in cooperative:
                row.update(compared=False, note="cooperative rebalancing: the eager rule does not apply")
            elif inv == "delivery":
                lost = int(r["lost"]) if r["lost"] is not None else None
                row["checker_findings"] = lost if lost is not None else row["checker_findings"]
                row["agree"] = lost == n
                if not row["agree"]:
                    row["note"] = f"checker lost={lost}, Spark lost={n}"
            else:
                row["agree"] = (n > 0) == (c is not None)
                if not row["agree"]:
                    row["note"] = ("Spark found a violation the checker did not report" if n else
                                   "the checker reported a violation Spark did not find")
            rows.append(row)
    return rows, findings
