"""Topology faults: the workload topic grows (``add_partitions``); every broker or member restarted in
turn (``rolling_restart``)."""

from __future__ import annotations

import signal
import time

from chaos.errors import InfrastructureError
from chaos.model.faults.topology import AddPartitions, RollingRestart
from chaos.nemesis.evidence import Active
from chaos.nemesis.kinds import Injection, register
from chaos.nemesis.nodes import Nodes


def add_partitions(inj: Injection[AddPartitions]) -> list[Active]:
    """CreatePartitions to ``partitions`` in total (permanent: Kafka cannot shrink a topic)."""
    run, total = inj.run, inj.spec.partitions
    admin = run.admin
    if admin is None:
        raise InfrastructureError(f"{inj.fault_id}: the workload has not started (no admin client)")
    before = len(admin.partitions(run.topic))
    admin.create_partitions(run.topic, total)

    def grown():
        # CreatePartitions is answered by the controller; brokers' metadata follows shortly after
        deadline = time.monotonic() + 15
        while True:
            try:
                n = len(admin.partitions(run.topic, wait=False))
            except Exception:  # noqa: BLE001 - metadata not there yet
                n = -1
            if n == total or time.monotonic() >= deadline:
                return n == total, f"{run.topic}: {before} -> {n} partitions"
            time.sleep(0.2)

    return [Active([run.topic], lambda: None, grown, grown)]


def rolling_restart(inj: Injection[RollingRestart]) -> list[Active]:
    """Each node in turn: SIGTERM (controlled shutdown / LeaveGroup), start again, wait until back;
    ``duration_s`` spread over the nodes. Stops early when the chaos phase ends."""
    n = Nodes(inj.cluster, inj.run)
    nodes, gap_s = inj.nodes, inj.spec.duration_s / max(1, len(inj.nodes))
    done = []
    for node in nodes:
        if inj.cancel.is_set():
            break
        if n.is_member(node):
            inj.run.kill_member(node, signal.SIGTERM)
            inj.run.start_member(node)
        else:
            inj.cluster.kill(node, signal.SIGTERM)
            inj.cluster.start_node(node)
            inj.cluster.wait_broker_registered(node, timeout=60)
        done.append(node)
        inj.cancel.wait(gap_s)

    def all_back():
        back = [x for x in nodes if n.alive(x)]
        return len(back) == len(nodes), f"restarted in turn: {done}; running: {back}"

    def start_all() -> None:
        for x in nodes:
            n.start(x)

    return [Active(done, start_all, all_back, all_back)]


register(AddPartitions, add_partitions)
register(RollingRestart, rolling_restart)
