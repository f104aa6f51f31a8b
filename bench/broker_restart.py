"""Benchmark: how long a SIGKILLed broker takes to come back, with and without earlier runs' topics.

A pooled cluster (explore, the nightly) used to keep every run's topic. A broker started again after SIGKILL
loads every log it holds before it registers, so its restart slowed as runs piled up. The pool now deletes
the topics earlier runs created before it hands the cluster out again
(``KafkaCluster.drop_run_topics``). This measures, on one cluster and in one invocation:

1. ``fresh``: the restart of a broker on a cluster without run topics;
2. ``kept``: the same after ``--topics`` run-sized topics (12 partitions, replication 3, ``--records``
   records each, as a run's producer leaves them) were created and noted as runs' topics;
3. the cost the pool now adds before a run: ``drop_run_topics`` of one run's topic;
4. ``dropped``: the restart again once the pool's call deleted the rest and the brokers removed their logs
   from disk (``log.segment.delete.delay.ms``, 1 s in this project's brokers; a broker's first removal pass
   comes ``log.initial.task.delay.ms``, 30 s, after its start, which the wait is reported with).

A restart is what the kill fault's confirmed heal waits for: SIGKILL, start the broker on its data (in
ZooKeeper mode after its old session's znode is gone), until every running broker lists it
(``wait_broker_registered``). Restarts cycle over the brokers; the cluster is healed between them.

    .venv/bin/python bench/broker_restart.py [--kafka-version 3.9.1] [--topics 120] [--restarts 3]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

from confluent_kafka import Producer

from chaos.cluster.local import LocalCluster
from chaos.model.cluster import ClusterSpec


def restart_s(cluster: LocalCluster, node: str) -> float:
    cluster.kill(node)
    t0 = time.monotonic()
    cluster.start_node(node)
    cluster.wait_broker_registered(node, timeout=120)
    took = time.monotonic() - t0
    cluster.heal()
    return took


def restarts(cluster: LocalCluster, n: int) -> list[float]:
    brokers = [b.node for b in cluster.topology.brokers]
    return [restart_s(cluster, brokers[i % len(brokers)]) for i in range(n)]


def fill(cluster: LocalCluster, topics: list[str], records: int) -> None:
    """Create ``topics`` as runs do (noted on the cluster first) and leave ``records`` records in each."""
    producer = Producer({"bootstrap.servers": cluster.bootstrap(), "acks": "all", "linger.ms": 20,
                         "log_level": 0})
    for topic in topics:
        cluster.note_run_topic(topic)
        cluster.admin.create_topic(topic, 12, 3)
        for i in range(records):
            producer.produce(topic, value=b"x" * 100, key=str(i).encode())
            if i % 1000 == 999:
                producer.poll(0)
        producer.flush(60)


def fmt(xs: list[float]) -> str:
    return f"min {min(xs):6.2f}  median {statistics.median(xs):6.2f}  max {max(xs):6.2f}"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--kafka-version", default="3.9.1")
    ap.add_argument("--topics", type=int, default=120, help="run-sized topics left by earlier runs")
    ap.add_argument("--records", type=int, default=2000, help="records in each")
    ap.add_argument("--restarts", type=int, default=3, help="broker restarts measured in each state")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    with LocalCluster(ClusterSpec.build(kafka_version=args.kafka_version)) as cluster:
        fresh = restarts(cluster, args.restarts)
        topics = [f"chaos-bench{i:05d}" for i in range(args.topics)]
        t0 = time.monotonic()
        fill(cluster, topics, args.records)
        fill_s = time.monotonic() - t0
        kept = restarts(cluster, args.restarts)
        # what the pool adds before a run: one run's topic deleted (a run has one, two with an extra topic)
        drops: list[float] = []
        cluster.admin.topics()  # the admin client connected: not part of the first measurement
        for topic in topics[:3]:
            t1 = time.monotonic()
            assert not cluster.admin.delete_topics([topic])  # the request drop_run_topics sends, for one topic
            drops.append(time.monotonic() - t1)
        cluster.drop_run_topics()  # the rest (the three already gone count as deleted)
        left = {t for t in topics if t in cluster.admin.topics()}
        # a deleted log is renamed <topic>-<partition>.<uuid>-delete and removed file.delete.delay.ms later;
        # a broker started before that loads it again
        t2 = time.monotonic()
        while any(cluster.workdir.rglob("*-delete")) and time.monotonic() - t2 < 180:
            time.sleep(0.5)
        removed_s = time.monotonic() - t2
        dropped = restarts(cluster, args.restarts)
    out = {"cpus": os.cpu_count(), "kafka_version": args.kafka_version, "topics": args.topics,
           "records": args.records, "fill_s": round(fill_s, 1), "fresh": fresh, "kept": kept, "dropped": dropped,
           "drop_one_run_s": drops, "still_listed_after_drop": sorted(left), "logs_removed_after_s": round(removed_s, 1),
           "ratio_kept_over_dropped": statistics.median(kept) / statistics.median(dropped)}
    if args.json:
        print(json.dumps(out, indent=2))
        return
    print(f"Kafka {args.kafka_version}, 3 brokers, {os.cpu_count()} cpus: SIGKILLed broker until registered again "
          f"(seconds, {args.restarts} restarts each)")
    print(f"  fresh cluster                               {fmt(fresh)}")
    print(f"  {args.topics} runs' topics kept ({args.records} records each)".ljust(46) + fmt(kept))
    print(f"  after the pool deleted them                 {fmt(dropped)}")
    print(f"  ratio kept / deleted (medians)              {out['ratio_kept_over_dropped']:.2f}")
    print(f"  pool's call for one run's topic             {fmt(drops)}")
    print(f"  topics still listed after the call          {len(left)}")
    print(f"  their logs removed from disk after          {removed_s:.1f} s")


if __name__ == "__main__":
    main()
