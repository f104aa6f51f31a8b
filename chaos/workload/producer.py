"""Producer worker: unique values, acks=all, idempotence; every outcome recorded.

Values are ``<run_id>:<name>:<n>``. Unkeyed producers (``keys: None``) give
every record its own key ``<n>`` so records spread over partitions by
librdkafka's default partitioner (``consistent_random``). A keyed producer
(``keys: N``) gives each record one of N keys ``k0..k<N-1>``, drawn by
:func:`key_stream` from the run's seed (``header.json``, written before any
producer starts) and the producer's name, and places it with librdkafka's
Java-compatible ``murmur2_random`` / ``murmur2`` partitioner. ``<n>`` counts
up per producer, so restricted to one key it is that key's sequence number:
the key-placement checker reads it back from the value to judge per-key
order (docs/architecture.md, "Keyed workload and key placement"). The
delivery report decides the event:
``send_ok`` (topic, partition, offset), or — via :mod:`chaos.outcome`, the one
table that decides — ``send_fail`` / ``send_unknown``. Records still in flight
when the worker is told to stop and cannot be flushed are ``send_unknown``;
records in flight when it is SIGKILLed have no outcome at all (the checkers
demand delivery only of ``send_ok`` records).

Idempotence (KIP-98) keeps retries from duplicating records, so an acked
record is in the log exactly once.
"""

from __future__ import annotations

import json
import random
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import confluent_kafka
from confluent_kafka import KafkaError, Producer

from chaos.history.event import Kind
from chaos.history.writer import EventWriter
from chaos.outcome import Operation, Outcome, classify
from chaos.workload.clients.confluent import librdkafka_version
from chaos.workload.spec import WorkerConfig


def run_producer(cfg: WorkerConfig) -> int:
    spec = cfg.producer
    assert spec is not None
    events = EventWriter.for_run(cfg.run_dir, cfg.name)
    stop = {"flag": False}
    signal.signal(signal.SIGTERM, lambda *_: stop.__setitem__("flag", True))
    signal.signal(signal.SIGINT, lambda *_: stop.__setitem__("flag", True))
    pending: dict[str, str] = {}  # value -> key, until its delivery report
    keys = key_stream(_seed_material(cfg), spec.keys) if spec.keys is not None else None

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

    partitioner = spec.key_partitioner
    producer = Producer({
        # keyed: the Java producer's placement (murmur2); unkeyed: librdkafka's default, as before
        **({"partitioner": partitioner.value} if partitioner is not None else {}),
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
    held: str | None = None  # the key of record n while produce() refuses it (queue full): tried again with it
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
        key = str(n) if keys is None else held or next(keys)
        try:
            producer.produce(cfg.topic, key=key.encode(), value=value.encode(), on_delivery=on_delivery)
        except BufferError:
            held = key  # record n is tried again with the same key: the key sequence stays the seed's
            producer.poll(0.1)
            continue
        held = None
        pending[value] = key
        n += 1
        producer.poll(0)
    # drain: give in-flight records their delivery time, then call the rest unknown
    producer.flush(spec.delivery_timeout_ms / 1000 + 1)
    for value, key in list(pending.items()):
        events.emit(Kind.SEND_UNKNOWN, topic=cfg.topic, key=key, value=value, error_name="_NOT_FLUSHED")
    events.close()
    return 0


def key_stream(seed_material: str, keys: int) -> Iterator[str]:
    """The keys of a keyed producer's records, in order: ``k<i>`` with ``i`` uniform in ``[0, keys)``, from a
    generator seeded by ``seed_material`` (the run's seed and the producer's name), so a run's key sequence is
    reproducible from its seed. Bounded only by the caller (one key per record)."""
    rng = random.Random(seed_material)
    while True:
        yield f"k{rng.randrange(keys)}"


def _seed_material(cfg: WorkerConfig) -> str:
    """``<seed>:<producer name>``; the seed is the run's (``header.json``), the run id when the run has none."""
    try:
        seed = json.loads((Path(cfg.run_dir) / "header.json").read_text()).get("seed")
    except (OSError, ValueError):
        seed = None
    return f"{cfg.run_id if seed is None else seed}:{cfg.name}"


def client_version() -> str:
    return f"{confluent_kafka.__version__} (librdkafka {librdkafka_version()})"
