"""The outcome table: one place decides whether a produce or commit happened."""

from __future__ import annotations

import pytest

from chaos.outcome import Operation, Outcome, classify, is_fenced_instance, known_errors, normalise_error_name

FAIL, OK, UNK = Outcome.FAIL, Outcome.OK, Outcome.UNKNOWN


@pytest.mark.parametrize("code, name, want", [
    (22, "ILLEGAL_GENERATION", FAIL),
    (27, None, FAIL),
    (None, "UnknownMemberIdError", FAIL),
    (None, "org.apache.kafka.common.errors.FencedInstanceIdException", FAIL),
    (None, "CommitFailedError", FAIL),
    (None, "org.apache.kafka.clients.consumer.CommitFailedException", FAIL),
    (15, "COORDINATOR_NOT_AVAILABLE", FAIL),
    (None, "NotCoordinatorForGroupError", FAIL),
    (7, "REQUEST_TIMED_OUT", UNK),
    (13, None, UNK),
    (-185, "_TIMED_OUT", UNK),
    (None, "KafkaError._TRANSPORT", UNK),
    (None, "KafkaTimeoutError", UNK),
    (None, "org.apache.kafka.common.errors.TimeoutException", UNK),
    (None, "RetriableCommitFailedException", UNK),
    (None, "_NO_OFFSET", FAIL),
    (None, None, OK),
    (0, None, OK),
    (9999, "SOMETHING_NEW", UNK),
    (None, "SomeBrandNewError", UNK),
])
def test_commit(code, name, want):
    assert classify(Operation.COMMIT, code, name) is want


@pytest.mark.parametrize("code, name, want", [
    (19, "NOT_ENOUGH_REPLICAS", FAIL),
    (None, "NotEnoughReplicasException", FAIL),
    (20, None, UNK),
    (6, None, FAIL),
    (None, "NotLeaderForPartitionError", FAIL),
    (-192, "_MSG_TIMED_OUT", UNK),
    (None, "_ALL_BROKERS_DOWN", UNK),
    (None, "_QUEUE_FULL", FAIL),
    (7, None, UNK),
    (None, "NetworkException", UNK),
    (None, "KafkaTimeoutError", UNK),
    (None, "MessageSizeTooLargeError", FAIL),
    (12345, None, UNK),
])
def test_produce(code, name, want):
    assert classify("produce", code, name) is want


def test_name_wins_over_code_and_codes_are_unique():
    assert classify("commit", 7, "ILLEGAL_GENERATION") is FAIL
    codes = [row.code for row in known_errors() if row.code is not None]
    assert len(codes) == len(set(codes))


def test_normalise():
    assert normalise_error_name("IllegalGenerationError") == "ILLEGAL_GENERATION"
    assert normalise_error_name("org.apache.kafka.common.errors.RebalanceInProgressException") == \
        "REBALANCE_IN_PROGRESS"
    assert normalise_error_name("_msg_timed_out") == "_MSG_TIMED_OUT"
    assert is_fenced_instance(None, "FencedInstanceIdError") and is_fenced_instance(82, None)
    assert not is_fenced_instance(22, "ILLEGAL_GENERATION")


def test_bad_operation():
    with pytest.raises(ValueError):
        classify("fetch", None, None)


def test_a_share_acknowledgement_is_refused_only_when_the_leader_says_so():
    """KIP-932: the share-partition leader refuses what this member does not hold (INVALID_RECORD_STATE); any other
    error of an acknowledgement may hide one the leader applied."""
    op = Operation.SHARE_ACKNOWLEDGE
    assert classify(op, None, None) is Outcome.OK
    assert classify(op, 121, "INVALID_RECORD_STATE") is Outcome.FAIL
    assert classify(op, 121, None) is Outcome.FAIL
    assert classify(op, None, "InvalidRecordStateException") is Outcome.FAIL
    for code, name in [(7, "REQUEST_TIMED_OUT"), (None, "_TIMED_OUT"), (6, "NOT_LEADER_OR_FOLLOWER"),
                       (None, "_TRANSPORT"), (22, "ILLEGAL_GENERATION")]:
        assert classify(op, code, name) is Outcome.UNKNOWN, name
