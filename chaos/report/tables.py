"""Loading an archive into Parquet tables with Spark.

Tables (``REPORT/tables/<name>/date=.../experiment=.../*.parquet``), keyed by
``run`` (``<date>/<experiment>/<run dir>``, with ``[kafka=...]`` or the other header
dimensions that tell apart runs of the same name, see :class:`chaos.report.archive.RunDir`):

- ``runs``: one row per run: header facts, the checkers' verdict and metrics
  (``checks.json``), the outcome, and counts derived from the events; ``kafka_version``
  (header), ``client`` and ``client_versions`` (the members' ``member_start`` events,
  see :data:`CLIENT_VERSIONS_SQL`);
- ``events``: one row per history line after the header, typed columns per kind
  and ``t_s`` (seconds since the run's first event); the line as written is not
  copied (the report reads its evidence lines from ``history.jsonl`` by ``seq``);
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

The history lines are parsed once by Spark's JSON reader with :func:`event_schema` (derived from
the event records of :mod:`chaos.history.event`; nothing is inferred) so an archive of any size is
read in parallel; the small per-run files come from :mod:`chaos.report.archive`. Everything derived
from the events is Spark SQL (joins, window functions): no Python UDF, so the executors run no Python.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import is_dataclass
from pathlib import Path
from typing import Annotated, Any, get_args, get_origin

from chaos.checkers.evidence import declared_application_members
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
            "run_dir": rd.location, "date_from_layout": rd.date_from_layout,
            "run_id": str(h.get("run_id")), "seed": h.get("seed"),
            "kafka_version": str(versions.get("kafka")) if versions.get("kafka") is not None else None,
            # the kafka-chaos commit the run ran on (sha, sha+"+dirty"; null outside a git checkout, absent in
            # runs older than the field): the report's flaky rule groups runs by it
            "kafka_chaos_commit": (str(versions["kafka-chaos-commit"])
                                   if versions.get("kafka-chaos-commit") is not None else None),
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
            # share groups (issue 36): figures of share-delivery and share-progress (null on consumer-group runs,
            # where they have nothing to judge); the time to reacquire only when a dead member's record came back
            "share_records": metrics.get("share-delivery.records"),
            "share_redeliveries": metrics.get("share-delivery.redeliveries"),
            "share_reacquired": metrics.get("share-progress.reacquired"),
            "share_reacquire_max_s": (metrics.get("share-progress.reacquire_max_s")
                                      if metrics.get("share-progress.reacquired") else None),
            # members running the team's own loop through chaos.instrument (the re-check of generations skips
            # their ``consumed`` events, as the checker does: chaos/checkers/generations.py)
            "app_members": sorted(m for m, how in declared_application_members(h.get("experiment")).items()
                                  if how == "app"),
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
               "date_from_layout BOOLEAN, run_id STRING, seed BIGINT, kafka_version STRING, kafka_chaos_commit STRING, "
               "judged BOOLEAN, "
               "valid STRING, failed_checkers ARRAY<STRING>, unknown_checkers ARRAY<STRING>, checks_events BIGINT, "
               "expected BOOLEAN, wall_s DOUBLE, produced DOUBLE, lost DOUBLE, duplicates DOUBLE, "
               "consumed_records DOUBLE, time_to_recover_s DOUBLE, zombie_windows DOUBLE, "
               "zombie_window_max_s DOUBLE, unexplained_windows DOUBLE, liveness_valid STRING, "
               "longest_rebalance_s DOUBLE, unavailable_max_s DOUBLE, unavailable_total_s DOUBLE, "
               "phases_over_bound DOUBLE, phases_over_bound_explained DOUBLE, share_records DOUBLE, "
               "share_redeliveries DOUBLE, share_reacquired DOUBLE, share_reacquire_max_s DOUBLE, "
               "app_members ARRAY<STRING>")
VIOLATIONS_SCHEMA = ("run STRING, date STRING, experiment STRING, checker STRING, checker_valid STRING, "
                     "finding INT, violation BOOLEAN, description STRING, evidence ARRAY<BIGINT>, at_s DOUBLE, "
                     "zombie_window_s DOUBLE")
FAULT_FILE_SCHEMA = ("run STRING, fault_id STRING, ff_type STRING, ff_target STRING, ff_trigger STRING, "
                     "fired BOOLEAN, skipped_reason STRING, trigger_signal STRING, trigger_to_effect_ms DOUBLE, "
                     "landed BOOLEAN, effect_ok BOOLEAN, healed_ok BOOLEAN, start_s DOUBLE, end_s DOUBLE")


CORRUPT_COLUMN = "_corrupt_record"
_BAD_LINE = "@@chaos-bad-history-line@@"
_UNMATCHED = "@@chaos-unmatched-file@@"


def _spark_files(reader_df: Any, runs: Sequence[RunFiles]) -> dict[str, RunFiles]:
    """Spark's name of each history file (as ``_metadata.file_path`` gives it) -> its run.

    Spark names files by URI (``file:/a%20b/history.jsonl``); the names come from Spark's own
    file index (``inputFiles``, no job), so no path is rewritten per row.
    """
    from urllib.parse import unquote, urlsplit

    by_path = {str(rf.run_dir.history.resolve()): rf for rf in runs}
    out: dict[str, RunFiles] = {}
    for uri in reader_df.inputFiles():
        local = str(Path(unquote(urlsplit(uri).path)).resolve())
        rf = by_path.get(local)
        if rf is None:
            raise UsageError(f"{local}: read by Spark but not matched to a run directory "
                             "(a path with characters Spark rewrites?); rename the directory")
        out[uri] = rf
    missing = set(by_path) - {str(rf.run_dir.history.resolve()) for rf in out.values()}
    if missing:
        raise UsageError(f"{sorted(missing)[0]}: not listed by Spark; check the file is readable")
    return out


def parse_events(spark, runs: Sequence[RunFiles]):
    """The events DataFrame of every run (typed columns), lazily, and the number of torn last lines dropped.

    Each history line is parsed once, by Spark's JSON reader with the explicit :func:`event_schema`
    (no inference, only the columns a query uses are converted). A line that is not an event (bad
    JSON, a value of the wrong type, unknown kind, no seq) fails the first action on the DataFrame;
    run that action inside :func:`history_errors`, which turns the failure into a ``UsageError``
    naming the file and line (the torn last line of a killed writer is dropped instead, as the
    history reader does). ``t_s`` is counted from the run's first event, whose ``mono_ns`` the
    archive scan read (a history is in ``mono_ns`` order), so no per-run aggregation is needed.
    """
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    schema = T.StructType([*event_schema().fields, T.StructField(CORRUPT_COLUMN, T.StringType())])
    reader = (spark.read.schema(schema).option("mode", "PERMISSIVE")
              .option("columnNameOfCorruptRecord", CORRUPT_COLUMN))
    raw = reader.json([str(rf.run_dir.history) for rf in runs])
    files = _spark_files(raw, runs)
    # inputFiles() says file:///a/b, _metadata.file_path file:/a/b (Hadoop's Path.toUri): map both spellings
    path_map = spark.createDataFrame(
        [(name, rf.run_dir.run, rf.run_dir.date, rf.run_dir.experiment, rf.first_ns, rf.torn_tail)
         for uri, rf in files.items() for name in {uri, re.sub(r"^file://(?=/)", "file:", uri)}],
        "_path STRING, run STRING, date STRING, experiment STRING, _first_ns BIGINT, _torn STRING")
    e = raw.select("*", F.col("_metadata.file_path").alias("_path")).join(F.broadcast(path_map), "_path", "left")

    corrupt = F.col(CORRUPT_COLUMN)
    is_header = F.coalesce(F.col("header"), F.lit(False))
    is_event = (F.col("seq").isNotNull() & F.col("mono_ns").isNotNull() & F.col("source").isNotNull()
                & F.col("kind").isin(*KINDS))
    bad = corrupt.isNotNull() | ~(is_header | is_event)
    torn = corrupt.isNotNull() & F.col("_torn").isNotNull() & corrupt.startswith(F.col("_torn"))
    # A bad line fails the job where it is met (one pass over the data, no count first): the message
    # carries the run key, and history_errors() asks the history reader which line it is.
    keep = (F.when(F.col("run").isNull(), F.raise_error(F.concat(F.lit(_UNMATCHED), F.col("_path"), F.lit(_UNMATCHED))))
            .when(bad & ~torn, F.raise_error(F.concat(F.lit(_BAD_LINE), F.col("run"), F.lit(_BAD_LINE),
                                                       F.substring(F.coalesce(corrupt, F.lit("")), 1, 80))))
            .otherwise(~is_header & ~torn))

    tp = "transform(partitions, x -> named_struct('topic', x[0], 'partition', cast(x[1] as int)))"
    events = (e.where(keep)
              .select(
                  "run", "date", "experiment", "seq", "ts", "mono_ns", "source", "kind",
                  F.col("group").alias("group_id"), "topic", "partition", F.col("offset").alias("record_offset"),
                  "generation", "member_id", "incremental",
                  F.expr(tp).alias("partitions"),
                  F.expr("CASE WHEN kind = 'consumed' THEN transform(offsets, x -> cast(x as bigint)) END")
                  .alias("consumed_offsets"),
                  # a commit's [topic, partition, offset] triples arrive as JSON text: the field is numbers in
                  # `consumed` (see event_schema); only these short arrays are read a second time
                  F.expr("CASE WHEN kind IN ('commit', 'committed_offsets') THEN transform(offsets, "
                         "x -> from_json(x, 'ARRAY<STRING>')) END").alias("_tpo"),
                  "outcome", "auto", "answered_ns", "error_code", "error_name", "state", "coordinator",
                  F.expr("transform(members, m -> named_struct('member_id', m.member_id, 'instance_id', "
                         "m.instance_id, 'assignment', transform(m.assignment, x -> named_struct('topic', x[0], "
                         "'partition', cast(x[1] as int))), 'subscription', m.subscription))").alias("members"),
                  "broker", F.col("event").alias("log_event"), "fault_id", "fault_type", "target_role", "node",
                  "trigger", "traits", "stage", "ok", F.col("name").alias("phase"), "protocol", "assignor", "client",
                  "client_version", "instance_id",
                  F.expr("transform(records, x -> named_struct('partition', cast(x[0] as int), 'offset', "
                         "cast(x[1] as bigint)))").alias("final_records"),
                  ((F.col("mono_ns") - F.col("_first_ns")) / F.lit(1e9)).alias("t_s"))
              .withColumn("commit_offsets", F.expr(
                  "transform(_tpo, x -> named_struct('topic', x[0], 'partition', cast(x[1] as int), "
                  "'offset', cast(x[2] as bigint)))")).drop("_tpo"))
    return events, sum(1 for rf in runs if rf.torn_tail is not None)


#: what Spark's message says when a Parquet file it reads back is damaged (Spark 4 error classes, parquet-mr)
_PARQUET_DAMAGE = ("FAILED_READ_FILE", "is not a Parquet file", "CANNOT_READ_FILE_FOOTER", "Can not read value at")


@contextmanager
def parquet_errors(tables_dir: Path) -> Iterator[None]:
    """A Parquet table that cannot be read back (a damaged file) is bad input: one line, not a Java trace."""
    try:
        yield
    except UsageError:
        raise
    except Exception as exc:  # noqa: BLE001 - py4j/pyspark wrap the task failure in several exception types
        text = str(exc)
        if not any(marker in text for marker in _PARQUET_DAMAGE):
            raise
        first = next((line.strip() for line in text.splitlines() if any(m in line for m in _PARQUET_DAMAGE)), "")
        raise UsageError(f"{tables_dir}: a Parquet table cannot be read ({first[:160]}); delete the report "
                         "directory and build the report again") from None


@contextmanager
def history_errors(runs: Sequence[RunFiles]) -> Iterator[None]:
    """Turn the failure of a job over :func:`parse_events` at a bad history line into a one-line ``UsageError``.

    Spark reports the run; the history reader (the authority on what a history line is) names the
    line and what is wrong with it.
    """
    from chaos.history import read_history

    try:
        yield
    except UsageError:
        raise
    except Exception as exc:  # noqa: BLE001 - py4j/pyspark wrap the task failure in several exception types
        text = str(exc)
        if _UNMATCHED in text:
            raise UsageError(f"{text.partition(_UNMATCHED)[2].partition(_UNMATCHED)[0]}: read by Spark but not "
                             "matched to a run directory (a path with characters Spark rewrites?); rename the "
                             "directory") from None
        if _BAD_LINE not in text:
            raise
        run_key, _, rest = text.partition(_BAD_LINE)[2].partition(_BAD_LINE)
        rf = next((r for r in runs if r.run_dir.run == run_key), None)
        if rf is None:
            raise UsageError(f"a history line is not an event (run {run_key}); run `chaos check` on that run") from None
        path = rf.run_dir.history
        where = (rest.splitlines() or [""])[0][:80]
        try:
            read_history(path)
        except UsageError as bad:
            # the run as its archive names it (a staged copy's path would be gone after the report)
            raise UsageError(f"{rf.run_dir.location}/{bad}; the history is corrupt: restore it, re-merge the run's "
                             "events/ with `chaos check RUN_DIR`, or move the run directory out of the archive") \
                from None
        raise UsageError(f"{rf.run_dir.location}/{path.name}: Spark could not read a line as a history event "
                         f"({where!r}) though the history reader accepts the file: a gap in "
                         "chaos.report.tables.event_schema, please report it") \
            from None


#: Ownership intervals with window functions (no Python round trip). Per member (``source``) and partition,
#: every membership event becomes a signal: ``assigned`` *adds* its partitions; an eager (not incremental)
#: ``assigned`` also *closes* the member's other partitions ("reassigned"); ``revoked``/``lost`` close theirs;
#: ``member_start``/``member_stop`` close all. An interval opens at an add that follows a close (or nothing) and
#: ends at the next close, or at the run's last event ("end_of_history"). A member's partitions are every
#: partition it was ever assigned in the run (closing one it does not hold changes nothing).
_SQL_OWNERSHIP_INTERVALS = """
WITH m AS (
  SELECT run, seq, mono_ns, source, kind, group_id, generation, member_id, coalesce(incremental, false) AS incr,
         transform(partitions, p -> named_struct('topic', p.topic, 'partition', p.partition)) AS tps
  FROM events WHERE kind IN ('member_start', 'member_stop', 'assigned', 'revoked', 'lost')),
universe AS (
  SELECT run, source, array_distinct(flatten(collect_list(tps))) AS all_tps FROM m WHERE kind = 'assigned'
  GROUP BY run, source),
signals AS (
  SELECT m.run, m.seq, m.mono_ns, m.source, m.group_id, m.generation, m.member_id, tp.topic, tp.partition,
         CASE WHEN m.kind = 'assigned' AND array_contains(m.tps, tp) THEN 'add'
              WHEN m.kind = 'assigned' THEN 'reassigned' ELSE m.kind END AS sig
  FROM m JOIN universe u ON u.run = m.run AND u.source = m.source
  LATERAL VIEW explode(CASE WHEN m.kind IN ('member_start', 'member_stop') OR (m.kind = 'assigned' AND NOT m.incr)
                            THEN u.all_tps ELSE m.tps END) x AS tp),
marked AS (
  SELECT *, CASE WHEN sig = 'add' AND coalesce(lag(sig) OVER w, 'none') <> 'add' THEN 1 ELSE 0 END AS opens
  FROM signals WINDOW w AS (PARTITION BY run, source, topic, partition ORDER BY seq)),
numbered AS (
  SELECT *, sum(opens) OVER (PARTITION BY run, source, topic, partition ORDER BY seq
                             ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS n
  FROM marked),
intervals AS (
  SELECT run, source, topic, partition, n,
         min_by(named_struct('group_id', group_id, 'member_id', member_id, 'generation', generation, 'seq', seq,
                             'ns', mono_ns), CASE WHEN opens = 1 THEN seq END) AS s,
         min_by(named_struct('ns', mono_ns, 'reason', sig), CASE WHEN sig <> 'add' THEN seq END) AS e,
         min(CASE WHEN sig <> 'add' THEN seq END) AS end_seq
  FROM numbered WHERE n > 0 GROUP BY run, source, topic, partition, n)
SELECT i.run, i.s.group_id AS group_id, i.topic, i.partition, i.source AS member, i.s.member_id AS member_id,
       i.s.generation AS generation, i.s.seq AS start_seq, i.s.ns AS start_ns,
       CASE WHEN i.end_seq IS NULL THEN r.run_end_ns ELSE i.e.ns END AS end_ns,
       CASE WHEN i.end_seq IS NULL THEN 'end_of_history' ELSE i.e.reason END AS end_reason, i.end_seq
FROM intervals i JOIN run_end r ON r.run = i.run
"""

OWNERSHIP_SCHEMA = ("run STRING, group_id STRING, topic STRING, partition INT, member STRING, member_id STRING, "
                    "generation BIGINT, start_seq BIGINT, start_ns BIGINT, end_ns BIGINT, end_reason STRING, "
                    "end_seq BIGINT")

#: Per partition of one group in one run: seconds without any owner between the group's first assignment and
#: the run's last event. The covered time is the length of the union of the partition's intervals: sorted by
#: start, each adds what it reaches beyond the furthest end before it.
_SQL_UNAVAILABILITY = """
WITH iv AS (
  SELECT i.run, i.group_id, i.topic, i.partition, i.start_ns, i.end_ns, r.run_end_ns,
         min(i.start_ns) OVER (PARTITION BY i.run, i.group_id) AS group_start_ns,
         max(i.end_ns) OVER (PARTITION BY i.run, i.group_id, i.topic, i.partition ORDER BY i.start_ns, i.end_ns
                             ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS reach_ns
  FROM ownership_intervals i JOIN run_end r ON r.run = i.run)
SELECT run, group_id, topic, partition, greatest(first(run_end_ns) - first(group_start_ns), 0) / 1e9 AS window_s,
       greatest(greatest(first(run_end_ns) - first(group_start_ns), 0)
                - sum(greatest(end_ns - greatest(start_ns, coalesce(reach_ns, start_ns)), 0)), 0) / 1e9 AS unowned_s,
       count(*) AS intervals
FROM iv GROUP BY run, group_id, topic, partition
"""


#: The runs table's ``client_versions``: the sorted distinct ``"<client> <version>"`` of the run's ``member_start``
#: events, joined by ``+`` ("confluent-kafka 2.12.0+confluent-kafka 2.16.1+java 4.1.0"). Every start counts (a
#: member upgraded mid-run adds its second version); the version is ``client_version`` without its remark
#: ("2.16.1 (librdkafka 2.16.1)" -> "2.16.1"), as :func:`chaos.report.archive.header_client_versions` spells it.
CLIENT_VERSIONS_SQL = ("concat_ws('+', array_sort(collect_set(CASE WHEN trim(substring_index(client_version, ' (', 1)) "
                       "<> '' THEN concat(client, ' ', trim(substring_index(client_version, ' (', 1))) "
                       "ELSE client END)))")


def build_tables(spark, runs: Sequence[RunFiles], out: Path, progress: Progress) -> dict[str, Any]:
    """Write every table under ``out/tables`` and return the DataFrames read back from Parquet."""
    from pyspark.sql import functions as F

    tables_dir = out / "tables"
    dfs: dict[str, Any] = {}

    progress(f"parsing {len(runs)} histories with Spark")
    events, torn = parse_events(spark, runs)
    with history_errors(runs):
        _write(events, tables_dir / "events")
    # Read back from Parquet (columnar: each query below reads only its columns), not cached: at 10 M events
    # the whole table does not fit a 2 GiB driver and caching it spills to disk.
    events = spark.read.parquet(str(tables_dir / "events"))
    dfs["events"] = events
    events.createOrReplaceTempView("events")
    keys = spark.createDataFrame([(rf.run_dir.run, rf.run_dir.date, rf.run_dir.experiment) for rf in runs],
                                 "run STRING, date STRING, experiment STRING")
    run_end = events.groupBy("run").agg(F.max("mono_ns").alias("run_end_ns"),
                                        F.min("mono_ns").alias("run_start_ns")).cache()
    run_end.createOrReplaceTempView("run_end")

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
              .drop("ff_type").join(F.broadcast(keys), "run"))
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
                  .join(F.broadcast(keys), "run"))
    _write(rebalances, tables_dir / "rebalances")

    progress("ownership intervals")
    intervals = spark.sql(_SQL_OWNERSHIP_INTERVALS)
    intervals = (intervals.join(run_end, "run")
                 .withColumn("start_t_s", (F.col("start_ns") - F.col("run_start_ns")) / F.lit(1e9))
                 .withColumn("end_t_s", (F.col("end_ns") - F.col("run_start_ns")) / F.lit(1e9))
                 .withColumn("length_s", (F.col("end_ns") - F.col("start_ns")) / F.lit(1e9))
                 .drop("run_start_ns", "run_end_ns").join(F.broadcast(keys), "run"))
    _write(intervals, tables_dir / "ownership_intervals")
    spark.read.parquet(str(tables_dir / "ownership_intervals")).createOrReplaceTempView("ownership_intervals")
    unavail = spark.sql(_SQL_UNAVAILABILITY).join(F.broadcast(keys), "run")
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
    # the consumer client libraries of the run's members (member_start), e.g. "confluent-kafka" or
    # "confluent-kafka+java" for a mixed group, and their versions (CLIENT_VERSIONS_SQL); null when no
    # member_start was recorded
    clients = (events.where((F.col("kind") == "member_start") & F.col("client").isNotNull())
               .groupBy("run").agg(F.concat_ws("+", F.array_sort(F.collect_set("client"))).alias("client"),
                                   F.expr(CLIENT_VERSIONS_SQL).alias("client_versions")))
    runs_df = (spark.createDataFrame(_runs_rows(runs), RUNS_SCHEMA)
               .join(counts, "run", "left").join(dups, "run", "left").join(reb, "run", "left")
               .join(clients, "run", "left")
               .fillna(0, ["events", "send_ok", "consumed_offsets", "fault_count", "duplicate_deliveries",
                           "rebalances"])
               .withColumn("duplicate_rate", F.when(F.col("send_ok") > 0,
                                                    F.col("duplicate_deliveries") / F.col("send_ok"))))
    _write(runs_df, tables_dir / "runs")

    for name in TABLES:
        dfs[name] = spark.read.parquet(str(tables_dir / name))
    dfs["_torn_lines"] = torn
    run_end.unpersist()
    return dfs


def _write(df, path: Path) -> None:
    df.write.mode("overwrite").partitionBy(*PARTITION_COLUMNS).parquet(str(path))
    if not any(path.rglob("*.parquet")):
        # An empty table (no faults in the archive ...) would be a directory Spark, pandas and DuckDB
        # cannot infer a schema from: write one empty file that carries the schema.
        df.limit(0).coalesce(1).write.mode("overwrite").parquet(str(path))
