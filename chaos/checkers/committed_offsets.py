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
the clock slack apart to count. Offsets < 0 in samples mean "no committed
offset" and are ignored. A ``fault_start`` whose type mentions ``reset``
(an explicit offset reset in the schedule) restarts the comparison.
"""

from __future__ import annotations

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
    # per (group, topic, partition): [commit_max, commit_max_seq, sample_max, sample_max_seq, recent]
    # recent: observations not yet older than slack: list of (ns, value, seq, is_sample)
    state: dict[tuple, list] = {}
    settled: dict[tuple, tuple[int, int]] = {}
    observations = 0
    for e in idx.stream((Commit, CommittedOffsets, FaultStart)):
        t = type(e)
        if t is FaultStart:
            if "reset" in e.fault_type.lower():
                state.clear()
                settled.clear()
            continue
        if t is Commit:
            if e.outcome is not Outcome.OK:
                continue
            is_sample = False
        else:
            is_sample = True
        ns = e.mono_ns
        for topic, part, value in e.offsets:
            if value < 0:
                continue
            observations += 1
            key = (e.group, topic, part)
            st = state.get(key)
            if st is None:
                state[key] = [-1, 0, -1, 0, [(ns, value, e.seq, is_sample)]]
                if is_sample:
                    state[key][2:4] = [value, e.seq]
                else:
                    state[key][0:2] = [value, e.seq]
                continue
            recent = st[4]
            # Move observations older than the slack into the settled maximum.
            cut = ns - slack
            k = 0
            smax = settled.get(key)
            while k < len(recent) and recent[k][0] < cut:
                o = recent[k]
                if smax is None or o[1] > smax[0]:
                    smax = (o[1], o[2])
                k += 1
            if k:
                del recent[:k]
                settled[key] = smax
            where = f"group {e.group} {fmt_tp((topic, part))}"
            what = "sample" if is_sample else f"commit by {e.source}"
            if is_sample:
                if value < st[2]:
                    log.violation(f"{where}: committed offset sample {value} is below the earlier sample {st[2]}",
                                  st[3], e.seq)
                elif smax is not None and value < smax[0]:
                    log.violation(f"{where}: committed offset went back from {smax[0]} to {value} ({what})",
                                  smax[1], e.seq)
                if value > st[2]:
                    st[2], st[3] = value, e.seq
            else:
                if value < st[0]:
                    log.violation(f"{where}: accepted commit {value} by {e.source} is below the earlier "
                                  f"accepted commit {st[0]}", st[1], e.seq)
                elif smax is not None and value < smax[0]:
                    log.violation(f"{where}: committed offset went back from {smax[0]} to {value} ({what})",
                                  smax[1], e.seq)
                if value > st[0]:
                    st[0], st[1] = value, e.seq
            recent.append((ns, value, e.seq, is_sample))
    metrics = {"observations": observations, "partitions": len(state), "violations": log.violation_count}
    return log.result(NAME, f"committed offsets never moved backwards ({observations} observations, "
                      f"{len(state)} partition(s))",
                      f"{log.violation_count} backward move(s) of a committed offset", metrics)
