"""The coordinator's generation timeline, reconstructed from the observer's evidence.

Sources, per group, in history order:

- ``broker_log`` ``stabilized`` N: generation N is current and Stable;
- ``broker_log`` ``preparing_rebalance`` with old generation N: the group left
  N's Stable state, but N stays current until the join phase completes and
  bumps it (GroupCoordinator: the generation is incremented in
  ``onCompleteJoin``), so commits tagged N remain legal meanwhile;
- ``broker_log`` ``loading`` N: a new coordinator loaded generation N from
  ``__consumer_offsets`` after a failover (a generation bumped but never
  stored may vanish, so the timeline may step back here);
- ``group_state`` samples with a generation (DescribeGroups), except Dead and
  Unknown.

The latest evidence wins, it is not a maximum: after a failover the loaded
generation is the truth.
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass
from typing import cast

from chaos.checkers.index import HistoryIndex
from chaos.history import BrokerLog, BrokerLogEvent, GroupState, GroupStateSample

_TIMELINE_LOG_EVENTS = (BrokerLogEvent.STABILIZED, BrokerLogEvent.PREPARING_REBALANCE, BrokerLogEvent.LOADING)
_SKIP_STATES = (GroupState.DEAD, GroupState.UNKNOWN)


@dataclass(frozen=True, slots=True)
class GenerationTimeline:
    """Parallel lists: at ``times[i]`` the coordinator's generation became ``gens[i]`` (evidence ``seqs[i]``)."""

    times: list[int]
    gens: list[int]
    seqs: list[int]

    def window(self, start_ns: int, end_ns: int) -> tuple[int, int]:
        """Index range [lo, hi) of the entries in effect at some moment of [start_ns, end_ns].

        ``lo == hi`` when nothing is known before ``end_ns``.
        """
        hi = bisect_right(self.times, end_ns)
        lo = max(bisect_right(self.times, start_ns) - 1, 0)
        return (lo, hi) if hi else (0, 0)


def timelines(idx: HistoryIndex) -> dict[str, GenerationTimeline]:
    out: dict[str, GenerationTimeline] = {}
    for e in cast("list[BrokerLog | GroupStateSample]", idx.stream((BrokerLog, GroupStateSample))):
        if type(e) is BrokerLog:
            if e.event not in _TIMELINE_LOG_EVENTS or e.generation is None:
                continue
        elif e.generation is None or e.state in _SKIP_STATES or e.generation < 0:
            continue
        tl = out.get(e.group)
        if tl is None:
            tl = out[e.group] = GenerationTimeline([], [], [])
        if tl.gens and tl.gens[-1] == e.generation:
            continue
        tl.times.append(e.mono_ns)
        tl.gens.append(e.generation)
        tl.seqs.append(e.seq)
    return out
