"""The checker registry and the composite that runs a chosen set.

A checker is a pure function ``check(history, bounds) -> Result`` (the
:class:`Checker` protocol). :func:`run_checkers` runs the chosen ones, turns a
crash into ``unknown`` carrying the exception text (never a pass, as in
Jepsen's ``checker/check-safe``) and merges ``false > unknown > true``.
"""

from __future__ import annotations

import gc
import traceback
from collections.abc import Callable, Iterable, Mapping
from typing import Protocol

from chaos.checkers import (
    assignor,
    committed_offsets,
    convergence,
    delivery,
    evidence,
    faults,
    fencing,
    generations,
    key_placement,
    ownership_generation,
    ownership_time,
    rebalance_liveness,
    record_anomalies,
    share_completion,
    share_delivery,
    share_ownership,
    share_processing,
    share_progress,
    static_membership,
)
from chaos.checkers.bounds import CheckerBounds, ResolvedBounds, resolve
from chaos.checkers.index import index_of
from chaos.checkers.result import Result, Validity, Verdict, merge_validity
from chaos.errors import UsageError
from chaos.history import History, MemberStart
from chaos.model.checker_name import GROUP_NEUTRAL_CHECKERS, SHARE_CHECKERS, CheckerName


class Checker(Protocol):
    def __call__(self, history: History, bounds: ResolvedBounds) -> Result: ...


CHECKERS: Mapping[CheckerName, Callable[[History, ResolvedBounds], Result]] = {
    CheckerName.OWNERSHIP_GENERATION: ownership_generation.check,
    CheckerName.OWNERSHIP_TIME: ownership_time.check,
    CheckerName.FENCING: fencing.check,
    CheckerName.DELIVERY: delivery.check,
    CheckerName.COMMITTED_OFFSETS: committed_offsets.check,
    CheckerName.GENERATIONS: generations.check,
    CheckerName.CONVERGENCE: convergence.check,
    CheckerName.STATIC_MEMBERSHIP: static_membership.check,
    CheckerName.ASSIGNOR: assignor.check,
    CheckerName.FAULTS: faults.check,
    CheckerName.REBALANCE_LIVENESS: rebalance_liveness.check,
    CheckerName.RECORD_ANOMALIES: record_anomalies.check,
    CheckerName.KEY_PLACEMENT: key_placement.check,
    CheckerName.SHARE_OWNERSHIP: share_ownership.check,
    CheckerName.SHARE_DELIVERY: share_delivery.check,
    CheckerName.SHARE_COMPLETION: share_completion.check,
    CheckerName.SHARE_PROGRESS: share_progress.check,
    CheckerName.SHARE_PROCESSING: share_processing.check,
}


def parse_names(names: Iterable[str]) -> tuple[CheckerName, ...]:
    """Checker names from user input, or a UsageError listing the valid ones."""
    out = []
    for n in names:
        try:
            out.append(CheckerName(n))
        except ValueError:
            raise UsageError(f"unknown checker {n!r}; choose from {', '.join(c.value for c in CheckerName)}") from None
    return tuple(out)


def run_one(name: CheckerName, history: History, resolved: ResolvedBounds,
            registry: Mapping[CheckerName, Callable[[History, ResolvedBounds], Result]] = CHECKERS) -> Result:
    """Run one checker; an exception becomes ``unknown`` with its text."""
    try:
        result = registry[name](history, resolved)
        if not isinstance(result, Result):
            raise TypeError(f"checker returned {type(result).__name__}, not Result")
        return result
    except Exception as exc:  # noqa: BLE001 - a crashing checker must never pass
        where = traceback.extract_tb(exc.__traceback__)[-1]
        return Result(name, Validity.UNKNOWN,
                      f"checker crashed: {type(exc).__name__}: {exc} (at {where.filename.rsplit('/', 1)[-1]}:"
                      f"{where.lineno}); the invariant was not judged", {"crashed": 1})


def not_a_consumer_group(name: CheckerName) -> Result:
    """A consumer-group checker's answer on a run whose experiment declares a share group (``workload.share``):
    there is no consumer group its invariant speaks about -- as a share checker answers on a consumer-group run
    (chaos.checkers.share_timeline.nothing_to_judge)."""
    return Result(name, Validity.TRUE, "the run's group is a share group (KIP-932): no consumer group to judge",
                  {"consumer_groups": 0})


def run_checkers(history: History, names: Iterable[CheckerName | str] | None = None,
                 bounds: CheckerBounds | None = None,
                 registry: Mapping[CheckerName, Callable[[History, ResolvedBounds], Result]] = CHECKERS) -> Verdict:
    """Judge ``history`` with the named checkers (all by default) and merge the results."""
    chosen = tuple(CheckerName) if names is None else parse_names(str(n) for n in names)
    # The cyclic GC would otherwise re-scan the whole (acyclic) history every few thousand
    # allocations of the checkers' working sets: most of the time on large histories.
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        resolved = resolve(bounds or CheckerBounds(), history, index_of(history).of(MemberStart))
        # a true over members that recorded none of what the checker reads is unknown (chaos.checkers.evidence)
        gaps, members = evidence.missing(history), evidence.application_members(history)
        share_run = evidence.declared_share_group(history)
        results = tuple(not_a_consumer_group(n) if share_run and n not in SHARE_CHECKERS | GROUP_NEUTRAL_CHECKERS
                        else evidence.gate(run_one(n, history, resolved, registry), gaps, members) for n in chosen)
    finally:
        if was_enabled:
            gc.enable()
    return Verdict(merge_validity(r.valid for r in results), results)
