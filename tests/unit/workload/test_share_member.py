"""The share member's pure parts (chaos.workload.share_member): a poll's records become one ``share_acquired`` per
(partition, delivery count), and a ``commit_sync`` answer becomes one outcome per acknowledged partition. The
records and answers are confluent-kafka's own ``Message``, ``TopicPartition`` and ``KafkaException`` objects."""

from __future__ import annotations

from confluent_kafka import KafkaError, KafkaException, Message, TopicPartition

from chaos.model.share import ShareGroupSpec, ShareMemberSpec
from chaos.outcome import Outcome
from chaos.workload.share_member import Acquisition, ack_answers, acquisitions, consumer_config


def test_a_poll_is_grouped_by_partition_and_delivery_count():
    records = [Message(topic="t", partition=1, offset=7, delivery_count=1),
               Message(topic="t", partition=0, offset=3, delivery_count=2),
               Message(topic="t", partition=1, offset=5, delivery_count=1),
               Message(topic="t", partition=1, offset=6, delivery_count=3),
               Message(topic="t", partition=0, offset=9, error=KafkaError(KafkaError._PARTITION_EOF))]
    assert acquisitions(records) == [Acquisition("t", 1, 1, (5, 7)), Acquisition("t", 0, 2, (3,)),
                                     Acquisition("t", 1, 3, (6,))]


def test_each_acknowledged_partition_gets_its_own_answer():
    sent = {("t", 0): [1, 2], ("t", 1): [4], ("t", 2): [8]}
    result = {TopicPartition("t", 0): None,
              TopicPartition("t", 1): KafkaException(KafkaError(KafkaError.INVALID_RECORD_STATE))}
    answers = {(a.partition, a.outcome, a.error_name) for a in ack_answers(sent, result, None)}
    # partition 2 was acknowledged but is not in the answer: sent or not, applied or not
    assert answers == {(0, Outcome.OK, None), (1, Outcome.FAIL, "INVALID_RECORD_STATE"), (2, Outcome.UNKNOWN, None)}
    refused = next(a for a in ack_answers(sent, result, None) if a.partition == 1)
    assert refused.error_code == KafkaError.INVALID_RECORD_STATE


def test_a_commit_that_raised_leaves_every_partition_unknown():
    sent = {("t", 0): [1], ("t", 1): [2]}
    answers = ack_answers(sent, {TopicPartition("t", 0): None}, KafkaException(KafkaError(KafkaError._TIMED_OUT)))
    assert {a.outcome for a in answers} == {Outcome.UNKNOWN}


def test_the_consumer_acknowledges_explicitly_under_the_members_name():
    config = consumer_config("consumer-2", "g", "127.0.0.1:1", ShareMemberSpec(request_timeout_ms=5000))
    assert config["share.acknowledgement.mode"] == "explicit"
    assert config["client.id"] == "consumer-2" and config["socket.timeout.ms"] == 5000


def test_the_groups_settings_start_it_at_the_earliest_offset():
    spec = ShareGroupSpec(record_lock_duration_ms=5000, delivery_count_limit=3)
    configs = spec.group_configs((4, 4))
    assert configs["share.auto.offset.reset"] == "earliest"
    assert configs["share.record.lock.duration.ms"] == "5000" and configs["share.delivery.count.limit"] == "3"
    # Kafka 4.2 has no group config for the limit (it refuses the name): the brokers' applies
    assert "share.delivery.count.limit" not in spec.group_configs((4, 2))


def test_what_the_share_member_cannot_run_is_refused_at_load():
    import pytest
    from pydantic import ValidationError

    for bad, says in [({"client": "java"}, "confluent-kafka's ShareConsumer only"),
                      ({"client_version": "2.14.0"}, "has no ShareConsumer (from 2.15.0)")]:
        with pytest.raises(ValidationError, match=says.replace("(", r"\(").replace(")", r"\)")):
            ShareMemberSpec.model_validate(bad)
    with pytest.raises(ValidationError, match="heartbeat_interval_ms must be below"):
        ShareGroupSpec(session_timeout_ms=1000, heartbeat_interval_ms=1000)
    assert ShareMemberSpec(client_version="2.15.0").client_version == "2.15.0"
