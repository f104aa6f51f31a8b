"""Experiments as reviewable data: a typed, validated record of parts.

An experiment (one YAML file of the catalogue, or the same structure built
in Python) names the cluster shape, the workload, the fault schedule, the
phases, which checkers judge the run and with which bounds, and how many runs.
It is validated when it is built: unknown fields are rejected, and every
error names the field and what is allowed (:mod:`chaos.experiment` reads the
files and adds the file name).

Faults: a fault has a ``type`` (one per registered fault kind,
:mod:`chaos.nemesis.kinds`, which also validates its own fields), a
``target`` role resolved at the moment of injection, a ``trigger`` (a time,
a seeded random schedule, or a group state seen live) and a ``duration_s``
after which it is healed (always — healing runs in ``finally``).
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import TYPE_CHECKING, Annotated, Any, Literal, TypeAlias

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from chaos.checkers.result import CheckerName
from chaos.errors import UsageError
from chaos.model.cluster import KRAFT_KAFKA_VERSION, ClusterSpec
from chaos.model.target import LinkScope, Role
from chaos.model.workload import MAX_PARTITIONS, GroupProtocol, WorkloadSpec

if TYPE_CHECKING:  # pragma: no cover
    from chaos.cluster import Capability
    from chaos.nemesis.kinds import FaultKind


def _kinds() -> Mapping[str, FaultKind]:
    from chaos.nemesis.kinds import kinds

    return kinds()


def _fault_types() -> type[StrEnum]:
    """The fault types, one per registered fault kind (:mod:`chaos.nemesis.kinds`), families in a fixed order.

    Within a family, kinds follow their module's name and then their order in it — not the order modules happened
    to be imported in, which a program importing one kind module first would change (and with it the schema).
    """
    from chaos.nemesis.kinds import kinds

    order = ("process", "link", "network", "topology", "membership", "container")
    registered = sorted(kinds().values(), key=lambda k: (order.index(k.family) if k.family in order else len(order),
                                                         k.inject.__module__))
    enum = StrEnum("FaultType", {k.name.upper(): k.name for k in registered})  # type: ignore[misc]
    enum.__doc__ = "What a fault does; each heals itself (the heal in brackets): " + "; ".join(
        f"{k.name}: {k.summary}" for k in registered)
    return enum


#: what a fault does — one member per registered fault kind; each heals itself (see ``chaos plan``)
if TYPE_CHECKING:
    # the members are made at import time from the registry, which a type checker cannot see: it checks
    # the enum as a plain StrEnum (no code names a member statically)
    FaultType: TypeAlias = StrEnum
else:
    FaultType = _fault_types()


class _Strict(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


# Upper bounds of the experiment's counts, refused at load time with the bound in the message (the cluster's
# and the workload's are in chaos.model.cluster and chaos.model.workload).
#: planned faults of a run (a random trigger's ``count`` included): the nemesis runs each in a thread of its
#: own, waiting for its trigger from the start of the chaos phase. 1,000 mostly sleeping threads still run on a
#: 2-core machine; more is a typo, not a schedule anyone reads
MAX_FAULTS = 1000
#: runs of one experiment (one after the other, so a bound on time, not on processes: 10,000 runs of a
#: one-minute experiment are a week)
MAX_RUNS = 10000


class RandomTrigger(_Strict):
    """``count`` occurrences at seeded random times in [start_s, end_s] of the chaos phase."""

    count: Annotated[int, Field(ge=1, le=MAX_FAULTS)] = 1
    start_s: Annotated[float, Field(ge=0)] = 0.0
    end_s: Annotated[float, Field(gt=0)] | None = None
    min_gap_s: Annotated[float, Field(ge=0)] = 0.0


#: the trigger fields of which exactly one is given
_TRIGGER_KINDS = ("at_s", "random", "state", "on_revoked", "after_generation", "after_epoch")


class Trigger(_Strict):
    """When a fault fires. Exactly one of ``at_s``, ``random``, ``state``, ``on_revoked``,
    ``after_generation``, ``after_epoch``.

    State triggers follow the live stream (:mod:`chaos.nemesis.watch`: the coordinator's own log
    lines, the members' events and, for KIP-848 groups, the observer's ConsumerGroupDescribe
    samples). A state means the same thing under both group protocols where the protocol has one.

    Classic groups (JoinGroup/SyncGroup): the GroupCoordinator
    (``kafka.coordinator.group.GroupCoordinator``, 2.8–3.9; the same words from 4.x's
    ``GroupMetadataManager``) logs its transitions:

    * ``PreparingRebalance`` — "Preparing to rebalance group G … with old generation N";
    * ``CompletingRebalance`` — "Stabilized group G generation N+1": despite its
      wording this is logged in ``onCompleteJoin``, when the join phase ends,
      the generation is bumped and the coordinator starts waiting for the
      leader's SyncGroup; the group is Stable only after the leader's
      assignment is durably stored in ``__consumer_offsets``;
    * ``Stable`` — the first member's ``assigned`` event of the new
      generation: SyncGroup responses are sent only after that store.

    KIP-848 groups (any member with ``group_protocol: consumer``; Kafka 4.x's
    ``org.apache.kafka.coordinator.group.GroupMetadataManager``, whose INFO lines carry no
    PreparingRebalance/Stabilized words; KIP-848, "Group Epoch - Trigger a rebalance", "Member Epoch
    - Reconciliation of the group"):

    * ``PreparingRebalance`` — a rebalance (reconciliation) started: "[GroupId G] Bumped group
      epoch to N" (the membership or the subscriptions changed; the coordinator computes the target
      assignment of epoch N on a later heartbeat, "Computed a new target assignment for epoch N",
      and the members then reconcile to it). ``N`` is the *new* epoch (a classic line names the old
      generation);
    * ``Stable`` — the group reconciled at its epoch: the first ConsumerGroupDescribe sample of the
      observer (``group_state``, every 100 ms) in state Stable at group epoch N. That state is the
      coordinator's own (``ConsumerGroup.maybeUpdateGroupState``: the assignment epoch equals the
      group epoch and every member has reached it). There is no INFO line for it (the per-member
      "new assignment state" line is DEBUG: none in 4.4.0's logs), and members' events cannot show
      it: a member that only loses partitions reaches the new epoch without a callback, and
      librdkafka's callbacks carry the epoch the member had before. The signal lags the transition
      by at most the observer's interval and one describe;
    * ``CompletingRebalance`` has no counterpart (no SyncGroup phase: the coordinator assigns) and
      is refused at load time.

    ``after_generation: N`` (classic) fires at the first ``assigned`` event of generation >= N;
    ``after_epoch: N`` (KIP-848) fires when the group epoch reaches N ("Bumped group epoch to M",
    M >= N). Each is refused for the other protocol's groups.
    """

    at_s: Annotated[float, Field(ge=0)] | None = None
    random: RandomTrigger | None = None
    state: Literal["PreparingRebalance", "CompletingRebalance", "Stable"] | None = None
    on_revoked: str | None = None
    after_generation: Annotated[int, Field(ge=1)] | None = None
    #: KIP-848 groups: fire when the group epoch reaches this value
    after_epoch: Annotated[int, Field(ge=1)] | None = None
    #: state triggers: do not fire before this many seconds into the chaos phase
    not_before_s: Annotated[float, Field(ge=0)] = 0.0
    #: state triggers: give up (fault not injected, recorded) after this many seconds
    timeout_s: Annotated[float, Field(gt=0)] = 60.0

    @model_validator(mode="after")
    def _one(self) -> Trigger:
        chosen = [k for k in _TRIGGER_KINDS if getattr(self, k) is not None]
        if len(chosen) != 1:
            raise ValueError(f"give exactly one of {', '.join(_TRIGGER_KINDS)} (got {chosen or 'none'})")
        return self

    @property
    def kind(self) -> str:
        return next(k for k in _TRIGGER_KINDS if getattr(self, k) is not None)

    def describe(self) -> str:
        k = self.kind
        v = getattr(self, k)
        return f"{k}={v.model_dump() if isinstance(v, BaseModel) else v}"


class Direction(StrEnum):
    """Which way a Toxiproxy link fault acts on a client link (a member's lane, a broker's client lanes).

    Every client link is a proxy whose listener the client connects to and whose upstream is a broker's
    lane listener, so Toxiproxy's ``upstream`` stream carries the client's requests and ``downstream``
    the broker's responses (Toxiproxy README, "Toxics": each toxic applies to one ``stream``). A one-way
    fault makes outcomes unknown: with ``to_client`` a request is applied by the broker (a commit
    stored in ``__consumer_offsets``) while its response never arrives.
    """

    BOTH = "both"              # both streams (every link fault before one-way faults existed)
    TO_BROKER = "to_broker"    # Toxiproxy stream ``upstream``: client -> broker, the requests
    TO_CLIENT = "to_client"    # Toxiproxy stream ``downstream``: broker -> client, the responses


class FaultSpec(_Strict):
    type: FaultType
    target: Role
    #: for target node/member: the node (broker-2, zk-1) or member (consumer-1)
    node: str | None = None
    #: for target leader: the partition of the workload topic
    partition: Annotated[int, Field(ge=0)] = 0
    links: LinkScope = LinkScope.ALL
    trigger: Trigger = Trigger(at_s=0)
    #: how long the fault lasts before its heal (0 = heal at once)
    duration_s: Annotated[float, Field(ge=0)] = 5.0
    #: toxic parameters: latency_ms, jitter_ms, rate_kb, bytes, avg_size, size_variation, delay_us
    params: dict[str, float] = Field(default_factory=dict)
    #: add_partitions: the new total
    partitions: Annotated[int, Field(ge=1, le=MAX_PARTITIONS)] | None = None
    #: partition: the broker cut from the target — a node (broker-2) or a role (controller,
    #: coordinator, leader, random_broker); default: every other broker
    peer: str | None = None
    #: change_subscription: the member's new subscription — ``topic`` (the workload topic) and/or
    #: ``extra`` (a second topic of the run, created on first use, never produced to)
    subscription: tuple[Literal["topic", "extra"], ...] | None = None
    #: link faults on client links: which way the toxic acts (:class:`Direction`); its kind refuses it
    #: where one direction means nothing (:mod:`chaos.nemesis.kinds.link`)
    direction: Direction = Direction.BOTH

    @property
    def kind(self) -> FaultKind:
        """The registered kind of this fault (its validation, capability and injection)."""
        from chaos.nemesis.kinds import kind

        return kind(self.type.value)

    @model_validator(mode="after")
    def _check(self) -> FaultSpec:
        k, r = self.kind, self.target
        if r not in k.targets:
            if r is Role.ZOOKEEPER_QUORUM and k.family == "process":
                raise ValueError("zookeeper_quorum takes process faults (kill, terminate, pause, restart)")
            raise ValueError((k.target_error or f"{k.name} takes target "
                              f"{', '.join(sorted(t.value for t in k.targets))}").format(target=r.value))
        if r is Role.ZOOKEEPER_QUORUM and k.family != "process":
            raise ValueError("zookeeper_quorum takes process faults (kill, terminate, pause, restart)")
        for name in ("subscription", "peer", "partitions"):
            if getattr(self, name) is not None and name not in k.fields:
                owners = sorted(o.name for o in _kinds().values() if name in o.fields)
                raise ValueError(f"{name} applies to type {' or '.join(owners)} only")
        if self.direction is not Direction.BOTH and "direction" not in k.fields and k.family != "link":
            # a link kind says itself why one direction means nothing to it (its ``check``)
            owners = sorted(o.name for o in _kinds().values() if "direction" in o.fields)
            raise ValueError(f"direction applies to type {' or '.join(owners)} only (link faults), not {k.name}")
        if r in (Role.NODE, Role.MEMBER) and not self.node:
            raise ValueError(f"target {r.value} needs `node` (e.g. {'consumer-1' if r is Role.MEMBER else 'broker-2'})")
        missing = sorted(k.params - set(self.params))
        if missing:
            raise ValueError(f"{k.name} needs params.{missing[0]}")
        allowed = {"latency_ms", "jitter_ms", "rate_kb", "bytes", "avg_size", "size_variation", "delay_us", "toxicity"}
        unknown = set(self.params) - allowed
        if unknown:
            raise ValueError(f"unknown params {sorted(unknown)}; allowed: {sorted(allowed)}")
        if k.check is not None:
            k.check(self)
        return self


class Phases(_Strict):
    """Phase lengths and bounds — the one place a run's timing is set (see :mod:`chaos.lifecycle`).

    Warm-up ends when every member is assigned (at most ``warmup_timeout_s``), plus ``warmup_s``.
    """

    warmup_s: Annotated[float, Field(ge=0)] = 2.0
    #: bound on waiting for every member's first assignment
    warmup_timeout_s: Annotated[float, Field(gt=0)] = 30.0
    chaos_s: Annotated[float, Field(ge=0)] = 20.0
    #: after the chaos phase, every fault is healed; this much time is then left for recovery
    heal_s: Annotated[float, Field(ge=0)] = 0.0
    #: bound on waiting for the group to commit every record after producers stop
    quiesce_s: Annotated[float, Field(gt=0)] = 60.0


class CheckerConfig(_Strict):
    #: checkers to run (default: every one)
    only: tuple[CheckerName, ...] | None = None
    skip: tuple[CheckerName, ...] = ()
    convergence_s: Annotated[float, Field(ge=0)] | None = None
    clock_slack_s: Annotated[float, Field(ge=0)] = 0.5

    def names(self) -> list[CheckerName]:
        chosen = list(self.only) if self.only else list(CheckerName)
        return [c for c in chosen if c not in self.skip]


class Experiment(_Strict):
    name: Annotated[str, Field(pattern=r"^[a-z0-9][a-z0-9._-]*$")]
    description: str = ""
    backend: Literal["local", "docker"] = "local"
    cluster: ClusterSpec = ClusterSpec()
    workload: WorkloadSpec = WorkloadSpec()
    faults: Annotated[tuple[FaultSpec, ...], Field(max_length=MAX_FAULTS)] = ()
    phases: Phases = Phases()
    checkers: CheckerConfig = CheckerConfig()
    runs: Annotated[int, Field(ge=1, le=MAX_RUNS)] = 1
    #: True when the experiment expects a checker to fail (wrong-mode sensitivity experiments)
    expect_violation: tuple[CheckerName, ...] = ()

    @field_validator("faults", mode="before")
    @classmethod
    def _few_enough_faults(cls, value: Any) -> Any:
        # counted before each fault is validated; random counts are added up in _check
        if isinstance(value, list | tuple) and len(value) > MAX_FAULTS:
            raise ValueError(f"{len(value)} faults: at most {MAX_FAULTS} (each waits in a thread of its own)")
        return value

    @model_validator(mode="after")
    def _check(self) -> Experiment:
        members = {f"consumer-{i}" for i in range(len(self.workload.consumers))}
        # one consumer-protocol member makes the group a KIP-848 group on Kafka 4.x (the new coordinator
        # converts a classic group when such a member joins, group.consumer.migration.policy)
        kip848 = any(c.group_protocol is GroupProtocol.CONSUMER for c in self.workload.consumers)
        nodes = set(self.cluster.node_names)
        lanes = {f"lane{i}" for i in range(self.cluster.lanes)}
        planned = sum(f.trigger.random.count if f.trigger.random else 1 for f in self.faults)
        if planned > MAX_FAULTS:
            raise ValueError(f"faults: {planned} planned faults (a random trigger's count included): at most "
                             f"{MAX_FAULTS} (each waits in a thread of its own)")
        for i, f in enumerate(self.faults):
            if f.target is Role.MEMBER and f.node not in members:
                raise ValueError(f"faults.{i}.node: {f.node!r} is not a member; members are {sorted(members)}")
            if f.target is Role.NODE and f.node not in nodes:
                raise ValueError(f"faults.{i}.node: {f.node!r} is not a node; nodes are {sorted(nodes)}")
            if f.trigger.on_revoked and f.trigger.on_revoked not in members:
                raise ValueError(f"faults.{i}.trigger.on_revoked: {f.trigger.on_revoked!r} is not a member")
            if f.trigger.random and f.trigger.random.end_s and f.trigger.random.end_s > self.phases.chaos_s:
                raise ValueError(f"faults.{i}.trigger.random.end_s exceeds phases.chaos_s={self.phases.chaos_s}")
            # a fault that cannot fire inside the chaos phase would leave a run that tested nothing
            first, field_name = _earliest_fire_s(f.trigger)
            if first >= self.phases.chaos_s:
                raise ValueError(f"faults.{i}.trigger.{field_name}={first:g} is not inside the chaos phase "
                                 f"(phases.chaos_s={self.phases.chaos_s:g}): the fault could never fire; "
                                 f"lower it or lengthen phases.chaos_s")
            if f.kind.check_in is not None:
                f.kind.check_in(f, self, i)
            if not kip848 or self.cluster.kip848:  # else the members' own error below says what to change
                _check_trigger_protocol(f.trigger, kip848, i)
            if f.target is Role.GROUP_LEADER and kip848:
                raise ValueError(f"faults.{i}: a KIP-848 group has no group leader (the coordinator assigns): "
                                 "target random_member or a member, or use group_protocol: classic")
            if f.target is Role.ZOOKEEPER_QUORUM and self.cluster.kraft:
                raise ValueError(f"faults.{i}: a KRaft cluster has no ZooKeeper: use target controller_quorum")
            if f.links is LinkScope.ZOOKEEPER and self.cluster.kraft:  # else a link fault that cuts nothing
                raise ValueError(f"faults.{i}.links: a KRaft cluster has no ZooKeeper sessions to cut: "
                                 "use links quorum, clients or all")
            if f.links is LinkScope.QUORUM and not self.cluster.kraft:
                raise ValueError(f"faults.{i}.links: quorum means a broker's links to the KRaft controllers; "
                                 "under ZooKeeper use links zookeeper")
            if f.target is Role.ZOOKEEPER_QUORUM and self.cluster.zookeepers < 3:
                raise ValueError(f"faults.{i}: zookeeper_quorum needs cluster.zookeepers: 3")
            if f.target in (Role.ACTIVE_CONTROLLER, Role.CONTROLLER_QUORUM) and not self.cluster.kraft:
                raise ValueError(f"faults.{i}: {f.target.value} needs a KRaft cluster (cluster.mode: kraft, or "
                                 "kafka_version 4.x); under ZooKeeper use target controller / zookeeper_quorum")
            if f.target is Role.CONTROLLER_QUORUM and self.cluster.controllers < 3:
                raise ValueError(f"faults.{i}: controller_quorum needs cluster.controllers: 3")
        for i, c in enumerate(self.workload.consumers):
            # KIP-848 is GA from 4.0 (in 3.7-3.9 it is early access behind an unstable feature flag)
            if c.group_protocol is GroupProtocol.CONSUMER and not self.cluster.kip848:
                raise ValueError(f"workload.consumers.{i}.group_protocol: consumer (KIP-848) needs a KRaft cluster of "
                                 f"Kafka 4.x: set cluster.kafka_version (e.g. {KRAFT_KAFKA_VERSION}), or use "
                                 "group_protocol: classic")
            if c.lane not in lanes:
                raise ValueError(f"workload.consumers.{i}.lane: {c.lane!r} does not exist; "
                                 f"cluster.lanes={self.cluster.lanes} gives {sorted(lanes)}")
        for i, p in enumerate(self.workload.producers):
            if p.lane not in lanes:
                raise ValueError(f"workload.producers.{i}.lane: {p.lane!r} does not exist; lanes are {sorted(lanes)}")
        if self.workload.replication > self.cluster.brokers:
            raise ValueError(f"workload.replication={self.workload.replication} "
                             f"exceeds cluster.brokers={self.cluster.brokers}")
        return self

    def required_capabilities(self) -> dict[str, Capability]:
        """Fault type -> the backend capability it needs beyond the basic process and link faults."""
        from chaos.cluster import Capability

        return {f.type.value: Capability(f.kind.capability) for f in self.faults if f.kind.capability}

    def with_overrides(self, **fields: Any) -> Experiment:
        data = self.model_dump()
        for dotted, value in fields.items():
            node = data
            *parents, leaf = dotted.split(".")
            for p in parents:
                node = node[p]
            node[leaf] = value
        return Experiment.model_validate(data)


def _check_trigger_protocol(trigger: Trigger, kip848: bool, i: int) -> None:
    """Refuse a trigger that has no meaning under the group's protocol (see :class:`Trigger`)."""
    if kip848 and trigger.state == "CompletingRebalance":
        raise ValueError(f"faults.{i}.trigger.state: CompletingRebalance has no KIP-848 counterpart (no SyncGroup "
                         "phase: the coordinator assigns): use state PreparingRebalance (the group epoch was "
                         "bumped) or Stable, or group_protocol: classic")
    if kip848 and trigger.after_generation is not None:
        raise ValueError(f"faults.{i}.trigger.after_generation: a KIP-848 group counts group epochs, not "
                         "generations: use after_epoch")
    if not kip848 and trigger.after_epoch is not None:
        raise ValueError(f"faults.{i}.trigger.after_epoch: group epochs exist for KIP-848 groups only (some member "
                         "with group_protocol: consumer): use after_generation")


def _earliest_fire_s(trigger: Trigger) -> tuple[float, str]:
    """The earliest second of the chaos phase at which ``trigger`` can fire, and the field that sets it."""
    if trigger.at_s is not None:
        return trigger.at_s, "at_s"
    if trigger.random is not None:
        return trigger.random.start_s, "random.start_s"
    return trigger.not_before_s, "not_before_s"


#: seeds are recorded in the run's header as a signed 64-bit integer (JSON readers, Parquet BIGINT)
SEED_MAX = 2**63 - 1


def check_seed(seed: int, what: str = "--seed") -> int:
    """``seed`` if it is in 0..2^63-1; otherwise a UsageError saying so."""
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed <= SEED_MAX:
        raise UsageError(f"{what} {seed!r}: a seed is an integer from 0 to {SEED_MAX} (2^63-1)")
    return seed
