"""Derived views of a history shared by the checkers, computed once per history.

Checkers stay pure functions of the history; this module only avoids nine
passes over a million events by grouping events by type once (the history
object is identity-hashed, so the cache is keyed by the object itself).
"""

from __future__ import annotations

import weakref
from collections import defaultdict
from collections.abc import Iterable
from typing import TypeVar, cast

from chaos.history import (
    Assigned,
    Event,
    GroupStateSample,
    History,
    Lost,
    MemberStart,
    MemberStop,
    Revoked,
    SendOk,
)

MEMBERSHIP_TYPES = (MemberStart, Assigned, Revoked, Lost, MemberStop)
E = TypeVar("E", bound=Event)


class HistoryIndex:
    """Events grouped by type (each list in history order), and filtered streams."""

    def __init__(self, history: History) -> None:
        self.history = history
        by_type: defaultdict[type, list[Event]] = defaultdict(list)
        for e in history.events:
            by_type[type(e)].append(e)
        self.by_type: dict[type, list[Event]] = dict(by_type)
        self._streams: dict[frozenset[type], list[Event]] = {}
        self._topic_partitions: dict[str, frozenset[int]] | None = None
        self._group_partitions: dict[str, frozenset[tuple[str, int]]] | None = None
        self.first_ns = history.events[0].mono_ns if history.events else 0
        self.last_ns = history.events[-1].mono_ns if history.events else 0

    def of(self, cls: type[E]) -> list[E]:
        # by_type is keyed by each event's own class, so the list under ``cls`` holds only ``cls``
        return cast("list[E]", self.by_type.get(cls, []))

    def stream(self, types: Iterable[type]) -> list[Event]:
        """Events of any of ``types`` in history order (cached per type set)."""
        key = frozenset(types)
        got = self._streams.get(key)
        if got is None:
            if len(key) == 1:
                got = self.of(next(iter(key)))
            elif sum(len(self.by_type.get(t, ())) for t in key) * 4 < len(self.history.events):
                # few events: merge the per-type lists (sorted runs) by seq
                got = [e for t in key for e in self.by_type.get(t, ())]
                got.sort(key=_seq)
            else:
                got = [e for e in self.history.events if type(e) in key]
            self._streams[key] = got
        return got

    def topic_partitions(self) -> dict[str, frozenset[int]]:
        """Partitions that records were acknowledged on, per topic (cached)."""
        got = self._topic_partitions
        if got is None:
            by_topic: dict[str, set[int]] = {}
            for tp in {(e.topic, e.partition) for e in self.of(SendOk)}:
                by_topic.setdefault(tp[0], set()).add(tp[1])
            got = self._topic_partitions = {t: frozenset(ps) for t, ps in by_topic.items()}
        return got

    def group_partitions(self) -> dict[str, frozenset[tuple[str, int]]]:
        """Partitions of each group's topics (cached): every partition ever assigned in the group
        or listed in a sample, plus every partition records were produced to on those topics."""
        got = self._group_partitions
        if got is None:
            parts: dict[str, set[tuple[str, int]]] = {}
            for e in self.of(Assigned):
                parts.setdefault(e.group, set()).update(e.partitions)
            for s in self.of(GroupStateSample):
                acc = parts.setdefault(s.group, set())
                for m in s.members:
                    acc.update(m.assignment)
            produced = self.topic_partitions()
            for tps in parts.values():
                for topic in {t for t, _ in tps}:
                    tps.update((topic, p) for p in produced.get(topic, ()))
            got = self._group_partitions = {g: frozenset(tps) for g, tps in parts.items()}
        return got

    def subscribed(self, s: GroupStateSample) -> frozenset[tuple[str, int]]:
        """The group's partitions that this sample's members subscribe to.

        When the sample carries the members' subscriptions (the coordinator's
        copy of their JoinGroup metadata), only partitions of topics someone
        subscribes to *now* must be owned: a topic a member subscribed to for
        a while (change_subscription fault) and left again has no owner, as it
        should. Without recorded subscriptions: all of the group's partitions.
        """
        parts = self.group_partitions().get(s.group, frozenset())
        topics = {t for m in s.members for t in m.subscription}
        if not topics:
            return parts
        return frozenset(tp for tp in parts if tp[0] in topics)

    def membership(self) -> list[MemberStart | Assigned | Revoked | Lost | MemberStop]:
        return cast("list[MemberStart | Assigned | Revoked | Lost | MemberStop]", self.stream(MEMBERSHIP_TYPES))

    def seconds(self, mono_ns: int) -> float:
        """Seconds since the first event."""
        return (mono_ns - self.first_ns) / 1e9


def _seq(e: Event) -> int:
    return e.seq


_CACHE: weakref.WeakKeyDictionary[History, HistoryIndex] = weakref.WeakKeyDictionary()


def index_of(history: History) -> HistoryIndex:
    idx = _CACHE.get(history)
    if idx is None:
        idx = HistoryIndex(history)
        _CACHE[history] = idx
    return idx


def fmt_tp(tp: tuple[str, int]) -> str:
    return f"{tp[0]}-{tp[1]}"
