"""Broken on purpose: the orders service that goes on processing partitions it was revoked from.

The one change from :class:`shop.orders.OrderService`: its ``on_revoke`` / ``on_lost`` do not drop the buffered
records of the partitions taken away, so the loop stores (and commits) them while their new owner reads the
same records from the last commit: each order is stored twice, by two members at once, and the old owner's
late commits can move the group's position under the new owner's feet. kafka-chaos's ``ownership-time``
checker (a partition processed by a member that does not hold it while another does) catches it:
``broken-keeps-revoked.yaml``. The records are marked with ``chaos.instrument.processed`` as they are stored
(the service does that), so the checker sees when each was really processed, after the revocation.
"""

from __future__ import annotations

from confluent_kafka import Consumer, TopicPartition

from shop.orders import OrderService, serve


class KeepsRevoked(OrderService):
    #: small chunks of slow work keep records buffered across polls, where the revocation happens
    chunk = 10
    max_buffered = 300
    processing_s = 0.015

    def on_revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        gone = {(p.topic, p.partition) for p in partitions}
        self.commit({tp: offset for tp, offset in self.done.items() if tp in gone})
        # BUG: the buffered records of the revoked partitions are kept, and processed after this returns

    def on_lost(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        pass  # BUG: the same for lost partitions


def main() -> None:
    serve(KeepsRevoked)
