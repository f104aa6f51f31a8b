"""The docker backend on a network of its own: every node its own address, and the container-network faults.

These run where `make test` runs the docker tests: inside the engine's own
network namespace (`scripts/docker-engine.sh run --netns ...`), so the
cluster's bridge network and its 10.213.x.y addresses exist only there.
"""

import socket
import time

import pytest

from chaos.cluster.admin import retry
from chaos.cluster.container_cluster import DockerCluster
from chaos.cluster.kafka_cluster import READY_TOPIC
from chaos.errors import UsageError
from chaos.model.cluster import ClusterSpec
from chaos.nemesis.faults import Primitives
from tests.scenarios import isr_shrinks_under_a_pairwise_partition


@pytest.fixture(scope="module")
def cluster(docker_host):
    with DockerCluster(ClusterSpec.build(brokers=3, zookeepers=1, lanes=1), docker_host=docker_host) as c:
        if c.network_mode != "bridge":
            pytest.skip("the engine does not run in a network namespace of ours: bridge networking is refused "
                        "(run `scripts/docker-engine.sh run --netns NAME -- pytest tests/docker`)")
        yield c


@pytest.fixture
def bridged(cluster):
    yield cluster
    cluster.heal()


def _reachable(addr: str, port: int) -> bool:
    try:
        with socket.create_connection((addr, port), timeout=1):
            return True
    except OSError:
        return False


def test_each_container_has_its_own_address_on_the_cluster_network(bridged):
    st = bridged.status()
    net = bridged.client.networks.get(st["docker"]["network_name"])
    attached = {c.labels["kafka-chaos.node"]: c for c in net.containers}
    assert sorted(attached) == ["broker-1", "broker-2", "broker-3", "toxiproxy", "zk-1"]
    for node, c in attached.items():
        assert c.attrs["NetworkSettings"]["Networks"][net.name]["IPAddress"] == bridged.topology.address(node)
    # brokers bind their own address and advertise Toxiproxy's, so clients never bypass the proxies
    cfg = st["nodes"]["broker-2"]["effective_config"]
    proxy = bridged.topology.address("toxiproxy")
    assert f"INTERNAL://{bridged.topology.address('broker-2')}:" in cfg["listeners"]
    assert all(a.split("//")[1].startswith(f"{proxy}:") for a in cfg["advertised.listeners"].split(",")
               if not a.startswith("INTERNAL"))
    assert bridged.bootstrap("lane0").startswith(f"{proxy}:")


def _connects(cluster, src: str, dst: str) -> bool:
    """Can ``src``'s container open a TCP connection to ``dst``'s inter-broker listener (2 s)?"""
    addr, port = cluster.topology.address(dst), cluster.topology.broker(dst).internal
    code, _ = cluster._container(src).exec_run(["timeout", "2", "bash", "-c", f"exec 3<>/dev/tcp/{addr}/{port}"])
    return code == 0


def test_pairwise_partition_by_iptables_inside_the_broker_container(bridged):
    controller = bridged.controller()
    leader, peer = [b for b in ("broker-1", "broker-2", "broker-3") if b != controller]
    assert _connects(bridged, peer, leader) and _connects(bridged, leader, peer)
    active = Primitives(bridged, None).partition(leader, [peer])
    try:
        ok, evidence = active.verify_effect()
        assert ok, evidence
        # checked from inside the containers: the pair is cut both ways, the third broker is not
        assert not _connects(bridged, peer, leader) and not _connects(bridged, leader, peer)
        assert _connects(bridged, controller, leader) and _connects(bridged, controller, peer)
        # clients reach every broker through Toxiproxy's address: unaffected
        assert bridged.produce_probe(READY_TOPIC, timeout=20) is not None
    finally:
        active.heal()
    ok, evidence = active.verify_healed()
    assert ok, evidence
    assert bridged.partition_rules() == [] and _connects(bridged, peer, leader)


@pytest.mark.slow
def test_pairwise_partition_shrinks_the_isr_on_docker_too(bridged):
    # Kafka-level evidence, as for the local backend; opt-in (--run-slow): in two of six full docker
    # suites the leader did not log the shrink within 40 s, not yet understood (docs/known-gaps.md)
    isr_shrinks_under_a_pairwise_partition(bridged)


def test_network_disconnect_deregisters_a_broker_and_connect_brings_it_back(bridged):
    victim = next(b for b in ("broker-1", "broker-2", "broker-3") if b != bridged.controller())
    bid = int(victim.split("-")[1])
    addr, port = bridged.topology.address(victim), bridged.topology.broker(victim).internal
    assert _reachable(addr, port)
    active = Primitives(bridged, None).disconnect(victim)
    try:
        ok, evidence = active.verify_effect()
        assert ok, evidence
        # checked apart from the nemesis: the engine lists it off the network, its port is unreachable,
        # and its ZooKeeper session (4 s) expires so the cluster drops it
        assert not bridged.is_connected(victim) and not _reachable(addr, port)
        retry(lambda: True if bid not in bridged.admin.broker_ids() else None, time.monotonic() + 40,
              f"{victim} to be deregistered")
        assert bridged.is_running(victim)  # the process lives on: only its network is gone
    finally:
        active.heal()
    ok, evidence = active.verify_healed()
    assert ok, evidence
    bridged.wait_broker_registered(victim, timeout=90)
    assert _reachable(addr, port)


def test_container_network_faults_are_refused_on_host_networking(docker_host):
    c = DockerCluster(ClusterSpec.build(brokers=1), docker_host=docker_host, network="host")
    assert "network_disconnect" not in c.capabilities and "pair_partition" not in c.capabilities
    with pytest.raises(UsageError, match="own network"):
        c.disconnect("broker-1")
    with pytest.raises(UsageError, match="docker network 'overlay'"):
        DockerCluster(ClusterSpec.build(brokers=1), docker_host=docker_host, network="overlay")


def test_coordinator_disconnected_experiment_runs_and_is_judged(bridged, tmp_path):
    from pathlib import Path

    from chaos.experiment import load_experiment
    from chaos.runner import judge_once

    exp = load_experiment(Path(__file__).resolve().parents[2] / "experiments" / "docker" / "coordinator-disconnected.yaml")
    assert exp.cluster == bridged.spec
    oc = judge_once(bridged, exp, seed=3, run_dir=tmp_path / "run")
    assert oc.error is None, oc.error
    [fault] = oc.faults
    assert fault["fired"] and fault["effect_ok"] and fault["healed_ok"], fault
    assert oc.valid == "true", f"{oc.failed_checkers}\n{oc.explanation}"
