"""Benchmark: what the ``kafka`` toxic costs on a link where it matches nothing (issue 33).

One broker, one client lane. The same workload runs through ``lane0.broker-1`` with no toxic (plain) and with an
``rpc`` fault's two toxics that match an API the workload never sends (DescribeAcls): every request and answer
is still re-framed and its header read. Rounds alternate A B A B so drift hits both. Per round:

* throughput: 20,000 records of 100 bytes produced asynchronously (linger 5 ms), until flushed;
* p99 produce latency: 1,000 records, each awaited before the next (one Produce RPC each);
* p99 commit latency: 500 synchronous OffsetCommits of one consumer (one OffsetCommit RPC each);
* Toxiproxy's CPU (user + system, psutil) per 10,000 RPCs of the two latency phases.

    .venv/bin/python bench/rpc_toxic.py [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import psutil
from confluent_kafka import Consumer, Producer, TopicPartition

from chaos.cluster.local import LocalCluster
from chaos.cluster.toxiproxy import Stream, Toxic, ToxicType
from chaos.model.cluster import ClusterSpec
from chaos.model.kafka_api import API_KEYS

LINK, LANE, TOPIC = "lane0.broker-1", "lane0", "bench-rpc"


def toxics(name: str) -> list[Toxic]:
    attrs = {"fault": name, "api_key": API_KEYS["DescribeACLs"], "action": "drop_request", "error_code": 0,
             "delay_ms": 0, "count": 0, "probability": 1.0, "seed": 1}
    return [Toxic(f"{name}-responses", ToxicType.KAFKA, Stream.DOWNSTREAM, 1.0, {**attrs, "side": "responses"}),
            Toxic(f"{name}-requests", ToxicType.KAFKA, Stream.UPSTREAM, 1.0, {**attrs, "side": "requests"})]


def p99(xs: list[float]) -> float:
    return statistics.quantiles(xs, n=100)[98]


def one_round(cluster: LocalCluster, toxic: bool, k: int) -> dict[str, float]:
    bootstrap = cluster.bootstrap(LANE)
    added = toxics(f"bench-{k}") if toxic else []
    for t in added:
        cluster.add_toxic(LINK, t)
    proxy = psutil.Process(cluster.processes()["toxiproxy"].pid)
    try:
        p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "all"})
        p.produce(TOPIC, b"warm")
        p.flush(30)
        payload = b"x" * 100
        t0 = time.monotonic()
        for _ in range(20_000):
            while True:
                try:
                    p.produce(TOPIC, payload)
                    break
                except BufferError:
                    p.poll(0.01)
        p.flush(60)
        throughput = 20_000 / (time.monotonic() - t0)

        cpu0 = sum(proxy.cpu_times()[:2])
        lat = []
        sync = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "acks": "all"})
        for _ in range(1_000):
            s = time.monotonic()
            sync.produce(TOPIC, payload)
            sync.flush(30)
            lat.append((time.monotonic() - s) * 1000)
        c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-rpc-{k}", "enable.auto.commit": False})
        commits = []
        for i in range(500):
            s = time.monotonic()
            c.commit(offsets=[TopicPartition(TOPIC, 0, i + 1)], asynchronous=False)
            commits.append((time.monotonic() - s) * 1000)
        c.close()
        cpu = sum(proxy.cpu_times()[:2]) - cpu0
        return {"throughput": throughput, "produce_p99_ms": p99(lat), "commit_p99_ms": p99(commits),
                "cpu_s_per_10k_rpcs": cpu / 1500 * 10_000}
    finally:
        for t in added:
            cluster.remove_toxic(LINK, t.name)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    out: dict[str, list[dict[str, float]]] = {"plain": [], "toxic": []}
    with LocalCluster(ClusterSpec.build(brokers=1, lanes=1)) as cluster:
        cluster.admin.create_topic(TOPIC, 1, 1)
        for k in range(args.rounds * 2):
            which = "toxic" if k % 2 else "plain"
            out[which].append(one_round(cluster, which == "toxic", k))
    med = {w: {m: statistics.median(r[m] for r in rs) for m in rs[0]} for w, rs in out.items()}
    ratio = {m: med["toxic"][m] / med["plain"][m] for m in med["plain"]}
    print(json.dumps({"rounds": out, "median": med, "toxic_over_plain": ratio}, indent=1))


if __name__ == "__main__":
    main()
