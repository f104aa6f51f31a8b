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
"""

from __future__ import annotations

from chaos.checkers.bounds import ResolvedBounds
from chaos.checkers.index import fmt_tp, index_of
from chaos.checkers.result import CheckerName, FindingLog, Result
from chaos.history import Commit, Consumed, FinalRead, History, SendOk
from chaos.outcome import Outcome

NAME = CheckerName.DELIVERY


def check(history: History, bounds: ResolvedBounds) -> Result:
    idx = index_of(history)
    log = FindingLog(bounds.max_findings)

    # Produced offsets per partition, sorted, with the send_ok seq of each.
    produced: dict[tuple, dict[int, int]] = {}
    for s in idx.of(SendOk):
        tp = (s.topic, s.partition)
        d = produced.get(tp)
        if d is None:
            d = produced[tp] = {}
        d.setdefault(s.offset, s.seq)
    sorted_offsets = {tp: sorted(d) for tp, d in produced.items()}

    seen_any: dict[tuple, set] = {}  # (topic, partition) -> offsets processed by anyone
    processed: dict[tuple, set] = {}  # (group, topic, partition) -> offsets processed by that group
    frontier: dict[tuple, int] = {}  # (group, topic, partition) -> index of first unprocessed produced offset
    pending: dict[tuple, list[tuple[int, int]]] = {}  # (member, group, tp) -> auto commits awaiting next batch
    consumed_offsets = 0
    commits_checked = 0

    def first_gap(key: tuple, tp: tuple) -> int | None:
        """Smallest produced offset the group has not processed (None: all processed)."""
        offs = sorted_offsets.get(tp)
        if not offs:
            return None
        done = processed.get(key)
        i = frontier.get(key, 0)
        if done:
            n = len(offs)
            while i < n and offs[i] in done:
                i += 1
            frontier[key] = i
        return offs[i] if i < len(offs) else None

    def judge(c_seq: int, member: str, group: str, tp: tuple, n: int, gap: int, auto: bool) -> None:
        log.violation(f"group {group}: {member} committed {fmt_tp(tp)} at offset {n}{' (auto-commit)' if auto else ''} "
                      f"but offset {gap} (acknowledged) had not been processed by the group",
                      c_seq, produced[tp][gap])

    for e in idx.stream((Consumed, Commit)):
        if type(e) is Consumed:
            tp = (e.topic, e.partition)
            key = (e.group, e.topic, e.partition)
            offs = e.offsets
            consumed_offsets += len(offs)
            a = seen_any.get(tp)
            if a is None:
                a = seen_any[tp] = set()
            a.update(offs)
            p = processed.get(key)
            if p is None:
                p = processed[key] = set()
            p.update(offs)
            if pending:
                waiting = pending.pop((e.source, e.group, tp), None)
                if waiting:
                    gap = first_gap(key, tp)
                    for c_seq, n in waiting:
                        if gap is not None and gap < n:
                            judge(c_seq, e.source, e.group, tp, n, gap, True)
        elif e.outcome is Outcome.OK:
            for topic, part, n in e.offsets:
                tp = (topic, part)
                commits_checked += 1
                gap = first_gap((e.group, topic, part), tp)
                if gap is not None and gap < n:
                    if e.auto:
                        pending.setdefault((e.source, e.group, tp), []).append((e.seq, n))
                    else:
                        judge(e.seq, e.source, e.group, tp, n, gap, False)
    for (member, group, tp), waiting in pending.items():
        gap = first_gap((group,) + tp, tp)
        for c_seq, n in waiting:
            if gap is not None and gap < n:
                judge(c_seq, member, group, tp, n, gap, True)

    final_seen = 0
    for f in idx.of(FinalRead):
        for part, off in f.records:
            final_seen += 1
            a = seen_any.get((f.topic, part))
            if a is None:
                a = seen_any[(f.topic, part)] = set()
            a.add(off)

    lost = 0
    produced_total = 0
    for tp, d in produced.items():
        produced_total += len(d)
        a = seen_any.get(tp, set())
        missing = [o for o in sorted_offsets[tp] if o not in a]
        lost += len(missing)
        for o in missing:
            log.violation(f"record {fmt_tp(tp)}@{o} was acknowledged (send_ok) but never processed nor seen by "
                          "the final read", d[o])
    unique = sum(len(s) for s in seen_any.values())
    processed_unique = sum(len(s) for s in processed.values())
    duplicates = consumed_offsets - processed_unique
    if duplicates:
        log.note(f"{duplicates} record(s) were processed more than once within their group "
                 "(allowed: at-least-once)")
    metrics = {"produced": produced_total, "lost": lost, "consumed_records": consumed_offsets,
               "duplicates": duplicates, "final_read_records": final_seen, "distinct_seen": unique,
               "commit_partitions_checked": commits_checked, "violations": log.violation_count}
    return log.result(NAME, f"all {produced_total} acknowledged record(s) were processed; no commit ran ahead of "
                      f"processing ({duplicates} duplicate deliveries)",
                      f"{lost} acknowledged record(s) lost, {log.violation_count - lost} commit(s) ahead of processing",
                      metrics)
