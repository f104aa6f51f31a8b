"""Share groups (KIP-932, issue 36): one holder per record, and no acknowledgement accepted once the lock passed.

KIP-932, "In-flight records": a record in the Acquired state belongs to the one member it was acquired for, for
the duration of the acquisition lock; an acknowledgement is valid only from that member while the record is
acquired by it. The share-partition leader checks both (``SharePartition.acknowledge``: a batch or offset that is
not Acquired, or acquired by another member, is answered ``INVALID_RECORD_STATE``), and when the lock expires its
timer task makes the record Available again (``SharePartition.releaseAcquisitionLockOnTimeout``) — from then on
the former holder's acknowledgement must be refused.

Definitions, on the holds of :mod:`chaos.checkers.share_timeline` (one acquisition of one offset by one member;
the time intervals there; ``slack`` the clock slack):

*One holder at a time.* Two holds of the same record by different members certainly overlap — a violation — when
there is a moment both certainly held it: ``max(start_hi) + slack < min(end_lo)`` over the two, or the later one
(by delivery count, or fetched after the other was received) was acquired at most ``start_hi`` while the earlier
one was still certainly held (``start_hi + slack < end_lo`` of the earlier). A hold whose lock start is not
bounded (``fetched_ns`` not recorded, no renewal) is never certainly held past its acquisition, so only the second
form judges it, through the other's bound. A broker fault between the two acquisitions (a possible new
share-partition leader, which does not know the earlier acquisition) explains the overlap: reported, not a
violation.

*No acknowledgement after the lock.* An acknowledgement (any type) answered ``ok`` is a violation when

- it was sent after the lock had certainly run out: ``mono_ns > deadline_hi + slack`` (renewals answered ok before
  it counted); a broker fault in effect during the hold explains it (a paused leader's timer does not run: it may
  apply the acknowledgement before the expiry it is late for) and makes it a note;
- another member certainly acquired the record after this member's acquisition and before the acknowledgement was
  sent (``start_hi + slack < mono_ns`` of the acknowledgement): the record was no longer this member's;
- the member had not acquired the record at all (no ``share_acquired`` of it from that member before);
- it repeats one the broker already answered ok that ended the acquisition, sent after that answer.

Acknowledgements refused (``fail``) or unanswered (``unknown``) are what Kafka owes a late member; they are
counted (``late_refused``), not judged. A member's own ``share_lock_expired`` is cited beside a late
acknowledgement when it recorded one. On a history without share events the answer is ``true`` ("nothing to
judge"); with share events but no acquisition, or nothing judgeable (no acknowledgement and no bounded lock start),
``unknown``.
"""

from __future__ import annotations

from chaos.checkers.bounds import ResolvedBounds
from chaos.checkers.result import FindingLog, Result
from chaos.checkers.share_timeline import (
    Hold,
    ShareView,
    answered,
    fmt_key,
    later,
    nothing_to_judge,
    seconds,
    share_view,
    unacquired,
)
from chaos.history import History, ShareAcknowledged, ShareAckType
from chaos.model.checker_name import CheckerName
from chaos.outcome import Outcome

NAME = CheckerName.SHARE_OWNERSHIP


def check(history: History, bounds: ResolvedBounds) -> Result:
    view = share_view(history)
    if not view.groups:
        return nothing_to_judge(NAME)
    if (none := unacquired(view, NAME, "ownership", "holds")) is not None:
        return none
    log = FindingLog(bounds.max_findings)
    slack = bounds.slack_ns
    overlaps = explained = bounded = judged_acks = late_refused = 0
    for key, holds in view.holds.items():
        bounded += sum(1 for h in holds if h.end_lo() is not None)
        for i, x in enumerate(holds):
            for y in holds[i + 1:]:
                if y.source == x.source:
                    continue
                first, second = (y, x) if later(y, x, slack) else (x, y)
                at = _overlap(first, second, slack)
                if at is None:
                    continue
                fault = view.broker_fault_in(first.start_lo, second.start_hi)
                text = (f"{fmt_key(key)} held by {first.describe()} and {second.describe()} at once: around "
                        f"{seconds(view, at)} both had it acquired (the first held it at least until "
                        f"{_until(view, first)})")
                if fault is not None:
                    explained += 1
                    log.note(f"{text}; explained by fault {fault.fault_id} (seq {fault.seq}), a possible new "
                             "share-partition leader that knew nothing of the first acquisition", first.seq,
                             second.seq, fault.seq)
                else:
                    overlaps += 1
                    log.violation(text, first.seq, second.seq, *(a.seq for a in first.acks[:1]))
        for h in holds:
            for ack in h.acks:
                judged_acks += 1
                if ack.outcome is not Outcome.OK:
                    if ack.mono_ns > h.deadline_hi(ack) + slack:
                        late_refused += 1
                    continue
                _judge_ack(view, log, key, h, holds, ack, slack)
    for ack, offset in view.unheld_acks:
        judged_acks += 1
        if ack.outcome is Outcome.OK:
            log.violation(f"{ack.topic}-{ack.partition}@{offset}: {ack.source}'s {ack.ack_type.value} (seq {ack.seq}) "
                          "was answered ok, but it never acquired the record", ack.seq)
    metrics = {"holds": float(sum(len(hs) for hs in view.holds.values())), "records": float(len(view.holds)),
               "holds_with_bounded_lock": float(bounded), "acks_judged": float(judged_acks),
               "late_refused": float(late_refused), "overlaps": float(overlaps), "overlaps_explained": float(explained)}
    ok = (f"{len(view.holds)} records, {int(metrics['holds'])} acquisitions: never two holders at once, no "
          f"acknowledgement accepted after its lock ({late_refused} late acknowledgement(s) refused, as "
          "KIP-932 requires)")
    bad = f"{log.violation_count} ownership violation(s) of share group records"
    unknown = None
    if not judged_acks and not bounded:
        unknown = ("no acknowledgement recorded and no acquisition bounds when its lock began (fetched_ns): "
                   "ownership not judged")
    return log.result(NAME, ok, bad, metrics, unknown=unknown)


def _overlap(first: Hold, second: Hold, slack: int) -> int | None:
    """A moment both certainly held the record (``first`` acquired first when the order is known), or None."""
    first_end = first.end_lo()
    if first_end is None:
        return None
    second_end = second.end_lo()
    if second_end is not None:
        begin = max(first.start_hi, second.start_hi)
        if begin + slack < min(first_end, second_end):
            return begin
    if later(first, second, slack) and second.start_hi + slack < first_end:
        return second.start_hi
    return None


def _until(view: ShareView, h: Hold) -> str:
    end = h.end_lo()
    return "?" if end is None else seconds(view, end)


def _judge_ack(view: ShareView, log: FindingLog, key: tuple[str, str, int, int], h: Hold, holds: list[Hold],
               ack: ShareAcknowledged, slack: int) -> None:
    """One acknowledgement answered ok, of a record the member acquired (``h``)."""
    where, what = fmt_key(key), f"{h.source}'s {ack.ack_type.value} (seq {ack.seq})"
    saw = [e.seq for e in view.expiries.get((key, h.source), ()) if h.seq < e.seq < ack.seq] if view.expiries else []
    seen = f"; the member itself recorded its lock as expired (seq {saw[0]})" if saw else ""
    thief = None if len(holds) == 1 else next((y for y in holds if y.source != h.source and later(h, y, slack)
                                               and y.start_hi + slack < ack.mono_ns), None)
    if thief is not None:
        log.violation(f"{where}: {what} was answered ok at {seconds(view, answered(ack))}, but "
                      f"{thief.describe()} had acquired the record since (by {seconds(view, thief.start_hi)}): "
                      f"it was no longer {h.source}'s to acknowledge{seen}", h.seq, thief.seq, ack.seq, *saw)
        return
    deadline = h.deadline_hi(ack)
    if ack.mono_ns > deadline + slack:
        text = (f"{where}: {what} sent at {seconds(view, ack.mono_ns)} was answered ok, but its lock from "
                f"{h.describe()} ran out by {seconds(view, deadline)} (lock {h.lock_ns / 1e9:g}s){seen}")
        fault = view.broker_fault_in(h.start_lo if h.start_lo is not None else h.start_hi, ack.mono_ns)
        if fault is not None:
            log.note(f"{text}; explained by fault {fault.fault_id} (seq {fault.seq}) on a broker: its lock timer "
                     "may not have run", h.seq, ack.seq, fault.seq)
        else:
            log.violation(text, h.seq, ack.seq, *saw)
        return
    first = next((a for a in h.acks if a is not ack and a.seq < ack.seq and a.outcome is Outcome.OK
                  and a.ack_type is not ShareAckType.RENEW), None)
    if first is not None and ack.mono_ns > answered(first) + slack:
        log.violation(f"{where}: {what} was answered ok after the broker had already answered ok to "
                      f"{first.ack_type.value} (seq {first.seq}) of the same acquisition", h.seq, first.seq, ack.seq)
