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
"""

from __future__ import annotations

from typing import cast

from chaos.checkers.bounds import ResolvedBounds
from chaos.checkers.index import index_of
from chaos.checkers.result import CheckerName, FindingLog, Result
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
from chaos.outcome import Outcome

NAME = CheckerName.GENERATIONS

_MEMBER_TYPES = (MemberStart, MemberStop, Assigned, Revoked, Lost, Consumed, Commit)
_MemberEvent = MemberStart | MemberStop | Assigned | Revoked | Lost | Consumed | Commit


def check(history: History, bounds: ResolvedBounds) -> Result:
    idx = index_of(history)
    log = FindingLog(bounds.max_findings)
    high: dict[str, tuple[int, int]] = {}  # source -> (max generation, seq)
    eager_gens: dict[str, dict[int, tuple[int, frozenset[tuple[str, int]]]]] = {}
    member_events = 0
    flagged_members: set[str] = set()
    for e in cast("list[_MemberEvent]", idx.stream(_MEMBER_TYPES)):
        src = e.source
        if type(e) is MemberStart or type(e) is MemberStop:
            high.pop(src, None)
            eager_gens.pop(src, None)
            continue
        if type(e) is Commit and e.outcome is not Outcome.OK:
            continue
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
        if type(e) is Assigned and not e.incremental:
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
        g = ev.generation
        if g is None or g < 0:
            continue
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
    metrics = {"member_generation_observations": member_events, "group_generation_observations": group_obs,
               "violations": log.violation_count}
    return log.result(NAME, "generations only moved forward, per member and per group",
                      f"{log.violation_count} generation(s) moved backwards or were reused", metrics)
