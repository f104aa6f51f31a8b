"""Loading an archive into Parquet tables with Spark.

Tables (``REPORT/tables/<name>/date=.../experiment=.../*.parquet``), keyed by
``run`` (``<date>/<experiment>/<run dir>``, see :class:`chaos.report.archive.RunDir`):

- ``runs``: one row per run: header facts, the checkers' verdict and metrics
  (``checks.json``), the outcome, and counts derived from the events;
- ``events``: one row per history line after the header, typed columns per kind
  plus ``json`` (the line as written, for evidence) and ``t_s`` (seconds since
  the run's first event);
- ``faults``: one row per fault (``fault_start``/``fault_end`` events joined with
  ``faults.json``), with ``ttr_s``: fault end -> first ``Stable`` group sample;
- ``violations``: one row per checker finding in ``checks.json`` (``violation``
  false marks reported-only findings such as explained zombie windows);
- ``rebalances``: "Preparing to rebalance ... old generation N" -> first
  ``assigned`` of generation N+1 in that group (``duration_s``);
- ``ownership_intervals``: per member and partition, ``assigned`` until
  ``revoked``/``lost``/a replacing eager assignment/``member_stop``/end;
- ``partition_unavailability``: per partition, the time it had no owner between
  the group's first assignment and the end of the run.

The history lines are parsed by Spark (``from_json`` with :func:`event_schema`, derived from
the event records of :mod:`chaos.history.event`) so an archive of any size is read in
parallel; the small per-run files come from :mod:`chaos.report.archive`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import is_dataclass
from pathlib import Path
from typing import Annotated, Any, get_args, get_origin

from chaos.errors import UsageError
from chaos.history import Kind
from chaos.history.event import Int32, event_field_types, field_hints, optional_of
from chaos.report.archive import RunFiles

TABLES = ("runs", "events", "faults", "violations", "rebalances", "ownership_intervals",
          "partition_unavailability")
PARTITION_COLUMNS = ("date", "experiment")
_WINDOW = re.compile(r"window ([0-9.]+)s")
KINDS = tuple(k.value for k in Kind)


def event_schema() -> Any:
    """The Spark ``StructType`` of one history line, derived from the event records.

    A column per field of any event kind (:func:`chaos.history.event.event_field_types`), plus
    ``header`` (true on the header line) and ``kind``. Types follow the field types: int ->
    BIGINT (``Int32``, Kafka's INT32/INT16 fields -> INT), float -> DOUBLE, str and enums ->
    STRING, bool -> BOOLEAN, ``X | None`` -> X (every column is nullable), ``tuple[X, ...]`` ->
    ARRAY<X>, a fixed tuple -> ARRAY of its element type, or ARRAY<STRING> when the elements
    differ ([topic, partition]: Spark keeps the text of a non-string token for a string field),
    a nested record -> STRUCT, a mapping (``params``) -> STRING (its JSON text). A field whose
    type differs between kinds (``offsets``: numbers in ``consumed``, [topic, partition, offset]
    in ``commit``) is read as raw JSON text (ARRAY<STRING> if both are lists) and typed per kind
    afterwards in :func:`parse_events`. pyspark is imported here, not at module import.
    """
    from pyspark.sql import types as T

    columns = [T.StructField("header", T.BooleanType()), T.StructField("kind", T.StringType())]
    for name, hints in event_field_types().items():
        columns.append(T.StructField(name, _merged_spark_type([_spark_type(h) for h in hints])))
    return T.StructType(columns)


def _merged_spark_type(candidates: list[Any]) -> Any:
    from pyspark.sql import types as T

    first = candidates[0]
    if all(c == first for c in candidates):
        return first
    if all(isinstance(c, T.ArrayType) for c in candidates):
        return T.ArrayType(T.StringType())
    return T.StringType()


def _spark_type(hint: Any) -> Any:
    """The Spark type that ``from_json`` reads a field of this Python type as (see :func:`event_schema`)."""
    from pyspark.sql import types as T

    scalars = {bool: T.BooleanType(), int: T.LongType(), Int32: T.IntegerType(), float: T.DoubleType()}
    if hint in scalars:
        return scalars[hint]
    inner = optional_of(hint)
    if inner is not None:
        return _spark_type(inner)
    if isinstance(hint, type) and issubclass(hint, str):  # str, StrEnum
        return T.StringType()
    if isinstance(hint, type) and is_dataclass(hint):
        return T.StructType([T.StructField(name, _spark_type(h)) for name, h in field_hints(hint).items()])
    origin, args = get_origin(hint), get_args(hint)
    if origin is Annotated:
        return _spark_type(args[0])  # Int32 is matched above; other tags do not change the column
    if origin is Mapping or hint is Mapping:
        return T.StringType()
    if origin is tuple and len(args) == 2 and args[1] is Ellipsis:
        return T.ArrayType(_spark_type(args[0]))
    if origin is tuple and args:
        return T.ArrayType(_merged_spark_type([_spark_type(a) for a in args]))
    raise TypeError(f"event field type {hint!r} has no Spark column type; "
                    "add a case to chaos.report.tables._spark_type")


Progress = Callable[[str], None]


def _runs_rows(runs: Sequence[RunFiles]) -> list[dict[str, Any]]:
    rows = []
    for rf in runs:
        rd, h = rf.run_dir, rf.header
        checks = rf.checks or {}
        results = checks.get("results", [])
        metrics: dict[str, float] = {}
        for r in results:
            for k, v in (r.get("metrics") or {}).items():
                if isinstance(v, (int, float)) and not isinstance(v, bool):
                    metrics[f"{r['checker']}.{k}"] = float(v)
        outcome = rf.outcome or {}
        valid = checks.get("valid") or outcome.get("valid") or "unjudged"
        versions = h.get("versions") or {}
        rows.append({
            "run": rd.run, "date": rd.date, "experiment": rd.experiment, "run_name": rd.name,
            "run_dir": str(rd.path), "date_from_layout": rd.date_from_layout,
            "run_id": str(h.get("run_id")), "seed": h.get("seed"),
            "kafka_version": str(versions.get("kafka")) if versions.get("kafka") is not None else None,
            "judged": bool(checks), "valid": str(valid),
            "failed_checkers": [r["checker"] for r in results if r.get("valid") == "false"],
            "unknown_checkers": [r["checker"] for r in results if r.get("valid") == "unknown"],
            "checks_events": checks.get("events"),
            "expected": outcome.get("expected"), "wall_s": outcome.get("wall_s"),
            "produced": metrics.get("delivery.produced"), "lost": metrics.get("delivery.lost"),
            "duplicates": metrics.get("delivery.duplicates"),
            "consumed_records": metrics.get("delivery.consumed_records"),
            "time_to_recover_s": metrics.get("convergence.time_to_recover_s"),
            "zombie_windows": metrics.get("ownership-time.zombie_windows"),
            "zombie_window_max_s": metrics.get("ownership-time.zombie_window_max_s"),
            "unexplained_windows": metrics.get("ownership-time.unexplained_windows"),
            # rebalance liveness (issue 17): figures of chaos.checkers.rebalance_liveness, from checks.json
            "liveness_valid": next((r.get("valid") for r in results if r.get("checker") == "rebalance-liveness"),
                                   None),
            "longest_rebalance_s": metrics.get("rebalance-liveness.longest_rebalance_s"),
            "unavailable_max_s": metrics.get("rebalance-liveness.unavailable_max_s"),
            "unavailable_total_s": metrics.get("rebalance-liveness.unavailable_total_s"),
            "phases_over_bound": metrics.get("rebalance-liveness.phases_over_bound"),
            "phases_over_bound_explained": metrics.get("rebalance-liveness.phases_over_bound_explained"),
        })
    return rows


def _violation_rows(runs: Sequence[RunFiles]) -> list[dict[str, Any]]:
    rows = []
    for rf in runs:
        rd = rf.run_dir
        for r in (rf.checks or {}).get("results", []):
            for i, f in enumerate(r.get("findings", [])):
                m = _WINDOW.search(f.get("description", "")) if r["checker"] == "ownership-time" else None
                rows.append({
                    "run": rd.run, "date": rd.date, "experiment": rd.experiment, "checker": r["checker"],
                    "checker_valid": r.get("valid"), "finding": i, "violation": bool(f.get("violation", True)),
                    "description": f.get("description", ""),
                    "evidence": [int(s) for s in f.get("evidence", [])],
                    "at_s": f.get("at_s"),
                    "zombie_window_s": float(m.group(1)) if m else None,
                })
    return rows


def _fault_file_rows(runs: Sequence[RunFiles]) -> list[dict[str, Any]]:
    rows = []
    for rf in runs:
        for f in rf.faults:
            rows.append({
                "run": rf.run_dir.run, "fault_id": str(f.get("fault_id")), "ff_type": f.get("type"),
                "ff_target": f.get("target"), "ff_trigger": f.get("trigger"), "fired": f.get("fired"),
                "skipped_reason": f.get("skipped_reason"), "trigger_signal": f.get("trigger_signal"),
                "trigger_to_effect_ms": _num(f.get("trigger_to_effect_ms")), "landed": f.get("landed"),
                "effect_ok": f.get("effect_ok"), "healed_ok": f.get("healed_ok"),
                "start_s": _num(f.get("start_s")), "end_s": _num(f.get("end_s")),
            })
    return rows


def _num(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


# ---------------------------------------------------------------------------- Spark side

def _schema(spark, rows_schema: str):
    from pyspark.sql.types import _parse_datatype_string

    return _parse_datatype_string(rows_schema)


RUNS_SCHEMA = ("run STRING, date STRING, experiment STRING, run_name STRING, run_dir STRING, "
               "date_from_layout BOOLEAN, run_id STRING, seed BIGINT, kafka_version STRING, judged BOOLEAN, "
               "valid STRING, failed_checkers ARRAY<STRING>, unknown_checkers ARRAY<STRING>, checks_events BIGINT, "
               "expected BOOLEAN, wall_s DOUBLE, produced DOUBLE, lost DOUBLE, duplicates DOUBLE, "
               "consumed_records DOUBLE, time_to_recover_s DOUBLE, zombie_windows DOUBLE, "
               "zombie_window_max_s DOUBLE, unexplained_windows DOUBLE, liveness_valid STRING, "
               "longest_rebalance_s DOUBLE, unavailable_max_s DOUBLE, unavailable_total_s DOUBLE, "
               "phases_over_bound DOUBLE, phases_over_bound_explained DOUBLE")
VIOLATIONS_SCHEMA = ("run STRING, date STRING, experiment STRING, checker STRING, checker_valid STRING, "
                     "finding INT, violation BOOLEAN, description STRING, evidence ARRAY<BIGINT>, at_s DOUBLE, "
                     "zombie_window_s DOUBLE")
FAULT_FILE_SCHEMA = ("run STRING, fault_id STRING, ff_type STRING, ff_target STRING, ff_trigger STRING, "
                     "fired BOOLEAN, skipped_reason STRING, trigger_signal STRING, trigger_to_effect_ms DOUBLE, "
                     "landed BOOLEAN, effect_ok BOOLEAN, healed_ok BOOLEAN, start_s DOUBLE, end_s DOUBLE")


def parse_events(spark, runs: Sequence[RunFiles]):
    """The events DataFrame of every run (typed columns, ``json`` = the line), and its header-less line count.

    A line that is not an event (bad JSON, unknown kind, no seq) fails the report with the file
    and line, unless it is the file's last line: a torn tail that a killed writer left (the
    history reader drops it too).
    """
    from pyspark.sql import functions as F
    paths = [str(rf.run_dir.history) for rf in runs]
    path_map = spark.createDataFrame(
        [(str(rf.run_dir.history.resolve()), rf.run_dir.run, rf.run_dir.date, rf.run_dir.experiment)
         for rf in runs], "path STRING, run STRING, date STRING, experiment STRING")
    raw = (spark.read.text(paths)
           .select(F.expr("url_decode(regexp_replace(input_file_name(), '^file:/*', '/'))").alias("path"),
                   F.monotonically_increasing_id().alias("pos"), F.col("value").alias("json"))
           .where(F.length(F.trim("json")) > 0))
    parsed = raw.select("path", "pos", "json", F.from_json("json", event_schema()).alias("e"))
    kinds = F.array(*[F.lit(k) for k in KINDS])
    good = (F.col("e.seq").isNotNull() & F.col("e.mono_ns").isNotNull() & F.col("e.source").isNotNull()
            & F.array_contains(kinds, F.col("e.kind")))
    is_header = F.coalesce(F.col("e.header"), F.lit(False))
    flagged = parsed.withColumn("ok", good | is_header).withColumn("is_header", is_header)
    flagged = flagged.join(F.broadcast(path_map), "path", "left").cache()

    # One pass over the lines: per file, the last line and the first non-event line (if any).
    per_file = (flagged.groupBy("path").agg(
        F.max("pos").alias("last_pos"), F.first("run", ignorenulls=True).alias("run"),
        F.sum(F.when(~F.col("ok"), 1).otherwise(0)).alias("bad"),
        F.min(F.when(~F.col("ok"), F.col("pos"))).alias("first_bad")).collect())
    torn = 0
    for f in per_file:
        if f["run"] is None:
            raise UsageError(f"{f['path']}: read by Spark but not matched to a run directory "
                             "(a path with characters Spark rewrites?); rename the directory")
        if not f["bad"]:
            continue
        if f["bad"] == 1 and f["first_bad"] == f["last_pos"]:
            torn += 1  # a torn last line: the in-flight event of a killed writer
            continue
        b = flagged.where((F.col("path") == f["path"]) & (F.col("pos") == f["first_bad"])).first()
        line_no = flagged.where((F.col("path") == f["path"]) & (F.col("pos") <= f["first_bad"])).count()
        raise UsageError(f"{f['path']}:{line_no}: not a history event ({b['json'][:80]!r}); the history is "
                         "corrupt: restore it, re-merge the run's events/ with `chaos check RUN_DIR`, or move "
                         "the run directory out of the archive")

    tp = "transform(e.partitions, x -> named_struct('topic', x[0], 'partition', cast(x[1] as int)))"
    events = (flagged.where(F.col("ok") & ~F.col("is_header"))
              .select(
                  "run", "date", "experiment",
                  F.col("e.seq").alias("seq"), F.col("e.ts").alias("ts"), F.col("e.mono_ns").alias("mono_ns"),
                  F.col("e.source").alias("source"), F.col("e.kind").alias("kind"),
                  F.col("e.group").alias("group_id"), F.col("e.topic").alias("topic"),
                  F.col("e.partition").alias("partition"), F.col("e.offset").alias("record_offset"),
                  F.col("e.generation").alias("generation"), F.col("e.member_id").alias("member_id"),
                  F.col("e.incremental").alias("incremental"),
                  F.expr(tp).alias("partitions"),
                  F.expr("CASE WHEN e.kind = 'consumed' THEN transform(e.offsets, x -> cast(x as bigint)) END")
                  .alias("consumed_offsets"),
                  F.expr("CASE WHEN e.kind IN ('commit', 'committed_offsets') THEN transform(e.offsets, "
                         "x -> from_json(x, 'ARRAY<STRING>')) END").alias("_tpo"),
                  F.col("e.outcome").alias("outcome"), F.col("e.auto").alias("auto"),
                  F.col("e.answered_ns").alias("answered_ns"),
                  F.col("e.error_code").alias("error_code"), F.col("e.error_name").alias("error_name"),
                  F.col("e.state").alias("state"), F.col("e.coordinator").alias("coordinator"),
                  F.expr("transform(e.members, m -> named_struct('member_id', m.member_id, 'instance_id', "
                         "m.instance_id, 'assignment', transform(m.assignment, x -> named_struct('topic', x[0], "
                         "'partition', cast(x[1] as int))), 'subscription', m.subscription))").alias("members"),
                  F.col("e.broker").alias("broker"), F.col("e.event").alias("log_event"),
                  F.col("e.fault_id").alias("fault_id"), F.col("e.fault_type").alias("fault_type"),
                  F.col("e.target_role").alias("target_role"), F.col("e.node").alias("node"),
                  F.col("e.trigger").alias("trigger"), F.col("e.stage").alias("stage"), F.col("e.ok").alias("ok"),
                  F.col("e.name").alias("phase"), F.col("e.protocol").alias("protocol"),
                  F.col("e.assignor").alias("assignor"), F.col("e.client").alias("client"),
                  F.col("e.instance_id").alias("instance_id"),
                  F.expr("transform(e.records, x -> named_struct('partition', cast(x[0] as int), 'offset', x[1]))")
                  .alias("final_records"),
                  "json"))
    events = events.withColumn(
        "commit_offsets",
        F.expr("transform(_tpo, x -> named_struct('topic', x[0], 'partition', cast(x[1] as int), "
               "'offset', cast(x[2] as bigint)))")).drop("_tpo")
    first = events.groupBy("run").agg(F.min("mono_ns").alias("_first_ns"))
    events = (events.join(F.broadcast(first), "run")
              .withColumn("t_s", (F.col("mono_ns") - F.col("_first_ns")) / F.lit(1e9)).drop("_first_ns"))
    return events, torn


def _ownership_udf(pdf: Any) -> Any:  # pandas DataFrame -> DataFrame (pandas ships no types)
    """Ownership intervals of one run from its membership events (pandas, one run at a time)."""
    import pandas as pd

    out = []
    end_ns = int(pdf["run_end_ns"].iloc[0])
    holding: dict[str, dict[tuple, list]] = {}  # source -> tp -> [start_ns, generation, member_id, group, start_seq]

    def close(src: str, tp: tuple, ns: int, reason: str) -> None:
        start = holding[src].pop(tp)
        out.append((pdf["run"].iloc[0], start[3], tp[0], tp[1], src, start[2], start[1], start[4], start[0], ns,
                    reason))

    for row in pdf.sort_values("seq").itertuples(index=False):
        src = row.source
        held = holding.setdefault(src, {})
        if row.kind in ("member_start", "member_stop"):
            for tp in list(held):
                close(src, tp, row.mono_ns, row.kind)
            continue
        tps = [(p["topic"], int(p["partition"])) for p in (row.partitions if row.partitions is not None else [])]
        gen = None if pd.isna(row.generation) else int(row.generation)
        if row.kind == "assigned":
            if not row.incremental:
                keep = set(tps)
                for tp in [t for t in held if t not in keep]:
                    close(src, tp, row.mono_ns, "reassigned")
            for tp in tps:
                if tp not in held:
                    held[tp] = [row.mono_ns, gen, row.member_id, row.group_id, row.seq]
        else:  # revoked / lost
            for tp in tps:
                if tp in held:
                    close(src, tp, row.mono_ns, row.kind)
    for src, held in holding.items():
        for tp in list(held):
            close(src, tp, end_ns, "end_of_history")
    return pd.DataFrame(out, columns=["run", "group_id", "topic", "partition", "member", "member_id", "generation",
                                      "start_seq", "start_ns", "end_ns", "end_reason"])


OWNERSHIP_SCHEMA = ("run STRING, group_id STRING, topic STRING, partition INT, member STRING, member_id STRING, "
                    "generation BIGINT, start_seq BIGINT, start_ns BIGINT, end_ns BIGINT, end_reason STRING")


def _unavailability_udf(pdf):
    """Per partition of one group in one run: seconds without any owner after the group's first assignment."""
    import pandas as pd

    start = int(pdf["start_ns"].min())
    end = int(pdf["run_end_ns"].iloc[0])
    rows = []
    for (topic, part), g in pdf.groupby(["topic", "partition"]):
        covered = 0
        cur_s, cur_e = None, None
        for s, e in sorted(zip(g["start_ns"], g["end_ns"], strict=False)):
            if cur_e is None or s > cur_e:
                if cur_e is not None:
                    covered += cur_e - cur_s
                cur_s, cur_e = s, e
            else:
                cur_e = max(cur_e, e)
        if cur_e is not None:
            covered += cur_e - cur_s
        window = max(end - start, 0)
        rows.append((pdf["run"].iloc[0], pdf["group_id"].iloc[0], topic, int(part), window / 1e9,
                     max(window - covered, 0) / 1e9, len(g)))
    return pd.DataFrame(rows, columns=["run", "group_id", "topic", "partition", "window_s", "unowned_s",
                                       "intervals"])


UNAVAILABILITY_SCHEMA = ("run STRING, group_id STRING, topic STRING, partition INT, window_s DOUBLE, "
                         "unowned_s DOUBLE, intervals BIGINT")


def build_tables(spark, runs: Sequence[RunFiles], out: Path, progress: Progress) -> dict[str, Any]:
    """Write every table under ``out/tables`` and return the DataFrames read back from Parquet."""
    from pyspark.sql import functions as F

    tables_dir = out / "tables"
    dfs: dict[str, Any] = {}

    progress(f"parsing {len(runs)} histories with Spark")
    events, torn = parse_events(spark, runs)
    _write(events, tables_dir / "events")
    spark.catalog.clearCache()
    events = spark.read.parquet(str(tables_dir / "events")).cache()
    dfs["events"] = events
    keys = events.select("run", "date", "experiment").distinct()

    progress("faults")
    fs = events.where(F.col("kind") == "fault_start").select(
        "run", "fault_id", "fault_type", "target_role", "node", "trigger", F.col("t_s").alias("start_t_s"),
        F.col("mono_ns").alias("start_ns"))
    fe = (events.where(F.col("kind") == "fault_end")
          .groupBy("run", "fault_id").agg(F.min("t_s").alias("end_t_s"), F.min("mono_ns").alias("end_ns")))
    stable = events.where((F.col("kind") == "group_state") & (F.col("state") == "Stable")).select(
        "run", F.col("mono_ns").alias("stable_ns"))
    ev_faults = fs.join(fe, ["run", "fault_id"], "full")
    ttr = (ev_faults.where(F.col("end_ns").isNotNull()).join(stable, "run")
           .where(F.col("stable_ns") >= F.col("end_ns"))
           .groupBy("run", "fault_id", "end_ns").agg(((F.min("stable_ns") - F.col("end_ns")) / F.lit(1e9)).alias("ttr_s"))
           .drop("end_ns"))
    ff_rows = _fault_file_rows(runs)
    ff = spark.createDataFrame(ff_rows, FAULT_FILE_SCHEMA)
    faults = (ev_faults.join(ttr, ["run", "fault_id"], "left").join(ff, ["run", "fault_id"], "full")
              .withColumn("fault_type", F.coalesce("fault_type", "ff_type"))
              .withColumn("duration_s", F.col("end_t_s") - F.col("start_t_s"))
              .drop("ff_type").join(keys, "run"))
    _write(faults, tables_dir / "faults")

    progress("rebalances")
    prep = events.where((F.col("kind") == "broker_log") & (F.col("log_event") == "preparing_rebalance")).select(
        "run", "group_id", F.col("generation").alias("old_generation"), F.col("mono_ns").alias("start_ns"),
        F.col("t_s").alias("start_t_s"), F.col("seq").alias("start_seq"))
    asg = events.where((F.col("kind") == "assigned") & F.col("generation").isNotNull()).select(
        "run", "group_id", F.col("generation").alias("a_gen"), F.col("mono_ns").alias("a_ns"))
    stab = events.where((F.col("kind") == "broker_log") & (F.col("log_event") == "stabilized")).select(
        "run", "group_id", F.col("generation").alias("s_gen"), F.col("mono_ns").alias("s_ns"))
    first_asg = (prep.join(asg, ["run", "group_id"], "left")
                 .where(F.col("a_ns").isNull() | ((F.col("a_gen") == F.col("old_generation") + 1)
                                                  & (F.col("a_ns") >= F.col("start_ns"))))
                 .groupBy("run", "group_id", "old_generation", "start_ns", "start_t_s", "start_seq")
                 .agg(F.min("a_ns").alias("assigned_ns")))
    first_stab = (prep.join(stab, ["run", "group_id"])
                  .where((F.col("s_gen") == F.col("old_generation") + 1) & (F.col("s_ns") >= F.col("start_ns")))
                  .groupBy("run", "group_id", "start_seq").agg(F.min("s_ns").alias("stabilized_ns")))
    rebalances = (prep.select("run", "group_id", "old_generation", "start_ns", "start_t_s", "start_seq")
                  .join(first_asg, ["run", "group_id", "old_generation", "start_ns", "start_t_s", "start_seq"], "left")
                  .join(first_stab, ["run", "group_id", "start_seq"], "left")
                  .withColumn("new_generation", F.col("old_generation") + 1)
                  .withColumn("duration_s", (F.col("assigned_ns") - F.col("start_ns")) / F.lit(1e9))
                  .withColumn("stabilize_s", (F.col("stabilized_ns") - F.col("start_ns")) / F.lit(1e9))
                  .join(keys, "run"))
    _write(rebalances, tables_dir / "rebalances")

    progress("ownership intervals")
    run_end = events.groupBy("run").agg(F.max("mono_ns").alias("run_end_ns"), F.min("mono_ns").alias("run_start_ns"))
    membership = (events.where(F.col("kind").isin("member_start", "member_stop", "assigned", "revoked", "lost"))
                  .select("run", "seq", "mono_ns", "source", "kind", "group_id", "partitions", "incremental",
                          "generation", "member_id")
                  .join(run_end.select("run", "run_end_ns"), "run"))
    intervals = membership.groupBy("run").applyInPandas(_ownership_udf, OWNERSHIP_SCHEMA)
    intervals = (intervals.join(run_end, "run")
                 .withColumn("start_t_s", (F.col("start_ns") - F.col("run_start_ns")) / F.lit(1e9))
                 .withColumn("end_t_s", (F.col("end_ns") - F.col("run_start_ns")) / F.lit(1e9))
                 .withColumn("length_s", (F.col("end_ns") - F.col("start_ns")) / F.lit(1e9))
                 .drop("run_start_ns", "run_end_ns").join(keys, "run"))
    _write(intervals, tables_dir / "ownership_intervals")
    intervals = spark.read.parquet(str(tables_dir / "ownership_intervals"))
    unavail = (intervals.select("run", "group_id", "topic", "partition", "start_ns", "end_ns")
               .join(run_end.select("run", "run_end_ns"), "run")
               .groupBy("run", "group_id").applyInPandas(_unavailability_udf, UNAVAILABILITY_SCHEMA)
               .join(keys, "run"))
    _write(unavail, tables_dir / "partition_unavailability")

    progress("violations and runs")
    violations = spark.createDataFrame(_violation_rows(runs), VIOLATIONS_SCHEMA)
    _write(violations, tables_dir / "violations")

    counts = events.groupBy("run").agg(
        F.count("*").alias("events"),
        F.sum(F.when(F.col("kind") == "send_ok", 1).otherwise(0)).alias("send_ok"),
        F.sum(F.when(F.col("kind") == "consumed", F.size("consumed_offsets")).otherwise(0)).alias("consumed_offsets"),
        F.sum(F.when(F.col("kind") == "fault_start", 1).otherwise(0)).alias("fault_count"),
        F.min("ts").alias("start_ts"), F.max("ts").alias("end_ts"),
        ((F.max("mono_ns") - F.min("mono_ns")) / F.lit(1e9)).alias("duration_s"))
    consumed = (events.where(F.col("kind") == "consumed")
                .select("run", "group_id", "topic", "partition", F.explode("consumed_offsets").alias("o")))
    dups = (consumed.groupBy("run").agg(F.count("*").alias("n"),
                                        F.countDistinct("group_id", "topic", "partition", "o").alias("u"))
            .select("run", (F.col("n") - F.col("u")).alias("duplicate_deliveries")))
    reb = rebalances.groupBy("run").agg(F.count("*").alias("rebalances"))
    runs_df = (spark.createDataFrame(_runs_rows(runs), RUNS_SCHEMA)
               .join(counts, "run", "left").join(dups, "run", "left").join(reb, "run", "left")
               .fillna(0, ["events", "send_ok", "consumed_offsets", "fault_count", "duplicate_deliveries",
                           "rebalances"])
               .withColumn("duplicate_rate", F.when(F.col("send_ok") > 0,
                                                    F.col("duplicate_deliveries") / F.col("send_ok"))))
    _write(runs_df, tables_dir / "runs")

    for name in TABLES:
        dfs[name] = spark.read.parquet(str(tables_dir / name))
    dfs["_torn_lines"] = torn
    return dfs


def _write(df, path: Path) -> None:
    df.write.mode("overwrite").partitionBy(*PARTITION_COLUMNS).parquet(str(path))
    if not any(path.rglob("*.parquet")):
        # An empty table (no faults in the archive ...) would be a directory Spark, pandas and DuckDB
        # cannot infer a schema from: write one empty file that carries the schema.
        df.limit(0).coalesce(1).write.mode("overwrite").parquet(str(path))
