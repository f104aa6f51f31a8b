"""The share member (chaos.workload.share_member): a poll's records become one ``share_acquired`` per (partition,
delivery count), a ``commit_sync`` answer one outcome per acknowledged partition, and one poll's records are
processed within the lock, accepted after processing and the rest released (the wrong modes each break one of
those). The records and answers are confluent-kafka's own ``Message``, ``TopicPartition`` and ``KafkaException``
objects; the client, where the loop's order is under test, is a recorder of its calls (the real ShareConsumer
runs in tests/integration/test_share_groups.py)."""

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


def test_an_answer_lost_on_the_wire_is_unknown_not_refused():
    # found on a real run (share-acknowledge-answer-lost): librdkafka answers an acknowledgement whose answer never
    # came with REQUEST_TIMED_OUT, though the leader had applied it
    sent = {("t", 0): [1]}
    result = {TopicPartition("t", 0): KafkaException(KafkaError(KafkaError.REQUEST_TIMED_OUT))}
    (answer,) = ack_answers(sent, result, None)
    assert (answer.outcome, answer.error_name) == (Outcome.UNKNOWN, "REQUEST_TIMED_OUT")


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

    for bad, says in [({"client": "kafka-python"}, "kafka-python has no share consumer"),
                      ({"client_version": "2.14.0"}, "confluent-kafka 2.14.0 has no ShareConsumer as the member uses "
                                                     "it (from 2.15.0)"),
                      ({"client": "java", "client_version": "4.1.0"}, "kafka-clients 4.1.0 has no ShareConsumer"),
                      ({"client": "java", "wrong_mode": "accept_before_processing"}, "the Python member's"),
                      ({"wrong_mode": "process_past_lock"}, "needs processing time to run past the lock"),
                      ({"wrong_mode": "ignore_revoke"}, "wrong_mode"),
                      ({"renew_locks": True}, "confluent-kafka's share consumer cannot renew a lock")]:
        with pytest.raises(ValidationError, match=says.replace("(", r"\(").replace(")", r"\)")):
            ShareMemberSpec.model_validate(bad)
    with pytest.raises(ValidationError, match="heartbeat_interval_ms must be below"):
        ShareGroupSpec(session_timeout_ms=1000, heartbeat_interval_ms=1000)
    assert ShareMemberSpec(client_version="2.15.0").client_version == "2.15.0"
    assert ShareMemberSpec(client="java", client_version="4.2.2").client_version == "4.2.2"
    assert ShareMemberSpec(client="java", renew_locks=True).renew_locks


# ------------------------------------------------------------------- the loop over one poll (a recording client)


class _Client:
    """Stands in for ``ShareConsumer`` where the loop's order is under test: it records each acknowledgement
    (with confluent-kafka's ``AcknowledgeType`` code) and answers every ``commit_sync`` with no error."""

    def __init__(self) -> None:
        self.acks: list[tuple[int, int]] = []
        self.commits = 0

    def acknowledge(self, message: Message, ack_type: int) -> None:
        self.acks.append((message.offset(), ack_type))

    def commit_sync(self, timeout: float) -> dict[TopicPartition, None]:
        self.commits += 1
        return {TopicPartition("t", 0): None}


def _poll_once(tmp_path, spec: ShareMemberSpec, lock_ms: int | None, n: int = 10) -> tuple[_Client, list[dict]]:
    import json

    from confluent_kafka import AcknowledgeType

    from chaos.history.writer import EventWriter
    from chaos.workload.share_member import ACK_TYPE_CODES, ShareMember

    # kafka-chaos's names for the acknowledgement types are confluent-kafka's own codes
    assert {t.name: c for t, c in ACK_TYPE_CODES.items()} == {t.name: int(t) for t in AcknowledgeType}
    client, events = _Client(), EventWriter.for_run(tmp_path, "consumer-0")
    ShareMember("g", spec, client, events, lock_ms=lock_ms).handle(
        [Message(topic="t", partition=0, offset=o, delivery_count=1) for o in range(n)])
    events.close(fsync=False)
    lines = (tmp_path / "events" / "consumer-0.jsonl").read_text().splitlines()
    return client, [json.loads(x) for x in lines]


def _kinds(events: list[dict]) -> list[str]:
    return [e["kind"] for e in events]


def test_a_poll_is_processed_within_the_lock_and_the_rest_released(tmp_path):
    # 50 ms per record under a 500 ms lock: the budget (80 %, 400 ms from the poll) holds at most 8 records (fewer
    # when sleeps overrun on a busy machine); the records after are released unprocessed
    client, events = _poll_once(tmp_path, ShareMemberSpec(processing_delay_ms=50), lock_ms=500)
    processed = [e for e in events if e["kind"] == "share_processed"]
    k = len(processed)
    assert 1 <= k <= 8 and [e["offsets"] for e in processed] == [[o] for o in range(k)]
    assert all(e["started_ns"] < e["mono_ns"] for e in processed)
    assert processed[-1]["mono_ns"] - events[0]["mono_ns"] <= 400_000_000
    acks = {e["ack_type"]: e["offsets"] for e in events if e["kind"] == "share_acknowledged"}
    assert acks == {"accept": list(range(k)), "release": list(range(k, 10))} and client.commits == 1
    assert client.acks == [(o, 1) for o in range(k)] + [(o, 2) for o in range(k, 10)]
    # everything processed was processed before the acknowledgements were sent
    assert _kinds(events) == ["share_acquired"] + ["share_processed"] * k + ["share_acknowledged"] * 2


def test_the_wrong_member_accepts_before_processing(tmp_path):
    spec = ShareMemberSpec(processing_delay_ms=1, wrong_mode="accept_before_processing")
    client, events = _poll_once(tmp_path, spec, lock_ms=500, n=3)
    assert _kinds(events) == ["share_acquired", "share_acknowledged"] + ["share_processed"] * 3
    assert client.acks == [(0, 1), (1, 1), (2, 1)]


def test_the_wrong_member_processes_past_its_lock(tmp_path):
    spec = ShareMemberSpec(processing_delay_ms=50, wrong_mode="process_past_lock")
    client, events = _poll_once(tmp_path, spec, lock_ms=200, n=6)
    processed = [e for e in events if e["kind"] == "share_processed"]
    assert len(processed) == 6 and processed[-1]["mono_ns"] - events[0]["mono_ns"] > 200_000_000
    assert client.acks == [(o, 1) for o in range(6)]


def test_a_stop_request_ends_the_record_under_way_unprocessed(tmp_path):
    from chaos.history.writer import EventWriter
    from chaos.workload.share_member import ShareMember

    client, events = _Client(), EventWriter.for_run(tmp_path, "consumer-0")
    member = ShareMember("g", ShareMemberSpec(processing_delay_ms=10_000), client, events, lock_ms=60_000)
    member.stopping = True
    member.handle([Message(topic="t", partition=0, offset=0, delivery_count=1)])
    events.close(fsync=False)
    assert client.acks == [(0, 2)]  # released, not accepted
