"""Member-side evidence, and the checkers a run leaves without it (issue 14: the application as a member).

kafka-chaos's own members record everything a checker reads. An application member records only what
its instrumentation gives: an ``app:`` member (the instrumented ``confluent_kafka.Consumer``) records it
all, a ``command:`` member nothing of its own — or, with the kafka-chaos ``ConsumerInterceptor``, what
``poll`` returned and the commits the coordinator accepted, without generations. The coordinator's side
(the observer's samples, committed offsets, coordinator log lines) is there for every member.

A checker's ``true`` over a history in which a member it must read recorded none of the evidence it needs
is no evidence of anything: :func:`gate` turns that ``true`` into ``unknown`` naming the members and what
they did not record. A ``false`` stands (a violation shown on part of the members is shown), as does
``unknown``. Only members the experiment declares as ``app`` or ``command`` (the run's header) are
considered: a kafka-chaos member that recorded nothing of a kind did not do it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from enum import StrEnum

from chaos.checkers.index import index_of
from chaos.checkers.result import Result, Validity
from chaos.history import Assigned, Commit, Consumed, History, Lost, MemberStart, Revoked
from chaos.history.event import MemberClient
from chaos.model.checker_name import CheckerName


class MemberEvidence(StrEnum):
    """Kinds of evidence only a member can give."""

    #: ``member_start`` written by the member itself: its configuration as it joined (client, assignor, timeouts,
    #: instance id)
    START = "its configuration (member_start)"
    #: any ``member_start``, including the one kafka-chaos writes for a ``command:`` member (client ``command``,
    #: the configuration it gave the program): when the member ran and in which group
    LIFETIME = "when it ran (member_start)"
    #: ``assigned`` / ``revoked`` / ``lost``: what it believed it owned, and when
    OWNERSHIP = "what it owned when (assigned/revoked/lost)"
    #: ``consumed``: what it processed
    CONSUMED = "what it processed (consumed)"
    #: ``commit`` events carrying the generation or member epoch they were sent with
    COMMIT_GENERATION = "its commits with their generation or epoch"


#: what each checker reads from every member; the others read only the coordinator's side and the producers'
NEEDS: Mapping[CheckerName, tuple[MemberEvidence, ...]] = {
    CheckerName.OWNERSHIP_GENERATION: (MemberEvidence.OWNERSHIP,),
    CheckerName.OWNERSHIP_TIME: (MemberEvidence.OWNERSHIP, MemberEvidence.CONSUMED),
    CheckerName.FENCING: (MemberEvidence.COMMIT_GENERATION,),
    CheckerName.DELIVERY: (MemberEvidence.CONSUMED,),
    CheckerName.GENERATIONS: (MemberEvidence.OWNERSHIP,),
    # the coordinator's samples name each member by its client.id ($KAFKA_CLIENT_ID): a command member's
    # declared start is enough (chaos/checkers/convergence.py)
    CheckerName.CONVERGENCE: (MemberEvidence.LIFETIME,),
    CheckerName.STATIC_MEMBERSHIP: (MemberEvidence.START,),
    CheckerName.REBALANCE_LIVENESS: (MemberEvidence.START,),
    CheckerName.RECORD_ANOMALIES: (MemberEvidence.OWNERSHIP, MemberEvidence.CONSUMED),
}


def declared(start: MemberStart) -> bool:
    """Whether kafka-chaos wrote this ``member_start`` for a ``command:`` member (client ``command``): it says when
    the program ran and what it was told, not how it configured its consumer. Checkers that read a member's own
    configuration (static membership, rebalance liveness, never-joined incidents) skip such starts."""
    return start.client is MemberClient.COMMAND


def _declared_specs(history: History) -> list[tuple[str, Mapping[str, object]]]:
    """(member name, consumer spec as the run's header declares it), in the experiment's order."""
    return _specs_of(history.header.experiment)


def _specs_of(experiment: object) -> list[tuple[str, Mapping[str, object]]]:
    workload = experiment.get("workload") if isinstance(experiment, Mapping) else None
    consumers = workload.get("consumers") if isinstance(workload, Mapping) else None
    return [(f"consumer-{i}", spec) for i, spec in enumerate(consumers if isinstance(consumers, list) else [])
            if isinstance(spec, Mapping)]


def declared_request_timeouts_ms(history: History) -> dict[str, int]:
    """Member name -> the ``request_timeout_ms`` its spec in the run's header sets (members that set none are left
    out: their client's default applies, :func:`chaos.model.clients.default_request_timeout_ms`)."""
    return {name: timeout for name, spec in _declared_specs(history)
            if isinstance(timeout := spec.get("request_timeout_ms"), int) and timeout > 0}


def declared_share_group(history: History) -> bool:
    """Whether the run's experiment declares a share group (``workload.share``, KIP-932) as its group."""
    experiment = history.header.experiment
    workload = experiment.get("workload") if isinstance(experiment, Mapping) else None
    return isinstance(workload, Mapping) and isinstance(workload.get("share"), Mapping)


def application_members(history: History) -> dict[str, str]:
    """Member name -> ``app`` or ``command``, for the members the run's experiment declares so."""
    return declared_application_members(history.header.experiment)


def declared_application_members(experiment: object) -> dict[str, str]:
    """:func:`application_members` from a header's ``experiment`` as recorded (the report reads header.json)."""
    out: dict[str, str] = {}
    for name, spec in _specs_of(experiment):
        if spec.get("command"):
            out[name] = "command"
        elif spec.get("app"):
            out[name] = "app"
    return out


def reporting_members(history: History) -> set[str]:
    """The ``command`` members the run's experiment declares with ``reports_processed`` (their ``consumed`` events
    are their own reports on the output topic, chaos.workload.processed_reports)."""
    return {name for name, spec in _declared_specs(history) if spec.get("command") and spec.get("reports_processed")}


def missing(history: History) -> dict[MemberEvidence, list[str]]:
    """Per evidence kind, the application members (sorted) that recorded none of it."""
    members = application_members(history)
    if not members:
        return {}
    idx = index_of(history)
    has: dict[MemberEvidence, set[str]] = {
        MemberEvidence.START: {e.source for e in idx.of(MemberStart) if not declared(e)},
        MemberEvidence.LIFETIME: {e.source for e in idx.of(MemberStart)},
        MemberEvidence.OWNERSHIP: {e.source for t in (Assigned, Revoked, Lost) for e in idx.of(t)},
        MemberEvidence.CONSUMED: {e.source for e in idx.of(Consumed)},
        MemberEvidence.COMMIT_GENERATION: {e.source for e in idx.of(Commit) if e.generation is not None},
    }
    out = {kind: sorted(m for m in members if m not in seen) for kind, seen in has.items()}
    return {kind: names for kind, names in out.items() if names}


def gate(result: Result, gaps: Mapping[MemberEvidence, list[str]], members: Mapping[str, str]) -> Result:
    """``result`` as judged, unless it is ``true`` while members it must read recorded nothing it needs."""
    if result.valid is not Validity.TRUE:
        return result
    lacking = [(kind, gaps[kind]) for kind in NEEDS.get(result.checker, ()) if kind in gaps]
    if not lacking:
        return result
    said = "; ".join(f"{', '.join(f'{m} ({members[m]})' for m in names)} recorded nothing of {kind.value}"
                     for kind, names in lacking)
    return replace(result, valid=Validity.UNKNOWN,
                   summary=f"not judged for every member: {said} — what was judged: {result.summary}",
                   metrics={**result.metrics, "members_without_evidence": len({m for _, ns in lacking for m in ns})})
