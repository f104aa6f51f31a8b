"""A confluent-kafka member asked for its group view after close() began answers "unknown", not a crash."""

from confluent_kafka import Consumer

from chaos.workload.clients.confluent import ConfluentClient


def test_the_group_view_of_a_closed_consumer_is_unknown():
    # a real librdkafka consumer (nothing listens on port 1: it never connects), closed as a member's close does
    consumer = Consumer({"bootstrap.servers": "127.0.0.1:1", "group.id": "g", "log_level": 0})
    consumer.close()
    client = object.__new__(ConfluentClient)  # only the consumer is read before the library raises
    client._consumer = consumer
    client.spec = None
    assert client.group_view() == (None, None)
