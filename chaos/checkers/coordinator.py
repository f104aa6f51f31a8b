"""The coordinator's generation timeline, reconstructed from the observer's evidence.

Sources, per group, in history order:

- ``broker_log`` ``stabilized`` N: generation N is current and Stable;
- ``broker_log`` ``preparing_rebalance`` with old generation N: the group left
  N's Stable state, but N stays current until the join phase completes and
  bumps it (GroupCoordinator: the generation is incremented in
  ``onCompleteJoin``), so commits tagged N remain legal meanwhile;
- ``broker_log`` ``loading`` N: a new coordinator loaded generation N from
  ``__consumer_offsets`` after a failover (a generation bumped but never
  stored may vanish, so the timeline may step back here);
- ``group_state`` samples with a generation (DescribeGroups), except Dead and
  Unknown.

The latest evidence wins, it is not a maximum: after a failover the loaded
generation is the truth. A broker's lines count only while it is the group's
coordinator, from its ``loading`` line until another broker's
(:func:`timelines`): a replaced coordinator may still log a generation the
group never had.

KIP-848 groups (samples with ``group_type`` consumer) have no group-wide
generation a commit could carry: each member has its own *member epoch*
(docs/architecture.md, "KRaft and KIP-848: epochs vs generations"). For them
:func:`member_timelines` reconstructs, per member, its epoch and assignment as
the coordinator described them (ConsumerGroupDescribe samples), and what can be
said about the moments between two samples (:class:`MemberSegment`).
"""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import cast

from chaos.checkers.index import HistoryIndex
from chaos.history import BrokerLog, BrokerLogEvent, GroupMember, GroupState, GroupStateSample, Header
from chaos.history.event import GroupType, TopicPartition

_TIMELINE_LOG_EVENTS = (BrokerLogEvent.STABILIZED, BrokerLogEvent.PREPARING_REBALANCE, BrokerLogEvent.LOADING)
_SKIP_STATES = (GroupState.DEAD, GroupState.UNKNOWN)

#: How far a coordinator log line's stamp may be from when it happened: log4j's stamp is truncated to the
#: millisecond (1 ms), plus 1 ms for mapping the wall clock onto CLOCK_MONOTONIC at read time (two clock reads
#: microseconds apart, and NTP slew of at most 500 ppm over the observer's read lag).
LOG_STAMP_UNCERTAINTY_NS = 2_000_000

#: The longest time between two ``group_state`` samples of a group across which nothing unseen can have
#: happened but what the two samples show. The observer asks every 100 ms and writes a sample whenever
#: anything changed and at least once a second (:mod:`chaos.workload.observer`); one ConsumerGroupDescribe
#: may take up to its 1.5 s timeout; 3 s leaves room for scheduling. A longer gap is a blind spot.
MAX_SAMPLE_GAP_NS = 3_000_000_000

#: coordinator lines saying a KIP-848 member joined or left (was fenced): between two samples they mean the
#: member may have left and rejoined (epoch back to 0, KIP-848 "Member Epoch"), which the samples cannot show
_MEMBERSHIP_LOG_EVENTS = frozenset({BrokerLogEvent.MEMBER_JOINED, BrokerLogEvent.MEMBER_FAILED,
                                    BrokerLogEvent.MEMBER_FENCED, BrokerLogEvent.MEMBER_LEFT})


@dataclass(frozen=True, slots=True)
class GenerationTimeline:
    """Parallel lists: at ``times[i]`` the coordinator's generation became ``gens[i]`` (evidence ``seqs[i]``)."""

    times: list[int]
    gens: list[int]
    seqs: list[int]

    def window(self, start_ns: int, end_ns: int) -> tuple[int, int]:
        """Index range [lo, hi) of the entries in effect at some moment of [start_ns, end_ns].

        ``lo == hi`` when nothing is known before ``end_ns``.
        """
        hi = bisect_right(self.times, end_ns)
        lo = max(bisect_right(self.times, start_ns) - 1, 0)
        return (lo, hi) if hi else (0, 0)


def timelines(idx: HistoryIndex) -> dict[str, GenerationTimeline]:
    """Per group, the coordinator's generation over time (module docstring).

    A broker's lines count while it is the group's coordinator: from its ``loading`` line until another broker's
    (before any ``loading``, every broker's). A coordinator cut off from the cluster does not know at once that
    it was replaced: it may complete a join and log ``Stabilized … generation N+1`` after the new coordinator
    loaded N from ``__consumer_offsets`` (the bump is stored only with the leader's SyncGroup, which the old one
    can no longer write), and the new one rightly accepts commits of N. Taken as the group's, such a line would
    make them look stale.
    """
    out: dict[str, GenerationTimeline] = {}
    coordinator: dict[str, int] = {}  # group -> the broker that loaded it last
    for e in cast("list[BrokerLog | GroupStateSample]", idx.stream((BrokerLog, GroupStateSample))):
        if type(e) is BrokerLog:
            if e.event is BrokerLogEvent.LOADING:
                coordinator[e.group] = e.broker
            elif coordinator.get(e.group, e.broker) != e.broker:
                continue  # a replaced coordinator's line (docstring)
            if e.event not in _TIMELINE_LOG_EVENTS or e.generation is None:
                continue
        elif e.generation is None or e.state in _SKIP_STATES or e.generation < 0:
            continue
        tl = out.get(e.group)
        if tl is None:
            tl = out[e.group] = GenerationTimeline([], [], [])
        if tl.gens and tl.gens[-1] == e.generation:
            continue
        tl.times.append(e.mono_ns)
        tl.gens.append(e.generation)
        tl.seqs.append(e.seq)
    return out


# --------------------------------------------------------------------------- KIP-848 member epochs


def kip848_groups(idx: HistoryIndex) -> frozenset[str]:
    """Groups the observer described as KIP-848 consumer groups (a ``group_state`` sample with ``group_type``
    consumer): their members commit with member epochs, not with a group generation."""
    return frozenset(s.group for s in idx.of(GroupStateSample) if s.group_type is GroupType.CONSUMER)


@dataclass(frozen=True, slots=True)
class PartitionHold:
    """A partition the coordinator may hold for a member at a sample, and bounds of the epoch it was assigned at.

    KIP-1251 (Kafka 4.3+) keeps, per partition a member holds, the member epoch at which it was assigned to the
    member; a partition kept across epochs keeps it. The samples show assignments, not those epochs: a
    partition absent from a sample at member epoch ``epoch_lo`` (sample ``lo_seq``) and present in the next, at
    member epoch ``epoch_hi`` (sample ``seq``), was assigned in between, at an epoch in [epoch_lo, epoch_hi]. It
    can be ``epoch_lo``: a member waiting for a partition another member has not released yet is already at its
    new epoch and gets the partition at that epoch (``CurrentAssignmentBuilder``, UNRELEASED_PARTITIONS).
    ``epoch_lo`` is 0 (``lo_seq`` None) when no sample before bounds it.

    ``pending``: the partition has left the described assignment but may still be *pending revocation*, which
    the coordinator also validates commits against. ConsumerGroupDescribe lists only the assigned partitions
    (``ConsumerGroupMember.asConsumerGroupDescribeMember``), and a member keeps its epoch until it acknowledges
    a revocation (``CurrentAssignmentBuilder.computeNextAssignment``: UNREVOKED_PARTITIONS keeps the member
    epoch), so the partition may be pending until a sample shows the member at a higher epoch.
    """

    epoch_lo: int
    epoch_hi: int
    seq: int
    lo_seq: int | None
    pending: bool = False


@dataclass(frozen=True, slots=True)
class MemberObservation:
    """One ``group_state`` sample (``seq``, at ``mono_ns``) as it concerns one member.

    ``present`` None: the sample cannot tell (an Unknown or Dead sample, a sample that does not describe the
    group as a KIP-848 group, a member without an epoch). ``holds``: the partitions the coordinator may hold for
    the member (assigned, or possibly pending revocation). ``unseen_pending``: partitions not in ``holds`` may
    be pending revocation too (the member's history before this sample is not known at its current epoch).
    """

    mono_ns: int
    seq: int
    present: bool | None
    epoch: int = 0
    holds: Mapping[TopicPartition, PartitionHold] = field(default_factory=dict)
    unseen_pending: bool = True

    def may_commit(self, tp: TopicPartition, epoch: int) -> bool:
        """Whether, at this sample, KIP-1251 can accept a commit of ``tp`` with the lagging ``epoch``."""
        h = self.holds.get(tp)
        return self.unseen_pending if h is None else h.epoch_lo <= epoch


class SegmentKind(StrEnum):
    """What the samples say about a member between two consecutive samples."""

    #: the samples cannot tell (no sample on one side, a blind sample, a gap, the member left and rejoined)
    UNKNOWN = "unknown"
    #: a member throughout, at an epoch in [epoch_lo, epoch_hi]
    PRESENT = "present"
    #: a member at the start (at an epoch >= epoch_lo), not any more at the end
    LEAVING = "leaving"
    #: not a member at the start, a member at the end (at an epoch <= epoch_hi)
    JOINING = "joining"
    #: not a member throughout
    ABSENT = "absent"


@dataclass(frozen=True, slots=True)
class MemberSegment:
    """The time between two consecutive samples of a member's group (``ends``, one missing at either end of
    the samples) and what can have been true of the member then. A sample describes the state the coordinator
    had committed to ``__consumer_offsets`` when it answered (``ConsumerGroup.asDescribedGroup`` reads at the
    last committed offset), so a change appears at the first sample after it, at the latest."""

    kind: SegmentKind
    ends: tuple[MemberObservation, ...]
    epoch_lo: int = 0
    #: None: unbounded (the member may have moved on before it left)
    epoch_hi: int | None = None
    #: why the samples cannot tell (UNKNOWN)
    reason: str = ""

    @property
    def present_ends(self) -> tuple[MemberObservation, ...]:
        return tuple(o for o in self.ends if o.present)

    @property
    def seqs(self) -> tuple[int, ...]:
        return tuple(o.seq for o in self.ends)


@dataclass(frozen=True, slots=True)
class MemberEpochTimeline:
    """One KIP-848 member as the coordinator described it, from the first sample that lists it on.

    ``observations[i]`` is at ``times[i]``; every usable sample of the group after the first listing the member
    is an observation (present, absent or blind). ``membership_log`` holds the stamps of the coordinator's
    lines saying the member joined, left or was fenced.
    """

    group: str
    member_id: str
    observations: list[MemberObservation]
    times: list[int]
    membership_log: list[int]

    def segment(self, k: int) -> MemberSegment:
        """The segment between observations ``k`` and ``k + 1``."""
        obs = self.observations
        if k < 0:
            return MemberSegment(SegmentKind.UNKNOWN, tuple(obs[:1]), reason="no sample lists the member before")
        if k + 1 >= len(obs):
            return MemberSegment(SegmentKind.UNKNOWN, tuple(obs[-1:]), reason="no sample of the group after")
        a, b = obs[k], obs[k + 1]
        if a.present is None or b.present is None:
            return MemberSegment(SegmentKind.UNKNOWN, (a, b), reason="a sample could not describe the group")
        if b.mono_ns - a.mono_ns > MAX_SAMPLE_GAP_NS:
            return MemberSegment(SegmentKind.UNKNOWN, (a, b),
                                 reason=f"no sample for {(b.mono_ns - a.mono_ns) / 1e9:.1f}s")
        rejoined = _membership_changed(self.membership_log, a.mono_ns, b.mono_ns)
        if a.present and b.present:
            if rejoined:
                return MemberSegment(SegmentKind.UNKNOWN, (a, b), reason="the coordinator logged the member "
                                     "joining or leaving between two samples that list it")
            if b.epoch < a.epoch:
                return MemberSegment(SegmentKind.UNKNOWN, (a, b), reason=f"its epoch went back from {a.epoch} "
                                     f"to {b.epoch}")
            return MemberSegment(SegmentKind.PRESENT, (a, b), a.epoch, b.epoch)
        if a.present:
            return MemberSegment(SegmentKind.LEAVING, (a, b), a.epoch, None)
        if b.present:
            return MemberSegment(SegmentKind.JOINING, (a, b), 0, b.epoch)
        if rejoined:
            return MemberSegment(SegmentKind.UNKNOWN, (a, b), reason="the coordinator logged the member joining "
                                 "or leaving between two samples without it")
        return MemberSegment(SegmentKind.ABSENT, (a, b))

    def segments(self, start_ns: int, end_ns: int) -> list[MemberSegment]:
        """The segments overlapping [start_ns, end_ns] (a sample inside it belongs to the segments on both
        sides; the time before the first observation and after the last are UNKNOWN segments)."""
        i0 = bisect_right(self.times, start_ns) - 1
        i1 = bisect_left(self.times, end_ns)
        return [self.segment(k) for k in range(i0, max(i1, i0 + 1))]


def _membership_changed(log: list[int], a_ns: int, b_ns: int) -> bool:
    """Whether a membership line of the member is stamped within [a_ns, b_ns], widened by the stamps'
    uncertainty."""
    i = bisect_left(log, a_ns - LOG_STAMP_UNCERTAINTY_NS)
    return i < len(log) and log[i] <= b_ns + LOG_STAMP_UNCERTAINTY_NS


def _follows(prev: MemberObservation | None, epoch: int, mono_ns: int, log: list[int]) -> bool:
    """Whether a sample listing the member at ``epoch`` continues ``prev`` with nothing unseen between: both
    list it, no gap, no membership line, the epoch did not go back."""
    return (prev is not None and prev.present is True and prev.epoch <= epoch
            and mono_ns - prev.mono_ns <= MAX_SAMPLE_GAP_NS and not _membership_changed(log, prev.mono_ns, mono_ns))


def _holds(prev: MemberObservation | None, m: GroupMember, seq: int) -> dict[TopicPartition, PartitionHold]:
    """The partitions the coordinator may hold for member ``m`` at sample ``seq`` (see :class:`PartitionHold`);
    ``prev`` is the member's previous observation when this one follows it, else None."""
    epoch = cast("int", m.member_epoch)
    out: dict[TopicPartition, PartitionHold] = {}
    for tp in m.assignment:
        h = prev.holds.get(tp) if prev is not None else None
        if prev is None:
            out[tp] = PartitionHold(0, epoch, seq, None)
        elif h is None:
            out[tp] = PartitionHold(prev.epoch, epoch, seq, prev.seq)
        elif h.pending:
            # back from a possibly pending revocation: whether it kept its assignment epoch is not known, so
            # the bound of the older hold stays (it is the lower one)
            out[tp] = replace(h, epoch_hi=epoch, seq=seq, pending=False)
        else:
            out[tp] = h
    if prev is not None:
        now = set(m.assignment)
        for tp, h in prev.holds.items():
            # dropped since prev: may be pending at the current epoch; pending at prev: still, if the epoch stayed
            if tp not in now and (not h.pending or prev.epoch == epoch):
                out[tp] = replace(h, pending=True)
    return out


def member_timelines(idx: HistoryIndex) -> dict[tuple[str, str], MemberEpochTimeline]:
    """Per (group, member id) of every KIP-848 group, the member's epoch and assignment as the samples show
    them (:class:`MemberEpochTimeline`)."""
    groups = kip848_groups(idx)
    if not groups:
        return {}
    logs: dict[tuple[str, str], list[int]] = {}
    for e in idx.of(BrokerLog):
        if e.group in groups and e.event in _MEMBERSHIP_LOG_EVENTS and e.member_id:
            logs.setdefault((e.group, e.member_id), []).append(e.mono_ns)
    for log in logs.values():
        log.sort()
    per_group: dict[str, dict[str, list[MemberObservation]]] = {g: {} for g in groups}
    for s in idx.of(GroupStateSample):
        tracked = per_group.get(s.group)
        if tracked is None:
            continue
        usable = s.group_type is GroupType.CONSUMER and s.state not in _SKIP_STATES
        listed = {m.member_id: m for m in s.members} if usable else {}
        for mid in listed:
            tracked.setdefault(mid, [])
        for mid, obs in tracked.items():
            m = listed.get(mid)
            if not usable or (m is not None and m.member_epoch is None):
                obs.append(MemberObservation(s.mono_ns, s.seq, None))
            elif m is None:
                obs.append(MemberObservation(s.mono_ns, s.seq, False))
            else:
                epoch = cast("int", m.member_epoch)
                prev = obs[-1] if obs else None
                follows = _follows(prev, epoch, s.mono_ns, logs.get((s.group, mid), []))
                after = prev if follows else None
                obs.append(MemberObservation(
                    s.mono_ns, s.seq, True, epoch, _holds(after, m, s.seq),
                    # unseen pending revocations are ruled out once the epoch moved on from a known state
                    unseen_pending=after is None or (after.unseen_pending and after.epoch == epoch)))
    out: dict[tuple[str, str], MemberEpochTimeline] = {}
    for g, tracked in per_group.items():
        for mid, obs in tracked.items():
            out[(g, mid)] = MemberEpochTimeline(g, mid, obs, [o.mono_ns for o in obs], logs.get((g, mid), []))
    return out


# --------------------------------------------------------------------------- shared KIP-848 views

_VERSION = re.compile(r"^\s*(\d+)\.(\d+)")


def kafka_version(header: Header) -> tuple[int, int] | None:
    """The run's Kafka (major, minor) from the header (``experiment.cluster.kafka_version``, else
    ``versions.kafka``); None when it cannot be read."""
    cluster = header.experiment.get("cluster")
    version = cluster.get("kafka_version") if isinstance(cluster, Mapping) else None
    version = version or header.versions.get("kafka")
    m = _VERSION.match(version) if isinstance(version, str) else None
    return None if m is None else (int(m.group(1)), int(m.group(2)))


def not_reconciled(s: GroupStateSample) -> str | None:
    """Why a KIP-848 sample is not at its current group epoch's target assignment, or None when it is.

    KIP-848, "Assignment Epoch - Compute the group assignment" and "Member Epoch - Reconciliation of the
    group": the target assignment is computed for a group epoch (the assignment epoch); a member has reconciled
    when its epoch is the assignment epoch and it owns exactly its target partitions. The coordinator calls a
    group Stable exactly then (``ConsumerGroup.maybeUpdateGroupState``: Assigning while the assignment epoch
    lags the group epoch, Reconciling while a member has not reached the target); this checks it rather than
    trusting the state.
    """
    ge = s.group_epoch if s.group_epoch is not None else s.generation
    if s.assignment_epoch is None or ge is None or s.assignment_epoch != ge:
        return f"assignment epoch {s.assignment_epoch} is not the group epoch {ge}"
    for m in s.members:
        if m.member_epoch != s.assignment_epoch:
            return f"member {m.member_id} at epoch {m.member_epoch}, not the assignment epoch {s.assignment_epoch}"
        if set(m.assignment) != set(m.target_assignment):
            return f"member {m.member_id} owns {len(m.assignment)} partition(s), not its target assignment"
    return None
