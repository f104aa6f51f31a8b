from collections.abc import Iterator
from contextlib import contextmanager

import pytest

#: run first: the standalone Spark job before any Kafka cluster is up. An idle cluster costs it CPU on two cores:
#: 58 s alone, 69 s beside the session's idle ZooKeeper cluster, 85 s at the end of the suite (docs/testing.md)
FIRST = ("test_spark_cluster.py",)
#: run last: they start clusters of other shapes (KRaft 4.4.0) in the session's pool. None of them uses the
#: session's shared cluster, so the plugin stops it after the test before them (``ClusterPool.release``) instead of
#: keeping it idle beside them; test_shared_cluster_released.py, after them all, checks that it did
LAST = ("test_interceptor.py", "test_kip848_members.py", "test_kraft_cluster.py", "test_kraft_experiments.py",
        "test_shared_cluster_released.py")


def _rank(item: pytest.Item) -> int:
    name = item.path.name
    return 0 if name in FIRST else 2 if name in LAST else 1


def pytest_collection_modifyitems(items):
    for item in items:
        if "tests/integration" in str(item.fspath):
            item.add_marker(pytest.mark.integration)
    # the integration tests keep their place after the unit tests; among them, a stable sort by rank
    where = [i for i, item in enumerate(items) if "tests/integration" in str(item.fspath)]
    if where:
        ordered = sorted((items[i] for i in where), key=_rank)
        for i, item in zip(where, ordered, strict=True):
            items[i] = item


class SharedCluster:
    """The session's cluster (the plugin's ``kafka_cluster``) lent to ``chaos`` commands run in a subprocess
    (``--cluster NAME``): they attach it instead of starting one of their own. Taken back after each command
    (healed: what the command restarted is adopted, see ``KafkaCluster.heal``), so the next test finds it whole."""

    def __init__(self, cluster) -> None:
        self.cluster = cluster

    @property
    def name(self) -> str:
        return self.cluster.session.id

    @contextmanager
    def lent(self) -> Iterator[list[str]]:
        """The ``--cluster NAME`` arguments for the command run inside the block."""
        try:
            yield ["--cluster", self.name]
        finally:
            self.cluster.heal()


@pytest.fixture(scope="session")
def shared_cluster(_chaos_session_cluster) -> SharedCluster:
    return SharedCluster(_chaos_session_cluster)
