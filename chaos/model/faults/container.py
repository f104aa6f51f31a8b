"""Container-network faults (docker backend, bridge network): ``docker network disconnect`` of a node."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar, Literal

from chaos.model.backend import BackendName, Capability
from chaos.model.fault_traits import FaultTrait
from chaos.model.faults.base import Family, FaultSpec
from chaos.model.target import Role

if TYPE_CHECKING:  # pragma: no cover
    from chaos.model.experiment import Experiment


class Disconnect(FaultSpec):
    type: Literal["disconnect"]
    family: ClassVar[Family] = "container"
    summary: ClassVar[str] = "docker network disconnect of a node (connected again, same address)"
    targets: ClassVar[frozenset[Role]] = frozenset({Role.COORDINATOR, Role.CONTROLLER, Role.LEADER,
                                                    Role.RANDOM_BROKER, Role.NODE})
    traits: ClassVar[frozenset[FaultTrait]] = frozenset({FaultTrait.TAKES_TARGET_OUT})
    capability: ClassVar[Capability | None] = Capability.NETWORK_DISCONNECT
    target_error: ClassVar[str | None] = ("disconnect takes a cluster node off its network: target coordinator, "
                                         "controller, leader, random_broker or a node (broker-N, zk-N)")

    def check_in(self, experiment: Experiment, i: int) -> None:
        if experiment.backend is not BackendName.DOCKER:
            raise ValueError(f"faults.{i}: disconnect needs backend docker (a container network to leave); "
                             "for the local backend use link_down on the node's links")
