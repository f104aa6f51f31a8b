"""A checker's true over application members that recorded none of what it reads is unknown (chaos.checkers.evidence)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from chaos.checkers import incidents
from chaos.checkers.bounds import CheckerBounds
from chaos.checkers.registry import run_checkers
from chaos.checkers.result import Validity
from chaos.history import CommittedOffsets, Event, GroupStateSample, History, MemberStart, read_history
from chaos.history.event import GroupMember, MemberClient
from chaos.model.checker_name import CheckerName
from chaos.model.workload import Client

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


# ------------------------------------------------------------ command members judged from the coordinator's side

def black_box_started(history: History, client_ids: dict[str, str] | None = None) -> History:
    """As :func:`black_box`, but with the ``member_start`` kafka-chaos writes for a command member (client
    ``command``, version ``declared``); ``client_ids`` renames members' client ids in the samples (a program
    that did not use ``$KAFKA_CLIENT_ID``)."""
    kept: list[Event] = []
    for e in history.events:
        if isinstance(e, MemberStart) and e.source.startswith("consumer-"):
            kept.append(replace(e, client=MemberClient.COMMAND, client_version="declared"))
        elif isinstance(e, GroupStateSample) and client_ids:
            kept.append(replace(e, members=tuple(replace(m, client_id=client_ids.get(m.client_id, m.client_id))
                                                 for m in e.members)))
        elif not (e.source.startswith("consumer-") and e.kind.value in MEMBER_SIDE):
            kept.append(e)
    return declared(replace(history, events=tuple(kept)), command=["./service"])


def test_convergence_of_command_members_is_judged_from_the_coordinators_samples():
    h = black_box_started(read_history(FIXTURES / "realistic-static-range.jsonl"))
    verdict = run_checkers(h)
    conv = verdict.result(CheckerName.CONVERGENCE)
    assert conv.valid is Validity.TRUE, conv.summary
    assert "consumption resumed" in conv.summary
    # what reads the members' own configuration or events stays unknown, naming what they lacked
    for name in (CheckerName.STATIC_MEMBERSHIP, CheckerName.REBALANCE_LIVENESS, CheckerName.OWNERSHIP_TIME):
        r = verdict.result(name)
        assert r.valid is Validity.UNKNOWN and "(command) recorded nothing of" in r.summary, (name, r.summary)
    # a declared start is not a member that never joined
    assert not [i for i in incidents.collect(h) if i.kind.value == "never_joined"]


def test_convergence_of_command_members_fails_on_a_lingering_member_and_on_no_progress():
    base = read_history(FIXTURES / "realistic-static-range.jsonl")
    h = black_box_started(base)
    t0 = max(e.mono_ns for e in h.events if e.kind.value == "fault_end")
    # a member id the coordinator still lists after the heal, owning partitions, that no running member has
    ghost = GroupMember(member_id="ghost-1", instance_id=None, client_id="consumer-9", host="/127.0.0.1",
                        assignment=())
    lingering = []
    for e in h.events:
        if isinstance(e, GroupStateSample) and e.mono_ns > t0:
            first, *rest = e.members
            e = replace(e, members=(replace(ghost, assignment=first.assignment), *rest))
        lingering.append(e)
    short = CheckerBounds(convergence_s=0.3)  # the fixture ends 0.6 s after the heal
    assert run_checkers(h, [CheckerName.CONVERGENCE], short).result(CheckerName.CONVERGENCE).valid is Validity.TRUE
    conv = run_checkers(replace(h, events=tuple(lingering)), [CheckerName.CONVERGENCE], short).result(
        CheckerName.CONVERGENCE)
    assert conv.valid is Validity.FALSE, conv.summary
    assert "member ghost-1 owns partitions but is not a running member" in conv.findings[0].description
    # no committed offset moved after the heal: the coordinator shows no consumption although records were produced
    frozen = tuple(e for e in h.events if not (isinstance(e, CommittedOffsets) and e.mono_ns > t0))
    conv = run_checkers(replace(h, events=frozen), [CheckerName.CONVERGENCE], short).result(CheckerName.CONVERGENCE)
    assert conv.valid is Validity.FALSE, conv.summary
    assert "consumption did not resume" in conv.findings[0].description


def test_a_command_member_not_named_by_its_client_id_leaves_convergence_unknown():
    h = black_box_started(read_history(FIXTURES / "realistic-static-range.jsonl"), {"consumer-2": "rdkafka"})
    conv = run_checkers(h, [CheckerName.CONVERGENCE]).result(CheckerName.CONVERGENCE)
    assert conv.valid is Validity.UNKNOWN, conv.summary
    assert "command member consumer-2 never appeared in the coordinator's samples under its client.id" in conv.summary



def test_member_client_holds_every_spec_client_and_command():
    assert {c.value for c in MemberClient} == {c.value for c in Client} | {"command"}
    assert "command" not in {c.value for c in Client}  # a spec cannot choose it
