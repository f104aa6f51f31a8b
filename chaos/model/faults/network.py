"""Network faults below Toxiproxy: broker<->broker traffic cut pair-wise (``partition``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar, Literal

from pydantic import model_validator

from chaos.model.backend import Capability
from chaos.model.fault_traits import FaultTrait
from chaos.model.faults.base import Family, FaultSpec
from chaos.model.target import Role

if TYPE_CHECKING:  # pragma: no cover
    from chaos.model.experiment import Experiment

#: the roles a partition's ``peer`` may name besides a broker
PEER_ROLES = frozenset({Role.COORDINATOR, Role.CONTROLLER, Role.LEADER, Role.RANDOM_BROKER})


class Partition(FaultSpec):
    type: Literal["partition"]
    family: ClassVar[Family] = "network"
    summary: ClassVar[str] = "broker<->broker traffic cut pair-wise at the network level (rules removed)"
    targets: ClassVar[frozenset[Role]] = PEER_ROLES | {Role.NODE}
    target_error: ClassVar[str | None] = ("partition cuts brokers from brokers: target coordinator, controller, "
                                         "leader, random_broker or a node broker-N")
    traits: ClassVar[frozenset[FaultTrait]] = frozenset({FaultTrait.TAKES_TARGET_OUT})
    capability: ClassVar[Capability | None] = Capability.PAIR_PARTITION

    #: the broker cut from the target — a node (broker-2) or a role (controller, coordinator, leader,
    #: random_broker); default: every other broker
    peer: str | None = None

    @model_validator(mode="after")
    def _brokers_only(self) -> Partition:
        if self.target is Role.NODE and not str(self.node).startswith("broker-"):
            raise ValueError(self.target_error or "")
        if self.peer is not None and not (self.peer.startswith("broker-") or self.peer in set(PEER_ROLES)):
            raise ValueError(f"peer {self.peer!r}: a broker (broker-N) or coordinator, controller, leader, "
                             "random_broker")
        return self

    def check_in(self, experiment: Experiment, i: int) -> None:
        # On KRaft a broker reaches the controllers on their own listener, through the quorum proxies, never on the
        # inter-broker listener these rules cut: "cut from the controller" would cut nothing that matters (or, with
        # isolated controllers, name a node that is no broker)
        controller_roles = {Role.CONTROLLER, Role.ACTIVE_CONTROLLER}
        if experiment.cluster.kraft and (self.target in controller_roles or self.peer in set(controller_roles)):
            raise ValueError(f"faults.{i}: on KRaft a broker reaches the controllers through its quorum links, not "
                             "the inter-broker listener a partition cuts: use type link_down with links: quorum on "
                             "the broker (see broker-isolated-from-quorum), or a broker peer")
