"""Docker-backend integration tests: real containers on kafka-chaos's own Docker engine.

The session starts the engine once (:class:`chaos.cluster.container_engine.DockerEngine`)
and stops it at the end — unless one was already running (``scripts/docker-engine.sh
start``/``run``), which is reused and left alone. When the engine cannot be started
(no dockerd, not root, dockerd fails), every test here is *skipped with the reason*.
"""

from __future__ import annotations

import os

import pytest

from chaos.cluster.container_engine import DockerEngine, EngineUnavailable


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
    engine = DockerEngine()
    try:
        engine.start()
    except EngineUnavailable as exc:
        pytest.skip(f"docker engine unavailable: {exc}")
    yield engine
    engine.stop()


@pytest.fixture(scope="session")
def docker_host(docker_engine) -> str:
    """``$KAFKA_CHAOS_DOCKER_HOST`` when set (another engine), else our engine's socket."""
    return os.environ.get("KAFKA_CHAOS_DOCKER_HOST") or docker_engine.docker_host
