"""A consumer kafka-chaos knows nothing about: run as a ``command:`` member, judged from the coordinator's side.

Any program could stand here (Go, Node, a packaged service): kafka-chaos starts it with the member
environment (``KAFKA_BOOTSTRAP_SERVERS``, ``KAFKA_GROUP_ID``, ``KAFKA_TOPIC``, ``KAFKA_CLIENT_ID``, the timeouts)
and does not instrument it. It is plain confluent-kafka: poll, process, commit synchronously after processing,
close on SIGTERM. Since it records nothing itself, the checkers that need a member's own account (what it
processed, what it owned when, the generation of its commits) answer ``unknown``, never ``true``.

When kafka-chaos names an output topic (``$KAFKA_CHAOS_OUTPUT_TOPIC``: the member's spec says
``reports_processed: true``), it reports each record it processed there — key ``$KAFKA_CLIENT_ID``, value
``{"partition": P, "offset": O}`` — and flushes those reports before it commits, so a commit never covers a
record it has not reported. kafka-chaos reads them when the run ends, as what this member processed.

Two settings make the broken variant (``broken-commit-before-process.yaml``): ``COMMIT_BEFORE_PROCESSING=1``
commits each batch as soon as it is polled, and ``PROCESSING_MS`` (default 2) is the time each record takes.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from types import FrameType

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer

stopping = False


def stop(signum: int, frame: FrameType | None) -> None:
    global stopping
    stopping = True


def commit(consumer: Consumer) -> None:
    try:
        consumer.commit(asynchronous=False)
    except KafkaException as exc:
        print(f"commit refused: {exc}", file=sys.stderr, flush=True)


def main() -> int:
    signal.signal(signal.SIGTERM, stop)
    env = os.environ
    session_ms = int(env.get("KAFKA_SESSION_TIMEOUT_MS", "45000"))
    conf = {"bootstrap.servers": env["KAFKA_BOOTSTRAP_SERVERS"], "group.id": env["KAFKA_GROUP_ID"],
            "client.id": env.get("KAFKA_CLIENT_ID", "black-box"),  # how the coordinator's evidence names it
            "enable.auto.commit": False, "auto.offset.reset": "earliest",
            "max.poll.interval.ms": int(env.get("KAFKA_MAX_POLL_INTERVAL_MS", "300000"))}
    if env.get("KAFKA_GROUP_PROTOCOL", "classic") == "consumer":
        conf["group.protocol"] = "consumer"
    else:
        conf.update({"session.timeout.ms": session_ms, "heartbeat.interval.ms": max(100, session_ms // 3),
                     "partition.assignment.strategy": env.get("KAFKA_PARTITION_ASSIGNMENT_STRATEGY", "range")})
    consumer = Consumer(conf)
    consumer.subscribe([env["KAFKA_TOPIC"]])
    output = env.get("KAFKA_CHAOS_OUTPUT_TOPIC")
    reports = Producer({"bootstrap.servers": env["KAFKA_BOOTSTRAP_SERVERS"], "acks": "all",
                        "enable.idempotence": True}) if output else None
    commit_first = env.get("COMMIT_BEFORE_PROCESSING") == "1"
    processing_s = float(env.get("PROCESSING_MS", "2")) / 1000
    try:
        while not stopping:
            records = []
            for m in consumer.consume(100, 0.5):
                err = m.error()
                if err is None:
                    records.append(m)
                elif err.code() != KafkaError._PARTITION_EOF:
                    print(f"poll: {err}", file=sys.stderr, flush=True)
            if commit_first and records:
                commit(consumer)  # the bug: the positions after this batch, none of it processed yet
            for m in records:
                time.sleep(processing_s)  # the processing
                if reports is not None:
                    reports.produce(output, key=conf["client.id"],
                                    value=json.dumps({"partition": m.partition(), "offset": m.offset()}))
            if reports is not None and reports.flush(10) > 0:
                print("reports not delivered within 10 s; not committing", file=sys.stderr, flush=True)
                continue
            if not commit_first and records:
                commit(consumer)  # the positions after this batch: all processed and reported
    finally:
        consumer.close()
        if reports is not None:
            reports.flush(10)
    return 0


if __name__ == "__main__":
    sys.exit(main())
