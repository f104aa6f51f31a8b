"""Invariant 6: generation monotonicity, per member and per group.

Per member (one incarnation: from ``member_start`` to ``member_stop``): the
generations tagged on its events (assigned, revoked, lost, consumed and ``ok``
commits) never decrease, and two eager (non-incremental) ``assigned`` events
never carry the same generation: every completed JoinGroup/SyncGroup round is
a new generation (GroupCoordinator bumps it in ``onCompleteJoin``).

Per group: stabilized generations strictly increase, across coordinator
failovers. Evidence: ``broker_log`` ``stabilized`` lines (each line is one
stabilisation, so the same generation stabilising twice is a reuse),
``group_state`` samples in state Stable (samples repeat, so an equal
generation is fine, a lower one is not) and ``broker_log`` ``loading`` lines (a
new coordinator must load a generation at least as high as the last stabilised
one: a stabilised generation was durably stored before the group became
Stable). A generation that was bumped but never stabilised (seen only in
PreparingRebalance / CompletingRebalance samples) may vanish in a failover and
is exempt. Sample-versus-log comparisons tolerate the clock slack (the
observer reads logs and samples on different schedules).
"""

from __future__ import annotations

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


def check(history: History, bounds: ResolvedBounds) -> Result:
    idx = index_of(history)
    log = FindingLog(bounds.max_findings)
    high: dict[str, tuple[int, int]] = {}  # source -> (max generation, seq)
    eager_gens: dict[str, dict[int, int]] = {}
    member_events = 0
    flagged_members: set[str] = set()
    for e in idx.stream(_MEMBER_TYPES):
        t = type(e)
        src = e.source
        if t is MemberStart or t is MemberStop:
            high.pop(src, None)
            eager_gens.pop(src, None)
            continue
        if t is Commit and e.outcome is not Outcome.OK:
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
            log.violation(f"{src}: generation went back from {h[0]} to {g} ({t.kind})", h[1], e.seq)
        if t is Assigned and not e.incremental:
            seen = eager_gens.setdefault(src, {})
            prev = seen.get(g)
            if prev is not None:
                log.violation(f"{src}: two eager assignments with the same generation {g}", prev, e.seq)
            else:
                seen[g] = e.seq

    slack = bounds.slack_ns
    stab: dict[str, tuple[int, int, int]] = {}  # group -> (max stabilized generation, seq, ns)
    log_stab: dict[str, dict[int, int]] = {}
    group_obs = 0
    for e in idx.stream((BrokerLog, GroupStateSample)):
        g = e.generation
        if g is None or g < 0:
            continue
        prev = stab.get(e.group)
        if type(e) is BrokerLog:
            if e.event is BrokerLogEvent.STABILIZED:
                group_obs += 1
                seen = log_stab.setdefault(e.group, {})
                if g in seen:
                    log.violation(f"group {e.group}: generation {g} stabilized twice (generation reused)",
                                  seen[g], e.seq)
                elif prev is not None and g < prev[0]:
                    log.violation(f"group {e.group}: stabilized generation {g} after generation {prev[0]}",
                                  prev[1], e.seq)
                seen.setdefault(g, e.seq)
                if prev is None or g > prev[0]:
                    stab[e.group] = (g, e.seq, e.mono_ns)
            elif e.event is BrokerLogEvent.LOADING:
                group_obs += 1
                if prev is not None and g < prev[0]:
                    log.violation(f"group {e.group}: broker {e.broker} loaded generation {g} although generation "
                                  f"{prev[0]} had stabilized (stored group metadata lost)", prev[1], e.seq)
        elif e.state is GroupState.STABLE:
            group_obs += 1
            if prev is not None and g < prev[0] and e.mono_ns - prev[2] > slack:
                log.violation(f"group {e.group}: Stable sample at generation {g} after generation {prev[0]} "
                              "had stabilized", prev[1], e.seq)
            if prev is None or g > prev[0]:
                stab[e.group] = (g, e.seq, e.mono_ns)
    metrics = {"member_generation_observations": member_events, "group_generation_observations": group_obs,
               "violations": log.violation_count}
    return log.result(NAME, "generations only moved forward, per member and per group",
                      f"{log.violation_count} generation(s) moved backwards or were reused", metrics)
