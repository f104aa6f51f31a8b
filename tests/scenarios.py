"""Scenarios shared by the local-backend and docker-backend tests (the same check on either cluster)."""

from __future__ import annotations

import time
import uuid

from chaos.cluster.admin import retry
from chaos.nemesis.faults import Primitives


def isr_shrinks_under_a_pairwise_partition(cluster) -> None:
    """Cut a partition's leader from one follower: the leader's own log says it shrank the ISR; heal: it grows back.

    Leader and peer are the two brokers that are not the controller, so the leader's ISR change
    (AlterPartition, KIP-497) reaches the controller; the leader is the preferred replica, so no
    preferred-leader election moves leadership away during the check.
    """
    controller = cluster.controller()
    leader, peer = [b for b in ("broker-1", "broker-2", "broker-3") if b != controller]
    ids = {b: int(b.split("-")[1]) for b in ("broker-1", "broker-2", "broker-3")}
    topic = f"part-{uuid.uuid4().hex[:6]}"
    cluster.admin._call(lambda c: c.create_topics(
        {topic: {"assignments": {0: [ids[leader], ids[peer], ids[controller]]}}}))
    retry(lambda: True if all(p["leader"] == ids[leader] and len(p["isr"]) == 3
                              for p in cluster.admin.partitions(topic)) else None,
          time.monotonic() + 30, "full ISR led by the preferred replica")
    log = cluster.log_path(leader)
    start = log.stat().st_size

    def logged(text):
        with log.open(errors="replace") as f:
            f.seek(start)
            return True if any(text in line for line in f) else None

    active = Primitives(cluster, None).partition(leader, [peer])
    try:
        assert active.verify_effect()[0], active.verify_effect()
        # the peer cannot fetch from the leader: after replica.lag.time.max.ms (5 s) the leader drops
        # it from the ISR, and says so in its own log
        try:
            retry(lambda: logged(f"[Partition {topic}-0 broker={ids[leader]}] Shrinking ISR from"),
                  time.monotonic() + 40, f"{leader} to shrink the ISR of {topic}-0")
        except Exception as exc:
            raise AssertionError(f"{exc}; leader {leader}, peer {peer}, controller {controller}; rules "
                                 f"{cluster.partition_rules()}; metadata {cluster.admin.partitions(topic)}; "
                                 f"{_counters(cluster, leader)}") from None
        assert f"Out of sync replicas: (brokerId: {ids[peer]}" in log.read_text(errors="replace")[start:]
        # clients are not cut: the shrunk ISR is acknowledged and a produce with acks=all succeeds
        assert cluster.produce_probe(topic, partition=0, timeout=20) is not None
    finally:
        active.heal()
    assert cluster.partition_rules() == []
    retry(lambda: True if ids[peer] in cluster.admin.partitions(topic)[0]["isr"] else None,
          time.monotonic() + 60, f"{peer} back in the ISR")


def _counters(cluster, node: str) -> str:
    """Packet counters of the DROP rules (diagnostics): inside a docker broker's container, or the host's
    chains of this cluster on the local backend (did the cut match any packet at all?)."""
    if not hasattr(cluster, "_container"):
        import subprocess

        chains = {r.split()[1] for r in cluster.partition_rules() if r.startswith("-A ")}
        out = [subprocess.run(["iptables", "-w", "-L", c, "-v", "-n", "-x"], capture_output=True, text=True).stdout
               for c in sorted(chains)]
        return " | ".join(" ".join(o.split()) for o in out)[:1500]
    try:
        return cluster._container(node).exec_run(["iptables", "-L", "-v", "-n"]).output.decode()[:1500]
    except Exception as exc:  # noqa: BLE001 - diagnostics only
        return f"(no counters: {exc})"
