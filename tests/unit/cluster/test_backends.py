"""Backends are the shared orchestration composed with parts, checked against the protocols of chaos.cluster.

No cluster is started: the clusters are constructed (runtimes given explicitly, no engine
contacted) and inspected.
"""

from __future__ import annotations

import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from chaos.cluster import Cluster, NetworkDisconnectable, PairPartitionable, Pausable, firewall, new_cluster
from chaos.cluster.container_cluster import DockerCluster
from chaos.cluster.kafka_cluster import KafkaCluster, new_cluster_id
from chaos.cluster.local import LocalCluster
from chaos.cluster.runtime import KafkaRuntime, ToxiproxyRuntime
from chaos.errors import UsageError
from chaos.model.backend import Capability
from chaos.model.cluster import ClusterSpec

KAFKA = KafkaRuntime("3.9.1", Path("/nonexistent/kafka"))
TOXIPROXY = ToxiproxyRuntime("2.12.0", Path("/nonexistent/toxiproxy-server"))
NO_ENGINE = "unix:///nonexistent/docker.sock"  # never contacted: the client opens on first use


@pytest.fixture
def local() -> LocalCluster:
    return LocalCluster(ClusterSpec(brokers=3), kafka=KAFKA, toxiproxy=TOXIPROXY)


@pytest.fixture
def docker() -> DockerCluster:
    return DockerCluster(ClusterSpec(brokers=3), docker_host=NO_ENGINE, kafka=KAFKA, toxiproxy=TOXIPROXY)


def test_both_backends_are_clusters_and_neither_extends_the_other(local, docker):
    assert isinstance(local, Cluster) and isinstance(docker, Cluster)
    assert not issubclass(LocalCluster, DockerCluster) and not issubclass(DockerCluster, LocalCluster)
    # what they share is the orchestration, not each other
    assert issubclass(LocalCluster, KafkaCluster) and issubclass(DockerCluster, KafkaCluster)


def test_each_backend_has_exactly_the_capability_protocols_of_its_parts(local, docker):
    assert isinstance(local, Pausable) and isinstance(local, PairPartitionable)
    assert not isinstance(local, NetworkDisconnectable)  # local processes share one network
    assert not hasattr(local, "disconnect")
    assert isinstance(docker, Pausable) and isinstance(docker, PairPartitionable)
    assert isinstance(docker, NetworkDisconnectable)


def test_a_class_that_lacks_a_method_is_not_the_protocol():
    class Frozen:
        def pause(self, node: str) -> None: ...

    assert not isinstance(Frozen(), Pausable)  # resume missing: the check is not vacuous
    assert not isinstance(Frozen(), Cluster)


def test_local_capabilities_follow_the_firewall(local):
    caps = local.capabilities
    assert Capability.NETWORK_DISCONNECT not in caps
    assert "local processes share one network" in local.unavailable_reason(Capability.NETWORK_DISCONNECT)
    assert {Capability.KILL, Capability.TERMINATE, Capability.PAUSE, Capability.RESTART, Capability.LINK_FAULTS,
            Capability.NODE_LOGS} <= caps
    reason = firewall.unavailable_reason()
    assert (Capability.PAIR_PARTITION in caps) is (reason is None)
    assert local.unavailable_reason(Capability.PAIR_PARTITION) == reason


def test_docker_container_network_faults_only_on_its_own_bridge(docker):
    # before a start, and on host networking, there is no container network of the cluster's own
    for mode in ("unresolved", "host"):
        docker.bridge.mode = mode
        assert Capability.PAIR_PARTITION not in docker.capabilities
        assert Capability.NETWORK_DISCONNECT not in docker.capabilities
        assert "own network" in docker.unavailable_reason(Capability.NETWORK_DISCONNECT)
        with pytest.raises(UsageError, match="own network"):
            docker.partition("broker-1", "broker-2")
        assert docker.partition_rules() == []
    docker.bridge.mode = "bridge"
    assert docker.capabilities == frozenset(Capability)


def test_docker_rejects_an_unknown_network_and_a_detached_cluster():
    with pytest.raises(UsageError, match="docker network 'overlay'"):
        DockerCluster(docker_host=NO_ENGINE, network="overlay", kafka=KAFKA, toxiproxy=TOXIPROXY)
    with pytest.raises(UsageError, match="detached"):
        DockerCluster(docker_host=NO_ENGINE, detached=True, kafka=KAFKA, toxiproxy=TOXIPROXY)


def test_the_factory_picks_the_backend():
    assert type(new_cluster("local", ClusterSpec(), kafka=KAFKA, toxiproxy=TOXIPROXY)) is LocalCluster
    made = new_cluster("docker", ClusterSpec(), docker_host=NO_ENGINE, kafka=KAFKA, toxiproxy=TOXIPROXY)
    assert type(made) is DockerCluster
    with pytest.raises(ValueError):
        new_cluster("kraft", ClusterSpec())


def test_the_cluster_package_loads_no_client_and_no_engine_sdk():
    code = ("import sys, chaos.cluster, chaos.cluster.topology; "
            "print(sorted(m for m in ('confluent_kafka', 'kafka', 'psutil', 'docker', 'testcontainers') "
            "if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "[]"


def test_a_kraft_cluster_id_never_starts_with_a_dash():
    """``kafka-storage format -t -Xb…`` reads the id as an option: CI failed on one start in 64 before this."""
    dash_first = uuid.UUID(bytes=b"\xfb" + bytes(15))  # urlsafe base64 of 0xfb… begins with "-"
    plain = uuid.UUID(bytes=b"\x00" + bytes(15))
    draws = iter([dash_first, dash_first, plain])
    got = new_cluster_id(lambda: next(draws))
    assert got == "AAAAAAAAAAAAAAAAAAAAAA"
    assert all(not new_cluster_id().startswith("-") for _ in range(2000))
