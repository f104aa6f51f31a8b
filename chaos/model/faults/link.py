"""Link faults on the Toxiproxy proxies every link goes through: down, black hole, reset, latency, bandwidth,
slicer, limit data — on a member's lane or a node's links, both ways or one (``direction``, client links only)."""

from __future__ import annotations

from enum import StrEnum
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Literal

from pydantic import Field, model_validator

from chaos.model.fault_traits import FaultTrait
from chaos.model.faults.base import Family, FaultSpec, Params
from chaos.model.target import BROKER_ROLES, MEMBER_ROLES, SINGLE_ROLES, LinkScope, Role

if TYPE_CHECKING:  # pragma: no cover
    import random

    from chaos.model.experiment import Experiment
    from chaos.model.trigger import Trigger


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


class ToxicParams(Params):
    #: the probability that the toxic applies to a connection (Toxiproxy's ``toxicity``)
    toxicity: Annotated[float, Field(ge=0, le=1)] = 1.0


#: nothing passes the link until the heal
_CUT = frozenset({FaultTrait.TAKES_TARGET_OUT})
#: every byte still passes, late or in pieces
_SLOW = frozenset({FaultTrait.SLOWS_ONLY})


class LinkFault(FaultSpec):
    """A fault on links: one node or member as target; ``direction`` where one way means something."""

    family: ClassVar[Family] = "link"
    targets: ClassVar[frozenset[Role]] = SINGLE_ROLES
    target_error: ClassVar[str | None] = "link faults need one node or member as target, not {target}"
    #: why this kind takes no one-way ``direction`` (None: it does, on client links)
    both_ways_only: ClassVar[str | None] = None

    #: client links only: which way the toxic acts (:class:`Direction`)
    direction: Direction = Direction.BOTH
    params: ToxicParams = ToxicParams()

    @classmethod
    def explore_fields(cls, rng: random.Random, experiment: Experiment, target: Role,
                       trigger: Trigger) -> dict[str, Any]:
        """A broker's links: all of them, its client lanes, or its metadata session (ZooKeeper or the quorum);
        one way or both where one way means something."""
        fields: dict[str, Any] = {}
        if target in BROKER_ROLES:
            session = LinkScope.QUORUM if experiment.cluster.kraft else LinkScope.ZOOKEEPER
            fields["links"] = rng.choice([LinkScope.ALL, LinkScope.CLIENTS, session]).value
        if cls.both_ways_only is None and (target in MEMBER_ROLES or fields.get("links") == LinkScope.CLIENTS):
            fields["direction"] = rng.choice(list(Direction)).value
        return fields

    @model_validator(mode="after")
    def _direction(self) -> LinkFault:
        """Refuse a ``direction`` that means nothing for this fault (``chaos.nemesis.kinds.link`` says why)."""
        d = self.direction
        if d is Direction.BOTH:
            return self
        if self.both_ways_only is not None:
            raise ValueError(self.both_ways_only.format(direction=d.value))
        node = self.node or ""
        if self.target in MEMBER_ROLES or (self.target in BROKER_ROLES and self.links is LinkScope.CLIENTS
                                           and not node.startswith(("zk-", "controller-"))):
            return self
        raise ValueError(f"direction {d.value} is defined on client links only (requests to_broker, responses "
                         "to_client): target a member, or a broker with links: clients")


class LinkDown(LinkFault):
    type: Literal["link_down"]
    summary: ClassVar[str] = "proxies disabled: connections closed, new ones refused (enabled again)"
    traits: ClassVar[frozenset[FaultTrait]] = _CUT
    both_ways_only: ClassVar[str | None] = ("link_down disables the proxy both ways: for a one-way cut use type "
                                            "black_hole with direction {direction}")


class BlackHole(LinkFault):
    type: Literal["black_hole"]
    summary: ClassVar[str] = "timeout toxic 0: data held, connections open (toxic removed)"
    # Toxiproxy's timeout toxic with timeout 0 drops what it holds: a request sent meanwhile is never answered
    traits: ClassVar[frozenset[FaultTrait]] = _CUT | {FaultTrait.LOSES_REQUESTS}


class ResetPeer(LinkFault):
    type: Literal["reset_peer"]
    summary: ClassVar[str] = "connections reset (toxic removed)"
    both_ways_only: ClassVar[str | None] = "reset_peer resets the TCP connection, both ways at once: remove direction"


class LatencyParams(ToxicParams):
    latency_ms: Annotated[float, Field(ge=0)]
    jitter_ms: Annotated[float, Field(ge=0)] = 0.0


class Latency(LinkFault):
    type: Literal["latency"]
    summary: ClassVar[str] = "latency_ms + jitter_ms (toxic removed)"
    traits: ClassVar[frozenset[FaultTrait]] = _SLOW
    examples: ClassVar[tuple[str, ...]] = (
        "{type: latency, target: coordinator, links: clients, duration_s: 10, params: {latency_ms: 250}}",)
    params: LatencyParams  # narrowed: latency_ms is required

    @classmethod
    def explore_fields(cls, rng: random.Random, experiment: Experiment, target: Role,
                       trigger: Trigger) -> dict[str, Any]:
        # from a slow network to answers later than a heartbeat interval and a request timeout's share
        return {**super().explore_fields(rng, experiment, target, trigger),
                "params": {"latency_ms": rng.choice([50, 300, 1000, 3000]), "jitter_ms": rng.choice([0, 100])}}


class BandwidthParams(ToxicParams):
    rate_kb: Annotated[float, Field(gt=0)]


class Bandwidth(LinkFault):
    type: Literal["bandwidth"]
    summary: ClassVar[str] = "rate_kb (toxic removed)"
    traits: ClassVar[frozenset[FaultTrait]] = _SLOW
    params: BandwidthParams

    @classmethod
    def explore_fields(cls, rng: random.Random, experiment: Experiment, target: Role,
                       trigger: Trigger) -> dict[str, Any]:
        return {**super().explore_fields(rng, experiment, target, trigger), "params": {"rate_kb": rng.choice([1, 8, 64])}}


class SlicerParams(ToxicParams):
    avg_size: Annotated[int, Field(ge=1)] = 64
    size_variation: Annotated[int, Field(ge=0)] = 32
    delay_us: Annotated[int, Field(ge=0)] = 100


class Slicer(LinkFault):
    type: Literal["slicer"]
    summary: ClassVar[str] = "packets sliced (toxic removed)"
    traits: ClassVar[frozenset[FaultTrait]] = _SLOW
    params: SlicerParams = SlicerParams()


class LimitDataParams(ToxicParams):
    bytes: Annotated[int, Field(ge=0)]


class LimitData(LinkFault):
    type: Literal["limit_data"]
    summary: ClassVar[str] = "connection closed after bytes (toxic removed)"
    params: LimitDataParams

    @classmethod
    def explore_fields(cls, rng: random.Random, experiment: Experiment, target: Role,
                       trigger: Trigger) -> dict[str, Any]:
        # 0: closed at once; a few KiB: mid-answer of a fetch or a join
        return {**super().explore_fields(rng, experiment, target, trigger),
                "params": {"bytes": rng.choice([0, 512, 16384, 262144])}}
