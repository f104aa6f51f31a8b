"""ClusterAdmin's handling of kafka-python 3's answers, no broker: a broker the client does not know yet is
waited for, a definite refusal is not."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from kafka.errors import InvalidReplicationFactorError, NodeNotReadyError, UnknownBrokerIdError

from chaos.cluster.admin import ClusterAdmin
from chaos.errors import InfrastructureError


def _client(*answers):
    """A kafka-python admin client whose requests answer ``answers`` in turn (an exception is raised)."""
    it = iter(answers)

    def run(send, request, node_id):
        answer = next(it)
        if isinstance(answer, BaseException):
            raise answer
        return answer

    return SimpleNamespace(_manager=SimpleNamespace(run=run, send=None))


def test_a_broker_missing_from_the_clients_metadata_is_not_ready_yet_not_unknown():
    # kafka-python raises UnknownBrokerIdError (not retriable) for a node id its metadata lacks: a broker
    # just restarted or just named coordinator, which a fresh client sees
    with pytest.raises(NodeNotReadyError) as raised:
        ClusterAdmin._send(_client(UnknownBrokerIdError(3)), object(), 3)
    assert raised.value.retriable
    assert ClusterAdmin._send(_client("answer"), object(), 3) == "answer"


def test_settled_waits_through_a_node_not_ready_and_fails_at_once_on_a_definite_error():
    admin = ClusterAdmin("127.0.0.1:1")
    client = _client(UnknownBrokerIdError(3), "described")
    assert admin.settled(lambda: ClusterAdmin._send(client, object(), 3), "a description", wait_s=5) == "described"
    refused = _client(InvalidReplicationFactorError())
    with pytest.raises(InfrastructureError, match="InvalidReplicationFactorError"):
        admin.settled(lambda: ClusterAdmin._send(refused, object()), "a topic", wait_s=5)
