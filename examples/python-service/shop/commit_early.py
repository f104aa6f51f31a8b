"""Broken on purpose: the orders service that commits a batch as soon as it is polled, before storing it.

The one change from :class:`shop.orders.OrderService`: :meth:`CommitEarly.fetch` commits the next offsets
of the records a poll returned right away; the slow processing follows, and nothing is committed after it.
A member that dies mid-batch (a crash, an OOM kill, a deploy) has committed records it never stored: the
next owner starts after them, and those orders are lost (at-most-once). kafka-chaos's ``delivery`` checker
(commit => processed) catches it: ``broken-commit-before-process.yaml``.
"""

from __future__ import annotations

from confluent_kafka import Consumer, Message, TopicPartition

from shop.orders import OrderService, next_position, serve


class CommitEarly(OrderService):
    #: slow storage (a downstream call of 20 ms): a kill lands mid-batch
    processing_s = 0.02

    def fetch(self) -> list[Message]:
        added = super().fetch()
        ends = dict(next_position(m) for m in added)
        self.commit(ends)  # BUG: committed before processing
        return added

    def work(self) -> None:
        self.process_chunk()  # already committed when polled: nothing left to commit after processing

    def on_revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self.drop({(p.topic, p.partition) for p in partitions})  # the same: everything polled is committed


def main() -> None:
    serve(CommitEarly)
