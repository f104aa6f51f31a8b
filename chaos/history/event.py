"""The event schema: the only interface between running and judging.

One JSON object per line (docs/architecture.md, "The history"). Every event carries ``seq``
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

The records below are the schema, in one place: the converters that read a line
(:func:`converter_for`) and the report's Spark schema
(``chaos.report.tables.event_schema``) are derived from their field types, with
``Annotated`` tags for what a Python type does not say (:data:`Name`: interned;
:data:`Int32`: a 32-bit column). A field added later gets a default, so older
histories still read, and is left out of a line while at its default, so lines
read the same as before it existed.
"""

from __future__ import annotations

import functools
import sys
import types
from collections.abc import Callable, Mapping
from dataclasses import MISSING, dataclass, fields, is_dataclass
from enum import StrEnum
from typing import Annotated, Any, ClassVar, Union, final, get_args, get_origin, get_type_hints

import msgspec
import orjson

from chaos.model.fault_traits import FaultTrait
from chaos.model.workload import Assignor, Client, CommitMode, RebalanceProtocol, WrongMode
from chaos.outcome import Outcome

SCHEMA_VERSION = 1


@dataclass(frozen=True, slots=True)
class Tag:
    """What a field's plain Python type does not say, attached with ``Annotated`` and read by the
    converters (and by the Spark schema in :mod:`chaos.report.tables`)."""

    name: str


#: a name repeated across the history (source, group, topic, member id): interned when read
INTERNED = Tag("interned")
#: a Kafka INT32/INT16 on the wire (partition index, broker id, error code): a 32-bit column in the report
INT32 = Tag("int32")
#: a string that must not be empty
NON_EMPTY = Tag("non-empty")

Name = Annotated[str, INTERNED]
Int32 = Annotated[int, INT32]
TopicPartition = tuple[Name, Int32]
TopicPartitionOffset = tuple[Name, Int32, int]


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
    #: the group's offset commits as ``__consumer_offsets`` stored them, read after the run
    STORED_OFFSETS = "stored_offsets"
    #: share groups (KIP-932): a member acquired records, acknowledged them, saw its lock pass; the observer's sample
    SHARE_ACQUIRED = "share_acquired"
    SHARE_ACKNOWLEDGED = "share_acknowledged"
    SHARE_LOCK_EXPIRED = "share_lock_expired"
    SHARE_PROCESSED = "share_processed"
    SHARE_GROUP_STATE = "share_group_state"


class GroupState(StrEnum):
    """Coordinator group states, as the coordinator spells them; Unknown = the observer could not tell.

    Classic groups (``GroupMetadata.scala``; ``ClassicGroupState`` on the new coordinator of Kafka
    4.x): Empty, PreparingRebalance, CompletingRebalance, Stable, Dead. KIP-848 groups
    (``ConsumerGroup.ConsumerGroupState``, described by ConsumerGroupDescribe): Empty, Assigning (the
    group epoch moved past the assignment epoch: a new target assignment is due), Reconciling (the
    target assignment is computed, some member has not reached it yet), Stable (every member
    reconciled to the target assignment of the current group epoch), Dead. Any other string a
    coordinator answers is recorded as Unknown.
    """

    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"
    UNKNOWN = "Unknown"
    #: KIP-848: the group epoch is ahead of the assignment epoch
    ASSIGNING = "Assigning"
    #: KIP-848: members are converging on the target assignment of the assignment epoch
    RECONCILING = "Reconciling"


class MemberClient(StrEnum):
    """The client of a ``member_start``: one a spec can choose (:class:`chaos.model.workload.Client`), or
    ``command`` — a ``command:`` member's start, written by kafka-chaos on the program's behalf from what it gave
    it (docs/architecture.md, "Members that are the application"); never a spec's choice."""

    CONFLUENT_KAFKA = Client.CONFLUENT_KAFKA.value
    KAFKA_PYTHON = Client.KAFKA_PYTHON.value
    JAVA = Client.JAVA.value
    COMMAND = "command"


class GroupType(StrEnum):
    """Which protocol a ``group_state`` sample describes the group by (Kafka's ``Group.GroupType``)."""

    #: JoinGroup/SyncGroup, described by DescribeGroups
    CLASSIC = "classic"
    #: KIP-848 ConsumerGroupHeartbeat, described by ConsumerGroupDescribe (API key 69)
    CONSUMER = "consumer"


class BrokerLogEvent(StrEnum):
    """Parsed group coordinator log lines (``chaos.workload.observer`` lists the lines of each).

    ``generation`` is what the line names: a classic generation, or for a KIP-848 group the group
    epoch (``epoch_bumped``, ``target_assignment``, ``unloading``) or the member's own epoch
    (``member_fenced`` for a member that did not leave its epoch in time); None when the line names
    none (``loading`` on Kafka 4.x, which logs a member count instead).
    """

    PREPARING_REBALANCE = "preparing_rebalance"  # generation = the OLD generation
    STABILIZED = "stabilized"
    #: the coordinator removed the member because its session expired (classic "has failed"; KIP-848
    #: "fenced from the group because the member session expired")
    MEMBER_FAILED = "member_failed"
    LOADING = "loading"
    UNLOADING = "unloading"
    OTHER = "other"
    #: KIP-848: a member joined the consumer group (a new member id, or a static member's replacement)
    MEMBER_JOINED = "member_joined"
    #: KIP-848: the group epoch was bumped (membership or subscriptions changed); generation = new epoch
    EPOCH_BUMPED = "epoch_bumped"
    #: KIP-848: a target assignment was computed for the group epoch in ``generation``
    TARGET_ASSIGNMENT = "target_assignment"
    #: KIP-848: the coordinator fenced the member for another reason than its session (it did not
    #: reach its next epoch within the rebalance timeout, or a classic member did not join/sync in time)
    MEMBER_FENCED = "member_fenced"
    #: KIP-848: the member left the group (LeaveGroup heartbeat, epoch -1 or -2 for a static member)
    MEMBER_LEFT = "member_left"
    #: KIP-848 online migration: the coordinator converted a group *with members* between the classic and the
    #: consumer protocol; its generation / group epoch carries over (``GroupMetadataManager.convertToConsumerGroup``,
    #: ``convertToClassicGroup``)
    GROUP_CONVERTED = "group_converted"
    #: KIP-848 online migration: an *empty* group was converted, i.e. replaced by a new group of the other type
    #: whose generation / group epoch starts again (no member holds anything to fence)
    GROUP_RECREATED = "group_recreated"
    #: KIP-848 online migration refused ("Cannot upgrade classic group G to consumer group: REASON"): the joining
    #: consumer-protocol member is answered GROUP_ID_NOT_FOUND (librdkafka treats it as fatal)
    UPGRADE_REFUSED = "upgrade_refused"


class ShareAckType(StrEnum):
    """How a share-group member acknowledges a record it acquired (KIP-932, "Public Interfaces";
    ``org.apache.kafka.clients.consumer.AcknowledgeType``, the ``AcknowledgeTypes`` of ShareFetch and
    ShareAcknowledge requests). ``accept`` and ``reject`` are terminal (the record becomes Acknowledged, resp.
    Archived, in the share-partition leader's ``SharePartition``); ``release`` makes it Available again for
    another delivery (or Archived once its delivery count reached the limit); ``renew`` (KIP-1222) keeps the
    acquisition and restarts its lock. The protocol's ``GAP`` (offsets with no record) is not recorded."""

    ACCEPT = "accept"
    RELEASE = "release"
    REJECT = "reject"
    #: KIP-1222: the member asks for its acquisition lock to be renewed; the record stays acquired by it
    RENEW = "renew"


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
    #: recorded at the heal of a fault that acts on what passes (an ``rpc`` fault): ``ok`` when it acted on at least
    #: one RPC, the evidence its counts by API and version (a fault in place that matched nothing tested nothing)
    ACTED = "acted"


# --------------------------------------------------------------------------- events


@dataclass(frozen=True, slots=True)
class Event:
    """Fields common to every event."""

    seq: int
    ts: float
    mono_ns: int
    source: Name

    kind: ClassVar[Kind]


# Event kinds are leaves (@final): checkers dispatch on ``type(e) is C``, which lets a type checker
# narrow both branches.
@final
@dataclass(frozen=True, slots=True)
class SendOk(Event):
    """A produce acknowledged by the leader: the record is at (topic, partition, offset)."""

    topic: Name
    partition: Int32
    offset: int
    key: str | None
    value: str
    kind: ClassVar[Kind] = Kind.SEND_OK


@final
@dataclass(frozen=True, slots=True)
class SendFail(Event):
    """A produce that definitely failed (``chaos.outcome.classify`` said ``fail``)."""

    topic: Name
    key: str | None
    value: str
    error_code: Int32 | None
    error_name: str
    kind: ClassVar[Kind] = Kind.SEND_FAIL


@final
@dataclass(frozen=True, slots=True)
class SendUnknown(Event):
    """A produce whose outcome is not known (timeout, crash)."""

    topic: Name
    key: str | None
    value: str
    error_name: str
    kind: ClassVar[Kind] = Kind.SEND_UNKNOWN


@final
@dataclass(frozen=True, slots=True)
class MemberStart(Event):
    """A consumer process started; its configuration as it will join."""

    group: Name
    client: MemberClient
    client_version: str
    instance_id: Name | None  # group.instance.id (KIP-345 static membership)
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

    group: Name
    partitions: tuple[TopicPartition, ...]
    generation: int | None
    member_id: Name | None
    incremental: bool  # True for KIP-429 incremental assign/revoke
    #: the source could not stamp this event where it happened: it happened at some moment in
    #: [mono_ns, mono_ns + ts_uncertain_ns] — ``mono_ns`` is the last moment known to precede it (e.g. the
    #: previous line the JVM stamped), the upper end when it was recorded. None: stamped where it happened.
    #: Checkers that compare times take the interval (docs/architecture.md, "The history").
    ts_uncertain_ns: int | None = None


@final
@dataclass(frozen=True, slots=True)
class Assigned(OwnershipChange):
    kind: ClassVar[Kind] = Kind.ASSIGNED


@final
@dataclass(frozen=True, slots=True)
class Revoked(OwnershipChange):
    kind: ClassVar[Kind] = Kind.REVOKED


@final
@dataclass(frozen=True, slots=True)
class Lost(OwnershipChange):
    """Partitions lost without a chance to commit (KIP-429 onPartitionsLost)."""

    kind: ClassVar[Kind] = Kind.LOST


@final
@dataclass(frozen=True, slots=True)
class Consumed(Event):
    """A batch of one partition's records the member finished processing."""

    group: Name
    topic: Name
    partition: Int32
    offsets: tuple[int, ...]
    generation: int | None
    member_id: Name | None
    #: an interval, not a point: as on :attr:`OwnershipChange.ts_uncertain_ns`
    ts_uncertain_ns: int | None = None
    kind: ClassVar[Kind] = Kind.CONSUMED


@final
@dataclass(frozen=True, slots=True)
class Commit(Event):
    """An OffsetCommit and its outcome; offsets are *next* offsets to read (Kafka convention).

    ``ts``/``mono_ns`` are when the commit was *sent* (the coordinator judges it between then and its
    answer), except auto commits, stamped when the client reported them. ``answered_ns`` is when the
    outcome arrived (None: the same instant as ``mono_ns``, or never — a killed member's ``unknown``).
    A commit took effect at the coordinator somewhere in [mono_ns, answered_ns]: a librdkafka commit
    sent to a coordinator that then dies is retried at the next one and answered seconds later.
    """

    group: Name
    offsets: tuple[TopicPartitionOffset, ...]
    generation: int | None
    member_id: Name | None
    outcome: Outcome
    error_code: Int32 | None
    error_name: str | None
    auto: bool
    answered_ns: int | None = None
    #: an interval, not a point: as on :attr:`OwnershipChange.ts_uncertain_ns`
    ts_uncertain_ns: int | None = None
    kind: ClassVar[Kind] = Kind.COMMIT


#: ``error_name`` of the (non-fatal) error each member reporting processed records gets when the run could not read
#: its output topic to the end (chaos.workload.processed_reports): its ``consumed`` account is incomplete
REPORTS_INCOMPLETE = "_REPORTS_INCOMPLETE"


@final
@dataclass(frozen=True, slots=True)
class ErrorEvent(Event):
    """An error the client reported outside a produce or commit result."""

    message: str
    error_code: Int32 | None
    error_name: str | None
    fatal: bool
    #: an interval, not a point: as on :attr:`OwnershipChange.ts_uncertain_ns`
    ts_uncertain_ns: int | None = None
    #: the client log line this error is told in: ``"workers/<file>:<line>"`` relative to the run
    #: directory (1-based line number); None when the client keeps no log or the line is not known
    log_ref: str | None = None
    kind: ClassVar[Kind] = Kind.ERROR


@final
@dataclass(frozen=True, slots=True)
class MemberStop(Event):
    """The member stopped; written by the runner with the member's source when it was killed."""

    group: Name
    clean: bool
    signal: str | None
    #: an interval, not a point: as on :attr:`OwnershipChange.ts_uncertain_ns`
    ts_uncertain_ns: int | None = None
    kind: ClassVar[Kind] = Kind.MEMBER_STOP


@dataclass(frozen=True, slots=True)
class GroupMember:
    """One member as DescribeGroups (classic) or ConsumerGroupDescribe (KIP-848) reports it.

    ``assignment`` is what the member owns: for a classic group its SyncGroup assignment, for a
    KIP-848 group its current assignment (``ConsumerGroupDescribeResponse`` ``Assignment``). ``host``
    is empty for KIP-848 samples (the observer's ConsumerGroupDescribe view does not carry it).
    """

    member_id: str
    instance_id: str | None
    client_id: str
    host: str
    assignment: tuple[TopicPartition, ...]
    #: topics in the member's JoinGroup metadata (ConsumerProtocolSubscription), as the coordinator
    #: holds it; () when not recorded (histories before this field, an undecodable protocol, KIP-848)
    subscription: tuple[Annotated[str, NON_EMPTY], ...] = ()
    #: KIP-848 member epoch: 0 while joining (and when rejoining after being fenced); it reaches the
    #: group's assignment epoch once the member has reconciled to its target assignment (KIP-848,
    #: "Member Epoch - Reconciliation of the group"). None for classic samples.
    member_epoch: int | None = None
    #: KIP-848: the partitions the coordinator's target assignment (computed at the assignment epoch)
    #: gives the member; differs from ``assignment`` while the member reconciles (revocations first).
    #: () for classic samples, and for a member whose target is empty.
    target_assignment: tuple[TopicPartition, ...] = ()


@final
@dataclass(frozen=True, slots=True)
class GroupStateSample(Event):
    """The observer's sample of the group at its coordinator (DescribeGroups, or ConsumerGroupDescribe
    for a KIP-848 group).

    Classic: ``protocol`` is the assignor the group agreed on, ``generation`` the generation. KIP-848
    (``group_type`` consumer): ``protocol`` is the coordinator's (server-side) assignor,
    ``generation`` the group epoch, so a reader that knows only generations sees a number that only
    grows. Per KIP-848 the *group epoch* is bumped when membership or subscriptions change, the
    *assignment epoch* is the group epoch the current target assignment was computed at (it lags
    while the group is Assigning), and each member's epoch reaches the assignment epoch once it has
    reconciled (:class:`GroupMember`). The three fields below are None (left out of the line) in
    classic samples and in histories written before them.
    """

    group: Name
    state: GroupState
    coordinator: Int32 | None
    protocol: str | None
    generation: int | None
    members: tuple[GroupMember, ...]
    #: KIP-848 group epoch (equal to ``generation`` in a consumer sample)
    group_epoch: int | None = None
    #: KIP-848 assignment epoch: the group epoch of the current target assignment
    assignment_epoch: int | None = None
    #: the protocol the sample describes the group by; None in samples that could not tell (Unknown)
    #: and in histories written before this field (classic)
    group_type: GroupType | None = None
    kind: ClassVar[Kind] = Kind.GROUP_STATE


@final
@dataclass(frozen=True, slots=True)
class BrokerLog(Event):
    """A parsed GroupCoordinator log line (generation: OLD generation for preparing_rebalance)."""

    broker: Int32
    group: Name
    event: BrokerLogEvent
    generation: int | None
    member_id: Name | None
    line: str
    kind: ClassVar[Kind] = Kind.BROKER_LOG


@final
@dataclass(frozen=True, slots=True)
class CommittedOffsets(Event):
    """The observer's OffsetFetch sample of the group's committed offsets."""

    group: Name
    coordinator: Int32 | None
    offsets: tuple[TopicPartitionOffset, ...]
    kind: ClassVar[Kind] = Kind.COMMITTED_OFFSETS


# --------------------------------------------------------------------------- share groups (KIP-932)
#
# A share group's members consume the same partitions together: the share-partition leader (the partition's
# leader broker, ``kafka.server.share.SharePartition``) hands each record to one member at a time under an
# acquisition lock, and counts its deliveries. The member is ``source`` (its process name, as on ``consumed``) and
# ``member_id`` the id the group coordinator knows it by; times are CLOCK_MONOTONIC (``mono_ns``) as everywhere,
# with ``ts_uncertain_ns`` when the source could not stamp the event where it happened. docs/share-groups.md
# describes the fields and the invariants the share checkers judge on them.


@final
@dataclass(frozen=True, slots=True)
class ShareAcquired(Event):
    """A share-group member received records the share-partition leader acquired for it (KIP-932, "In-flight
    records": Available -> Acquired, delivery count incremented), all with the same ``delivery_count``: one event
    per (partition, delivery count) of a ShareFetch answer (``ShareFetchResponse`` ``AcquiredRecords``).

    The broker acquired them at some moment in [``fetched_ns``, ``mono_ns + ts_uncertain_ns``]: ``mono_ns`` is when
    the member got them (the poll that returned them), ``fetched_ns`` when the ShareFetch whose answer carried them
    was sent — None when the client does not say (``KafkaShareConsumer`` may fetch ahead of the application's poll):
    then nothing bounds the acquisition from below. The lock runs ``lock_duration_ms`` from the acquisition (the
    acquisition lock timeout the broker answered, KIP-1222 ``KafkaShareConsumer.acquisitionLockTimeoutMs``; None:
    not reported, the group's ``share.record.lock.duration.ms`` / the broker's ``group.share.record.lock.duration.ms``
    applies). ``delivery_count`` is ``ConsumerRecord.deliveryCount()``: 1 on the first delivery (None: the client does
    not report it).
    """

    group: Name
    topic: Name
    partition: Int32
    offsets: tuple[int, ...]
    delivery_count: Int32 | None
    member_id: Name | None
    lock_duration_ms: int | None = None
    fetched_ns: int | None = None
    #: an interval, not a point: as on :attr:`OwnershipChange.ts_uncertain_ns`
    ts_uncertain_ns: int | None = None
    kind: ClassVar[Kind] = Kind.SHARE_ACQUIRED


@final
@dataclass(frozen=True, slots=True)
class ShareAcknowledged(Event):
    """A share-group member's acknowledgement of records it acquired, and the broker's answer (KIP-932,
    "In-flight records"; ShareAcknowledge, or acknowledgements carried by a ShareFetch).

    ``mono_ns`` is when the member acknowledged (``KafkaShareConsumer.acknowledge`` / ``commitSync``): the
    acknowledgement reaches the share-partition leader no earlier. ``answered_ns`` is when the answer arrived
    (None: the same instant, or never). ``outcome``: ``ok`` the broker answered no error for these offsets, ``fail``
    it refused them (INVALID_RECORD_STATE: not acquired by this member any more; :func:`chaos.outcome.classify`),
    ``unknown`` no answer or another error (a timeout, a member killed with the acknowledgement in flight;
    ``error_name``/``error_code`` kept): it may or may not have been applied.
    """

    group: Name
    topic: Name
    partition: Int32
    offsets: tuple[int, ...]
    ack_type: ShareAckType
    member_id: Name | None
    outcome: Outcome
    error_code: Int32 | None
    error_name: str | None
    answered_ns: int | None = None
    #: an interval, not a point: as on :attr:`OwnershipChange.ts_uncertain_ns`
    ts_uncertain_ns: int | None = None
    kind: ClassVar[Kind] = Kind.SHARE_ACKNOWLEDGED


@final
@dataclass(frozen=True, slots=True)
class ShareLockExpired(Event):
    """The member saw, by its own clock, that its acquisition lock on these records had run out before it
    acknowledged them (the acquisition plus the lock timeout it was told, KIP-1222), or was told so (an
    acknowledgement refused as not acquired). What the member believes, not the broker's word: the checkers read it
    as context. ``delivery_count`` of the acquisition it speaks of (None: not known)."""

    group: Name
    topic: Name
    partition: Int32
    offsets: tuple[int, ...]
    delivery_count: Int32 | None
    member_id: Name | None
    kind: ClassVar[Kind] = Kind.SHARE_LOCK_EXPIRED


@final
@dataclass(frozen=True, slots=True)
class ShareProcessed(Event):
    """A share-group member's application processed one record it had acquired: from ``started_ns`` to
    ``mono_ns`` (both the member's own CLOCK_MONOTONIC, so ordered exactly against its other events).
    ``delivery_count`` is the one of the acquisition it processed. Evidence for the application's side of KIP-932's
    contract ("In-flight records": a record is the member's only while Acquired by it; an accept is final): a
    record is processed while its lock holds and accepted only after it was processed (share-processing). Kept
    apart from ``consumed``, a consumer-group member's record under a generation."""

    group: Name
    topic: Name
    partition: Int32
    offsets: tuple[int, ...]
    delivery_count: Int32 | None
    member_id: Name | None
    started_ns: int
    kind: ClassVar[Kind] = Kind.SHARE_PROCESSED


@final
@dataclass(frozen=True, slots=True)
class ShareGroupStateSample(Event):
    """The observer's sample of a share group: ShareGroupDescribe at the group coordinator (``state``: Empty,
    Stable, Dead or Unknown, ``ShareGroup.ShareGroupState``; ``members`` with their assignment and member epoch,
    ``instance_id`` always None: share groups have no static members) and the share-partition start offset of each
    partition (``start_offsets``: [topic, partition, SPSO], DescribeShareGroupOffsets, served from the share
    coordinator's state; None when that request was not answered; a partition without share state is left out).
    ``mono_ns`` is when the offsets were asked. ``delivery_count_limit`` and ``record_lock_duration_ms`` are the
    group's effective settings when the observer read them (None: not read).
    """

    group: Name
    state: GroupState
    coordinator: Int32 | None
    group_epoch: int | None
    assignment_epoch: int | None
    members: tuple[GroupMember, ...]
    start_offsets: tuple[TopicPartitionOffset, ...] | None
    delivery_count_limit: int | None = None
    record_lock_duration_ms: int | None = None
    kind: ClassVar[Kind] = Kind.SHARE_GROUP_STATE


#: The traits of the kinds a history recorded before ``fault_start`` carried them (``traits`` absent) — as
#: each kind declared them when they began to be recorded. Frozen: a run recorded then keeps the meaning it
#: had, whatever a kind declares later. A kind not named here reads as having none.
LEGACY_TRAITS: Mapping[str, frozenset[FaultTrait]] = {
    **dict.fromkeys(("kill", "terminate", "pause", "bounce", "link_down", "partition", "disconnect"),
                    frozenset({FaultTrait.TAKES_TARGET_OUT})),
    "black_hole": frozenset({FaultTrait.TAKES_TARGET_OUT, FaultTrait.LOSES_REQUESTS}),
    **dict.fromkeys(("latency", "bandwidth", "slicer"), frozenset({FaultTrait.SLOWS_ONLY})),
    "change_subscription": frozenset({FaultTrait.CHANGES_SUBSCRIPTION}),
    "add_partitions": frozenset({FaultTrait.CHANGES_PARTITION_COUNT}),
}


@final
@dataclass(frozen=True, slots=True)
class FaultStart(Event):
    """A fault took hold. ``traits``: what it does (:class:`chaos.model.fault_traits.FaultTrait`, declared by
    its kind), which is what a checker reads — never ``fault_type``. None in a history recorded before traits
    were: :attr:`effects` then reads :data:`LEGACY_TRAITS`."""

    fault_id: str
    fault_type: str
    target_role: str
    #: the nodes and members it hit, comma-separated (``kill all_members``: every member): read :attr:`nodes`
    node: str | None
    params: Mapping[str, Any]
    trigger: str
    traits: tuple[FaultTrait, ...] | None = None
    kind: ClassVar[Kind] = Kind.FAULT_START

    @property
    def nodes(self) -> tuple[str, ...]:
        """Each node or member the fault hit (``node`` split; empty for a fault on no node, e.g. a topic)."""
        return tuple(n for n in (self.node or "").split(",") if n)

    @property
    def effects(self) -> frozenset[FaultTrait]:
        """What the fault does: its recorded traits, or for an older history those of :data:`LEGACY_TRAITS`."""
        if self.traits is not None:
            return frozenset(self.traits)
        return LEGACY_TRAITS.get(self.fault_type, frozenset())


@final
@dataclass(frozen=True, slots=True)
class FaultEnd(Event):
    fault_id: str
    fault_type: str
    node: str | None
    kind: ClassVar[Kind] = Kind.FAULT_END


@final
@dataclass(frozen=True, slots=True)
class FaultVerified(Event):
    fault_id: str
    stage: VerificationStage
    ok: bool
    evidence: str
    kind: ClassVar[Kind] = Kind.FAULT_VERIFIED


@final
@dataclass(frozen=True, slots=True)
class PhaseEvent(Event):
    name: RunPhase
    kind: ClassVar[Kind] = Kind.PHASE


@final
@dataclass(frozen=True, slots=True)
class FinalRead(Event):
    """What a fresh reader saw at the end: (partition, offset) pairs."""

    group: Name | None
    topic: Name
    records: tuple[tuple[int, int], ...]
    kind: ClassVar[Kind] = Kind.FINAL_READ


#: one stored offset commit: (topic, partition, committed offset, its record's offset in ``__consumer_offsets``,
#: the record's timestamp in wall-clock ms — when the coordinator stored it)
StoredOffset = tuple[Name, Int32, int, int, int]


@final
@dataclass(frozen=True, slots=True)
class StoredOffsets(Event):
    """The group's offset commits in its ``__consumer_offsets`` partition (``log_partition``), appended from the
    run's start, as the partition held them after the run (:mod:`chaos.workload.offsets_log`): what the store
    kept, which the coordinator's OffsetFetch answers may lag."""

    group: Name
    log_partition: Int32
    stored: tuple[StoredOffset, ...]
    kind: ClassVar[Kind] = Kind.STORED_OFFSETS


EVENT_TYPES: tuple[type[Event], ...] = (
    SendOk, SendFail, SendUnknown, MemberStart, Assigned, Revoked, Lost, Consumed, Commit,
    ErrorEvent, MemberStop, GroupStateSample, BrokerLog, CommittedOffsets, FaultStart, FaultEnd,
    FaultVerified, PhaseEvent, FinalRead, StoredOffsets, ShareAcquired, ShareAcknowledged, ShareLockExpired, ShareProcessed,
    ShareGroupStateSample,
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
    #: per member name: the client library it started on (issue 34) -- ``client``, ``client_version`` as asked
    #: (null: the default) and ``library``, what that library reports of itself; absent in older runs. A member
    #: a ``client_upgrade`` fault moves records each later release in its own ``member_start``. Not "members":
    #: observer events carry a field of that name with another shape, and the report reads every history line,
    #: header included, with one Spark schema

    member_clients: Mapping[str, Any] | None = None


# --------------------------------------------------------------------------- (de)serialisation
#
# The records above are the schema: the converters below are derived from their field types by
# :func:`converter_for` (nothing here lists field names), and so is the report's Spark schema
# (``chaos.report.tables.event_schema``). Hand-written rather than cattrs or pydantic because the
# reader interns names and says in one line which field is wrong and what it must be; the same small
# type walk serves Spark. These converters are the reference path: ``read_history`` decodes with the
# msgspec structs derived below ("the typed fast decoder") and falls back to them for the exact error.

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


def _non_empty_str(v: Any, name: str) -> str:
    if type(v) is str and v:
        return v
    raise _fail(name, "a non-empty string", v)


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


def _tuple_of(elem: Converter, want: str) -> Converter:
    """A JSON list -> a tuple, each element converted (errors name the index)."""

    def convert(v: Any, name: str) -> tuple[Any, ...]:
        if type(v) is not list:
            raise _fail(name, want, v)
        return tuple([elem(x, f"{name}[{i}]") for i, x in enumerate(v)])

    return convert


def _fixed_tuple(elems: tuple[Converter, ...], want: str) -> Converter:
    """A JSON list of exactly ``len(elems)`` values -> a tuple."""
    size = len(elems)

    def convert(v: Any, name: str) -> tuple[Any, ...]:
        if type(v) is not list or len(v) != size:
            raise _fail(name, want, v)
        return tuple([conv(x, name) for conv, x in zip(elems, v, strict=False)])

    return convert


def _record(cls: type[Any]) -> Converter:
    """A JSON object -> a nested record (``GroupMember``).

    A missing field without a default is an error; a field added later with a default reads
    as that default, so older histories still read. Unknown keys are ignored here (unlike an
    event's), as they always were for members.
    """
    steps = _steps(cls)
    required = frozenset(f for f, _, default in steps if default is _REQUIRED)

    def convert(v: Any, name: str) -> Any:
        if not isinstance(v, dict):
            raise _fail(name, "an object", v)
        missing = required - v.keys()
        if missing:
            raise SchemaError(f"{name} is missing {', '.join(sorted(missing))}")
        return cls(*[default if f not in v else conv(v[f], f"{name}.{f}") for f, conv, default in steps])

    return convert


# Hand-tuned converters for the shapes that make up most of a history's bytes (consumed offsets,
# assignments, commits, final reads). Each equals what the generic walk builds for its type
# (tests/unit/history/test_event_schema.py checks it on valid and invalid values), only faster,
# and ``_tp_list`` shares one tuple per (topic, partition).
def _int_list(v: Any, name: str) -> tuple[int, ...]:
    if type(v) is list and all(type(x) is int for x in v):
        return tuple(v)
    raise _fail(name, "a list of integers", v)


def _tp_list(v: Any, name: str) -> tuple[TopicPartition, ...]:
    if type(v) is not list:
        raise _fail(name, "a list of [topic, partition]", v)
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
    if type(v) is not list:
        raise _fail(name, "a list of [topic, partition, offset]", v)
    try:
        out = tuple((_intern(t), p, o) for t, p, o in v)
    except (TypeError, ValueError):
        raise _fail(name, "a list of [topic, partition, offset]", v) from None
    for _t, p, o in out:
        if type(p) is not int or type(o) is not int:
            raise _fail(name, "a list of [topic, partition, offset]", v)
    return out


def _po_list(v: Any, name: str) -> tuple[tuple[int, int], ...]:
    if type(v) is not list:
        raise _fail(name, "a list of [partition, offset]", v)
    try:
        out = tuple((p, o) for p, o in v)
    except (TypeError, ValueError):
        raise _fail(name, "a list of [partition, offset]", v) from None
    for p, o in out:
        if type(p) is not int or type(o) is not int:
            raise _fail(name, "a list of [partition, offset]", v)
    return out


_FAST: dict[Any, Converter] = {
    tuple[int, ...]: _int_list,
    tuple[TopicPartition, ...]: _tp_list,
    tuple[TopicPartitionOffset, ...]: _tpo_list,
    tuple[tuple[int, int], ...]: _po_list,
}
_SCALARS: dict[Any, tuple[Converter, str]] = {
    int: (_int, "an integer"), float: (_float, "a number"), str: (_str, "a string"), bool: (_bool, "true or false"),
    Name: (_name, "a string"), Int32: (_int, "an integer"),
    Annotated[str, NON_EMPTY]: (_non_empty_str, "a non-empty string"),
}


def optional_of(hint: Any) -> Any:
    """``X`` for ``X | None``, else None."""
    if get_origin(hint) in (Union, types.UnionType):
        args = [a for a in get_args(hint) if a is not type(None)]
        if len(args) == 1 and len(get_args(hint)) == 2:
            return args[0]
    return None


def describe(hint: Any) -> str:
    """What a JSON value of this field type must be, for error messages."""
    if hint in _SCALARS:
        return _SCALARS[hint][1]
    inner = optional_of(hint)
    if inner is not None:
        return f"{describe(inner)} or null"
    if isinstance(hint, type) and issubclass(hint, StrEnum):
        return "one of " + "|".join(m.value for m in hint)
    if isinstance(hint, type) and is_dataclass(hint):
        return "an object"
    origin, args = get_origin(hint), get_args(hint)
    if origin is Mapping or hint is Mapping:
        return "an object"
    if origin is tuple and len(args) == 2 and args[1] is Ellipsis:
        return f"a list, each {describe(args[0])}"
    if origin is tuple:
        return "a list [" + ", ".join(describe(a) for a in args) + "]"
    raise TypeError(f"event field type {hint!r} has no JSON form; add a case to chaos.history.event.converter_for")


@functools.cache
def converter_for(hint: Any, *, fast: bool = True) -> Converter:
    """The converter of one JSON value for a field of type ``hint`` (as ``typing.get_type_hints``
    gives it, with ``Annotated`` extras): int, float, str, bool, :data:`Name` (interned),
    :data:`Int32`, a ``StrEnum``, ``X | None``, ``Mapping[str, Any]`` (any JSON object),
    ``tuple[X, ...]``, fixed ``tuple[X, Y]`` and nested frozen records. Any other type raises
    ``TypeError`` when the module is imported, so a field cannot be added without a converter.
    ``fast=False`` skips the hand-tuned converters (for the test that compares the two)."""
    if fast and hint in _FAST:
        return _FAST[hint]
    if hint in _SCALARS:
        return _SCALARS[hint][0]
    inner = optional_of(hint)
    if inner is not None:
        return _optional(converter_for(inner, fast=fast))
    if isinstance(hint, type) and issubclass(hint, StrEnum):
        return _enum(hint)
    if isinstance(hint, type) and is_dataclass(hint):
        return _record(hint)
    origin, args = get_origin(hint), get_args(hint)
    if (origin is Mapping or hint is Mapping) and args in ((), (str, Any)):
        return _obj
    if origin is tuple and len(args) == 2 and args[1] is Ellipsis:
        return _tuple_of(converter_for(args[0], fast=fast), describe(hint))
    if origin is tuple and args and Ellipsis not in args:
        return _fixed_tuple(tuple(converter_for(a, fast=fast) for a in args), describe(hint))
    raise TypeError(f"event field type {hint!r} has no converter; add a case to chaos.history.event.converter_for")


_REQUIRED: Any = object()


def field_hints(cls: type[Any]) -> dict[str, Any]:
    """Each dataclass field of ``cls`` -> its resolved type (``Annotated`` extras kept), in field order."""
    hints = get_type_hints(cls, include_extras=True)
    return {f.name: hints[f.name] for f in fields(cls)}


def _steps(cls: type[Any]) -> tuple[tuple[str, Converter, Any], ...]:
    """(field, converter, default) per field of a record; default is _REQUIRED unless the field was
    added later with a default, so histories written before it still read."""
    hints = field_hints(cls)
    out = []
    for f in fields(cls):
        if f.default_factory is not MISSING:
            raise TypeError(f"{cls.__name__}.{f.name}: a field added later needs a plain (immutable) default")
        out.append((f.name, converter_for(hints[f.name]), _REQUIRED if f.default is MISSING else f.default))
    return tuple(out)


_PLANS: dict[str, tuple[type[Event], tuple[tuple[str, Converter, Any], ...], frozenset[str]]] = {
    kind.value: (cls, _steps(cls), frozenset(f.name for f in fields(cls)) | {"kind"})
    for kind, cls in EVENT_CLASS.items()
}
_KINDS_TEXT = ", ".join(k.value for k in Kind)


def event_field_types() -> dict[str, tuple[Any, ...]]:
    """Every field of every event kind -> the distinct types it has across kinds (``offsets`` has
    two: consumed's offsets, commit's [topic, partition, offset]); common fields first, then in
    :data:`EVENT_TYPES` order. ``kind`` is not a field (it is the class). The report's Spark schema
    is built from this."""
    out: dict[str, list[Any]] = {}
    for cls in EVENT_TYPES:
        for name, hint in field_hints(cls).items():
            seen = out.setdefault(name, [])
            if hint not in seen:
                seen.append(hint)
    return {name: tuple(hints) for name, hints in out.items()}


def from_dict(d: Mapping[str, Any]) -> Event:
    """Build the typed event for one parsed JSON object, or raise :class:`SchemaError`."""
    if not isinstance(d, dict):
        raise SchemaError(f"an event must be a JSON object, got {type(d).__name__}")
    kind = d.get("kind")
    plan = _PLANS.get(kind) if type(kind) is str else None  # a list or object kind is unhashable
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


# --------------------------------------------------------------------------- the typed fast decoder
#
# ``read_history`` decodes a million-event history with msgspec straight into typed records
# ("wire" structs), then turns each into its event with a constructor generated once per class.
# Both are derived here from the same dataclasses (:func:`_wire_type`, :func:`_post`), so the
# schema stays in one place. The fast path only ever *accepts* a line the reference path above
# (``orjson.loads`` + :func:`from_dict`) accepts with the same result: every wire type is at least
# as strict (unknown event fields forbidden, integers bounded to the 64 bits orjson reads as
# ``int``, JSON objects kept raw and re-read by orjson). A line it refuses, for whatever reason,
# is read again by the reference path, which gives the one-line error
# (tests/unit/history/test_fast_decoder.py compares the two on valid and invalid lines).

#: orjson reads integers outside int64..uint64 as floats (then refused by :func:`_int`); msgspec
#: bounds cannot reach uint64, so (2^63, 2^64) also takes the reference path, which accepts it
_WIRE_INT = Annotated[int, msgspec.Meta(ge=-(2**63), le=2**63 - 1)]
_WIRE_SCALARS: dict[Any, Any] = {
    int: _WIRE_INT, Int32: _WIRE_INT, bool: bool, str: str, Name: str,
    # _float keeps an integer an integer (ts 1 stays 1, as orjson + from_dict give it)
    float: Union[_WIRE_INT, float],  # noqa: UP007 - a runtime type expression for msgspec
    Annotated[str, NON_EMPTY]: Annotated[str, msgspec.Meta(min_length=1)],
}
_WIRE_STRUCTS: dict[type[Any], type[msgspec.Struct]] = {}
_FROM_WIRE: dict[type[msgspec.Struct], Callable[[Any], Any]] = {}


def _wire_type(hint: Any) -> Any:
    """The msgspec type that accepts (at most) the JSON values ``converter_for(hint)`` accepts."""
    if hint in _WIRE_SCALARS:
        return _WIRE_SCALARS[hint]
    inner = optional_of(hint)
    if inner is not None:
        return Union[_wire_type(inner), None]  # noqa: UP007 - a runtime type expression for msgspec
    if isinstance(hint, type) and issubclass(hint, StrEnum):
        return hint  # msgspec reads an enum by value, as _enum does
    if isinstance(hint, type) and is_dataclass(hint):
        return _wire_struct(hint)
    origin, args = get_origin(hint), get_args(hint)
    if (origin is Mapping or hint is Mapping) and args in ((), (str, Any)):
        return msgspec.Raw  # re-read by orjson (_raw_obj): the same dict, the same refusals
    if origin is tuple and len(args) == 2 and args[1] is Ellipsis:
        return tuple[_wire_type(args[0]), ...]  # type: ignore[misc]
    if origin is tuple and args and Ellipsis not in args:
        return tuple[tuple(_wire_type(a) for a in args)]  # type: ignore[misc]
    raise TypeError(f"event field type {hint!r} has no wire type; add a case to chaos.history.event._wire_type")


def _post(hint: Any, expr: str, depth: int = 0) -> str | None:
    """A Python expression turning the wire value ``expr`` into the record's value for ``hint``, or None
    when the wire value already is it. Interns names and shares (topic, partition) tuples, as the
    reference converters do."""
    if hint == Name:
        return f"_intern({expr})"
    if hint == tuple[TopicPartition, ...]:
        return f"_shared_tps({expr})"
    inner = optional_of(hint)
    if inner is not None:
        got = _post(inner, expr, depth)
        return None if got is None else f"(None if {expr} is None else {got})"
    if isinstance(hint, type) and is_dataclass(hint):
        return f"_from_{hint.__name__}({expr})"
    origin, args = get_origin(hint), get_args(hint)
    if origin is Mapping or hint is Mapping:
        return f"_raw_obj({expr})"
    if origin is tuple and len(args) == 2 and args[1] is Ellipsis:
        var = f"_x{depth}"
        got = _post(args[0], var, depth + 1)
        return None if got is None else f"tuple([{got} for {var} in {expr}])"
    if origin is tuple and args:
        parts = [_post(a, f"{expr}[{i}]", depth) for i, a in enumerate(args)]
        if all(p is None for p in parts):
            return None
        return "(" + "".join(f"{p or f'{expr}[{i}]'}, " for i, p in enumerate(parts)) + ")"
    return None


def _shared_tps(v: tuple[tuple[str, int], ...]) -> tuple[TopicPartition, ...]:
    """As :func:`_tp_list`: one shared, interned tuple per (topic, partition)."""
    cache = _TP_CACHE
    out = []
    for tp in v:
        got = cache.get(tp)
        if got is None:
            got = cache[tp] = (_intern(tp[0]), tp[1])
        out.append(got)
    return tuple(out)


def _raw_obj(raw: msgspec.Raw) -> Mapping[str, Any]:
    return _obj(orjson.loads(memoryview(raw)), "")  # Raw is a buffer, not bytes


def _wire_struct(cls: type[Any]) -> type[msgspec.Struct]:
    """The msgspec struct mirroring a record (an event: tagged by ``kind``, unknown fields refused; a
    nested record: unknown keys ignored, as :func:`_record` does), and its generated constructor of
    ``cls`` (registered in ``_FROM_WIRE``)."""
    got = _WIRE_STRUCTS.get(cls)
    if got is not None:
        return got
    hints = field_hints(cls)
    spec: list[tuple[str, Any] | tuple[str, Any, Any]] = []
    for f in fields(cls):
        wire = _wire_type(hints[f.name])
        spec.append((f.name, wire) if f.default is MISSING else (f.name, wire, f.default))
    event = isinstance(cls, type) and issubclass(cls, Event)
    options: dict[str, Any] = {"tag_field": "kind", "tag": cls.kind.value, "forbid_unknown_fields": True} \
        if event else {}
    # gc=False: wire structs hold no cycles, and untracked objects keep the collector out of the hot path
    struct = msgspec.defstruct(f"Wire{cls.__name__}", spec, gc=False, **options)
    _WIRE_STRUCTS[cls] = struct
    # Generated once per class, as dataclasses generates __init__. A frozen dataclass's __init__ sets each
    # field through object.__setattr__ (~90 ns a field); the records have no __post_init__, so the
    # constructor writes the slots directly through their descriptors (the same storage, half the time).
    namespace: dict[str, Any] = {"_new": object.__new__, "_cls": cls, "_intern": _intern,
                                 "_shared_tps": _shared_tps, "_raw_obj": _raw_obj}
    namespace.update({f"_from_{c.__name__}": _FROM_WIRE[s] for c, s in _WIRE_STRUCTS.items() if s in _FROM_WIRE})
    body = []
    for i, f in enumerate(fields(cls)):
        namespace[f"_set{i}"] = getattr(cls, f.name).__set__  # the slot's member descriptor
        body.append(f"    _set{i}(e, {_post(hints[f.name], f'w.{f.name}') or f'w.{f.name}'})\n")
    exec(f"def _from_{cls.__name__}(w):\n    e = _new(_cls)\n{''.join(body)}    return e\n", namespace)  # noqa: S102
    _FROM_WIRE[struct] = namespace[f"_from_{cls.__name__}"]
    return struct


_WIRE_DECODER = msgspec.json.Decoder(Union[tuple(_wire_struct(cls) for cls in EVENT_TYPES)])  # noqa: UP007


def decode_events(data: bytes, start: int, end: int, lines: int) -> list[Event] | None:
    """The events of ``data[start:end]``: ``lines`` complete lines, each ending in a newline; or None
    when any of them does not decode on the fast path: the caller then reads those lines with
    :func:`from_dict`, whose error is the one to report (a line the fast path refuses may still be
    valid: an integer in (2^63, 2^64)). Order (``seq``, ``mono_ns``) is the caller's to check.

    msgspec's ``decode_lines`` reads a stream of JSON values, blind to where lines end; it is used only
    when every line starts with ``{`` and ends with ``}`` (no blank line, no surrounding whitespace).
    Then a newline can only be a boundary between values (JSON never has ``}`` then ``{`` inside one
    value, and a string cannot hold a raw newline), so as many values as lines means one per line.
    """
    if (lines < 1 or data[start] != 0x7B or data[end - 2:end] != b"}\n"  # 0x7B: "{"
            or data.count(b"}\n{", start, end) != lines - 1):
        return None
    try:
        wire = _WIRE_DECODER.decode_lines(memoryview(data)[start:end])
        if len(wire) != lines:
            return None  # some line holds two values (and another line none)
        from_wire = _FROM_WIRE
        return [from_wire[type(w)](w) for w in wire]
    except (msgspec.MsgspecError, ValueError, RecursionError):
        return None

Encoder = Callable[[Any], Any]


def _encoder(hint: Any) -> Encoder | None:
    """How a field value becomes JSON when orjson cannot take it as is (a nested record whose later
    fields are left out at their defaults); None when orjson can (tuples, enums, mappings)."""
    if isinstance(hint, type) and is_dataclass(hint):
        return _record_encoder(hint)
    inner = optional_of(hint)
    if inner is not None:
        enc = _encoder(inner)
        return None if enc is None else (lambda v: None if v is None else enc(v))
    if get_origin(hint) is tuple:
        args = get_args(hint)
        if len(args) == 2 and args[1] is Ellipsis:
            elem = _encoder(args[0])
            return None if elem is None else (lambda v: [elem(x) for x in v])
        if any(_encoder(a) is not None for a in args):
            raise TypeError(f"event field type {hint!r}: records inside a fixed tuple are not supported")
    return None


def _emit_plan(cls: type[Any], skip: tuple[str, ...] = ()) -> tuple[tuple[str, Any, Encoder | None], ...]:
    hints = field_hints(cls)
    return tuple((f.name, _REQUIRED if f.default is MISSING else f.default, _encoder(hints[f.name]))
                 for f in fields(cls) if f.name not in skip)


def _record_encoder(cls: type[Any]) -> Encoder:
    plan = _emit_plan(cls)

    def encode(record: Any) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name, default, enc in plan:
            value = getattr(record, name)
            if default is not _REQUIRED and value == default:
                continue  # a later, optional field left at its default: the line reads the same as before it
            out[name] = value if enc is None else enc(value)
        return out

    return encode


_EMIT: dict[type[Event], tuple[tuple[str, Any, Encoder | None], ...]] = {
    cls: _emit_plan(cls, COMMON_FIELDS) for cls in EVENT_TYPES
}


def to_dict(event: Event) -> dict[str, Any]:
    """The JSON object for an event, common fields and ``kind`` first."""
    out: dict[str, Any] = {"seq": event.seq, "ts": event.ts, "mono_ns": event.mono_ns,
                           "source": event.source, "kind": event.kind.value}
    for name, default, enc in _EMIT[type(event)]:
        value = getattr(event, name)
        if default is not _REQUIRED and value == default:
            continue  # a later, optional field left at its default: the line reads the same as before it
        out[name] = value if enc is None else enc(value)
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
    if header.member_clients is not None:
        out["member_clients"] = header.member_clients
    return out


def header_to_json(header: Header) -> bytes:
    return orjson.dumps(header_to_dict(header))


def header_from_dict(d: Any, *, require_flag: bool = True) -> Header:
    """Validate a header object (``{"header": true, "schema_version": 1, ...}``)."""
    if not isinstance(d, dict):
        raise SchemaError("the header must be a JSON object")
    if require_flag and d.get("header") is not True:
        raise SchemaError('the first line must be the header object with "header": true')
    allowed = {"header", "schema_version", "run_id", "seed", "experiment", "versions", "configs", "notes",
               "member_clients"}
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
        seed=_optional(_int)(d["seed"], "seed"),
        experiment=_obj(d["experiment"], "experiment"),
        versions=_obj(d["versions"], "versions"),
        configs=_obj(d["configs"], "configs"),
        notes=tuple(notes),
        member_clients=_obj(d["member_clients"], "member_clients") if "member_clients" in d else None,
    )
