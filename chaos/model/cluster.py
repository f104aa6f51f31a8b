"""The requested shape of a cluster (:class:`ClusterSpec`) and the Kafka versions it may run.

Pure records: :mod:`chaos.cluster.topology` plans ports and links from a spec,
the backends start it.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from chaos.errors import UsageError

DEFAULT_KAFKA_VERSION = "3.9.1"
# ZooKeeper mode exists from the first release to 3.9.x; 4.x is KRaft-only
# (KIP-833). Older than 2.8 is not tested and uses a different tools layout.
_VERSION_RE = re.compile(r"^(2\.8|3\.[0-9])\.[0-9]+$")


def validate_kafka_version(version: str) -> str:
    """Reject versions this backend cannot run, at load time."""
    if not _VERSION_RE.match(version):
        raise UsageError(
            f"unknown Kafka version {version!r}: use a ZooKeeper-mode release 2.8.x-3.9.x "
            f"(e.g. {DEFAULT_KAFKA_VERSION})"
        )
    return version


class ClusterSpec(BaseModel):
    """The requested shape of a cluster, validated on construction."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    brokers: Annotated[int, Field(ge=1, le=9)] = 3
    zookeepers: Annotated[int, Field(ge=1, le=5)] = 1
    kafka_version: str = DEFAULT_KAFKA_VERSION
    lanes: Annotated[int, Field(ge=1, le=16)] = 2
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
        if self.zookeepers % 2 == 0:
            raise ValueError(f"zookeepers={self.zookeepers}: a ZooKeeper ensemble needs an odd size (1 or 3)")
        rf = self.effective_rf
        if rf > self.brokers:
            raise ValueError(f"replication_factor={rf} exceeds brokers={self.brokers}: lower it or add brokers")
        if rf < 1:
            raise ValueError("replication_factor must be >= 1")
        return self

    @property
    def effective_rf(self) -> int:
        return self.replication_factor if self.replication_factor is not None else min(3, self.brokers)

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
