"""Invariant 5: committed-offset monotonicity per partition, across coordinator moves.

Definition. Per (group, partition), the committed offset observed over time
must never decrease. Observations are ``ok`` commits (what the coordinator
accepted) and the observer's ``committed_offsets`` samples (OffsetFetch, from
whichever broker is coordinator at that moment, so a coordinator failover
that loses or rolls back ``__consumer_offsets`` shows up here).

Comparisons between two commits and between two samples are strict (each
source is sequential). Between a commit and a sample the order of recording
can differ from the order at the coordinator (the OffsetFetch may have been
answered before the commit was accepted), so those pairs must be more than
the clock slack apart to count; a commit counts as observed when it was
*answered* (``answered_ns``), since the coordinator may apply it at any time
between send and answer — a commit sent to a coordinator that dies is retried
at the next one, and a sample taken before that answer may still show the
older offset. Offsets < 0 in samples mean "no committed
offset" and are ignored. A ``fault_start`` whose type mentions ``reset``
(an explicit offset reset in the schedule) restarts the comparison.
"""

from __future__ import annotations

from bisect import bisect_left
from typing import Any, cast

from chaos.checkers.bounds import ResolvedBounds
from chaos.checkers.index import fmt_tp, index_of
from chaos.checkers.result import CheckerName, FindingLog, Result
from chaos.history import Commit, CommittedOffsets, FaultStart, History
from chaos.outcome import Outcome

NAME = CheckerName.COMMITTED_OFFSETS


def check(history: History, bounds: ResolvedBounds) -> Result:
    idx = index_of(history)
    log = FindingLog(bounds.max_findings)
    slack = bounds.slack_ns
    # Per (group, topic, partition): [commit max, its seq, sample max, its seq, overall max, times, maxes, seqs]
    # where times/maxes/seqs record each rise of the overall maximum, so "the maximum observed
    # before t - slack" is one bisect. Values that do not lower the maximum take the fast path.
    state: dict[tuple[str, str, int], list[Any]] = {}
    observations = 0
    ok = Outcome.OK
    for e in cast("list[Commit | CommittedOffsets | FaultStart]", idx.stream((Commit, CommittedOffsets, FaultStart))):
        if type(e) is FaultStart:
            if "reset" in e.fault_type.lower():
                state.clear()
            continue
        if type(e) is Commit:
            if e.outcome is not ok:
                continue
            is_sample = False
            answered_ns = e.answered_ns
        else:
            is_sample = True
            answered_ns = None
        # the interval in which the coordinator applied it: [ns, late]; as the earlier of two
        # observations a commit counts at its answer, as the later one at its send
        ns = late = e.mono_ns
        if answered_ns is not None and answered_ns > ns:
            late = answered_ns
        seq = e.seq
        group = e.group
        for topic, part, value in e.offsets:
            if value < 0:
                continue
            observations += 1
            key = (group, topic, part)
            st = state.get(key)
            if st is None:
                st = state[key] = [-1, 0, -1, 0, -1, [], [], []]
            if value >= st[4]:
                if value > st[4]:
                    st[4] = value
                    # rise times stay sorted for the bisect: a rise recorded later than it happened
                    # (an answer that overtook the stream's send order) can only hide, never invent, a move
                    st[5].append(late if not st[5] or late >= st[5][-1] else st[5][-1])
                    st[6].append(value)
                    st[7].append(seq)
                if is_sample:
                    if value > st[2]:
                        st[2], st[3] = value, seq
                elif value > st[0]:
                    st[0], st[1] = value, seq
                continue
            where = f"group {group} {fmt_tp((topic, part))}"
            if is_sample and value < st[2]:
                log.violation(f"{where}: committed offset sample {value} is below the earlier sample {st[2]}",
                              st[3], seq)
            elif not is_sample and value < st[0]:
                log.violation(f"{where}: accepted commit {value} by {e.source} is below the earlier accepted "
                              f"commit {st[0]}", st[1], seq)
            else:
                i = bisect_left(st[5], ns - slack) - 1
                if i >= 0 and value < st[6][i]:
                    what = "sample" if is_sample else f"commit by {e.source}"
                    log.violation(f"{where}: committed offset went back from {st[6][i]} to {value} ({what})",
                                  st[7][i], seq)
            if is_sample:
                if value > st[2]:
                    st[2], st[3] = value, seq
            elif value > st[0]:
                st[0], st[1] = value, seq
    metrics = {"observations": observations, "partitions": len(state), "violations": log.violation_count}
    return log.result(NAME, f"committed offsets never moved backwards ({observations} observations, "
                      f"{len(state)} partition(s))",
                      f"{log.violation_count} backward move(s) of a committed offset", metrics)
