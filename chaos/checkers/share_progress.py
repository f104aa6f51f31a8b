"""Share groups (KIP-932, issue 36): the share-partition start offset never goes back, and a dead member's records
come back to the others within their lock.

KIP-932, "In-flight records" and "Managing durable share-partition state": the SPSO advances as the records at
its head reach a terminal state, and the share coordinator persists it (``WriteShareGroupState`` before an
acknowledgement is answered), so a new
share-partition leader or share coordinator starts from where the old one stopped: the SPSO the group shows never
moves backwards, across failovers included. An offset reset of the group (an administrator's
``AlterShareGroupOffsets``) moves it on purpose: a fault with the trait ``rewinds_committed_offsets`` starts the
comparison again.

KIP-932, "In-flight records": when a member stops without acknowledging what it acquired, its records' locks run
out and they become Available for the other members (``SharePartition.releaseAcquisitionLockOnTimeout``; a member
closing cleanly releases them at once), unless they reached the delivery count limit (then archived).

Definitions:

*SPSO monotonic.* Per group and partition, over the ``share_group_state`` samples with start offsets in history
order: a sample whose start offset is below the highest one sampled before (since the last rewinding fault) is a
violation, one finding per partition citing the highest sample and the first lower one, with the number of lower
samples.

*Reacquired after a death* (liveness). A hold (:mod:`chaos.checkers.share_timeline`) whose member stopped
(``member_stop``) while its lock may still have run (not later than the lock deadline + slack) and without an
accept, release or reject that may have been applied, below the delivery count limit, is an *orphan*; it must be
acquired again by some member (the same member restarted counts) within its lock deadline (``deadline_hi``) + slack
+ :data:`REACQUIRE_MARGIN_NS` (a fetch already in flight, the members' poll loop). It is judged only when there was
load to reacquire it: a member acquired records of the same partition after that bound. Acquired again later than
the bound, or never while that partition was fetched and no later sample puts the SPSO past it: a violation. An
orphan no member could have fetched is counted as unjudged.

Figures: orphans, reacquired, the longest and mean time from the member's stop to the reacquisition
(``reacquire_max_s``). ``unknown``: share events but fewer than two samples with start offsets (nothing to
compare), or orphans none of which could be judged. A history without share events answers ``true``.
"""

from __future__ import annotations

from bisect import bisect_right

from chaos.checkers.bounds import ResolvedBounds
from chaos.checkers.result import FindingLog, Result
from chaos.checkers.share_timeline import Hold, ShareView, fmt_key, nothing_to_judge, seconds, share_view
from chaos.history import FaultStart, History, ShareAckType, ShareGroupStateSample
from chaos.model.checker_name import CheckerName
from chaos.model.fault_traits import FaultTrait
from chaos.outcome import Outcome

NAME = CheckerName.SHARE_PROGRESS
#: how long after an orphan's lock ran out another member may still take to fetch it: a ShareFetch already in
#: flight (``fetch.max.wait.ms``, 500 ms by default) and the members' poll loop
REACQUIRE_MARGIN_NS = 5_000_000_000


def check(history: History, bounds: ResolvedBounds) -> Result:
    view = share_view(history)
    if not view.groups:
        return nothing_to_judge(NAME)
    log = FindingLog(bounds.max_findings)
    compared = _start_offsets(view, log)
    orphans, reacquired, passed, unjudged, delays = _orphans(view, bounds.slack_ns, log)
    metrics = {"samples_compared": float(compared), "orphans": float(orphans), "reacquired": float(reacquired),
               "orphans_done_by_start_offset": float(passed), "orphans_unjudged": float(unjudged),
               "reacquire_max_s": max(delays, default=0.0), "reacquire_mean_s": sum(delays) / len(delays) if delays
               else 0.0}
    missing = []
    if compared < 2:
        missing.append(f"{compared} share_group_state sample(s) with start offsets: the share-partition start offset "
                       "has nothing to be compared with")
    if orphans and unjudged == orphans:
        missing.append(f"{orphans} record(s) held by members that stopped, none of which any member could have "
                       "fetched again afterwards")
    dead = (f"of {orphans} record(s) held by members that stopped, {reacquired} were acquired again in time (longest "
            f"{metrics['reacquire_max_s']:.1f}s after the stop), {passed} passed by the start offset, {unjudged} "
            "without load to judge" if orphans else "no member stopped holding records")
    ok = f"share-partition start offsets never went back over {compared} samples; {dead}"
    bad = f"{log.violation_count} progress violation(s) of share groups"
    return log.result(NAME, ok, bad, metrics, unknown="; ".join(missing) if missing else None)


def _start_offsets(view: ShareView, log: FindingLog) -> int:
    """Judge the SPSO samples; how many samples carried start offsets."""
    top: dict[tuple[str, str, int], tuple[int, int]] = {}  # (group, topic, partition) -> (highest, its sample seq)
    lower: dict[tuple[str, str, int], list[tuple[int, int]]] = {}  # -> [(value, seq)] below the highest
    compared = 0
    for e in view.idx.stream((ShareGroupStateSample, FaultStart)):
        if isinstance(e, FaultStart):
            if FaultTrait.REWINDS_COMMITTED_OFFSETS in e.effects:
                for rewound, highest in top.items():
                    _report(view, rewound, highest, lower.pop(rewound, []), log)
                top.clear()
            continue
        if not isinstance(e, ShareGroupStateSample) or e.start_offsets is None:
            continue
        compared += 1
        for topic, partition, offset in e.start_offsets:
            key = (e.group, topic, partition)
            best = top.get(key)
            if best is not None and offset < best[0]:
                lower.setdefault(key, []).append((offset, e.seq))
            elif best is None or offset > best[0]:
                if best is not None:
                    _report(view, key, best, lower.pop(key, []), log)
                top[key] = (offset, e.seq)
    for key, highest in top.items():
        _report(view, key, highest, lower.pop(key, []), log)
    return compared


def _report(view: ShareView, key: tuple[str, str, int], best: tuple[int, int], got: list[tuple[int, int]],
            log: FindingLog) -> None:
    """One finding for the samples (``got``) below the highest start offset sampled before them (``best``)."""
    if not got:
        return
    value, seq = got[0]
    at = seconds(view, view.idx.history.event(seq).mono_ns)
    log.violation(f"group {key[0]}: the share-partition start offset of {key[1]}-{key[2]} went back from {best[0]} "
                  f"(seq {best[1]}) to {value} (seq {seq}, at {at}), lower in {len(got)} sample(s)", best[1], seq)


def _orphans(view: ShareView, slack: int, log: FindingLog) -> tuple[int, int, int, int, list[float]]:
    """Judge the records held by members that stopped: (orphans, reacquired in time, passed by the start offset,
    unjudged, delays in s)."""
    orphans = reacquired = passed_by = unjudged = 0
    delays: list[float] = []
    by_partition: dict[tuple[str, str, int], list[int]] = {}  # start_hi of every acquisition, per partition
    for key, holds in view.holds.items():
        by_partition.setdefault(key[:3], []).extend(h.start_hi for h in holds)
    for times in by_partition.values():
        times.sort()
    for key, holds in view.holds.items():
        limit = view.limit(key[0])
        for i, h in enumerate(holds):
            if h.stop is None or not _orphaned(h, slack) or h.count is None or h.count >= limit:
                continue
            orphans += 1
            due = h.deadline_hi() + slack + REACQUIRE_MARGIN_NS
            again = holds[i + 1] if i + 1 < len(holds) else None  # the next acquisition, before the stop or after
            stop_ns = h.stop.mono_ns
            if again is not None and again.start_hi <= due:
                reacquired += 1
                delays.append(max(0, again.start_hi - stop_ns) / 1e9)
                continue
            passed = _passed(view, key, due)
            if again is None and passed is not None:
                passed_by += 1  # terminal (the SPSO moved past it) without a recorded acquisition
                continue
            until = again.start_hi if again is not None else view.idx.last_ns + 1
            times = by_partition.get(key[:3], [])
            first_after = bisect_right(times, due)
            if first_after == len(times) or times[first_after] >= until:  # nobody fetched the partition after `due`
                unjudged += 1
                continue
            where = fmt_key(key)
            if again is not None:
                delays.append(max(0, again.start_hi - stop_ns) / 1e9)
                log.violation(f"{where}: held by {h.describe()}, which stopped at {seconds(view, stop_ns)} (seq "
                              f"{h.stop.seq}); acquired again only by {again.describe()} at "
                              f"{seconds(view, again.start_hi)}, past its lock deadline + slack "
                              f"({seconds(view, due)}), while the partition was fetched", h.seq, h.stop.seq, again.seq)
            else:
                log.violation(f"{where}: held by {h.describe()}, which stopped at {seconds(view, stop_ns)} (seq "
                              f"{h.stop.seq}); never acquired again though members fetched the partition after its "
                              f"lock ran out ({seconds(view, due)})", h.seq, h.stop.seq)
    return orphans, reacquired, passed_by, unjudged, delays


def _orphaned(h: Hold, slack: int) -> bool:
    """Whether the member stopped holding the record: its stop may have come before the lock ran out, and without
    an accept, release or reject that may have been applied before it. A member that stopped after its lock had
    certainly run out (a stop long after, at teardown say) left nothing behind: the record was Available again
    while it lived, and how soon another fetch took it is not what this rule speaks about."""
    assert h.stop is not None
    if h.stop.mono_ns > h.deadline_hi() + slack:
        return False
    return not any(a.ack_type is not ShareAckType.RENEW and a.outcome is not Outcome.FAIL and a.seq < h.stop.seq
                   for a in h.acks)


def _passed(view: ShareView, key: tuple[str, str, int, int], after: int) -> int | None:
    """The seq of a sample after ``after`` whose SPSO is past the record, or None."""
    for s in view.samples.get(key[0], ()):
        if s.mono_ns > after and s.start_offsets is not None and any(
                (t, p) == key[1:3] and o > key[3] for t, p, o in s.start_offsets):
            return s.seq
    return None
