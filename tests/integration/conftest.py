from collections.abc import Iterator
from contextlib import contextmanager

import pytest


def pytest_collection_modifyitems(items):
    for item in items:
        if "tests/integration" in str(item.fspath):
            item.add_marker(pytest.mark.integration)


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
