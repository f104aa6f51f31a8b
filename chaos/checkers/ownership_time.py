"""Invariant 2: single ownership in time, with zombie windows measured.

Definition. Holding is as in invariant 1 (``assigned`` .. ``revoked`` /
``lost`` / ``member_stop``), keyed by (group, partition). Whenever member B
acquires a partition that member A still holds, a *zombie window* opens; it
closes when either releases it (or at the end of the history: *open*). A is
the zombie: the member that believes it still owns the partition.

A window is *explained* when A was evicted without knowing it, shown by the
coordinator's own word or by A's — any of:

- the coordinator's ``member_failed`` line for A's member id (session timeout
  expiry, the heartbeat path of KIP-62), observed before the window closed
  (plus clock slack: the observer reads logs with a lag);
- a ``group_state`` sample taken while A held the partition whose member list
  lacks A's member id (the coordinator had already removed it) — a sample
  that *describes* the group: an ``Unknown`` one (the observer's
  DescribeGroups failed or the coordinator was loading) lists nobody and
  proves nothing;
- A's own error saying it left the group after ``max.poll.interval.ms``
  (librdkafka ``_MAX_POLL_EXCEEDED``, KIP-62);
- another member started with A's ``group.instance.id``, or was assigned
  partitions under it (KIP-345: the coordinator maps the instance id to the
  member whose JoinGroup it handled last and replaces A, which learns it only
  when fenced — the later *joiner*, not necessarily the later process).

An assignment of an *older* generation than the holder's (B acquired in generation g
while A holds it in a newer one) is a stale assignment delivered late: the
client handed the application a generation the group had already left (a
member paused past its session timeout gets, on resuming, the assignment it
received before the pause, then ``lost``). Then B is the zombie, and the window
is explained by B's eviction as above, the coordinator's ``member_failed`` line
for B's member id counting whenever it came before the window closed: B was
removed before the stale assignment reached it. Found exploring the
python-service example, whose app members run librdkafka's rebalance callback
from their own poll.

A fault on A (a pause, a black-holed or slowed link) is not such evidence by
itself: a slow link does not evict a member, and even a frozen one holds its
place until the coordinator removes it; only the coordinator's removal
(session expiry, a failed heartbeat, a LeaveGroup, fencing) makes A a zombie
rather than a second owner. A fault in effect on A is named beside the
evidence as its likely cause unless the history records that it only slows
A's links (trait ``slows_only``, :class:`chaos.model.fault_traits.FaultTrait`:
a latency, bandwidth or slicer toxic); such a fault is named as what it is —
a slow link that cannot evict by itself.

Times are intervals where the history says so: an event whose source could
not stamp it where it happened (``ts_uncertain_ns``, e.g. a Java member's
line read late) happened in [mono_ns, mono_ns + ts_uncertain_ns]. A window
whose newer owner's assignment may have come after the zombie's release is
not certain to be an overlap: it is reported, not judged.

Counting: the summary counts distinct (partition, zombie, newer owner)
overlaps, not windows (the same pair can overlap again after a rejoin).

A window is a violation when it is unexplained, or when A processed the
partition during the window and then, still inside the window, got an ``ok``
commit for it (the coordinator should have fenced it: the zombie's work was
accepted). Explained windows are reported (length, member,
cause) but pass.

Processing a partition the member does not hold (``consumed`` after revoke,
the ``ignore_revoke`` wrong mode) while another member holds it is a violation
too; while nobody holds it, it is reported only.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, cast

from chaos.checkers.bounds import ResolvedBounds
from chaos.checkers.index import fmt_tp, index_of
from chaos.checkers.result import FindingLog, Result
from chaos.history import (
    Assigned,
    BrokerLog,
    BrokerLogEvent,
    Commit,
    Consumed,
    ErrorEvent,
    FaultEnd,
    FaultStart,
    GroupState,
    GroupStateSample,
    History,
    Lost,
    MemberStart,
    MemberStop,
    Revoked,
)
from chaos.model.checker_name import CheckerName
from chaos.model.fault_traits import FaultTrait
from chaos.outcome import Outcome, normalise_error_name

NAME = CheckerName.OWNERSHIP_TIME



_TP = tuple[str, int]


@dataclass(slots=True)
class _Window:
    group: str
    tp: tuple[str, int]
    zombie: str
    newer: str
    start_seq: int
    start_ns: int
    zombie_since_ns: int
    zombie_since_seq: int
    zombie_member_id: str | None
    processed: list[int] = field(default_factory=list)  # seqs of zombie consumed events
    commit_seq: int | None = None
    #: the newer owner's assignment happened in [start_ns, start_ns + start_uncertain_ns] (ts_uncertain_ns)
    start_uncertain_ns: int = 0
    #: a stale assignment (module docstring): (its generation, the holder's); the zombie is then the acquirer
    stale: tuple[int, int] | None = None


_TYPES = (MemberStart, Assigned, Revoked, Lost, MemberStop, Consumed, Commit, BrokerLog,
          FaultStart, FaultEnd, ErrorEvent)
_Streamed = (MemberStart | Assigned | Revoked | Lost | MemberStop | Consumed | Commit | BrokerLog | FaultStart | FaultEnd
             | ErrorEvent)


def check(history: History, bounds: ResolvedBounds) -> Result:
    idx = index_of(history)
    log = FindingLog(bounds.max_findings)
    holding: dict[str, set[_TP]] = {}
    since: dict[tuple[str, _TP], dict[str, tuple[int, int]]] = {}  # (group, tp) -> holder -> (seq, ns) acquired
    member_id: dict[str, str | None] = {}
    generation: dict[str, int | None] = {}  # member -> the generation of its latest assignment
    windows: dict[tuple[str, _TP, str, str], _Window] = {}  # (group, tp, zombie, newer)
    zombie_windows: dict[tuple[str, str, _TP], list[_Window]] = {}  # (group, zombie, tp) -> open windows
    failed_at: dict[str, list[tuple[int, int]]] = {}  # member_id -> [(ns, seq)] member_failed lines
    samples = idx.of(GroupStateSample)  # looked up per window only (windows are rare)
    # node -> [[start_ns, start_seq, end_ns|None, fault_type, slows only]] (context only)
    faults: dict[str, list[list[Any]]] = {}
    fault_by_id: dict[str, list[Any]] = {}
    displaced: dict[str, list[tuple[int, int]]] = {}
    instance_of: dict[str, tuple[str, str]] = {}
    closed: list[tuple[_Window, int, int, bool]] = []  # (window, end_seq, end_ns, open)
    stray = 0

    def close(w: _Window, seq: int, ns: int, still_open: bool = False) -> None:
        windows.pop((w.group, w.tp, w.zombie, w.newer), None)
        lst = zombie_windows.get((w.group, w.zombie, w.tp))
        if lst and w in lst:
            lst.remove(w)
        closed.append((w, seq, ns, still_open))

    def release(src: str, group: str, tps: Iterable[_TP], seq: int, ns: int) -> None:
        for tp in tps:
            holders = since.get((group, tp))
            if holders and src in holders:
                del holders[src]
                for key, w in list(windows.items()):
                    if key[0] == group and key[1] == tp and (w.zombie == src or w.newer == src):
                        close(w, seq, ns)

    def acquire(src: str, group: str, tps: Iterable[_TP], seq: int, ns: int, uncertain_ns: int,
                gen: int | None) -> None:
        for tp in tps:
            holders = since.setdefault((group, tp), {})
            if src in holders:
                continue
            for other, (oseq, ons) in holders.items():
                held_in = generation.get(other)
                if gen is not None and held_in is not None and gen < held_in:  # a stale assignment: src the zombie
                    w = _Window(group, tp, src, other, seq, ns, ns, seq, member_id.get(src),
                                start_uncertain_ns=uncertain_ns, stale=(gen, held_in))
                    windows[(group, tp, src, other)] = w
                    zombie_windows.setdefault((group, src, tp), []).append(w)
                    continue
                w = _Window(group, tp, other, src, seq, ns, ons, oseq, member_id.get(other),
                            start_uncertain_ns=uncertain_ns)
                windows[(group, tp, other, src)] = w
                zombie_windows.setdefault((group, other, tp), []).append(w)
            holders[src] = (seq, ns)

    group_of: dict[str, str] = {}
    for e in cast("list[_Streamed]", idx.stream(_TYPES)):
        src = e.source
        if type(e) is Consumed:
            tp = (e.topic, e.partition)
            held = holding.get(src)
            if held is not None and tp in held:
                if windows:  # fast path: no zombie window open (the common case)
                    for w in zombie_windows.get((e.group, src, tp), ()):
                        w.processed.append(e.seq)
            else:
                holders = since.get((e.group, tp))
                if holders:
                    other, (oseq, _) = next(iter(holders.items()))
                    log.violation(f"{src} processed {fmt_tp(tp)} offsets {e.offsets[0]}..{e.offsets[-1]} "
                                  f"without holding it while {other} held it", oseq, e.seq)
                else:
                    stray += 1
                    log.note(f"{src} processed {fmt_tp(tp)} without holding it (nobody else held it)", e.seq)
        elif type(e) is Commit:
            if windows and e.outcome is Outcome.OK:
                for topic, part, _ in e.offsets:
                    for w in zombie_windows.get((e.group, src, (topic, part)), ()):
                        if w.processed and w.commit_seq is None:
                            w.commit_seq = e.seq
        elif type(e) is Assigned:
            group_of[src] = e.group
            if e.member_id is not None:
                member_id[src] = e.member_id
            held = holding.setdefault(src, set())
            if not e.incremental:
                dropped = held - set(e.partitions)
                release(src, e.group, dropped, e.seq, e.mono_ns)
                held.difference_update(dropped)
            new = [tp for tp in e.partitions if tp not in held]
            held.update(e.partitions)
            acquire(src, e.group, new, e.seq, e.mono_ns, e.ts_uncertain_ns or 0, e.generation)
            generation[src] = e.generation
            inst = instance_of.get(src)
            if inst is not None:
                # KIP-345: the coordinator maps an instance id to the member that joined last, whichever
                # process started first; the other member with that instance id is replaced from now on
                for other, other_inst in instance_of.items():
                    if other != src and other_inst == inst:
                        displaced.setdefault(other, []).append((e.mono_ns, e.seq))
        elif type(e) is Revoked or type(e) is Lost:
            if e.member_id is not None:
                member_id[src] = e.member_id
            held = holding.setdefault(src, set())
            release(src, e.group, list(e.partitions), e.seq, e.mono_ns)
            held.difference_update(e.partitions)
        elif type(e) is MemberStart or type(e) is MemberStop:
            group_of[src] = e.group
            held = holding.get(src)
            if held:
                release(src, e.group, list(held), e.seq, e.mono_ns)
            holding[src] = set()
            if type(e) is MemberStart:
                member_id[src] = None
                instance_of.pop(src, None)
                if e.instance_id is not None:
                    for other, inst in instance_of.items():
                        if inst == (e.group, e.instance_id):
                            displaced.setdefault(other, []).append((e.mono_ns, e.seq))
                    instance_of[src] = (e.group, e.instance_id)
        elif type(e) is BrokerLog:
            if e.event is BrokerLogEvent.MEMBER_FAILED and e.member_id:
                failed_at.setdefault(e.member_id, []).append((e.mono_ns, e.seq))
        elif type(e) is FaultStart:
            # a fault that only slows the zombie's links never evicts it by itself: a heartbeat still arrives
            rec: list[Any] = [e.mono_ns, e.seq, None, e.fault_type, FaultTrait.SLOWS_ONLY in e.effects]
            fault_by_id[e.fault_id] = rec
            for node in e.nodes:  # a fault on all_members covers each of them
                faults.setdefault(node, []).append(rec)
        elif type(e) is FaultEnd:
            started = fault_by_id.get(e.fault_id)
            if started is not None:
                started[2] = e.mono_ns
        elif type(e) is ErrorEvent:
            if e.error_name and "MAX_POLL" in normalise_error_name(e.error_name):
                displaced.setdefault(src, []).append((e.mono_ns, e.seq))

    end_seq = history.events[-1].seq if history.events else 0
    for w in list(windows.values()):
        close(w, end_seq, idx.last_ns, True)

    slack = bounds.slack_ns
    lengths = []
    unexplained = 0
    uncertain = 0
    zombie_records = 0
    overlaps: set[tuple[str, _TP, str, str]] = set()  # distinct (group, partition, zombie, newer) violations
    for w, seq, ns, still_open in closed:
        length_s = (ns - w.start_ns) / 1e9
        if w.stale is None:
            what = f"{w.newer} acquired it at {idx.seconds(w.start_ns):.3f}s while {w.zombie} still held it"
        else:
            what = (f"{w.zombie} was handed it at {idx.seconds(w.start_ns):.3f}s in generation {w.stale[0]} while "
                    f"{w.newer} held it in generation {w.stale[1]} (a stale assignment)")
        where = (f"group {w.group} {fmt_tp(w.tp)}: {what}; window "
                 f"{length_s:.3f}s{' (still open at the end)' if still_open else ''}")
        if not still_open and w.start_ns + w.start_uncertain_ns >= ns:
            # the assignment is known only within an interval reaching past the release: maybe no overlap
            uncertain += 1
            log.note(f"{where}; not judged: {w.zombie if w.stale else w.newer}'s assignment happened within "
                     f"{w.start_uncertain_ns / 1e9:.3f}s after {idx.seconds(w.start_ns):.3f}s (its source could "
                     "not stamp it), so it may have come after the release", w.zombie_since_seq, w.start_seq, seq)
            continue
        lengths.append(length_s)
        cause, cause_seq = _cause(w, ns + slack, failed_at, samples, faults, displaced, slack)
        evidence = [w.zombie_since_seq, w.start_seq, seq]
        if cause_seq:
            evidence.append(cause_seq)
        zombie_records += len(w.processed)
        if cause is None:
            unexplained += 1
            overlaps.add((w.group, w.tp, w.zombie, w.newer))
            log.violation(f"{where}; no eviction of {w.zombie} explains it", *evidence, *w.processed[:5])
        elif w.commit_seq is not None:
            overlaps.add((w.group, w.tp, w.zombie, w.newer))
            log.violation(f"{where}; zombie {w.zombie} (evicted: {cause}) processed it and then got an "
                          "accepted commit", *evidence, *w.processed[:5], w.commit_seq)
        else:
            log.note(f"{where}; zombie window explained: {cause}"
                     f"{f', {len(w.processed)} batch(es) processed by the zombie' if w.processed else ''}",
                     *evidence)
    metrics = {
        "zombie_windows": len(closed) - uncertain,
        "uncertain_windows": uncertain,
        "zombie_window_max_s": max(lengths, default=0.0),
        "zombie_window_total_s": sum(lengths),
        "unexplained_windows": unexplained,
        "zombie_batches_processed": zombie_records,
        "unowned_batches": stray,
        "violations": log.violation_count,
    }
    metrics["overlapping_partitions"] = len({(g, tp) for g, tp, _, _ in overlaps})
    metrics["overlap_pairs"] = len(overlaps)
    ok = f"ownership never overlapped unexplained ({len(closed) - uncertain} explained zombie window(s)"
    ok += f", {uncertain} not judged: stamps too uncertain)" if uncertain else ")"
    pairs = {(z, n) for _, _, z, n in overlaps}
    bad = (f"{metrics['overlapping_partitions']} partition(s) held by two members at once unexplained or with the "
           f"zombie's commit accepted ({len(pairs)} member pair(s); {len(overlaps)} overlap(s), "
           f"{log.violation_count} finding(s))" if overlaps else f"{log.violation_count} ownership violation(s)")
    return log.result(NAME, ok, bad, metrics)


def _cause(w: _Window, until_ns: int, failed_at: dict[str, list[tuple[int, int]]], samples: list[GroupStateSample],
           faults: dict[str, list[list[Any]]], displaced: dict[str, list[tuple[int, int]]],
           slack_ns: int) -> tuple[str | None, int | None]:
    """The coordinator's (or the zombie's own) evidence that the zombie was evicted, or (None, None).

    A fault on the zombie in effect at the time is named as context, never taken as the evidence.
    """
    cause, seq = _eviction(w, until_ns, failed_at, samples, displaced, slack_ns)
    if cause is None:
        return None, None
    context = None
    for start_ns, _, end_ns, fault_type, slows_only in faults.get(w.zombie, ()):
        if start_ns <= w.start_ns and (end_ns is None or end_ns >= w.zombie_since_ns):
            if not slows_only:
                return f"{cause}, during a {fault_type} fault on {w.zombie}", seq
            context = context or (f"{cause} (a {fault_type} fault on {w.zombie} was in effect: a slow link does "
                                  "not evict by itself)")
    return context or cause, seq


def _eviction(w: _Window, until_ns: int, failed_at: dict[str, list[tuple[int, int]]],
              samples: list[GroupStateSample], displaced: dict[str, list[tuple[int, int]]],
              slack_ns: int) -> tuple[str | None, int | None]:
    if w.zombie_member_id:
        # a stale assignment reaches a member the coordinator removed before: its removal counts from any time
        lo = 0 if w.stale is not None else w.zombie_since_ns
        for ns, seq in failed_at.get(w.zombie_member_id, ()):
            if lo <= ns <= until_ns:
                return f"coordinator declared {w.zombie_member_id} failed", seq
    if w.zombie_member_id:
        for i in range(bisect_left(samples, w.zombie_since_ns, key=_mono), len(samples)):
            s = samples[i]
            if s.mono_ns > until_ns - slack_ns:  # a sample after the window proves nothing
                break
            if (s.group == w.group and s.state is not GroupState.UNKNOWN
                    and all(m.member_id != w.zombie_member_id for m in s.members)):
                return f"coordinator no longer listed {w.zombie_member_id}", s.seq
    for ns, seq in displaced.get(w.zombie, ()):
        if w.zombie_since_ns <= ns <= until_ns:
            return f"{w.zombie} left the group (max.poll.interval.ms) or was replaced by its instance id", seq
    return None, None


def _mono(e: GroupStateSample) -> int:
    return e.mono_ns
