"""The event schema: the only interface between running and judging.

One JSON object per line (DESIGN.md section 4). Every event carries ``seq``
(unique in the run), ``ts`` (wall seconds), ``mono_ns`` (CLOCK_MONOTONIC, shared
by every process on the machine, so it orders events across processes),
``source`` and ``kind``; the rest depends on the kind. The schema extends the
JSON-lines protocol of Kafka's own ``VerifiableConsumer``
(partitions_assigned, records_consumed, offsets_committed ...).

Field names are fixed: workers, observer, nemesis and runner write them,
checkers read them. :func:`from_dict` rejects an unknown kind, a missing field,
an unknown field (a typo must not pass silently) and a value of the wrong type,
raising :class:`SchemaError`; readers turn that into a ``UsageError`` naming the
file and line.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from dataclasses import MISSING, dataclass, fields
from enum import StrEnum
from typing import Any, ClassVar

import orjson

from chaos.outcome import Outcome

SCHEMA_VERSION = 1

TopicPartition = tuple[str, int]
TopicPartitionOffset = tuple[str, int, int]


class SchemaError(ValueError):
    """An event or header that does not follow the schema; the text says which field."""


class Kind(StrEnum):
    SEND_OK = "send_ok"
    SEND_FAIL = "send_fail"
    SEND_UNKNOWN = "send_unknown"
    MEMBER_START = "member_start"
    ASSIGNED = "assigned"
    REVOKED = "revoked"
    LOST = "lost"
    CONSUMED = "consumed"
    COMMIT = "commit"
    ERROR = "error"
    MEMBER_STOP = "member_stop"
    GROUP_STATE = "group_state"
    BROKER_LOG = "broker_log"
    COMMITTED_OFFSETS = "committed_offsets"
    FAULT_START = "fault_start"
    FAULT_END = "fault_end"
    FAULT_VERIFIED = "fault_verified"
    PHASE = "phase"
    FINAL_READ = "final_read"


class Client(StrEnum):
    CONFLUENT_KAFKA = "confluent-kafka"
    KAFKA_PYTHON = "kafka-python"
    JAVA = "java"


class Assignor(StrEnum):
    RANGE = "range"
    ROUNDROBIN = "roundrobin"
    STICKY = "sticky"
    COOPERATIVE_STICKY = "cooperative-sticky"


class RebalanceProtocol(StrEnum):
    EAGER = "eager"
    COOPERATIVE = "cooperative"  # KIP-429 incremental cooperative rebalancing


class CommitMode(StrEnum):
    SYNC = "sync"
    ASYNC = "async"
    AUTO = "auto"


class WrongMode(StrEnum):
    """Deliberately wrong consumers a checker must catch (DESIGN.md section 5)."""

    COMMIT_BEFORE_PROCESS = "commit_before_process"
    IGNORE_REVOKE = "ignore_revoke"
    SKIP_RECORDS = "skip_records"


class GroupState(StrEnum):
    """Coordinator group states (GroupMetadata.scala); Unknown = admin API could not tell."""

    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"
    UNKNOWN = "Unknown"


class BrokerLogEvent(StrEnum):
    """Parsed GroupCoordinator log lines."""

    PREPARING_REBALANCE = "preparing_rebalance"  # generation = the OLD generation
    STABILIZED = "stabilized"
    MEMBER_FAILED = "member_failed"
    LOADING = "loading"
    UNLOADING = "unloading"
    OTHER = "other"


class RunPhase(StrEnum):
    SETUP = "setup"
    WARMUP = "warmup"
    CHAOS = "chaos"
    HEAL = "heal"
    QUIESCE = "quiesce"
    FINAL_READ = "final_read"
    TEARDOWN = "teardown"


class VerificationStage(StrEnum):
    EFFECT = "effect"
    HEALED = "healed"
    #: recorded (``ok`` false) for a planned fault that never fired, with the reason as evidence
    FIRED = "fired"


# --------------------------------------------------------------------------- events


@dataclass(frozen=True, slots=True)
class Event:
    """Fields common to every event."""

    seq: int
    ts: float
    mono_ns: int
    source: str

    kind: ClassVar[Kind]


@dataclass(frozen=True, slots=True)
class SendOk(Event):
    """A produce acknowledged by the leader: the record is at (topic, partition, offset)."""

    topic: str
    partition: int
    offset: int
    key: str | None
    value: str
    kind: ClassVar[Kind] = Kind.SEND_OK


@dataclass(frozen=True, slots=True)
class SendFail(Event):
    """A produce that definitely failed (``chaos.outcome.classify`` said ``fail``)."""

    topic: str
    key: str | None
    value: str
    error_code: int | None
    error_name: str
    kind: ClassVar[Kind] = Kind.SEND_FAIL


@dataclass(frozen=True, slots=True)
class SendUnknown(Event):
    """A produce whose outcome is not known (timeout, crash)."""

    topic: str
    key: str | None
    value: str
    error_name: str
    kind: ClassVar[Kind] = Kind.SEND_UNKNOWN


@dataclass(frozen=True, slots=True)
class MemberStart(Event):
    """A consumer process started; its configuration as it will join."""

    group: str
    client: Client
    client_version: str
    instance_id: str | None  # group.instance.id (KIP-345 static membership)
    assignor: Assignor
    protocol: RebalanceProtocol
    commit_mode: CommitMode
    session_timeout_ms: int
    max_poll_interval_ms: int
    auto_commit_interval_ms: int | None
    wrong_mode: WrongMode | None
    kind: ClassVar[Kind] = Kind.MEMBER_START


@dataclass(frozen=True, slots=True)
class OwnershipChange(Event):
    """Base of assigned / revoked / lost: the member's view of its partitions."""

    group: str
    partitions: tuple[TopicPartition, ...]
    generation: int | None
    member_id: str | None
    incremental: bool  # True for KIP-429 incremental assign/revoke


@dataclass(frozen=True, slots=True)
class Assigned(OwnershipChange):
    kind: ClassVar[Kind] = Kind.ASSIGNED


@dataclass(frozen=True, slots=True)
class Revoked(OwnershipChange):
    kind: ClassVar[Kind] = Kind.REVOKED


@dataclass(frozen=True, slots=True)
class Lost(OwnershipChange):
    """Partitions lost without a chance to commit (KIP-429 onPartitionsLost)."""

    kind: ClassVar[Kind] = Kind.LOST


@dataclass(frozen=True, slots=True)
class Consumed(Event):
    """A batch of one partition's records the member finished processing."""

    group: str
    topic: str
    partition: int
    offsets: tuple[int, ...]
    generation: int | None
    member_id: str | None
    kind: ClassVar[Kind] = Kind.CONSUMED


@dataclass(frozen=True, slots=True)
class Commit(Event):
    """An OffsetCommit and its outcome; offsets are *next* offsets to read (Kafka convention).

    ``ts``/``mono_ns`` are when the commit was *sent* (the coordinator judges it between then and its
    answer), except auto commits, stamped when the client reported them. ``answered_ns`` is when the
    outcome arrived (None: the same instant as ``mono_ns``, or never — a killed member's ``unknown``).
    A commit took effect at the coordinator somewhere in [mono_ns, answered_ns]: a librdkafka commit
    sent to a coordinator that then dies is retried at the next one and answered seconds later.
    """

    group: str
    offsets: tuple[TopicPartitionOffset, ...]
    generation: int | None
    member_id: str | None
    outcome: Outcome
    error_code: int | None
    error_name: str | None
    auto: bool
    answered_ns: int | None = None
    kind: ClassVar[Kind] = Kind.COMMIT


@dataclass(frozen=True, slots=True)
class ErrorEvent(Event):
    """An error the client reported outside a produce or commit result."""

    message: str
    error_code: int | None
    error_name: str | None
    fatal: bool
    kind: ClassVar[Kind] = Kind.ERROR


@dataclass(frozen=True, slots=True)
class MemberStop(Event):
    """The member stopped; written by the runner with the member's source when it was killed."""

    group: str
    clean: bool
    signal: str | None
    kind: ClassVar[Kind] = Kind.MEMBER_STOP


@dataclass(frozen=True, slots=True)
class GroupMember:
    """One member as DescribeGroups reports it."""

    member_id: str
    instance_id: str | None
    client_id: str
    host: str
    assignment: tuple[TopicPartition, ...]
    #: topics in the member's JoinGroup metadata (ConsumerProtocolSubscription), as the coordinator
    #: holds it; () when not recorded (histories before this field, or an undecodable protocol)
    subscription: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class GroupStateSample(Event):
    """The observer's DescribeGroups sample."""

    group: str
    state: GroupState
    coordinator: int | None
    protocol: str | None
    generation: int | None
    members: tuple[GroupMember, ...]
    kind: ClassVar[Kind] = Kind.GROUP_STATE


@dataclass(frozen=True, slots=True)
class BrokerLog(Event):
    """A parsed GroupCoordinator log line (generation: OLD generation for preparing_rebalance)."""

    broker: int
    group: str
    event: BrokerLogEvent
    generation: int | None
    member_id: str | None
    line: str
    kind: ClassVar[Kind] = Kind.BROKER_LOG


@dataclass(frozen=True, slots=True)
class CommittedOffsets(Event):
    """The observer's OffsetFetch sample of the group's committed offsets."""

    group: str
    coordinator: int | None
    offsets: tuple[TopicPartitionOffset, ...]
    kind: ClassVar[Kind] = Kind.COMMITTED_OFFSETS


@dataclass(frozen=True, slots=True)
class FaultStart(Event):
    fault_id: str
    fault_type: str
    target_role: str
    node: str | None
    params: Mapping[str, Any]
    trigger: str
    kind: ClassVar[Kind] = Kind.FAULT_START


@dataclass(frozen=True, slots=True)
class FaultEnd(Event):
    fault_id: str
    fault_type: str
    node: str | None
    kind: ClassVar[Kind] = Kind.FAULT_END


@dataclass(frozen=True, slots=True)
class FaultVerified(Event):
    fault_id: str
    stage: VerificationStage
    ok: bool
    evidence: str
    kind: ClassVar[Kind] = Kind.FAULT_VERIFIED


@dataclass(frozen=True, slots=True)
class PhaseEvent(Event):
    name: RunPhase
    kind: ClassVar[Kind] = Kind.PHASE


@dataclass(frozen=True, slots=True)
class FinalRead(Event):
    """What a fresh reader saw at the end: (partition, offset) pairs."""

    group: str | None
    topic: str
    records: tuple[tuple[int, int], ...]
    kind: ClassVar[Kind] = Kind.FINAL_READ


EVENT_TYPES: tuple[type[Event], ...] = (
    SendOk, SendFail, SendUnknown, MemberStart, Assigned, Revoked, Lost, Consumed, Commit,
    ErrorEvent, MemberStop, GroupStateSample, BrokerLog, CommittedOffsets, FaultStart, FaultEnd,
    FaultVerified, PhaseEvent, FinalRead,
)
EVENT_CLASS: dict[Kind, type[Event]] = {cls.kind: cls for cls in EVENT_TYPES}
assert len(EVENT_CLASS) == len(Kind), "every Kind needs exactly one event class"

COMMON_FIELDS = ("seq", "ts", "mono_ns", "source")


@dataclass(frozen=True, slots=True)
class Header:
    """The first line of history.jsonl: what ran, with which versions and configs."""

    schema_version: int
    run_id: str
    seed: int | None
    experiment: Mapping[str, Any]
    versions: Mapping[str, Any]
    configs: Mapping[str, Any]
    notes: tuple[str, ...] = ()  # reader/merger remarks, e.g. a dropped torn line


# --------------------------------------------------------------------------- (de)serialisation

Converter = Callable[[Any, str], Any]


def _fail(name: str, want: str, value: Any) -> SchemaError:
    return SchemaError(f"field {name!r} must be {want}, got {value!r}")


def _int(v: Any, name: str) -> int:
    if type(v) is int:
        return v
    raise _fail(name, "an integer", v)


def _float(v: Any, name: str) -> float:
    if type(v) is float or type(v) is int:
        return v
    raise _fail(name, "a number", v)


def _str(v: Any, name: str) -> str:
    if type(v) is str:
        return v
    raise _fail(name, "a string", v)


def _name(v: Any, name: str) -> str:
    """A string that names something (source, group, topic, member): interned.

    Histories repeat a few names millions of times; interning makes them one object each,
    so the checkers' dict lookups compare by identity (and memory drops several-fold).
    """
    if type(v) is str:
        return _intern(v)
    raise _fail(name, "a string", v)


_intern = sys.intern
_TP_CACHE: dict[tuple[str, int], tuple[str, int]] = {}


def _bool(v: Any, name: str) -> bool:
    if type(v) is bool:
        return v
    raise _fail(name, "true or false", v)


def _obj(v: Any, name: str) -> Mapping[str, Any]:
    if isinstance(v, dict):
        return v
    raise _fail(name, "an object", v)


def _optional(conv: Converter) -> Converter:
    def convert(v: Any, name: str) -> Any:
        return None if v is None else conv(v, name)

    return convert


def _enum(enum: type[StrEnum]) -> Converter:
    members = {m.value: m for m in enum}
    allowed = "|".join(members)

    def convert(v: Any, name: str) -> Any:
        try:
            return members[v]
        except (KeyError, TypeError):
            raise _fail(name, f"one of {allowed}", v) from None

    return convert


def _int_list(v: Any, name: str) -> tuple[int, ...]:
    if type(v) is list and all(type(x) is int for x in v):
        return tuple(v)
    raise _fail(name, "a list of integers", v)


def _tp_list(v: Any, name: str) -> tuple[TopicPartition, ...]:
    out = []
    cache = _TP_CACHE
    try:
        for t, p in v:
            if type(t) is not str or type(p) is not int:
                raise _fail(name, "a list of [topic, partition]", v)
            tp = cache.get((t, p))
            if tp is None:
                tp = cache[(t, p)] = (_intern(t), p)
            out.append(tp)
    except (TypeError, ValueError):
        raise _fail(name, "a list of [topic, partition]", v) from None
    return tuple(out)


def _tpo_list(v: Any, name: str) -> tuple[TopicPartitionOffset, ...]:
    try:
        out = tuple((_intern(t), p, o) for t, p, o in v)
    except (TypeError, ValueError):
        raise _fail(name, "a list of [topic, partition, offset]", v) from None
    for t, p, o in out:
        if type(p) is not int or type(o) is not int:
            raise _fail(name, "a list of [topic, partition, offset]", v)
    return out


def _po_list(v: Any, name: str) -> tuple[tuple[int, int], ...]:
    try:
        out = tuple((p, o) for p, o in v)
    except (TypeError, ValueError):
        raise _fail(name, "a list of [partition, offset]", v) from None
    for p, o in out:
        if type(p) is not int or type(o) is not int:
            raise _fail(name, "a list of [partition, offset]", v)
    return out


def _members(v: Any, name: str) -> tuple[GroupMember, ...]:
    if type(v) is not list:
        raise _fail(name, "a list of members", v)
    out = []
    for i, m in enumerate(v):
        if not isinstance(m, dict):
            raise _fail(f"{name}[{i}]", "an object", m)
        missing = {"member_id", "instance_id", "client_id", "host", "assignment"} - m.keys()
        if missing:
            raise SchemaError(f"{name}[{i}] is missing {', '.join(sorted(missing))}")
        out.append(GroupMember(
            member_id=_str(m["member_id"], "member_id"),
            instance_id=_optional(_str)(m["instance_id"], "instance_id"),
            client_id=_str(m["client_id"], "client_id"),
            host=_str(m["host"], "host"),
            assignment=_tp_list(m["assignment"], "assignment"),
            subscription=_subscription(m.get("subscription", []), f"{name}[{i}].subscription"),
        ))
    return tuple(out)


def _subscription(v: Any, name: str) -> tuple[str, ...]:
    if type(v) is not list or any(type(t) is not str or not t for t in v):
        raise _fail(name, "a list of topic names", v)
    return tuple(v)


_OPT_INT = _optional(_int)
_OPT_STR = _optional(_str)
_OPT_NAME = _optional(_name)

# Converter per field name; a name means the same thing in every kind.
_CONVERTERS: dict[str, Converter] = {
    "seq": _int, "ts": _float, "mono_ns": _int, "source": _name,
    "topic": _name, "partition": _int, "offset": _int, "key": _OPT_STR, "value": _str,
    "error_code": _OPT_INT, "group": _name, "client_version": _str, "instance_id": _OPT_NAME,
    "session_timeout_ms": _int, "max_poll_interval_ms": _int, "auto_commit_interval_ms": _OPT_INT,
    "partitions": _tp_list, "generation": _OPT_INT, "member_id": _OPT_NAME, "incremental": _bool,
    "message": _str, "fatal": _bool, "clean": _bool, "signal": _OPT_STR,
    "coordinator": _OPT_INT, "protocol": _OPT_STR, "members": _members, "broker": _int, "line": _str,
    "fault_id": _str, "fault_type": _str, "target_role": _str, "node": _OPT_STR, "params": _obj,
    "trigger": _str, "ok": _bool, "evidence": _str, "records": _po_list, "auto": _bool,
    "answered_ns": _OPT_INT,
}
# Field names whose converter differs by kind.
_KIND_OVERRIDES: dict[Kind, dict[str, Converter]] = {
    Kind.SEND_FAIL: {"error_name": _str},
    Kind.SEND_UNKNOWN: {"error_name": _str},
    Kind.MEMBER_START: {
        "client": _enum(Client), "assignor": _enum(Assignor), "protocol": _enum(RebalanceProtocol),
        "commit_mode": _enum(CommitMode), "wrong_mode": _optional(_enum(WrongMode)),
    },
    Kind.CONSUMED: {"offsets": _int_list},
    Kind.COMMIT: {"offsets": _tpo_list, "outcome": _enum(Outcome), "error_name": _OPT_STR},
    Kind.ERROR: {"error_name": _OPT_STR},
    Kind.GROUP_STATE: {"state": _enum(GroupState)},
    Kind.BROKER_LOG: {"event": _enum(BrokerLogEvent)},
    Kind.COMMITTED_OFFSETS: {"offsets": _tpo_list},
    Kind.FAULT_VERIFIED: {"stage": _enum(VerificationStage)},
    Kind.PHASE: {"name": _enum(RunPhase)},
    Kind.FINAL_READ: {"group": _OPT_NAME},
}


def _plan(cls: type[Event]) -> tuple[tuple[str, Converter, Any], ...]:
    """(field, converter, default) per field; default is _REQUIRED unless the field was added later
    with a default, so histories written before it still read."""
    overrides = _KIND_OVERRIDES.get(cls.kind, {})
    return tuple((f.name, overrides.get(f.name) or _CONVERTERS[f.name],
                  _REQUIRED if f.default is MISSING else f.default) for f in fields(cls))


_REQUIRED = object()
_PLANS: dict[str, tuple[type[Event], tuple[tuple[str, Converter, Any], ...], frozenset[str]]] = {
    kind.value: (cls, _plan(cls), frozenset(f.name for f in fields(cls)) | {"kind"})
    for kind, cls in EVENT_CLASS.items()
}
_KINDS_TEXT = ", ".join(k.value for k in Kind)


def from_dict(d: Mapping[str, Any]) -> Event:
    """Build the typed event for one parsed JSON object, or raise :class:`SchemaError`."""
    if not isinstance(d, dict):
        raise SchemaError(f"an event must be a JSON object, got {type(d).__name__}")
    kind = d.get("kind")
    plan = _PLANS.get(kind)  # type: ignore[arg-type]
    if plan is None:
        if kind is None:
            raise SchemaError("event has no 'kind'")
        raise SchemaError(f"unknown kind {kind!r}; known kinds: {_KINDS_TEXT}")
    cls, steps, allowed = plan
    values = []
    present = 1  # "kind"
    for name, conv, default in steps:
        try:
            raw = d[name]
        except KeyError:
            if default is _REQUIRED:
                raise SchemaError(f"{kind} event is missing field {name!r}") from None
            values.append(default)
            continue
        present += 1
        values.append(conv(raw, name))
    if len(d) != present:
        extra = sorted(d.keys() - allowed)
        if extra:
            raise SchemaError(f"{kind} event has unknown field(s) {', '.join(map(repr, extra))}")
    return cls(*values)


def to_dict(event: Event) -> dict[str, Any]:
    """The JSON object for an event, common fields and ``kind`` first."""
    out: dict[str, Any] = {"seq": event.seq, "ts": event.ts, "mono_ns": event.mono_ns,
                           "source": event.source, "kind": event.kind.value}
    for f in fields(event):
        if f.name not in out:
            value = getattr(event, f.name)
            if f.default is not MISSING and value == f.default:
                continue  # a later, optional field left at its default: the line reads the same as before it
            if f.name == "members":
                value = [_member_dict(m) for m in value]
            out[f.name] = value
    return out


def _member_dict(m: GroupMember) -> dict[str, Any]:
    out = {"member_id": m.member_id, "instance_id": m.instance_id, "client_id": m.client_id,
           "host": m.host, "assignment": m.assignment}
    if m.subscription:
        out["subscription"] = list(m.subscription)
    return out


def to_json(event: Event) -> bytes:
    """One history line (without the newline)."""
    return orjson.dumps(to_dict(event))


def header_to_dict(header: Header) -> dict[str, Any]:
    out: dict[str, Any] = {"header": True, "schema_version": header.schema_version, "run_id": header.run_id,
                           "seed": header.seed, "experiment": header.experiment, "versions": header.versions,
                           "configs": header.configs}
    if header.notes:
        out["notes"] = list(header.notes)
    return out


def header_to_json(header: Header) -> bytes:
    return orjson.dumps(header_to_dict(header))


def header_from_dict(d: Any, *, require_flag: bool = True) -> Header:
    """Validate a header object (``{"header": true, "schema_version": 1, ...}``)."""
    if not isinstance(d, dict):
        raise SchemaError("the header must be a JSON object")
    if require_flag and d.get("header") is not True:
        raise SchemaError('the first line must be the header object with "header": true')
    allowed = {"header", "schema_version", "run_id", "seed", "experiment", "versions", "configs", "notes"}
    extra = sorted(d.keys() - allowed)
    if extra:
        raise SchemaError(f"header has unknown field(s) {', '.join(map(repr, extra))}")
    for name in ("schema_version", "run_id", "seed", "experiment", "versions", "configs"):
        if name not in d:
            raise SchemaError(f"header is missing field {name!r}")
    version = _int(d["schema_version"], "schema_version")
    if version != SCHEMA_VERSION:
        raise SchemaError(f"schema_version {version} is not supported; this reader understands {SCHEMA_VERSION}")
    notes = d.get("notes", [])
    if type(notes) is not list or not all(type(n) is str for n in notes):
        raise _fail("notes", "a list of strings", notes)
    return Header(
        schema_version=version,
        run_id=_str(d["run_id"], "run_id"),
        seed=_OPT_INT(d["seed"], "seed"),
        experiment=_obj(d["experiment"], "experiment"),
        versions=_obj(d["versions"], "versions"),
        configs=_obj(d["configs"], "configs"),
        notes=tuple(notes),
    )
