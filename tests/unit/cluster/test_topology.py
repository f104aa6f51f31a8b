"""Cluster spec validation and port/link planning (no processes)."""

import socket

import pytest

from chaos.cluster.settings import broker_properties, zk_config
from chaos.cluster.topology import CONTROL_LANE, plan
from chaos.errors import UsageError
from chaos.model.cluster import ClusterSpec


@pytest.mark.parametrize(
    "fields, message",
    [
        ({"brokers": 0}, "brokers: Input should be greater than or equal to 1"),
        ({"brokers": 2, "replication_factor": 3}, "replication_factor=3 exceeds brokers=2"),
        ({"kafka_version": "5.0.0"}, "unknown Kafka version '5.0.0'"),
        ({"kafka_version": "4.4.0", "mode": "zookeeper"}, "mode=zookeeper is not possible on Kafka 4.4.0"),
        ({"kafka_version": "3.6.2", "mode": "kraft"}, "use 3.7 or later for KRaft"),
        ({"kafka_version": "4.4.0", "controllers": 2}, "a KRaft quorum needs an odd size"),
        ({"kafka_version": "4.4.0", "brokers": 1, "controllers": 3, "controller_placement": "combined"},
         "use controller_placement: isolated"),
        ({"kafka_version": "banana"}, "unknown Kafka version 'banana'"),
        ({"zookeepers": 2}, "needs an odd size"),
        ({"brokrs": 3}, "brokrs: Extra inputs are not permitted"),
    ],
)
def test_bad_specs_fail_with_one_line(fields, message):
    with pytest.raises(UsageError) as err:
        ClusterSpec.build(**fields)
    text = str(err.value)
    assert message in text
    assert "\n" not in text


def test_default_rf_follows_broker_count():
    assert ClusterSpec.build(brokers=1).effective_rf == 1
    assert ClusterSpec.build(brokers=5).effective_rf == 3


def test_plan_gives_unique_loopback_ports_and_every_link():
    topo = plan(ClusterSpec.build(brokers=3, zookeepers=3, lanes=2))
    ports = [topo.toxiproxy_api]
    for z in topo.zookeepers:
        ports += [z.client, z.peer, z.election]
    for b in topo.brokers:
        ports += [b.internal, *b.lanes.values()]
    ports += [l.listen_port for l in topo.links]
    assert len(ports) == len(set(ports))
    # 3 lanes (ctl, lane0, lane1) x 3 brokers + 3 brokers x 3 zk nodes
    assert len(topo.links) == 9 + 9
    assert {l.name for l in topo.links_of("broker-2")} >= {"ctl.broker-2", "lane0.broker-2", "broker-2.zk-3"}


def test_bootstrap_uses_the_lanes_proxies_never_the_brokers():
    topo = plan(ClusterSpec.build(brokers=3))
    proxy_ports = {l.listen_port for l in topo.links if l.source == "lane1"}
    broker_ports = {p for b in topo.brokers for p in (b.internal, *b.lanes.values())}
    used = {int(hp.split(":")[1]) for hp in topo.bootstrap("lane1").split(",")}
    assert used == proxy_ports
    assert not used & broker_ports
    with pytest.raises(UsageError, match="unknown lane 'lane7'"):
        topo.bootstrap("lane7")


def test_each_broker_advertises_its_own_proxies_and_reaches_zk_through_its_own(tmp_path):
    topo = plan(ClusterSpec.build(brokers=3, lanes=1))
    b2 = topo.broker("broker-2")
    props = broker_properties(topo, b2, tmp_path)
    own_proxy = {l.source: l.listen_port for l in topo.links if l.target == "broker-2" and l.source in topo.lane_names}
    assert f"LANE0://127.0.0.1:{own_proxy['lane0']}" in props["advertised.listeners"]
    assert f"CTL://127.0.0.1:{own_proxy[CONTROL_LANE]}" in props["advertised.listeners"]
    assert f"LANE0://127.0.0.1:{b2.lanes['lane0']}" in props["listeners"]
    zk_proxy = topo.link("broker-2.zk-1").listen_port
    assert props["zookeeper.connect"] == f"127.0.0.1:{zk_proxy}"
    assert props["inter.broker.listener.name"] == "INTERNAL"
    # every listener binds loopback only
    for listener in props["listeners"].split(","):
        assert "//127.0.0.1:" in listener
    assert props["offsets.topic.replication.factor"] == "3"
    assert props["min.insync.replicas"] == "2"
    assert props["unclean.leader.election.enable"] == "false"
    assert props["group.initial.rebalance.delay.ms"] == "0"


def test_broker_overrides_win(tmp_path):
    topo = plan(ClusterSpec.build(brokers=1, broker_overrides={"num.io.threads": "9"}))
    assert broker_properties(topo, topo.brokers[0], tmp_path)["num.io.threads"] == "9"


def test_zk_ensemble_config_lists_peers_and_binds_loopback(tmp_path):
    topo = plan(ClusterSpec.build(zookeepers=3))
    cfg = zk_config(topo, topo.zookeepers[0], tmp_path)
    assert cfg["clientPortAddress"] == "127.0.0.1"
    assert cfg["admin.enableServer"] == "false"
    assert [k for k in cfg if k.startswith("server.")] == ["server.1", "server.2", "server.3"]


def test_taken_base_port_is_a_one_line_error():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen()
    port = s.getsockname()[1]
    try:
        with pytest.raises(UsageError, match=f"port 127.0.0.1:{port} is already in use"):
            plan(ClusterSpec.build(base_port=port))
    finally:
        s.close()


def test_quorum_links_of_a_broker_and_of_a_voter():
    from chaos.nemesis.kinds.link import quorum_links

    def links(spec: ClusterSpec, node: str) -> set[str]:
        topo = plan(spec)
        return set(quorum_links(node, [l.name for l in topo.links_of(node)], {c.node for c in topo.controllers},
                                {n.node for n in (*topo.brokers, *topo.controllers)}))

    one = ClusterSpec.build(brokers=3, kafka_version="4.4.0")
    assert links(one, "broker-2") == {"broker-2.controller-1"}
    # a lone controller: its brokers' links into it (its self-link too), not only its links to voters (the self-link)
    assert links(one, "controller-1") >= {"broker-1.controller-1", "broker-2.controller-1", "broker-3.controller-1"}
    three = ClusterSpec.build(brokers=3, kafka_version="4.4.0", controllers=3)
    got = links(three, "controller-2")
    assert {"controller-2.controller-1", "controller-1.controller-2", "broker-3.controller-2"} <= got
    assert not any(l.startswith(("lane", "ctl")) or "controller-2" not in l for l in got)
