"""The docker backend against real containers: the local backend's tests, on containers."""

import os
import signal
import time
import uuid

import psutil
import pytest

from chaos.cluster.admin import retry
from chaos.cluster.container import LABEL_SESSION
from chaos.cluster.container_cluster import DockerCluster
from chaos.cluster.toxiproxy import Stream, Toxic, ToxicType
from chaos.model.cluster import ClusterSpec

BROKERS = ("broker-1", "broker-2", "broker-3")


@pytest.fixture(scope="module")
def cluster(docker_host):
    with DockerCluster(ClusterSpec.build(brokers=3, zookeepers=1, lanes=2), docker_host=docker_host) as c:
        yield c


@pytest.fixture
def docker_cluster(cluster):
    yield cluster
    cluster.heal()


def _topic(cluster, partitions=3):
    name = f"t-{uuid.uuid4().hex[:8]}"
    cluster.admin.create_topic(name, partitions, 3)
    retry(lambda: True if all(cluster.leader_of(name, p) for p in range(partitions)) else None,
          time.monotonic() + 30, "leaders")
    return name


def test_every_node_is_a_labelled_container_and_logs_to_a_host_file(docker_cluster):
    st = docker_cluster.status()
    assert st["backend"] == "docker" and set(st["nodes"]) == {"zk-1", *BROKERS}
    ours = docker_cluster.client.containers.list(filters={"label": f"{LABEL_SESSION}={st['session']}"})
    assert sorted(c.labels["kafka-chaos.node"] for c in ours) == sorted(["toxiproxy", "zk-1", *BROKERS])
    mode = st["docker"]["network"]
    assert all(c.attrs["HostConfig"]["NetworkMode"] == (st["docker"]["network_name"] if mode == "bridge" else "host")
               for c in ours)
    # the JVM runs inside the container (its host pid is in a different pid namespace)
    pid = docker_cluster.process("broker-1").pid
    assert psutil.Process(pid).cmdline()[0] == "/usr/bin/java"
    assert os.readlink(f"/proc/{pid}/ns/pid") != os.readlink("/proc/self/ns/pid")
    assert docker_cluster.log_path("broker-1").read_text().count("started (kafka.server.KafkaServer)") >= 1
    assert st["nodes"]["broker-1"]["effective_config"]["min.insync.replicas"] == "2"


def test_link_down_on_one_brokers_proxy_stops_only_that_brokers_traffic(docker_cluster):
    topic = _topic(docker_cluster)
    victim = docker_cluster.leader_of(topic, 0)
    other = next(p for p in range(3) if docker_cluster.leader_of(topic, p) != victim)
    assert docker_cluster.produce_probe(topic, lane="lane0", partition=0) is not None
    docker_cluster.link_down(f"lane0.{victim}")
    try:
        assert docker_cluster.produce_probe(topic, lane="lane0", partition=0, timeout=3) is None
        assert docker_cluster.produce_probe(topic, lane="lane0", partition=other, timeout=10) is not None
        assert docker_cluster.produce_probe(topic, lane="lane1", partition=0, timeout=10) is not None
    finally:
        docker_cluster.link_up(f"lane0.{victim}")
    assert docker_cluster.produce_probe(topic, lane="lane0", partition=0, timeout=15) is not None


def test_black_hole_toxic_holds_requests_until_removed(docker_cluster):
    topic = _topic(docker_cluster)
    link = f"lane1.{docker_cluster.leader_of(topic, 0)}"
    docker_cluster.add_toxic(link, Toxic("hole", ToxicType.TIMEOUT, Stream.UPSTREAM, attributes={"timeout": 0}))
    try:
        assert docker_cluster.produce_probe(topic, lane="lane1", partition=0, timeout=3) is None
    finally:
        docker_cluster.remove_toxic(link, "hole")
    assert docker_cluster.produce_probe(topic, lane="lane1", partition=0, timeout=15) is not None


def test_docker_pause_past_the_zk_session_deregisters_a_broker_and_unpause_brings_it_back(docker_cluster):
    controller = docker_cluster.controller()
    victim = next(b for b in BROKERS if b != controller)
    bid = int(victim.split("-")[1])
    proc = docker_cluster.process(victim)
    docker_cluster.pause(victim)
    try:
        assert proc.container.attrs["State"]["Paused"] is True or proc.paused()
        assert docker_cluster.is_paused(victim) and docker_cluster.is_running(victim)
        # frozen by the cgroup freezer, not stopped by a signal
        assert psutil.Process(proc.pid).status() != psutil.STATUS_STOPPED
        retry(lambda: True if bid not in docker_cluster.admin.broker_ids() else None,
              time.monotonic() + 30, f"{victim} to be deregistered")
    finally:
        docker_cluster.resume(victim)
    assert not docker_cluster.is_paused(victim)
    retry(lambda: True if bid in docker_cluster.admin.broker_ids() else None,
          time.monotonic() + 60, f"{victim} to re-register")
    assert "expired" in docker_cluster.log_path(victim).read_text().lower()


def test_docker_kill_of_a_groups_coordinator_moves_the_coordinator_and_restart_brings_it_back(docker_cluster):
    group = f"g-{uuid.uuid4().hex[:6]}"
    old = docker_cluster.coordinator_of(group)
    assert old is not None
    pid = docker_cluster.process(old).pid
    docker_cluster.kill(old, signal.SIGKILL)
    assert not docker_cluster.is_running(old) and not psutil.pid_exists(pid)
    assert docker_cluster.process(old).exit_code() == 137  # docker's code for SIGKILL
    new = retry(lambda: (c if (c := docker_cluster.coordinator_of(group)) not in (None, old) else None),
                time.monotonic() + 60, "a new coordinator")
    assert new != old and docker_cluster.is_running(new)
    docker_cluster.restart(old)
    docker_cluster.wait_broker_registered(old)
    assert docker_cluster.is_running(old) and docker_cluster.process(old).pid != pid


def _started(cluster, node):
    """Has the node's latest KafkaServer start completed? (SIGTERM during startup halts Kafka with exit 1.)"""
    log = cluster.log_path(node).read_text()
    return log.rfind("] started (kafka.server.KafkaServer)") > log.rfind("] starting (kafka.server.KafkaServer)")


def test_sigterm_is_docker_stop_with_a_controlled_shutdown(docker_cluster):
    victim = "broker-3"
    retry(lambda: True if _started(docker_cluster, victim) else None, time.monotonic() + 60, f"{victim} started")
    docker_cluster.kill(victim, signal.SIGTERM)
    assert not docker_cluster.is_running(victim)
    # the graceful path was taken: the broker ran its controlled shutdown (KafkaServer's ControlledShutdown
    # request to the controller) and finished it. The exit code is not asserted: one CI run saw 1 after a
    # completed shutdown (cause not established), others 143
    log = docker_cluster.log_path(victim).read_text()
    assert "Starting controlled shutdown" in log and "shut down completed" in log
    assert docker_cluster.process(victim).exit_code() is not None
    docker_cluster.start_node(victim)
    docker_cluster.wait_broker_registered(victim)
