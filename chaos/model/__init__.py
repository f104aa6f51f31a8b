"""The ground floor: pure, frozen, validated records and enums — what an experiment *is*.

:mod:`chaos.model.experiment` (experiment, phases, checker selection), :mod:`chaos.model.faults`
(the fault kinds, one model each), :mod:`chaos.model.trigger` (when a fault fires),
:mod:`chaos.model.fault_traits` (what a fault does, for the checkers), :mod:`chaos.model.backend`
(backends and their capabilities), :mod:`chaos.model.checker_name` (the checkers' names),
:mod:`chaos.model.workload` (members, producers, client enums),
:mod:`chaos.model.target` (target roles, link scopes) and :mod:`chaos.model.cluster`
(the cluster's shape, the Kafka versions it may run). Nothing here talks to a cluster:
importing the model loads no Kafka client, psutil, docker or pyspark (a test
holds it to that), so ``chaos plan`` and ``chaos schema`` stay cheap.

Names are imported lazily from their modules: ``from chaos.model import Experiment``.
"""

from __future__ import annotations

import importlib
from typing import Any

_WHERE = {
    "Experiment": "experiment", "FaultSpec": "faults", "Trigger": "trigger", "FaultTrait": "fault_traits",
    "RandomTrigger": "trigger", "Phases": "experiment", "CheckerConfig": "experiment",
    "check_seed": "experiment", "SEED_MAX": "experiment",
    "WorkloadSpec": "workload", "ConsumerSpec": "workload", "ProducerSpec": "workload", "Client": "workload",
    "Assignor": "workload", "RebalanceProtocol": "workload", "CommitMode": "workload", "WrongMode": "workload",
    "HandlerErrorPolicy": "workload", "Role": "target", "LinkScope": "target", "ClusterSpec": "cluster",
    "DEFAULT_KAFKA_VERSION": "cluster", "BackendName": "backend", "Capability": "backend",
    "CheckerName": "checker_name", "KRAFT_KAFKA_VERSION": "cluster", "ClusterMode": "cluster",
    "ControllerPlacement": "cluster", "GroupProtocol": "workload", "RemoteAssignor": "workload",
}

__all__ = sorted(_WHERE)


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module 'chaos.model' has no attribute {name!r}")
    return getattr(importlib.import_module(f"chaos.model.{_WHERE[name]}"), name)
