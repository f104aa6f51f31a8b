"""Experiments as reviewable data: a typed, validated record of parts.

An experiment (one YAML file of the catalogue, or the same structure built
in Python) names the cluster shape, the workload, the fault schedule, the
phases, which checkers judge the run and with which bounds, and how many runs.
It is validated when it is built: unknown fields are rejected, and every
error names the field and what is allowed (:mod:`chaos.experiment` reads the
files and adds the file name).

Faults: a fault has a ``type`` (one per declared fault kind,
:mod:`chaos.model.faults`, whose model validates its own fields), a
``target`` role resolved at the moment of injection, a ``trigger`` (a time,
a seeded random schedule, or a group state seen live) and a ``duration_s``
after which it is healed (always — healing runs in ``finally``).
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from chaos.errors import UsageError
from chaos.model.backend import BackendName, Capability
from chaos.model.checker_name import CheckerName
from chaos.model.cluster import KRAFT_KAFKA_VERSION, ClusterSpec
from chaos.model.faults import AnyFault
from chaos.model.share import GROUP_DELIVERY_LIMIT_RELEASE, KAFKA_DELIVERY_COUNT_LIMIT
from chaos.model.target import LinkScope, Role
from chaos.model.trigger import MAX_FAULTS, Trigger
from chaos.model.workload import GroupProtocol, WorkloadSpec


class _Strict(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


# Upper bounds of the experiment's counts, refused at load time with the bound in the message (the faults' is
# chaos.model.trigger.MAX_FAULTS; the cluster's and the workload's are in chaos.model.cluster and chaos.model.workload).
#: runs of one experiment (one after the other, so a bound on time, not on processes: 10,000 runs of a
#: one-minute experiment are a week)
MAX_RUNS = 10000


class Phases(_Strict):
    """Phase lengths and bounds — the one place a run's timing is set (see :mod:`chaos.lifecycle`).

    Warm-up ends when every member is assigned (at most ``warmup_timeout_s``), plus ``warmup_s``.
    """

    warmup_s: Annotated[float, Field(ge=0)] = 2.0
    #: bound on waiting for every member's first assignment
    warmup_timeout_s: Annotated[float, Field(gt=0)] = 30.0
    chaos_s: Annotated[float, Field(ge=0)] = 20.0
    #: when set, the chaos phase ends this long after every planned fault has healed (or its trigger gave up),
    #: at most ``chaos_s`` after it began: ``chaos_s`` is then an upper bound, for schedules whose live triggers
    #: fire at moments nobody knows in advance (``chaos explore`` sets it). An experiment without faults has a
    #: chaos phase of ``settle_s``
    settle_s: Annotated[float, Field(ge=0)] | None = None
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
    backend: BackendName = BackendName.LOCAL
    cluster: ClusterSpec = ClusterSpec()
    workload: WorkloadSpec = WorkloadSpec()
    faults: Annotated[tuple[AnyFault, ...], Field(max_length=MAX_FAULTS)] = ()
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
        members = {f"consumer-{i}" for i in range(self.workload.member_count)}
        if self.workload.share is not None:
            _check_share(self)
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
            after = f.trigger.after_index
            if after is not None and (after >= i or self.faults[after].trigger.random is not None):
                raise ValueError(f"faults.{i}.trigger.after_fault: {f.trigger.after_fault} must name a fault listed "
                                 f"before this one (f0 to f{i - 1}) that fires once (not a random trigger)"
                                 if i else "faults.0.trigger.after_fault: the first fault has no fault before it "
                                 "to wait for: drop after_fault or list that fault first")
            if f.trigger.random and f.trigger.random.end_s and f.trigger.random.end_s > self.phases.chaos_s:
                raise ValueError(f"faults.{i}.trigger.random.end_s exceeds phases.chaos_s={self.phases.chaos_s}")
            # a fault that cannot fire inside the chaos phase would leave a run that tested nothing
            first, field_name = _earliest_fire_s(f.trigger)
            if first >= self.phases.chaos_s:
                raise ValueError(f"faults.{i}.trigger.{field_name}={first:g} is not inside the chaos phase "
                                 f"(phases.chaos_s={self.phases.chaos_s:g}): the fault could never fire; "
                                 f"lower it or lengthen phases.chaos_s")
            f.check_in(self, i)
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
        return {f.type: f.capability for f in self.faults if f.capability is not None}

    def with_overrides(self, **fields: Any) -> Experiment:
        data = self.model_dump()
        for dotted, value in fields.items():
            node = data
            *parents, leaf = dotted.split(".")
            for p in parents:
                node = node[p]
            node[leaf] = value
        return Experiment.model_validate(data)


#: the fault families a share-group run can inject: membership and topology faults change consumer-group
#: membership or the topic under a consumer group (docs/share-groups.md)
SHARE_FAULT_FAMILIES = frozenset({"process", "link", "network", "container", "rpc"})


def _check_share(experiment: Experiment) -> None:
    """What a share-group workload (KIP-932) needs and cannot do, refused at load."""
    share = experiment.workload.share
    assert share is not None
    cluster = experiment.cluster
    if not cluster.share_groups:
        raise ValueError(f"workload.share: share groups (KIP-932) need a KRaft cluster of Kafka 4.2 or newer, this "
                         f"is {cluster.kafka_version} ({cluster.metadata_mode.value}): set cluster.kafka_version "
                         f"(e.g. {KRAFT_KAFKA_VERSION})")
    if share.delivery_count_limit != KAFKA_DELIVERY_COUNT_LIMIT \
            and cluster.release < GROUP_DELIVERY_LIMIT_RELEASE:
        raise ValueError(f"workload.share.delivery_count_limit {share.delivery_count_limit}: Kafka "
                         f"{cluster.kafka_version} has no group config share.delivery.count.limit (from 4.3): leave "
                         f"it at {KAFKA_DELIVERY_COUNT_LIMIT} (the brokers' default) or use Kafka 4.4")
    lanes = {f"lane{i}" for i in range(cluster.lanes)}
    for i, m in enumerate(share.members):
        if m.lane not in lanes:
            raise ValueError(f"workload.share.members.{i}.lane: {m.lane!r} does not exist; "
                             f"cluster.lanes={cluster.lanes} gives {sorted(lanes)}")
    for i, f in enumerate(experiment.faults):
        if f.family not in SHARE_FAULT_FAMILIES:
            raise ValueError(f"faults.{i}: {f.family} faults are not wired for share groups: use "
                             f"{', '.join(sorted(SHARE_FAULT_FAMILIES))} faults")
        if f.target is Role.GROUP_LEADER:
            raise ValueError(f"faults.{i}: a share group has no group leader (the coordinator assigns): target "
                             "random_member or a member")
        t = f.trigger
        if t.state is not None or t.on_revoked is not None or t.after_generation is not None \
                or t.after_epoch is not None:
            raise ValueError(f"faults.{i}.trigger: group-state, revocation and generation triggers follow a consumer "
                             "group; a share group's fault uses at_s or random")


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
