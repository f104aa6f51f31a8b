"""Invariant 4: at-least-once delivery, and commit => processed.

Definitions.

*Delivery*: every record acknowledged by ``send_ok`` (topic, partition,
offset) is processed by some member (a ``consumed`` event) or seen by the
final reader (``final_read``) by the end of the history. Records processed more
than once are counted (``duplicates``) and reported, not failed: Kafka's
consumer groups promise at-least-once, not exactly-once. ``send_unknown`` /
``send_fail`` records are not required.

*Commit => processed*: an ``ok`` commit of next offset N for partition p by a
member of group G requires every offset below N that was acknowledged by
``send_ok`` to have been processed by some member of G before the commit was
recorded. Auto-commit is modelled, not assumed away: librdkafka and the Java
client commit the *position* (the offsets returned by the previous poll, which
may still be in processing; librdkafka ``enable.auto.offset.store``, Java
``ConsumerCoordinator.maybeAutoCommitOffsetsAsync``), so an ``auto`` commit may
also cover the batch the committing member processes next for that partition.
If that batch never completes (the member was killed) the commit covered
unprocessed records: a violation (this is the at-most-once hole of auto-commit).

*Committed by the coordinator => processed* (black-box members reporting what they processed, issue 14): a
``command`` member records no commits of its own, so when the run declares members with ``reports_processed``
and every ``command`` member does (chaos.checkers.evidence.reporting_members), the coordinator's committed
offsets (the observer's ``committed_offsets`` samples) stand in for them: a sample showing next offset N for
partition p in group G requires every offset below N acknowledged by ``send_ok`` to be processed by some member
of G — by a ``consumed`` event stamped exactly, whenever (an auto-commit may run ahead of a batch still in
processing), or by a report whose interval (``ts_uncertain_ns``) begins at or before the sample (a report from
a process started after the sample processed the record after the commit was made). Only members that report
are trusted this far: a group with an unreporting command member has no complete account of its processing.
"""

from __future__ import annotations

from typing import Any, cast

from chaos.checkers.bounds import ResolvedBounds
from chaos.checkers.evidence import application_members, reporting_members
from chaos.checkers.index import fmt_tp, index_of
from chaos.checkers.result import FindingLog, Result
from chaos.history import Commit, CommittedOffsets, Consumed, ErrorEvent, FinalRead, GroupStateSample, History, SendOk
from chaos.history.event import REPORTS_INCOMPLETE
from chaos.model.checker_name import CheckerName
from chaos.outcome import Outcome

_TP = tuple[str, int]
_Key = tuple[str, str, int]  # (group, topic, partition)
_NONE: frozenset[int] = frozenset()

NAME = CheckerName.DELIVERY


def check(history: History, bounds: ResolvedBounds) -> Result:
    idx = index_of(history)
    log = FindingLog(bounds.max_findings)

    # Produced offsets per partition, sorted and distinct; the send_ok seq of an offset is looked
    # up only when a finding needs it (keeps the hot loop free of per-record dict writes).
    by_tp: dict[_TP, list[int]] = {}
    for s in idx.of(SendOk):
        tp = (s.topic, s.partition)
        lst = by_tp.get(tp)
        if lst is None:
            lst = by_tp[tp] = []
        lst.append(s.offset)
    sorted_offsets = {tp: sorted(set(lst)) for tp, lst in by_tp.items()}
    send_seq: dict[tuple[str, int, int], int] = {}

    def produced_seq(tp: _TP, offset: int) -> int:
        if not send_seq:
            for s in idx.of(SendOk):
                send_seq.setdefault((s.topic, s.partition, s.offset), s.seq)
        return send_seq[(tp[0], tp[1], offset)]

    processed: dict[_Key, set[int]] = {}  # (group, topic, partition) -> offsets processed by that group
    # (group, topic, partition) -> [index of first unprocessed produced offset, that offset or None],
    # advanced whenever a batch fills the gap (amortised over the history), so a commit is one
    # comparison against it.
    frontier: dict[_Key, list[Any]] = {}
    # (member, group, tp) -> auto commits awaiting next batch
    pending: dict[tuple[str, str, _TP], list[tuple[int, int]]] = {}
    consumed_offsets = 0
    commits_checked = 0
    no_offsets: list[int] = []

    def first_gap(key: _Key, tp: _TP) -> int | None:
        """Smallest produced offset the group has not processed (None: all processed)."""
        offs = sorted_offsets.get(tp, no_offsets)
        done = processed.get(key, _NONE)
        f = frontier.get(key)
        i = f[0] if f else 0
        n = len(offs)
        while i < n and offs[i] in done:
            i += 1
        gap = offs[i] if i < n else None
        frontier[key] = [i, gap, offs]
        return gap

    def judge(c_seq: int, member: str, group: str, tp: _TP, n: int, gap: int, auto: bool) -> None:
        log.violation(f"group {group}: {member} committed {fmt_tp(tp)} at offset {n}{' (auto-commit)' if auto else ''} "
                      f"but offset {gap} (acknowledged) had not been processed by the group",
                      c_seq, produced_seq(tp, gap))

    ok = Outcome.OK
    for e in cast("list[Consumed | Commit]", idx.stream((Consumed, Commit))):
        if type(e) is Consumed:
            key = (e.group, e.topic, e.partition)
            offs = e.offsets
            consumed_offsets += len(offs)
            p = processed.get(key)
            if p is None:
                p = processed[key] = set()
            p.update(offs)
            # Keep the frontier current here, so commits only compare against it.
            f = frontier.get(key)
            if f is None:
                first_gap(key, (e.topic, e.partition))
            elif f[1] is not None and f[1] in p:
                i, _, produced_offs = f  # inlined first_gap: this runs for most batches
                n = len(produced_offs)
                while i < n and produced_offs[i] in p:
                    i += 1
                f[0] = i
                f[1] = produced_offs[i] if i < n else None
            if pending:
                tp = (e.topic, e.partition)
                waiting = pending.pop((e.source, e.group, tp), None)
                if waiting:
                    gap = first_gap(key, tp)
                    for c_seq, n in waiting:
                        if gap is not None and gap < n:
                            judge(c_seq, e.source, e.group, tp, n, gap, True)
        elif e.outcome is ok:
            group = e.group
            for topic, part, n in e.offsets:
                commits_checked += 1
                key = (group, topic, part)
                f = frontier.get(key)
                if f is None:
                    gap = first_gap(key, (topic, part))  # nothing of it processed by the group yet
                else:
                    gap = f[1]
                if gap is not None and gap < n:
                    tp = (topic, part)
                    if e.auto:
                        pending.setdefault((e.source, group, tp), []).append((e.seq, n))
                    else:
                        judge(e.seq, e.source, group, tp, n, gap, False)
    for (member, group, tp), waiting in pending.items():
        gap = first_gap((group,) + tp, tp)
        for c_seq, n in waiting:
            if gap is not None and gap < n:
                judge(c_seq, member, group, tp, n, gap, True)

    coordinator_checked = _committed_by_the_coordinator(history, idx, sorted_offsets, log, produced_seq)

    seen_any: dict[_TP, set[int]] = {}  # (topic, partition) -> offsets processed by anyone or read at the end
    for (_group, topic, part), done in processed.items():
        a = seen_any.get((topic, part))
        if a is None:
            seen_any[(topic, part)] = done
        else:
            seen_any[(topic, part)] = a | done
    final_seen = 0
    final: dict[_TP, set[int]] = {}
    for fr in idx.of(FinalRead):
        for part, off in fr.records:
            final_seen += 1
            final.setdefault((fr.topic, part), set()).add(off)
    for tp, read in final.items():
        seen_any[tp] = seen_any.get(tp, set()) | read

    lost = 0
    produced_total = 0
    for tp, produced in sorted_offsets.items():
        produced_total += len(produced)
        a = seen_any.get(tp, set())
        missing = [] if a.issuperset(produced) else [o for o in produced if o not in a]
        lost += len(missing)
        for o in missing:
            log.violation(f"record {fmt_tp(tp)}@{o} was acknowledged (send_ok) but never processed nor seen by "
                          "the final read", produced_seq(tp, o))
    processed_unique = sum(len(s) for s in processed.values())
    duplicates = consumed_offsets - processed_unique
    if duplicates:
        log.note(f"{duplicates} record(s) were processed more than once within their group "
                 "(allowed: at-least-once)")
    metrics = {"produced": produced_total, "lost": lost, "consumed_records": consumed_offsets,
               "duplicates": duplicates, "final_read_records": final_seen,
               "commit_partitions_checked": commits_checked, "violations": log.violation_count}
    if coordinator_checked is not None:
        metrics["coordinator_commits_checked"] = coordinator_checked
    judged_too = ("" if coordinator_checked is None else
                  f"; {coordinator_checked} committed offset(s) the coordinator showed were covered by reports")
    return log.result(NAME, f"all {produced_total} acknowledged record(s) were processed; no commit ran ahead of "
                      f"processing ({duplicates} duplicate deliveries){judged_too}",
                      f"{lost} acknowledged record(s) lost, {log.violation_count - lost} commit(s) ahead of processing",
                      metrics,
                      # nothing acknowledged and nothing committed: the run cannot show at-least-once either way
                      unknown=("no record was acknowledged and no commit was made: delivery cannot be judged"
                               if produced_total == 0 and commits_checked == 0 and not coordinator_checked else None))


def _committed_by_the_coordinator(history: History, idx: Any, sorted_offsets: dict[_TP, list[int]], log: FindingLog,
                                  produced_seq: Any) -> int | None:
    """The third definition of the module docstring; the number of (sample, partition) offsets judged, or None when
    the run has no reporting members (or an unreporting command member) and it does not apply."""
    reporting = reporting_members(history)
    commands = {m for m, how in application_members(history).items() if how == "command"}
    if not reporting or commands - reporting:
        return None
    if any(e.error_name == REPORTS_INCOMPLETE for e in idx.of(ErrorEvent)):
        log.note("the output topic of processed-record reports could not be read to its end: the coordinator's "
                 "committed offsets are not judged against the reports")
        return None
    # (group, topic, partition, offset) -> the earliest moment some member of the group may have processed it
    earliest: dict[tuple[str, str, int, int], int] = {}
    for e in cast("list[Consumed]", idx.of(Consumed)):
        at = 0 if e.ts_uncertain_ns is None else e.mono_ns  # exact: whenever (auto-commit runs ahead of processing)
        for o in e.offsets:
            key = (e.group, e.topic, e.partition, o)
            if key not in earliest or at < earliest[key]:
                earliest[key] = at
    checked = 0
    judged: dict[tuple[str, str, int], int] = {}  # (group, topic, partition) -> offsets below this were judged
    owner: dict[str, dict[_TP, str]] = {}  # group -> partition -> client.id of its owner in the latest sample
    for s in cast("list[GroupStateSample | CommittedOffsets]", idx.stream((GroupStateSample, CommittedOffsets))):
        if type(s) is GroupStateSample:
            owner[s.group] = {tp: m.client_id for m in s.members for tp in m.assignment}
            continue
        for topic, part, n in s.offsets:
            done = judged.get((s.group, topic, part), 0)
            if n <= done:
                continue
            checked += 1
            judged[(s.group, topic, part)] = n
            never: list[int] = []
            late: list[int] = []
            for o in sorted_offsets.get((topic, part), ()):
                if o >= n:
                    break
                if o >= done:
                    first = earliest.get((s.group, topic, part, o))
                    if first is None:
                        never.append(o)
                    elif first > s.mono_ns:
                        late.append(o)
            held = owner.get(s.group, {}).get((topic, part))
            by = f", owned by {held} in the coordinator's last sample before it," if held else ""
            for offsets, how in ((never, "never reported processed by the group"),
                                 (late, "reported processed only by member processes started after that")):
                if offsets:
                    shown = ", ".join(map(str, offsets[:5])) + (", …" if len(offsets) > 5 else "")
                    log.violation(f"group {s.group}: the coordinator's committed offset of {fmt_tp((topic, part))}"
                                  f"{by} reached {n} (observed at {idx.seconds(s.mono_ns):.3f}s) but "
                                  f"{len(offsets)} acknowledged offset(s) below it were {how} ({shown})",
                                  s.seq, produced_seq((topic, part), offsets[0]))
    return checked
