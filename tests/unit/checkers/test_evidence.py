"""A checker's true over application members that recorded none of what it reads is unknown (chaos.checkers.evidence)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from chaos.checkers.registry import run_checkers
from chaos.checkers.result import CheckerName, Validity
from chaos.history import History, read_history

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures" / "histories"
MEMBER_SIDE = ("assigned", "revoked", "lost", "consumed", "commit", "member_start")


def declared(history: History, **spec: object) -> History:
    """``history`` whose header declares every member with ``spec`` (e.g. command=[...])."""
    experiment = dict(history.header.experiment)
    n = len({e.source for e in history.events if e.source.startswith("consumer-")})
    experiment["workload"] = {**experiment.get("workload", {}), "consumers": [dict(spec) for _ in range(n)]}
    return replace(history, header=replace(history.header, experiment=experiment))


def black_box(history: History) -> History:
    """The members' own events removed, as a command member without an interceptor leaves them."""
    kept = tuple(e for e in history.events if not (e.source.startswith("consumer-") and e.kind.value in MEMBER_SIDE))
    return declared(replace(history, events=kept), command=["./service"])


def test_black_box_members_leave_member_side_checkers_unknown_never_true():
    h = read_history(FIXTURES / "realistic-static-range.jsonl")
    assert run_checkers(h).valid is Validity.TRUE
    verdict = run_checkers(black_box(h))
    for name in (CheckerName.OWNERSHIP_GENERATION, CheckerName.OWNERSHIP_TIME, CheckerName.FENCING,
                 CheckerName.DELIVERY, CheckerName.GENERATIONS, CheckerName.CONVERGENCE,
                 CheckerName.STATIC_MEMBERSHIP, CheckerName.REBALANCE_LIVENESS):
        r = verdict.result(name)
        assert r.valid is not Validity.TRUE, (name, r.summary)
        if r.valid is Validity.UNKNOWN:
            assert "(command) recorded nothing of" in r.summary and r.metrics["members_without_evidence"] >= 1
        else:  # delivery: no final read in this fixture, so acknowledged records were seen nowhere
            assert name is CheckerName.DELIVERY and "lost" in r.summary, r.summary
    # the coordinator's side is judged for every member
    assert verdict.result(CheckerName.COMMITTED_OFFSETS).valid is Validity.TRUE
    assert verdict.valid is not Validity.TRUE


def test_a_violation_shown_on_the_evidence_there_is_stands():
    h = read_history(FIXTURES / "committed-offsets-rollback.jsonl")
    r = run_checkers(declared(h, command=["./service"]), [CheckerName.COMMITTED_OFFSETS]).result(
        CheckerName.COMMITTED_OFFSETS)
    assert r.valid is Validity.FALSE
    h = read_history(FIXTURES / "ownership-generation-duplicate.jsonl")
    r = run_checkers(declared(h, command=["./service"]), [CheckerName.OWNERSHIP_GENERATION]).result(
        CheckerName.OWNERSHIP_GENERATION)
    assert r.valid is Validity.FALSE


def test_members_that_recorded_everything_are_judged_as_ours():
    h = read_history(FIXTURES / "realistic-static-range.jsonl")
    assert run_checkers(declared(h, app="service:main")).valid is Validity.TRUE
