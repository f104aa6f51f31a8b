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

``--json`` prints one JSON list whatever the number of runs: one entry per
RUN argument, either the verdict (as written to ``checks.json``, plus
``run_dir`` and ``error: null``) or ``{"run_dir", "error", "valid": "error"}``
for a run that could not be judged (that error is also the one stderr line).

Register it with ``main.add_command(chaos.checkers.command.check)``.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import click
import orjson

from chaos.checkers.bounds import CheckerBounds
from chaos.checkers.judge import CHECKS_FILE, finding_time, load_run, verdict_dict, write_checks
from chaos.checkers.registry import parse_names, run_checkers
from chaos.checkers.result import Validity, Verdict
from chaos.errors import UsageError
from chaos.history import History, to_json
from chaos.history.merge import HISTORY_FILE
from chaos.model.checker_name import CheckerName

EXIT_OK, EXIT_FALSE, EXIT_BAD_INPUT, EXIT_UNKNOWN = 0, 1, 2, 3
_MARK = {Validity.TRUE: "ok ", Validity.FALSE: "FAIL", Validity.UNKNOWN: "??? "}


def render(run_dir: Path, history: History, verdict: Verdict, evidence_lines: int = 6) -> str:
    """A readable verdict: one line per checker, details and evidence for the failing ones.

    ``evidence_lines`` bounds the evidence events printed per failing checker (all of them are in
    ``checks.json``); findings past that budget are counted, not printed.
    """
    out = [f"{run_dir}  run {history.header.run_id}  {len(history.events)} events  verdict: {verdict.valid.value}"]
    from chaos.checkers import incidents  # what happened to the run comes before the invariants

    found = incidents.collect(history, incidents.traceback_files(run_dir))
    if found:
        out.append(f"  what happened to the run ({len(found)} incident(s)):")
        out.extend(f"    ! {i.line()}" for i in found[:20])
        if len(found) > 20:
            out.append(f"    ... {len(found) - 20} more incident(s) in {run_dir / CHECKS_FILE}")
    for note in history.notes:
        out.append(f"  note: {note}")
    for r in verdict.results:
        out.append(f"  [{_MARK[r.valid]}] {r.checker.value:22s} {r.summary}")
        if r.valid is Validity.TRUE:
            continue
        budget = evidence_lines
        violations = [f for f in r.findings if f.violation]
        for n, f in enumerate(violations):
            if n and budget <= 0:
                out.append(f"      ... {len(violations) - n} more finding(s) in {run_dir / CHECKS_FILE}")
                break
            at = finding_time(history, f.evidence)
            out.append(f"      - {'' if at is None else f'at {at:.3f}s: '}{f.description}")
            for seq in f.evidence[:max(budget, 0)]:
                try:
                    out.append(f"          {to_json(history.event(seq)).decode()}")
                except KeyError:
                    out.append(f"          (seq {seq} not in history)")
            if len(f.evidence) > max(budget, 0):
                out.append(f"          ... {len(f.evidence) - max(budget, 0)} more evidence event(s) (--max-evidence)")
            budget -= len(f.evidence)
    return "\n".join(out)


def _run_dir(path: Path) -> Path:
    """The run directory an argument names: the directory itself, or the directory of its history.jsonl."""
    if path.is_file():
        if path.name == HISTORY_FILE:
            return path.parent
        raise UsageError(f"{path}: a file, not a run directory; give the directory that holds {HISTORY_FILE} "
                         f"(here perhaps {path.parent})")
    return path


def _located(run: Path, message: str) -> str:
    """``message`` naming the run directory (reader errors name only ``history.jsonl:LINE``)."""
    message = " ".join(message.split())
    return message if str(run) in message else f"{run}: {message}"


#: where a re-judgement goes when the run already has its recorded verdict in checks.json
REJUDGED_FILE = "checks.rejudged.json"


def _write_checks(run: Path, history: History, verdict: Verdict, bounds: CheckerBounds) -> Path:
    """Write the verdict; returns where. Refused in one line when the file cannot be written; no temp file
    left behind.

    ``checks.json`` is the run's recorded verdict (written by the run, read by the report): a
    re-judgement never replaces it — with one checker, other bounds or newer checkers it would turn a
    failed run into a passed one behind the report's back — and goes to ``checks.rejudged.json``.
    A run without a recorded verdict (killed before judging) gets its ``checks.json`` here.
    """
    target = run / CHECKS_FILE
    if target.exists() and not target.is_dir():
        target = run / REJUDGED_FILE
    if target.is_dir():
        raise UsageError(f"{target}: is a directory; remove or rename it (chaos check writes the verdict there)")
    tmp = target.with_name(target.name + ".tmp")
    try:
        write_checks(target, history, verdict, bounds)
    except OSError as exc:
        raise UsageError(f"{target}: cannot be written ({exc.strerror or exc})") from None
    finally:
        if tmp.exists() and not tmp.is_dir():
            os.unlink(tmp)
    return target


@click.command("check", short_help="Re-judge recorded runs from their history.jsonl and write checks.json.",
               epilog="""\b
Examples:
  chaos check runs/baseline/run-000-seed-7
  chaos check runs/*/* --checker delivery --checker convergence
  chaos check runs/baseline/run-000-seed-7/history.jsonl --max-evidence 2
  chaos check results/2025-01-01/*/* --json | jq '.[] | {run_dir, valid}'

\b
Exit codes (worst run wins): 1 an invariant failed, 2 bad input (one line on stderr per bad run),
3 inconclusive (a checker answered unknown), 0 all valid.""")
@click.argument("run_dirs", nargs=-1, required=True, type=click.Path(path_type=Path), metavar="RUN...")
@click.option("--checker", "checkers", multiple=True, type=click.Choice([c.value for c in CheckerName]),
              help="run only this checker (repeatable; default: all of them)")
@click.option("--json", "as_json", is_flag=True,
              help="print a JSON list, one entry per RUN: its verdict (as written to checks.json) or its error")
@click.option("--convergence-s", type=float, default=None,
              help="convergence bound after the last heal (default: session + rebalance timeout + 5 s)")
@click.option("--slack-s", type=float, default=0.5, show_default=True,
              help="tolerated delay between an action and the event recording it")
@click.option("--max-evidence", type=click.IntRange(0, 100_000), default=6, show_default=True,
              help="evidence events printed per failing checker (all are in checks.json)")
def check(run_dirs: tuple[Path, ...], checkers: tuple[str, ...], as_json: bool, convergence_s: float | None,
          slack_s: float, max_evidence: int) -> None:
    """Re-judge recorded runs: read RUN/history.jsonl (RUN is a run directory or its history.jsonl),
    print the verdict and write it to RUN/checks.json — or, when the run already has its recorded
    verdict there, to RUN/checks.rejudged.json (the recorded one is never replaced).

    Exit 0 all valid, 1 an invariant failed, 2 bad input, 3 inconclusive (a checker answered unknown).
    """
    try:
        bounds = CheckerBounds(convergence_s=convergence_s, clock_slack_s=slack_s)
        names = parse_names(checkers) if checkers else None
    except UsageError as exc:
        click.echo(f"chaos: error: {exc}", err=True)
        sys.exit(EXIT_BAD_INPUT)
    codes: list[int] = []
    docs: list[dict[str, Any]] = []
    for arg in run_dirs:
        run_dir = arg
        try:
            run_dir = _run_dir(arg)
            history = load_run(run_dir)
            verdict = run_checkers(history, names, bounds)
            written = _write_checks(run_dir, history, verdict, bounds)
        except (UsageError, OSError) as exc:
            if isinstance(exc, OSError):
                exc = UsageError(f"{exc.filename or run_dir}: {exc.strerror or exc}")
            message = _located(run_dir, str(exc))
            click.echo(f"chaos: error: {message}", err=True)
            docs.append({"run_dir": str(run_dir), "valid": "error", "error": message})
            codes.append(EXIT_BAD_INPUT)
            continue
        if as_json:
            docs.append({"run_dir": str(run_dir), "error": None, "written_to": str(written),
                         **verdict_dict(history, verdict, bounds, run_dir)})
        else:
            click.echo(render(run_dir, history, verdict, evidence_lines=max_evidence))
            if written.name == REJUDGED_FILE:
                click.echo(f"  (the run's recorded verdict in {CHECKS_FILE} is kept; this one is in {written})")
        codes.append({Validity.TRUE: EXIT_OK, Validity.FALSE: EXIT_FALSE,
                      Validity.UNKNOWN: EXIT_UNKNOWN}[verdict.valid])
    if as_json:
        click.echo(orjson.dumps(docs, option=orjson.OPT_INDENT_2).decode())
    for code in (EXIT_FALSE, EXIT_BAD_INPUT, EXIT_UNKNOWN):
        if code in codes:
            sys.exit(code)
    sys.exit(EXIT_OK)
