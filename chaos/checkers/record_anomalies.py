"""Record-level anomalies (issue 16, item 4): lost records, duplicates per rebalance, poll skips and
non-monotonic polls, inconsistent offsets.

The ideas are those of Jepsen's Kafka workload (``jepsen.tests.kafka``: *lost-write* / *unseen*,
*poll-skip*, *nonmonotonic-poll*, *inconsistent-offsets*), judged on the data the delivery checker
reads (``send_ok``, ``consumed``, ``final_read``, and the members' ``assigned`` / ``revoked`` /
``lost`` / ``member_start`` / ``member_stop`` for who owned what). Definitions:

*Offsets that exist.* Our workload has no transactions and no compaction (docs/architecture.md,
"The history"; the producer is idempotent, KIP-98), so a partition's offsets are dense: every offset
acknowledged (``send_ok``), read by any member (``consumed``) or by the final reader (``final_read``)
exists. A gap in a reader's offsets over offsets *known* to exist is a skip; a gap over offsets no event
names (a ``send_unknown`` record nobody read) is not judged.

*Lost records* — the delivery checker's notion, not another one: a record acknowledged by ``send_ok``
that no member processed and the final reader did not see is lost (a violation citing the ``send_ok``;
the text says delivery fails for the same record). Following Jepsen, each is also classified: *lost
write* when some later offset of its partition was read (readers went past it), *unseen* when nothing
at or after it was ever read.

*Ownership segments.* A member holds a partition from the ``assigned`` event that gives it (an
eager, non-incremental assignment replaces the whole holding and starts every partition afresh: the
client drops its positions and starts again from the committed offsets — librdkafka ``rd_kafka_assign``,
the Java client's eager ``ConsumerCoordinator.onJoinPrepare``) until ``revoked`` / ``lost`` removes it or the member
stops or restarts. Within one holding, the consumer's fetch position only moves forward by what it
returned (KIP-429 keeps the position of partitions a member retains across a cooperative rebalance;
KIP-848 reconciliation likewise). A *segment* is one holding of one partition by one member *in one
generation* — the ``generation`` carried by its ``consumed`` events, which is the classic group
generation, or for a KIP-848 member its member epoch (the assignment epoch it has reconciled to,
KIP-848 "Member Epoch - Reconciliation of the group"). A generation change (a rebalance) ends a
segment even when the member keeps the partition.

*Poll skips and non-monotonic polls.* Within one segment, the member's consumed offsets of the
partition, batch after batch and inside a batch, must go up by exactly one over the offsets that exist:
a step back (an offset at or below one already returned) is a *non-monotonic poll*, a step over
existing offsets is a *poll skip*; both are violations, citing the assignment that began the holding
and the two batches. Across segments (a rebalance, a new holding) the position legitimately restarts
from the committed offset — a step back re-delivers records (at-least-once) and a step forward skips
what another member processed — so those are counted as figures, not judged (Jepsen judges them only
for consumers using ``assign``). Members here always ``subscribe``: ``member_start`` does not record
manual assignment (the workload never assigns manually), so no member is judged across its whole life.
Batches a member processes while holding nothing of that partition (a zombie after its revocation,
``wrong_mode: ignore_revoke``, or a member that records no ownership) are counted as unowned and not
judged here (ownership-time judges zombies). The first batch of a segment is not compared with the
committed offset it started from: a position ahead of unprocessed records is delivery's lost record.
Members the experiment declares as the application (``app`` / ``command``) are not judged for poll order
at all (:func:`application_members`): their ``consumed`` events are the application's processing order,
and its code may ``seek``, which nothing records; their records still count for everything else.

*Duplicates per rebalance.* Every delivery of a (group, partition, offset) after its first is a
duplicate (the same count as the delivery checker's ``duplicates``). Each is attributed to the
rebalance it follows: the one that handed the partition to the re-delivering member — the generation
(KIP-848: member epoch) of the ``assigned`` event that began its holding — when that generation is later
than the one of the holding that delivered the offset before (the partition moved on, or came back,
before the work was committed). A duplicate within the previous delivery's segment is a re-read
without any rebalance (also a non-monotonic poll); one by a holding of the same generation follows no
rebalance (a KIP-345 replacement handing the assignment on within the generation, a zombie); one
outside a recorded holding, or whose holding's generation is unknown, is unattributed. (The
generation a ``consumed`` event carries is not used here: a member may already report the new
generation while it still processes what it fetched in the old holding.) A generation number handed out
twice (a ghost generation, see invariant 6) counts once. Figures, never violations (at-least-once allows
duplicates): ``duplicates``, ``duplicates_after_rebalance``, ``rebalances`` (per group, the distinct
generations handed out by ``assigned`` events, less the first), ``duplicates_per_rebalance``,
``duplicates_per_1000_records`` (per 1000 consumed records), ``max_duplicates_one_rebalance``,
``duplicates_within_segment``, ``duplicates_without_rebalance``, ``duplicates_unattributed``; a note
per rebalance cites its first re-delivery.

*Inconsistent offsets.* One (topic, partition, offset) must hold one record. ``send_ok`` carries the
record's key and value: two acknowledgements of one offset with different keys or values are a
violation. ``consumed`` and ``final_read`` carry offsets only, no content, so whether readers saw the
acknowledged content is **not judged** — the summary says so and ``content_unjudged_reads`` counts
those reads; it is never reported as passed. What offsets alone do show is judged: a record a member
read at an offset strictly between the first and the last offset the final reader read of that
partition, which the final reader did not find, vanished from the log after being read — a violation
(the final reader reads each partition sequentially from its start; Kafka truncates only what was never
below the high watermark, and unclean leader election is off: docs/architecture.md, "Links, lanes and
the network"). Below the final reader's first offset nothing is judged: the log may start later
(retention, DeleteRecords).

No consumed record at all, or (application members aside) none inside a recorded holding: ``unknown``
(never ``true``), unless a violation was found.

Order: events of one member are in the history in the order the member made them (each source stamps
with CLOCK_MONOTONIC, or the Java member with the JVM's clock mapped onto it, which goes back only if the
wall clock is stepped back; ties keep the source's own order: docs/architecture.md, "The history").
The checker is one pass over the membership and consumed events, linear in the history; the offsets
that exist are indexed (sorted, bisected) after it, only for partitions with a gap to judge.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import cast

from chaos.checkers.bounds import ResolvedBounds
from chaos.checkers.index import HistoryIndex, fmt_tp, index_of
from chaos.checkers.result import FindingLog, Result
from chaos.history import Assigned, Consumed, FinalRead, History, Lost, MemberStart, MemberStop, Revoked, SendOk
from chaos.model.checker_name import CheckerName

NAME = CheckerName.RECORD_ANOMALIES

_TP = tuple[str, int]
#: a segment: (member, holding id, generation) — one holding of one partition in one generation
_Seg = tuple[str, int, int | None]


@dataclass(slots=True)
class _Rebalance:
    """Duplicates attributed to the rebalance into one generation of one group."""

    count: int
    first_seq: int
    first_where: str


@dataclass(slots=True)
class _Pass:
    """The state of the one pass over membership and consumed events, and what it counted."""

    idx: HistoryIndex
    log: FindingLog
    acked: dict[_TP, set[int]]
    final: dict[_TP, set[int]]
    #: members whose consumed events are not the client's poll order (:func:`application_members`)
    app_members: frozenset[str]
    #: steps forward over a gap: (tp, member, within one segment, a, b, seq_a, seq_b, generation, holding id)
    gaps: list[tuple[_TP, str, bool, int, int, int, int, int | None, int]] = field(default_factory=list)
    holding: dict[str, dict[_TP, int]] = field(default_factory=dict)  # member -> partition -> holding id
    holding_seq: dict[int, int] = field(default_factory=dict)  # holding id -> seq of the assigned that began it
    holding_gen: dict[int, int | None] = field(default_factory=dict)  # holding id -> that assigned's generation
    holdings: int = 0
    #: member -> partition -> (segment of its last batch, last offset read, that batch's seq)
    last_read: dict[str, dict[_TP, tuple[_Seg | None, int, int]]] = field(default_factory=dict)
    #: (group, topic, partition) -> offset -> segment of its latest delivery
    delivered: dict[tuple[str, str, int], dict[int, _Seg | None]] = field(default_factory=dict)
    generations: dict[str, set[int]] = field(default_factory=dict)  # group -> generations given by assigned events
    per_rebalance: dict[tuple[str, int], _Rebalance] = field(default_factory=dict)
    consumed_records: int = 0
    batches: int = 0
    unowned_batches: int = 0
    app_batches: int = 0
    poll_skips: int = 0
    skipped_records: int = 0
    nonmonotonic_polls: int = 0
    skips_across: int = 0
    backwards_across: int = 0
    duplicates: int = 0
    dup_within_segment: int = 0
    dup_no_rebalance: int = 0
    dup_unattributed: int = 0

    def run(self) -> None:
        """Consumed batches in history order, with the membership events between them applied first (a merge
        of the index's two cached lists: no stream of its own to build)."""
        membership = self.idx.membership()
        j, m = 0, len(membership)
        holding, last_read, delivered, apps = self.holding, self.last_read, self.delivered, self.app_members
        nothing: dict[_TP, int] = {}
        batches = records = unowned = app_batches = 0
        for c in self.idx.of(Consumed):
            while j < m and membership[j].seq < c.seq:
                self.membership_event(membership[j])
                j += 1
            offs = c.offsets
            n = len(offs)
            if not n:
                continue
            batches += 1
            records += n
            tp = (c.topic, c.partition)
            src = c.source
            span = holding.get(src, nothing).get(tp)
            seg: _Seg | None = None if span is None else (src, span, c.generation)
            first = offs[0]
            # one run of consecutive offsets (the common case, checked without a loop for 1 or 2 offsets)
            regular = n == 1 or (offs[-1] - first == n - 1 and (n == 2 or offs == tuple(range(first, first + n))))
            if src in apps:
                app_batches += 1  # the application's processing order: poll order not judged
            else:
                if seg is None:
                    unowned += 1
                mine = last_read.get(src)
                if mine is None:
                    mine = last_read[src] = {}
                prev = mine.get(tp)
                if prev is not None and first != prev[1] + 1:
                    self.step(tp, src, prev[0], seg, prev[1], first, prev[2], c.seq, c.generation)
                if not regular and seg is not None:
                    for k in range(1, n):
                        if offs[k] != offs[k - 1] + 1:
                            self.step(tp, src, seg, seg, offs[k - 1], offs[k], c.seq, c.seq, c.generation)
                mine[tp] = (seg, offs[-1], c.seq)
            key = (c.group, c.topic, c.partition)
            d = delivered.get(key)
            if d is None:
                d = delivered[key] = {}
            if not regular or (d and not d.keys().isdisjoint(offs)):
                self.count_duplicates(d, seg, c)
            d.update(dict.fromkeys(offs, seg))
        while j < m:
            self.membership_event(membership[j])
            j += 1
        self.batches, self.consumed_records, self.unowned_batches, self.app_batches = batches, records, unowned, \
            app_batches
        self.judge_gaps()

    def membership_event(self, e: MemberStart | Assigned | Revoked | Lost | MemberStop) -> None:
        t = type(e)
        if t is Assigned:
            a = cast(Assigned, e)
            mine = self.holding.setdefault(a.source, {})
            if not a.incremental:
                mine.clear()  # an eager assignment replaces the holding; positions restart from commits
            for tp in a.partitions:
                self.holdings += 1
                mine[tp] = self.holdings
                self.holding_seq[self.holdings] = a.seq
                self.holding_gen[self.holdings] = a.generation
            if a.generation is not None:
                self.generations.setdefault(a.group, set()).add(a.generation)
        elif t is Revoked or t is Lost:
            held = self.holding.get(e.source)
            if held:
                for tp in cast("Revoked | Lost", e).partitions:
                    held.pop(tp, None)
        else:  # member_start / member_stop: a new process, or none: nothing held, no position
            self.holding.pop(e.source, None)
            self.last_read.pop(e.source, None)

    def step(self, tp: _TP, src: str, before: _Seg | None, now: _Seg | None, a: int, b: int, seq_a: int, seq_b: int,
             gen: int | None) -> None:
        """Member ``src`` read offset ``b`` (segment ``now``, event ``seq_b``) right after offset ``a`` (segment
        ``before``, event ``seq_a``), ``b != a + 1``: within one segment a step back is a violation, between two
        holdings it is counted; a step forward is judged once the pass is over (:meth:`judge_gaps`: which
        offsets exist is known only then). A batch outside any holding is not judged."""
        if now is None or before is None:
            return
        within = before == now
        if b > a:
            self.gaps.append((tp, src, within, a, b, seq_a, seq_b, gen, now[1]))
        elif not within:
            self.backwards_across += 1
        else:
            self.nonmonotonic_polls += 1
            where = "within one batch" if seq_a == seq_b else "in its next batch"
            self.log.violation(f"non-monotonic poll: {src} read {fmt_tp(tp)} offset {b} after offset {a} {where}, "
                               f"within one ownership in generation {gen} (no rebalance or revocation between)",
                               self.holding_seq[now[1]], seq_a, seq_b)

    def judge_gaps(self) -> None:
        """Each step over a gap: a poll skip within one segment, counted between holdings, when offsets known to
        exist (acknowledged, read by any member of any group, or by the final reader) lie in the gap."""
        if not self.gaps:
            return
        wanted = {g[0] for g in self.gaps}
        exist: dict[_TP, set[int]] = {tp: self.acked.get(tp, set()) | self.final.get(tp, set()) for tp in wanted}
        for (_group, topic, part), d in self.delivered.items():
            got = exist.get((topic, part))
            if got is not None:
                got.update(d)
        known = {tp: sorted(offs) for tp, offs in exist.items()}
        for tp, src, within, a, b, seq_a, seq_b, gen, span in self.gaps:
            arr = known[tp]
            skipped = bisect_left(arr, b) - bisect_right(arr, a)
            if skipped <= 0:
                continue  # a gap over offsets that no event shows to exist
            if not within:
                self.skips_across += 1
                self.log.note(f"{src} resumed {fmt_tp(tp)} at offset {b} in a new ownership after reading {a} in an "
                              f"earlier one: {skipped} record(s) in between were left to others (allowed across "
                              "rebalances)", seq_a, seq_b)
                continue
            self.poll_skips += 1
            self.skipped_records += skipped
            where = "within one batch" if seq_a == seq_b else "in its next batch"
            self.log.violation(f"poll skip: {src} read {fmt_tp(tp)} offset {b} right after offset {a} {where}, "
                               f"skipping {skipped} record(s) that exist, within one ownership in generation {gen} "
                               "(no rebalance or revocation between)", self.holding_seq[span], seq_a, seq_b)

    def count_duplicates(self, d: dict[int, _Seg | None], seg: _Seg | None, c: Consumed) -> None:
        """Count and attribute the offsets of ``c`` already delivered in its group (module docstring)."""
        gen = None if seg is None else self.holding_gen[seg[1]]
        here: set[int] = set()
        for o in c.offsets:
            if o in here:
                prev = seg  # the batch itself repeats the offset
            elif o in d:
                prev = d[o]
            else:
                here.add(o)
                continue
            here.add(o)
            self.duplicates += 1
            if seg is not None and prev == seg:
                self.dup_within_segment += 1
                continue
            before = None if prev is None else self.holding_gen[prev[1]]
            if gen is None or before is None:
                self.dup_unattributed += 1
            elif gen <= before:
                self.dup_no_rebalance += 1
            else:
                rb = self.per_rebalance.get((c.group, gen))
                if rb is None:
                    rb = self.per_rebalance[(c.group, gen)] = _Rebalance(
                        0, c.seq, f"{fmt_tp((c.topic, c.partition))}@{o} by {c.source}")
                rb.count += 1


def application_members(history: History) -> frozenset[str]:
    """Members the run's experiment declares as the application (``app`` / ``command`` consumers, named
    ``consumer-<i>`` as :mod:`chaos.workload.run` names them). Their ``consumed`` events are not the client's
    poll order: an instrumented application marks records processed in its own order
    (:mod:`chaos.instrument.ledger`, explicit mode), and its own code may ``seek``, which no event records."""
    experiment = history.header.experiment
    workload = experiment.get("workload") if isinstance(experiment, Mapping) else None
    consumers = workload.get("consumers") if isinstance(workload, Mapping) else None
    if not isinstance(consumers, list):
        return frozenset()
    return frozenset(f"consumer-{i}" for i, spec in enumerate(consumers)
                     if isinstance(spec, Mapping) and (spec.get("app") or spec.get("command")))


def check(history: History, bounds: ResolvedBounds) -> Result:
    idx = index_of(history)
    log = FindingLog(bounds.max_findings)

    # acknowledged records; one offset acknowledged for two different records is inconsistent
    sent: dict[_TP, list[SendOk]] = {}
    for s in idx.of(SendOk):
        lst = sent.get((s.topic, s.partition))
        if lst is None:
            lst = sent[(s.topic, s.partition)] = []
        lst.append(s)
    acked: dict[_TP, set[int]] = {}
    acked_twice = 0
    for tp, lst in sent.items():
        offsets = acked[tp] = {s.offset for s in lst}
        if len(offsets) == len(lst):
            continue  # every offset acknowledged once (the common case)
        first_of: dict[int, SendOk] = {}
        for s in lst:
            first = first_of.setdefault(s.offset, s)
            if first is s:
                continue
            acked_twice += 1
            if first.key != s.key or first.value != s.value:
                log.violation(f"inconsistent offsets: {fmt_tp(tp)}@{s.offset} was acknowledged for two different "
                              f"records (key {first.key!r} value {first.value!r}, then key {s.key!r} value "
                              f"{s.value!r})", first.seq, s.seq)
    final: dict[_TP, set[int]] = {}
    final_records = 0
    for fr in idx.of(FinalRead):
        final_records += len(fr.records)
        for part, off in fr.records:
            got = final.get((fr.topic, part))
            if got is None:
                got = final[(fr.topic, part)] = set()
            got.add(off)

    p = _Pass(idx, log, acked, final, application_members(history))
    p.run()

    # lost records, as delivery defines them: acknowledged, processed by no member, not in the final read
    read_by_members: dict[_TP, set[int]] = {}
    for (_group, topic, part), d in p.delivered.items():
        read_by_members.setdefault((topic, part), set()).update(d)
    lost = lost_writes = 0
    acked_total = 0
    for tp in sorted(acked):
        offsets = acked[tp]
        acked_total += len(offsets)
        members, at_end = read_by_members.get(tp, set()), final.get(tp, set())
        missing = sorted(offsets - members - at_end)
        if not missing:
            continue
        top = max(max(members, default=-1), max(at_end, default=-1))
        seq_of: dict[int, int] = {}
        for s in sent[tp]:
            seq_of.setdefault(s.offset, s.seq)
        for o in missing:
            lost += 1
            if o < top:
                lost_writes += 1
                how = f"a lost write: readers went past it, to offset {top}"
            else:
                how = "unseen: nothing at or after it was ever read"
            log.violation(f"lost record: {fmt_tp(tp)}@{o} was acknowledged (send_ok) but never processed nor seen by "
                          f"the final read ({how}); delivery fails for the same record", seq_of[o])

    # a record members read at an offset inside the range the final reader read without finding it: it vanished
    # from the log (below the reader's first offset the log may have started later: retention, DeleteRecords)
    vanished: list[tuple[_TP, int]] = []
    for tp, at_end in final.items():
        if at_end:
            lo, hi = min(at_end), max(at_end)
            vanished += [(tp, o) for o in sorted(read_by_members.get(tp, set()) - at_end) if lo < o < hi]
    if vanished:
        wanted = set(vanished)
        first_read: dict[tuple[_TP, int], int] = {}
        for c in idx.of(Consumed):
            tp = (c.topic, c.partition)
            for o in c.offsets:
                if (tp, o) in wanted:
                    first_read.setdefault((tp, o), c.seq)
        final_seq = {fr.topic: fr.seq for fr in idx.of(FinalRead)}
        for tp, o in vanished:
            log.violation(f"inconsistent offsets: {fmt_tp(tp)}@{o} was read by a member, but the final reader read "
                          f"{fmt_tp(tp)} from offset {min(final[tp])} to {max(final[tp])} without finding it: a record "
                          "vanished from the log after it was read", first_read[(tp, o)], final_seq[tp[0]])

    for (group, gen), rb in sorted(p.per_rebalance.items()):
        log.note(f"group {group}: {rb.count} record(s) delivered again after the rebalance into generation {gen} "
                 f"(first: {rb.first_where}; allowed: at-least-once)", rb.first_seq)
    rebalances = sum(max(0, len(g) - 1) for g in p.generations.values())
    after = sum(rb.count for rb in p.per_rebalance.values())
    per_rebalance = after / rebalances if rebalances else 0.0
    per_1000 = 1000 * p.duplicates / p.consumed_records if p.consumed_records else 0.0
    content_unjudged = p.consumed_records + final_records
    inconsistent = log.violation_count - lost - p.poll_skips - p.nonmonotonic_polls
    metrics: dict[str, float] = {
        "acked": acked_total, "lost": lost, "lost_writes": lost_writes, "unseen": lost - lost_writes,
        "consumed_records": p.consumed_records, "batches": p.batches, "unowned_batches": p.unowned_batches,
        "application_batches": p.app_batches,
        "poll_skips": p.poll_skips, "skipped_records": p.skipped_records, "nonmonotonic_polls": p.nonmonotonic_polls,
        "poll_skips_across_rebalance": p.skips_across, "nonmonotonic_polls_across_rebalance": p.backwards_across,
        "duplicates": p.duplicates, "duplicates_after_rebalance": after, "duplicates_within_segment": p.dup_within_segment,
        "duplicates_without_rebalance": p.dup_no_rebalance, "duplicates_unattributed": p.dup_unattributed,
        "rebalances": rebalances, "duplicates_per_rebalance": round(per_rebalance, 3),
        "duplicates_per_1000_records": round(per_1000, 3),
        "max_duplicates_one_rebalance": max((rb.count for rb in p.per_rebalance.values()), default=0),
        "offsets_acked_twice": acked_twice, "inconsistent_offsets": inconsistent, "vanished": len(vanished),
        "content_unjudged_reads": content_unjudged, "violations": log.violation_count,
    }
    content = (f"record content unknown: consumed/final_read carry no key or value, so whether {content_unjudged} "
               "read(s) saw the acknowledged records is not judged")
    rates = (f"{p.duplicates} duplicate(s), {after} after {rebalances} rebalance(s): {per_rebalance:.2f} per "
             f"rebalance, {per_1000:.2f} per 1000 records")
    judged = p.batches - p.unowned_batches - p.app_batches
    apps = (f", {p.app_batches} batch(es) of application members not judged (their consumed events are the "
            "application's processing order)" if p.app_batches else "")
    ok = (f"no poll skip or step back within one ownership ({judged} batch(es) judged{apps}; between ownerships "
          f"{p.skips_across} skip(s) and {p.backwards_across} step(s) back, allowed); all {acked_total} acknowledged "
          f"record(s) read; no offset acknowledged for two records or vanished; {rates}; {content}")
    bad = ", ".join(f"{n} {what}" for n, what in ((lost, "lost record(s)"), (p.poll_skips, "poll skip(s)"),
                                                   (p.nonmonotonic_polls, "non-monotonic poll(s)"),
                                                   (inconsistent, "inconsistent offset(s)")) if n)
    unknown = None
    if p.consumed_records == 0:
        unknown = f"no record was consumed: poll order and duplicates cannot be judged ({acked_total} acknowledged)"
    elif judged == 0 and p.app_batches == 0:
        unknown = (f"none of the {p.batches} consumed batch(es) falls within an ownership a member recorded "
                   "(assigned events): poll skips cannot be judged")
    return log.result(NAME, ok, f"{bad}; {rates}; {content}", metrics, unknown=unknown)
