"""Invariant 9: assignor properties, judged on stable generations only.

Each generation is judged once, on its first ``group_state`` sample in state
Stable whose assignment is complete (every partition of the group's topics
owned). A Stable generation that leaves a subscribed partition without an
owner is

- skipped for the cooperative protocol (cooperative-sticky): KIP-429's first
  phase only revokes, and the partitions are assigned in the next generation;
- a violation for an eager assignor (range, roundrobin, sticky), which hands
  out every partition of the subscribed topics in every generation
  (RangeAssignor / RoundRobinAssignor / StickyAssignor ``assign``) — unless
  the partition was added to its topic (an ``add_partitions`` fault) after
  the run began: the leader assigns from its own metadata, which learns of
  new partitions only at its next refresh (``metadata.max.age.ms``, default
  5 min), so partitions first seen after an ``add_partitions`` fault began are
  not required of an eager generation (the convergence checker requires them
  after the heal). Without recorded subscriptions only the topics the sample
  shows owned are required (:func:`eager_required`).

The properties below are documented
for members with one common subscription: a generation whose members
subscribe to different topics (a change_subscription fault; the subscriptions
come from the coordinator's DescribeGroups) is skipped and counted, and
stickiness is not judged across a change of the group's subscriptions.

- ``roundrobin`` (RoundRobinAssignor): owned-partition counts differ by at most 1.
- ``range`` (RangeAssignor): per topic, each member gets floor(n/m) or
  ceil(n/m) partitions of it, as one contiguous range.
- ``sticky`` / ``cooperative-sticky`` (StickyAssignor, KIP-54; KIP-429):
  balanced (counts differ by at most 1) and minimal movement: between two
  consecutive judged generations, a member present in both keeps at least
  min(its previous count, floor(n/m)) of its previous partitions (a balanced
  assignment never needs to take more than that from it). Not judged across a
  ``lost`` event: partitions a member lost (KIP-429 ``onPartitionsLost``, e.g.
  after a failed SyncGroup when the coordinator died) are no longer in its
  owned-partitions metadata, so no assignor can stick to them. Nor across a
  generation in between that moved partitions but was never sampled complete
  (a short generation during a fault): the assignor stuck to that one.

KIP-848 groups (samples with ``group_type`` consumer) are assigned by the
coordinator's own (server-side) assignor, named in the sample's ``protocol``;
``range`` there is not the classic client-side RangeAssignor (``group_type``
tells them apart). Each group epoch is judged once, on its first sample that
is Stable at that epoch with every member reconciled (assignment epoch =
group epoch, every member at it and owning exactly its target assignment:
:func:`chaos.checkers.coordinator.not_reconciled`) and with every partition
of the group's topics owned; anything else is the target assignment not
reached yet, which convergence judges. The documented properties, for members
with one common subscription (KIP-848 samples carry each member's subscribed
topic names; an older history without them and with a ``change_subscription``
fault is not judged):

- ``uniform`` (``UniformHomogeneousAssignmentBuilder``, "Balance: the
  difference in assignments sizes between any two members should not exceed
  one partition"): owned-partition counts differ by at most 1. Its stickiness
  is ranked below balance and not quantified: not judged.
- ``range`` (``group-coordinator`` ``RangeAssignor``, rewritten as "assigns
  contiguous partition ranges" by KAFKA-16944, Kafka 3.9): per topic, each
  member gets floor(n/m) or ceil(n/m) partitions of it
  (``TopicMetadata.maybeComputeQuota``) as one contiguous range. Before 3.9
  the server-side range assignor was sticky, not contiguous: not judged.
- any other (custom) server-side assignor: not judged.
"""

from __future__ import annotations

from chaos.checkers.bounds import ResolvedBounds
from chaos.checkers.coordinator import kafka_version, not_reconciled
from chaos.checkers.index import HistoryIndex, fmt_tp, index_of
from chaos.checkers.result import FindingLog, Result
from chaos.history import (
    Assigned,
    FaultStart,
    GroupState,
    GroupStateSample,
    History,
    Lost,
    SendOk,
)
from chaos.history.event import GroupType
from chaos.model.checker_name import CheckerName
from chaos.model.fault_traits import FaultTrait

NAME = CheckerName.ASSIGNOR

_BALANCED = ("roundrobin", "sticky", "cooperative-sticky")
_STICKY = ("sticky", "cooperative-sticky")
#: assignors of the eager protocol: every generation assigns every subscribed partition
_EAGER = ("range", "roundrobin", "sticky")
#: the first Kafka release whose server-side range assignor hands out contiguous ranges (KAFKA-16944)
SERVER_RANGE_CONTIGUOUS_SINCE = (3, 9)


def check(history: History, bounds: ResolvedBounds) -> Result:
    idx = index_of(history)
    log = FindingLog(bounds.max_findings)

    judged_gens: dict[str, set[int]] = {}
    # group -> (seq, member -> partitions, mono_ns, generation)
    previous: dict[str, tuple[int, dict[str, set[tuple[str, int]]], int, int]] = {}
    lost_at: dict[str, list[int]] = {}
    for e in idx.of(Lost):
        lost_at.setdefault(e.group, []).append(e.mono_ns)
    # (group, generation) -> did any member gain partitions in it? (cooperative revocation-only
    # generations gain none, KIP-429); a generation with no assigned event at all is absent
    gained: dict[tuple[str, int], bool] = {}
    for a in idx.of(Assigned):
        if a.generation is not None:
            key = (a.group, a.generation)
            gained[key] = gained.get(key, False) or bool(a.partitions)
    added = _added_partitions(idx)
    incomplete_eager: set[tuple[str, int]] = set()
    judged = 0
    skipped_after_loss = 0
    skipped_gap = 0
    mixed: set[tuple[str, int]] = set()
    subscriptions: dict[str, frozenset[str]] = {}  # group -> topics subscribed at its previous judged generation
    kip848 = _Kip848(idx, history)
    for s in idx.of(GroupStateSample):
        if s.group_type is GroupType.CONSUMER:
            kip848.judge(s, log)
            continue
        if s.state is not GroupState.STABLE or s.generation is None or not s.members:
            continue
        done = judged_gens.setdefault(s.group, set())
        if s.generation in done:
            continue
        if len({m.subscription for m in s.members}) > 1:
            mixed.add((s.group, s.generation))  # members disagree: no documented balance property applies
            continue
        expected = idx.subscribed(s)
        owned = {m.member_id: set(m.assignment) for m in s.members}
        covered = set().union(*owned.values())
        if covered != expected:
            proto = (s.protocol or "").lower()
            missing = sorted(tp for tp in eager_required(s, expected) - covered if tp not in added)
            if proto in _EAGER and missing and (s.group, s.generation) not in incomplete_eager:
                incomplete_eager.add((s.group, s.generation))
                log.violation(f"group {s.group} generation {s.generation} ({proto}): Stable with "
                              f"{', '.join(map(fmt_tp, missing[:6]))} assigned to no member ({len(missing)} of "
                              f"{len(expected)} subscribed partition(s)); an eager assignor assigns every one", s.seq)
            continue  # incomplete (cooperative first phase) or unknown partitions: not judged further
        done.add(s.generation)
        judged += 1
        topics = frozenset(s.members[0].subscription)
        if subscriptions.get(s.group, topics) != topics:
            previous.pop(s.group, None)  # other topics now: nothing to stick to
        subscriptions[s.group] = topics
        proto = (s.protocol or "").lower()
        where = f"group {s.group} generation {s.generation} ({proto})"
        counts = {m: len(p) for m, p in owned.items()}
        if proto in _BALANCED and max(counts.values()) - min(counts.values()) > 1:
            hi = max(counts, key=counts.__getitem__)
            lo = min(counts, key=counts.__getitem__)
            log.violation(f"{where}: unbalanced, {hi} owns {counts[hi]} partitions and {lo} owns {counts[lo]}", s.seq)
        elif proto == "range":
            _check_range(s, owned, where, log)
        if proto in _STICKY:
            prev = previous.get(s.group)
            if prev is not None and any(prev[2] < t <= s.mono_ns for t in lost_at.get(s.group, ())):
                skipped_after_loss += 1
                prev = None
            if prev is not None and any(gained.get((s.group, g), True) for g in range(prev[3] + 1, s.generation)):
                # a generation in between moved partitions (or was never seen): the assignor stuck to
                # *that* assignment, which no sample showed complete, not to the one judged before
                skipped_gap += 1
                prev = None
            if prev is not None:
                n, m = len(expected), len(owned)
                floor = n // m
                for member, before in prev[1].items():
                    if member not in owned:
                        continue
                    kept = len(before & owned[member])
                    need = min(len(before & expected), floor)
                    if kept < need:
                        moved = sorted(before - owned[member])
                        log.violation(f"{where}: {member} kept {kept} of its {len(before)} partitions although a "
                                      f"balanced assignment lets it keep {need} (moved {', '.join(map(fmt_tp, moved[:4]))})",
                                      prev[0], s.seq)
            previous[s.group] = (s.seq, owned, s.mono_ns, s.generation)
    metrics = {"generations_judged": judged, "stickiness_skipped_after_lost": skipped_after_loss,
               "skipped_mixed_subscriptions": len(mixed), "stickiness_skipped_unseen_generation": skipped_gap,
               "incomplete_eager_generations": len(incomplete_eager), "violations": log.violation_count,
               "kip848_epochs_judged": kip848.judged, "kip848_epochs_not_judged": len(kip848.not_judged)}
    what = []
    if judged or not (kip848.judged or kip848.not_judged):
        what.append(f"{judged} stable generation(s)")
    if kip848.judged or kip848.not_judged:
        what.append(f"{kip848.judged} KIP-848 group epoch(s) at their reconciled target assignment")
    why = sorted(set(kip848.not_judged.values()))
    tail = f"; {len(kip848.not_judged)} KIP-848 group epoch(s) not judged ({'; '.join(why[:3])})" if why else ""
    return log.result(NAME, f"assignments of {' and '.join(what)} met their assignor's documented properties{tail}",
                      f"{log.violation_count} assignor property violation(s)", metrics)


class _Kip848:
    """Judges KIP-848 samples (module docstring): one judgement per (group, group epoch)."""

    def __init__(self, idx: HistoryIndex, history: History) -> None:
        self.idx = idx
        self.judged = 0
        self.done: set[tuple[str, int]] = set()
        #: (group, group epoch) -> why its reconciled assignment is not judged
        self.not_judged: dict[tuple[str, int], str] = {}
        version = kafka_version(history.header)
        self.contiguous_range = version is None or version >= SERVER_RANGE_CONTIGUOUS_SINCE
        self.version = "unknown" if version is None else f"{version[0]}.{version[1]}"
        self.subscriptions_changed = any(FaultTrait.CHANGES_SUBSCRIPTION in f.effects for f in idx.of(FaultStart))

    def judge(self, s: GroupStateSample, log: FindingLog) -> None:
        epoch = s.group_epoch if s.group_epoch is not None else s.generation
        if s.state is not GroupState.STABLE or epoch is None or not s.members:
            return
        key = (s.group, epoch)
        if key in self.done or not_reconciled(s) is not None:
            return
        owned = {m.member_id: set(m.assignment) for m in s.members}
        if set().union(*owned.values()) != self.idx.subscribed(s):
            return  # not every partition owned: not the whole target assignment (convergence judges)
        self.done.add(key)
        self.not_judged.pop(key, None)
        proto = (s.protocol or "").lower()
        if len({m.subscription for m in s.members}) > 1 or (self.subscriptions_changed
                                                            and not any(m.subscription for m in s.members)):
            self.not_judged[key] = "members may subscribe to different topics"
            return
        where = f"group {s.group} group epoch {epoch} (server-side {proto})"
        if proto == "uniform":
            counts = {m: len(p) for m, p in owned.items()}
            hi = max(counts, key=counts.__getitem__)
            lo = min(counts, key=counts.__getitem__)
            if counts[hi] - counts[lo] > 1:
                log.violation(f"{where}: unbalanced, {hi} owns {counts[hi]} partitions and {lo} owns {counts[lo]}",
                              s.seq)
        elif proto == "range" and self.contiguous_range:
            _check_range(s, owned, where, log)
        elif proto == "range":
            self.not_judged[key] = f"Kafka {self.version}'s server-side range assignor is sticky, not contiguous"
            return
        else:
            self.not_judged[key] = f"server-side assignor {proto or 'unknown'} has no documented property here"
            return
        self.judged += 1


def eager_required(s: GroupStateSample, subscribed: frozenset[tuple[str, int]]) -> frozenset[tuple[str, int]]:
    """The partitions an eager generation sampled as ``s`` must all assign.

    With recorded subscriptions, every partition of a subscribed topic. Without them (histories from before
    the observer recorded them) only the topics the sample itself shows owned: someone subscribes to those,
    whereas a topic of the group's past (a change of subscription) may no longer be subscribed.
    """
    if any(m.subscription for m in s.members):
        return subscribed
    topics = {t for m in s.members for t, _ in m.assignment}
    return frozenset(tp for tp in subscribed if tp[0] in topics)


def _added_partitions(idx: HistoryIndex) -> frozenset[tuple[str, int]]:
    """Partitions first seen (produced to, assigned or sampled) after the first fault that changed the partition
    count began."""
    starts = [f.mono_ns for f in idx.of(FaultStart) if FaultTrait.CHANGES_PARTITION_COUNT in f.effects]
    if not starts:
        return frozenset()
    t = min(starts)
    before: set[tuple[str, int]] = set()
    for send in idx.of(SendOk):
        if send.mono_ns >= t:
            break
        before.add((send.topic, send.partition))
    for assigned in idx.of(Assigned):
        if assigned.mono_ns >= t:
            break
        before.update(assigned.partitions)
    for sample in idx.of(GroupStateSample):
        if sample.mono_ns >= t:
            break
        for m in sample.members:
            before.update(m.assignment)
    every = set().union(*idx.group_partitions().values()) if idx.group_partitions() else set()
    return frozenset(every - before)


def _check_range(s: GroupStateSample, owned: dict[str, set[tuple[str, int]]], where: str, log: FindingLog) -> None:
    topics = sorted({t for p in owned.values() for t, _ in p})
    m = len(owned)
    for topic in topics:
        per = {mid: sorted(p for t, p in tps if t == topic) for mid, tps in owned.items()}
        n = sum(len(v) for v in per.values())
        lo, hi = n // m, -(-n // m)
        for mid, ps in per.items():
            if not lo <= len(ps) <= hi:
                log.violation(f"{where}: {mid} owns {len(ps)} partitions of {topic}; range gives each member "
                              f"{lo} or {hi} of its {n}", s.seq)
                return
            if ps and ps[-1] - ps[0] != len(ps) - 1:
                log.violation(f"{where}: {mid} owns {topic} partitions {ps}, not one contiguous range", s.seq)
                return
