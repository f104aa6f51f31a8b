"""The docker backend runs a KRaft cluster (Kafka 4.4.0): three brokers that are also the three voters."""

import time
import uuid

import pytest

from chaos.cluster.admin import retry
from chaos.cluster.container_cluster import DockerCluster
from chaos.model.cluster import KRAFT_KAFKA_VERSION, ClusterSpec


@pytest.fixture(scope="module")
def kraft(docker_host):
    spec = ClusterSpec.build(brokers=3, lanes=1, kafka_version=KRAFT_KAFKA_VERSION, controllers=3,
                             controller_placement="combined")
    with DockerCluster(spec, docker_host=docker_host) as c:
        yield c


def test_a_kraft_cluster_runs_in_containers_and_survives_its_active_controller(kraft):
    status = kraft.status()
    assert status["mode"] == "kraft" and status["backend"] == "docker"
    assert set(status["nodes"]) == {"broker-1", "broker-2", "broker-3"}
    assert status["nodes"]["broker-1"]["effective_config"]["process.roles"] == "broker,controller"
    assert all(n.get("container") for n in status["nodes"].values())  # each node is a container of ours
    topic = f"t-{uuid.uuid4().hex[:6]}"
    kraft.admin.create_topic(topic, 3, 3)
    old = kraft.active_controller()
    assert old in {"broker-1", "broker-2", "broker-3"}
    kraft.kill(old)  # docker kill
    assert not kraft.is_running(old)
    new = retry(lambda: (c if (c := kraft.active_controller()) != old else None), time.monotonic() + 60,
                "a new active controller among the two surviving voters")
    assert new != old and kraft.is_running(new)
    # the new leader fences the dead broker once its heartbeats stop (broker.session.timeout.ms); until then
    # the metadata still lists it and a client may pick it
    gone = int(old.split("-")[1])
    retry(lambda: True if gone not in kraft.admin.broker_ids() else None, time.monotonic() + 30, f"{old} fenced")
    # the new controller moved the dead broker's leaderships: every partition takes acks=all writes again
    for p in range(3):
        assert kraft.produce_probe(topic, lane="lane0", timeout=20, partition=p) is not None, p
    kraft.heal()
    assert kraft.is_running(old)
    retry(lambda: True if kraft.admin.broker_ids() == [1, 2, 3] else None, time.monotonic() + 60,
          f"{old} to register again after the heal")


def test_isolated_controller_runs_in_its_own_container_and_comes_back(docker_host):
    """``controller_placement: isolated`` on docker: the voter is a container of its own (``process.roles=
    controller``, node id 101), the brokers reach it through their own proxies, and a killed controller restarted
    by the heal leads the quorum again while the brokers take writes."""
    spec = ClusterSpec.build(brokers=3, lanes=1, kafka_version=KRAFT_KAFKA_VERSION, controllers=1,
                             controller_placement="isolated")
    with DockerCluster(spec, docker_host=docker_host) as c:
        status = c.status()
        assert set(status["nodes"]) == {"broker-1", "broker-2", "broker-3", "controller-1"}
        assert status["nodes"]["controller-1"]["effective_config"]["process.roles"] == "controller"
        assert status["nodes"]["broker-1"]["effective_config"]["process.roles"] == "broker"
        assert all(n.get("container") for n in status["nodes"].values())
        assert c.active_controller() == "controller-1"
        topic = f"t-{uuid.uuid4().hex[:6]}"
        c.admin.create_topic(topic, 3, 3)
        c.kill("controller-1")
        assert not c.is_running("controller-1")
        c.heal()
        assert c.is_running("controller-1")
        retry(lambda: True if c.active_controller() == "controller-1" else None, time.monotonic() + 60,
              "controller-1 to lead the quorum again")
        for p in range(3):
            assert c.produce_probe(topic, lane="lane0", timeout=20, partition=p) is not None, p
