"""Derived views of a history shared by the checkers, computed once per history.

Checkers stay pure functions of the history; this module only avoids nine
passes over a million events by grouping events by type once (the history
object is identity-hashed, so the cache is keyed by the object itself).
"""

from __future__ import annotations

import weakref
from collections import defaultdict
from collections.abc import Iterable

from chaos.history import (
    Assigned,
    Event,
    History,
    Lost,
    MemberStart,
    MemberStop,
    Revoked,
)

MEMBERSHIP_TYPES = (MemberStart, Assigned, Revoked, Lost, MemberStop)


class HistoryIndex:
    """Events grouped by type (each list in history order), and filtered streams."""

    def __init__(self, history: History) -> None:
        self.history = history
        by_type: defaultdict[type, list[Event]] = defaultdict(list)
        for e in history.events:
            by_type[type(e)].append(e)
        self.by_type: dict[type, list[Event]] = dict(by_type)
        self._streams: dict[frozenset[type], list[Event]] = {}
        self.first_ns = history.events[0].mono_ns if history.events else 0
        self.last_ns = history.events[-1].mono_ns if history.events else 0

    def of(self, cls: type) -> list:
        return self.by_type.get(cls, [])

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

    def membership(self) -> list[Event]:
        return self.stream(MEMBERSHIP_TYPES)

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
