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
offset" and are ignored. A ``fault_start`` whose type mentions ``reset``
(an explicit offset reset in the schedule) restarts the comparison.

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
from chaos.checkers.result import CheckerName, FindingLog, Result
from chaos.history import BrokerLog, BrokerLogEvent, Commit, CommittedOffsets, FaultStart, History
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


def check(history: History, bounds: ResolvedBounds) -> Result:
    idx = index_of(history)
    log = FindingLog(bounds.max_findings)
    slack = bounds.slack_ns
    # Per (group, topic, partition): [commit max, its seq, sample max, its seq, overall max, times, maxes, seqs]
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
                moves.setdefault((group, topic, part, st[3]), (
                    f"{where}: committed offset sample {value} is below the earlier sample {st[2]}", []))[1].append(seq)
            elif not is_sample and value < st[0]:
                moves.setdefault((group, topic, part, st[1]), (
                    f"{where}: accepted commit {value} by {e.source} is below the earlier accepted commit {st[0]}",
                    []))[1].append(seq)
            else:
                i = bisect_left(st[5], ns - slack) - 1
                if i >= 0 and value < st[6][i]:
                    what = "sample" if is_sample else f"commit by {e.source}"
                    moves.setdefault((group, topic, part, st[7][i]), (
                        f"{where}: committed offset went back from {st[6][i]} to {value} ({what})", []))[1].append(seq)
            if is_sample:
                if value > st[2]:
                    st[2], st[3] = value, seq
            elif value > st[0]:
                st[0], st[1] = value, seq
    for (_, _, _, earlier), (text, later) in moves.items():
        more = f" (undercut by {len(later)} observation(s) in all)" if len(later) > 1 else ""
        log.violation(text + more, earlier, *later[:MAX_CITED])
    for (group, broker, successor), seqs in stale.items():
        more = f", the first {MAX_CITED} cited" if len(seqs) > MAX_CITED else ""
        log.note(f"group {group}: {len(seqs)} committed-offset sample(s) answered by broker {broker} after broker "
                 f"{successor} had loaded the group set aside, not judged (a deposed coordinator answers from "
                 f"its cache until it learns it lost its leadership{more})", *seqs[:MAX_CITED])
    moved = {(g, t, p) for g, t, p, _ in moves}
    undercutting = sum(len(later) for _, later in moves.values())
    metrics = {"observations": observations, "partitions": len(state), "violations": log.violation_count,
               "partitions_moved_back": len(moved), "observations_below": undercutting,
               "stale_samples": sum(len(v) for v in stale.values())}
    return log.result(NAME, f"committed offsets never moved backwards ({observations} observations, "
                      f"{len(state)} partition(s))",
                      f"{len(moved)} partition(s) whose committed offset moved backwards ({len(moves)} earlier "
                      f"maximum(s) undercut, by {undercutting} observation(s))", metrics)
