"""Checker results: validity, findings with evidence, and the merged verdict.

Jepsen's checker contract (jepsen/checker.clj): every checker answers
``true``, ``false`` or ``unknown``; a checker that crashes answers ``unknown``,
never a pass; results merge ``false > unknown > true``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from chaos.model.checker_name import CheckerName


class Validity(StrEnum):
    TRUE = "true"
    FALSE = "false"
    UNKNOWN = "unknown"


_RANK = {Validity.TRUE: 0, Validity.UNKNOWN: 1, Validity.FALSE: 2}


def merge_validity(values: Iterable[Validity]) -> Validity:
    """false > unknown > true; nothing at all is true (vacuous)."""
    worst = Validity.TRUE
    for v in values:
        if _RANK[v] > _RANK[worst]:
            worst = v
    return worst


@dataclass(frozen=True, slots=True)
class Finding:
    """One thing a checker found; ``evidence`` are the ``seq`` numbers proving it.

    ``violation`` is False for findings that are reported but do not fail the
    invariant (an explained zombie window, a duplicate delivery).
    """

    description: str
    evidence: tuple[int, ...]
    violation: bool = True


@dataclass(frozen=True, slots=True)
class Result:
    checker: CheckerName
    valid: Validity
    summary: str
    metrics: Mapping[str, float] = field(default_factory=dict)
    findings: tuple[Finding, ...] = ()

    @property
    def violations(self) -> tuple[Finding, ...]:
        return tuple(f for f in self.findings if f.violation)


@dataclass(frozen=True, slots=True)
class Verdict:
    """All results of one judgement, and their merge."""

    valid: Validity
    results: tuple[Result, ...]

    def result(self, name: CheckerName | str) -> Result:
        for r in self.results:
            if r.checker == name:
                return r
        raise KeyError(name)


class FindingLog:
    """Collects findings for one checker, keeping at most ``limit`` of each sort.

    Counts keep going past the limit, so metrics stay exact while a history
    with a million lost records does not produce a million findings.
    """

    __slots__ = ("limit", "violations", "notes", "violation_count", "note_count")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.violations: list[Finding] = []
        self.notes: list[Finding] = []
        self.violation_count = 0
        self.note_count = 0

    def violation(self, description: str, *evidence: int) -> None:
        self.violation_count += 1
        if len(self.violations) < self.limit:
            self.violations.append(Finding(description, tuple(sorted(set(evidence))), True))

    def note(self, description: str, *evidence: int) -> None:
        self.note_count += 1
        if len(self.notes) < self.limit:
            self.notes.append(Finding(description, tuple(sorted(set(evidence))), False))

    def findings(self) -> tuple[Finding, ...]:
        return tuple(self.violations) + tuple(self.notes)

    def result(self, checker: CheckerName, summary_ok: str, summary_bad: str,
               metrics: Mapping[str, float], *, unknown: str | None = None) -> Result:
        """``false`` when any violation, else ``unknown`` when ``unknown`` is given, else ``true``."""
        if self.violation_count:
            more = "" if self.violation_count <= self.limit else f" (first {self.limit} listed)"
            return Result(checker, Validity.FALSE, f"{summary_bad}{more}", metrics, self.findings())
        if unknown is not None:
            return Result(checker, Validity.UNKNOWN, unknown, metrics, self.findings())
        return Result(checker, Validity.TRUE, summary_ok, metrics, self.findings())
