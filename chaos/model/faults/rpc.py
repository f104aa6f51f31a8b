"""Protocol-level faults: one Kafka API's requests or answers on a link lost, delayed, falsified or sent twice.

Every link already goes through its own Toxiproxy proxy; an ``rpc`` fault puts the project's ``kafka`` toxic
(``toxiproxy/kafkatoxic``, built into the project's Toxiproxy server) on the proxies the target's RPCs take. The
toxic re-frames the byte stream into Kafka requests and answers and acts on those of one API
(docs/protocol-faults.md):

* ``drop_request``: the request never reaches the broker (its client waits out ``request.timeout.ms``);
* ``drop_response``: the broker handles it (a commit is stored), its answer never reaches the client;
* ``delay``: the answer reaches the client ``delay_ms`` late (the broker handled it on time);
* ``error``: the answer's error codes (top level and per topic, partition or member) are replaced by ``error``,
  a name from Kafka's ``Errors.java`` — the broker did what the request asked;
* ``duplicate_request``: the broker gets the request twice; the client sees the first answer only.

``count`` acts on the first N matching requests, ``probability`` on each with that chance (seeded by the run);
with neither, on every one while the fault lasts.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from types import MappingProxyType
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Literal

from pydantic import Field, field_validator, model_validator

from chaos.model.fault_traits import FaultTrait
from chaos.model.faults.base import Family, FaultSpec
from chaos.model.kafka_api import (
    CONSUMER_MEMBER_APIS,
    GROUP_APIS,
    KRAFT_ONLY_APIS,
    QUORUM_APIS,
    SHARE_MEMBER_APIS,
    api_errors,
    api_name,
    error_code,
    error_names,
    nearest_apis,
)
from chaos.model.target import MEMBER_ROLES, SINGLE_ROLES, LinkScope, Role
from chaos.model.workload import RebalanceProtocol

if TYPE_CHECKING:  # pragma: no cover
    import random

    from chaos.model.experiment import Experiment
    from chaos.model.trigger import Trigger


class RpcAction(StrEnum):
    """What an ``rpc`` fault does to a matching RPC."""

    DROP_REQUEST = "drop_request"
    DROP_RESPONSE = "drop_response"
    DELAY = "delay"
    ERROR = "error"
    DUPLICATE_REQUEST = "duplicate_request"


#: the APIs ``chaos explore`` aims rpc faults at, by what the target sends or answers all the time (a fault on an
#: API nobody sends while it is on acted on nothing, and the run's verdict is unknown): a member's and the
#: coordinator's heartbeats and commits, any broker's fetches (every broker leads some partitions)
STEADY_APIS: Mapping[str, frozenset[str]] = MappingProxyType({
    "member": frozenset({"OffsetCommit", "Fetch"}), "coordinator": frozenset({"OffsetCommit"}),
    "broker": frozenset({"Fetch"}),
})
#: the calls of a rebalance, aimed at only when the fault waits for one (a live trigger)
REBALANCE_APIS: Mapping[str, frozenset[str]] = MappingProxyType({
    "classic": frozenset({"JoinGroup", "SyncGroup", "OffsetFetch"}), "consumer": frozenset({"OffsetFetch"}),
})
#: the roles whose node is a KRaft controller: it answers only its brokers, over the quorum links
_CONTROLLER_ROLES = frozenset({Role.CONTROLLER, Role.ACTIVE_CONTROLLER, Role.CONTROLLER_QUORUM})
#: what brokers send a controller all the time (the metadata log's Fetch, their heartbeats; KIP-631)
_STEADY_QUORUM_APIS = frozenset({"Fetch", "BrokerHeartbeat"})
#: the first N matching requests an explored rpc fault acts on (None: with a probability, or on every one)
_EXPLORED_COUNTS = (1, 1, 2, 3, None)

#: the fields an ``rpc`` fault owns, recorded in its ``fault_start`` params
RPC_FIELDS = ("api", "action", "error", "delay_ms", "count", "probability")


class Rpc(FaultSpec):
    type: Literal["rpc"]
    family: ClassVar[Family] = "rpc"
    summary: ClassVar[str] = ("one Kafka API's requests or answers dropped, delayed, answered with an error or sent "
                              "twice on the target's links (kafka toxic removed)")
    targets: ClassVar[frozenset[Role]] = SINGLE_ROLES - {Role.ZOOKEEPER_QUORUM}
    #: with ``action: error`` (its params name the error): other actions inject no error, and the trait's reader
    #: finds no ``error`` in their params
    traits: ClassVar[frozenset[FaultTrait]] = frozenset({FaultTrait.FALSIFIES_ANSWERS})
    target_error: ClassVar[str | None] = ("rpc faults act on one member's requests (target member, group_leader, "
                                         "random_member) or on the requests to one broker, not {target}")
    examples: ClassVar[tuple[str, ...]] = (
        "{type: rpc, target: member, node: consumer-1, api: SyncGroup, action: drop_response, count: 1, "
        "trigger: {state: CompletingRebalance}, duration_s: 6}",
        "{type: rpc, target: coordinator, api: Heartbeat, action: error, error: REBALANCE_IN_PROGRESS, "
        "duration_s: 5}",
    )

    #: a member's links are its lane (every broker); a broker's: its client lanes, or (KRaft) its quorum links
    links: LinkScope = LinkScope.CLIENTS
    #: the Kafka API by name, as Kafka's message specs spell it (SyncGroup, OffsetCommit, ConsumerGroupHeartbeat …)
    api: str
    action: RpcAction
    #: action error: the error the answer carries instead, by Kafka's name (NOT_COORDINATOR, FENCED_MEMBER_EPOCH …)
    error: str | None = None
    #: action delay: how late the answer arrives
    delay_ms: Annotated[int, Field(ge=1, le=600_000)] | None = None
    #: act on the first ``count`` matching requests only
    count: Annotated[int, Field(ge=1, le=1_000_000)] | None = None
    #: act on each matching request with this probability (seeded by the run)
    probability: Annotated[float, Field(gt=0, le=1)] | None = None

    @property
    def traits_in_effect(self) -> frozenset[FaultTrait]:
        """The kind's traits, and ``loses_requests`` for ``drop_request`` / ``drop_response``: the connection stays
        open and nothing answers, so the client waits its request timeout."""
        if self.action in (RpcAction.DROP_REQUEST, RpcAction.DROP_RESPONSE):
            return self.traits | {FaultTrait.LOSES_REQUESTS}
        return self.traits

    @classmethod
    def explore_fields(cls, rng: random.Random, experiment: Experiment, target: Role,
                       trigger: Trigger) -> dict[str, Any]:
        """An API the target sends or answers while the fault is on (:data:`STEADY_APIS`, the heartbeat of the
        group's protocol, and with a live trigger the calls of a rebalance), an action, and for ``error`` one of the
        errors that API is documented to answer with."""
        protocols = sorted({c.group_protocol.value for c in experiment.workload.consumers})
        heartbeat = {"classic": "Heartbeat", "consumer": "ConsumerGroupHeartbeat"}
        if target in MEMBER_ROLES or target is Role.COORDINATOR:
            side = "member" if target in MEMBER_ROLES else "coordinator"
            apis = set(STEADY_APIS[side]) | {heartbeat[p] for p in protocols}
            if trigger.at_s is None:
                apis |= set().union(*(REBALANCE_APIS[p] for p in protocols))
                if side == "member" and any(c.protocol is RebalanceProtocol.COOPERATIVE
                                            for c in experiment.workload.consumers):
                    # a cooperative member (KIP-429, KIP-848) fetches offsets only for partitions newly given to
                    # it: one member's OffsetFetch is not sure to come in a rebalance, the group's is (found by
                    # exploring 4.4.0: an OffsetFetch fault on one member acted on nothing, the run unknown)
                    apis.discard("OffsetFetch")
        elif target in _CONTROLLER_ROLES:
            # over the quorum links (found by exploring 4.4.0: Fetch on a controller's client lanes acted on nothing)
            apis = set(_STEADY_QUORUM_APIS)
        else:
            apis = set(STEADY_APIS["broker"])
        api = rng.choice(sorted(apis))
        documented = api_errors(api)
        actions = [a for a in RpcAction if a is not RpcAction.ERROR or documented]
        action = rng.choice(actions)
        fields: dict[str, Any] = {"api": api, "action": action.value}
        if target in _CONTROLLER_ROLES:
            fields["links"] = LinkScope.QUORUM.value
        if action is RpcAction.ERROR and documented:
            fields["error"] = rng.choice(error_names(documented))
        if action is RpcAction.DELAY:
            fields["delay_ms"] = rng.choice([200, 1000, 3000, 8000])
        count = rng.choice(_EXPLORED_COUNTS)
        if count is not None:
            fields["count"] = count
        elif rng.random() < 0.5:
            fields["probability"] = rng.choice([0.2, 0.5])
        return fields

    @field_validator("api")
    @classmethod
    def _api(cls, v: str) -> str:
        name = api_name(v)
        if name is None:
            near = nearest_apis(v) or ["SyncGroup", "OffsetCommit"]
            raise ValueError(f"api {v!r} is not a Kafka API (Kafka's message specs): e.g. {', '.join(near)}")
        return name

    @field_validator("error")
    @classmethod
    def _error(cls, v: str | None) -> str | None:
        if v is not None:
            error_code(v)  # raises with the nearest names
        return v

    @model_validator(mode="after")
    def _action_fields(self) -> Rpc:
        a = self.action
        if a is RpcAction.ERROR and self.error is None:
            raise ValueError("action error needs `error`: the Kafka error the answer carries (e.g. NOT_COORDINATOR)")
        if a is not RpcAction.ERROR and self.error is not None:
            raise ValueError(f"`error` applies to action error only, not {a.value}")
        if self.error is not None:
            documented = api_errors(self.api)
            if documented is not None and error_code(self.error) not in documented:
                raise ValueError(f"{self.api} answers never carry {self.error} (the errors kmsg's docs and Kafka's "
                                 f"message specs document for it): use one of "
                                 f"{', '.join(error_names(documented))}")
        if a is RpcAction.DELAY and self.delay_ms is None:
            raise ValueError("action delay needs `delay_ms`: how late the answer arrives")
        if a is not RpcAction.DELAY and self.delay_ms is not None:
            raise ValueError(f"`delay_ms` applies to action delay only, not {a.value}")
        if self.count is not None and self.probability is not None:
            raise ValueError("give `count` (the first N matching requests) or `probability` (each one), not both")
        if self.links not in (LinkScope.CLIENTS, LinkScope.QUORUM):
            raise ValueError(f"rpc faults act on Kafka requests: links clients (the client lanes) or quorum (KRaft: "
                             f"broker to controller), not {self.links.value}")
        if self.target in MEMBER_ROLES and self.links is not LinkScope.CLIENTS:
            raise ValueError("a member's requests go over its lane: drop `links` for a member target")
        if self.links is LinkScope.QUORUM and self.api not in QUORUM_APIS:
            raise ValueError(f"{self.api} does not go from a broker to a controller: on quorum links use one of "
                             f"{', '.join(sorted(QUORUM_APIS))}")
        if self.links is LinkScope.CLIENTS and self.api in QUORUM_APIS - {"ApiVersions", "Fetch"}:
            raise ValueError(f"{self.api} goes from a broker to a controller: add `links: quorum`")
        return self

    def check_in(self, experiment: Experiment, i: int) -> None:
        from chaos.model.cluster import ClusterMode

        kraft = experiment.cluster.metadata_mode is ClusterMode.KRAFT
        node = self.node or ""
        if self.target is Role.NODE and node.startswith("zk-"):  # else a fault that acts on nothing: unknown
            raise ValueError(f"faults.{i}: {node} speaks ZooKeeper's protocol, not Kafka's: aim rpc faults at a "
                             "broker or a member (a ZooKeeper node takes process and link faults)")
        if self.target is Role.NODE and node.startswith("controller-") and self.links is not LinkScope.QUORUM:
            raise ValueError(f"faults.{i}: {node} answers only its brokers, over the quorum links: add links: quorum")
        if self.target in _CONTROLLER_ROLES and self.links is not LinkScope.QUORUM:
            raise ValueError(f"faults.{i}: the {self.target.value.replace('_', ' ')} answers only its brokers, over the "
                             "quorum links: add links: quorum")
        if not kraft and (self.api in KRAFT_ONLY_APIS or self.links is LinkScope.QUORUM):
            raise ValueError(f"faults.{i}: {self.api if self.api in KRAFT_ONLY_APIS else 'links quorum'} needs a "
                             "KRaft cluster (cluster.kafka_version 4.x, or mode: kraft)")
        if experiment.workload.share is not None and self.api in CONSUMER_MEMBER_APIS:
            raise ValueError(f"faults.{i}: a share group's members never send {self.api} (a consumer group's API): "
                             f"use one of {', '.join(sorted(SHARE_MEMBER_APIS))}")
        if experiment.workload.share is None and self.api in SHARE_MEMBER_APIS:
            raise ValueError(f"faults.{i}: no member speaks {self.api} (KIP-932 share groups): give the experiment "
                             "a workload.share")
        for protocol, kip in (("consumer", "KIP-848"), ("classic", "the classic protocol")):
            if experiment.workload.share is None and self.api in GROUP_APIS[protocol] and not any(
                    c.group_protocol == protocol for c in experiment.workload.consumers):
                raise ValueError(f"faults.{i}: no member speaks {self.api} ({kip}): give a consumer "
                                 f"group_protocol: {protocol}")
