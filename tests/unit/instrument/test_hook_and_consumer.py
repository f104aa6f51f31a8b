"""The hook that swaps classes, the sitecustomize that runs it, and the instrumented Consumer's API
shape — real ``confluent_kafka`` objects, no broker (bootstrap 127.0.0.1:1 is never reached in time)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import confluent_kafka
import orjson
import pytest
from confluent_kafka import KafkaError, TopicPartition

import chaos.instrument
from chaos.errors import UsageError
from chaos.instrument import hook
from chaos.instrument.consumer import Consumer, LibraryConsumer, answers, commit_arguments, merged_config
from chaos.instrument.destination import Destination
from chaos.outcome import Outcome

SITE = Path(chaos.instrument.__file__).parent / "site"
BASE = {"bootstrap.servers": "127.0.0.1:1", "log_level": 0}


def events(path: Path) -> list[dict]:
    return [orjson.loads(line) for line in path.read_bytes().splitlines()]


def test_install_swaps_the_class_the_application_imports_and_uninstall_restores_it():
    original = confluent_kafka.Consumer
    swaps = hook.install()
    assert [(s.module, s.name) for s in swaps][0] == ("confluent_kafka", "Consumer")
    from confluent_kafka import Consumer as Imported

    assert Imported is Consumer and hook.install() == swaps  # idempotent
    c = Imported({**BASE, "group.id": "g"})
    # code that captured the library's class before the hook still recognises the object
    assert isinstance(c, original) and isinstance(c, LibraryConsumer)
    c.close()
    hook.uninstall()
    assert confluent_kafka.Consumer is original and not hook.installed()


def test_without_the_environment_it_is_the_library_and_records_nothing(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    c = Consumer({**BASE, "group.id": "g"})
    assert c._chaos is None
    c.subscribe(["t"])  # no callbacks given: none passed on (the library refuses None)
    assert c.poll(0.05) is None and c.consume(3, 0.05) == []
    assert c.consumer_group_metadata().startswith(b"CGMDv2:")
    c.close()
    assert list(tmp_path.iterdir()) == [] and chaos.instrument.processed(object()) is False


def test_member_start_and_stop_from_the_configuration(tmp_path, monkeypatch):
    path = tmp_path / "events" / "consumer-3.jsonl"
    monkeypatch.setenv("KAFKA_CHAOS_EVENTS", str(path))
    monkeypatch.setenv("KAFKA_CHAOS_GROUP", "g")
    c = Consumer({**BASE, "partition.assignment.strategy": "cooperative-sticky"}, **{"group.id": "g",
                 "session.timeout.ms": "6000", "enable.auto.commit": "false", "group.instance.id": "i-1"})
    side = Consumer({**BASE, "group.id": "side"})  # another group: the application's own business
    assert c._chaos is not None and side._chaos is None
    c.subscribe(["t"])
    c.poll(0.05)
    c.close()
    side.close()
    start, *_, stop = events(path)
    assert start["source"] == "consumer-3" and start["kind"] == "member_start"
    assert {k: start[k] for k in ("group", "client", "instance_id", "assignor", "protocol", "commit_mode",
                                  "session_timeout_ms", "max_poll_interval_ms", "auto_commit_interval_ms")} == {
        "group": "g", "client": "confluent-kafka", "instance_id": "i-1", "assignor": "cooperative-sticky",
        "protocol": "cooperative", "commit_mode": "sync", "session_timeout_ms": 6000,
        "max_poll_interval_ms": 300000, "auto_commit_interval_ms": None}
    assert (stop["kind"], stop["clean"]) == ("member_stop", True)
    c.close()  # a second close records nothing more (and is the library's own)
    assert events(path)[-1] == stop


def test_librdkafka_defaults_and_kip848(tmp_path, monkeypatch):
    monkeypatch.setenv("KAFKA_CHAOS_EVENTS", str(tmp_path / "c.jsonl"))
    c = Consumer({**BASE, "group.id": "g", "group.protocol": "consumer"})
    c.close()
    start = events(tmp_path / "c.jsonl")[0]
    assert (start["source"], start["commit_mode"], start["auto_commit_interval_ms"], start["protocol"]) == (
        "c", "auto", 5000, "cooperative")


def test_a_bad_member_name_is_refused_when_the_consumer_is_built(tmp_path, monkeypatch):
    monkeypatch.setenv("KAFKA_CHAOS_EVENTS", str(tmp_path / "x.jsonl"))
    monkeypatch.setenv("KAFKA_CHAOS_MEMBER", "a/b")
    with pytest.raises(UsageError, match="KAFKA_CHAOS_MEMBER"):
        Consumer({**BASE, "group.id": "g"})
    assert Destination.from_environ({"KAFKA_CHAOS_EVENTS": " "}) is None


def test_commit_arguments_are_read_as_confluent_kafka_reads_them():
    tps = [TopicPartition("t", 0, 5)]
    assert commit_arguments((), {}) == (None, None, True)
    assert commit_arguments((None, tps), {"asynchronous": False}) == (None, tps, False)
    assert commit_arguments((), {"async": False}) == (None, None, False)  # the old name
    assert commit_arguments((), {"async": True, "asynchronous": 0}) == (None, None, False)
    assert merged_config(({"a": 1},), {"a": 2, "b": 3}) == {"a": 2, "b": 3}
    assert merged_config(("nope",), {}) is None


def test_answers_split_a_commit_by_partition_outcome():
    # the library builds answered TopicPartitions in C (their ``error`` is read-only): same fields here
    ok = SimpleNamespace(topic="t", partition=0, offset=5, error=None)
    refused = SimpleNamespace(topic="t", partition=1, offset=9, error=KafkaError(KafkaError.ILLEGAL_GENERATION))
    nothing = SimpleNamespace(topic="t", partition=2, offset=-1001, error=None)  # nothing stored: not sent
    out = answers(None, [ok, refused, nothing])
    assert [(a.offsets, a.outcome, a.error_name) for a in out] == [
        ((("t", 0, 5),), Outcome.OK, None), ((("t", 1, 9),), Outcome.FAIL, "ILLEGAL_GENERATION")]
    whole = answers(KafkaError(KafkaError._TIMED_OUT), [], fallback=(("t", 0, 7),))
    assert [(a.offsets, a.outcome) for a in whole] == [((("t", 0, 7),), Outcome.UNKNOWN)]


@pytest.mark.parametrize("flag, expected", [("1", "chaos.instrument.consumer"), ("", "cimpl")])
def test_sitecustomize_installs_the_hook_before_the_application_runs(flag, expected):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SITE), os.environ.get("PYTHONPATH", "")]),
           "KAFKA_CHAOS_INSTRUMENT": flag}
    out = subprocess.run([sys.executable, "-c", "import confluent_kafka; print(confluent_kafka.Consumer.__module__)"],
                         env=env, capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == expected
