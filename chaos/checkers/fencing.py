"""Invariant 3: fencing. An accepted commit carries the coordinator's current generation (or, in a KIP-848
group, a member epoch the coordinator accepts).

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
- a commit its source could not stamp where it happened (``ts_uncertain_ns``,
  a line a stopped-then-resumed worker read late) was sent somewhere in
  ``[mono_ns, mono_ns + ts_uncertain_ns]``: the interval reaches to the end
  of that (or to the answer, whichever is later).

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

KIP-848 groups (a ``group_state`` sample with ``group_type`` consumer) have no
group generation: a member's commit carries its own *member epoch* in the
commit event's ``generation``, while the samples' ``generation`` is the group
epoch, which runs ahead of members still reconciling (docs/architecture.md,
"KRaft and KIP-848: epochs vs generations"). Their commits are judged against
the member's own timeline (:func:`chaos.checkers.coordinator.member_timelines`:
the member's epoch and assignment in every sample, and what can have happened
between two samples), over the same interval as above, by the rule of the
run's Kafka version (the history header's ``experiment.cluster.kafka_version``,
else ``versions.kafka``):

- Kafka 3.7-4.2 (:attr:`CommitRule.MEMBER_EPOCH`): ``ConsumerGroup.validateOffsetCommit``
  looks the member up (unknown: UNKNOWN_MEMBER_ID, 25) and requires the
  commit's epoch to equal the member's current epoch at the coordinator
  (``validateMemberEpoch``, else STALE_MEMBER_EPOCH, 113);
- Kafka 4.3+ (:attr:`CommitRule.ASSIGNMENT_EPOCHS`; KIP-1251 "Assignment
  epochs for consumer groups", KAFKA-20066, apache/kafka PRs 21558 and 21692,
  merged to trunk in March 2026 and first released in 4.3.0): the member's
  current epoch still commits any partition, a newer epoch is refused, and an
  older one is accepted only if every committed partition is held by the
  member (assigned or pending revocation) with
  ``assignmentEpoch(partition) <= clientEpoch <= brokerEpoch``
  (``createAssignmentEpochValidator``), a partition's assignment epoch being
  the member epoch at which it was assigned to the member (kept while it stays
  assigned). A partition not held by the member is refused. A run whose
  version cannot be read is judged by this rule, which accepts more.

A KIP-848 commit is a violation when at no moment of its interval could the
coordinator have accepted it: every part of the interval has samples on both
sides, and in each the member was not in the group (it left or was fenced:
UNKNOWN_MEMBER_ID), or was at a higher epoch than the commit's and (4.3+) some
committed partition was not assigned to it or was assigned at a higher epoch.
What the samples cannot show is given the benefit of the doubt: between two
samples the member's epoch may be anything between theirs; a partition's
assignment epoch is only known to lie between the member's epochs in the last
sample without it and the first with it; a partition that left the
assignment may be pending revocation until the member's epoch moves on.
Such a commit is not judged (never counted as judged and legal) when the
samples cannot decide: no sample lists the member before the interval, none
follows it, a sample in between could not describe the group, two samples are
more than :data:`chaos.checkers.coordinator.MAX_SAMPLE_GAP_NS` apart, or the
coordinator logged the member leaving or rejoining between two samples. As
for generations, a member epoch *newer* than the samples' is the samples
lagging (a sample shows what the coordinator had committed to
``__consumer_offsets`` when it answered), not judged.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from chaos.checkers.bounds import ResolvedBounds
from chaos.checkers.coordinator import (
    LOG_STAMP_UNCERTAINTY_NS,
    MemberEpochTimeline,
    MemberSegment,
    SegmentKind,
    kip848_groups,
    member_timelines,
    timelines,
)
from chaos.checkers.index import HistoryIndex, fmt_tp, index_of
from chaos.checkers.result import FindingLog, Result
from chaos.history import Commit, Header, History
from chaos.model.checker_name import CheckerName
from chaos.outcome import Outcome

NAME = CheckerName.FENCING

__all__ = ["LOG_STAMP_UNCERTAINTY_NS", "NAME", "CommitRule", "Judgement", "check", "commit_rule",
           "judge_member_commit", "judged_interval"]


class CommitRule(StrEnum):
    """How the coordinator validates the epoch of a KIP-848 member's OffsetCommit (module docstring)."""

    #: Kafka 3.7-4.2: the commit's epoch must be the member's current epoch
    MEMBER_EPOCH = "member-epoch"
    #: Kafka 4.3+ (KIP-1251): an older epoch may commit partitions assigned to the member at or before it
    ASSIGNMENT_EPOCHS = "assignment-epochs"


#: the first Kafka release with KIP-1251's assignment epochs (4.3.0)
KIP_1251_SINCE = (4, 3)
_VERSION = re.compile(r"^\s*(\d+)\.(\d+)")


def commit_rule(header: Header) -> tuple[CommitRule, str]:
    """The rule the run's coordinator applied to KIP-848 commits, and the Kafka version it was read from
    (``"unknown"``: no readable version in the header; judged by the rule that accepts more)."""
    cluster = header.experiment.get("cluster")
    version: Any = cluster.get("kafka_version") if isinstance(cluster, Mapping) else None
    version = version or header.versions.get("kafka")
    m = _VERSION.match(version) if isinstance(version, str) else None
    if m is None:
        return CommitRule.ASSIGNMENT_EPOCHS, "unknown"
    since = (int(m.group(1)), int(m.group(2))) >= KIP_1251_SINCE
    return (CommitRule.ASSIGNMENT_EPOCHS if since else CommitRule.MEMBER_EPOCH), version.strip()


def judged_interval(c: Commit, slack_ns: int) -> tuple[int, int]:
    """[start, end] (mono ns) in which the coordinator can have judged commit ``c`` (see module docstring)."""
    # a commit its source could not stamp where it happened was sent in [mono_ns, mono_ns + ts_uncertain_ns]
    late = c.mono_ns + (c.ts_uncertain_ns or 0)
    if c.answered_ns is not None:
        return c.mono_ns - LOG_STAMP_UNCERTAINTY_NS, max(c.answered_ns, late) + LOG_STAMP_UNCERTAINTY_NS
    return c.mono_ns - slack_ns - LOG_STAMP_UNCERTAINTY_NS, late + LOG_STAMP_UNCERTAINTY_NS


class Judgement(StrEnum):
    """The verdict on one accepted KIP-848 commit."""

    LEGAL = "legal"
    VIOLATION = "violation"
    #: the samples cannot decide
    UNJUDGED = "unjudged"


@dataclass(frozen=True, slots=True)
class MemberCommitJudgement:
    """A verdict, why (the finding's clause, or why the commit is not judged) and the samples it rests on."""

    judgement: Judgement
    why: str = ""
    evidence: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class _Refusal:
    """One segment of the interval in which the coordinator would have refused the commit, and why."""

    segment: MemberSegment
    #: None: the member was not in the group; else the committed partitions KIP-1251 refuses ("" for the
    #: member-epoch rule, which refuses them all)
    partitions: str | None
    evidence: tuple[int, ...] = ()


def judge_member_commit(c: Commit, epoch: int, tl: MemberEpochTimeline | None, start: int, end: int,
                        rule: CommitRule) -> MemberCommitJudgement:
    """Could the coordinator have accepted commit ``c``, tagged with member epoch ``epoch``, at some moment of
    [start, end] by ``rule``, as far as the member's samples ``tl`` tell? (module docstring)"""
    if tl is None:
        return MemberCommitJudgement(Judgement.UNJUDGED, "no sample lists the member")
    parts = sorted({(t, p) for t, p, _ in c.offsets})
    blind: list[str] = []
    newer = False
    refusals: list[_Refusal] = []
    for seg in tl.segments(start, end):
        if seg.kind is SegmentKind.UNKNOWN:
            blind.append(seg.reason)
            continue
        if seg.kind is SegmentKind.ABSENT:
            refusals.append(_Refusal(seg, None))
            continue
        if epoch >= seg.epoch_lo and (seg.epoch_hi is None or epoch <= seg.epoch_hi):
            return MemberCommitJudgement(Judgement.LEGAL)
        if seg.epoch_hi is not None and epoch > seg.epoch_hi:
            newer = True
            continue
        # whenever the member was in the group in this segment, it was at a higher epoch than the commit's
        if rule is CommitRule.MEMBER_EPOCH:
            refusals.append(_Refusal(seg, ""))
            continue
        ends = seg.present_ends
        bad = [tp for tp in parts if not any(o.may_commit(tp, epoch) for o in ends)]
        if not bad:
            return MemberCommitJudgement(Judgement.LEGAL)
        reasons: list[str] = []
        cited: list[int] = []
        for tp in bad[:4]:
            holds = [h for o in ends if (h := o.holds.get(tp)) is not None]
            if holds:
                reasons.append(f"{fmt_tp(tp)} was assigned to it at epoch {min(h.epoch_lo for h in holds)} or later")
                cited.extend(s for h in holds for s in (h.seq, h.lo_seq) if s is not None)
            else:
                reasons.append(f"{fmt_tp(tp)} was not assigned to it")
        refusals.append(_Refusal(seg, ", ".join(reasons) + (", ..." if len(bad) > 4 else ""), tuple(cited)))
    if blind:
        return MemberCommitJudgement(Judgement.UNJUDGED, f"the samples cannot tell: {blind[0]}")
    if newer:
        return MemberCommitJudgement(Judgement.UNJUDGED, "its epoch is newer than the samples'")
    return MemberCommitJudgement(Judgement.VIOLATION, _refusal_text(epoch, refusals, rule),
                                 tuple(s for r in refusals for s in r.segment.seqs + r.evidence))


def _refusal_text(epoch: int, refusals: list[_Refusal], rule: CommitRule) -> str:
    """``accepted with member epoch N`` and one clause per distinct refusal, in time order."""
    clauses: list[str] = []
    for r in refusals:
        seg = r.segment
        if r.partitions is None:
            clause = ("while the member was not in the group (the coordinator answers UNKNOWN_MEMBER_ID; "
                      f"samples {', '.join(map(str, seg.seqs))} do not list it)")
        else:
            at = (f"epoch {seg.epoch_lo}" if seg.epoch_hi in (None, seg.epoch_lo)
                  else f"epochs {seg.epoch_lo}-{seg.epoch_hi}")
            clause = f"while the coordinator had the member at {at}"
            clause += (" (an OffsetCommit must carry the member's current epoch, else STALE_MEMBER_EPOCH)"
                       if rule is CommitRule.MEMBER_EPOCH else
                       f" and {r.partitions} (KIP-1251: an older member epoch commits only partitions assigned "
                       "to the member at or before it)")
        if clause not in clauses:
            clauses.append(clause)
    return f"accepted with member epoch {epoch} " + ", then ".join(clauses)


def check(history: History, bounds: ResolvedBounds) -> Result:
    idx = index_of(history)
    log = FindingLog(bounds.max_findings)
    tls = timelines(idx)
    kip848 = kip848_groups(idx)
    members = member_timelines(idx) if kip848 else {}
    rule, version = commit_rule(history.header)
    judged = unjudged = accepted = send_stamped = 0
    judged_epoch = unjudged_epoch = violations_epoch = 0
    for c in idx.of(Commit):
        if c.outcome is not Outcome.OK:
            continue
        accepted += 1
        g = c.generation
        if c.group in kip848:
            verdict = (judge_member_commit(c, g, members.get((c.group, c.member_id)),
                                           *judged_interval(c, bounds.slack_ns), rule)
                       if g is not None and g >= 0 and c.member_id is not None
                       else MemberCommitJudgement(Judgement.UNJUDGED, "no member epoch on the commit"))
            if verdict.judgement is Judgement.UNJUDGED:
                unjudged += 1
                unjudged_epoch += 1
                continue
            judged += 1
            judged_epoch += 1
            send_stamped += c.answered_ns is not None
            if verdict.judgement is Judgement.VIOLATION:
                violations_epoch += 1
                log.violation(f"group {c.group}: {c.source} (member {c.member_id}) had a commit of {_parts(c)} "
                              f"{verdict.why} (Kafka {version}; {_when(idx, c)})", c.seq, *verdict.evidence)
            continue
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
            when = (f"sent at {idx.seconds(c.mono_ns):.3f}s, {(c.mono_ns - tl.times[lo]) / 1e6:.1f} ms after the "
                    f"coordinator logged generation {gens[lo]}" if c.answered_ns is not None
                    else f"reported at {idx.seconds(c.mono_ns):.3f}s, no send stamp")
            log.violation(f"group {c.group}: {c.source} (member {c.member_id}) had a commit of {_parts(c)} accepted "
                          f"with generation {g} while the coordinator was at generation {gens[hi - 1]} ({when})",
                          c.seq, tl.seqs[hi - 1], tl.seqs[lo])
    judged_gen = judged - judged_epoch
    metrics = {"accepted_commits": accepted, "judged": judged, "judged_by_send_stamp": send_stamped,
               "unjudged": unjudged, "violations": log.violation_count,
               "judged_by_generation": judged_gen, "judged_by_member_epoch": judged_epoch,
               "unjudged_member_epoch": unjudged_epoch, "member_epoch_violations": violations_epoch}
    unknown = None
    if accepted and not judged:
        unknown = (f"none of {accepted} accepted commit(s) could be judged: no generation or member epoch on the "
                   "commit, or no coordinator evidence around it (broker_log / group_state; for a KIP-848 member, "
                   "samples listing it before and after the commit)")
    kinds = f"{judged_gen} by generation, {judged_epoch} by member epoch"
    if kip848:
        kinds += f", Kafka {version}: {rule.value} rule"
    return log.result(NAME, f"all {judged} judged accepted commit(s) were legal ({kinds})"
                      f"{f'; {unjudged} without evidence, not judged' if unjudged else ''}",
                      f"{log.violation_count} commit(s) accepted with a stale generation or member epoch ({kinds})",
                      metrics, unknown=unknown)


def _parts(c: Commit) -> str:
    return ", ".join(f"{t}-{p}@{o}" for t, p, o in c.offsets[:6]) + (", ..." if len(c.offsets) > 6 else "")


def _when(idx: HistoryIndex, c: Commit) -> str:
    return (f"sent at {idx.seconds(c.mono_ns):.3f}s, answered {(c.answered_ns - c.mono_ns) / 1e6:.1f} ms later"
            if c.answered_ns is not None else f"reported at {idx.seconds(c.mono_ns):.3f}s, no send stamp")
