"""Checkers: pure functions of a history that judge the invariants (docs/architecture.md, "Invariants")."""

from chaos.checkers.bounds import CheckerBounds, ResolvedBounds
from chaos.checkers.result import CheckerName, Finding, Result, Validity, Verdict, merge_validity

__all__ = ["CheckerBounds", "ResolvedBounds", "CheckerName", "Finding", "Result", "Validity", "Verdict",
           "merge_validity", "run_checkers", "judge_run"]


def __getattr__(name: str):  # lazy: importing the package must not import every checker
    if name == "run_checkers":
        from chaos.checkers.registry import run_checkers

        return run_checkers
    if name == "judge_run":
        from chaos.checkers.judge import judge_run

        return judge_run
    raise AttributeError(name)
