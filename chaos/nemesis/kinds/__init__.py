"""Fault kinds, injected: one injection per kind declared in :mod:`chaos.model.faults`, one module per family.

A kind's declaration (its fields, params, validation, targets, traits and capability) is the model's
(:mod:`chaos.model.faults`); a family module here registers, with :func:`register`, how each of its kinds is
injected: ``inject(Injection[Spec]) -> list[Active]``, each :class:`~chaos.nemesis.evidence.Active` carrying its
heal and the evidence that it took effect and that it healed. Modelled on Jepsen's ``nemesis/combined.clj``
packages.

Every module of this package is imported by :func:`kinds`, which refuses a declared kind without an injection (or
an injection of no declared kind). Modules must stay importable without a cluster: runtime libraries (psutil, the
Toxiproxy client, the admin client) are imported inside the injections.
"""

from __future__ import annotations

import importlib
import pkgutil
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from chaos.errors import InfrastructureError
from chaos.model.backend import Capability
from chaos.model.fault_traits import FaultTrait
from chaos.model.faults import FaultSpec, declarations
from chaos.model.faults.base import Family
from chaos.model.target import Role

if TYPE_CHECKING:  # pragma: no cover
    from chaos.cluster.kafka_cluster import KafkaCluster
    from chaos.cluster.topology import Topology
    from chaos.nemesis.evidence import Active
    from chaos.workload.run import WorkloadRun

S = TypeVar("S", bound=FaultSpec)


@dataclass
class Injection(Generic[S]):
    """Everything a kind's injection may use for one occurrence of a fault.

    ``spec`` is the kind's own model (its fields and params typed); ``nodes`` are the resolved targets;
    ``resolve(role)`` resolves another role now (a partition's peer); ``cancel`` is set when the chaos phase ends
    (a long fault such as a rolling restart stops early). A kind that knows the instant its fault took hold (a
    signal sent) sets ``effect_ns``. ``cluster`` is a started cluster and ``run`` the workload run (None for a
    node-only fault outside a workload, :class:`chaos.nemesis.faults.Primitives`).
    """

    cluster: KafkaCluster
    run: WorkloadRun
    fault_id: str
    spec: S
    nodes: list[str]
    cancel: threading.Event
    resolve: Callable[[Role], list[str]]
    effect_ns: int | None = None
    #: the run's seed (a kind's own seeded draws derive from it and ``fault_id``)
    seed: int = 0

    @property
    def topology(self) -> Topology:
        """The started cluster's topology (nodes, links, addresses)."""
        if self.cluster.topology is None:
            raise InfrastructureError(f"{self.fault_id}: the cluster is not started")
        return self.cluster.topology


@dataclass(frozen=True)
class FaultKind:
    """A declared kind (its model) and its injection."""

    spec: type[FaultSpec]
    inject: Callable[[Injection[Any]], list[Active]]

    @property
    def name(self) -> str:
        return self.spec.kind_name()

    @property
    def family(self) -> Family:
        return self.spec.family

    @property
    def summary(self) -> str:
        return self.spec.summary

    @property
    def targets(self) -> frozenset[Role]:
        return self.spec.targets

    @property
    def traits(self) -> frozenset[FaultTrait]:
        return self.spec.traits

    @property
    def capability(self) -> Capability | None:
        return self.spec.capability


_REGISTRY: dict[str, FaultKind] = {}
_LOADED = False
_LOCK = threading.Lock()


def register(spec: type[S], inject: Callable[[Injection[S]], list[Active]]) -> None:
    """How the declared kind ``spec`` is injected (called by the family modules at import; once per kind)."""
    name = spec.kind_name()
    if name in _REGISTRY and _REGISTRY[name].inject is not inject:
        raise ValueError(f"fault kind {name!r} registered twice")
    _REGISTRY[name] = FaultKind(spec, inject)


def kinds() -> Mapping[str, FaultKind]:
    """Every kind with its injection, by name, in the declarations' order (imports this package's modules on first
    use; a declared kind without an injection, or an injection of no declared kind, is a programming error)."""
    global _LOADED
    with _LOCK:
        if not _LOADED:
            for mod in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
                importlib.import_module(f"{__name__}.{mod.name}")
            declared = declarations()
            missing, stray = sorted(set(declared) - set(_REGISTRY)), sorted(set(_REGISTRY) - set(declared))
            if missing or stray:
                raise RuntimeError(f"fault kinds declared without an injection: {missing}; injections of no "
                                   f"declared kind: {stray} (chaos.model.faults, chaos.nemesis.kinds)")
            _LOADED = True
    return {name: _REGISTRY[name] for name in declarations()}


def kind(name: str) -> FaultKind:
    """The kind registered as ``name`` (KeyError if none)."""
    return kinds()[str(name)]
