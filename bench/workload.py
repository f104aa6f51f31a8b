"""Benchmark: what recording costs.

1. History writer: events/s that ``EventWriter.emit`` sustains (validated,
   appended and flushed per event), against a bare ``orjson.dumps`` +
   ``os.write`` of the same dicts in the same run (the floor: no validation).
2. End-to-end: records/s of one confluent-kafka member draining a pre-filled
   topic through the proxies, with event logging on (the product) and off
   (a writer that drops events), alternating A B A B in the same run.

    .venv/bin/python bench/workload.py [--events 100000] [--records 50000] [--pairs 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

import orjson
from confluent_kafka import Producer

from chaos.cluster.local import LocalCluster
from chaos.history.event import Kind
from chaos.history.writer import EventWriter
from chaos.model.cluster import ClusterSpec
from chaos.model.workload import ConsumerSpec
from chaos.workload.clients.confluent import ConfluentClient
from chaos.workload.consumer import Member
from chaos.workload.spec import WorkerConfig


def consumed_fields(i: int) -> dict:
    return {"group": "g", "topic": "t", "partition": i % 12, "offsets": list(range(i, i + 20)),
            "generation": 3, "member_id": "rdkafka-1234"}


def bench_writer(n: int) -> tuple[float, float]:
    with tempfile.TemporaryDirectory() as d:
        w = EventWriter(Path(d) / "a.jsonl", "consumer-0")
        t0 = time.perf_counter()
        for i in range(n):
            w.emit(Kind.CONSUMED, **consumed_fields(i))
        w.close(fsync=False)
        product = n / (time.perf_counter() - t0)
        fd = os.open(Path(d) / "b.jsonl", os.O_WRONLY | os.O_APPEND | os.O_CREAT)
        t0 = time.perf_counter()
        for i in range(n):
            os.write(fd, orjson.dumps({"seq": i, "ts": time.time(), "mono_ns": time.monotonic_ns(),
                                       "source": "consumer-0", "kind": "consumed", **consumed_fields(i)}) + b"\n")
        os.close(fd)
        floor = n / (time.perf_counter() - t0)
    return product, floor


class _Dropped:
    """A writer that records nothing (the 'logging off' arm of the comparison)."""

    def emit(self, *a, **k):
        return None

    def close(self, **k):
        return None


class _NoInflight:
    def add(self, entry):
        return 0

    def done(self, token):
        return None


def drain(cluster: LocalCluster, topic: str, records: int, logging: bool, run_dir: Path, tag: str) -> float:
    cfg = WorkerConfig(role="consumer", name=f"bench-{tag}", run_id=tag, run_dir=str(run_dir),
                       bootstrap=cluster.bootstrap("lane0"), topic=topic, group=f"g-{tag}",
                       consumer=ConsumerSpec(max_records=500))
    (run_dir / "workers").mkdir(parents=True, exist_ok=True)
    events = EventWriter.for_run(run_dir, cfg.name) if logging else _Dropped()
    member = Member(cfg, ConfluentClient(cfg), events)  # type: ignore[arg-type]
    if not logging:
        member.inflight = _NoInflight()  # type: ignore[assignment]
    done = {"n": 0, "t0": None}
    original = member._process

    def counting(batch):
        if done["t0"] is None:
            done["t0"] = time.perf_counter()
        original(batch)
        done["n"] += len(batch)
        if done["n"] >= records:
            member.stopping = True

    member._process = counting  # type: ignore[method-assign]
    member.run()
    elapsed = time.perf_counter() - done["t0"]
    member.client.close()
    events.close()
    return records / elapsed


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--events", type=int, default=100_000)
    ap.add_argument("--records", type=int, default=50_000)
    ap.add_argument("--pairs", type=int, default=3)
    args = ap.parse_args()
    prod, floor = zip(*(bench_writer(args.events) for _ in range(3)), strict=False)
    print(f"history writer, {args.events} consumed events x3: median {statistics.median(prod):,.0f} events/s "
          f"(bare orjson+write floor {statistics.median(floor):,.0f}/s, "
          f"ratio {statistics.median(prod) / statistics.median(floor):.2f})")
    with LocalCluster(ClusterSpec.build(brokers=1, lanes=1)) as cluster, tempfile.TemporaryDirectory() as d:
        topic = "bench"
        cluster.admin.create_topic(topic, 12, 1)
        p = Producer({"bootstrap.servers": cluster.bootstrap("lane0"), "linger.ms": 20, "log_level": 0})
        for i in range(args.records):
            p.produce(topic, key=str(i).encode(), value=b"x" * 100)
            if i % 10000 == 0:
                p.poll(0)
        p.flush(60)
        on, off = [], []
        for i in range(args.pairs):
            on.append(drain(cluster, topic, args.records, True, Path(d) / f"on{i}", f"on{i}"))
            off.append(drain(cluster, topic, args.records, False, Path(d) / f"off{i}", f"off{i}"))
        ratios = [a / b for a, b in zip(on, off, strict=False)]
        print(f"consumer drain of {args.records} records, {args.pairs} pairs: logging on median "
              f"{statistics.median(on):,.0f} rec/s, off {statistics.median(off):,.0f} rec/s, "
              f"ratio on/off median {statistics.median(ratios):.2f} (min {min(ratios):.2f}, max {max(ratios):.2f})")


if __name__ == "__main__":
    main()
