"""Nothing outlives a docker run: containers on exit, exception and a SIGKILLed driver; our dockerd itself."""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import docker
import psutil
import pytest

from chaos.cluster.container import LABEL_SESSION, reap_containers
from chaos.cluster.container_cluster import DockerCluster
from chaos.cluster.container_engine import DockerEngine, EngineUnavailable
from chaos.model.cluster import ClusterSpec


@pytest.fixture
def state(tmp_path, monkeypatch):
    monkeypatch.setenv("KAFKA_CHAOS_STATE", str(tmp_path / "state"))
    return tmp_path / "state"


def _ours(client, session=None):
    label = LABEL_SESSION if session is None else f"{LABEL_SESSION}={session}"
    return client.containers.list(all=True, filters={"label": label})


def test_an_exception_inside_the_context_removes_every_container(state, docker_host):
    client = docker.DockerClient(base_url=docker_host)
    with pytest.raises(RuntimeError):
        with DockerCluster(ClusterSpec.build(brokers=1, zookeepers=1, lanes=1), docker_host=docker_host) as c:
            session, workdir = c.session.id, c.workdir
            assert len(_ours(client, session)) == 3
            raise RuntimeError("boom")
    assert _ours(client, session) == [] and not workdir.exists()


DRIVER = textwrap.dedent("""
    import json, sys, threading, time
    from chaos.cluster.container_cluster import DockerCluster
    from chaos.cluster.topology import ClusterSpec
    c = DockerCluster(ClusterSpec.build(brokers=1, lanes=1), docker_host=sys.argv[1])
    t = threading.Thread(target=c.start); t.start(); t.join()
    print(json.dumps({"session": c.session.id, "pid": c.process("broker-1").pid}), flush=True)
    time.sleep(300)
""")


def test_containers_of_a_sigkilled_driver_are_removed_by_the_next_start(state, docker_host):
    client = docker.DockerClient(base_url=docker_host)
    driver = subprocess.Popen([sys.executable, "-c", DRIVER, docker_host], stdout=subprocess.PIPE, text=True)
    try:
        info = json.loads(driver.stdout.readline())
    finally:
        driver.kill()
        driver.wait()
    # no reaper container here: the JVMs outlive the driver until someone reaps
    assert len(_ours(client, info["session"])) == 3 and psutil.pid_exists(info["pid"])
    removed = reap_containers(client)   # what every DockerCluster.start() does first
    # three containers, and the cluster's own network when it has one (bridge networking)
    gone = [n for n in removed if n.startswith(info["session"])]
    assert len([n for n in gone if not n.endswith("-net")]) == 3 and len(gone) <= 4
    assert _ours(client, info["session"]) == []
    deadline = time.monotonic() + 10
    while psutil.pid_exists(info["pid"]) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not psutil.pid_exists(info["pid"])


ENGINE_DRIVER = textwrap.dedent("""
    import json, sys, time
    from pathlib import Path
    from chaos.cluster.container_engine import DockerEngine
    e = DockerEngine(Path(sys.argv[1]), netns=sys.argv[2]).start()
    print(json.dumps({"pid": e.record().pid}), flush=True)
    time.sleep(300)
""")


@pytest.fixture
def spare_engine_dirs(monkeypatch):
    """A second, independent engine: own socket/exec root (short path: unix sockets) and own data root."""
    d = Path(tempfile.mkdtemp(prefix="kc-e-", dir="/tmp"))
    monkeypatch.setenv("KAFKA_CHAOS_CACHE", str(d / "cache"))
    yield d / "engine"
    shutil.rmtree(d, ignore_errors=True)


def test_our_dockerd_stops_and_one_left_by_a_killed_driver_is_reaped_with_its_namespace(docker_engine, spare_engine_dirs):
    netns = f"kc-t-{os.getpid()}"
    engine = DockerEngine(spare_engine_dirs).start()
    first = engine.record().pid
    engine.stop()
    assert not psutil.pid_exists(first) and not engine.socket.exists() and engine.record() is None
    assert not spare_engine_dirs.exists() and engine.log_path.stat().st_size > 0  # the log is kept in the cache
    env = dict(os.environ)
    driver = subprocess.Popen([sys.executable, "-c", ENGINE_DRIVER, str(spare_engine_dirs), netns],
                              stdout=subprocess.PIPE, text=True, env=env)
    try:
        orphan = json.loads(driver.stdout.readline())["pid"]
    finally:
        driver.kill()
        driver.wait()
    assert psutil.pid_exists(orphan)  # dockerd has no parent-death signal (see container_engine's doc)
    assert os.path.exists(f"/run/netns/{netns}")
    assert os.readlink(f"/proc/{orphan}/ns/net") != os.readlink("/proc/self/ns/net")
    engine = DockerEngine(spare_engine_dirs)
    engine.start()  # reaps the orphan (SIGTERM: it stops its containers) and deletes its namespace
    try:
        gone = not psutil.pid_exists(orphan) or psutil.Process(orphan).status() == psutil.STATUS_ZOMBIE
        assert gone and not os.path.exists(f"/run/netns/{netns}")
        assert engine.started_here and engine.record().pid != orphan and engine.ping()
    finally:
        engine.stop()
    assert engine.record() is None and not engine.socket.exists() and not spare_engine_dirs.exists()


def test_an_engine_that_cannot_start_says_why_in_one_line(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))  # no dockerd on PATH
    with pytest.raises(EngineUnavailable) as exc:
        DockerEngine(directory=tmp_path / "engine").start()
    msg = str(exc.value)
    assert "\n" not in msg and "dockerd is not installed" in msg and "docker-engine.sh install" in msg
