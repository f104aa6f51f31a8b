"""The orders service: reads order events and stores each one, at least once.

Its consumer loop is its own (kafka-chaos only starts it, as an ``app`` member: ``shop.orders:main``):

* **poll loop** — ``consume`` fills a buffer; between two polls at most :attr:`OrderService.chunk`
  records are processed, so the loop polls (and rebalance callbacks run) often, well inside
  ``max.poll.interval.ms`` (KIP-62), even with a full buffer;
* **commit policy** — after each chunk, a synchronous commit of the next offsets of what was processed
  (Kafka's convention: the committed offset is the next record to read). A commit the coordinator
  refuses (a rebalance is under way, the member was fenced) is logged and not retried: the records are
  read again by whoever owns the partition next — at-least-once, never a commit of unprocessed records;
* **rebalance listener** — ``on_assign`` needs nothing (the library starts from the committed offsets);
  ``on_revoke`` commits what was processed of the revoked partitions, then drops their buffered records
  (the next owner reads them from that commit; KIP-429: the revoke callback runs while the partitions are
  still ours); ``on_lost`` drops the work without committing (the partitions may already be someone
  else's, so a commit would be refused or, worse, accepted late);
* **shutdown** — ``SystemExit`` (kafka-chaos's SIGTERM, or the deployment's) leaves through ``finally``:
  ``close()`` revokes (committing what was processed) and leaves the group at once.

Each record is marked with ``chaos.instrument.processed(msg)`` when stored: under kafka-chaos that is the
precise "processed" the delivery and ownership checkers judge (records buffered and dropped on a revoke
never count as processed); without kafka-chaos the call does nothing.
"""

from __future__ import annotations

import sys
import time
from collections import deque
from collections.abc import Iterable
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, TopicPartition

from shop.config import ConsumerSettings

try:
    from chaos.instrument import processed
except ImportError:  # the service runs without kafka-chaos installed

    def processed(msg: Any) -> bool:
        return False


TP = tuple[str, int]


def store_order(msg: Message, seconds: float) -> None:
    """Stands for the service's real work (a database write, a downstream call): takes ``seconds``."""
    time.sleep(seconds)


def next_position(msg: Message) -> tuple[TP, int]:
    """The partition of record ``msg`` and the offset to commit once it is processed (the next one to read)."""
    topic, partition, offset = msg.topic(), msg.partition(), msg.offset()
    assert topic is not None and partition is not None and offset is not None  # a record, not an error event
    return (topic, partition), offset + 1


def log(text: str) -> None:
    print(f"orders: {text}", file=sys.stderr, flush=True)


class OrderService:
    """One consumer's poll loop, commit policy and rebalance listener (module docstring)."""

    #: records processed between two polls
    chunk = 20
    #: records buffered at most (a poll asks for no more than the room left)
    max_buffered = 500
    #: time to store one order
    processing_s = 0.005

    def __init__(self, consumer: Consumer, settings: ConsumerSettings) -> None:
        self.consumer = consumer
        self.settings = settings
        self.buffer: deque[Message] = deque()
        #: per partition, the next offset after the last record processed and not yet committed
        self.done: dict[TP, int] = {}

    # ------------------------------------------------------------------ the loop
    def run(self) -> None:
        self.consumer.subscribe([self.settings.topic], on_assign=self.on_assign, on_revoke=self.on_revoke,
                                on_lost=self.on_lost)
        while True:  # ends by SystemExit (SIGTERM) or a fatal client error
            self.fetch()
            self.work()

    def fetch(self) -> list[Message]:
        """Poll for more records (rebalance callbacks run inside); returns those added to the buffer."""
        room = max(1, self.max_buffered - len(self.buffer))
        added = []
        for msg in self.consumer.consume(room, 0.0 if self.buffer else 0.5):
            err = msg.error()
            if err is None:
                added.append(msg)
            elif err.fatal():
                raise KafkaException(err)
            elif err.code() != KafkaError._PARTITION_EOF:
                log(f"poll: {err.name()}: {err.str()}")
        self.buffer.extend(added)
        return added

    def work(self) -> None:
        """Process one chunk of the buffer, then commit it."""
        self.process_chunk()
        self.commit(self.done)

    def process_chunk(self) -> None:
        """Store the next :attr:`chunk` buffered orders, noting each partition's next offset in :attr:`done`."""
        for _ in range(min(self.chunk, len(self.buffer))):
            msg = self.buffer.popleft()
            store_order(msg, self.processing_s)
            processed(msg)
            tp, position = next_position(msg)
            self.done[tp] = position

    def commit(self, positions: dict[TP, int]) -> None:
        """Commit ``positions`` synchronously; forget those committed (or refused: see the module docstring)."""
        if not positions:
            return
        offsets = [TopicPartition(topic, partition, offset) for (topic, partition), offset in positions.items()]
        try:
            self.consumer.commit(offsets=offsets, asynchronous=False)
        except KafkaException as exc:
            log(f"commit refused, the next owner reads these records again: {exc}")
        for tp in list(positions):
            self.done.pop(tp, None)

    # ------------------------------------------------------------------ the rebalance listener
    def on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        log(f"assigned {sorted(p.partition for p in partitions)}")

    def on_revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        gone = {(p.topic, p.partition) for p in partitions}
        self.commit({tp: offset for tp, offset in self.done.items() if tp in gone})
        self.drop(gone)

    def on_lost(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self.drop({(p.topic, p.partition) for p in partitions})

    def drop(self, gone: Iterable[TP]) -> None:
        """Forget the work of partitions no longer ours: buffered records and uncommitted positions."""
        gone = set(gone)
        self.buffer = deque(m for m in self.buffer if (m.topic(), m.partition()) not in gone)
        for tp in gone:
            self.done.pop(tp, None)


def serve(service_class: type[OrderService]) -> None:
    """Build the consumer from the environment, run ``service_class`` on it, close it on the way out."""
    settings = ConsumerSettings.from_environ()
    consumer = Consumer(settings.confluent())
    try:
        service_class(consumer, settings).run()
    finally:
        consumer.close()  # revokes (on_revoke commits what was processed) and leaves the group


def main() -> None:
    serve(OrderService)


if __name__ == "__main__":
    main()
