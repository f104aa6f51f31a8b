"""Invariant 3: fencing. An accepted commit carries the coordinator's current generation.

Definition. For every ``commit`` with outcome ``ok`` and a known generation g
(>= 0), the coordinator's generation (see :mod:`chaos.checkers.coordinator`)
must have been g at some moment in ``[t - slack, t]``, where t is when the
commit's response was recorded. The GroupCoordinator rejects a commit whose
generation differs from the group's (ILLEGAL_GENERATION, 22), or arrives
during CompletingRebalance (REBALANCE_IN_PROGRESS, 27); a commit during
PreparingRebalance is accepted for the generation being left, which is still
current until the join completes, so it is legal (the near miss).

A commit tagged with a generation *newer* than the timeline is not a
violation: the client can only know a generation the coordinator created, so
the observer's timeline is merely lagging. The slack covers the time between
the coordinator accepting the commit and the client recording the response.

Commits with no generation (clients that do not expose it) are not judged;
if no accepted commit can be judged the result is ``unknown``.
"""

from __future__ import annotations

from chaos.checkers.bounds import ResolvedBounds
from chaos.checkers.coordinator import timelines
from chaos.checkers.index import index_of
from chaos.checkers.result import CheckerName, FindingLog, Result
from chaos.history import Commit, History
from chaos.outcome import Outcome

NAME = CheckerName.FENCING


def check(history: History, bounds: ResolvedBounds) -> Result:
    idx = index_of(history)
    log = FindingLog(bounds.max_findings)
    tls = timelines(idx)
    slack = bounds.slack_ns
    judged = unjudged = accepted = 0
    for c in idx.of(Commit):
        if c.outcome is not Outcome.OK:
            continue
        accepted += 1
        g = c.generation
        tl = tls.get(c.group)
        if g is None or g < 0 or tl is None:
            unjudged += 1
            continue
        lo, hi = tl.window(c.mono_ns - slack, c.mono_ns)
        if lo == hi:
            unjudged += 1
            continue
        judged += 1
        gens = tl.gens
        if min(gens[lo:hi]) > g:
            parts = ", ".join(f"{t}-{p}@{o}" for t, p, o in c.offsets[:6])
            log.violation(f"group {c.group}: {c.source} (member {c.member_id}) had a commit of {parts} accepted "
                          f"with generation {g} while the coordinator was at generation {gens[hi - 1]} "
                          f"(at {idx.seconds(c.mono_ns):.3f}s)", c.seq, tl.seqs[hi - 1], tl.seqs[lo])
    metrics = {"accepted_commits": accepted, "judged": judged, "unjudged": unjudged,
               "violations": log.violation_count}
    unknown = None
    if accepted and not judged:
        unknown = (f"none of {accepted} accepted commit(s) could be judged: no generation on the commit or no "
                   "coordinator generation evidence (broker_log / group_state) before it")
    return log.result(NAME, f"all {judged} judged accepted commit(s) carried the coordinator's generation"
                      f"{f' ({unjudged} without evidence, not judged)' if unjudged else ''}",
                      f"{log.violation_count} commit(s) accepted with a stale generation", metrics, unknown=unknown)
