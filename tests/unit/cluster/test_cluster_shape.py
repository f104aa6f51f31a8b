"""`ClusterSpec.shape` / `differences`: what `--cluster` compares between an experiment and a running cluster."""

from chaos.model.cluster import ClusterSpec


def test_a_cluster_fits_whatever_its_ports_and_start_timeout():
    want = ClusterSpec(brokers=3, lanes=3)
    assert want.differences(ClusterSpec(brokers=3, lanes=3, base_port=21000, start_timeout_s=30)) == []


def test_defaults_and_effective_values_are_the_same_shape():
    # mode and replication factor as the version and broker count make them; the other mode's quorum is not shape
    assert ClusterSpec(kafka_version="3.9.1").differences(ClusterSpec(kafka_version="3.9.1", mode="zookeeper")) == []
    assert ClusterSpec(brokers=3).differences(ClusterSpec(brokers=3, replication_factor=3)) == []
    assert ClusterSpec(kafka_version="4.4.0").differences(ClusterSpec(kafka_version="4.4.0", zookeepers=3)) == []


def test_every_difference_a_run_could_tell_is_named():
    want = ClusterSpec(brokers=3, lanes=3, broker_overrides={"log.retention.ms": "60000"})
    have = ClusterSpec(brokers=1, lanes=2)
    assert want.differences(have) == [
        "broker_overrides={'log.retention.ms': '60000'} (has {})", "brokers=3 (has 1)", "lanes=3 (has 2)",
        "replication_factor=3 (has 1)"]
    assert ClusterSpec(zookeepers=3).differences(ClusterSpec()) == ["zookeepers=3 (has 1)"]
    assert ClusterSpec(kafka_version="4.4.0", controllers=3).differences(ClusterSpec(kafka_version="4.4.0")) == [
        "controllers=3 (has 1)"]
    assert ClusterSpec(kafka_version="3.9.1", mode="kraft").differences(ClusterSpec(kafka_version="3.9.1")) == [
        "controller_placement='isolated' (has None)", "controllers=1 (has None)", "mode='kraft' (has 'zookeeper')",
        "zookeepers=None (has 1)"]
