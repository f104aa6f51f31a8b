"""Backends and what they can do: plain enums, importable without pydantic (the CLI builds its choices from them)."""

from __future__ import annotations

from enum import StrEnum


class BackendName(StrEnum):
    """Where a cluster's nodes run: the one list of backends (the CLI's and the plugin's choices come from it)."""

    LOCAL = "local"      # chaos.cluster.local.LocalCluster: local processes
    DOCKER = "docker"    # chaos.cluster.container_cluster.DockerCluster: containers on kafka-chaos's own engine


class Capability(StrEnum):
    """What a fault kind may need of a backend beyond process and link faults (a kind's ``capability``); which
    part of a cluster provides each is one table, ``chaos.cluster.kafka_cluster.PROVIDED_BY``."""

    KILL = "kill"                  # SIGKILL a node
    TERMINATE = "terminate"        # clean stop (SIGTERM: controlled shutdown)
    PAUSE = "pause"                # freeze/thaw a node (SIGSTOP/SIGCONT or cgroup freezer): Pausable
    RESTART = "restart"            # start a stopped node again with its data
    LINK_FAULTS = "link_faults"    # Toxiproxy toxics and link down/up
    NODE_LOGS = "node_logs"        # read each node's log file
    PAIR_PARTITION = "pair_partition"  # cut broker<->broker traffic pair-wise (network level): PairPartitionable
    NETWORK_DISCONNECT = "network_disconnect"  # take a node off its container network: NetworkDisconnectable
