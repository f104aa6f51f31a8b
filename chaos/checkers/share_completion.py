"""Share groups (KIP-932, issue 36): at-least-once for queues — every acknowledged record ends accepted, rejected or
archived.

KIP-932, "In-flight records" (the record state machine): a record stays in flight (Available or
Acquired) until it is acknowledged as accepted or rejected, or archived at its delivery count limit; the
share-partition start offset (SPSO) is the first offset that is not in such a terminal state, so every record
below it is terminal. A share group that keeps consuming therefore brings every record of its partitions, from
where the group started consuming them, to a terminal state: none is lost in flight.

Definition, per share group, over the records the producers saw acknowledged (``send_ok``) on the topics the
group consumed (the topics of its acquisitions, acknowledgements and sampled start offsets). A record is *done*
when

- a member's accept or reject of it was answered ok (``share_acknowledged``); or
- it was archived: an acquisition at the delivery count limit ended without one (released, or its lock ran out
  before the last sample, :mod:`chaos.checkers.share_timeline`); or
- the group's final sample (the last ``share_group_state`` with start offsets, taken after the last fault ended)
  puts its partition's SPSO past it.

A record not done is a violation when the final sample came at least ``limit × lock duration + share session
timeout + slack`` after the last heal and after the producer's acknowledgement of the record (a record may need
every one of its deliveries, each up to a lock, after the members came back); earlier, the run ended too soon to
tell: ``unknown``. Also ``unknown``: a fault still in
effect at teardown, no final sample after the heal while records are not done by acknowledgements, no
acknowledged produce on the group's topics. Records below the final SPSO that no recorded member ever acquired are
reported (``share.auto.offset.reset=latest`` starts a share partition at its end; a moved log start offset
archives what lies below it), not failed. A history without share events answers ``true`` ("nothing to judge").
"""

from __future__ import annotations

from chaos.checkers.bounds import ResolvedBounds
from chaos.checkers.result import FindingLog, Result, Validity
from chaos.checkers.share_timeline import Hold, ShareView, nothing_to_judge, share_view
from chaos.history import FaultEnd, FaultStart, History, PhaseEvent, RunPhase, SendOk, ShareAckType
from chaos.model.checker_name import CheckerName
from chaos.outcome import Outcome

NAME = CheckerName.SHARE_COMPLETION
#: offsets named per partition in a finding
SHOWN = 8


def check(history: History, bounds: ResolvedBounds) -> Result:
    view = share_view(history)
    if not view.groups:
        return nothing_to_judge(NAME)
    idx = view.idx
    cutoff = next((p.mono_ns for p in idx.of(PhaseEvent) if p.name is RunPhase.TEARDOWN), idx.last_ns + 1)
    ended = {e.fault_id for e in idx.of(FaultEnd) if e.mono_ns < cutoff}
    still = sorted({f.fault_id for f in idx.of(FaultStart) if f.mono_ns < cutoff} - ended)
    if still:
        return Result(NAME, Validity.UNKNOWN, f"fault {still[0]} never ended before teardown: completion after the "
                      "heal cannot be judged", {"open_faults": float(len(still))})
    ends = [e.mono_ns for e in idx.of(FaultEnd)]
    heal = max(ends) if ends else idx.first_ns
    log = FindingLog(bounds.max_findings)
    undecided: list[str] = []
    totals = dict.fromkeys(("records", "accepted", "rejected", "archived", "by_start_offset", "never_acquired",
                            "not_done"), 0)
    for group in view.groups:
        _judge_group(view, group, heal, bounds.slack_ns, log, undecided, totals)
    metrics = {k: float(v) for k, v in totals.items()}
    if totals["never_acquired"]:
        log.note(f"{totals['never_acquired']} record(s) below the final share-partition start offset were never "
                 "acquired by a recorded member (share.auto.offset.reset=latest, or a moved log start offset)")
    ok = (f"{totals['records']} acknowledged records all ended: {totals['accepted']} accepted, {totals['rejected']} "
          f"rejected, {totals['archived']} archived at the delivery limit, {totals['by_start_offset']} below the "
          "final share-partition start offset")
    bad = f"{totals['not_done']} acknowledged record(s) never accepted, rejected or archived"
    return log.result(NAME, ok, bad, metrics, unknown="; ".join(undecided) if undecided else None)


def _judge_group(view: ShareView, group: str, heal: int, slack: int, log: FindingLog, undecided: list[str],
                 totals: dict[str, int]) -> None:
    idx = view.idx
    samples = view.samples.get(group, [])
    topics = {k[1] for k, _ in view.holds_of(group)}
    topics |= {t for s in samples for t, _, _ in (s.start_offsets or ())}
    sends = [s for s in idx.of(SendOk) if s.topic in topics]
    if not sends:
        undecided.append(f"group {group}: no record acknowledged by a producer on its topics "
                         f"({', '.join(sorted(topics)) or 'none known'})")
        return
    final = next((s for s in reversed(samples) if s.start_offsets is not None and s.mono_ns >= heal), None)
    spso = {(t, p): o for t, p, o in (final.start_offsets or ())} if final is not None else {}
    judged_at = final.mono_ns if final is not None else idx.last_ns
    limit = view.limit(group)
    pending: dict[tuple[str, int], list[SendOk]] = {}
    for s in sends:
        totals["records"] += 1
        holds = view.holds.get((group, s.topic, s.partition, s.offset), [])
        done = next((a for h in holds if (a := h.terminal_ack()) is not None), None)
        if done is not None:
            totals["accepted" if done.ack_type is ShareAckType.ACCEPT else "rejected"] += 1
        elif any(_archived(h, limit, judged_at, slack) for h in holds):
            totals["archived"] += 1
        elif spso.get((s.topic, s.partition), -1) > s.offset:
            totals["by_start_offset"] += 1
            totals["never_acquired"] += not holds
        else:
            pending.setdefault((s.topic, s.partition), []).append(s)
    if not pending:
        return
    count = sum(len(v) for v in pending.values())
    bound = limit * view.lock_ms(group) * 1_000_000 + view.session_ns + slack
    if final is None:
        undecided.append(f"group {group}: {count} record(s) not accepted, rejected or archived by their "
                         "acknowledgements, and no share_group_state sample with start offsets after the last heal")
        return
    if final.mono_ns < heal + bound:
        undecided.append(f"group {group}: {count} record(s) not done by the final sample (seq {final.seq}), taken "
                         f"{(final.mono_ns - heal) / 1e9:.1f}s after the heal, before the bound {bound / 1e9:.1f}s")
        return
    recent = sum(1 for lst in pending.values() for s in lst if s.mono_ns + bound > final.mono_ns)
    if recent:
        undecided.append(f"group {group}: {recent} record(s) not done by the final sample (seq {final.seq}) were "
                         f"acknowledged by the producer less than the bound {bound / 1e9:.1f}s before it")
        pending = {tp: kept for tp, lst in pending.items()
                   if (kept := [s for s in lst if s.mono_ns + bound <= final.mono_ns])}
        if not pending:
            return
        count = sum(len(v) for v in pending.values())
    totals["not_done"] += count
    for (topic, partition), lst in sorted(pending.items()):
        shown = ", ".join(str(s.offset) for s in lst[:SHOWN]) + (" …" if len(lst) > SHOWN else "")
        last = [h.seq for s in lst[:SHOWN] for h in view.holds.get((group, topic, partition, s.offset), [])[-1:]]
        log.violation(f"group {group}: {len(lst)} acknowledged record(s) of {topic}-{partition} never accepted, "
                      f"rejected or archived (offsets {shown}); the final sample (seq {final.seq}, "
                      f"{(final.mono_ns - heal) / 1e9:.1f}s after the heal) puts the share-partition start offset at "
                      f"{spso.get((topic, partition), 'nothing (no share state)')}",
                      *(s.seq for s in lst[:SHOWN]), final.seq, *last)


def _archived(h: Hold, limit: int, judged_at: int, slack: int) -> bool:
    """An acquisition at the delivery limit that ended without an accept or reject: the record is archived."""
    if h.count is None or h.count < limit or h.terminal_ack() is not None:
        return False
    released = any(a.ack_type is ShareAckType.RELEASE and a.outcome is Outcome.OK for a in h.acks)
    return released or h.deadline_hi() + slack < judged_at
