"""Invariant 7: convergence / liveness after the last fault heals.

Definition. Let T0 be the last ``fault_end`` (or, with no faults, the last
``member_start`` / ``member_stop``) before the ``teardown`` phase. Within the
convergence bound after T0 (default: session timeout + rebalance timeout +
observer margin: the coordinator waits up to ``session.timeout.ms`` to evict a
dead member and up to the rebalance timeout, ``max.poll.interval.ms`` per
KIP-62, for members to rejoin), each group must be observed by a
``group_state`` sample that is

- Stable,
- lists every partition of the group's topics in exactly one member's
  assignment (the partitions known from assignments, samples and produced
  records; when the sample carries the members' subscriptions, only topics
  some member subscribes to then),
- lists only live members (a member id reported by a running member; a
  killed member's id lingering in the group means it has not been evicted yet),
- and lists every running member of the group: a sample with fewer members
  than the group has member processes running is not converged, and names the
  running members it matches neither by member id nor by ``client.id``. A
  member process that is alive but out of its group is not consuming: the
  coordinator removed it (its session expired, or it left when its
  ``max.poll.interval.ms`` ran out, KIP-62) and it never joined again, e.g. a
  client stuck in a call that never returns. Within the bound it may rejoin
  (the same bound covers the coordinator's wait for it); past the bound it is
  a violation. Counting first keeps a member whose id the history does not
  link (an application's own ``client.id``, a black box's id) from being
  called absent while the group lists as many members as are running.
  Running members sharing one ``group.instance.id`` count once: the group
  holds one member per static instance id (KIP-345), and a duplicate is the
  static-membership checker's to judge;

and, when records were acknowledged after T0 on the group's topics, a member of
the group must process something after T0 within the bound (consumption
resumed). Time-to-recover (T0 to the first such sample) is reported.

A fault that loses requests (trait ``loses_requests``: a black hole, an rpc
fault dropping requests or answers) acts past its end: a client that sent a
request just before the heal waits for its answer until its request timeout
(``socket.timeout.ms``, ``request.timeout.ms``) runs out, and may meanwhile
leave its group (``max.poll.interval.ms``) and rejoin only then. When such a
fault ends at E, the bound counts from E + the members' request timeout
(the later of the two deadlines applies).

Convergence must then *hold* until the end of the run (the ``teardown``
phase, when the runner stops the members, is not judged). After the first
converged sample, a later sample that is not converged is

- a violation at once when it is a Stable generation of an *eager* assignor
  (range, roundrobin, sticky) leaving a subscribed partition without an owner:
  an eager assignor hands out every partition of the subscribed topics in
  every generation (ConsumerPartitionAssignor; KIP-429 lets only the
  cooperative protocol's first phase leave partitions unassigned), so the
  partition stays unconsumed until some later rebalance that nothing
  schedules;
- otherwise the start of an *episode* (a rebalance in progress, a cooperative
  first phase, a crashed member not yet evicted ...), legal if a converged
  sample follows within the convergence bound, a violation if none does
  although the history goes on past the bound. An episode still open when
  the history ends, shorter than the bound, is reported in the metrics and
  not judged (a member may legally be mid-rebalance when the run stops).

``unknown`` when a fault never ended, when no ``group_state`` sample exists
after T0, or when the history ends before the bound elapsed without
convergence.

``command:`` members (black box, docs/architecture.md, "Members that are the
application") record nothing of their own; kafka-chaos writes their
``member_start`` (client ``command``, the timeouts it gave the program) and
``member_stop``. Their member ids are the ids the coordinator's samples list
under the member's ``client.id`` (``$KAFKA_CLIENT_ID``) that were not seen
before the member (re)started — an id of an earlier incarnation is not a
running member. When a running command member never appears under its
client.id, "only live members" cannot be judged for its group: ``unknown``,
naming it. A command member's ``consumed`` events (its processed-record
reports, known only between its process start and the report) do not show
when consumption resumed. A group with a command member whose resumption no
other member's ``consumed`` event shows resumed consumption when a
``committed_offsets`` sample after T0 shows an offset above the last one
sampled at or before T0 (the coordinator's evidence that some member processed
and committed).

KIP-848 groups (samples with ``group_type`` consumer, docs/architecture.md,
"KRaft and KIP-848: epochs vs generations"): the coordinator assigns
(server-side ``uniform`` or ``range``), so the eager special case above does
not apply to them even when the server-side assignor is called ``range`` (the
name is shared with the classic client-side RangeAssignor; ``group_type``
tells them apart). A KIP-848 sample is converged only when, besides the
above, the group is Stable *at its current group epoch*: the target
assignment was computed for it (``assignment_epoch == group_epoch``) and every
member reached it (its member epoch is the assignment epoch and its
assignment equals its target assignment). That is the coordinator's own
definition of Stable (``ConsumerGroup.maybeUpdateGroupState``: Assigning
while the assignment epoch lags the group epoch, Reconciling while a member
is not at the target), checked here rather than trusted.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import cast

from chaos.checkers.assignor import eager_required
from chaos.checkers.bounds import ResolvedBounds
from chaos.checkers.coordinator import not_reconciled
from chaos.checkers.evidence import declared
from chaos.checkers.index import HistoryIndex, fmt_tp, index_of
from chaos.checkers.result import FindingLog, Result, Validity
from chaos.history import (
    Assigned,
    CommittedOffsets,
    Consumed,
    Event,
    FaultEnd,
    FaultStart,
    GroupState,
    GroupStateSample,
    History,
    Lost,
    MemberStart,
    MemberStop,
    PhaseEvent,
    Revoked,
    RunPhase,
    SendOk,
)
from chaos.history.event import GroupType
from chaos.model.checker_name import CheckerName
from chaos.model.fault_traits import FaultTrait

NAME = CheckerName.CONVERGENCE

#: Assignors of the eager protocol: every generation assigns every partition of the subscribed topics.
EAGER_ASSIGNORS = frozenset({"range", "roundrobin", "sticky"})


@dataclass(slots=True)
class _Episode:
    """Non-converged samples after the group had converged, since ``start_ns`` (mutable: it grows)."""

    start_ns: int
    start_seq: int
    problem: str
    last_seq: int
    last_problem: str
    reported: bool = False


def check(history: History, bounds: ResolvedBounds) -> Result:
    idx = index_of(history)
    log = FindingLog(bounds.max_findings)
    cutoff = idx.last_ns + 1
    for p in idx.of(PhaseEvent):
        if p.name is RunPhase.TEARDOWN:
            cutoff = p.mono_ns
            break
    starts = {f.fault_id: f for f in idx.of(FaultStart) if f.mono_ns < cutoff}
    ends = [f for f in idx.of(FaultEnd) if f.mono_ns < cutoff]
    open_faults = set(starts) - {f.fault_id for f in ends}
    groups = sorted({s.group for s in idx.of(MemberStart)})
    if not groups:
        return Result(NAME, Validity.TRUE, "no consumer group in the history: nothing to converge", {"groups": 0})
    if open_faults:
        fid = sorted(open_faults)[0]
        return Result(NAME, Validity.UNKNOWN, f"fault {fid} never ended before teardown: convergence after heal "
                      "cannot be judged", {"open_faults": len(open_faults)})
    t0_event: Event
    if ends:
        t0_event = max(ends, key=lambda f: f.mono_ns)
    else:
        starts_stops = cast("list[MemberStart | MemberStop]", idx.stream((MemberStart, MemberStop)))
        changes = [e for e in starts_stops if e.mono_ns < cutoff]
        t0_event = changes[-1] if changes else history.events[0]
    t0 = t0_event.mono_ns
    bound = bounds.convergence_ns
    deadline, waited = _deadline(t0, bound, starts, ends, bounds.request_timeout_ns, idx)

    parts = {g: set(tps) for g, tps in idx.group_partitions().items()}
    for g in groups:
        parts.setdefault(g, set())
    # Records acknowledged after T0 (send_ok events are in time order): first seq per topic.
    produced_after: dict[str, int] = {}
    sends = idx.of(SendOk)
    for i in range(bisect_right(sends, t0, key=_mono), len(sends)):
        s = sends[i]
        if s.mono_ns >= cutoff:
            break
        if s.topic not in produced_after:
            produced_after[s.topic] = s.seq
            if len(produced_after) == len(idx.topic_partitions()):
                break

    live: dict[str, str | None] = {}  # source -> member id (None: not yet known), for running members
    group_of: dict[str, str] = {}
    instance_of: dict[str, str | None] = {}  # source -> its group.instance.id (KIP-345), None when dynamic
    recovered: dict[str, tuple[int, int]] = {}  # group -> (ns, seq) of the first converged sample
    last_sample: dict[str, tuple[int, int, str]] = {}
    samples_after: dict[str, int] = {}
    resumed: dict[str, tuple[int, int]] = {}
    episodes: dict[str, _Episode] = {}  # group -> its open episode of non-converged samples after convergence
    bad_generations: set[tuple[str, int | None]] = set()
    # Consumption resumed: the first batch of each group after T0 (consumed events are in time order).
    consumed = idx.of(Consumed)
    # a command member's consumed events are its processed-record reports, known only between its process start
    # and the report (chaos.workload.processed_reports): they cannot show when consumption resumed; committed
    # offsets can, below
    reported = {e.source for e in idx.of(MemberStart) if declared(e)}
    for i in range(bisect_right(consumed, t0, key=_mono), len(consumed)):
        c = consumed[i]
        if c.mono_ns >= cutoff or len(resumed) == len(groups):
            break
        if c.source not in reported:
            resumed.setdefault(c.group, (c.mono_ns, c.seq))
    boxes = _CommandMembers()
    streamed = cast("list[MemberStart | MemberStop | Assigned | Revoked | Lost | GroupStateSample]",
                    idx.stream((MemberStart, MemberStop, Assigned, Revoked, Lost, GroupStateSample)))
    for e in streamed:
        if e.mono_ns >= cutoff:
            break
        if type(e) is MemberStart:
            live[e.source] = None
            group_of[e.source] = e.group
            instance_of[e.source] = e.instance_id
            boxes.started(e)
        elif type(e) is MemberStop:
            live.pop(e.source, None)
            boxes.stopped(e.source)
        elif type(e) is GroupStateSample:
            boxes.sampled(e, live)
            if e.mono_ns < t0:
                continue
            g = e.group
            subscribed = idx.subscribed(e)
            problem = _problem(e, subscribed, live, group_of, instance_of)
            if g in recovered:
                _held(e, subscribed, problem, episodes, bad_generations, bound, log, idx)
                continue
            samples_after[g] = samples_after.get(g, 0) + 1
            last_sample[g] = (e.mono_ns, e.seq, problem or "")
            if problem is None:
                recovered[g] = (e.mono_ns, e.seq)
        elif e.member_id is not None and e.source in live:
            live[e.source] = e.member_id

    silent = {group_of[src] for src in boxes.ever if src in group_of}
    for g in sorted(silent - set(resumed)):
        got = _committed_progress(idx, g, t0, cutoff)
        if got is not None:
            resumed[g] = got
    ttr_max = 0.0
    undecided: list[str] = [f"group {group_of.get(src, '?')}: command member {src} never appeared in the "
                            "coordinator's samples under its client.id ($KAFKA_CLIENT_ID), so whether only live "
                            "members remain is not judged" for src in sorted(boxes.unlinked(live))]
    for g in groups:
        if g in recovered:
            ns, seq = recovered[g]
            ttr = (ns - t0) / 1e9
            ttr_max = max(ttr_max, ttr)
            if ns > deadline:
                log.violation(f"group {g} converged only {ttr:.3f}s after the heal at {idx.seconds(t0):.3f}s "
                              f"(bound {bound / 1e9:.1f}s{waited})", t0_event.seq, seq)
        elif not samples_after.get(g):
            undecided.append(f"group {g}: no group_state sample after the heal at {idx.seconds(t0):.3f}s")
        elif min(cutoff, idx.last_ns) < deadline:
            undecided.append(f"group {g}: not converged yet when the history ends "
                             f"{(min(cutoff, idx.last_ns) - t0) / 1e9:.1f}s after the heal (bound {bound / 1e9:.1f}s"
                             f"{waited})")
        else:
            ns, seq, problem = last_sample[g]
            log.violation(f"group {g} did not converge within {bound / 1e9:.1f}s of the heal at "
                          f"{idx.seconds(t0):.3f}s{waited}; last sample: {problem}", t0_event.seq, seq)
        topics = {t for t, _ in parts.get(g, ())}
        pending = [produced_after[t] for t in topics if t in produced_after]
        if pending:
            got = resumed.get(g)
            if got is None or got[0] > deadline:
                if min(cutoff, idx.last_ns) < deadline and got is None:
                    undecided.append(f"group {g}: no consumption yet when the history ends")
                else:
                    log.violation(f"group {g}: consumption did not resume within {bound / 1e9:.1f}s of the heal"
                                  f"{waited} although records were produced", t0_event.seq, min(pending),
                                  *([got[1]] if got else []))
    end_ns = min(cutoff, idx.last_ns)
    open_at_end = 0
    for g, ep in sorted(episodes.items()):
        if ep.reported:
            continue
        if end_ns - ep.start_ns > bound:
            log.violation(f"group {g} stopped being converged at {idx.seconds(ep.start_ns):.3f}s ({ep.problem}) and "
                          f"did not converge again in the {(end_ns - ep.start_ns) / 1e9:.1f}s left "
                          f"(bound {bound / 1e9:.1f}s); last sample: {ep.last_problem}", ep.start_seq, ep.last_seq)
        else:
            open_at_end += 1
    metrics = {"time_to_recover_s": ttr_max, "groups": len(groups), "converged_groups": len(recovered),
               "bound_s": bound / 1e9, "deadline_after_heal_s": (deadline - t0) / 1e9,
               "violations": log.violation_count,
               "unsettled_at_end": open_at_end}
    unknown = "; ".join(undecided) if undecided else None
    tail = (f"; {open_at_end} group(s) were mid-rebalance when the history ended (shorter than the bound: "
            "not judged)" if open_at_end else "")
    return log.result(NAME, f"every group converged after the heal (time to recover {ttr_max:.3f}s, "
                      f"bound {bound / 1e9:.1f}s{waited}), stayed converged to the end and consumption resumed{tail}",
                      f"{log.violation_count} convergence failure(s)", metrics, unknown=unknown)


def _deadline(t0: int, bound: int, starts: dict[str, FaultStart], ends: list[FaultEnd], request_timeout: int,
              idx: HistoryIndex) -> tuple[int, str]:
    """When the group must have converged, and what the messages add when that is later than ``t0 + bound``.

    A fault that loses requests (:attr:`FaultTrait.LOSES_REQUESTS`) acts on the clients past its end: a request
    lost just before the heal keeps its client waiting until its request timeout runs out (e.g. a synchronous
    commit in a revocation callback whose answer was dropped: librdkafka gives up after ``socket.timeout.ms``, and
    the member, past ``max.poll.interval.ms`` meanwhile, rejoins only then). The bound then counts from the end of
    the last such fault plus the members' request timeout."""
    deadline, waited = t0 + bound, ""
    lost = [e for e in ends if e.fault_id in starts and FaultTrait.LOSES_REQUESTS in starts[e.fault_id].effects]
    if lost:
        last = max(lost, key=lambda e: e.mono_ns)
        given_up = last.mono_ns + request_timeout
        if given_up + bound > deadline:
            deadline = given_up + bound
            waited = (f", counted from {idx.seconds(given_up):.3f}s: fault {last.fault_id} lost requests until "
                      f"{idx.seconds(last.mono_ns):.3f}s and a client waits up to its request timeout, "
                      f"{request_timeout / 1e9:.0f}s, for an answer")
    return deadline, waited


def _held(s: GroupStateSample, subscribed: frozenset[tuple[str, int]], problem: str | None,
          episodes: dict[str, _Episode], bad_generations: set[tuple[str, int | None]], bound: int, log: FindingLog,
          idx: HistoryIndex) -> None:
    """Judge one sample taken after the group had converged (see the module docstring)."""
    g = s.group
    if problem is None:
        episodes.pop(g, None)
        return
    if (s.state is GroupState.STABLE and s.group_type is not GroupType.CONSUMER
            and (s.protocol or "").lower() in EAGER_ASSIGNORS):
        owned = {tp for m in s.members for tp in m.assignment}
        unowned = sorted(tp for tp in eager_required(s, subscribed) if tp not in owned)
        if unowned:
            if (g, s.generation) not in bad_generations:
                bad_generations.add((g, s.generation))
                log.violation(f"group {g}: Stable generation {s.generation} of the eager {s.protocol} assignor leaves "
                              f"{', '.join(map(fmt_tp, unowned[:6]))} without an owner "
                              f"({len(unowned)} of {len(subscribed)} subscribed partition(s)) at "
                              f"{idx.seconds(s.mono_ns):.3f}s, after the group had converged", s.seq)
            ep = episodes.get(g)
            if ep is not None:
                ep.reported = True  # this violation is the episode's finding
            else:
                episodes[g] = _Episode(s.mono_ns, s.seq, problem, s.seq, problem, reported=True)
            return
    ep = episodes.get(g)
    if ep is None:
        episodes[g] = _Episode(s.mono_ns, s.seq, problem, s.seq, problem)
        return
    ep.last_seq, ep.last_problem = s.seq, problem
    if not ep.reported and s.mono_ns - ep.start_ns > bound:
        ep.reported = True
        log.violation(f"group {g} stopped being converged at {idx.seconds(ep.start_ns):.3f}s ({ep.problem}) and was "
                      f"still not converged {(s.mono_ns - ep.start_ns) / 1e9:.1f}s later (bound {bound / 1e9:.1f}s): "
                      f"{problem}", ep.start_seq, s.seq)


class _CommandMembers:
    """The member ids of ``command:`` members, linked through the samples' ``client_id`` (module docstring)."""

    def __init__(self) -> None:
        self.ever: set[str] = set()  # sources that ran as command members
        self._running: set[str] = set()
        self._ids_by_client: dict[str, set[str]] = {}  # client id -> member ids seen in any sample so far
        self._stale: dict[str, set[str]] = {}  # source -> ids seen under its client id before its last start
        self._linked: set[str] = set()  # running command members seen under their client id since their start

    def started(self, e: MemberStart) -> None:
        if declared(e):
            self.ever.add(e.source)
            self._running.add(e.source)
            self._stale[e.source] = set(self._ids_by_client.get(e.source, ()))
            self._linked.discard(e.source)
        else:
            self._running.discard(e.source)

    def stopped(self, source: str) -> None:
        self._running.discard(source)

    def sampled(self, s: GroupStateSample, live: dict[str, str | None]) -> None:
        for m in s.members:
            self._ids_by_client.setdefault(m.client_id, set()).add(m.member_id)
            src = m.client_id
            if src in self._running and src in live and m.member_id not in self._stale[src]:
                # the newest id stands for the member (a rejoin after eviction gets a new id; the old one
                # has left the group by then)
                live[src] = m.member_id
                self._linked.add(src)

    def unlinked(self, live: dict[str, str | None]) -> set[str]:
        """Running command members never seen under their client id since their last start."""
        return {src for src in self._running if src in live and src not in self._linked}


def _committed_progress(idx: HistoryIndex, group: str, t0: int, cutoff: int) -> tuple[int, int] | None:
    """(ns, seq) of the first ``committed_offsets`` sample of ``group`` after ``t0`` with an offset above the last
    one sampled at or before ``t0`` for its partition, or None. A partition first sampled after ``t0`` takes
    that first value as its baseline: an offset committed before the heal is no evidence of consumption after it."""
    base: dict[tuple[str, int], int] = {}
    for c in idx.of(CommittedOffsets):
        if c.group != group or c.mono_ns >= cutoff:
            continue
        after = c.mono_ns > t0
        for topic, partition, offset in c.offsets:
            tp = (topic, partition)
            if after and tp in base and offset > base[tp]:
                return c.mono_ns, c.seq
            if not after or tp not in base:
                base[tp] = offset
    return None


def _problem(s: GroupStateSample, parts: AbstractSet[tuple[str, int]], live: dict[str, str | None],
             group_of: dict[str, str], instance_of: dict[str, str | None]) -> str | None:
    """Why this sample is not converged, or None."""
    if s.state is not GroupState.STABLE:
        return f"state {s.state}"
    if s.group_type is GroupType.CONSUMER:
        lag = not_reconciled(s)
        if lag is not None:
            return lag
    count: dict[tuple[str, int], int] = {}
    for m in s.members:
        for tp in m.assignment:
            count[tp] = count.get(tp, 0) + 1
    missing = [tp for tp in parts if tp not in count]
    if missing:
        return f"{fmt_tp(sorted(missing)[0])} has no owner ({len(missing)} unowned)"
    double = [tp for tp, n in count.items() if n > 1]
    if double:
        return f"{fmt_tp(sorted(double)[0])} has {count[sorted(double)[0]]} owners"
    running = [src for src in live if group_of.get(src) == s.group]
    absent = _absent(s, running, live, instance_of)
    if absent is not None:
        return absent
    ids = [live[src] for src in running]
    if ids and all(mid is not None for mid in ids):
        known = set(ids)
        for m in s.members:
            if m.assignment and m.member_id not in known:
                return f"member {m.member_id} owns partitions but is not a running member"
    return None


def _absent(s: GroupStateSample, running: list[str], live: dict[str, str | None],
            instance_of: dict[str, str | None]) -> str | None:
    """Why ``s`` lacks a running member of its group, or None (module docstring: fewer members listed than
    running members, those sharing a static instance id counted once)."""
    seats: dict[str, list[str]] = {}  # one seat in the group per static instance id, else per member process
    for src in running:
        seats.setdefault(f"instance {instance_of[src]}" if instance_of.get(src) else src, []).append(src)
    if len(s.members) >= len(seats):
        return None
    listed = {m.member_id for m in s.members} | {m.client_id for m in s.members}
    instances = {m.instance_id for m in s.members if m.instance_id}
    absent = [" / ".join(srcs) for _, srcs in sorted(seats.items())
              if not any(src in listed or live[src] in listed or instance_of.get(src) in instances for src in srcs)]
    return (f"{len(s.members)} of {len(seats)} running member(s) in the group"
            + (f" ({', '.join(absent)} not listed)" if absent else ""))


def _mono(e: Event) -> int:
    return e.mono_ns
