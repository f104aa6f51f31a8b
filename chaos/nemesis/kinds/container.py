"""Container-network faults (docker backend, bridge network): ``docker network disconnect`` of a node.

Heal: connected again with its own address. Evidence: the engine's view of
the network and whether the node's port answers on its address.
"""

from __future__ import annotations

import time

from chaos.model.faults.container import Disconnect
from chaos.nemesis.evidence import Active, port_open
from chaos.nemesis.kinds import Injection, register


def disconnect(cluster, node: str) -> tuple[Active, int]:
    """Take ``node`` off its network; returns the active fault and when it took effect."""
    topo = cluster.topology
    port = topo.broker(node).internal if node.startswith("broker-") else next(
        z.client for z in topo.zookeepers if z.node == node)
    addr = topo.address(node)
    cluster.disconnect(node)
    effect_ns = time.monotonic_ns()

    def off():
        attached, reachable = cluster.is_connected(node), port_open(port, addr)
        return not attached and not reachable, (f"{node}: on the network per the engine={attached}, "
                                                f"{addr}:{port} reachable={reachable}")

    def back():
        attached = cluster.is_connected(node)
        reachable = port_open(port, addr) if cluster.is_running(node) else None
        return attached and reachable is not False, (f"{node}: on the network per the engine={attached}, "
                                                     f"{addr}:{port} reachable={reachable}")

    return Active([node], lambda: cluster.reconnect(node), off, back), effect_ns


def _inject(inj: Injection[Disconnect]) -> list[Active]:
    out = []
    for node in inj.nodes:
        active, inj.effect_ns = disconnect(inj.cluster, node)
        out.append(active)
    return out


register(Disconnect, _inject)
