"""Benchmark: cold start of ZooKeeper + 3 brokers + Toxiproxy until the cluster is usable.

"Usable" is LocalCluster.start()'s own readiness: controller elected, every
broker registered, __consumer_offsets created with a leader per partition,
and an acks=all produce acknowledged through a proxy. Also measured:
teardown (stop) and reaping the leftovers of a SIGKILLed driver.

The alternative measured in the same run is Kafka's own JVM flags
(``jvm_profile=kafka-default``: 1 GiB heap, G1, full tiered JIT) against this
project's ``fast-start`` profile; runs alternate A B A B so drift hits both.

With ``--modes`` it compares metadata modes instead, in the same run, A B C A B C: ZooKeeper (3.9.1) + 3
brokers, KRaft (4.4.0) with one controller combined into broker-1, and KRaft with 3 isolated controllers
+ 3 brokers — each cold start until usable, ratios against ZooKeeper.

    .venv/bin/python bench/cluster_start.py [--runs 5] [--brokers 3] [--modes]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import textwrap
import time

import psutil

from chaos.cluster.local import LocalCluster
from chaos.model.cluster import ClusterSpec
from chaos.process import Session

MODES = {
    "zookeeper (3.9.1)": {"kafka_version": "3.9.1"},
    "kraft combined (4.4.0)": {"kafka_version": "4.4.0", "controllers": 1, "controller_placement": "combined"},
    "kraft 3 isolated (4.4.0)": {"kafka_version": "4.4.0", "controllers": 3, "controller_placement": "isolated"},
}


def one_start(profile: str, brokers: int, **fields: object) -> tuple[float, float]:
    t0 = time.monotonic()
    cluster = LocalCluster(ClusterSpec.build(brokers=brokers, jvm_profile=profile, **fields))
    cluster.start()
    started = time.monotonic() - t0
    t1 = time.monotonic()
    cluster.stop()
    return started, time.monotonic() - t1


def reap_time(brokers: int) -> float:
    """Start a cluster from a driver thread (no parent-death signal), SIGKILL the driver, time the reap."""
    script = textwrap.dedent(f"""
        import json, threading, time
        from chaos.cluster.local import LocalCluster
        from chaos.cluster.topology import ClusterSpec
        c = LocalCluster(ClusterSpec.build(brokers={brokers}))
        t = threading.Thread(target=c.start); t.start(); t.join()
        st = c.status()
        print(json.dumps([n["pid"] for n in st["nodes"].values()]), flush=True)
        time.sleep(600)
    """)
    driver = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    pids = json.loads(driver.stdout.readline())
    driver.kill()
    driver.wait()
    t0 = time.monotonic()
    Session("bench").close()
    elapsed = time.monotonic() - t0
    assert not any(psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE for p in pids)
    return elapsed


def fmt(xs: list[float]) -> str:
    return f"min {min(xs):6.2f}  median {statistics.median(xs):6.2f}  max {max(xs):6.2f}"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--brokers", type=int, default=3)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--modes", action="store_true", help="ZooKeeper vs KRaft (combined, isolated) instead of JVM flags")
    args = ap.parse_args()
    if args.modes:
        compare_modes(args.runs, args.brokers, args.json)
        return
    one_start("fast-start", args.brokers)  # warm-up: page cache, JIT-less class loading
    res: dict[str, dict[str, list[float]]] = {p: {"start": [], "stop": []} for p in ("fast-start", "kafka-default")}
    for _ in range(args.runs):
        for profile in ("fast-start", "kafka-default"):
            s, t = one_start(profile, args.brokers)
            res[profile]["start"].append(s)
            res[profile]["stop"].append(t)
    reaps = [reap_time(args.brokers) for _ in range(max(1, args.runs // 2))]
    ratios = [a / b for a, b in zip(res["fast-start"]["start"], res["kafka-default"]["start"], strict=False)]
    out = {
        "cpus": os.cpu_count(), "brokers": args.brokers, "runs": args.runs,
        "start_fast": res["fast-start"]["start"], "start_kafka_default": res["kafka-default"]["start"],
        "stop_fast": res["fast-start"]["stop"], "reap": reaps, "ratio_fast_over_default": ratios,
    }
    if args.json:
        print(json.dumps(out, indent=2))
        return
    print(f"ZooKeeper + {args.brokers} brokers + Toxiproxy, cold start until usable, {args.runs} runs, "
          f"{os.cpu_count()} cpus (seconds)")
    print(f"  start, fast-start JVM flags (default)   {fmt(res['fast-start']['start'])}")
    print(f"  start, Kafka's own JVM flags            {fmt(res['kafka-default']['start'])}")
    print(f"  ratio fast-start / Kafka flags (paired) {fmt(ratios)}")
    print(f"  stop (teardown)                         {fmt(res['fast-start']['stop'])}")
    print(f"  reap after SIGKILLed driver             {fmt(reaps)}")


def compare_modes(runs: int, brokers: int, as_json: bool) -> None:
    for fields in MODES.values():
        one_start("fast-start", brokers, **fields)  # warm-up: page cache for each version's jars
    starts: dict[str, list[float]] = {m: [] for m in MODES}
    for _ in range(runs):
        for mode, fields in MODES.items():
            starts[mode].append(one_start("fast-start", brokers, **fields)[0])
    base = next(iter(MODES))
    ratios = {m: [a / b for a, b in zip(starts[m], starts[base], strict=True)] for m in MODES if m != base}
    if as_json:
        print(json.dumps({"cpus": os.cpu_count(), "brokers": brokers, "runs": runs, "start": starts,
                          "ratio_over_zookeeper": ratios}, indent=2))
        return
    print(f"{brokers} brokers + Toxiproxy, cold start until usable, {runs} runs, {os.cpu_count()} cpus (seconds)")
    for mode in MODES:
        print(f"  start, {mode:<28} {fmt(starts[mode])}")
    for mode, r in ratios.items():
        print(f"  ratio {mode} / zookeeper (paired)  {fmt(r)}")


if __name__ == "__main__":
    main()
