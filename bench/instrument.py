"""Benchmark: what instrumenting the application's consumer costs (issue 14).

The bare ``confluent_kafka.Consumer`` and ``chaos.instrument.Consumer`` (recording to an events file)
drain the same pre-filled topic through the proxies, each time as a fresh group from offset 0, in
pairs within one run, the order alternating (instrumented first in odd pairs), with two loop styles:
``consume`` (batches of 500) and ``poll`` (one record per call, the per-record worst case: every
record is one handover and one ``consumed`` event). Records/s is counted from the first record
returned to the last; the ratio is per pair. Runs a cluster: take the lock.

    flock /tmp/kc-cluster.lock .venv/bin/python bench/instrument.py [--records 50000] [--pairs 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

import confluent_kafka
from confluent_kafka import Producer

from chaos.cluster.local import LocalCluster
from chaos.instrument.consumer import Consumer as Instrumented
from chaos.instrument.destination import EVENTS_VAR, GROUP_VAR, MEMBER_VAR
from chaos.model.cluster import ClusterSpec

PARTITIONS = 12
#: a drain that has not finished by then is a broken run, not a slow one
DRAIN_TIMEOUT_S = 300


def drain(bootstrap: str, topic: str, records: int, instrumented: bool, style: str, tag: str, out: Path) -> float:
    group = f"g-{tag}"
    if instrumented:
        os.environ.update({EVENTS_VAR: str(out / f"{tag}.jsonl"), MEMBER_VAR: tag, GROUP_VAR: group})
    cls = Instrumented if instrumented else confluent_kafka.cimpl.Consumer
    c = cls({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
             "enable.auto.commit": False, "log_level": 0})
    for var in (EVENTS_VAR, MEMBER_VAR, GROUP_VAR):
        os.environ.pop(var, None)
    c.subscribe([topic])
    n, t0, t1 = 0, None, None
    deadline = time.monotonic() + DRAIN_TIMEOUT_S
    while n < records:
        if time.monotonic() > deadline:
            raise SystemExit(f"drain {tag}: {n} of {records} records after {DRAIN_TIMEOUT_S}s")
        if style == "consume":
            got = sum(1 for m in c.consume(500, 1.0) if m.error() is None)
        else:
            m = c.poll(1.0)
            got = 1 if m is not None and m.error() is None else 0
        if got:
            if t0 is None:
                t0 = time.perf_counter()
            n += got
            t1 = time.perf_counter()
    c.close()
    assert t0 is not None and t1 is not None
    return n / max(t1 - t0, 1e-9)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=50_000)
    ap.add_argument("--pairs", type=int, default=3)
    args = ap.parse_args()
    with LocalCluster(ClusterSpec.build(brokers=1, lanes=1)) as cluster, tempfile.TemporaryDirectory() as d:
        topic = "bench"
        cluster.admin.create_topic(topic, PARTITIONS, 1)
        bootstrap = cluster.bootstrap("lane0")
        p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "log_level": 0})
        for i in range(args.records):
            p.produce(topic, key=str(i).encode(), value=b"x" * 100)
            if i % 10000 == 0:
                p.poll(0)
        assert p.flush(60) == 0
        for style in ("consume", "poll"):
            inst, bare = [], []
            for i in range(args.pairs):
                order = (True, False) if i % 2 == 0 else (False, True)
                for instrumented in order:
                    tag = f"{style}-{'inst' if instrumented else 'bare'}-{i}"
                    rate = drain(bootstrap, topic, args.records, instrumented, style, tag, Path(d))
                    (inst if instrumented else bare).append(rate)
            ratios = [a / b for a, b in zip(inst, bare, strict=True)]
            print(f"{style}: {args.records} records x {args.pairs} pairs: instrumented median "
                  f"{statistics.median(inst):,.0f} rec/s, bare {statistics.median(bare):,.0f} rec/s, "
                  f"ratio median {statistics.median(ratios):.2f} (min {min(ratios):.2f}, max {max(ratios):.2f})")


if __name__ == "__main__":
    main()
