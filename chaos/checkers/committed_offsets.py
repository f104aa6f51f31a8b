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
older offset. A commit whose source could not stamp it where it happened
(``ts_uncertain_ns``: a line read seconds after it was printed) was sent
somewhere in [mono_ns, mono_ns + ts_uncertain_ns]; it counts at the start of
that interval as the later observation and at its end (or its answer) as the
earlier one, so a stopped-then-resumed worker's old commit never reads as a
move back. Offsets < 0 in samples mean "no committed
offset" and are ignored. A fault that moves the committed offsets back on purpose
(trait ``rewinds_committed_offsets``, :class:`chaos.model.fault_traits.FaultTrait`) restarts the
comparison; nothing else does (a ``reset_peer`` link fault resets TCP connections, not offsets).

Deposed coordinators. A sample answered by a broker after *another* broker
logged loading the group (``broker_log`` ``loading``: the new leader of the
group's ``__consumer_offsets`` partition read it back) and before that broker
loaded it again is set aside, counted in ``stale_samples`` and cited in a note,
not judged. In ZooKeeper mode a broker cut from ZooKeeper learns that it lost
its leaderships only when its session is declared expired on its side, seconds
after the controller moved them (``KafkaController.onBrokerFailure``); until then
it still answers FindCoordinator with itself and OffsetFetch from its cache,
frozen at the last commit it accepted — a stale read of a store that moved on,
not a committed offset going back. Commits are never set aside: one accepted
by a deposed coordinator that the new one does not have *is* a lost commit.
Samples must name the broker that answered them (the observer sends OffsetFetch
to the broker FindCoordinator named just before); unlabelled samples are judged.

New coordinators' trailing reads (Kafka 4.x's group coordinator). The coordinator
runtime appends with ``acks=1`` and answers a write once the partition's high
watermark passed it (``CoordinatorPartitionWriter.append``, ``CoordinatorRuntime``'s
deferred events); when a broker becomes leader of the group's ``__consumer_offsets``
partition, its loader replays the whole log but counts as committed only what lies
below *its* high watermark (``CoordinatorLoaderImpl``: ``updateLastCommittedOffset``
only once a batch reaches the HWM), and reads — OffsetFetch among them — are served
at the last committed offset. A new leader's high watermark is the one it last
learnt as a follower, one fetch behind the old leader's, and it moves up once the
other replicas fetch from it. So for a moment after a failover the new coordinator
answers OffsetFetch without a commit the old one acknowledged, although its log has
it. A sample below an acknowledged maximum is set aside as such a trailing read
(``trailing_samples``, cited in a note) only when all of this holds: the broker
that answered it logged loading the group after that maximum was observed (and is
the latest to have loaded it), and a later sample answered by the same broker,
before anyone loads the group again, reads the maximum or more with no accepted
commit of the maximum or more in between — the store had it all along. A value that
never comes back, or that only a new commit brings back, is judged: that is what a
commit lost in the failover looks like (e.g. KAFKA-20634, acknowledged writes
completed by a high watermark over truncated records). Observed on Kafka 4.4.0
(docs/architecture.md, "Committed offsets across coordinator failover").

Reads behind the store. The runner reads the group's ``__consumer_offsets`` partition after the run
(``stored_offsets``, :mod:`chaos.workload.offsets_log`). A sample below an acknowledged maximum is set aside
(``behind_store_samples``, cited in a note) when the last of those records appended before the sample was
asked holds the maximum or more: the store had it then and never lost it (a record that survived to the end
was never truncated by a later leader), so the answer lagged the store — a new coordinator's high watermark
not yet past its log, whether or not a re-read came before the next commit. Found by exploring Kafka 4.4.0
(classic group): the coordinator was killed 7 ms after it answered a commit, the new one's first OffsetFetch
answer, 0.3 s after it loaded the group, read below it, and a new commit came 0.2 s later; the commit's
record was at log offsets 4096-4099, stored before the kill. A record absent from the log, or a lower record
after it, leaves the sample judged. Without the event (a read that failed, histories recorded before it) the
rule has no evidence and sets nothing aside.

A client's own auto-commits answered out of order. librdkafka builds an auto-commit
from the stored offsets when its timer fires and keeps that list: one built while the
coordinator is unknown waits in the group's wait-coordinator queue, and one answered
NOT_COORDINATOR or COORDINATOR_LOAD_IN_PROGRESS (or lost with the connection) is re-sent
after a backoff from the coordinator connection's retry queue (``rd_kafka_cgrp_defer_offset_commit``,
``rd_kafka_buf_retry``; librdkafka #3398 made those errors retried) — while newer
auto-commits go straight out. The coordinator then stores the older offsets last: one
connection's requests are served in order (librdkafka talks to the coordinator over one
connection), so the order in which the client got its answers is the order in which they
were written. An accepted commit below the same
client's earlier-answered auto-commit (both auto-commits of one member process) is still a
violation — the group's committed offset did go back — and its finding says so, naming
the last coordinator change before it (and librdkafka's mechanism, for a confluent-kafka
member); a sample reading the value such a commit wrote
says so too (docs/findings.md, "librdkafka auto-commits answered out of order").

Counting: a rollback stays visible in every sample until the offset climbs
back, so findings are grouped by what they are — one per partition and
earlier maximum that was undercut, citing the observations that undercut it
(the first :data:`MAX_CITED`) — and the summary counts partitions.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from typing import Any, cast

from chaos.checkers.bounds import ResolvedBounds
from chaos.checkers.coordinator import LOG_STAMP_UNCERTAINTY_NS
from chaos.checkers.index import HistoryIndex, fmt_tp, index_of
from chaos.checkers.result import FindingLog, Result
from chaos.history import (
    BrokerLog,
    BrokerLogEvent,
    Commit,
    CommittedOffsets,
    FaultStart,
    History,
    MemberStart,
    StoredOffsets,
)
from chaos.history.event import MemberClient
from chaos.model.checker_name import CheckerName
from chaos.model.fault_traits import FaultTrait
from chaos.outcome import Outcome

NAME = CheckerName.COMMITTED_OFFSETS
#: how many undercutting observations one finding cites (the rest are counted)
MAX_CITED = 10


def _loaders(history_index: HistoryIndex) -> dict[str, tuple[list[int], list[int]]]:
    """Per group, in log-time order: (times, brokers) of each ``loading`` line — who became coordinator when."""
    out: dict[str, tuple[list[int], list[int]]] = {}
    loads = [e for e in cast("list[BrokerLog]", history_index.of(BrokerLog)) if e.event is BrokerLogEvent.LOADING]
    for e in sorted(loads, key=lambda e: e.mono_ns):
        times, brokers = out.setdefault(e.group, ([], []))
        times.append(e.mono_ns)
        brokers.append(e.broker)
    return out


def _deposed(loaders: dict[str, tuple[list[int], list[int]]], e: CommittedOffsets) -> int | None:
    """The broker that had loaded the group by the time sample ``e`` was answered by another one, else None.

    A loading line stamped within the log's resolution of the sample does not count (the order is unknown):
    the sample is then judged, which can only show a move, never hide one.
    """
    if e.coordinator is None or (got := loaders.get(e.group)) is None:
        return None
    times, brokers = got
    i = bisect_right(times, e.mono_ns - LOG_STAMP_UNCERTAINTY_NS) - 1
    if i < 0 or brokers[i] == e.coordinator:
        return None
    return brokers[i]


def _out_of_order(starts: dict[str, list[int]], earlier: Commit, later: Commit) -> bool:
    """Whether ``later`` (an accepted commit below the accepted ``earlier``) is the same client's auto-commit
    answered after a newer one of its own: both auto-commits of one member process (the same source, not
    started again in between). The member ids they carry are not compared: an auto-commit event carries the
    member's view when the answer was reported, and librdkafka resets its member id (a lost assignment)
    while older commits of the same client are still on their way."""
    if not (earlier.auto and later.auto and earlier.source == later.source):
        return False
    seqs = starts.get(later.source, [])
    return bisect_right(seqs, later.seq) == bisect_right(seqs, earlier.seq)


def _last_load(loaders: dict[str, tuple[list[int], list[int]]], group: str, ns: int) -> tuple[int, int] | None:
    """(broker, ns) of the last ``loading`` line of ``group`` stamped at or before ``ns``, if any."""
    if (got := loaders.get(group)) is None:
        return None
    times, brokers = got
    i = bisect_right(times, ns) - 1
    return None if i < 0 else (brokers[i], times[i])


def _written_by(reordered: list[tuple[int, int, int, str]] | None, value: int, ns: int) -> str:
    """A note for a sample reading ``value``: the out-of-order auto-commit answered before it that wrote it."""
    got = [(seq, source) for v, seq, at, source in reordered or () if v == value and at <= ns]
    if not got:
        return ""
    seq, source = got[-1]
    return f" — the value {source}'s auto-commit answered out of order wrote (seq {seq})"


def _out_of_order_text(loaders: dict[str, tuple[list[int], list[int]]], earlier: Commit, later: Commit,
                       librdkafka: bool) -> str:
    """Why an accepted commit is below its client's earlier-answered auto-commit (see the module docstring);
    ``librdkafka``: the member is a confluent-kafka one, whose mechanism is named."""
    gens = sorted({g for g in (earlier.generation, later.generation) if g is not None})
    gen = f" (generation {'/'.join(map(str, gens))})" if gens else ""
    load = _last_load(loaders, later.group, later.mono_ns)
    where = (f", across a coordinator change (broker {load[0]} loaded the group {(later.mono_ns - load[1]) / 1e9:.2f} s "
             "before)") if load is not None else ", with no coordinator change logged before it"
    why = ("; librdkafka re-sends an auto-commit held back while the coordinator was unavailable, or answered "
           "NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS, with the offsets it was built with, after newer ones "
           "(docs/findings.md)") if librdkafka else ""
    return (f": {later.source}'s auto-commits were answered out of order{gen} — the client sent the older commit "
            f"after the newer one{where}{why}")


#: per (group, topic, partition): judged samples as (mono_ns, answering broker or -1, value, seq), and ok commits
#: as (sent ns, answered ns, value), in history order — what the trailing-read rule looks ahead in
_Seen = tuple[dict[tuple[str, str, int], list[tuple[int, int, int, int]]],
              dict[tuple[str, str, int], list[tuple[int, int, int]]]]


def _trailing(seen: _Seen, loaders: dict[str, tuple[list[int], list[int]]], key: tuple[str, str, int],
              undercut: tuple[int, int], sample: tuple[int, int, int, int], slack: int) -> bool:
    """Whether ``sample`` (below the maximum ``undercut`` = (value, observed ns)) is a new coordinator's trailing
    read: its broker loaded the group after the maximum was observed, and later answered the maximum or more
    again, before anyone loaded the group anew, with no accepted commit of the maximum or more in between."""
    top, top_ns = undercut
    ns, broker, _, seq = sample
    if broker < 0 or (got := loaders.get(key[0])) is None:
        return False
    times, brokers = got
    i = bisect_right(times, ns - LOG_STAMP_UNCERTAINTY_NS) - 1
    if i < 0 or brokers[i] != broker or times[i] - LOG_STAMP_UNCERTAINTY_NS <= top_ns:
        return False
    reload_ns = times[i + 1] if i + 1 < len(times) else None
    samples, commits = seen
    for later_ns, later_broker, value, later_seq in samples.get(key, ()):
        if later_seq <= seq or later_broker != broker or value < top:
            continue
        if reload_ns is not None and later_ns >= reload_ns - LOG_STAMP_UNCERTAINTY_NS:
            return False
        return not any(v >= top and sent <= later_ns and answered >= ns - slack
                       for sent, answered, v in commits.get(key, ()))
    return False


#: per (group, topic, partition): the stored commits as (append time on CLOCK_MONOTONIC, log offset, value), in
#: log order — what the read-behind-the-store rule looks up
_Stored = dict[tuple[str, str, int], list[tuple[int, int, int]]]


def _stored(idx: HistoryIndex) -> _Stored:
    """The ``stored_offsets`` records per partition, their append times (the broker's wall-clock stamp) mapped
    onto CLOCK_MONOTONIC with the wall/monotonic pair of the event that carries them."""
    out: _Stored = {}
    for e in cast("list[StoredOffsets]", idx.of(StoredOffsets)):
        wall_minus_mono_ns = int(e.ts * 1e9) - e.mono_ns
        for topic, part, value, log_offset, ms in e.stored:
            out.setdefault((e.group, topic, part), []).append((ms * 1_000_000 - wall_minus_mono_ns, log_offset, value))
    for rows in out.values():
        rows.sort(key=lambda r: r[1])
    return out


def _behind_store(stored: _Stored, key: tuple[str, str, int], top: int, sample_ns: int) -> tuple[int, int] | None:
    """(log offset, ms before the sample) of the stored record showing that ``__consumer_offsets`` already held
    ``top`` or more when the sample was asked: the last record of the partition that survived to the end of the
    run and was appended before it. None when the store did not hold that much then (or nothing says so)."""
    before = [r for r in stored.get(key, ()) if r[0] + LOG_STAMP_UNCERTAINTY_NS <= sample_ns]
    if not before:
        return None
    append_ns, log_offset, value = before[-1]
    return (log_offset, (sample_ns - append_ns) // 1_000_000) if value >= top else None


def check(history: History, bounds: ResolvedBounds) -> Result:
    idx = index_of(history)
    log = FindingLog(bounds.max_findings)
    slack = bounds.slack_ns
    # Per (group, topic, partition): [commit max, its seq, sample max, its seq, overall max, times, maxes, seqs,
    # the sample max's time]
    # where times/maxes/seqs record each rise of the overall maximum, so "the maximum observed
    # before t - slack" is one bisect. Values that do not lower the maximum take the fast path.
    state: dict[tuple[str, str, int], list[Any]] = {}
    # (group, topic, partition, seq of the undercut maximum) -> [description of the first, seqs undercutting it]
    moves: dict[tuple[str, str, int, int], tuple[str, list[int]]] = {}
    observations = 0
    ok = Outcome.OK
    loaders = _loaders(idx)
    # (group, deposed broker, its successor) -> seqs of the samples it answered after being deposed
    stale: dict[tuple[str, int, int], list[int]] = {}
    # the maximum each move undercut, as (value, when observed); each judged sample's (ns, broker, value, seq)
    undercut: dict[tuple[str, str, int, int], tuple[int, int]] = {}
    seen: _Seen = ({}, {})
    sample_at: dict[int, tuple[int, int]] = {}
    # per (group, topic, partition): the accepted commit holding the commit maximum, and the commits a client
    # answered out of order, as (value, seq, ns, source) — what a later sample reading that value is told by
    top_commit: dict[tuple[str, str, int], Commit] = {}
    reordered: dict[tuple[str, str, int], list[tuple[int, int, int, str]]] = {}
    out_of_order = 0
    starts: dict[str, list[int]] = {}
    librdkafka: dict[str, bool] = {}  # per member: a confluent-kafka (librdkafka) one, as it last started
    for m in cast("list[MemberStart]", idx.of(MemberStart)):
        starts.setdefault(m.source, []).append(m.seq)
        librdkafka[m.source] = m.client is MemberClient.CONFLUENT_KAFKA
    for seqs in starts.values():
        seqs.sort()
    for e in cast("list[Commit | CommittedOffsets | FaultStart]", idx.stream((Commit, CommittedOffsets, FaultStart))):
        if type(e) is FaultStart:
            if FaultTrait.REWINDS_COMMITTED_OFFSETS in e.effects:
                state.clear()
            continue
        if type(e) is Commit:
            if e.outcome is not ok:
                continue
            is_sample = False
            answered_ns = e.answered_ns
            if e.ts_uncertain_ns:  # sent at some moment up to mono_ns + ts_uncertain_ns
                answered_ns = max(answered_ns or 0, e.mono_ns + e.ts_uncertain_ns)
        else:
            if (successor := _deposed(loaders, e)) is not None:
                stale.setdefault((e.group, cast("int", e.coordinator), successor), []).append(e.seq)
                continue
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
                st = state[key] = [-1, 0, -1, 0, -1, [], [], [], 0]
            if is_sample:
                broker = cast("int | None", e.coordinator)  # type: ignore[union-attr]
                seen[0].setdefault(key, []).append((ns, -1 if broker is None else broker, value, seq))
                sample_at[seq] = (ns, -1 if broker is None else broker)
            else:
                seen[1].setdefault(key, []).append((ns, late, value))
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
                        st[2], st[3], st[8] = value, seq, ns
                elif value > st[0]:
                    st[0], st[1] = value, seq
                    top_commit[key] = cast("Commit", e)
                continue
            where = f"group {group} {fmt_tp((topic, part))}"
            if is_sample and value < st[2]:
                undercut.setdefault((group, topic, part, st[3]), (st[2], st[8]))
                moves.setdefault((group, topic, part, st[3]), (
                    f"{where}: committed offset sample {value} is below the earlier sample {st[2]}"
                    f"{_written_by(reordered.get(key), value, ns)}", []))[1].append(seq)
            elif not is_sample and value < st[0]:
                why = ""
                if _out_of_order(starts, top_commit[key], cast("Commit", e)):
                    why = _out_of_order_text(loaders, top_commit[key], cast("Commit", e),
                                             librdkafka.get(e.source, False))
                    reordered.setdefault(key, []).append((value, seq, ns, e.source))
                    out_of_order += 1
                moves.setdefault((group, topic, part, st[1]), (
                    f"{where}: accepted commit {value} by {e.source} is below the earlier accepted commit {st[0]}{why}",
                    []))[1].append(seq)
            else:
                i = bisect_left(st[5], ns - slack) - 1
                if i >= 0 and value < st[6][i]:
                    undercut.setdefault((group, topic, part, st[7][i]), (st[6][i], st[5][i]))
                    what = "sample" if is_sample else f"commit by {e.source}"
                    written = _written_by(reordered.get(key), value, ns) if is_sample else ""
                    moves.setdefault((group, topic, part, st[7][i]), (
                        f"{where}: committed offset went back from {st[6][i]} to {value} ({what}){written}",
                        []))[1].append(seq)
            if is_sample:
                if value > st[2]:
                    st[2], st[3], st[8] = value, seq, ns
            elif value > st[0]:
                st[0], st[1] = value, seq
                top_commit[key] = cast("Commit", e)
    # (group, broker) -> seqs of its trailing reads, set aside; moves left with none are dropped
    trailing: dict[tuple[str, int], list[int]] = {}
    # group -> (seq, log offset of the record the store already held, ms between) of samples that read behind it
    behind: dict[str, list[tuple[int, int, int]]] = {}
    stored = _stored(idx)
    for move, (text, later) in list(moves.items()):
        if move not in undercut:  # a commit below a commit: never set aside
            continue
        key = move[:3]
        kept = []
        for seq in later:
            at = sample_at.get(seq)
            if at is not None and _trailing(seen, loaders, key, undercut[move], (at[0], at[1], 0, seq), slack):
                trailing.setdefault((move[0], at[1]), []).append(seq)
            elif at is not None and (held := _behind_store(stored, key, undercut[move][0], at[0])) is not None:
                behind.setdefault(move[0], []).append((seq, *held))
            else:
                kept.append(seq)
        if kept:
            moves[move] = (text, kept)
        else:
            del moves[move]
    for (_, _, _, earlier), (text, later) in moves.items():
        more = f" (undercut by {len(later)} observation(s) in all)" if len(later) > 1 else ""
        log.violation(text + more, earlier, *later[:MAX_CITED])
    for (group, broker, successor), seqs in stale.items():
        more = f", the first {MAX_CITED} cited" if len(seqs) > MAX_CITED else ""
        log.note(f"group {group}: {len(seqs)} committed-offset sample(s) answered by broker {broker} after broker "
                 f"{successor} had loaded the group set aside, not judged (a deposed coordinator answers from "
                 f"its cache until it learns it lost its leadership{more})", *seqs[:MAX_CITED])
    for (group, broker), seqs in trailing.items():
        seqs = sorted(set(seqs))
        more = f", the first {MAX_CITED} cited" if len(seqs) > MAX_CITED else ""
        log.note(f"group {group}: {len(seqs)} committed-offset sample(s) answered by broker {broker} just after it "
                 f"loaded the group read below an acknowledged commit that the same broker answered again later "
                 f"with no new commit: set aside, not judged (a new coordinator reads at its high watermark, "
                 f"which trails its log for a moment after a leader change{more})", *seqs[:MAX_CITED])
    for group, rows in behind.items():
        rows = sorted(set(rows))
        more = f", the first {MAX_CITED} cited" if len(rows) > MAX_CITED else ""
        seq, log_offset, ms = rows[0]
        log.note(f"group {group}: {len(rows)} committed-offset sample(s) read below what __consumer_offsets already "
                 f"held (e.g. sample seq {seq}: the record at log offset {log_offset}, stored {ms} ms before it was "
                 f"asked, kept to the end of the run): set aside, not judged (the coordinator's answer lagged its "
                 f"store{more})", *[r[0] for r in rows[:MAX_CITED]])
    moved = {(g, t, p) for g, t, p, _ in moves}
    undercutting = sum(len(later) for _, later in moves.values())
    metrics = {"observations": observations, "partitions": len(state), "violations": log.violation_count,
               "partitions_moved_back": len(moved), "observations_below": undercutting,
               "stale_samples": sum(len(v) for v in stale.values()),
               "trailing_samples": sum(len(set(v)) for v in trailing.values()),
               "behind_store_samples": sum(len(set(v)) for v in behind.values()),
               "out_of_order_auto_commits": out_of_order}
    reordered_text = (f"; {out_of_order} of them a client's own auto-commit(s) answered out of order"
                      if out_of_order else "")
    aside = [f"{n} {what} set aside" for n, what in ((metrics["stale_samples"], "deposed coordinator's sample(s)"),
                                                     (metrics["trailing_samples"], "new coordinator's trailing read(s)"),
                                                     (metrics["behind_store_samples"],
                                                      "sample(s) behind __consumer_offsets"))
             if n]
    return log.result(NAME, f"committed offsets never moved backwards ({observations} observations, "
                      f"{len(state)} partition(s){''.join(', ' + a for a in aside)})",
                      f"{len(moved)} partition(s) whose committed offset moved backwards ({len(moves)} earlier "
                      f"maximum(s) undercut, by {undercutting} observation(s){reordered_text})", metrics)
