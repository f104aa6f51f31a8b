"""Benchmark: ZooKeeper + 3 brokers + Toxiproxy in containers until usable, against the local backend.

"Usable" is the same readiness for both backends (LocalCluster._wait_usable:
controller elected, every broker registered, ``__consumer_offsets`` led, an
``acks=all`` produce acknowledged through a proxy).

* **cold**: our dockerd has just been (re)started and the cluster's containers
  are created from the cached images (what a fresh ``make test`` session sees
  after the one-time build); the engine start is timed separately;
* **warm**: the engine is already up, containers created afresh;
* **local**: :class:`LocalCluster`, measured in the same run, alternating
  local, docker-cold, local, docker-warm so drift hits every figure alike;
  ratios are docker / the local run just before it;
* **one-time image build** (``--rebuild``): removes our Kafka and Toxiproxy
  images (and with ``--rebuild-base`` the debootstrap base too) and times
  :func:`chaos.cluster.images.ensure_images`.

    python bench/cluster_start_docker.py [--runs 3] [--rebuild] [--rebuild-base] [--json]

``--warm-only`` reuses a running engine and times warm starts only, so the
benchmark can run inside the engine's own network namespace, where the docker
backend uses its bridge network (a cold start would need a new namespace)::

    scripts/docker-engine.sh run --netns kcb -- .venv/bin/python bench/cluster_start_docker.py --warm-only

Needs root and ``docker.io`` (``scripts/docker-engine.sh install``); stops only a
dockerd it started.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

import docker

from chaos.cluster.container_cluster import DockerCluster
from chaos.cluster.container_engine import DockerEngine, EngineUnavailable
from chaos.cluster.images import base_tag, ensure_images
from chaos.cluster.local import LocalCluster
from chaos.cluster.runtime import kafka_runtime, toxiproxy_runtime
from chaos.model.cluster import ClusterSpec


def timed_start(make) -> tuple[float, float]:
    """(seconds until usable, seconds to tear down)."""
    t0 = time.monotonic()
    cluster = make()
    cluster.start()
    started = time.monotonic() - t0
    t1 = time.monotonic()
    cluster.stop()
    return started, time.monotonic() - t1


def rebuild_images(engine: DockerEngine, base_too: bool) -> dict[str, float]:
    client = docker.DockerClient(base_url=engine.docker_host, timeout=600)
    for img in client.images.list(filters={"label": "kafka-chaos.image"}):
        if base_too or base_tag() not in img.tags:
            for tag in img.tags:
                if base_too or not tag.startswith("kafka-chaos/base:"):
                    client.images.remove(tag, force=True)
    t0 = time.monotonic()
    images = ensure_images(client, kafka_runtime(), toxiproxy_runtime(), progress=lambda m: print("  " + m, file=sys.stderr))
    return {**images.build_seconds, "total": time.monotonic() - t0}


def fmt(xs: list[float]) -> str:
    return f"min {min(xs):6.2f}  median {statistics.median(xs):6.2f}  max {max(xs):6.2f}"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--brokers", type=int, default=3)
    ap.add_argument("--rebuild", action="store_true", help="time the Kafka + Toxiproxy image builds")
    ap.add_argument("--rebuild-base", action="store_true", help="also time the debootstrap base image")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--warm-only", action="store_true", help="reuse the running engine; warm starts only")
    args = ap.parse_args()
    spec = ClusterSpec.build(brokers=args.brokers)
    engine = DockerEngine()
    if args.warm_only:
        return warm_only(engine, spec, args)
    if engine.running() is not None:
        sys.exit("a kafka-chaos dockerd is already running: stop it (scripts/docker-engine.sh stop) "
                 "so cold starts can restart it")
    try:
        t0 = time.monotonic()
        engine.start()
        engine_starts = [time.monotonic() - t0]
    except EngineUnavailable as exc:
        sys.exit(f"docker engine unavailable: {exc}")
    try:
        build = rebuild_images(engine, args.rebuild_base) if (args.rebuild or args.rebuild_base) else None
        images = ensure_images(docker.DockerClient(base_url=engine.docker_host, timeout=600),
                               kafka_runtime(), toxiproxy_runtime())
        local = lambda: LocalCluster(spec)  # noqa: E731
        in_docker = lambda: DockerCluster(spec, docker_host=engine.docker_host, images=images)  # noqa: E731
        timed_start(local)  # warm-up: page cache for the jars, as bench/cluster_start.py does
        res: dict[str, list[float]] = {k: [] for k in ("local", "cold", "warm", "stop_local", "stop_docker",
                                                       "ratio_cold", "ratio_warm")}
        for _ in range(args.runs):
            s, t = timed_start(local)
            res["local"].append(s), res["stop_local"].append(t)
            engine.stop()
            t0 = time.monotonic()
            engine.start()
            engine_starts.append(time.monotonic() - t0)
            s, t = timed_start(in_docker)
            res["cold"].append(s), res["stop_docker"].append(t), res["ratio_cold"].append(s / res["local"][-1])
            s, t = timed_start(local)
            res["local"].append(s), res["stop_local"].append(t)
            s, t = timed_start(in_docker)
            res["warm"].append(s), res["stop_docker"].append(t), res["ratio_warm"].append(s / res["local"][-1])
    finally:
        engine.stop()
    out = {"cpus": os.cpu_count(), "brokers": args.brokers, "runs": args.runs, "engine_start": engine_starts,
           "image_build": build, **res}
    if args.json:
        print(json.dumps(out, indent=2))
        return
    print(f"ZooKeeper + {args.brokers} brokers + Toxiproxy until usable, {args.runs} rounds, "
          f"{os.cpu_count()} cpus (seconds)")
    print(f"  local backend (same run)                {fmt(res['local'])}")
    print(f"  docker, cold (engine just started)      {fmt(res['cold'])}")
    print(f"  docker, warm                            {fmt(res['warm'])}")
    print(f"  ratio docker cold / local (paired)      {fmt(res['ratio_cold'])}")
    print(f"  ratio docker warm / local (paired)      {fmt(res['ratio_warm'])}")
    print(f"  teardown local                          {fmt(res['stop_local'])}")
    print(f"  teardown docker (containers removed)    {fmt(res['stop_docker'])}")
    print(f"  dockerd start until /_ping answers      {fmt(engine_starts)}")
    if build:
        print("  one-time image build: " + ", ".join(f"{k} {v:.1f}" for k, v in build.items()))


def warm_only(engine: DockerEngine, spec: ClusterSpec, args) -> None:
    try:
        engine.start()  # reuses the engine of `docker-engine.sh run` (never stops it)
    except EngineUnavailable as exc:
        sys.exit(f"docker engine unavailable: {exc}")
    images = ensure_images(docker.DockerClient(base_url=engine.docker_host, timeout=600),
                           kafka_runtime(), toxiproxy_runtime())
    local = lambda: LocalCluster(spec)  # noqa: E731
    modes: list[str] = []

    def in_docker():
        c = DockerCluster(spec, docker_host=engine.docker_host, images=images)
        modes.append(c)
        return c

    timed_start(local)
    res: dict[str, list[float]] = {"local": [], "warm": [], "ratio_warm": []}
    for _ in range(args.runs):
        res["local"].append(timed_start(local)[0])
        res["warm"].append(timed_start(in_docker)[0])
        res["ratio_warm"].append(res["warm"][-1] / res["local"][-1])
    network = modes[-1].network_mode
    if args.json:
        print(json.dumps({"network": network, **res}, indent=2))
        return
    print(f"ZooKeeper + {args.brokers} brokers + Toxiproxy until usable, warm engine, docker network {network}, "
          f"{args.runs} rounds, {os.cpu_count()} cpus (seconds)")
    print(f"  local backend (same run)                {fmt(res['local'])}")
    print(f"  docker, warm                            {fmt(res['warm'])}")
    print(f"  ratio docker warm / local (paired)      {fmt(res['ratio_warm'])}")


if __name__ == "__main__":
    main()
