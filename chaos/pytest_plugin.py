"""pytest plugin (entry point ``pytest11: chaos``): thin and lazy.

It maps options onto settings and hands out a real cluster; the library does
the work. Nothing heavy is imported until a fixture is used, so installing
kafka-chaos costs other test suites nothing.

Fixtures:
* ``kafka_cluster`` — a real local cluster shared by the whole session
  (started on first use), healed after every test that used it: paused nodes
  thawed, dead nodes restarted, every proxy enabled and every toxic removed.
* ``kafka_cluster_spec`` — override it in a conftest to change the shape.

Options: ``--kafka-version``, ``--run-slow`` (nightly-size suites marked
``slow`` are skipped without it).
"""

from __future__ import annotations

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("chaos", "kafka-chaos")
    group.addoption("--kafka-version", default=None, help="Kafka version for kafka_cluster (default: ini chaos_kafka_version or 3.9.1)")
    group.addoption("--run-slow", action="store_true", default=False, help="also run tests marked slow (nightly-size)")
    parser.addini("chaos_kafka_version", "default Kafka version for kafka_cluster", default="3.9.1")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "integration: starts real Kafka/ZooKeeper/Toxiproxy processes")
    config.addinivalue_line("markers", "slow: nightly-size suite, runs only with --run-slow")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if config.getoption("--run-slow"):
        return
    skip = pytest.mark.skip(reason="nightly-size: pass --run-slow")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def kafka_cluster_spec(pytestconfig: pytest.Config):
    from chaos.cluster.topology import ClusterSpec

    version = pytestconfig.getoption("--kafka-version") or pytestconfig.getini("chaos_kafka_version")
    return ClusterSpec.build(brokers=3, zookeepers=1, lanes=3, kafka_version=version)


@pytest.fixture(scope="session")
def _chaos_session_cluster(kafka_cluster_spec):
    from chaos.cluster.local import LocalCluster

    with LocalCluster(kafka_cluster_spec) as cluster:
        yield cluster


@pytest.fixture
def kafka_cluster(_chaos_session_cluster):
    """The shared cluster, healed after the test so the next one starts whole."""
    yield _chaos_session_cluster
    _chaos_session_cluster.heal()
