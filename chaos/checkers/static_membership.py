"""Invariant 8: static membership (KIP-345).

(a) *Restart without rebalance.* A member with ``group.instance.id`` I that
stops (``member_stop``; static members never send LeaveGroup, KIP-345) and is
started again with the same I within its ``session.timeout.ms`` must rejoin
without a rebalance: from the stop until the new incarnation's first
``assigned`` event (or its session timeout, if none comes), no new generation
may stabilise or start (``broker_log`` ``stabilized`` / ``preparing_rebalance``,
Stable samples above the generation current at the stop), and the new
incarnation's first assignment carries that same generation. Restarts during
which something else changed membership (another member started or stopped,
a fault started, the coordinator declared another member failed) are not
judged: those rebalances are explained.

(b) *Duplicate instance id is fenced.* When member B starts with the
instance id of a running member A of the same group, the coordinator maps I to
B and A's next request fails with FENCED_INSTANCE_ID (82). A must be fenced
(an ``error`` or failed ``commit`` with FENCED_INSTANCE_ID, or it stops) within
the fence bound of B's start; any ``ok`` commit by A after B's first
assignment is a violation, and so is B, the newer member, being fenced while
A carries on.

KIP-848 groups (samples with ``group_type`` consumer) follow other rules
(``GroupMetadataManager.getOrMaybeSubscribeStaticConsumerGroupMember``):

(a) A static member that closes cleanly leaves with member epoch -2
(``LEAVE_GROUP_STATIC_MEMBER_EPOCH``): the coordinator keeps it and its
assignment for its session timeout. A new incarnation with the same
instance id then *replaces* it: a copy of the old member under the new
member id (KIP-848 static members get a new member id), with its assignment,
at member epoch 0; the group epoch is bumped only if its subscriptions
changed, which a restart does not do. So from a clean stop until the new
incarnation's first ``assigned`` event (or its session timeout), the group
epoch must not move past the one at the stop (``epoch_bumped`` lines,
samples' group epoch), and the first assignment's member epoch must not
exceed it. A static member that was *killed* did not leave with -2; its
instance id stays owned (``throwIfInstanceIdIsUnreleased``:
UNRELEASED_INSTANCE_ID) until its session expires and the coordinator
removes it, which bumps the group epoch: that restart cannot avoid a
rebalance, and is not judged (counted).

(b) A member joining with the instance id of a member that still holds it
(any epoch but -2) is refused with UNRELEASED_INSTANCE_ID; the older member
is *not* fenced. A violation is the newer member being assigned partitions
while the older one runs and holds the id: not stopped, no ``lost`` of its
own, no coordinator line of it failing, being fenced or leaving.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import cast

from chaos.checkers.bounds import ResolvedBounds
from chaos.checkers.coordinator import kip848_groups
from chaos.checkers.evidence import declared
from chaos.checkers.index import index_of
from chaos.checkers.injected_errors import injected_by, injections
from chaos.checkers.result import FindingLog, Result
from chaos.history import (
    Assigned,
    BrokerLog,
    BrokerLogEvent,
    Commit,
    ErrorEvent,
    FaultStart,
    GroupState,
    GroupStateSample,
    History,
    Lost,
    MemberStart,
    MemberStop,
)
from chaos.history.event import GroupType
from chaos.model.checker_name import CheckerName
from chaos.outcome import Outcome, is_fenced_instance

NAME = CheckerName.STATIC_MEMBERSHIP
_Streamed = (MemberStart | MemberStop | Assigned | ErrorEvent | Commit | BrokerLog | GroupStateSample | FaultStart
             | Lost)
#: coordinator lines saying a KIP-848 member stopped holding its instance id
_REMOVED = (BrokerLogEvent.MEMBER_FAILED, BrokerLogEvent.MEMBER_FENCED, BrokerLogEvent.MEMBER_LEFT)


@dataclass(slots=True)
class _Restart:
    group: str
    instance_id: str
    source: str
    stop_seq: int
    stop_ns: int
    start_seq: int
    deadline_ns: int
    base_gen: int | None
    rebalance: list[tuple[str, int]] = field(default_factory=list)
    disturbed: bool = False
    #: a KIP-848 group: the base is the group epoch and the first assignment's member epoch must not exceed it
    kip848: bool = False


@dataclass(slots=True)
class _Duplicate:
    group: str
    instance_id: str
    older: str
    newer: str
    start_seq: int
    deadline_ns: int
    assigned_seq: int | None = None
    fenced: bool = False
    wrong_fenced: int | None = None
    swapped: bool = False
    #: KIP-848: the older member released the id (stopped, lost, removed by the coordinator)
    released: bool = False
    kip848: bool = False


def check(history: History, bounds: ResolvedBounds) -> Result:
    idx = index_of(history)
    log = FindingLog(bounds.max_findings)
    slack = bounds.slack_ns
    starts: dict[str, MemberStart] = {}  # running incarnations by source
    last_stop: dict[tuple[str, str], tuple[int, int, int, bool]] = {}  # (group, I) -> (ns, seq, session ns, clean)
    group_gen: dict[str, int] = {}  # latest stabilized generation per group
    restarts: dict[str, _Restart] = {}  # by restarted source
    duplicates: list[_Duplicate] = []
    judged_restarts = skipped_restarts = 0
    kip848 = kip848_groups(idx)
    killed_restarts = 0  # KIP-848 restarts after an unclean stop: a rebalance is expected (module docstring)
    member_ids: dict[str, str] = {}  # source -> member id its events last carried

    def close_restart(r: _Restart, first_assign: Assigned | None) -> None:
        nonlocal judged_restarts, skipped_restarts
        if r.disturbed:
            skipped_restarts += 1
            return
        judged_restarts += 1
        reasons = list(r.rebalance)
        if first_assign is not None and r.base_gen is not None and first_assign.generation is not None:
            if r.kip848 and first_assign.generation > r.base_gen:
                reasons.append((f"rejoined at member epoch {first_assign.generation}, above the group epoch "
                                f"{r.base_gen} at the stop", first_assign.seq))
            elif not r.kip848 and first_assign.generation != r.base_gen:
                reasons.append((f"rejoined in generation {first_assign.generation} instead of {r.base_gen}",
                                first_assign.seq))
        if reasons:
            log.violation(f"group {r.group}: static member {r.instance_id} ({r.source}) restarted within its session "
                          f"timeout but the group rebalanced: {reasons[0][0]}",
                          r.stop_seq, r.start_seq, *(s for _, s in reasons[:3]))

    injected = injections(idx)
    set_aside: dict[str, list[int]] = {}  # fault id -> the FENCED_INSTANCE_ID reports it may have made up
    types = (MemberStart, MemberStop, Assigned, ErrorEvent, Commit, BrokerLog, GroupStateSample, FaultStart, Lost)
    for e in cast("list[_Streamed]", idx.stream(types)):
        if type(e) is MemberStart and declared(e):
            continue  # a command member's instance id as told, not as it joined: not judged here
        ns = e.mono_ns
        if restarts:
            for src, r in list(restarts.items()):
                if ns > r.deadline_ns:
                    del restarts[src]
                    close_restart(r, None)
        if type(e) is MemberStart:
            for r in restarts.values():
                if e.source != r.source:
                    r.disturbed = True
            if e.instance_id is not None:
                for other, s in starts.items():
                    if s.group == e.group and s.instance_id == e.instance_id and other != e.source:
                        duplicates.append(_Duplicate(e.group, e.instance_id, other, e.source, e.seq,
                                                     ns + bounds.fence_ns, kip848=e.group in kip848))
                prev = last_stop.pop((e.group, e.instance_id), None)
                if prev is not None and ns - prev[0] < prev[2]:
                    if e.group in kip848 and not prev[3]:
                        killed_restarts += 1  # its instance id stays owned until its session expires
                    else:
                        restarts[e.source] = _Restart(e.group, e.instance_id, e.source, prev[1], prev[0], e.seq,
                                                      ns + e.session_timeout_ms * 1_000_000 + slack,
                                                      group_gen.get(e.group), kip848=e.group in kip848)
            starts[e.source] = e
        elif type(e) is MemberStop:
            stopped = starts.pop(e.source, None)
            for r in restarts.values():
                if r.source != e.source:
                    r.disturbed = True
            for d in duplicates:
                if d.older == e.source:
                    d.fenced = d.released = True
            if stopped is not None and stopped.instance_id is not None:
                last_stop[(stopped.group, stopped.instance_id)] = (ns, e.seq, stopped.session_timeout_ms * 1_000_000,
                                                                   e.clean)
        elif type(e) is Lost:
            for d in duplicates:
                if d.kip848 and d.older == e.source:
                    d.released = True
        elif type(e) is Assigned:
            if e.member_id:
                member_ids[e.source] = e.member_id
            restart = restarts.pop(e.source, None)
            if restart is not None:
                close_restart(restart, e)
            for d in duplicates:
                if d.kip848:
                    if d.newer == e.source and e.partitions and not d.released and d.wrong_fenced is None:
                        d.wrong_fenced = e.seq  # the newer got in while the older held the id
                    continue
                if d.newer == e.source and d.assigned_seq is None:
                    d.assigned_seq = e.seq
                elif d.older == e.source and d.assigned_seq is not None and not d.swapped and not d.fenced:
                    # KIP-345 maps the instance id to the member whose JoinGroup the coordinator handled
                    # last, not to the process started last: the one started first joined after the
                    # other (a slower client start), so it took the instance over and the roles swap
                    d.older, d.newer, d.assigned_seq, d.swapped = d.newer, d.older, e.seq, True
                    if d.wrong_fenced is not None:  # the one fenced is the older after all: as it should be
                        d.fenced, d.wrong_fenced = True, None
        elif type(e) is ErrorEvent or (type(e) is Commit and e.outcome is Outcome.FAIL):
            if is_fenced_instance(e.error_code, e.error_name) and (made_up := injected_by(e, injected)) is not None:
                set_aside.setdefault(made_up.fault_id, []).append(e.seq)  # the fault's answer, not Kafka's
            elif is_fenced_instance(e.error_code, e.error_name):
                for d in duplicates:
                    if d.kip848:
                        continue  # KIP-848 refuses the newer member (UNRELEASED_INSTANCE_ID), fences no one
                    if d.older == e.source:
                        d.fenced = True
                    elif d.newer == e.source and not d.fenced and d.wrong_fenced is None:
                        d.wrong_fenced = e.seq
        elif type(e) is Commit:
            if e.outcome is Outcome.OK:
                for d in duplicates:
                    if d.older == e.source and d.assigned_seq is not None and not d.fenced and not d.kip848:
                        log.violation(f"group {d.group}: {d.older} still had a commit accepted after {d.newer} "
                                      f"took over instance id {d.instance_id}", d.start_seq, d.assigned_seq, e.seq)
        elif type(e) is FaultStart:
            for r in restarts.values():
                r.disturbed = True
        elif type(e) is BrokerLog:
            if e.event in _REMOVED and e.member_id is not None:
                for d in duplicates:
                    if d.kip848 and member_ids.get(d.older) == e.member_id:
                        d.released = True
            if e.event is BrokerLogEvent.MEMBER_FAILED:
                for r in restarts.values():
                    r.disturbed = True
            elif e.event is BrokerLogEvent.EPOCH_BUMPED and e.generation is not None:
                for r in restarts.values():
                    if r.group == e.group and r.base_gen is not None and e.generation > r.base_gen:
                        r.rebalance.append((f"broker {e.broker} bumped the group epoch to {e.generation}", e.seq))
                if e.generation > group_gen.get(e.group, -1):
                    group_gen[e.group] = e.generation
            elif e.event is BrokerLogEvent.STABILIZED and e.generation is not None:
                for r in restarts.values():
                    if r.group == e.group and r.base_gen is not None and e.generation > r.base_gen:
                        r.rebalance.append((f"generation {e.generation} stabilized", e.seq))
                group_gen[e.group] = e.generation
            elif e.event is BrokerLogEvent.PREPARING_REBALANCE:
                for r in restarts.values():
                    if r.group == e.group:
                        r.rebalance.append((f"broker {e.broker} started preparing a rebalance", e.seq))
        elif type(e) is GroupStateSample and e.group_type is GroupType.CONSUMER:
            ge = e.group_epoch if e.group_epoch is not None else e.generation
            if ge is not None and e.state not in (GroupState.DEAD, GroupState.UNKNOWN):
                for r in restarts.values():
                    if r.group == e.group and r.base_gen is not None and ge > r.base_gen:
                        r.rebalance.append((f"group sampled at group epoch {ge}", e.seq))
                if ge > group_gen.get(e.group, -1):
                    group_gen[e.group] = ge
        elif type(e) is GroupStateSample:
            if e.state is GroupState.STABLE and e.generation is not None:
                for r in restarts.values():
                    if r.group == e.group and r.base_gen is not None and e.generation > r.base_gen:
                        r.rebalance.append((f"group Stable at generation {e.generation}", e.seq))
                if e.generation > group_gen.get(e.group, -1):
                    group_gen[e.group] = e.generation
    for r in restarts.values():
        if idx.last_ns > r.deadline_ns or r.rebalance:
            close_restart(r, None)
    undecided = []
    for d in duplicates:
        if d.kip848:
            if d.wrong_fenced is not None:
                log.violation(f"group {d.group}: {d.newer} was assigned partitions with instance id {d.instance_id} "
                              f"while {d.older} still held it (KIP-848 refuses it: UNRELEASED_INSTANCE_ID)",
                              d.start_seq, d.wrong_fenced)
            continue
        if d.wrong_fenced is not None:
            log.violation(f"group {d.group}: the newer member {d.newer} was fenced for instance id {d.instance_id} "
                          f"while the older {d.older} kept running", d.start_seq, d.wrong_fenced)
        elif not d.fenced:
            if idx.last_ns > d.deadline_ns:
                log.violation(f"group {d.group}: {d.older} was never fenced after {d.newer} joined with the same "
                              f"instance id {d.instance_id}", d.start_seq)
            else:
                undecided.append(f"{d.older} not fenced yet when the history ends")
    for fault_id, seqs in set_aside.items():
        log.note(f"{len(seqs)} FENCED_INSTANCE_ID report(s) set aside: fault {fault_id} answered them, not the "
                 "coordinator", *seqs[:5])
    metrics = {"static_restarts_judged": judged_restarts, "static_restarts_not_judged": skipped_restarts,
               "kip848_killed_static_restarts": killed_restarts,
               "duplicate_instance_ids": len(duplicates), "violations": log.violation_count,
               "injected_reports_set_aside": sum(map(len, set_aside.values()))}
    ok = f"{judged_restarts} static restart(s) without rebalance, {len(duplicates)} duplicate instance id(s) fenced"
    if kip848:
        ok = (f"{judged_restarts} static restart(s) without rebalance or group epoch bump, {len(duplicates)} "
              "duplicate instance id(s) handled (classic: the older fenced; KIP-848: the newer refused)")
        if killed_restarts:
            ok += (f"; {killed_restarts} KIP-848 restart(s) after a kill not judged (the killed member holds its "
                   "instance id until its session expires, and its removal bumps the group epoch)")
    if set_aside:
        ok += f"; {sum(map(len, set_aside.values()))} FENCED_INSTANCE_ID report(s) injected by an rpc fault set aside"
    return log.result(NAME, ok, f"{log.violation_count} static membership violation(s)", metrics,
                      unknown="; ".join(undecided) if undecided else None)
