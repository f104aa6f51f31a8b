"""Invariant 3: fencing. An accepted commit carries the coordinator's current generation.

Definition. For every ``commit`` with outcome ``ok`` and a known generation g
(>= 0), the coordinator's generation (see :mod:`chaos.checkers.coordinator`)
must have been g at some moment of the interval in which the coordinator can
have judged the commit. The GroupCoordinator rejects a commit whose
generation differs from the group's (ILLEGAL_GENERATION, 22), or arrives
during CompletingRebalance (REBALANCE_IN_PROGRESS, 27); a commit during
PreparingRebalance is accepted for the generation being left, which is still
current until the join completes, so it is legal (a near miss).

The interval comes from the evidence, not from a fixed window:

- a commit stamped when it was *sent* (``mono_ns``) and *answered*
  (``answered_ns``, :class:`chaos.history.Commit`) was judged somewhere in
  ``[sent, answered]``. A commit in flight across a generation bump (sent
  before it, answered after) is therefore excused; one *sent* after the
  coordinator logged the bump, tagged with the old generation and accepted, is
  a violation (the coordinator bumps the generation in ``onCompleteJoin`` and
  logs ``Stabilized group G generation N`` right after, under the group lock:
  GroupCoordinator.scala, Kafka 2.8-3.9);
- the timeline's times are the coordinator's own log stamps
  (:mod:`chaos.workload.observer`): log4j's ``yyyy-MM-dd HH:mm:ss,SSS``,
  truncated to the millisecond, mapped from the wall clock onto
  CLOCK_MONOTONIC when the line is read. A bump stamped t happened in
  ``[t, t + 1 ms)`` give or take the mapping; both ends of the interval are
  widened by :data:`LOG_STAMP_UNCERTAINTY_NS` for that;
- a commit without ``answered_ns`` is stamped when the client *reported* it
  (auto commits, the Java VerifiableConsumer's ``offsets_committed``, histories
  written before ``answered_ns`` existed): its send time is not in the history,
  so it is judged in ``[reported - clock_slack_s, reported]`` (the slack is the
  assumed longest time from send to report; the only use of the fixed window
  left here).

What remains uncertain: the generation a commit event carries is the client's
own view read just before the send (:mod:`chaos.workload.consumer`); a library
that builds the request on another thread (librdkafka) could, in the
microseconds between the two, take a JoinGroup answer and send the newer
generation. A wall-clock step (not slew) between the coordinator writing a line
and the observer reading it shifts the line's stamp by the step.

A commit tagged with a generation *newer* than the timeline is not a
violation: the client can only know a generation the coordinator created, so
the observer's timeline is merely lagging.

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

#: How far a coordinator log line's stamp may be from when it happened: log4j's stamp is truncated to the
#: millisecond (1 ms), plus 1 ms for mapping the wall clock onto CLOCK_MONOTONIC at read time (two clock reads
#: microseconds apart, and NTP slew of at most 500 ppm over the observer's read lag).
LOG_STAMP_UNCERTAINTY_NS = 2_000_000


def judged_interval(c: Commit, slack_ns: int) -> tuple[int, int]:
    """[start, end] (mono ns) in which the coordinator can have judged commit ``c`` (see module docstring)."""
    if c.answered_ns is not None:
        return c.mono_ns - LOG_STAMP_UNCERTAINTY_NS, max(c.answered_ns, c.mono_ns) + LOG_STAMP_UNCERTAINTY_NS
    return c.mono_ns - slack_ns - LOG_STAMP_UNCERTAINTY_NS, c.mono_ns + LOG_STAMP_UNCERTAINTY_NS


def check(history: History, bounds: ResolvedBounds) -> Result:
    idx = index_of(history)
    log = FindingLog(bounds.max_findings)
    tls = timelines(idx)
    judged = unjudged = accepted = send_stamped = 0
    for c in idx.of(Commit):
        if c.outcome is not Outcome.OK:
            continue
        accepted += 1
        g = c.generation
        tl = tls.get(c.group)
        if g is None or g < 0 or tl is None:
            unjudged += 1
            continue
        start, end = judged_interval(c, bounds.slack_ns)
        lo, hi = tl.window(start, end)
        if lo == hi:
            unjudged += 1
            continue
        judged += 1
        send_stamped += c.answered_ns is not None
        gens = tl.gens
        if min(gens[lo:hi]) > g:
            parts = ", ".join(f"{t}-{p}@{o}" for t, p, o in c.offsets[:6])
            when = (f"sent at {idx.seconds(c.mono_ns):.3f}s, {(c.mono_ns - tl.times[lo]) / 1e6:.1f} ms after the "
                    f"coordinator logged generation {gens[lo]}" if c.answered_ns is not None
                    else f"reported at {idx.seconds(c.mono_ns):.3f}s, no send stamp")
            log.violation(f"group {c.group}: {c.source} (member {c.member_id}) had a commit of {parts} accepted "
                          f"with generation {g} while the coordinator was at generation {gens[hi - 1]} ({when})",
                          c.seq, tl.seqs[hi - 1], tl.seqs[lo])
    metrics = {"accepted_commits": accepted, "judged": judged, "judged_by_send_stamp": send_stamped,
               "unjudged": unjudged, "violations": log.violation_count}
    unknown = None
    if accepted and not judged:
        unknown = (f"none of {accepted} accepted commit(s) could be judged: no generation on the commit or no "
                   "coordinator generation evidence (broker_log / group_state) before it")
    return log.result(NAME, f"all {judged} judged accepted commit(s) carried the coordinator's generation"
                      f"{f' ({unjudged} without evidence, not judged)' if unjudged else ''}",
                      f"{log.violation_count} commit(s) accepted with a stale generation", metrics, unknown=unknown)
