"""``chaos report ARCHIVE [ARCHIVE ...] --out REPORT_DIR``: the reliability report over many runs.

Each ARCHIVE is a results directory (``chaos run``, ``chaos run --nightly``, ``chaos explore``): a local path,
a ``file:`` URI (read as that path) or a URI Spark's Hadoop reads (``hdfs:``, ``s3a:`` ...: copied into a
staging directory inside ``--out`` first, only the files the report reads, and removed when the report ends).
Their runs are merged into one report; a run held by two archives is refused. Runs below an explore archive's
``findings/`` are not counted; its ``findings/*/finding.json`` are, one row per signature over all archives
(``findings.csv``, docs/report.md).

Exit codes:

- 0: the report was written and the Spark re-check agrees with every run's ``checks.json``;
- 1: the report was written, but the re-check disagrees with some run's checkers
  (a checker bug or a stale ``checks.json``: see the report's re-check section);
- 2: bad input (missing directory, no runs found, a run in two archives, corrupt history or finding.json,
  a URI scheme Spark has no filesystem for, Spark would not start, ``--out`` inside a recorded run): one
  line saying what to do, no traceback.

``--out`` is left as it was when the report fails: the directories the command
created for it are removed again (one that existed is kept, whatever it holds), and so is the staging
directory of archives read through Hadoop, on Ctrl-C too.

Register it with ``main.add_command(chaos.report.command.report)``.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import click

from chaos.errors import UsageError

EXIT_OK, EXIT_DISAGREE, EXIT_BAD_INPUT = 0, 1, 2


def _first_missing(out: Path) -> Path | None:
    """The outermost directory of ``out`` that does not exist yet (what the report's ``mkdir -p`` creates), or
    None when ``out`` exists."""
    missing = None
    for d in (out.absolute(), *out.absolute().parents):
        if os.path.lexists(d):
            break
        missing = d
    return missing


@click.command("report")
@click.argument("archives", nargs=-1, required=True, metavar="ARCHIVE...")
@click.option("--out", "out", required=True, type=click.Path(path_type=Path),
              help="directory for report.html, the CSV/JSON summaries and the Parquet tables")
@click.option("--spark-master", default=None, metavar="URL",
              help="Spark master URL (default local[2]; e.g. spark://host:7077)")
@click.option("--timelines", type=int, default=30, show_default=True,
              help="ownership timelines to draw (failing runs first)")
@click.option("--json", "as_json", is_flag=True, help="print the summary as JSON (as written to summary.json)")
def report(archives: tuple[str, ...], out: Path, spark_master: str | None, timelines: int, as_json: bool) -> None:
    """Build the reliability report over every run under each ARCHIVE, merged into one report.

    An ARCHIVE is a results directory: a path, a file: URI or any URI Spark's Hadoop reads (hdfs:, s3a: with
    its connector on Spark's classpath), copied to a temporary directory in --out first. Loads histories and
    checks.json into Parquet tables (Spark), computes pass rates, violations by invariant, time to recover,
    rebalances, zombie windows, duplicates and unavailability per night and experiment, re-checks the core
    invariants with Spark SQL, lists the findings of chaos explore archives once per signature (runs below
    findings/ are not counted), and writes a static HTML report.
    Exit 0 written, 1 the re-check disagrees with the per-run checkers, 2 bad input.
    """
    created = _first_missing(out)
    try:
        from chaos.replay import refuse_out_in_run

        refuse_out_in_run(out)
        from chaos.report.job import build_report

        summary = build_report(list(archives), out, master=spark_master, timelines=timelines)
    except BaseException as exc:
        # a failed report leaves no empty or half-written --out behind; only what this command created goes
        if created is not None and created.is_dir() and not created.is_symlink():
            shutil.rmtree(created, ignore_errors=True)
        if not isinstance(exc, UsageError):
            raise
        click.echo(f"chaos: error: {exc}", err=True)
        sys.exit(EXIT_BAD_INPUT)
    if as_json:
        click.echo(json.dumps({k: v for k, v in summary.items() if k != "violations_list"}, indent=1, default=str))
    else:
        rc = summary["recheck"]
        click.echo(f"{summary['runs']} runs ({summary['passed']} passed, {summary['failed']} failed, "
                   f"{summary['inconclusive']} inconclusive), {summary['violations']} violations; "
                   f"re-check {'agrees' if rc['agree'] else 'DISAGREES'} on {rc['compared']} comparisons")
        if summary["findings"] or summary["explorations"]:
            click.echo(f"{len(summary['findings'])} finding(s) of chaos explore over {len(summary['explorations'])} "
                       "exploration(s), each signature once: findings.csv")
        click.echo(f"report: {summary['files']['html']}")
    sys.exit(EXIT_OK if summary["recheck"]["agree"] else EXIT_DISAGREE)
