"""The project's Toxiproxy server (``chaos/toxiproxy``): the Python table of Kafka APIs is the toxic's own list, the
toxic's Go tests pass (framing, every action, error codes replaced in every version of every API kmsg knows), and
``chaos/model/kafka_api_errors.json`` is what its generator makes of kmsg, kerr and Kafka 4.4.0's message specs."""

import json
import os
import shutil
import subprocess

import pytest

from chaos.cluster.runtime import cache_root, kafka_runtime, toxiproxy_runtime, toxiproxy_sources
from chaos.errors import UsageError
from chaos.model.kafka_api import API_KEYS, ERROR_ALIASES, NOT_ERROR_NAMES, _table, error_codes


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


def _go(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    """``go`` in the Toxiproxy module, offline: its modules are in the cache since the server was built."""
    go = shutil.which("go")
    if go is None:
        pytest.skip("no Go toolchain")
    _binary()
    env = dict(os.environ, GOMODCACHE=str(cache_root() / "go" / "mod"), GOCACHE=str(cache_root() / "go" / "build"),
               GOFLAGS="-modcacherw -mod=readonly", GOPROXY="off", CGO_ENABLED="0")
    return subprocess.run([go, "-C", str(toxiproxy_sources()), *args], capture_output=True, text=True,
                          timeout=timeout, env=env)


def test_the_toxics_go_tests_pass():
    res = _go("test", "-count=1", "-timeout", "300s", "./kafkatoxic/")
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]


def test_the_api_errors_table_is_what_its_generator_makes_of_its_sources():
    """Regenerate with: go -C chaos/toxiproxy run ./cmd/kafka-api-errors -specs <kafka-clients-4.4.0.jar>."""
    table = _table()
    lib = kafka_runtime(table["sources"]["specs"].removeprefix("kafka-clients-").removesuffix(".jar")).lib_dir
    res = _go("run", "./cmd/kafka-api-errors", "-specs", str(lib / table["sources"]["specs"]))
    assert res.returncode == 0, res.stderr[-3000:]
    assert json.loads(res.stdout) == table
    # every upper-case word of the sources is an error name (or an alias of one), or one of the few known not to be
    words = {n for names in table["errors"].values() for n in names}
    assert words - set(error_codes()) == NOT_ERROR_NAMES
    assert set(ERROR_ALIASES.values()) <= set(table["codes"])
