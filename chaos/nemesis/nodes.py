"""The processes a fault acts on: cluster nodes (``broker-2``, ``zk-1``) and group members (``consumer-1``).

A member is a worker process of the run (and, for a Java member, the JVM it
starts: both in the worker's process group); a node is a process (or a
container) of the cluster backend.
"""

from __future__ import annotations

from typing import Any

from chaos.nemesis.evidence import Evidence


class Nodes:
    """Process-level operations on the nodes and members of one cluster and one workload run."""

    def __init__(self, cluster: Any, run: Any):
        self.cluster = cluster
        self.run = run

    def is_member(self, node: str) -> bool:
        return self.run is not None and node in self.run.member_specs

    def pid(self, node: str) -> int:
        return (self.run.members[node] if self.is_member(node) else self.cluster.process(node)).pid

    def tree(self, node: str) -> list[int]:
        """Every process of ``node``: a member's worker and the client it runs (a Java member's JVM)."""
        proc = self.run.members[node] if self.is_member(node) else self.cluster.process(node)
        return proc.tree() if hasattr(proc, "tree") else [proc.pid]

    def alive(self, node: str) -> bool:
        if self.is_member(node):
            return node in self.run.members and self.run.members[node].alive()
        return self.cluster.is_running(node)

    def start(self, node: str) -> None:
        if self.is_member(node):
            if not self.alive(node):
                self.run.start_member(node)
        else:
            self.cluster.start_node(node)

    def registered(self, node: str) -> Evidence:
        """A broker runs and every running broker lists it again; any other node or member runs."""
        from chaos.errors import InfrastructureError

        if not node.startswith("broker-"):
            return self.alive(node), f"{node} running={self.alive(node)}"
        try:
            self.cluster.wait_broker_registered(node, timeout=60)
            return True, f"{node} running and registered in cluster metadata"
        except InfrastructureError as exc:
            return False, str(exc)
