"""What every cluster backend offers (:class:`Cluster`), the optional capabilities, and the factory.

Later layers (nemesis, runner, harness, plugin) talk to these protocols only,
so an experiment runs unchanged on the local-process backend
(:class:`chaos.cluster.local.LocalCluster`) and on the container one
(:class:`chaos.cluster.container_cluster.DockerCluster`). Both are the same
orchestration (:class:`chaos.cluster.kafka_cluster.KafkaCluster`) composed with
different parts — how nodes run, how the network between brokers is cut,
whether nodes sit on a container network of their own — in the manner of
Jepsen's ``db.clj``: one small required protocol and small optional ones.

A capability is *derived*: the cluster has the protocol's methods (a part
that can do it) and the part can work here and now (root, iptables, a bridge
network of our own). A fault that needs a capability the cluster lacks is
rejected before the run with a message naming the backend and why
(:meth:`Cluster.unavailable_reason`).

This module imports nothing heavy (no Kafka client, no docker SDK, no psutil):
``chaos.cluster.topology`` is part of the data model and loads it first.
"""

from __future__ import annotations

import signal
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, Self, runtime_checkable

if TYPE_CHECKING:
    from chaos.cluster.admin import ClusterAdmin
    from chaos.cluster.topology import Topology
    from chaos.cluster.toxiproxy import Toxic
    from chaos.model.cluster import ClusterSpec


class BackendName(StrEnum):
    LOCAL = "local"      # chaos.cluster.local.LocalCluster: local processes
    DOCKER = "docker"    # chaos.cluster.container_cluster.DockerCluster: containers on kafka-chaos's own engine


class Capability(StrEnum):
    KILL = "kill"                  # SIGKILL a node
    TERMINATE = "terminate"        # clean stop (SIGTERM: controlled shutdown)
    PAUSE = "pause"                # freeze/thaw a node (SIGSTOP/SIGCONT or cgroup freezer): Pausable
    RESTART = "restart"            # start a stopped node again with its data
    LINK_FAULTS = "link_faults"    # Toxiproxy toxics and link down/up
    NODE_LOGS = "node_logs"        # read each node's log file
    PAIR_PARTITION = "pair_partition"  # cut broker<->broker traffic pair-wise (network level): PairPartitionable
    NETWORK_DISCONNECT = "network_disconnect"  # take a node off its container network: NetworkDisconnectable


class NodeProcess(Protocol):
    """One running node as the nemesis sees it (a local process or a container's main process)."""

    log_path: Path

    @property
    def pid(self) -> int | None: ...
    def alive(self) -> bool: ...
    def signal(self, sig: int) -> None: ...
    def kill(self, timeout: float = 10.0) -> None: ...
    def terminate(self, grace: float) -> int | None: ...
    def log_tail(self, lines: int = 3) -> str: ...


@runtime_checkable
class Cluster(Protocol):
    """A real ZooKeeper-mode Kafka cluster behind Toxiproxy: what every backend offers.

    Node names are ``zk-N`` and ``broker-N``; links and lanes are those of
    :class:`chaos.cluster.topology.Topology`. Role lookups wait (bounded)
    through elections and return the node's name.
    """

    @property
    def backend_name(self) -> str: ...
    @property
    def spec(self) -> ClusterSpec: ...
    @property
    def topology(self) -> Topology | None: ...
    @property
    def startup_seconds(self) -> float | None: ...

    # lifecycle
    def __enter__(self) -> Self: ...
    def __exit__(self, *exc: object) -> None: ...
    def start(self) -> Self: ...
    def stop(self) -> None: ...

    # what it can do here
    @property
    def capabilities(self) -> frozenset[Capability]: ...
    def unavailable_reason(self, capability: Capability) -> str | None: ...

    # clients
    def bootstrap(self, lane: str = ...) -> str: ...
    @property
    def admin(self) -> ClusterAdmin: ...
    def produce_probe(self, topic: str, lane: str = ..., timeout: float = 5.0,
                      partition: int | None = None) -> int | None: ...

    # roles
    def controller(self) -> str | None: ...
    def leader_of(self, topic: str, partition: int) -> str | None: ...
    def coordinator_of(self, group: str) -> str | None: ...

    # process faults
    def kill(self, node: str, sig: int = signal.SIGKILL, wait: bool = True) -> None: ...
    def restart(self, node: str) -> None: ...
    def start_node(self, node: str) -> None: ...
    def is_running(self, node: str) -> bool: ...
    def is_paused(self, node: str) -> bool: ...
    def process(self, node: str) -> NodeProcess: ...
    def log_path(self, node: str) -> Path: ...
    def wait_broker_registered(self, node: str, timeout: float = 60.0) -> None: ...

    # link faults (Toxiproxy)
    def link_names(self) -> list[str]: ...
    def links_of(self, node_or_lane: str) -> list[str]: ...
    def link_down(self, link: str) -> None: ...
    def link_up(self, link: str) -> None: ...
    def add_toxic(self, link: str, toxic: Toxic) -> None: ...
    def remove_toxic(self, link: str, name: str) -> None: ...
    def reset_links(self) -> None: ...

    # healing and status
    def heal(self, timeout: float = 90.0) -> None: ...
    def status(self) -> dict[str, Any]: ...


@runtime_checkable
class Pausable(Protocol):
    """Freeze a node without ending it (SIGSTOP/SIGCONT, or the cgroup freezer of ``docker pause``)."""

    def pause(self, node: str) -> None: ...
    def resume(self, node: str) -> None: ...


@runtime_checkable
class PairPartitionable(Protocol):
    """Cut one broker from one other broker, both ways, leaving clients and ZooKeeper alone."""

    def partition(self, a: str, b: str) -> None: ...
    def unpartition(self, a: str, b: str) -> None: ...
    def partition_rules(self) -> list[str]: ...


@runtime_checkable
class NetworkDisconnectable(Protocol):
    """Take a node off its container network (``docker network disconnect``) and back."""

    def disconnect(self, node: str) -> None: ...
    def reconnect(self, node: str) -> None: ...
    def is_connected(self, node: str) -> bool: ...


def new_cluster(backend: BackendName | str, spec: ClusterSpec | None = None, **kwargs: Any) -> Cluster:
    """An unstarted cluster of ``spec`` on ``backend`` (the backend's module is imported only here)."""
    if BackendName(backend) is BackendName.DOCKER:
        from chaos.cluster.container_cluster import DockerCluster
        return DockerCluster(spec, **kwargs)
    from chaos.cluster.local import LocalCluster
    return LocalCluster(spec, **kwargs)


__all__ = ["BackendName", "Capability", "Cluster", "NetworkDisconnectable", "NodeProcess", "PairPartitionable",
           "Pausable", "new_cluster"]
