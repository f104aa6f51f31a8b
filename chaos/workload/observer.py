"""The group observer: the coordinator's own view of the group, in the same history.

Three sources, each an event kind (docs/architecture.md, "The history"):

* ``group_state`` — the group as its coordinator (FindCoordinator) describes it, polled every
  ``interval`` (default 100 ms), one attempt per tick. Written when anything changed (state,
  coordinator, members, assignments, epochs) and at least once a second, so a checker can tell "no
  sample" from "nothing changed". Two describe APIs:

  - classic groups: DescribeGroups. It carries no generation, so ``generation`` is filled from the
    newest ``stabilized`` log line of the current coordinator;
  - KIP-848 groups (``group.protocol=consumer``): ConsumerGroupDescribe (API key 69,
    :func:`chaos.cluster.wire.describe_consumer_group`) sent to the coordinator's control-lane proxy,
    giving the group epoch, the assignment epoch and each member's epoch, assignment and target
    assignment (:func:`consumer_sample`). Used on every tick when the run's members speak the
    consumer protocol (``kip848``), and otherwise as a second question when DescribeGroups answers
    ``Dead`` without members: that is what Kafka 4.x's new coordinator answers DescribeGroups v0-v5
    for a group that is not a classic group, the same answer as for a group that does not exist
    (``GroupMetadataManager.describeGroups``: ``GroupIdNotFoundException`` -> state Dead, no error
    below v6; :meth:`chaos.cluster.admin.ClusterAdmin.describe_group` asks at most v5). An answer of
    GROUP_ID_NOT_FOUND there (a classic or absent group), or a broker without API 69 (before 3.7,
    ZooKeeper mode), keeps the classic sample.

  A coordinator that cannot be found or asked, or that answers an error (NOT_COORDINATOR,
  COORDINATOR_LOAD_IN_PROGRESS, GROUP_ID_NOT_FOUND for a KIP-848 run), is an ``Unknown`` sample:
  an observation, never a crash and never a wait.
* ``broker_log`` — every broker's log tailed and its group coordinator lines parsed (below);
  ``ts``/``mono_ns`` come from the line's own timestamp (ms), mapped onto CLOCK_MONOTONIC, so the
  line sorts where it happened rather than when it was read.
* ``committed_offsets`` — OffsetFetch samples (every ``offsets_interval``), written when they change,
  stamped when the request was sent (the earliest moment the answer can describe).

Lines parsed, classic groups (Kafka 2.8–3.9 ``kafka.coordinator.group.GroupCoordinator``; the same
words from Kafka 4.x's ``org.apache.kafka.coordinator.group.GroupMetadataManager``, which appends
``(reason: ...)`` / ``with N members.``):

* ``Preparing to rebalance group G in state PreparingRebalance with old generation N``
* ``Stabilized group G generation N``
* ``Member ... memberId=M ... in group G has failed`` (4.x: ``Member M in group G has failed, removing it
  from the group.``)
* ``Loading group metadata for G with generation N`` / ``Unloading group metadata for G with generation N``
  (GroupMetadataManager, up to 3.9); on 4.x ``Loaded classic group G with K members.`` (``loading``,
  no generation: the line gives the member count) and ``[GroupId=G] Unloading group metadata for
  generation N.``
* ``Group G with generation N is now empty`` and ``Assignment received from leader M for group G for
  generation N`` (kept as ``other`` with their generation).

KIP-848 consumer groups (Kafka 4.0–4.4 ``GroupMetadataManager``, INFO; each line starts with the
shard's ``[GroupCoordinator id=B topic=__consumer_offsets partition=P]`` log context):

* ``[GroupId G] Member M joins the consumer group using the consumer protocol.``, the static
  member's ``Static member M with instance id I joins ...`` and ``Static member with instance id I
  re-joins ... Created a new member M to replace the existing member O.`` -> ``member_joined``
* ``[GroupId G] Bumped group epoch to N.`` (4.4: ``... to N with metadata hash H.``) -> ``epoch_bumped``
* ``[GroupId G] Computed a new target assignment for epoch N with 'A' assignor in Tms.`` ->
  ``target_assignment``
* ``[GroupId G] Member M fenced from the group because the member session expired.`` ->
  ``member_failed`` (what the classic coordinator calls "has failed": the session expired)
* ``[GroupId G] Member M fenced from the group because it failed to transition from epoch E within
  Tms.`` (generation E) and other fencing reasons -> ``member_fenced``
* ``[GroupId G] Member M left the consumer group.`` / ``Static member M with instance id I left the
  consumer group.`` -> ``member_left``
* ``Loaded consumer group G with K members.`` -> ``loading``; ``[GroupId=G] Unloaded group metadata
  for group epoch N.`` -> ``unloading``
* online migration (KIP-848): ``[GroupId G] Converted the classic group to a consumer group.`` (and back)
  -> ``group_converted``; ``... Converted the empty classic group to a consumer group.`` (and back) ->
  ``group_recreated`` (a new group: its epochs start again); ``Cannot upgrade classic group G to consumer
  group: REASON.`` (WARN) -> ``upgrade_refused``
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

from chaos.cluster.admin import ClusterAdmin, GroupDescription
from chaos.cluster.wire import (
    ConsumerGroupView,
    ShareOffsets,
    describe_consumer_group,
    describe_share_group,
    describe_share_group_offsets,
)
from chaos.history.event import BrokerLogEvent, GroupMember, GroupState, GroupType, Kind
from chaos.history.writer import EventWriter

_TS = re.compile(r"^\[(\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}),(\d{3})\] ")

#: the states of a share group (``ShareGroup.ShareGroupState``, KIP-932); any other string is Unknown
SHARE_GROUP_STATES = frozenset({GroupState.EMPTY, GroupState.STABLE, GroupState.DEAD})
#: the states of a KIP-848 group (``ConsumerGroup.ConsumerGroupState``); any other string is Unknown
CONSUMER_GROUP_STATES = frozenset({GroupState.EMPTY, GroupState.ASSIGNING, GroupState.RECONCILING,
                                   GroupState.STABLE, GroupState.DEAD})


@dataclass(frozen=True, slots=True)
class ParsedLine:
    event: BrokerLogEvent
    group: str
    generation: int | None
    member_id: str | None


def _patterns(group: str) -> list[tuple[re.Pattern, BrokerLogEvent]]:
    """First match wins: the specific fencing reasons come before the general one."""
    g = re.escape(group)
    # KIP-848 lines carry the group as "[GroupId G]" (GroupMetadataManager's own prefix)
    k = rf"\[GroupId {g}\] "
    return [
        # classic groups: GroupCoordinator (2.8-3.9) and GroupMetadataManager (4.x) use the same words
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
        # Kafka 4.x loading/unloading (GroupMetadataManager.onLoaded / onUnloaded), classic and consumer groups
        (re.compile(rf"Loaded (?:classic|consumer) group {g} with \d+ members"), BrokerLogEvent.LOADING),
        (re.compile(rf"\[GroupId={g}\] Unloading group metadata for generation (?P<gen>\d+)"),
         BrokerLogEvent.UNLOADING),
        (re.compile(rf"\[GroupId={g}\] Unloaded group metadata for group epoch (?P<gen>\d+)"),
         BrokerLogEvent.UNLOADING),
        # KIP-848 consumer groups (GroupMetadataManager, Kafka 4.0-4.4)
        (re.compile(rf"{k}Member (?P<member>\S+) fenced from the group because the member session expired"),
         BrokerLogEvent.MEMBER_FAILED),
        (re.compile(rf"{k}Member (?P<member>\S+) fenced from the group because it failed to transition from "
                    rf"epoch (?P<gen>-?\d+) within"), BrokerLogEvent.MEMBER_FENCED),
        (re.compile(rf"{k}Member (?P<member>\S+) fenced from the group because "), BrokerLogEvent.MEMBER_FENCED),
        (re.compile(rf"{k}Member (?P<member>\S+) joins the consumer group using the \w+ protocol"),
         BrokerLogEvent.MEMBER_JOINED),
        (re.compile(rf"{k}Static member (?P<member>\S+) with instance id .* joins the consumer group using the "
                    rf"\w+ protocol"), BrokerLogEvent.MEMBER_JOINED),
        (re.compile(rf"{k}Static member with instance id .* re-joins the consumer group using the \w+ protocol\. "
                    rf"Created a new member (?P<member>\S+) to replace"), BrokerLogEvent.MEMBER_JOINED),
        (re.compile(rf"{k}Bumped group epoch to (?P<gen>\d+)"), BrokerLogEvent.EPOCH_BUMPED),
        (re.compile(rf"{k}Converted the empty (?:classic|consumer) group to a (?:consumer|classic) group"),
         BrokerLogEvent.GROUP_RECREATED),
        (re.compile(rf"{k}Converted the (?:classic|consumer) group to a (?:consumer|classic) group"),
         BrokerLogEvent.GROUP_CONVERTED),
        (re.compile(rf"Cannot upgrade classic group {g} to consumer group"), BrokerLogEvent.UPGRADE_REFUSED),
        (re.compile(rf"{k}Computed a new target assignment for epoch (?P<gen>\d+) with '[^']*' assignor"),
         BrokerLogEvent.TARGET_ASSIGNMENT),
        (re.compile(rf"{k}Member (?P<member>\S+) left the consumer group\."), BrokerLogEvent.MEMBER_LEFT),
        # 4.0 spells it "Static Member"; "temporarily left" (epoch -2) keeps the member: not a leave
        (re.compile(rf"{k}Static [Mm]ember (?P<member>\S+) with instance id .* (?<!temporarily )left the "
                    rf"consumer group\."), BrokerLogEvent.MEMBER_LEFT),
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


@dataclass(frozen=True, slots=True)
class GroupSample:
    """One ``group_state`` sample before it is written (the event's fields, see
    :class:`chaos.history.event.GroupStateSample`). Equal samples are one observation: the observer
    writes a sample when it differs from the last one written (the dedup key is the whole record,
    epochs included), or a second after it."""

    state: GroupState
    coordinator: int | None
    protocol: str | None
    generation: int | None
    members: tuple[GroupMember, ...]
    group_epoch: int | None = None
    assignment_epoch: int | None = None
    group_type: GroupType | None = None

    def fields(self, group: str) -> dict[str, Any]:
        """The event's fields as JSON values. Fields added later are left out while None (the
        writer's fast path writes what it is given; docs/architecture.md, "The history")."""
        out: dict[str, Any] = {"group": group, "state": self.state.value, "coordinator": self.coordinator,
                               "protocol": self.protocol, "generation": self.generation,
                               "members": [_member_json(m) for m in self.members]}
        if self.group_epoch is not None:
            out["group_epoch"] = self.group_epoch
        if self.assignment_epoch is not None:
            out["assignment_epoch"] = self.assignment_epoch
        if self.group_type is not None:
            out["group_type"] = self.group_type.value
        return out


#: the coordinator could not be found, asked, or did not describe the group
UNKNOWN_SAMPLE = GroupSample(GroupState.UNKNOWN, None, None, None, ())


def _member_json(m: GroupMember) -> dict[str, Any]:
    out: dict[str, Any] = {"member_id": m.member_id, "instance_id": m.instance_id, "client_id": m.client_id,
                           "host": m.host, "assignment": [list(tp) for tp in m.assignment]}
    if m.subscription:
        out["subscription"] = list(m.subscription)
    if m.member_epoch is not None:
        out["member_epoch"] = m.member_epoch
    if m.target_assignment:
        out["target_assignment"] = [list(tp) for tp in m.target_assignment]
    return out


def classic_sample(info: GroupDescription, coordinator: int | None, generation: int | None) -> GroupSample:
    """A DescribeGroups answer as a sample; ``generation`` comes from the coordinator's log (DescribeGroups
    has none)."""
    state = GroupState(info.state) if info.state in GroupState._value2member_map_ else GroupState.UNKNOWN
    # subscription: the coordinator's copy of the member's JoinGroup subscription (who asked for which topics)
    members = tuple(GroupMember(member_id=m.member_id, instance_id=None, client_id=m.client_id, host=m.host,
                                assignment=m.assignment, subscription=m.subscription)
                    for m in sorted(info.members, key=lambda m: m.member_id))
    return GroupSample(state, coordinator, info.protocol or None, generation, members, group_type=GroupType.CLASSIC)


def consumer_sample(view: ConsumerGroupView, coordinator: int) -> GroupSample:
    """A ConsumerGroupDescribe answer (KIP-848) as a sample.

    ``protocol`` is the coordinator's assignor, ``generation`` the group epoch (it only grows, like a
    generation), each member with its epoch, current and target assignment. An answer with an error
    (NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, GROUP_ID_NOT_FOUND) is
    :data:`UNKNOWN_SAMPLE`; a state Kafka names that KIP-848 does not is ``Unknown``.
    """
    if view.error_code != 0:
        return UNKNOWN_SAMPLE
    state = GroupState(view.state) if view.state in CONSUMER_GROUP_STATES else GroupState.UNKNOWN
    members = tuple(GroupMember(member_id=m.member_id, instance_id=m.instance_id, client_id=m.client_id, host="",
                                assignment=tuple(sorted(m.assignment)), member_epoch=m.member_epoch,
                                target_assignment=tuple(sorted(m.target_assignment)),
                                # what the member asked for (its heartbeat's topic names), as DescribeGroups'
                                # JoinGroup metadata gives it for a classic member: convergence reads it
                                subscription=m.subscribed_topics)
                    for m in sorted(view.members, key=lambda m: m.member_id))
    return GroupSample(state, coordinator, view.assignor or None, view.group_epoch, members,
                       group_epoch=view.group_epoch, assignment_epoch=view.assignment_epoch,
                       group_type=GroupType.CONSUMER)


class GroupObserver:
    """Runs in a thread of the runner; writes ``events/observer.jsonl``.

    ``kip848``: the run's members use ``group.protocol=consumer``, so every tick asks
    ConsumerGroupDescribe rather than DescribeGroups. ``broker_address`` maps a coordinator's broker id
    to the address ConsumerGroupDescribe is sent to (its control-lane proxy); without it KIP-848 groups
    are not described (``Unknown`` samples when ``kip848``). ``describe_timeout_s`` bounds one
    ConsumerGroupDescribe (connect, ApiVersions and the request together).
    """

    def __init__(self, admin: ClusterAdmin, group: str, topic: str, run_dir: Path,
                 broker_logs: dict[int, Path], interval: float = 0.1, offsets_interval: float = 0.5, *,
                 kip848: bool = False, broker_address: Callable[[int], str] | None = None,
                 describe_timeout_s: float = 1.5, share: bool = False, partitions: int = 0):
        self.admin = admin
        self.group = group
        self.topic = topic
        self.events = EventWriter.for_run(run_dir, "observer")
        self.interval = interval
        self.offsets_interval = offsets_interval
        self.kip848 = kip848
        self.broker_address = broker_address
        self.describe_timeout_s = describe_timeout_s
        #: a share group (KIP-932): sampled as ``share_group_state`` (ShareGroupDescribe and
        #: DescribeShareGroupOffsets over ``partitions`` partitions of the topic) instead of ``group_state`` and
        #: ``committed_offsets``
        self.share = share
        self.partitions = partitions
        #: the share-partition start offsets and lags of the newest share sample that had them (None before one),
        #: and when that sample was asked (CLOCK_MONOTONIC ns)
        self.share_offsets: ShareOffsets | None = None
        self.share_offsets_ns = 0
        self._last_share: tuple | None = None
        self.log = CoordinatorLog(group, broker_logs)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._last_sample: GroupSample | None = None
        self._last_emit = 0.0
        self._last_offsets: tuple | None = None
        self._next_offsets = 0.0
        self._stabilized: dict[int, int] = {}   # broker -> newest stabilized generation it logged
        self.samples = 0
        #: CLOCK_MONOTONIC of the newest group_state event written
        self.last_sample_ns = 0
        self.on_event: Callable[[object], None] | None = None

    @property
    def latest(self) -> GroupSample | None:
        """The newest group sample written (None before the first)."""
        return self._last_sample

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
        # kafka-python 3 keeps an IO thread per client: one left open reconnects to the stopped cluster for as
        # long as the process lives (a leaked thread per run in a pytest session, logging each refused connect)
        self.admin.close()

    def _run(self) -> None:
        while not self._stop.is_set():
            t0 = time.monotonic()
            self._read_logs()
            if self.share:
                if t0 >= self._next_offsets:
                    self._sample_share()
                    self._next_offsets = t0 + self.offsets_interval
                self._stop.wait(max(0.0, self.interval - (time.monotonic() - t0)))
                continue
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
            elif parsed.event in (BrokerLogEvent.UNLOADING, BrokerLogEvent.LOADING):
                # Kafka 4.x logs a load without the generation ("Loaded classic group G with K members"):
                # the earlier stint's generation is stale all the same, and unknown until the next one
                self._stabilized.pop(bid, None)
            self.events.emit(Kind.BROKER_LOG, broker=bid, group=self.group, event=parsed.event.value,
                             generation=parsed.generation, member_id=parsed.member_id,
                             line=line.strip()[:2000], **extra)

    def _describe_classic(self) -> GroupSample:
        try:
            # one attempt each: a coordinator that is down or loading is an observation, not a wait
            coordinator = self.admin.coordinator_id(self.group, wait=False)
            info = self.admin.describe_group(self.group, coordinator, wait=False)
        except Exception:  # noqa: BLE001 - a coordinator that is down is an observation, not a crash
            coordinator, info = None, None
        # the coordinator logs "Loading group metadata ... generation N" before it can answer for the
        # group, so reading the logs *after* its answer cannot miss the generation that answer is at
        self._read_logs()
        generation = self._stabilized.get(coordinator) if coordinator is not None else None
        if info is None:
            return GroupSample(GroupState.UNKNOWN, coordinator, None, generation, ())
        return classic_sample(info, coordinator, generation)

    def _describe_consumer(self, coordinator: int | None) -> GroupSample:
        """ConsumerGroupDescribe at ``coordinator``'s control-lane proxy: one attempt, bounded by
        ``describe_timeout_s``; anything but a description is :data:`UNKNOWN_SAMPLE`."""
        if coordinator is None or self.broker_address is None:
            return UNKNOWN_SAMPLE
        try:
            view = describe_consumer_group(self.broker_address(coordinator), self.group, self.describe_timeout_s)
        except Exception:  # noqa: BLE001 - WireError (down, cut, slow), an unknown broker: an observation
            return UNKNOWN_SAMPLE
        return consumer_sample(view, coordinator)

    def _sample_group(self) -> None:
        if self.kip848:
            try:
                coordinator = self.admin.coordinator_id(self.group, wait=False)
            except Exception:  # noqa: BLE001
                coordinator = None
            sample = self._describe_consumer(coordinator)
        else:
            sample = self._describe_classic()
            if sample.state is GroupState.DEAD and not sample.members and sample.coordinator is not None:
                # Dead without members: absent, or not a classic group (module docstring); ask as KIP-848
                other = self._describe_consumer(sample.coordinator)
                if other.group_type is GroupType.CONSUMER:
                    sample = other
        now = time.monotonic()
        self.samples += 1
        if sample != self._last_sample or now - self._last_emit >= 1.0:
            ev = self.events.emit(Kind.GROUP_STATE, **sample.fields(self.group))
            self._last_sample, self._last_emit = sample, now
            self.last_sample_ns = ev.mono_ns

    def _sample_share(self) -> None:
        """One ``share_group_state`` sample (every ``offsets_interval``): ShareGroupDescribe and
        DescribeShareGroupOffsets at the coordinator's control-lane proxy. Written when it differs from the last
        one written, or a second after it; ``start_offsets`` null when not answered. Stamped when asked, as
        committed offsets are (:meth:`_sample_offsets`)."""
        ts, sent_ns = time.time(), time.monotonic_ns()
        state, coordinator = GroupState.UNKNOWN, None
        epochs: tuple[int | None, int | None] = (None, None)
        members: tuple[GroupMember, ...] = ()
        offsets: dict[tuple[str, int], int] | None = None
        try:
            coordinator = self.admin.coordinator_id(self.group, wait=False)
        except Exception:  # noqa: BLE001 - a coordinator that is down is an observation
            coordinator = None
        if coordinator is not None and self.broker_address is not None:
            address = self.broker_address(coordinator)
            try:
                view = describe_share_group(address, self.group, self.describe_timeout_s)
                if view.error_code == 0:
                    state = GroupState(view.state) if view.state in SHARE_GROUP_STATES else GroupState.UNKNOWN
                    epochs = (view.group_epoch, view.assignment_epoch)
                    members = tuple(GroupMember(member_id=m, instance_id=None, client_id=c, host="",
                                                assignment=a, member_epoch=e) for m, c, e, a in view.members)
                got = describe_share_group_offsets(address, self.group, self.topic, tuple(range(self.partitions)),
                                                   self.describe_timeout_s)
                if got.error_code == 0:
                    offsets = dict(got.start_offsets)
                    self.share_offsets, self.share_offsets_ns = got, sent_ns
            except Exception:  # noqa: BLE001 - WireError (down, cut, slow): an observation
                pass
        now = time.monotonic()
        self.samples += 1
        key = (state, coordinator, epochs, members, None if offsets is None else tuple(sorted(offsets.items())))
        if key == self._last_share and now - self._last_emit < 1.0:
            return
        rows = None if offsets is None else sorted([t, p, o] for (t, p), o in offsets.items())
        ev = self.events.emit(Kind.SHARE_GROUP_STATE, ts=ts, mono_ns=sent_ns, group=self.group, state=state.value,
                              coordinator=coordinator, group_epoch=epochs[0], assignment_epoch=epochs[1],
                              members=[_member_json(m) for m in members], start_offsets=rows)
        self._last_share, self._last_emit = key, now
        self._last_sample = GroupSample(state, coordinator, None, None, members)
        self.last_sample_ns = ev.mono_ns

    def _sample_offsets(self) -> None:
        try:
            # OffsetFetch at the broker FindCoordinator just named, so the sample's ``coordinator`` is the broker
            # that answered: a coordinator cut off (a zombie still holding the group) and its successor can
            # answer differently, and the evidence must say which one did
            coordinator = self.admin.coordinator_id(self.group, wait=False)
            if coordinator is None:
                return
            # The sample is stamped when its OffsetFetch was sent, not when the answer was read: the coordinator
            # answered from its state at some moment in between, and a commit acknowledged before the request
            # left must show in the answer, one acknowledged after it need not. Read late (kafka-python 3's IO
            # thread held up 0.5 s on a loaded machine), an answer stamped at its reading showed offsets from
            # before a commit acknowledged 0.5 s earlier: a false committed-offsets violation.
            ts, sent_ns = time.time(), time.monotonic_ns()
            offsets = self.admin.committed_offsets(self.group, wait=False, coordinator=coordinator)
        except Exception:  # noqa: BLE001
            return
        rows = sorted([t, p, o] for (t, p), o in offsets.items() if o >= 0)
        key = tuple(map(tuple, rows))
        if key != self._last_offsets:
            self.events.emit(Kind.COMMITTED_OFFSETS, ts=ts, mono_ns=sent_ns, group=self.group,
                             coordinator=coordinator, offsets=rows)
            self._last_offsets = key
