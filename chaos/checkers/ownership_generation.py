"""Invariant 1: single ownership per generation.

Definition. A member *holds* a partition from the ``assigned`` event that
gives it (a non-incremental, eager assignment replaces the whole holding; an
incremental one adds, KIP-429) until a ``revoked`` / ``lost`` event removes it
or the member stops. A member *is in* generation g from its first ``assigned``
(or incremental ``revoked``) event tagged g until its first such event tagged
with a later generation; an eager ``revoked`` or a ``lost`` only ends ownership
(clients differ in which generation they tag it with). A member *owns p in
generation g* if it holds p at any moment while it is in g. Within one group
and generation, at most one member may own any partition.

For eager protocols this is the classic rule (all partitions are revoked
before JoinGroup, the leader hands each partition to one member). For
cooperative rebalancing (KIP-429) a partition stays owned by A in the new
generation until A revokes it, and the assignor must not give it to B before
the *next* generation; so B being assigned p in a generation in which A still
holds p un-revoked is a violation. Members that never see generation g
(evicted zombies) do not own anything in g; that case is invariant 2. Two
members with one ``group.instance.id``: the one assigned last holds the
instance's partitions and the other's claims end there (KIP-345 replacement
returns the current assignment without a rebalance; the replaced member is
fenced, which invariants 2 and 8 judge).

Additionally, every ``group_state`` sample (DescribeGroups) must list each
partition in at most one member's assignment.
"""

from __future__ import annotations

from chaos.checkers.bounds import ResolvedBounds
from chaos.checkers.index import fmt_tp, index_of
from chaos.checkers.result import CheckerName, FindingLog, Result
from chaos.history import Assigned, GroupStateSample, History, MemberStart, MemberStop, Revoked

NAME = CheckerName.OWNERSHIP_GENERATION


_TP = tuple[str, int]
_Claim = tuple[str, int, _TP]  # (group, generation, partition)


def check(history: History, bounds: ResolvedBounds) -> Result:
    idx = index_of(history)
    log = FindingLog(bounds.max_findings)
    gen_of: dict[str, int | None] = {}
    holding: dict[str, set[_TP]] = {}
    owners: dict[_Claim, tuple[str, int]] = {}  # (group, generation, tp) -> (owner, seq of its claim)
    claims = 0
    flagged: set[tuple[_Claim, str]] = set()
    claimed_by: dict[str, list[_Claim]] = {}
    instance_of: dict[str, tuple[str, str]] = {}  # source -> (group, group.instance.id)

    def drop_claims(source: str) -> None:
        for key in claimed_by.pop(source, ()):
            if owners.get(key, ("",))[0] == source:
                del owners[key]

    def claim(group: str, gen: int, tp: _TP, source: str, seq: int) -> None:
        nonlocal claims
        key = (group, gen, tp)
        prev = owners.get(key)
        if prev is None:
            owners[key] = (source, seq)
            claimed_by.setdefault(source, []).append(key)
            claims += 1
        elif prev[0] != source and (key, source) not in flagged:
            flagged.add((key, source))
            log.violation(f"group {group} generation {gen}: partition {fmt_tp(tp)} owned by both "
                          f"{prev[0]} and {source}", prev[1], seq)

    for e in idx.membership():
        src = e.source
        if type(e) is MemberStart or type(e) is MemberStop:
            # A stopped member owns nothing any more; a static member's replacement may take its
            # assignment over within the same generation (KIP-345).
            holding[src] = set()
            gen_of[src] = None
            drop_claims(src)
            instance_of.pop(src, None)
            if type(e) is MemberStart and e.instance_id is not None:
                # A new member with a running member's instance id replaces it in the group
                # (KIP-345); the old one is a zombie until fenced, which invariants 2 and 8 judge.
                for other, inst in list(instance_of.items()):
                    if inst == (e.group, e.instance_id):
                        drop_claims(other)
                        holding[other] = set()
                instance_of[src] = (e.group, e.instance_id)
            continue
        held = holding.setdefault(src, set())
        g = e.generation
        cur = gen_of.get(src)
        entered = g if g is not None and (cur is None or g > cur) else None  # the generation entered
        if type(e) is Assigned:
            own_inst = instance_of.get(src)
            if own_inst is not None:
                # The coordinator hands a static member's assignment to whichever member last joined
                # with that instance id, within the generation (KIP-345 replacement, no rebalance);
                # the other is fenced from then on — invariants 2 and 8 judge what it still does.
                for other, other_inst in instance_of.items():
                    if other != src and other_inst == own_inst:
                        drop_claims(other)
                        holding[other] = set()
            if not e.incremental:
                held.clear()
            held.update(e.partitions)
            if entered is not None:
                gen_of[src] = cur = entered
                for tp in held:
                    claim(e.group, entered, tp, src, e.seq)
            elif cur is not None:
                for tp in e.partitions:
                    claim(e.group, cur, tp, src, e.seq)
        else:
            if entered is not None and type(e) is Revoked and e.incremental:
                # KIP-429: an incremental revocation happens after the join, in the new
                # generation, so the member still owns what it revokes there.
                gen_of[src] = cur = entered
                for tp in held:
                    claim(e.group, entered, tp, src, e.seq)
            # An eager revocation (before JoinGroup) or a loss ends ownership without
            # entering the generation it may be tagged with: clients differ in which one they report.
            held.difference_update(e.partitions)

    samples = 0
    for s in idx.of(GroupStateSample):
        samples += 1
        listed = [tp for m in s.members for tp in m.assignment]
        if len(set(listed)) == len(listed):
            continue  # fast path: no partition listed twice
        seen: dict[_TP, str] = {}
        for m in s.members:
            for tp in m.assignment:
                listed_by = seen.get(tp)
                if listed_by is not None and listed_by != m.member_id:
                    log.violation(f"group {s.group} generation {s.generation} ({s.state}): coordinator lists "
                                  f"{fmt_tp(tp)} in the assignments of {listed_by} and {m.member_id}", s.seq)
                seen[tp] = m.member_id

    metrics = {"ownership_claims": claims, "group_state_samples": samples, "violations": log.violation_count}
    return log.result(NAME, f"no partition owned by two members in one generation ({claims} claims checked)",
                      f"{log.violation_count} partition(s) owned by two members in the same generation", metrics)
