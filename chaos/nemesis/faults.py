"""Faults as a Python API: inject one fault on a resolved target, outside any experiment.

The nemesis injects through the registered fault kinds (:mod:`chaos.nemesis.kinds`);
:class:`Primitives` is the same code for scripts and tests that name the
target themselves::

    active = Primitives(cluster, run).process(FaultSpec.build(type="pause", target="member", node="consumer-1"),
                                              "consumer-1")
    ok, evidence = active.verify_effect()
    active.heal()
"""

from __future__ import annotations

import threading
from typing import Any

from chaos.model.faults import FaultSpec
from chaos.model.faults.link import LinkDown, LinkFault
from chaos.model.faults.topology import AddPartitions
from chaos.nemesis.evidence import Active, Evidence
from chaos.nemesis.kinds import Injection, kind
from chaos.nemesis.kinds.container import disconnect as _disconnect
from chaos.nemesis.kinds.link import toxics_for
from chaos.nemesis.kinds.network import partition as _partition

__all__ = ["Active", "Evidence", "Primitives", "toxics_for"]


class Primitives:
    """Faults against one cluster and one workload run (``run`` may be None for node-only faults)."""

    def __init__(self, cluster: Any, run: Any):
        self.cluster = cluster
        self.run = run

    def _inject(self, spec: FaultSpec, nodes: list[str], fault_id: str = "p") -> list[Active]:
        inj = Injection(self.cluster, self.run, fault_id, spec, nodes, threading.Event(),
                        resolve=lambda role: [])
        return kind(spec.type).inject(inj)

    def process(self, spec: FaultSpec, node: str) -> Active:
        """A process fault (kill, terminate, pause, restart, bounce) on ``node``."""
        return self._inject(spec, [node])[0]

    def links(self, spec: LinkFault, fault_id: str, links: list[str]) -> Active:
        """A link fault on the named Toxiproxy links."""
        from chaos.nemesis.kinds.link import down, toxic

        inj = Injection(self.cluster, self.run, fault_id, spec, [], threading.Event(), resolve=lambda role: [])
        return down(inj, links) if isinstance(spec, LinkDown) else toxic(inj, links)

    def partition(self, node: str, peers: list[str]) -> Active:
        """Cut broker ``node`` from each of ``peers`` (pair-wise, network level)."""
        return _partition(self.cluster, node, peers)

    def add_partitions(self, total: int) -> Active:
        """The workload topic grows to ``total`` partitions (permanent)."""
        return self._inject(AddPartitions(type="add_partitions", target="topic", partitions=total), [self.run.topic])[0]

    def disconnect(self, node: str) -> Active:
        """``docker network disconnect`` of ``node`` (docker backend, bridge network)."""
        return _disconnect(self.cluster, node)[0]
