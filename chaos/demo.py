"""``make demo``: a real cluster broken and healed in front of you, then the headline experiment.

Part 1 starts ZooKeeper + 3 brokers + Toxiproxy, produces and consumes a few
thousand records through the proxies, proves the proxies carry the traffic (a
link cut stops a broker's clients), kills the leader of a partition and shows
leadership moving, restarts it, and tears everything down (summary in
``OUT/demo.json``, node logs in ``OUT/logs``).

Part 2 runs the headline experiment — the group coordinator SIGKILLed the
moment a rebalance completes its join — and prints the checkers' verdict and
the run directory (``OUT/runs/...``).
"""

from __future__ import annotations

import json
import shutil
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from confluent_kafka import Consumer, Producer

from chaos.cluster.admin import retry
from chaos.cluster.local import LocalCluster
from chaos.model.cluster import ClusterSpec

Say = Callable[[str], None]


def produce(bootstrap: str, topic: str, n: int, timeout: float = 30.0) -> dict[int, list[int]]:
    """Produce ``n`` records with acks=all + idempotence; returns acked offsets per partition."""
    acked: dict[int, list[int]] = {}

    def on_delivery(err, msg):
        if err is None:
            acked.setdefault(msg.partition(), []).append(msg.offset())

    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                  "linger.ms": 5, "log_level": 0})
    for i in range(n):
        p.produce(topic, key=str(i).encode(), value=f"demo-{i}".encode(), on_delivery=on_delivery)
        p.poll(0)
    p.flush(timeout)
    return acked


def consume_all(bootstrap: str, topic: str, expected: int, timeout: float = 30.0) -> int:
    """Read ``topic`` from the beginning with a fresh group until ``expected`` records or timeout."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"demo-{uuid.uuid4().hex[:6]}",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False, "log_level": 0})
    c.subscribe([topic])
    seen = 0
    deadline = time.monotonic() + timeout
    try:
        while seen < expected and time.monotonic() < deadline:
            for msg in c.consume(500, 0.5):
                if msg.error() is None:
                    seen += 1
    finally:
        c.close()
    return seen


HEADLINE = "coordinator-kill-completing-eager"


def run_headline(out: Path, say: Say = print, seed: int = 1) -> int:
    """Run the headline experiment once; print its verdict; return the run's exit code."""

    from chaos.checkers.command import render
    from chaos.experiment import load_experiment
    from chaos.runner import run_experiments

    exp = load_experiment(HEADLINE)  # the catalogue: ./experiments/ or the packaged copy
    say(f"\nrunning experiment {exp.name}: {exp.description.splitlines()[0]}")
    [oc] = run_experiments([exp], out / "runs", runs=1, seed=seed)
    run_dir = Path(oc.run_dir)
    if oc.error:
        say(f"run failed on infrastructure: {oc.error}")
        return oc.exit_code
    kill = next((f for f in oc.faults if f["type"] == "kill"), None)
    if kill and kill.get("fired"):
        # the whole log line: a cut one ("...zed group ...") hides which transition triggered the kill
        signal = " ".join((kill.get("trigger_signal") or "").split())
        say(f"killed {kill['nodes'][0]} {kill['trigger_to_effect_ms']} ms after the coordinator logged:")
        say(f"  {signal}")
        say(f"landed in {kill['intended_state']}: {kill['landed']} ({kill['landing_evidence']})")
    from chaos.checkers.judge import load_run
    from chaos.checkers.registry import run_checkers
    history = load_run(run_dir)
    say(render(run_dir, history, run_checkers(history, exp.checkers.names())))
    say(f"run directory: {run_dir} (history.jsonl, checks.json, faults.json, logs/); re-judge: chaos check {run_dir}")
    return oc.exit_code


def run_demo(out: Path, say: Say = print, records: int = 3000) -> dict:
    out.mkdir(parents=True, exist_ok=True)
    summary: dict = {"records": records}
    t0 = time.monotonic()
    with LocalCluster(ClusterSpec(brokers=3, zookeepers=1, lanes=2)) as cluster:
        summary["startup_seconds"] = round(cluster.startup_seconds or 0, 2)
        say(f"cluster up in {summary['startup_seconds']} s: ZooKeeper + 3 brokers + Toxiproxy "
            f"({len(cluster.link_names())} proxied links)")
        say(f"  controller: {cluster.controller()}   clients bootstrap via proxies: {cluster.bootstrap('lane0')}")
        topic = "demo"
        cluster.admin.create_topic(topic, 3, 3)
        lane = cluster.bootstrap("lane0")
        acked = produce(lane, topic, records)
        n_acked = sum(len(v) for v in acked.values())
        consumed = consume_all(lane, topic, n_acked)
        say(f"produced {n_acked} records (acks=all) and consumed {consumed} through lane0's proxies")
        summary.update(produced=n_acked, consumed=consumed)

        victim = cluster.leader_of(topic, 0)
        assert victim is not None  # the topic was created and produced to just above
        link = f"lane0.{victim}"
        cluster.link_down(link)
        cut = cluster.produce_probe(topic, lane="lane0", timeout=3.0, partition=0)
        cluster.link_up(link)
        say(f"link {link} down: produce to {topic}-0 (led by {victim}) acked? {cut is not None} "
            f"(proxies really carry the traffic); link up again")
        summary["produce_while_link_down_acked"] = cut is not None

        leaders_before = {p: cluster.leader_of(topic, p) for p in range(3)}
        say(f"leaders before: {leaders_before}")
        say(f"SIGKILL {victim} (leader of {topic}-0) ...")
        cluster.kill(victim)
        t_kill = time.monotonic()
        new_leader = retry(lambda: (l if (l := cluster.leader_of(topic, 0)) not in (None, victim) else None),
                           time.monotonic() + 60, f"a new leader for {topic}-0")
        moved_after = time.monotonic() - t_kill
        leaders_after = {p: cluster.leader_of(topic, p) for p in range(3)}
        say(f"leadership of {topic}-0 moved {victim} -> {new_leader} in {moved_after:.2f} s; leaders now {leaders_after}")
        more = produce(lane, topic, 500)
        say(f"produced {sum(len(v) for v in more.values())} more records with {victim} dead (min.insync.replicas=2 holds)")
        cluster.restart(victim)
        cluster.wait_broker_registered(victim)
        say(f"restarted {victim}: registered again; controller {cluster.controller()}")
        summary.update(killed=victim, leaders_before=leaders_before, leaders_after=leaders_after,
                       new_leader=new_leader, leader_moved_seconds=round(moved_after, 2),
                       produced_while_down=sum(len(v) for v in more.values()))
        logs = out / "logs"
        shutil.rmtree(logs, ignore_errors=True)
        for node in cluster.status()["nodes"]:
            (logs).mkdir(exist_ok=True)
            shutil.copy(cluster.log_path(node), logs / f"{node}.log")
    summary["total_seconds"] = round(time.monotonic() - t0, 2)
    (out / "demo.json").write_text(json.dumps(summary, indent=2))
    say(f"torn down; everything stopped. Summary: {out / 'demo.json'}  node logs: {out / 'logs'}")
    return summary
