"""White-box instrumentation of the application's own consumer (issue 14, part 1).

``chaos.instrument.Consumer`` is a drop-in for ``confluent_kafka.Consumer`` (and
``chaos.instrument.KafkaConsumer`` for kafka-python's ``kafka.KafkaConsumer``, classic protocol,
:mod:`chaos.instrument.kafka_python`) that records, to the
run's event files in the one schema (:mod:`chaos.history.event`), what the application's consumer
did: ``member_start``; ``assigned`` / ``revoked`` / ``lost`` around the application's own rebalance
callbacks (which still run); every record returned by ``poll``/``consume`` with the generation or
KIP-848 member epoch the client reported then, as ``consumed`` once processed; every commit (sync,
async, auto) with the offsets sent and its outcome; errors; ``close`` → ``member_stop``. Details in
:mod:`chaos.instrument.consumer`.

**Processed.** By default a record is processed once the application polls again (or closes);
``chaos.instrument.processed(msg)`` marks one precisely and switches its consumer to that explicit
mode (:mod:`chaos.instrument.ledger` says how either fits the delivery checker).

**Where events go.** Only where the environment says (:mod:`chaos.instrument.destination`):
``KAFKA_CHAOS_EVENTS`` (this member's events file), ``KAFKA_CHAOS_MEMBER`` (its source name),
``KAFKA_CHAOS_GROUP`` (the group under test). With none set, the classes are the library's
behaviour exactly and record nothing, so an application can ship with them.

**No code change: the mechanism.** A process given ``chaos/instrument/site`` on ``PYTHONPATH`` and
``KAFKA_CHAOS_INSTRUMENT=1`` is instrumented (kafka-chaos starting the application's own members this
way, ``app:`` / ``command:`` members, is not built yet: issue 14 parts 2-3). Python's ``site``
module imports the ``sitecustomize`` module it finds on the path at start-up, before any of the
application's code; ours calls :func:`chaos.instrument.hook.install`, which replaces
``confluent_kafka.Consumer`` by the instrumented class, then runs any other ``sitecustomize`` further
along the path. The application's ``from confluent_kafka import Consumer`` then gets the
instrumented class. By hand::

    PYTHONPATH=$(python -c 'import chaos.instrument, os; print(os.path.dirname(chaos.instrument.__file__))')/site \\
    KAFKA_CHAOS_INSTRUMENT=1 KAFKA_CHAOS_EVENTS=run/events/consumer-0.jsonl KAFKA_CHAOS_GROUP=g \\
    python -m my_service

or in code, before importing the library's class: ``import chaos.instrument.hook;
chaos.instrument.hook.install()``.

The hook swaps kafka-python's ``kafka.KafkaConsumer`` the same way (``from kafka import KafkaConsumer``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from chaos.instrument.recorder import processed

if TYPE_CHECKING:
    from chaos.instrument.consumer import Consumer
    from chaos.instrument.kafka_python import KafkaConsumer

__all__ = ["Consumer", "KafkaConsumer", "processed"]


def __getattr__(name: str) -> Any:
    # a client library is imported only when its class is asked for: ``processed`` and the hook's
    # module must import without either
    if name == "Consumer":
        from chaos.instrument.consumer import Consumer

        return Consumer
    if name == "KafkaConsumer":
        from chaos.instrument.kafka_python import KafkaConsumer

        return KafkaConsumer
    raise AttributeError(f"module 'chaos.instrument' has no attribute {name!r}")
