"""The interface every cluster backend offers, and the capabilities it declares.

Later layers (nemesis, runner, plugin) talk to this Protocol only, so an
experiment runs unchanged on the local-process backend and on the
Testcontainers one. A fault that needs a capability the backend lacks is
rejected at load time with a message naming the backend.
"""

from __future__ import annotations

import signal
from enum import StrEnum
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from chaos.cluster.toxiproxy import Toxic


class BackendName(StrEnum):
    LOCAL = "local"      # chaos.cluster.local.LocalCluster: local processes
    DOCKER = "docker"    # chaos.cluster.docker.DockerCluster: containers on kafka-chaos's own Docker engine


def new_cluster(backend: BackendName | str, spec, **kwargs):
    """An unstarted cluster of ``spec`` on ``backend`` (imports the backend lazily)."""
    if BackendName(backend) is BackendName.DOCKER:
        from chaos.cluster.docker import DockerCluster
        return DockerCluster(spec, **kwargs)
    from chaos.cluster.local import LocalCluster
    return LocalCluster(spec, **kwargs)


class Capability(StrEnum):
    KILL = "kill"                  # SIGKILL a node
    TERMINATE = "terminate"        # clean stop (SIGTERM: controlled shutdown)
    PAUSE = "pause"                # freeze/thaw a node (SIGSTOP/SIGCONT or cgroup freezer)
    RESTART = "restart"            # start a stopped node again with its data
    LINK_FAULTS = "link_faults"    # Toxiproxy toxics and link down/up
    NODE_LOGS = "node_logs"        # read each node's log file
    PAIR_PARTITION = "pair_partition"  # cut broker<->broker traffic pair-wise (network level)
    NETWORK_DISCONNECT = "network_disconnect"  # take a node off its container network (docker network disconnect)


@runtime_checkable
class ClusterBackend(Protocol):
    capabilities: frozenset[Capability]

    def start(self) -> "ClusterBackend": ...
    def stop(self) -> None: ...
    def bootstrap(self, lane: str = ...) -> str: ...
    def kill(self, node: str, sig: int = signal.SIGKILL) -> None: ...
    def pause(self, node: str) -> None: ...
    def resume(self, node: str) -> None: ...
    def restart(self, node: str) -> None: ...
    def is_running(self, node: str) -> bool: ...
    def controller(self) -> str | None: ...
    def leader_of(self, topic: str, partition: int) -> str | None: ...
    def coordinator_of(self, group: str) -> str | None: ...
    def log_path(self, node: str) -> Path: ...
    def link_down(self, link: str) -> None: ...
    def link_up(self, link: str) -> None: ...
    def add_toxic(self, link: str, toxic: Toxic) -> None: ...
    def remove_toxic(self, link: str, name: str) -> None: ...
    def reset_links(self) -> None: ...
    def status(self) -> dict[str, Any]: ...
