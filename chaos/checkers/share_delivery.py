"""Share groups (KIP-932, issue 36): delivery counts, the delivery limit, and no delivery after a terminal state.

KIP-932, "In-flight records": the share-partition leader counts the deliveries of each record; every
acquisition increments the count (the first delivery is 1), and a record whose acquisition ends without being
accepted or rejected once its count reached ``group.share.delivery.count.limit`` is archived instead of made
available again (``SharePartition.InFlightState.tryUpdateState``: Available at the limit becomes Archived).
Acknowledged (accepted) and Archived (rejected, or past the limit) are terminal: such a record is never delivered
again ("In-flight records", the state machine). The KIP warns that the persisted counts are not updated with
exactly-once semantics, so a count may be imprecise (it guards against poison records): the leader does not
persist an acquisition, only what ends it, so a leader that fails loses the deliveries in flight. The rules below
hold the count strict except across such a failover.

Definitions, on the holds of :mod:`chaos.checkers.share_timeline` (``limit``: the group's delivery count limit,
``slack``: the clock slack); acquisitions whose client did not report the count are left out of the count rules:

- *within the limit*: every delivery count is between 1 and the limit (a count past the limit means a record was
  delivered again after it must have been archived);
- *strictly increasing*: two acquisitions of one record never carry the same count, and one the broker certainly
  made later (its ShareFetch was sent after the other acquisition was received) carries a higher count. The same
  count twice is explained by a broker fault between the two acquisitions (the new share-partition leader does
  not know an acquisition the old one never wrote to the share coordinator): reported, not a violation;
- *terminal is final*: after an accept or reject the broker answered ok, the record is not acquired again — an
  acquisition with a higher count than the accepted one, or whose fetch was sent after the answer, is a violation
  (unless that acquisition certainly came before the acceptance was sent: then the acceptance itself was wrong,
  which share-ownership judges).

Figures: records, deliveries, redeliveries, redeliveries per 1000 records, the highest count. A history without
share events answers ``true`` ("nothing to judge"); share events without any acquisition, or with no delivery
count reported, ``unknown``.
"""

from __future__ import annotations

from chaos.checkers.bounds import ResolvedBounds
from chaos.checkers.result import FindingLog, Result, Validity
from chaos.checkers.share_timeline import Hold, answered, fmt_key, later, nothing_to_judge, seconds, share_view, unacquired
from chaos.history import History
from chaos.model.checker_name import CheckerName

NAME = CheckerName.SHARE_DELIVERY


def check(history: History, bounds: ResolvedBounds) -> Result:
    view = share_view(history)
    if not view.groups:
        return nothing_to_judge(NAME)
    if (none := unacquired(view, NAME, "delivery counts", "deliveries")) is not None:
        return none
    log = FindingLog(bounds.max_findings)
    slack = bounds.slack_ns
    counted = redelivered = top = explained = 0
    for key, holds in view.holds.items():
        limit = view.limit(key[0])
        where = fmt_key(key)
        known = [h for h in holds if h.count is not None]
        counted += len(known)
        redelivered += sum(1 for h in known if (h.count or 0) > 1)
        top = max([top, *(h.count or 0 for h in known)])
        for h in known:
            count = h.count or 0
            if count < 1:
                log.violation(f"{where}: {h.describe()} carries delivery count {count}; the first delivery is 1",
                              h.seq)
            elif count > limit:
                log.violation(f"{where}: delivered a {_nth(count)} time to {h.describe()}, past the group's delivery "
                              f"count limit {limit}: at the limit the record is archived, never delivered again", h.seq,
                              *[x.seq for x in known if x is not h and (x.count or 0) >= limit][:1])
        for i, x in enumerate(known):
            for y in known[i + 1:]:
                if x.count == y.count:
                    fault = view.broker_fault_in(x.start_lo, y.start_hi)
                    text = f"{where}: delivery {x.count} given twice, to {x.describe()} and {y.describe()}"
                    if fault is not None:
                        explained += 1
                        log.note(f"{text}; explained by fault {fault.fault_id} (seq {fault.seq}): a new "
                                 "share-partition leader repeats a delivery its predecessor had not written to the "
                                 "share coordinator", x.seq, y.seq, fault.seq)
                    else:
                        log.violation(f"{text}: every acquisition increments the count", x.seq, y.seq)
                    continue
                for a, b in ((x, y), (y, x)):
                    if b.start_lo is not None and b.start_lo > a.start_hi + slack and (b.count or 0) < (a.count or 0):
                        log.violation(f"{where}: the delivery count went down from {a.count} ({a.describe()}) to "
                                      f"{b.count} ({b.describe()}, fetched at {seconds(view, b.start_lo)}, after "
                                      f"the first was received at {seconds(view, a.start_hi)})", a.seq, b.seq)
        if len(holds) > 1:
            for h in holds:
                _after_terminal(log, where, h, holds, slack)
    if not counted:
        return Result(NAME, Validity.UNKNOWN, "no acquisition carried its delivery count (the client did not report "
                      "it): delivery counts not judged", {"deliveries": float(sum(len(h) for h in view.holds.values()))},
                      log.findings())
    records = len(view.holds)
    metrics = {"records": float(records), "deliveries": float(sum(len(h) for h in view.holds.values())),
               "redeliveries": float(redelivered), "redeliveries_per_1000": 1000.0 * redelivered / records,
               "max_delivery_count": float(top), "repeats_explained": float(explained),
               "delivery_count_limit": float(max(view.limit(g) for g in view.groups))}
    ok = (f"{records} records, {int(metrics['deliveries'])} deliveries ({redelivered} redeliveries, "
          f"{metrics['redeliveries_per_1000']:.1f} per 1000 records, highest count {top}): counts strictly "
          "increasing within the limit, nothing delivered after it was accepted or rejected")
    bad = f"{log.violation_count} delivery count violation(s) of share group records"
    return log.result(NAME, ok, bad, metrics)


def _after_terminal(log: FindingLog, where: str, h: Hold, holds: list[Hold], slack: int) -> None:
    """A record accepted or rejected (ok) through ``h`` must not be acquired again."""
    done = h.terminal_ack()
    if done is None:
        return
    settled = answered(done)
    for y in holds:
        if y is h:
            continue
        after_answer = y.start_lo is not None and y.start_lo > settled + slack
        higher = later(h, y, slack)
        if not (after_answer or higher):
            continue
        if not after_answer and y.start_hi + slack < done.mono_ns:
            continue  # certainly acquired before the acceptance was sent: share-ownership's late acknowledgement
        how = ("fetched after the answer" if after_answer else
               "with a higher delivery count, so acquired after the accepted delivery")
        log.violation(f"{where}: {done.ack_type.value}ed by {h.source} (seq {done.seq}, answered ok), yet delivered "
                      f"again to {y.describe()}, {how}", h.seq, done.seq, y.seq)


def _nth(n: int) -> str:
    return f"{n}{'th' if 10 <= n % 100 <= 20 else {1: 'st', 2: 'nd', 3: 'rd'}.get(n % 10, 'th')}"
