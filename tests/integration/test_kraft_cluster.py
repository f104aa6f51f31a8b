"""KRaft clusters (Kafka 4.x): isolated controllers behind Toxiproxy, the active controller as a role.

One cluster for the module: 3 isolated controllers + 3 brokers of Kafka 4.4.0, every broker→controller and
controller↔controller link proxied (docs/architecture.md, "Links, lanes and the network").
"""

import time
import uuid

import pytest

from chaos.cluster.admin import retry
from chaos.model.cluster import KRAFT_KAFKA_VERSION, ClusterSpec

SPEC = ClusterSpec.build(brokers=3, lanes=3, kafka_version=KRAFT_KAFKA_VERSION, controllers=3,
                         controller_placement="isolated")


@pytest.fixture
def kraft(_chaos_pool):
    cluster = _chaos_pool.get(SPEC)
    yield cluster
    cluster.heal()


def _voters_report(cluster):
    from chaos.cluster import wire

    topo = cluster.topology
    return {c.node: wire.describe_quorum(f"{topo.address(c.node)}:{c.port}")
            for c in topo.controllers if cluster.is_running(c.node)}


def test_kraft_cluster_is_usable_and_says_so_in_its_status(kraft):
    status = kraft.status()
    assert status["mode"] == "kraft" and status["cluster_id"]
    assert set(status["nodes"]) == {"controller-1", "controller-2", "controller-3", "broker-1", "broker-2", "broker-3"}
    broker = status["nodes"]["broker-1"]["effective_config"]
    assert broker["process.roles"] == "broker" and "zookeeper.connect" not in broker
    # KIP-848 minimums lowered so experiments stay seconds-scale, visible to the user
    assert int(broker["group.consumer.min.session.timeout.ms"]) <= 1000
    # every voter reached through this broker's own proxies
    assert all(f"broker-1.controller-{i}" in {l["name"] for l in status["links"]} for i in (1, 2, 3))
    assert kraft.admin.broker_ids() == [1, 2, 3]
    leader = kraft.active_controller()
    assert leader in {"controller-1", "controller-2", "controller-3"}
    # only the leader answers DescribeQuorum; the other voters refuse with NOT_LEADER_OR_FOLLOWER (6)
    reports = _voters_report(kraft)
    assert {n: q.leader_id for n, q in reports.items() if q.error_code == 0} == {leader: int(leader.split("-")[1]) + 100}
    assert {q.error_code for n, q in reports.items() if n != leader} == {6}
    assert "Kafka Server started" in kraft.log_path("broker-1").read_text()


def test_killing_the_active_controller_elects_another(kraft):
    old = kraft.active_controller()
    epoch = max(q.leader_epoch for q in _voters_report(kraft).values())
    kraft.kill(old)
    new = retry(lambda: (c if (c := kraft.active_controller()) != old else None), time.monotonic() + 30,
                "a new active controller")
    assert new != old and kraft.is_running(new)
    assert max(q.leader_epoch for q in _voters_report(kraft).values()) > epoch
    # the cluster still works without the old leader: a topic can be created and written
    topic = f"t-{uuid.uuid4().hex[:6]}"
    kraft.admin.create_topic(topic, 1, 3)
    assert kraft.produce_probe(topic, timeout=15) is not None


def test_a_broker_cut_from_the_quorum_is_fenced_and_unfenced_when_healed(kraft):
    victim = "broker-2"
    links = [l for l in kraft.links_of(victim) if l.startswith(f"{victim}.controller-")]
    assert len(links) == 3
    for link in links:
        kraft.link_down(link)
    try:
        # broker.session.timeout.ms=4000: the controller fences a broker whose heartbeats stop; fenced
        # brokers leave the metadata every other broker serves
        retry(lambda: True if 2 not in kraft.admin.brokers_seen_by(1) else None, time.monotonic() + 30,
              f"{victim} to be fenced")
        assert kraft.is_running(victim)  # the process is fine: only its quorum links are cut
    finally:
        for link in links:
            kraft.link_up(link)
    retry(lambda: True if 2 in kraft.admin.brokers_seen_by(1) else None, time.monotonic() + 60,
          f"{victim} to be unfenced")
