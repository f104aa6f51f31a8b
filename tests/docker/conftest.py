"""Docker-backend integration tests: real containers on kafka-chaos's own Docker engine.

The session starts the engine once (:class:`chaos.cluster.container_engine.DockerEngine`,
root network namespace) and stops it at the end — unless one was already running
(``scripts/docker-engine.sh start``/``run``), which is reused and left alone.
``scripts/docker-engine.sh run --netns NAME -- pytest tests/docker`` runs them in a
network namespace of their own instead. When the engine cannot be started (no
dockerd, not root, dockerd fails), every test here is *skipped with the reason*.
"""

from __future__ import annotations

import os

import pytest

from chaos.cluster.container_engine import DockerEngine, EngineUnavailable, in_netns


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "docker: starts real containers on kafka-chaos's Docker engine")


def pytest_collection_modifyitems(items):
    for item in items:
        if "tests/docker" in str(item.fspath):
            item.add_marker(pytest.mark.integration)
            item.add_marker(pytest.mark.docker)


@pytest.fixture(scope="session")
def docker_engine():
    """Our engine for the whole session (started here and stopped at the end, or reused), else a skip with the reason."""
    reason = os.environ.get("KAFKA_CHAOS_DOCKER_UNAVAILABLE")  # set by `docker-engine.sh run` when it could not start one
    if reason:
        pytest.skip(f"docker engine unavailable: {reason}")
    engine = DockerEngine()
    try:
        engine.start()
    except EngineUnavailable as exc:
        pytest.skip(f"docker engine unavailable: {exc}")
    if engine.netns and not in_netns(engine.netns):
        engine.stop()
        pytest.skip(f"the docker engine runs in network namespace {engine.netns} and these tests do not: "
                    f"run them with `scripts/docker-engine.sh run --netns {engine.netns} -- pytest tests/docker`")
    yield engine
    engine.stop()


@pytest.fixture(scope="session")
def docker_host(docker_engine) -> str:
    """``$KAFKA_CHAOS_DOCKER_HOST`` when set (another engine), else our engine's socket."""
    return os.environ.get("KAFKA_CHAOS_DOCKER_HOST") or docker_engine.docker_host
