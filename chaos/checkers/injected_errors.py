"""Errors a client reported that a fault made up: answers the broker did not give.

An ``rpc`` fault with ``action: error`` (trait ``falsifies_answers``, :class:`chaos.model.fault_traits.FaultTrait`)
replaces the error codes of one API's answers on its links by the error its ``fault_start.params["error"]`` names
(docs/protocol-faults.md). A client then reports that error as Kafka's. A checker that reads Kafka's behaviour from
the errors clients report (static-membership reads FENCED_INSTANCE_ID as the coordinator fencing a member) sets
aside the ones such a fault may have injected: an error of that name, reported by a member whose requests the fault
covered (the member it targeted, or every member when it targeted a broker), while it was in effect.

An error reported up to :data:`REPORT_SLACK_NS` after the fault ended is still its: the client reports an answer
after it arrived. A genuine error of the same name from the same member in that window is set aside too; the
checker says how many it set aside, so a verdict never rests on them silently.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import cast

from chaos.checkers.index import HistoryIndex
from chaos.history import Commit, ErrorEvent, FaultEnd, FaultStart, MemberStart
from chaos.model.fault_traits import FaultTrait
from chaos.outcome import normalise_error_name

#: how long after a fault ended a client may still report an answer it falsified
REPORT_SLACK_NS = 1_000_000_000
#: what a client reports of its own after an answer with that error: librdkafka raises the fatal local error
#: _FENCED once a broker answered FENCED_INSTANCE_ID (``rd_kafka_cgrp_handle_*``: ``rd_kafka_set_fatal_error``)
CONSEQUENCES = {"FENCED_INSTANCE_ID": frozenset({"_FENCED"})}


@dataclass(frozen=True, slots=True)
class Injection:
    """One fault that made up ``error`` for ``members`` (None: every member) from ``start_ns`` to ``end_ns``."""

    fault_seq: int
    fault_id: str
    error: str
    members: frozenset[str] | None
    start_ns: int
    end_ns: int


def injections(idx: HistoryIndex) -> list[Injection]:
    """The faults of the history that made up an error, with whom and when."""
    members = {e.source for e in cast("list[MemberStart]", idx.of(MemberStart))}
    ends = {e.fault_id: e.mono_ns for e in cast("list[FaultEnd]", idx.of(FaultEnd))}
    out = []
    for f in cast("list[FaultStart]", idx.of(FaultStart)):
        error = f.params.get("error") if FaultTrait.FALSIFIES_ANSWERS in f.effects else None
        if not error:
            continue
        who = frozenset({f.node}) if f.node in members else None
        out.append(Injection(f.seq, f.fault_id, normalise_error_name(str(error)), who, f.mono_ns,
                             ends.get(f.fault_id, idx.last_ns) + REPORT_SLACK_NS))
    return out


def injected_by(e: ErrorEvent | Commit, found: list[Injection]) -> Injection | None:
    """The fault that may have made up ``e``'s error, or None when Kafka gave it."""
    if not e.error_name:
        return None
    name = normalise_error_name(e.error_name)
    for i in found:
        same = i.error == name or name in CONSEQUENCES.get(i.error, ())
        if same and i.start_ns <= e.mono_ns <= i.end_ns and (i.members is None or e.source in i.members):
            return i
    return None
