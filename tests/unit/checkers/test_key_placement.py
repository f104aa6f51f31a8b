"""key-placement (issue 16, item 5): Kafka's murmur2 partitioner, the keyed producer's keys, and the checker on
hand-made histories (fixtures/histories/make_key_fixtures.py)."""

from __future__ import annotations

import itertools
import sys
from pathlib import Path

import orjson
import pydantic
import pytest

from chaos.checkers.key_placement import keyed_producers, murmur2, partition_for_key, to_positive
from chaos.checkers.registry import run_checkers
from chaos.checkers.result import Result, Validity
from chaos.history import read_history
from chaos.model.checker_name import CheckerName
from chaos.model.workload import Partitioner, ProducerSpec
from chaos.workload.producer import key_stream

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures" / "histories"
sys.path.insert(0, str(FIXTURES))

import make_key_fixtures as mk  # noqa: E402 - a script next to the fixtures

#: printed once by the Java client (kafka-clients 3.9.1): for each UTF-8 key, ``Utils.murmur2``, ``Utils.toPositive``
#: of it, and ``BuiltInPartitioner.partitionForKey`` for 6, 12 and 7 partitions
JAVA = [
    ("", 275646681, 275646681, 3, 9, 2),
    ("a", -1563381124, 584102524, 4, 4, 5),
    ("ab", 316155434, 316155434, 2, 2, 0),
    ("abc", 479470107, 479470107, 3, 3, 4),
    ("abcd", -1323649548, 823834100, 2, 8, 5),
    ("abcde", 461995741, 461995741, 1, 1, 4),
    ("hello", 2132663229, 2132663229, 3, 9, 4),
    ("k0", -704538303, 1442945345, 5, 5, 2),
    ("k1", 1684045097, 1684045097, 5, 5, 0),
    ("k2", 380483553, 380483553, 3, 9, 2),
    ("k3", 1676809936, 1676809936, 4, 4, 4),
    ("k7", 1526671408, 1526671408, 4, 4, 3),
    ("k15", -632831750, 1514651898, 0, 6, 4),
    ("k63", -571881974, 1575601674, 0, 6, 3),
    ("kafka-chaos", 296069805, 296069805, 3, 9, 3),
    ("ключ", 2122343024, 2122343024, 2, 8, 4),
    ("ÿþý", -827240790, 1320242858, 2, 2, 4),
]


@pytest.mark.parametrize(("key", "hashed", "positive", "p6", "p12", "p7"), JAVA)
def test_murmur2_is_the_java_clients(key, hashed, positive, p6, p12, p7):
    data = key.encode()
    assert murmur2(data) == hashed
    assert to_positive(hashed) == positive
    assert [partition_for_key(data, n) for n in (6, 12, 7)] == [p6, p12, p7]


def test_producer_spec_keys_and_partitioner():
    assert ProducerSpec().keys is None and ProducerSpec().key_partitioner is None
    assert ProducerSpec(keys=8).key_partitioner is Partitioner.MURMUR2_RANDOM
    assert ProducerSpec(keys=8, partitioner="murmur2").key_partitioner is Partitioner.MURMUR2
    with pytest.raises(pydantic.ValidationError, match="keyed producers only"):
        ProducerSpec(partitioner="murmur2")
    with pytest.raises(pydantic.ValidationError):
        ProducerSpec(keys=8, partitioner="consistent_random")  # librdkafka's CRC32 default: not Java's placement
    with pytest.raises(pydantic.ValidationError):
        ProducerSpec(keys=0)


def test_key_stream_follows_the_seed():
    first = list(itertools.islice(key_stream("7:producer-0", 16), 500))
    assert first == list(itertools.islice(key_stream("7:producer-0", 16), 500))
    assert first != list(itertools.islice(key_stream("8:producer-0", 16), 500))
    assert first != list(itertools.islice(key_stream("7:producer-1", 16), 500))
    assert set(first) == {f"k{i}" for i in range(16)}


def _write(tmp_path: Path, header: dict, events: list[dict]) -> Path:
    path = tmp_path / "history.jsonl"
    path.write_bytes(b"\n".join(orjson.dumps(x) for x in [header, *events]) + b"\n")
    return path


def _check(tmp_path: Path, header: dict, events: list[dict]) -> Result:
    history = read_history(_write(tmp_path, header, events))
    return run_checkers(history, [CheckerName.KEY_PLACEMENT]).result(CheckerName.KEY_PLACEMENT)


def _judge(tmp_path: Path, built: tuple) -> tuple:
    fx, s = built
    return _check(tmp_path, fx.header, fx.events), s


def test_misplaced_key_is_a_violation(tmp_path):
    r, s = _judge(tmp_path, mk.misplaced())
    assert r.valid is Validity.FALSE and r.metrics["misplaced"] == 1 and r.metrics["order_violations"] == 0
    assert [f.evidence for f in r.violations] == [(s["bad"],)]
    assert "'k3'" in r.violations[0].description and "t-0 (2 partitions)" in r.violations[0].description


def test_per_key_order_broken_is_a_violation(tmp_path):
    r, s = _judge(tmp_path, mk.order_broken())
    assert r.valid is Validity.FALSE and r.metrics["order_violations"] == 1 and r.metrics["misplaced"] == 0
    assert r.violations[0].evidence == (s["newer"], s["older"])


def test_duplicate_with_the_same_sequence_is_not_a_reordering(tmp_path):
    r, s = _judge(tmp_path, mk.duplicate_retry())
    assert r.valid is Validity.TRUE, r.summary
    assert r.metrics["duplicates"] == 1 and r.metrics["records_during_faults"] == 2
    assert [f.evidence for f in r.findings] == [(s["first"], s["again"])]


def test_key_moved_by_added_partitions_is_judged_per_partition(tmp_path):
    r, _ = _judge(tmp_path, mk.moved_after_add())
    assert r.valid is Validity.TRUE, r.summary
    assert r.metrics["records_after_add"] == 3 and r.metrics["key_partitions"] == 2


def test_record_on_neither_count_after_add_partitions_is_a_violation(tmp_path):
    fx, s = mk.moved_after_add()
    # k8 is on t-0 with 2 partitions and on t-2 with 4: t-1 is neither
    bad = next(e for e in fx.events if e["seq"] == s["new_count"])
    bad["partition"] = 1
    r = _check(tmp_path, fx.header, fx.events)
    assert r.valid is Validity.FALSE and r.violations[0].evidence == (s["add"], s["new_count"])


def test_add_partitions_of_unknown_size_judges_only_records_before_it(tmp_path):
    fx, s = mk.moved_after_add()
    fx.header["experiment"]["faults"] = []
    for e in fx.events:
        if e["kind"] == "fault_verified":
            e["evidence"] = "t: metadata not there yet"
    r = _check(tmp_path, fx.header, fx.events)
    assert r.valid is Validity.TRUE and r.metrics["keyed_records"] == 2 and r.metrics["placement_unjudged"] == 3
    assert "not judged for placement" in r.summary


def test_unkeyed_workload_answers_true_with_no_keyed_records(tmp_path):
    fx, _ = mk.misplaced()
    fx.header["experiment"]["workload"]["producers"][1]["keys"] = None
    r = _check(tmp_path, fx.header, fx.events)
    assert r.valid is Validity.TRUE and r.metrics == {"keyed_records": 0}
    assert r.summary.startswith("no keyed records")
    # an older header without workload (or without keys) is unkeyed too
    assert keyed_producers({"fixture": "x"}) == {} and keyed_producers({"workload": {"producers": [{}]}}) == {}


def test_keyed_workload_without_acknowledged_keyed_records_is_unknown(tmp_path):
    fx, _ = mk.misplaced()
    events = [e for e in fx.events if e["source"] != "producer-1"]
    for i, e in enumerate(events, 1):
        e["seq"] = i
    r = _check(tmp_path, fx.header, events)
    assert r.valid is Validity.UNKNOWN and "no keyed record" in r.summary


@pytest.mark.parametrize("partitioner", [p.value for p in Partitioner])
def test_librdkafka_places_keys_as_murmur2_does(partitioner):
    """The keyed producer's partitioner (librdkafka, what the workload runs) agrees with :func:`partition_for_key`
    (the Java client's placement): 200 keys produced to librdkafka's in-process mock cluster (``test.mock.num.brokers``,
    loopback; it creates topics with 4 partitions)."""
    from confluent_kafka import Producer

    placed: dict[str, int] = {}
    producer = Producer({"test.mock.num.brokers": 1, "partitioner": partitioner, "log_level": 0})
    for i in range(200):
        producer.produce("t", key=f"k{i}".encode(), value=b"v",
                         on_delivery=lambda err, msg: placed.__setitem__(msg.key().decode(), msg.partition()))
    assert producer.flush(20) == 0
    partitions = len(producer.list_topics("t", timeout=5).topics["t"].partitions)
    assert partitions > 1 and len(placed) == 200
    assert placed == {f"k{i}": partition_for_key(f"k{i}".encode(), partitions) for i in range(200)}
