"""Producer worker: unique values, acks=all, idempotence; every outcome recorded.

Values are ``<run_id>:<name>:<n>``, keys ``<n>`` so records spread over
partitions by key hash. The delivery report decides the event:
``send_ok`` (topic, partition, offset), or — via :mod:`chaos.outcome`, the one
table that decides — ``send_fail`` / ``send_unknown``. Records still in flight
when the worker is told to stop and cannot be flushed are ``send_unknown``;
records in flight when it is SIGKILLed have no outcome at all (the checkers
demand delivery only of ``send_ok`` records).

Idempotence (KIP-98) keeps retries from duplicating records, so an acked
record is in the log exactly once.
"""

from __future__ import annotations

import signal
import time

import confluent_kafka
from confluent_kafka import KafkaError, Producer

from chaos.history.event import Kind
from chaos.history.writer import EventWriter
from chaos.outcome import Operation, Outcome, classify
from chaos.workload.spec import WorkerConfig


def run_producer(cfg: WorkerConfig) -> int:
    spec = cfg.producer
    assert spec is not None
    events = EventWriter.for_run(cfg.run_dir, cfg.name)
    stop = {"flag": False}
    signal.signal(signal.SIGTERM, lambda *_: stop.__setitem__("flag", True))
    signal.signal(signal.SIGINT, lambda *_: stop.__setitem__("flag", True))
    pending: dict[str, str] = {}  # value -> key, until its delivery report

    def on_delivery(err: KafkaError | None, msg) -> None:
        value = msg.value().decode()
        key = msg.key().decode() if msg.key() is not None else None
        pending.pop(value, None)
        if err is None:
            events.emit(Kind.SEND_OK, topic=msg.topic(), partition=msg.partition(), offset=msg.offset(),
                        key=key, value=value)
            return
        outcome = classify(Operation.PRODUCE, err.code(), err.name())
        if outcome is Outcome.FAIL:
            events.emit(Kind.SEND_FAIL, topic=msg.topic(), key=key, value=value, error_code=err.code(),
                        error_name=err.name())
        else:
            events.emit(Kind.SEND_UNKNOWN, topic=msg.topic(), key=key, value=value, error_name=err.name())

    producer = Producer({
        "bootstrap.servers": cfg.bootstrap,
        "client.id": cfg.name,
        "acks": "all",
        "enable.idempotence": True,
        "linger.ms": 5,
        "delivery.timeout.ms": spec.delivery_timeout_ms,
        "reconnect.backoff.max.ms": 1000,
        "log_level": 3,
    })
    interval = 1.0 / spec.rate if spec.rate > 0 else 0.0
    n = 0
    next_at = time.monotonic()
    while not stop["flag"] and (spec.count is None or n < spec.count):
        if interval:
            delay = next_at - time.monotonic()
            if delay > 0:
                producer.poll(min(delay, 0.1))
                continue
            next_at += interval
        value = f"{cfg.run_id}:{cfg.name}:{n}"
        try:
            producer.produce(cfg.topic, key=str(n).encode(), value=value.encode(), on_delivery=on_delivery)
        except BufferError:
            producer.poll(0.1)
            continue
        pending[value] = str(n)
        n += 1
        producer.poll(0)
    # drain: give in-flight records their delivery time, then call the rest unknown
    producer.flush(spec.delivery_timeout_ms / 1000 + 1)
    for value, key in list(pending.items()):
        events.emit(Kind.SEND_UNKNOWN, topic=cfg.topic, key=key, value=value, error_name="_NOT_FLUSHED")
    events.close()
    return 0


def client_version() -> str:
    return f"{confluent_kafka.__version__} (librdkafka {confluent_kafka.libversion()[0]})"
