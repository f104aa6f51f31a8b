"""Bad input gets one line saying what to change, and exit code 2 — never a traceback.

These run the real ``chaos`` executable (and real Maven / Go / JVMs where the
error comes from them).
"""

import os
import socket
import subprocess
import sys

import pytest

CHAOS = [sys.executable, "-m", "chaos.cli"]


def run(args, env=None, timeout=180):
    return subprocess.run(CHAOS + args, capture_output=True, text=True, env=env, timeout=timeout)


def assert_one_line_error(res, *fragments):
    assert res.returncode == 2, (res.returncode, res.stderr)
    assert "Traceback" not in res.stderr
    # progress lines may precede it; the error is exactly one line, and the last
    errors = [l for l in res.stderr.splitlines() if l.startswith("chaos: error:")]
    assert len(errors) == 1, res.stderr
    assert res.stderr.rstrip().endswith(errors[0])
    for fragment in fragments:
        assert fragment in errors[0]


@pytest.fixture
def state_env(tmp_path):
    return dict(os.environ, KAFKA_CHAOS_STATE=str(tmp_path / "state"))


@pytest.mark.parametrize("args, fragment", [
    (["cluster", "up", "--brokers", "0"], "brokers: Input should be greater than or equal to 1"),
    (["cluster", "up", "--brokers", "2", "--replication-factor", "3"], "exceeds brokers=2"),
    (["cluster", "up", "--kafka-version", "4.1.0"], "unknown Kafka version '4.1.0'"),
    (["setup", "--kafka-version", "1.0.0"], "unknown Kafka version '1.0.0'"),
    (["cluster", "up", "--override", "nonsense"], "write KEY=VALUE"),
])
def test_bad_cluster_input(args, fragment, state_env):
    assert_one_line_error(run(args, env=state_env), fragment)


def test_java_missing(state_env, tmp_path):
    bindir = tmp_path / "bin"
    bindir.mkdir()
    env = dict(state_env, PATH=str(bindir), JAVA_HOME="")
    assert_one_line_error(run(["cluster", "up"], env=env), "java not found")


def test_port_taken(state_env):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen()
    try:
        port = s.getsockname()[1]
        assert_one_line_error(run(["cluster", "up", "--base-port", str(port)], env=state_env),
                              f"port 127.0.0.1:{port} is already in use")
    finally:
        s.close()


def test_maven_unreachable_is_one_line(tmp_path, state_env):
    # a real Maven whose only repository is a closed loopback port
    home = tmp_path / "home"
    (home / ".m2").mkdir(parents=True)
    (home / ".m2" / "settings.xml").write_text(
        "<settings><mirrors><mirror><id>dead</id><mirrorOf>*</mirrorOf>"
        "<url>http://127.0.0.1:9/</url></mirror></mirrors></settings>")
    env = dict(state_env, MAVEN_OPTS=f"-Duser.home={home}", KAFKA_CHAOS_CACHE=str(tmp_path / "cache"))
    res = run(["setup", "--kafka-version", "3.8.1"], env=env)
    assert_one_line_error(res, "Maven could not resolve Kafka 3.8.1")
    assert not (tmp_path / "cache" / "kafka" / "3.8.1" / ".complete").exists()


def test_go_proxy_unreachable_is_one_line(tmp_path, state_env):
    cache = tmp_path / "cache"
    # Kafka "cached" so only the Toxiproxy build runs
    from chaos.cluster.runtime import cache_root
    real = cache_root() / "kafka" / "3.9.1"
    if not (real / ".complete").exists():
        pytest.skip("runtime not set up")
    (cache / "kafka").mkdir(parents=True)
    (cache / "kafka" / "3.9.1").symlink_to(real)
    env = dict(state_env, KAFKA_CHAOS_CACHE=str(cache), GOPROXY="http://127.0.0.1:9", GOSUMDB="off",
               GOFLAGS="", GOPATH=str(tmp_path / "gopath"))
    assert_one_line_error(run(["setup"], env=env), "go could not build Toxiproxy")


@pytest.mark.integration
def test_node_that_fails_to_start_shows_its_log_tail(state_env):
    res = run(["cluster", "up", "--brokers", "1", "--override", "broker.id=notanumber"], env=state_env)
    assert_one_line_error(res, "broker-1 exited with code", "broker.id")
