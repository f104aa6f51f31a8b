"""Rebalance liveness: every rebalance ends within the bound Kafka's protocol implies for it.

Convergence (:mod:`chaos.checkers.convergence`) is judged only after the last heal; a group that sits
in a rebalance for a long time *during* chaos, waiting for a member that is gone, passed every other
checker (issue 17). This checker measures every rebalance of the run and judges each phase:

Classic groups (JoinGroup/SyncGroup; ``GroupCoordinator`` up to 3.9, ``GroupMetadataManager`` on 4.x):

- the **join phase**, PreparingRebalance (the coordinator's ``Preparing to rebalance ...`` line, or a
  PreparingRebalance sample) until the join completes (``Stabilized group G generation N``, or a
  CompletingRebalance sample). The coordinator completes the join once every known member rejoined,
  or when the rebalance timeout expires and it removes the members that did not (``DelayedJoin`` with
  the group's rebalance timeout, the largest ``rebalanceTimeoutMs`` of its members; KIP-62 makes it
  the client's ``max.poll.interval.ms``). Bound: the largest ``max.poll.interval.ms`` among the
  ``member_start`` events (:mod:`chaos.checkers.bounds`).
- the **sync phase**, CompletingRebalance until the group is Stable: the first ``assigned`` event of
  the new generation (SyncGroup answers are sent only once the leader's assignment is stored and the
  group is Stable, ``GroupCoordinator.handleSyncGroup``) or a Stable sample. The coordinator waits for
  the leader's SyncGroup; a leader that never sends it is removed when its session expires. Bound:
  the largest ``session.timeout.ms``.

A join or sync phase interrupted by a coordinator failover (a ``loading`` line from another broker)
ends there; the time until the new coordinator's group is Stable again or rebalances is a *reload*
phase, measured but not judged (it is the failover's).

KIP-848 groups (``group_type`` consumer samples; docs/architecture.md, "KRaft and KIP-848: epochs vs
generations"): each **group epoch** from its bump (``Bumped group epoch to N``, or the first sample at
N) until a sample shows the group reconciled at N (assignment epoch N, every member at epoch N owning
its target: :func:`chaos.checkers.coordinator.not_reconciled`), or until the next bump supersedes it.
Bound: the rebalance timeout — a member that does not reach its next epoch within it is fenced
(``GroupMetadataManager``: "failed to transition from epoch E within Tms"), which bumps the epoch.

Every bound gets :data:`SAMPLING_SLACK_NS` plus the clock slack (``clock_slack_s``) for sampling
resolution: a phase that ends by a sample ends up to one observer tick late.

**Explanations.** A phase over its bound is *explained* when a fault was in effect during it that
makes the wait legitimate: a fault on a member the coordinator waited for (paused, killed, partitioned,
black-holed …; any member fault when the samples cannot tell whom it waited for), or a fault on the
group's coordinator (killed, restarted, paused, cut off, a restart of every broker, a fault on ZooKeeper or a
controller that may move it). A fault whose recorded traits say it only changes what the group consumes
(``changes_subscription``, ``changes_partition_count``, :class:`chaos.model.fault_traits.FaultTrait`) starts
a rebalance by design and never explains a slow one. The bound is then extended from the end of the fault: ``fault end +
bound`` (plus a session timeout for a coordinator fault: members find the new coordinator when their
requests time out, and it reloads the group). Within the extended bound the phase is *reported* with
its length and cause (a finding that is not a violation); beyond it, or with no explanation, it is a
violation. A phase whose end is known only from a sample after a blind spot (no sample saying it was
still under way past the bound) makes the answer ``unknown``.

**Evidence** names the member ids the coordinator waited for — members of the last Stable sample
before the phase missing from the first sample after it, members the coordinator logged as failed or
fenced during it, and (KIP-848) members not at the epoch in the phase's last sample — and says of
each whether it was *alive* (a running member process whose latest member id is that id), a *ghost*
(its process has since reported another member id: it rejoined under a new id while the old one was
still pending), *dead* (its process stopped) or *unknown* (no process ever reported it).

**Figures** (``metrics`` in ``checks.json``): rebalances (from leaving Stable to Stable again, across
failovers), the longest one, phases over their bound, and per partition the time without a consuming
owner (no member holds it by its own ``assigned``/``revoked``/``lost`` events, or every holder is
under a fault in effect that takes it out: trait ``takes_target_out``, e.g. paused, killed or cut off)
between its first assignment and the teardown.

No group_state sample of a group that has members: ``unknown``, never ``true``. The teardown (the
runner stopping members) is not judged.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import cast

from chaos.checkers.bounds import ResolvedBounds
from chaos.checkers.coordinator import kip848_groups, not_reconciled
from chaos.checkers.evidence import declared
from chaos.checkers.index import HistoryIndex, fmt_tp, index_of
from chaos.checkers.result import FindingLog, Result, Validity
from chaos.history import (
    Assigned,
    BrokerLog,
    BrokerLogEvent,
    Commit,
    Consumed,
    Event,
    FaultEnd,
    FaultStart,
    FaultVerified,
    GroupState,
    GroupStateSample,
    History,
    Lost,
    MemberStart,
    MemberStop,
    PhaseEvent,
    Revoked,
    RunPhase,
    VerificationStage,
)
from chaos.history.event import GroupType
from chaos.model.checker_name import CheckerName
from chaos.model.fault_traits import FaultTrait
from chaos.model.target import Role

NAME = CheckerName.REBALANCE_LIVENESS

#: Sampling resolution added to every bound: the observer asks every 100 ms and one describe may take up to
#: 1.5 s when a broker is slow (:mod:`chaos.workload.observer`); a phase that ends by a sample ends that late.
SAMPLING_SLACK_NS = 1_000_000_000
#: A sample recorded this soon after a coordinator line may describe the group as it was before the line
#: (the observer stamps a sample when the answer arrives): it does not end the phase the line began.
SAMPLE_LAG_NS = 250_000_000
#: per-partition figures kept in the metrics (the worst first)
MAX_PARTITION_FIGURES = 64

#: a fault that only changes what the group consumes starts a rebalance by design: it never explains a slow one
_NOT_EXPLAINING = frozenset({FaultTrait.CHANGES_SUBSCRIPTION, FaultTrait.CHANGES_PARTITION_COUNT})


class PhaseKind(StrEnum):
    JOIN = "join"
    SYNC = "sync"
    RECONCILE = "reconcile"
    #: after a coordinator failover, until the new coordinator's group is Stable or rebalances (not judged)
    RELOAD = "reload"


class PhaseEnd(StrEnum):
    NEXT = "next phase"
    STABLE = "stable"
    EMPTY = "empty"
    FAILOVER = "coordinator failover"
    SUPERSEDED = "superseded by a new group epoch"
    OPEN = "open at the end"


@dataclass(slots=True)
class _Phase:
    """One phase of a rebalance under way (mutable while the walk goes on)."""

    group: str
    kind: PhaseKind
    start_ns: int
    start_seq: int
    coordinator: int | None
    #: the generation the join produced (sync), or the group epoch (reconcile); None when unknown
    epoch: int | None
    by_sample: bool
    last_seen_ns: int = 0
    last_seen_seq: int = 0
    end_ns: int = 0
    end_seq: int = 0
    end: PhaseEnd = PhaseEnd.OPEN
    #: the end is the instant of a coordinator line or a member's own event (not a later sample)
    precise_end: bool = False
    logged_ids: list[tuple[str, int]] = field(default_factory=list)
    last_sample: GroupStateSample | None = None

    def __post_init__(self) -> None:
        self.last_seen_ns, self.last_seen_seq = self.start_ns, self.start_seq


@dataclass(frozen=True, slots=True)
class _Fault:
    fault_id: str
    fault_type: str
    target_role: str
    nodes: tuple[str, ...]
    start_ns: int
    end_ns: int
    seq: int
    #: the fault's traits as the history records them (:attr:`chaos.history.event.FaultStart.effects`)
    effects: frozenset[FaultTrait] = frozenset()

    def what(self) -> str:
        return f"fault {self.fault_id} ({self.fault_type} on {','.join(self.nodes) or self.target_role})"


@dataclass(frozen=True, slots=True)
class Waited:
    """A member id the coordinator waited for, and what became of it."""

    member_id: str
    status: str
    source: str | None
    evidence: tuple[int, ...]

    def text(self) -> str:
        who = f" ({self.source})" if self.source else ""
        return f"{self.member_id}{who}: {self.status}"


class _Members:
    """Which process reported which member id, and when (from the members' own events)."""

    def __init__(self, idx: HistoryIndex) -> None:
        self.ids: dict[str, list[tuple[int, str, int]]] = {}  # source -> [(ns, member id, seq)] on change
        self.owner: dict[str, tuple[str, int]] = {}  # member id -> (source, seq first reported)
        self.starts: dict[str, list[int]] = {}
        self.stops: dict[str, list[tuple[int, int]]] = {}
        # starts and stops do not depend on the member ids' order: read from their own (ordered) lists
        for s in idx.of(MemberStart):
            if not declared(s):  # a command member's start says nothing of its member ids
                self.starts.setdefault(s.source, []).append(s.mono_ns)
        for t in idx.of(MemberStop):
            self.stops.setdefault(t.source, []).append((t.mono_ns, t.seq))
        events = cast("list[Assigned | Revoked | Lost | Consumed | Commit]",
                      idx.stream((Assigned, Revoked, Lost, Consumed, Commit)))
        ids, owner = self.ids, self.owner
        for e in events:
            mid = e.member_id
            if mid:
                seen = ids.get(e.source)
                if seen is None:
                    seen = ids[e.source] = []
                if not seen or seen[-1][1] != mid:
                    seen.append((e.mono_ns, mid, e.seq))
                if mid not in owner:
                    owner[mid] = (e.source, e.seq)

    def status(self, member_id: str, at_ns: int) -> tuple[str, str | None, tuple[int, ...]]:
        """(alive | ghost | dead | unknown, the process that held the id, evidence) at ``at_ns``.

        A ghost: by ``at_ns`` its process reported another member id, or was started again (a restarted
        member joins under a new id; KIP-345 replaces a static member's id too)."""
        got = self.owner.get(member_id)
        if got is None:
            return "unknown (no member process reported this id)", None, ()
        source, first_seq = got
        first_ns = next(ns for ns, mid, seq in self.ids[source] if seq == first_seq)
        later = [(ns, mid, seq) for ns, mid, seq in self.ids.get(source, ()) if mid != member_id and seq > first_seq]
        new_id = f" as {later[0][1]}" if later else ""
        if later and later[0][0] <= at_ns:
            return f"ghost (its process rejoined{new_id})", source, (first_seq, later[0][2])
        if any(first_ns < ns <= at_ns for ns in self.starts.get(source, ())):
            return f"ghost (its process was restarted and joined{new_id or ' under a new id'})", source, \
                (first_seq, *([later[0][2]] if later else []))
        stopped = [(ns, seq) for ns, seq in self.stops.get(source, ()) if first_ns < ns <= at_ns]
        if stopped:
            return "dead (its process had stopped)", source, (first_seq, stopped[-1][1])
        return "alive (a running member process holds this id)", source, (first_seq,)

    def sources(self, member_ids: Iterable[str]) -> set[str]:
        return {self.owner[m][0] for m in member_ids if m in self.owner}


def check(history: History, bounds: ResolvedBounds) -> Result:
    idx = index_of(history)
    log = FindingLog(bounds.max_findings)
    # the bounds come from the members' own configuration: a command member's declared one is not read here
    groups = sorted({s.group for s in idx.of(MemberStart) if not declared(s)})
    if not groups:
        return Result(NAME, Validity.TRUE, "no consumer group in the history: no rebalance to judge", {"groups": 0})
    cutoff = next((p.mono_ns for p in idx.of(PhaseEvent) if p.name is RunPhase.TEARDOWN), idx.last_ns + 1)
    samples = [s for s in idx.of(GroupStateSample) if s.mono_ns < cutoff]
    sampled = {s.group for s in samples if s.state not in (GroupState.UNKNOWN, GroupState.DEAD)}
    unsampled = [g for g in groups if g not in sampled]
    if len(unsampled) == len(groups):
        return Result(NAME, Validity.UNKNOWN, f"no usable group_state sample of {', '.join(unsampled)}: "
                      "rebalances cannot be measured", {"groups": len(groups)})
    kip848 = kip848_groups(idx)
    phases: list[_Phase] = []
    episodes: list[tuple[str, int, int, bool]] = []  # (group, start ns, end ns, open)
    for g in groups:
        if g in unsampled:
            continue
        walk = _walk_kip848 if g in kip848 else _walk_classic
        got, eps = walk(idx, g, cutoff)
        phases.extend(got)
        episodes.extend(eps)
    members = _Members(idx)
    faults = _faults(idx, cutoff)
    member_sources = set(members.starts)
    slack = bounds.slack_ns + SAMPLING_SLACK_NS
    end_ns = min(cutoff, idx.last_ns)
    over = explained = undecided = open_unjudged = ghost_waits = 0
    longest_explained: tuple[float, str] | None = None
    for ph in sorted(phases, key=lambda p: p.start_seq):
        if ph.kind is PhaseKind.RELOAD:
            continue
        base = bounds.session_timeout_ns if ph.kind is PhaseKind.SYNC else bounds.rebalance_timeout_ns
        bound = base + slack
        stop_ns = ph.end_ns if ph.end is not PhaseEnd.OPEN else end_ns
        length = stop_ns - ph.start_ns
        certain = length if ph.precise_end else ph.last_seen_ns - ph.start_ns
        if length <= bound:
            if ph.logged_ids:  # within the bound, but a wait for a ghost is worth seeing (issue 17)
                ghosts = [w for w in _waited(ph, samples, members, stop_ns) if w.status.startswith("ghost")]
                if ghosts:
                    ghost_waits += 1
                    log.note(f"group {ph.group}: {ph.kind.value} phase from {idx.seconds(ph.start_ns):.3f}s lasted "
                             f"{length / 1e9:.1f}s (within its bound of {bound / 1e9:.1f}s) waiting for "
                             + ", ".join(w.text() for w in ghosts), *_cite(ph, ghosts))
            continue
        waited = _waited(ph, samples, members, stop_ns)
        waited_sources = members.sources(w.member_id for w in waited)
        causes = [f for f in faults if _explains(f, ph, stop_ns, waited_sources, member_sources, slack)]
        allowed = bound
        for f in causes:
            extra = bounds.session_timeout_ns if _on_coordinator(f, ph, member_sources) else 0
            allowed = max(allowed, max(f.end_ns, ph.start_ns) - ph.start_ns + base + extra + slack)
        what = _describe(ph, idx, length, bound, waited)
        cite = _cite(ph, waited)
        if ph.end is PhaseEnd.OPEN and certain <= allowed:
            open_unjudged += 1
            continue
        over += 1
        if length <= allowed:
            explained += 1
            cause = "; ".join(f.what() for f in causes)
            log.note(f"{what}; explained by {cause} in effect (allowed {allowed / 1e9:.1f}s)", *cite,
                     *(f.seq for f in causes))
            if longest_explained is None or length / 1e9 > longest_explained[0]:
                longest_explained = (length / 1e9, f"{ph.kind.value} {length / 1e9:.1f}s: {causes[0].what()}")
        elif certain <= allowed:
            undecided += 1
            log.note(f"{what}; but the samples show it under way only until "
                     f"{idx.seconds(ph.last_seen_ns):.3f}s ({certain / 1e9:.1f}s): a blind spot, not judged", *cite)
        else:
            because = (f" (allowed {allowed / 1e9:.1f}s for " + "; ".join(f.what() for f in causes) + ")"
                       if causes else ", and no fault in effect explains the wait")
            log.violation(f"{what}{because}", *cite, *(f.seq for f in causes))
    metrics: dict[str, float] = {
        "groups": float(len(groups)),
        "rebalances": float(len(episodes)),
        "rebalance_phases": float(sum(1 for p in phases if p.kind is not PhaseKind.RELOAD)),
        "longest_rebalance_s": max(((e - s) / 1e9 for _, s, e, _ in episodes), default=0.0),
        "phases_over_bound": float(over),
        "phases_over_bound_explained": float(explained),
        "phases_blind": float(undecided),
        "open_at_end": float(open_unjudged),
        "ghost_waits": float(ghost_waits),
        "join_bound_s": (bounds.rebalance_timeout_ns + slack) / 1e9,
        "sync_bound_s": (bounds.session_timeout_ns + slack) / 1e9,
        "violations": float(log.violation_count),
    }
    per_partition = unavailability(idx, cutoff, faults)
    metrics["unavailable_max_s"] = max(per_partition.values(), default=0.0)
    metrics["unavailable_total_s"] = sum(per_partition.values())
    for tp, secs in sorted(per_partition.items(), key=lambda kv: (-kv[1], kv[0]))[:MAX_PARTITION_FIGURES]:
        metrics[f"unavailable_s:{fmt_tp(tp)}"] = round(secs, 3)
    worst = max(per_partition.items(), key=lambda kv: kv[1], default=None)
    figures = (f"{len(episodes)} rebalance(s), longest {metrics['longest_rebalance_s']:.1f}s; "
               f"longest time without a consuming owner {metrics['unavailable_max_s']:.1f}s"
               + (f" ({fmt_tp(worst[0])})" if worst else ""))
    tail = f"; {explained} over the bound, explained (longest: {longest_explained[1]})" if longest_explained else ""
    if ghost_waits:
        tail += f"; {ghost_waits} waited for a ghost member id within the bound"
    unknown = None
    if undecided or unsampled:
        reasons = ([f"{undecided} phase(s) over the bound seen only across a blind spot"] if undecided else []) + \
                  ([f"no usable sample of {', '.join(unsampled)}"] if unsampled else [])
        unknown = "; ".join(reasons) + f"; {figures}"
    return log.result(NAME, f"every rebalance phase within its bound (join {metrics['join_bound_s']:.1f}s, "
                      f"sync {metrics['sync_bound_s']:.1f}s){tail}; {figures}",
                      f"{log.violation_count} rebalance phase(s) over their bound without an explanation; {figures}",
                      metrics, unknown=unknown)


# --------------------------------------------------------------------------- measuring


def _close(ph: _Phase, e: Event, end: PhaseEnd, precise: bool, out: list[_Phase]) -> None:
    ph.end_ns, ph.end_seq, ph.end, ph.precise_end = e.mono_ns, e.seq, end, precise
    if precise:
        ph.last_seen_ns, ph.last_seen_seq = e.mono_ns, e.seq
    out.append(ph)


def _seen(ph: _Phase, e: Event) -> None:
    if e.mono_ns > ph.last_seen_ns:
        ph.last_seen_ns, ph.last_seen_seq = e.mono_ns, e.seq


def _walk_classic(idx: HistoryIndex, group: str, cutoff: int) -> tuple[list[_Phase], list[tuple[str, int, int, bool]]]:
    """The join, sync and reload phases of one classic group, and its rebalances (see the module docstring)."""
    out: list[_Phase] = []
    episodes: list[tuple[str, int, int, bool]] = []
    cur: _Phase | None = None
    episode: int | None = None
    settled_ns = -SAMPLE_LAG_NS  # when the last rebalance ended: a sample recorded just after may predate it
    stream = cast("list[BrokerLog | GroupStateSample | Assigned]",
                  idx.stream((BrokerLog, GroupStateSample, Assigned)))

    def begin(kind: PhaseKind, e: Event, coord: int | None, epoch: int | None, by_sample: bool) -> _Phase:
        nonlocal episode
        if episode is None:
            episode = e.mono_ns
        return _Phase(group, kind, e.mono_ns, e.seq, coord, epoch, by_sample)

    def finish(e: Event) -> None:
        nonlocal episode, settled_ns
        settled_ns = e.mono_ns
        if episode is not None:
            episodes.append((group, episode, e.mono_ns, False))
        episode = None

    for e in stream:
        if e.mono_ns >= cutoff:
            break
        if e.group != group:
            continue
        if type(e) is BrokerLog:
            ev = e.event
            if ev is BrokerLogEvent.PREPARING_REBALANCE:
                if cur is not None and cur.kind is PhaseKind.JOIN and cur.coordinator == e.broker:
                    _seen(cur, e)
                    continue
                if cur is not None:
                    _close(cur, e, PhaseEnd.FAILOVER if cur.coordinator not in (None, e.broker) else PhaseEnd.NEXT,
                           True, out)
                cur = begin(PhaseKind.JOIN, e, e.broker, None, False)
            elif ev is BrokerLogEvent.STABILIZED:
                if cur is not None:
                    _close(cur, e, PhaseEnd.NEXT, True, out)
                cur = begin(PhaseKind.SYNC, e, e.broker, e.generation, False)
            elif ev is BrokerLogEvent.LOADING:
                if cur is not None and cur.coordinator != e.broker:
                    _close(cur, e, PhaseEnd.FAILOVER, True, out)
                    cur = begin(PhaseKind.RELOAD, e, e.broker, e.generation, False)
            elif ev in (BrokerLogEvent.MEMBER_FAILED, BrokerLogEvent.MEMBER_FENCED) and cur is not None:
                if e.member_id:
                    cur.logged_ids.append((e.member_id, e.seq))
                _seen(cur, e)
        elif type(e) is Assigned:
            # a member's assignment of the new generation: SyncGroup answered, the group is Stable
            if (cur is not None and e.generation is not None and cur.kind in (PhaseKind.SYNC, PhaseKind.RELOAD)
                    and (cur.epoch is None or e.generation >= cur.epoch)):
                _close(cur, e, PhaseEnd.STABLE, True, out)
                cur = None
                finish(e)
        else:
            s = e
            if s.state in (GroupState.UNKNOWN, GroupState.DEAD):
                continue
            fresh = cur is not None and (cur.by_sample or s.mono_ns - cur.start_ns > SAMPLE_LAG_NS)
            if cur is None and s.mono_ns - settled_ns <= SAMPLE_LAG_NS:
                continue
            if s.state is GroupState.PREPARING_REBALANCE:
                if cur is None:
                    cur = begin(PhaseKind.JOIN, s, s.coordinator, None, True)
                elif cur.kind is PhaseKind.JOIN:
                    _seen(cur, s)
                elif fresh:
                    _close(cur, s, PhaseEnd.NEXT, False, out)
                    cur = begin(PhaseKind.JOIN, s, s.coordinator, None, True)
            elif s.state is GroupState.COMPLETING_REBALANCE:
                if cur is None:
                    cur = begin(PhaseKind.SYNC, s, s.coordinator, s.generation, True)
                elif cur.kind is PhaseKind.SYNC:
                    _seen(cur, s)
                elif fresh:
                    _close(cur, s, PhaseEnd.NEXT, False, out)
                    cur = begin(PhaseKind.SYNC, s, s.coordinator, s.generation, True)
            elif s.state is GroupState.STABLE:
                if cur is not None and fresh:
                    _close(cur, s, PhaseEnd.STABLE, False, out)
                    cur = None
                    finish(s)
            elif s.state is GroupState.EMPTY:
                if cur is not None and fresh:
                    _close(cur, s, PhaseEnd.EMPTY, False, out)
                    cur = None
                    finish(s)
            if cur is not None and s.mono_ns >= cur.start_ns:
                cur.last_sample = s
    if cur is not None:
        out.append(cur)
    if episode is not None:
        episodes.append((group, episode, min(cutoff, idx.last_ns), True))
    return out, episodes


def _walk_kip848(idx: HistoryIndex, group: str, cutoff: int) -> tuple[list[_Phase], list[tuple[str, int, int, bool]]]:
    """One reconcile phase per group epoch of a KIP-848 group, and its rebalances (see the module docstring)."""
    out: list[_Phase] = []
    episodes: list[tuple[str, int, int, bool]] = []
    cur: _Phase | None = None
    episode: int | None = None
    reached = -1  # the highest group epoch seen reconciled
    stream = cast("list[BrokerLog | GroupStateSample]", idx.stream((BrokerLog, GroupStateSample)))

    def begin(e: Event, coord: int | None, epoch: int | None, by_sample: bool) -> _Phase:
        nonlocal episode
        if episode is None:
            episode = e.mono_ns
        return _Phase(group, PhaseKind.RECONCILE, e.mono_ns, e.seq, coord, epoch, by_sample)

    for e in stream:
        if e.mono_ns >= cutoff:
            break
        if e.group != group:
            continue
        if type(e) is BrokerLog:
            if e.event is BrokerLogEvent.EPOCH_BUMPED and e.generation is not None:
                if e.generation <= reached or (cur is not None and cur.epoch is not None
                                               and e.generation <= cur.epoch):
                    continue
                if cur is not None:
                    _close(cur, e, PhaseEnd.SUPERSEDED, True, out)
                cur = begin(e, e.broker, e.generation, False)
            elif e.event is BrokerLogEvent.LOADING and cur is not None and cur.coordinator not in (None, e.broker):
                # the new coordinator replays the group and re-arms the members' timers: the wait starts over
                _close(cur, e, PhaseEnd.FAILOVER, True, out)
                cur = begin(e, e.broker, cur.epoch, False)
            elif e.event in (BrokerLogEvent.MEMBER_FAILED, BrokerLogEvent.MEMBER_FENCED) and cur is not None:
                if e.member_id:
                    cur.logged_ids.append((e.member_id, e.seq))
                _seen(cur, e)
            continue
        s = e
        if s.state in (GroupState.UNKNOWN, GroupState.DEAD) or s.group_type is not GroupType.CONSUMER:
            continue
        ge = s.group_epoch if s.group_epoch is not None else s.generation
        if ge is None:
            continue
        fresh = cur is not None and (cur.by_sample or s.mono_ns - cur.start_ns > SAMPLE_LAG_NS)
        settled = s.state is GroupState.STABLE and not_reconciled(s) is None
        if cur is not None and s.state is GroupState.EMPTY and fresh:
            _close(cur, s, PhaseEnd.EMPTY, False, out)
            cur = None
            episodes.append((group, cast("int", episode), s.mono_ns, False))
            episode = None
            continue
        if settled:
            reached = max(reached, ge)
            if cur is not None and (cur.epoch is None or ge >= cur.epoch) and (fresh or ge > (cur.epoch or 0)):
                _close(cur, s, PhaseEnd.STABLE, False, out)
                cur = None
                episodes.append((group, cast("int", episode), s.mono_ns, False))
                episode = None
            continue
        if s.state is GroupState.EMPTY:
            continue
        if cur is None:
            if ge > reached:
                cur = begin(s, s.coordinator, ge, True)
                cur.last_sample = s
        elif cur.epoch is not None and ge > cur.epoch:
            _close(cur, s, PhaseEnd.SUPERSEDED, False, out)
            cur = begin(s, s.coordinator, ge, True)
            cur.last_sample = s
        elif cur.epoch is None or ge == cur.epoch:
            _seen(cur, s)
            cur.last_sample = s
    if cur is not None:
        out.append(cur)
    if episode is not None:
        episodes.append((group, episode, min(cutoff, idx.last_ns), True))
    return out, episodes


# --------------------------------------------------------------------------- judging


def _faults(idx: HistoryIndex, cutoff: int) -> list[_Fault]:
    """The faults that can explain a long phase, each in effect from its start until its heal is confirmed (the
    later of ``fault_end`` and the ``healed`` evidence): a broker killed and started again is back only once it
    runs and is registered, and with many logs to recover after a SIGKILL that came 22 s after the heal began
    (found exploring 3.9.1: a sync phase judged against the heal's start was called a violation)."""
    ends: dict[str, int] = {}
    for fe in idx.of(FaultEnd):
        ends.setdefault(fe.fault_id, fe.mono_ns)
    for fv in idx.of(FaultVerified):
        if fv.stage is VerificationStage.HEALED and fv.ok and fv.fault_id in ends:
            ends[fv.fault_id] = max(ends[fv.fault_id], fv.mono_ns)
    out = []
    for f in idx.of(FaultStart):
        effects = f.effects
        if effects & _NOT_EXPLAINING:
            continue
        nodes = f.nodes
        out.append(_Fault(f.fault_id, f.fault_type, f.target_role, nodes, f.mono_ns,
                          ends.get(f.fault_id, max(cutoff, f.mono_ns)), f.seq, effects))
    return out


def _on_coordinator(f: _Fault, ph: _Phase, member_sources: set[str]) -> bool:
    """Whether the fault hits the group's coordinator (or what decides where it is)."""
    # every broker in turn (a rolling restart) includes whichever one coordinates, known or not
    if f.target_role in (Role.COORDINATOR, Role.ALL_BROKERS):
        return True
    for n in f.nodes:
        if n in member_sources:
            continue
        if ph.coordinator is not None and n == f"broker-{ph.coordinator}":
            return True
        if n.startswith(("zk-", "controller")):
            return True
    return False


def _explains(f: _Fault, ph: _Phase, stop_ns: int, waited_sources: set[str], member_sources: set[str],
              slack: int) -> bool:
    if f.start_ns > stop_ns or f.end_ns < ph.start_ns - slack:
        return False
    if _on_coordinator(f, ph, member_sources):
        return True
    hit = {n for n in f.nodes if n in member_sources}
    return bool(hit) and (not waited_sources or bool(hit & waited_sources))


def _waited(ph: _Phase, samples: list[GroupStateSample], members: _Members, stop_ns: int) -> list[Waited]:
    """The member ids the coordinator waited for during the phase (see the module docstring)."""
    ids: dict[str, list[int]] = {}
    group = [s for s in samples if s.group == ph.group and s.state not in (GroupState.UNKNOWN, GroupState.DEAD)]
    times = [s.mono_ns for s in group]
    i = bisect_right(times, ph.start_ns)
    before = next((s for s in reversed(group[:i]) if s.state is GroupState.STABLE), None)
    after = next((s for s in group[bisect_right(times, stop_ns - 1):] if s.members), None)
    if before is not None:
        now = {m.member_id for m in after.members} if after is not None else set()
        for m in before.members:
            if after is not None and m.member_id not in now:
                ids.setdefault(m.member_id, []).extend((before.seq, after.seq))
    for mid, seq in ph.logged_ids:
        ids.setdefault(mid, []).append(seq)
    last = ph.last_sample
    if ph.kind is PhaseKind.RECONCILE and last is not None and ph.epoch is not None:
        for m in last.members:
            if m.member_epoch != ph.epoch or set(m.assignment) != set(m.target_assignment):
                ids.setdefault(m.member_id, []).append(last.seq)
    out = []
    for mid, seqs in ids.items():
        status, source, ev = members.status(mid, stop_ns)
        out.append(Waited(mid, status, source, tuple(seqs) + ev))
    return out


def _describe(ph: _Phase, idx: HistoryIndex, length: int, bound: int, waited: list[Waited]) -> str:
    name = {PhaseKind.JOIN: "join phase (PreparingRebalance)", PhaseKind.SYNC: "sync phase (CompletingRebalance)",
            PhaseKind.RECONCILE: f"reconciliation of group epoch {ph.epoch}"}.get(ph.kind, ph.kind.value)
    at = f"coordinator broker-{ph.coordinator}" if ph.coordinator is not None else "the coordinator"
    ending = "still under way at the end" if ph.end is PhaseEnd.OPEN else f"ended: {ph.end.value}"
    who = ("; waited for " + ", ".join(w.text() for w in waited)) if waited else \
        "; the samples do not show whom it waited for"
    return (f"group {ph.group}: {name} at {at} from {idx.seconds(ph.start_ns):.3f}s lasted {length / 1e9:.1f}s "
            f"({ending}), over its bound of {bound / 1e9:.1f}s{who}")


def _cite(ph: _Phase, waited: list[Waited]) -> list[int]:
    seqs = [ph.start_seq, ph.last_seen_seq]
    if ph.end is not PhaseEnd.OPEN:
        seqs.append(ph.end_seq)
    for w in waited:
        seqs.extend(w.evidence)
    return seqs


# --------------------------------------------------------------------------- unavailability


def unavailability(idx: HistoryIndex, cutoff: int, faults: list[_Fault] | None = None) -> dict[tuple[str, int], float]:
    """Seconds each partition of each group spent without a consuming owner, from its first assignment (or the
    group's, for a partition never assigned) to the teardown; summed over groups for a partition shared."""
    faults = _faults(idx, cutoff) if faults is None else faults
    stopped: dict[str, list[tuple[int, int]]] = {}
    for f in faults:
        if FaultTrait.TAKES_TARGET_OUT in f.effects:  # a member under it cannot consume
            for n in f.nodes:
                stopped.setdefault(n, []).append((f.start_ns, f.end_ns))
    holds: dict[tuple[str, str], set[tuple[str, int]]] = {}  # (group, source) -> partitions
    # the inverse of ``holds``, kept in step with it: (group, partition) -> sources holding it. Recomputing
    # it from ``holds`` at every change costs O(sources) per event (quadratic when members come and go).
    holders_of: dict[tuple[str, tuple[str, int]], set[str]] = {}
    # per (group, partition): list of (ns, holders after)
    changes: dict[tuple[str, tuple[str, int]], list[tuple[int, frozenset[str]]]] = {}
    first_group: dict[str, int] = {}
    for e in idx.membership():
        if e.mono_ns >= cutoff:
            break
        if type(e) is MemberStart:
            continue
        key = (e.group, e.source)
        had = holds.get(key, set())
        if type(e) is MemberStop:
            now: set[tuple[str, int]] = set()
        elif type(e) is Assigned:
            now = had | set(e.partitions) if e.incremental else set(e.partitions)
            first_group.setdefault(e.group, e.mono_ns)
        else:  # revoked or lost: the listed partitions (an eager revoke lists all it held)
            now = had - set(e.partitions)
        holds[key] = now
        for tp in had ^ now:
            gtp = (e.group, tp)
            held_by = holders_of.setdefault(gtp, set())
            if tp in now:
                held_by.add(e.source)
            else:
                held_by.discard(e.source)
            changes.setdefault(gtp, []).append((e.mono_ns, frozenset(held_by)))
    end = min(cutoff, idx.last_ns)
    out: dict[tuple[str, int], float] = {}
    for g, tps in idx.group_partitions().items():
        if g not in first_group:
            continue
        for tp in tps:
            steps = changes.get((g, tp), [])
            if not steps:
                total = max(end - first_group[g], 0)
            else:
                bounds_ = [ns for ns, _ in steps[1:]]
                bounds_.append(end)
                total = 0
                for (ns, holders), nxt in zip(steps, bounds_, strict=True):
                    # _unowned inlined for the common cases: nobody holds it, or no holder is ever stopped
                    if nxt <= ns:
                        continue
                    if not holders:
                        total += nxt - ns
                    elif not stopped.keys().isdisjoint(holders):
                        total += _unowned(ns, nxt, holders, stopped)
            out[tp] = out.get(tp, 0.0) + total / 1e9
    return out


def _unowned(a: int, b: int, holders: frozenset[str], stopped: Mapping[str, list[tuple[int, int]]]) -> int:
    """Nanoseconds of [a, b) during which no holder could consume (none holds it, or all are stopped by faults)."""
    if b <= a:
        return 0
    if not holders:
        return b - a
    # the time every holder is stopped: intersect their stopped intervals with [a, b)
    common = [(a, b)]
    for h in holders:
        mine = sorted((max(s, a), min(e, b)) for s, e in stopped.get(h, ()) if e > a and s < b)
        common = [(max(x0, y0), min(x1, y1)) for x0, x1 in common for y0, y1 in mine if min(x1, y1) > max(x0, y0)]
        if not common:
            return 0
    return sum(y - x for x, y in _merge(common))


def _merge(iv: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for s, e in sorted(iv):
        if out and s <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], e))
        else:
            out.append((s, e))
    return out
