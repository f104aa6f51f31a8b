"""``chaos check RUN_DIR...``: re-judge recorded runs from their histories.

Exit codes (worst run wins, in this order):

- 1: some invariant is violated (a checker said ``false``);
- 2: bad input (missing directory, corrupt history): one line, no traceback;
- 3: inconclusive (some checker said ``unknown``, none said ``false``): the
  history could not prove or refute an invariant (a crashed checker, no
  observer samples after the heal ...). Not a pass, and not the same as bad
  input: CI should treat it as a failure to investigate, but a script can tell
  "the tool could not read this" (2) from "the run did not show enough" (3);
- 0: every chosen checker said ``true``.

Register it with ``main.add_command(chaos.checkers.command.check)``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click
import orjson

from chaos.checkers.bounds import CheckerBounds
from chaos.checkers.judge import CHECKS_FILE, finding_time, load_run, verdict_dict, write_checks
from chaos.checkers.registry import parse_names, run_checkers
from chaos.checkers.result import CheckerName, Validity, Verdict
from chaos.errors import UsageError
from chaos.history import History, to_json

EXIT_OK, EXIT_FALSE, EXIT_BAD_INPUT, EXIT_UNKNOWN = 0, 1, 2, 3
_MARK = {Validity.TRUE: "ok ", Validity.FALSE: "FAIL", Validity.UNKNOWN: "??? "}


def render(run_dir: Path, history: History, verdict: Verdict, evidence_lines: int = 6) -> str:
    """A readable verdict: one line per checker, details and evidence for the failing ones."""
    out = [f"{run_dir}  run {history.header.run_id}  {len(history.events)} events  verdict: {verdict.valid.value}"]
    for note in history.notes:
        out.append(f"  note: {note}")
    for r in verdict.results:
        out.append(f"  [{_MARK[r.valid]}] {r.checker.value:22s} {r.summary}")
        if r.valid is Validity.TRUE:
            continue
        for f in r.findings:
            if not f.violation:
                continue
            at = finding_time(history, f.evidence)
            out.append(f"      - {'' if at is None else f'at {at:.3f}s: '}{f.description}")
            for seq in f.evidence[:evidence_lines]:
                try:
                    out.append(f"          {to_json(history.event(seq)).decode()}")
                except KeyError:
                    out.append(f"          (seq {seq} not in history)")
    return "\n".join(out)


@click.command("check")
@click.argument("run_dirs", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--checker", "checkers", multiple=True, type=click.Choice([c.value for c in CheckerName]),
              help="run only this checker (repeatable; default: all nine)")
@click.option("--json", "as_json", is_flag=True, help="print the verdicts as JSON (as written to checks.json)")
@click.option("--convergence-s", type=float, default=None,
              help="convergence bound after the last heal (default: session + rebalance timeout + 5 s)")
@click.option("--slack-s", type=float, default=0.5, show_default=True,
              help="tolerated delay between an action and the event recording it")
def check(run_dirs: tuple[Path, ...], checkers: tuple[str, ...], as_json: bool, convergence_s: float | None,
          slack_s: float) -> None:
    """Re-judge recorded runs: read RUN_DIR/history.jsonl, write RUN_DIR/checks.json, print the verdict.

    Exit 0 all valid, 1 an invariant failed, 2 bad input, 3 inconclusive (a checker answered unknown).
    """
    try:
        bounds = CheckerBounds(convergence_s=convergence_s, clock_slack_s=slack_s)
        names = parse_names(checkers) if checkers else None
    except UsageError as exc:
        click.echo(f"chaos: error: {exc}", err=True)
        sys.exit(EXIT_BAD_INPUT)
    codes = []
    docs = []
    for run_dir in run_dirs:
        try:
            history = load_run(run_dir)
        except UsageError as exc:
            click.echo(f"chaos: error: {exc}", err=True)
            codes.append(EXIT_BAD_INPUT)
            continue
        verdict = run_checkers(history, names, bounds)
        write_checks(run_dir / CHECKS_FILE, history, verdict, bounds)
        if as_json:
            docs.append({"run_dir": str(run_dir), **verdict_dict(history, verdict, bounds)})
        else:
            click.echo(render(run_dir, history, verdict))
        codes.append({Validity.TRUE: EXIT_OK, Validity.FALSE: EXIT_FALSE,
                      Validity.UNKNOWN: EXIT_UNKNOWN}[verdict.valid])
    if as_json:
        click.echo(orjson.dumps(docs if len(docs) != 1 else docs[0], option=orjson.OPT_INDENT_2).decode())
    for code in (EXIT_FALSE, EXIT_BAD_INPUT, EXIT_UNKNOWN):
        if code in codes:
            sys.exit(code)
    sys.exit(EXIT_OK)
