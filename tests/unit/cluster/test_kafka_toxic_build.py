"""The project's Toxiproxy server (``chaos/toxiproxy``): the Python table of Kafka APIs is the toxic's own list, and
the toxic's Go tests pass (framing, every action, error codes replaced in every version of every API kmsg knows)."""

import json
import os
import shutil
import subprocess

import pytest

from chaos.cluster.runtime import cache_root, toxiproxy_runtime, toxiproxy_sources
from chaos.errors import UsageError
from chaos.model.kafka_api import API_KEYS


def _binary():
    try:
        return toxiproxy_runtime().binary
    except UsageError:
        pytest.skip("Toxiproxy not set up (make setup)")


def test_the_api_table_is_the_toxics_own():
    out = subprocess.run([str(_binary()), "-kafka-apis"], capture_output=True, text=True, timeout=30, check=True)
    theirs = {a["name"]: a["key"] for a in json.loads(out.stdout)}
    assert theirs == dict(API_KEYS)


def test_the_server_says_it_carries_the_kafka_toxic():
    out = subprocess.run([str(_binary()), "-version"], capture_output=True, text=True, timeout=30, check=True)
    assert "2.12.0" in out.stdout and "kafka toxic" in out.stdout


def test_the_toxics_go_tests_pass():
    go = shutil.which("go")
    if go is None:
        pytest.skip("no Go toolchain")
    _binary()  # its modules are in the cache: the test builds offline
    env = dict(os.environ, GOMODCACHE=str(cache_root() / "go" / "mod"), GOCACHE=str(cache_root() / "go" / "build"),
               GOFLAGS="-modcacherw -mod=readonly", GOPROXY="off", CGO_ENABLED="0")
    res = subprocess.run([go, "-C", str(toxiproxy_sources()), "test", "-count=1", "./kafkatoxic/"],
                         capture_output=True, text=True, timeout=600, env=env)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
