"""The group observer: the coordinator's own view of the group, in the same history.

Three sources, each an event kind (docs/architecture.md, "The history"):

* ``group_state`` — DescribeGroups at the coordinator found by FindCoordinator,
  polled every ``interval`` (default 100 ms). Written when anything changed
  (state, coordinator, members, assignments) and at least once a second, so a
  checker can tell "no sample" from "nothing changed". DescribeGroups carries
  no generation, so ``generation`` is filled from the newest ``stabilized``
  log line of the current coordinator.
* ``broker_log`` — every broker's log tailed and its GroupCoordinator lines
  parsed (below); ``ts``/``mono_ns`` come from the line's own timestamp (ms),
  mapped onto CLOCK_MONOTONIC, so the line sorts where it happened rather
  than when it was read.
* ``committed_offsets`` — OffsetFetch samples (every ``offsets_interval``),
  written when they change.

Lines parsed (Kafka 2.8–3.9 ``kafka.coordinator.group.GroupCoordinator``,
ZooKeeper mode, classic protocol):

* ``Preparing to rebalance group G in state PreparingRebalance with old generation N``
* ``Stabilized group G generation N``
* ``Member ... memberId=M ... in group G has failed``
* ``Loading group metadata for G with generation N`` / ``Unloading group metadata for G with generation N``
  (GroupMetadataManager)
* ``Group G with generation N is now empty`` and ``Assignment received from leader M for group G for
  generation N`` (kept as ``other`` with their generation).
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from chaos.cluster.admin import ClusterAdmin
from chaos.history.event import BrokerLogEvent, GroupState, Kind
from chaos.history.writer import EventWriter

_TS = re.compile(r"^\[(\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}),(\d{3})\] ")


@dataclass(frozen=True, slots=True)
class ParsedLine:
    event: BrokerLogEvent
    group: str
    generation: int | None
    member_id: str | None


def _patterns(group: str) -> list[tuple[re.Pattern, BrokerLogEvent]]:
    g = re.escape(group)
    return [
        (re.compile(rf"Preparing to rebalance group {g} in state \w+ with old generation (?P<gen>-?\d+)"),
         BrokerLogEvent.PREPARING_REBALANCE),
        (re.compile(rf"Stabilized group {g} generation (?P<gen>\d+)"), BrokerLogEvent.STABILIZED),
        (re.compile(rf"Member (?:MemberMetadata\(memberId=)?(?P<member>[^,\s)]+).* in group {g} has failed"),
         BrokerLogEvent.MEMBER_FAILED),
        (re.compile(rf"Loading group metadata for {g} with generation (?P<gen>\d+)"), BrokerLogEvent.LOADING),
        (re.compile(rf"Unloading group metadata for {g} with generation (?P<gen>\d+)"), BrokerLogEvent.UNLOADING),
        (re.compile(rf"Group {g} with generation (?P<gen>\d+) is now empty"), BrokerLogEvent.OTHER),
        (re.compile(rf"Assignment received from leader (?P<member>\S+) for group {g} for generation (?P<gen>\d+)"),
         BrokerLogEvent.OTHER),
    ]


class LineParser:
    """Parses one group's coordinator lines (see module docstring)."""

    def __init__(self, group: str):
        self.group = group
        self._patterns = _patterns(group)

    def parse(self, line: str) -> ParsedLine | None:
        if self.group not in line:
            return None
        for pattern, event in self._patterns:
            m = pattern.search(line)
            if m:
                d = m.groupdict()
                gen = int(d["gen"]) if d.get("gen") is not None else None
                return ParsedLine(event, self.group, gen, d.get("member"))
        return None


def line_clock(line: str, wall_to_mono: float) -> tuple[float, int] | None:
    """(ts, mono_ns) of a log line from its own ``[yyyy-mm-dd hh:mm:ss,mmm]`` stamp."""
    m = _TS.match(line)
    if not m:
        return None
    ts = datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S").timestamp() + int(m.group(2)) / 1000
    return ts, int((ts + wall_to_mono) * 1e9)


class _LogTail:
    """Follows one log file by byte offset (the file survives broker restarts: appended)."""

    def __init__(self, path: Path):
        self.path = path
        self.offset = 0
        self._partial = b""

    def lines(self) -> list[str]:
        try:
            with self.path.open("rb") as f:
                f.seek(self.offset)
                data = f.read()
        except FileNotFoundError:
            return []
        self.offset += len(data)
        data = self._partial + data
        parts = data.split(b"\n")
        self._partial = parts.pop()
        return [p.decode(errors="replace") for p in parts]


class CoordinatorLog:
    """Every broker's log, followed for one group's coordinator lines (the observer and the nemesis's
    live watch both read it)."""

    def __init__(self, group: str, broker_logs: dict[int, Path]):
        self.parser = LineParser(group)
        self.tails = {bid: _LogTail(p) for bid, p in broker_logs.items()}

    def read(self) -> Iterator[tuple[int, str, ParsedLine, tuple[float, int] | None]]:
        """New group lines: (broker id, line, parsed, (ts, mono_ns) from the line's own stamp or None)."""
        wall_to_mono = time.monotonic() - time.time()
        for bid, tail in self.tails.items():
            for line in tail.lines():
                parsed = self.parser.parse(line)
                if parsed is not None:
                    yield bid, line, parsed, line_clock(line, wall_to_mono)


class GroupObserver:
    """Runs in a thread of the runner; writes ``events/observer.jsonl``."""

    def __init__(self, admin: ClusterAdmin, group: str, topic: str, run_dir: Path,
                 broker_logs: dict[int, Path], interval: float = 0.1, offsets_interval: float = 0.5):
        self.admin = admin
        self.group = group
        self.topic = topic
        self.events = EventWriter.for_run(run_dir, "observer")
        self.interval = interval
        self.offsets_interval = offsets_interval
        self.log = CoordinatorLog(group, broker_logs)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._last_sample: tuple | None = None
        self._last_emit = 0.0
        self._last_offsets: tuple | None = None
        self._next_offsets = 0.0
        self._stabilized: dict[int, int] = {}   # broker -> newest stabilized generation it logged
        self.samples = 0
        #: CLOCK_MONOTONIC of the newest group_state event written
        self.last_sample_ns = 0
        self.on_event: Callable[[object], None] | None = None

    # ------------------------------------------------------------ lifecycle
    def start(self) -> GroupObserver:
        self._thread = threading.Thread(target=self._run, name="observer", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(30)
        self._read_logs()  # the last lines written before the stop
        self.events.close()

    def _run(self) -> None:
        while not self._stop.is_set():
            t0 = time.monotonic()
            self._read_logs()
            self._sample_group()
            if t0 >= self._next_offsets:
                self._sample_offsets()
                self._next_offsets = t0 + self.offsets_interval
            self._stop.wait(max(0.0, self.interval - (time.monotonic() - t0)))

    # ------------------------------------------------------------ sources
    def _read_logs(self) -> None:
        for bid, line, parsed, clock in self.log.read():
            extra: dict[str, Any] = {"ts": clock[0], "mono_ns": clock[1]} if clock else {}
            if parsed.event in (BrokerLogEvent.STABILIZED, BrokerLogEvent.LOADING) and parsed.generation is not None:
                # a broker that becomes coordinator again *loads* the group at its current generation:
                # what it logged as "Stabilized" in an earlier stint is stale from then on
                self._stabilized[bid] = parsed.generation
            elif parsed.event is BrokerLogEvent.UNLOADING:
                self._stabilized.pop(bid, None)
            self.events.emit(Kind.BROKER_LOG, broker=bid, group=self.group, event=parsed.event.value,
                             generation=parsed.generation, member_id=parsed.member_id,
                             line=line.strip()[:2000], **extra)

    def _sample_group(self) -> None:
        try:
            # one attempt each: a coordinator that is down or loading is an observation, not a wait
            coordinator = self.admin.coordinator_id(self.group, wait=False)
            info = self.admin.describe_group(self.group, coordinator, wait=False)
        except Exception:  # noqa: BLE001 - a coordinator that is down is an observation, not a crash
            coordinator, info = None, None
        members: list[dict[str, Any]] = []
        if info is None:
            state, protocol = GroupState.UNKNOWN, None
        else:
            state = GroupState(info.state) if info.state in GroupState._value2member_map_ else GroupState.UNKNOWN
            protocol = info.protocol or None
            for m in info.members:
                assignment: list[list[Any]] = []
                a = getattr(m, "member_assignment", None)
                for topic, parts in getattr(a, "assignment", None) or []:
                    assignment.extend([topic, p] for p in sorted(parts))
                entry = {"member_id": m.member_id, "instance_id": None, "client_id": m.client_id,
                         "host": m.client_host, "assignment": sorted(assignment)}
                # the coordinator's copy of the member's JoinGroup subscription: who asked for which topics
                topics = getattr(getattr(m, "member_metadata", None), "subscription", None)
                if topics:
                    entry["subscription"] = sorted(topics)
                members.append(entry)
            members.sort(key=lambda m: m["member_id"])
        # the coordinator logs "Loading group metadata ... generation N" before it can answer for the
        # group, so reading the logs *after* its answer cannot miss the generation that answer is at
        self._read_logs()
        generation = self._stabilized.get(coordinator) if coordinator is not None else None
        key = (state, coordinator, protocol, generation,
               tuple((m["member_id"], tuple(map(tuple, m["assignment"])), tuple(m.get("subscription", ())))
                     for m in members))
        now = time.monotonic()
        self.samples += 1
        if key != self._last_sample or now - self._last_emit >= 1.0:
            ev = self.events.emit(Kind.GROUP_STATE, group=self.group, state=state.value, coordinator=coordinator,
                                  protocol=protocol, generation=generation, members=members)
            self._last_sample, self._last_emit = key, now
            self.last_sample_ns = ev.mono_ns

    def _sample_offsets(self) -> None:
        try:
            offsets = self.admin.committed_offsets(self.group, wait=False)
            coordinator = self.admin.coordinator_id(self.group, wait=False)
        except Exception:  # noqa: BLE001
            return
        rows = sorted([t, p, o] for (t, p), o in offsets.items() if o >= 0)
        key = tuple(map(tuple, rows))
        if key != self._last_offsets:
            self.events.emit(Kind.COMMITTED_OFFSETS, group=self.group, coordinator=coordinator, offsets=rows)
            self._last_offsets = key
