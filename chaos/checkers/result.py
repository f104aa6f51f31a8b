"""Checker results: validity, findings with evidence, and the merged verdict.

Jepsen's checker contract (jepsen/checker.clj): every checker answers
``true``, ``false`` or ``unknown``; a checker that crashes answers ``unknown``,
never a pass; results merge ``false > unknown > true``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum


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


class CheckerName(StrEnum):
    """The nine invariants, in order, the fault-execution precondition (every planned fault fired), then rebalance
    liveness during chaos (issue 17)."""

    OWNERSHIP_GENERATION = "ownership-generation"
    OWNERSHIP_TIME = "ownership-time"
    FENCING = "fencing"
    DELIVERY = "delivery"
    COMMITTED_OFFSETS = "committed-offsets"
    GENERATIONS = "generations"
    CONVERGENCE = "convergence"
    STATIC_MEMBERSHIP = "static-membership"
    ASSIGNOR = "assignor"
    #: not an invariant: every planned fault fired, took effect and healed (else the run is unknown)
    FAULTS = "faults"
    #: liveness during chaos: every rebalance phase ends within its protocol bound (issue 17)
    REBALANCE_LIVENESS = "rebalance-liveness"
    #: record-level anomalies: lost records, poll skips / steps back within one ownership, inconsistent offsets;
    #: duplicates per rebalance as figures (issue 16)
    RECORD_ANOMALIES = "record-anomalies"
    #: a keyed workload's keys on the partitions murmur2 gives them, and per-key order within a partition (issue 16)
    KEY_PLACEMENT = "key-placement"


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
