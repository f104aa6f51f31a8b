"""The requested shape of a cluster (:class:`ClusterSpec`) and the Kafka versions it may run.

Pure records: :mod:`chaos.cluster.topology` plans ports and links from a spec,
the backends start it.
"""

from __future__ import annotations

import re
from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from chaos.errors import UsageError

DEFAULT_KAFKA_VERSION = "3.9.1"
#: the newest release served here; the version a KRaft run defaults to in docs and tests
KRAFT_KAFKA_VERSION = "4.4.0"
# ZooKeeper mode exists from the first release to 3.9.x; 4.x is KRaft-only (KIP-833). KRaft is run
# from 3.7 on (the first line with a production-ready KRaft and `kafka-storage format` as used here).
# Older than 2.8 is not tested and uses a different tools layout.
_VERSION_RE = re.compile(r"^(2\.8|3\.[0-9]|4\.[0-9])\.[0-9]+$")

# Upper bounds of the counts that become processes, refused at load time (pydantic names the bound). Every
# broker, ZooKeeper node and isolated controller is a JVM (heaps of broker_heap_mb / zk_heap_mb, 384 / 128 MB
# by default): 9 brokers with 5 ZooKeeper nodes or 5 controllers could still run on a 2-core, 24 GiB machine,
# and no consumer-group behaviour needs more. A lane is one Toxiproxy proxy per broker (goroutines
# of the one Toxiproxy process) and a Kafka listener on every broker.
#: brokers of a cluster
MAX_BROKERS = 9
#: ZooKeeper nodes (an ensemble of 1, 3 or 5)
MAX_ZOOKEEPERS = 5
#: KRaft controller quorum voters (1, 3 or 5)
MAX_CONTROLLERS = 5
#: client lanes (ctl is extra)
MAX_LANES = 16


class ClusterMode(StrEnum):
    """Where the cluster's metadata lives: a ZooKeeper ensemble, or a KRaft controller quorum (KIP-500)."""

    ZOOKEEPER = "zookeeper"
    KRAFT = "kraft"


class ControllerPlacement(StrEnum):
    """KRaft controllers: in the first brokers' JVMs (``process.roles=broker,controller``) or JVMs of their own."""

    COMBINED = "combined"
    ISOLATED = "isolated"


def _release(version: str) -> tuple[int, int]:
    major, minor, *_ = version.split(".")
    return int(major), int(minor)


def modes_of(version: str) -> tuple[ClusterMode, ...]:
    """The metadata modes ``version`` can run, the default first (2.8-3.6 ZooKeeper; 3.7-3.9 either; 4.x KRaft)."""
    release = _release(version)
    if release >= (4, 0):
        return (ClusterMode.KRAFT,)
    if release >= (3, 7):
        return (ClusterMode.ZOOKEEPER, ClusterMode.KRAFT)
    return (ClusterMode.ZOOKEEPER,)


def validate_kafka_version(version: str) -> str:
    """Reject versions this backend cannot run, at load time."""
    if not _VERSION_RE.match(version):
        raise UsageError(
            f"unknown Kafka version {version!r}: use a release 2.8.x-3.9.x (ZooKeeper; e.g. {DEFAULT_KAFKA_VERSION}) "
            f"or 3.7.x-4.x (KRaft; e.g. {KRAFT_KAFKA_VERSION})"
        )
    return version


#: ClusterSpec fields left out of its shape as given: how a cluster is started (ports, the start timeout), or
#: compared by their effective values (mode, replication factor, the quorum of the mode)
_NOT_SHAPE = frozenset({"base_port", "start_timeout_s", "mode", "replication_factor", "zookeepers", "controllers",
                        "controller_placement"})


class ClusterSpec(BaseModel):
    """The requested shape of a cluster, validated on construction."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    brokers: Annotated[int, Field(ge=1, le=MAX_BROKERS)] = 3
    zookeepers: Annotated[int, Field(ge=1, le=MAX_ZOOKEEPERS)] = 1
    kafka_version: str = DEFAULT_KAFKA_VERSION
    #: ZooKeeper or KRaft; None = the version's default (:func:`modes_of`)
    mode: ClusterMode | None = None
    #: KRaft voters (1 or 3); ``isolated`` (default) runs controller-1..N, ``combined`` puts them in broker-1..N.
    #: Isolated is the default because it is ZooKeeper's shape: a broker fault (the coordinator killed) never
    #: takes the quorum with it unless the experiment says so
    controllers: Annotated[int, Field(ge=1, le=MAX_CONTROLLERS)] = 1
    controller_placement: ControllerPlacement = ControllerPlacement.ISOLATED
    lanes: Annotated[int, Field(ge=1, le=MAX_LANES)] = 2
    #: replication factor of internal topics (__consumer_offsets); default min(3, brokers)
    replication_factor: int | None = None
    offsets_partitions: Annotated[int, Field(ge=1, le=200)] = 5
    broker_heap_mb: Annotated[int, Field(ge=128)] = 384
    zk_heap_mb: Annotated[int, Field(ge=64)] = 128
    #: fixed ports from here upward instead of free ones (for firewalled setups)
    base_port: Annotated[int, Field(ge=1024, le=65000)] | None = None
    broker_overrides: dict[str, str] = Field(default_factory=dict)
    #: ``fast-start`` (small heap, SerialGC, C1 only) or ``kafka-default`` (the
    #: flags of Kafka's own start scripts: 1 GiB heap, G1) — bench/cluster_start.py compares them
    jvm_profile: Literal["fast-start", "kafka-default"] = "fast-start"
    #: seconds to wait for a usable cluster before failing with the node's log tail
    start_timeout_s: Annotated[float, Field(gt=0)] = 90.0

    @model_validator(mode="after")
    def _check(self) -> ClusterSpec:
        validate_kafka_version(self.kafka_version)
        if self.mode is not None and self.mode not in modes_of(self.kafka_version):
            allowed = " or ".join(m.value for m in modes_of(self.kafka_version))
            hint = "use a 3.x version for ZooKeeper (e.g. 3.9.1)" if self.mode is ClusterMode.ZOOKEEPER else \
                "use 3.7 or later for KRaft (e.g. 4.4.0)"
            raise ValueError(f"mode={self.mode.value} is not possible on Kafka {self.kafka_version} (it runs {allowed}): "
                             f"{hint}")
        if self.controllers % 2 == 0:
            raise ValueError(f"controllers={self.controllers}: a KRaft quorum needs an odd size (1 or 3)")
        if (self.metadata_mode is ClusterMode.KRAFT and self.controller_placement is ControllerPlacement.COMBINED
                and self.controllers > self.brokers):
            raise ValueError(f"controllers={self.controllers} combined into brokers={self.brokers}: add brokers or "
                             "use controller_placement: isolated")
        if self.zookeepers % 2 == 0:
            raise ValueError(f"zookeepers={self.zookeepers}: a ZooKeeper ensemble needs an odd size (1 or 3)")
        rf = self.effective_rf
        if rf > self.brokers:
            raise ValueError(f"replication_factor={rf} exceeds brokers={self.brokers}: lower it or add brokers")
        if rf < 1:
            raise ValueError("replication_factor must be >= 1")
        return self

    @property
    def metadata_mode(self) -> ClusterMode:
        """The mode this cluster runs: ``mode``, or the version's default."""
        return self.mode if self.mode is not None else modes_of(self.kafka_version)[0]

    @property
    def kraft(self) -> bool:
        return self.metadata_mode is ClusterMode.KRAFT

    @property
    def kip848(self) -> bool:
        """Can groups use the consumer protocol (KIP-848, GA in 4.0, on KRaft only)?"""
        return self.kraft and _release(self.kafka_version) >= (4, 0)

    @property
    def release(self) -> tuple[int, int]:
        """(major, minor) of ``kafka_version``."""
        return _release(self.kafka_version)

    @property
    def share_groups(self) -> bool:
        """Can the cluster run share groups (KIP-932: production-ready in Kafka 4.2, KRaft only)?"""
        return self.kraft and _release(self.kafka_version) >= (4, 2)

    @property
    def controller_nodes(self) -> tuple[str, ...]:
        """The KRaft voters by node name (``broker-1..`` when combined, ``controller-1..`` when isolated); ()
        under ZooKeeper."""
        if not self.kraft:
            return ()
        prefix = "broker" if self.controller_placement is ControllerPlacement.COMBINED else "controller"
        return tuple(f"{prefix}-{i}" for i in range(1, self.controllers + 1))

    @property
    def node_names(self) -> tuple[str, ...]:
        """Every node a fault may name: ZooKeeper nodes or isolated controllers, then brokers."""
        meta = tuple(f"zk-{i}" for i in range(1, self.zookeepers + 1)) if not self.kraft else tuple(
            n for n in self.controller_nodes if n.startswith("controller-"))
        return (*meta, *(f"broker-{i}" for i in range(1, self.brokers + 1)))

    @property
    def effective_rf(self) -> int:
        return self.replication_factor if self.replication_factor is not None else min(3, self.brokers)

    def shape(self) -> dict[str, Any]:
        """What a run can tell apart about a cluster (``chaos run --cluster`` compares it): the effective mode
        and replication factor, the quorum of that mode, every other field but ports and start timeout."""
        shape = {k: v for k, v in self.model_dump(mode="json").items() if k not in _NOT_SHAPE}
        shape.update(mode=self.metadata_mode.value, replication_factor=self.effective_rf)
        if self.kraft:
            shape.update(controllers=self.controllers, controller_placement=self.controller_placement.value)
        else:
            shape.update(zookeepers=self.zookeepers)
        return shape

    def differences(self, other: ClusterSpec) -> list[str]:
        """``field=ours (other's)`` for every field of :meth:`shape` where ``other`` differs; [] when it fits."""
        mine, theirs = self.shape(), other.shape()
        return [f"{k}={mine.get(k)!r} (has {theirs.get(k)!r})" for k in sorted(mine.keys() | theirs.keys())
                if mine.get(k) != theirs.get(k)]

    @classmethod
    def build(cls, **fields: Any) -> ClusterSpec:
        """Construct, turning validation errors into a one-line UsageError."""
        try:
            return cls(**fields)
        except ValidationError as exc:
            raise UsageError(f"bad cluster spec: {_one_line(exc)}") from None


def _one_line(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err["loc"]) or "spec"
        msg = err["msg"].removeprefix("Value error, ")
        parts.append(f"{loc}: {msg}")
    return "; ".join(parts)
