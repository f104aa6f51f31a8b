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

KIP-848 groups (samples with ``group_type`` consumer; docs/architecture.md,
"KRaft and KIP-848: epochs vs generations") have no group generation: the
``generation`` on a member's events is its own member epoch. The rule above
still holds there (one target assignment per epoch number gives a partition
to one member, and a member holds only partitions of the target of its epoch)
but says little, because two members are rarely at the same epoch. What
KIP-848 promises is that no partition is owned by two members *whose epochs
are current*: the coordinator revokes a partition from its owner and gives it
to another member only once the owner has acknowledged the revocation in a
heartbeat (KIP-848, "Member Epoch - Reconciliation of the group";
``CurrentAssignmentBuilder``: a partition stays *unreleased* while another
member still owns it), or once it removed the owner (fenced, session expired,
left). So when member B is ``assigned`` p while member A still holds p (no
``revoked`` / ``lost`` / ``member_stop`` since A's ``assigned``), A must no
longer be a current member:

- a violation when the coordinator's samples list A (its member id) as a
  member throughout the moment of B's assignment — the samples on both sides
  list it, at most 3 s apart, with an epoch that did not go back and no
  coordinator line of A joining, leaving or being fenced in between
  (:class:`chaos.checkers.coordinator.MemberEpochTimeline`, the timeline the
  fencing checker uses);
- fine when the samples show A removed by then (a sample without A on either
  side): A is a zombie, whose window invariant 2 judges;
- undecided when the samples cannot tell (a gap, an Unknown sample, A
  rejoining in between, no sample on one side): the answer is ``unknown``
  unless something else is a violation.

The summary says how many KIP-848 assignments were judged this way.

Counting: findings and the summary count what they are about — distinct
(group, partition) and member pairs — not observations. A double listing the
observer sees in 11 samples is one finding per partition and pair, citing the
samples (the first :data:`MAX_SAMPLES_CITED`) and saying how many there were.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from chaos.checkers.bounds import ResolvedBounds
from chaos.checkers.coordinator import (
    LOG_STAMP_UNCERTAINTY_NS,
    MemberEpochTimeline,
    MemberSegment,
    SegmentKind,
    kip848_groups,
    member_timelines,
)
from chaos.checkers.index import HistoryIndex, fmt_tp, index_of
from chaos.checkers.result import FindingLog, Result
from chaos.history import Assigned, GroupMember, GroupStateSample, History, Lost, MemberStart, MemberStop, Revoked
from chaos.model.checker_name import CheckerName

NAME = CheckerName.OWNERSHIP_GENERATION
#: how many samples one "listed twice" finding cites (the rest are counted)
MAX_SAMPLES_CITED = 10


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
    #: what the findings are about, counted once however often seen: (group, partition, the two owners)
    overlaps: set[tuple[str, _TP, frozenset[str]]] = set()

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
            overlaps.add((group, tp, frozenset((prev[0], source))))
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
    # one finding per (group, partition, member pair) the samples list twice, citing the samples (up to
    # MAX_SAMPLES_CITED): the same double listing seen in 11 samples is one finding, not 11
    # (pairs are named by client id, the member's source name, so that they match the members' own claims)
    listed_twice: dict[tuple[str, _TP, frozenset[str]], tuple[tuple[str, str], list[GroupStateSample]]] = {}
    for s in idx.of(GroupStateSample):
        samples += 1
        listed = [tp for m in s.members for tp in m.assignment]
        if len(set(listed)) == len(listed):
            continue  # fast path: no partition listed twice
        seen: dict[_TP, GroupMember] = {}
        for m in s.members:
            for tp in m.assignment:
                listed_by = seen.get(tp)
                if listed_by is not None and listed_by.member_id != m.member_id:
                    pair = frozenset((listed_by.client_id or listed_by.member_id, m.client_id or m.member_id))
                    ids = (listed_by.member_id, m.member_id)
                    listed_twice.setdefault((s.group, tp, pair), (ids, []))[1].append(s)
                seen[tp] = m
    for (group, tp, pair), ((a, b), seen_in) in listed_twice.items():
        first = seen_in[0]
        overlaps.add((group, tp, pair))
        log.violation(f"group {group} generation {first.generation} ({first.state}): coordinator lists {fmt_tp(tp)} "
                      f"in the assignments of {a} and {b} (in {len(seen_in)} sample(s))",
                      *[x.seq for x in seen_in[:MAX_SAMPLES_CITED]])

    k = _kip848_current_owners(idx, log)
    overlaps |= k.overlaps
    partitions = {(g, tp) for g, tp, _ in overlaps}
    pairs = {pair for _, _, pair in overlaps}
    metrics = {"ownership_claims": claims, "group_state_samples": samples, "violations": log.violation_count,
               "overlapping_partitions": len(partitions), "overlap_pairs": len(pairs),
               "samples_listing_twice": len({x.seq for _, seen_in in listed_twice.values() for x in seen_in}),
               "kip848_assignments": k.assignments, "kip848_overlaps_current": k.current,
               "kip848_overlaps_zombie": k.zombie, "kip848_overlaps_undecided": len(k.undecided)}
    ok = f"no partition owned by two members in one generation ({claims} claims checked)"
    unknown = None
    if k.groups:
        ok += (f"; KIP-848: no partition assigned while another member whose epoch was current held it "
               f"({k.assignments} assignment(s) judged against the coordinator's samples, {k.zombie} overlap(s) "
               "with a member the coordinator had removed, left to ownership-time)")
        if k.undecided:
            unknown = (f"KIP-848: {len(k.undecided)} partition(s) assigned while another member still held them and "
                       f"the samples cannot tell whether that member was still current: {k.undecided[0]}")
    detail = f"{len(pairs)} member pair(s), {log.violation_count} finding(s)"
    if listed_twice:
        detail += f", {metrics['samples_listing_twice']} sample(s) listing a partition twice"
    return log.result(NAME, ok, f"{len(partitions)} partition(s) owned by two members in the same generation "
                      f"or by two current members ({detail})", metrics, unknown=unknown)


@dataclass(slots=True)
class _Kip848Owners:
    """What the KIP-848 rule judged (module docstring)."""

    groups: frozenset[str]
    assignments: int = 0
    current: int = 0
    zombie: int = 0
    undecided: list[str] = field(default_factory=list)
    #: (group, partition, the two owners) of each violation
    overlaps: set[tuple[str, _TP, frozenset[str]]] = field(default_factory=set)


def _kip848_current_owners(idx: HistoryIndex, log: FindingLog) -> _Kip848Owners:
    """Judge every partition a KIP-848 member is assigned while another member holds it (module docstring)."""
    out = _Kip848Owners(kip848_groups(idx))
    if not out.groups:
        return out
    timelines = member_timelines(idx)
    held: dict[str, dict[_TP, int]] = {}  # source -> partition -> seq of the assigned event that gave it
    member_of: dict[str, str] = {}  # source -> member id its events last carried
    group_of: dict[str, str] = {}
    for e in idx.membership():
        if e.group not in out.groups:
            continue
        src = e.source
        if type(e) is MemberStart or type(e) is MemberStop:
            held.pop(src, None)
            member_of.pop(src, None)
            continue
        group_of[src] = e.group
        if e.member_id:
            member_of[src] = e.member_id
        mine = held.setdefault(src, {})
        if type(e) is Revoked or type(e) is Lost:
            for tp in e.partitions:
                mine.pop(tp, None)
            continue
        assert type(e) is Assigned
        if not e.incremental:
            for tp in [tp for tp in mine if tp not in e.partitions]:
                del mine[tp]
        new = [tp for tp in e.partitions if tp not in mine]
        out.assignments += 1
        for tp in new:
            for other, theirs in held.items():
                if other == src or group_of.get(other) != e.group or tp not in theirs:
                    continue
                _judge_overlap(out, log, timelines, e, tp, other, member_of.get(other), theirs[tp])
            mine[tp] = e.seq
    return out


def _removed_before(tl: MemberEpochTimeline, segs: list[MemberSegment], e: Assigned) -> bool:
    """Whether the member of ``tl``, listed before ``e`` and not after (a LEAVING segment), was removed before
    ``e``: a coordinator line of it leaving or being fenced is stamped no later than ``e`` (within the stamps'
    uncertainty). Without that line the order of its removal and ``e`` inside the segment is not known."""
    leaving = [sg for sg in segs if sg.kind is SegmentKind.LEAVING]
    if not leaving:
        return False
    start = leaving[0].ends[0].mono_ns - LOG_STAMP_UNCERTAINTY_NS
    return any(start <= t <= e.mono_ns + LOG_STAMP_UNCERTAINTY_NS for t in tl.membership_log)


def _judge_overlap(out: _Kip848Owners, log: FindingLog, timelines: dict[tuple[str, str], MemberEpochTimeline],
                   e: Assigned, tp: _TP, other: str,
                   other_id: str | None, claim_seq: int) -> None:
    """B (``e.source``) is assigned ``tp`` while ``other`` holds it since ``claim_seq``: was ``other`` current?"""
    where = f"group {e.group}: {fmt_tp(tp)} assigned to {e.source} (epoch {e.generation})"
    tl = timelines.get((e.group, other_id)) if other_id else None
    if tl is None:
        out.undecided.append(f"{where} while {other} held it; no sample lists {other}'s member id")
        return
    segs = tl.segments(e.mono_ns, e.mono_ns)
    if any(sg.kind in (SegmentKind.ABSENT, SegmentKind.JOINING) for sg in segs) or _removed_before(tl, segs, e):
        out.zombie += 1  # the coordinator had removed it (or it had rejoined afresh): a zombie's claim
        return
    if not segs or any(sg.kind is not SegmentKind.PRESENT for sg in segs):
        reason = next((sg.reason for sg in segs if sg.reason), "no sample around it")
        out.undecided.append(f"{where} while {other} held it; {reason}")
        return
    out.current += 1
    out.overlaps.add((e.group, tp, frozenset((other, e.source))))
    seqs = [q for sg in segs for q in sg.seqs]
    log.violation(f"{where} while {other} (member {other_id}) still held it and the coordinator listed {other} as a "
                  f"member throughout (at epoch {segs[0].epoch_lo}..{segs[-1].epoch_hi}): two current owners",
                  claim_seq, e.seq, *seqs)
