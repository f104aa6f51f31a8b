"""``chaos report RESULTS_DIR --out REPORT_DIR``: the reliability report over many runs.

Exit codes:

- 0: the report was written and the Spark re-check agrees with every run's ``checks.json``;
- 1: the report was written, but the re-check disagrees with some run's checkers
  (a checker bug or a stale ``checks.json``: see the report's re-check section);
- 2: bad input (missing directory, no runs found, corrupt history, Spark would not
  start): one line saying what to do, no traceback.

Register it with ``main.add_command(chaos.report.command.report)``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from chaos.errors import UsageError

EXIT_OK, EXIT_DISAGREE, EXIT_BAD_INPUT = 0, 1, 2


@click.command("report")
@click.argument("results_dir", type=click.Path(path_type=Path))
@click.option("--out", "out", required=True, type=click.Path(path_type=Path),
              help="directory for report.html, the CSV/JSON summaries and the Parquet tables")
@click.option("--spark-master", default=None, metavar="URL",
              help="Spark master URL (default local[2]; e.g. spark://host:7077)")
@click.option("--timelines", type=int, default=30, show_default=True,
              help="ownership timelines to draw (failing runs first)")
@click.option("--json", "as_json", is_flag=True, help="print the summary as JSON (as written to summary.json)")
def report(results_dir: Path, out: Path, spark_master: str | None, timelines: int, as_json: bool) -> None:
    """Build the reliability report over every run under RESULTS_DIR.

    Loads histories and checks.json into Parquet tables (Spark), computes pass rates, violations by
    invariant, time to recover, rebalances, zombie windows, duplicates and unavailability per night and
    experiment, re-checks the core invariants with Spark SQL, and writes a static HTML report.
    Exit 0 written, 1 the re-check disagrees with the per-run checkers, 2 bad input.
    """
    try:
        from chaos.report.job import build_report

        summary = build_report(results_dir, out, master=spark_master, timelines=timelines)
    except UsageError as exc:
        click.echo(f"chaos: error: {exc}", err=True)
        sys.exit(EXIT_BAD_INPUT)
    if as_json:
        click.echo(json.dumps({k: v for k, v in summary.items() if k != "violations_list"}, indent=1, default=str))
    else:
        rc = summary["recheck"]
        click.echo(f"{summary['runs']} runs ({summary['passed']} passed, {summary['failed']} failed, "
                   f"{summary['inconclusive']} inconclusive), {summary['violations']} violations; "
                   f"re-check {'agrees' if rc['agree'] else 'DISAGREES'} on {rc['compared']} comparisons")
        click.echo(f"report: {summary['files']['html']}")
    sys.exit(EXIT_OK if summary["recheck"]["agree"] else EXIT_DISAGREE)
