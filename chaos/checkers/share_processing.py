"""Share groups (KIP-932, issue 36): the application's side of the contract — a record is processed while its
member holds it, and accepted only once processed.

KIP-932, "In-flight records": an Acquired record belongs to the one member it was acquired for until it is
acknowledged or its acquisition lock runs out; then it is Available and may be handed to another member. An
accept is final (Acknowledged: never delivered again). So a member that processes a record after its lock ran
out works on a record that may be in another member's hands at the same time, and a member that accepts a record
before processing it has, if it dies in between, a record accepted that nobody processed (lost for the
application, though the broker did everything right). Both are the consumer's fault, not Kafka's, and both are
what a correct share consumer avoids: finish within the lock (or renew it, KIP-1222, or release the rest), and
acknowledge after processing.

Read on the ``share_processed`` events members record (one per record: when processing began, ``started_ns``,
and ended, ``mono_ns``) against the holds of :mod:`chaos.checkers.share_timeline` (each processing belongs to the
member's latest acquisition of the record before it). A member's processing and its acknowledgements are stamped
by the same process's CLOCK_MONOTONIC, so their order is exact; the lock's end is known only from above
(``deadline_hi``: the acquisition happened no later than the poll that returned it), and the clock slack applies
to it.

*Accepted before processed.* An accept of a record answered ``ok`` or unanswered (it may have been applied) is a
violation when the member had not finished processing the record in that acquisition when it sent the accept:
processing that ended later, or never (the member stopped, the run ended).

*Processed past the lock.* Processing that *began* after the lock had certainly run out (``started_ns >
deadline_hi + slack``) is a violation: the member took up a record that was no longer its own. Processing that
began within the lock and *ended* past it is a violation too, unless a fault on that member was in effect while
it ran (a paused process cannot end what it began; reported as a note). Another member's acquisition of the
record during the processing is cited as the consequence.

On a history without share events the answer is ``true`` ("nothing to judge"); with share events but no
acquisition, or no member recording its processing (a client loop that does not, a run recorded before members
did), ``unknown``.
"""

from __future__ import annotations

from chaos.checkers.bounds import ResolvedBounds
from chaos.checkers.result import FindingLog, Result, Validity
from chaos.checkers.share_timeline import (
    Hold,
    RecordKey,
    ShareView,
    fmt_key,
    nothing_to_judge,
    seconds,
    share_view,
    unacquired,
)
from chaos.history import History, ShareAcknowledged, ShareAckType, ShareProcessed
from chaos.model.checker_name import CheckerName
from chaos.outcome import Outcome

NAME = CheckerName.SHARE_PROCESSING


def check(history: History, bounds: ResolvedBounds) -> Result:
    view = share_view(history)
    if not view.groups:
        return nothing_to_judge(NAME)
    if (none := unacquired(view, NAME, "processing", "processed")) is not None:
        return none
    if not view.processing_groups:
        return Result(NAME, Validity.UNKNOWN, f"share group(s) {', '.join(view.groups)}: no member recorded its "
                      "processing (share_processed), so neither processing within the lock nor accepting after "
                      "processing can be judged", {"processed": 0.0})
    log = FindingLog(bounds.max_findings)
    slack = bounds.slack_ns
    processed = accepts = early = lost = past = explained = 0
    for key, holds in view.holds.items():
        if key[0] not in view.processing_groups:
            continue
        for h in holds:
            processed += len(h.processed)
            for p in h.processed:
                verdict = _past_lock(view, log, key, h, holds, p, slack)
                past += verdict == "violation"
                explained += verdict == "explained"
            for ack in h.acks:
                if ack.ack_type is not ShareAckType.ACCEPT or ack.outcome is Outcome.FAIL:
                    continue
                accepts += 1
                found = _accepted_unprocessed(view, log, key, h, ack)
                early += found is not None
                lost += found == "never"
    for p, offset in view.unheld_processing:
        log.violation(f"{p.topic}-{p.partition}@{offset}: {p.source} processed the record (seq {p.seq}) without "
                      "having acquired it", p.seq)
    metrics = {"processed": float(processed), "accepts_judged": float(accepts),
               "accepted_before_processed": float(early), "accepted_never_processed": float(lost),
               "processed_past_lock": float(past),
               "past_lock_explained": float(explained)}
    ok = (f"{processed} record processings, {accepts} accepts: every record processed within its lock and accepted "
          f"after it was processed ({explained} overrun(s) explained by a fault on the member)")
    bad = f"{log.violation_count} processing violation(s) of share group records"
    return log.result(NAME, ok, bad, metrics)


def _accepted_unprocessed(view: ShareView, log: FindingLog, key: RecordKey, h: Hold,
                          ack: ShareAcknowledged) -> str | None:
    """Whether ``ack`` (an accept that may have been applied) came before ``h``'s member had processed the record
    in that acquisition: None (it did not), "later" (processed after the accept) or "never"; logs the violation."""
    if any(p.mono_ns <= ack.mono_ns for p in h.processed):
        return None
    answer = "answered ok" if ack.outcome is Outcome.OK else "unanswered (it may have been applied)"
    text = (f"{fmt_key(key)}: {h.source} accepted the record (seq {ack.seq}, {answer}) at "
            f"{seconds(view, ack.mono_ns)} before processing it")
    after = next((p for p in h.processed if p.mono_ns > ack.mono_ns), None)
    if after is not None:
        log.violation(f"{text}: its processing ended only at {seconds(view, after.mono_ns)}; had the member died "
                      "in between, the accepted record would never have been processed", h.seq, ack.seq, after.seq)
        return "later"
    if h.stop is not None:
        log.violation(f"{text}, and stopped at {seconds(view, h.stop.mono_ns)} ({h.stop.signal or 'clean'}) "
                      "without processing it: accepted (final, never delivered again) and lost", h.seq, ack.seq,
                      h.stop.seq)
    else:
        log.violation(f"{text}, and never processed it", h.seq, ack.seq)
    return "never"


def _past_lock(view: ShareView, log: FindingLog, key: RecordKey, h: Hold, holds: list[Hold], p: ShareProcessed,
               slack: int) -> str | None:
    """Judge one processing ``p`` of ``h``'s record against its lock: None (within), "explained" or "violation"."""
    deadline = h.deadline_hi()
    if p.mono_ns <= deadline + slack:
        return None
    where = f"{fmt_key(key)}: {h.describe()}"
    other = next((y for y in holds if y.source != h.source and y.seq > h.seq
                  and y.start_hi <= p.mono_ns), None)
    meanwhile = (f"; meanwhile {other.describe()} had been handed the record (by {seconds(view, other.start_hi)})"
                 if other is not None else "")
    cite = (h.seq, p.seq, *((other.seq,) if other is not None else ()))
    if p.started_ns > deadline + slack:
        log.violation(f"{where} began processing the record at {seconds(view, p.started_ns)}, after its lock had run "
                      f"out (by {seconds(view, deadline)}, lock {h.lock_ns / 1e9:g}s): no longer its own{meanwhile}",
                      *cite)
        return "violation"
    text = (f"{where} processed the record from {seconds(view, p.started_ns)} to {seconds(view, p.mono_ns)}, past "
            f"its lock (run out by {seconds(view, deadline)}, lock {h.lock_ns / 1e9:g}s){meanwhile}")
    fault = view.member_fault_in(h.source, p.started_ns, p.mono_ns)
    if fault is not None:
        log.note(f"{text}; explained by fault {fault.fault_id} (seq {fault.seq}) on {h.source} while it processed",
                 *cite, fault.seq)
        return "explained"
    log.violation(text, *cite)
    return "violation"
