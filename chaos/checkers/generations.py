"""Invariant 6: generation monotonicity, per member and per group.

Per member (one incarnation: from ``member_start`` to ``member_stop``): the
generations tagged on its events (assigned, revoked, lost, consumed and ``ok``
commits) never decrease, and two eager (non-incremental) ``assigned`` events
with the same generation carry the same partitions: a member's assignment is
fixed within a generation, though the coordinator may hand the current
generation out again without a rebalance (a follower rejoining a Stable group
with unchanged metadata, ``GroupCoordinator.handleJoinGroup``).

Per group: generations strictly increase across coordinator failovers once
they are *durable*. The coordinator's ``Stabilized group G generation N`` line
(``broker_log`` ``stabilized``) is logged in ``GroupCoordinator.onCompleteJoin``:
the join phase ended and the generation was bumped, but the group becomes
Stable only after the leader's assignment is stored in ``__consumer_offsets``
(``GroupMetadataManager.storeGroup``). A generation is durable once a member
received an assignment in it (SyncGroup responses are sent only after the
store), a coordinator loaded it (``loading``), or a Stable ``group_state``
sample shows it. Violations: a join completing with a generation not above the
highest durable one (reuse or regression), a coordinator loading a generation
below it (stored metadata lost), a Stable sample below it. A generation whose
join completed but whose coordinator died before the store is a ghost: it may
vanish in the failover and be handed out again, and is exempt (docs/architecture.md, "Invariants", 6).
Sample-versus-log comparisons tolerate the clock slack (the observer reads logs
and samples on different schedules).

KIP-848 groups (samples with ``group_type`` consumer; docs/architecture.md,
"KRaft and KIP-848: epochs vs generations") have no group generation: a
member's events carry its own *member epoch* and the samples the *group
epoch*.

- Per member, epochs never decrease (as above; an epoch of 0, joining, is
  recorded as null and skipped). The eager same-generation rule does not
  apply: a member may get partitions at an epoch it already has (it waits at
  its new epoch for partitions another member has not released yet,
  ``CurrentAssignmentBuilder``, UNRELEASED_PARTITIONS). A fenced member
  releases everything (``lost``) and rejoins with epoch 0 under its member id;
  its first assignment after the ``lost`` is judged by the same rule: not
  below its epoch before. No stronger bound holds. A member answered
  FENCED_MEMBER_EPOCH stays in the group
  (``GroupMetadataManager.throwIfConsumerGroupMemberEpochIsInvalid`` throws and
  removes nothing), and its epoch-0 rejoin with an unchanged subscription
  bumps no group epoch (``consumerGroupHeartbeat`` bumps on a subscription or
  metadata change only): it gets the current target's epoch, which may equal
  a group epoch sampled before its ``lost`` (seen in a fresh-clone run, a
  coordinator killed while members reconciled). And since KIP-1263
  (assignment batching and offload, ``group.consumer.assignment.interval.ms``)
  the target assignment, and so every member epoch, may lag the group epoch.
- Per group, the group epoch never decreases, across coordinator failovers
  too: the coordinator writes every bump to ``__consumer_offsets``
  (``ConsumerGroupMetadataValue``) and a new coordinator replays them, and a
  sample (ConsumerGroupDescribe reads at the last committed offset) or an
  assignment delivered to a member (heartbeat answers wait for the commit) is
  durable. Violations: a sample whose group epoch is below an earlier sample's
  (strictly: the observer's requests are sequential), or below a member epoch
  already delivered (beyond the clock slack: a member epoch never exceeds
  the group epoch); a coordinator line bumping the group epoch to a value not
  above one already durable (beyond the slack and the log stamps'
  uncertainty). A bump logged but never committed (the coordinator died) may
  vanish and be logged again: a ghost, as above, and exempt. So is a bump
  logged by a *deposed* coordinator: a broker other than the one that loaded
  the group last (``loading``, the new coordinator's "Loaded consumer group").
  The coordinator logs a bump when it generates the record, and the record
  commits only once the __consumer_offsets partition's high watermark passes
  it (``CoordinatorRuntime``), which a deposed leader's append never does: the
  followers fetch from the new leader, and the controller refuses the old
  leader's ISR changes (stale leader epoch, KIP-497). Found by exploring: a
  reset of the coordinator's links moved the group to another broker, which
  bumped to 7 and made it durable; the old coordinator, still answering the
  member it could reach, then logged its own bump to 7. What members were
  given is judged all the same (samples and assignments).

KIP-848's online migration converts a group between the protocols. A group *with members* keeps its number
(the classic generation becomes the group epoch and back: ``group_converted``); an *empty* group is replaced by a
new group of the other type whose generation / epoch starts again (``group_recreated``, "Converted the empty
classic group to a consumer group"): from that line on, the group's and its members' numbers are judged afresh.
"""

from __future__ import annotations

from typing import cast

from chaos.checkers.bounds import ResolvedBounds
from chaos.checkers.coordinator import LOG_STAMP_UNCERTAINTY_NS, kip848_groups
from chaos.checkers.evidence import application_members
from chaos.checkers.index import HistoryIndex, index_of
from chaos.checkers.result import FindingLog, Result
from chaos.history import (
    Assigned,
    BrokerLog,
    BrokerLogEvent,
    Commit,
    Consumed,
    GroupState,
    GroupStateSample,
    History,
    Lost,
    MemberStart,
    MemberStop,
    Revoked,
)
from chaos.history.event import GroupType
from chaos.model.checker_name import CheckerName
from chaos.outcome import Outcome

NAME = CheckerName.GENERATIONS

_MEMBER_TYPES = (MemberStart, MemberStop, Assigned, Revoked, Lost, Consumed, Commit)
_MemberEvent = MemberStart | MemberStop | Assigned | Revoked | Lost | Consumed | Commit


def check(history: History, bounds: ResolvedBounds) -> Result:
    idx = index_of(history)
    log = FindingLog(bounds.max_findings)
    kip848 = kip848_groups(idx)
    high: dict[str, tuple[int, int]] = {}  # source -> (max generation, seq)
    rejoining: set[str] = set()  # KIP-848 members between a ``lost`` and their next assignment
    rejoins = 0
    eager_gens: dict[str, dict[int, tuple[int, frozenset[tuple[str, int]]]]] = {}
    member_events = 0
    flagged_members: set[str] = set()
    streamed = idx.stream(_MEMBER_TYPES + (BrokerLog,)) if kip848 else idx.stream(_MEMBER_TYPES)
    group_of: dict[str, str] = {}  # member source -> the group of its latest event
    committed = Outcome.OK
    # chaos.instrument's ``consumed`` of an app member keeps the generation its record was *handed over* in,
    # recorded when the application is done with it — after a later assignment, for a buffered loop: not a
    # generation the member went back to (its assignments and commits are judged)
    marked_late = {m for m, how in application_members(history).items() if how == "app"}
    for e in cast("list[_MemberEvent | BrokerLog]", streamed):
        src = e.source
        if type(e) is Consumed or type(e) is Commit:
            # most of the stream: only the generation rule below applies (the general path, inlined)
            group_of[src] = e.group
            if type(e) is Consumed and src in marked_late:
                continue
            g = e.generation
            if g is None or g < 0 or (type(e) is Commit and e.outcome is not committed):
                continue
            member_events += 1
            h = high.get(src)
            if h is None or g > h[0]:
                high[src] = (g, e.seq)
            elif g < h[0] and src not in flagged_members:
                flagged_members.add(src)
                log.violation(f"{src}: generation went back from {h[0]} to {g} ({e.kind})", h[1], e.seq)
            continue
        if type(e) is BrokerLog:
            if e.event is BrokerLogEvent.GROUP_RECREATED:  # a new group: numbers start again (module docstring)
                for member in [m for m, g in group_of.items() if g == e.group]:
                    high.pop(member, None)
                    eager_gens.pop(member, None)
                    rejoining.discard(member)
            continue
        group_of[src] = e.group
        if type(e) is MemberStart or type(e) is MemberStop:
            high.pop(src, None)
            eager_gens.pop(src, None)
            rejoining.discard(src)
            continue
        if type(e) is Lost and e.group in kip848:
            rejoining.add(src)  # fenced: judged by the per-member rule below when it is assigned again
        elif type(e) is Assigned and e.generation is not None and src in rejoining:
            rejoining.discard(src)
            rejoins += 1
        g = e.generation
        if g is None or g < 0:
            continue
        member_events += 1
        h = high.get(src)
        if h is None or g > h[0]:
            high[src] = (g, e.seq)
        elif g < h[0] and src not in flagged_members:
            flagged_members.add(src)  # one finding per member: the rest follow from it
            log.violation(f"{src}: generation went back from {h[0]} to {g} ({e.kind})", h[1], e.seq)
        if type(e) is Assigned and not e.incremental and e.group not in kip848:
            seen = eager_gens.setdefault(src, {})
            prev = seen.get(g)
            # The same generation handed out again is legal when it carries the same partitions:
            # a follower rejoining a Stable group with unchanged metadata gets the current
            # generation and its stored assignment back without a rebalance
            # (GroupCoordinator.handleJoinGroup; seen after coordinator failovers). Within one
            # generation a member's assignment is fixed, so different partitions are a violation.
            if prev is not None and prev[1] != frozenset(e.partitions):
                log.violation(f"{src}: two different eager assignments in the same generation {g}", prev[0], e.seq)
            elif prev is None:
                seen[g] = (e.seq, frozenset(e.partitions))

    # Per group. The coordinator's "Stabilized group G generation N" line is
    # logged in onCompleteJoin: the join phase ended and the generation was
    # bumped, but the group is Stable only after the leader's assignment is
    # stored in __consumer_offsets. A generation is *durable* once a member
    # received its assignment (SyncGroup answers only after the store), a new
    # coordinator loaded it, or a Stable sample shows it. Only durable
    # generations bind: a join-completed generation whose coordinator died
    # before the store is a ghost and may be handed out again.
    slack = bounds.slack_ns
    durable: dict[str, tuple[int, int, int]] = {}  # group -> (max durable generation, seq, ns)
    last_prepare: dict[str, int] = {}  # group -> mono_ns of the latest "Preparing to rebalance" line
    group_obs = 0

    def make_durable(group: str, g: int, seq: int, ns: int) -> None:
        prev = durable.get(group)
        if prev is None or g > prev[0]:
            durable[group] = (g, seq, ns)

    group_events = cast("list[BrokerLog | GroupStateSample | Assigned]", idx.stream((BrokerLog, GroupStateSample, Assigned)))
    for ev in group_events:
        if type(ev) is BrokerLog and ev.event is BrokerLogEvent.GROUP_RECREATED:
            durable.pop(ev.group, None)
            last_prepare.pop(ev.group, None)
            continue
        g = ev.generation
        if g is None or g < 0:
            continue
        if ev.group in kip848:
            continue  # judged by group epochs below
        if type(ev) is Assigned:
            make_durable(ev.group, g, ev.seq, ev.mono_ns)
            continue
        last = durable.get(ev.group)
        if type(ev) is BrokerLog:
            if ev.event is BrokerLogEvent.PREPARING_REBALANCE:
                last_prepare[ev.group] = ev.mono_ns
            elif ev.event is BrokerLogEvent.STABILIZED:
                group_obs += 1
                # an equal generation is a reuse only when a new round began (a "Preparing to
                # rebalance" line) after the generation became durable: the same round's line
                # may sort after its first assignment (millisecond log timestamps)
                reused = last is not None and g == last[0] and last_prepare.get(ev.group, -1) > last[2]
                if last is not None and (g < last[0] or reused):
                    what = "reused" if g == last[0] else "moved backwards"
                    log.violation(f"group {ev.group}: join completed with generation {g} although generation "
                                  f"{last[0]} was already durable (generation {what})", last[1], ev.seq)
            elif ev.event is BrokerLogEvent.LOADING:
                group_obs += 1
                if last is not None and g < last[0]:
                    log.violation(f"group {ev.group}: broker {ev.broker} loaded generation {g} although generation "
                                  f"{last[0]} was durable (stored group metadata lost)", last[1], ev.seq)
                make_durable(ev.group, g, ev.seq, ev.mono_ns)
        elif ev.state is GroupState.STABLE:
            group_obs += 1
            if last is not None and g < last[0] and ev.mono_ns - last[2] > slack:
                log.violation(f"group {ev.group}: Stable sample at generation {g} after generation {last[0]} "
                              "was durable", last[1], ev.seq)
            make_durable(ev.group, g, ev.seq, ev.mono_ns)
    epoch_obs = _kip848_group_epochs(idx, kip848, bounds, log) if kip848 else 0
    metrics = {"member_generation_observations": member_events, "group_generation_observations": group_obs,
               "kip848_group_epoch_observations": epoch_obs, "kip848_fenced_rejoins": rejoins,
               "violations": log.violation_count}
    ok = "generations only moved forward, per member and per group"
    if kip848:
        ok = (f"member epochs only moved forward ({rejoins} fenced rejoin(s), none below the epoch before), and group "
              f"epochs never went back ({epoch_obs} group epoch observation(s))"
              + (f"; {ok}" if group_obs else ""))
    return log.result(NAME, ok, f"{log.violation_count} generation(s) or epoch(s) moved backwards or were reused",
                      metrics)


def _kip848_group_epochs(idx: HistoryIndex, groups: frozenset[str], bounds: ResolvedBounds, log: FindingLog) -> int:
    """The per-group rule for KIP-848 groups (module docstring); returns the number of observations judged."""
    slack = bounds.slack_ns
    sampled: dict[str, tuple[int, int, int]] = {}  # group -> (max sampled group epoch, seq, ns)
    delivered: dict[str, tuple[int, int, int]] = {}  # group -> (max member epoch delivered, seq, ns)
    loaded_by: dict[str, int] = {}  # group -> the broker that loaded it last (its coordinator since)
    obs = 0
    events = cast("list[BrokerLog | GroupStateSample | Assigned]", idx.stream((BrokerLog, GroupStateSample, Assigned)))
    for ev in events:
        if ev.group not in groups:
            continue
        if type(ev) is BrokerLog and ev.event is BrokerLogEvent.GROUP_RECREATED:
            sampled.pop(ev.group, None)
            delivered.pop(ev.group, None)
            continue
        if type(ev) is Assigned:
            if ev.generation is not None and ev.generation > delivered.get(ev.group, (-1,))[0]:
                delivered[ev.group] = (ev.generation, ev.seq, ev.mono_ns)
            continue
        if type(ev) is GroupStateSample:
            ge = ev.group_epoch if ev.group_epoch is not None else ev.generation
            if ev.group_type is not GroupType.CONSUMER or ge is None or ev.state in (GroupState.DEAD,
                                                                                     GroupState.UNKNOWN):
                continue
            obs += 1
            prev = sampled.get(ev.group)
            if prev is not None and ge < prev[0]:
                log.violation(f"group {ev.group}: group epoch went back from {prev[0]} to {ge} between two samples",
                              prev[1], ev.seq)
            d = delivered.get(ev.group)
            if d is not None and ge < d[0] and ev.mono_ns - d[2] > slack:
                log.violation(f"group {ev.group}: sampled at group epoch {ge} after a member was assigned at member "
                              f"epoch {d[0]} (a member epoch never exceeds the group epoch)", d[1], ev.seq)
            if prev is None or ge > prev[0]:
                sampled[ev.group] = (ge, ev.seq, ev.mono_ns)
        elif ev.event is BrokerLogEvent.LOADING:
            loaded_by[ev.group] = ev.broker
        elif ev.event is BrokerLogEvent.EPOCH_BUMPED and ev.generation is not None:
            if ev.group in loaded_by and ev.broker != loaded_by[ev.group]:
                continue  # a deposed coordinator's bump: it cannot commit (module docstring)
            obs += 1
            durable = [x for x in (sampled.get(ev.group), delivered.get(ev.group)) if x is not None]
            if not durable:
                continue
            top, top_seq, top_ns = max(durable)
            if ev.generation <= top and ev.mono_ns - top_ns > slack + LOG_STAMP_UNCERTAINTY_NS:
                log.violation(f"group {ev.group}: broker {ev.broker} bumped the group epoch to {ev.generation} although "
                              f"group epoch {top} was already durable (group epoch reused or moved backwards)",
                              top_seq, ev.seq)
    return obs
